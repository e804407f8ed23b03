//! The Taylor basis of the MLS fits and of the MUSCL reconstruction evaluated at an offset,
//! written once for the CPU and the device (the formula dialect of `mote-formula`). The tables
//! (exponents, factorials, the recursion) are built once by `mote_cloud::mls::Basis`; both
//! backends read them.

/// The recursion's parent of a first-degree function: the constant 1.
pub const ROOT: u32 = u32::MAX;

/// The first `terms` functions `phi_a(q) = q^a / a!` at `q` into `phi`, from the powers of each
/// coordinate (`pw[a (degree + 1) + k] = q_a^k`, built here): function `f` multiplies its
/// inverse multi-factorial by the powers `exponents[f dim + a]` of each axis, in axis order
/// (the MLS fits: every function to full precision, independent of the others).
pub fn taylor<F: Float>(
    q: &Array<F>,
    exponents: &Array<u32>,
    inverse_factorial: &Array<F>,
    pw: &mut Array<F>,
    phi: &mut Array<F>,
    #[comptime] dim: usize,
    #[comptime] degree: usize,
    #[comptime] terms: usize,
) {
    #[unroll]
    for a in 0..dim {
        pw[a * (degree + 1)] = F::new(1.0);
        #[unroll]
        for k in 1..degree + 1 {
            pw[a * (degree + 1) + k] = pw[a * (degree + 1) + k - 1] * q[a];
        }
    }
    #[unroll]
    for f in 0..terms {
        let mut v = inverse_factorial[f];
        #[unroll]
        for a in 0..dim {
            v *= pw[a * (degree + 1) + exponents[f * dim + a] as usize];
        }
        phi[f] = v;
    }
}

/// The first `terms` functions at `q` into `phi` by the recursion
/// `phi_f = phi_parent(f) q_axis(f) factor_f` (`parent, axis = recursion[2 f], recursion[2 f + 1]`,
/// the parent [`ROOT`] standing for the constant 1): two multiplications per function, for the
/// per-pair reconstruction of the flux and limiter passes.
pub fn taylor_recursive<F: Float>(
    q: &Array<F>,
    recursion: &Array<u32>,
    factor: &Array<F>,
    phi: &mut Array<F>,
    #[comptime] terms: usize,
) {
    #[unroll]
    for f in 0..terms {
        let parent = recursion[2 * f];
        let from = if parent == ROOT {
            F::new(1.0)
        } else {
            phi[parent as usize]
        };
        phi[f] = from * q[recursion[2 * f + 1] as usize] * factor[f];
    }
}
