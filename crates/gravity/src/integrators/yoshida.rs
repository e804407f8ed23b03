//! Yoshida's fourth-order symplectic integrator.

use mote_core::{CpuBackend, ParticleData, Real};

use super::{Integrator, kick_drift_kick, no_buffers};
use crate::solver::ForceSolver;

/// Yoshida (1990) 4th order: three kick-drift-kick steps of lengths `w1 dt, w0 dt, w1 dt` with
/// `w1 = 1 / (2 - 2^(1/3))`, `w0 = 1 - 2 w1`. Symplectic; three force evaluations per step.
#[derive(Clone, Copy, Debug)]
pub struct Yoshida4 {
    backend: CpuBackend,
}

impl Yoshida4 {
    /// A Yoshida integrator whose element-wise updates run on `backend`.
    pub fn new(backend: CpuBackend) -> Self {
        Self { backend }
    }

    /// The substep weights `(w1, w0)`.
    pub fn weights() -> (f64, f64) {
        let w1 = 1.0 / (2.0 - 2f64.cbrt());
        (w1, 1.0 - 2.0 * w1)
    }
}

no_buffers!(Yoshida4);

impl<R: Real> Integrator<R> for Yoshida4 {
    fn name(&self) -> &'static str {
        "yoshida4"
    }
    fn order(&self) -> u32 {
        4
    }
    fn force_evaluations_per_step(&self) -> u32 {
        3
    }
    fn step(&mut self, p: &mut ParticleData<R>, solver: &mut dyn ForceSolver<R>, dt: f64) {
        let (w1, w0) = Self::weights();
        for w in [w1, w0, w1] {
            kick_drift_kick(self.backend, p, solver, w * dt);
        }
    }
}
