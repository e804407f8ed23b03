//! Burgers' equation in `D` dimensions: `du/dt + sum_d d(u^2 / 2)/dx_d = 0`, one variable.

use mote_core::Real;

use super::Equation;

/// Inviscid Burgers: the flux along every axis is `u^2 / 2`, so `F(u) . n = u^2 / 2 sum_d n_d`
/// and the wave speed along `n` is `|u sum_d n_d|`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Burgers<const D: usize>;

impl<R: Real, const D: usize> Equation<R, D> for Burgers<D> {
    fn name(&self) -> &'static str {
        "burgers"
    }

    const FIXED_VARIABLES: Option<usize> = Some(1);

    fn variables(&self) -> usize {
        1
    }

    #[inline(always)]
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        out[0] = R::cast(0.5) * u[0] * u[0] * sum(n);
    }

    #[inline(always)]
    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R {
        (u[0] * sum(n)).abs()
    }

    fn wave_speed_bounds(&self, u: &[R], n: [R; D]) -> (R, R) {
        let s = u[0] * sum(n);
        (s, s)
    }

    #[inline(always)]
    fn flux_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        let half = R::cast(0.5);
        for l in 0..W {
            out[0][l] = half * u[0][l] * u[0][l] * sum(std::array::from_fn::<R, D, _>(|d| n[d][l]));
        }
    }

    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W] {
        std::array::from_fn(|l| (u[0][l] * sum(std::array::from_fn::<R, D, _>(|d| n[d][l]))).abs())
    }
}

/// `sum_d n_d`, in axis order.
#[inline(always)]
fn sum<R: Real, const D: usize>(n: [R; D]) -> R {
    let mut s = R::zero();
    for x in n {
        s += x;
    }
    s
}
