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
    create_run_dir(&run, true).unwrap();
    assert!(!run.join("keep.txt").exists());
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
