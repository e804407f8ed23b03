//! mote-io's tests, in one integration-test binary: they use the crate's public interface
//! only, so the library is compiled once for the test run (a unit-test build would compile it,
//! and every solver it instantiates, a second time: about nine of CI's build minutes).

mod checkpoint;
mod config;
mod convergence;
mod files;
mod fuzz;
#[cfg(feature = "hdf5")]
mod hdf5;
mod meshless;
mod pictures;
mod runner;
mod schedule;
mod streamed;
mod units;
