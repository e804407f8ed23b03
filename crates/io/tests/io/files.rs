use mote_io::files::*;
use std::fs;

#[test]
fn atomic_write_leaves_no_partial_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("a.toml");
    write_atomic(&p, b"x = 1\n").unwrap();
    write_atomic(&p, b"x = 2\n").unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "x = 2\n");
    assert!(!partial_path(&p).exists());
}

#[test]
fn run_dir_is_not_overwritten_without_force() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    create_run_dir(&run, false).unwrap();
    fs::write(run.join("keep.txt"), "old").unwrap();
    let e = create_run_dir(&run, false).unwrap_err();
    assert!(e.message.contains("--force"), "{e}");
    assert!(run.join("keep.txt").exists());
    // Not a run directory (no provenance.json of mote's): --force is refused, nothing touched.
    let e = create_run_dir(&run, true).unwrap_err();
    assert!(e.message.contains("not a mote run directory"), "{e}");
    assert!(run.join("keep.txt").exists());
    fs::write(run.join("provenance.json"), "{\"physics\": \"gravity\"}").unwrap();
    assert!(
        create_run_dir(&run, true).is_err(),
        "a provenance.json not mote's"
    );
    assert!(run.join("keep.txt").exists());
}

/// `--force` replaces an earlier run: the files the run wrote go, every other file stays.
#[test]
fn force_removes_only_the_files_a_run_wrote() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    fs::create_dir_all(run.join("snapshots")).unwrap();
    let mote_files = [
        "provenance.json",
        "config.toml",
        "diagnostics.csv.partial",
        "checkpoint.mote",
        "snapshots.pvd",
        "diagnostics.png",
        "snapshots/snap_00000.vtu",
        "snapshots/snap_00012.vtu",
    ];
    for f in mote_files {
        fs::write(run.join(f), "x").unwrap();
    }
    fs::write(
        run.join("provenance.json"),
        "{\"mote_version\": \"0.1.0\", \"physics\": \"gravity\"}",
    )
    .unwrap();
    let users = [
        "notes.txt",
        "config.toml.bak",
        "snapshots/snap_final.vtu",
        "snapshots/a.txt",
    ];
    for f in users {
        fs::write(run.join(f), "mine").unwrap();
    }
    assert!(is_run_dir(&run));
    create_run_dir(&run, true).unwrap();
    for f in mote_files {
        assert!(!run.join(f).exists(), "{f} removed");
    }
    for f in users {
        assert_eq!(fs::read_to_string(run.join(f)).unwrap(), "mine", "{f} kept");
    }
    // The file-system root is never replaced, whatever it holds.
    let e = check_run_dir(std::path::Path::new("/"), true).unwrap_err();
    assert!(e.message.contains("root"), "{e}");
}

#[test]
fn csv_rows_are_exact_and_the_name_final_only_at_the_end() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("diag.csv");
    let mut w = CsvWriter::create(&p, &["t", "e"]).unwrap();
    w.row(&[0.1, -0.25]).unwrap();
    w.row(&[1.0 / 3.0, 1e-300]).unwrap();
    w.row(&[16.0, -2.5e20]).unwrap();
    assert!(!p.exists());
    assert!(partial_path(&p).exists());
    w.finish().unwrap();
    let text = fs::read_to_string(&p).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "t,e");
    let second: Vec<f64> = rows[2].split(',').map(|v| v.parse().unwrap()).collect();
    assert_eq!(second, vec![1.0 / 3.0, 1e-300]);
    assert_eq!(rows[3], "16,-2.5e20");
}

/// A resumed run's diagnostics continue after the checkpoint's step: rows a run wrote after its
/// last checkpoint (before it stopped) are dropped, from the finished file or from the
/// `.partial` one a killed run leaves.
#[test]
fn resumed_csv_drops_rows_after_the_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("diag.csv");
    let write = |steps: &[f64]| {
        let mut w = CsvWriter::create(&p, &["step", "x"]).unwrap();
        for &s in steps {
            w.row(&[s, s / 2.0]).unwrap();
        }
        w
    };
    let steps = |p: &std::path::Path| -> Vec<f64> {
        fs::read_to_string(p)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect()
    };
    // Finished file, checkpoint at step 10.
    write(&[0.0, 5.0, 10.0, 15.0]).finish().unwrap();
    let mut w = CsvWriter::append(&p, &["step", "x"], 10).unwrap();
    assert!(!p.exists());
    w.row(&[12.0, 6.0]).unwrap();
    w.finish().unwrap();
    assert_eq!(steps(&p), vec![0.0, 5.0, 10.0, 12.0]);
    assert!(fs::read_to_string(&p).unwrap().starts_with("step,x\n"));
    // A killed run: only the partial file, rows up to 30; checkpoint at 20.
    fs::remove_file(&p).unwrap();
    drop(write(&[0.0, 10.0, 20.0, 30.0]));
    assert!(!p.exists());
    let mut w = CsvWriter::append(&p, &["step", "x"], 20).unwrap();
    w.row(&[25.0, 12.5]).unwrap();
    w.finish().unwrap();
    assert_eq!(steps(&p), vec![0.0, 10.0, 20.0, 25.0]);
}
