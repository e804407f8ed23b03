//! # mote-gravity
//!
//! Self-gravitating N-body systems in N-body units (G = 1):
//!
//! - [`softening`]: Plummer softening, one definition for force and potential;
//! - [`solver`]: the [`ForceSolver`] trait integrators call;
//! - [`direct`]: direct summation: the f64 compensated reference kernel and the fast SIMD kernels
//!   (AVX-512F, AVX2+FMA, portable), chosen at run time once per evaluation;
//! - [`tree`]: Barnes-Hut tree gravity (monopole or quadrupole), O(N log N), for large N;
//! - [`integrators`]: kick-drift-kick leapfrog (velocity Verlet), Yoshida 4th order, classical RK4;
//! - [`initial_conditions`]: Plummer sphere, uniform sphere, cold collapse, Kepler pair, disc
//!   galaxy, galaxy collision, all seeded and reproducible across platforms;
//! - [`accuracy`]: force errors of an approximate solver against the reference kernel;
//! - [`diagnostics`]: energies, momenta, virial ratio, Lagrangian radii;
//! - [`Simulation`]: particles + solver + integrator + clock;
//! - [`owned`]: ranks that each hold only their own particles (Morton ranges, migration,
//!   sources gathered in the one-process order).

#![warn(missing_docs)]

pub mod accuracy;
pub mod diagnostics;
pub mod direct;
pub mod error;
pub mod initial_conditions;
pub mod integrators;
pub mod owned;
/// The seeded, platform-independent random stream (it lives in `mote-core`, shared with the
/// meshless point clouds).
pub use mote_core::rng;
pub mod simulation;
pub mod softening;
pub mod solver;
pub mod tree;

pub use diagnostics::Diagnostics;
pub use direct::{DirectSolver, Kernel, KernelChoice};
pub use error::GravityError;
pub use integrators::{Integrator, IntegratorKind};
pub use simulation::Simulation;

pub use softening::Softening;
pub use solver::{ForceSolver, NonFiniteWatch, Share, SolverInfo, SolverKind};
pub use tree::{Multipole, TreeSettings, TreeSolver};
