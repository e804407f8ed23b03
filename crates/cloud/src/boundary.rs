//! Boundary conditions, attached per boundary tag.
//!
//! Boundary particles (tag != [`INTERIOR`], generated in layers outside non-periodic faces) are
//! not evolved: after every Runge-Kutta stage, and on the new state, each takes the state its
//! tag's condition gives it. Interior particles then exchange fluxes with them like with any
//! neighbour. Periodic axes have no boundary particles (the neighbour search wraps them).
//!
//! A condition sees the boundary particle's position, its face's outward normal, its initial
//! state and the state of its nearest interior neighbour (found once per neighbour search).
//! Built in: [`Dirichlet`] (keeps the initial state), [`Outflow`] (copies the nearest interior
//! state), [`SlipWall`] (copies it and reflects the normal momentum), [`Front`] (fixed states
//! either side of a moving planar front), [`Inflow`] (a prescribed
//! function of position and time); anything else implements [`BoundaryCondition`].

use mote_core::Real;

use crate::cloud::{Cloud, INTERIOR};
use crate::domain::Shape;
use crate::error::CloudError;
use crate::formula::boundary::reflected;
use crate::search::{NeighbourList, SlotLayout};

/// What a boundary particle's state is, given what it can see.
pub trait BoundaryCondition<R: Real, const D: usize>: Send + Sync {
    /// A short name for messages.
    fn name(&self) -> &str;

    /// The state of a boundary particle at `x` (outward unit `normal` of its face) at time `t`
    /// into `out`, from its `initial` state and the state of its nearest `interior` neighbour.
    fn state(
        &self,
        t: f64,
        x: [f64; D],
        normal: [f64; D],
        initial: &[R],
        interior: &[R],
        out: &mut [R],
    );

    /// The condition as data, if it is one of the built-in ones: what a device backend applies
    /// without calling back into host code. `None` (the default) for any other condition.
    fn builtin(&self) -> Option<BuiltinCondition> {
        None
    }
}

/// A built-in boundary condition as data.
#[derive(Clone, Debug, PartialEq)]
pub enum BuiltinCondition {
    /// [`Dirichlet`].
    Dirichlet,
    /// [`Outflow`].
    Outflow,
    /// [`SlipWall`] with its first momentum component.
    SlipWall {
        /// Index of the first momentum component.
        first_momentum: usize,
    },
    /// [`Front`].
    Front(Front),
}

/// One boundary particle as [`Boundaries::prepare`] found it.
pub struct BoundaryParticleRef<'a, R: Real, const D: usize> {
    /// Its index in the cloud.
    pub index: usize,
    /// Its nearest interior neighbour.
    pub interior: usize,
    /// The outward unit normal of its face.
    pub normal: [f64; D],
    /// Its position.
    pub position: [f64; D],
    /// Its initial state (one value per variable).
    pub initial: &'a [R],
    /// Its condition.
    pub condition: &'a dyn BoundaryCondition<R, D>,
}

/// Fixed Dirichlet: the particle keeps its initial state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dirichlet;

impl<R: Real, const D: usize> BoundaryCondition<R, D> for Dirichlet {
    fn name(&self) -> &str {
        "dirichlet"
    }
    fn state(&self, _: f64, _: [f64; D], _: [f64; D], initial: &[R], _: &[R], out: &mut [R]) {
        out.copy_from_slice(initial);
    }
    fn builtin(&self) -> Option<BuiltinCondition> {
        Some(BuiltinCondition::Dirichlet)
    }
}

/// Outflow (zero gradient): the state of the nearest interior neighbour.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outflow;

impl<R: Real, const D: usize> BoundaryCondition<R, D> for Outflow {
    fn name(&self) -> &str {
        "outflow"
    }
    fn state(&self, _: f64, _: [f64; D], _: [f64; D], _: &[R], interior: &[R], out: &mut [R]) {
        out.copy_from_slice(interior);
    }
    fn builtin(&self) -> Option<BuiltinCondition> {
        Some(BuiltinCondition::Outflow)
    }
}

/// Slip wall for a system whose momentum components are variables `first_momentum ..
/// first_momentum + D` (1 for Euler): the nearest interior state with the normal momentum
/// reversed, so that the flux through the wall carries no mass.
#[derive(Clone, Copy, Debug)]
pub struct SlipWall {
    /// Index of the first momentum component.
    pub first_momentum: usize,
}

impl Default for SlipWall {
    /// Euler's layout `(rho, rho u, E)`.
    fn default() -> Self {
        Self { first_momentum: 1 }
    }
}

impl<R: Real, const D: usize> BoundaryCondition<R, D> for SlipWall {
    fn name(&self) -> &str {
        "slip_wall"
    }
    fn state(&self, _: f64, _: [f64; D], normal: [f64; D], _: &[R], interior: &[R], out: &mut [R]) {
        out.copy_from_slice(interior);
        let k = self.first_momentum;
        let mut mn = R::zero();
        for d in 0..D {
            mn += interior[k + d] * R::cast(normal[d]);
        }
        for d in 0..D {
            out[k + d] = reflected(interior[k + d], mn, R::cast(normal[d]));
        }
    }
    fn builtin(&self) -> Option<BuiltinCondition> {
        Some(BuiltinCondition::SlipWall {
            first_momentum: self.first_momentum,
        })
    }
}

/// A planar front across `axis` at `origin + speed * t`: a boundary particle whose coordinate
/// along `axis` is below the front takes the fixed state `behind`; one at or beyond it takes
/// `ahead` (a fixed state, or a slip wall). A time-dependent inflow that is data, so a device
/// backend applies it: the double Mach reflection's top (the incident shock) and bottom (gas
/// ahead of the wedge, a wall after it) are fronts.
#[derive(Clone, Debug, PartialEq)]
pub struct Front {
    /// A name for messages.
    pub name: String,
    /// The axis the front moves along.
    pub axis: usize,
    /// Its position at `t = 0`.
    pub origin: f64,
    /// Its speed along `axis`.
    pub speed: f64,
    /// The conservative state behind it (one value per variable).
    pub behind: Vec<f64>,
    /// What is ahead of it.
    pub ahead: FrontAhead,
}

/// What lies ahead of a [`Front`].
#[derive(Clone, Debug, PartialEq)]
pub enum FrontAhead {
    /// A fixed conservative state.
    State(Vec<f64>),
    /// A slip wall ([`SlipWall`]).
    SlipWall {
        /// Index of the first momentum component.
        first_momentum: usize,
    },
}

impl Front {
    /// The front's position at time `t` (the one formula every backend uses).
    pub fn position(&self, t: f64) -> f64 {
        self.origin + self.speed * t
    }

    /// Checks the front against a cloud of `variables` in `D` dimensions: an axis below `D`,
    /// a finite origin and speed, states of `variables` values, a wall's momentum among them.
    pub fn validate<const D: usize>(&self, variables: usize) -> Result<(), CloudError> {
        let name = &self.name;
        if self.axis >= D {
            return Err(CloudError::invalid(
                "front axis",
                format!("{} (front `{name}`)", self.axis),
                format!("below {D}"),
            ));
        }
        if !(self.origin.is_finite() && self.speed.is_finite()) {
            return Err(CloudError::invalid(
                "front origin and speed",
                format!("{} and {} (front `{name}`)", self.origin, self.speed),
                "finite numbers",
            ));
        }
        let state_len = |field: &'static str, s: &[f64]| {
            if s.len() == variables {
                Ok(())
            } else {
                Err(CloudError::invalid(
                    field,
                    format!("{} values (front `{name}`)", s.len()),
                    format!("one per variable ({variables})"),
                ))
            }
        };
        state_len("front state behind", &self.behind)?;
        match &self.ahead {
            FrontAhead::State(s) => state_len("front state ahead", s),
            &FrontAhead::SlipWall { first_momentum } if first_momentum + D > variables => {
                Err(CloudError::invalid(
                    "front wall momentum components",
                    format!("{first_momentum}..{} (front `{name}`)", first_momentum + D),
                    format!("components among the {variables} variables"),
                ))
            }
            FrontAhead::SlipWall { .. } => Ok(()),
        }
    }
}

impl<R: Real, const D: usize> BoundaryCondition<R, D> for Front {
    fn name(&self) -> &str {
        &self.name
    }
    fn state(
        &self,
        t: f64,
        x: [f64; D],
        normal: [f64; D],
        initial: &[R],
        interior: &[R],
        out: &mut [R],
    ) {
        let fixed = |s: &[f64], out: &mut [R]| {
            for (o, &v) in out.iter_mut().zip(s) {
                *o = R::cast(v);
            }
        };
        if x[self.axis] < self.position(t) {
            fixed(&self.behind, out);
            return;
        }
        match &self.ahead {
            FrontAhead::State(s) => fixed(s, out),
            &FrontAhead::SlipWall { first_momentum } => {
                SlipWall { first_momentum }.state(t, x, normal, initial, interior, out)
            }
        }
    }
    fn builtin(&self) -> Option<BuiltinCondition> {
        Some(BuiltinCondition::Front(self.clone()))
    }
}

/// Time-dependent inflow: `f(t, x, out)` writes the state.
pub struct Inflow<F>(pub F);

impl<R: Real, const D: usize, F> BoundaryCondition<R, D> for Inflow<F>
where
    F: Fn(f64, [f64; D], &mut [R]) + Send + Sync,
{
    fn name(&self) -> &str {
        "inflow"
    }
    fn state(&self, t: f64, x: [f64; D], _: [f64; D], _: &[R], _: &[R], out: &mut [R]) {
        (self.0)(t, x, out)
    }
}

/// The conditions of a run, per tag, and what they need per boundary particle.
pub struct Boundaries<R: Real, const D: usize> {
    conditions: Vec<(u32, Box<dyn BoundaryCondition<R, D>>)>,
    /// Per boundary particle: its index, the index of its condition, its nearest interior
    /// neighbour, its outward normal, its position.
    particles: Vec<BoundaryParticle<D>>,
    /// Initial states, `m` per boundary particle.
    initial: Vec<R>,
    variables: usize,
    /// Whether a split cloud's rank holds its part of these ([`Boundaries::prepare_own`]).
    localised: bool,
}

#[derive(Clone, Copy, Debug)]
struct BoundaryParticle<const D: usize> {
    index: usize,
    condition: usize,
    interior: usize,
    normal: [f64; D],
    position: [f64; D],
}

/// Why a boundary particle could not be prepared, with what its message names.
#[derive(Clone, Copy, Debug)]
enum Failure<const D: usize> {
    /// No condition for the particle's tag.
    NoCondition { tag: u32, position: [f64; D] },
    /// No interior particle within two neighbour hops.
    NoInterior { tag: u32, position: [f64; D] },
}

impl<const D: usize> Failure<D> {
    /// The error, for the particle with (one-process) index `i`.
    fn error(self, i: usize) -> CloudError {
        match self {
            Failure::NoCondition { tag, position } => CloudError::invalid(
                "boundary conditions",
                format!(
                    "none for tag {tag} ({}), which particle {i} at {position:?} carries",
                    describe_tag::<D>(tag)
                ),
                "a condition for every boundary tag of the cloud",
            ),
            Failure::NoInterior { tag, position } => CloudError::invalid(
                "boundary particle",
                format!("{i} at {position:?} (tag {tag})"),
                "an interior particle within two neighbour hops: widen the radius or use \
                 fewer boundary layers",
            ),
        }
    }

    /// The failure of particle `i` as words that travel between ranks: kind, index, tag and
    /// position (up to three coordinates).
    fn record(self, i: usize) -> [u64; 6] {
        let (kind, tag, position) = match self {
            Failure::NoCondition { tag, position } => (0, tag, position),
            Failure::NoInterior { tag, position } => (1, tag, position),
        };
        let mut r = [kind, i as u64, tag as u64, 0, 0, 0];
        for (w, x) in r[3..].iter_mut().zip(position) {
            *w = x.to_bits();
        }
        r
    }

    /// The failure a [`record`](Self::record) holds.
    fn from_record(r: &[u64; 6]) -> Self {
        let tag = r[2] as u32;
        let position = std::array::from_fn(|d| f64::from_bits(r[3 + d]));
        if r[0] == 0 {
            Failure::NoCondition { tag, position }
        } else {
            Failure::NoInterior { tag, position }
        }
    }
}

impl<R: Real, const D: usize> Default for Boundaries<R, D> {
    fn default() -> Self {
        Self {
            conditions: Vec::new(),
            particles: Vec::new(),
            initial: Vec::new(),
            variables: 0,
            localised: false,
        }
    }
}

impl<R: Real, const D: usize> Boundaries<R, D> {
    /// No conditions (a fully periodic domain).
    pub fn new() -> Self {
        Self::default()
    }

    /// Attaches `condition` to the particles tagged `tag` (for a box face: see
    /// [`Cloud::face_tag`]). A later condition for the same tag replaces the earlier one.
    pub fn with(mut self, tag: u32, condition: impl BoundaryCondition<R, D> + 'static) -> Self {
        self.conditions.retain(|(t, _)| *t != tag);
        self.conditions.push((tag, Box::new(condition)));
        self
    }

    /// Attaches `condition` to both faces of `axis` (a box).
    pub fn with_axis(
        self,
        axis: usize,
        condition: impl BoundaryCondition<R, D> + Clone + 'static,
    ) -> Self {
        self.with(Cloud::<R, D>::face_tag(axis, false), condition.clone())
            .with(Cloud::<R, D>::face_tag(axis, true), condition)
    }

    /// Whether any boundary particle exists: false until [`prepare`](Self::prepare) has found
    /// them (a simulation's `with_boundaries` prepares). Before that, ask
    /// [`has_conditions`](Self::has_conditions).
    pub fn is_empty(&self) -> bool {
        self.particles.is_empty()
    }

    /// Whether any condition is attached (a fully periodic problem has none).
    pub fn has_conditions(&self) -> bool {
        !self.conditions.is_empty()
    }

    /// Number of boundary particles.
    pub fn len(&self) -> usize {
        self.particles.len()
    }

    /// Finds every boundary particle's condition, nearest interior neighbour and normal, and
    /// records the initial states. An error names a tag without a condition, or a boundary
    /// particle with no interior particle within the search radius.
    pub fn prepare<L: SlotLayout>(
        &mut self,
        cloud: &Cloud<R, D>,
        list: &NeighbourList<L>,
    ) -> Result<(), CloudError> {
        self.start(cloud)?;
        for i in 0..cloud.len() {
            if let Some(p) = self.find(cloud, list, i).map_err(|f| f.error(i))? {
                self.keep(cloud, p);
            }
        }
        Ok(())
    }

    /// [`prepare`](Self::prepare) on a rank's part of a split cloud (`halo`, two rings of
    /// neighbours, searched on the whole cloud's bins): its own boundary particles, in local
    /// indices. Their lists and their neighbours' are the one-process lists and local indices
    /// order as one-process ones, so each finds its one-process nearest interior particle. The
    /// halo's boundary particles take their owners' states by exchange. A failure is agreed:
    /// every rank returns the one-process error (the first failing particle in the one-process
    /// order, the lowest failing rank's). Collective.
    pub fn prepare_own<L: SlotLayout>(
        &mut self,
        cloud: &Cloud<R, D>,
        list: &NeighbourList<L>,
        halo: &crate::halo::Halo,
    ) -> Result<(), CloudError> {
        self.start(cloud)?;
        let mut failure = None;
        for i in halo.own() {
            match self.find(cloud, list, i) {
                Ok(Some(p)) => self.keep(cloud, p),
                Ok(None) => {}
                Err(f) => {
                    failure = Some(f.record(halo.global()[i]));
                    break;
                }
            }
        }
        if let Some(r) = halo.first_failure(failure) {
            return Err(Failure::<D>::from_record(&r).error(r[1] as usize));
        }
        self.localised = halo.max_of(u64::from(!self.particles.is_empty())) == 1;
        Ok(())
    }

    /// Checks the conditions against `cloud`'s variables and forgets any earlier preparation.
    fn start(&mut self, cloud: &Cloud<R, D>) -> Result<(), CloudError> {
        let m = cloud.variables();
        for (_, c) in &self.conditions {
            if let Some(BuiltinCondition::Front(f)) = c.builtin() {
                f.validate::<D>(m)?;
            }
        }
        self.variables = m;
        self.particles.clear();
        self.initial.clear();
        Ok(())
    }

    /// Boundary particle `i`'s condition, nearest interior neighbour (within two neighbour hops
    /// in `list`; ties to the smaller index) and normal; `None` for an interior particle.
    fn find<L: SlotLayout>(
        &self,
        cloud: &Cloud<R, D>,
        list: &NeighbourList<L>,
        i: usize,
    ) -> Result<Option<BoundaryParticle<D>>, Failure<D>> {
        let tags = cloud.tags();
        let domain = cloud.domain();
        let tag = tags[i];
        if tag == INTERIOR {
            return Ok(None);
        }
        let xi = cloud.position_of(i);
        let condition = self
            .conditions
            .iter()
            .position(|(t, _)| *t == tag)
            .ok_or(Failure::NoCondition { tag, position: xi })?;
        let mut best: Option<(f64, usize)> = None;
        let consider = |best: &mut Option<(f64, usize)>, j: usize| {
            if tags[j] == INTERIOR {
                let r2 = domain.distance_squared(xi, cloud.position_of(j));
                // Ties: the smaller index (deterministic).
                if best.is_none_or(|(b, k)| r2 < b || (r2 == b && j < k)) {
                    *best = Some((r2, j));
                }
            }
        };
        for j in list.neighbours(i) {
            consider(&mut best, j as usize);
        }
        if best.is_none() {
            // Corners of the boundary layers can lie beyond the radius from every interior
            // particle: look two neighbour hops away.
            for j in list.neighbours(i) {
                for k in list.neighbours(j as usize) {
                    consider(&mut best, k as usize);
                }
            }
        }
        let (_, interior) = best.ok_or(Failure::NoInterior { tag, position: xi })?;
        let normal = match domain.shape() {
            Shape::Box { .. } => {
                let axis = ((tag - 1) / 2) as usize;
                let mut e = [0.0; D];
                e[axis.min(D - 1)] = if (tag - 1) % 2 == 1 { 1.0 } else { -1.0 };
                e
            }
            Shape::Sphere { centre, .. } => {
                let r: [f64; D] = std::array::from_fn(|d| xi[d] - centre[d]);
                let len = r
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>()
                    .sqrt()
                    .max(f64::MIN_POSITIVE);
                r.map(|x| x / len)
            }
        };
        Ok(Some(BoundaryParticle {
            index: i,
            condition,
            interior,
            normal,
            position: xi,
        }))
    }

    /// Records boundary particle `p` and its initial state.
    fn keep(&mut self, cloud: &Cloud<R, D>, p: BoundaryParticle<D>) {
        let m = self.variables;
        self.initial.extend((0..m).map(|v| cloud.state(v)[p.index]));
        self.particles.push(p);
    }

    /// Whether these are a rank's part of a split cloud's boundary particles
    /// ([`prepare_own`](Self::prepare_own)), the whole cloud having some (true on every rank alike):
    /// the halo's boundary states are then exchanged after the conditions are imposed.
    pub fn localised(&self) -> bool {
        self.localised
    }

    /// Sets every boundary particle's state at time `t` (interior particles are read, never
    /// written).
    pub fn apply(&self, t: f64, u: &mut [&mut [R]]) {
        let m = self.variables;
        let mut interior = [R::zero(); crate::cloud::MAX_VARIABLES];
        let mut out = [R::zero(); crate::cloud::MAX_VARIABLES];
        for (k, p) in self.particles.iter().enumerate() {
            for v in 0..m {
                interior[v] = u[v][p.interior];
            }
            let initial = &self.initial[k * m..(k + 1) * m];
            self.conditions[p.condition].1.state(
                t,
                p.position,
                p.normal,
                initial,
                &interior[..m],
                &mut out[..m],
            );
            for v in 0..m {
                u[v][p.index] = out[v];
            }
        }
    }

    /// The indices of the boundary particles.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.particles.iter().map(|p| p.index)
    }

    /// The boundary particles as [`prepare`](Self::prepare) found them, in the order
    /// [`apply`](Self::apply) visits them.
    pub fn particles(&self) -> impl Iterator<Item = BoundaryParticleRef<'_, R, D>> + '_ {
        let m = self.variables;
        self.particles
            .iter()
            .enumerate()
            .map(move |(k, p)| BoundaryParticleRef {
                index: p.index,
                interior: p.interior,
                normal: p.normal,
                position: p.position,
                initial: &self.initial[k * m..(k + 1) * m],
                condition: &*self.conditions[p.condition].1,
            })
    }

    /// Variables per particle (set by [`prepare`](Self::prepare)).
    pub fn variables(&self) -> usize {
        self.variables
    }
}

/// "x low face" etc. for a box face tag.
fn describe_tag<const D: usize>(tag: u32) -> String {
    let axis = ((tag.max(1) - 1) / 2) as usize;
    if axis < D {
        let side = if (tag - 1) % 2 == 1 { "high" } else { "low" };
        format!("{} {side} face", ["x", "y", "z"][axis])
    } else {
        "unknown face".into()
    }
}
