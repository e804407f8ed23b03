//! Linear advection on periodic clouds: convergence orders, conservation, determinism.

use std::f64::consts::PI;

use mote_cloud::equations::LinearAdvection;
use mote_cloud::exact::{advected, errors, total};
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{
    Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, SlotLayout, SlotMajor, Weight,
};
use mote_core::{CpuBackend, Real};

fn u0<const D: usize>(x: [f64; D]) -> f64 {
    (0..D).map(|d| (2.0 * PI * x[d]).sin()).product::<f64>() + 0.5
}

fn velocity<const D: usize>() -> [f64; D] {
    std::array::from_fn(|d| 1.0 - 0.5 * d as f64)
}

fn simulation<R: Real, const D: usize, L: SlotLayout>(
    n: usize,
    order: usize,
    formulation: Formulation,
    jitter: f64,
    tableau: Tableau,
    backend: CpuBackend,
) -> MeshlessSimulation<R, D, LinearAdvection<D>, L> {
    let spacing = 1.0 / n as f64;
    let opts = LatticeOptions {
        spacing,
        jitter,
        seed: 3,
        boundary_layers: 0,
    };
    let mut cloud = Cloud::<R, D>::lattice(Domain::unit_periodic(), opts, 1).unwrap();
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    for i in 0..cloud.len() {
        let x = cloud.position_of(i);
        cloud.state_var_mut(0)[i] = R::cast(u0(x));
    }
    let scheme = Muscl::new(
        LinearAdvection::scalar(velocity::<D>(), 1),
        order,
        formulation,
        Weight::default(),
    )
    .unwrap();
    let radius = default_radius_factor::<D>(order) * spacing;
    MeshlessSimulation::new(cloud, radius, scheme, tableau, backend).unwrap()
}

/// L1 error at `t_end` at resolution `n`.
fn error<const D: usize>(n: usize, order: usize, formulation: Formulation, t_end: f64) -> f64 {
    error_jittered::<D>(n, order, formulation, t_end, 0.25)
}

/// L1 error at `t_end` at resolution `n` on a cloud jittered by `jitter` spacings.
fn error_jittered<const D: usize>(
    n: usize,
    order: usize,
    formulation: Formulation,
    t_end: f64,
    jitter: f64,
) -> f64 {
    let mut sim = simulation::<f64, D, RowMajor>(
        n,
        order,
        formulation,
        jitter,
        Tableau::rk4(),
        CpuBackend::default(),
    );
    sim.run_to(t_end, 0.2).unwrap();
    let exact = advected(u0::<D>, velocity::<D>(), t_end, *sim.cloud.domain());
    errors(&sim.cloud, 0, exact).l1
}

fn order_of<const D: usize>(
    levels: &[usize],
    order: usize,
    formulation: Formulation,
    t_end: f64,
) -> f64 {
    let e: Vec<f64> = levels
        .iter()
        .map(|&n| error::<D>(n, order, formulation, t_end))
        .collect();
    let p = (e[e.len() - 2] / e[e.len() - 1]).log2()
        / (levels[levels.len() - 1] as f64 / levels[levels.len() - 2] as f64).log2();
    println!("{D}-D MUSCL{order} {formulation:?}: errors {e:?}, order {p:.2}");
    p
}

#[test]
fn mls_divergence_converges_at_design_order_in_1d_and_2d() {
    for order in [2, 3, 4] {
        let p1 = order_of::<1>(&[32, 64], order, Formulation::MlsDivergence, 0.5);
        assert!((p1 - order as f64).abs() <= 0.3, "1-D MUSCL{order}: {p1}");
        let p2 = order_of::<2>(&[32, 64], order, Formulation::MlsDivergence, 0.25);
        assert!((p2 - order as f64).abs() <= 0.3, "2-D MUSCL{order}: {p2}");
    }
}

#[test]
fn conservative_form_conserves_mass_to_round_off_and_mls_form_drifts_boundedly() {
    for (formulation, bound) in [
        (Formulation::Conservative, 1e-13),
        (Formulation::MlsDivergence, 1e-2),
    ] {
        let mut sim = simulation::<f64, 2, RowMajor>(
            24,
            3,
            formulation,
            0.3,
            Tableau::ssp_rk3(),
            CpuBackend::default(),
        );
        let m0 = total(&sim.cloud, 0);
        // One period in x (the velocity is (1, 0.5)).
        sim.run_to(1.0, 0.4).unwrap();
        let drift = ((total(&sim.cloud, 0) - m0) / m0).abs();
        println!("{formulation:?}: relative mass drift over a period {drift:.3e}");
        assert!(drift <= bound, "{formulation:?}: {drift:e}");
        if formulation == Formulation::MlsDivergence {
            assert!(
                drift > 1e-13,
                "on a jittered cloud form (a) is not exactly conservative"
            );
        }
    }
}

#[test]
fn conservative_form_converges_on_regular_clouds_only() {
    // Form (b) conserves exactly, but on jittered clouds its face weights do not sum to zero
    // (sum_j p_ij != 0), an O(1) consistency error: it does not converge there. On a regular
    // lattice it does, at design order. Both are asserted so that a change shows.
    for order in [2, 3] {
        let e: Vec<f64> = [32, 64]
            .iter()
            .map(|&n| error_jittered::<1>(n, order, Formulation::Conservative, 0.5, 0.0))
            .collect();
        let p = (e[0] / e[1]).log2();
        println!("1-D MUSCL{order} conservative, regular cloud: errors {e:?}, order {p:.2}");
        assert!((p - order as f64).abs() <= 0.3, "regular: {p}");
        let e: Vec<f64> = [32, 64]
            .iter()
            .map(|&n| error_jittered::<1>(n, order, Formulation::Conservative, 0.5, 0.25))
            .collect();
        let p = (e[0] / e[1]).log2();
        println!("1-D MUSCL{order} conservative, jittered cloud: errors {e:?}, order {p:.2}");
        assert!(
            p < 1.0,
            "jittered: {p} (if this now converges, update the docs)"
        );
    }
}

/// The state bits after five SSP-RK3 steps in layout `L` on `backend`.
fn five_steps<L: SlotLayout>(backend: CpuBackend) -> Vec<u64> {
    let mut s = simulation::<f64, 2, L>(
        20,
        3,
        Formulation::Conservative,
        0.3,
        Tableau::ssp_rk3(),
        backend,
    );
    for _ in 0..5 {
        s.step(1e-3).unwrap();
    }
    s.cloud.state(0).iter().map(|x| x.to_bits()).collect()
}

#[test]
fn steps_are_bitwise_identical_across_threads_and_layouts() {
    let reference = five_steps::<RowMajor>(CpuBackend::threads(1));
    assert_eq!(five_steps::<RowMajor>(CpuBackend::threads(2)), reference);
    assert_eq!(five_steps::<SlotMajor>(CpuBackend::threads(2)), reference);
    // The steps changed the state: the comparison is not of untouched arrays.
    let initial: Vec<u64> = simulation::<f64, 2, RowMajor>(
        20,
        3,
        Formulation::Conservative,
        0.3,
        Tableau::ssp_rk3(),
        CpuBackend::Serial,
    )
    .cloud
    .state(0)
    .iter()
    .map(|x| x.to_bits())
    .collect();
    assert_ne!(initial, reference);
}

#[test]
fn the_last_step_lands_on_the_end_time() {
    let mut sim = simulation::<f32, 1, RowMajor>(
        40,
        2,
        Formulation::MlsDivergence,
        0.0,
        Tableau::ssp_rk3(),
        CpuBackend::Serial,
    );
    sim.run_to(0.123, 0.5).unwrap();
    assert_eq!(sim.time(), 0.123);
}
