//! The kinetic transport's pointwise functions, written once for the CPU and the device (the
//! formula dialect of `mote-formula`): each kinetic component moves with its own velocity
//! `+-lambda e_d`, so its flux along a normal is upwinded with that velocity alone.

/// The normal velocity along a normal whose component on the component's axis is `n_d`:
/// `lambda n_d` for a component moving with `+lambda e_d` (`plus`), else `-lambda n_d`.
pub fn kinetic_velocity<F: Float>(n_d: F, speed: F, #[comptime] plus: bool) -> F {
    let s = speed * n_d;
    if plus { s } else { -s }
}

/// `lambda max_d |n_d|`: the largest normal velocity of the components (the maximum from zero in
/// axis order).
pub fn kinetic_max_speed<F: Float>(nrm: &Array<F>, speed: F, #[comptime] dim: usize) -> F {
    let mut best = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        best = F::max(best, F::abs(nrm[d]));
    }
    speed * best
}

/// The upwind flux of a component with normal velocity `a`: `a ul` where `a > 0`, else `a ur`.
pub fn kinetic_upwind<F: Float>(a: F, ul: F, ur: F) -> F {
    select(gt::<F>(a, F::new(0.0)), a * ul, a * ur)
}
