//! The meshless solver's tests in one test binary: each test file would otherwise be its own
//! crate instantiating the solver (precisions, dimensions, equations, schemes) at the test
//! profile's opt-level again, a few minutes of CI build each. One module per subject; the file
//! names are the ones `docs/validation.md` cites.

mod adapt;
mod advection;
mod boundaries;
mod convergence;
mod euler;
mod kernels;
mod mls;
mod moving;
mod ranks;
mod relaxation;
mod riemann2d;
mod search;
mod shocks;
mod systems;
