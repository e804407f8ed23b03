//! Kinetic (Jin-Xin type) relaxation: a conservation law `du/dt + div F(u) = 0` represented by
//! `2 D` kinetic components per variable, advected with the velocities `+-lambda e_d` and relaxed
//! towards a Maxwellian at the rate `1/epsilon`:
//!
//! ```text
//! df_k/dt + lambda_k . grad f_k = (M_k(u) - f_k) / epsilon,     u = sum_k f_k,
//! M_(d,+-)(u) = u / (2 D) +- F_d(u) / (2 lambda)
//! ```
//!
//! The Maxwellian has `sum_k M_k = u` and `sum_k lambda_k M_k = F(u)`, so as `epsilon -> 0` the
//! macroscopic `u` obeys the original law. It is monotone in `u` (a stable relaxation) under
//! the subcharacteristic condition `D |F_d'(u)| <= lambda` for every axis `d`.
//!
//! The implicit stage `f - h (M(u(f)) - f) / epsilon = r` has an exact solution: the relaxation
//! conserves `u`, so `u = sum_k r_k`, and then `f_k = (r_k + (h / epsilon) M_k(u)) / (1 + h /
//! epsilon)`, stable for any `h / epsilon`.

use mote_core::Real;

use super::PointSource;
use crate::cloud::MAX_VARIABLES;
use crate::equations::{Equation, KineticTransport};
use crate::error::CloudError;
use crate::formula::relaxation as formula;

/// The relaxation source of a kinetic representation of the conservation law `E`.
#[derive(Clone, Debug)]
pub struct KineticRelaxation<const D: usize, E> {
    equation: E,
    speed: f64,
    epsilon: f64,
    macroscopic: usize,
}

impl<const D: usize, E> KineticRelaxation<D, E> {
    /// The relaxation of `equation`'s kinetic representation with kinetic speed `speed`
    /// (`lambda`) and relaxation time `epsilon`. Choose `speed >= D` times the largest wave
    /// speed of `equation` along an axis (the subcharacteristic condition).
    pub fn new<R: Real>(equation: E, speed: f64, epsilon: f64) -> Result<Self, CloudError>
    where
        E: Equation<R, D>,
    {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(CloudError::invalid(
                "kinetic speed",
                speed,
                "a positive, finite speed (at least D times the largest wave speed)",
            ));
        }
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(CloudError::invalid(
                "relaxation time epsilon",
                epsilon,
                "a positive, finite time",
            ));
        }
        let macroscopic = equation.variables();
        if 2 * D * macroscopic > MAX_VARIABLES {
            return Err(CloudError::invalid(
                "kinetic variables",
                2 * D * macroscopic,
                format!("at most {MAX_VARIABLES} (2 D times the equation's variables)"),
            ));
        }
        Ok(Self {
            equation,
            speed,
            epsilon,
            macroscopic,
        })
    }

    /// The transport part, the equation the spatial scheme discretises.
    pub fn transport(&self) -> KineticTransport<D> {
        KineticTransport::new(self.macroscopic, self.speed)
    }

    /// Number of kinetic variables, `2 D M`.
    pub fn kinetic_variables(&self) -> usize {
        2 * D * self.macroscopic
    }

    /// Number of macroscopic variables `M`.
    pub fn macroscopic_variables(&self) -> usize {
        self.macroscopic
    }

    /// The relaxation time.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The macroscopic equation.
    pub fn equation(&self) -> &E {
        &self.equation
    }

    /// The Maxwellian `M(u)` of a macroscopic state `u` (length `M`) into `f` (length `2 D M`).
    pub fn maxwellian<R: Real>(&self, u: &[R], f: &mut [R])
    where
        E: Equation<R, D>,
    {
        let m = self.macroscopic;
        let share = R::one() / R::from_usize(2 * D);
        let inv = R::one() / R::cast(2.0 * self.speed);
        let mut flux = [R::zero(); MAX_VARIABLES];
        for d in 0..D {
            let mut axis = [R::zero(); D];
            axis[d] = R::one();
            self.equation.flux(u, axis, &mut flux[..m]);
            for v in 0..m {
                (f[2 * d * m + v], f[(2 * d + 1) * m + v]) =
                    formula::maxwellian_pair(u[v], flux[v], share, inv);
            }
        }
    }

    /// The macroscopic state `u_v = sum_k f_(k M + v)` of kinetic variables `f` into `u`.
    pub fn macroscopic<R: Real>(&self, f: &[R], u: &mut [R]) {
        let m = self.macroscopic;
        for v in 0..m {
            let mut s = R::zero();
            for k in 0..2 * D {
                s += f[k * m + v];
            }
            u[v] = s;
        }
    }

    /// Whether `u` satisfies the subcharacteristic condition `D |F_d'(u)| <= lambda` on every
    /// axis (the Maxwellian is then monotone in `u`).
    pub fn subcharacteristic<R: Real>(&self, u: &[R]) -> bool
    where
        E: Equation<R, D>,
    {
        (0..D).all(|d| {
            let mut axis = [R::zero(); D];
            axis[d] = R::one();
            let speed = self.equation.max_wave_speed(u, axis).as_f64();
            D as f64 * speed <= self.speed
        })
    }
}

impl<R: Real, const D: usize, E: Equation<R, D>> PointSource<R> for KineticRelaxation<D, E> {
    fn name(&self) -> &'static str {
        "kinetic_relaxation"
    }

    fn variables(&self) -> usize {
        self.kinetic_variables()
    }

    fn implicit_at(&self, _t: f64, f: &[R], out: &mut [R]) {
        let mut u = [R::zero(); MAX_VARIABLES];
        let mut eq = [R::zero(); MAX_VARIABLES];
        let m = self.macroscopic;
        self.macroscopic(f, &mut u[..m]);
        self.maxwellian(&u[..m], &mut eq[..f.len()]);
        let rate = R::one() / R::cast(self.epsilon);
        for (o, (&e, &x)) in out.iter_mut().zip(eq.iter().zip(f)) {
            *o = formula::relaxation_source(x, e, rate);
        }
    }

    fn solve_at(&self, _t: f64, h: R, f: &mut [R]) -> bool {
        let mut u = [R::zero(); MAX_VARIABLES];
        let mut eq = [R::zero(); MAX_VARIABLES];
        let m = self.macroscopic;
        self.macroscopic(f, &mut u[..m]);
        self.maxwellian(&u[..m], &mut eq[..f.len()]);
        let r = h / R::cast(self.epsilon);
        let inv = R::one() / (R::one() + r);
        let mut ok = true;
        for (x, &e) in f.iter_mut().zip(&eq) {
            *x = formula::relaxed(*x, e, r, inv);
            ok &= x.is_finite();
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::equations::Euler;

    /// The Maxwellian's moments are `u` and `F(u)` (here 2-D Euler, 16 kinetic variables), and
    /// the implicit solve conserves `u` and approaches the Maxwellian as `h / epsilon` grows.
    #[test]
    fn maxwellian_moments_and_exact_implicit_solve() {
        let eq = Euler::<2>::new(1.4).unwrap();
        let relax = KineticRelaxation::new::<f64>(eq.clone(), 8.0, 1e-3).unwrap();
        assert_eq!(relax.kinetic_variables(), 16);
        let u = Equation::<f64, 2>::to_conservative;
        let mut state = [0.0; 4];
        u(&eq, &[1.2, 0.3, -0.4, 2.0], &mut state);
        let mut f = [0.0; 16];
        relax.maxwellian(&state, &mut f);
        let mut back = [0.0; 4];
        relax.macroscopic(&f, &mut back);
        for v in 0..4 {
            assert!((back[v] - state[v]).abs() < 1e-14);
        }
        for d in 0..2 {
            let mut axis = [0.0; 2];
            axis[d] = 1.0;
            let mut flux = [0.0; 4];
            eq.flux(&state, axis, &mut flux);
            for v in 0..4 {
                // sum_k lambda_k . e_d M_k = F_d(u).
                let moment = 8.0 * (f[2 * d * 4 + v] - f[(2 * d + 1) * 4 + v]);
                assert!((moment - flux[v]).abs() < 1e-13, "axis {d} variable {v}");
            }
        }
        // A kinetic state away from equilibrium, same macroscopic state.
        let mut g = f;
        g[0] += 0.1;
        g[4] -= 0.1;
        g[5] += 0.05;
        g[9] -= 0.05;
        for (h, distance) in [(1e-3, 0.06), (1.0, 1e-3)] {
            let mut x = g;
            assert!(PointSource::<f64>::solve_at(&relax, 0.0, h, &mut x));
            relax.macroscopic(&x, &mut back);
            let far = x
                .iter()
                .zip(&f)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(far <= distance, "h {h}: {far}");
            for v in 0..4 {
                assert!((back[v] - state[v]).abs() < 1e-14);
            }
            // The solve satisfies its equation: x - h S(x) = g.
            let mut s = [0.0; 16];
            PointSource::<f64>::implicit_at(&relax, 0.0, &x, &mut s);
            for k in 0..16 {
                assert!((x[k] - h * s[k] - g[k]).abs() < 1e-12, "h {h} k {k}");
            }
        }
        assert!(relax.subcharacteristic(&state));
        assert!(KineticRelaxation::new::<f64>(Euler::<3>::new(1.4).unwrap(), 8.0, 1e-3).is_err());
    }
}
