//! MOOD's per-particle passes, written once for the CPU and the device (the pass dialect of
//! `mote-formula`: the formula dialect plus a particle's neighbour slots). Each function computes
//! what one particle `i` reads from itself and its neighbours (the pull form: no particle writes
//! another's entry, so the result does not depend on the thread count or the launch order); the
//! CPU runs it in its threads' blocks, the device in one unit per particle. The counting, the
//! round control (`mote_cloud::mood::Rounds`) and the buffers are the backends' own.
//!
//! Names the caller supplies: `Neighbours` (`n`, `counts`, `indices`), `slot_base` (a particle's
//! first slot and the stride between its slots), `slot_end` (how far a slot loop runs: the
//! particle's count on the CPU, the longest list on the device, which masks the rest), `States`
//! and `value` (variable `v` of particle `i`: one slice per variable on the CPU, the variables end
//! to end on the device), `Order` and `Flag` (`u8` on the CPU, `u32` on the device) and `choose`
//! (an integer `select`).

/// A particle passes.
pub const PASS: Flag = 0;
/// A particle fails the criterion.
pub const FAIL: Flag = 1;
/// A particle's candidate state is not admissible.
pub const INADMISSIBLE: Flag = 2;
/// No failing particle in reach: no cap on the order.
pub const NO_CAP: Order = Order::MAX;

/// The halo strategies' codes.
pub const EPD0: u32 = 0;
/// One ring capped.
pub const EPD1: u32 = 1;
/// Two rings capped.
pub const EPD2: u32 = 2;
/// Failing particles and all their neighbours drop by one.
pub const STRICT: u32 = 3;

/// One order lower, never below 1.
pub fn lower(order: Order) -> Order {
    Order::max(order, 2) - 1
}

/// u1: whether particle `i`'s candidate leaves the range of its own and its neighbours'
/// `input` values in some variable, by more than `delta max(1, |min|, |max|)` (ranges below
/// `tiny` never fail: `exceeds_range`).
pub fn leaves_range<F: Float>(
    input: &States<F>,
    candidate: &States<F>,
    list: &Neighbours,
    i: usize,
    delta: F,
    tiny: F,
    #[comptime] vars: usize,
) -> bool {
    let n = list.n as usize;
    let count = list.counts[i];
    let (base, stride) = slot_base(list, i);
    let mut fails = false;
    #[unroll]
    for v in 0..vars {
        let mut lo = value::<F>(input, v, i, n);
        let mut hi = lo;
        for k in 0..slot_end(list, count) {
            if k < count {
                let x = value::<F>(
                    input,
                    v,
                    list.indices[base + k as usize * stride] as usize,
                    n,
                );
                lo = F::min(lo, x);
                hi = F::max(hi, x);
            }
        }
        if exceeds_range::<F>(value::<F>(candidate, v, i, n), lo, hi, delta, tiny) {
            fails = true;
        }
    }
    fails
}

/// u2: the second derivative of variable `v` at particle `i` along the axis whose MLS
/// coefficients start at `coef[row]` (slots summed in order).
pub fn curvature<F: Float>(
    input: &States<F>,
    coef: &Array<F>,
    row: usize,
    list: &Neighbours,
    i: usize,
    #[comptime] v: usize,
) -> F {
    let n = list.n as usize;
    let count = list.counts[i];
    let (base, stride) = slot_base(list, i);
    let ui = value::<F>(input, v, i, n);
    let mut c = F::new(0.0);
    for k in 0..slot_end(list, count) {
        if k < count {
            let s = base + k as usize * stride;
            c += coef[row + s] * (value::<F>(input, v, list.indices[s] as usize, n) - ui);
        }
    }
    c
}

/// u2: whether particle `i`'s failure is a smooth extremum: every variable's curvature along
/// every axis (`curvature[(j vars + v) dim + d]`) has one sign over the particle and its
/// neighbours, within a factor of two, or is negligible (below `delta` after scaling by `h2`,
/// the MLS spacing squared).
pub fn smooth_extremum<F: Float>(
    curvature: &Array<F>,
    list: &Neighbours,
    i: usize,
    h2: F,
    delta: F,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) -> bool {
    let count = list.counts[i];
    let (base, stride) = slot_base(list, i);
    let mut smooth = true;
    #[unroll]
    for v in 0..vars {
        #[unroll]
        for d in 0..dim {
            let mut lo = curvature[(i * vars + v) * dim + d];
            let mut hi = lo;
            for k in 0..slot_end(list, count) {
                if k < count {
                    let j = list.indices[base + k as usize * stride] as usize;
                    let x = curvature[(j * vars + v) * dim + d];
                    lo = F::min(lo, x);
                    hi = F::max(hi, x);
                }
            }
            if breaks_smoothness::<F>(lo, hi, h2, delta) {
                smooth = false;
            }
        }
    }
    smooth
}

/// epd2: the lowest reduced order of the failing particles among `i` and its neighbours
/// (`NO_CAP` if none fails).
pub fn halo_cap(fail: &Array<Flag>, orders: &Array<Order>, list: &Neighbours, i: usize) -> Order {
    let count = list.counts[i];
    let (base, stride) = slot_base(list, i);
    let mut c = choose::<Order>(fail[i] != PASS, lower(orders[i]), NO_CAP);
    for k in 0..slot_end(list, count) {
        if k < count {
            let j = list.indices[base + k as usize * stride] as usize;
            if fail[j] != PASS {
                c = Order::min(c, lower(orders[j]));
            }
        }
    }
    c
}

/// Particle `i`'s new order under the halo `strategy` (`EPD0` .. `STRICT`; `cap` from
/// [`halo_cap`] for `EPD2`).
pub fn next_order(
    fail: &Array<Flag>,
    orders: &Array<Order>,
    cap: &Array<Order>,
    list: &Neighbours,
    i: usize,
    #[comptime] strategy: u32,
) -> Order {
    let count = list.counts[i];
    let (base, stride) = slot_base(list, i);
    let order = orders[i];
    let failing = fail[i] != PASS;
    let own = choose::<Order>(failing, lower(order), order);
    let mut o = own;
    if comptime![strategy == EPD2] {
        o = Order::min(own, cap[i]);
    }
    let mut any = failing;
    for k in 0..slot_end(list, count) {
        if k < count {
            let j = list.indices[base + k as usize * stride] as usize;
            if comptime![strategy == EPD1] {
                if fail[j] != PASS {
                    o = Order::min(o, lower(orders[j]));
                }
            } else if comptime![strategy == EPD2] {
                o = Order::min(o, cap[j]);
            } else if comptime![strategy == STRICT] {
                if fail[j] != PASS {
                    any = true;
                }
            }
        }
    }
    if comptime![strategy == STRICT] {
        o = choose::<Order>(any, lower(order), order);
    }
    o
}

/// Whether particle `i`'s or a neighbour's order changes from `orders` to `next` (its slope
/// is then recomputed).
pub fn order_changed(
    orders: &Array<Order>,
    next: &Array<Order>,
    list: &Neighbours,
    i: usize,
) -> bool {
    let count = list.counts[i];
    let (base, stride) = slot_base(list, i);
    let mut changed = next[i] != orders[i];
    for k in 0..slot_end(list, count) {
        if k < count {
            let j = list.indices[base + k as usize * stride] as usize;
            if next[j] != orders[j] {
                changed = true;
            }
        }
    }
    changed
}
