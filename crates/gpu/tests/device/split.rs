//! Meshless runs split between ranks (threads standing in for MPI processes,
//! `mote_core::comm::thread_ranks`), each rank with its own device: the own particles' states
//! are one device's run's bit for bit (the passes' halo records refreshed from their owners,
//! the stable step and the finiteness check reduced over the ranks).

use mote_core::comm::{on_thread_ranks, thread_ranks};

use mote_cloud::boundary::Boundaries;
use mote_cloud::equations::Euler;
use mote_cloud::mood::{Criterion, HaloStrategy, MoodSettings, MoodStats};
use mote_cloud::scheme::{Formulation, Limiter, LimiterKind, LimiterMode};
use mote_cloud::{Cloud, Domain, LatticeOptions};
use mote_core::Backend;
use mote_gpu::GpuFloat;
use mote_gpu::meshless::{Scheme, Simulation};

use crate::{gpu, spec};

/// A jittered periodic lattice (Morton order) with a blast: a hot dense disc in moving gas.
fn blast<R: GpuFloat>(side: usize) -> Cloud<R, 2> {
    let options = LatticeOptions {
        spacing: 1.0 / side as f64,
        jitter: 0.3,
        seed: 7,
        boundary_layers: 0,
    };
    let mut cloud = Cloud::<R, 2>::lattice(Domain::unit_periodic(), options, 4).unwrap();
    cloud.reorder_morton();
    for i in 0..cloud.len() {
        let x = cloud.position_of(i);
        let r2 = (x[0] - 0.4).powi(2) + (x[1] - 0.55).powi(2);
        let (rho, p) = if r2 < 0.04 { (1.0, 10.0) } else { (0.125, 0.1) };
        let u = [rho, 0.1 * rho, 0.0, p / 0.4 + 0.5 * rho * 0.01];
        for (v, value) in u.into_iter().enumerate() {
            cloud.state_var_mut(v)[i] = R::cast(value);
        }
    }
    cloud.orders_mut().fill(3);
    cloud
}

/// The schemes: each formulation, a limiter, the WENO combination (two rings of halo for the
/// conservative formulation and WENO, one otherwise), MOOD with each criterion.
fn schemes() -> Vec<Scheme> {
    let mut out = Vec::new();
    let mut s = Scheme::new(2);
    s.limiter = Limiter::new(LimiterKind::BarthJespersen, LimiterMode::Soft);
    s.mood = MoodSettings::new(Criterion::U1, HaloStrategy::Epd1);
    out.push(s);
    let mut s = Scheme::new(3);
    s.formulation = Formulation::Conservative;
    s.mood = MoodSettings::new(Criterion::U2, HaloStrategy::Epd2);
    out.push(s);
    let mut s = Scheme::new(3);
    s.weno = Some(1000.0);
    s.mood = MoodSettings::new(Criterion::U1, HaloStrategy::Strict);
    out.push(s);
    let mut s = Scheme::new(3);
    s.limiter = Limiter::new(LimiterKind::Venkatakrishnan, LimiterMode::Soft);
    out.push(s);
    out
}

/// What a run gives back: the own particles' states, the steps' lengths (bits) and MOOD's
/// counts.
type Outcome<R> = (Vec<Vec<R>>, Vec<u64>, MoodStats);

/// Four steps at the stable step of the run.
fn advance<R: GpuFloat>(mut sim: Simulation<R, 2>) -> Outcome<R> {
    let mut steps = Vec::new();
    for _ in 0..4 {
        let dt = sim.stable_dt(0.3).unwrap();
        steps.push(dt.to_bits());
        sim.step(dt).unwrap();
    }
    let mood = sim.take_mood_stats();
    let own = sim.own_part().unwrap();
    sim.sync().unwrap();
    let cloud = own.as_ref().unwrap_or(sim.cloud());
    (
        (0..4).map(|v| cloud.state(v).to_vec()).collect(),
        steps,
        mood,
    )
}

/// This rank's part of a device run of `cloud` split between the ranks of `comm` (its own
/// rows cut here): the first own particle's one-process index and the simulation.
fn device_part<R: GpuFloat>(
    mut cloud: Cloud<R, 2>,
    equation: Euler<2>,
    boundaries: Boundaries<R, 2>,
    radius: f64,
    s: &Scheme,
    comm: std::sync::Arc<dyn mote_core::comm::Comm>,
) -> (usize, Result<Simulation<R, 2>, mote_gpu::GpuError>) {
    let (first, total) = mote_cloud::halo::own_rows(&mut cloud, comm.as_ref());
    let sim = Simulation::split_part(
        cloud,
        first,
        total,
        equation,
        boundaries,
        radius,
        s,
        Backend::Device(spec()),
        comm,
    );
    (first, sim)
}

fn split_runs<R: GpuFloat>() {
    let Some(g) = gpu() else {
        return;
    };
    if !g.supports(R::PRECISION) {
        eprintln!("SKIPPED: {} cannot compute in {}", g.name(), R::PRECISION);
        return;
    }
    drop(g);
    let euler = Euler::<2>::new(1.4).unwrap();
    // 900 particles: four blocks of the ranks' ownership, one per rank on four; 576: three
    // blocks, so that a fourth rank owns none.
    let cases = schemes()
        .into_iter()
        .map(|s| (s, 30))
        .chain([(Scheme::new(2), 24)]);
    for (s, side) in cases {
        let radius = 3.2 / side as f64;
        let whole = blast::<R>(side);
        let n = whole.len();
        let one = Simulation::new(
            whole.clone(),
            euler.clone(),
            Boundaries::new(),
            radius,
            &s,
            Backend::Device(spec()),
        )
        .unwrap();
        let (one, one_steps, one_mood) = advance(one);
        if s.mood.criterion != Criterion::None {
            assert!(
                one_mood.failures > 0,
                "{:?}: MOOD reduces some orders",
                s.mood
            );
        }
        for k in [1, 2, 3, 4] {
            let ranks = thread_ranks(k);
            let parts = on_thread_ranks(&ranks, |comm| {
                let (first, sim) = device_part(
                    whole.clone(),
                    euler.clone(),
                    Boundaries::new(),
                    radius,
                    &s,
                    comm,
                );
                let sim = sim.unwrap();
                let halo = sim.halo_particles().unwrap();
                (first, advance(sim), halo)
            });
            let mut next = 0;
            for (r, (first, (state, steps, mood), halo)) in parts.into_iter().enumerate() {
                assert_eq!(first, next, "rank {r} of {k} owns the next run");
                let own = state[0].len();
                if k > 1 && own > 0 {
                    assert!(halo > 0 && own + halo < n, "rank {r} of {k}: halo {halo}");
                }
                assert_eq!(steps, one_steps, "{k} ranks: time steps on rank {r}");
                assert_eq!(mood, one_mood, "{k} ranks: MOOD's counts on rank {r}");
                for v in 0..4 {
                    assert!(
                        state[v] == one[v][first..first + own],
                        "order {} {:?} WENO {:?}: variable {v} on rank {r} of {k} differs from one device's",
                        s.order,
                        s.formulation,
                        s.weno
                    );
                }
                next += own;
            }
            assert_eq!(next, n, "the ranks own every particle once");
            if k > 1 {
                for c in &ranks {
                    assert!(c.bytes_received() > 0, "{k} ranks: nothing exchanged");
                }
            }
        }
    }
}

#[test]
fn device_meshless_runs_split_between_ranks_are_bitwise_one_devices_run() {
    split_runs::<f32>();
    split_runs::<f64>();
}

/// Boundary particles on a split device run: each rank imposes the conditions on its own
/// boundary particles (prepared per rank on the host) and the halo's come from their owners;
/// the quadrant (outflow faces, MOOD) and the double Mach reflection (a wall, post-shock
/// inflow and a moving front, time-dependent) end bitwise as one device's run.
#[test]
fn device_meshless_runs_with_boundaries_split_between_ranks_are_one_devices_run() {
    use mote_cloud::CloudError;
    use mote_cloud::mls::default_radius_factor;
    use mote_cloud::problems::{self, Problem, ProblemOptions};
    let Some(g) = gpu() else {
        return;
    };
    if !g.supports(mote_core::Precision::F64) {
        eprintln!("SKIPPED: {} cannot compute in f64", g.name());
        return;
    }
    drop(g);
    type Build = fn(&ProblemOptions, f64) -> Result<Problem<f64, 2, Euler<2>>, CloudError>;
    let cases: [(&str, Build, usize); 2] = [
        ("quadrant", problems::quadrant::<f64>, 20),
        ("double Mach", problems::double_mach::<f64>, 12),
    ];
    let mut s = Scheme::new(2);
    s.limiter = Limiter::new(LimiterKind::BarthJespersen, LimiterMode::Soft);
    s.mood = MoodSettings::new(Criterion::U1, HaloStrategy::Epd1);
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
            p.cloud.orders_mut().fill(2);
            p
        };
        let radius = default_radius_factor::<2>(2) / resolution as f64;
        let p = problem();
        let n = p.cloud.len();
        let device = Backend::Device(spec());
        let one = Simulation::new(p.cloud, p.equation, p.boundaries, radius, &s, device).unwrap();
        let (one, one_steps, one_mood) = advance(one);
        assert!(one_mood.failures > 0, "{name}: MOOD reduces some orders");
        for k in [2, 3] {
            let parts = on_thread_ranks(&thread_ranks(k), |comm| {
                let p = problem();
                let (first, sim) = device_part(p.cloud, p.equation, p.boundaries, radius, &s, comm);
                let sim = sim.unwrap();
                (first, advance(sim))
            });
            let mut next = 0;
            for (r, (first, (state, steps, mood))) in parts.into_iter().enumerate() {
                assert_eq!(first, next);
                let own = state[0].len();
                for v in 0..4 {
                    assert!(
                        state[v] == one[v][first..first + own],
                        "{name}: variable {v} on rank {r} of {k} differs from one device's"
                    );
                }
                assert_eq!(steps, one_steps, "{name}: steps on rank {r} of {k}");
                assert_eq!(mood, one_mood, "{name}: MOOD on rank {r} of {k}");
                next += own;
            }
            assert_eq!(next, n);
        }
    }
}

/// A failure found on some ranks' particles only is every rank's, with one device's message:
/// a search radius too short for the fit's basis (too few neighbours at the first particle one
/// device finds), on 2 and 3 ranks.
#[test]
fn a_split_device_runs_fit_failure_is_one_devices_message_on_every_rank() {
    let Some(g) = gpu() else {
        return;
    };
    drop(g);
    let side = 30;
    let radius = 1.5 / side as f64;
    let euler = Euler::<2>::new(1.4).unwrap();
    let s = Scheme::new(3);
    let whole = blast::<f32>(side);
    let one = Simulation::new(
        whole.clone(),
        euler.clone(),
        Boundaries::new(),
        radius,
        &s,
        Backend::Device(spec()),
    )
    .err()
    .expect("too few neighbours for a second-degree fit")
    .to_string();
    assert!(one.contains("neighbour count"), "{one}");
    for k in [2, 3] {
        let errors = on_thread_ranks(&thread_ranks(k), |comm| {
            let (_, sim) = device_part(
                whole.clone(),
                euler.clone(),
                Boundaries::new(),
                radius,
                &s,
                comm,
            );
            sim.err().map(|e| e.to_string())
        });
        for (r, e) in errors.into_iter().enumerate() {
            let e = e.unwrap_or_else(|| panic!("rank {r} of {k} ran"));
            assert!(e.contains(&one), "rank {r} of {k}: {e} (one device: {one})");
        }
    }
}
