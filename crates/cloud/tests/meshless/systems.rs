//! Linear hyperbolic systems: the M-variable path of the scheme.

use std::f64::consts::PI;

use mote_cloud::equations::LinearAdvection;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;

/// The 1-D wave system `u_t + v_x = 0`, `v_t + u_x = 0` (matrix [[0, 1], [1, 0]]): the
/// characteristic variables `u + v` and `u - v` travel right and left at unit speed, so the
/// exact solution is known.
fn wave_error(n: usize, order: usize) -> f64 {
    let spacing = 1.0 / n as f64;
    let opts = LatticeOptions {
        spacing,
        jitter: 0.25,
        seed: 9,
        boundary_layers: 0,
    };
    let mut cloud = Cloud::<f64, 1>::lattice(Domain::unit_periodic(), opts, 2).unwrap();
    let f = |x: f64| (2.0 * PI * x).sin();
    let g = |x: f64| 0.5 * (2.0 * PI * x).cos();
    for i in 0..cloud.len() {
        let x = cloud.position_of(i)[0];
        cloud.state_var_mut(0)[i] = f(x);
        cloud.state_var_mut(1)[i] = g(x);
    }
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    let eq = LinearAdvection::<1>::system(vec![vec![0.0, 1.0, 1.0, 0.0]]).unwrap();
    let scheme = Muscl::new(eq, order, Formulation::MlsDivergence, Weight::default()).unwrap();
    let radius = default_radius_factor::<1>(order) * spacing;
    let mut sim = MeshlessSimulation::<f64, 1, _, RowMajor>::new(
        cloud,
        radius,
        scheme,
        Tableau::rk4(),
        CpuBackend::default(),
    )
    .unwrap();
    let t = 0.3;
    sim.run_to(t, 0.2).unwrap();
    // w+ = u + v moves right, w- = u - v moves left.
    let wrap = |x: f64| x.rem_euclid(1.0);
    let mut err: f64 = 0.0;
    for i in 0..sim.cloud.len() {
        let x = sim.cloud.position_of(i)[0];
        let wp = f(wrap(x - t)) + g(wrap(x - t));
        let wm = f(wrap(x + t)) - g(wrap(x + t));
        let (u, v) = (0.5 * (wp + wm), 0.5 * (wp - wm));
        err = err
            .max((sim.cloud.state(0)[i] - u).abs())
            .max((sim.cloud.state(1)[i] - v).abs());
    }
    err
}

#[test]
fn a_coupled_system_converges_at_design_order() {
    for order in [2, 3] {
        let (e1, e2) = (wave_error(40, order), wave_error(80, order));
        let p = (e1 / e2).log2();
        println!("wave system MUSCL{order}: {e1:.3e} -> {e2:.3e}, order {p:.2}");
        assert!((p - order as f64).abs() <= 0.35, "MUSCL{order}: {p}");
    }
}

#[test]
fn a_diagonal_system_equals_independent_scalar_advection() {
    // Two variables advected at the same speed, once through the general matrix path and once as
    // a scalar equation per variable: the same answer to round-off.
    let run = |system: bool| -> Vec<f64> {
        let opts = LatticeOptions {
            spacing: 1.0 / 32.0,
            jitter: 0.3,
            seed: 2,
            boundary_layers: 0,
        };
        let mut cloud = Cloud::<f64, 2>::lattice(Domain::unit_periodic(), opts, 2).unwrap();
        for i in 0..cloud.len() {
            let x = cloud.position_of(i);
            cloud.state_var_mut(0)[i] = (2.0 * PI * x[0]).sin();
            cloud.state_var_mut(1)[i] = (2.0 * PI * x[1]).cos();
        }
        for o in cloud.orders_mut() {
            *o = 3;
        }
        let eq = if system {
            LinearAdvection::<2>::system(vec![vec![1.0, 0.0, 0.0, 1.0], vec![0.5, 0.0, 0.0, 0.5]])
                .unwrap()
        } else {
            LinearAdvection::<2>::scalar([1.0, 0.5], 2)
        };
        let scheme = Muscl::new(eq, 3, Formulation::MlsDivergence, Weight::default()).unwrap();
        let mut sim = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
            cloud,
            3.0 / 32.0,
            scheme,
            Tableau::ssp_rk3(),
            CpuBackend::Serial,
        )
        .unwrap();
        for _ in 0..10 {
            sim.step(2e-3).unwrap();
        }
        [sim.cloud.state(0), sim.cloud.state(1)].concat()
    };
    let (a, b) = (run(true), run(false));
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(diff < 1e-13, "{diff:e}");
    assert!(a.iter().any(|&x| x != 0.0));
}
