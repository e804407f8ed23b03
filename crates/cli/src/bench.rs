//! `mote bench`: measured performance of mote's kernels. Benchmarks measure; tests assert.

use std::error::Error;
use std::time::Instant;

use clap::{Args, Subcommand};
use mote_core::{CpuBackend, Precision, PrecisionJob, Real};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{DirectSolver, ForceSolver, KernelChoice, Softening};
use serde::Serialize;

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Direct-summation gravity: seconds per force evaluation and interactions per second.
    Gravity(GravityArgs),
    /// Meshless linear advection: seconds per time step, split by pass.
    Cloud(crate::bench_cloud::CloudArgs),
    /// The machine's ceilings: memory bandwidth and arithmetic throughput.
    Roofline(crate::roofline::RooflineArgs),
}

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
}

/// Runs the benchmark on `threads` threads (0: all cores).
pub fn run(cmd: &BenchCommand, threads: usize) -> Result<(), Box<dyn Error>> {
    match cmd {
        BenchCommand::Cloud(args) => crate::bench_cloud::run(args, threads),
        BenchCommand::Roofline(args) => crate::roofline::run(args, threads),
        BenchCommand::Gravity(args) => {
            if args.particles < 2 {
                return Err("--particles must be at least 2".into());
            }
            if args.repeats == 0 {
                return Err("--repeats must be at least 1".into());
            }
            let softening = Softening::new(args.softening)?;
            let solver = DirectSolver::new(softening, args.kernel, CpuBackend::threads(threads))?;
            let result = args.precision.dispatch(GravityBench { args, solver })?;
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
            }
            Ok(())
        }
    }
}

struct GravityBench<'a> {
    args: &'a GravityArgs,
    solver: DirectSolver,
}

impl PrecisionJob for GravityBench<'_> {
    type Output = Result<BenchResult, Box<dyn Error>>;

    fn run<R: Real>(mut self) -> Self::Output {
        let n = self.args.particles;
        let mut p = plummer::<R>(n, 1)?;
        // Warm-up: page in the arrays, start the thread pool, settle the clocks.
        ForceSolver::<R>::update(&mut self.solver, &mut p);
        let mut times: Vec<f64> = (0..self.args.repeats)
            .map(|_| {
                let t = Instant::now();
                ForceSolver::<R>::update(&mut self.solver, &mut p);
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = if times.len() % 2 == 1 {
            times[times.len() / 2]
        } else {
            0.5 * (times[times.len() / 2 - 1] + times[times.len() / 2])
        };
        let backend = self.solver.backend();
        Ok(BenchResult {
            family: "gravity",
            backend: "cpu".to_string(),
            kernel: self.solver.kernel().name().to_string(),
            particles: n,
            precision: R::PRECISION,
            threads: backend.thread_count(),
            repeats: times.len(),
            seconds_median: median,
            seconds_min: times[0],
            seconds_max: times[times.len() - 1],
            interactions_per_second: (n as f64) * (n as f64 - 1.0) / median,
        })
    }
}
