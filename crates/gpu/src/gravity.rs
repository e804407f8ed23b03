//! Direct-summation gravity on the device: the sources are tiled through shared memory, one
//! unit per target particle.
//!
//! Each workgroup of `T` units (the device's workgroup size) loads `T` sources into shared
//! memory per round, all units wait, each accumulates the tile into its own target, and so on
//! over the source array: every source is read from device memory once per workgroup instead of
//! once per target. Every unit takes part in every barrier (units past the end clamp their
//! indices and do not store). The pair `j == i` and the padding past the last source are masked
//! with `select`, so the self-interaction is exactly zero as in the CPU reference, with or
//! without softening.
//!
//! The kernels compute a contiguous range of targets (`first` and the output's length) against
//! every source; a target's sum runs over the sources in the same tiles and order whatever the
//! range, so on MPI ranks ([`mote_core::comm`]) each rank's device computes its own range and
//! the ranges are gathered, bitwise equal to one device computing all.

use std::sync::Arc;
use std::time::Instant;

use cubecl::prelude::*;
use mote_core::comm::{self, Comm};
use mote_core::{Precision, Real, Vec3Span, Vec3SpanMut};
use mote_gravity::{ForceSolver, NonFiniteWatch, Softening, SolverInfo};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::launch::launch;

/// A float the kernels compute in (`f32`, `f64`).
pub trait GpuFloat: Float + CubeElement + ScalarArgSettings + Real {}
impl GpuFloat for f32 {}
impl GpuFloat for f64 {}

// Kernel bodies: CubeCL translates operators, not std methods such as `div_ceil`.
#[allow(clippy::manual_div_ceil)]
#[cube(launch_unchecked)]
fn accelerations_kernel<F: Float + ScalarArgSettings>(
    x: &Array<F>,
    y: &Array<F>,
    z: &Array<F>,
    m: &Array<F>,
    ax: &mut Array<F>,
    ay: &mut Array<F>,
    az: &mut Array<F>,
    eps2: F,
    first: u32,
    #[comptime] tile: usize,
) {
    let n = x.len();
    let i = first as usize + ABSOLUTE_POS;
    let unit = UNIT_POS as usize;
    let ii = select(i < n, i, n - 1);
    let (xi, yi, zi) = (x[ii], y[ii], z[ii]);
    let mut sx = SharedMemory::<F>::new(tile);
    let mut sy = SharedMemory::<F>::new(tile);
    let mut sz = SharedMemory::<F>::new(tile);
    let mut sm = SharedMemory::<F>::new(tile);
    let mut acc_x = F::new(0.0);
    let mut acc_y = F::new(0.0);
    let mut acc_z = F::new(0.0);
    let rounds = (n + tile - 1) / tile;
    for round in 0..rounds {
        let j = round * tile + unit;
        let jj = select(j < n, j, n - 1);
        sx[unit] = x[jj];
        sy[unit] = y[jj];
        sz[unit] = z[jj];
        sm[unit] = m[jj];
        sync_cube();
        for k in 0..tile {
            let source = round * tile + k;
            let dx = sx[k] - xi;
            let dy = sy[k] - yi;
            let dz = sz[k] - zi;
            let r2 = dx * dx + dy * dy + dz * dz + eps2;
            let inv = F::new(1.0) / F::sqrt(r2);
            let s = select(
                source < n && source != i,
                sm[k] * (inv * inv * inv),
                F::new(0.0),
            );
            acc_x += dx * s;
            acc_y += dy * s;
            acc_z += dz * s;
        }
        sync_cube();
    }
    if ABSOLUTE_POS < ax.len() {
        ax[ABSOLUTE_POS] = acc_x;
        ay[ABSOLUTE_POS] = acc_y;
        az[ABSOLUTE_POS] = acc_z;
    }
}

#[allow(clippy::manual_div_ceil)]
#[cube(launch_unchecked)]
fn potentials_kernel<F: Float + ScalarArgSettings>(
    x: &Array<F>,
    y: &Array<F>,
    z: &Array<F>,
    m: &Array<F>,
    phi: &mut Array<F>,
    eps2: F,
    first: u32,
    #[comptime] tile: usize,
) {
    let n = x.len();
    let i = first as usize + ABSOLUTE_POS;
    let unit = UNIT_POS as usize;
    let ii = select(i < n, i, n - 1);
    let (xi, yi, zi) = (x[ii], y[ii], z[ii]);
    let mut sx = SharedMemory::<F>::new(tile);
    let mut sy = SharedMemory::<F>::new(tile);
    let mut sz = SharedMemory::<F>::new(tile);
    let mut sm = SharedMemory::<F>::new(tile);
    let mut sum = F::new(0.0);
    let rounds = (n + tile - 1) / tile;
    for round in 0..rounds {
        let j = round * tile + unit;
        let jj = select(j < n, j, n - 1);
        sx[unit] = x[jj];
        sy[unit] = y[jj];
        sz[unit] = z[jj];
        sm[unit] = m[jj];
        sync_cube();
        for k in 0..tile {
            let source = round * tile + k;
            let dx = sx[k] - xi;
            let dy = sy[k] - yi;
            let dz = sz[k] - zi;
            let r2 = dx * dx + dy * dy + dz * dz + eps2;
            let s = select(source < n && source != i, sm[k] / F::sqrt(r2), F::new(0.0));
            sum -= s;
        }
        sync_cube();
    }
    if ABSOLUTE_POS < phi.len() {
        phi[ABSOLUTE_POS] = sum;
    }
}

/// Wall seconds spent in transfers and kernels since the last [`GpuDirectSolver::take_seconds`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TransferSeconds {
    /// Host to device copies.
    pub upload: f64,
    /// Kernels, to completion.
    pub kernel: f64,
    /// Device to host copies.
    pub download: f64,
}

/// Direct summation on a device, as a [`ForceSolver`]: each evaluation uploads positions and
/// masses, runs the tiled kernel and downloads the accelerations (the transfer times are kept
/// apart, see [`GpuDirectSolver::take_seconds`]). [`GpuDirectSolver::accelerations_on_device`]
/// is the transfer-free entry point for device-resident state.
///
/// On several ranks ([`GpuDirectSolver::with_comm`]; the process's world by default) each
/// rank's device computes an equal contiguous range of targets against every source and the
/// ranges are gathered: the results are one device's, bit for bit.
pub struct GpuDirectSolver {
    gpu: Gpu,
    softening: Softening,
    interactions: u64,
    seconds: TransferSeconds,
    comm: Arc<dyn Comm>,
    watch: NonFiniteWatch,
}

/// The device state of one evaluation.
struct Sources<F> {
    x: DeviceArray<F>,
    y: DeviceArray<F>,
    z: DeviceArray<F>,
    m: DeviceArray<F>,
}

impl GpuDirectSolver {
    /// A solver on `gpu` for runs in `precision` (an error where the device cannot compute in
    /// it).
    pub fn new(gpu: Gpu, softening: Softening, precision: Precision) -> Result<Self, GpuError> {
        gpu.check_precision(precision)?;
        Ok(Self {
            gpu,
            softening,
            interactions: 0,
            seconds: TransferSeconds::default(),
            comm: comm::world(),
            watch: NonFiniteWatch::default(),
        })
    }

    /// The same solver on the ranks of `comm` instead of the process's world.
    pub fn with_comm(mut self, comm: Arc<dyn Comm>) -> Self {
        self.comm = comm;
        self
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The device, to change its settings.
    pub fn gpu_mut(&mut self) -> &mut Gpu {
        &mut self.gpu
    }

    /// Transfer and kernel seconds since the last call, and resets them.
    pub fn take_seconds(&mut self) -> TransferSeconds {
        std::mem::take(&mut self.seconds)
    }

    /// One unit per target of a range of `count`, workgroups of the device's size (which is
    /// also the source tile).
    fn grid(&self, count: usize) -> (CubeCount, CubeDim, usize) {
        let tile = self.gpu.workgroup();
        (
            CubeCount::Static((count as u32).div_ceil(tile), 1, 1),
            CubeDim::new_1d(tile),
            tile as usize,
        )
    }

    fn eps2<F: GpuFloat>(&self) -> F {
        self.softening.epsilon2::<F>()
    }

    /// Accelerations of the sources `x, y, z, m` into `ax, ay, az`, all on this solver's
    /// device (every array is checked to live there and to have the same length).
    #[allow(clippy::too_many_arguments)]
    pub fn accelerations_on_device<F: GpuFloat>(
        &mut self,
        x: &DeviceArray<F>,
        y: &DeviceArray<F>,
        z: &DeviceArray<F>,
        m: &DeviceArray<F>,
        ax: &DeviceArray<F>,
        ay: &DeviceArray<F>,
        az: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        let n = x.len();
        self.range_on_device(&Sources4 { x, y, z, m }, [ax, ay, az], 0)?;
        self.interactions += (n as u64) * (n as u64).saturating_sub(1);
        Ok(())
    }

    /// The accelerations of the targets `first..first + ax.len()` of the sources `s`.
    fn range_on_device<F: GpuFloat>(
        &self,
        s: &Sources4<'_, F>,
        [ax, ay, az]: [&DeviceArray<F>; 3],
        first: usize,
    ) -> Result<(), GpuError> {
        let n = s.x.len();
        let count = ax.len();
        for a in [s.x, s.y, s.z, s.m] {
            self.gpu.check(a, n)?;
        }
        for a in [ax, ay, az] {
            self.gpu.check(a, count)?;
        }
        assert!(first + count <= n, "targets past the sources");
        self.gpu.check_precision(F::PRECISION)?;
        if count == 0 {
            return Ok(());
        }
        let (grid, dim, tile) = self.grid(count);
        // The sources hold n elements and the outputs `count` (checked); the kernel reads below
        // n and writes only its own target's entry below `count`.
        launch!(
            self.gpu,
            @grid (grid, dim),
            accelerations_kernel::<F>(
                s.x.arg(),
                s.y.arg(),
                s.z.arg(),
                s.m.arg(),
                ax.arg(),
                ay.arg(),
                az.arg(),
                self.eps2::<F>(),
                first as u32,
                tile
            )
        );
        Ok(())
    }

    /// Per-particle potentials `phi_i = -sum_(j != i) m_j / sqrt(r_ij^2 + eps^2)` of the
    /// targets `first..first + phi.len()`, on the device.
    fn potentials_on_device<F: GpuFloat>(
        &self,
        s: &Sources<F>,
        phi: &DeviceArray<F>,
        first: usize,
    ) -> Result<(), GpuError> {
        let n = s.x.len();
        let count = phi.len();
        for a in [&s.x, &s.y, &s.z, &s.m] {
            self.gpu.check(a, n)?;
        }
        self.gpu.check(phi, count)?;
        assert!(first + count <= n, "targets past the sources");
        if count == 0 {
            return Ok(());
        }
        let (grid, dim, tile) = self.grid(count);
        // As for the accelerations.
        launch!(
            self.gpu,
            @grid (grid, dim),
            potentials_kernel::<F>(
                s.x.arg(),
                s.y.arg(),
                s.z.arg(),
                s.m.arg(),
                phi.arg(),
                self.eps2::<F>(),
                first as u32,
                tile
            )
        );
        Ok(())
    }

    fn upload<F: GpuFloat, R: Real>(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
    ) -> Sources<F> {
        let clock = Instant::now();
        let (x, y, z) = positions.components();
        let cast = |v: &[R]| -> Vec<F> { v.iter().map(|&a| F::cast(a.as_f64())).collect() };
        let s = Sources {
            x: self.gpu.upload("x", &cast(x)),
            y: self.gpu.upload("y", &cast(y)),
            z: self.gpu.upload("z", &cast(z)),
            m: self.gpu.upload("mass", &cast(masses)),
        };
        self.seconds.upload += clock.elapsed().as_secs_f64();
        s
    }

    fn host_accelerations<F: GpuFloat, R: Real>(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        acc: Vec3SpanMut<'_, R>,
    ) -> Result<(), GpuError> {
        let n = masses.len();
        let ranges = comm::even_ranges(n, self.comm.size());
        let mine = ranges[self.comm.rank()].clone();
        let s = self.upload::<F, R>(positions, masses);
        let out: [DeviceArray<F>; 3] = [
            self.gpu.output("ax", mine.len()),
            self.gpu.output("ay", mine.len()),
            self.gpu.output("az", mine.len()),
        ];
        let clock = Instant::now();
        let sources = Sources4 {
            x: &s.x,
            y: &s.y,
            z: &s.z,
            m: &s.m,
        };
        self.range_on_device(&sources, [&out[0], &out[1], &out[2]], mine.start)?;
        self.gpu.sync()?;
        self.seconds.kernel += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (ax, ay, az) = acc.components_mut();
        for (host, device) in [&mut *ax, &mut *ay, &mut *az].into_iter().zip(&out) {
            for (h, d) in host[mine.clone()]
                .iter_mut()
                .zip(self.gpu.download(device)?)
            {
                *h = R::cast(d.as_f64());
            }
        }
        self.seconds.download += clock.elapsed().as_secs_f64();
        self.watch.count();
        if self.comm.size() > 1 {
            let own = [&ax[mine.clone()], &ay[mine.clone()], &az[mine.clone()]];
            self.watch.look(own, |k| mine.start + k);
            let mut scratch = Vec::new();
            for host in [ax, ay, az] {
                comm::gather_parts(self.comm.as_ref(), host, &ranges, &mut scratch);
            }
        }
        self.interactions += (n as u64) * (n as u64).saturating_sub(1);
        Ok(())
    }

    fn host_potential<F: GpuFloat, R: Real>(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
    ) -> Result<f64, GpuError> {
        let n = masses.len();
        let ranges = comm::even_ranges(n, self.comm.size());
        let mine = ranges[self.comm.rank()].clone();
        let s = self.upload::<F, R>(positions, masses);
        let phi = self.gpu.output::<F>("potential", mine.len());
        self.potentials_on_device(&s, &phi, mine.start)?;
        self.gpu.sync()?;
        let mut all = vec![F::cast(0.0); n];
        all[mine].copy_from_slice(&self.gpu.download(&phi)?);
        comm::gather_parts(self.comm.as_ref(), &mut all, &ranges, &mut Vec::new());
        // Summed in index order on every rank: the same value on any number of ranks.
        Ok(0.5
            * masses
                .iter()
                .zip(&all)
                .map(|(m, p)| m.as_f64() * p.as_f64())
                .sum::<f64>())
    }
}

/// Borrowed source arrays (the device-resident entry point's, or an evaluation's).
struct Sources4<'a, F> {
    x: &'a DeviceArray<F>,
    y: &'a DeviceArray<F>,
    z: &'a DeviceArray<F>,
    m: &'a DeviceArray<F>,
}

impl SolverInfo for GpuDirectSolver {
    fn name(&self) -> String {
        format!("direct/gpu ({})", self.gpu.name())
    }

    fn softening(&self) -> Softening {
        self.softening
    }

    fn interactions(&self) -> u64 {
        self.interactions
    }
}

impl<R: Real> ForceSolver<R> for GpuDirectSolver {
    /// # Panics
    /// If the device fails (a lost device, a kernel that does not validate): the trait has no
    /// error path, and a run must not continue on stale accelerations.
    fn accelerations(&mut self, positions: Vec3Span<'_, R>, masses: &[R], acc: Vec3SpanMut<'_, R>) {
        let r = match R::PRECISION {
            Precision::F32 => self.host_accelerations::<f32, R>(positions, masses, acc),
            Precision::F64 => self.host_accelerations::<f64, R>(positions, masses, acc),
        };
        if let Err(e) = r {
            panic!("GPU force evaluation failed: {e}");
        }
    }

    fn potential_energy(&mut self, positions: Vec3Span<'_, R>, masses: &[R]) -> f64 {
        let r = match R::PRECISION {
            Precision::F32 => self.host_potential::<f32, R>(positions, masses),
            Precision::F64 => self.host_potential::<f64, R>(positions, masses),
        };
        r.unwrap_or_else(|e| panic!("GPU potential evaluation failed: {e}"))
    }

    fn first_non_finite(&self) -> Option<(u64, usize)> {
        self.watch.first()
    }
}
