//! The scalar conservation laws' pointwise functions, written once for the CPU and the device
//! (the formula dialect of `mote-formula`): linear advection's and Burgers' fluxes and wave
//! speeds along a (non-unit) normal.

/// `sum_d nrm[d] a[d]`, from zero in axis order: linear advection's speed along `nrm` with
/// the velocity `a` (its flux is this times `u`).
pub fn advection_speed<F: Float>(nrm: &Array<F>, a: &Array<F>, #[comptime] dim: usize) -> F {
    let mut s = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        s += nrm[d] * a[d];
    }
    s
}

/// `sum_d nrm[d]`, from zero in axis order.
pub fn component_sum<F: Float>(nrm: &Array<F>, #[comptime] dim: usize) -> F {
    let mut s = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        s += nrm[d];
    }
    s
}

/// Burgers' flux along `nrm`: the flux along every axis is `u^2 / 2`, so `(u / 2) u sum_d
/// nrm[d]`.
pub fn burgers_flux<F: Float>(u: F, nrm: &Array<F>, #[comptime] dim: usize) -> F {
    F::new(0.5) * u * u * component_sum::<F>(nrm, dim)
}

/// Burgers' (signed) wave speed along `nrm`: `u sum_d nrm[d]`.
pub fn burgers_speed<F: Float>(u: F, nrm: &Array<F>, #[comptime] dim: usize) -> F {
    u * component_sum::<F>(nrm, dim)
}
