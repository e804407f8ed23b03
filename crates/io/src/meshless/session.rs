//! A meshless simulation built from a configuration and stepped by its caller (the Python
//! module's `mote.Meshless`): the same problem, scheme and steps as [`super::run_meshless`]
//! (built by the same code, stepped by the same [`super::advance`]), without a run directory.
//! The state is reachable as slices in the run's precision, writable where it lives on the host.

use mote_cloud::exact;
use mote_cloud::mood::MoodStats;
use mote_core::{Precision, Real};
use mote_gpu::GpuFloat;
use mote_gpu::meshless::Simulation;

use super::{
    Advanced, MeshlessConfig, ProblemRest, StepFailure, advance, collapse_reason, exact_fields,
    primitive_fields, unstable_reason,
};

/// Values of the run's precision, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum RealSlice<'a> {
    /// An f32 run's.
    F32(&'a [f32]),
    /// An f64 run's.
    F64(&'a [f64]),
}

/// Values of the run's precision, borrowed writable.
#[derive(Debug)]
pub enum RealSliceMut<'a> {
    /// An f32 run's.
    F32(&'a mut [f32]),
    /// An f64 run's.
    F64(&'a mut [f64]),
}

fn real_slice<R: Real>(s: &[R]) -> RealSlice<'_> {
    match R::PRECISION {
        Precision::F32 => RealSlice::F32(bytemuck::cast_slice(s)),
        Precision::F64 => RealSlice::F64(bytemuck::cast_slice(s)),
    }
}

fn real_slice_mut<R: Real>(s: &mut [R]) -> RealSliceMut<'_> {
    match R::PRECISION {
        Precision::F32 => RealSliceMut::F32(bytemuck::cast_slice_mut(s)),
        Precision::F64 => RealSliceMut::F64(bytemuck::cast_slice_mut(s)),
    }
}

/// Why a session's step or write failed: the step, the time and what happened.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("step {step} from time {time}: {reason}")]
pub struct SessionError {
    /// The step that failed (the next one).
    pub step: u64,
    /// The simulated time it started from.
    pub time: f64,
    /// What went wrong.
    pub reason: String,
}

/// A meshless simulation in any precision and dimension, stepped by its caller.
pub trait MeshlessSession: Send {
    /// The resolved configuration it was built from.
    fn config(&self) -> &MeshlessConfig;
    /// The problem's name.
    fn problem(&self) -> &'static str;
    /// The equation's name.
    fn equation(&self) -> &'static str;
    /// Dimension of the cloud.
    fn dimension(&self) -> usize;
    /// The run's precision.
    fn precision(&self) -> Precision;
    /// Simulated time.
    fn time(&self) -> f64;
    /// Steps taken.
    fn steps(&self) -> u64;
    /// Number of particles (boundary layers included).
    fn len(&self) -> usize;
    /// Whether there is no particle.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Mean neighbour count.
    fn neighbours_mean(&self) -> f64;
    /// The conserved variables' names.
    fn variables(&self) -> &[String];
    /// The primitive variables' names (empty where they are the conserved ones).
    fn primitive_variables(&self) -> &[String];
    /// One step of the stable size, not past `end`; returns the time reached.
    fn step(&mut self, end: f64) -> Result<f64, SessionError>;
    /// Whether a step may change the particle count (adaptivity on a moving cloud).
    fn adapting(&self) -> bool;
    /// Positions, one slice per dimension.
    fn positions(&self) -> Vec<RealSlice<'_>>;
    /// Particle volumes.
    fn volumes(&self) -> RealSlice<'_>;
    /// Stable ids.
    fn ids(&self) -> &[u64];
    /// Boundary tags (0: interior).
    fn tags(&self) -> &[u32];
    /// Conserved variable `v`.
    fn state(&self, v: usize) -> RealSlice<'_>;
    /// Conserved variable `v`, writable: the next step starts from what is written.
    fn state_mut(&mut self, v: usize) -> Result<RealSliceMut<'_>, SessionError>;
    /// Sets the state from primitive variables (one slice per primitive variable, every
    /// particle), converted by the equation.
    fn set_primitive(&mut self, w: &[&[f64]]) -> Result<(), SessionError>;
    /// The primitive variables at every particle (empty where they are the conserved ones).
    fn primitive(&self) -> Vec<Vec<f64>>;
    /// Every particle's current reconstruction order (MOOD's where it reduced it).
    fn orders(&mut self) -> Result<Vec<u8>, SessionError>;
    /// The exact solution at every particle at `time` (`exact_NAME` columns), if the problem
    /// has one.
    fn exact(&self, time: f64) -> Option<(Vec<String>, Vec<Vec<f64>>)>;
    /// Errors of every conserved variable against the exact solution now, if there is one.
    fn errors(&self) -> Option<Vec<(String, exact::Errors)>>;
    /// MOOD's statistics summed over the steps so far.
    fn mood(&mut self) -> MoodStats;
    /// Positivity floor events so far.
    fn floor_events(&self) -> Option<u64>;
}

/// The session of one precision and dimension.
pub(super) struct Session<R: GpuFloat, const D: usize> {
    pub(super) sim: Simulation<R, D>,
    pub(super) rest: ProblemRest<D>,
    pub(super) config: MeshlessConfig,
    pub(super) first_dt: Option<f64>,
    pub(super) mood: MoodStats,
    /// Simulated time, as the run's loop keeps it (the ends of the steps).
    pub(super) time: f64,
}

impl<R: GpuFloat, const D: usize> Session<R, D> {
    fn error(&self, reason: String) -> SessionError {
        SessionError {
            step: self.sim.steps() + 1,
            time: self.time,
            reason,
        }
    }

    /// The next step's error for a failed call, made before the call borrows the session.
    fn error_of(&self) -> impl FnOnce(mote_gpu::GpuError) -> SessionError + use<R, D> {
        let (step, time) = (self.sim.steps() + 1, self.time);
        move |e| SessionError {
            step,
            time,
            reason: e.to_string(),
        }
    }
}

impl<R: GpuFloat, const D: usize> MeshlessSession for Session<R, D> {
    fn config(&self) -> &MeshlessConfig {
        &self.config
    }
    fn problem(&self) -> &'static str {
        self.rest.name
    }
    fn equation(&self) -> &'static str {
        self.sim.equation_name()
    }
    fn dimension(&self) -> usize {
        D
    }
    fn precision(&self) -> Precision {
        R::PRECISION
    }
    fn time(&self) -> f64 {
        self.time
    }
    fn steps(&self) -> u64 {
        self.sim.steps()
    }
    fn len(&self) -> usize {
        self.sim.cloud().len()
    }
    fn neighbours_mean(&self) -> f64 {
        self.sim.neighbours_mean()
    }
    fn variables(&self) -> &[String] {
        &self.rest.variables
    }
    fn primitive_variables(&self) -> &[String] {
        &self.rest.primitive
    }
    fn step(&mut self, end: f64) -> Result<f64, SessionError> {
        // The session's clock, not the simulation's sum of steps: the run's loop keeps the
        // times `t_next` it reached, and the steps are computed from them.
        let (time, c) = (self.time, &self.config);
        let (cfl, ratio) = (c.run.cfl, c.run.min_dt_ratio);
        match advance(&mut self.sim, time, end, cfl, ratio, &mut self.first_dt) {
            Ok(Advanced { time, .. }) => {
                self.time = time;
                let m = self.sim.take_mood_stats();
                self.mood.add(&m);
                Ok(time)
            }
            Err(StepFailure::Gpu(e) | StepFailure::Step(e)) => Err(self.error_of()(e)),
            Err(StepFailure::Unstable(stable)) => Err(SessionError {
                step: self.sim.steps(),
                ..self.error(unstable_reason(stable))
            }),
            Err(StepFailure::Collapsed { stable, reference }) => {
                let reason = collapse_reason(
                    &self.sim,
                    (self.sim.cloud(), self.sim.share()),
                    &self.config,
                    (stable, reference),
                    (time, end),
                    "",
                );
                Err(self.error(reason))
            }
        }
    }
    fn adapting(&self) -> bool {
        self.config.motion.moves() && self.config.adaptivity.every > 0
    }
    fn positions(&self) -> Vec<RealSlice<'_>> {
        self.sim
            .cloud()
            .positions()
            .into_iter()
            .map(real_slice)
            .collect()
    }
    fn volumes(&self) -> RealSlice<'_> {
        real_slice(self.sim.cloud().volumes())
    }
    fn ids(&self) -> &[u64] {
        self.sim.cloud().ids()
    }
    fn tags(&self) -> &[u32] {
        self.sim.cloud().tags()
    }
    fn state(&self, v: usize) -> RealSlice<'_> {
        real_slice(self.sim.cloud().state(v))
    }
    fn state_mut(&mut self, v: usize) -> Result<RealSliceMut<'_>, SessionError> {
        let error = self.error_of();
        let cloud = self.sim.cloud_mut().map_err(error)?;
        Ok(real_slice_mut(cloud.state_var_mut(v)))
    }
    fn set_primitive(&mut self, w: &[&[f64]]) -> Result<(), SessionError> {
        let m = self.sim.cloud().variables();
        let n = self.len();
        if w.len() != m || w.iter().any(|c| c.len() != n) {
            return Err(self.error(format!(
                "{} primitive variables of {:?} values given; the state has {m} of {n}",
                w.len(),
                w.iter().map(|c| c.len()).collect::<Vec<_>>()
            )));
        }
        let mut state = vec![Vec::with_capacity(n); m];
        let (mut wi, mut ui) = (vec![R::zero(); m], vec![R::zero(); m]);
        for i in 0..n {
            for (x, c) in wi.iter_mut().zip(w) {
                *x = R::cast(c[i]);
            }
            self.sim.to_conservative(&wi, &mut ui);
            if let Some(k) = ui.iter().position(|x| !x.is_finite()) {
                return Err(self.error(format!(
                    "particle {i} (id {}): the state from the primitive variables is not finite \
                     in variable {k}",
                    self.ids()[i]
                )));
            }
            for (col, &x) in state.iter_mut().zip(&ui) {
                col.push(x);
            }
        }
        let error = self.error_of();
        let cloud = self.sim.cloud_mut().map_err(error)?;
        for (v, values) in state.iter().enumerate() {
            cloud.state_var_mut(v).copy_from_slice(values);
        }
        Ok(())
    }
    fn primitive(&self) -> Vec<Vec<f64>> {
        if self.rest.primitive.is_empty() {
            return Vec::new();
        }
        primitive_fields(&self.sim, self.sim.cloud(), &self.rest)
    }
    fn orders(&mut self) -> Result<Vec<u8>, SessionError> {
        let error = self.error_of();
        self.sim.orders().map_err(error)
    }
    fn exact(&self, time: f64) -> Option<(Vec<String>, Vec<Vec<f64>>)> {
        let ex = self.rest.exact.as_ref()?;
        Some(exact_fields(
            &self.sim,
            self.sim.cloud(),
            &self.rest,
            ex,
            time,
        ))
    }
    fn errors(&self) -> Option<Vec<(String, exact::Errors)>> {
        let ex = self.rest.exact.as_ref()?;
        let time = self.time;
        let errors = exact::errors_all(self.sim.cloud(), |x, out| ex(x, time, out));
        Some(self.rest.variables.iter().cloned().zip(errors).collect())
    }
    fn mood(&mut self) -> MoodStats {
        self.mood
    }
    fn floor_events(&self) -> Option<u64> {
        self.sim.floor_events()
    }
}
