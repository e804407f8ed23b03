//! A gravitational N-body simulation: particles, a force solver, an integrator and a clock.

use mote_core::{Budgeted, ParticleData, Real};

use crate::integrators::Integrator;
use crate::solver::ForceSolver;

/// Particles advanced in time by an integrator with accelerations from a force solver.
///
/// Construction evaluates the accelerations once, establishing the integrators' contract that
/// the stored accelerations always belong to the current positions.
pub struct Simulation<R: Real> {
    /// The particle state.
    pub particles: ParticleData<R>,
    solver: Box<dyn ForceSolver<R>>,
    integrator: Box<dyn Integrator<R>>,
    time: f64,
    steps: u64,
}

impl<R: Real> Simulation<R> {
    /// A simulation at time 0; computes the initial accelerations.
    pub fn new(
        mut particles: ParticleData<R>,
        mut solver: Box<dyn ForceSolver<R>>,
        integrator: Box<dyn Integrator<R>>,
    ) -> Self {
        solver.update(&mut particles);
        Self {
            particles,
            solver,
            integrator,
            time: 0.0,
            steps: 0,
        }
    }

    /// A simulation continued from a saved state: the stored accelerations must belong to the
    /// positions (as they do in every state an integrator leaves), so nothing is recomputed and
    /// the continuation is bitwise identical to an uninterrupted run.
    pub fn restore(
        particles: ParticleData<R>,
        solver: Box<dyn ForceSolver<R>>,
        integrator: Box<dyn Integrator<R>>,
        time: f64,
        steps: u64,
    ) -> Self {
        Self {
            particles,
            solver,
            integrator,
            time,
            steps,
        }
    }

    /// Advances one step of length `dt`.
    pub fn step(&mut self, dt: f64) {
        self.integrator
            .step(&mut self.particles, self.solver.as_mut(), dt);
        self.time += dt;
        self.steps += 1;
    }

    /// Advances `steps` steps of length `dt`.
    pub fn run(&mut self, steps: u64, dt: f64) {
        for _ in 0..steps {
            self.step(dt);
        }
    }

    /// Recomputes the accelerations of the current positions: after the particles were changed
    /// from outside the integrator (bodies added or removed, positions or masses written),
    /// so that the stored accelerations belong to the positions again.
    pub fn refresh_accelerations(&mut self) {
        self.solver.update(&mut self.particles);
    }

    /// Sets the clock (the runner computes output times exactly instead of accumulating steps).
    pub fn set_time(&mut self, time: f64) {
        self.time = time;
    }

    /// Simulated time.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The force solver.
    pub fn solver(&mut self) -> &mut dyn ForceSolver<R> {
        self.solver.as_mut()
    }

    /// The integrator.
    pub fn integrator(&self) -> &dyn Integrator<R> {
        self.integrator.as_ref()
    }

    /// The potential energy of the current state ([`ForceSolver::potential`]: on ranks that
    /// own their particles, of every rank's together; collective there).
    pub fn potential(&mut self) -> f64 {
        self.solver.potential(&self.particles)
    }

    /// Conserved quantities and virial ratio of the current state.
    pub fn diagnostics(
        &mut self,
        backend: mote_core::CpuBackend,
    ) -> crate::diagnostics::Diagnostics {
        crate::diagnostics::Diagnostics::measure(&self.particles, self.solver.as_mut(), backend)
    }

    /// The run's budgeted parts (particles, integrator storage and the solver's own arrays),
    /// for [`mote_core::memory::reserve`].
    pub fn budgeted_parts(&mut self) -> Vec<&mut dyn Budgeted> {
        let mut parts: Vec<&mut dyn Budgeted> = vec![
            &mut self.particles,
            self.integrator.as_mut() as &mut dyn Budgeted,
        ];
        parts.extend(self.solver.budgeted());
        parts
    }
}
