//! Slope limiters on the device: the CPU's limiter pass ([`mote_cloud::scheme::Limiter`])
//! between the derivative and the flux pass, operation for operation.
//!
//! - **Barth-Jespersen** and **Venkatakrishnan** (soft: the gradient only; hard: every term):
//!   the extremes of the particle's and its neighbours' values, then for each neighbour the
//!   change of the reconstruction at the pair's midpoint (the basis recursion on the half
//!   offset, as the flux pass evaluates it) and the smallest factor that keeps it inside them.
//! - **minmod** and **superbee** (1-D): the one-sided differences to the nearest neighbour on
//!   each side (ties: the smaller index, the first slot), the classical limited slope, and the
//!   higher derivatives dropped.
//!
//! Each unit reads its neighbours' states and positions and rewrites only its own derivative
//! record; the slot loops run the maximum count with masks (the software driver's loop limits,
//! see [`crate::mls`]).

// Kernels: negated comparisons keep the CPU's NaN behaviour, and a compile-time
// `if comptime![..]` stays apart from the run-time test inside it.
#![allow(clippy::neg_cmp_op_on_partial_ord, clippy::collapsible_if)]

use cubecl::prelude::*;
use mote_cloud::scheme::{Limiter, LimiterKind, LimiterMode};

use crate::formula::basis::taylor_recursive;
use crate::formula::limiter::{bounded_factor, limited_slope};
use crate::launch::{Neighbours, Positions, Reconstruction, offset, slot_base};

/// The limiter kinds as the kernel's compile-time code.
pub(crate) const BARTH_JESPERSEN: u32 = 1;
pub(crate) const VENKATAKRISHNAN: u32 = 2;
pub(crate) const MINMOD: u32 = 3;
pub(crate) const SUPERBEE: u32 = 4;

/// The kernel's code for `limiter` (0: none) and the number of terms it scales out of `terms`
/// in `dim` dimensions.
pub(crate) fn code(limiter: &Limiter, terms: usize, dim: usize) -> (u32, usize) {
    let kind = match limiter.kind {
        LimiterKind::None => 0,
        LimiterKind::BarthJespersen => BARTH_JESPERSEN,
        LimiterKind::Venkatakrishnan => VENKATAKRISHNAN,
        LimiterKind::Minmod => MINMOD,
        LimiterKind::Superbee => SUPERBEE,
    };
    let scaled = match limiter.mode {
        LimiterMode::Soft => dim.min(terms),
        LimiterMode::Hard => terms,
    };
    (kind, scaled)
}

/// Limits every variable's derivative record of each particle in place (`derivs[i * vars *
/// terms + v * terms + a]`). `eps2` is Venkatakrishnan's `(K dx)^3`; `scaled` the terms the
/// multi-dimensional limiters scale (soft: the first `dim`, hard: all).
#[cube(launch_unchecked)]
pub(crate) fn limiter_kernel<F: Float>(
    pos: &Positions<F>,
    u: &Array<F>,
    list: &Neighbours,
    basis_of: &Reconstruction<F>,
    eps2: &Array<F>,
    derivs: &mut Array<F>,
    #[comptime] kind: u32,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
    #[comptime] terms: usize,
    #[comptime] scaled: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let nu = list.n as usize;
        let count = list.counts[i];
        let (base, stride) = slot_base(list, i);
        let mut delta = Array::<F>::new(3usize);
        let mut phi = Array::<F>::new(comptime![if scaled > 0 { scaled } else { 1 }]);
        #[unroll]
        for v in 0..vars {
            let ui = u[v * nu + i];
            let rec = i * vars * terms + v * terms;
            if comptime![kind == MINMOD || kind == SUPERBEE] {
                // Nearest neighbour on each side; slots are sorted by index, so a strict
                // comparison keeps the smaller index on a tie.
                let mut has_left = false;
                let mut has_right = false;
                let mut dl = F::new(0.0);
                let mut ul = F::new(0.0);
                let mut dr = F::new(0.0);
                let mut ur = F::new(0.0);
                for k in 0..list.max_count {
                    if k < count {
                        let j = list.indices[base + k as usize * stride] as usize;
                        let dx = offset::<F>(pos, i, j, 0usize);
                        let du = u[v * nu + j] - ui;
                        if dx < F::new(0.0) && (!has_left || dx > dl) {
                            has_left = true;
                            dl = dx;
                            ul = du;
                        } else if dx > F::new(0.0) && (!has_right || dx < dr) {
                            has_right = true;
                            dr = dx;
                            ur = du;
                        }
                    }
                }
                let mut slope = F::new(0.0);
                if has_left && has_right {
                    slope = limited_slope::<F>(ul / dl, ur / dr, comptime![kind == SUPERBEE]);
                }
                derivs[rec] = slope;
                #[unroll]
                for a in 1..terms {
                    derivs[rec + a] = F::new(0.0);
                }
            } else {
                let mut lo = ui;
                let mut hi = ui;
                for k in 0..list.max_count {
                    if k < count {
                        let uj = u[v * nu + list.indices[base + k as usize * stride] as usize];
                        lo = F::min(lo, uj);
                        hi = F::max(hi, uj);
                    }
                }
                let mut factor = F::new(1.0);
                for k in 0..list.max_count {
                    if k < count {
                        let j = list.indices[base + k as usize * stride] as usize;
                        #[unroll]
                        for d in 0..dim {
                            delta[d] = F::new(0.5) * offset::<F>(pos, i, j, d);
                        }
                        taylor_recursive::<F>(
                            &delta,
                            &basis_of.recursion,
                            &basis_of.factor,
                            &mut phi,
                            scaled,
                        );
                        let mut change = F::new(0.0);
                        #[unroll]
                        for a in 0..scaled {
                            change += derivs[rec + a] * phi[a];
                        }
                        let f = bounded_factor::<F>(
                            change,
                            hi - ui,
                            lo - ui,
                            eps2[0],
                            comptime![kind == BARTH_JESPERSEN],
                        );
                        factor = F::min(factor, f);
                    }
                }
                #[unroll]
                for a in 0..scaled {
                    derivs[rec + a] *= factor;
                }
            }
        }
    }
}
