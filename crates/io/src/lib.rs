//! # mote-io
//!
//! Configuration (TOML schemas, validation with file/line/key errors) and the files a run
//! writes (atomically).

#![warn(missing_docs)]

pub mod checkpoint;
pub mod config;
pub mod convergence;
pub mod files;
#[cfg(feature = "hdf5")]
pub mod h5;
pub mod initial;
pub mod interrupt;
pub mod meshless;
pub mod plot;
pub mod runner;
pub mod schedule;
pub mod snapshot;
pub mod units;
pub mod vtk;

pub use config::{Config, ConfigError, GravityConfig, Source};
pub use meshless::MeshlessConfig;
