//! `mote bench`: measured performance of mote's kernels (the measurements are `mote-bench`'s).
//! Benchmarks measure; tests assert.

use std::error::Error;

use clap::Subcommand;
use mote_bench::{cloud, decomposition, gravity};

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Direct-summation gravity: seconds per force evaluation and interactions per second.
    Gravity(gravity::GravityArgs),
    /// Meshless conservation laws: seconds per time step, split by pass.
    Cloud(Box<cloud::CloudArgs>),
    /// The machine's ceilings: memory bandwidth and arithmetic throughput.
    Roofline(crate::roofline::RooflineArgs),
    /// Writing an HDF5 snapshot against the disk's sequential write speed (`dd`).
    Snapshot(crate::snapbench::SnapshotArgs),
    /// What K ranks owning Morton ranges would exchange: a distributed tree's imports, a
    /// meshless cloud's halo, and today's replicated-state bytes, against K.
    Decomposition(decomposition::DecompositionArgs),
    /// A gravity simulation stepped through the library's API (the reference for the Python
    /// module's overhead).
    Api(crate::apibench::ApiArgs),
}

/// Runs the benchmark on `threads` threads (0: all cores).
pub fn run(cmd: &BenchCommand, threads: usize) -> Result<(), Box<dyn Error>> {
    match cmd {
        BenchCommand::Gravity(args) => gravity::run(args, threads),
        BenchCommand::Cloud(args) => cloud::run(args, threads),
        BenchCommand::Roofline(args) => crate::roofline::run(args, threads),
        BenchCommand::Snapshot(args) => crate::snapbench::run(args),
        BenchCommand::Api(args) => crate::apibench::run(args, threads),
        BenchCommand::Decomposition(args) => decomposition::run(args, threads),
    }
}
