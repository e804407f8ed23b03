//! Files written from rows split between ranks (threads standing in for MPI processes): every
//! rank passes its rows, rank 0 writes, the other ranks' rows streamed to it in rank order
//! (`RootStream`), and the file is the one process's byte for byte: VTK, HDF5 (contiguous, and
//! compressed over several chunks whose rows come from several ranks), meshless checkpoints.
//! Fields that do not match a rank's rows are refused on every rank.

use std::ops::Range;
use std::path::Path;

use mote_core::comm::{Comm, RootStream, on_thread_ranks, thread_ranks};
use mote_io::checkpoint::{self, MeshlessHeader};
use mote_io::vtk::{Field, write_vtu, write_vtu_ranks};

/// Rows of three columns: positions (xyz), ids, one scalar.
struct Rows {
    points: Vec<f64>,
    ids: Vec<u64>,
    values: Vec<f64>,
}

fn rows(n: usize) -> Rows {
    Rows {
        points: (0..3 * n).map(|k| (k as f64 * 0.37).sin()).collect(),
        ids: (0..n as u64).map(|i| i * 7 + 3).collect(),
        values: (0..n).map(|i| 1.0 / (1.0 + i as f64)).collect(),
    }
}

/// Uneven ranges (the first rank holds fewest, one rank none where there are four).
fn ranges(n: usize, k: usize) -> Vec<Range<usize>> {
    let cuts: Vec<usize> = match k {
        1 => vec![0, n],
        2 => vec![0, n / 3, n],
        3 => vec![0, n / 5, n / 2, n],
        _ => vec![0, n / 7, n / 7, 3 * n / 4, n],
    };
    cuts.windows(2).map(|w| w[0]..w[1]).collect()
}

/// Runs `write(comm, rows)` with each of 1-4 thread ranks holding its range of `n` rows, into
/// `tmp/K`, and asserts that every file equals the one `one` wrote into `tmp/one`.
fn same_as_one_process(
    tmp: &Path,
    n: usize,
    one: impl Fn(&Path),
    write: impl Fn(&Path, &dyn Comm, Range<usize>) + Sync,
) {
    let single = tmp.join("one");
    one(&single);
    let expected = std::fs::read(&single).unwrap();
    for k in 1..=4 {
        let path = tmp.join(format!("{k}"));
        on_thread_ranks(&thread_ranks(k), |comm| {
            write(&path, comm.as_ref(), ranges(n, k)[comm.rank()].clone());
        });
        let got = std::fs::read(&path).unwrap();
        assert!(
            got == expected,
            "{k} ranks: {} bytes differ",
            path.display()
        );
    }
}

#[test]
fn a_vtk_file_written_from_ranks_is_the_one_process_file() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 70_001;
    let r = rows(n);
    same_as_one_process(
        tmp.path(),
        n,
        |path| {
            let fields = [Field::U64("id", &r.ids), Field::F64("value", &r.values)];
            write_vtu(path, Some(0.5), &r.points, &fields).unwrap();
        },
        |path, comm, mine| {
            let fields = [
                Field::U64("id", &r.ids[mine.clone()]),
                Field::F64("value", &r.values[mine.clone()]),
            ];
            let points = &r.points[3 * mine.start..3 * mine.end];
            let stream = RootStream::new(comm, mine.len());
            write_vtu_ranks(path, Some(0.5), points, &fields, &stream).unwrap();
        },
    );
}

#[test]
fn a_field_that_does_not_match_a_ranks_rows_is_refused_on_every_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad.vtu");
    let r = rows(100);
    let outcomes = on_thread_ranks(&thread_ranks(3), |comm| {
        let mine = ranges(100, 3)[comm.rank()].clone();
        // Rank 2 passes one value too few.
        let end = if comm.rank() == 2 {
            mine.end - 1
        } else {
            mine.end
        };
        let fields = [Field::F64("value", &r.values[mine.start..end])];
        let stream = RootStream::new(comm.as_ref(), mine.len());
        let points = &r.points[3 * mine.start..3 * mine.end];
        write_vtu_ranks(&path, None, points, &fields, &stream).map_err(|e| e.to_string())
    });
    for (rank, o) in outcomes.iter().enumerate() {
        let e = o.as_ref().expect_err("refused");
        assert!(
            e.contains("rank 2") && e.contains("`value`"),
            "rank {rank}: {e}"
        );
    }
    assert!(!path.exists(), "nothing written");
}

#[test]
fn a_meshless_checkpoint_written_from_ranks_is_the_one_process_file() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 5_003;
    let r = rows(n);
    let header = MeshlessHeader {
        mote_version: "test".into(),
        physics: "meshless".into(),
        step: 3,
        time: 0.25,
        simulation_time: 0.25,
        precision: mote_core::Precision::F64,
        config: "[run]\n".into(),
        snapshots: Vec::new(),
        particles: n,
        variables: 2,
        mood: Default::default(),
        floor_events: Some(0),
        first_dt: Some(0.01),
        outflow: None,
    };
    same_as_one_process(
        tmp.path(),
        n,
        |path| {
            let state: [&[f64]; 2] = [&r.values, &r.points[..n]];
            checkpoint::write_meshless(path, &header, &r.ids, &state, &RootStream::one(n)).unwrap();
        },
        |path, comm, mine| {
            let state: [&[f64]; 2] = [&r.values[mine.clone()], &r.points[mine.clone()]];
            let stream = RootStream::new(comm, mine.len());
            checkpoint::write_meshless(path, &header, &r.ids[mine], &state, &stream).unwrap();
        },
    );
    let path = tmp.path().join("3");
    let (read, _) = checkpoint::read_any(&path).unwrap();
    assert!(matches!(read, checkpoint::AnyHeader::Meshless(ref h) if h.particles == n));
    // Read back by rows (what each rank of a resumed split run reads): the rows written.
    let opened = checkpoint::open(&path, true).unwrap();
    assert_eq!(opened.header(), &read);
    for rows in [0..n, 0..1, 17..2_500, 4_999..n, n..n] {
        let (ids, state) = opened.meshless_rows::<f64>(rows.clone()).unwrap();
        assert_eq!(ids, &r.ids[rows.clone()]);
        assert_eq!(state[0], &r.values[rows.clone()]);
        assert_eq!(state[1], &r.points[rows.clone()]);
    }
    assert!(opened.meshless_rows::<f64>(0..n + 1).is_err());
    assert!(
        opened.meshless_rows::<f32>(0..1).is_err(),
        "the wrong precision"
    );
    // A corrupt byte is found by the checksum (the rank that checks it); a truncated file by
    // the arrays' framing, checksum or not.
    let mut bytes = std::fs::read(&path).unwrap();
    let bad = tmp.path().join("corrupt");
    let at = bytes.len() - 100;
    bytes[at] ^= 1;
    std::fs::write(&bad, &bytes).unwrap();
    let e = checkpoint::open(&bad, true).unwrap_err();
    assert!(e.message.contains("checksum"), "{e}");
    assert!(checkpoint::open(&bad, false).is_ok());
    bytes.truncate(bytes.len() - 1_000);
    std::fs::write(&bad, &bytes).unwrap();
    for checksum in [true, false] {
        assert!(checkpoint::open(&bad, checksum).is_err());
    }
}

/// Contiguous, and compressed with rows of several ranks in one chunk and chunks of one rank's
/// rows (150 000 rows: three chunks of 64 Ki).
#[cfg(feature = "hdf5")]
#[test]
fn an_hdf5_file_written_from_ranks_is_the_one_process_file() {
    use mote_io::snapshot::{self, Column, Family, Header, Snapshot, Values};
    let n = 150_000;
    let r = rows(n);
    for compression in [0, 3] {
        let tmp = tempfile::tempdir().unwrap();
        let snapshot = |rows: Range<usize>| Snapshot {
            header: Header {
                family: Family::Meshless,
                dimension: 3,
                time: 0.5,
                box_size: 1.0,
                units_cgs: None,
                unit_names: ["1", "1", "1", "1"].map(String::from),
                compression,
                spacing: vec![0.1; 3],
                config: "[run]\n".into(),
                commit: "test".into(),
            },
            columns: vec![
                Column::vector(
                    "Coordinates",
                    Values::F64(r.points[3 * rows.start..3 * rows.end].to_vec()),
                ),
                Column::scalar("ParticleIDs", Values::U64(r.ids[rows.clone()].to_vec())),
                Column::scalar(
                    "Density",
                    Values::F32(r.values[rows].iter().map(|&v| v as f32).collect()),
                ),
            ],
        };
        same_as_one_process(
            tmp.path(),
            n,
            |path| snapshot::write_hdf5(path, &snapshot(0..n)).unwrap(),
            |path, comm, mine| {
                let stream = RootStream::new(comm, mine.len());
                snapshot::write_hdf5_ranks(path, &snapshot(mine), &stream).unwrap();
            },
        );
        let read = snapshot::read_hdf5(&tmp.path().join("3")).unwrap();
        assert_eq!(read.datasets["Coordinates"].0, vec![n, 3]);
        assert_eq!(read.datasets["ParticleIDs"].1, Values::U64(r.ids.clone()));
    }
}
