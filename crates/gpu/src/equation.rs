//! Equations on the device as types: the device passes are generic over an equation's formulas
//! ([`DeviceFormulas`], a CubeCL trait), not over integer codes, so an equation a user writes
//! runs on the GPU backend as the built-in ones do.
//!
//! An equation reaches the device in two parts:
//! - its pointwise formulas as a [`DeviceFormulas`] implementation (`#[cube] impl`): the flux
//!   along a direction, the largest wave speed, the wave-speed bounds, the admissibility test,
//!   and optionally its own numerical fluxes (Euler's HLLC and Rusanov, the kinetic upwinding).
//!   Written once in the formula dialect (`mote_formula`), the same text gives the CPU's
//!   [`Equation`](mote_cloud::equations::Equation) its functions;
//! - its host description as a [`GpuEquation`]: name, variable count, the kernel parameter
//!   array and the numerical fluxes it supports.
//!
//! [`DeviceEquation::new`] wraps any [`GpuEquation`]; the kernels that depend on the equation
//! (the flux pass, the stable-step rates, MOOD's detection, the relaxation source) are
//! instantiated for its formulas once, behind one launcher per kernel ([`EquationKernels`]):
//! a launch dispatches once per pass on the equation, never per particle or pair.
//!
//! Adding an equation: a formula file (or a `#[cube] impl` of [`DeviceFormulas`]), a
//! [`GpuEquation`] implementation, and on the CPU its `Equation` implementation calling the same
//! formulas (see `examples/traffic_flow.rs`).

use std::any::Any;
use std::sync::Arc;

use cubecl::prelude::*;
use mote_cloud::equations::{Burgers, Euler, KineticTransport, LinearAdvection};
use mote_cloud::flux::FluxKind;

use crate::device::Gpu;
use crate::error::GpuError;
use crate::formula::scalar::{advection_speed, burgers_flux, burgers_speed};
use crate::formula::{euler, finite, kinetic};
use crate::gravity::GpuFloat;

/// The numerical fluxes' kernel codes (bits of [`DeviceFormulas::OWN_FLUXES`]).
pub mod flux_code {
    /// Rusanov (local Lax-Friedrichs).
    pub const RUSANOV: u32 = 0;
    /// The central flux.
    pub const CENTRAL: u32 = 1;
    /// Upwind (one variable).
    pub const UPWIND: u32 = 2;
    /// HLLC (Euler).
    pub const HLLC: u32 = 3;
}

/// The kernel code of a numerical flux.
pub(crate) fn code_of(kind: FluxKind) -> u32 {
    match kind {
        FluxKind::Rusanov => flux_code::RUSANOV,
        FluxKind::Central => flux_code::CENTRAL,
        FluxKind::Upwind => flux_code::UPWIND,
        FluxKind::Hllc => flux_code::HLLC,
    }
}

/// An equation's pointwise formulas on the device. The state `u` holds `vars` conserved
/// variables; `nrm` a direction of `dim` components (not unit: the MLS pair vector); `params`
/// the equation's parameter array ([`GpuEquation::params`]).
#[cube]
pub trait DeviceFormulas: 'static + Send + Sync {
    /// The numerical fluxes (bit `1 << code`, see [`flux_code`]) that [`Self::riemann`]
    /// computes; the flux pass builds the others from [`Self::flux`] and the wave speeds.
    const OWN_FLUXES: u32;
    /// Whether a reconstructed state can be inadmissible beyond non-finite values (Euler's
    /// positivity): the flux pass then falls back to first order for a pair whose
    /// reconstruction [`Self::admissible`] refuses.
    const CHECKS_RECONSTRUCTION: bool;

    /// `F(u) . nrm` into `out`.
    fn flux<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    );

    /// The largest wave speed of `u` along `nrm` (absolute value).
    fn max_speed<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    ) -> F;

    /// The smallest and largest wave speeds of `u` along `nrm`.
    fn speed_bounds<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    ) -> (F, F);

    /// Whether `u` is admissible (finite; for Euler also positive density and pressure).
    fn admissible<F: Float>(u: &Array<F>, #[comptime] vars: usize, #[comptime] dim: usize) -> bool;

    /// The numerical flux `flux` (one of [`Self::OWN_FLUXES`]) between `ul` and `ur` along
    /// `nrm` into `out`.
    #[allow(clippy::too_many_arguments)]
    fn riemann<F: Float>(
        ul: &Array<F>,
        ur: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] flux: u32,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    );
}

/// An equation the device passes can step: its formulas and its host-side description.
pub trait GpuEquation: Send + Sync + 'static {
    /// The equation's formulas on the device.
    type Formulas: DeviceFormulas;
    /// The short name (as the CPU equation's).
    fn name(&self) -> &'static str;
    /// Conserved variables in `dim` dimensions.
    fn variables(&self, dim: usize) -> usize;
    /// The kernels' parameter array (`params[0..4]` in the formulas).
    fn params(&self) -> [f64; 4];
    /// Whether the device passes can use the numerical flux `kind` in `dim` dimensions (the
    /// CPU scheme's rule): Rusanov and central always, upwind for one variable, others where
    /// [`DeviceFormulas::OWN_FLUXES`] has them.
    fn supports_flux(&self, kind: FluxKind, dim: usize) -> bool {
        let own = <Self::Formulas as DeviceFormulas>::OWN_FLUXES & (1 << code_of(kind)) != 0;
        own || match kind {
            FluxKind::Rusanov | FluxKind::Central => true,
            FluxKind::Upwind => self.variables(dim) == 1,
            FluxKind::Hllc => false,
        }
    }
}

/// The launchers of the kernels that depend on the equation, instantiated for one equation's
/// formulas and one float type (see the launch structs of each pass).
pub(crate) trait EquationKernels<F: GpuFloat>: Send + Sync {
    /// The MUSCL flux pass ([`crate::muscl`]).
    fn flux(&self, gpu: &Gpu, launch: &crate::muscl::FluxLaunch<'_, F>);
    /// The stable-step rates ([`crate::muscl`]).
    fn rate(&self, gpu: &Gpu, launch: &crate::muscl::RateLaunch<'_, F>);
    /// MOOD's detection ([`crate::mood`]).
    fn detect(&self, gpu: &Gpu, launch: &crate::mood::DetectLaunch<'_, F>);
    /// The kinetic relaxation source or implicit stage ([`crate::relaxation`]).
    fn relax(&self, gpu: &Gpu, launch: &crate::relaxation::RelaxLaunch<'_, F>);
}

/// A [`GpuEquation`] with its launchers.
struct Typed<E>(E);

impl<F: GpuFloat, E: GpuEquation> EquationKernels<F> for Typed<E> {
    fn flux(&self, gpu: &Gpu, launch: &crate::muscl::FluxLaunch<'_, F>) {
        crate::muscl::launch_flux::<F, E::Formulas>(gpu, launch)
    }
    fn rate(&self, gpu: &Gpu, launch: &crate::muscl::RateLaunch<'_, F>) {
        crate::muscl::launch_rate::<F, E::Formulas>(gpu, launch)
    }
    fn detect(&self, gpu: &Gpu, launch: &crate::mood::DetectLaunch<'_, F>) {
        crate::mood::launch_detect::<F, E::Formulas>(gpu, launch)
    }
    fn relax(&self, gpu: &Gpu, launch: &crate::relaxation::RelaxLaunch<'_, F>) {
        crate::relaxation::launch_relax::<F, E::Formulas>(gpu, launch)
    }
}

/// What the host asks of an equation without its type.
trait Describe: Send + Sync {
    fn name(&self) -> &'static str;
    fn variables(&self, dim: usize) -> usize;
    fn params(&self) -> [f64; 4];
    fn supports_flux(&self, kind: FluxKind, dim: usize) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<E: GpuEquation> Describe for Typed<E> {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn variables(&self, dim: usize) -> usize {
        self.0.variables(dim)
    }
    fn params(&self) -> [f64; 4] {
        self.0.params()
    }
    fn supports_flux(&self, kind: FluxKind, dim: usize) -> bool {
        self.0.supports_flux(kind, dim)
    }
    fn as_any(&self) -> &dyn Any {
        &self.0
    }
}

/// An equation the device passes step, whatever its type: a built-in one
/// ([`DeviceEquation::euler`], ...) or a user's ([`DeviceEquation::new`]). Cloning shares it.
#[derive(Clone)]
pub struct DeviceEquation {
    describe: Arc<dyn Describe>,
    single: Arc<dyn EquationKernels<f32>>,
    double: Arc<dyn EquationKernels<f64>>,
}

impl std::fmt::Debug for DeviceEquation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceEquation")
            .field("name", &self.name())
            .field("params", &self.params())
            .finish()
    }
}

impl DeviceEquation {
    /// The device version of `equation`.
    pub fn new<E: GpuEquation>(equation: E) -> Self {
        let typed = Arc::new(Typed(equation));
        Self {
            describe: typed.clone(),
            single: typed.clone(),
            double: typed,
        }
    }

    /// The device version of a CPU linear advection equation (scalar only).
    pub fn advection<const D: usize>(eq: &LinearAdvection<D>) -> Result<Self, GpuError> {
        let a = eq.velocity().ok_or_else(|| {
            GpuError::Unsupported("linear advection systems (matrices); scalar only".into())
        })?;
        if <LinearAdvection<D> as mote_cloud::equations::Equation<f64, D>>::variables(eq) != 1 {
            return Err(GpuError::Unsupported(
                "linear advection of several variables".into(),
            ));
        }
        let mut velocity = [0.0; 3];
        velocity[..D].copy_from_slice(&a);
        Ok(Self::new(AdvectionOnDevice { velocity }))
    }

    /// The device version of the CPU's Burgers equation.
    pub fn burgers<const D: usize>(_eq: &Burgers<D>) -> Self {
        Self::new(BurgersOnDevice)
    }

    /// The device version of a CPU Euler equation.
    pub fn euler<const D: usize>(eq: &Euler<D>) -> Self {
        let (density_floor, pressure_floor) = eq.floors();
        Self::new(EulerOnDevice {
            params: mote_cloud::formula::euler_params(eq.gamma(), density_floor, pressure_floor),
        })
    }

    /// The device version of the CPU's kinetic transport (the explicit part of a relaxation
    /// system stepped by [`crate::DeviceSimulation::with_relaxation`]): `2 D M` variables,
    /// variable `k M + v` advected with `+lambda e_d` (`k = 2 d`) or `-lambda e_d`
    /// (`k = 2 d + 1`).
    pub fn kinetic<const D: usize>(eq: &KineticTransport<D>) -> Self {
        Self::new(KineticOnDevice {
            speed: eq.speed(),
            macroscopic: eq.macroscopic(),
        })
    }

    /// The equation's short name.
    pub fn name(&self) -> &'static str {
        self.describe.name()
    }

    /// Number of conserved variables in `dim` dimensions.
    pub fn variables(&self, dim: usize) -> usize {
        self.describe.variables(dim)
    }

    /// The kernels' parameter array.
    pub fn params(&self) -> [f64; 4] {
        self.describe.params()
    }

    /// Whether the device passes can use the numerical flux `kind` in `dim` dimensions.
    pub fn supports_flux(&self, kind: FluxKind, dim: usize) -> bool {
        self.describe.supports_flux(kind, dim)
    }

    /// Whether this is the kinetic transport of a relaxation system (which cannot be the
    /// macroscopic equation of one).
    pub(crate) fn is_kinetic(&self) -> bool {
        self.describe.as_any().is::<KineticOnDevice>()
    }

    /// The launchers for float type `F`.
    pub(crate) fn kernels<F: GpuFloat>(&self) -> &dyn EquationKernels<F> {
        // `GpuFloat` is f32 or f64: one of the two downcasts succeeds.
        if let Some(k) = (&self.single as &dyn Any).downcast_ref::<Arc<dyn EquationKernels<F>>>() {
            return k.as_ref();
        }
        (&self.double as &dyn Any)
            .downcast_ref::<Arc<dyn EquationKernels<F>>>()
            .map(|k| k.as_ref())
            .expect("GpuFloat is f32 or f64")
    }
}

/// Scalar linear advection with a constant velocity (unused components 0).
struct AdvectionOnDevice {
    velocity: [f64; 3],
}

impl GpuEquation for AdvectionOnDevice {
    type Formulas = AdvectionFormulas;
    fn name(&self) -> &'static str {
        "advection"
    }
    fn variables(&self, _dim: usize) -> usize {
        1
    }
    fn params(&self) -> [f64; 4] {
        let a = self.velocity;
        [a[0], a[1], a[2], 0.0]
    }
}

/// Inviscid Burgers, `F(u) . n = u^2 / 2 sum_d n_d`.
struct BurgersOnDevice;

impl GpuEquation for BurgersOnDevice {
    type Formulas = BurgersFormulas;
    fn name(&self) -> &'static str {
        "burgers"
    }
    fn variables(&self, _dim: usize) -> usize {
        1
    }
    fn params(&self) -> [f64; 4] {
        [0.0; 4]
    }
}

/// The Euler equations with the formulas' parameter array
/// ([`mote_cloud::formula::euler_params`]).
struct EulerOnDevice {
    params: [f64; 4],
}

impl GpuEquation for EulerOnDevice {
    type Formulas = EulerFormulas;
    fn name(&self) -> &'static str {
        "euler"
    }
    fn variables(&self, dim: usize) -> usize {
        dim + 2
    }
    fn params(&self) -> [f64; 4] {
        self.params
    }
}

/// The kinetic transport: `lambda` in `params[0]`.
struct KineticOnDevice {
    speed: f64,
    macroscopic: usize,
}

impl GpuEquation for KineticOnDevice {
    type Formulas = KineticFormulas;
    fn name(&self) -> &'static str {
        "kinetic_transport"
    }
    fn variables(&self, dim: usize) -> usize {
        2 * dim * self.macroscopic
    }
    fn params(&self) -> [f64; 4] {
        [self.speed, 0.0, 0.0, 0.0]
    }
}

/// Every variable finite.
#[cube]
fn all_finite<F: Float>(u: &Array<F>, #[comptime] vars: usize) -> bool {
    let mut ok = true;
    #[unroll]
    for v in 0..vars {
        if !finite::<F>(u[v]) {
            ok = false;
        }
    }
    ok
}

/// Scalar linear advection's formulas.
pub struct AdvectionFormulas;

#[cube]
impl DeviceFormulas for AdvectionFormulas {
    const OWN_FLUXES: u32 = 0;
    const CHECKS_RECONSTRUCTION: bool = false;

    fn flux<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) {
        out[0] = advection_speed::<F>(nrm, params, dim) * u[0];
    }

    fn max_speed<F: Float>(
        _u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> F {
        F::abs(advection_speed::<F>(nrm, params, dim))
    }

    fn speed_bounds<F: Float>(
        _u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> (F, F) {
        let s = advection_speed::<F>(nrm, params, dim);
        (s, s)
    }

    fn admissible<F: Float>(
        u: &Array<F>,
        #[comptime] vars: usize,
        #[comptime] _dim: usize,
    ) -> bool {
        all_finite::<F>(u, vars)
    }

    fn riemann<F: Float>(
        _ul: &Array<F>,
        _ur: &Array<F>,
        _nrm: &Array<F>,
        _params: &Array<F>,
        _out: &mut Array<F>,
        #[comptime] _flux: u32,
        #[comptime] _vars: usize,
        #[comptime] _dim: usize,
    ) {
    }
}

/// Inviscid Burgers' formulas.
pub struct BurgersFormulas;

#[cube]
impl DeviceFormulas for BurgersFormulas {
    const OWN_FLUXES: u32 = 0;
    const CHECKS_RECONSTRUCTION: bool = false;

    fn flux<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        _params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) {
        out[0] = burgers_flux::<F>(u[0], nrm, dim);
    }

    fn max_speed<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        _params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> F {
        F::abs(burgers_speed::<F>(u[0], nrm, dim))
    }

    fn speed_bounds<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        _params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> (F, F) {
        let s = burgers_speed::<F>(u[0], nrm, dim);
        (s, s)
    }

    fn admissible<F: Float>(
        u: &Array<F>,
        #[comptime] vars: usize,
        #[comptime] _dim: usize,
    ) -> bool {
        all_finite::<F>(u, vars)
    }

    fn riemann<F: Float>(
        _ul: &Array<F>,
        _ur: &Array<F>,
        _nrm: &Array<F>,
        _params: &Array<F>,
        _out: &mut Array<F>,
        #[comptime] _flux: u32,
        #[comptime] _vars: usize,
        #[comptime] _dim: usize,
    ) {
    }
}

/// The Euler equations' formulas (from `crates/cloud/formulas/euler.rs`).
pub struct EulerFormulas;

#[cube]
impl DeviceFormulas for EulerFormulas {
    const OWN_FLUXES: u32 = (1 << flux_code::RUSANOV) | (1 << flux_code::HLLC);
    const CHECKS_RECONSTRUCTION: bool = true;

    fn flux<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) {
        let mut vel = Array::<F>::new(3usize);
        let _floors = euler::euler_flux::<F>(u, nrm, params, &mut vel, out, dim);
    }

    fn max_speed<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> F {
        let mut vel = Array::<F>::new(3usize);
        let (vn, c, _floors) = euler::euler_speeds::<F>(u, nrm, params, &mut vel, dim);
        F::abs(vn) + c
    }

    fn speed_bounds<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> (F, F) {
        let mut vel = Array::<F>::new(3usize);
        let (vn, c, _floors) = euler::euler_speeds::<F>(u, nrm, params, &mut vel, dim);
        (vn - c, vn + c)
    }

    fn admissible<F: Float>(
        u: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> bool {
        euler::euler_admissible::<F>(u, dim)
    }

    fn riemann<F: Float>(
        ul: &Array<F>,
        ur: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] flux: u32,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    ) {
        let mut vl = Array::<F>::new(3usize);
        let mut vr = Array::<F>::new(3usize);
        if comptime![flux == flux_code::HLLC] {
            let mut e = Array::<F>::new(3usize);
            let _floors = euler::hllc::<F>(ul, ur, nrm, params, &mut e, &mut vl, &mut vr, out, dim);
        } else {
            let mut fl = Array::<F>::new(vars);
            let mut fr = Array::<F>::new(vars);
            let _floors = euler::euler_rusanov::<F>(
                ul, ur, nrm, params, &mut vl, &mut vr, &mut fl, &mut fr, out, dim,
            );
        }
    }
}

/// `lambda_v . n` of kinetic variable `v` of `vars` (the CPU's `normal_velocity`).
#[cube]
fn kinetic_velocity<F: Float>(
    nrm: &Array<F>,
    params: &Array<F>,
    #[comptime] v: usize,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) -> F {
    let k = comptime![v / (vars / (2 * dim))];
    kinetic::kinetic_velocity::<F>(nrm[comptime![k / 2]], params[0], comptime![k % 2 == 0])
}

/// The kinetic transport's formulas: each variable advected with its own velocity.
pub struct KineticFormulas;

#[cube]
impl DeviceFormulas for KineticFormulas {
    // Rusanov and upwind are the same here, as on the CPU: each component is upwinded with its
    // own velocity.
    const OWN_FLUXES: u32 = (1 << flux_code::RUSANOV) | (1 << flux_code::UPWIND);
    const CHECKS_RECONSTRUCTION: bool = false;

    fn flux<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    ) {
        #[unroll]
        for v in 0..vars {
            out[v] = kinetic_velocity::<F>(nrm, params, v, vars, dim) * u[v];
        }
    }

    fn max_speed<F: Float>(
        _u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> F {
        kinetic::kinetic_max_speed::<F>(nrm, params[0], dim)
    }

    fn speed_bounds<F: Float>(
        _u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] dim: usize,
    ) -> (F, F) {
        let s = kinetic::kinetic_max_speed::<F>(nrm, params[0], dim);
        (-s, s)
    }

    fn admissible<F: Float>(
        u: &Array<F>,
        #[comptime] vars: usize,
        #[comptime] _dim: usize,
    ) -> bool {
        all_finite::<F>(u, vars)
    }

    fn riemann<F: Float>(
        ul: &Array<F>,
        ur: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] _flux: u32,
        #[comptime] vars: usize,
        #[comptime] dim: usize,
    ) {
        #[unroll]
        for v in 0..vars {
            let a = kinetic_velocity::<F>(nrm, params, v, vars, dim);
            out[v] = kinetic::kinetic_upwind::<F>(a, ul[v], ur[v]);
        }
    }
}
