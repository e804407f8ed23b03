//! A user-defined conservation law in one file: Lighthill-Whitham-Richards traffic flow,
//! `du/dt + d/dx (v u (1 - u)) = 0` for the car density `u` in [0, 1] and the free speed `v`.
//!
//! Implementing [`Equation`] (a name, the variable count, the flux along a direction and the
//! largest wave speed along it) is all a new equation needs: the MUSCL scheme, the limiters,
//! MOOD, the boundary conditions and the time steppers then work with it unchanged.
//!
//! Run with `cargo run --release -p mote-cloud --example traffic_flow`: a smooth density wave on
//! a jittered periodic road, before it steepens into a jam, compared with the exact solution
//! at two resolutions. `crates/cloud/tests/user_equation.rs` runs the same code as a test.

use mote_cloud::equations::Equation;
use mote_cloud::exact::errors;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::{CpuBackend, Real};

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

    /// `F(u) . n = v u (1 - u) n_x`: cars move along x only.
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        out[0] = R::cast(self.speed) * u[0] * (R::one() - u[0]) * n[0];
    }

    /// `|F'(u) . n| = |v (1 - 2 u) n_x|`.
    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R {
        (R::cast(self.speed) * (R::one() - R::cast(2.0) * u[0]) * n[0]).abs()
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

/// The density L1 error at `end` with `n` particles on the periodic unit road, MUSCL `order`.
pub fn run(n: usize, order: usize, end: f64) -> f64 {
    let eq = TrafficFlow { speed: 1.0 };
    let spacing = 1.0 / n as f64;
    let lattice = LatticeOptions {
        spacing,
        jitter: 0.2,
        seed: 6,
        boundary_layers: 0,
    };
    let mut cloud = Cloud::<f64, 1>::lattice(Domain::unit_periodic(), lattice, 1).unwrap();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    for i in 0..cloud.len() {
        cloud.state_var_mut(0)[i] = initial(cloud.position_of(i)[0]);
    }
    let scheme = Muscl::new(eq, order, Formulation::MlsDivergence, Weight::default()).unwrap();
    let mut sim = MeshlessSimulation::<f64, 1, _, RowMajor>::new(
        cloud,
        default_radius_factor::<1>(order) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::Serial,
    )
    .unwrap();
    sim.run_to(end, 0.4).unwrap();
    errors(&sim.cloud, 0, |x| exact(eq.speed, x[0], end)).l1
}

#[allow(dead_code)] // the test includes this file as a module
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
}
