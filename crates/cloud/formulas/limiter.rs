//! The slope limiters' pointwise functions, written once for the CPU and the device (the
//! formula dialect of `mote-formula`): the classical limited slopes of two one-sided slopes
//! (minmod, superbee) and the factor one neighbour allows a reconstruction under
//! Barth-Jespersen or Venkatakrishnan. The passes around them (which neighbours, in which
//! order, the extremes) are the backends' own; the arithmetic is here.

/// minmod: the smaller in magnitude when the signs agree, else 0.
pub fn minmod<F: Float>(a: F, b: F) -> F {
    let smaller = select(lt::<F>(F::abs(a), F::abs(b)), a, b);
    select(le::<F>(a * b, F::new(0.0)), F::new(0.0), smaller)
}

/// maxmod: the larger in magnitude when the signs agree, else 0.
pub fn maxmod<F: Float>(a: F, b: F) -> F {
    let larger = select(gt::<F>(F::abs(a), F::abs(b)), a, b);
    select(le::<F>(a * b, F::new(0.0)), F::new(0.0), larger)
}

/// The limited slope of the one-sided slopes `a` (to the left neighbour) and `b` (to the
/// right one): minmod, or superbee `maxmod(minmod(2a, b), minmod(a, 2b))`.
pub fn limited_slope<F: Float>(a: F, b: F, #[comptime] superbee: bool) -> F {
    let two = F::new(2.0);
    if superbee {
        maxmod::<F>(minmod::<F>(two * a, b), minmod::<F>(a, two * b))
    } else {
        minmod::<F>(a, b)
    }
}

/// Venkatakrishnan's smooth limiter function of `room = u_max|min - u_i` and `change` (same
/// sign), with `eps2 = (K dx)^3`; at most 1.
pub fn venkatakrishnan<F: Float>(room: F, change: F, eps2: F) -> F {
    let two = F::new(2.0);
    let num = room * room + eps2 + two * change * room;
    let den = room * room + two * change * change + change * room + eps2;
    F::min(num / den, F::new(1.0))
}

/// The factor one neighbour allows: `change` is the reconstruction's change from the
/// particle to the pair's midpoint, `up` and `down` the room to the neighbourhood's maximum
/// and minimum (`u_max - u_i >= 0`, `u_min - u_i <= 0`). Barth-Jespersen
/// `min(room / change, 1)`, or Venkatakrishnan; 1 for an unchanged midpoint (and for a NaN
/// change: hence not `change != 0`).
pub fn bounded_factor<F: Float>(
    change: F,
    up: F,
    down: F,
    eps2: F,
    #[comptime] barth_jespersen: bool,
) -> F {
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let rising = gt::<F>(change, zero);
    let room = select(rising, up, down);
    let f = if barth_jespersen {
        F::min(room / change, one)
    } else {
        venkatakrishnan::<F>(room, change, eps2)
    };
    select(or(rising, lt::<F>(change, zero)), f, one)
}
