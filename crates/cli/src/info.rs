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
    gpu_adapters: Vec<Adapter>,
    cuda_driver: bool,
}

/// One wgpu adapter.
#[derive(Serialize)]
struct Adapter {
    device: String,
    name: String,
    kind: &'static str,
    backend: String,
    f64: bool,
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
        gpu_adapters: mote_gpu::adapters()
            .into_iter()
            .map(|a| Adapter {
                device: format!("wgpu:{}", a.index),
                name: a.name,
                kind: a.kind,
                backend: a.backend,
                f64: a.f64,
            })
            .collect(),
        cuda_driver: mote_gpu::cuda_driver_present(),
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
    println!("               chosen:   {} (gravity)", m.simd_chosen);
    println!(
        "                         {} (meshless passes)",
        m.simd_gathers
    );
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
    if report.gpu_adapters.is_empty() {
        println!("  GPU          no wgpu adapter (Vulkan/Metal/DX12 driver) found");
    }
    for a in &report.gpu_adapters {
        println!(
            "  GPU          {}: {} ({}, {}), f64 {}",
            a.device,
            a.name,
            a.kind,
            a.backend,
            if a.f64 { "yes" } else { "no" }
        );
    }
    println!(
        "  CUDA         {}",
        if report.cuda_driver {
            "driver library found (--device cuda)"
        } else {
            "no driver library"
        }
    );
    Ok(())
}
