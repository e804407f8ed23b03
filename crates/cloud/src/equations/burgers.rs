//! Burgers' equation in `D` dimensions: `du/dt + sum_d d(u^2 / 2)/dx_d = 0`, one variable.

use mote_core::Real;

use super::Equation;
use crate::formula::scalar as formula;
use crate::formula::{Float, Lanes};

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

    fn flow_velocity(&self, u: &[R]) -> Option<[R; D]> {
        Some([u[0]; D])
    }

    #[inline(always)]
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        out[0] = formula::burgers_flux(u[0], &n, D);
    }

    #[inline(always)]
    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R {
        formula::burgers_speed(u[0], &n, D).abs()
    }

    fn wave_speed_bounds(&self, u: &[R], n: [R; D]) -> (R, R) {
        let s = formula::burgers_speed(u[0], &n, D);
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
        out[0] = formula::burgers_flux(Lanes(u[0]), Lanes::wrap(n), D).0;
    }

    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W] {
        Float::abs(formula::burgers_speed(Lanes(u[0]), Lanes::wrap(n), D)).0
    }
}
