//! Moving clouds: free-stream preservation, agreement with the fixed cloud at zero velocity,
//! convergence on a cloud in motion, the Lagrangian mover, determinism across thread counts,
//! and the refusals.

use mote_cloud::adapt::Adaptivity;
use mote_cloud::equations::{Euler, LinearAdvection};
use mote_cloud::exact::errors;
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::motion::{Prescribed, StateVelocity, builtin};
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;

const TAU: f64 = std::f64::consts::TAU;

/// A jittered periodic unit square with `per_side`^2 particles and `variables` variables.
fn square(per_side: usize, variables: usize, order: usize) -> Cloud<f64, 2> {
    let lattice = LatticeOptions {
        spacing: 1.0 / per_side as f64,
        jitter: 0.25,
        seed: 7,
        boundary_layers: 0,
    };
    let domain = Domain::new_box([0.0; 2], [1.0; 2], [true; 2]).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, lattice, variables).unwrap();
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = order as u8;
    }
    cloud
}

/// A uniform Euler state stays uniform to round-off on a cloud turning in counter-rotating
/// cells, with its neighbour lists and MLS fits redone at every stage: MUSCL2 and 3, Rusanov
/// (relative wave speeds) and HLLC (fixed-frame flux plus the upwinded mesh term).
#[test]
fn uniform_state_stays_uniform_on_a_moving_cloud() {
    let eq = Euler::<2>::new(1.4).unwrap();
    let state = eq_state(&eq);
    for (order, flux) in [
        (2, FluxKind::Rusanov),
        (3, FluxKind::Rusanov),
        (2, FluxKind::Hllc),
    ] {
        let per_side = 24;
        let mut cloud = square(per_side, 4, order);
        for i in 0..cloud.len() {
            for (k, x) in state.iter().enumerate() {
                cloud.state_var_mut(k)[i] = *x;
            }
        }
        let mut start = vec![[0.0; 2]; cloud.len()];
        for i in 0..cloud.len() {
            start[cloud.ids()[i] as usize] = cloud.position_of(i);
        }
        let scheme = Muscl::new(
            eq.clone(),
            order,
            Formulation::MlsDivergence,
            Weight::default(),
        )
        .unwrap()
        .with_flux(flux)
        .unwrap();
        let spacing = 1.0 / per_side as f64;
        let motion = builtin::<2>("rotation", 0.5, [0.0; 2], [1.0; 2]).unwrap();
        let mut sim = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
            cloud,
            default_radius_factor::<2>(order) * spacing,
            scheme,
            Tableau::ssp_rk3(),
            CpuBackend::threads(2),
        )
        .unwrap()
        .with_motion(motion, 0.25)
        .unwrap();
        let dt = sim.stable_dt(0.4);
        for _ in 0..60 {
            sim.step(dt).unwrap();
        }
        let mut worst = 0.0f64;
        for (k, x) in state.iter().enumerate() {
            for &y in sim.cloud.state(k) {
                worst = worst.max((y - x).abs());
            }
        }
        // The control: the particles did move (the largest displacement, by stable id), and the
        // cloud was reordered along the way.
        let ids = sim.cloud.ids();
        let moved = (0..sim.cloud.len())
            .map(|i| {
                let (a, b) = (start[ids[i] as usize], sim.cloud.position_of(i));
                let d = |k: usize| {
                    let x = (b[k] - a[k]).abs();
                    x.min(1.0 - x)
                };
                d(0).hypot(d(1))
            })
            .fold(0.0, f64::max);
        eprintln!(
            "MUSCL{order} {flux}: max deviation {worst:.2e}, largest displacement {:.2} spacings, {} reorderings",
            moved / spacing,
            sim.reorders()
        );
        assert!(worst <= 1e-12, "MUSCL{order} {flux}: {worst}");
        assert!(moved > 1.0 * spacing);
        assert!(sim.reorders() >= 1);
    }
}

fn eq_state(eq: &Euler<2>) -> [f64; 4] {
    use mote_cloud::equations::Equation;
    let mut u = [0.0; 4];
    Equation::<f64, 2>::to_conservative(eq, &[1.3, 0.4, -0.25, 0.9], &mut u);
    u
}

/// The advection velocity of the advection tests.
const A: [f64; 2] = [1.0, 0.5];

/// The advected profile at `x` after time `t`.
fn profile(x: [f64; 2], t: f64) -> f64 {
    let x = [x[0] - A[0] * t, x[1] - A[1] * t];
    (TAU * x[0]).sin() * (TAU * x[1]).cos() + 0.5 * (TAU * (x[0] + x[1])).cos()
}

/// Linear advection with velocity `A` of [`profile`] on a fixed cloud of `per_side`^2
/// particles, MUSCL `order`, SSP-RK3 on `threads` threads.
fn advection(
    per_side: usize,
    order: usize,
    threads: usize,
) -> MeshlessSimulation<f64, 2, LinearAdvection<2>, RowMajor> {
    let mut cloud = square(per_side, 1, order);
    for i in 0..cloud.len() {
        cloud.state_var_mut(0)[i] = profile(cloud.position_of(i), 0.0);
    }
    let scheme = Muscl::new(
        LinearAdvection::scalar(A, 1),
        order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .unwrap();
    MeshlessSimulation::<f64, 2, _, RowMajor>::new(
        cloud,
        default_radius_factor::<2>(order) / per_side as f64,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::threads(threads),
    )
    .unwrap()
}

/// [`advection`] to t = 0.25 with the cloud moving with `motion` (`None`: fixed). Returns the
/// L1 error and the final state by stable id.
fn advect(per_side: usize, order: usize, motion: Option<&str>, threads: usize) -> (f64, Vec<f64>) {
    let mut sim = advection(per_side, order, threads);
    match motion {
        None => {}
        Some("lagrangian") => {
            let mover = StateVelocity::new("advection speed", 1.0, |_u: &[f64]| A).unwrap();
            sim = sim.with_motion(mover, 1.0).unwrap();
        }
        Some("still") => {
            let still = Prescribed::new("still", |_x: [f64; 2], _t: f64| [0.0; 2]);
            sim = sim.with_motion(still, 1.0).unwrap();
        }
        Some(name) => {
            sim = sim
                .with_motion(builtin::<2>(name, 0.2, [0.0; 2], [1.0; 2]).unwrap(), 1.0)
                .unwrap();
        }
    }
    let end = 0.25;
    let dt = sim.stable_dt(0.4);
    while sim.time() < end - 1e-12 {
        sim.step(dt.min(end - sim.time())).unwrap();
    }
    let err = errors(&sim.cloud, 0, |x| profile(x, end)).l1;
    let mut by_id = vec![0.0; sim.cloud.len()];
    for i in 0..sim.cloud.len() {
        by_id[sim.cloud.ids()[i] as usize] = sim.cloud.state(0)[i];
    }
    (err, by_id)
}

/// A cloud that "moves" with zero velocity goes through every moving step (stage searches, MLS
/// fits, ALE fluxes, positions in the stages) and must agree with the fixed cloud to
/// round-off.
#[test]
fn a_still_motion_reproduces_the_fixed_cloud() {
    let (e_fixed, u_fixed) = advect(24, 2, None, 2);
    let (e_still, u_still) = advect(24, 2, Some("still"), 2);
    let diff = u_fixed
        .iter()
        .zip(&u_still)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    eprintln!("fixed {e_fixed:.3e}, still {e_still:.3e}, largest difference {diff:.2e}");
    assert!(diff <= 1e-13, "{diff}");
}

/// On clouds moving with the rotation and the shear fields (peak speed 0.2, to t = 0.25) the
/// error converges at the design order of MUSCL2 and MUSCL3, as on the fixed cloud (measured
/// 2.07/2.08 and 2.76/2.76 against 2.08 and 2.77 fixed). Stronger distortion breaks unlimited
/// MUSCL3: with peak speed 0.25 on 64^2 particles a local instability starts at t = 0.19 where
/// the rotating cells have stretched the cloud by about 1.3 (and at peak speed 0.5 on 48^2);
/// MUSCL2 is unaffected. Recorded in docs/validation.md; insertion and merging (adaptivity)
/// are the remedy. Following the flow (the Lagrangian mover,
/// relative velocity 0) the exchange between particles vanishes and the profile is carried
/// exactly: the error is the initial interpolation's, 0.
#[test]
fn moving_clouds_converge_at_design_order() {
    for order in [2, 3] {
        for motion in [None, Some("rotation"), Some("shear")] {
            let (ec, _) = advect(24, order, motion, 2);
            let (ef, _) = advect(48, order, motion, 2);
            let p = (ec / ef).log2();
            eprintln!(
                "MUSCL{order} {}: L1 {ec:.3e} -> {ef:.3e}, order {p:.2}",
                motion.unwrap_or("fixed")
            );
            assert!(
                (p - order as f64).abs() <= 0.3,
                "MUSCL{order} {motion:?}: {p}"
            );
        }
    }
    let (e, _) = advect(24, 2, Some("lagrangian"), 2);
    eprintln!("Lagrangian mover: L1 {e:.3e}");
    assert!(e <= 1e-12, "{e}");
}

/// Bitwise identical on one and two threads, with searches, reorderings and fits per stage.
#[test]
fn moving_runs_are_identical_on_one_and_two_threads() {
    let (_, one) = advect(24, 3, Some("rotation"), 1);
    let (_, two) = advect(24, 3, Some("rotation"), 2);
    assert!(
        one.iter()
            .zip(&two)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

#[test]
fn unsupported_moving_combinations_are_refused() {
    let make = |formulation| {
        let scheme = Muscl::new(
            LinearAdvection::scalar([1.0, 0.0], 1),
            2,
            formulation,
            Weight::default(),
        )
        .unwrap();
        MeshlessSimulation::<f64, 2, _, RowMajor>::new(
            square(16, 1, 2),
            default_radius_factor::<2>(2) / 16.0,
            scheme,
            Tableau::ssp_rk3(),
            CpuBackend::Serial,
        )
        .unwrap()
    };
    let motion = || builtin::<2>("shear", 0.5, [0.0; 2], [1.0; 2]).unwrap();
    let err = make(Formulation::Conservative)
        .with_motion(motion(), 1.0)
        .err()
        .unwrap();
    assert!(err.to_string().contains("MLS-divergence"), "{err}");
    assert!(
        make(Formulation::MlsDivergence)
            .with_motion(motion(), 0.0)
            .is_err()
    );
    assert!(builtin::<2>("spin", 0.5, [0.0; 2], [1.0; 2]).is_err());
    let moving = make(Formulation::MlsDivergence)
        .with_motion(motion(), 1.0)
        .unwrap();
    let mood = mote_cloud::mood::MoodSettings {
        criterion: mote_cloud::mood::Criterion::U1,
        ..Default::default()
    };
    assert!(moving.with_mood(mood).is_err());
    // Adaptivity needs a moving cloud and a positive interval.
    assert!(
        make(Formulation::MlsDivergence)
            .with_adaptivity(Adaptivity::default(), 1)
            .is_err()
    );
    assert!(
        make(Formulation::MlsDivergence)
            .with_motion(motion(), 1.0)
            .unwrap()
            .with_adaptivity(Adaptivity::default(), 0)
            .is_err()
    );
}

/// Unlimited MUSCL3 on a cloud turning in cells at peak speed 0.5 (48^2 particles): without
/// adaptivity a local instability grows where the cells stretch the cloud; inserting particles
/// into the holes every step keeps the run bounded. Measured at t = 0.3: maximum error 1.5e6
/// without, 4.7e-2 with (L1 2.2e-3; 384 insertions, no merge: the compressed direction stays
/// above the merge distance of 0.25 dx).
#[test]
fn adaptivity_keeps_a_strongly_stretched_moving_cloud_stable() {
    let run = |adapt: bool| {
        let mut sim = advection(48, 3, 2)
            .with_motion(
                builtin::<2>("rotation", 0.5, [0.0; 2], [1.0; 2]).unwrap(),
                1.0,
            )
            .unwrap();
        if adapt {
            sim = sim.with_adaptivity(Adaptivity::default(), 1).unwrap();
        }
        let end = 0.3;
        let dt = sim.stable_dt(0.4);
        while sim.time() < end - 1e-12 {
            if sim.step(dt.min(end - sim.time())).is_err() {
                return (f64::INFINITY, f64::INFINITY, sim.adapt_stats());
            }
        }
        let e = errors(&sim.cloud, 0, |x| profile(x, end));
        (e.l1, e.max, sim.adapt_stats())
    };
    let (_, without, _) = run(false);
    let (l1, with, stats) = run(true);
    eprintln!(
        "max error without adaptivity {without:.2e}, with {with:.2e} (L1 {l1:.2e}; {} inserted, {} merged)",
        stats.inserted, stats.merged
    );
    assert!(without > 1.0, "the control must go unstable: {without}");
    assert!(with < 0.1 && l1 < 5e-3, "{with} {l1}");
    assert!(stats.inserted > 0);
}
