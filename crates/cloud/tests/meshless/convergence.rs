//! Convergence orders of the nonlinear equations on jittered clouds: the isentropic vortex (2-D
//! Euler, periodic) for MUSCL 2 and 3, and smooth Burgers before the shock forms.

use mote_cloud::equations::{Burgers, Euler};
use mote_cloud::exact::{IsentropicVortex, burgers_smooth, errors};
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;

const GAMMA: f64 = 1.4;
const HALF: f64 = 5.0;
/// Strength 5 on [-5, 5)^2.
const VORTEX: IsentropicVortex = IsentropicVortex {
    gamma: GAMMA,
    strength: 5.0,
    half: HALF,
};

/// Density L1 error of the vortex at time `end` with `per_side` particles per side, MUSCL
/// `order`.
fn vortex_error(per_side: usize, order: usize, end: f64) -> f64 {
    let spacing = 2.0 * HALF / per_side as f64;
    let domain = Domain::new_box([-HALF; 2], [HALF; 2], [true; 2]).unwrap();
    let lattice = LatticeOptions {
        spacing,
        jitter: 0.25,
        seed: 11,
        boundary_layers: 0,
    };
    let eq = Euler::<2>::new(GAMMA).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, lattice, 4).unwrap();
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    VORTEX.fill(&mut cloud, 0.0).unwrap();
    let scheme = Muscl::new(eq, order, Formulation::MlsDivergence, Weight::default()).unwrap();
    let mut sim = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
        cloud,
        default_radius_factor::<2>(order) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::threads(2),
    )
    .unwrap();
    let dt = sim.stable_dt(0.4);
    while sim.time() < end {
        sim.step(dt.min(end - sim.time())).unwrap();
    }
    assert_eq!(sim.scheme.equation().floor_events(), 0);
    errors(&sim.cloud, 0, |x| VORTEX.state(x, end).0).l1
}

/// Both orders converge at design order once the resolution is asymptotic. MUSCL2 is there at
/// 32^2 -> 64^2 (t = 1). MUSCL3 is not: from 32^2 to 64^2 it measured 2.2-2.4 (the numerical
/// dissipation `s (u_R - u_L)` of the Euler system, whose error terms partly cancel at coarse
/// resolution; a central flux gives 3 there), rising steadily with resolution on jittered and
/// regular clouds, with Rusanov and HLLC alike: 2.42 (64 -> 96), 2.71 (96 -> 128), 2.83
/// (128 -> 192) at t = 1 (`examples/vortex_study.rs`). So MUSCL3 is measured from 96^2 to 144^2,
/// at t = 0.5 to halve the cost (2.81; about 30 s on two threads).
#[test]
fn isentropic_vortex_converges_at_design_order_for_muscl2_and_muscl3() {
    for (order, coarse, fine, end) in [(2, 32, 64, 1.0), (3, 96, 144, 0.5)] {
        let (ec, ef) = (
            vortex_error(coarse, order, end),
            vortex_error(fine, order, end),
        );
        let measured = (ec / ef).ln() / (fine as f64 / coarse as f64).ln();
        eprintln!(
            "isentropic vortex MUSCL{order}: L1 {ec:.3e} ({coarse}^2) -> {ef:.3e} ({fine}^2) at t = {end}, order {measured:.2}"
        );
        assert!(
            (measured - order as f64).abs() <= 0.3,
            "MUSCL{order}: order {measured}"
        );
    }
}

/// L1 error of smooth Burgers, u0 = 1 + sin(2 pi x) / 2 (a shock forms at t = 1 / pi), at t =
/// 0.15 with `n` particles on the periodic unit interval, MUSCL `order`.
fn burgers_error(n: usize, order: usize) -> f64 {
    burgers_error_with(n, order, false, FluxKind::Rusanov)
}

/// [`burgers_error`], optionally with the WENO-type MLS reconstruction.
fn burgers_error_with(n: usize, order: usize, weno: bool, flux: FluxKind) -> f64 {
    let spacing = 1.0 / n as f64;
    let lattice = LatticeOptions {
        spacing,
        jitter: 0.25,
        seed: 4,
        boundary_layers: 0,
    };
    let tau = std::f64::consts::TAU;
    let u0 = move |x: f64| 1.0 + 0.5 * (tau * x).sin();
    let du0 = move |x: f64| 0.5 * tau * (tau * x).cos();
    let mut cloud = Cloud::<f64, 1>::lattice(Domain::unit_periodic(), lattice, 1).unwrap();
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    for i in 0..cloud.len() {
        cloud.state_var_mut(0)[i] = u0(cloud.position_of(i)[0]);
    }
    let scheme = Muscl::new(
        Burgers::<1>,
        order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .unwrap();
    let scheme = if weno {
        scheme.with_weno(1000.0).unwrap()
    } else {
        scheme
    };
    let scheme = scheme.with_flux(flux).unwrap();
    let mut sim = MeshlessSimulation::<f64, 1, _, RowMajor>::new(
        cloud,
        default_radius_factor::<1>(order) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::Serial,
    )
    .unwrap();
    let end = 0.15;
    // The largest speed (1.5) is there from the start and stays.
    let dt = sim.stable_dt(0.4);
    while sim.time() < end {
        sim.step(dt.min(end - sim.time())).unwrap();
    }
    errors(&sim.cloud, 0, |x| {
        let x = x[0];
        // Periodic: the characteristic foot may lie outside [0, 1); u0 is periodic.
        burgers_smooth(u0, du0, x, end)
    })
    .l1
}

#[test]
fn weno_type_reconstruction_keeps_the_design_order_on_smooth_burgers() {
    for order in [2, 3] {
        let (ec, ef) = (
            burgers_error_with(200, order, true, FluxKind::Rusanov),
            burgers_error_with(400, order, true, FluxKind::Rusanov),
        );
        let measured = (ec / ef).log2();
        eprintln!(
            "smooth Burgers WENO-type MLS {order}: L1 {ec:.3e} -> {ef:.3e}, order {measured:.2}"
        );
        assert!(
            (measured - order as f64).abs() <= 0.3,
            "WENO {order}: order {measured}"
        );
    }
}

/// The central scheme: first-order reconstruction with the central flux is the central MLS
/// divergence `-sum_j b_ij . (F(u_j) - F(u_i))` (measured 0.56 on this jittered cloud with
/// degree-1 fits: not used as a test); with MUSCL reconstruction the midpoint values carry the
/// order. The scalar upwind flux converges like Rusanov.
#[test]
fn central_and_upwind_fluxes_converge_on_smooth_burgers() {
    for (flux, order, design) in [
        (FluxKind::Central, 2, 2.0),
        (FluxKind::Central, 3, 3.0),
        (FluxKind::Upwind, 2, 2.0),
    ] {
        let (ec, ef) = (
            burgers_error_with(200, order, false, flux),
            burgers_error_with(400, order, false, flux),
        );
        let measured = (ec / ef).log2();
        eprintln!(
            "smooth Burgers {flux} order {order}: L1 {ec:.3e} -> {ef:.3e}, order {measured:.2}"
        );
        assert!(
            (measured - design).abs() <= 0.3,
            "{flux} order {order}: order {measured}"
        );
    }
}

#[test]
fn smooth_burgers_converges_at_design_order() {
    for order in [2, 3] {
        let (ec, ef) = (burgers_error(200, order), burgers_error(400, order));
        let measured = (ec / ef).log2();
        eprintln!("smooth Burgers MUSCL{order}: L1 {ec:.3e} -> {ef:.3e}, order {measured:.2}");
        assert!(
            (measured - order as f64).abs() <= 0.3,
            "MUSCL{order}: order {measured}"
        );
    }
}

/// L1 error of 2-D Burgers with data along the diagonal, `u0(x + y)`, at t = 0.05 on a jittered
/// periodic cloud of `n^2` particles, MUSCL `order`.
fn burgers2_error(n: usize, order: usize) -> f64 {
    let spacing = 1.0 / n as f64;
    let lattice = LatticeOptions {
        spacing,
        jitter: 0.25,
        seed: 4,
        boundary_layers: 0,
    };
    let tau = std::f64::consts::TAU;
    // u0(x + y); in xi = x + y the speed is 2u: v = 2u solves v_t + v v_xi = 0.
    let v0 = move |x: f64| 2.0 * (1.0 + 0.5 * (tau * x).sin());
    let dv0 = move |x: f64| 2.0 * 0.5 * tau * (tau * x).cos();
    let mut cloud = Cloud::<f64, 2>::lattice(Domain::unit_periodic(), lattice, 1).unwrap();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    for i in 0..cloud.len() {
        let p = cloud.position_of(i);
        cloud.state_var_mut(0)[i] = 0.5 * v0(p[0] + p[1]);
    }
    let scheme = Muscl::new(
        Burgers::<2>,
        order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .unwrap();
    let mut sim = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
        cloud,
        default_radius_factor::<2>(order) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::threads(2),
    )
    .unwrap();
    let end = 0.05;
    let dt = sim.stable_dt(0.4);
    while sim.time() < end {
        sim.step(dt.min(end - sim.time())).unwrap();
    }
    errors(&sim.cloud, 0, |x| {
        0.5 * burgers_smooth(v0, dv0, x[0] + x[1], end)
    })
    .l1
}

#[test]
fn smooth_burgers_in_2d_converges_at_design_order() {
    for order in [2, 3] {
        let (ec, ef) = (burgers2_error(40, order), burgers2_error(80, order));
        let measured = (ec / ef).log2();
        eprintln!("2-D Burgers MUSCL{order}: L1 {ec:.3e} -> {ef:.3e}, order {measured:.2}");
        assert!(
            (measured - order as f64).abs() <= 0.3,
            "MUSCL{order}: order {measured}"
        );
    }
}
