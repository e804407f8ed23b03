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
