//! The WENO-type reconstruction's arithmetic, written once for the CPU and the device (the
//! formula dialect of `mote-formula`): a fit's smoothness weight and its share of a particle's
//! mix of fits. Which fits exist at a particle and how their derivatives are summed are the
//! backends' passes.

/// The weight `1 / (eps + beta)^2` of the fit whose `terms` derivatives start at `d[first]`:
/// `beta = sum_a (scale_a d_a)^2` (`scale_a = h^|a|`), `eps = tiny (1 + u^2)` with `u` the
/// particle's value.
pub fn weno_weight<F: Float>(
    d: &Array<F>,
    first: usize,
    scale: &Array<F>,
    u: F,
    tiny: F,
    #[comptime] terms: usize,
) -> F {
    let eps = tiny * (F::new(1.0) + u * u);
    let mut beta = F::new(0.0);
    #[unroll]
    for a in 0..terms {
        let x = scale[a] * d[first + a];
        beta += x * x;
    }
    let q = eps + beta;
    F::new(1.0) / (q * q)
}

/// Adds the fit with derivatives `d[first..]` and weight `w` to the mix at `mix[at..]` (the
/// weighted derivatives, then the total weight); `start`: the mix begins with it.
pub fn weno_add<F: Float>(
    mix: &mut Array<F>,
    at: usize,
    d: &Array<F>,
    first: usize,
    w: F,
    #[comptime] terms: usize,
    #[comptime] start: bool,
) {
    if start {
        #[unroll]
        for a in 0..terms {
            mix[at + a] = w * d[first + a];
        }
        mix[at + terms] = w;
    } else {
        #[unroll]
        for a in 0..terms {
            mix[at + a] += w * d[first + a];
        }
        mix[at + terms] += w;
    }
}
