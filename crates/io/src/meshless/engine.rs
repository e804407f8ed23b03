//! What a meshless run steps: the CPU's `MeshlessSimulation` or the device's
//! `DeviceSimulation`, behind one small trait, so that the run loop, the diagnostics and the
//! snapshots are the same code for both backends. Diagnostics are computed on the host from the
//! state as it stands after a step (downloaded from the device at each diagnostics row), so both
//! backends report the same quantities by the same sums.

use mote_cloud::boundary::Boundaries;
use mote_cloud::equations::{Burgers, Equation, Euler, LinearAdvection};
use mote_cloud::flux::FluxKind;
use mote_cloud::mood::{MoodSettings, MoodStats};
use mote_cloud::problems::Problem;
use mote_cloud::scheme::Limiter;
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, MeshlessSimulation, RowMajor, Weight};
use mote_core::memory::{self, MemoryModel, Reservation, ReserveOptions, reserve};
use mote_core::{Budgeted, CpuBackend, Real};
use mote_gpu::{
    DeviceEquation, DeviceLayout, DeviceMuscl, DeviceSimulation, Gpu, GpuError, GpuFloat,
};

use super::{MeshlessConfig, ProblemRest, build_scheme};
use crate::runner::RunError;

/// A simulation the run loop can step and observe.
pub(super) trait Engine<R: Real, const D: usize> {
    /// `cpu`, or `gpu` with the device's name.
    fn backend(&self) -> String;
    /// The equation's short name.
    fn equation_name(&self) -> &'static str;
    /// Mean neighbours per particle.
    fn neighbours_mean(&self) -> f64;
    /// Steps taken.
    fn steps(&self) -> u64;
    /// The simulation's clock (the sum of its step sizes).
    fn time(&self) -> f64;
    /// Sets the clock and the step count (a resumed run).
    fn restore_clock(&mut self, time: f64, steps: u64);
    /// The largest stable step for `cfl` at the current state.
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, RunError>;
    /// One step of length `dt`; an error names a particle whose state is not finite.
    fn step(&mut self, dt: f64) -> Result<(), RunError>;
    /// Brings the host's cloud up to date with the current state (a download from a device).
    fn sync(&mut self) -> Result<(), RunError>;
    /// The cloud on the host, with the state as of the last [`sync`](Self::sync).
    fn cloud(&self) -> &Cloud<R, D>;
    /// Every particle's current reconstruction order (MOOD's where it reduces them).
    fn orders(&mut self) -> Result<Vec<u8>, RunError>;
    /// MOOD's statistics since the last call.
    fn take_mood_stats(&mut self) -> MoodStats;
    /// Positivity floor events so far, where the backend counts them (the device does not).
    fn floor_events(&self) -> Option<u64>;
    /// Conservative to primitive variables, by the host equation.
    fn to_primitive(&self, u: &[R], w: &mut [R]);
    /// The largest wave speed of state `u` along `n`, by the host equation (names the
    /// particle that limits a collapsing time step).
    fn wave_speed(&self, u: &[R], n: [R; D]) -> R;
    /// Sizes the run's buffers once: on the host against `limit`, on a device against `limit`
    /// or else the device's memory where the device reports it. `None`: nothing reserved (no
    /// limit known).
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, RunError>;
}

/// The cloud of `problem` with every particle at the scheme's order, and what the run keeps of
/// the problem besides.
fn split<R: Real, const D: usize, E>(
    c: &MeshlessConfig,
    problem: Problem<R, D, E>,
) -> (Cloud<R, D>, E, Boundaries<R, D>, ProblemRest<D>) {
    let Problem {
        name,
        mut cloud,
        equation,
        boundaries,
        variables,
        primitive,
        exact,
        ..
    } = problem;
    for o in cloud.orders_mut() {
        *o = c.scheme.order as u8;
    }
    let rest = ProblemRest {
        name,
        variables,
        primitive,
        exact,
    };
    (cloud, equation, boundaries, rest)
}

/// The CPU backend: a [`MeshlessSimulation`] in the row-major layout.
pub(super) struct CpuEngine<R: Real, const D: usize, E> {
    pub(super) sim: MeshlessSimulation<R, D, E, RowMajor>,
}

impl<R: Real, const D: usize, E: Equation<R, D>> CpuEngine<R, D, E> {
    /// The configured simulation of `problem` with neighbours within `radius`.
    pub(super) fn new(
        c: &MeshlessConfig,
        problem: Problem<R, D, E>,
        radius: f64,
    ) -> Result<(Self, ProblemRest<D>), RunError> {
        let (cloud, equation, boundaries, rest) = split(c, problem);
        let scheme = build_scheme(equation, &c.scheme).map_err(|(_, e)| e)?;
        let tableau = Tableau::by_name(&c.scheme.stepper)?;
        let mood = MoodSettings::by_name(&c.scheme.mood, &c.scheme.mood_strategy)?;
        let backend = CpuBackend::threads(c.run.threads);
        let mut sim = MeshlessSimulation::new(cloud, radius, scheme, tableau, backend)?;
        // The problem's conditions, not yet prepared (`is_empty` counts prepared particles and
        // was always true here: runs went without their boundary conditions).
        if boundaries.has_conditions() {
            sim = sim.with_boundaries(boundaries)?;
        }
        let sim = sim.with_mood(mood)?;
        Ok((Self { sim }, rest))
    }
}

impl<R: Real, const D: usize, E: Equation<R, D>> Engine<R, D> for CpuEngine<R, D, E> {
    fn backend(&self) -> String {
        "cpu".to_string()
    }
    fn equation_name(&self) -> &'static str {
        self.sim.scheme.equation().name()
    }
    fn neighbours_mean(&self) -> f64 {
        self.sim.list.mean()
    }
    fn steps(&self) -> u64 {
        self.sim.steps()
    }
    fn time(&self) -> f64 {
        self.sim.time()
    }
    fn restore_clock(&mut self, time: f64, steps: u64) {
        self.sim.restore_clock(time, steps);
    }
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, RunError> {
        Ok(self.sim.stable_dt(cfl))
    }
    fn step(&mut self, dt: f64) -> Result<(), RunError> {
        Ok(self.sim.step(dt)?)
    }
    fn sync(&mut self) -> Result<(), RunError> {
        Ok(())
    }
    fn cloud(&self) -> &Cloud<R, D> {
        &self.sim.cloud
    }
    fn orders(&mut self) -> Result<Vec<u8>, RunError> {
        // MOOD's orders exist from its first step on; before it (the initial snapshot) every
        // particle has the scheme's order.
        let n = self.sim.cloud.len();
        Ok(self
            .sim
            .mood_orders()
            .filter(|o| o.len() == n)
            .unwrap_or(self.sim.cloud.orders())
            .to_vec())
    }
    fn take_mood_stats(&mut self) -> MoodStats {
        self.sim.take_mood_stats()
    }
    fn floor_events(&self) -> Option<u64> {
        Some(self.sim.scheme.equation().floor_events())
    }
    fn to_primitive(&self, u: &[R], w: &mut [R]) {
        self.sim.scheme.equation().to_primitive(u, w);
    }
    fn wave_speed(&self, u: &[R], n: [R; D]) -> R {
        self.sim.scheme.equation().max_wave_speed(u, n)
    }
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, RunError> {
        let Some(limit) = limit else {
            return Ok(None);
        };
        let r = reserve(
            &mut self.sim.budgeted_parts(),
            limit,
            ReserveOptions::default(),
        )?;
        Ok(Some(r))
    }
}

/// Equations with a device version.
pub(super) trait OnDevice<const D: usize> {
    /// The device's description of the equation.
    fn device(&self) -> Result<DeviceEquation, GpuError>;
}

impl<const D: usize> OnDevice<D> for LinearAdvection<D> {
    fn device(&self) -> Result<DeviceEquation, GpuError> {
        DeviceEquation::advection(self)
    }
}

impl<const D: usize> OnDevice<D> for Burgers<D> {
    fn device(&self) -> Result<DeviceEquation, GpuError> {
        Ok(DeviceEquation::burgers(self))
    }
}

impl<const D: usize> OnDevice<D> for Euler<D> {
    fn device(&self) -> Result<DeviceEquation, GpuError> {
        Ok(DeviceEquation::euler(self))
    }
}

/// The GPU backend: a [`DeviceSimulation`] (row-major lists) and a host copy of the cloud that
/// receives the state at each diagnostics row.
pub(super) struct DeviceEngine<F: GpuFloat, const D: usize, E> {
    gpu: Gpu,
    sim: DeviceSimulation<F, D>,
    host: Cloud<F, D>,
    equation: E,
    /// Whether `host` holds the device's current state.
    current: bool,
}

impl<F: GpuFloat, const D: usize, E: Equation<F, D> + OnDevice<D>> DeviceEngine<F, D, E> {
    /// The configured device simulation of `problem` on `gpu`.
    pub(super) fn new(
        gpu: Gpu,
        c: &MeshlessConfig,
        problem: Problem<F, D, E>,
        radius: f64,
    ) -> Result<(Self, ProblemRest<D>), RunError> {
        let (cloud, equation, boundaries, rest) = split(c, problem);
        let s = &c.scheme;
        let mut scheme =
            DeviceMuscl::<F>::new::<D>(&gpu, equation.device()?, s.order, Weight::default())?
                .with_limiter::<D>(Limiter::by_name(&s.limiter, &s.limiter_mode)?)?
                .with_flux(FluxKind::by_name(&s.flux)?)?
                .with_formulation(s.formulation);
        if s.weno {
            scheme = scheme.with_weno::<D>(&gpu, mote_cloud::scheme::WENO_CENTRAL_WEIGHT)?;
        }
        let tableau = Tableau::by_name(&s.stepper)?;
        let mood = MoodSettings::by_name(&s.mood, &s.mood_strategy)?;
        let mut sim = DeviceSimulation::new(
            &gpu,
            &cloud,
            radius,
            scheme,
            tableau,
            DeviceLayout::RowMajor,
        )?;
        // The problem's conditions, not yet prepared (`is_empty` counts prepared particles and
        // was always true here: runs went without their boundary conditions).
        if boundaries.has_conditions() {
            sim = sim.with_boundaries(&gpu, &cloud, boundaries)?;
        }
        let sim = sim.with_mood(&gpu, mood)?;
        let engine = Self {
            gpu,
            sim,
            host: cloud,
            equation,
            current: false,
        };
        Ok((engine, rest))
    }
}

impl<F: GpuFloat, const D: usize, E: Equation<F, D> + OnDevice<D>> Engine<F, D>
    for DeviceEngine<F, D, E>
{
    fn backend(&self) -> String {
        format!("gpu {}", self.gpu.name())
    }
    fn equation_name(&self) -> &'static str {
        self.equation.name()
    }
    fn neighbours_mean(&self) -> f64 {
        self.sim.list().total() as f64 / self.host.len().max(1) as f64
    }
    fn steps(&self) -> u64 {
        self.sim.steps()
    }
    fn time(&self) -> f64 {
        self.sim.time()
    }
    fn restore_clock(&mut self, time: f64, steps: u64) {
        self.sim.restore_clock(time, steps);
    }
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, RunError> {
        Ok(self.sim.stable_dt(&self.gpu, cfl)?)
    }
    fn step(&mut self, dt: f64) -> Result<(), RunError> {
        self.current = false;
        Ok(self.sim.step(&self.gpu, dt)?)
    }
    fn sync(&mut self) -> Result<(), RunError> {
        if !self.current {
            let state = self.sim.state(&self.gpu)?;
            let n = self.host.len();
            for v in 0..self.host.variables() {
                self.host
                    .state_var_mut(v)
                    .copy_from_slice(&state[v * n..(v + 1) * n]);
            }
            self.current = true;
        }
        Ok(())
    }
    fn cloud(&self) -> &Cloud<F, D> {
        &self.host
    }
    fn orders(&mut self) -> Result<Vec<u8>, RunError> {
        // As on the CPU: before MOOD's first step its orders are not yet set.
        let n = self.host.len();
        Ok(match self.sim.mood_orders(&self.gpu)? {
            Some(o) if o.len() == n => o.into_iter().map(|o| o as u8).collect(),
            _ => self.host.orders().to_vec(),
        })
    }
    fn take_mood_stats(&mut self) -> MoodStats {
        self.sim.take_mood_stats()
    }
    fn floor_events(&self) -> Option<u64> {
        None
    }
    fn to_primitive(&self, u: &[F], w: &mut [F]) {
        self.equation.to_primitive(u, w);
    }
    fn wave_speed(&self, u: &[F], n: [F; D]) -> F {
        self.equation.max_wave_speed(u, n)
    }
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, RunError> {
        if limit.is_none() {
            // No limit given: the run is priced against the device's memory where the runtime
            // reports it, but nothing is reserved. Reserving sizes every array to the largest
            // particle count that fits, which on a data-centre GPU asked CUDA for single
            // buffers of many gigabytes and failed (H200, 2026-12-04).
            if let Some(total) = self.gpu.memory_limit(None)? {
                let parts: [&dyn Budgeted; 1] = [&self.sim];
                memory::price(
                    || format!("device memory of {}", self.gpu.name()),
                    MemoryModel::of(&parts).current_bytes(),
                    total,
                    ReserveOptions::default().tolerance,
                )?;
            }
            return Ok(None);
        }
        // Before any step: the device arrays still hold the host cloud's data, which the
        // fingerprint check after the move compares with.
        Ok(self.sim.reserve(&self.gpu, &self.host, limit)?)
    }
}
