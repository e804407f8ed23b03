//! A meshless simulation: a cloud, its neighbour lists, a scheme, boundary conditions, MOOD,
//! a time stepper (explicit Runge-Kutta, or IMEX with a source term), optionally a motion of
//! the cloud, and a clock.

use mote_core::{Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling};

use crate::adapt::{AdaptStats, Adaptivity};
use crate::boundary::Boundaries;
use crate::cloud::{Cloud, Geometry, INTERIOR};
use crate::equations::Equation;
use crate::error::CloudError;
use crate::mood::{Mood, MoodSettings, MoodStats};
use crate::motion::Motion;
use crate::scheme::{Muscl, Velocities};
use crate::search::{NeighbourList, NeighbourSearch, SlotLayout};
use crate::source::Source;
use crate::time::{Imex, ImexTableau, RungeKutta, StageOperator, Tableau};

/// The time stepper: explicit Runge-Kutta, or IMEX with its source term (one dynamic call per
/// stage, none per particle).
enum Stepper<R: Real> {
    Explicit(RungeKutta<R>),
    Imex(Imex<R>, Box<dyn Source<R>>),
}

/// Wall seconds a moving cloud spends on its geometry, accumulated (for benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MotionSeconds {
    /// Neighbour searches.
    pub search: f64,
    /// MLS moment matrices and coefficients.
    pub moments: f64,
    /// Velocities, position wrapping and copies between the cloud and the stepper.
    pub motion: f64,
}

/// What a moving cloud adds: the motion, the search it redoes at every stage, the stepped
/// copy of state and positions, the particle velocities, and the reordering bookkeeping.
struct Moving<R: Real, const D: usize> {
    motion: Box<dyn Motion<R, D>>,
    /// State (`M` arrays) then positions (`D` arrays): what the Runge-Kutta stages advance.
    work: Vec<Buffer<R>>,
    velocity: [Buffer<R>; D],
    /// `dw_a/dx_b` of particle `i` at `i * D * D + a * D + b`.
    gradient: Buffer<R>,
    /// Whether the lists and MLS coefficients belong to the cloud's current positions.
    current: bool,
    /// Largest displacement summed over the steps since the last Morton reordering.
    since_reorder: f64,
    /// Reorder when `since_reorder` exceeds this distance.
    reorder_distance: f64,
    reorders: u64,
    seconds: MotionSeconds,
    /// Adaptivity and how many steps apart it runs.
    adapt: Option<(Adaptivity, u64)>,
    adapted: AdaptStats,
    /// On a cloud split between ranks: how far its halo reaches beyond the particles' reach.
    drift: Option<Drift<R, D>>,
}

/// The halo's skin default: extra width beyond the search radius, in search radii.
const SKIN: f64 = 0.5;

/// A moving cloud split between ranks (decision 0031): each rank holds every particle within
/// `radius + skin` of its own particles (`2 radius + skin` with WENO, whose stencils' validity
/// a neighbour's list gives) as they were when the halo was found (`anchor`). The own
/// particles' lists at later positions are the one-process lists while no particle has moved
/// half the skin (the MLS-divergence formulation, every moving cloud's, reads no other list:
/// the neighbours' derivatives and velocity gradients come from their owners): the stages check
/// that (a maximum over the ranks) before every search.
/// A stage that finds the halo outgrown fails the step, which is redone from its start on a
/// halo twice as wide; after each step the halo is found again when the next step might
/// outgrow it, and after every Morton reordering (the particles migrate to their new owners).
struct Drift<R: Real, const D: usize> {
    /// The skin a halo is found with, in distance (`SKIN` radii unless set).
    skin: f64,
    /// The current halo's skin.
    current: f64,
    /// The own particles' positions when the halo was found.
    anchor: [Vec<R>; D],
    /// The largest distance from the anchors after the last step.
    since: f64,
    /// Set by a stage that found the halo outgrown.
    outgrown: bool,
    /// Halos found since the start (the first included), and steps redone.
    rebuilds: u64,
    retries: u64,
}

impl<R: Real, const D: usize> Drift<R, D> {
    /// The largest distance an own particle of any rank has moved from its anchor (minimum
    /// image on periodic axes). Collective.
    fn displacement(&self, cloud: &Cloud<R, D>, halo: &crate::halo::Halo) -> f64 {
        let own = halo.own();
        let domain = cloud.domain();
        let mut worst = 0.0f64;
        for k in 0..own.len() {
            let anchor = std::array::from_fn(|a| self.anchor[a][k].as_f64());
            let d2 = domain.distance_squared(anchor, cloud.position_of(own.start + k));
            worst = worst.max(d2.sqrt());
        }
        f64::from_bits(halo.max_of(worst.to_bits()))
    }

    /// Whether particles that moved `moved` may have left the halo's reach (the search radius
    /// `radius`; a margin of 10^-3 radii covers the rounding of positions and distances).
    fn outgrown_by(&self, moved: f64, radius: f64) -> bool {
        2.0 * moved + 1e-3 * radius >= self.current
    }
}

/// A conservation law advanced on a cloud: fixed (the neighbour search runs once) or moving
/// (with a [`Motion`]: search and MLS fits at every stage).
pub struct MeshlessSimulation<R: Real, const D: usize, E, L: SlotLayout> {
    /// The particles and their state.
    pub cloud: Cloud<R, D>,
    /// The neighbour lists.
    pub list: NeighbourList<L>,
    /// The spatial scheme.
    pub scheme: Muscl<R, D, E>,
    search: NeighbourSearch,
    moving: Option<Moving<R, D>>,
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
            search,
            moving: None,
            stepper,
            boundaries: Boundaries::new(),
            mood: None,
            backend,
            time: 0.0,
            steps: 0,
        })
    }

    /// This rank's part of the simulation [`new`](Self::new) builds from the one-process
    /// `cloud`, split between the ranks of `comm` ([`crate::halo`]): the rank holds its own
    /// particles (a contiguous run of the one-process order) and the two rings of neighbours
    /// around them, computes its own particles in every pass and refreshes the halo from the
    /// other ranks after it. Every rank passes the same cloud; each ends with its own particles'
    /// one-process states, bit for bit. Collective (construction and every step).
    ///
    /// The rank cuts its own rows and finds its halo from them ([`split_part`](Self::split_part):
    /// the particles within the rings' reach, pruned to the rings of its own lists), so the
    /// whole cloud's neighbour lists are never built and the whole `cloud` is dropped at once.
    /// `boundaries` are [`with_boundaries`](Self::with_boundaries)'s (empty for a periodic
    /// cloud): each rank prepares and imposes them on its own boundary particles
    /// ([`Boundaries::prepare_own`]) and the halo's take their owners' states.
    ///
    /// Either formulation, limiters, WENO and MOOD; then motion ([`with_motion`](Self::with_motion):
    /// a halo by distance, particles migrating at reorderings) or a source term with an IMEX
    /// stepper ([`with_source`](Self::with_source): each rank solves its own particles and the
    /// halo takes the solutions); adaptivity is refused with a message (the replicated passes of
    /// [`new`](Self::new) serve it on ranks). WENO's one-sided fits are passes like the
    /// central one (own particles, then the halo's records) and its mix is element-wise.
    #[allow(clippy::too_many_arguments)]
    pub fn split(
        mut cloud: Cloud<R, D>,
        radius: f64,
        scheme: Muscl<R, D, E>,
        tableau: Tableau,
        backend: CpuBackend,
        boundaries: Boundaries<R, D>,
        comm: std::sync::Arc<dyn mote_core::comm::Comm>,
    ) -> Result<Self, CloudError> {
        // The rank keeps its own rows and finds its halo from them.
        let (first, total) = crate::halo::own_rows(&mut cloud, comm.as_ref());
        Self::split_part(
            cloud, first, total, radius, scheme, tableau, backend, boundaries, comm,
        )
    }

    /// [`split`](Self::split) from this rank's own particles alone: `own` holds the
    /// one-process particles `first..first + own.len()` of `total`, this rank's range of
    /// [`crate::halo::own_ranges`] (as [`crate::problems::ProblemOptions::ranks`] generates
    /// it); `boundaries` are [`with_boundaries`](Self::with_boundaries)'s (empty for a periodic
    /// cloud), prepared for the own boundary particles ([`Boundaries::prepare_own`]). No rank
    /// holds the whole cloud at any point. Collective.
    #[allow(clippy::too_many_arguments)]
    pub fn split_part(
        own: Cloud<R, D>,
        first: usize,
        total: usize,
        radius: f64,
        scheme: Muscl<R, D, E>,
        tableau: Tableau,
        backend: CpuBackend,
        boundaries: Boundaries<R, D>,
        comm: std::sync::Arc<dyn mote_core::comm::Comm>,
    ) -> Result<Self, CloudError> {
        // The ranks agree on boundary particles (one may hold some, another none).
        let boundary = u64::from(own.tags().iter().any(|&t| t != INTERIOR));
        let boundary = mote_core::comm::max_of(comm.as_ref(), boundary) == 1;
        let rings = halo_rings(boundary, &scheme);
        let (part, halo, search) =
            crate::halo::split_own::<R, D, L>(own, first, total, radius, rings, backend, comm)?;
        Self::on_part(part, halo, search, scheme, tableau, backend, boundaries)
    }

    /// The simulation of a rank's `part` of a split cloud with its `halo`, searched with
    /// `search` (the whole cloud's bins), so that the lists of its own particles (and ring 1's,
    /// with two rings) are the one-process lists.
    fn on_part(
        part: Cloud<R, D>,
        halo: crate::halo::Halo,
        mut search: NeighbourSearch,
        scheme: Muscl<R, D, E>,
        tableau: Tableau,
        backend: CpuBackend,
        mut boundaries: Boundaries<R, D>,
    ) -> Result<Self, CloudError> {
        let mut part = part;
        let mut list = NeighbourList::<L>::default();
        search.build(&part, backend, &mut list)?;
        if boundaries.has_conditions() {
            // The own boundary particles' conditions, interior neighbours and initial states;
            // the halo's boundary particles take their owners'.
            boundaries.prepare_own(&part, &list, &halo)?;
            let (mut state, _) = part.state_and_geometry();
            boundaries.apply(0.0, &mut state);
            halo.exchange_columns(&mut state);
        }
        list.set_halo(std::sync::Arc::new(halo));
        let mut scheme = scheme;
        scheme.prepare(&part, &list, backend)?;
        let stepper = Stepper::Explicit(RungeKutta::new(tableau, part.variables()));
        Ok(Self {
            cloud: part,
            list,
            scheme,
            search,
            moving: None,
            stepper,
            boundaries,
            mood: None,
            backend,
            time: 0.0,
            steps: 0,
        })
    }

    /// The split between ranks this simulation is one rank's part of ([`split`](Self::split)).
    pub fn halo(&self) -> Option<&crate::halo::Halo> {
        self.list.halo()
    }

    /// The particles whose states this rank computes: all of them, or the own particles of a
    /// split simulation (local indices).
    pub fn own(&self) -> std::ops::Range<usize> {
        self.halo().map_or(0..self.cloud.len(), |h| h.own())
    }

    /// Moves the particles with `motion`: each Runge-Kutta stage moves them with its own
    /// velocities, searches neighbours and fits the MLS moments again at the new positions, and
    /// exchanges ALE fluxes, so that the state is the one following the particles. The cloud is
    /// reordered along the Morton curve when the particles have moved `reorder_distance`
    /// nominal spacings in total since the last reordering (`f64::INFINITY`: never).
    ///
    /// Needs an explicit Runge-Kutta stepper, the MLS-divergence formulation and a periodic
    /// cloud without boundary particles, and no MOOD (none of these is available on moving
    /// clouds yet: each is refused with a message). Particle volumes are kept (exact for a
    /// divergence-free motion; the MLS-divergence form does not use them).
    pub fn with_motion(
        self,
        motion: impl Motion<R, D> + 'static,
        reorder_distance: f64,
    ) -> Result<Self, CloudError> {
        self.with_boxed_motion(Box::new(motion), reorder_distance)
    }

    /// [`with_motion`](Self::with_motion) with a motion chosen at run time.
    pub fn with_boxed_motion(
        mut self,
        motion: Box<dyn Motion<R, D>>,
        reorder_distance: f64,
    ) -> Result<Self, CloudError> {
        let refuse = |what: &str| Err(CloudError::invalid("moving cloud", motion.name(), what));
        if reorder_distance.is_nan() || reorder_distance <= 0.0 {
            return refuse("a positive reordering distance");
        }
        let tableau = match &self.stepper {
            Stepper::Explicit(rk) => rk.tableau().clone(),
            Stepper::Imex(..) => return refuse("an explicit Runge-Kutta stepper (not IMEX)"),
        };
        if self.scheme.formulation() != crate::scheme::Formulation::MlsDivergence {
            return refuse(
                "the MLS-divergence formulation (the conservative one needs evolving volumes)",
            );
        }
        if self.mood.is_some() {
            return refuse("no MOOD (not available on moving clouds yet)");
        }
        let boundary = u64::from(self.cloud.tags().iter().any(|&t| t != INTERIOR));
        // A split cloud's ranks agree (one may hold boundary particles, another none).
        if self.halo().map_or(boundary, |h| h.max_of(boundary)) == 1 {
            return refuse(
                "a periodic cloud without boundary particles (boundary conditions on moving clouds are not available yet)",
            );
        }
        let m = self.cloud.variables();
        let work = (0..m + D)
            .map(|_| Buffer::new("moving_stage_input", Scaling::PerParticle(1)))
            .collect();
        self.stepper = Stepper::Explicit(RungeKutta::new(tableau, m + D));
        self.moving = Some(Moving {
            motion,
            work,
            velocity: std::array::from_fn(|_| {
                Buffer::new("particle_velocity", Scaling::PerParticle(1))
            }),
            gradient: Buffer::new("velocity_gradient", Scaling::PerParticle(D * D)),
            current: true,
            since_reorder: 0.0,
            reorder_distance,
            reorders: 0,
            seconds: MotionSeconds::default(),
            adapt: None,
            adapted: AdaptStats::default(),
            drift: self.halo().map(|_| Drift {
                skin: SKIN * self.search.radius(),
                current: 0.0,
                anchor: std::array::from_fn(|_| Vec::new()),
                since: 0.0,
                outgrown: false,
                rebuilds: 0,
                retries: 0,
            }),
        });
        if self.halo().is_some() {
            // The graph halo of `split` becomes a halo by distance, with room to move.
            let skin = SKIN * self.search.radius();
            self.rehalo(skin, false)?;
        }
        Ok(self)
    }

    /// The skin of a moving split cloud's halo (see [`split`](Self::split) and
    /// [`with_motion`](Self::with_motion)): the halo holds every particle within the search
    /// radius plus `skin` radii of the rank's own particles (default 0.5). A wider skin
    /// finds the halo less often and exchanges more per pass. Results do not depend on it.
    pub fn with_halo_skin(mut self, skin: f64) -> Result<Self, CloudError> {
        if !(skin.is_finite() && skin > 0.0) {
            return Err(CloudError::invalid(
                "halo skin",
                skin,
                "finite and > 0 radii",
            ));
        }
        let radius = self.search.radius();
        let Some(drift) = self.moving.as_mut().and_then(|m| m.drift.as_mut()) else {
            return Err(CloudError::invalid(
                "halo skin",
                skin,
                "a moving cloud split between ranks",
            ));
        };
        drift.skin = skin * radius;
        self.rehalo(skin * radius, false)?;
        Ok(self)
    }

    /// Halos a moving split cloud has found so far (the first included) and steps it redid on
    /// a wider halo: `(0, 0)` elsewhere.
    pub fn halo_rebuilds(&self) -> (u64, u64) {
        self.moving
            .as_ref()
            .and_then(|m| m.drift.as_ref())
            .map_or((0, 0), |d| (d.rebuilds, d.retries))
    }

    /// Finds a moving split cloud's halo again at the current positions with `skin` (after a
    /// Morton reordering of the whole cloud with `reorder`: the own particles migrate to their
    /// new owners first), and the geometry on it. Collective.
    fn rehalo(&mut self, skin: f64, reorder: bool) -> Result<(), CloudError> {
        let halo = self.list.halo().expect("a split cloud");
        let (own, first, total) = (halo.own(), halo.first(), halo.total());
        let comm = halo.comm_arc();
        let empty = Cloud::new(
            *self.cloud.domain(),
            self.cloud.spacing(),
            self.cloud.variables(),
        )?;
        let mut part = std::mem::replace(&mut self.cloud, empty);
        crate::halo::keep_own(&mut part, own);
        let first = if reorder {
            crate::halo::reorder(&mut part, first, total, comm.as_ref())?;
            crate::halo::own_ranges(total, comm.size())[comm.rank()].start
        } else {
            first
        };
        // A radius per ring (a moving cloud has no boundary particles).
        let reach = halo_rings(false, &self.scheme) as f64;
        let width = reach * self.search.radius() + skin;
        let (local, halo) = crate::halo::around(part, first, total, width, comm)?;
        let own = halo.own();
        self.cloud = local;
        self.list.set_halo(std::sync::Arc::new(halo));
        let moving = self.moving.as_mut().expect("a moving cloud");
        let drift = moving.drift.as_mut().expect("a split moving cloud");
        let pos = self.cloud.positions();
        drift.anchor = std::array::from_fn(|a| pos[a][own.clone()].to_vec());
        drift.current = skin;
        drift.since = 0.0;
        drift.rebuilds += 1;
        rebuild(
            &self.cloud,
            &mut self.list,
            &mut self.scheme,
            &mut self.search,
            &mut moving.seconds,
            self.backend,
        )?;
        moving.current = true;
        Ok(())
    }

    /// Adapts a moving cloud every `every` steps (after the step, before its geometry is
    /// rebuilt): particles inserted into holes, close pairs merged, particles that left the
    /// domain removed (see [`crate::adapt`]). Needs [`with_motion`](Self::with_motion) first.
    pub fn with_adaptivity(mut self, adapt: Adaptivity, every: u64) -> Result<Self, CloudError> {
        adapt.validate()?;
        if self.halo().is_some() {
            return Err(CloudError::invalid(
                "adaptivity",
                "on a cloud split between ranks",
                "one process (adaptive clouds are not split between ranks yet)",
            ));
        }
        if every == 0 {
            return Err(CloudError::invalid(
                "adaptivity interval",
                every,
                "at least 1 step",
            ));
        }
        let Some(moving) = self.moving.as_mut() else {
            return Err(CloudError::invalid(
                "adaptivity",
                "on a fixed cloud",
                "a moving cloud (call with_motion first)",
            ));
        };
        moving.adapt = Some((adapt, every));
        Ok(self)
    }

    /// What adaptivity did so far (sums over its applications; zeros without it).
    pub fn adapt_stats(&self) -> AdaptStats {
        self.moving
            .as_ref()
            .map(|m| m.adapted.clone())
            .unwrap_or_default()
    }

    /// Whether the cloud moves.
    pub fn is_moving(&self) -> bool {
        self.moving.is_some()
    }

    /// Morton reorderings of a moving cloud so far.
    pub fn reorders(&self) -> u64 {
        self.moving.as_ref().map_or(0, |m| m.reorders)
    }

    /// Seconds a moving cloud spent on its geometry since the last call (zeros on a fixed
    /// cloud), and resets them.
    pub fn take_motion_seconds(&mut self) -> MotionSeconds {
        self.moving
            .as_mut()
            .map(|m| std::mem::take(&mut m.seconds))
            .unwrap_or_default()
    }

    /// Attaches boundary conditions (one for every boundary tag of the cloud) and imposes them
    /// on the current state.
    pub fn with_boundaries(mut self, mut boundaries: Boundaries<R, D>) -> Result<Self, CloudError> {
        if self.halo().is_some() {
            return Err(CloudError::invalid(
                "boundary conditions",
                "attached to a cloud split between ranks",
                "the boundaries passed to `split` (they are prepared on the whole cloud)",
            ));
        }
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
        if mood.is_active() && self.moving.is_some() {
            return Err(CloudError::invalid(
                "MOOD",
                "on a moving cloud",
                "a fixed cloud (MOOD on moving clouds is not available yet)",
            ));
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
        if let Some(m) = &self.moving {
            return Err(imex_on_moving_cloud(&tableau, m.motion.name()));
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

    /// Every budgeted part of the run (cloud, neighbour lists, scheme, search, stepper, MOOD,
    /// motion), for [`mote_core::memory::reserve`]: what a run prices and sizes once before its
    /// first step. Stage buffers that the first step will allocate are priced already (a buffer's
    /// price is its scaling, not its current length).
    pub fn budgeted_parts(&mut self) -> Vec<&mut dyn Budgeted> {
        let mut parts: Vec<&mut dyn Budgeted> = vec![
            &mut self.cloud,
            &mut self.list,
            &mut self.scheme,
            &mut self.search,
        ];
        match &mut self.stepper {
            Stepper::Explicit(rk) => parts.push(rk),
            Stepper::Imex(imex, _) => parts.push(imex),
        }
        if let Some(mood) = &mut self.mood {
            parts.push(mood);
        }
        if let Some(moving) = &mut self.moving {
            parts.push(moving);
        }
        parts
    }

    /// Simulated time.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Sets the clock and the step count, for a run resumed from a checkpoint (whose state has
    /// been loaded into the cloud), and imposes the boundary conditions at that time again:
    /// attaching them imposed them at time 0, while the first stage of the next step reads the
    /// boundary particles as the last step left them (a condition may depend on time).
    pub fn restore_clock(&mut self, time: f64, steps: u64) {
        self.time = time;
        self.steps = steps;
        let (mut state, _) = self.cloud.state_and_geometry();
        self.boundaries.apply(time, &mut state);
    }

    /// The largest stable step for `cfl` at the current state. Where boundary conditions are
    /// attached, the boundary particles (whose states they impose) do not limit it.
    ///
    /// On a moving cloud the particle speed adds to the wave speeds: `cfl / (r_i + r_w)`, with
    /// `r_w = 2 max_i sum_j |w_i . b_ij|` at the current velocities.
    pub fn stable_dt(&mut self, cfl: f64) -> f64 {
        let u: Vec<&[R]> = (0..self.cloud.variables())
            .map(|v| self.cloud.state(v))
            .collect();
        let dt = self.scheme.stable_dt(
            &self.cloud,
            &self.list,
            &u,
            cfl,
            self.backend,
            !self.boundaries.is_empty(),
        );
        let Some(moving) = self.moving.as_mut() else {
            return dt;
        };
        let n = self.cloud.len();
        for b in &mut moving.velocity {
            b.resize(n, R::zero())
                .expect("velocity buffers follow the particle count");
        }
        moving.motion.velocities(
            self.time,
            self.cloud.positions(),
            &u,
            moving.velocity.each_mut().map(|b| b.as_mut_slice()),
            self.backend,
        );
        let w: [&[R]; D] = std::array::from_fn(|d| moving.velocity[d].as_slice());
        let grad: [&[R]; D] = std::array::from_fn(|d| self.scheme.mls().coefficients(d));
        let list = &self.list;
        // A split cloud's ranks take their own particles; the maximum is reduced (exact).
        let own = list.halo().map_or(0..n, |h| h.own());
        let rate = self
            .backend
            .map_reduce(
                own.len(),
                1024,
                |r| {
                    let mut worst = 0.0f64;
                    for i in r.start + own.start..r.end + own.start {
                        let mut sum = 0.0;
                        for s in list.slots(i) {
                            let mut p = 0.0;
                            for d in 0..D {
                                p += w[d][i].as_f64() * grad[d][s].as_f64();
                            }
                            sum += p.abs();
                        }
                        worst = worst.max(2.0 * sum);
                    }
                    worst
                },
                f64::max,
            )
            .unwrap_or(0.0);
        let rate = f64::from_bits(
            list.halo()
                .map_or(rate.to_bits(), |h| h.max_of(rate.to_bits())),
        );
        if rate == 0.0 {
            dt
        } else {
            cfl / (cfl / dt + rate)
        }
    }

    /// One step of length `dt`. An error, naming the particle, if the state holds a non-finite
    /// value before the step (nothing is changed) or after it (the state is then that of the
    /// failed step, for inspection).
    pub fn step(&mut self, dt: f64) -> Result<(), CloudError> {
        if self.steps == 0 {
            self.check_finite("before")?;
        }
        if self.moving.is_some() {
            self.moving_step(dt)?;
            self.time += dt;
            self.steps += 1;
            return self.check_finite("after");
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

    /// One step of a moving cloud: the stages advance a copy of the state and the positions;
    /// each stage's operator moves the cloud to its positions. On success the new state and
    /// the wrapped new positions are written back and the geometry is rebuilt there (the next
    /// step's first stage uses it); on an error the cloud keeps its state and positions.
    fn moving_step(&mut self, dt: f64) -> Result<(), CloudError> {
        let moved = loop {
            match self.moving_stages(dt) {
                Ok(moved) => break moved,
                Err(e) => match self.moving.as_mut().and_then(|m| m.drift.as_mut()) {
                    // A stage found the split cloud's halo outgrown: the step again from its
                    // start (the cloud keeps it) on a halo twice as wide.
                    Some(d) if d.outgrown => {
                        d.outgrown = false;
                        d.retries += 1;
                        let skin = 2.0 * d.current;
                        self.rehalo(skin, false)?;
                    }
                    _ => return Err(e),
                },
            }
        };
        self.after_moving_step(moved)
    }

    /// The stages of [`moving_step`](Self::moving_step); returns the largest distance a
    /// particle moved (over the ranks of a split cloud).
    fn moving_stages(&mut self, dt: f64) -> Result<f64, CloudError> {
        let Self {
            cloud,
            list,
            scheme,
            search,
            moving,
            stepper,
            backend,
            time,
            ..
        } = self;
        let moving = moving.as_mut().expect("a moving cloud");
        let Stepper::Explicit(rk) = stepper else {
            unreachable!("with_motion and with_source refuse each other")
        };
        let backend = *backend;
        let m = cloud.variables();
        let n = cloud.len();
        let clock = std::time::Instant::now();
        for (k, b) in moving.work.iter_mut().enumerate() {
            b.resize(n, R::zero())?;
            let src = if k < m {
                cloud.state(k)
            } else {
                cloud.positions()[k - m]
            };
            b.as_mut_slice().copy_from_slice(src);
        }
        for b in moving.velocity.iter_mut() {
            b.resize(n, R::zero())?;
        }
        moving.gradient.resize(n * D * D, R::zero())?;
        moving.seconds.motion += clock.elapsed().as_secs_f64();
        let result = {
            let Moving {
                motion,
                work,
                velocity,
                gradient,
                current,
                seconds,
                drift,
                ..
            } = &mut *moving;
            let mut op = MovingOperator {
                drift: drift.as_mut(),
                cloud: &mut *cloud,
                list: &mut *list,
                scheme: &mut *scheme,
                search: &mut *search,
                motion: motion.as_ref(),
                velocity,
                gradient,
                current,
                seconds,
                backend,
            };
            let mut u: Vec<&mut [R]> = work.iter_mut().map(|b| b.as_mut_slice()).collect();
            rk.advance(&mut u, *time, dt, backend, &mut op)
        };
        let clock = std::time::Instant::now();
        // Write back the new state (or, after an error, the old positions).
        let ok = result.is_ok();
        let domain = *cloud.domain();
        let mut moved = 0.0f64;
        let own = list.halo().map_or(0..cloud.len(), |h| h.own());
        if ok {
            // From the last stage's (wrapped) positions, the nearest image on periodic axes (a
            // particle crossing the boundary has not moved a period).
            let new = &moving.work[m..];
            for i in own {
                let x = std::array::from_fn(|d| new[d].as_slice()[i].as_f64());
                let step = domain.offset(cloud.position_of(i), x);
                moved = step.iter().fold(moved, |w, s| w.max(s.abs()));
            }
        }
        {
            let (mut state, _) = cloud.state_and_geometry();
            if ok {
                for (v, s) in state.iter_mut().enumerate() {
                    s.copy_from_slice(moving.work[v].as_slice());
                }
            }
        }
        let periodic = domain.periodic();
        let (lo, hi) = domain.bounds();
        for d in 0..D {
            let new = moving.work[m + d].as_slice();
            let pos = &mut cloud.positions_mut()[d];
            // After an error `work` still holds the positions at the start of the step.
            wrap_axis(pos, new, periodic[d], lo[d], hi[d], backend);
        }
        moving.seconds.motion += clock.elapsed().as_secs_f64();
        result?;
        Ok(list
            .halo()
            .map_or(moved, |h| f64::from_bits(h.max_of(moved.to_bits()))))
    }

    /// After a moving step's stages moved the particles by up to `moved`: adaptivity, the
    /// Morton reordering (with a split cloud's migration and halo), and the geometry at the new
    /// positions.
    fn after_moving_step(&mut self, moved: f64) -> Result<(), CloudError> {
        let Self {
            cloud,
            list,
            scheme,
            search,
            moving,
            backend,
            ..
        } = self;
        let backend = *backend;
        let moving = moving.as_mut().expect("a moving cloud");
        if let Some((adapt, every)) = moving.adapt
            && (self.steps + 1).is_multiple_of(every)
        {
            let stats = adapt.apply(cloud)?;
            if stats.inserted + stats.merged + stats.removed > 0 {
                // Inserted particles sit at the end of the arrays: restore locality.
                cloud.reorder_morton();
                moving.since_reorder = -moved;
                moving.reorders += 1;
            }
            let total = &mut moving.adapted;
            total.inserted += stats.inserted;
            total.unfilled += stats.unfilled;
            total.merged += stats.merged;
            total.removed += stats.removed;
            total.removed_totals.resize(stats.removed_totals.len(), 0.0);
            for (t, r) in total.removed_totals.iter_mut().zip(&stats.removed_totals) {
                *t += r;
            }
        }
        moving.since_reorder += moved;
        let spacing = cloud.spacing().into_iter().fold(f64::INFINITY, f64::min);
        let reorder = moving.since_reorder > moving.reorder_distance * spacing;
        if reorder {
            moving.since_reorder = 0.0;
            moving.reorders += 1;
        }
        if let (Some(drift), Some(halo)) = (moving.drift.as_mut(), list.halo()) {
            // A split cloud: the particles migrate to their new owners at a reordering; the
            // halo is found again then, or when the next step (moving about as far from the
            // anchors as this one did) might outgrow it, with a skin of at least four such steps.
            let radius = search.radius();
            let since = drift.displacement(cloud, halo);
            let step = (since - drift.since).max(moved);
            drift.since = since;
            if reorder || drift.outgrown_by(since + 1.5 * step, radius) {
                let skin = drift.skin.max(4.0 * step);
                return self.rehalo(skin, reorder);
            }
        } else if reorder {
            cloud.reorder_morton();
        }
        // The geometry at the new positions, for the next step's first stage and for stable_dt.
        rebuild(cloud, list, scheme, search, &mut moving.seconds, backend)?;
        moving.current = true;
        Ok(())
    }

    /// The first non-finite state value, as an error. A split simulation's ranks check their
    /// own particles and agree on the first value one process finds (variable first, then
    /// particle).
    fn check_finite(&self, when: &'static str) -> Result<(), CloudError> {
        let own = self.own();
        let mine = (0..self.cloud.variables()).find_map(|v| {
            let i = own.start
                + self.cloud.state(v)[own.clone()]
                    .iter()
                    .position(|x| !x.is_finite())?;
            let x = self.cloud.position_of(i);
            let mut record = [v as u64, self.cloud.ids()[i], 0, 0, 0];
            for a in 0..D {
                record[2 + a] = x[a].to_bits();
            }
            Some(record)
        });
        let first = match self.halo() {
            Some(h) => {
                // Lowest variable over the ranks, then the lowest rank with it.
                let v = mine.map_or(u64::MAX, |r| r[0]);
                let lowest = u64::MAX - h.max_of(u64::MAX - v);
                h.first_failure(mine.filter(|r| r[0] == lowest))
            }
            None => mine,
        };
        match first {
            Some(r) => Err(CloudError::NonFinite {
                variable: r[0] as usize,
                id: r[1],
                position: format!(
                    "{:?}",
                    std::array::from_fn::<f64, D, _>(|a| f64::from_bits(r[2 + a]))
                ),
                when,
                step: self.steps,
                time: self.time,
            }),
            None => Ok(()),
        }
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

/// `pos[i] = x[i]` wrapped into `[lo, hi)` on a periodic axis.
fn wrap_axis<R: Real>(
    pos: &mut [R],
    x: &[R],
    periodic: bool,
    lo: f64,
    hi: f64,
    backend: CpuBackend,
) {
    let (lo_r, len) = (R::cast(lo), R::cast(hi - lo));
    backend.for_each_block(pos, 4096, |first, blk| {
        for (k, p) in blk.iter_mut().enumerate() {
            let v = x[first + k];
            *p = if periodic {
                let r = v - lo_r;
                let mut w = lo_r + (r - len * (r / len).floor());
                // rem_euclid can round up to exactly the length.
                if w >= lo_r + len {
                    w = lo_r;
                }
                w
            } else {
                v
            };
        }
    });
}

/// The rings of neighbours a split cloud's halo holds for `scheme` ([`crate::halo::rings`]).
fn halo_rings<R: Real, const D: usize, E: Equation<R, D>>(
    boundary: bool,
    scheme: &Muscl<R, D, E>,
) -> usize {
    crate::halo::rings(boundary, scheme.reads_neighbour_lists())
}

/// Searches neighbours and fits the MLS moments at the cloud's current positions.
fn rebuild<R: Real, const D: usize, E: Equation<R, D>, L: SlotLayout>(
    cloud: &Cloud<R, D>,
    list: &mut NeighbourList<L>,
    scheme: &mut Muscl<R, D, E>,
    search: &mut NeighbourSearch,
    seconds: &mut MotionSeconds,
    backend: CpuBackend,
) -> Result<(), CloudError> {
    let clock = std::time::Instant::now();
    if let Some(halo) = list.halo() {
        // A split cloud is searched on the whole cloud's bins (its extent now).
        let (min, max) = crate::halo::extent(halo.comm(), cloud.positions(), halo.own());
        search.set_bounds(&min, &max);
    }
    search.build(cloud, backend, list)?;
    seconds.search += clock.elapsed().as_secs_f64();
    let clock = std::time::Instant::now();
    scheme.prepare(cloud, list, backend)?;
    seconds.moments += clock.elapsed().as_secs_f64();
    Ok(())
}

/// One step's view of a moving simulation: every stage moves the cloud to the stage's
/// positions, rebuilds its geometry, and returns the state's rate of change following the
/// particles together with the particles' velocities (the positions' rate of change).
struct MovingOperator<'a, R: Real, const D: usize, E, L: SlotLayout> {
    /// A split cloud's halo reach, checked before every search.
    drift: Option<&'a mut Drift<R, D>>,
    cloud: &'a mut Cloud<R, D>,
    list: &'a mut NeighbourList<L>,
    scheme: &'a mut Muscl<R, D, E>,
    search: &'a mut NeighbourSearch,
    motion: &'a dyn Motion<R, D>,
    velocity: &'a mut [Buffer<R>; D],
    gradient: &'a mut Buffer<R>,
    current: &'a mut bool,
    seconds: &'a mut MotionSeconds,
    backend: CpuBackend,
}

impl<R: Real, const D: usize, E: Equation<R, D>, L: SlotLayout> StageOperator<R>
    for MovingOperator<'_, R, D, E, L>
{
    fn rhs(
        &mut self,
        _stage: usize,
        t: f64,
        u: &[&[R]],
        mut out: Vec<&mut [R]>,
    ) -> Result<(), CloudError> {
        let backend = self.backend;
        let m = u.len() - D;
        let (state, x) = u.split_at(m);
        if !*self.current {
            let clock = std::time::Instant::now();
            let domain = *self.cloud.domain();
            let (lo, hi) = domain.bounds();
            let periodic = domain.periodic();
            for (d, pos) in self.cloud.positions_mut().into_iter().enumerate() {
                wrap_axis(pos, x[d], periodic[d], lo[d], hi[d], backend);
            }
            self.seconds.motion += clock.elapsed().as_secs_f64();
            if let (Some(drift), Some(halo)) = (self.drift.as_deref_mut(), self.list.halo()) {
                let moved = drift.displacement(self.cloud, halo);
                if drift.outgrown_by(moved, self.search.radius()) {
                    drift.outgrown = true;
                    return Err(CloudError::invalid(
                        "halo",
                        format!("outgrown (particles moved {moved:.3e})"),
                        "particles that move less than half its skin within a step",
                    ));
                }
            }
            rebuild(
                self.cloud,
                self.list,
                self.scheme,
                self.search,
                self.seconds,
                backend,
            )?;
        }
        // The next stage has other positions.
        *self.current = false;
        let clock = std::time::Instant::now();
        let geometry = self.cloud.geometry();
        self.motion.velocities(
            t,
            geometry.positions,
            state,
            self.velocity.each_mut().map(|b| b.as_mut_slice()),
            backend,
        );
        let list = &*self.list;
        let w: [&[R]; D] = std::array::from_fn(|d| self.velocity[d].as_slice());
        self.scheme
            .velocity_gradients(list, w, self.gradient.as_mut_slice(), backend);
        self.seconds.motion += clock.elapsed().as_secs_f64();
        self.scheme
            .derivatives_pass(&geometry, list, state, backend);
        let (du, dx) = out.split_at_mut(m);
        let du: Vec<&mut [R]> = du.iter_mut().map(|o| &mut **o).collect();
        let velocities = Velocities {
            w,
            grad: self.gradient.as_slice(),
        };
        self.scheme.moving_flux_pass(
            &geometry,
            list,
            state,
            du,
            backend,
            geometry.orders,
            None,
            Some(velocities),
        );
        for (o, w) in dx.iter_mut().zip(self.velocity.iter()) {
            o.copy_from_slice(w.as_slice());
        }
        Ok(())
    }
}

impl<R: Real, const D: usize> Budgeted for Moving<R, D> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.work
            .iter()
            .chain(self.velocity.iter())
            .chain(std::iter::once(&self.gradient))
            .map(|b| b as &dyn BudgetedBuffer)
            .collect()
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.work
            .iter_mut()
            .chain(self.velocity.iter_mut())
            .chain(std::iter::once(&mut self.gradient))
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

/// The error for an IMEX stepper on a cloud moving with `motion`.
pub fn imex_on_moving_cloud(tableau: &ImexTableau, motion: &str) -> CloudError {
    CloudError::invalid(
        "IMEX stepper",
        tableau.name,
        format!(
            "a fixed cloud (this one moves with {motion}; moving IMEX runs are not available yet)"
        ),
    )
}

/// The error for MOOD combined with an IMEX stepper.
pub fn imex_without_mood(tableau: &ImexTableau) -> CloudError {
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
    fn rhs(
        &mut self,
        stage: usize,
        _t: f64,
        u: &[&[R]],
        mut out: Vec<&mut [R]>,
    ) -> Result<(), CloudError> {
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
        Ok(())
    }

    fn constrain(&mut self, t: f64, u: &mut [&mut [R]]) {
        self.boundaries.apply(t, u);
        // A split cloud's ranks impose their own boundary particles' states; the halo's come
        // from their owners (`split` keeps the boundaries of a cloud that has any on every
        // rank, so every rank exchanges).
        if let Some(halo) = self.list.halo()
            && self.boundaries.localised()
        {
            halo.exchange_columns(u);
        }
    }

    fn revises(&self) -> bool {
        self.mood.as_ref().is_some_and(|m| m.is_active())
    }

    fn halo(&self) -> Option<&crate::halo::Halo> {
        self.list.halo()
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
