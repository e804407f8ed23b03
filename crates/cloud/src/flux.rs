//! Numerical fluxes: the flux through a face with (non-unit) normal `n` from the states on its
//! two sides.

use mote_core::Real;

use crate::cloud::MAX_VARIABLES;
use crate::equations::Equation;

/// Rusanov (local Lax-Friedrichs): `1/2 (F(uL) + F(uR)) . n - 1/2 s (uR - uL)`, with `s` the
/// larger of the two sides' largest wave speeds along `n`. Antisymmetric: swapping the sides and
/// negating `n` negates it, which the conservative formulation relies on.
#[inline(always)]
pub fn rusanov<R: Real, const D: usize, E: Equation<R, D>>(
    eq: &E,
    ul: &[R],
    ur: &[R],
    n: [R; D],
    out: &mut [R],
) {
    rusanov_n::<R, D, E, MAX_VARIABLES>(eq, ul, ur, n, out)
}

/// [`rusanov`] with scratch arrays of `M` entries (at least the variable count): hot loops with
/// a known variable count use it so that the per-pair vectors stay in registers.
#[inline(always)]
pub fn rusanov_n<R: Real, const D: usize, E: Equation<R, D>, const M: usize>(
    eq: &E,
    ul: &[R],
    ur: &[R],
    n: [R; D],
    out: &mut [R],
) {
    let m = ul.len();
    let mut fl = [R::zero(); M];
    let mut fr = [R::zero(); M];
    eq.flux(ul, n, &mut fl[..m]);
    eq.flux(ur, n, &mut fr[..m]);
    let s = eq.max_wave_speed(ul, n).max(eq.max_wave_speed(ur, n));
    let half = R::cast(0.5);
    for v in 0..m {
        out[v] = half * (fl[v] + fr[v]) - half * s * (ur[v] - ul[v]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::equations::LinearAdvection;

    #[test]
    fn rusanov_is_upwind_for_advection_and_antisymmetric() {
        let eq = LinearAdvection::<1>::scalar([2.0], 1);
        let mut f = [0.0f64];
        rusanov(&eq, &[3.0], &[5.0], [1.0], &mut f);
        assert_eq!(f[0], 6.0, "upwind: a uL");
        let mut g = [0.0f64];
        rusanov(&eq, &[5.0], &[3.0], [-1.0], &mut g);
        assert_eq!(g[0], -f[0]);
    }
}
