//! A meshless simulation: a cloud, its neighbour lists, a scheme, a Runge-Kutta stepper and a
//! clock.

use mote_core::{CpuBackend, Real};

use crate::cloud::Cloud;
use crate::equations::Equation;
use crate::error::CloudError;
use crate::scheme::Muscl;
use crate::search::{NeighbourList, NeighbourSearch, SlotLayout};
use crate::time::{RungeKutta, Tableau};

/// A conservation law advanced on a fixed cloud (the neighbour search runs once).
pub struct MeshlessSimulation<R: Real, const D: usize, E, L: SlotLayout> {
    /// The particles and their state.
    pub cloud: Cloud<R, D>,
    /// The neighbour lists.
    pub list: NeighbourList<L>,
    /// The spatial scheme.
    pub scheme: Muscl<R, D, E>,
    stepper: RungeKutta<R>,
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
        let stepper = RungeKutta::new(tableau, cloud.variables());
        Ok(Self {
            cloud,
            list,
            scheme,
            stepper,
            backend,
            time: 0.0,
            steps: 0,
        })
    }

    /// The time stepper.
    pub fn stepper_mut(&mut self) -> &mut RungeKutta<R> {
        &mut self.stepper
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

    /// One step of length `dt`.
    pub fn step(&mut self, dt: f64) -> Result<(), CloudError> {
        let Self {
            cloud,
            list,
            scheme,
            stepper,
            backend,
            ..
        } = self;
        let (mut state, geometry) = cloud.state_and_geometry();
        stepper.step(&mut state, dt, *backend, &mut |u, du| {
            scheme.rhs(&geometry, list, u, du, *backend)
        })?;
        self.time += dt;
        self.steps += 1;
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
