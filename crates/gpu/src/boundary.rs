//! Boundary conditions on the device: the built-in conditions ([`Dirichlet`], [`Outflow`],
//! [`SlipWall`]) applied to the boundary particles the host's [`Boundaries::prepare`] found.
//!
//! The host finds each boundary particle's condition, nearest interior neighbour, normal and
//! initial state once per neighbour search; those become device arrays, one entry per boundary
//! particle, and two kernels use them: [`DeviceBoundaries::apply`] (each boundary particle takes
//! its condition's state, after every stage, as the CPU's `constrain`) and
//! [`DeviceBoundaries::zero_slopes`] (boundary particles are not evolved). Each unit writes only
//! its own boundary particle's entries and reads an interior particle's, which no unit writes.
//! A condition that is host code (an [`Inflow`] closure, a user's implementation) is refused
//! with "not supported on the GPU backend".
//!
//! [`Dirichlet`]: mote_cloud::boundary::Dirichlet
//! [`Outflow`]: mote_cloud::boundary::Outflow
//! [`SlipWall`]: mote_cloud::boundary::SlipWall
//! [`Inflow`]: mote_cloud::boundary::Inflow

use cubecl::prelude::*;
use mote_cloud::boundary::{Boundaries, BuiltinCondition};

use crate::array::DeviceArray;
use crate::device::{Gpu, with_client};
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::primitives::grid;

const DIRICHLET: u32 = 0;
const OUTFLOW: u32 = 1;
const SLIP_WALL: u32 = 2;

/// Sets each boundary particle's variables (`u[v * n + i]`) from its condition: its initial
/// state, its interior neighbour's, or that with the normal momentum reversed.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn apply_kernel<F: Float>(
    u: &mut Array<F>,
    n: u32,
    count: u32,
    index: &Array<u32>,
    interior: &Array<u32>,
    kind: &Array<u32>,
    momentum: &Array<u32>,
    normal: &Array<F>,
    initial: &Array<F>,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) {
    let k = ABSOLUTE_POS;
    if k < count as usize {
        let nu = n as usize;
        let i = index[k] as usize;
        let j = interior[k] as usize;
        let code = kind[k];
        #[unroll]
        for v in 0..vars {
            u[v * nu + i] = select(code == DIRICHLET, initial[k * vars + v], u[v * nu + j]);
        }
        if code == SLIP_WALL {
            let first = momentum[k] as usize;
            let mut mn = F::new(0.0);
            #[unroll]
            for d in 0..dim {
                mn += u[(first + d) * nu + j] * normal[k * 3 + d];
            }
            #[unroll]
            for d in 0..dim {
                u[(first + d) * nu + i] =
                    u[(first + d) * nu + j] - F::new(2.0) * mn * normal[k * 3 + d];
            }
        }
    }
}

/// Zeroes each boundary particle's slope (`du[v * n + i]`).
#[cube(launch_unchecked)]
fn zero_kernel<F: Float>(
    du: &mut Array<F>,
    n: u32,
    count: u32,
    index: &Array<u32>,
    #[comptime] vars: usize,
) {
    let k = ABSOLUTE_POS;
    if k < count as usize {
        let i = index[k] as usize;
        #[unroll]
        for v in 0..vars {
            du[v * n as usize + i] = F::new(0.0);
        }
    }
}

/// The boundary particles of a cloud and their built-in conditions, on a device.
pub struct DeviceBoundaries<F> {
    particles: usize,
    variables: usize,
    dim: usize,
    /// One past the largest particle index the tables name (boundary or interior).
    extent: usize,
    index: DeviceArray<u32>,
    interior: DeviceArray<u32>,
    kind: DeviceArray<u32>,
    momentum: DeviceArray<u32>,
    /// Three components per boundary particle (unused ones 0).
    normal: DeviceArray<F>,
    /// `variables` per boundary particle.
    initial: DeviceArray<F>,
}

impl<F: GpuFloat> DeviceBoundaries<F> {
    /// The device version of `boundaries`, which [`Boundaries::prepare`] has prepared for the
    /// cloud; an error names a condition that is not built in, or a slip wall whose momentum
    /// components are not among the variables.
    pub fn new<const D: usize>(gpu: &Gpu, boundaries: &Boundaries<F, D>) -> Result<Self, GpuError> {
        let m = boundaries.variables();
        let nb = boundaries.len();
        let (mut index, mut interior, mut kind, mut momentum) = (
            Vec::with_capacity(nb),
            Vec::with_capacity(nb),
            Vec::with_capacity(nb),
            Vec::with_capacity(nb),
        );
        let mut normal = Vec::with_capacity(3 * nb);
        let mut initial = Vec::with_capacity(m * nb);
        for p in boundaries.particles() {
            let (code, first) = match p.condition.builtin() {
                Some(BuiltinCondition::Dirichlet) => (DIRICHLET, 0),
                Some(BuiltinCondition::Outflow) => (OUTFLOW, 0),
                Some(BuiltinCondition::SlipWall { first_momentum }) => {
                    if first_momentum + D > m {
                        return Err(mote_cloud::CloudError::invalid(
                            "slip wall",
                            format!(
                                "momentum components {first_momentum}..{}",
                                first_momentum + D
                            ),
                            format!("components among the {m} variables"),
                        )
                        .into());
                    }
                    (SLIP_WALL, first_momentum as u32)
                }
                None => {
                    return Err(GpuError::Unsupported(format!(
                        "boundary condition `{}` (built in: dirichlet, outflow, slip_wall)",
                        p.condition.name()
                    )));
                }
            };
            index.push(p.index as u32);
            interior.push(p.interior as u32);
            kind.push(code);
            momentum.push(first);
            normal.extend((0..3).map(|d| F::cast(if d < D { p.normal[d] } else { 0.0 })));
            initial.extend_from_slice(p.initial);
        }
        let fixed = mote_core::Scaling::Fixed;
        Ok(Self {
            particles: nb,
            variables: m,
            dim: D,
            extent: index
                .iter()
                .chain(&interior)
                .map(|&i| i as usize + 1)
                .max()
                .unwrap_or(0),
            index: gpu.upload("boundary_index", &index).with_scaling(fixed),
            interior: gpu
                .upload("boundary_interior", &interior)
                .with_scaling(fixed),
            kind: gpu.upload("boundary_kind", &kind).with_scaling(fixed),
            momentum: gpu
                .upload("boundary_momentum", &momentum)
                .with_scaling(fixed),
            normal: gpu.upload("boundary_normal", &normal).with_scaling(fixed),
            initial: gpu.upload("boundary_initial", &initial).with_scaling(fixed),
        })
    }

    /// Number of boundary particles.
    pub fn len(&self) -> usize {
        self.particles
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.particles == 0
    }

    /// Checks the tables and a state of `n` particles (variables end to end).
    fn check(&self, gpu: &Gpu, u: &DeviceArray<F>, n: usize) -> Result<(), GpuError> {
        gpu.check(u, n * self.variables)?;
        if self.extent > n {
            return Err(mote_cloud::CloudError::invalid(
                "boundary particle index",
                self.extent - 1,
                format!("below the state's {n} particles (boundaries of another cloud?)"),
            )
            .into());
        }
        let nb = self.particles;
        gpu.check(&self.index, nb)?;
        gpu.check(&self.interior, nb)?;
        gpu.check(&self.kind, nb)?;
        gpu.check(&self.momentum, nb)?;
        gpu.check(&self.normal, 3 * nb)?;
        gpu.check(&self.initial, self.variables * nb)
    }

    /// Sets every boundary particle's state in `u` (the variables of `n` particles end to end)
    /// from its condition, as the CPU's [`Boundaries::apply`] does.
    pub fn apply(&self, gpu: &Gpu, u: &DeviceArray<F>, n: usize) -> Result<(), GpuError> {
        self.check(gpu, u, n)?;
        if self.is_empty() {
            return Ok(());
        }
        let (count, cube) = grid(self.particles, gpu.workgroup());
        fn go<Rt: Runtime, F: GpuFloat>(
            client: &ComputeClient<Rt>,
            count: CubeCount,
            cube: CubeDim,
            b: &DeviceBoundaries<F>,
            u: &DeviceArray<F>,
            n: usize,
        ) {
            // SAFETY: unit k writes only boundary particle index[k]'s entries (distinct per k)
            // and reads its interior neighbour's, which are never boundary entries; every index
            // is below n and the tables hold `particles` entries (checked).
            unsafe {
                apply_kernel::launch_unchecked::<F, Rt>(
                    client,
                    count,
                    cube,
                    u.arg(),
                    n as u32,
                    b.particles as u32,
                    b.index.arg(),
                    b.interior.arg(),
                    b.kind.arg(),
                    b.momentum.arg(),
                    b.normal.arg(),
                    b.initial.arg(),
                    b.variables,
                    b.dim,
                )
            }
        }
        with_client!(&gpu.client, |c| go(c, count, cube, self, u, n));
        Ok(())
    }

    /// Zeroes every boundary particle's entries of the slope `du` (boundary particles are not
    /// evolved).
    pub fn zero_slopes(&self, gpu: &Gpu, du: &DeviceArray<F>, n: usize) -> Result<(), GpuError> {
        self.check(gpu, du, n)?;
        if self.is_empty() {
            return Ok(());
        }
        let (count, cube) = grid(self.particles, gpu.workgroup());
        fn go<Rt: Runtime, F: GpuFloat>(
            client: &ComputeClient<Rt>,
            count: CubeCount,
            cube: CubeDim,
            b: &DeviceBoundaries<F>,
            du: &DeviceArray<F>,
            n: usize,
        ) {
            // SAFETY: unit k writes only boundary particle index[k]'s entries, below n.
            unsafe {
                zero_kernel::launch_unchecked::<F, Rt>(
                    client,
                    count,
                    cube,
                    du.arg(),
                    n as u32,
                    b.particles as u32,
                    b.index.arg(),
                    b.variables,
                )
            }
        }
        with_client!(&gpu.client, |c| go(c, count, cube, self, du, n));
        Ok(())
    }
}

impl<F: GpuFloat> mote_core::Budgeted for DeviceBoundaries<F> {
    fn buffers(&self) -> Vec<&dyn mote_core::BudgetedBuffer> {
        vec![
            &self.index,
            &self.interior,
            &self.kind,
            &self.momentum,
            &self.normal,
            &self.initial,
        ]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
        vec![
            &mut self.index,
            &mut self.interior,
            &mut self.kind,
            &mut self.momentum,
            &mut self.normal,
            &mut self.initial,
        ]
    }
}
