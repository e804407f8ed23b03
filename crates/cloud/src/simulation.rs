//! A meshless simulation: a cloud, its neighbour lists, a scheme, boundary conditions, MOOD,
//! a time stepper (explicit Runge-Kutta, or IMEX with a source term) and a clock.

use mote_core::{CpuBackend, Real};

use crate::boundary::Boundaries;
use crate::cloud::{Cloud, Geometry};
use crate::equations::Equation;
use crate::error::CloudError;
use crate::mood::{Mood, MoodSettings, MoodStats};
use crate::scheme::Muscl;
use crate::search::{NeighbourList, NeighbourSearch, SlotLayout};
use crate::source::Source;
use crate::time::{Imex, ImexTableau, RungeKutta, StageOperator, Tableau};

/// The time stepper: explicit Runge-Kutta, or IMEX with its source term (one dynamic call per
/// stage, none per particle).
enum Stepper<R: Real> {
    Explicit(RungeKutta<R>),
    Imex(Imex<R>, Box<dyn Source<R>>),
}

/// A conservation law advanced on a fixed cloud (the neighbour search runs once).
pub struct MeshlessSimulation<R: Real, const D: usize, E, L: SlotLayout> {
    /// The particles and their state.
    pub cloud: Cloud<R, D>,
    /// The neighbour lists.
    pub list: NeighbourList<L>,
    /// The spatial scheme.
    pub scheme: Muscl<R, D, E>,
    stepper: Stepper<R>,
    boundaries: Boundaries<R, D>,
    mood: Option<Mood<R>>,
    backend: CpuBackend,
    time: f64,
    steps: u64,
}

impl<R: Real, const D: usize, E: Equation<R, D>, L: SlotLayout> MeshlessSimulation<R, D, E, L> {
    /// Searches neighbours within `radius`, prepares the scheme, and starts the clock at 0.
    pub fn new(
        cloud: Cloud<R, D>,
        radius: f64,
        mut scheme: Muscl<R, D, E>,
        tableau: Tableau,
        backend: CpuBackend,
    ) -> Result<Self, CloudError> {
        let mut search = NeighbourSearch::new(radius)?;
        let mut list = NeighbourList::<L>::default();
        search.build(&cloud, backend, &mut list)?;
        scheme.prepare(&cloud, &list, backend)?;
        let stepper = Stepper::Explicit(RungeKutta::new(tableau, cloud.variables()));
        Ok(Self {
            cloud,
            list,
            scheme,
            stepper,
            boundaries: Boundaries::new(),
            mood: None,
            backend,
            time: 0.0,
            steps: 0,
        })
    }

    /// Attaches boundary conditions (one for every boundary tag of the cloud) and imposes them
    /// on the current state.
    pub fn with_boundaries(mut self, mut boundaries: Boundaries<R, D>) -> Result<Self, CloudError> {
        boundaries.prepare(&self.cloud, &self.list)?;
        let (mut state, _) = self.cloud.state_and_geometry();
        boundaries.apply(self.time, &mut state);
        self.boundaries = boundaries;
        Ok(self)
    }

    /// Turns on MOOD order reduction (criterion `none` turns it off). Not available with an
    /// IMEX stepper.
    pub fn with_mood(mut self, settings: MoodSettings) -> Result<Self, CloudError> {
        let mood = Mood::new(settings)?;
        if let (true, Stepper::Imex(imex, _)) = (mood.is_active(), &self.stepper) {
            return Err(imex_without_mood(imex.tableau()));
        }
        self.mood = mood.is_active().then_some(mood);
        Ok(self)
    }

    /// Adds the source term `source` and replaces the explicit stepper by the IMEX pair
    /// `tableau`: the scheme's transport explicit, the source's implicit part implicit (solved
    /// per particle by the source), its explicit part with the transport. Refused with MOOD
    /// (an IMEX stage is not revised) and when the source's variables are not the cloud's.
    pub fn with_source(
        mut self,
        tableau: ImexTableau,
        source: impl Source<R> + 'static,
    ) -> Result<Self, CloudError> {
        if self.mood.is_some() {
            return Err(imex_without_mood(&tableau));
        }
        if source.variables() != self.cloud.variables() {
            return Err(CloudError::invalid(
                "source variables",
                format!("{} ({})", source.variables(), source.name()),
                format!("the cloud's variable count, {}", self.cloud.variables()),
            ));
        }
        let imex = Imex::new(tableau, self.cloud.variables())?;
        self.stepper = Stepper::Imex(imex, Box::new(source));
        Ok(self)
    }

    /// The boundary conditions.
    pub fn boundaries(&self) -> &Boundaries<R, D> {
        &self.boundaries
    }

    /// What MOOD did since the last call (zeros without MOOD), and resets it.
    pub fn take_mood_stats(&mut self) -> MoodStats {
        self.mood
            .as_mut()
            .map(|m| m.take_stats())
            .unwrap_or_default()
    }

    /// MOOD's current per-particle orders (after the last stage), if MOOD is on.
    pub fn mood_orders(&self) -> Option<&[u8]> {
        self.mood.as_ref().map(|m| m.orders())
    }

    /// Seconds the stepper spent in its own passes since the last call (stage combinations and
    /// final update; for IMEX, stage combinations and source solves), and resets them.
    pub fn take_stepper_seconds(&mut self) -> [f64; 2] {
        match &mut self.stepper {
            Stepper::Explicit(rk) => rk.take_seconds(),
            Stepper::Imex(imex, _) => imex.take_seconds(),
        }
    }

    /// The name of the time stepper's tableau (or IMEX pair).
    pub fn stepper_name(&self) -> &'static str {
        match &self.stepper {
            Stepper::Explicit(rk) => rk.tableau().name,
            Stepper::Imex(imex, _) => imex.tableau().name,
        }
    }

    /// Simulated time.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The largest stable step for `cfl` at the current state.
    pub fn stable_dt(&self, cfl: f64) -> f64 {
        let u: Vec<&[R]> = (0..self.cloud.variables())
            .map(|v| self.cloud.state(v))
            .collect();
        self.scheme
            .stable_dt(&self.cloud, &self.list, &u, cfl, self.backend)
    }

    /// One step of length `dt`. An error, naming the particle, if the state holds a non-finite
    /// value before the step (nothing is changed) or after it (the state is then that of the
    /// failed step, for inspection).
    pub fn step(&mut self, dt: f64) -> Result<(), CloudError> {
        if self.steps == 0 {
            self.check_finite("before")?;
        }
        let Self {
            cloud,
            list,
            scheme,
            stepper,
            boundaries,
            mood,
            backend,
            time,
            ..
        } = self;
        let (mut state, geometry) = cloud.state_and_geometry();
        let mut op = Operator {
            scheme,
            geometry: &geometry,
            list,
            boundaries,
            mood: mood.as_mut(),
            backend: *backend,
        };
        match stepper {
            Stepper::Explicit(rk) => rk.advance(&mut state, *time, dt, *backend, &mut op)?,
            Stepper::Imex(imex, source) => {
                imex.advance(&mut state, *time, dt, *backend, &mut op, source.as_ref())?
            }
        }
        self.time += dt;
        self.steps += 1;
        self.check_finite("after")
    }

    /// The first non-finite state value, as an error.
    fn check_finite(&self, when: &'static str) -> Result<(), CloudError> {
        for v in 0..self.cloud.variables() {
            if let Some(i) = self.cloud.state(v).iter().position(|x| !x.is_finite()) {
                return Err(CloudError::NonFinite {
                    variable: v,
                    id: self.cloud.ids()[i],
                    position: format!("{:?}", self.cloud.position_of(i)),
                    when,
                    step: self.steps,
                    time: self.time,
                });
            }
        }
        Ok(())
    }

    /// Advances to `end` with steps of `cfl` times the stable step, the last one shortened to
    /// land exactly on `end`. Returns the number of steps taken.
    pub fn run_to(&mut self, end: f64, cfl: f64) -> Result<u64, CloudError> {
        let dt = self.stable_dt(cfl);
        let start = self.steps;
        while self.time < end {
            let h = dt.min(end - self.time);
            let last = self.time + h >= end;
            self.step(h)?;
            if last {
                self.time = end;
            }
        }
        Ok(self.steps - start)
    }
}

/// The error for MOOD combined with an IMEX stepper.
fn imex_without_mood(tableau: &ImexTableau) -> CloudError {
    CloudError::invalid(
        "MOOD with an IMEX stepper",
        tableau.name,
        "an explicit Runge-Kutta stepper (IMEX stages are not revised a posteriori)",
    )
}

/// One step's view of a simulation as a [`StageOperator`].
struct Operator<'a, 'g, R: Real, const D: usize, E, L: SlotLayout> {
    scheme: &'a mut Muscl<R, D, E>,
    geometry: &'a Geometry<'g, R, D>,
    list: &'a NeighbourList<L>,
    boundaries: &'a Boundaries<R, D>,
    mood: Option<&'a mut Mood<R>>,
    backend: CpuBackend,
}

impl<R: Real, const D: usize, E: Equation<R, D>, L: SlotLayout> Operator<'_, '_, R, D, E, L> {
    /// Boundary particles are not evolved.
    fn zero_boundary_slopes(&self, out: &mut [&mut [R]]) {
        for i in self.boundaries.indices() {
            for o in out.iter_mut() {
                o[i] = R::zero();
            }
        }
    }
}

impl<R: Real, const D: usize, E: Equation<R, D>, L: SlotLayout> StageOperator<R>
    for Operator<'_, '_, R, D, E, L>
{
    fn rhs(&mut self, stage: usize, _t: f64, u: &[&[R]], mut out: Vec<&mut [R]>) {
        let (geometry, list, backend) = (self.geometry, self.list, self.backend);
        self.scheme.derivatives_pass(geometry, list, u, backend);
        let orders = match self.mood.as_deref_mut() {
            Some(mood) => {
                if stage == 0 {
                    mood.reset(geometry.orders, self.scheme.order())
                        .expect("MOOD buffers hold one entry per particle");
                }
                mood.begin_stage();
                mood.orders()
            }
            None => geometry.orders,
        };
        let out2: Vec<&mut [R]> = out.iter_mut().map(|o| &mut **o).collect();
        self.scheme
            .flux_pass(geometry, list, u, out2, backend, orders, None);
        self.zero_boundary_slopes(&mut out);
    }

    fn constrain(&mut self, t: f64, u: &mut [&mut [R]]) {
        self.boundaries.apply(t, u);
    }

    fn revises(&self) -> bool {
        self.mood.as_ref().is_some_and(|m| m.is_active())
    }

    fn revise(
        &mut self,
        _stage: usize,
        _t: f64,
        input: &[&[R]],
        candidate: &[&[R]],
        mut slope: Vec<&mut [R]>,
    ) -> Result<bool, CloudError> {
        let (geometry, list, backend) = (self.geometry, self.list, self.backend);
        let Some(mood) = self.mood.as_deref_mut() else {
            return Ok(false);
        };
        let changed = mood.detect_and_reduce(
            self.scheme.equation(),
            geometry,
            list,
            self.scheme.mls(),
            input,
            candidate,
            backend,
        )?;
        if changed {
            let out: Vec<&mut [R]> = slope.iter_mut().map(|o| &mut **o).collect();
            self.scheme.flux_pass(
                geometry,
                list,
                input,
                out,
                backend,
                mood.orders(),
                Some(mood.active()),
            );
            self.zero_boundary_slopes(&mut slope);
        }
        Ok(changed)
    }
}
