//! A device simulation's part of a cloud split between ranks: the host's [`Halo`] (which own
//! particles each rank reads, which local particles are the halo) with its index lists on the
//! device, and the refresh of the halo's records after a pass.
//!
//! A refresh gathers the records the other ranks read into one packed buffer on the device
//! (one unit per 32-bit word), brings that buffer to the host, exchanges it with the bordering
//! ranks ([`Halo::exchange_packed`]), takes the halo's records back to the device and scatters
//! them to their local particles. Only the records that cross a rank boundary travel; the rest
//! of the array stays on the device. Records are copied word for word: the halo's records are
//! their owners' bits, whatever the element type.

use std::sync::Arc;

use cubecl::prelude::*;
use mote_cloud::halo::Halo;
use mote_core::comm::Comm;

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::launch::launch;

/// The place in `data` of word `t` of a packed buffer of records: word `e` of component `c`
/// of the `k`-th listed particle (`t = (k * width + c) * per + e`) lies at `(rows[k] *
/// row_stride + c * column_stride) * per + e`; `shape` holds `count, width, per, row_stride,
/// column_stride`.
#[cube]
fn record_word(rows: &Array<u32>, shape: &Array<u32>, t: u32) -> u32 {
    let width = shape[1];
    let per = shape[2];
    let e = t % per;
    let c = (t / per) % width;
    let k = t / (per * width);
    (rows[k as usize] * shape[3] + c * shape[4]) * per + e
}

/// Packed words of the records `shape` describes (see [`record_word`]).
#[cube]
fn packed_words(shape: &Array<u32>) -> u32 {
    shape[0] * shape[1] * shape[2]
}

/// The records of the `rows` particles of `data`, packed (see [`record_word`]).
#[cube(launch_unchecked)]
fn gather_words_kernel(
    data: &Array<u32>,
    rows: &Array<u32>,
    packed: &mut Array<u32>,
    shape: &Array<u32>,
) {
    let t = ABSOLUTE_POS as u32;
    if t < packed_words(shape) {
        packed[t as usize] = data[record_word(rows, shape, t) as usize];
    }
}

/// The inverse of [`gather_words_kernel`]: each packed word to its place in `data`.
#[cube(launch_unchecked)]
fn scatter_words_kernel(
    packed: &Array<u32>,
    rows: &Array<u32>,
    data: &mut Array<u32>,
    shape: &Array<u32>,
) {
    let t = ABSOLUTE_POS as u32;
    if t < packed_words(shape) {
        data[record_word(rows, shape, t) as usize] = packed[t as usize];
    }
}

/// `values[i] = 0` for the local particles `i` outside `own[0]..own[1]` (of `n`).
#[cube(launch_unchecked)]
fn zero_outside_kernel<F: Float>(values: &mut Array<F>, n: u32, own_start: u32, own_end: u32) {
    let i = ABSOLUTE_POS as u32;
    if i < n && (i < own_start || i >= own_end) {
        values[i as usize] = F::new(0.0);
    }
}

/// `result`, agreed over the ranks of `comm` where there is one (collective there): a failure
/// on any rank is every rank's error (the lowest failing rank's message, naming it).
pub(crate) fn agreed<T>(
    comm: Option<&dyn Comm>,
    result: Result<T, GpuError>,
) -> Result<T, GpuError> {
    let Some(comm) = comm else {
        return result;
    };
    let failure = result.as_ref().err().map(|e| e.to_string());
    match mote_core::comm::agree(comm, failure.as_deref().map(|m| (0, m))) {
        Ok(()) => result,
        Err(f) => Err(GpuError::Ranks(f.to_string())),
    }
}

/// A rank's [`Halo`] with its sent and received particles' local indices on the device.
pub struct DeviceHalo {
    halo: Arc<Halo>,
    sent: DeviceArray<u32>,
    received: DeviceArray<u32>,
}

impl DeviceHalo {
    /// `halo`'s index lists, uploaded to `gpu`.
    pub fn new(gpu: &Gpu, halo: Arc<Halo>) -> Self {
        let sent = gpu.upload("halo_sent", halo.sent());
        let received = gpu.upload("halo_received", halo.received());
        Self {
            halo,
            sent,
            received,
        }
    }

    /// The host's halo (ownership, the one-process indices, reductions over the ranks).
    pub fn halo(&self) -> &Halo {
        &self.halo
    }

    /// Zeroes the halo particles' entries of `values` (one per local particle): a maximum of
    /// non-negative values over the own particles only.
    pub fn own_only<F: GpuFloat>(
        &self,
        gpu: &Gpu,
        values: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        let n = values.len();
        let own = self.halo.own();
        gpu.check(values, n)?;
        // Each unit writes its own entry below the length.
        launch!(
            gpu,
            n,
            zero_outside_kernel::<F>(values.arg(), n as u32, own.start as u32, own.end as u32)
        );
        Ok(())
    }

    /// Refreshes the halo's records of `data`, `width` values per local particle (particle
    /// `i`'s record at `i * width..`), from their owners. Collective.
    pub fn exchange_rows<T: CubeElement>(
        &self,
        gpu: &Gpu,
        data: &DeviceArray<T>,
        width: usize,
    ) -> Result<(), GpuError> {
        self.exchange(gpu, data, width, [width, 1])
    }

    /// Refreshes the halo's entries of `data`, `columns` arrays of the `n` local particles end
    /// to end (particle `i`'s value of column `c` at `c * n + i`: a state's variables), from
    /// their owners. Collective.
    pub fn exchange_columns<T: CubeElement>(
        &self,
        gpu: &Gpu,
        data: &DeviceArray<T>,
        n: usize,
        columns: usize,
    ) -> Result<(), GpuError> {
        self.exchange(gpu, data, columns, [1, n])
    }

    /// The exchange both forms share: component `c` of particle `i` at `i * strides[0] + c *
    /// strides[1]`.
    fn exchange<T: CubeElement>(
        &self,
        gpu: &Gpu,
        data: &DeviceArray<T>,
        width: usize,
        strides: [usize; 2],
    ) -> Result<(), GpuError> {
        if self.halo.comm().size() == 1 || width == 0 {
            return Ok(());
        }
        let per = std::mem::size_of::<T>() / 4;
        let words = data.len() * per;
        if words > u32::MAX as usize {
            return Err(GpuError::Length {
                array: data.name().to_string(),
                len: data.len(),
                expected: u32::MAX as usize / per,
            });
        }
        let shape = |count: usize| {
            let s = [count, width, per, strides[0], strides[1]].map(|x| x as u32);
            gpu.upload("halo_shape", &s)
        };
        let count = self.sent.len();
        let send = if count > 0 {
            let packed = gpu.output::<u32>("halo_send", count * width * per);
            let shape = shape(count);
            // One unit per packed word; every index read is below the array's words (the
            // sent particles are local particles, the components below `width`).
            launch!(
                gpu,
                count * width * per,
                gather_words_kernel(data.words_arg(), self.sent.arg(), packed.arg(), shape.arg())
            );
            gpu.download(&packed)?
        } else {
            Vec::new()
        };
        let received = self.halo.exchange_packed(&send, width * per);
        let count = self.received.len();
        if count > 0 {
            let packed = gpu.upload("halo_received_records", &received);
            let shape = shape(count);
            // One unit per packed word, each writing its own word of a halo particle's record.
            launch!(
                gpu,
                count * width * per,
                scatter_words_kernel(
                    packed.arg(),
                    self.received.arg(),
                    data.words_arg(),
                    shape.arg()
                )
            );
        }
        Ok(())
    }
}
