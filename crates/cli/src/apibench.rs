//! `mote bench api`: a gravity simulation driven through the library's API, as a front end
//! drives it (built by `mote_io::runner::gravity_simulation`, stepped on the run's step grid):
//! the reference the Python module's overhead is measured against
//! (`crates/python/bench/overhead.py` times the same steps through `mote.Gravity`).

use std::error::Error;

use clap::Args;
use mote_io::Source;
use mote_io::config::GravityConfig;
use mote_io::runner::time_gravity_steps;

/// Options of `mote bench api`.
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// Bodies of the Plummer sphere.
    #[arg(long, default_value_t = 16384)]
    particles: usize,
    /// Steps per measurement (of run.dt = 1/128, leapfrog, direct summation).
    #[arg(long, default_value_t = 10)]
    steps: u64,
    /// Measurements (the best and the median are reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Precision.
    #[arg(long, default_value = "f64")]
    precision: String,
}

/// Builds the simulation once, then times `repeat` times `steps` steps; prints seconds.
pub fn run(args: &ApiArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    let overrides = [
        format!("initial_conditions.particles={}", args.particles),
        format!("run.precision=\"{}\"", args.precision),
        format!("run.threads={threads}"),
    ];
    let source = Source {
        file: None,
        text: "physics = \"gravity\"\n",
    };
    let config = GravityConfig::parse(&source, &overrides)?;
    let times = time_gravity_steps(&config, args.steps, args.repeat)?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "api: {} bodies, {} steps ({}, {} threads): best {:.6} s, median {:.6} s over {} \
         measurements",
        args.particles,
        args.steps,
        args.precision,
        mote_core::CpuBackend::threads(threads).thread_count(),
        sorted[0],
        sorted[sorted.len() / 2],
        sorted.len()
    );
    Ok(())
}
