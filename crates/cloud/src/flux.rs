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

/// [`rusanov_n`] for `W` pairs at once, in the lane layout of
/// [`Equation::flux_lanes`]: `out[v][lane]` for the first `m` variables. Per lane, the same
/// operations in the same order as [`rusanov_n`].
#[inline(always)]
pub fn rusanov_lanes<R: Real, const D: usize, E: Equation<R, D>, const M: usize, const W: usize>(
    eq: &E,
    m: usize,
    ul: &[[R; W]; M],
    ur: &[[R; W]; M],
    n: &[[R; W]; D],
    out: &mut [[R; W]; M],
) {
    let mut fl = [[R::zero(); W]; M];
    let mut fr = [[R::zero(); W]; M];
    eq.flux_lanes(m, ul, n, &mut fl);
    eq.flux_lanes(m, ur, n, &mut fr);
    let sl = eq.max_wave_speed_lanes(m, ul, n);
    let sr = eq.max_wave_speed_lanes(m, ur, n);
    let half = R::cast(0.5);
    for v in 0..m {
        for l in 0..W {
            let s = sl[l].max(sr[l]);
            out[v][l] = half * (fl[v][l] + fr[v][l]) - half * s * (ur[v][l] - ul[v][l]);
        }
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

    #[test]
    fn lane_flux_is_the_scalar_flux_bit_for_bit() {
        let eq =
            LinearAdvection::<2>::system(vec![vec![0.5, 1.0, 1.0, -0.5], vec![0.2, 0.0, 0.0, 0.7]])
                .unwrap();
        let ul: [[f64; 4]; 2] = [[1.0, -2.0, 0.5, 3.0], [0.1, 0.2, -0.3, 4.0]];
        let ur: [[f64; 4]; 2] = [[0.3, 1.0, -0.5, 2.0], [1.1, -0.2, 0.3, 0.0]];
        let n: [[f64; 4]; 2] = [[1.0, -0.3, 0.0, 2.5], [0.5, 0.7, -1.0, 0.1]];
        let mut out = [[0.0; 4]; 2];
        rusanov_lanes::<f64, 2, _, 2, 4>(&eq, 2, &ul, &ur, &n, &mut out);
        for l in 0..4 {
            let mut f = [0.0; 2];
            rusanov(
                &eq,
                &[ul[0][l], ul[1][l]],
                &[ur[0][l], ur[1][l]],
                [n[0][l], n[1][l]],
                &mut f,
            );
            assert_eq!(
                f.map(f64::to_bits),
                [out[0][l].to_bits(), out[1][l].to_bits()]
            );
        }
    }
}
