//! Boundary conditions per tag: what each built-in condition gives a boundary particle, that
//! they hold through a run, and the errors for a missing condition or an unreachable interior.
#![allow(clippy::needless_range_loop)]

use mote_cloud::boundary::{Boundaries, BoundaryCondition, Dirichlet, Inflow, Outflow, SlipWall};
use mote_cloud::equations::Euler;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;

type Sim = MeshlessSimulation<f64, 2, Euler<2>, RowMajor>;

/// A 2-D box, periodic in y, with two boundary layers on the x faces; gas moving in +x with a
/// density ramp.
fn channel() -> Sim {
    let spacing = 1.0 / 20.0;
    let domain = Domain::new_box([0.0, 0.0], [1.0, 0.5], [false, true]).unwrap();
    let lattice = LatticeOptions {
        spacing,
        jitter: 0.1,
        seed: 1,
        boundary_layers: 2,
    };
    let eq = Euler::<2>::new(1.4).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, lattice, 4).unwrap();
    for o in cloud.orders_mut() {
        *o = 2;
    }
    for i in 0..cloud.len() {
        let [x, _] = cloud.position_of(i);
        for (v, value) in eq
            .conservative(1.0 + 0.5 * x, [0.3, 0.1], 1.0)
            .iter()
            .enumerate()
        {
            cloud.state_var_mut(v)[i] = *value;
        }
    }
    let scheme = Muscl::new(eq, 2, Formulation::MlsDivergence, Weight::default()).unwrap();
    MeshlessSimulation::new(
        cloud,
        default_radius_factor::<2>(2) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::threads(2),
    )
    .unwrap()
}

/// The nearest interior particle of boundary particle `b`.
fn nearest_interior(sim: &Sim, b: usize) -> usize {
    let xb = sim.cloud.position_of(b);
    let d = sim.cloud.domain();
    (0..sim.cloud.len())
        .filter(|&j| sim.cloud.tags()[j] == 0)
        .min_by(|&a, &c| {
            let da = d.distance_squared(xb, sim.cloud.position_of(a));
            let dc = d.distance_squared(xb, sim.cloud.position_of(c));
            da.total_cmp(&dc)
        })
        .unwrap()
}

fn state(sim: &Sim, i: usize) -> [f64; 4] {
    std::array::from_fn(|v| sim.cloud.state(v)[i])
}

#[test]
fn each_condition_sets_its_particles_and_holds_through_a_run() {
    let low = Cloud::<f64, 2>::face_tag(0, false);
    let high = Cloud::<f64, 2>::face_tag(0, true);
    let eq = Euler::<2>::new(1.4).unwrap();
    // Inflow: density rising in time, in y.
    let inflow = Inflow(move |t: f64, x: [f64; 2], out: &mut [f64]| {
        out.copy_from_slice(&eq.conservative(1.0 + t + x[1], [0.3, 0.0], 1.0));
    });
    let mut sim = channel()
        .with_boundaries(Boundaries::new().with(low, inflow).with(high, Outflow))
        .unwrap();
    assert!(!sim.boundaries().is_empty());
    for _ in 0..5 {
        let dt = sim.stable_dt(0.4);
        sim.step(dt).unwrap();
    }
    let t = sim.time();
    for i in 0..sim.cloud.len() {
        let tag = sim.cloud.tags()[i];
        let u = state(&sim, i);
        if tag == low {
            let y = sim.cloud.position_of(i)[1];
            assert!(
                (u[0] - (1.0 + t + y)).abs() < 1e-14,
                "inflow density at t = {t}"
            );
        } else if tag == high {
            assert_eq!(u, state(&sim, nearest_interior(&sim, i)), "outflow copies");
        }
    }

    // Dirichlet keeps the initial state; slip walls reverse the normal momentum only.
    let initial: Vec<[f64; 4]> = {
        let s = channel();
        (0..s.cloud.len()).map(|i| state(&s, i)).collect()
    };
    let mut sim = channel()
        .with_boundaries(
            Boundaries::new()
                .with(low, Dirichlet)
                .with(high, SlipWall::default()),
        )
        .unwrap();
    for _ in 0..5 {
        let dt = sim.stable_dt(0.4);
        sim.step(dt).unwrap();
    }
    let mut walls = 0;
    for i in 0..sim.cloud.len() {
        let tag = sim.cloud.tags()[i];
        let u = state(&sim, i);
        if tag == low {
            assert_eq!(u, initial[i], "Dirichlet keeps the initial state");
        } else if tag == high {
            let w = state(&sim, nearest_interior(&sim, i));
            assert_eq!([u[0], u[2], u[3]], [w[0], w[2], w[3]]);
            assert_eq!(u[1], -w[1], "normal momentum reversed");
            walls += 1;
        }
    }
    assert!(walls > 0);
}

#[test]
fn a_user_condition_is_one_trait_impl() {
    /// Holds the density at twice the nearest interior one.
    #[derive(Clone)]
    struct Doubling;
    impl BoundaryCondition<f64, 2> for Doubling {
        fn name(&self) -> &str {
            "doubling"
        }
        fn state(
            &self,
            _: f64,
            _: [f64; 2],
            _: [f64; 2],
            _: &[f64],
            inner: &[f64],
            out: &mut [f64],
        ) {
            out.copy_from_slice(inner);
            out[0] = 2.0 * inner[0];
        }
    }
    let sim = channel()
        .with_boundaries(Boundaries::new().with_axis(0, Doubling))
        .unwrap();
    for i in 0..sim.cloud.len() {
        if sim.cloud.tags()[i] != 0 {
            let w = state(&sim, nearest_interior(&sim, i));
            assert_eq!(sim.cloud.state(0)[i], 2.0 * w[0]);
        }
    }
}

#[test]
fn missing_conditions_and_unreachable_interiors_are_clear_errors() {
    let low = Cloud::<f64, 2>::face_tag(0, false);
    let err = channel()
        .with_boundaries(Boundaries::new().with(low, Outflow))
        .err()
        .expect("the high face has no condition");
    let msg = err.to_string();
    assert!(
        msg.contains("tag 2") && msg.contains("x high face"),
        "{msg}"
    );

    // Six layers with a 2.5 dx radius: the outer layers are more than two hops from the interior.
    let domain = Domain::new_box([0.0], [1.0], [false]).unwrap();
    let lattice = LatticeOptions {
        spacing: 0.05,
        jitter: 0.0,
        seed: 1,
        boundary_layers: 6,
    };
    let cloud = Cloud::<f64, 1>::lattice(domain, lattice, 3).unwrap();
    let eq = Euler::<1>::new(1.4).unwrap();
    let scheme = Muscl::new(eq, 1, Formulation::MlsDivergence, Weight::default()).unwrap();
    let err = MeshlessSimulation::<f64, 1, _, RowMajor>::new(
        cloud,
        2.5 * 0.05,
        scheme,
        Tableau::euler(),
        CpuBackend::Serial,
    )
    .unwrap()
    .with_boundaries(Boundaries::new().with_axis(0, Outflow))
    .err()
    .expect("outer layers cannot reach the interior");
    assert!(err.to_string().contains("widen the radius"), "{err}");
}

/// A uniform gas stays uniform to round-off next to every built-in boundary condition (issue
/// #25): the MLS divergence of constant fluxes vanishes, the Rusanov dissipation of equal
/// states too, and every condition hands the boundary layer the uniform state (at rest, so
/// that slip walls reflect nothing). The conservative formulation does not keep it (a defect
/// that `mote run` refuses: `scheme.formulation = "conservative"` with boundary particles).
#[test]
fn a_uniform_state_stays_uniform_next_to_every_condition() {
    let low = Cloud::<f64, 2>::face_tag(0, false);
    let high = Cloud::<f64, 2>::face_tag(0, true);
    let eq = Euler::<2>::new(1.4).unwrap();
    let uniform = eq.conservative(1.0, [0.0, 0.0], 1.0);
    let inflow = Inflow(move |_t: f64, _x: [f64; 2], out: &mut [f64]| {
        out.copy_from_slice(&eq.conservative(1.0, [0.0, 0.0], 1.0));
    });
    let cases: Vec<(&str, Boundaries<f64, 2>)> = vec![
        (
            "dirichlet",
            Boundaries::new().with(low, Dirichlet).with(high, Dirichlet),
        ),
        (
            "outflow",
            Boundaries::new().with(low, Outflow).with(high, Outflow),
        ),
        (
            "slip wall",
            Boundaries::new()
                .with(low, SlipWall::default())
                .with(high, SlipWall::default()),
        ),
        (
            "inflow",
            Boundaries::new().with(low, inflow).with(high, Outflow),
        ),
    ];
    for (name, boundaries) in cases {
        let mut sim = channel();
        for i in 0..sim.cloud.len() {
            for (v, value) in uniform.iter().enumerate() {
                sim.cloud.state_var_mut(v)[i] = *value;
            }
        }
        let mut sim = sim.with_boundaries(boundaries).unwrap();
        for _ in 0..10 {
            let dt = sim.stable_dt(0.4);
            sim.step(dt).unwrap();
        }
        let worst = (0..sim.cloud.len())
            .flat_map(|i| (0..4).map(move |v| (i, v)))
            .map(|(i, v)| (sim.cloud.state(v)[i] - uniform[v]).abs())
            .fold(0.0f64, f64::max);
        assert!(
            worst < 1e-12,
            "{name}: the uniform state moved by {worst:e}"
        );
    }
}
