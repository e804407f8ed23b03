//! `mote inspect FILE`: what a snapshot, checkpoint or diagnostics file holds.

use std::path::{Path, PathBuf};

use clap::Args;
use mote_core::{PrecisionJob, Real};

use crate::CliError;

/// Options of `mote inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A snapshot (`.vtu` or `.hdf5`), a checkpoint (`.mote`) or a diagnostics file (`.csv`).
    file: PathBuf,
}

/// `mote inspect`.
pub fn run(args: &InspectArgs) -> Result<(), CliError> {
    let path = args.file.as_path();
    let fail = |m: String| CliError::Run(format!("{}: {m}", path.display()));
    // A file a run is still writing, or one an interrupted run left (`diagnostics.csv.partial`),
    // is read like the finished one.
    let kind_of = path
        .file_stem()
        .map(Path::new)
        .filter(|_| path.extension().and_then(|e| e.to_str()) == Some("partial"));
    let kind = kind_of.unwrap_or(path).extension().and_then(|e| e.to_str());
    match kind {
        Some("vtu") => {
            let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
            let arrays = mote_io::vtk::read_vtu(&bytes).map_err(fail)?;
            let points = arrays.get("Points").map_or(0, |a| a.to_f64().len() / 3);
            let time = arrays
                .get("TimeValue")
                .and_then(|a| a.to_f64().first().copied())
                .map_or(String::new(), |t| format!(" at time {t}"));
            println!(
                "{}: VTK unstructured grid, {points} particles{time}; every array has its declared length",
                path.display()
            );
            for (name, a) in &arrays {
                if ["connectivity", "offsets", "types", "TimeValue"].contains(&name.as_str()) {
                    continue;
                }
                let v = a.to_f64();
                let (lo, hi) = v
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                        (l.min(x), h.max(x))
                    });
                println!(
                    "  {name:<14} {:<8} x{}  min {lo:.6e}  max {hi:.6e}",
                    a.vtk_type, a.components
                );
            }
            Ok(())
        }
        Some("hdf5" | "h5") => {
            let c = mote_io::snapshot::read_hdf5(path).map_err(|e| CliError::Run(e.to_string()))?;
            let n = c
                .datasets
                .get("Coordinates")
                .map_or(0, |(shape, _)| shape.first().copied().unwrap_or(0));
            let what = if c.part_type == 0 {
                "meshless particles"
            } else {
                "gravitating bodies"
            };
            println!(
                "{}: HDF5 snapshot (Gadget/SWIFT layout), /PartType{}: {n} {what}, dimension {}, at time {}{}",
                path.display(),
                c.part_type,
                c.dimension,
                c.time,
                if c.config.is_some() {
                    "; written by mote (its configuration in /Code)"
                } else {
                    ""
                }
            );
            for (name, (shape, values)) in &c.datasets {
                let v = values.to_f64();
                let (lo, hi) = v
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                        (l.min(x), h.max(x))
                    });
                let ty = match values {
                    mote_io::snapshot::Values::F32(_) => "f32",
                    mote_io::snapshot::Values::F64(_) => "f64",
                    mote_io::snapshot::Values::U64(_) => "u64",
                    mote_io::snapshot::Values::U32(_) => "u32",
                };
                println!("  {name:<16} {ty:<4} {shape:?}  min {lo:.6e}  max {hi:.6e}");
            }
            Ok(())
        }
        Some("mote") => {
            let (header, arrays) =
                mote_io::checkpoint::read_any(path).map_err(|e| CliError::Run(e.to_string()))?;
            let header = match header {
                mote_io::checkpoint::AnyHeader::Gravity(h) => h,
                mote_io::checkpoint::AnyHeader::Meshless(h) => {
                    println!(
                        "{}: mote meshless checkpoint (written by mote {}), checksum ok\n  step {}  time {}  precision {}\n  {} particles, {} conserved variables; {} snapshots so far; {} MOOD reductions so far",
                        path.display(),
                        h.mote_version,
                        h.step,
                        h.time,
                        h.precision,
                        h.particles,
                        h.variables,
                        h.snapshots.len(),
                        h.mood.reductions
                    );
                    return Ok(());
                }
            };
            println!(
                "{}: mote checkpoint (written by mote {}), checksum ok\n  step {}  time {}  precision {}\n  {} snapshots so far; initial energy {:.10e}",
                path.display(),
                header.mote_version,
                header.step,
                header.time,
                header.precision,
                header.snapshots.len(),
                header.initial_energy
            );
            let summary = header
                .precision
                .dispatch(Summary {
                    path,
                    arrays: &arrays,
                })
                .map_err(|e| CliError::Run(e.to_string()))?;
            println!("{summary}");
            Ok(())
        }
        Some("csv") => {
            let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
            let mut lines = text.lines();
            let header: Vec<&str> = lines
                .next()
                .ok_or_else(|| fail("empty file".into()))?
                .split(',')
                .collect();
            let mut rows: Vec<Vec<f64>> = Vec::new();
            for (k, l) in lines.enumerate() {
                let row: Result<Vec<f64>, _> =
                    l.split(',').map(|v| v.trim().parse::<f64>()).collect();
                match row {
                    Ok(r) if r.len() == header.len() => rows.push(r),
                    _ => {
                        return Err(fail(format!(
                            "line {}: malformed row (expected {} numbers): `{l}`",
                            k + 2,
                            header.len()
                        )));
                    }
                }
            }
            println!(
                "{}: {} rows of {} columns",
                path.display(),
                rows.len(),
                header.len()
            );
            for (k, name) in header.iter().enumerate() {
                let col: Vec<f64> = rows.iter().filter_map(|r| r.get(k).copied()).collect();
                let (Some(first), Some(last)) = (col.first(), col.last()) else {
                    continue;
                };
                let max = col.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                println!("  {name:<24} first {first:.6e}  last {last:.6e}  max {max:.6e}");
            }
            Ok(())
        }
        _ => Err(CliError::Config(format!(
            "{}: unknown kind of file; expected .vtu or .hdf5 (snapshot), .mote (checkpoint) or .csv (diagnostics)",
            path.display()
        ))),
    }
}

struct Summary<'a> {
    path: &'a Path,
    arrays: &'a [u8],
}

impl PrecisionJob for Summary<'_> {
    type Output = Result<String, mote_io::files::FileError>;
    fn run<R: Real>(self) -> Self::Output {
        let p = mote_io::checkpoint::read_particles::<R>(self.path, self.arrays)?;
        let m: f64 = p.masses().iter().map(|m| m.as_f64()).sum();
        let (vx, vy, vz) = p.velocities().components();
        let kinetic: f64 = (0..p.len())
            .map(|i| {
                0.5 * p.masses()[i].as_f64()
                    * (vx[i].as_f64().powi(2) + vy[i].as_f64().powi(2) + vz[i].as_f64().powi(2))
            })
            .sum();
        Ok(format!(
            "  {} particles, total mass {m:.10e}, kinetic energy {kinetic:.10e}",
            p.len()
        ))
    }
}
