//! `mote bench gravity`: direct-summation forces on the CPU or a device.

use std::error::Error;
use std::time::Instant;

use clap::Args;
use mote_core::{CpuBackend, DeviceSpec, Precision, PrecisionJob, Real};
use mote_gpu::{Gpu, GpuDirectSolver};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{DirectSolver, ForceSolver, KernelChoice, Softening};
use serde::Serialize;

/// Options of `mote bench gravity`.
#[derive(Debug, Args)]
pub struct GravityArgs {
    /// Number of particles (a Plummer sphere).
    #[arg(long, default_value_t = 16_384)]
    particles: usize,
    /// Floating-point precision.
    #[arg(long, default_value = "f64")]
    precision: Precision,
    /// Kernel: auto, reference, scalar, avx2 or avx512.
    #[arg(long, default_value = "auto")]
    kernel: KernelChoice,
    /// Plummer softening length.
    #[arg(long, default_value_t = 0.0)]
    softening: f64,
    /// Timed force evaluations (after one warm-up evaluation).
    #[arg(long, default_value_t = 7)]
    repeats: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Where the forces are computed: cpu or gpu.
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    /// The device for `--backend gpu`: wgpu or cuda, with an optional `:INDEX`.
    #[arg(long, default_value = "wgpu:0")]
    device: DeviceSpec,
    /// Units per workgroup of the GPU kernel.
    #[arg(long, default_value_t = 256)]
    workgroup: u32,
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// The CPU kernels (threads from `--threads`).
    Cpu,
    /// A device through the GPU crate.
    Gpu,
}

/// What `--backend gpu` adds to the report.
#[derive(Debug, Serialize)]
pub struct GpuReport {
    device: String,
    workgroup: u32,
    /// Host-to-device seconds per evaluation (median run's share).
    upload_seconds: f64,
    /// Kernel seconds per evaluation.
    kernel_seconds: f64,
    /// Device-to-host seconds per evaluation.
    download_seconds: f64,
    /// The best CPU kernel on all threads of this machine, same N and precision.
    cpu_interactions_per_second: f64,
    /// GPU over CPU, whole evaluations (transfers included).
    speedup_over_cpu: f64,
}

/// The result of a benchmark, printed as text or JSON.
#[derive(Debug, Serialize)]
pub struct BenchResult {
    family: &'static str,
    backend: String,
    kernel: String,
    particles: usize,
    precision: Precision,
    threads: usize,
    repeats: usize,
    seconds_median: f64,
    seconds_min: f64,
    seconds_max: f64,
    interactions_per_second: f64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    gpu: Option<GpuReport>,
}

/// Runs `mote bench gravity` on `threads` threads (0: all cores) and prints the result.
pub fn run(args: &GravityArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    if args.particles < 2 {
        return Err("--particles must be at least 2".into());
    }
    if args.repeats == 0 {
        return Err("--repeats must be at least 1".into());
    }
    // Eleven arrays per particle (positions, velocities, accelerations, masses, ids).
    let size = if args.precision == mote_core::Precision::F32 {
        4
    } else {
        8
    };
    crate::check_fits(
        &format!("{} particles", args.particles),
        args.particles as u128 * (10 * size + 8),
    )?;
    let softening = Softening::new(args.softening)?;
    let cpu = DirectSolver::new(softening, args.kernel, CpuBackend::threads(threads))?;
    let result = match args.backend {
        BackendKind::Cpu => args.precision.dispatch(GravityBench {
            args,
            solver: BenchSolver::Cpu(cpu),
            repeats: args.repeats,
        })?,
        BackendKind::Gpu => {
            let mut gpu = Gpu::open(args.device)?;
            gpu.set_workgroup(args.workgroup)?;
            let solver = GpuDirectSolver::new(gpu, softening, args.precision)?;
            let mut result = args.precision.dispatch(GravityBench {
                args,
                solver: BenchSolver::Gpu(Box::new(solver)),
                repeats: args.repeats,
            })?;
            // The CPU on the same machine, for the speed-up (fewer repeats: it is the
            // slower side).
            let reference = args.precision.dispatch(GravityBench {
                args,
                solver: BenchSolver::Cpu(cpu),
                repeats: args.repeats.min(3),
            })?;
            if let Some(g) = result.gpu.as_mut() {
                g.cpu_interactions_per_second = reference.interactions_per_second;
                g.speedup_over_cpu =
                    result.interactions_per_second / reference.interactions_per_second;
            }
            result
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!(
            "gravity {} N={} {} threads={}: {:.4e} s per evaluation (min {:.4e}, max {:.4e}, {} repeats), {:.3e} interactions/s",
            result.kernel,
            result.particles,
            result.precision,
            result.threads,
            result.seconds_median,
            result.seconds_min,
            result.seconds_max,
            result.repeats,
            result.interactions_per_second
        );
        if let Some(g) = &result.gpu {
            println!(
                "  device {} (workgroup {}): upload {:.3e} s, kernel {:.3e} s, download {:.3e} s per evaluation; CPU {:.3e} interactions/s, speed-up {:.2}",
                g.device,
                g.workgroup,
                g.upload_seconds,
                g.kernel_seconds,
                g.download_seconds,
                g.cpu_interactions_per_second,
                g.speedup_over_cpu
            );
        }
    }
    Ok(())
}

/// The solver a gravity benchmark times.
enum BenchSolver {
    Cpu(DirectSolver),
    Gpu(Box<GpuDirectSolver>),
}

struct GravityBench<'a> {
    args: &'a GravityArgs,
    solver: BenchSolver,
    repeats: usize,
}

impl PrecisionJob for GravityBench<'_> {
    type Output = Result<BenchResult, Box<dyn Error>>;

    fn run<R: Real>(mut self) -> Self::Output {
        let n = self.args.particles;
        let mut p = plummer::<R>(n, 1)?;
        let solver: &mut dyn ForceSolver<R> = match &mut self.solver {
            BenchSolver::Cpu(s) => s,
            BenchSolver::Gpu(s) => s.as_mut(),
        };
        // Warm-up: page in the arrays, start the thread pool or compile the kernel, settle the
        // clocks.
        solver.update(&mut p);
        if let BenchSolver::Gpu(s) = &mut self.solver {
            s.take_seconds();
        }
        let solver: &mut dyn ForceSolver<R> = match &mut self.solver {
            BenchSolver::Cpu(s) => s,
            BenchSolver::Gpu(s) => s.as_mut(),
        };
        let mut times: Vec<f64> = (0..self.repeats)
            .map(|_| {
                let t = Instant::now();
                solver.update(&mut p);
                t.elapsed().as_secs_f64()
            })
            .collect();
        let median = crate::cloud::median(&mut times);
        let reps = times.len() as f64;
        let (backend, kernel, threads, gpu) = match &mut self.solver {
            BenchSolver::Cpu(s) => (
                "cpu",
                s.kernel().name().to_string(),
                s.backend().thread_count(),
                None,
            ),
            BenchSolver::Gpu(s) => {
                let t = s.take_seconds();
                (
                    "gpu",
                    "tiled".to_string(),
                    0,
                    Some(GpuReport {
                        device: s.gpu().to_string(),
                        workgroup: s.gpu().workgroup(),
                        upload_seconds: t.upload / reps,
                        kernel_seconds: t.kernel / reps,
                        download_seconds: t.download / reps,
                        cpu_interactions_per_second: 0.0,
                        speedup_over_cpu: 0.0,
                    }),
                )
            }
        };
        Ok(BenchResult {
            family: "gravity",
            backend: backend.to_string(),
            kernel,
            particles: n,
            precision: R::PRECISION,
            threads,
            repeats: times.len(),
            seconds_median: median,
            seconds_min: times[0],
            seconds_max: times[times.len() - 1],
            interactions_per_second: (n as f64) * (n as f64 - 1.0) / median,
            gpu,
        })
    }
}
