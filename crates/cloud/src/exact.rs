//! Exact solutions and error norms.

use mote_core::Real;

use crate::cloud::{Cloud, INTERIOR};
use crate::domain::Domain;

/// The solution of scalar linear advection with velocity `a` at time `t` from `u0`, by
/// characteristic tracing: `u(x, t) = u0(x - a t)`, wrapped into the domain on periodic axes.
pub fn advected<const D: usize>(
    u0: impl Fn([f64; D]) -> f64,
    velocity: [f64; D],
    t: f64,
    domain: Domain<D>,
) -> impl Fn([f64; D]) -> f64 {
    move |x| {
        let back: [f64; D] = std::array::from_fn(|d| x[d] - velocity[d] * t);
        u0(domain.wrap(back))
    }
}

/// Errors of variable `var` against `exact` over the interior particles, volume-weighted.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Errors {
    /// `sum V |u - u_exact| / sum V`.
    pub l1: f64,
    /// `sqrt(sum V (u - u_exact)^2 / sum V u_exact^2)`.
    pub relative_l2: f64,
    /// `max |u - u_exact|`.
    pub max: f64,
}

/// The errors of variable `var` of `cloud` against `exact`.
pub fn errors<R: Real, const D: usize>(
    cloud: &Cloud<R, D>,
    var: usize,
    exact: impl Fn([f64; D]) -> f64,
) -> Errors {
    let (mut l1, mut num, mut den, mut vol, mut max) = (0.0, 0.0, 0.0, 0.0, 0.0f64);
    let u = cloud.state(var);
    for i in (0..cloud.len()).filter(|&i| cloud.tags()[i] == INTERIOR) {
        let v = cloud.volumes()[i].as_f64();
        let e = exact(cloud.position_of(i));
        let d = u[i].as_f64() - e;
        l1 += v * d.abs();
        num += v * d * d;
        den += v * e * e;
        vol += v;
        max = max.max(d.abs());
    }
    Errors {
        l1: l1 / vol,
        relative_l2: (num / den).sqrt(),
        max,
    }
}

/// `sum_i V_i u_i` of variable `var` over the interior particles (compensated).
pub fn total<R: Real, const D: usize>(cloud: &Cloud<R, D>, var: usize) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    let u = cloud.state(var);
    for i in (0..cloud.len()).filter(|&i| cloud.tags()[i] == INTERIOR) {
        let x = cloud.volumes()[i].as_f64() * u[i].as_f64();
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}
