//! One simulation over several MPI processes (`mpirun --oversubscribe -n K`, K = 1 to 4, on
//! whatever cores the machine has): gravity (direct, tree) and meshless runs (Sod, a 2-D Euler
//! problem with MOOD, moving clouds) end bitwise identical to the one-process run, checkpoints
//! written on 4 (3) ranks resume on 2 identically, and a failure on one rank (a file it
//! cannot read, memory it cannot reserve, a NaN it computed, a signal) stops every rank with one
//! message naming the rank, within a timeout; gravity on a GPU per rank equals one device's run.
//! Built only with the `mpi` feature (Open MPI's `mpirun` must be on the PATH).
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::have_gpu;

/// How long any one launch may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(120);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// `mote ARGS` on `ranks` MPI processes (`None`: without mpirun), with `env` set, killed and
/// reported as a hang after [`HANG`].
fn launch(ranks: Option<usize>, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mote = env!("CARGO_BIN_EXE_mote");
    let mut cmd = match ranks {
        Some(k) => {
            let mut c = Command::new("mpirun");
            c.args([
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                &k.to_string(),
                mote,
            ]);
            c
        }
        None => Command::new(mote),
    };
    cmd.args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .expect("mpirun starts (install Open MPI: apt-get install openmpi-bin libopenmpi-dev)");
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > HANG {
            child.kill().ok();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{ranks:?} ranks, {args:?}: no exit after {HANG:?} (a rank hangs)\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `mote run examples/NAME` with one thread per rank and `sets`, into `dir`, on `ranks`
/// processes.
fn example(
    name: &str,
    ranks: Option<usize>,
    dir: &Path,
    sets: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let config = examples().join(name);
    let mut args = vec![
        "run",
        config.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--quiet",
        "--set",
        "run.threads=1",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    launch(ranks, &args, env)
}

/// `mote run examples/plummer.toml` with `sets`, into `dir`, on `ranks` processes.
fn plummer(ranks: Option<usize>, dir: &Path, sets: &[&str], env: &[(&str, &str)]) -> Output {
    example("plummer.toml", ranks, dir, sets, env)
}

/// Runs `name` with `sets` on one process (into `TAG-plain` under `tmp`), then on each of
/// `ranks` processes (`TAG-K`): every run succeeds with one summary line (rank 0's), writes the
/// one process's files byte for byte, and its provenance contains each of `expect(K)`. Returns
/// the one-process run's directory.
fn same_on_ranks(
    tmp: &Path,
    tag: &str,
    name: &str,
    sets: &[&str],
    ranks: &[usize],
    expect: impl Fn(usize) -> Vec<String>,
) -> PathBuf {
    let one = tmp.join(format!("{tag}-plain"));
    ok(&example(name, None, &one, sets, &[]));
    for &k in ranks {
        let dir = tmp.join(format!("{tag}-{k}"));
        let out = example(name, Some(k), &dir, sets, &[]);
        ok(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("finished:").count(), 1, "{stdout}");
        assert_same(&one, &dir);
        let provenance = std::fs::read_to_string(dir.join("provenance.json")).unwrap();
        for e in expect(k) {
            assert!(provenance.contains(&e), "{e} in {provenance}");
        }
    }
    one
}

/// The diagnostics without the wall-clock column, the checkpoint, and every snapshot: the
/// files two identical runs share byte for byte.
fn outputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let csv = std::fs::read_to_string(dir.join("diagnostics.csv")).unwrap();
    let csv: String = csv
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string() + "\n")
        .collect();
    let mut files = vec![("diagnostics.csv".to_string(), csv.into_bytes())];
    // Moving clouds write no checkpoint.
    if let Ok(bytes) = std::fs::read(dir.join("checkpoint.mote")) {
        files.push(("checkpoint.mote".to_string(), bytes));
    }
    let mut snaps: Vec<_> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    snaps.sort();
    assert!(!snaps.is_empty(), "{} has snapshots", dir.display());
    for s in snaps {
        files.push((
            s.file_name().unwrap().to_string_lossy().into_owned(),
            std::fs::read(&s).unwrap(),
        ));
    }
    files
}

fn assert_same(a: &Path, b: &Path) {
    let (x, y) = (outputs(a), outputs(b));
    assert_eq!(
        x.len(),
        y.len(),
        "{} and {}: file counts",
        a.display(),
        b.display()
    );
    for ((name, p), (_, q)) in x.iter().zip(&y) {
        assert!(
            p == q,
            "{name} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

#[test]
fn gravity_runs_on_one_to_four_ranks_are_bitwise_those_of_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 2] = [
        (
            "direct",
            &["run.end_time=0.125", "initial_conditions.particles=701"],
        ),
        (
            "tree",
            &[
                "run.end_time=0.125",
                "initial_conditions.particles=1501",
                "solver.kind=\"tree\"",
                "solver.multipole=\"quadrupole\"",
                "integrator.kind=\"yoshida4\"",
                "run.precision=\"f32\"",
                // A new cut by measured cost after every step on several ranks (the one
                // process ignores it): results must not change.
                "run.rebalance=1.0",
            ],
        ),
    ];
    for (name, sets) in cases {
        let one = same_on_ranks(tmp.path(), name, "plummer.toml", sets, &[1, 2, 3, 4], |k| {
            let mut expect = vec![format!("\"ranks\": {k}")];
            if k > 1 && name == "tree" {
                // 32 steps, each followed by a new cut: the ranks' particles moved.
                expect.push("\"rebalances\": 32".into());
            }
            expect
        });
        for k in 2..=4 {
            let p = std::fs::read_to_string(tmp.path().join(format!("{name}-{k}/provenance.json")))
                .unwrap();
            let p: serde_json::Value = serde_json::from_str(&p).unwrap();
            let migrated = p["migrated"].as_u64().expect("recorded on several ranks");
            // Re-cut after every step, the tree's ranks exchange particles; direct summation's
            // equal costs keep the first cut, and only the particles crossing it move.
            if name == "tree" {
                assert!(migrated > 0, "{k} ranks: nothing migrated");
            } else {
                assert!(
                    migrated < 701,
                    "{k} ranks: {migrated} migrations in 32 steps"
                );
            }
        }
        // Gathers in rounds (MPI's 32-bit counts cap one call; a 1000-byte cap here makes
        // every gather take several rounds): the same bytes.
        let dir = tmp.path().join(format!("{name}-rounds"));
        ok(&plummer(
            Some(3),
            &dir,
            sets,
            &[("MOTE_GATHER_LIMIT", "1000")],
        ));
        assert_same(&one, &dir);
    }
}

#[test]
fn gpu_gravity_runs_on_two_and_three_ranks_are_bitwise_those_of_one_device() {
    if !have_gpu() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 2] = [
        (
            "direct",
            &[
                "run.backend=\"gpu\"",
                "run.end_time=0.0625",
                "initial_conditions.particles=301",
            ],
        ),
        (
            "tree",
            &[
                "run.backend=\"gpu\"",
                "run.end_time=0.0625",
                "initial_conditions.particles=1501",
                "solver.kind=\"tree\"",
                "solver.multipole=\"quadrupole\"",
                "solver.group_size=32",
                "run.precision=\"f32\"",
            ],
        ),
    ];
    for (name, sets) in cases {
        same_on_ranks(tmp.path(), name, "plummer.toml", sets, &[2, 3], |_| {
            vec!["takes its machine's devices".to_string()]
        });
    }
    // A device index past the machine's devices: every rank stops with one message, nothing
    // written.
    let dir = tmp.path().join("no-device");
    let out = plummer(
        Some(2),
        &dir,
        &["run.backend=\"gpu\"", "run.device=\"wgpu:99\""],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.contains("wgpu:99") && e.contains("wgpu device(s)"), "{e}");
    // (Mesa's Vulkan loader prints its own `error:` lines about XDG_RUNTIME_DIR.)
    assert_eq!(
        e.matches("error: no GPU adapter").count(),
        1,
        "one message: {e}"
    );
    assert!(!dir.exists());
}

#[test]
fn gpu_meshless_runs_on_two_and_three_ranks_are_bitwise_those_of_one_device() {
    if !have_gpu() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Each rank takes a device and computes its own particles there, refreshing a halo from
    // the other ranks after every pass: Kelvin-Helmholtz with a limiter and with MOOD (u2,
    // epd2: the curvature pass and the halo cap), the isentropic vortex at third order in
    // single precision, Sod's tube and the quadrant problem with boundary conditions (each
    // rank imposes its own boundary particles', the halo's come from their owners) and MOOD.
    let cases: [(&str, &[&str]); 5] = [
        (
            "sod.toml",
            &[
                "run.backend=\"gpu\"",
                "problem.resolution=100",
                "run.end_time=0.1",
            ],
        ),
        (
            "quadrant.toml",
            &[
                "run.backend=\"gpu\"",
                "problem.resolution=20",
                "run.end_time=0.1",
            ],
        ),
        (
            "kelvin_helmholtz.toml",
            &[
                "run.backend=\"gpu\"",
                "problem.resolution=32",
                "run.end_time=0.05",
            ],
        ),
        (
            "kelvin_helmholtz.toml",
            &[
                "run.backend=\"gpu\"",
                "problem.resolution=32",
                "run.end_time=0.05",
                "scheme.mood=\"u2\"",
                "scheme.mood_strategy=\"epd2\"",
            ],
        ),
        (
            "vortex.toml",
            &[
                "run.backend=\"gpu\"",
                "problem.resolution=24",
                "run.end_time=0.2",
                "run.precision=\"f32\"",
            ],
        ),
    ];
    for (case, (name, sets)) in cases.into_iter().enumerate() {
        let tag = format!("gpu-{case}-{name}");
        same_on_ranks(tmp.path(), &tag, name, sets, &[2, 3], |k| {
            vec![
                format!("\"ranks\": {k}"),
                "\"halo_particles\"".to_string(),
                "takes its machine's devices".to_string(),
            ]
        });
    }
}

/// A gravity configuration (in `dir`, `file.toml`) whose initial conditions are `n` bodies on a
/// helix in a text table (`bodies.txt`), with shuffled ids where `ids`.
fn bodies_config(dir: &Path, n: usize, ids: bool) -> PathBuf {
    let bodies = dir.join("bodies.txt");
    let mut text = String::from(if ids {
        "x y z vx vy vz m id\n"
    } else {
        "x y z vx vy vz m\n"
    });
    for i in 0..n {
        let a = i as f64 * 0.7;
        let (x, y, z) = (a.cos(), a.sin(), 0.01 * i as f64);
        text += &format!("{x} {y} {z} 0 0.1 0 {}", 1.0 / n as f64);
        if ids {
            text += &format!(" {}", (i * 37) % (n + 4) + 5);
        }
        text += "\n";
    }
    std::fs::write(&bodies, text).unwrap();
    let config = dir.join("file.toml");
    std::fs::write(
        &config,
        format!(
            "physics = \"gravity\"\n[run]\nend_time = 0.0625\ndt = 0.0078125\nthreads = 1\n\
             [initial_conditions]\nkind = \"file\"\npath = {:?}\n[solver]\nsoftening = 0.05\n",
            bodies.to_str().unwrap()
        ),
    )
    .unwrap();
    config
}

/// Each rank makes (or reads) only its rows of the initial conditions (decision 0034): a galaxy
/// collision (two random streams, the ranks' cuts inside either galaxy), a cold collapse (the
/// uniform sphere's every position drawn before its velocities) and bodies from a file end
/// byte-identical to one process's run.
#[test]
fn gravity_initial_conditions_made_by_rows_give_one_process_runs() {
    let tmp = tempfile::tempdir().unwrap();
    // Ids in no order: the one-process order (the slots) is the file's, gathered over the ranks.
    let file = bodies_config(tmp.path(), 97, true);
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "collision",
            "plummer.toml",
            &[
                "run.end_time=0.0625",
                "initial_conditions.kind=\"galaxy_collision\"",
                "initial_conditions.particles=301",
            ],
        ),
        (
            "collapse",
            "plummer.toml",
            &[
                "run.end_time=0.0625",
                "initial_conditions.kind=\"cold_collapse\"",
                "initial_conditions.particles=401",
                "solver.kind=\"tree\"",
            ],
        ),
        // An absolute path: `example` joins it to nothing.
        ("file", file.to_str().unwrap(), &[]),
    ];
    for (tag, config, sets) in cases {
        same_on_ranks(tmp.path(), tag, config, sets, &[2, 3], |k| {
            vec![format!("\"ranks\": {k}")]
        });
    }
    // An HDF5 file (a run's first snapshot), read by each rank as hyperslabs of its rows.
    #[cfg(feature = "hdf5")]
    {
        let source = tmp.path().join("source");
        ok(&plummer(
            None,
            &source,
            &[
                "run.end_time=0.0078125",
                "initial_conditions.particles=555",
                "output.format=\"hdf5\"",
            ],
            &[],
        ));
        let snapshot = source.join("snapshots/snap_00000.hdf5");
        assert!(snapshot.is_file());
        let file = tmp.path().join("hdf5.toml");
        std::fs::write(
            &file,
            format!(
                "physics = \"gravity\"\n[run]\nend_time = 0.0625\ndt = 0.0078125\n\
                 [initial_conditions]\nkind = \"file\"\npath = {:?}\n[solver]\n\
                 softening = 0.05\nkind = \"tree\"\n",
                snapshot.to_str().unwrap()
            ),
        )
        .unwrap();
        same_on_ranks(
            tmp.path(),
            "hdf5",
            file.to_str().unwrap(),
            &[],
            &[2, 3],
            |k| vec![format!("\"ranks\": {k}")],
        );
    }
}

/// Meshless initial conditions from an HDF5 file read by rows (decision 0035): each rank reads
/// its rows as hyperslabs, the checks are agreed, and the cloud is sorted along the Morton curve
/// over the ranks, so each rank holds its part from the start. A periodic Kelvin-Helmholtz
/// snapshot and a bounded explosion (boundary particles and their conditions) run
/// byte-identical to one process's run on 2 and 3 ranks.
#[cfg(feature = "hdf5")]
#[test]
fn meshless_initial_conditions_read_by_rows_give_one_process_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let kh = tmp.path().join("kh-source");
    ok(&example(
        "kelvin_helmholtz.toml",
        None,
        &kh,
        &[
            "problem.resolution=24",
            "run.end_time=0.01",
            "output.format=\"hdf5\"",
        ],
        &[],
    ));
    let explosion = tmp.path().join("explosion.toml");
    std::fs::write(
        &explosion,
        "physics = \"meshless\"\n[run]\nend_time = 0.01\n[problem]\nkind = \"custom\"\n\
         dim = 2\nresolution = 20\nperiodic = false\n[problem.initial]\n\
         density = \"0.125 + 0.875 * ((x - 0.5)^2 + (y - 0.5)^2 < 0.04)\"\n\
         pressure = \"0.1 + 0.9 * ((x - 0.5)^2 + (y - 0.5)^2 < 0.04)\"\n\
         [output]\nformat = \"hdf5\"\n",
    )
    .unwrap();
    let bounded = tmp.path().join("explosion-source");
    ok(&example(
        explosion.to_str().unwrap(),
        None,
        &bounded,
        &[],
        &[],
    ));
    for (tag, source, periodic) in [("kh", &kh, true), ("explosion", &bounded, false)] {
        let snapshot = source.join("snapshots/snap_00000.hdf5");
        let config = tmp.path().join(format!("{tag}-file.toml"));
        std::fs::write(
            &config,
            format!(
                "physics = \"meshless\"\n[run]\nend_time = 0.02\n[problem]\nkind = \"file\"\n\
                 dim = 2\nperiodic = {periodic}\npath = {:?}\n",
                snapshot.to_str().unwrap()
            ),
        )
        .unwrap();
        same_on_ranks(
            tmp.path(),
            tag,
            config.to_str().unwrap(),
            &[],
            &[2, 3],
            |k| vec![format!("\"ranks\": {k}"), "\"halo_particles\"".to_string()],
        );
    }
}

/// HDF5 snapshots (written by rank 0 alone) are the one-process files, byte for byte.
#[cfg(feature = "hdf5")]
#[test]
fn hdf5_snapshots_of_a_run_on_three_ranks_are_those_of_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = &[
        "run.end_time=0.0625",
        "initial_conditions.particles=300",
        "output.format=\"hdf5\"",
    ];
    let (one, three) = (tmp.path().join("one"), tmp.path().join("three"));
    ok(&plummer(None, &one, sets, &[]));
    ok(&plummer(Some(3), &three, sets, &[]));
    assert!(
        outputs(&three)
            .iter()
            .any(|(name, _)| name.ends_with(".hdf5")),
        "HDF5 snapshots written"
    );
    assert_same(&one, &three);
}

#[test]
fn a_checkpoint_written_on_four_ranks_resumes_on_two_as_on_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = &["run.end_time=0.0625", "initial_conditions.particles=999"];
    let (one, four) = (tmp.path().join("one"), tmp.path().join("four"));
    ok(&plummer(None, &one, sets, &[]));
    ok(&plummer(Some(4), &four, sets, &[]));
    let resume = |ranks, dir: &Path| {
        let ckpt = dir.join("checkpoint.mote");
        launch(
            ranks,
            &[
                "resume",
                ckpt.to_str().unwrap(),
                "--quiet",
                "--set",
                "run.end_time=0.125",
            ],
            &[],
        )
    };
    ok(&resume(None, &one));
    ok(&resume(Some(2), &four));
    assert_same(&one, &four);
}

#[test]
fn a_failure_on_one_rank_stops_every_rank_with_a_message_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    // A file of bodies that rank 1 "cannot read": exit 2, nothing written.
    let config = bodies_config(tmp.path(), 64, false);
    let dir = tmp.path().join("read");
    let args = [
        "run",
        config.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--quiet",
    ];
    // The same run without a fault succeeds: the fault is what stops it.
    ok(&launch(Some(3), &args, &[]));
    std::fs::remove_dir_all(&dir).unwrap();
    let out = launch(Some(3), &args, &[("MOTE_FAULT", "read@1")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert_eq!(e.matches("error:").count(), 1, "one message: {e}");
    assert!(e.contains("rank 1 of 3: initial conditions"), "{e}");
    assert!(!dir.exists(), "a refused run writes nothing");

    // A user's initial state that is bad (a negative density at the right end of the top row
    // of a 24^2 lattice, between the rows of the 16^2 one the memory estimate builds: in the
    // last quadrant of the Morton curve) on the particles of the last ranks only: each rank
    // generates its own particles, and every rank stops with the message one process gives
    // (the first bad particle along the Morton curve), naming the rank that found it. Nothing
    // is written.
    let sets = [
        "problem.resolution=24",
        "problem.jitter=0",
        "problem.periodic=true",
        "problem.initial.density=\"1 - 2 * (y > 0.975) * (x > 0.75)\"",
    ];
    let dir = tmp.path().join("initial-one");
    let one = example("custom_explosion.toml", None, &dir, &sets, &[]);
    assert!(!one.status.success());
    let one = stderr(&one);
    let message = one
        .split("error: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{one}"))
        .trim()
        .to_string();
    assert!(message.contains("problem.initial.density"), "{one}");
    let dir = tmp.path().join("initial");
    let out = example("custom_explosion.toml", Some(3), &dir, &sets, &[]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert_eq!(e.matches("error:").count(), 1, "one message: {e}");
    assert!(e.contains(" of 3: ") && e.contains(&message), "{e}");
    assert!(!dir.exists(), "a refused run writes nothing");

    // A kinetic speed below the subcharacteristic bound, on a relaxation run whose ranks each
    // generated their own particles: the fastest particle is agreed over the ranks, so every
    // rank refuses with one process's message (naming the same particle).
    let sets = ["problem.resolution=1000", "relaxation.speed=0.5"];
    let dir = tmp.path().join("slow-one");
    let one = example("relaxed_burgers.toml", None, &dir, &sets, &[]);
    assert!(!one.status.success());
    let one = stderr(&one);
    assert!(one.contains("at particle id"), "{one}");
    let dir = tmp.path().join("slow");
    let out = example("relaxed_burgers.toml", Some(3), &dir, &sets, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert_eq!(e.matches("error:").count(), 1, "one message: {e}");
    assert!(e.contains(one.trim()), "{e}\nagainst one process's\n{one}");
    assert!(!dir.exists(), "a refused run writes nothing");

    // Memory rank 2 cannot reserve.
    let dir = tmp.path().join("memory");
    let out = plummer(
        Some(3),
        &dir,
        &[
            "initial_conditions.particles=300",
            "run.memory_limit=\"1 GiB\"",
        ],
        &[("MOTE_FAULT", "memory@2")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("rank 2 of 3: capacity exceeded"), "{e}");
    assert_eq!(e.matches("error:").count(), 1, "one message: {e}");

    // A NaN computed by rank 1 (for its first own particle) reaches every rank: every rank
    // stops at the same step, and the message names the rank where it began and the particle,
    // which is the one whose velocity went bad first.
    let dir = tmp.path().join("nan");
    let out = plummer(
        Some(3),
        &dir,
        &[
            "initial_conditions.particles=300",
            "run.end_time=0.125",
            "output.diagnostics_every=1",
        ],
        &[("MOTE_FAULT", "nan@1")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("non-finite state"), "{e}");
    assert!(e.contains("was computed on rank 1 of 3"), "{e}");
    let index_after = |text: &str| -> String {
        let at = e.find(text).unwrap_or_else(|| panic!("{text:?} in {e}")) + text.len();
        e[at..].chars().take_while(char::is_ascii_digit).collect()
    };
    let computed = index_after("(particle index ");
    assert!(!computed.is_empty(), "{e}");
    assert_eq!(
        index_after("(index "),
        computed,
        "the bad state is the bad acceleration's particle: {e}"
    );
    assert!(dir.join("diagnostics.csv.partial").exists());

    // Rank 1's locally essential tree outgrows its reservation: every rank stops at the same
    // step, and the message says why and where (not only that accelerations went bad).
    let dir = tmp.path().join("essential");
    let out = plummer(
        Some(3),
        &dir,
        &[
            "initial_conditions.particles=300",
            "solver.kind=\"tree\"",
            "output.diagnostics_every=1",
        ],
        &[("MOTE_FAULT", "essential@1")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert_eq!(e.matches("error:").count(), 1, "one message: {e}");
    assert!(
        e.contains(
            "the force evaluation failed on rank 1 of 3: the tree's arrays: capacity exceeded"
        ),
        "{e}"
    );
}

/// Rank 0 cannot write a split cloud's first snapshot (the other ranks have streamed their rows
/// to it): every rank stops with rank 0's message, nothing half-written is left.
#[test]
fn a_snapshot_rank_0_cannot_write_stops_every_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("write");
    let sets = ["problem.resolution=24", "run.end_time=0.05"];
    let fault = [("MOTE_FAULT", "write@0")];
    let out = example("kelvin_helmholtz.toml", Some(3), &dir, &sets, &fault);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert_eq!(e.matches("error:").count(), 1, "one message: {e}");
    assert!(
        e.contains("snap_00000.vtu") && e.contains("injected: MOTE_FAULT=write@0"),
        "{e}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|f| f.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "nothing half-written: {left:?}");
}

#[test]
fn a_signal_stops_every_rank_at_one_step_with_a_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sig");
    let config = examples().join("plummer.toml");
    let mote = env!("CARGO_BIN_EXE_mote");
    let mut child = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            "3",
            mote,
            "run",
        ])
        .args([
            config.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--quiet",
        ])
        .args(["--set", "run.threads=1", "--set", "run.end_time=1000"])
        .args(["--set", "initial_conditions.particles=2000"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun starts");
    // Wait until it is stepping, then interrupt mpirun, which passes SIGTERM to every rank.
    let start = Instant::now();
    while !std::fs::read_to_string(dir.join("diagnostics.csv.partial"))
        .is_ok_and(|t| t.lines().count() > 3)
    {
        assert!(start.elapsed() < HANG, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc_kill(child.id() as i32, 2) };
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > HANG {
            child.kill().ok();
            panic!("the ranks did not stop after a signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let e = stderr(&out);
    assert!(!out.status.success());
    assert!(e.contains("interrupted by SIGTERM"), "{e}");
    assert!(dir.join("checkpoint.mote").exists(), "{e}");
    // The checkpoint resumes (on another rank count), a few steps past where it stopped.
    let time: f64 = e
        .split(", time ")
        .nth(1)
        .and_then(|t| t.split(':').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the stop's time in {e}"));
    let ckpt = dir.join("checkpoint.mote");
    let end = format!("run.end_time={}", time + 0.03);
    ok(&launch(
        Some(2),
        &["resume", ckpt.to_str().unwrap(), "--quiet", "--set", &end],
        &[],
    ));
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

#[test]
fn meshless_runs_on_one_to_four_ranks_are_bitwise_those_of_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 6] = [
        // Sod's tube with MOOD (1-D), the quadrant Riemann problem with MOOD (2-D Euler; u1 and
        // epd1, then u2 with its curvature pass and epd2 with its halo cap), a cloud moving with
        // the flow, Burgers' equation through its kinetic relaxation (IMEX), and a prescribed
        // rotation with adaptivity.
        ("sod.toml", &["problem.resolution=300", "run.end_time=0.1"]),
        (
            "quadrant.toml",
            &["problem.resolution=25", "run.end_time=0.15"],
        ),
        (
            "quadrant.toml",
            &[
                "problem.resolution=25",
                "run.end_time=0.15",
                "scheme.mood=\"u2\"",
                "scheme.mood_strategy=\"epd2\"",
            ],
        ),
        (
            "lagrangian_vortex.toml",
            &["problem.resolution=24", "run.end_time=0.1"],
        ),
        (
            "relaxed_burgers.toml",
            &["problem.resolution=200", "run.end_time=0.1"],
        ),
        (
            "adaptive_rotation.toml",
            &["problem.resolution=20", "run.end_time=0.1"],
        ),
    ];
    for (case, (name, sets)) in cases.into_iter().enumerate() {
        let tag = format!("{case}-{name}");
        // Clouds are split between the ranks (each holds its own particles and a halo; a
        // moving one's particles migrate between them); adaptive ones keep the state on every
        // rank.
        let split = case < 5;
        same_on_ranks(tmp.path(), &tag, name, sets, &[2, 3, 4], |k| {
            let mut expect = vec![format!("\"ranks\": {k}"), "\"bytes_received\"".to_string()];
            if split {
                expect.push("\"halo_particles\"".to_string());
            }
            if case == 3 {
                // The moving cloud finds its halo again as the particles move.
                expect.push("\"halos_found\"".to_string());
            }
            expect
        });
    }
    // Periodic clouds are split between the ranks (each holds its own particles and a halo):
    // Kelvin-Helmholtz with MOOD (u1, epd1) and the limiter, then at order 3 in the
    // conservative formulation with u2 and epd2.
    let split: [&[&str]; 2] = [
        &[
            "problem.resolution=24",
            "run.end_time=0.1",
            "scheme.mood=\"u1\"",
        ],
        &[
            "problem.resolution=24",
            "run.end_time=0.05",
            "scheme.order=3",
            "scheme.formulation=\"conservative\"",
            "scheme.limiter=\"none\"",
            "scheme.mood=\"u2\"",
            "scheme.mood_strategy=\"epd2\"",
        ],
    ];
    for (case, sets) in split.into_iter().enumerate() {
        let tag = format!("split-{case}");
        let mut sets = sets.to_vec();
        if cfg!(feature = "hdf5") && case == 0 {
            // Compressed HDF5 snapshots too: every rank's rows streamed to rank 0.
            sets.extend(["output.format=\"both\"", "output.compression=4"]);
        }
        let one = same_on_ranks(
            tmp.path(),
            &tag,
            "kelvin_helmholtz.toml",
            &sets,
            &[2, 3, 4],
            |k| vec![format!("\"ranks\": {k}"), "\"halo_particles\"".to_string()],
        );
        if case == 0 {
            // Messages cut into pieces of at most 1 000 bytes (the halo's point-to-point
            // messages and the rows streamed to rank 0; MPI's 32-bit counts in small).
            let dir = tmp.path().join(format!("{tag}-pieces"));
            let limit = [("MOTE_GATHER_LIMIT", "1000")];
            ok(&example(
                "kelvin_helmholtz.toml",
                Some(3),
                &dir,
                &sets,
                &limit,
            ));
            assert_same(&one, &dir);
        }
    }
    // A meshless checkpoint written on 3 ranks resumes on 2 as on one process: a replicated
    // run (Sod's tube) and a split one (Kelvin-Helmholtz). Moving runs write no checkpoint.
    let resumed = [
        (
            "sod",
            ["problem.resolution=300", "run.end_time=0.05"],
            "0.1",
        ),
        (
            "kelvin_helmholtz",
            ["problem.resolution=24", "run.end_time=0.05"],
            "0.1",
        ),
    ];
    for (name, sets, end) in resumed {
        let (one, three) = (
            tmp.path().join(format!("{name}-one")),
            tmp.path().join(format!("{name}-three")),
        );
        let file = format!("{name}.toml");
        ok(&example(&file, None, &one, &sets, &[]));
        ok(&example(&file, Some(3), &three, &sets, &[]));
        for (ranks, dir) in [(None, &one), (Some(2), &three)] {
            let ckpt = dir.join("checkpoint.mote");
            let end = format!("run.end_time={end}");
            ok(&launch(
                ranks,
                &["resume", ckpt.to_str().unwrap(), "--quiet", "--set", &end],
                &[],
            ));
        }
        assert_same(&one, &three);
    }
}

#[test]
fn what_is_not_distributed_is_refused_on_every_rank() {
    let out = launch(Some(2), &["info"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("only `mote run` and `mote resume`"));
}
