//! The memory budget on a device: the host's estimate, reservation and `CapacityError`, against
//! the device's memory.
//!
//! Device containers ([`DeviceCloud`](crate::DeviceCloud), [`DeviceNeighbours`](crate::DeviceNeighbours),
//! [`GpuNeighbourSearch`](crate::GpuNeighbourSearch)) list their [`DeviceArray`](crate::DeviceArray)s
//! through [`Budgeted`] exactly as host containers list their buffers, so
//! [`memory_estimate`](mote_core::memory::memory_estimate) prices a device run and [`Gpu::reserve`]
//! sizes it once: every array moves (a device-side copy) to an allocation of its reserved
//! capacity and is frozen. Slot-major neighbour lists hold `particles x maximum count` slots, so
//! their reservation is priced at the padded count (`ReserveOptions::slots_per_particle`).
//! Because a reservation moves data, callers compare a fingerprint of the device arrays with the
//! host data afterwards ([`Gpu::verify`]) and refuse to run on a mismatch.

use mote_core::memory::{Reservation, ReserveOptions, reserve};
use mote_core::{Budgeted, CapacityError, CapacityUnit};

use crate::device::Gpu;
use crate::error::GpuError;

impl Gpu {
    /// The byte limit device reservations are made against: `limit` where given (it cannot
    /// exceed the device's memory where that is known), else the device's memory; `None` where
    /// neither is known (the wgpu runtime does not report it).
    pub fn memory_limit(&self, limit: Option<u64>) -> Result<Option<u64>, GpuError> {
        match (limit, self.memory().total) {
            (Some(l), Some(total)) if l > total => Err(CapacityError {
                what: format!("device memory limit on {self} (the device has {total} bytes)"),
                requested: l,
                available: total,
                unit: CapacityUnit::Bytes,
            }
            .into()),
            (Some(l), _) => Ok(Some(l)),
            (None, total) => Ok(total),
        }
    }

    /// Sizes every device array of `parts` once, to the largest particle count that fits
    /// [`Gpu::memory_limit`]`(limit)` less the tolerance, and freezes them (see
    /// [`reserve`]). Returns `None`, changing nothing, where no limit is known. Fails with
    /// [`GpuError::Capacity`], and changes no capacity, when not even the current counts fit.
    ///
    /// Arrays keep their contents (moved on the device); check them with [`Gpu::verify`] before
    /// a run starts on them.
    pub fn reserve(
        &self,
        parts: &mut [&mut dyn Budgeted],
        limit: Option<u64>,
        options: ReserveOptions,
    ) -> Result<Option<Reservation>, GpuError> {
        let Some(limit) = self.memory_limit(limit)? else {
            return Ok(None);
        };
        let r = reserve(parts, limit, options)?;
        self.sync()?;
        Ok(Some(r))
    }
}
