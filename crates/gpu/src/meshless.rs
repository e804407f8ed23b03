//! One meshless simulation for both backends: [`Simulation`] steps a cloud on the CPU (the
//! `mote-cloud` passes on threads) or on a device (this crate's kernels), chosen by a
//! [`Backend`] value. Everything else (the cloud, the equation, the boundary conditions, the
//! [`Scheme`]) is the same value on both, and so is what a caller does with the simulation:
//! step it, ask for its stable step, read the state back, price and reserve its memory.
//!
//! ```
//! use mote_cloud::equations::LinearAdvection;
//! use mote_cloud::boundary::Boundaries;
//! use mote_cloud::{Cloud, Domain, LatticeOptions};
//! use mote_core::{Backend, CpuBackend};
//! use mote_gpu::meshless::{Scheme, Simulation};
//!
//! // A sine wave on a periodic 1-D lattice of 64 particles, advected at unit speed.
//! let opts = LatticeOptions { spacing: 1.0 / 64.0, jitter: 0.0, seed: 1, boundary_layers: 0 };
//! let mut cloud = Cloud::<f64, 1>::lattice(Domain::unit_periodic(), opts, 1)?;
//! for i in 0..cloud.len() {
//!     let x = cloud.position_of(i)[0];
//!     cloud.state_var_mut(0)[i] = (std::f64::consts::TAU * x).sin();
//! }
//! // Each particle's reconstruction order (up to the scheme's): second order everywhere.
//! cloud.orders_mut().fill(2);
//! let scheme = Scheme::new(2);
//! // The backend is a value: `Backend::Device("wgpu:0".parse()?)` runs the same simulation
//! // on the first wgpu adapter.
//! let backend = Backend::Cpu(CpuBackend::Serial);
//! let equation = LinearAdvection::scalar([1.0], 1);
//! let radius = 2.6 / 64.0;
//! let mut sim =
//!     Simulation::new(cloud, equation, Boundaries::new(), radius, &scheme, backend)?;
//! while sim.time() < 0.25 - 1e-12 {
//!     let dt = sim.stable_dt(0.4)?.min(0.25 - sim.time());
//!     sim.step(dt)?;
//! }
//! sim.sync()?;
//! let cloud = sim.cloud();
//! // A quarter period later the sine has become minus a cosine.
//! let worst = (0..cloud.len())
//!     .map(|i| {
//!         let x = cloud.position_of(i)[0];
//!         (cloud.state(0)[i] + (std::f64::consts::TAU * x).cos()).abs()
//!     })
//!     .fold(0.0, f64::max);
//! assert!(worst < 5e-3, "{worst}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use mote_cloud::adapt::{AdaptStats, Adaptivity};
use mote_cloud::boundary::Boundaries;
use mote_cloud::cloud::INTERIOR;
use mote_cloud::equations::{Burgers, Equation, Euler, KineticTransport, LinearAdvection};
use mote_cloud::flux::FluxKind;
use mote_cloud::mood::{MoodSettings, MoodStats};
use mote_cloud::motion::Motion;
use mote_cloud::scheme::{Formulation, Limiter, Muscl};
use mote_cloud::source::KineticRelaxation;
use mote_cloud::time::Tableau;
use mote_cloud::time::imex::ImexTableau;
use mote_cloud::{Cloud, CloudError, MeshlessSimulation, RowMajor, Weight};
use mote_core::comm::Share;
use mote_core::memory::{self, MemoryModel, Reservation, ReserveOptions, reserve};
use mote_core::{Backend, Budgeted, CpuBackend};

use crate::{DeviceEquation, DeviceLayout, DeviceMuscl, DeviceSimulation, Gpu, GpuError, GpuFloat};

/// The scheme of a meshless simulation, the same on every backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    /// The MUSCL order: 1 (first order) to 5.
    pub order: usize,
    /// How the fluxes are summed into each particle's rate.
    pub formulation: Formulation,
    /// The numerical flux.
    pub flux: FluxKind,
    /// The slope limiter.
    pub limiter: Limiter,
    /// The central fit's weight of the WENO-type combination of reconstructions; `None`: one
    /// reconstruction per particle.
    pub weno: Option<f64>,
    /// The Runge-Kutta tableau.
    pub tableau: Tableau,
    /// The a-posteriori order reduction (MOOD); its default does none.
    pub mood: MoodSettings,
}

impl Scheme {
    /// Order `order` with the defaults: the MLS-divergence formulation, the Rusanov flux, no
    /// limiter, no WENO combination, SSP-RK3, no MOOD.
    pub fn new(order: usize) -> Self {
        Self {
            order,
            formulation: Formulation::default(),
            flux: FluxKind::default(),
            limiter: Limiter::none(),
            weno: None,
            tableau: Tableau::ssp_rk3(),
            mood: MoodSettings::default(),
        }
    }
}

/// Equations with a device version, which [`Simulation::new`] takes to the device on a
/// [`Backend::Device`]. A user's equation implements it by returning
/// `DeviceEquation::new(...)` of its [`GpuEquation`](crate::GpuEquation).
pub trait OnDevice<const D: usize> {
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

/// A meshless simulation on the backend it was made for. Diagnostics read the state on the
/// host ([`sync`](Self::sync), then [`cloud`](Self::cloud)), so both backends report the same
/// quantities by the same sums.
pub struct Simulation<R: GpuFloat, const D: usize> {
    inner: Box<dyn Stepper<R, D>>,
}

impl<R: GpuFloat, const D: usize> Simulation<R, D> {
    /// The simulation of `cloud` under `equation` and `boundaries` (neighbours within
    /// `radius`) with `scheme`, on `backend`: the CPU with its threads, or the device the
    /// [`DeviceSpec`](mote_core::DeviceSpec) names (opened here; an error where it does not
    /// exist: nothing falls back to the CPU). Each particle keeps the reconstruction order
    /// its cloud gives it.
    pub fn new<E>(
        cloud: Cloud<R, D>,
        equation: E,
        boundaries: Boundaries<R, D>,
        radius: f64,
        scheme: &Scheme,
        backend: Backend,
    ) -> Result<Self, GpuError>
    where
        E: Equation<R, D> + OnDevice<D> + 'static,
    {
        let inner: Box<dyn Stepper<R, D>> = match backend {
            Backend::Cpu(cpu) => Box::new(OnCpu::new(
                cloud, equation, boundaries, radius, scheme, cpu,
            )?),
            Backend::Device(spec) => Box::new(OnGpu::new(
                Gpu::open(spec)?,
                cloud,
                equation,
                boundaries,
                radius,
                scheme,
            )?),
        };
        Ok(Self { inner })
    }

    /// This rank's part of a simulation split between the ranks of `comm`
    /// ([`MeshlessSimulation::split_part`]: each rank computes its own particles and refreshes a
    /// halo of neighbours from the other ranks; the states are one process's, bit for bit),
    /// from its own particles alone: `own` holds the one-process particles
    /// `first..first + own.len()` of `total`, the rank's range of `mote_cloud::halo::own_ranges`
    /// (`mote_cloud::halo::own_rows` cuts it from a whole cloud). [`cloud`](Self::cloud) is
    /// then this rank's own and halo particles ([`share`](Self::share) says which it owns;
    /// [`own_part`](Self::own_part) copies them out for output). The steps are collective, as
    /// are the stable step, [`neighbours_mean`](Self::neighbours_mean),
    /// [`floor_events`](Self::floor_events) and [`boundary_flux`](Self::boundary_flux). No rank
    /// ever holds the whole cloud.
    ///
    /// On the CPU a split simulation may move ([`with_motion`](Self::with_motion): its
    /// particles migrate between ranks), without adaptivity. On a device (each rank its own:
    /// the [`DeviceSpec`](mote_core::DeviceSpec) is this rank's, see
    /// [`rank_device`](crate::rank_device)) the states are a one-device run's, bit for bit
    /// ([`DeviceSimulation::split`], MOOD and boundary conditions included): a fixed cloud
    /// (motion is refused with a message).
    #[allow(clippy::too_many_arguments)]
    pub fn split_part<E>(
        own: Cloud<R, D>,
        first: usize,
        total: usize,
        equation: E,
        boundaries: Boundaries<R, D>,
        radius: f64,
        scheme: &Scheme,
        backend: Backend,
        comm: std::sync::Arc<dyn mote_core::comm::Comm>,
    ) -> Result<Self, GpuError>
    where
        E: Equation<R, D> + OnDevice<D> + 'static,
    {
        let cpu = match backend {
            Backend::Cpu(cpu) => cpu,
            Backend::Device(spec) => {
                // The ranks agree on boundary particles (one may hold some, another none).
                let boundary = u64::from(own.tags().iter().any(|&t| t != INTERIOR));
                let boundary = mote_core::comm::max_of(comm.as_ref(), boundary) == 1;
                // Every rank opens its device before the split's collectives: one that cannot
                // stops every rank (with its message), none waits for it.
                let gpu = crate::halo::agreed(Some(comm.as_ref()), Gpu::open(spec))?;
                return Ok(Self {
                    inner: Box::new(OnGpu::split(
                        gpu, own, first, total, equation, boundaries, boundary, radius, scheme,
                        comm,
                    )?),
                });
            }
        };
        let sim = MeshlessSimulation::split_part(
            own,
            first,
            total,
            radius,
            muscl(equation, scheme)?,
            scheme.tableau.clone(),
            cpu,
            boundaries,
            comm,
        )?;
        Ok(Self {
            inner: Box::new(OnCpu {
                sim: sim.with_mood(scheme.mood)?,
            }),
        })
    }

    /// The conservation law `equation` solved through its kinetic (Jin-Xin) relaxation system
    /// ([`KineticRelaxation`], kinetic speed `speed`, relaxation time `epsilon`): the cloud's
    /// state `u` becomes the Maxwellian `2 D M` kinetic variables, which `scheme` transports
    /// explicitly while the IMEX pair `tableau` relaxes them implicitly. The simulation shows
    /// the conservation law: [`cloud`](Self::cloud) holds the macroscopic state `u = sum_k f_k`
    /// (as of the last [`sync`](Self::sync)), primitive variables and wave speeds are
    /// `equation`'s, and [`stable_dt`](Self::stable_dt) is the kinetic transport's.
    ///
    /// On the CPU backend, on a periodic cloud (boundary conditions of the kinetic variables
    /// are not built), without MOOD; `speed` must satisfy the subcharacteristic condition
    /// (`D` times the largest wave speed along an axis) at every particle of the initial state.
    /// With `ranks`, this rank's part of the kinetic cloud split between them (as
    /// [`split_part`](Self::split_part); every rank passes the same cloud, cut to its rows): each solves the relaxation
    /// of its own particles, and [`cloud`](Self::cloud) holds the macroscopic state of its own
    /// and halo particles. With `part` too (`Some((first, total))`), `cloud` is this rank's own
    /// particles only, the one-process particles `first..first + len` of `total` (as
    /// [`split_part`](Self::split_part)): the fastest particle is agreed over the ranks, and
    /// no rank holds the whole cloud.
    #[allow(clippy::too_many_arguments)]
    pub fn relaxed<E>(
        cloud: Cloud<R, D>,
        equation: E,
        speed: Option<f64>,
        epsilon: f64,
        tableau: ImexTableau,
        radius: f64,
        scheme: &Scheme,
        backend: Backend,
        ranks: Option<std::sync::Arc<dyn mote_core::comm::Comm>>,
        part: Option<(usize, usize)>,
    ) -> Result<Self, GpuError>
    where
        E: Equation<R, D> + Clone + 'static,
    {
        let refuse = |what: &str, needs: &str| -> Result<Self, GpuError> {
            Err(CloudError::invalid("kinetic relaxation", what, needs).into())
        };
        let Backend::Cpu(cpu) = backend else {
            return refuse("on a device", "the cpu backend");
        };
        // A whole cloud on several ranks is cut to this rank's rows: every rank then takes the
        // part's path. A part's ranks agree (their parts differ).
        let mut cloud = cloud;
        let part = match (&ranks, part) {
            (Some(comm), None) => Some(mote_cloud::halo::own_rows(&mut cloud, comm.as_ref())),
            (_, part) => part,
        };
        let parted = ranks.as_ref().filter(|_| part.is_some());
        let boundary = u64::from(cloud.tags().iter().any(|&t| t != INTERIOR));
        let boundary = parted.map_or(boundary, |c| mote_core::comm::max_of(c.as_ref(), boundary));
        if boundary == 1 {
            return refuse(
                "with boundary particles",
                "a periodic cloud (boundary conditions of the kinetic variables are not built)",
            );
        }
        let m = cloud.variables();
        let mut u = vec![R::zero(); m];
        let state = |u: &mut [R], i: usize| {
            for (v, x) in u.iter_mut().enumerate() {
                *x = cloud.state(v)[i];
            }
        };
        // The fastest particle of the initial state, against the subcharacteristic condition:
        // the first fastest, or the last NaN (one rule for the particles and for the ranks).
        let faster = |s: f64, best: f64| s > best || s.is_nan();
        let mut fastest = (0.0f64, 0usize);
        for i in 0..cloud.len() {
            state(&mut u, i);
            for d in 0..D {
                let axis = std::array::from_fn(|k| if k == d { R::one() } else { R::zero() });
                let s = equation.max_wave_speed(&u, axis).as_f64();
                if faster(s, fastest.0) {
                    fastest = (s, i);
                }
            }
        }
        let mut fastest = (fastest.0, cloud.ids().get(fastest.1).copied().unwrap_or(0));
        if let Some(comm) = parted {
            // Each rank's fastest (none on a rank without particles), folded in rank order as
            // one process folds its particles.
            let mine = [u64::from(!cloud.is_empty()), fastest.0.to_bits(), fastest.1];
            let mut all = vec![0u64; 3 * comm.size()];
            mote_core::comm::all_gather(comm.as_ref(), &mine, &vec![3; comm.size()], &mut all);
            let mut found: Option<(f64, u64)> = None;
            for r in all.chunks_exact(3).filter(|r| r[0] == 1) {
                let s = f64::from_bits(r[1]);
                if found.is_none_or(|(best, _)| faster(s, best)) {
                    found = Some((s, r[2]));
                }
            }
            fastest = found.unwrap_or((0.0, 0));
        }
        let needed = D as f64 * fastest.0;
        let speed = speed.unwrap_or(if needed > 0.0 { 1.1 * needed } else { 1.0 });
        if speed < needed || needed.is_nan() {
            return Err(CloudError::invalid(
                "kinetic speed",
                speed,
                format!(
                    "at least {needed:.6} ({D} times the largest wave speed along an axis of the \
                     initial state, {:.6}, at particle id {}): below it the relaxation is unstable",
                    fastest.0, fastest.1
                ),
            )
            .into());
        }
        let relax = KineticRelaxation::new::<R>(equation, speed, epsilon)?;
        let mut kinetic = cloud.with_variables(relax.kinetic_variables())?;
        let mut f = vec![R::zero(); relax.kinetic_variables()];
        for i in 0..cloud.len() {
            state(&mut u, i);
            relax.maxwellian(&u, &mut f);
            for (k, &x) in f.iter().enumerate() {
                kinetic.state_var_mut(k)[i] = x;
            }
        }
        let transport = muscl(relax.transport(), scheme)?;
        let rk = scheme.tableau.clone();
        let (sim, cloud) = match (ranks, part) {
            (Some(comm), Some((first, total))) => {
                let sim = MeshlessSimulation::split_part(
                    kinetic,
                    first,
                    total,
                    radius,
                    transport,
                    rk,
                    cpu,
                    Boundaries::new(),
                    comm,
                )?;
                // The macroscopic state of the own particles is the initial state itself (as
                // one process shows it); the halo's comes from their owners.
                let halo = sim.halo().expect("a split simulation");
                let mut local = sim.cloud.with_variables(m)?;
                let own = halo.own();
                let (mut columns, _) = local.state_and_geometry();
                for (v, column) in columns.iter_mut().enumerate() {
                    column[own.clone()].copy_from_slice(cloud.state(v));
                }
                halo.exchange_columns(&mut columns);
                drop(columns);
                (sim, local)
            }
            _ => (
                MeshlessSimulation::new(kinetic, radius, transport, rk, cpu)?,
                cloud,
            ),
        };
        let sim = sim
            .with_mood(scheme.mood)?
            .with_source(tableau, relax.clone())?;
        Ok(Self {
            inner: Box::new(Relaxed {
                kinetic: OnCpu { sim },
                relax,
                cloud,
                current: true,
            }),
        })
    }

    /// Moves the particles with `motion` (see `MeshlessSimulation::with_motion`; the cloud is
    /// reordered along the Morton curve after `reorder_distance` nominal spacings of travel).
    /// On the CPU backend.
    pub fn with_motion(
        self,
        motion: Box<dyn Motion<R, D>>,
        reorder_distance: f64,
    ) -> Result<Self, GpuError> {
        Ok(Self {
            inner: self.inner.with_motion(motion, reorder_distance)?,
        })
    }

    /// Adapts a moving cloud every `every` steps (see `MeshlessSimulation::with_adaptivity`).
    pub fn with_adaptivity(self, adapt: Adaptivity, every: u64) -> Result<Self, GpuError> {
        Ok(Self {
            inner: self.inner.with_adaptivity(adapt, every)?,
        })
    }

    /// What adaptivity did so far (zeros without it).
    pub fn adapt_stats(&self) -> AdaptStats {
        self.inner.adapt_stats()
    }

    /// The kinetic speed of a relaxation run ([`relaxed`](Self::relaxed)); `None` otherwise.
    pub fn kinetic_speed(&self) -> Option<f64> {
        self.inner.kinetic_speed()
    }

    /// The rate at which every conserved variable leaves through the boundary faces at the
    /// current state, into `rate` (one per variable): per face, its area times the mean over
    /// its boundary particles of `(F(u_b) + F(u_i)) . n / 2`, with `u_i` the state of the
    /// particle's nearest interior neighbour (the central flux at the face: a slip wall's mass
    /// flux is then 0, an outflow face's the interior's flux). Integrated over time, it is
    /// what the totals lose to the outside. `false` (and `rate` untouched) without boundary
    /// particles, and on the device, whose state is on the host only at a
    /// [`sync`](Self::sync).
    pub fn boundary_flux(&self, rate: &mut [f64]) -> bool {
        self.inner.boundary_flux(rate)
    }

    /// `cpu`, or `gpu` with the device's name.
    pub fn backend(&self) -> String {
        self.inner.backend()
    }
    /// The equation's short name.
    pub fn equation_name(&self) -> &'static str {
        self.inner.equation_name()
    }
    /// Mean neighbours per particle (over the whole cloud; collective on a split one).
    pub fn neighbours_mean(&self) -> f64 {
        self.inner.neighbours_mean()
    }
    /// Halo particles this rank holds besides its own, on a cloud split between ranks
    /// ([`split_part`](Self::split_part)); `None` otherwise.
    pub fn halo_particles(&self) -> Option<usize> {
        self.inner.halo_particles()
    }
    /// A moving cloud split between ranks: halos found so far (the first included) and steps
    /// redone on a wider halo (`MeshlessSimulation::halo_rebuilds`); `None` otherwise.
    pub fn halo_rebuilds(&self) -> Option<(u64, u64)> {
        self.inner.halo_rebuilds()
    }
    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.inner.steps()
    }
    /// The simulation's clock (the sum of its step sizes).
    pub fn time(&self) -> f64 {
        self.inner.time()
    }
    /// Sets the clock and the step count (a resumed run).
    pub fn restore_clock(&mut self, time: f64, steps: u64) {
        self.inner.restore_clock(time, steps);
    }
    /// The largest stable step for `cfl` at the current state.
    pub fn stable_dt(&mut self, cfl: f64) -> Result<f64, GpuError> {
        self.inner.stable_dt(cfl)
    }
    /// One step of length `dt`; an error names a particle whose state is not finite.
    pub fn step(&mut self, dt: f64) -> Result<(), GpuError> {
        self.inner.step(dt)
    }
    /// Brings the host's cloud up to date with the current state (a download from a device,
    /// the macroscopic sum of a relaxation run; nothing else on the CPU). Not collective.
    pub fn sync(&mut self) -> Result<(), GpuError> {
        self.inner.sync()
    }
    /// The cloud on the host, with the state as of the last [`sync`](Self::sync): every
    /// particle on one process, this rank's own and halo particles on a split simulation.
    pub fn cloud(&self) -> &Cloud<R, D> {
        self.inner.cloud()
    }
    /// Which particles of [`cloud`](Self::cloud) this rank owns, and the ranks that own the
    /// others (one process: all of them): what sums over the cloud reduce over
    /// (`mote_cloud::exact::totals_of`).
    pub fn share(&self) -> Share<'_> {
        self.inner.share()
    }
    /// A split simulation's own particles, every array, state as of now and each particle's
    /// current reconstruction order in its orders: this rank's rows of the run's files, in the
    /// one-process order (`mote_cloud::halo::own_part`). `None` on one process, whose
    /// [`cloud`](Self::cloud) after a [`sync`](Self::sync) is the whole cloud (with
    /// [`orders`](Self::orders)).
    pub fn own_part(&mut self) -> Result<Option<Cloud<R, D>>, GpuError> {
        self.inner.own_part()
    }
    /// Every local particle's current reconstruction order (MOOD's where it reduces them).
    pub fn orders(&mut self) -> Result<Vec<u8>, GpuError> {
        self.inner.orders()
    }
    /// MOOD's statistics since the last call.
    pub fn take_mood_stats(&mut self) -> MoodStats {
        self.inner.take_mood_stats()
    }
    /// Positivity floor events so far, where the backend counts them (the device does not).
    pub fn floor_events(&self) -> Option<u64> {
        self.inner.floor_events()
    }
    /// Conservative to primitive variables of one state, by the host equation.
    pub fn to_primitive(&self, u: &[R], w: &mut [R]) {
        self.inner.to_primitive(u, w);
    }
    /// Primitive to conservative variables of one state, by the host equation.
    pub fn to_conservative(&self, w: &[R], u: &mut [R]) {
        self.inner.to_conservative(w, u);
    }
    /// The host cloud, writable: a change of its state is what the next step starts from. An
    /// error where the state does not live in it (a device run, a kinetic relaxation run).
    pub fn cloud_mut(&mut self) -> Result<&mut Cloud<R, D>, GpuError> {
        self.inner.cloud_mut()
    }
    /// The largest wave speed of state `u` along `n`, by the host equation.
    pub fn wave_speed(&self, u: &[R], n: [R; D]) -> R {
        self.inner.wave_speed(u, n)
    }
    /// Sizes the simulation's buffers once: on the host against `limit`, on a device against
    /// `limit` or else the device's memory where the device reports it. `None`: nothing
    /// reserved (no limit known).
    pub fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, GpuError> {
        self.inner.reserve(limit)
    }
    /// The memory model of the simulation's buffers as they stand (bytes per particle and per
    /// neighbour slot), to price a larger run of the same set-up.
    pub fn memory_model(&mut self) -> MemoryModel {
        self.inner.memory_model()
    }
}

/// What [`Simulation`] asks of a backend.
trait Stepper<R: GpuFloat, const D: usize>: Send {
    fn backend(&self) -> String;
    fn equation_name(&self) -> &'static str;
    fn to_primitive(&self, u: &[R], w: &mut [R]);
    fn to_conservative(&self, w: &[R], u: &mut [R]);
    /// The host cloud whose state the next step starts from, where writing it is meaningful
    /// (the CPU backend); elsewhere the state lives on the device or in a kinetic system.
    fn cloud_mut(&mut self) -> Result<&mut Cloud<R, D>, GpuError> {
        Err(CloudError::invalid(
            "writing the state",
            self.backend(),
            "a run on the cpu backend without a kinetic relaxation",
        )
        .into())
    }
    fn wave_speed(&self, u: &[R], n: [R; D]) -> R;
    fn neighbours_mean(&self) -> f64;
    fn halo_particles(&self) -> Option<usize> {
        None
    }
    fn halo_rebuilds(&self) -> Option<(u64, u64)> {
        None
    }
    fn steps(&self) -> u64;
    fn time(&self) -> f64;
    fn restore_clock(&mut self, time: f64, steps: u64);
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, GpuError>;
    fn step(&mut self, dt: f64) -> Result<(), GpuError>;
    fn sync(&mut self) -> Result<(), GpuError>;
    fn cloud(&self) -> &Cloud<R, D>;
    fn share(&self) -> Share<'_> {
        Share::whole(self.cloud().len())
    }
    fn own_part(&mut self) -> Result<Option<Cloud<R, D>>, GpuError> {
        Ok(None)
    }
    fn orders(&mut self) -> Result<Vec<u8>, GpuError>;
    fn take_mood_stats(&mut self) -> MoodStats;
    fn floor_events(&self) -> Option<u64>;
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, GpuError>;
    fn memory_model(&mut self) -> MemoryModel;
    fn with_motion(
        self: Box<Self>,
        _motion: Box<dyn Motion<R, D>>,
        _reorder_distance: f64,
    ) -> Result<Box<dyn Stepper<R, D>>, GpuError> {
        Err(CloudError::invalid(
            "moving cloud",
            self.backend(),
            "a fixed cloud (moving clouds run on the cpu backend, with an explicit stepper)",
        )
        .into())
    }
    fn with_adaptivity(
        self: Box<Self>,
        _adapt: Adaptivity,
        _every: u64,
    ) -> Result<Box<dyn Stepper<R, D>>, GpuError> {
        Err(CloudError::invalid(
            "adaptivity",
            self.backend(),
            "a moving cloud on the cpu backend",
        )
        .into())
    }
    fn adapt_stats(&self) -> AdaptStats {
        AdaptStats::default()
    }
    fn kinetic_speed(&self) -> Option<f64> {
        None
    }
    fn boundary_flux(&self, _rate: &mut [f64]) -> bool {
        false
    }
}

/// The CPU backend: a [`MeshlessSimulation`] in the row-major layout.
struct OnCpu<R: GpuFloat, const D: usize, E> {
    sim: MeshlessSimulation<R, D, E, RowMajor>,
}

impl<R: GpuFloat, const D: usize, E: Equation<R, D>> OnCpu<R, D, E> {
    fn new(
        cloud: Cloud<R, D>,
        equation: E,
        boundaries: Boundaries<R, D>,
        radius: f64,
        s: &Scheme,
        cpu: CpuBackend,
    ) -> Result<Self, GpuError> {
        let scheme = muscl(equation, s)?;
        let mut sim = MeshlessSimulation::new(cloud, radius, scheme, s.tableau.clone(), cpu)?;
        if boundaries.has_conditions() {
            sim = sim.with_boundaries(boundaries)?;
        }
        Ok(Self {
            sim: sim.with_mood(s.mood)?,
        })
    }
}

/// The CPU scheme `s` describes, for `equation`.
fn muscl<R: mote_core::Real, const D: usize, E: Equation<R, D>>(
    equation: E,
    s: &Scheme,
) -> Result<Muscl<R, D, E>, GpuError> {
    let scheme = Muscl::new(equation, s.order, s.formulation, Weight::default())?
        .with_flux(s.flux)?
        .with_limiter(s.limiter)?;
    Ok(match s.weno {
        Some(weight) => scheme.with_weno(weight)?,
        None => scheme,
    })
}

impl<R: GpuFloat, const D: usize, E: Equation<R, D> + 'static> Stepper<R, D> for OnCpu<R, D, E> {
    fn backend(&self) -> String {
        "cpu".to_string()
    }
    fn equation_name(&self) -> &'static str {
        self.sim.scheme.equation().name()
    }
    fn to_primitive(&self, u: &[R], w: &mut [R]) {
        self.sim.scheme.equation().to_primitive(u, w);
    }
    fn to_conservative(&self, w: &[R], u: &mut [R]) {
        self.sim.scheme.equation().to_conservative(w, u);
    }
    fn cloud_mut(&mut self) -> Result<&mut Cloud<R, D>, GpuError> {
        if self.sim.halo().is_some() {
            return Err(CloudError::invalid(
                "writing the state",
                "a cloud split between ranks",
                "one process",
            )
            .into());
        }
        Ok(&mut self.sim.cloud)
    }
    fn wave_speed(&self, u: &[R], n: [R; D]) -> R {
        self.sim.scheme.equation().max_wave_speed(u, n)
    }
    fn halo_particles(&self) -> Option<usize> {
        self.sim.halo().map(|h| h.halo_len())
    }
    fn halo_rebuilds(&self) -> Option<(u64, u64)> {
        (self.sim.halo().is_some() && self.sim.is_moving()).then(|| self.sim.halo_rebuilds())
    }
    fn neighbours_mean(&self) -> f64 {
        match self.sim.halo() {
            // The one-process mean: the own particles' neighbours summed over the ranks.
            Some(halo) => {
                let counts = &self.sim.list.counts()[halo.own()];
                let mut total = [counts.iter().map(|&c| u64::from(c)).sum::<u64>()];
                halo.sum(&mut total);
                total[0] as f64 / halo.total().max(1) as f64
            }
            None => self.sim.list.mean(),
        }
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
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, GpuError> {
        Ok(self.sim.stable_dt(cfl))
    }
    fn step(&mut self, dt: f64) -> Result<(), GpuError> {
        Ok(self.sim.step(dt)?)
    }
    fn sync(&mut self) -> Result<(), GpuError> {
        Ok(())
    }
    fn cloud(&self) -> &Cloud<R, D> {
        &self.sim.cloud
    }
    fn share(&self) -> Share<'_> {
        match self.sim.halo() {
            Some(halo) => halo.share(),
            None => Share::whole(self.sim.cloud.len()),
        }
    }
    fn own_part(&mut self) -> Result<Option<Cloud<R, D>>, GpuError> {
        if self.sim.halo().is_none() {
            return Ok(None);
        }
        let orders = self.orders()?;
        let halo = self.sim.halo().expect("split");
        Ok(Some(mote_cloud::halo::own_part(
            halo,
            &self.sim.cloud,
            &orders,
        )))
    }
    fn orders(&mut self) -> Result<Vec<u8>, GpuError> {
        // MOOD's orders exist from its first step on; before it (the initial snapshot) every
        // particle has the cloud's order.
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
        let mut events = [self.sim.scheme.equation().floor_events()];
        // A split simulation's ranks count the floors of their own particles' passes.
        if let Some(halo) = self.sim.halo() {
            halo.sum(&mut events);
        }
        Some(events[0])
    }
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, GpuError> {
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
    fn memory_model(&mut self) -> MemoryModel {
        let parts = self.sim.budgeted_parts();
        let refs: Vec<&dyn Budgeted> = parts.iter().map(|p| &**p).collect();
        MemoryModel::of(&refs)
    }
    fn with_motion(
        self: Box<Self>,
        motion: Box<dyn Motion<R, D>>,
        reorder_distance: f64,
    ) -> Result<Box<dyn Stepper<R, D>>, GpuError> {
        let sim = self.sim.with_boxed_motion(motion, reorder_distance)?;
        Ok(Box::new(OnCpu { sim }))
    }
    fn with_adaptivity(
        self: Box<Self>,
        adapt: Adaptivity,
        every: u64,
    ) -> Result<Box<dyn Stepper<R, D>>, GpuError> {
        let sim = self.sim.with_adaptivity(adapt, every)?;
        Ok(Box::new(OnCpu { sim }))
    }
    fn adapt_stats(&self) -> AdaptStats {
        self.sim.adapt_stats()
    }
    fn boundary_flux(&self, rate: &mut [f64]) -> bool {
        let boundaries = self.sim.boundaries();
        let cloud = &self.sim.cloud;
        let tags = cloud.tags();
        let m = cloud.variables();
        // Boundary particles per face tag (`1 + 2 axis + high`); a split cloud's ranks count
        // their own and add.
        let mut count = [0u64; 1 + 2 * 3];
        for p in boundaries.particles() {
            count[tags[p.index] as usize] += 1;
        }
        let halo = self.sim.halo();
        if let Some(h) = halo {
            h.sum(&mut count);
        }
        if count.iter().all(|&c| c == 0) {
            return false;
        }
        let (lo, hi) = cloud.domain().bounds();
        let area = |axis: usize| {
            (0..D)
                .filter(|&b| b != axis)
                .map(|b| hi[b] - lo[b])
                .product::<f64>()
        };
        let equation = self.sim.scheme.equation();
        let (mut u, mut w) = (vec![R::zero(); m], vec![R::zero(); m]);
        let (mut fu, mut fw) = (vec![R::zero(); m], vec![R::zero(); m]);
        // Each boundary particle's terms, in the one-process order (a split cloud's ranks hold
        // consecutive runs of it), then summed in that order.
        let mut terms = Vec::with_capacity(boundaries.len() * m);
        for p in boundaries.particles() {
            let tag = tags[p.index] as usize;
            let share = area((tag - 1) / 2) / count[tag] as f64;
            for v in 0..m {
                u[v] = cloud.state(v)[p.index];
                w[v] = cloud.state(v)[p.interior];
            }
            let n = p.normal.map(R::cast);
            equation.flux(&u, n, &mut fu);
            equation.flux(&w, n, &mut fw);
            terms.extend((0..m).map(|v| share * 0.5 * (fu[v].as_f64() + fw[v].as_f64())));
        }
        if let Some(h) = halo {
            terms = mote_core::comm::all_gather_varied(h.comm(), &terms).0;
        }
        rate[..m].fill(0.0);
        for t in terms.chunks_exact(m) {
            for v in 0..m {
                rate[v] += t[v];
            }
        }
        true
    }
}

/// The CPU backend solving a conservation law through its kinetic relaxation system: the
/// engine (an [`OnCpu`] over the kinetic transport) steps the kinetic variables; `cloud` shows
/// their macroscopic sum, and primitive variables and wave speeds are the law's.
struct Relaxed<R: GpuFloat, const D: usize, E> {
    kinetic: OnCpu<R, D, KineticTransport<D>>,
    relax: KineticRelaxation<D, E>,
    /// The macroscopic state on the kinetic cloud's particles.
    cloud: Cloud<R, D>,
    /// Whether `cloud` holds the current macroscopic state.
    current: bool,
}

impl<R: GpuFloat, const D: usize, E: Equation<R, D> + 'static> Stepper<R, D> for Relaxed<R, D, E> {
    fn backend(&self) -> String {
        "cpu".to_string()
    }
    fn equation_name(&self) -> &'static str {
        self.relax.equation().name()
    }
    fn kinetic_speed(&self) -> Option<f64> {
        Some(self.relax.transport().speed())
    }
    fn to_primitive(&self, u: &[R], w: &mut [R]) {
        self.relax.equation().to_primitive(u, w);
    }
    fn to_conservative(&self, w: &[R], u: &mut [R]) {
        self.relax.equation().to_conservative(w, u);
    }
    fn wave_speed(&self, u: &[R], n: [R; D]) -> R {
        self.relax.equation().max_wave_speed(u, n)
    }
    fn neighbours_mean(&self) -> f64 {
        self.kinetic.neighbours_mean()
    }
    fn steps(&self) -> u64 {
        self.kinetic.steps()
    }
    fn time(&self) -> f64 {
        self.kinetic.time()
    }
    fn restore_clock(&mut self, time: f64, steps: u64) {
        self.kinetic.restore_clock(time, steps);
    }
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, GpuError> {
        self.kinetic.stable_dt(cfl)
    }
    fn step(&mut self, dt: f64) -> Result<(), GpuError> {
        self.current = false;
        self.kinetic.step(dt)
    }
    fn sync(&mut self) -> Result<(), GpuError> {
        if !self.current {
            let m = self.cloud.variables();
            let kinetic = self.kinetic.cloud();
            for v in 0..m {
                let u = self.cloud.state_var_mut(v);
                u.copy_from_slice(kinetic.state(v));
                // Summed in the kinetic components' order, as the relaxation sums them.
                for k in 1..2 * D {
                    for (x, &f) in u.iter_mut().zip(kinetic.state(k * m + v)) {
                        *x += f;
                    }
                }
            }
            self.current = true;
        }
        Ok(())
    }
    fn cloud(&self) -> &Cloud<R, D> {
        &self.cloud
    }
    fn share(&self) -> Share<'_> {
        self.kinetic.share()
    }
    fn own_part(&mut self) -> Result<Option<Cloud<R, D>>, GpuError> {
        if self.kinetic.sim.halo().is_none() {
            return Ok(None);
        }
        let orders = self.orders()?;
        self.sync()?;
        let halo = self.kinetic.sim.halo().expect("split");
        Ok(Some(mote_cloud::halo::own_part(halo, &self.cloud, &orders)))
    }
    fn orders(&mut self) -> Result<Vec<u8>, GpuError> {
        self.kinetic.orders()
    }
    fn take_mood_stats(&mut self) -> MoodStats {
        self.kinetic.take_mood_stats()
    }
    fn floor_events(&self) -> Option<u64> {
        let mut events = [self.relax.equation().floor_events()];
        // A split cloud's ranks count their own particles' relaxations.
        if let Some(halo) = self.kinetic.sim.halo() {
            halo.sum(&mut events);
        }
        Some(events[0])
    }
    fn halo_particles(&self) -> Option<usize> {
        self.kinetic.halo_particles()
    }
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, GpuError> {
        self.kinetic.reserve(limit)
    }
    fn memory_model(&mut self) -> MemoryModel {
        self.kinetic.memory_model()
    }
}

/// The device backend: a [`DeviceSimulation`] (row-major lists) and a host copy of the cloud
/// that receives the state at each [`sync`](Stepper::sync).
struct OnGpu<R: GpuFloat, const D: usize, E> {
    gpu: Gpu,
    sim: DeviceSimulation<R, D>,
    host: Cloud<R, D>,
    equation: E,
    /// Whether `host` holds the device's current state.
    current: bool,
}

/// The device scheme `s` describes, for `equation`.
fn device_muscl<R: GpuFloat, const D: usize, E: OnDevice<D>>(
    gpu: &Gpu,
    equation: &E,
    s: &Scheme,
) -> Result<DeviceMuscl<R>, GpuError> {
    let scheme = DeviceMuscl::<R>::new::<D>(gpu, equation.device()?, s.order, Weight::default())?
        .with_limiter::<D>(s.limiter)?
        .with_flux(s.flux)?
        .with_formulation(s.formulation);
    match s.weno {
        Some(weight) => scheme.with_weno::<D>(gpu, weight),
        None => Ok(scheme),
    }
}

impl<R: GpuFloat, const D: usize, E: Equation<R, D> + OnDevice<D>> OnGpu<R, D, E> {
    fn new(
        gpu: Gpu,
        cloud: Cloud<R, D>,
        equation: E,
        boundaries: Boundaries<R, D>,
        radius: f64,
        s: &Scheme,
    ) -> Result<Self, GpuError> {
        let scheme = device_muscl::<R, D, E>(&gpu, &equation, s)?;
        let mut sim = DeviceSimulation::new(
            &gpu,
            &cloud,
            radius,
            scheme,
            s.tableau.clone(),
            DeviceLayout::RowMajor,
        )?;
        if boundaries.has_conditions() {
            sim = sim.with_boundaries(&gpu, &cloud, boundaries)?;
        }
        let sim = sim.with_mood(&gpu, s.mood)?;
        Ok(Self {
            gpu,
            sim,
            host: cloud,
            equation,
            current: false,
        })
    }
}

impl<R: GpuFloat, const D: usize, E: Equation<R, D> + OnDevice<D>> OnGpu<R, D, E> {
    /// This rank's part of a split device run ([`Simulation::split_part`]): the halo found
    /// from the own particles on the host (`mote_cloud::halo::split_own`, the rings the
    /// scheme reads), then the part on the device, searched on the whole cloud's bins.
    #[allow(clippy::too_many_arguments)]
    fn split(
        gpu: Gpu,
        own: Cloud<R, D>,
        first: usize,
        total: usize,
        equation: E,
        mut boundaries: Boundaries<R, D>,
        boundary: bool,
        radius: f64,
        s: &Scheme,
        comm: std::sync::Arc<dyn mote_core::comm::Comm>,
    ) -> Result<Self, GpuError> {
        let reads = mote_cloud::scheme::reads_neighbour_lists(s.formulation, s.weno.is_some());
        let rings = mote_cloud::halo::rings(boundary, reads);
        let (part, halo, mut search) = mote_cloud::halo::split_own::<R, D, RowMajor>(
            own,
            first,
            total,
            radius,
            rings,
            CpuBackend::default(),
            comm,
        )?;
        // Each rank's own failures are agreed before the next collective step (a rank whose
        // device cannot run the scheme stops every rank, none waits for it).
        let comm = halo.comm_shared();
        let agreed = |r: Result<(), GpuError>| crate::halo::agreed(Some(comm.as_ref()), r);
        let conditions = boundaries.has_conditions();
        if conditions {
            // The own boundary particles' conditions and nearest interior particles, found on
            // the host from the part's lists as the CPU's split finds them (agreed).
            let mut list = mote_cloud::NeighbourList::<RowMajor>::default();
            agreed(
                search
                    .build(&part, CpuBackend::default(), &mut list)
                    .map_err(GpuError::from),
            )?;
            boundaries.prepare_own(&part, &list, &halo)?;
        }
        let (min, max) = search
            .bounds()
            .expect("a split's search has the whole cloud's bounds");
        let scheme = device_muscl::<R, D, E>(&gpu, &equation, s);
        agreed(
            scheme
                .as_ref()
                .map(|_| ())
                .map_err(|e| GpuError::Ranks(e.to_string())),
        )?;
        let scheme = scheme?;
        let sim = DeviceSimulation::split(
            &gpu,
            &part,
            std::sync::Arc::new(halo),
            (min, max),
            radius,
            scheme,
            s.tableau.clone(),
            DeviceLayout::RowMajor,
        )?;
        let sim = match conditions {
            true => sim.with_prepared_boundaries(&gpu, &boundaries)?,
            false => sim,
        }
        .with_mood(&gpu, s.mood)?;
        Ok(Self {
            gpu,
            sim,
            host: part,
            equation,
            current: false,
        })
    }
}

impl<R: GpuFloat, const D: usize, E: Equation<R, D>> Stepper<R, D> for OnGpu<R, D, E> {
    fn backend(&self) -> String {
        match self.sim.halo() {
            Some(h) => format!(
                "gpu {} on rank {} (each rank takes its machine's devices in turn)",
                self.gpu.name(),
                h.comm().rank()
            ),
            None => format!("gpu {}", self.gpu.name()),
        }
    }
    fn equation_name(&self) -> &'static str {
        self.equation.name()
    }
    fn to_primitive(&self, u: &[R], w: &mut [R]) {
        self.equation.to_primitive(u, w);
    }
    fn to_conservative(&self, w: &[R], u: &mut [R]) {
        self.equation.to_conservative(w, u);
    }
    fn wave_speed(&self, u: &[R], n: [R; D]) -> R {
        self.equation.max_wave_speed(u, n)
    }
    fn neighbours_mean(&self) -> f64 {
        let Some(halo) = self.sim.halo() else {
            return self.sim.list().total() as f64 / self.host.len().max(1) as f64;
        };
        // The one-process mean: the own particles' neighbours summed over the ranks (a device
        // that cannot give its counts back counts none, and the run's next step says why).
        let counts = self
            .gpu
            .download(self.sim.list().counts())
            .unwrap_or_default();
        let own = counts.get(halo.own()).unwrap_or_default();
        let mut total = [own.iter().map(|&c| u64::from(c)).sum::<u64>()];
        halo.sum(&mut total);
        total[0] as f64 / halo.total().max(1) as f64
    }
    fn halo_particles(&self) -> Option<usize> {
        self.sim.halo().map(|h| h.halo_len())
    }
    fn share(&self) -> Share<'_> {
        match self.sim.halo() {
            Some(halo) => halo.share(),
            None => Share::whole(self.host.len()),
        }
    }
    fn own_part(&mut self) -> Result<Option<Cloud<R, D>>, GpuError> {
        if self.sim.halo().is_none() {
            return Ok(None);
        }
        self.sync()?;
        let orders = self.orders()?;
        let halo = self.sim.halo().expect("split");
        Ok(Some(mote_cloud::halo::own_part(halo, &self.host, &orders)))
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
    fn stable_dt(&mut self, cfl: f64) -> Result<f64, GpuError> {
        self.sim.stable_dt(&self.gpu, cfl)
    }
    fn step(&mut self, dt: f64) -> Result<(), GpuError> {
        self.current = false;
        self.sim.step(&self.gpu, dt)
    }
    fn sync(&mut self) -> Result<(), GpuError> {
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
    fn cloud(&self) -> &Cloud<R, D> {
        &self.host
    }
    fn orders(&mut self) -> Result<Vec<u8>, GpuError> {
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
    fn reserve(&mut self, limit: Option<u64>) -> Result<Option<Reservation>, GpuError> {
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
        self.sim.reserve(&self.gpu, &self.host, limit)
    }
    fn memory_model(&mut self) -> MemoryModel {
        let parts: [&dyn Budgeted; 1] = [&self.sim];
        MemoryModel::of(&parts)
    }
}
