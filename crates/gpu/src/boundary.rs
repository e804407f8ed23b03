//! Boundary conditions on the device: the built-in conditions ([`Dirichlet`], [`Outflow`],
//! [`SlipWall`], [`Front`]) applied to the boundary particles the host's [`Boundaries::prepare`]
//! found.
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
//! A front's position at the time of an application is computed on the host with the CPU's
//! formula ([`Front::position`]) and uploaded (one number per front), rounded up to the run's
//! precision: for a coordinate `x` of that precision, `x < position` (the CPU's test, in f64)
//! holds exactly when `x` is below the rounded-up value, so a boundary particle is on the same
//! side of the front as on the CPU in both precisions.
//!
//! [`Dirichlet`]: mote_cloud::boundary::Dirichlet
//! [`Outflow`]: mote_cloud::boundary::Outflow
//! [`SlipWall`]: mote_cloud::boundary::SlipWall
//! [`Front`]: mote_cloud::boundary::Front
//! [`Front::position`]: mote_cloud::boundary::Front::position
//! [`Inflow`]: mote_cloud::boundary::Inflow

use cubecl::prelude::*;
use mote_cloud::boundary::{Boundaries, BuiltinCondition, Front, FrontAhead};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::formula::boundary::reflected;
use crate::gravity::GpuFloat;
use crate::launch::launch;

const DIRICHLET: u32 = 0;
const OUTFLOW: u32 = 1;
const SLIP_WALL: u32 = 2;
/// A front with a fixed state ahead, and one with a slip wall ahead.
const FRONT: u32 = 3;
const FRONT_WALL: u32 = 4;

/// Sets each boundary particle's variables (`u[v * n + i]`) from its condition: a fixed state
/// (its initial one, or a front's state behind or ahead: `fixed`), its interior neighbour's, or
/// that with the normal momentum reversed. A front particle's side comes from its coordinate
/// along the front's axis and the front's current position (`fronts[front[k]]`).
#[cube(launch_unchecked)]
fn apply_kernel<F: Float>(
    u: &mut Array<F>,
    n: u32,
    t: &Table<F>,
    fronts: &Array<F>,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) {
    let k = ABSOLUTE_POS;
    if k < t.count as usize {
        let nu = n as usize;
        let i = t.index[k] as usize;
        let j = t.interior[k] as usize;
        let code = t.kind[k];
        let is_front = code == FRONT || code == FRONT_WALL;
        let behind = is_front && t.coordinate[k] < fronts[t.front[k] as usize];
        // Fixed states: `fixed` holds two per particle (the initial state or the front's state
        // behind, then the front's state ahead).
        let first = code == DIRICHLET || behind;
        let second = code == FRONT && !behind;
        #[unroll]
        for v in 0..vars {
            let own = select(
                second,
                t.fixed[(2 * k + 1) * vars + v],
                t.fixed[2 * k * vars + v],
            );
            u[v * nu + i] = select(first || second, own, u[v * nu + j]);
        }
        if code == SLIP_WALL || (code == FRONT_WALL && !behind) {
            let first = t.momentum[k] as usize;
            let mut mn = F::new(0.0);
            #[unroll]
            for d in 0..dim {
                mn += u[(first + d) * nu + j] * t.normal[k * 3 + d];
            }
            #[unroll]
            for d in 0..dim {
                u[(first + d) * nu + i] =
                    reflected::<F>(u[(first + d) * nu + j], mn, t.normal[k * 3 + d]);
            }
        }
    }
}

/// The boundary tables as the kernel reads them (see [`DeviceBoundaries`]'s fields).
#[derive(CubeLaunch, CubeType)]
struct Table<F: Float> {
    /// Boundary particles.
    count: u32,
    index: Array<u32>,
    interior: Array<u32>,
    kind: Array<u32>,
    momentum: Array<u32>,
    normal: Array<F>,
    fixed: Array<F>,
    coordinate: Array<F>,
    front: Array<u32>,
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

/// The smallest value of the float type `F` at or above `x`: a coordinate `c` of type `F` is
/// below `x` exactly when it is below this value (no value of `F` lies between them).
fn at_or_above<F: GpuFloat>(x: f64) -> F {
    if F::PRECISION == mote_core::Precision::F64 {
        return F::cast(x);
    }
    let c = x as f32;
    F::cast(if (c as f64) < x { c.next_up() } else { c } as f64)
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
    /// Two fixed states per boundary particle, `variables` each: its initial state (a front
    /// particle: the state behind the front), then the state ahead of its front (else zeros).
    fixed: DeviceArray<F>,
    /// A front particle's coordinate along its front's axis, and its front's index.
    coordinate: DeviceArray<F>,
    front: DeviceArray<u32>,
    /// The distinct fronts (their positions are uploaded at each application).
    fronts: Vec<Front>,
    /// A stand-in for the front positions when there are no fronts.
    no_fronts: DeviceArray<F>,
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
        let mut fixed = Vec::with_capacity(2 * m * nb);
        let (mut coordinate, mut front) = (vec![F::cast(0.0); nb], vec![0u32; nb]);
        let mut fronts: Vec<Front> = Vec::new();
        for (k, p) in boundaries.particles().enumerate() {
            let builtin = p.condition.builtin();
            let (code, first) = match &builtin {
                Some(BuiltinCondition::Dirichlet) => (DIRICHLET, 0),
                Some(BuiltinCondition::Outflow) => (OUTFLOW, 0),
                &Some(BuiltinCondition::SlipWall { first_momentum }) => {
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
                Some(BuiltinCondition::Front(f)) => {
                    f.validate::<D>(m)?;
                    // One entry per distinct front (few: compared whole).
                    let at = fronts.iter().position(|g| g == f).unwrap_or_else(|| {
                        fronts.push(f.clone());
                        fronts.len() - 1
                    });
                    front[k] = at as u32;
                    coordinate[k] = F::cast(p.position[f.axis]);
                    match f.ahead {
                        FrontAhead::State(_) => (FRONT, 0),
                        FrontAhead::SlipWall { first_momentum } => {
                            (FRONT_WALL, first_momentum as u32)
                        }
                    }
                }
                None => {
                    return Err(GpuError::Unsupported(format!(
                        "boundary condition `{}` (built in: dirichlet, outflow, slip_wall, \
                         front)",
                        p.condition.name()
                    )));
                }
            };
            index.push(p.index as u32);
            interior.push(p.interior as u32);
            kind.push(code);
            momentum.push(first);
            normal.extend((0..3).map(|d| F::cast(if d < D { p.normal[d] } else { 0.0 })));
            match &builtin {
                Some(BuiltinCondition::Front(f)) => {
                    fixed.extend(f.behind.iter().map(|&x| F::cast(x)));
                    match &f.ahead {
                        FrontAhead::State(s) => fixed.extend(s.iter().map(|&x| F::cast(x))),
                        FrontAhead::SlipWall { .. } => {
                            fixed.extend(std::iter::repeat_n(F::cast(0.0), m))
                        }
                    }
                }
                _ => {
                    fixed.extend_from_slice(p.initial);
                    fixed.extend(std::iter::repeat_n(F::cast(0.0), m));
                }
            }
        }
        let scaling = mote_core::Scaling::Fixed;
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
            index: gpu.upload("boundary_index", &index).with_scaling(scaling),
            interior: gpu
                .upload("boundary_interior", &interior)
                .with_scaling(scaling),
            kind: gpu.upload("boundary_kind", &kind).with_scaling(scaling),
            momentum: gpu
                .upload("boundary_momentum", &momentum)
                .with_scaling(scaling),
            normal: gpu.upload("boundary_normal", &normal).with_scaling(scaling),
            fixed: gpu.upload("boundary_fixed", &fixed).with_scaling(scaling),
            coordinate: gpu
                .upload("boundary_coordinate", &coordinate)
                .with_scaling(scaling),
            front: gpu.upload("boundary_front", &front).with_scaling(scaling),
            fronts,
            no_fronts: gpu
                .upload("boundary_fronts", &[F::cast(0.0)])
                .with_scaling(scaling),
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
        gpu.check(&self.fixed, 2 * self.variables * nb)?;
        gpu.check(&self.coordinate, nb)?;
        gpu.check(&self.front, nb)
    }

    /// Sets every boundary particle's state in `u` (the variables of `n` particles end to end)
    /// from its condition at time `t`, as the CPU's [`Boundaries::apply`] does.
    pub fn apply(&self, gpu: &Gpu, u: &DeviceArray<F>, n: usize, t: f64) -> Result<(), GpuError> {
        self.check(gpu, u, n)?;
        if self.is_empty() {
            return Ok(());
        }
        // The fronts' positions at `t` by the CPU's formula, rounded up (see the module docs;
        // an upload of a few numbers per application, only where there are fronts).
        let positions: Vec<F> = self
            .fronts
            .iter()
            .map(|f| at_or_above::<F>(f.position(t)))
            .collect();
        let uploaded = (!positions.is_empty()).then(|| gpu.upload("boundary_fronts", &positions));
        let fronts = uploaded.as_ref().unwrap_or(&self.no_fronts);
        // Unit k writes only boundary particle index[k]'s entries (distinct per k) and reads
        // its interior neighbour's, which are never boundary entries; every index is below n,
        // the tables hold `particles` entries (checked) and every front index is below the
        // number of fronts (built with them).
        launch!(
            gpu,
            self.particles,
            apply_kernel::<F>(
                u.arg(),
                n as u32,
                self.table(),
                fronts.arg(),
                self.variables,
                self.dim
            )
        );
        Ok(())
    }

    /// Zeroes every boundary particle's entries of the slope `du` (boundary particles are not
    /// evolved).
    pub fn zero_slopes(&self, gpu: &Gpu, du: &DeviceArray<F>, n: usize) -> Result<(), GpuError> {
        self.check(gpu, du, n)?;
        if self.is_empty() {
            return Ok(());
        }
        // Unit k writes only boundary particle index[k]'s entries, below n.
        launch!(
            gpu,
            self.particles,
            zero_kernel::<F>(
                du.arg(),
                n as u32,
                self.particles as u32,
                self.index.arg(),
                self.variables
            )
        );
        Ok(())
    }
}

impl<F: GpuFloat> DeviceBoundaries<F> {
    /// The tables as the kernel's launch argument.
    fn table<Rt: Runtime>(&self) -> TableLaunch<F, Rt> {
        TableLaunch::new(
            self.particles as u32,
            self.index.arg(),
            self.interior.arg(),
            self.kind.arg(),
            self.momentum.arg(),
            self.normal.arg(),
            self.fixed.arg(),
            self.coordinate.arg(),
            self.front.arg(),
        )
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
            &self.fixed,
            &self.coordinate,
            &self.front,
            &self.no_fronts,
        ]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
        vec![
            &mut self.index,
            &mut self.interior,
            &mut self.kind,
            &mut self.momentum,
            &mut self.normal,
            &mut self.fixed,
            &mut self.coordinate,
            &mut self.front,
            &mut self.no_fronts,
        ]
    }
}
