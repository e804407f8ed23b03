//! A meshless simulation resident on the device: the CPU's
//! [`MeshlessSimulation`](mote_cloud::MeshlessSimulation) for a fixed cloud and an explicit
//! Runge-Kutta tableau, stage for stage.
//!
//! Per stage: the derivative (and limiter) pass and the flux pass at the stage state (the
//! MOOD orders at the first stage reset to the cloud's), boundary slopes zeroed; the candidate
//! (the next stage's state, or the new state) formed as the CPU forms it (`u` copied, then each
//! non-zero `a_sl dt k_l` added in order), boundary conditions imposed on it; with MOOD the
//! candidate is checked and the slope recomputed for the particles whose interfaces changed
//! until nothing fails. Without MOOD the last stage adds `b_l dt k_l` to the state in place.
//! The stage loop itself is the CPU's, `mote_cloud::time::runge_kutta`, over this simulation's
//! arrays and passes (`RkStages`). The
//! state stays on the device from the upload to [`DeviceSimulation::state`]; each step checks
//! it for non-finite values on the device (one word comes back).

use mote_cloud::boundary::Boundaries;
use mote_cloud::exact::Errors;
use mote_cloud::mood::{MoodSettings, MoodStats};
use mote_cloud::motion::Motion;
use mote_cloud::simulation::{imex_on_moving_cloud, imex_without_mood};
use mote_cloud::time::imex::{ImexSlope, ImexStages, imex_step};
use mote_cloud::time::{ImexTableau, RkStages, StageState, Tableau, runge_kutta};
use mote_cloud::{Cloud, CloudError, NeighbourList, NeighbourSearch, RowMajor};
use mote_core::CpuBackend;

use crate::array::DeviceArray;
use crate::boundary::DeviceBoundaries;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::halo::DeviceHalo;
use crate::mood::DeviceMood;
use crate::muscl::DeviceMuscl;
use crate::relaxation::DeviceRelaxation;
use crate::search::{DeviceCloud, DeviceLayout, DeviceNeighbours, GpuNeighbourSearch};

/// A fixed meshless cloud, its lists, scheme and state, stepped on a device.
pub struct DeviceSimulation<F: GpuFloat, const D: usize> {
    cloud: DeviceCloud<F, D>,
    list: DeviceNeighbours,
    scheme: DeviceMuscl<F>,
    radius: f64,
    /// The cloud's per-particle orders (MOOD's maximum).
    max_orders: DeviceArray<u32>,
    tableau: Tableau,
    /// The conserved variables end to end (`v * n + i`).
    state: DeviceArray<F>,
    slopes: Vec<DeviceArray<F>>,
    stage: [DeviceArray<F>; 2],
    boundaries: Option<DeviceBoundaries<F>>,
    mood: Option<DeviceMood<F>>,
    /// The IMEX stepper with a relaxation source, replacing the explicit tableau.
    imex: Option<DeviceImex<F>>,
    /// The motion of a moving cloud and its arrays.
    moving: Option<DeviceMoving<F, D>>,
    /// The search, kept for moving clouds (a search per stage).
    search: GpuNeighbourSearch,
    /// Host copies for messages: stable ids and positions.
    ids: Vec<u64>,
    positions: Vec<[f64; D]>,
    time: f64,
    steps: u64,
    setup: SetupSeconds,
    /// Wait for each part of a step and accumulate its seconds (benchmarks).
    timing: bool,
    seconds: StepSeconds,
}

/// A rank's part of a split cloud: its halo and the whole cloud's bounds (`min`, `max` per
/// axis) its search bins over.
type Split<'a> = (
    std::sync::Arc<mote_cloud::halo::Halo>,
    (&'a [f64], &'a [f64]),
);

/// The IMEX stepper's arrays: the transport and source slopes of the stages that a later stage
/// or the update reads (`None` for the others), and the smallest particle index whose implicit
/// solve failed in this step (`u32::MAX`: none).
struct DeviceImex<F: GpuFloat> {
    tableau: ImexTableau,
    source: DeviceRelaxation<F>,
    transport: Vec<Option<DeviceArray<F>>>,
    slopes: Vec<Option<DeviceArray<F>>>,
    failed: DeviceArray<u32>,
}

/// A moving cloud's motion and arrays: the step's positions (the axes end to end, unwrapped,
/// advanced by the Runge-Kutta stages as the CPU advances them with the state), two stage
/// candidates, the velocities of each stage (the positions' slopes) and the velocity gradients
/// of the current stage.
struct DeviceMoving<F: GpuFloat, const D: usize> {
    motion: Box<dyn Motion<F, D>>,
    positions: DeviceArray<F>,
    stage: [DeviceArray<F>; 2],
    velocity: Vec<DeviceArray<F>>,
    gradient: DeviceArray<F>,
    /// Whether the search and fits are those of the cloud's current positions.
    current: bool,
}

/// Wall seconds of [`DeviceSimulation::new`]'s parts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SetupSeconds {
    /// Positions, tags, orders and state to the device.
    pub upload: f64,
    /// The neighbour search.
    pub search: f64,
    /// The MLS fits.
    pub mls: f64,
}

/// Wall seconds of the parts of the steps besides the scheme's passes (with
/// [`DeviceSimulation::set_timing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepSeconds {
    /// Runge-Kutta combinations (stage candidates and the final update) and boundary
    /// conditions.
    pub stages: f64,
    /// MOOD detection and order reduction.
    pub mood: f64,
    /// A moving cloud's geometry per stage: wrapping the positions, the search, the MLS fits,
    /// the velocities (computed on the host: a download of the positions and the state and an
    /// upload per stage) and their gradients.
    pub motion: f64,
}

impl<F: GpuFloat, const D: usize> DeviceSimulation<F, D> {
    /// Uploads `cloud` (positions, tags, orders, state), searches neighbours within `radius` in
    /// `layout` and prepares `scheme` on `gpu`; the clock starts at 0. An error if the cloud's
    /// variables are not the scheme's, or names a non-finite initial value.
    pub fn new(
        gpu: &Gpu,
        cloud: &Cloud<F, D>,
        radius: f64,
        scheme: DeviceMuscl<F>,
        tableau: Tableau,
        layout: DeviceLayout,
    ) -> Result<Self, GpuError> {
        Self::build(gpu, cloud, radius, scheme, tableau, layout, None)
    }

    /// This rank's part of a simulation split between ranks, as the CPU's
    /// `MeshlessSimulation::split_part` splits one: `part` holds the rank's own particles and
    /// its `halo` of neighbours (from [`mote_cloud::halo::split_own`]), searched here on the
    /// whole cloud's bins (`bounds`: the extremes over every rank, `min` and `max` per axis),
    /// so that the lists of the own particles (and ring 1's, with two rings) are one process's.
    /// Every pass computes the local particles and refreshes the halo's records from their
    /// owners ([`crate::halo::DeviceHalo`]); the stable step and the finiteness check reduce
    /// over the ranks, and so do MOOD's rounds; boundary conditions prepared for the part
    /// ([`with_prepared_boundaries`](Self::with_prepared_boundaries)) are imposed on the own
    /// boundary particles and exchanged. The own particles' states are a one-device run's, bit
    /// for bit. A fixed cloud with an explicit tableau.
    #[allow(clippy::too_many_arguments)]
    pub fn split(
        gpu: &Gpu,
        part: &Cloud<F, D>,
        halo: std::sync::Arc<mote_cloud::halo::Halo>,
        bounds: (&[f64], &[f64]),
        radius: f64,
        scheme: DeviceMuscl<F>,
        tableau: Tableau,
        layout: DeviceLayout,
    ) -> Result<Self, GpuError> {
        Self::build(
            gpu,
            part,
            radius,
            scheme,
            tableau,
            layout,
            Some((halo, bounds)),
        )
    }

    /// [`new`](Self::new), or with `split` [`split`](Self::split).
    fn build(
        gpu: &Gpu,
        cloud: &Cloud<F, D>,
        radius: f64,
        mut scheme: DeviceMuscl<F>,
        tableau: Tableau,
        layout: DeviceLayout,
        split: Option<Split<'_>>,
    ) -> Result<Self, GpuError> {
        let n = cloud.len();
        let m = scheme.equation().variables(D);
        if cloud.variables() != m {
            return Err(CloudError::invalid(
                "cloud variables",
                cloud.variables(),
                format!("the {m} of the device scheme's equation"),
            )
            .into());
        }
        // A split cloud's ranks agree on the outcome of each part of the set-up before the
        // next collective one (the fits agree on their failures themselves): a device that
        // fails on one rank stops every rank.
        let comm = split.as_ref().map(|(halo, _)| halo.comm_shared());
        let per_particle = mote_core::Scaling::PerParticle(m);
        let clock = std::time::Instant::now();
        let uploaded = crate::halo::agreed(
            comm.as_deref(),
            (|| {
                let dc = DeviceCloud::upload(gpu, cloud)?;
                let (orders, state) = device_layout(cloud, m);
                let max_orders = gpu.upload("order", &orders);
                // The variables end to end: `m` elements per particle, for the memory budget.
                let state = gpu.upload("state", &state).with_scaling(per_particle);
                gpu.sync()?;
                Ok((dc, max_orders, state))
            })(),
        );
        let (dc, max_orders, state) = uploaded?;
        let upload = clock.elapsed().as_secs_f64();
        let clock = std::time::Instant::now();
        let searched = crate::halo::agreed(
            comm.as_deref(),
            (|| {
                let mut search = GpuNeighbourSearch::new(gpu, radius)?;
                let mut list = DeviceNeighbours::new(gpu, layout);
                if let Some((halo, (min, max))) = split {
                    search.set_bounds(min, max);
                    list.set_halo(std::sync::Arc::new(DeviceHalo::new(gpu, halo)));
                }
                search.build(gpu, &dc, &mut list)?;
                Ok((search, list))
            })(),
        );
        let (search, list) = searched?;
        let search_seconds = clock.elapsed().as_secs_f64();
        let clock = std::time::Instant::now();
        let prepared = scheme.prepare(gpu, &dc, &list).and_then(|()| gpu.sync());
        crate::halo::agreed(comm.as_deref(), prepared)?;
        let mls = clock.elapsed().as_secs_f64();
        let stages = tableau.stages();
        let sim = Self {
            cloud: dc,
            list,
            scheme,
            radius,
            max_orders,
            tableau,
            state,
            slopes: (0..stages)
                .map(|_| gpu.output("slope", n * m).with_scaling(per_particle))
                .collect(),
            stage: [
                gpu.output("stage_a", n * m).with_scaling(per_particle),
                gpu.output("stage_b", n * m).with_scaling(per_particle),
            ],
            boundaries: None,
            mood: None,
            imex: None,
            moving: None,
            search,
            ids: cloud.ids().to_vec(),
            positions: (0..n).map(|i| cloud.position_of(i)).collect(),
            time: 0.0,
            steps: 0,
            setup: SetupSeconds {
                upload,
                search: search_seconds,
                mls,
            },
            timing: false,
            seconds: StepSeconds::default(),
        };
        sim.check_finite(gpu, "before")?;
        Ok(sim)
    }

    /// Attaches the built-in boundary conditions `boundaries` (one for every boundary tag of
    /// `cloud`, the cloud this simulation was made from) and imposes them on the state. The
    /// boundary particles' nearest interior neighbours come from a host search (the same lists
    /// as the device's).
    pub fn with_boundaries(
        self,
        gpu: &Gpu,
        cloud: &Cloud<F, D>,
        mut boundaries: Boundaries<F, D>,
    ) -> Result<Self, GpuError> {
        self.refuse_split("boundary conditions")?;
        if cloud.len() != self.cloud.len() {
            return Err(CloudError::invalid(
                "boundary cloud",
                format!("{} particles", cloud.len()),
                format!("the simulation's cloud ({} particles)", self.cloud.len()),
            )
            .into());
        }
        let mut search = NeighbourSearch::new(self.radius)?;
        let mut list = NeighbourList::<RowMajor>::default();
        search.build(cloud, CpuBackend::default(), &mut list)?;
        boundaries.prepare(cloud, &list)?;
        self.with_prepared_boundaries(gpu, &boundaries)
    }

    /// Attaches `boundaries`, prepared for this simulation's cloud (by
    /// [`Boundaries::prepare`], or on a rank's part of a split cloud by
    /// [`Boundaries::prepare_own`]: its own boundary particles, whose states the halo's take by
    /// exchange), and imposes them on the state. Collective on a split cloud.
    pub fn with_prepared_boundaries(
        mut self,
        gpu: &Gpu,
        boundaries: &Boundaries<F, D>,
    ) -> Result<Self, GpuError> {
        if let Some(m) = &self.moving {
            return Err(CloudError::invalid(
                "boundary conditions",
                m.motion.name(),
                "a fixed cloud (boundary conditions on moving clouds are not available yet)",
            )
            .into());
        }
        let comm = self.halo().map(|h| h.comm_shared());
        let device =
            crate::halo::agreed(comm.as_deref(), DeviceBoundaries::new::<D>(gpu, boundaries))?;
        let n = self.cloud.len();
        device.apply(gpu, &self.state, n, self.time)?;
        if let Some(h) = self.list.halo() {
            let m = self.scheme.equation().variables(D);
            h.exchange_columns(gpu, &self.state, n, m)?;
        }
        self.boundaries = Some(device);
        Ok(self)
    }

    /// Turns on MOOD order reduction (criterion `none` turns it off). Refused after
    /// [`with_relaxation`](Self::with_relaxation), as on the CPU.
    pub fn with_mood(mut self, gpu: &Gpu, settings: MoodSettings) -> Result<Self, GpuError> {
        let mood = DeviceMood::new::<D>(gpu, settings, &self.scheme)?;
        if let (true, Some(imex)) = (mood.is_active(), &self.imex) {
            return Err(imex_without_mood(&imex.tableau).into());
        }
        if let (true, Some(m)) = (mood.is_active(), &self.moving) {
            return Err(CloudError::invalid(
                "MOOD",
                m.motion.name(),
                "a fixed cloud (not available on moving clouds yet)",
            )
            .into());
        }
        self.mood = mood.is_active().then_some(mood);
        Ok(self)
    }

    /// Adds the kinetic relaxation `source` and replaces the explicit stepper by the IMEX pair
    /// `tableau`, as the CPU's `MeshlessSimulation::with_source`: the scheme's transport (a
    /// [`DeviceEquation::kinetic`](crate::DeviceEquation::kinetic)) explicit, the relaxation
    /// implicit, solved per particle on the device. Refused with MOOD and when the source's
    /// variables are not the scheme's.
    pub fn with_relaxation(
        mut self,
        gpu: &Gpu,
        tableau: ImexTableau,
        source: DeviceRelaxation<F>,
    ) -> Result<Self, GpuError> {
        tableau.validate()?;
        self.refuse_split("a relaxation source")?;
        if self.mood.is_some() {
            return Err(imex_without_mood(&tableau).into());
        }
        if let Some(m) = &self.moving {
            return Err(imex_on_moving_cloud(&tableau, m.motion.name()).into());
        }
        let m = self.scheme.equation().variables(D);
        if source.variables() != m {
            return Err(CloudError::invalid(
                "source variables",
                format!("{} (kinetic_relaxation)", source.variables()),
                format!("the scheme's variable count, {m}"),
            )
            .into());
        }
        let n = self.cloud.len();
        let per_particle = mote_core::Scaling::PerParticle(m);
        let needed = tableau.needed_slopes();
        let array =
            |name, needed: bool| needed.then(|| gpu.output(name, n * m).with_scaling(per_particle));
        self.imex = Some(DeviceImex {
            transport: needed
                .iter()
                .map(|k| array("imex_transport_slope", k[0]))
                .collect(),
            slopes: needed
                .iter()
                .map(|k| array("imex_source_slope", k[1]))
                .collect(),
            failed: gpu
                .upload("imex_failed", &[u32::MAX])
                .with_scaling(mote_core::Scaling::Fixed),
            tableau,
            source,
        });
        // The explicit stepper's slopes and second stage buffer are not used any more.
        self.slopes.clear();
        self.stage[1] = gpu.output("stage_b", 0).with_scaling(per_particle);
        Ok(self)
    }

    /// Moves the particles with `motion`, as the CPU's `MeshlessSimulation::with_motion`: each
    /// Runge-Kutta stage moves them with its own velocities, searches neighbours and fits the
    /// MLS moments again at the new positions on the device, and exchanges ALE fluxes
    /// ([`DeviceMuscl::moving_flux_pass`]). The velocities come from `motion` on the host (the
    /// cloud's positions and the stage state are downloaded, the velocities uploaded, once per
    /// stage), so every motion the CPU runs runs here, with the CPU's bits. The device never
    /// reorders the cloud: it follows a CPU run with an infinite reordering distance.
    ///
    /// Needs the MLS-divergence formulation and a periodic cloud without boundary particles,
    /// and neither MOOD nor IMEX (refused with the CPU's messages).
    pub fn with_motion(
        mut self,
        gpu: &Gpu,
        motion: impl Motion<F, D> + 'static,
    ) -> Result<Self, GpuError> {
        self.refuse_split("a moving cloud")?;
        let refuse = |what: &str| -> Result<Self, GpuError> {
            Err(CloudError::invalid("moving cloud", motion.name(), what).into())
        };
        if self.imex.is_some() {
            return refuse("an explicit Runge-Kutta stepper (not IMEX)");
        }
        if self.scheme.formulation() != mote_cloud::scheme::Formulation::MlsDivergence {
            return refuse(
                "the MLS-divergence formulation (the conservative one needs evolving volumes)",
            );
        }
        if self.mood.is_some() {
            return refuse("no MOOD (not available on moving clouds yet)");
        }
        let tags = gpu.download(self.cloud.tags())?;
        if self.boundaries.is_some() || tags.iter().any(|&t| t != mote_cloud::cloud::INTERIOR) {
            return refuse(
                "a periodic cloud without boundary particles (boundary conditions on moving clouds are not available yet)",
            );
        }
        let n = self.cloud.len();
        let per_particle = mote_core::Scaling::PerParticle(D);
        let array = |name| gpu.output::<F>(name, D * n).with_scaling(per_particle);
        self.moving = Some(DeviceMoving {
            motion: Box::new(motion),
            positions: array("moving_positions"),
            stage: [array("moving_stage_a"), array("moving_stage_b")],
            velocity: (0..self.tableau.stages())
                .map(|_| array("particle_velocity"))
                .collect(),
            gradient: gpu
                .output::<F>("velocity_gradient", D * D * n)
                .with_scaling(mote_core::Scaling::PerParticle(D * D)),
            current: true,
        });
        Ok(self)
    }

    /// Refuses `what` on a rank's part of a split cloud: not on split device runs yet.
    fn refuse_split(&self, what: &'static str) -> Result<(), GpuError> {
        match self.list.halo() {
            Some(_) => Err(CloudError::invalid(
                what,
                "a device simulation split between ranks",
                "a device run on one process (split device runs are fixed clouds stepped \
                 explicitly, their boundary conditions prepared per rank, for now)",
            )
            .into()),
            None => Ok(()),
        }
    }

    /// The split between ranks this simulation is one rank's part of.
    pub fn halo(&self) -> Option<&mote_cloud::halo::Halo> {
        self.list.halo().map(|h| h.halo())
    }

    /// Whether the cloud moves.
    pub fn is_moving(&self) -> bool {
        self.moving.is_some()
    }

    /// The particle positions, downloaded (the cloud's axis arrays, wrapped into the box).
    pub fn positions(&self, gpu: &Gpu) -> Result<Vec<Vec<F>>, GpuError> {
        self.cloud
            .positions()
            .iter()
            .map(|p| gpu.download(p))
            .collect()
    }

    /// With `true`, every step waits for each of its parts and accumulates their seconds (the
    /// scheme's passes in [`DeviceMuscl::take_seconds`], the rest in
    /// [`DeviceSimulation::take_seconds`]): a benchmark's breakdown, at the price of a
    /// synchronisation per part.
    pub fn set_timing(&mut self, timing: bool) {
        self.timing = timing;
        self.scheme.set_timing(timing);
    }

    /// Seconds of the stage combinations and of MOOD since the last call (with
    /// [`DeviceSimulation::set_timing`]), and resets them.
    pub fn take_seconds(&mut self) -> StepSeconds {
        std::mem::take(&mut self.seconds)
    }

    /// Seconds of the upload, the search and the MLS fits in [`DeviceSimulation::new`].
    pub fn setup_seconds(&self) -> SetupSeconds {
        self.setup
    }

    /// The device cloud.
    pub fn cloud(&self) -> &DeviceCloud<F, D> {
        &self.cloud
    }

    /// The neighbour lists.
    pub fn list(&self) -> &DeviceNeighbours {
        &self.list
    }

    /// The scheme (e.g. for its timing).
    pub fn scheme_mut(&mut self) -> &mut DeviceMuscl<F> {
        &mut self.scheme
    }

    /// The scheme.
    pub fn scheme(&self) -> &DeviceMuscl<F> {
        &self.scheme
    }

    /// The state on the device (the variables end to end).
    pub fn state_on_device(&self) -> &DeviceArray<F> {
        &self.state
    }

    /// The state, downloaded (the variables end to end: variable `v` of particle `i` at
    /// `v * n + i`).
    pub fn state(&self, gpu: &Gpu) -> Result<Vec<F>, GpuError> {
        gpu.download(&self.state)
    }

    /// Simulated time.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Sets the clock and the step count, for a run resumed from a checkpoint (whose state was
    /// uploaded with the cloud). The device's boundary conditions do not depend on time, so
    /// those imposed when they were attached are the ones the last step left.
    pub fn restore_clock(&mut self, time: f64, steps: u64) {
        self.time = time;
        self.steps = steps;
    }

    /// MOOD's statistics so far (zero without MOOD), and resets them.
    pub fn take_mood_stats(&mut self) -> MoodStats {
        self.mood
            .as_mut()
            .map(DeviceMood::take_stats)
            .unwrap_or_default()
    }

    /// The current MOOD orders, downloaded (`None` without MOOD).
    pub fn mood_orders(&self, gpu: &Gpu) -> Result<Option<Vec<u32>>, GpuError> {
        self.mood
            .as_ref()
            .map(|m| gpu.download(m.orders()))
            .transpose()
    }

    /// `sum_i V_i u_i` of every variable over the interior particles, reduced on the device
    /// (see [`crate::diagnostics`]).
    pub fn totals(&self, gpu: &Gpu) -> Result<Vec<f64>, GpuError> {
        let m = self.scheme.equation().variables(D);
        (0..m)
            .map(|v| {
                crate::diagnostics::total(
                    gpu,
                    &self.state,
                    v,
                    self.cloud.volumes(),
                    self.cloud.tags(),
                )
            })
            .collect()
    }

    /// The errors of variable `var` against `exact` (evaluated on the host at the particle
    /// positions and uploaded) over the interior particles, reduced on the device.
    pub fn errors(
        &self,
        gpu: &Gpu,
        var: usize,
        exact: impl Fn([f64; D]) -> f64,
    ) -> Result<Errors, GpuError> {
        let m = self.scheme.equation().variables(D);
        if var >= m {
            return Err(CloudError::invalid("variable", var, format!("below {m}")).into());
        }
        let values: Vec<f64> = self.positions.iter().map(|&x| exact(x)).collect();
        crate::diagnostics::errors(
            gpu,
            &self.state,
            var,
            self.cloud.volumes(),
            self.cloud.tags(),
            &values,
        )
    }

    /// The largest stable step for `cfl` at the current state (reduced on the device); with
    /// boundary conditions attached, boundary particles do not limit it (as on the CPU).
    pub fn stable_dt(&self, gpu: &Gpu, cfl: f64) -> Result<f64, GpuError> {
        let dt = self.scheme.stable_dt(
            gpu,
            &self.cloud,
            &self.list,
            &self.state,
            cfl,
            self.boundaries.is_some(),
        )?;
        let Some(moving) = &self.moving else {
            return Ok(dt);
        };
        // On a moving cloud the particle speed adds its rate `2 max_i sum_j |w_i . b_ij|`
        // at the current velocities, as on the CPU (the first stage's velocity array is free
        // between steps).
        let w = &moving.velocity[0];
        self.host_velocities(gpu, moving.motion.as_ref(), self.time, &self.state, w)?;
        let rate = gpu.motion_rate::<F, D>(
            w,
            &self.list,
            self.scheme.mls().coefficients(),
            self.cloud.len(),
        )?;
        Ok(if rate == 0.0 {
            dt
        } else {
            cfl / (cfl / dt + rate)
        })
    }

    /// One step of length `dt`. An error names a particle whose state is not finite after it,
    /// or (with a relaxation source) the first particle whose implicit solve failed, leaving
    /// the state as it was.
    pub fn step(&mut self, gpu: &Gpu, dt: f64) -> Result<(), GpuError> {
        if self.imex.is_some() {
            return self.step_imex(gpu, dt);
        }
        if self.moving.is_some() {
            let mut moving = self.moving.take().expect("a moving cloud");
            let result = self.step_moving(gpu, dt, &mut moving);
            self.moving = Some(moving);
            result?;
            self.time += dt;
            self.steps += 1;
            return self.check_finite(gpu, "after");
        }
        let tableau = self.tableau.clone();
        let t = self.time;
        runge_kutta(&tableau, t, dt, &mut DeviceStages { gpu, sim: self })?;
        self.time += dt;
        self.steps += 1;
        self.check_finite(gpu, "after")
    }

    /// The velocities of `motion` at time `t` for the cloud's positions and the state `u`,
    /// computed on the host and copied into `out` (the axes end to end).
    fn host_velocities(
        &self,
        gpu: &Gpu,
        motion: &dyn Motion<F, D>,
        t: f64,
        u: &DeviceArray<F>,
        out: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        let n = self.cloud.len();
        if n == 0 {
            return Ok(());
        }
        let x = self.positions(gpu)?;
        let u = gpu.download(u)?;
        let state: Vec<&[F]> = u.chunks(n).collect();
        let mut w = vec![F::cast(0.0); D * n];
        {
            let mut parts = w.chunks_mut(n);
            let out: [&mut [F]; D] =
                std::array::from_fn(|_| parts.next().expect("D velocity components"));
            let x: [&[F]; D] = std::array::from_fn(|d| x[d].as_slice());
            motion.velocities(t, x, &state, out, CpuBackend::default());
        }
        let upload = gpu.upload("velocity_upload", &w);
        gpu.copy(&upload, out)
    }

    /// The search and the MLS fits at the cloud's current positions.
    fn rebuild(&mut self, gpu: &Gpu) -> Result<(), GpuError> {
        self.search.build(gpu, &self.cloud, &mut self.list)?;
        self.scheme.prepare(gpu, &self.cloud, &self.list)
    }

    /// [`step`](Self::step) on a moving cloud: the stages advance the state and the positions
    /// (unwrapped) together, as the CPU's stepper advances its `m + D` arrays; each stage wraps
    /// its positions into the cloud and rebuilds the search and fits there (except the first,
    /// whose geometry is the step's), takes the velocities, their gradients and the ALE flux
    /// pass. After the last stage the new positions are wrapped into the cloud and the
    /// geometry rebuilt for the next step. On an error the cloud keeps the step's first
    /// positions.
    fn step_moving(
        &mut self,
        gpu: &Gpu,
        dt: f64,
        moving: &mut DeviceMoving<F, D>,
    ) -> Result<(), GpuError> {
        let clock = std::time::Instant::now();
        gpu.gather_positions(&self.cloud, &moving.positions)?;
        self.seconds.motion += self.waited(gpu, clock)?;
        let result = self.moving_stages(gpu, dt, moving);
        if result.is_err() {
            // `positions` still holds the step's first positions.
            gpu.wrap_positions(&moving.positions, &self.cloud)?;
            return result;
        }
        let clock = std::time::Instant::now();
        gpu.wrap_positions(&moving.positions, &self.cloud)?;
        self.rebuild(gpu)?;
        moving.current = true;
        let x = self.positions(gpu)?;
        self.positions = (0..self.cloud.len())
            .map(|i| std::array::from_fn(|d| x[d][i].as_f64()))
            .collect();
        self.seconds.motion += self.waited(gpu, clock)?;
        Ok(())
    }

    /// With timing on, waits for the device and returns the seconds since `clock` (0 without:
    /// a step then never waits).
    fn waited(&self, gpu: &Gpu, clock: std::time::Instant) -> Result<f64, GpuError> {
        if !self.timing {
            return Ok(0.0);
        }
        gpu.sync()?;
        Ok(clock.elapsed().as_secs_f64())
    }

    /// The stages of [`step_moving`](Self::step_moving) and the final update of the state and
    /// the positions: the shared Runge-Kutta stage loop, the positions advanced beside the
    /// state as the CPU advances its `m + D` arrays.
    fn moving_stages(
        &mut self,
        gpu: &Gpu,
        dt: f64,
        moving: &mut DeviceMoving<F, D>,
    ) -> Result<(), GpuError> {
        let tableau = self.tableau.clone();
        let t = self.time;
        runge_kutta(
            &tableau,
            t,
            dt,
            &mut MovingStages {
                gpu,
                sim: self,
                moving,
            },
        )
    }

    /// [`step`](Self::step) with the IMEX stepper: the CPU's stage loop
    /// (`mote_cloud::time::imex_step`) over the device's arrays.
    fn step_imex(&mut self, gpu: &Gpu, dt: f64) -> Result<(), GpuError> {
        let imex = self.imex.take().expect("an IMEX stepper");
        gpu.fill_u32(&imex.failed, u32::MAX);
        let tableau = imex.tableau.clone();
        let mut stages = DeviceImexStages {
            gpu,
            sim: self,
            imex,
        };
        let result = imex_step(&tableau, stages.sim.time, dt, &mut stages);
        let DeviceImexStages { imex, .. } = stages;
        self.imex = Some(imex);
        result?;
        self.time += dt;
        self.steps += 1;
        self.check_finite(gpu, "after")
    }

    /// An error naming the first particle (and variable) whose state is not finite.
    /// On a rank's part of a split cloud, the first over the ranks in one process's order
    /// (variable, then one-process index; the halo's states are their owners'), the same
    /// message on every rank.
    fn check_finite(&self, gpu: &Gpu, when: &'static str) -> Result<(), GpuError> {
        let n = self.cloud.len();
        let first = if n == 0 {
            None
        } else {
            gpu.first_non_finite(&self.state)?
        };
        let found = first.map(|k| (k / n, k % n));
        let error = |variable: usize, id: u64, position: String| -> Result<(), GpuError> {
            Err(CloudError::NonFinite {
                variable,
                id,
                position,
                when,
                step: self.steps,
                time: self.time,
            }
            .into())
        };
        let Some(halo) = self.halo() else {
            return match found {
                Some((v, i)) => error(v, self.ids[i], format!("{:?}", self.positions[i])),
                None => Ok(()),
            };
        };
        // [found, variable, one-process index, id, position bits (D <= 3)].
        let mut mine = [0u64; 7];
        if let Some((v, i)) = found {
            mine[..4].copy_from_slice(&[1, v as u64, halo.global()[i] as u64, self.ids[i]]);
            for (a, x) in self.positions[i].iter().enumerate() {
                mine[4 + a] = x.to_bits();
            }
        }
        let comm = halo.comm();
        let mut all = vec![0u64; 7 * comm.size()];
        mote_core::comm::all_gather(comm, &mine, &vec![7; comm.size()], &mut all);
        match all
            .chunks_exact(7)
            .filter(|r| r[0] == 1)
            .min_by_key(|r| (r[1], r[2]))
        {
            Some(r) => {
                let position: [f64; D] = std::array::from_fn(|a| f64::from_bits(r[4 + a]));
                error(r[1] as usize, r[3], format!("{position:?}"))
            }
            None => Ok(()),
        }
    }
}

impl<F: GpuFloat, const D: usize> DeviceSimulation<F, D> {
    /// Sizes every device array of the simulation once against [`Gpu::memory_limit`]`(limit)`
    /// (see [`Gpu::reserve`]) and checks afterwards, by fingerprint, that the moved arrays still
    /// hold the positions, tags, volumes, orders and state of `cloud` (the cloud this simulation
    /// was made from, before any step). Returns the reservation, or `None` where no limit is
    /// known (a wgpu device without `limit`). A [`GpuError::Capacity`] names what does not fit;
    /// a [`GpuError::Fingerprint`] names an array whose data did not survive the move.
    pub fn reserve(
        &mut self,
        gpu: &Gpu,
        cloud: &Cloud<F, D>,
        limit: Option<u64>,
    ) -> Result<Option<mote_core::memory::Reservation>, GpuError> {
        let reservation = gpu.reserve(&mut [self], limit, Default::default())?;
        if reservation.is_some() {
            self.verify(gpu, cloud)?;
        }
        Ok(reservation)
    }

    /// Refuses unless the device's positions, tags, volumes, orders and state equal `cloud`'s
    /// (by fingerprint).
    pub fn verify(&self, gpu: &Gpu, cloud: &Cloud<F, D>) -> Result<(), GpuError> {
        self.cloud.verify(gpu, cloud)?;
        let (orders, state) = device_layout(cloud, self.scheme.equation().variables(D));
        gpu.verify(&self.max_orders, &orders)?;
        gpu.verify(&self.state, &state)
    }
}

/// `cloud`'s orders and its `m` state variables as the device holds them (orders widened to
/// `u32`, the variables end to end): what is uploaded, and what a fingerprint is checked against.
fn device_layout<F: GpuFloat, const D: usize>(cloud: &Cloud<F, D>, m: usize) -> (Vec<u32>, Vec<F>) {
    let orders = cloud.orders().iter().map(|&o| u32::from(o)).collect();
    let state = (0..m).flat_map(|v| cloud.state(v).to_vec()).collect();
    (orders, state)
}

impl<F: GpuFloat, const D: usize> mote_core::Budgeted for DeviceSimulation<F, D> {
    fn buffers(&self) -> Vec<&dyn mote_core::BudgetedBuffer> {
        let mut v = self.cloud.buffers();
        v.extend(self.list.buffers());
        v.extend(self.scheme.buffers());
        v.push(&self.max_orders);
        v.push(&self.state);
        v.extend(
            self.slopes
                .iter()
                .chain(&self.stage)
                .map(|a| a as &dyn mote_core::BudgetedBuffer),
        );
        if let Some(b) = &self.boundaries {
            v.extend(b.buffers());
        }
        if let Some(m) = &self.mood {
            v.extend(m.buffers());
        }
        if let Some(x) = &self.moving {
            v.extend(
                [&x.positions, &x.stage[0], &x.stage[1], &x.gradient]
                    .into_iter()
                    .chain(&x.velocity)
                    .map(|a| a as &dyn mote_core::BudgetedBuffer),
            );
        }
        if let Some(x) = &self.imex {
            v.extend(x.source.buffers());
            v.push(&x.failed);
            v.extend(
                x.transport
                    .iter()
                    .chain(&x.slopes)
                    .flatten()
                    .map(|a| a as &dyn mote_core::BudgetedBuffer),
            );
        }
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
        let mut v = self.cloud.buffers_mut();
        v.extend(self.list.buffers_mut());
        v.extend(self.scheme.buffers_mut());
        v.push(&mut self.max_orders);
        v.push(&mut self.state);
        v.extend(
            self.slopes
                .iter_mut()
                .chain(&mut self.stage)
                .map(|a| a as &mut dyn mote_core::BudgetedBuffer),
        );
        if let Some(b) = &mut self.boundaries {
            v.extend(b.buffers_mut());
        }
        if let Some(m) = &mut self.mood {
            v.extend(m.buffers_mut());
        }
        if let Some(x) = &mut self.moving {
            let [a, b] = &mut x.stage;
            v.extend(
                [&mut x.positions, a, b, &mut x.gradient]
                    .into_iter()
                    .chain(&mut x.velocity)
                    .map(|a| a as &mut dyn mote_core::BudgetedBuffer),
            );
        }
        if let Some(x) = &mut self.imex {
            v.extend(x.source.buffers_mut());
            v.push(&mut x.failed);
            v.extend(
                x.transport
                    .iter_mut()
                    .chain(&mut x.slopes)
                    .flatten()
                    .map(|a| a as &mut dyn mote_core::BudgetedBuffer),
            );
        }
        v
    }
}

/// A device simulation's arrays and passes as the shared Runge-Kutta stage loop's
/// [`RkStages`]: the CPU's operations on the device, in the CPU's order (the candidate is the
/// state copied, then each non-zero `a_sl dt k_l` added in order).
struct DeviceStages<'a, F: GpuFloat, const D: usize> {
    gpu: &'a Gpu,
    sim: &'a mut DeviceSimulation<F, D>,
}

impl<F: GpuFloat, const D: usize> DeviceStages<'_, F, D> {
    /// The array of stage state `s`.
    fn array(&self, s: StageState) -> &DeviceArray<F> {
        match s {
            StageState::State => &self.sim.state,
            StageState::Buffer(k) => &self.sim.stage[k],
        }
    }
}

impl<F: GpuFloat, const D: usize> RkStages for DeviceStages<'_, F, D> {
    type Error = GpuError;

    fn rhs(&mut self, stage: usize, _t: f64, input: StageState) -> Result<(), GpuError> {
        let gpu = self.gpu;
        let sim = &mut *self.sim;
        let state = match input {
            StageState::State => &sim.state,
            StageState::Buffer(k) => &sim.stage[k],
        };
        sim.scheme
            .derivatives_pass(gpu, &sim.cloud, &sim.list, state)?;
        let orders = match sim.mood.as_mut() {
            Some(mood) => {
                if stage == 0 {
                    mood.reset(gpu, &sim.max_orders, sim.scheme.order())?;
                }
                mood.begin_stage(gpu);
                mood.orders()
            }
            None => &sim.max_orders,
        };
        sim.scheme.flux_pass(
            gpu,
            &sim.cloud,
            &sim.list,
            orders,
            None,
            state,
            &sim.slopes[stage],
        )?;
        if let Some(b) = &sim.boundaries {
            b.zero_slopes(gpu, &sim.slopes[stage], sim.cloud.len())?;
        }
        Ok(())
    }

    fn combine(&mut self, target: usize, terms: &[(usize, f64)]) -> Result<(), GpuError> {
        let (gpu, sim) = (self.gpu, &mut *self.sim);
        let clock = std::time::Instant::now();
        let candidate = &sim.stage[target];
        gpu.copy(&sim.state, candidate)?;
        for &(l, c) in terms {
            gpu.accumulate(candidate, &sim.slopes[l], F::cast(c))?;
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }

    fn constrain(&mut self, t: f64, target: Option<usize>) -> Result<(), GpuError> {
        let Some(b) = &self.sim.boundaries else {
            return Ok(());
        };
        let clock = std::time::Instant::now();
        let array = self.array(target.map_or(StageState::State, StageState::Buffer));
        let n = self.sim.cloud.len();
        b.apply(self.gpu, array, n, t)?;
        // A split cloud's ranks impose their own boundary particles' states; the halo's come
        // from their owners (every rank has the conditions, so every rank exchanges).
        if let Some(h) = self.sim.list.halo() {
            let m = self.sim.scheme.equation().variables(D);
            h.exchange_columns(self.gpu, array, n, m)?;
        }
        self.sim.seconds.stages += self.sim.waited(self.gpu, clock)?;
        Ok(())
    }

    fn revises(&self) -> bool {
        self.sim.mood.is_some()
    }

    fn revise(
        &mut self,
        stage: usize,
        _t: f64,
        input: StageState,
        target: usize,
    ) -> Result<bool, GpuError> {
        let gpu = self.gpu;
        let sim = &mut *self.sim;
        let Some(mood) = sim.mood.as_mut() else {
            return Ok(false);
        };
        let clock = std::time::Instant::now();
        let state = match input {
            StageState::State => &sim.state,
            StageState::Buffer(k) => &sim.stage[k],
        };
        let changed = mood.detect_and_reduce(
            gpu,
            &sim.scheme,
            &sim.cloud,
            &sim.list,
            state,
            &sim.stage[target],
        )?;
        if sim.timing {
            // (Detection ends with a download: nothing left to wait for.)
            sim.seconds.mood += clock.elapsed().as_secs_f64();
        }
        if changed {
            sim.scheme.flux_pass(
                gpu,
                &sim.cloud,
                &sim.list,
                mood.orders(),
                Some(mood.active()),
                state,
                &sim.slopes[stage],
            )?;
            if let Some(b) = &sim.boundaries {
                b.zero_slopes(gpu, &sim.slopes[stage], sim.cloud.len())?;
            }
        }
        Ok(changed)
    }

    fn accept(&mut self, k: usize) -> Result<(), GpuError> {
        let sim = &mut *self.sim;
        std::mem::swap(&mut sim.state, &mut sim.stage[k]);
        Ok(())
    }

    fn update(&mut self, weights: &[f64]) -> Result<(), GpuError> {
        let (gpu, sim) = (self.gpu, &mut *self.sim);
        let clock = std::time::Instant::now();
        for (l, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                gpu.accumulate(&sim.state, &sim.slopes[l], F::cast(w))?;
            }
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }
}

/// A moving cloud's stages as [`RkStages`]: each slope needs the geometry of its stage's
/// positions (wrapped into the cloud, searched and fitted unless current), the velocities
/// there and the ALE flux pass; each candidate advances the positions by the stage
/// velocities beside the state. No constraints and no revision (refused on moving clouds).
struct MovingStages<'a, F: GpuFloat, const D: usize> {
    gpu: &'a Gpu,
    sim: &'a mut DeviceSimulation<F, D>,
    moving: &'a mut DeviceMoving<F, D>,
}

impl<F: GpuFloat, const D: usize> RkStages for MovingStages<'_, F, D> {
    type Error = GpuError;

    fn rhs(&mut self, stage: usize, t: f64, input: StageState) -> Result<(), GpuError> {
        let (gpu, sim, moving) = (self.gpu, &mut *self.sim, &mut *self.moving);
        let clock = std::time::Instant::now();
        let (state, x) = match input {
            StageState::State => (&sim.state, &moving.positions),
            StageState::Buffer(k) => (&sim.stage[k], &moving.stage[k]),
        };
        if !moving.current {
            gpu.wrap_positions(x, &sim.cloud)?;
            sim.search.build(gpu, &sim.cloud, &mut sim.list)?;
            sim.scheme.prepare(gpu, &sim.cloud, &sim.list)?;
        }
        // The next stage has other positions.
        moving.current = false;
        let w = &moving.velocity[stage];
        sim.host_velocities(gpu, moving.motion.as_ref(), t, state, w)?;
        sim.scheme
            .velocity_gradients(gpu, &sim.cloud, &sim.list, w, &moving.gradient)?;
        sim.seconds.motion += sim.waited(gpu, clock)?;
        sim.scheme
            .derivatives_pass(gpu, &sim.cloud, &sim.list, state)?;
        sim.scheme.moving_flux_pass(
            gpu,
            &sim.cloud,
            &sim.list,
            &sim.max_orders,
            state,
            &sim.slopes[stage],
            w,
            &moving.gradient,
        )
    }

    fn combine(&mut self, target: usize, terms: &[(usize, f64)]) -> Result<(), GpuError> {
        let (gpu, sim, moving) = (self.gpu, &mut *self.sim, &*self.moving);
        let clock = std::time::Instant::now();
        let (candidate, x) = (&sim.stage[target], &moving.stage[target]);
        gpu.copy(&sim.state, candidate)?;
        gpu.copy(&moving.positions, x)?;
        for &(l, c) in terms {
            let c = F::cast(c);
            gpu.accumulate(candidate, &sim.slopes[l], c)?;
            gpu.accumulate(x, &moving.velocity[l], c)?;
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }

    fn accept(&mut self, _k: usize) -> Result<(), GpuError> {
        // Only a revising step accepts a candidate, and this one does not revise.
        Err(GpuError::Unsupported("MOOD on a moving cloud".into()))
    }

    fn update(&mut self, weights: &[f64]) -> Result<(), GpuError> {
        let (gpu, sim, moving) = (self.gpu, &mut *self.sim, &*self.moving);
        let clock = std::time::Instant::now();
        for (l, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                let c = F::cast(w);
                gpu.accumulate(&sim.state, &sim.slopes[l], c)?;
                gpu.accumulate(&moving.positions, &moving.velocity[l], c)?;
            }
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }
}

/// A device simulation's arrays and passes, with its IMEX stepper (taken out for the step), as
/// the shared IMEX stage loop's [`ImexStages`]; the combinations in the CPU's order.
struct DeviceImexStages<'a, F: GpuFloat, const D: usize> {
    gpu: &'a Gpu,
    sim: &'a mut DeviceSimulation<F, D>,
    imex: DeviceImex<F>,
}

impl<F: GpuFloat, const D: usize> DeviceImexStages<'_, F, D> {
    /// The slope array of `slope` (one the tableau reads, so kept).
    fn slope(imex: &DeviceImex<F>, slope: ImexSlope) -> &DeviceArray<F> {
        let k = match slope {
            ImexSlope::Transport(j) => &imex.transport[j],
            ImexSlope::Source(j) => &imex.slopes[j],
        };
        k.as_ref().expect("a slope the tableau reads is kept")
    }
}

impl<F: GpuFloat, const D: usize> ImexStages for DeviceImexStages<'_, F, D> {
    type Error = GpuError;

    fn combine(&mut self, terms: &[(ImexSlope, f64)]) -> Result<(), GpuError> {
        let (gpu, sim) = (self.gpu, &mut *self.sim);
        let clock = std::time::Instant::now();
        let stage = &sim.stage[0];
        gpu.copy(&sim.state, stage)?;
        for &(slope, c) in terms {
            gpu.accumulate(stage, Self::slope(&self.imex, slope), F::cast(c))?;
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }

    fn solve(&mut self, i: usize, _t: f64, h: f64, keep: bool) -> Result<(), GpuError> {
        // (The relaxation does not depend on time.)
        let (gpu, sim, imex) = (self.gpu, &mut *self.sim, &self.imex);
        let clock = std::time::Instant::now();
        let (stage, n) = (&sim.stage[0], sim.cloud.len());
        let h = F::cast(h);
        let slope = ImexSlope::Source(i);
        if keep {
            gpu.copy(stage, Self::slope(imex, slope))?;
        }
        imex.source.solve(gpu, stage, n, h, &imex.failed)?;
        if keep {
            gpu.solved_slope(stage, Self::slope(imex, slope), F::one() / h)?;
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }

    fn constrain(&mut self, t: f64, on_state: bool) -> Result<(), GpuError> {
        let sim = &mut *self.sim;
        let Some(b) = &sim.boundaries else {
            return Ok(());
        };
        let clock = std::time::Instant::now();
        let array = if on_state { &sim.state } else { &sim.stage[0] };
        b.apply(self.gpu, array, sim.cloud.len(), t)?;
        sim.seconds.stages += sim.waited(self.gpu, clock)?;
        Ok(())
    }

    fn source(&mut self, i: usize, _t: f64) -> Result<(), GpuError> {
        let (gpu, sim, imex) = (self.gpu, &mut *self.sim, &self.imex);
        let clock = std::time::Instant::now();
        let out = Self::slope(imex, ImexSlope::Source(i));
        imex.source
            .evaluate(gpu, &sim.stage[0], out, sim.cloud.len(), &imex.failed)?;
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }

    fn transport(&mut self, i: usize, _t: f64) -> Result<(), GpuError> {
        let (gpu, sim) = (self.gpu, &mut *self.sim);
        let k = Self::slope(&self.imex, ImexSlope::Transport(i));
        let stage = &sim.stage[0];
        sim.scheme
            .derivatives_pass(gpu, &sim.cloud, &sim.list, stage)?;
        sim.scheme
            .flux_pass(gpu, &sim.cloud, &sim.list, &sim.max_orders, None, stage, k)?;
        if let Some(b) = &sim.boundaries {
            b.zero_slopes(gpu, k, sim.cloud.len())?;
        }
        Ok(())
    }

    fn solved(&mut self) -> Result<(), GpuError> {
        // The solves record the first failing particle; the step ends here, before the state
        // changes, as on the CPU.
        let failed = self.gpu.download(&self.imex.failed)?[0];
        if failed != u32::MAX {
            return Err(CloudError::invalid(
                "implicit source solve",
                format!("particle index {failed}, source kinetic_relaxation"),
                "a converged, admissible solution",
            )
            .into());
        }
        Ok(())
    }

    fn update(&mut self, terms: &[(ImexSlope, f64)]) -> Result<(), GpuError> {
        let (gpu, sim) = (self.gpu, &mut *self.sim);
        let clock = std::time::Instant::now();
        for &(slope, c) in terms {
            gpu.accumulate(&sim.state, Self::slope(&self.imex, slope), F::cast(c))?;
        }
        sim.seconds.stages += sim.waited(gpu, clock)?;
        Ok(())
    }
}
