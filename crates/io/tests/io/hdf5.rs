//! HDF5 snapshots and initial conditions from files (the `hdf5` feature): round trips, a run
//! restarted from its own snapshot, and every bad input refused with its dataset and index.

use std::path::{Path, PathBuf};

use mote_io::runner::{RunError, run_gravity};
use mote_io::snapshot::{self, Values};
use mote_io::{GravityConfig, Source};

fn config(text: &str, overrides: &[String]) -> GravityConfig {
    GravityConfig::parse(&Source { file: None, text }, overrides).unwrap()
}

/// dt = 2^-6: every step boundary is exact in binary.
const PLUMMER: &str = "physics = \"gravity\"\n[run]\nend_time = 0.5\ndt = 0.015625\nprecision = \"f64\"\n\
    [initial_conditions]\nparticles = 100\nseed = 9\n[solver]\nsoftening = 0.01\n[output]\nsnapshots = 4\nformat = \"both\"\n";

fn snap(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("snapshots/snap_{k:05}.hdf5"))
}

fn dataset(path: &Path, name: &str) -> Values {
    snapshot::read_hdf5(path).unwrap().datasets[name].1.clone()
}

#[test]
fn a_snapshot_reads_back_bitwise_in_its_precision() {
    let tmp = tempfile::tempdir().unwrap();
    for precision in ["f64", "f32"] {
        let dir = tmp.path().join(precision);
        let c = config(PLUMMER, &[format!("run.precision=\"{precision}\"")]);
        run_gravity(&c, &dir, false, "test", &mut |_| {}).unwrap();
        let contents = snapshot::read_hdf5(&snap(&dir, 4)).unwrap();
        assert_eq!(contents.part_type, 1);
        assert_eq!(contents.time, 0.5);
        assert_eq!(contents.datasets["Coordinates"].0, vec![100, 3]);
        assert_eq!(contents.datasets["Masses"].0, vec![100]);
        let coords = &contents.datasets["Coordinates"].1;
        // The VTK twin holds the same values (in f64): the HDF5 file keeps the run's type.
        let vtu = std::fs::read(dir.join("snapshots/snap_00004.vtu")).unwrap();
        let points = mote_io::vtk::read_vtu(&vtu).unwrap()["Points"].to_f64();
        assert_eq!(coords.to_f64(), points);
        match (precision, coords) {
            ("f64", Values::F64(_)) | ("f32", Values::F32(_)) => {}
            _ => panic!("{precision} run stored {coords:?}"),
        }
        // The index lists every HDF5 file in order.
        assert_eq!(snapshot::hdf5_index(&dir).len(), 5);
        // Compressed: the same values.
        let zdir = tmp.path().join(format!("{precision}-z"));
        let mut o = vec![format!("run.precision=\"{precision}\"")];
        o.push("output.compression=6".into());
        run_gravity(&config(PLUMMER, &o), &zdir, false, "test", &mut |_| {}).unwrap();
        assert_eq!(&dataset(&snap(&zdir, 4), "Coordinates"), coords);
    }
}

#[test]
fn a_run_restarted_from_its_own_snapshot_continues_identically() {
    let tmp = tempfile::tempdir().unwrap();
    for integrator in ["leapfrog", "yoshida4", "rk4"] {
        let kind = format!("integrator.kind={integrator}");
        let whole = tmp.path().join(format!("whole-{integrator}"));
        run_gravity(
            &config(PLUMMER, std::slice::from_ref(&kind)),
            &whole,
            false,
            "test",
            &mut |_| {},
        )
        .unwrap();
        // Snapshot 2 is at t = 0.25; the second run starts there from the file alone.
        let ic = snap(&whole, 2);
        let text = format!(
            "physics = \"gravity\"\n[run]\nend_time = 0.5\ndt = 0.015625\nprecision = \"f64\"\n\
             [initial_conditions]\nkind = \"file\"\npath = \"{}\"\n[solver]\nsoftening = 0.01\n\
             [output]\nsnapshots = 4\nformat = \"hdf5\"\n",
            ic.display()
        );
        let second = tmp.path().join(format!("second-{integrator}"));
        run_gravity(&config(&text, &[kind]), &second, false, "test", &mut |_| {}).unwrap();
        let last = |dir: &Path| snapshot::hdf5_index(dir).last().cloned().unwrap();
        for name in ["Coordinates", "Velocities", "ParticleIDs"] {
            assert_eq!(
                dataset(&last(&whole), name),
                dataset(&last(&second), name),
                "{integrator}: {name}"
            );
        }
        assert_eq!(snapshot::read_hdf5(&last(&second)).unwrap().time, 0.5);
    }
}

/// Writes a `/PartType1` file with the given datasets (f64 `N x 3` or `N`, u64 ids).
fn write_ic(path: &Path, n: usize, edit: impl Fn(&str, &mut Vec<f64>)) {
    let file = hdf5::File::create(path).unwrap();
    let header = file.create_group("Header").unwrap();
    header
        .new_attr::<f64>()
        .create("Time")
        .unwrap()
        .write_scalar(&0.0)
        .unwrap();
    let g = file.create_group("PartType1").unwrap();
    for (name, comps) in [("Coordinates", 3), ("Velocities", 3), ("Masses", 1)] {
        let mut v: Vec<f64> = (0..n * comps)
            .map(|i| {
                if name == "Masses" {
                    1.0 / n as f64
                } else {
                    (i as f64 * 0.37).sin()
                }
            })
            .collect();
        edit(name, &mut v);
        if v.is_empty() {
            continue;
        }
        let rows = v.len() / comps;
        let shape = if comps == 1 {
            vec![rows]
        } else {
            vec![rows, comps]
        };
        g.new_dataset::<f64>()
            .shape(shape)
            .create(name)
            .unwrap()
            .write_raw(&v)
            .unwrap();
    }
}

fn file_config(path: &Path) -> GravityConfig {
    let text = format!(
        "physics = \"gravity\"\n[run]\nend_time = 0.0625\ndt = 0.015625\n\
         [initial_conditions]\nkind = \"file\"\npath = \"{}\"\n[solver]\nsoftening = 0.05\n",
        path.display()
    );
    config(&text, &[])
}

#[test]
fn a_user_file_runs_and_bad_files_are_refused_with_the_dataset_and_index() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.hdf5");
    write_ic(&good, 16, |_, _| {});
    let out = tmp.path().join("good-run");
    let report = run_gravity(&file_config(&good), &out, false, "test", &mut |_| {}).unwrap();
    assert_eq!(report.particles, 16);

    type Edit = Box<dyn Fn(&str, &mut Vec<f64>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "missing",
            Box::new(|n, v| {
                if n == "Velocities" {
                    v.clear()
                }
            }),
            "Velocities is missing",
        ),
        (
            "short",
            Box::new(|n, v| {
                if n == "Masses" {
                    v.pop();
                }
            }),
            "Masses has 15 rows, /PartType1/Coordinates 16",
        ),
        (
            "nan",
            Box::new(|n, v| {
                if n == "Coordinates" {
                    v[3 * 7 + 1] = f64::NAN
                }
            }),
            "Coordinates: index 7 (component y) is NaN",
        ),
        (
            "mass",
            Box::new(|n, v| {
                if n == "Masses" {
                    v[5] = -1.0
                }
            }),
            "Masses: index 5 is -1",
        ),
    ];
    for (name, edit, expected) in cases {
        let path = tmp.path().join(format!("{name}.hdf5"));
        write_ic(&path, 16, edit);
        let out = tmp.path().join(format!("{name}-run"));
        let e = run_gravity(&file_config(&path), &out, false, "test", &mut |_| {}).unwrap_err();
        assert!(matches!(e, RunError::InitialConditions(_)), "{name}: {e}");
        assert!(e.to_string().contains(expected), "{name}: {e}");
        assert!(
            !out.exists(),
            "{name}: a refused file wrote {}",
            out.display()
        );
    }

    // Repeated ids.
    let path = tmp.path().join("ids.hdf5");
    write_ic(&path, 4, |_, _| {});
    let file = hdf5::File::open_rw(&path).unwrap();
    file.group("PartType1")
        .unwrap()
        .new_dataset::<u64>()
        .shape(4)
        .create("ParticleIDs")
        .unwrap()
        .write_raw(&[3u64, 8, 1, 8])
        .unwrap();
    drop(file);
    let e = run_gravity(
        &file_config(&path),
        &tmp.path().join("ids-run"),
        false,
        "test",
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("ParticleIDs: index 3 repeats id 8 of index 1"),
        "{e}"
    );

    // Not HDF5 at all.
    let path = tmp.path().join("text.hdf5");
    std::fs::write(&path, "x y z\n").unwrap();
    let e = run_gravity(
        &file_config(&path),
        &tmp.path().join("text-run"),
        false,
        "test",
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("not a readable HDF5 snapshot"),
        "{e}"
    );
}

#[test]
fn a_text_table_gives_the_same_bodies_and_names_a_bad_line() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("pair.csv");
    std::fs::write(
        &csv,
        "# a Kepler pair\nx, y, z, vx, vy, vz, m, id\n0.5, 0, 0, 0, 0.5, 0, 0.5, 10\n-0.5, 0, 0, 0, -0.5, 0, 0.5, 20\n",
    )
    .unwrap();
    let b = mote_io::initial::read_bodies(&csv).unwrap();
    assert_eq!(b.ids, vec![10, 20]);
    assert_eq!(b.velocity[1], vec![0.5, -0.5]);
    let out = tmp.path().join("pair-run");
    let mut c = file_config(&csv);
    c.output.format = mote_io::snapshot::SnapshotFormat::Hdf5;
    run_gravity(&c, &out, false, "test", &mut |_| {}).unwrap();
    assert_eq!(
        dataset(&snap(&out, 0), "ParticleIDs"),
        Values::U64(vec![10, 20])
    );

    std::fs::write(&csv, "x y z vx vy vz m\n0 0 0 0 0 0 1\n1 0 0 0 zero 0 1\n").unwrap();
    let e = mote_io::initial::read_bodies(&csv).unwrap_err().to_string();
    assert!(
        e.contains("line 3, column vy: `zero` is not a number"),
        "{e}"
    );
    std::fs::write(&csv, "x y z vx vy m\n").unwrap();
    let e = mote_io::initial::read_bodies(&csv).unwrap_err().to_string();
    assert!(e.contains("column `vz` is missing"), "{e}");
}

#[test]
fn a_failed_write_leaves_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("snap.hdf5");
    let mut s = snapshot::Snapshot {
        header: snapshot::Header {
            family: snapshot::Family::Gravity,
            dimension: 3,
            time: 1.0,
            box_size: 0.0,
            units_cgs: None,
            unit_names: ["1", "1", "1", "1"].map(String::from),
            compression: 0,
            spacing: Vec::new(),
            config: String::new(),
            commit: "test".into(),
        },
        columns: vec![
            snapshot::Column::vector("Coordinates", Values::F64(vec![0.0; 6])),
            // Two datasets of one name: HDF5 refuses the second, half-way through the file.
            snapshot::Column::scalar("Masses", Values::F64(vec![1.0; 2])),
            snapshot::Column::scalar("Masses", Values::F64(vec![1.0; 2])),
        ],
    };
    assert!(snapshot::write_hdf5(&path, &s).is_err());
    assert!(!path.exists());
    assert!(!mote_io::files::partial_path(&path).exists());
    s.columns.pop();
    snapshot::write_hdf5(&path, &s).unwrap();
    assert!(path.exists() && !mote_io::files::partial_path(&path).exists());
}

fn meshless(text: &str) -> mote_io::MeshlessConfig {
    mote_io::MeshlessConfig::parse(&Source { file: None, text }, &[]).unwrap()
}

const SCHEME: &str = "[scheme]\norder = 2\nlimiter = \"bj\"\nmood = \"u1\"\n\
    [output]\nsnapshots = 2\nformat = \"hdf5\"\n";

const STATE: [&str; 7] = [
    "Coordinates",
    "Density",
    "momentum_x",
    "momentum_y",
    "energy",
    "ParticleIDs",
    "Tag",
];

/// The final state's datasets of a meshless run (those of [`STATE`] it has).
fn final_state(dir: &Path) -> Vec<(&'static str, Vec<f64>)> {
    let last = snapshot::hdf5_index(dir).last().cloned().unwrap();
    let c = snapshot::read_hdf5(&last).unwrap();
    STATE
        .iter()
        .filter_map(|n| c.datasets.get(*n).map(|d| (*n, d.1.to_f64())))
        .collect()
}

/// Asserts `a` and `b` hold the same datasets bit for bit, naming the first difference.
fn assert_same(a: &[(&str, Vec<f64>)], b: &[(&str, Vec<f64>)]) {
    assert_eq!(a.len(), b.len());
    for ((name, x), (_, y)) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len(), "{name}: lengths");
        if let Some(i) = (0..x.len()).find(|&i| x[i].to_bits() != y[i].to_bits()) {
            panic!("{name}: index {i}: {} against {}", x[i], y[i]);
        }
    }
}

#[test]
fn a_meshless_run_from_its_own_snapshot_or_a_users_file_runs_identically() {
    let tmp = tempfile::tempdir().unwrap();
    // Toro's explosion on a box with outflow faces (boundary particles, MOOD).
    let custom = format!(
        "physics = \"meshless\"\n[run]\nend_time = 0.02\n[problem]\nkind = \"custom\"\n\
         dim = 2\nresolution = 20\nperiodic = false\n[problem.initial]\n\
         density = \"0.125 + 0.875 * ((x - 0.5)^2 + (y - 0.5)^2 < 0.04)\"\n\
         pressure = \"0.1 + 0.9 * ((x - 0.5)^2 + (y - 0.5)^2 < 0.04)\"\n{SCHEME}"
    );
    let first = tmp.path().join("first");
    mote_io::meshless::run_meshless(&meshless(&custom), &first, false, "test", &mut |_| {})
        .unwrap();
    let from_file = format!(
        "physics = \"meshless\"\n[run]\nend_time = 0.02\n[problem]\nkind = \"file\"\n\
         dim = 2\nperiodic = false\npath = \"{}\"\n{SCHEME}",
        snap(&first, 0).display()
    );
    let second = tmp.path().join("second");
    mote_io::meshless::run_meshless(&meshless(&from_file), &second, false, "test", &mut |_| {})
        .unwrap();
    let a = final_state(&first);
    assert_eq!(a.len(), 7);
    assert_same(&a, &final_state(&second));

    // A user's file (primitive variables only, no volumes, tags or ids): a 1-D periodic
    // two-state gas at the lattice's positions runs as the same state given as expressions.
    let n = 32;
    let path = tmp.path().join("user.hdf5");
    {
        let file = hdf5::File::create(&path).unwrap();
        let g = file.create_group("PartType0").unwrap();
        let x: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
        let coords: Vec<f64> = x.iter().flat_map(|&x| [x, 0.0, 0.0]).collect();
        let put = |name: &str, v: &[f64], comps: usize| {
            let shape = if comps == 1 {
                vec![v.len()]
            } else {
                vec![v.len() / comps, comps]
            };
            g.new_dataset::<f64>()
                .shape(shape)
                .create(name)
                .unwrap()
                .write_raw(v)
                .unwrap();
        };
        put("Coordinates", &coords, 3);
        put(
            "Density",
            &x.iter()
                .map(|&x| if x < 0.5 { 1.0 } else { 0.125 })
                .collect::<Vec<_>>(),
            1,
        );
        put(
            "Pressure",
            &x.iter()
                .map(|&x| if x < 0.5 { 1.0 } else { 0.1 })
                .collect::<Vec<_>>(),
            1,
        );
        put("Velocities", &vec![0.0; 3 * n], 3);
    }
    let common = format!("[run]\nend_time = 0.05\n{SCHEME}");
    let by_file = format!(
        "physics = \"meshless\"\n[problem]\nkind = \"file\"\npath = \"{}\"\n{common}",
        path.display()
    );
    let by_expr = format!(
        "physics = \"meshless\"\n[problem]\nkind = \"custom\"\nresolution = {n}\njitter = 0.0\n\
         [problem.initial]\ndensity = \"0.125 + 0.875 * (x < 0.5)\"\n\
         pressure = \"0.1 + 0.9 * (x < 0.5)\"\n{common}"
    );
    let (f, e) = (tmp.path().join("by-file"), tmp.path().join("by-expr"));
    mote_io::meshless::run_meshless(&meshless(&by_file), &f, false, "test", &mut |_| {}).unwrap();
    mote_io::meshless::run_meshless(&meshless(&by_expr), &e, false, "test", &mut |_| {}).unwrap();
    let (a, b) = (final_state(&f), final_state(&e));
    // Density, momentum and energy (ids and tags agree too: 0..n, all interior).
    assert_same(&a[1..4], &b[1..4]);

    // Bad meshless files.
    let refused = |text: String, expected: &str| {
        let out = tmp.path().join("refused");
        let e = mote_io::meshless::run_meshless(&meshless(&text), &out, false, "test", &mut |_| {})
            .unwrap_err();
        assert!(e.to_string().contains(expected), "{e}");
        assert!(!out.exists());
    };
    let bad = tmp.path().join("bad.hdf5");
    std::fs::copy(&path, &bad).unwrap();
    {
        let file = hdf5::File::open_rw(&bad).unwrap();
        file.group("PartType0").unwrap().unlink("Pressure").unwrap();
    }
    refused(
        format!(
            "physics = \"meshless\"\n[problem]\nkind = \"file\"\npath = \"{}\"\n",
            bad.display()
        ),
        "dataset /PartType0/Pressure is missing",
    );
    refused(
        format!(
            "physics = \"meshless\"\n[problem]\nkind = \"file\"\nperiodic = false\npath = \"{}\"\n",
            path.display()
        ),
        "a box with faces needs its boundary particles: dataset /PartType0/Tag",
    );
    refused(
        format!(
            "physics = \"meshless\"\n[problem]\nkind = \"file\"\nequation = \"burgers\"\npath = \"{}\"\n",
            path.display()
        ),
        "dataset /PartType0/u is missing",
    );
}

#[test]
fn pictures_drawn_from_hdf5_snapshots_are_those_drawn_from_vtk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sod");
    let c = meshless(
        "physics = \"meshless\"\n[problem]\nkind = \"sod\"\nresolution = 100\n\
         [output]\nsnapshots = 2\nformat = \"both\"\n",
    );
    mote_io::meshless::run_meshless(&c, &dir, false, "test", &mut |_| {}).unwrap();
    let movie = mote_io::plot::FieldOptions {
        snapshot: None,
        movie: true,
    };
    let draw = || {
        mote_io::plot::plot_run(&dir, &movie).unwrap();
        ["profile.png", "movie.gif"].map(|f| std::fs::read(dir.join(f)).unwrap())
    };
    // ParaView's collection lists the VTK files only, snapshots.json the HDF5 ones.
    let pvd = std::fs::read_to_string(dir.join("snapshots.pvd")).unwrap();
    assert_eq!(pvd.matches(".vtu").count(), 3);
    assert!(!pvd.contains(".hdf5"), "{pvd}");
    assert_eq!(snapshot::hdf5_index(&dir).len(), 3);
    let from_vtk = draw();
    // Without the .pvd the pictures come from the HDF5 files snapshots.json lists.
    std::fs::remove_file(dir.join("snapshots.pvd")).unwrap();
    let from_hdf5 = draw();
    assert!(from_vtk == from_hdf5, "the pictures differ");
}

/// Bodies read by rows on 1 to 4 ranks (threads standing in for MPI processes): the ranks'
/// rows are the file's bodies (hyperslabs), and a bad file gets one process's message on every
/// rank: the first failing check's first bad index (a later check's earlier index on another
/// rank does not win), the smallest repeated id with its first two indices.
#[test]
fn bodies_read_by_rows_on_ranks_are_the_files_and_fail_as_one_process() {
    use mote_core::comm::{on_thread_ranks, thread_ranks};
    use mote_io::initial::{read_bodies, read_bodies_rows};
    let tmp = tempfile::tempdir().unwrap();
    let n = 1_037;
    let ids = |path: &Path, ids: &[u64]| {
        let file = hdf5::File::open_rw(path).unwrap();
        file.group("PartType1")
            .unwrap()
            .new_dataset::<u64>()
            .shape(ids.len())
            .create("ParticleIDs")
            .unwrap()
            .write_raw(ids)
            .unwrap();
    };
    let good = tmp.path().join("good.hdf5");
    write_ic(&good, n, |_, _| {});
    ids(
        &good,
        &(0..n as u64)
            .map(|i| (i * 389) % 1_041 + 7)
            .collect::<Vec<_>>(),
    );
    let whole = read_bodies(&good).unwrap();
    for k in 1..=4 {
        let ranks = thread_ranks(k);
        let parts = on_thread_ranks(&ranks, |c| read_bodies_rows(&good, c.as_ref()).unwrap());
        let mut next = 0;
        for p in &parts {
            assert_eq!((p.first, p.total), (next, n), "{k} ranks");
            let rows = p.first..p.first + p.bodies.len();
            for d in 0..3 {
                assert_eq!(p.bodies.position[d], whole.position[d][rows.clone()]);
                assert_eq!(p.bodies.velocity[d], whole.velocity[d][rows.clone()]);
            }
            assert_eq!(p.bodies.mass, whole.mass[rows.clone()]);
            assert_eq!(p.bodies.ids, whole.ids[rows.clone()]);
            next = rows.end;
        }
        assert_eq!(next, n);
    }
    // A NaN position late in the file and a bad mass early: the positions are checked first.
    let bad = tmp.path().join("bad.hdf5");
    write_ic(&bad, n, |name, v| match name {
        "Coordinates" => v[3 * 900 + 1] = f64::NAN,
        "Masses" => v[3] = 0.0,
        _ => {}
    });
    // Ids repeated at 10 and 950 (id 5) and at 20 and 30 (id 2000): the smaller id is named.
    let twice = tmp.path().join("ids.hdf5");
    write_ic(&twice, n, |_, _| {});
    let mut repeated: Vec<u64> = (0..n as u64).map(|i| i + 100).collect();
    (repeated[10], repeated[950], repeated[20], repeated[30]) = (5, 5, 2_000, 2_000);
    ids(&twice, &repeated);
    for (path, expected) in [
        (&bad, "Coordinates: index 900 (component y) is NaN"),
        (&twice, "ParticleIDs: index 950 repeats id 5 of index 10"),
    ] {
        let one = read_bodies(path).unwrap_err().to_string();
        assert!(one.contains(expected), "{one}");
        for k in 2..=4 {
            let ranks = thread_ranks(k);
            let errors = on_thread_ranks(&ranks, |c| {
                read_bodies_rows(path, c.as_ref()).unwrap_err().to_string()
            });
            for e in &errors {
                assert!(e.contains(expected), "{k} ranks: {e}");
                assert_eq!(e, &errors[0], "{k} ranks: every rank's message");
            }
        }
    }
}
