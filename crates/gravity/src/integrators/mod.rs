//! Time integrators. Each advances positions and velocities by one step of length `dt`,
//! calling a [`ForceSolver`] for accelerations.
//!
//! Contract: on entry the stored accelerations belong to the current positions, and on exit
//! they belong to the new positions. They are carried between steps, so kick-drift-kick costs
//! one force evaluation per step. [`crate::Simulation`] establishes the contract at start.

mod leapfrog;
mod rk4;
mod yoshida;

pub use leapfrog::Leapfrog;
pub use rk4::Rk4;
pub use yoshida::Yoshida4;

use std::str::FromStr;

use mote_core::{Budgeted, CpuBackend, ParticleData, Real};

use crate::error::GravityError;
use crate::solver::ForceSolver;

/// A time integrator. Its own per-particle storage, if any, is listed through [`Budgeted`].
/// `Send`, so that a simulation can be moved to (or driven from) another thread, as the Python
/// module does while it releases the interpreter.
pub trait Integrator<R: Real>: Budgeted + Send {
    /// Its name (`leapfrog`, `yoshida4`, `rk4`).
    fn name(&self) -> &'static str;

    /// Order of accuracy of the global error.
    fn order(&self) -> u32;

    /// Force evaluations per step.
    fn force_evaluations_per_step(&self) -> u32;

    /// Advances `p` by `dt`. The accelerations stored in `p` must belong to its positions; on
    /// return they belong to the new positions.
    fn step(&mut self, p: &mut ParticleData<R>, solver: &mut dyn ForceSolver<R>, dt: f64);
}

/// The integrators by name, for configuration and the command line.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum IntegratorKind {
    /// Kick-drift-kick leapfrog (velocity Verlet), 2nd order, symplectic. The default.
    #[default]
    Leapfrog,
    /// Yoshida's 4th-order composition of three leapfrog steps, symplectic.
    Yoshida4,
    /// Classical 4th-order Runge-Kutta (not symplectic: its energy error drifts).
    Rk4,
}

impl IntegratorKind {
    /// Every integrator.
    pub const ALL: [IntegratorKind; 3] = [
        IntegratorKind::Leapfrog,
        IntegratorKind::Yoshida4,
        IntegratorKind::Rk4,
    ];

    /// A new integrator of this kind whose element-wise updates run on `backend`.
    pub fn build<R: Real>(self, backend: CpuBackend) -> Box<dyn Integrator<R>> {
        match self {
            IntegratorKind::Leapfrog => Box::new(Leapfrog::new(backend)),
            IntegratorKind::Yoshida4 => Box::new(Yoshida4::new(backend)),
            IntegratorKind::Rk4 => Box::new(Rk4::<R>::new(backend)),
        }
    }

    /// The name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IntegratorKind::Leapfrog => "leapfrog",
            IntegratorKind::Yoshida4 => "yoshida4",
            IntegratorKind::Rk4 => "rk4",
        }
    }
}

impl FromStr for IntegratorKind {
    type Err = GravityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| GravityError::UnknownName {
                what: "integrator",
                name: s.to_string(),
                expected: "leapfrog, yoshida4, rk4",
            })
    }
}

/// `v += h a` for every particle.
pub(crate) fn kick<R: Real>(backend: CpuBackend, p: &mut ParticleData<R>, h: R) {
    let v = p.view_mut();
    let (ax, ay, az) = v.acceleration.as_span().components();
    backend.update_each(v.velocity, |i, w| {
        [w[0] + h * ax[i], w[1] + h * ay[i], w[2] + h * az[i]]
    });
}

/// `x += h v` for every particle.
pub(crate) fn drift<R: Real>(backend: CpuBackend, p: &mut ParticleData<R>, h: R) {
    let v = p.view_mut();
    let (vx, vy, vz) = v.velocity.as_span().components();
    backend.update_each(v.position, |i, x| {
        [x[0] + h * vx[i], x[1] + h * vy[i], x[2] + h * vz[i]]
    });
}

/// One kick-drift-kick step of length `h`.
pub(crate) fn kick_drift_kick<R: Real>(
    backend: CpuBackend,
    p: &mut ParticleData<R>,
    solver: &mut dyn ForceSolver<R>,
    h: f64,
) {
    let half = R::cast(0.5 * h);
    kick(backend, p, half);
    drift(backend, p, R::cast(h));
    solver.update(p);
    kick(backend, p, half);
}

/// Implements [`Budgeted`] for an integrator without storage of its own.
macro_rules! no_buffers {
    ($t:ty) => {
        impl mote_core::Budgeted for $t {
            fn buffers(&self) -> Vec<&dyn mote_core::BudgetedBuffer> {
                Vec::new()
            }
            fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
                Vec::new()
            }
        }
    };
}
pub(crate) use no_buffers;
