//! `mote bench snapshot`: the speed of writing an HDF5 snapshot of a gravity run against the
//! disk's sequential write speed, measured by `dd` in the same run (decision 0025).

use std::error::Error;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::Args;
use mote_io::snapshot::{self, Column, Family, Header, Snapshot, Values};

/// Options of `mote bench snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Bodies in the snapshot (f64 positions, velocities, accelerations, masses, ids: 88 bytes
    /// each).
    #[arg(long, default_value_t = 4_000_000)]
    particles: usize,
    /// Deflate level (0: uncompressed, contiguous datasets).
    #[arg(long, default_value_t = 0)]
    compression: u8,
    /// The directory written to (default: the system's temporary directory); the files are
    /// removed afterwards.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Repetitions (the best is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
}

/// Writes the snapshot `repeat` times (each flushed to the disk with `sync`) and `dd` the same
/// number of bytes with `conv=fdatasync`, and prints both speeds.
pub fn run(args: &SnapshotArgs) -> Result<(), Box<dyn Error>> {
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let n = args.particles;
    // A smooth, not compressible-by-accident state (a Plummer-like cloud would cost its
    // generation here; the write does not care what the numbers are, deflate does a little).
    let wave =
        |k: usize, s: f64| -> Vec<f64> { (0..3 * n).map(|i| ((i + k) as f64 * s).sin()).collect() };
    let s = Snapshot {
        header: Header {
            family: Family::Gravity,
            dimension: 3,
            time: 0.0,
            box_size: 0.0,
            units_cgs: None,
            unit_names: ["1", "1", "1", "1"].map(String::from),
            compression: args.compression,
            spacing: Vec::new(),
            config: String::new(),
            commit: env!("MOTE_GIT_COMMIT").into(),
        },
        columns: vec![
            Column::vector("Coordinates", Values::F64(wave(0, 0.37))),
            Column::vector("Velocities", Values::F64(wave(1, 0.11))),
            Column::vector("Accelerations", Values::F64(wave(2, 0.05))),
            Column::scalar("Masses", Values::F64(vec![1.0 / n as f64; n])),
            Column::scalar("ParticleIDs", Values::U64((0..n as u64).collect())),
        ],
    };
    let bytes = n as f64 * 88.0;
    let path = dir.join(format!("mote-bench-snapshot-{}.hdf5", std::process::id()));
    let mut best = f64::INFINITY;
    let mut size = 0;
    for _ in 0..args.repeat.max(1) {
        let t = Instant::now();
        snapshot::write_hdf5(&path, &s)?;
        // The write is done when the data is on the disk, as dd's fdatasync measures it.
        std::fs::File::open(&path)?.sync_all()?;
        best = best.min(t.elapsed().as_secs_f64());
        size = std::fs::metadata(&path)?.len();
        std::fs::remove_file(&path)?;
    }
    let dd_path = dir.join(format!("mote-bench-dd-{}.bin", std::process::id()));
    let mib = (bytes / (1 << 20) as f64).ceil() as u64;
    let mut dd_best = f64::INFINITY;
    for _ in 0..args.repeat.max(1) {
        let t = Instant::now();
        let out = Command::new("dd")
            .args([
                "if=/dev/zero".to_string(),
                format!("of={}", dd_path.display()),
                "bs=1M".into(),
                format!("count={mib}"),
                "conv=fdatasync".into(),
            ])
            .output()?;
        if !out.status.success() {
            return Err(format!("dd failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        dd_best = dd_best.min(t.elapsed().as_secs_f64());
        std::fs::remove_file(&dd_path)?;
    }
    let dd_rate = mib as f64 * (1 << 20) as f64 / dd_best / 1e6;
    let rate = bytes / best / 1e6;
    println!(
        "snapshot of {n} bodies (f64, compression {}): {:.1} MB of data, file {:.1} MB, {best:.3} s: {rate:.0} MB/s",
        args.compression,
        bytes / 1e6,
        size as f64 / 1e6,
    );
    println!(
        "dd, {mib} MiB with fdatasync: {dd_best:.3} s: {dd_rate:.0} MB/s; the snapshot at {:.0} % of it",
        100.0 * rate / dd_rate
    );
    Ok(())
}
