//! The two passes of a stage, batched in lanes: the MLS derivatives and the
//! reconstruction-and-flux pass.
//!
//! The derivative pass (and the limiter) take a particle's slots [`LANES`] at a time: per batch
//! the neighbour data (index, state, MLS coefficients) are gathered into lane arrays `x[lane]`,
//! one accumulator per lane, and the lanes are summed in a fixed order at the end. Padding lanes
//! (slot counts that are not a multiple of [`LANES`]) point at the particle itself with a zero
//! coefficient.
//!
//! The flux pass puts [`LANES`] particles in the lanes instead, each lane walking its own
//! particle's slots (decision 0017): the particles' own values are vectors loaded once per
//! group, the neighbours' are gathered per step, and each particle sums its pairs in slot order
//! (the order of the device's kernel). Lanes whose particle has run out of slots see the
//! particle itself with a zero normal, and their terms are not added.
//!
//! After the gathers everything (minimum-image offsets, the Taylor reconstruction on both
//! sides, the Riemann flux, the accumulation) is a loop over lanes that the compiler
//! vectorises. The bodies are generic and `#[inline(always)]`, instantiated for the SIMD level
//! picked once per pass through [`SimdLevel::run`] (AVX-512, AVX2, portable; the flux pass
//! through [`SimdLevel::run_each_gathers`], which gives its AVX2 level extra copies). Products and sums
//! are written as separate multiplies and adds (no fused multiply-add), so every instantiation
//! gives the same bits and the result depends neither on the machine nor on the thread count.

use mote_core::{Chunks, Real, SimdLevel, SplitOutputs};

use super::{Formulation, MAX_ORDER};
use crate::cloud::{Geometry, MAX_VARIABLES};
use crate::equations::Equation;
use crate::flux::FluxKind;
use crate::formula::riemann;
use crate::mls::Basis;
use crate::search::{NeighbourList, SlotLayout, Slots};

/// Slots per batch: one AVX-512 vector of `f64`.
pub(super) const LANES: usize = 8;

/// Largest number of reconstruction terms: degree `MAX_ORDER - 1 = 4` in 3-D, without the
/// constant.
pub(super) const MAX_TERMS: usize = 34;

/// Largest number of reconstruction terms up to degree 2 (MUSCL 3): `3 + 6` in 3-D.
const QUADRATIC_TERMS: usize = 9;

/// What a flux-pass group is given by its block: the block's first particle, the group's
/// particles (their positions in the block), how many are real, the term count per
/// interface order and the length every slot array has at least.
type GroupContext<'c> = (
    usize,
    &'c [usize; LANES],
    usize,
    &'c [usize; MAX_ORDER + 1],
    usize,
);

/// A flux-pass group's work arrays: the basis functions `phi[a][lane]` at the current pairs,
/// the basis recursion's scratch, and the group's own derivatives `di[v][a][lane]`. Only the
/// first terms that the group's reconstructions use are written and read.
struct GroupArrays<R, const M: usize, const NT: usize> {
    phi: [[R; LANES]; NT],
    scratch: [R; MAX_TERMS],
    di: [[[R; LANES]; NT]; M],
}

impl<R: Real, const M: usize, const NT: usize> GroupArrays<R, M, NT> {
    #[inline(always)]
    fn new() -> Self {
        Self {
            phi: [[R::zero(); LANES]; NT],
            scratch: [R::zero(); MAX_TERMS],
            di: [[[R::zero(); LANES]; NT]; M],
        }
    }
}

/// How far ahead of the current batch, in slots, the batched passes prefetch the per-slot
/// arrays they stream (neighbour indices, MLS coefficients). On this code's test host (Intel
/// Xeon, 2 cores) the hardware prefetchers alone left the passes waiting on these loads: the
/// prefetch took the derivative pass from 33 to 27 ms per SSP-RK3 step and the flux pass from
/// 59 to 54 ms (250 000 particles, 2-D, order 3); 64 to 256 slots gave the same times.
pub(super) const PREFETCH_SLOTS: usize = 128;

/// Asks the cache for the line holding `data[at]`, if `at` is inside `data`: a hint that never
/// faults and changes no result.
#[inline(always)]
pub(super) fn prefetch<T>(data: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < data.len() {
        // SAFETY: `at` is in bounds, and a prefetch has no architectural effect.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().add(at).cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

/// [`prefetch`]es slot `at` of the neighbour indices and of every per-slot array a pass
/// streams.
#[inline(always)]
pub(super) fn prefetch_slots<R>(idx: &[u32], per_slot: &[&[R]], at: usize) {
    prefetch(idx, at);
    for a in per_slot {
        prefetch(a, at);
    }
}

/// The next batch of up to [`LANES`] of particle `i`'s remaining `slots`: the slots, their
/// neighbours (checked below `n`) and how many lanes are real. Padding lanes have slot 0 and
/// the particle itself as neighbour.
#[inline(always)]
pub(super) fn next_batch(
    slots: &mut Slots,
    idx: &[u32],
    i: usize,
    n: usize,
) -> ([usize; LANES], [usize; LANES], usize) {
    let (start, stride, count) = slots.take_batch(LANES);
    // The batch's last slot, checked once: every slot of the batch is at most it.
    let last = start + count.saturating_sub(1) * stride;
    assert!(
        count == 0 || last < idx.len(),
        "slot beyond the index array"
    );
    let mut s_l = [0usize; LANES];
    let mut j_l = [i; LANES];
    for l in 0..count {
        let s = start + l * stride;
        s_l[l] = s;
        // SAFETY: s <= last < idx.len() (asserted above).
        j_l[l] = unsafe { *idx.get_unchecked(s) } as usize;
    }
    // One combined test (no early exit), so that it vectorises.
    let inside = j_l.iter().fold(true, |ok, &j| ok & (j < n));
    assert!(inside, "neighbour index out of range");
    (s_l, j_l, count)
}

/// The reconstruction basis at a batch's half offsets `delta` into `phi[..terms]`: the
/// recursion's products (`Basis::eval_recursive`) in closed form up to degree 2 (the same
/// products in the same order, so the same bits) so that the lanes vectorise, and the
/// recursion lane by lane above. Functions of degree <= 2 come first in the basis order (`D`
/// linear, then the `D (D + 1) / 2` quadratic ones).
#[inline(always)]
pub(super) fn basis_lanes<R: Real, const D: usize, const NT: usize>(
    basis: &Basis<D>,
    delta: &[[R; LANES]; D],
    terms: usize,
    phi: &mut [[R; LANES]; NT],
    scratch: &mut [R; MAX_TERMS],
) {
    let half = R::cast(0.5);
    if terms <= D + D * (D + 1) / 2 {
        let mut t = 0;
        for d in 0..D {
            phi[t] = delta[d];
            t += 1;
        }
        for a in 0..D {
            for b in a..D {
                for l in 0..LANES {
                    let p = delta[a][l] * delta[b][l];
                    phi[t][l] = if a == b { half * p } else { p };
                }
                t += 1;
            }
        }
    } else {
        for l in 0..LANES {
            let q = std::array::from_fn(|d| delta[d][l]);
            basis.eval_recursive(q, &mut scratch[..terms]);
            for a in 0..terms {
                phi[a][l] = scratch[a];
            }
        }
    }
}

/// Half the minimum-image offsets from `xi` to each neighbour `j_l[l]` of a batch (the offsets
/// of the pairs' midpoints), for the flux and limiter passes: both periodic tests on the
/// unwrapped offset (at most one holds), as selects rather than branches, so that the lanes
/// vectorise.
///
/// # Safety
/// Every `j_l[l]` is below every `pos[d].len()` (`next_batch` checks it).
#[inline(always)]
pub(super) unsafe fn half_offsets<R: Real, const D: usize>(
    pos: [&[R]; D],
    xi: &[R; D],
    j_l: &[usize; LANES],
    periodic: [bool; D],
    lengths: &[R; D],
) -> [[R; LANES]; D] {
    let xi = xi.map(|x| [x; LANES]);
    // SAFETY: the caller's contract.
    unsafe { half_offsets_lanes(pos, &xi, j_l, periodic, lengths) }
}

/// [`half_offsets`] from a different particle `xi[d][lane]` in each lane.
///
/// # Safety
/// Every `j_l[l]` is below every `pos[d].len()`.
#[inline(always)]
pub(super) unsafe fn half_offsets_lanes<R: Real, const D: usize>(
    pos: [&[R]; D],
    xi: &[[R; LANES]; D],
    j_l: &[usize; LANES],
    periodic: [bool; D],
    lengths: &[R; D],
) -> [[R; LANES]; D] {
    let half = R::cast(0.5);
    // The gathers first, then the lane arithmetic in plain loops (a gather inside the
    // arithmetic's closure did not vectorise: the flux pass ran 35 % slower).
    let mut delta = [[R::zero(); LANES]; D];
    for d in 0..D {
        for l in 0..LANES {
            // SAFETY: j_l[l] < pos[d].len() (the caller's contract).
            delta[d][l] = unsafe { *pos[d].get_unchecked(j_l[l]) };
        }
    }
    for d in 0..D {
        let (len, hl) = (lengths[d], half * lengths[d]);
        let mut x: [R; LANES] = std::array::from_fn(|l| delta[d][l] - xi[d][l]);
        if periodic[d] {
            for x in &mut x {
                let (up, down) = (*x > hl, *x < -hl);
                *x = if up { *x - len } else { *x };
                *x = if down { *x + len } else { *x };
            }
        }
        for l in 0..LANES {
            delta[d][l] = half * x[l];
        }
    }
    delta
}

/// Everything the flux pass reads.
pub(super) struct FluxPass<'a, R, const D: usize, E> {
    pub eq: &'a E,
    pub geometry: &'a Geometry<'a, R, D>,
    pub u: &'a [&'a [R]],
    pub idx: &'a [u32],
    pub derivs: &'a [R],
    pub grad: [&'a [R]; D],
    pub reverse: &'a [u64],
    pub formulation: Formulation,
    pub basis: &'a Basis<D>,
    pub parity: &'a [R],
    pub order: usize,
    pub mr: usize,
    /// The numerical flux.
    pub flux: FluxKind,
    /// Per-particle reconstruction orders (the cloud's, or MOOD's working copy).
    pub orders: &'a [u8],
    /// Every entry of `orders` is at least `order`: every interface then has the full order,
    /// and the pass need not read the neighbours' orders (the common case without MOOD).
    pub full_order: bool,
    /// Only particles with a non-zero entry are computed (MOOD recomputations); `None`: all.
    pub active: Option<&'a [u8]>,
    /// Particle velocities on a moving cloud (ALE fluxes); `None`: a fixed cloud.
    pub velocity: Option<Velocities<'a, R, D>>,
}

/// The velocities of a moving cloud's particles and their MLS gradients, from which the flux
/// pass forms each interface's velocity.
#[derive(Clone, Copy)]
pub struct Velocities<'a, R, const D: usize> {
    /// `w[d][i]`: component `d` of particle `i`'s velocity.
    pub w: [&'a [R]; D],
    /// `grad[i * D * D + a * D + b]`: `dw_a/dx_b` at particle `i` (one record per particle,
    /// as `Muscl::velocity_gradients` writes it).
    pub grad: &'a [R],
}

/// Particles per block of the flux and derivative passes (their split between ranks is in
/// whole blocks of the same size, `crate::halo::OWN_BLOCK`).
const PASS_BLOCK: usize = crate::halo::OWN_BLOCK;

impl<'a, R: Real, const D: usize, E: Equation<R, D>> FluxPass<'a, R, D, E> {
    /// The pass with `M` variables (`M = MAX_VARIABLES`: the run-time count, up to it), at SIMD
    /// `level` (which the caller has checked is available).
    pub fn run<L: SlotLayout, const M: usize>(
        &self,
        list: &NeighbourList<L>,
        du: Vec<&mut [R]>,
        backend: mote_core::CpuBackend,
        level: SimdLevel,
    ) {
        assert!(level.is_available(), "SIMD level {level} not available");
        // The groups compiled for a constant term count are large (each inlines the whole
        // flux arithmetic); they are compiled only at the level the pass runs at by default
        // (`SimdLevel::for_gathers`: AVX2 on x86-64), and the other levels take the run-time
        // count, which gives the same bits. Compiling them at every level made the clean CI build
        // of the crates that instantiate the solver run past 26 minutes.
        // On several ranks ([`mote_core::comm`]) each evaluates its range of whole blocks and
        // the ranges are gathered: the same blocks, so the same bits, as on one process.
        // On one rank's part of a split cloud the own particles are evaluated and the halo's
        // rates refreshed from their owners (`crate::halo`).
        let world = mote_core::comm::world();
        let n = du.first().map_or(0, |d| d.len());
        let ranges = crate::halo::own_ranges(n, world.size());
        let mine = match list.halo() {
            Some(halo) => halo.own(),
            None => ranges[world.rank()].clone(),
        };
        let mut du = du;
        let own: Vec<&mut [R]> = du.iter_mut().map(|d| &mut d[mine.clone()]).collect();
        backend.for_each_block(own, PASS_BLOCK, |first, mut out| {
            let first = mine.start + first;
            level.run_each_gathers(
                &mut out,
                #[inline(always)]
                |out| self.block::<L, M, false>(list, first, out),
                #[inline(always)]
                |out| self.block::<L, M, true>(list, first, out),
            )
        });
        if let Some(halo) = list.halo() {
            halo.exchange_columns(&mut du);
        } else if world.size() > 1 {
            let scratch = &mut Vec::new();
            for d in du {
                mote_core::comm::gather_parts(world.as_ref(), d, &ranges, scratch);
            }
        }
    }

    /// The body of every instantiation: [`LANES`] particles at a time, one per lane (the
    /// block's active particles in order), each lane walking its own particle's slots, so that
    /// the particle's values (state, position, derivatives, own fluxes) are vectors loaded once
    /// per group and each particle's fluxes are summed in slot order. Lanes whose particle has
    /// no slot left (or that pad the last group) see their particle itself with a zero normal,
    /// and their terms are not added.
    ///
    /// With `CONSTANT_TERMS`, the groups of scalar equations at orders 2 and 3 without MOOD
    /// are compiled for their constant term count.
    #[inline(always)]
    fn block<L: SlotLayout, const M: usize, const CONSTANT_TERMS: bool>(
        &self,
        list: &NeighbourList<L>,
        first: usize,
        out: &mut [&mut [R]],
    ) {
        const W: usize = LANES;
        let m = if M < MAX_VARIABLES {
            M
        } else {
            self.eq.variables()
        };
        let Self {
            geometry,
            u,
            idx,
            derivs,
            grad,
            order,
            mr,
            orders,
            full_order,
            active,
            velocity,
            ..
        } = *self;
        let width = m * mr;
        let pos = geometry.positions;
        let vol = geometry.volumes;
        // Reconstruction terms per interface order; functions of degree <= 2 come first in the
        // basis order (D linear, then D (D + 1) / 2 quadratic) and have a closed form.
        let terms_for_order: [usize; MAX_ORDER + 1] = std::array::from_fn(|k| {
            if k > 1 {
                Basis::<D>::size(k - 1).min(mr)
            } else {
                0
            }
        });
        // Every unchecked read in the groups is in bounds: the per-particle arrays have `n`
        // entries (asserted here), each neighbour index is checked below `n` per step, and each
        // particle's slots are checked against the per-slot arrays once.
        let n = vol.len();
        assert!(
            pos.iter().all(|p| p.len() == n)
                && u[..m].iter().all(|x| x.len() == n)
                && orders.len() == n
                && active.is_none_or(|a| a.len() == n)
                && velocity
                    .is_none_or(|v| v.w.iter().all(|x| x.len() == n) && v.grad.len() == n * D * D)
                && derivs.len() == n * width
                && mr <= MAX_TERMS,
            "flux pass: arrays of unequal lengths"
        );
        let slot_len = grad
            .iter()
            .map(|g| g.len())
            .min()
            .unwrap_or(0)
            .min(idx.len());
        // With `CONSTANT_TERMS` (the level the pass runs at by default), scalar equations
        // without MOOD at orders 2 and 3 run a faster copy of the group: every interface has
        // the scheme's order, and the term count is a constant of the compiled group (D, or
        // D + D (D + 1) / 2), so that its loops unroll and its lane arrays stay in registers
        // (advection, MUSCL 3, 250 000 particles: flux pass 17 -> 15 ms per stage).
        // Systems get no such copies (nor copies with arrays bounded at degree 2): each took
        // about 10 s to compile, the solver is instantiated for about a hundred combinations
        // of types, and with them CI's test build took 22 minutes.
        let full_terms = terms_for_order[order];
        let quad = D + D * (D + 1) / 2;
        // Set up once per block rather than per group: zeroing the large arrays per group
        // cost a few per cent of the pass.
        let mut general = GroupArrays::<R, M, MAX_TERMS>::new();
        let n_out = out.first().map_or(0, |o| o.len());
        let mut next = 0;
        while next < n_out {
            // The next group: up to W active particles of the block, in order.
            let mut ks = [0usize; W];
            let mut lanes = 0;
            while next < n_out && lanes < W {
                if active.is_none_or(|a| a[first + next] != 0) {
                    ks[lanes] = next;
                    lanes += 1;
                }
                next += 1;
            }
            if lanes == 0 {
                break;
            }
            for l in lanes..W {
                ks[l] = ks[0];
            }
            let ctx = (first, &ks, lanes, &terms_for_order, slot_len);
            // The `const` conditions keep the copies from being compiled where they are not
            // wanted; the constant-count groups have their arrays to themselves (in registers).
            if const { CONSTANT_TERMS && M == 1 } && full_order && full_terms == D {
                let mut own = GroupArrays::<R, M, QUADRATIC_TERMS>::new();
                self.group(list, ctx, out, Some(D), &mut own);
            } else if const { CONSTANT_TERMS && M == 1 } && full_order && full_terms == quad {
                let mut own = GroupArrays::<R, M, QUADRATIC_TERMS>::new();
                self.group(list, ctx, out, Some(quad), &mut own);
            } else {
                // Every interface has the scheme's order when every particle has it: the term
                // count is then known per block (a run-time value, so no further copy of the
                // group), and the neighbours' orders need not be read (Euler MUSCL 2: flux
                // pass 7 % faster, same bits).
                let fixed = full_order.then_some(full_terms);
                self.group(list, ctx, out, fixed, &mut general);
            }
        }
    }

    /// One group of [`LANES`] particles (`ks`: their positions in the block, `lanes` of them
    /// real) with reconstructions of `fixed` terms at every interface, or of each interface's
    /// own count (`None`); `NT` bounds the term count.
    #[inline(always)]
    fn group<L: SlotLayout, const M: usize, const NT: usize>(
        &self,
        list: &NeighbourList<L>,
        (first, ks, lanes, terms_for_order, slot_len): GroupContext<'_>,
        out: &mut [&mut [R]],
        fixed: Option<usize>,
        arrays: &mut GroupArrays<R, M, NT>,
    ) {
        const W: usize = LANES;
        let m = if M < MAX_VARIABLES {
            M
        } else {
            self.eq.variables()
        };
        let Self {
            eq,
            geometry,
            u,
            idx,
            derivs,
            grad,
            reverse,
            formulation,
            basis,
            parity,
            order,
            mr,
            flux,
            orders,
            full_order: _,
            active: _,
            velocity,
        } = *self;
        let width = m * mr;
        let central = flux == FluxKind::Central;
        let pos = geometry.positions;
        let vol = geometry.volumes;
        let periodic = geometry.periodic;
        let lengths = geometry.lengths.map(R::cast);
        let two = R::cast(2.0);
        let conservative = formulation == Formulation::Conservative;
        let checks = eq.checks_reconstruction();
        let moving = velocity.is_some();
        let n = vol.len();
        let own_terms = fixed.unwrap_or(mr);
        assert!(
            own_terms <= NT && mr <= MAX_TERMS,
            "flux pass: too many terms"
        );
        let GroupArrays { phi, scratch, di } = arrays;
        let i_l: [usize; W] = std::array::from_fn(|l| first + ks[l]);
        assert!(
            i_l.iter().fold(true, |ok, &i| ok & (i < n)),
            "flux pass: particle beyond the arrays"
        );
        let ui: [[R; W]; M] = std::array::from_fn(|v| {
            std::array::from_fn(|l| if v < m { u[v][i_l[l]] } else { R::zero() })
        });
        let xi: [[R; W]; D] = std::array::from_fn(|d| std::array::from_fn(|l| pos[d][i_l[l]]));
        let order_i: [usize; W] = std::array::from_fn(|l| (orders[i_l[l]] as usize).min(order));
        for v in 0..m {
            for a in 0..own_terms {
                for l in 0..W {
                    di[v][a][l] = derivs[i_l[l] * width + v * mr + a];
                }
            }
        }
        // F_d(u_i) for each axis, for (a)'s consistency term.
        let mut fi = [[[R::zero(); W]; M]; D];
        for (d, fd) in fi.iter_mut().enumerate() {
            let mut e = [[R::zero(); W]; D];
            e[d] = [R::one(); W];
            eq.flux_lanes(m, &ui, &e, fd);
        }
        // On a moving cloud: each particle's velocity and its gradient.
        let mut wi = [[R::zero(); W]; D];
        let mut gi = [[[R::zero(); W]; D]; D];
        if let Some(vel) = velocity {
            for a in 0..D {
                for l in 0..W {
                    wi[a][l] = vel.w[a][i_l[l]];
                    for b in 0..D {
                        gi[a][b][l] = vel.grad[(i_l[l] * D + a) * D + b];
                    }
                }
            }
        }
        // Each lane's slots.
        let mut start = [0usize; W];
        let mut stride = [0usize; W];
        let mut count = [0usize; W];
        for l in 0..lanes {
            let mut slots = list.slots(i_l[l]);
            assert!(
                slots.end() <= slot_len,
                "flux pass: slot beyond the slot arrays"
            );
            if conservative {
                assert!(slots.end() <= reverse.len(), "flux pass: no reverse slots");
            }
            (start[l], stride[l], count[l]) = slots.take_batch(usize::MAX);
        }
        // A lane with the most slots: its slot at every step is a real one, which the lanes
        // that have run out read instead of their own (and discard).
        let longest = (0..W).fold(0, |b, l| if count[l] > count[b] { l } else { b });
        let steps = count[longest];
        let mut acc = [[R::zero(); W]; M];
        for step in 0..steps {
            let live: [bool; W] = std::array::from_fn(|l| step < count[l]);
            let spare = start[longest] + step * stride[longest];
            // SAFETY (slot reads): every live slot is below its particle's end, which is at
            // most `slot_len` (asserted above), and `spare` is a live slot.
            let s_l: [usize; W] = std::array::from_fn(|l| {
                if live[l] {
                    start[l] + step * stride[l]
                } else {
                    spare
                }
            });
            if L::CONTIGUOUS {
                // The group's slots are consecutive: fetch the next group's ahead.
                prefetch_slots(idx, &grad, start[0] + PREFETCH_SLOTS + step * W);
            }
            let j_l: [usize; W] = std::array::from_fn(|l| {
                let j = unsafe { *idx.get_unchecked(s_l[l]) } as usize;
                if live[l] { j } else { i_l[l] }
            });
            // One combined test (no early exit), so that it vectorises.
            let inside = j_l.iter().fold(true, |ok, &j| ok & (j < n));
            assert!(inside, "neighbour index out of range");
            let mut normal = [[R::zero(); W]; D];
            for d in 0..D {
                for l in 0..W {
                    let g = unsafe { *grad[d].get_unchecked(s_l[l]) };
                    normal[d][l] = if live[l] { g } else { R::zero() };
                }
            }
            if conservative {
                for l in 0..W {
                    if live[l] {
                        let (i, j, back) = (i_l[l], j_l[l], reverse[s_l[l]] as usize);
                        for d in 0..D {
                            normal[d][l] = vol[i] * normal[d][l] - vol[j] * grad[d][back];
                        }
                    }
                }
            }
            // SAFETY (all gathers below): every j_l[l] < n, the length of each array.
            let delta = unsafe { half_offsets_lanes(pos, &xi, &j_l, periodic, &lengths) };
            let mut ul = [[R::zero(); W]; M];
            let mut ur = [[R::zero(); W]; M];
            for v in 0..m {
                ul[v] = ui[v];
                for l in 0..W {
                    ur[v][l] = unsafe { *u[v].get_unchecked(j_l[l]) };
                }
            }
            let mut terms = [0; W];
            let tmax = match fixed {
                Some(t) => t,
                None => {
                    terms = std::array::from_fn(|l| {
                        let oj = unsafe { *orders.get_unchecked(j_l[l]) } as usize;
                        terms_for_order[order_i[l].min(oj)]
                    });
                    terms.iter().copied().max().unwrap_or(0)
                }
            };
            if tmax > 0 {
                basis_lanes(basis, &delta, tmax, phi, scratch);
                // Mixed orders: a lane uses only its interface order's terms.
                if fixed.is_none() && terms.iter().any(|&t| t != tmax) {
                    for a in 0..tmax {
                        for l in 0..W {
                            if a >= terms[l] {
                                phi[a][l] = R::zero();
                            }
                        }
                    }
                }
                // The neighbours' derivatives are gathered into a lane array first and the
                // sums kept in locals, so that the arithmetic vectorises.
                for v in 0..m {
                    let (mut left, mut right) = (ul[v], ur[v]);
                    for a in 0..tmax {
                        let pa = parity[a];
                        let mut rj = [R::zero(); W];
                        for l in 0..W {
                            // SAFETY: j < n and v * mr + a < width, so the index is below
                            // n * width = derivs.len().
                            rj[l] = unsafe { *derivs.get_unchecked(j_l[l] * width + v * mr + a) };
                        }
                        for l in 0..W {
                            left[l] += di[v][a][l] * phi[a][l];
                            right[l] += rj[l] * (phi[a][l] * pa);
                        }
                    }
                    (ul[v], ur[v]) = (left, right);
                }
                // A reconstruction outside the admissible states (negative density or
                // pressure) falls back to first order for that pair, before any floor.
                if checks {
                    let (ok_l, ok_r) = (
                        eq.admissible_lanes::<M, W>(m, &ul),
                        eq.admissible_lanes::<M, W>(m, &ur),
                    );
                    let ok: [bool; W] = std::array::from_fn(|l| ok_l[l] & ok_r[l]);
                    // Rare: the failing lanes take the particle values again (the
                    // neighbour's re-read), instead of keeping copies of every step's.
                    if !ok.iter().fold(true, |all, &o| all & o) {
                        for v in 0..m {
                            for l in 0..W {
                                if !ok[l] {
                                    ul[v][l] = ui[v][l];
                                    // SAFETY: j_l[l] < n = u[v].len().
                                    ur[v][l] = unsafe { *u[v].get_unchecked(j_l[l]) };
                                }
                            }
                        }
                    }
                }
            }
            let mut f = [[R::zero(); W]; M];
            // On a moving cloud the pair exchanges G = F - u w, with w the interface
            // velocity (the mean of the two particles'), and the consistency term subtracts
            // `G(u_i)` with the same `w`: a uniform state gives exactly zero (free-stream
            // preservation), and the result is the rate of change of `u` following the
            // particle. Rusanov uses the wave speeds relative to the interface; the central
            // flux averages G; other fluxes (HLLC, scalar upwind) are taken in the fixed
            // frame and the `-u (w . n)` part is upwinded on its own (more dissipative).
            //
            // The interface velocity is the mean of the plain average `(w_i + w_j) / 2`
            // (error `+1/2 d'Hd` at the midpoint, `d` the half offset) and of the two
            // one-sided Taylor values `w_i + grad w_i . d`, `w_j - grad w_j . d` (error
            // `-1/2 d'Hd`): third-order accurate, where the plain average alone would cap
            // the scheme at second order.
            let mut wn = [R::zero(); W];
            if let Some(vel) = velocity {
                for a in 0..D {
                    for l in 0..W {
                        // SAFETY: j_l[l] < n, the length of every velocity array (asserted
                        // above).
                        let j = j_l[l];
                        let wj = unsafe { *vel.w[a].get_unchecked(j) };
                        let mut slope = R::zero();
                        for b in 0..D {
                            let gj = unsafe { *vel.grad.get_unchecked((j * D + a) * D + b) };
                            slope += (gi[a][b][l] - gj) * delta[b][l];
                        }
                        let wm = riemann::interface_velocity(wi[a][l], wj, slope);
                        wn[l] += wm * normal[a][l];
                    }
                }
                if central || flux == FluxKind::Rusanov {
                    let mut fl = [[R::zero(); W]; M];
                    let mut fr = [[R::zero(); W]; M];
                    eq.flux_lanes(m, &ul, &normal, &mut fl);
                    eq.flux_lanes(m, &ur, &normal, &mut fr);
                    let mut s = [R::zero(); W];
                    if !central {
                        for l in 0..W {
                            let nl: [R; D] = std::array::from_fn(|d| normal[d][l]);
                            let a: [R; M] = std::array::from_fn(|v| ul[v][l]);
                            let b: [R; M] = std::array::from_fn(|v| ur[v][l]);
                            let (a0, a1) = eq.wave_speed_bounds(&a[..m], nl);
                            let (b0, b1) = eq.wave_speed_bounds(&b[..m], nl);
                            s[l] = riemann::relative_speed(a0, a1, b0, b1, wn[l]);
                        }
                    }
                    for v in 0..m {
                        for l in 0..W {
                            let gl = fl[v][l] - wn[l] * ul[v][l];
                            let gr = fr[v][l] - wn[l] * ur[v][l];
                            f[v][l] = riemann::rusanov_flux(ul[v][l], ur[v][l], gl, gr, s[l]);
                        }
                    }
                } else {
                    eq.numerical_flux_lanes::<M, W>(flux, m, &ul, &ur, &normal, &mut f);
                    for v in 0..m {
                        for l in 0..W {
                            f[v][l] -= riemann::carried_by_motion(ul[v][l], ur[v][l], wn[l]);
                        }
                    }
                }
            } else {
                eq.numerical_flux_lanes::<M, W>(flux, m, &ul, &ur, &normal, &mut f);
            }
            // The consistency term of (a); on a fixed cloud `wn` is zero and its term is
            // skipped. Lanes without a slot at this step add nothing.
            for v in 0..m {
                for l in 0..W {
                    let mut x = f[v][l];
                    if !conservative {
                        for d in 0..D {
                            x -= fi[d][v][l] * normal[d][l];
                        }
                        if moving {
                            x += ui[v][l] * wn[l];
                        }
                    }
                    acc[v][l] += if live[l] { x } else { R::zero() };
                }
            }
        }
        for v in 0..m {
            for l in 0..lanes {
                out[v][ks[l]] = if conservative {
                    -acc[v][l] / vol[i_l[l]]
                } else {
                    -two * acc[v][l]
                };
            }
        }
    }
}

/// Everything the derivative pass reads: `coeffs[a][s]` is the MLS coefficient of basis term
/// `a` for slot `s`.
pub(super) struct DerivativePass<'a, R> {
    pub u: &'a [&'a [R]],
    pub idx: &'a [u32],
    pub coeffs: &'a [&'a [R]],
}

impl<'a, R: Real> DerivativePass<'a, R> {
    /// `out[i * m * mr + v * mr + a] = sum_s coeffs[a][s] (u_v[j(s)] - u_v[i])`, at SIMD `level`.
    pub fn run<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        out: &mut [R],
        backend: mote_core::CpuBackend,
        level: SimdLevel,
    ) {
        assert!(level.is_available(), "SIMD level {level} not available");
        let width = self.u.len() * self.coeffs.len();
        super::on_own_blocks(list.halo(), out, width, |start, own| {
            backend.for_each_block(Chunks::new(own, width), PASS_BLOCK, |first, mut out| {
                level.run_gathers(
                    #[inline(always)]
                    || self.block(list, start + first, &mut out),
                )
            });
        });
    }

    /// The body of every instantiation: `LANES` slots at a time, the batch's neighbour indices
    /// and coefficients loaded once for all variables (as contiguous vectors when the layout's
    /// slots are consecutive), one accumulator lane per slot position and term, summed in lane
    /// order at the end.
    #[inline(always)]
    fn block<L: SlotLayout>(&self, list: &NeighbourList<L>, first: usize, out: &mut Chunks<'_, R>) {
        const W: usize = LANES;
        let Self { u, idx, coeffs } = *self;
        let (m, mr) = (u.len(), coeffs.len());
        assert!(
            mr <= MAX_TERMS && m <= MAX_VARIABLES,
            "derivative pass: too many terms or variables"
        );
        let n = u.first().map_or(0, |x| x.len());
        assert!(
            u.iter().all(|x| x.len() == n),
            "derivative pass: unequal lengths"
        );
        let slot_len = coeffs
            .iter()
            .map(|c| c.len())
            .min()
            .unwrap_or(0)
            .min(idx.len());
        // acc[v * mr + a][lane]
        let mut acc = [[R::zero(); W]; MAX_VARIABLES * MAX_TERMS];
        let mut c = [[R::zero(); W]; MAX_TERMS];
        for k in 0..SplitOutputs::len(out) {
            let i = first + k;
            let record = out.chunk_mut(k);
            let mut slots = list.slots(i);
            assert!(
                slots.end() <= slot_len,
                "derivative pass: slot beyond the slot arrays"
            );
            // A plain loop: `from_fn` over `MAX_VARIABLES` became a call per particle.
            let mut ui = [R::zero(); MAX_VARIABLES];
            for v in 0..m {
                ui[v] = u[v][i];
            }
            while slots.len() > 0 {
                let (s_l, j_l, count) = next_batch(&mut slots, idx, i, n);
                if L::CONTIGUOUS {
                    prefetch_slots(idx, coeffs, s_l[0] + PREFETCH_SLOTS);
                }
                // Padding lanes have a zero coefficient and a zero difference (their neighbour
                // is the particle itself): they add +0 to every accumulator.
                if L::CONTIGUOUS && count == W {
                    let s0 = s_l[0];
                    for (ca, coeff) in c.iter_mut().zip(coeffs) {
                        // In bounds: s0 + W - 1 = s_l[W - 1] < slot_len <= coeff.len().
                        *ca = coeff[s0..s0 + W].try_into().expect("W slots");
                    }
                } else {
                    for (ca, coeff) in c.iter_mut().zip(coeffs) {
                        for l in 0..W {
                            // SAFETY: every s_l[l] < slot_len <= coeff.len().
                            ca[l] = if l < count {
                                unsafe { *coeff.get_unchecked(s_l[l]) }
                            } else {
                                R::zero()
                            };
                        }
                    }
                }
                for v in 0..m {
                    let uv = u[v];
                    let mut diff = [R::zero(); W];
                    for l in 0..W {
                        // SAFETY: j_l[l] < n = uv.len().
                        diff[l] = unsafe { *uv.get_unchecked(j_l[l]) } - ui[v];
                    }
                    for (row, ca) in acc[v * mr..(v + 1) * mr].iter_mut().zip(&c) {
                        for l in 0..W {
                            row[l] += ca[l] * diff[l];
                        }
                    }
                }
            }
            // Each accumulator is zeroed as it is read, ready for the next particle (a
            // separate clearing loop became a `memset` call per particle).
            for (out, row) in record.iter_mut().zip(&mut acc[..m * mr]) {
                let mut sum = R::zero();
                for l in 0..W {
                    sum += row[l];
                }
                *out = sum;
                *row = [R::zero(); W];
            }
        }
    }
}
