//! The kinetic relaxation's pointwise formulas, written once for the CPU and the device (the
//! formula dialect of `mote-formula`): the Maxwellian's pair of components along one axis and
//! the relaxation toward it, explicit (the source) and implicit (a stage's solve).

/// The Maxwellian's components of one variable along one axis, `+` and `-` direction:
/// `share u +- half_inv_speed F_d(u)` (`share = 1 / (2 D)`, `half_inv_speed = 1 / (2 lambda)`).
pub fn maxwellian_pair<F: Float>(u: F, flux: F, share: F, half_inv_speed: F) -> (F, F) {
    (
        share * u + half_inv_speed * flux,
        share * u - half_inv_speed * flux,
    )
}

/// The relaxation source of a component `f` toward its equilibrium `e`: `(e - f) rate`
/// (`rate = 1 / epsilon`).
pub fn relaxation_source<F: Float>(f: F, e: F, rate: F) -> F {
    (e - f) * rate
}

/// The implicit relaxation of `f` toward `e` over a stage of `r = h / epsilon`: `(f + r e) inv`
/// with `inv = 1 / (1 + r)`.
pub fn relaxed<F: Float>(f: F, e: F, r: F, inv: F) -> F {
    (f + r * e) * inv
}
