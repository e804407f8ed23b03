//! Typed device launches: the argument bundles that recur across the meshless kernels as CubeCL
//! launch structs, each built on the host by one constructor that checks its arrays' residency
//! and lengths, and the one macro every meshless launch goes through.
//!
//! - [`Neighbours`]: a neighbour list as a kernel walks it (counts, starts, indices, layout, slot
//!   total, longest list), from [`DeviceNeighbours::checked`].
//! - [`Positions`]: the particle positions with the domain's lengths and periodic axes, for
//!   minimum-image offsets ([`offset`]), from [`Placed`].
//! - [`Reconstruction`]: the Taylor basis recursion of the MUSCL reconstruction.
//!
//! A kernel reads a bundle's fields by name (`list.indices[s]`), so an argument list names what
//! a pass needs instead of repeating five or six loose arrays in each of a dozen kernels.

use cubecl::prelude::*;

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::search::{DeviceCloud, DeviceLayout, DeviceNeighbours};

/// Launches a kernel over `n` units (the grid of [`crate::primitives::grid`] with the device's
/// workgroup) on whichever runtime `gpu` runs: `launch!(gpu, n, kernel::<F>(arg, ...))`, the
/// runtime type inferred from the client. The caller states the kernel's safety argument above
/// the launch: every kernel checks its unit index against its element count and writes only its
/// own entries, and the argument arrays have the lengths their constructors checked.
/// `launch!(gpu, @grid (count, cube), kernel(..))` takes the grid as given (tiled kernels).
macro_rules! launch {
    ($gpu:expr, @grid $grid:expr, $kernel:ident $(::<$($g:ty),+>)? ($($arg:expr),* $(,)?)) => {{
        let (count, cube) = $grid;
        $crate::device::with_client!(&$gpu.client, |client| {
            // SAFETY: stated by the caller (see the macro's documentation).
            unsafe {
                $kernel::launch_unchecked::<$($($g,)+)? _>(client, count, cube, $($arg),*)
            }
        })
    }};
    ($gpu:expr, $n:expr, $kernel:ident $(::<$($g:ty),+>)? ($($arg:expr),* $(,)?)) => {{
        let (count, cube) = $crate::primitives::grid($n, $gpu.workgroup());
        $crate::device::with_client!(&$gpu.client, |client| {
            // SAFETY: stated by the caller (see the macro's documentation).
            unsafe {
                $kernel::launch_unchecked::<$($($g,)+)? _>(client, count, cube, $($arg),*)
            }
        })
    }};
}
pub(crate) use launch;

/// A neighbour list as kernels read it: the `n` particles' counts, starts (CSR layout) and
/// indices, the layout, the slot total and the longest list (every unit runs that many slot
/// iterations, masking its own: the software driver's loop limits, see [`crate::mls`]).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Neighbours {
    /// Particles listed.
    pub n: u32,
    pub counts: Array<u32>,
    pub starts: Array<u32>,
    pub indices: Array<u32>,
    /// 1 for the slot-major layout (slot `k` of particle `i` at `k n + i`).
    pub slot_major: u32,
    /// The slot total: the row length of per-slot tables such as the MLS coefficients.
    pub slots: u32,
    /// The longest list.
    pub max_count: u32,
}

/// The first slot of particle `i` and the stride to its next (slot `k` at `base + k stride`).
#[cube]
pub(crate) fn slot_base(list: &Neighbours, i: usize) -> (usize, usize) {
    (
        select(list.slot_major == 1, i, list.starts[i] as usize),
        select(list.slot_major == 1, list.n as usize, 1usize),
    )
}

/// A neighbour list checked for a launch over its `n` particles (see
/// [`DeviceNeighbours::checked`]).
#[derive(Clone, Copy)]
pub(crate) struct ListArgs<'a> {
    list: &'a DeviceNeighbours,
    n: usize,
}

impl DeviceNeighbours {
    /// This list as the launch argument of kernels over `n` particles, its counts and starts
    /// checked to be on `gpu` with `n` and `n + 1` entries.
    pub(crate) fn checked(&self, gpu: &Gpu, n: usize) -> Result<ListArgs<'_>, GpuError> {
        gpu.check(self.counts(), n)?;
        gpu.check(self.starts(), n + 1)?;
        gpu.check(self.indices(), self.indices().len())?;
        Ok(ListArgs { list: self, n })
    }
}

impl ListArgs<'_> {
    /// The particles listed.
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// The slot total.
    pub(crate) fn slots(&self) -> usize {
        self.list.indices().len()
    }

    /// The launch argument.
    pub(crate) fn arg<Rt: Runtime>(&self) -> NeighboursLaunch<Rt> {
        let l = self.list;
        NeighboursLaunch::new(
            self.n as u32,
            l.counts().arg(),
            l.starts().arg(),
            l.indices().arg(),
            (l.layout() == DeviceLayout::SlotMajor) as u32,
            l.indices().len() as u32,
            l.max() as u32,
        )
    }
}

/// Particle positions (`y` and `z` stand in for the missing axes below three dimensions) with
/// the domain's `lengths` (then the half lengths) and `periodic` axes (1 each).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Positions<F: Float> {
    pub x: Array<F>,
    pub y: Array<F>,
    pub z: Array<F>,
    pub lengths: Array<F>,
    pub periodic: Array<u32>,
}

/// The minimum-image offset `x_j - x_i` along axis `d`.
#[cube]
pub(crate) fn offset<F: Float>(p: &Positions<F>, i: usize, j: usize, d: usize) -> F {
    let mut off = if d == 0 {
        p.x[j] - p.x[i]
    } else if d == 1 {
        p.y[j] - p.y[i]
    } else {
        p.z[j] - p.z[i]
    };
    if p.periodic[d] == 1 {
        if off > p.lengths[3 + d] {
            off -= p.lengths[d];
        } else if off < -p.lengths[3 + d] {
            off += p.lengths[d];
        }
    }
    off
}

/// A cloud's positions with the domain's geometry, checked for a launch (see
/// [`Positions`]).
#[derive(Clone, Copy)]
pub(crate) struct Placed<'a, F> {
    xyz: [&'a DeviceArray<F>; 3],
    lengths: &'a DeviceArray<F>,
    periodic: &'a DeviceArray<u32>,
}

impl<'a, F: GpuFloat> Placed<'a, F> {
    /// `cloud`'s positions with the domain's `lengths` (6 entries: lengths then half lengths)
    /// and `periodic` axes (3 entries), checked to be on `gpu` with those lengths.
    pub(crate) fn checked<const D: usize>(
        gpu: &Gpu,
        cloud: &'a DeviceCloud<F, D>,
        lengths: &'a DeviceArray<F>,
        periodic: &'a DeviceArray<u32>,
    ) -> Result<Self, GpuError> {
        let pos = cloud.positions();
        for p in pos {
            gpu.check(p, cloud.len())?;
        }
        gpu.check(lengths, 6)?;
        gpu.check(periodic, 3)?;
        Ok(Self {
            xyz: [&pos[0], &pos[1.min(D - 1)], &pos[2.min(D - 1)]],
            lengths,
            periodic,
        })
    }

    /// The launch argument.
    pub(crate) fn arg<Rt: Runtime>(&self) -> PositionsLaunch<F, Rt> {
        PositionsLaunch::new(
            self.xyz[0].arg(),
            self.xyz[1].arg(),
            self.xyz[2].arg(),
            self.lengths.arg(),
            self.periodic.arg(),
        )
    }
}

/// The Taylor basis of the MUSCL reconstruction as kernels evaluate it on an offset: per term
/// its `recursion` (`parent, axis`: [`crate::formula::basis::taylor_recursive`]) and `factor`
/// (`phi_a = phi_parent * delta_axis * factor_a`), the `parity` `(-1)^|a|` and the term count
/// of each interface order.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Reconstruction<F: Float> {
    pub recursion: Array<u32>,
    pub factor: Array<F>,
    pub parity: Array<F>,
    pub terms_for_order: Array<u32>,
}
