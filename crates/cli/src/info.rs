//! `mote info`: what this machine offers mote.

use std::error::Error;

use clap::Args;
use mote_core::{CpuBackend, MachineInfo, Precision, SimdLevel};
use serde::Serialize;

/// Options of `mote info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    version: &'static str,
    #[serde(flatten)]
    machine: MachineInfo,
    threads: usize,
    precisions: Vec<Precision>,
    default_precision: Precision,
}

/// Prints the report. `threads` is the `--threads` setting (0: all cores).
pub fn run(args: &InfoArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    let machine = MachineInfo::detect();
    let report = Report {
        version: env!("CARGO_PKG_VERSION"),
        threads: CpuBackend::threads(threads).thread_count(),
        machine,
        precisions: Precision::ALL.to_vec(),
        default_precision: Precision::default(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let m = &report.machine;
    let levels = |v: &[SimdLevel]| v.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ");
    println!("mote {}", report.version);
    println!("  CPU          {}", m.cpu_model);
    println!("  cores        {} logical", m.logical_cores);
    match m.memory_bytes {
        Some(b) => println!("  memory       {:.1} GiB", b as f64 / (1u64 << 30) as f64),
        None => println!("  memory       unknown"),
    }
    println!("  SIMD         detected: {}", levels(&m.simd_detected));
    println!("               chosen:   {}", m.simd_chosen);
    println!(
        "  threads      {} (CPU backend; --threads or RAYON_NUM_THREADS)",
        report.threads
    );
    println!(
        "  precision    {} (default), {} available",
        report.default_precision,
        report
            .precisions
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("  GPU          none: this build has no GPU backend yet");
    Ok(())
}
