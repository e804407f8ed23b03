//! # mote-cloud
//!
//! Meshless conservation laws `du/dt + div F(u) = 0` on point clouds. This crate holds, so far:
//!
//! - [`domain`]: rectangular (per-axis periodic) and spherical domains, minimum-image distances;
//! - [`cloud`]: [`Cloud`], the per-particle state as component arrays with one length helper,
//!   lattice generation with seeded jitter, boundary layers with per-face tags, particle volumes,
//!   Morton (Z-order) reordering;
//! - [`search`]: the deterministic counting-sort neighbour search and the two slot layouts
//!   (row-major for CPU caches, slot-major for GPU coalescing);
//! - [`mls`]: moving-least-squares derivative operators on a Taylor basis of degree 1 to 5;
//! - [`equations`] (linear advection, Burgers, Euler; a user equation is one trait impl),
//!   [`flux`] (Rusanov, upwind, HLLC), [`scheme`] (MUSCL of orders 1-5 in two flux-divergence
//!   formulations, slope limiters), [`mood`] (a-posteriori order reduction), [`boundary`]
//!   (conditions per boundary tag), [`time`] (explicit Runge-Kutta by tableau, driven by a stage
//!   operator), [`exact`] (exact solutions, error norms and totals), [`problems`] (standard
//!   problems with their boundaries and exact solutions, as `mote run` builds them).
//!
//! Everything is generic over the precision `R: Real` and the dimension `D` (1, 2 or 3, a
//! compile-time constant).

#![warn(missing_docs)]
// Loops over the axes index several per-axis arrays at once; iterator chains would obscure them.
#![allow(clippy::needless_range_loop)]

pub mod adapt;
pub mod boundary;
pub mod cloud;
pub mod domain;
pub mod equations;
pub mod error;
pub mod exact;
pub mod flux;
pub mod formula;
pub mod halo;
pub mod mls;
pub mod mood;
pub mod motion;
pub mod problems;
pub mod scheme;
pub mod search;
pub mod simulation;
pub mod source;
pub mod time;

pub use cloud::{Cloud, Geometry, LatticeOptions};
pub use domain::{Domain, Shape};
pub use error::CloudError;
pub use mls::{Basis, Mls, Weight};
pub use search::{
    NeighbourList, NeighbourSearch, RowMajor, SearchGrid, SlotLayout, SlotMajor, Slots,
};
pub use simulation::MeshlessSimulation;
