//! Kick-drift-kick leapfrog (velocity Verlet).

use mote_core::{CpuBackend, ParticleData, Real};

use super::{Integrator, kick_drift_kick, no_buffers};
use crate::solver::ForceSolver;

/// Kick-drift-kick leapfrog: second order, symplectic and time-reversible; one force evaluation
/// per step.
#[derive(Clone, Copy, Debug)]
pub struct Leapfrog {
    backend: CpuBackend,
}

impl Leapfrog {
    /// A leapfrog whose element-wise updates run on `backend`.
    pub fn new(backend: CpuBackend) -> Self {
        Self { backend }
    }
}

no_buffers!(Leapfrog);

impl<R: Real> Integrator<R> for Leapfrog {
    fn name(&self) -> &'static str {
        "leapfrog"
    }
    fn order(&self) -> u32 {
        2
    }
    fn force_evaluations_per_step(&self) -> u32 {
        1
    }
    fn step(&mut self, p: &mut ParticleData<R>, solver: &mut dyn ForceSolver<R>, dt: f64) {
        kick_drift_kick(self.backend, p, solver, dt);
    }
}
