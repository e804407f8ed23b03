//! Exact solutions and error norms.

mod sedov;

pub use sedov::Sedov;

use mote_core::Real;
use mote_core::comm::{self, Share};
use mote_core::sum::ExactSum;

use crate::cloud::{Cloud, INTERIOR};
use crate::domain::Domain;
use crate::equations::Euler;
use crate::error::CloudError;

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

/// The isentropic vortex of 2-D Euler (Shu's test): a vortex of `strength` on a uniform flow
/// of velocity (1, 1), density 1 and pressure 1 at infinity, on the periodic box
/// `[-half, half)^2` (distances by minimum image; the vortex's tail, `exp(-r^2/2)`, is taken as
/// negligible at the box's edge). An exact solution: it moves with the flow unchanged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IsentropicVortex {
    /// Ratio of specific heats.
    pub gamma: f64,
    /// Vortex strength (5 in the usual test).
    pub strength: f64,
    /// Half the box's side.
    pub half: f64,
}

impl IsentropicVortex {
    /// Density, velocity and pressure at `x` and time `t`, for a vortex centred at the origin at
    /// `t = 0`.
    pub fn state(&self, x: [f64; 2], t: f64) -> (f64, [f64; 2], f64) {
        let Self {
            gamma,
            strength,
            half,
        } = *self;
        let wrap = |d: f64| d - 2.0 * half * (d / (2.0 * half)).round();
        let (dx, dy) = (wrap(x[0] - t), wrap(x[1] - t));
        let r2 = dx * dx + dy * dy;
        let pi = std::f64::consts::PI;
        let temperature =
            1.0 - (gamma - 1.0) * strength * strength / (8.0 * gamma * pi * pi) * (1.0 - r2).exp();
        let rho = temperature.powf(1.0 / (gamma - 1.0));
        let s = strength / (2.0 * pi) * (0.5 * (1.0 - r2)).exp();
        (rho, [1.0 - s * dy, 1.0 + s * dx], rho.powf(gamma))
    }

    /// Sets every particle of `cloud` (four variables) to the vortex's conservative state at
    /// time `t`.
    pub fn fill<R: Real>(&self, cloud: &mut Cloud<R, 2>, t: f64) -> Result<(), CloudError> {
        let eq = Euler::<2>::new(self.gamma)?;
        for i in 0..cloud.len() {
            let (rho, v, p) = self.state(cloud.position_of(i), t);
            for (k, value) in eq.conservative(rho, v, p).into_iter().enumerate() {
                cloud.state_var_mut(k)[i] = R::cast(value);
            }
        }
        Ok(())
    }
}

/// Errors of variable `var` against `exact` over the interior particles, volume-weighted.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Errors {
    /// `sum V |u - u_exact| / sum V`.
    pub l1: f64,
    /// `sqrt(sum V (u - u_exact)^2 / sum V)`: the volume-weighted RMS error.
    pub l2: f64,
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
    let whole = Share::whole(cloud.len());
    errors_of(cloud, var, whole, |i| exact(cloud.position_of(i)))
}

/// The errors of every variable of `cloud` against `exact`, which writes the exact values of all
/// variables at a position into its second argument (one evaluation per interior particle).
pub fn errors_all<R: Real, const D: usize>(
    cloud: &Cloud<R, D>,
    exact: impl Fn([f64; D], &mut [f64]),
) -> Vec<Errors> {
    errors_all_of(cloud, Share::whole(cloud.len()), exact)
}

/// [`errors_all`] of a cloud split between ranks: each rank passes its local cloud and its
/// `share` (its own particles); every rank gets the one-process errors, bit for bit (the sums
/// are exact, so their order does not matter). Collective.
pub fn errors_all_of<R: Real, const D: usize>(
    cloud: &Cloud<R, D>,
    share: Share<'_>,
    exact: impl Fn([f64; D], &mut [f64]),
) -> Vec<Errors> {
    let m = cloud.variables();
    let own = share.own();
    let mut values = vec![vec![0.0; own.len()]; m];
    let mut out = vec![0.0; m];
    for i in own.clone().filter(|&i| cloud.tags()[i] == INTERIOR) {
        exact(cloud.position_of(i), &mut out);
        for (column, &x) in values.iter_mut().zip(&out) {
            column[i - own.start] = x;
        }
    }
    (0..m)
        .map(|v| errors_of(cloud, v, share, |i| values[v][i - own.start]))
        .collect()
}

/// The errors of variable `var` against `exact(i)`, the exact value at particle `i`, over the
/// own particles of `share`, reduced over its ranks.
fn errors_of<R: Real, const D: usize>(
    cloud: &Cloud<R, D>,
    var: usize,
    share: Share<'_>,
    exact: impl Fn(usize) -> f64,
) -> Errors {
    // l1, numerator, denominator, volume.
    let mut sums: [ExactSum; 4] = Default::default();
    let mut max = [0.0f64];
    let u = cloud.state(var);
    for i in share.own().filter(|&i| cloud.tags()[i] == INTERIOR) {
        let v = cloud.volumes()[i].as_f64();
        let e = exact(i);
        let d = u[i].as_f64() - e;
        sums[0].add(v * d.abs());
        sums[1].add(v * d * d);
        sums[2].add(v * e * e);
        sums[3].add(v);
        max[0] = max[0].max(d.abs());
    }
    ExactSum::reduce(&mut sums, share.comm);
    comm::max_f64s(share.comm, &mut max);
    let [l1, num, den, vol] = sums.map(|s| s.value());
    Errors {
        l1: l1 / vol,
        l2: (num / vol).sqrt(),
        relative_l2: (num / den).sqrt(),
        max: max[0],
    }
}

/// `sum_i V_i u_i` of variable `var` over the interior particles (exact, then rounded once).
pub fn total<R: Real, const D: usize>(cloud: &Cloud<R, D>, var: usize) -> f64 {
    totals_of(cloud, Share::whole(cloud.len()))[var]
}

/// [`total`] of every variable of a cloud split between ranks: each rank passes its local cloud
/// and its `share`; every rank gets the one-process totals, bit for bit. Collective.
pub fn totals_of<R: Real, const D: usize>(cloud: &Cloud<R, D>, share: Share<'_>) -> Vec<f64> {
    let mut sums = vec![ExactSum::new(); cloud.variables()];
    for (v, sum) in sums.iter_mut().enumerate() {
        let u = cloud.state(v);
        for i in share.own().filter(|&i| cloud.tags()[i] == INTERIOR) {
            sum.add(cloud.volumes()[i].as_f64() * u[i].as_f64());
        }
    }
    ExactSum::reduce(&mut sums, share.comm);
    sums.iter().map(ExactSum::value).collect()
}

/// The entropy solution of the 1-D Burgers Riemann problem `u = ul` left of 0, `ur` right of it,
/// at `xi = x / t`: a shock at speed `(ul + ur) / 2` where `ul > ur`, a rarefaction fan
/// `u = xi` between `ul` and `ur` otherwise.
pub fn burgers_riemann(ul: f64, ur: f64, xi: f64) -> f64 {
    if ul > ur {
        if xi < 0.5 * (ul + ur) { ul } else { ur }
    } else if xi <= ul {
        ul
    } else if xi >= ur {
        ur
    } else {
        xi
    }
}

/// The smooth solution of 1-D Burgers from `u0` (with derivative `du0`) at `(x, t)` before
/// the first shock forms (`t < -1 / min u0'`): the foot `x0` of the characteristic through `x`,
/// `x0 + u0(x0) t = x`, by Newton's method from `x - u0(x) t`, and `u = u0(x0)`.
pub fn burgers_smooth(u0: impl Fn(f64) -> f64, du0: impl Fn(f64) -> f64, x: f64, t: f64) -> f64 {
    let mut x0 = x - u0(x) * t;
    for _ in 0..100 {
        let g = x0 + u0(x0) * t - x;
        let step = g / (1.0 + du0(x0) * t);
        x0 -= step;
        if step.abs() <= 1e-15 * (1.0 + x0.abs()) {
            break;
        }
    }
    u0(x0)
}

/// 1-D Burgers from the top-hat `u = 1` on `[a, b)`, 0 elsewhere (on the real line), at
/// `(x, t)`: a rarefaction `u = (x - a) / t` from `a` and a shock from `b` at speed 1/2 until
/// the fan's head catches the shock at `t* = 2 (b - a)` ([`burgers_interaction_time`]);
/// afterwards the shock sits at `a + sqrt(2 (b - a) t)`, with the fan behind it.
pub fn burgers_top_hat(a: f64, b: f64, x: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return if (a..b).contains(&x) { 1.0 } else { 0.0 };
    }
    let shock = if t <= burgers_interaction_time(a, b) {
        b + 0.5 * t
    } else {
        a + (2.0 * (b - a) * t).sqrt()
    };
    if x <= a || x >= shock {
        0.0
    } else {
        ((x - a) / t).min(1.0)
    }
}

/// 1-D Burgers from the well `u = 0` on `[a, b)`, 1 elsewhere (on the real line), at `(x, t)`:
/// a shock from `a` at speed 1/2 and a rarefaction `u = (x - b) / t` from `b`, until the shock
/// reaches the fan's tail at `t* = 2 (b - a)`; afterwards the shock runs into the fan, at
/// `b + t - sqrt(t* t)`.
pub fn burgers_well(a: f64, b: f64, x: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return if (a..b).contains(&x) { 0.0 } else { 1.0 };
    }
    let star = burgers_interaction_time(a, b);
    let shock = if t <= star {
        a + 0.5 * t
    } else {
        b + t - (star * t).sqrt()
    };
    if x < shock {
        1.0
    } else {
        ((x - b) / t).clamp(0.0, 1.0)
    }
}

/// When the fan and the shock of a Burgers top-hat or well of width `b - a` (jump 1) meet:
/// `2 (b - a)`.
pub fn burgers_interaction_time(a: f64, b: f64) -> f64 {
    2.0 * (b - a)
}

/// 1-D Burgers from the smoothed Riemann data `u0 = ul + (ur - ul) (1 + tanh(x / w)) / 2` at
/// `(x, t)`, by characteristics: exact for every `t` when `ul <= ur`, and before the shock forms
/// (`t < 2 w / (ul - ur)`) when `ul > ur`. The foot `x0` of the characteristic through `x`
/// solves `x0 + u0(x0) t = x`, increasing in `x0` in both cases, by bisection (Newton's method
/// fails on steep data).
pub fn burgers_smoothed_riemann(ul: f64, ur: f64, width: f64, x: f64, t: f64) -> f64 {
    let u0 = |x: f64| ul + 0.5 * (ur - ul) * (1.0 + (x / width).tanh());
    let reach = ul.abs().max(ur.abs()) * t.abs() + 1.0;
    let (mut lo, mut hi) = (x - reach, x + reach);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid + u0(mid) * t < x {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    u0(0.5 * (lo + hi))
}

/// A 1-D gas state in primitive variables.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GasState {
    /// Density.
    pub rho: f64,
    /// Velocity.
    pub u: f64,
    /// Pressure.
    pub p: f64,
}

/// The exact solution of the 1-D Riemann problem of the Euler equations for an ideal gas
/// (Toro, ch. 4): the star pressure by Newton's method on the pressure function, then sampling
/// of the self-similar solution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EulerRiemann {
    left: GasState,
    right: GasState,
    gamma: f64,
    /// Pressure between the two nonlinear waves.
    pub p_star: f64,
    /// Velocity of the contact.
    pub u_star: f64,
}

impl EulerRiemann {
    /// Solves the problem; an error when the data create a vacuum or are not physical.
    pub fn solve(left: GasState, right: GasState, gamma: f64) -> Result<Self, crate::CloudError> {
        let ok = |s: GasState| s.rho > 0.0 && s.p > 0.0 && s.u.is_finite();
        if !(ok(left) && ok(right) && gamma > 1.0) {
            return Err(crate::CloudError::invalid(
                "Riemann data",
                format!("{left:?} | {right:?}, gamma {gamma}"),
                "positive densities and pressures, gamma > 1",
            ));
        }
        let (cl, cr) = (sound(left, gamma), sound(right, gamma));
        if 2.0 / (gamma - 1.0) * (cl + cr) <= right.u - left.u {
            return Err(crate::CloudError::invalid(
                "Riemann data",
                format!("{left:?} | {right:?}"),
                "no vacuum (the data generate one)",
            ));
        }
        let du = right.u - left.u;
        // Start from the linearised (PVRS) estimate, kept positive.
        let pvrs = 0.5 * (left.p + right.p) - 0.125 * du * (left.rho + right.rho) * (cl + cr);
        let mut p = pvrs.max(1e-8 * (left.p + right.p));
        for _ in 0..100 {
            let (fl, dfl) = pressure_function(p, left, gamma);
            let (fr, dfr) = pressure_function(p, right, gamma);
            let next = (p - (fl + fr + du) / (dfl + dfr)).max(1e-14 * p);
            let change = 2.0 * (next - p).abs() / (next + p);
            p = next;
            if change < 1e-15 {
                break;
            }
        }
        let (fl, _) = pressure_function(p, left, gamma);
        let (fr, _) = pressure_function(p, right, gamma);
        Ok(Self {
            left,
            right,
            gamma,
            p_star: p,
            u_star: 0.5 * (left.u + right.u) + 0.5 * (fr - fl),
        })
    }

    /// The state at `xi = x / t` (the initial discontinuity at `x = 0`).
    pub fn sample(&self, xi: f64) -> GasState {
        let g = self.gamma;
        let (ps, us) = (self.p_star, self.u_star);
        // Sample on the left of the contact as seen from the left state; the right side is the
        // mirror image (x -> -x, u -> -u).
        let (side, xi, sign) = if xi <= us {
            (self.left, xi, 1.0)
        } else {
            (
                GasState {
                    u: -self.right.u,
                    ..self.right
                },
                -xi,
                -1.0,
            )
        };
        let us = sign * us;
        let c = sound(side, g);
        let w = if ps > side.p {
            // Shock.
            let ratio = ps / side.p;
            let speed = side.u - c * ((g + 1.0) / (2.0 * g) * ratio + (g - 1.0) / (2.0 * g)).sqrt();
            if xi <= speed {
                side
            } else {
                let q = (g - 1.0) / (g + 1.0);
                GasState {
                    rho: side.rho * (ratio + q) / (q * ratio + 1.0),
                    u: us,
                    p: ps,
                }
            }
        } else {
            // Rarefaction.
            let c_star = c * (ps / side.p).powf((g - 1.0) / (2.0 * g));
            let (head, tail) = (side.u - c, us - c_star);
            if xi <= head {
                side
            } else if xi >= tail {
                GasState {
                    rho: side.rho * (ps / side.p).powf(1.0 / g),
                    u: us,
                    p: ps,
                }
            } else {
                let k = 2.0 / (g + 1.0) + (g - 1.0) / ((g + 1.0) * c) * (side.u - xi);
                GasState {
                    rho: side.rho * k.powf(2.0 / (g - 1.0)),
                    u: 2.0 / (g + 1.0) * (c + (g - 1.0) / 2.0 * side.u + xi),
                    p: side.p * k.powf(2.0 * g / (g - 1.0)),
                }
            }
        };
        GasState { u: sign * w.u, ..w }
    }
}

fn sound(s: GasState, gamma: f64) -> f64 {
    (gamma * s.p / s.rho).sqrt()
}

/// Toro's `f_K(p)` and its derivative: the velocity jump across the wave facing state `s`.
fn pressure_function(p: f64, s: GasState, g: f64) -> (f64, f64) {
    if p > s.p {
        let a = 2.0 / ((g + 1.0) * s.rho);
        let b = (g - 1.0) / (g + 1.0) * s.p;
        let root = (a / (p + b)).sqrt();
        ((p - s.p) * root, root * (1.0 - 0.5 * (p - s.p) / (p + b)))
    } else {
        let c = sound(s, g);
        let r = p / s.p;
        (
            2.0 * c / (g - 1.0) * (r.powf((g - 1.0) / (2.0 * g)) - 1.0),
            r.powf(-(g + 1.0) / (2.0 * g)) / (s.rho * c),
        )
    }
}
