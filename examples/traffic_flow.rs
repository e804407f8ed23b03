//! A user-defined conservation law in one file, on the CPU and on the GPU:
//! Lighthill-Whitham-Richards traffic flow, `du/dt + d/dx (v u (1 - u)) = 0` for the car density
//! `u` in [0, 1] and the free speed `v`.
//!
//! The formulas (the flux along a direction and the characteristic speed) are written once in
//! the formula dialect, in `examples/formulas/traffic_flow.rs`; this file compiles them for the
//! CPU ([`mote_formula::host!`]) and for the device ([`mote_formula::device!`]) and registers
//! the equation with both backends:
//! - the CPU's [`Equation`] (a name, the variable count, the flux and the largest wave speed);
//! - the device's [`DeviceFormulas`] (the same, as CubeCL functions) and [`GpuEquation`] (the
//!   name, the variable count and the parameter array the kernels read).
//!
//! The MUSCL scheme, the limiters, MOOD, the boundary conditions and the time steppers then work
//! with it unchanged on either backend.
//!
//! Run with `cargo run --release -p mote-gpu --example traffic_flow`: a smooth density wave on
//! a jittered periodic road, before it steepens into a jam, compared with the exact solution at
//! two resolutions; then the same run on the first GPU adapter, if there is one.
//! `crates/gpu/tests/device/user_equation.rs` runs the same code as tests.

use mote_cloud::equations::Equation;
use mote_cloud::exact::errors;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::{CpuBackend, Real};
use mote_gpu::cubecl::prelude::*;
use mote_gpu::{
    DeviceEquation, DeviceFormulas, DeviceLayout, DeviceMuscl, DeviceSimulation, Gpu, GpuEquation,
    GpuError, GpuFloat,
};

/// The formulas as plain Rust for the CPU.
mod host {
    use mote_cloud::formula::prelude::*;

    mote_formula::host!("../../examples/formulas/traffic_flow.rs");
}

/// The formulas as CubeCL functions for the device.
mod device {
    use mote_gpu::cubecl::prelude::*;

    mote_formula::device!("../../examples/formulas/traffic_flow.rs");
}

/// Traffic flow along the x axis with free speed `speed`.
#[derive(Clone, Copy, Debug)]
pub struct TrafficFlow {
    /// The speed of a car on an empty road.
    pub speed: f64,
}

impl<R: Real, const D: usize> Equation<R, D> for TrafficFlow {
    fn name(&self) -> &'static str {
        "traffic_flow"
    }

    const FIXED_VARIABLES: Option<usize> = Some(1);

    fn variables(&self) -> usize {
        1
    }

    /// `F(u) . n = v u (1 - u) n_x`.
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        out[0] = host::traffic_flux::<R>(u, &n, &[R::cast(self.speed)]);
    }

    /// `|F'(u) . n| = |v (1 - 2 u) n_x|`.
    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R {
        host::traffic_speed::<R>(u, &n, &[R::cast(self.speed)]).abs()
    }
}

impl GpuEquation for TrafficFlow {
    type Formulas = TrafficFlowFormulas;

    fn name(&self) -> &'static str {
        "traffic_flow"
    }

    fn variables(&self, _dim: usize) -> usize {
        1
    }

    fn params(&self) -> [f64; 4] {
        [self.speed, 0.0, 0.0, 0.0]
    }
}

/// The traffic-flow formulas on the device.
pub struct TrafficFlowFormulas;

#[cube]
impl DeviceFormulas for TrafficFlowFormulas {
    const OWN_FLUXES: u32 = 0;
    const CHECKS_RECONSTRUCTION: bool = false;

    fn flux<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        out: &mut Array<F>,
        #[comptime] _vars: usize,
        #[comptime] _dim: usize,
    ) {
        out[0] = device::traffic_flux::<F>(u, nrm, params);
    }

    fn max_speed<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] _dim: usize,
    ) -> F {
        F::abs(device::traffic_speed::<F>(u, nrm, params))
    }

    // The CPU's default bounds, `-+` the largest speed.
    fn speed_bounds<F: Float>(
        u: &Array<F>,
        nrm: &Array<F>,
        params: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] _dim: usize,
    ) -> (F, F) {
        let s = F::abs(device::traffic_speed::<F>(u, nrm, params));
        (-s, s)
    }

    fn admissible<F: Float>(
        u: &Array<F>,
        #[comptime] _vars: usize,
        #[comptime] _dim: usize,
    ) -> bool {
        mote_gpu::formula::finite::<F>(u[0])
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

/// The initial density: a smooth wave around half occupancy.
pub fn initial(x: f64) -> f64 {
    0.5 + 0.2 * (std::f64::consts::TAU * x).sin()
}

/// The exact solution before characteristics cross: `u(x, t) = u0(x0)` with
/// `x0 + v (1 - 2 u0(x0)) t = x`, by Newton's method.
pub fn exact(speed: f64, x: f64, t: f64) -> f64 {
    let tau = std::f64::consts::TAU;
    let du0 = |x: f64| 0.2 * tau * (tau * x).cos();
    let mut x0 = x;
    for _ in 0..100 {
        let g = x0 + speed * (1.0 - 2.0 * initial(x0)) * t - x;
        let step = g / (1.0 - 2.0 * speed * du0(x0) * t);
        x0 -= step;
        if step.abs() < 1e-15 {
            break;
        }
    }
    initial(x0)
}

/// The free speed of every run here.
pub const SPEED: f64 = 1.0;

/// The initial cloud of `n` particles on the periodic unit road at MUSCL `order`, and the
/// neighbour radius.
pub fn setup<R: Real>(n: usize, order: usize) -> (Cloud<R, 1>, f64) {
    let spacing = 1.0 / n as f64;
    let lattice = LatticeOptions {
        spacing,
        jitter: 0.2,
        seed: 6,
        boundary_layers: 0,
    };
    let mut cloud = Cloud::<R, 1>::lattice(Domain::unit_periodic(), lattice, 1).unwrap();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    for i in 0..cloud.len() {
        cloud.state_var_mut(0)[i] = R::cast(initial(cloud.position_of(i)[0].as_f64()));
    }
    (cloud, default_radius_factor::<1>(order) * spacing)
}

/// The CPU simulation of `n` particles at MUSCL `order` (SSP-RK3).
pub fn simulation<R: Real>(
    n: usize,
    order: usize,
) -> MeshlessSimulation<R, 1, TrafficFlow, RowMajor> {
    let (cloud, radius) = setup::<R>(n, order);
    let eq = TrafficFlow { speed: SPEED };
    let scheme = Muscl::new(eq, order, Formulation::MlsDivergence, Weight::default()).unwrap();
    MeshlessSimulation::new(
        cloud,
        radius,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::Serial,
    )
    .unwrap()
}

/// The same simulation on the device `gpu`.
pub fn device_simulation<R: GpuFloat>(
    gpu: &Gpu,
    n: usize,
    order: usize,
) -> Result<DeviceSimulation<R, 1>, GpuError> {
    let (cloud, radius) = setup::<R>(n, order);
    let eq = DeviceEquation::new(TrafficFlow { speed: SPEED });
    let scheme = DeviceMuscl::<R>::new::<1>(gpu, eq, order, Weight::default())?;
    DeviceSimulation::new(
        gpu,
        &cloud,
        radius,
        scheme,
        Tableau::ssp_rk3(),
        DeviceLayout::RowMajor,
    )
}

/// The density L1 error at `end` with `n` particles on the CPU, MUSCL `order`.
pub fn run(n: usize, order: usize, end: f64) -> f64 {
    let mut sim = simulation::<f64>(n, order);
    sim.run_to(end, 0.4).unwrap();
    errors(&sim.cloud, 0, |x| exact(SPEED, x[0], end)).l1
}

/// The density L1 error at `end` with `n` particles on the device, MUSCL `order` (the CPU's
/// step sequence: a constant step, the last one shortened to reach `end`).
pub fn run_on_device(gpu: &Gpu, n: usize, order: usize, end: f64) -> Result<f64, GpuError> {
    let mut sim = device_simulation::<f64>(gpu, n, order)?;
    let dt = sim.stable_dt(gpu, 0.4)?;
    let mut time = 0.0;
    while time < end {
        let h = dt.min(end - time);
        sim.step(gpu, h)?;
        time = if time + h >= end { end } else { time + h };
    }
    let (mut cloud, _) = setup::<f64>(n, order);
    cloud.state_var_mut(0).copy_from_slice(&sim.state(gpu)?);
    Ok(errors(&cloud, 0, |x| exact(SPEED, x[0], end)).l1)
}

#[allow(dead_code)] // the tests include this file as a module
fn main() {
    // Characteristics first cross at t = 1 / (2 v max|u0'|) = 0.4.
    let end = 0.2;
    for order in [2, 3] {
        let (coarse, fine) = (run(200, order, end), run(400, order, end));
        println!(
            "traffic flow, MUSCL{order}: L1 {coarse:.3e} (200) -> {fine:.3e} (400), order {:.2}",
            (coarse / fine).log2()
        );
    }
    let gpu = "wgpu:0"
        .parse()
        .map_err(|e| format!("{e}"))
        .and_then(|spec| Gpu::open(spec).map_err(|e| e.to_string()));
    match gpu {
        Ok(gpu) => match run_on_device(&gpu, 400, 2, end) {
            Ok(l1) => println!("on the device ({}): MUSCL2, L1 {l1:.3e} (400)", gpu.name()),
            Err(e) => println!("on the device: {e}"),
        },
        Err(e) => println!("no GPU adapter ({e}): the device run is skipped"),
    }
}
