//! The device side of the single-source formulas: the formula files under
//! `crates/cloud/formulas/` compiled as CubeCL `#[cube]` functions ([`mote_formula::device!`]);
//! the CPU compiles the same files ([`mote_cloud::formula`]). This module supplies the names of
//! the formula dialect that CubeCL's prelude does not have: the comparisons and mask
//! combinators as functions, and NaN and finiteness tests by the bits.

// Negated comparisons are the NaN tests (a kernel has no `partial_cmp`).
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use cubecl::prelude::*;

/// Whether `x` is a NaN, by its bits: not `x != x`, which the software driver's compiler folds
/// to false (it assumes finite arithmetic; found by the tests).
#[cube]
pub fn is_nan<F: Float>(x: F) -> bool {
    // The registered element type's size (inside a kernel `F` is a placeholder type: not
    // `size_of::<F>()`).
    let size = F::type_size();
    if comptime![size == 8] {
        (u64::reinterpret(x) & 0x7fff_ffff_ffff_ffffu64) > 0x7ff0_0000_0000_0000u64
    } else {
        (u32::reinterpret(x) & 0x7fff_ffffu32) > 0x7f80_0000u32
    }
}

/// Whether `x` is finite (neither NaN nor infinite), by its exponent bits: not by
/// `x - x == 0`, which the software driver folds to true.
#[cube]
pub fn finite<F: Float>(x: F) -> bool {
    let size = F::type_size();
    if comptime![size == 8] {
        (u64::reinterpret(x) & 0x7fff_ffff_ffff_ffffu64) < 0x7ff0_0000_0000_0000u64
    } else {
        (u32::reinterpret(x) & 0x7fff_ffffu32) < 0x7f80_0000u32
    }
}

/// `a < b`.
#[cube]
pub fn lt<F: Float>(a: F, b: F) -> bool {
    a < b
}

/// `a <= b`.
#[cube]
pub fn le<F: Float>(a: F, b: F) -> bool {
    a <= b
}

/// `a > b`.
#[cube]
pub fn gt<F: Float>(a: F, b: F) -> bool {
    a > b
}

/// `a >= b`.
#[cube]
pub fn ge<F: Float>(a: F, b: F) -> bool {
    a >= b
}

/// `a != b`.
#[cube]
pub fn ne<F: Float>(a: F, b: F) -> bool {
    a != b
}

/// Both.
#[cube]
pub fn and(a: bool, b: bool) -> bool {
    a && b
}

/// Either.
#[cube]
pub fn or(a: bool, b: bool) -> bool {
    a || b
}

/// The WENO-type reconstruction's weight and mix (source: `crates/cloud/formulas/weno.rs`).
pub mod weno {
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/weno.rs");
}

/// The kinetic relaxation's formulas (source: `crates/cloud/formulas/relaxation.rs`).
pub mod relaxation {
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/relaxation.rs");
}

/// The Taylor basis at an offset (source: `crates/cloud/formulas/basis.rs`).
pub mod basis {
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/basis.rs");
}

/// The boundary conditions' formulas (source: `crates/cloud/formulas/boundary.rs`).
pub mod boundary {
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/boundary.rs");
}

/// The names the per-particle passes add to the formula dialect, for the device: the
/// neighbour list's launch struct ([`crate::launch::Neighbours`]), states with the variables end
/// to end, MOOD's integers as `u32` (the CPU's: [`mote_cloud::formula::pass`]).
pub(crate) mod pass {
    use cubecl::prelude::*;

    pub(crate) use crate::launch::{Neighbours, slot_base};

    /// A pass's states: the variables end to end (`u[v n + i]`).
    pub type States<F> = Array<F>;

    /// MOOD's orders.
    pub type Order = u32;

    /// MOOD's per-particle codes.
    pub type Flag = u32;

    /// Variable `v` of particle `i` of `n`.
    #[cube]
    pub fn value<F: Float>(u: &Array<F>, v: usize, i: usize, n: usize) -> F {
        u[v * n + i]
    }

    /// `a` where `c`, else `b` (integers).
    #[cube]
    pub fn choose<T: CubePrimitive>(c: bool, a: T, b: T) -> T {
        select(c, a, b)
    }

    /// Where a particle's slot loop ends: at the longest list (every unit runs the same count,
    /// masking the slots past its own: the software driver's loop limits, see [`crate::mls`]).
    #[cube]
    pub fn slot_end(list: &Neighbours, _count: u32) -> u32 {
        list.max_count
    }
}

/// MOOD's per-particle passes (source: `crates/cloud/formulas/mood_passes.rs`).
pub(crate) mod mood_passes {
    use super::mood::{breaks_smoothness, exceeds_range};
    use super::pass::*;
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/mood_passes.rs");
}

/// The Euler equations' formulas (source: `crates/cloud/formulas/euler.rs`).
pub mod euler {
    use super::{and, finite, ge, gt, is_nan, lt, ne, or};
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/euler.rs");
}

/// The slope limiters' formulas (source: `crates/cloud/formulas/limiter.rs`).
pub mod limiter {
    use super::{gt, le, lt, or};
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/limiter.rs");
}

/// MOOD's tests (source: `crates/cloud/formulas/mood.rs`).
pub mod mood {
    use super::{and, gt, le, lt, or};
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/mood.rs");
}

/// Linear advection's and Burgers' formulas (source: `crates/cloud/formulas/scalar.rs`).
pub mod scalar {
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/scalar.rs");
}

/// The numerical fluxes every equation has and the moving-cloud flux pieces (source:
/// `crates/cloud/formulas/riemann.rs`).
pub mod riemann {
    use super::{and, ge, gt, ne, or};
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/riemann.rs");
}

/// The gravity tree's opening test and quadrupole terms (source:
/// `crates/gravity/formulas/tree.rs`).
pub mod tree {
    use super::gt;
    use cubecl::prelude::*;

    mote_formula::device!("../gravity/formulas/tree.rs");
}

/// The kinetic transport's formulas (source: `crates/cloud/formulas/kinetic.rs`).
pub mod kinetic {
    use super::gt;
    use cubecl::prelude::*;

    mote_formula::device!("../cloud/formulas/kinetic.rs");
}
