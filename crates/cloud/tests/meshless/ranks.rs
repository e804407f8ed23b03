//! A cloud split between ranks (`mote_cloud::halo`, threads standing in for MPI processes:
//! `mote_core::comm::thread_ranks`): each rank holds its own particles and a two-ring halo,
//! and the own particles' states after a run with shocks, limiters and MOOD are the one-process
//! states bit for bit, on 1 to 4 ranks, with the same time steps and MOOD counts; the halo is a
//! small part of the cloud; failures are agreed by every rank.

use mote_cloud::boundary::Boundaries;
use mote_cloud::equations::Euler;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::{Criterion, HaloStrategy, MoodSettings, MoodStats};
use mote_cloud::problems::{self, Problem, ProblemOptions};
use mote_cloud::scheme::{Formulation, Limiter, LimiterKind, LimiterMode, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, CloudError, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;
use mote_core::comm::{Comm, on_thread_ranks, thread_ranks};
use std::sync::Arc;

const SIDE: usize = 40;

/// A jittered lattice (Morton order) with a blast: a hot dense disc in still gas. Periodic, or
/// (`walls`) closed in y without boundary particles, where the search's bins are those of the
/// particles' extent.
fn blast(walls: bool) -> Cloud<f64, 2> {
    let options = LatticeOptions {
        spacing: 1.0 / SIDE as f64,
        jitter: 0.3,
        seed: 7,
        boundary_layers: 0,
    };
    let domain = Domain::new_box([0.0, 0.0], [1.0, 1.0], [true, !walls]).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, options, 4).unwrap();
    cloud.reorder_morton();
    let n = cloud.len();
    for i in 0..n {
        let x = cloud.position_of(i);
        let r2 = (x[0] - 0.4).powi(2) + (x[1] - 0.55).powi(2);
        let (rho, p) = if r2 < 0.04 { (1.0, 10.0) } else { (0.125, 0.1) };
        let u = [rho, 0.1 * rho, 0.0, p / 0.4 + 0.5 * rho * 0.01];
        for (v, value) in u.into_iter().enumerate() {
            cloud.state_var_mut(v)[i] = value;
        }
    }
    for o in cloud.orders_mut() {
        *o = 3;
    }
    cloud
}

/// A setting of the scheme: order, formulation, limiter, WENO, MOOD, and the cloud.
#[derive(Clone, Copy)]
struct Setting {
    walls: bool,
    order: usize,
    formulation: Formulation,
    limiter: Option<LimiterKind>,
    weno: bool,
    mood: Option<(Criterion, HaloStrategy)>,
}

const SETTINGS: [Setting; 5] = [
    Setting {
        walls: false,
        order: 2,
        formulation: Formulation::MlsDivergence,
        limiter: Some(LimiterKind::BarthJespersen),
        weno: false,
        mood: Some((Criterion::U1, HaloStrategy::Epd1)),
    },
    Setting {
        walls: false,
        order: 3,
        formulation: Formulation::Conservative,
        limiter: None,
        weno: false,
        mood: Some((Criterion::U2, HaloStrategy::Epd2)),
    },
    Setting {
        walls: false,
        order: 3,
        formulation: Formulation::MlsDivergence,
        limiter: Some(LimiterKind::Venkatakrishnan),
        weno: false,
        mood: None,
    },
    Setting {
        walls: true,
        order: 2,
        formulation: Formulation::MlsDivergence,
        limiter: Some(LimiterKind::BarthJespersen),
        weno: false,
        mood: Some((Criterion::U1, HaloStrategy::Strict)),
    },
    Setting {
        walls: false,
        order: 3,
        formulation: Formulation::MlsDivergence,
        limiter: None,
        weno: true,
        mood: Some((Criterion::U1, HaloStrategy::Epd1)),
    },
];

type Sim = MeshlessSimulation<f64, 2, Euler<2>, RowMajor>;

fn scheme(s: Setting) -> Muscl<f64, 2, Euler<2>> {
    let eq = Euler::<2>::new(1.4).unwrap();
    let mut scheme = Muscl::new(eq, s.order, s.formulation, Weight::default()).unwrap();
    if let Some(kind) = s.limiter {
        scheme = scheme
            .with_limiter(Limiter::new(kind, LimiterMode::Soft))
            .unwrap();
    }
    if s.weno {
        scheme = scheme.with_weno(1000.0).unwrap();
    }
    scheme
}

/// The one-process simulation of `cloud` (setting `s`, neighbours within `radius`), SSP-RK3 on
/// one thread.
fn one_process(cloud: Cloud<f64, 2>, s: Setting, radius: f64) -> Result<Sim, CloudError> {
    let backend = CpuBackend::threads(1);
    Sim::new(cloud, radius, scheme(s), Tableau::ssp_rk3(), backend)
}

/// This rank's part of the simulation of `cloud` (setting `s`, neighbours within `radius`,
/// `boundaries`), SSP-RK3 on one thread.
fn split(
    cloud: Cloud<f64, 2>,
    s: Setting,
    radius: f64,
    boundaries: Boundaries<f64, 2>,
    comm: Arc<dyn Comm>,
) -> Result<Sim, CloudError> {
    let backend = CpuBackend::threads(1);
    Sim::split(
        cloud,
        radius,
        scheme(s),
        Tableau::ssp_rk3(),
        backend,
        boundaries,
        comm,
    )
}

/// MUSCL2 in the MLS-divergence formulation with the Barth-Jespersen limiter, for `eq`.
fn muscl2_bj<R: mote_core::Real, const D: usize, E: mote_cloud::equations::Equation<R, D>>(
    eq: E,
) -> Muscl<R, D, E> {
    Muscl::new(eq, 2, Formulation::MlsDivergence, Weight::default())
        .unwrap()
        .with_limiter(Limiter::new(LimiterKind::BarthJespersen, LimiterMode::Soft))
        .unwrap()
}

/// `steps` steps at CFL 0.4 (each the stable step); returns the steps' bits.
fn step_at_cfl<R, const D: usize, E, L>(
    sim: &mut MeshlessSimulation<R, D, E, L>,
    steps: usize,
) -> Vec<u64>
where
    R: mote_core::Real,
    E: mote_cloud::equations::Equation<R, D>,
    L: mote_cloud::SlotLayout,
{
    (0..steps)
        .map(|_| {
            let dt = sim.stable_dt(0.4);
            sim.step(dt).unwrap();
            dt.to_bits()
        })
        .collect()
}

/// The bits of every state variable of the particles `sim` computes (its own, on a split
/// cloud), one vector per variable.
fn own_state_bits<const D: usize, E, L>(sim: &MeshlessSimulation<f64, D, E, L>) -> Vec<Vec<u64>>
where
    E: mote_cloud::equations::Equation<f64, D>,
    L: mote_cloud::SlotLayout,
{
    let own = sim.own();
    (0..sim.cloud.variables())
        .map(|v| {
            sim.cloud.state(v)[own.clone()]
                .iter()
                .map(|x| x.to_bits())
                .collect()
        })
        .collect()
}

fn radius(order: usize) -> f64 {
    default_radius_factor::<2>(order) / SIDE as f64
}

fn with_mood(sim: Sim, s: Setting) -> Sim {
    match s.mood {
        Some((c, h)) => sim.with_mood(MoodSettings::new(c, h)).unwrap(),
        None => sim,
    }
}

/// What a run leaves: the states of the particles the rank computes (one-process order), the
/// time steps' bits and MOOD's counts.
struct Outcome {
    first: usize,
    states: Vec<Vec<u64>>,
    steps: Vec<u64>,
    mood: MoodStats,
}

fn advance(mut sim: Sim, steps: usize) -> Outcome {
    let dts = step_at_cfl(&mut sim, steps);
    let states = own_state_bits(&sim);
    Outcome {
        first: sim.halo().map_or(0, |h| h.first()),
        states,
        steps: dts,
        mood: sim.take_mood_stats(),
    }
}

#[test]
fn a_split_cloud_ends_bitwise_as_one_process() {
    for s in SETTINGS {
        let cloud = blast(s.walls);
        let n = cloud.len();
        let one = one_process(cloud.clone(), s, radius(s.order)).unwrap();
        let one = advance(with_mood(one, s), 6);
        assert!(
            s.mood.is_none() || one.mood.failures > 0,
            "the blast makes MOOD act"
        );
        for k in 1..=4 {
            let parts = on_thread_ranks(&thread_ranks(k), |comm| {
                let sim =
                    split(cloud.clone(), s, radius(s.order), Boundaries::new(), comm).unwrap();
                let halo = sim.halo().unwrap();
                let held = (sim.cloud.len(), halo.halo_len());
                (advance(with_mood(sim, s), 6), held)
            });
            let mut next = 0;
            for (r, (part, (held, halo))) in parts.into_iter().enumerate() {
                assert_eq!(part.first, next, "rank {r} of {k} owns the next run");
                let own = part.states[0].len();
                assert_eq!(held, own + halo);
                if k > 1 {
                    // Two rings of about 20 neighbours around a quarter of 1 600 particles.
                    assert!(halo > 0 && held < n, "rank {r} of {k} holds {held} of {n}");
                }
                for v in 0..4 {
                    assert!(
                        part.states[v] == one.states[v][next..next + own],
                        "order {} {:?} (limiter {:?}, WENO {}): variable {v} on rank {r} of {k} differs from one process",
                        s.order,
                        s.formulation,
                        s.limiter,
                        s.weno
                    );
                }
                assert_eq!(part.steps, one.steps, "time steps on rank {r} of {k}");
                assert_eq!(part.mood, one.mood, "MOOD counts on rank {r} of {k}");
                next += own;
            }
            assert_eq!(next, n, "the ranks own every particle once");
        }
    }
}

/// Every rank reports the error one process reports: a non-finite state (found on one rank
/// only) and a search radius too small for the fit.
#[test]
fn a_split_cloud_agrees_on_failures() {
    let mut cloud = blast(false);
    let s = SETTINGS[0];
    let bad = cloud.len() - 5;
    cloud.state_var_mut(2)[bad] = f64::NAN;
    let one = one_process(cloud.clone(), s, radius(s.order))
        .unwrap()
        .step(1e-4)
        .unwrap_err();
    assert!(matches!(one, CloudError::NonFinite { variable: 2, .. }));
    let small = 0.8 / SIDE as f64;
    let too_few = one_process(cloud.clone(), s, small)
        .err()
        .expect("too few neighbours");
    for k in 2..=3 {
        let errors = on_thread_ranks(&thread_ranks(k), |comm| {
            let mut sim = split(
                cloud.clone(),
                s,
                radius(s.order),
                Boundaries::new(),
                comm.clone(),
            )
            .unwrap();
            let step = sim.step(1e-4).unwrap_err();
            let setup = split(cloud.clone(), s, small, Boundaries::new(), comm)
                .err()
                .expect("too few neighbours");
            (step, setup)
        });
        for (step, setup) in errors {
            assert_eq!(step, one, "{k} ranks");
            assert_eq!(setup, too_few, "{k} ranks");
        }
    }
}

/// Boundary particles on a split cloud: each rank imposes the conditions on its own and the
/// halo's come from their owners; the quadrant problem (outflow faces, MOOD) and the double
/// Mach reflection (a wall, post-shock inflow and a moving front at the top, time-dependent)
/// end bitwise as one process.
#[test]
fn a_split_cloud_with_boundaries_ends_bitwise_as_one_process() {
    type Build = fn(&ProblemOptions, f64) -> Result<Problem<f64, 2, Euler<2>>, CloudError>;
    let cases: [(&str, Build, usize); 2] = [
        ("quadrant", problems::quadrant::<f64>, 20),
        ("double Mach", problems::double_mach::<f64>, 12),
    ];
    let s = SETTINGS[0];
    for (name, build, resolution) in cases {
        let options = ProblemOptions {
            resolution,
            jitter: 0.2,
            seed: 3,
            boundary_layers: 2,
            ranks: None,
        };
        let problem = || {
            let mut p = build(&options, 1.4).unwrap();
            for o in p.cloud.orders_mut() {
                *o = 2;
            }
            p
        };
        let spacing = 1.0 / resolution as f64;
        let radius = default_radius_factor::<2>(2) * spacing;
        let p = problem();
        let n = p.cloud.len();
        let one = one_process(p.cloud, s, radius)
            .unwrap()
            .with_boundaries(p.boundaries)
            .unwrap();
        let one = advance(with_mood(one, s), 8);
        for k in [2, 3] {
            let parts = on_thread_ranks(&thread_ranks(k), |comm| {
                let p = problem();
                let sim = split(p.cloud, s, radius, p.boundaries, comm).unwrap();
                advance(with_mood(sim, s), 8)
            });
            let mut next = 0;
            for (r, part) in parts.iter().enumerate() {
                let own = part.states[0].len();
                for v in 0..4 {
                    assert!(
                        part.states[v] == one.states[v][next..next + own],
                        "{name}: variable {v} on rank {r} of {k} differs from one process"
                    );
                }
                assert_eq!(part.steps, one.steps, "{name}: steps on rank {r} of {k}");
                assert_eq!(part.mood, one.mood, "{name}: MOOD on rank {r} of {k}");
                next += own;
            }
            assert_eq!(next, n);
        }
    }
}

/// A moving cloud split between ranks (decision 0031): the blast on a cloud turning in
/// counter-rotating cells (MUSCL2, and order 3 with WENO), reordered along the Morton curve every quarter spacing moved (1/20 with WENO, 1/50 with walls) (the
/// particles migrate to their new owners), on 1-4 ranks: every own particle's position, id and
/// state and every time step bitwise one process's, periodic and with closed walls (the
/// search's bins follow the particles' extent). With the default skin the halo is found again
/// as the particles move; with a skin too thin for one step, stages find it outgrown and the
/// steps are redone on a wider one, with the same results.
#[test]
fn a_moving_split_cloud_ends_bitwise_as_one_process() {
    type Record = (Vec<Vec<u64>>, Vec<u64>, Vec<u64>);
    let run = |mut sim: Sim, steps: usize| -> (usize, Record, u64, (u64, u64)) {
        let dts = step_at_cfl(&mut sim, steps);
        let own = sim.own();
        let bits = |x: &[f64]| x[own.clone()].iter().map(|x| x.to_bits()).collect();
        let mut columns = own_state_bits(&sim);
        columns.extend(sim.cloud.positions().map(bits));
        let ids = sim.cloud.ids()[own.clone()].to_vec();
        let first = sim.halo().map_or(0, |h| h.first());
        (
            first,
            (columns, ids, dts),
            sim.reorders(),
            sim.halo_rebuilds(),
        )
    };
    let motion = || mote_cloud::motion::builtin::<2>("rotation", 20.0, [0.0; 2], [1.0; 2]).unwrap();
    // MUSCL2 with Barth-Jespersen, and order 3 with WENO (its halo reaches two radii).
    let cases = [
        (SETTINGS[0], false, None),
        (SETTINGS[0], true, None),
        (SETTINGS[0], false, Some(0.005)),
        (SETTINGS[4], false, None),
    ];
    for (s, walls, skin) in cases {
        let s = Setting {
            walls,
            mood: None,
            ..s
        };
        let cloud = blast(walls);
        let n = cloud.len();
        let steps = 12;
        // Closed walls' one-sided fits and order 3 limit the step more: the particles move
        // less.
        let reorder = match (walls, s.weno) {
            (true, _) => 0.02,
            (false, true) => 0.05,
            (false, false) => 0.25,
        };
        let one = one_process(cloud.clone(), s, radius(s.order)).unwrap();
        let (_, one, reorders, _) = run(one.with_motion(motion(), reorder).unwrap(), steps);
        assert!(reorders >= 2, "walls {walls}: {reorders} reorderings");
        for k in 1..=4 {
            let parts = on_thread_ranks(&thread_ranks(k), |comm| {
                let sim = split(cloud.clone(), s, radius(s.order), Boundaries::new(), comm)
                    .unwrap()
                    .with_motion(motion(), reorder)
                    .unwrap();
                let sim = match skin {
                    Some(skin) => sim.with_halo_skin(skin).unwrap(),
                    None => sim,
                };
                run(sim, steps)
            });
            let mut next = 0;
            for (r, (first, (columns, ids, dts), _, (rebuilds, retries))) in
                parts.into_iter().enumerate()
            {
                let what = format!(
                    "rank {r} of {k} (order {}, walls {walls}, skin {skin:?})",
                    s.order
                );
                assert_eq!(first, next, "{what} owns the next run");
                let own = ids.len();
                assert_eq!(ids, one.1[next..next + own], "{what}: ids");
                for (v, c) in columns.iter().enumerate() {
                    assert!(
                        c[..] == one.0[v][next..next + own],
                        "{what}: column {v} differs from one process"
                    );
                }
                assert_eq!(dts, one.2, "{what}: time steps");
                if k > 1 {
                    // Found at the start, after each reordering, and (MUSCL2, periodic: the
                    // particles move farthest between reorderings) as the particles move.
                    let moving = !walls && !s.weno;
                    assert!(
                        rebuilds >= 1 + reorders + u64::from(moving),
                        "{what}: {rebuilds} halos"
                    );
                    assert_eq!(
                        retries > 0,
                        skin.is_some(),
                        "{what}: {retries} steps redone"
                    );
                }
                next += own;
            }
            assert_eq!(next, n, "the ranks own every particle once");
        }
    }
}

/// What a split cloud cannot do yet is refused, not run wrongly: adaptivity.
#[test]
fn a_split_cloud_refuses_adaptivity() {
    let comm = thread_ranks(1).remove(0);
    let s = Setting {
        mood: None,
        ..SETTINGS[0]
    };
    let sim = split(blast(false), s, radius(2), Boundaries::new(), comm)
        .unwrap()
        .with_motion(
            mote_cloud::motion::builtin::<2>("shear", 0.1, [0.0; 2], [1.0; 2]).unwrap(),
            1.0,
        )
        .unwrap();
    let err = sim
        .with_adaptivity(mote_cloud::adapt::Adaptivity::default(), 1)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("not split between ranks"), "{err}");
}

/// In three dimensions (the halo's rings and the search's bins are dimension-free): the
/// advection wave (24^3 particles) at order 2 with the Barth-Jespersen limiter, f32, on 4 ranks,
/// bitwise as one process.
#[test]
fn a_split_three_dimensional_cloud_ends_bitwise_as_one_process() {
    let options = ProblemOptions {
        resolution: 24,
        jitter: 0.3,
        seed: 5,
        boundary_layers: 0,
        ranks: None,
    };
    let radius = default_radius_factor::<3>(2) / 24.0;
    let scheme = |p: &Problem<f32, 3, mote_cloud::equations::LinearAdvection<3>>| {
        muscl2_bj(p.equation.clone())
    };
    let run = |mut sim: MeshlessSimulation<f32, 3, _, RowMajor>| {
        step_at_cfl(&mut sim, 5);
        let own = sim.own();
        sim.cloud.state(0)[own]
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<u32>>()
    };
    let backend = CpuBackend::threads(1);
    let mut p = problems::advection_wave::<f32, 3>(&options).unwrap();
    for o in p.cloud.orders_mut() {
        *o = 2;
    }
    let one = MeshlessSimulation::<f32, 3, _, RowMajor>::new(
        p.cloud.clone(),
        radius,
        scheme(&p),
        Tableau::ssp_rk3(),
        backend,
    )
    .unwrap();
    let one = run(one);
    let parts = on_thread_ranks(&thread_ranks(4), |comm| {
        let sim = MeshlessSimulation::<f32, 3, _, RowMajor>::split(
            p.cloud.clone(),
            radius,
            scheme(&p),
            Tableau::ssp_rk3(),
            backend,
            Boundaries::new(),
            comm,
        )
        .unwrap();
        let held = sim.cloud.len();
        (run(sim), held)
    });
    let n = p.cloud.len();
    assert!(
        parts.iter().any(|(_, held)| *held < n),
        "a halo smaller than the cloud somewhere: {:?} of {n}",
        parts.iter().map(|p| p.1).collect::<Vec<_>>()
    );
    let states: Vec<u32> = parts.into_iter().flat_map(|(s, _)| s).collect();
    assert_eq!(states, one, "3-D states on 4 ranks");
}

/// Rows `range` of `cloud`, in order.
fn rows(cloud: &Cloud<f64, 2>, range: std::ops::Range<usize>) -> Cloud<f64, 2> {
    let mut part = cloud.clone();
    let n = part.len();
    let order: Vec<usize> = range
        .clone()
        .chain(0..range.start)
        .chain(range.end..n)
        .collect();
    part.apply_permutation(&mote_core::columns::Permutation::new(order).unwrap());
    part.truncate(range.len());
    part
}

/// The halo by distance (`halo::around`) holds every particle within its width of an own
/// particle (periodic images and closed walls), each with its one-process index, position and
/// id (and fewer than the whole cloud on several ranks); its exchange gives every
/// halo particle its owner's values.
#[test]
fn a_halo_by_distance_holds_every_particle_within_its_width() {
    for walls in [false, true] {
        let cloud = blast(walls);
        let n = cloud.len();
        let width = 0.09;
        for k in 1..=4 {
            let held = on_thread_ranks(&thread_ranks(k), |comm| {
                let mine = mote_cloud::halo::own_ranges(n, k)[comm.rank()].clone();
                let own = rows(&cloud, mine.clone());
                let (local, halo) =
                    mote_cloud::halo::around(own, mine.start, n, width, comm).unwrap();
                assert_eq!(halo.own().len(), mine.len());
                assert_eq!(halo.halo_len() + mine.len(), local.len());
                let whole = cloud.positions();
                for (i, &g) in halo.global().iter().enumerate() {
                    assert_eq!(local.ids()[i], cloud.ids()[g], "particle {g}");
                    assert_eq!(local.position_of(i), cloud.position_of(g), "particle {g}");
                }
                // Every particle within the width of an own one (minimum image on x, and on y
                // where periodic) is held.
                for j in 0..n {
                    let near = mine.clone().any(|i| {
                        let mut d2 = 0.0;
                        for (a, x) in whole.iter().enumerate() {
                            let mut d = x[j] - x[i];
                            if a == 0 || !walls {
                                d -= d.round();
                            }
                            d2 += d * d;
                        }
                        d2 <= width * width
                    });
                    if near {
                        assert!(halo.local_of(j).is_some(), "particle {j} on {k} ranks");
                    }
                }
                let mut values: Vec<f64> = halo
                    .global()
                    .iter()
                    .enumerate()
                    .map(|(i, &g)| {
                        if halo.own().contains(&i) {
                            g as f64
                        } else {
                            -1.0
                        }
                    })
                    .collect();
                halo.exchange(&mut values, 1);
                for (&g, &v) in halo.global().iter().zip(&values) {
                    assert_eq!(v, g as f64, "the owner's value of particle {g}");
                }
                local.len()
            });
            if k > 1 {
                // Cells of edge 1/11 >= 0.09 and their neighbours: well short of the cloud.
                assert!(held.iter().all(|&h| h < n), "{held:?} of {n}");
            }
        }
    }
}

/// A Morton reordering of a split cloud (`halo::reorder`: a sample sort over the ranks, the
/// particles migrating to their new owners) gives every rank its range of the one-process
/// reordering, with every array.
#[test]
fn a_split_reordering_is_the_one_process_reordering() {
    let options = LatticeOptions {
        spacing: 1.0 / 37.0,
        jitter: 0.4,
        seed: 3,
        boundary_layers: 0,
    };
    let domain = Domain::new_box([0.0, 0.0], [1.0, 1.0], [true, false]).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, options, 2).unwrap();
    let n = cloud.len();
    for i in 0..n {
        let x = cloud.position_of(i);
        cloud.state_var_mut(0)[i] = x[0] * 3.0 + x[1];
        cloud.state_var_mut(1)[i] = i as f64;
    }
    // Lattice order, not Morton: nearly every particle changes owner.
    let mut one = cloud.clone();
    one.reorder_morton();
    for k in 1..=5 {
        let parts = on_thread_ranks(&thread_ranks(k), |comm| {
            let mine = mote_cloud::halo::own_ranges(n, k)[comm.rank()].clone();
            let mut own = rows(&cloud, mine.clone());
            mote_cloud::halo::reorder(&mut own, mine.start, n, comm.as_ref()).unwrap();
            own
        });
        let mut next = 0;
        for (r, part) in parts.iter().enumerate() {
            let len = part.len();
            assert_eq!(part.ids(), &one.ids()[next..next + len], "rank {r} of {k}");
            for v in 0..2 {
                assert_eq!(part.state(v), &one.state(v)[next..next + len]);
            }
            for i in 0..len {
                assert_eq!(part.position_of(i), one.position_of(next + i));
            }
            next += len;
        }
        assert_eq!(next, n);
    }
}

/// The blast through its kinetic relaxation system (16 kinetic variables, transported by
/// MUSCL2 with Barth-Jespersen, relaxed by the ARS(2,2,2) IMEX pair) split between 1-4 ranks:
/// each rank solves its own particles' relaxations and the halo takes them; every own kinetic
/// state and time step bitwise one process's.
#[test]
fn a_split_relaxation_run_ends_bitwise_as_one_process() {
    use mote_cloud::source::KineticRelaxation;
    use mote_cloud::time::ImexTableau;
    let cloud = blast(false);
    let n = cloud.len();
    let relax = || {
        let eq = Euler::<2>::new(1.4).unwrap();
        KineticRelaxation::<2, _>::new::<f64>(eq, 20.0, 1e-3).unwrap()
    };
    let r = relax();
    let mut kinetic = cloud.with_variables(r.kinetic_variables()).unwrap();
    let mut f = vec![0.0; r.kinetic_variables()];
    for i in 0..n {
        let u: Vec<f64> = (0..4).map(|v| cloud.state(v)[i]).collect();
        r.maxwellian(&u, &mut f);
        for (k, &x) in f.iter().enumerate() {
            kinetic.state_var_mut(k)[i] = x;
        }
    }
    let scheme = |r: &KineticRelaxation<2, Euler<2>>| muscl2_bj(r.transport());
    let run = |mut sim: MeshlessSimulation<f64, 2, _, RowMajor>| {
        let dts = step_at_cfl(&mut sim, 5);
        (own_state_bits(&sim), dts)
    };
    let backend = CpuBackend::threads(1);
    let one = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
        kinetic.clone(),
        radius(2),
        scheme(&r),
        Tableau::ssp_rk3(),
        backend,
    )
    .unwrap()
    .with_source(ImexTableau::ars222(), relax())
    .unwrap();
    let (one, one_dts) = run(one);
    for k in 1..=4 {
        let parts = on_thread_ranks(&thread_ranks(k), |comm| {
            let r = relax();
            let sim = MeshlessSimulation::<f64, 2, _, RowMajor>::split(
                kinetic.clone(),
                radius(2),
                scheme(&r),
                Tableau::ssp_rk3(),
                backend,
                Boundaries::new(),
                comm,
            )
            .unwrap()
            .with_source(ImexTableau::ars222(), r)
            .unwrap();
            let first = sim.halo().unwrap().first();
            (first, run(sim))
        });
        let mut next = 0;
        for (rank, (first, (states, dts))) in parts.into_iter().enumerate() {
            assert_eq!(first, next);
            let own = states[0].len();
            for (v, s) in states.iter().enumerate() {
                assert!(
                    s[..] == one[v][next..next + own],
                    "kinetic variable {v} on rank {rank} of {k} differs from one process"
                );
            }
            assert_eq!(dts, one_dts, "time steps on rank {rank} of {k}");
            next += own;
        }
        assert_eq!(next, n);
    }
}

/// A source whose solve fails on dense gas (a disc in the upper right corner, the last ranks'
/// particles): every rank of a split cloud reports the failure one process reports, naming the
/// same particle (the first in the one-process order), though only the ranks holding the disc
/// fail.
#[test]
fn a_split_cloud_agrees_on_a_failed_source_solve() {
    struct Brittle;
    impl mote_cloud::source::PointSource<f64> for Brittle {
        fn name(&self) -> &'static str {
            "brittle"
        }
        fn variables(&self) -> usize {
            4
        }
        fn implicit_at(&self, _t: f64, _u: &[f64], out: &mut [f64]) {
            out.fill(0.0);
        }
        fn solve_at(&self, _t: f64, _h: f64, u: &mut [f64]) -> bool {
            u[0] < 0.9
        }
    }
    let s = Setting {
        mood: None,
        ..SETTINGS[0]
    };
    let tableau = mote_cloud::time::ImexTableau::ars222();
    let mut cloud = blast(false);
    for i in 0..cloud.len() {
        let x = cloud.position_of(i);
        let dense = (x[0] - 0.8).powi(2) + (x[1] - 0.8).powi(2) < 0.01;
        cloud.state_var_mut(0)[i] = if dense { 0.95 } else { 0.125 };
    }
    let mut one = one_process(cloud.clone(), s, radius(2))
        .unwrap()
        .with_source(tableau.clone(), Brittle)
        .unwrap();
    let dt = one.stable_dt(0.4);
    let expected = one.step(dt).unwrap_err().to_string();
    assert!(expected.contains("brittle"), "{expected}");
    for k in 2..=4 {
        let errors = on_thread_ranks(&thread_ranks(k), |comm| {
            let mut sim = split(cloud.clone(), s, radius(2), Boundaries::new(), comm)
                .unwrap()
                .with_source(tableau.clone(), Brittle)
                .unwrap();
            let dt = sim.stable_dt(0.4);
            sim.step(dt).unwrap_err().to_string()
        });
        for (r, e) in errors.iter().enumerate() {
            assert_eq!(e, &expected, "rank {r} of {k}");
        }
    }
}

/// What output reads of a split moving cloud, without a whole copy on any rank: the totals and
/// error norms summed over each rank's own particles and reduced over the ranks are the
/// one-process numbers bit for bit (the sums are exact), and the ranks' own parts
/// (`halo::own_part`) streamed to rank 0 in rank order (`RootStream`, as the files are written)
/// are the one-process cloud, every array.
#[test]
fn a_split_cloud_sums_and_gathers_as_one_process() {
    use mote_cloud::exact;
    use mote_core::comm::Share;
    let s = Setting {
        mood: None,
        ..SETTINGS[0]
    };
    let motion = || mote_cloud::motion::builtin::<2>("rotation", 20.0, [0.0; 2], [1.0; 2]).unwrap();
    let exact_state = |x: [f64; 2], out: &mut [f64]| {
        out.copy_from_slice(&[1.0 + x[0], x[1], -x[0], 2.5]);
    };
    let cloud = blast(false);
    let n = cloud.len();
    let mut one = one_process(cloud.clone(), s, radius(s.order))
        .unwrap()
        .with_motion(motion(), 0.25)
        .unwrap();
    step_at_cfl(&mut one, 8);
    assert!(one.reorders() >= 1, "the particles migrate");
    let whole = Share::whole(n);
    let totals: Vec<u64> = exact::totals_of(&one.cloud, whole)
        .iter()
        .map(|t| t.to_bits())
        .collect();
    let errors = format!("{:?}", exact::errors_all(&one.cloud, exact_state));
    let arrays = |c: &Cloud<f64, 2>| -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = c
            .positions()
            .iter()
            .map(|p| bytemuck::cast_slice(p).to_vec())
            .collect();
        a.extend((0..c.variables()).map(|v| bytemuck::cast_slice(c.state(v)).to_vec()));
        a.push(bytemuck::cast_slice(c.ids()).to_vec());
        a.push(bytemuck::cast_slice(c.volumes()).to_vec());
        a.push(bytemuck::cast_slice(c.tags()).to_vec());
        a.push(c.orders().to_vec());
        a
    };
    let expected = arrays(&one.cloud);
    for k in 1..=4 {
        let parts = on_thread_ranks(&thread_ranks(k), |comm| {
            let mut sim = split(cloud.clone(), s, radius(s.order), Boundaries::new(), comm)
                .unwrap()
                .with_motion(motion(), 0.25)
                .unwrap();
            step_at_cfl(&mut sim, 8);
            let halo = sim.halo().unwrap();
            let share = halo.share();
            let totals: Vec<u64> = exact::totals_of(&sim.cloud, share)
                .iter()
                .map(|t| t.to_bits())
                .collect();
            let errors = format!("{:?}", exact::errors_all_of(&sim.cloud, share, exact_state));
            let part = mote_cloud::halo::own_part(halo, &sim.cloud, sim.cloud.orders());
            let stream = mote_core::comm::RootStream::new(halo.comm(), part.len());
            let mut gathered = Vec::new();
            for a in arrays(&part) {
                let mut all = Vec::new();
                stream.stream(&a, a.len() / part.len().max(1), |_, piece| {
                    all.extend_from_slice(piece)
                });
                gathered.push(all);
            }
            (totals, errors, stream.is_root().then_some(gathered))
        });
        for (r, (t, e, gathered)) in parts.into_iter().enumerate() {
            assert_eq!(t, totals, "rank {r} of {k}: totals");
            assert_eq!(e, errors, "rank {r} of {k}: error norms");
            match gathered {
                Some(a) => {
                    assert_eq!(r, 0, "only rank 0 gathers");
                    for (c, (got, want)) in a.iter().zip(&expected).enumerate() {
                        assert!(got == want, "{k} ranks: gathered array {c} differs");
                    }
                }
                None => assert_ne!(r, 0, "rank 0 gathers"),
            }
        }
    }
}

/// A fixed split cloud's halo found from the rank's own particles alone
/// (`halo::split_own`: every particle within the rings' reach, pruned to the rings of the
/// local lists) is the rings of the whole cloud's neighbour graph (found plainly from the
/// one-process lists): the same particles with the same positions and ids, on 1-4 ranks, one
/// and two rings, periodic and with walls; the exchange gives every halo particle its owner's
/// value; and the own particles' lists (ring 1's too, with two rings) are the one-process
/// lists.
#[test]
fn a_halo_from_own_particles_is_the_graph_halo() {
    use mote_cloud::halo;
    use mote_cloud::{NeighbourList, NeighbourSearch};
    let backend = CpuBackend::threads(1);
    for walls in [false, true] {
        let cloud = blast(walls);
        let n = cloud.len();
        let r = radius(3);
        let mut whole = NeighbourList::<RowMajor>::default();
        NeighbourSearch::new(r)
            .unwrap()
            .build(&cloud, backend, &mut whole)
            .unwrap();
        for rings in [1, 2] {
            for k in 1..=4 {
                on_thread_ranks(&thread_ranks(k), |comm| {
                    let mine = halo::own_ranges(n, k)[comm.rank()].clone();
                    // The rings, plainly.
                    let mut graph: std::collections::BTreeSet<usize> = mine.clone().collect();
                    let ring: Vec<usize> = mine
                        .clone()
                        .flat_map(|i| whole.neighbours(i).map(|j| j as usize))
                        .collect();
                    graph.extend(ring.iter().copied());
                    if rings == 2 {
                        for &j in &ring {
                            graph.extend(whole.neighbours(j).map(|k| k as usize));
                        }
                    }
                    let graph: Vec<usize> = graph.into_iter().collect();
                    let own = rows(&cloud, mine.clone());
                    let (part, found, mut search) = halo::split_own::<f64, 2, RowMajor>(
                        own, mine.start, n, r, rings, backend, comm,
                    )
                    .unwrap();
                    let case = format!("rings {rings}, walls {walls}, rank of {k}");
                    assert_eq!(found.global(), graph.as_slice(), "{case}: held particles");
                    assert_eq!(found.own().len(), mine.len(), "{case}: own particles");
                    assert!(k == 1 || found.halo_len() > 0, "{case}: a halo");
                    for (i, &g) in graph.iter().enumerate() {
                        assert_eq!(part.position_of(i), cloud.position_of(g), "{case}");
                        assert_eq!(part.ids()[i], cloud.ids()[g], "{case}");
                    }
                    let mut values: Vec<f64> = (0..part.len())
                        .map(|i| {
                            if found.own().contains(&i) {
                                graph[i] as f64
                            } else {
                                -1.0
                            }
                        })
                        .collect();
                    found.exchange(&mut values, 1);
                    for (&g, &v) in graph.iter().zip(&values) {
                        assert_eq!(v, g as f64, "{case}: the owner's value of particle {g}");
                    }
                    let mut list = NeighbourList::<RowMajor>::default();
                    search.build(&part, backend, &mut list).unwrap();
                    let g = found.global();
                    let complete: Vec<usize> = if rings == 1 {
                        found.own().collect()
                    } else {
                        let mut c: Vec<usize> = found
                            .own()
                            .flat_map(|i| list.neighbours(i).map(|j| j as usize))
                            .collect();
                        c.extend(found.own());
                        c.sort_unstable();
                        c.dedup();
                        c
                    };
                    for i in complete {
                        let local: Vec<usize> = list.neighbours(i).map(|j| g[j as usize]).collect();
                        let one: Vec<usize> = whole.neighbours(g[i]).map(|j| j as usize).collect();
                        assert_eq!(local, one, "{case}: the list of particle {}", g[i]);
                    }
                });
            }
        }
    }
}

/// Every array of `cloud`'s particles `rows`, as bits: positions, volumes, tags, orders, ids
/// and states.
fn cloud_bits<const D: usize>(
    cloud: &Cloud<f64, D>,
    rows: std::ops::Range<usize>,
) -> Vec<Vec<u64>> {
    let bits = |x: &[f64]| x[rows.clone()].iter().map(|v| v.to_bits()).collect();
    let mut a: Vec<Vec<u64>> = cloud.positions().iter().map(|p| bits(p)).collect();
    a.push(bits(cloud.volumes()));
    a.push(
        cloud.tags()[rows.clone()]
            .iter()
            .map(|&t| t as u64)
            .collect(),
    );
    a.push(
        cloud.orders()[rows.clone()]
            .iter()
            .map(|&o| o as u64)
            .collect(),
    );
    a.push(cloud.ids()[rows.clone()].to_vec());
    a.extend((0..cloud.variables()).map(|v| bits(cloud.state(v))));
    a
}

/// Problems generated by parts (`ProblemOptions::ranks`: each rank its rows of the lattice,
/// then sorted along the Morton curve over the ranks) are the one-process problems' rows,
/// every array bit for bit, on 1-4 ranks: Kelvin-Helmholtz, Sedov (the deposit's volume
/// summed over the ranks), the isentropic vortex, the quadrant with boundary layers, a 3-D
/// advection wave. And Kelvin-Helmholtz split from its parts (`split_part`, no rank holding
/// the whole cloud) ends bitwise as one process.
#[test]
fn a_problem_generated_by_parts_is_the_one_process_problem() {
    type Build = fn(&ProblemOptions, f64) -> Result<Problem<f64, 2, Euler<2>>, CloudError>;
    let cases: [(&str, Build); 4] = [
        ("kelvin_helmholtz", problems::kelvin_helmholtz::<f64>),
        ("sedov", problems::sedov::<f64>),
        ("isentropic vortex", problems::isentropic_vortex::<f64>),
        ("quadrant", problems::quadrant::<f64>),
    ];
    let options = |ranks: Option<Arc<dyn Comm>>| ProblemOptions {
        resolution: 20,
        jitter: 0.3,
        seed: 9,
        boundary_layers: 2,
        ranks,
    };
    for (name, build) in cases {
        let one = build(&options(None), 1.4).unwrap().cloud;
        let n = one.len();
        for k in 1..=4 {
            let parts = on_thread_ranks(&thread_ranks(k), |comm| {
                let mine = mote_cloud::halo::own_ranges(n, k)[comm.rank()].clone();
                let part = build(&options(Some(comm)), 1.4).unwrap().cloud;
                (mine, part)
            });
            for (r, (mine, part)) in parts.into_iter().enumerate() {
                assert_eq!(part.len(), mine.len(), "{name}: rank {r} of {k}");
                assert!(
                    cloud_bits(&part, 0..part.len()) == cloud_bits(&one, mine),
                    "{name}: rank {r} of {k} differs from one process's rows"
                );
            }
        }
    }
    let wave = |ranks| {
        problems::advection_wave::<f64, 3>(&ProblemOptions {
            resolution: 10,
            ..options(ranks)
        })
        .unwrap()
        .cloud
    };
    let one = wave(None);
    let parts = on_thread_ranks(&thread_ranks(3), |comm| wave(Some(comm)));
    let mut next = 0;
    for part in parts {
        let rows = next..next + part.len();
        assert!(
            cloud_bits(&part, 0..part.len()) == cloud_bits(&one, rows),
            "3-D wave"
        );
        next += part.len();
    }
    assert_eq!(next, one.len());

    // Split from the parts.
    let s = Setting {
        mood: None,
        ..SETTINGS[0]
    };
    let kh = |ranks| {
        let mut cloud = problems::kelvin_helmholtz::<f64>(&options(ranks), 1.4)
            .unwrap()
            .cloud;
        for o in cloud.orders_mut() {
            *o = 2;
        }
        cloud
    };
    let r = default_radius_factor::<2>(2) / 20.0;
    let one = advance(one_process(kh(None), s, r).unwrap(), 5);
    let n = kh(None).len();
    for k in 1..=4 {
        let parts = on_thread_ranks(&thread_ranks(k), |comm| {
            let own = kh(Some(comm.clone()));
            let first = mote_cloud::halo::own_ranges(n, k)[comm.rank()].start;
            let sim = Sim::split_part(
                own,
                first,
                n,
                r,
                scheme(s),
                Tableau::ssp_rk3(),
                CpuBackend::threads(1),
                Boundaries::new(),
                comm,
            )
            .unwrap();
            advance(sim, 5)
        });
        let mut next = 0;
        for (rank, part) in parts.into_iter().enumerate() {
            let own = part.states[0].len();
            assert_eq!(part.first, next);
            for v in 0..4 {
                assert!(
                    part.states[v] == one.states[v][next..next + own],
                    "variable {v} on rank {rank} of {k}"
                );
            }
            assert_eq!(part.steps, one.steps);
            next += own;
        }
        assert_eq!(next, n);
    }
}

/// Boundary particles prepared by each rank for its own (`Boundaries::prepare_own`) fail as
/// one process fails, on every rank alike: a tag without a condition (the quadrant's top face
/// has none, so its first particle there fails: late in the Morton order, on a rank other than
/// the first) and corner particles with no interior particle within two neighbour hops (six
/// boundary layers), each named by its one-process index, whichever rank holds it.
#[test]
fn a_split_cloud_agrees_on_boundary_failures() {
    use mote_cloud::boundary::Outflow;
    let s = SETTINGS[0];
    let build = |layers: usize| {
        let options = ProblemOptions {
            resolution: 40,
            jitter: 0.2,
            seed: 3,
            boundary_layers: layers,
            ranks: None,
        };
        let mut p = problems::quadrant::<f64>(&options, 1.4).unwrap();
        for o in p.cloud.orders_mut() {
            *o = 2;
        }
        p
    };
    let radius = default_radius_factor::<2>(2) / 40.0;
    let no_top = || {
        Boundaries::<f64, 2>::new()
            .with_axis(0, Outflow)
            .with(Cloud::<f64, 2>::face_tag(1, false), Outflow)
    };
    let cases: [(&str, usize, bool); 2] =
        [("a missing condition", 2, true), ("far corners", 6, false)];
    for (name, layers, partial) in cases {
        let p = build(layers);
        let boundaries = if partial { no_top() } else { p.boundaries };
        let one = one_process(p.cloud, s, radius)
            .unwrap()
            .with_boundaries(boundaries)
            .err()
            .unwrap_or_else(|| panic!("{name}: refused on one process"));
        let said = one.to_string();
        assert!(
            said.contains(if partial {
                "none for tag 4"
            } else {
                "two neighbour hops"
            }),
            "{name}: {said}"
        );
        for k in [2, 3, 4] {
            let errors = on_thread_ranks(&thread_ranks(k), |comm| {
                let p = build(layers);
                let boundaries = if partial { no_top() } else { p.boundaries };
                split(p.cloud, s, radius, boundaries, comm).err()
            });
            for (r, e) in errors.into_iter().enumerate() {
                assert_eq!(e.as_ref(), Some(&one), "{name}: rank {r} of {k}");
            }
        }
    }
}
