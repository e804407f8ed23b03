// The traffic-flow equation's formulas in the formula dialect (see `mote_formula`): compiled as
// plain Rust for the CPU and as CubeCL functions for the GPU by `examples/traffic_flow.rs`.
// `params[0]` is the free speed `v`.

/// `F(u) . n = v u (1 - u) n_x`: cars move along x only.
pub fn traffic_flux<F: Float>(u: &Array<F>, nrm: &Array<F>, params: &Array<F>) -> F {
    params[0] * u[0] * (F::new(1.0) - u[0]) * nrm[0]
}

/// `F'(u) . n = v (1 - 2 u) n_x`, the characteristic speed along `n` (signed).
pub fn traffic_speed<F: Float>(u: &Array<F>, nrm: &Array<F>, params: &Array<F>) -> F {
    params[0] * (F::new(1.0) - F::new(2.0) * u[0]) * nrm[0]
}
