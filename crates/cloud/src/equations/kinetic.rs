//! The transport part of a discrete kinetic (Jin-Xin type) relaxation system: `2 D M` kinetic
//! variables, each advected with its own constant velocity `+-lambda e_d`.
//!
//! Variable `k M + m` is kinetic component `k` of macroscopic variable `m`; component `k = 2 d`
//! moves with `+lambda e_d`, `k = 2 d + 1` with `-lambda e_d`. The relaxation towards the
//! Maxwellian is the source term [`crate::source::KineticRelaxation`].

use mote_core::Real;

use super::Equation;
use crate::flux::{FluxKind, standard_flux_lanes};
use crate::formula::Lanes;
use crate::formula::kinetic as formula;

/// Diagonal linear advection with the kinetic velocities `+-lambda e_d`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KineticTransport<const D: usize> {
    macroscopic: usize,
    speed: f64,
}

impl<const D: usize> KineticTransport<D> {
    /// The transport of `2 D macroscopic` kinetic variables with speed `lambda`.
    pub fn new(macroscopic: usize, speed: f64) -> Self {
        Self { macroscopic, speed }
    }

    /// The kinetic speed `lambda`.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Number of macroscopic variables `M` (the kinetic ones are `2 D M`).
    pub fn macroscopic(&self) -> usize {
        self.macroscopic
    }

    /// `(axis, sign)` of kinetic variable `v`.
    #[inline(always)]
    fn direction(&self, v: usize) -> (usize, bool) {
        let k = v / self.macroscopic;
        (k / 2, k.is_multiple_of(2))
    }

    /// `lambda_v . n` for variable `v`.
    #[inline(always)]
    fn normal_velocity<R: Real>(&self, v: usize, n_d: R) -> R {
        let (_, plus) = self.direction(v);
        formula::kinetic_velocity(n_d, R::cast(self.speed), plus)
    }
}

impl<R: Real, const D: usize> Equation<R, D> for KineticTransport<D> {
    fn name(&self) -> &'static str {
        "kinetic_transport"
    }

    fn variables(&self) -> usize {
        2 * D * self.macroscopic
    }

    #[inline(always)]
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        for (v, (o, &x)) in out.iter_mut().zip(u).enumerate() {
            *o = self.normal_velocity(v, n[self.direction(v).0]) * x;
        }
    }

    #[inline(always)]
    fn max_wave_speed(&self, _u: &[R], n: [R; D]) -> R {
        formula::kinetic_max_speed(&n, R::cast(self.speed), D)
    }

    #[inline(always)]
    fn flux_lanes<const M: usize, const W: usize>(
        &self,
        m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        for v in 0..m {
            let d = self.direction(v).0;
            for l in 0..W {
                out[v][l] = self.normal_velocity(v, n[d][l]) * u[v][l];
            }
        }
    }

    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        _u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W] {
        formula::kinetic_max_speed(Lanes::wrap(n), Lanes::splat(R::cast(self.speed)), D).0
    }

    fn supports_flux(&self, kind: FluxKind) -> bool {
        matches!(
            kind,
            FluxKind::Rusanov | FluxKind::Upwind | FluxKind::Central
        )
    }

    /// Rusanov and upwind are the same here: each component is linear advection, and Rusanov
    /// with the component's own speed `|lambda_v . n|` is its upwind flux. (The generic Rusanov
    /// would use the largest speed for every component, adding dissipation to the components
    /// that move across `n`.)
    #[inline(always)]
    fn numerical_flux_lanes<const M: usize, const W: usize>(
        &self,
        kind: FluxKind,
        m: usize,
        ul: &[[R; W]; M],
        ur: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        if kind == FluxKind::Central {
            return standard_flux_lanes::<R, D, Self, M, W>(self, kind, m, ul, ur, n, out);
        }
        for v in 0..m {
            let d = self.direction(v).0;
            for l in 0..W {
                let a = self.normal_velocity(v, n[d][l]);
                out[v][l] = formula::kinetic_upwind(a, ul[v][l], ur[v][l]);
            }
        }
    }
}
