//! # mote-bench
//!
//! The measurements behind `mote bench` and `mote bench roofline`: direct-summation gravity,
//! the meshless passes on the CPU and a device, the particle-layout experiment and the placement
//! of kernels under the machine's ceilings. Benchmarks measure; tests assert.
//!
//! A crate of its own (not part of the CLI) because it instantiates the meshless solver for
//! every precision, dimension, layout and equation: on its own it compiles alongside `mote-io`
//! instead of after it (the CLI depends on both).

#![warn(missing_docs)]

pub mod cloud;
pub mod cloud_gpu;
pub mod decomposition;
pub mod gravity;
pub mod layouts;
pub mod placement;

/// Refuses, before anything is allocated, a benchmark whose arrays (`bytes`, a lower bound)
/// cannot fit the default memory budget (the memory available now, as runs are priced): an
/// allocation that fails aborts the process instead of reporting an error.
pub(crate) fn check_fits(what: &str, bytes: u128) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(budget) = mote_core::memory::default_budget() {
        let needed = u64::try_from(bytes).unwrap_or(u64::MAX);
        mote_core::memory::price(|| format!("memory for {what}"), needed, budget, 0.0)?;
    }
    Ok(())
}
