//! The CPU side of the single-source formulas: each formula file under `crates/cloud/formulas/`
//! is compiled here as plain Rust ([`mote_formula::host!`]) and in the GPU crate as CubeCL
//! `#[cube]` functions ([`mote_formula::device!`]), so a flux, a wave speed or an admissibility
//! test exists once for every backend (decision 0019).
//!
//! On the CPU a formula is generic over [`prelude::Float`], which both the working precision
//! (`f32`, `f64`: one state, the scalar paths) and [`Lanes`] (`W` states at once, the batched
//! flux passes) implement. Every operation on lanes is a loop over the lanes, so a formula
//! instantiated with lanes is the lane-wise code the passes vectorise; choices are
//! `select`s of masks, never branches.

use mote_core::Real;

pub use prelude::{Float, Lanes, Mask};

/// The names the formula dialect uses, for the CPU (they live in `mote-core`, shared with the
/// gravity tree's formulas).
pub use mote_core::formula as prelude;

/// The Euler equations' formulas: primitive variables with floors, flux, wave speeds,
/// admissibility, HLLC (source: `crates/cloud/formulas/euler.rs`).
pub mod euler {
    use super::prelude::*;

    mote_formula::host!("formulas/euler.rs");
}

/// The Euler formulas' parameter array, `[gamma, gamma - 1, density floor, pressure floor]`:
/// the one place its layout is written (the CPU's `Euler::params` and the device's parameter
/// array both come from here).
pub fn euler_params(gamma: f64, density_floor: f64, pressure_floor: f64) -> [f64; 4] {
    [gamma, gamma - 1.0, density_floor, pressure_floor]
}

/// The slope limiters' formulas: minmod, superbee, the Barth-Jespersen and Venkatakrishnan
/// factors (source: `crates/cloud/formulas/limiter.rs`).
pub mod limiter {
    use super::prelude::*;

    mote_formula::host!("formulas/limiter.rs");
}

/// Linear advection's and Burgers' fluxes and wave speeds (source:
/// `crates/cloud/formulas/scalar.rs`).
pub mod scalar {
    use super::prelude::*;

    mote_formula::host!("formulas/scalar.rs");
}

/// The numerical fluxes every equation has (Rusanov, central, upwind) and the moving-cloud
/// flux pieces (source: `crates/cloud/formulas/riemann.rs`).
pub mod riemann {
    use super::prelude::*;

    mote_formula::host!("formulas/riemann.rs");
}

/// The kinetic transport's velocities and upwinding (source: `crates/cloud/formulas/kinetic.rs`).
pub mod kinetic {
    use super::prelude::*;

    mote_formula::host!("formulas/kinetic.rs");
}

/// MOOD's tests: the relaxed maximum principle and the smooth-extremum test (source:
/// `crates/cloud/formulas/mood.rs`).
pub mod mood {
    use super::prelude::*;

    mote_formula::host!("formulas/mood.rs");
}

/// The WENO-type reconstruction's smoothness weight and mix (source:
/// `crates/cloud/formulas/weno.rs`).
pub mod weno {
    use super::prelude::*;

    mote_formula::host!("formulas/weno.rs");
}

/// The kinetic relaxation's Maxwellian components and relaxation (source:
/// `crates/cloud/formulas/relaxation.rs`).
pub mod relaxation {
    use super::prelude::*;

    mote_formula::host!("formulas/relaxation.rs");
}

/// The Taylor basis evaluated at an offset, directly (the MLS fits) and by the recursion (the
/// reconstructions) (source: `crates/cloud/formulas/basis.rs`).
pub mod basis {
    use super::prelude::*;

    mote_formula::host!("formulas/basis.rs");
}

/// The boundary conditions' formulas: the slip wall's reflection (source:
/// `crates/cloud/formulas/boundary.rs`).
pub mod boundary {
    use super::prelude::*;

    mote_formula::host!("formulas/boundary.rs");
}

/// The names the per-particle passes add to the formula dialect, for the CPU: a particle's
/// neighbour slots, states as one slice per variable, MOOD's small integers. A pass file
/// (`crates/cloud/formulas/*_passes.rs`) computes one particle's entry; the CPU runs it in its
/// threads' blocks, the device (`mote_gpu::formula`) in one unit per particle.
pub mod pass {
    pub use super::prelude::{Array, and, finite, ge, gt, is_nan, le, lt, ne, or, select};

    use crate::search::{NeighbourList, SlotLayout};

    /// What a pass computes with: one value of the working precision (comparisons give
    /// `bool`, which a pass branches on).
    pub trait Float: super::prelude::Float<Mask = bool> {}

    impl<T: super::prelude::Float<Mask = bool>> Float for T {}

    /// A pass's states: one slice per variable (the device's are the variables end to end).
    pub type States<'a, F> = [&'a [F]];

    /// Variable `v` of particle `i` (of `n`).
    #[inline(always)]
    pub fn value<F: Copy>(u: &States<'_, F>, v: usize, i: usize, _n: usize) -> F {
        u[v][i]
    }

    /// MOOD's orders (the device's are `u32`).
    pub type Order = u8;

    /// MOOD's per-particle codes (the device's are `u32`).
    pub type Flag = u8;

    /// `a` where `c`, else `b` (integers).
    #[inline(always)]
    pub fn choose<T>(c: bool, a: T, b: T) -> T {
        if c { a } else { b }
    }

    /// A neighbour list as a pass reads it, with the field names of the device's launch
    /// struct: `n` particles, `counts[i]` slots each, neighbour indices `indices[s]` at the
    /// slots [`slot_base`] gives.
    #[derive(Clone, Copy)]
    pub struct Neighbours<'a> {
        /// Particles.
        pub n: u32,
        /// Each particle's neighbour count.
        pub counts: &'a [u32],
        /// The neighbour index of each slot.
        pub indices: &'a [u32],
        /// Each particle's first slot (row-major lists); `None`: slot-major (slot `k` of `i` at
        /// `k n + i`).
        starts: Option<&'a [usize]>,
    }

    impl<'a> Neighbours<'a> {
        /// The view of `list`.
        pub fn of<L: SlotLayout>(list: &'a NeighbourList<L>) -> Self {
            Self {
                n: list.len() as u32,
                counts: list.counts(),
                indices: list.indices(),
                starts: list.layout().starts(),
            }
        }
    }

    /// Particle `i`'s first slot and the stride between its slots.
    #[inline(always)]
    pub fn slot_base(list: &Neighbours<'_>, i: usize) -> (usize, usize) {
        match list.starts {
            Some(starts) => (starts[i], 1),
            None => (i, list.n as usize),
        }
    }

    /// Where a slot loop of a particle with `count` slots ends: at its count (the device runs
    /// the longest list's count, masking the rest).
    #[inline(always)]
    pub fn slot_end(_list: &Neighbours<'_>, count: u32) -> u32 {
        count
    }
}

/// MOOD's per-particle passes: u1 detection, u2 curvatures and smooth extrema, the halo
/// strategies' new orders (source: `crates/cloud/formulas/mood_passes.rs`).
pub mod mood_passes {
    use super::mood::{breaks_smoothness, exceeds_range};
    use super::pass::*;

    mote_formula::host!("formulas/mood_passes.rs");
}

/// The formula parameters `p` in every lane.
#[inline(always)]
pub fn splat<R: Real, const N: usize, const W: usize>(p: [R; N]) -> [Lanes<R, W>; N] {
    p.map(Lanes::splat)
}
