//! The boundary conditions' pointwise formulas, written once for the CPU and the device (the
//! formula dialect of `mote-formula`). Which particle takes which state is the backends' own.

/// A slip wall's momentum component along axis `d`: the interior's `m_d` with the normal part
/// reversed, `m_d - 2 (m . n) n_d` (`mn = m . n`, `n` the unit normal).
pub fn reflected<F: Float>(m: F, mn: F, n: F) -> F {
    m - F::new(2.0) * mn * n
}
