use std::path::Path;

use mote_core::ParticleData;
use mote_gravity::initial_conditions as ic;
use mote_io::checkpoint;
use mote_io::config::InitialConditions;
use mote_io::runner::*;
use mote_io::{GravityConfig, Source};

fn config(text: &str, overrides: &[&str]) -> GravityConfig {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    GravityConfig::parse(&Source { file: None, text }, &o).unwrap()
}

const PLUMMER: &str = "physics = \"gravity\"\n[run]\nend_time = 0.5\ndt = 0.015625\nprecision = \"f64\"\n\
    [initial_conditions]\nparticles = 200\nseed = 4\n[solver]\nsoftening = 0.01\n[output]\nsnapshots = 10\n";

fn final_state(dir: &Path) -> (checkpoint::Header, ParticleData<f64>) {
    let path = dir.join("checkpoint.mote");
    let (h, arrays) = checkpoint::read_header(&path).unwrap();
    let p = checkpoint::read_particles::<f64>(&path, &arrays).unwrap();
    (h, p)
}

#[test]
fn a_resumed_run_is_bitwise_identical_to_an_uninterrupted_one() {
    let tmp = tempfile::tempdir().unwrap();
    for (integrator, solver) in [
        ("leapfrog", "direct"),
        ("yoshida4", "direct"),
        ("rk4", "direct"),
        ("leapfrog", "tree"),
        ("rk4", "tree"),
    ] {
        let solver = format!("solver.kind={solver}");
        let kind = format!("integrator.kind={integrator}");
        let integrator = format!("{integrator}-{}", &solver[12..]);
        let whole = tmp.path().join(format!("whole-{integrator}"));
        run_gravity(
            &config(PLUMMER, &[&kind, &solver]),
            &whole,
            false,
            "test",
            &mut |_| {},
        )
        .unwrap();
        // The same run stopped half way (its snapshot times are a subset), then resumed.
        let half = tmp.path().join(format!("half-{integrator}"));
        run_gravity(
            &config(
                PLUMMER,
                &[&kind, &solver, "run.end_time=0.25", "output.snapshots=5"],
            ),
            &half,
            false,
            "test",
            &mut |_| {},
        )
        .unwrap();
        let overrides = [
            "run.end_time=0.5".to_string(),
            "output.snapshots=10".to_string(),
        ];
        resume_gravity(
            &half.join("checkpoint.mote"),
            &overrides,
            "test",
            &mut |_| {},
        )
        .unwrap();
        let (ha, a) = final_state(&whole);
        let (hb, b) = final_state(&half);
        assert_eq!((ha.step, ha.time), (hb.step, hb.time), "{integrator}");
        for c in mote_core::Component::ALL {
            let bits = |s: &[f64]| s.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(a.component(c)),
                bits(b.component(c)),
                "{integrator}: {c:?}"
            );
        }
        assert_eq!(ha.snapshots, hb.snapshots);
        // The diagnostics continue where they stopped: same rows at the same times.
        let rows = |d: &Path| {
            std::fs::read_to_string(d.join("diagnostics.csv"))
                .unwrap()
                .lines()
                .count()
        };
        assert_eq!(rows(&whole), rows(&half), "{integrator}");
    }
}

#[test]
fn snapshots_hold_the_state_at_exact_times_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    // dt = 1/64 does not divide 0.05: each snapshot is taken at the first step boundary at or
    // after its time (no step is shortened for output); only the end (0.3, off the grid too)
    // is hit exactly.
    let c = config(PLUMMER, &["run.end_time=0.3", "output.snapshots=6"]);
    run_gravity(&c, &dir, false, "test", &mut |_| {}).unwrap();
    let pvd = std::fs::read_to_string(dir.join("snapshots.pvd")).unwrap();
    let times: Vec<f64> = pvd
        .split("timestep=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
        .collect();
    let expected: Vec<f64> = (0..=6)
        .map(|k| ((0.05 * k as f64 * 64.0).ceil() / 64.0).min(0.3))
        .collect();
    assert_eq!(times, expected);
    assert_eq!(expected[1..5], [0.0625, 0.109375, 0.15625, 0.203125]);
    let (h, p) = final_state(&dir);
    assert_eq!(h.time, 0.3);
    let bytes = std::fs::read(dir.join("snapshots/snap_00006.vtu")).unwrap();
    let arrays = mote_io::vtk::read_vtu(&bytes).unwrap();
    let f64s = |name: &str| -> Vec<f64> {
        assert_eq!(arrays[name].vtk_type, "Float64", "{name}");
        arrays[name].to_f64()
    };
    let points = f64s("Points");
    assert_eq!(points.len(), 3 * p.len());
    for i in [0, 57, 199] {
        assert_eq!(&points[3 * i..3 * i + 3], &p.positions().get(i)[..]);
    }
    let ids: Vec<u64> = bytemuck::pod_collect_to_vec(&arrays["id"].bytes);
    assert_eq!(ids, p.ids());
    assert_eq!(f64s("mass"), p.masses());
    assert_eq!(f64s("velocity")[3 * 5 + 1], p.velocities().get(5)[1]);
    assert_eq!(arrays["types"].bytes, vec![1u8; p.len()]);
    assert_eq!(arrays["velocity"].components, 3);
}

#[test]
fn a_nan_in_the_state_is_reported_with_the_particle() {
    let mut p = ic::plummer::<f64>(100, 3).unwrap();
    let csv = Path::new("runs/x/diagnostics.csv.partial");
    assert!(check_finite(&p, 5, 0.5, csv).is_ok());
    // Injected NaN in one particle's velocity, after a permutation so index != id.
    p.apply_permutation(&mote_core::Permutation::new((0..100).rev().collect()).unwrap());
    p.view_mut().velocity.set(10, [0.0, f64::NAN, 0.0]);
    let e = check_finite(&p, 7, 0.875, csv).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("step 7, time 0.875: particle id 89 (index 10)"),
        "{text}"
    );
    assert!(text.contains("velocity [0.0, NaN, 0.0]"), "{text}");
    assert!(text.contains("diagnostics.csv.partial"), "{text}");
}

#[test]
fn every_kind_builds_the_particles_it_announces() {
    use mote_io::config::InitialConditionsKind::*;
    for kind in [
        Plummer,
        UniformSphere,
        ColdCollapse,
        Kepler,
        DiscGalaxy,
        GalaxyCollision,
    ] {
        let c = InitialConditions {
            kind,
            particles: Some(64),
            ..Default::default()
        };
        let c = if kind == Kepler {
            InitialConditions {
                kind,
                ..Default::default()
            }
        } else {
            c
        };
        let p = initial_particles::<f32>(&c).unwrap();
        assert_eq!(
            p.len(),
            particle_count(&c.clone().with_defaults()),
            "{kind:?}"
        );
    }
}

/// Safety checkpoints by the wall clock (`output.checkpoint_wall_interval`): with a tiny
/// interval one exists before the run ends; with `"off"` only the end writes one. Neither
/// changes the steps.
#[test]
fn wall_clock_checkpoints_are_written_during_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    for (interval, expect_early) in [("\"1ns\"", true), ("\"off\"", false)] {
        let dir = tmp.path().join(interval.trim_matches('"'));
        let set = format!("output.checkpoint_wall_interval={interval}");
        let c = config(PLUMMER, &[&set, "output.diagnostics_every=1"]);
        let mut early = false;
        let report = run_gravity(&c, &dir, false, "test", &mut |p| {
            if p.step + 2 < p.total_steps && dir.join("checkpoint.mote").exists() {
                early = true;
            }
        })
        .unwrap();
        assert_eq!(early, expect_early, "{interval}");
        assert_eq!(
            report.steps, 32,
            "{interval}: 0.5 / (1/64) steps either way"
        );
    }
}

/// A checkpoint resumed away from its run directory lists only the snapshots that exist there
/// (the `.pvd` must not point at missing files).
#[test]
fn a_lone_checkpoint_resumes_without_listing_missing_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    run_gravity(
        &config(PLUMMER, &["run.end_time=0.25", "output.snapshots=5"]),
        &run,
        false,
        "test",
        &mut |_| {},
    )
    .unwrap();
    let lone = tmp.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    std::fs::copy(run.join("checkpoint.mote"), lone.join("checkpoint.mote")).unwrap();
    resume_gravity(
        &lone.join("checkpoint.mote"),
        &["run.end_time=0.5".to_string()],
        "test",
        &mut |_| {},
    )
    .unwrap();
    let pvd = std::fs::read_to_string(lone.join("snapshots.pvd")).unwrap();
    let files: Vec<&str> = pvd
        .split("file=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert!(!files.is_empty());
    for f in files {
        assert!(lone.join(f).is_file(), "{f} listed but missing");
    }
}

/// Every initial condition with every integrator runs on the tree and follows the direct run:
/// after a quarter of a time unit the positions agree to the tree's force error.
#[test]
fn every_initial_condition_and_integrator_runs_on_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    for ic in [
        "plummer",
        "uniform_sphere",
        "cold_collapse",
        "kepler",
        "disc_galaxy",
        "galaxy_collision",
    ] {
        for integrator in ["leapfrog", "yoshida4", "rk4"] {
            let mut ends = Vec::new();
            for solver in ["direct", "tree"] {
                let mut text = format!(
                    "physics = \"gravity\"\n[run]\nend_time = 0.25\ndt = 0.015625\nprecision = \"f64\"\n\
                     [initial_conditions]\nkind = \"{ic}\"\n"
                );
                if ic != "kepler" {
                    text += "particles = 300\n";
                }
                text += &format!(
                    "[solver]\nkind = \"{solver}\"\nsoftening = 0.02\n[integrator]\nkind = \"{integrator}\"\n[output]\nsnapshots = 0\n"
                );
                let dir = tmp.path().join(format!("{ic}-{integrator}-{solver}"));
                let report =
                    run_gravity(&config(&text, &[]), &dir, false, "test", &mut |_| {}).unwrap();
                assert_eq!(report.steps, 16, "{ic} {integrator} {solver}");
                ends.push(final_state(&dir).1);
            }
            let (d, t) = (&ends[0], &ends[1]);
            let scale = d.positions().x().iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let worst = (0..d.len())
                .map(|i| {
                    let (a, b) = (d.positions().get(i), t.positions().get(i));
                    (0..3).map(|c| (a[c] - b[c]).abs()).fold(0.0, f64::max)
                })
                .fold(0.0, f64::max);
            assert!(
                worst < 1e-4 * scale,
                "{ic} {integrator}: positions differ by {worst:e} (scale {scale})"
            );
        }
    }
}

/// The tree's arrays are priced with the particles: a limit that holds a direct run's particles
/// and integrator but not the tree's arrays stops the tree run before anything is allocated or
/// written.
#[test]
fn the_trees_memory_is_priced_before_the_run_starts() {
    use mote_core::{Budgeted, MemoryModel};
    use mote_gravity::tree::{Tree, TreeSettings};
    let n = 1_000_000usize;
    let particles = MemoryModel::of(&[&ParticleData::<f64>::new() as &dyn Budgeted]).per_particle;
    let tree =
        MemoryModel::of(&[&Tree::<f64>::new(TreeSettings::default().multipole) as &dyn Budgeted])
            .per_particle;
    assert_eq!(tree, 140, "tree bytes per particle, f64 monopole");
    // Room for the particles and the leapfrog (no storage), 100 bytes per particle short of the
    // tree.
    let limit = n as u64 * (particles + tree - 100);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let c = config(
        PLUMMER,
        &[
            "solver.kind=tree",
            &format!("initial_conditions.particles={n}"),
            &format!("run.memory_limit=\"{limit}\""),
        ],
    );
    let e = run_gravity(&c, &dir, false, "test", &mut |_| {}).unwrap_err();
    assert!(matches!(e, RunError::Capacity(_)), "{e}");
    assert!(e.to_string().contains("1000000 particles"), "{e}");
    assert!(!dir.exists(), "nothing written");
}

/// `[units]`: the Earth around the Sun in au, solar masses and km/s (G = 887.1 au (km/s)^2 /
/// Msun, the time unit au / (km/s) = 4.74 years). Over one sidereal year (365.2564 days, an
/// independent figure) the circular orbit closes, the snapshots give the orbital speed in km/s
/// (29.78: sqrt(G M / a)), the diagnostics' time is in the time unit and the energy in Msun
/// (km/s)^2; the relative energy error and the orbit's shape are those of the same run in
/// N-body units (the engine runs that one: it is G = 1 in the time sqrt(G) t).
#[test]
fn a_run_in_physical_units_is_the_same_orbit_in_those_units() {
    let tmp = tempfile::tempdir().unwrap();
    let year = 365.256_363 * 86_400.0 / 1.495_978_707e8;
    let text = format!(
        "physics = \"gravity\"\n[run]\nend_time = {year}\ndt = {}\n[initial_conditions]\n\
         kind = \"kepler\"\nsemi_major_axis = 1.0\neccentricity = 0.0\nm1 = 1.0\n\
         m2 = 3.003e-6\n[integrator]\nkind = \"yoshida4\"\n[output]\nsnapshots = 1\n\
         [units]\nlength = \"au\"\nmass = \"Msun\"\nvelocity = \"km/s\"\n",
        year / 2000.0
    );
    let c = config(&text, &[]);
    let dir = tmp.path().join("earth");
    let report = run_gravity(&c, &dir, false, "test", &mut |_| {}).unwrap();
    assert_eq!(report.time, year);
    let snapshot = |k: usize| {
        let bytes = std::fs::read(dir.join(format!("snapshots/snap_{k:05}.vtu"))).unwrap();
        let a = mote_io::vtk::read_vtu(&bytes).unwrap();
        (a["Points"].to_f64(), a["velocity"].to_f64())
    };
    let (x0, v0) = snapshot(0);
    let (x1, _) = snapshot(1);
    let relative = |p: &[f64]| [p[3] - p[0], p[4] - p[1], p[5] - p[2]];
    let (r0, r1, dv) = (relative(&x0), relative(&x1), relative(&v0));
    let closure = (0..3).map(|k| (r1[k] - r0[k]).powi(2)).sum::<f64>().sqrt();
    let speed = dv.iter().map(|v| v * v).sum::<f64>().sqrt();
    eprintln!("one year: the orbit closes to {closure:.2e} au; orbital speed {speed:.4} km/s");
    // The year is known to 1e-6 relative; the Sun's GM and the au to 1e-9.
    assert!(closure < 2e-5, "{closure}");
    assert!((speed - 29.7847).abs() < 1e-3, "{speed}");
    let text = std::fs::read_to_string(dir.join("diagnostics.csv")).unwrap();
    let last: Vec<f64> = text
        .lines()
        .last()
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(last[1], year);
    // E = -G M m / 2a in Msun (km/s)^2.
    let g = c.units().g;
    let expected = -g * 1.0 * 3.003e-6 / 2.0;
    assert!(
        (last[4] / expected - 1.0).abs() < 1e-5,
        "{} vs {expected}",
        last[4]
    );
    let provenance = std::fs::read_to_string(dir.join("provenance.json")).unwrap();
    assert!(
        provenance.contains("\"time\": \"au/(km/s)\""),
        "{provenance}"
    );
}
