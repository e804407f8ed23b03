//! MOOD's pointwise tests, written once for the CPU and the device (the formula dialect of
//! `mote-formula`): the relaxed discrete maximum principle of one variable (u1) and the
//! smooth-extremum test of one curvature (u2). The neighbourhoods' extremes are the passes'
//! own loops; the decisions are here.

/// u1: whether the candidate `c` leaves the neighbourhood's range `[lo, hi]` by more than
/// `delta max(1, |lo|, |hi|)`. A range narrower than `tiny` (`delta^3`: a flat neighbourhood)
/// never fails; NaN comparisons are false, so a NaN range or candidate does not fail here
/// (admissibility catches non-finite states).
pub fn exceeds_range<F: Float>(c: F, lo: F, hi: F, delta: F, tiny: F) -> Mask<F> {
    let tol = delta * F::max(F::max(F::new(1.0), F::abs(lo)), F::abs(hi));
    let outside = or(lt::<F>(c, lo - tol), gt::<F>(c, hi + tol));
    and(!lt::<F>(hi - lo, tiny), outside)
}

/// u2: whether the curvatures of one variable along one axis over a particle and its
/// neighbours, with extremes `lo` and `hi`, break a smooth extremum: not negligible (`max(|lo|,
/// |hi|) h^2` at least `delta`) and either changing sign or differing by more than a factor of
/// two.
pub fn breaks_smoothness<F: Float>(lo: F, hi: F, h2: F, delta: F) -> Mask<F> {
    let big = F::max(F::abs(lo), F::abs(hi));
    let small = F::min(F::abs(lo), F::abs(hi));
    let rough = or(
        le::<F>(lo * hi, F::new(0.0)),
        lt::<F>(small, F::new(0.5) * big),
    );
    and(!lt::<F>(big * h2, delta), rough)
}
