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
pub mod gravity;
pub mod layouts;
pub mod placement;

/// Refuses, before anything is allocated, a benchmark whose arrays (`bytes`, a lower bound)
/// cannot fit the installed memory: an allocation that fails aborts the process instead of
/// reporting an error.
pub(crate) fn check_fits(what: &str, bytes: u128) -> Result<(), Box<dyn std::error::Error>> {
    let Some(memory) = mote_core::MachineInfo::detect().memory_bytes else {
        return Ok(());
    };
    if bytes > u128::from(memory) {
        return Err(format!(
            "{what} need at least {bytes} bytes; this machine has {memory} bytes of memory"
        )
        .into());
    }
    Ok(())
}
