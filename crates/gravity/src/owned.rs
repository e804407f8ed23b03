//! Gravity over ranks that each hold only their own particles (decision 0028).
//!
//! Each rank owns the particles of its range of the Morton curve ([`Ownership`], over
//! [`mote_core::decomposition::Domains`]): it kicks and drifts them, and after every step the
//! particles that left its range move to their new owner with every array; when the measured
//! work of the ranks drifts apart by more than a set ratio, the curve is cut again. A force
//! evaluation ([`OwnedSolver`]) gathers every rank's positions and masses into the one-process
//! order (each particle's *slot*, its index in the one-process arrays, [`Slots`]) and has the
//! solver compute the accelerations of this rank's particles (direct summation), or its own
//! cost-balanced share of every particle's, sent to their owners (the tree's groups): the same
//! sums as on one process, so results are bitwise identical on any number of ranks. Output
//! copies each rank's rows of the one-process arrays to it ([`rows_in_slot_order`]), which the
//! ranks stream to rank 0 in order: the one-process files.
//!
//! The CPU tree needs no gathered sources ([`ForceSolver::owned_accelerations`], decision 0029):
//! each rank builds its part of the one-process tree and receives the part of the other ranks'
//! trees its walks open (its locally essential tree). Direct summation gathers every source
//! (every target needs them all), and so do the device solvers.

use std::sync::Arc;

use mote_core::comm::{self, Comm};
use mote_core::decomposition::{self, Domains};
use mote_core::{
    Budgeted, BudgetedBuffer, Buffer, COMPONENTS, CapacityError, Component, ParticleData,
    Permutation, Real, Scaling, Vec3Span, Vec3SpanMut,
};

use crate::softening::Softening;
use crate::solver::{ForceSolver, NonFiniteWatch, Share, SolverInfo};

/// Where each particle (by id) sits in the one-process arrays: the order every sum runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slots {
    /// Ids `first..first + n` in order: `0..n` for generated initial conditions and every
    /// checkpoint of them, often `1..=n` for a file's.
    Consecutive {
        /// The id of slot 0.
        first: u64,
        /// The number of particles.
        n: usize,
    },
    /// Any other ids (a file's): the ids sorted, with their slots.
    Map(Vec<(u64, usize)>),
}

impl Slots {
    /// Ids `0..n` in order.
    pub fn identity(n: usize) -> Self {
        Slots::Consecutive { first: 0, n }
    }

    /// The slots of the particles with `ids`, in the one-process order.
    ///
    /// # Panics
    /// If an id repeats.
    pub fn of(ids: &[u64]) -> Self {
        Self::of_rows(&comm::SingleProcess, ids, 0)
    }

    /// The slots of every rank's rows of the one-process order: this rank holds the rows
    /// `first..first + ids.len()` (their `ids`, in order), the ranks' rows following one another
    /// in rank order. [`Slots::Consecutive`] where the ids run on by one from row to row over
    /// every rank (generated initial conditions, their checkpoints, most files: nothing is
    /// gathered); otherwise every rank's ids are gathered into the map (a file's shuffled
    /// ids). Collective.
    ///
    /// # Panics
    /// If an id repeats.
    pub fn of_rows(comm: &dyn Comm, ids: &[u64], first: usize) -> Self {
        // This rank's id of row 0, if its ids run on by one (a rank without rows has no say).
        let base = match ids.first() {
            None => Some(None),
            Some(&id0) => id0
                .checked_sub(first as u64)
                .filter(|&b| {
                    ids.iter()
                        .enumerate()
                        .all(|(i, &id)| Some(id) == b.checked_add((first + i) as u64))
                })
                .map(Some),
        };
        // Consecutive over the ranks: every rank's ids run on, from one base.
        let broken = comm::max_of(comm, u64::from(base.is_none()));
        let high = comm::max_of(comm, base.flatten().unwrap_or(0));
        let low = u64::MAX - comm::max_of(comm, u64::MAX - base.flatten().unwrap_or(u64::MAX));
        if broken == 0 && low == high {
            let n = comm::sum_of(comm, ids.len() as u64) as usize;
            return Slots::Consecutive {
                first: if n == 0 { 0 } else { low },
                n,
            };
        }
        let (all, _) = comm::all_gather_varied(comm, ids);
        let mut map: Vec<(u64, usize)> = all.iter().copied().zip(0..).collect();
        map.sort_unstable();
        assert!(
            map.windows(2).all(|w| w[0].0 != w[1].0),
            "particle ids repeat"
        );
        Slots::Map(map)
    }

    /// The number of particles.
    pub fn len(&self) -> usize {
        match self {
            Slots::Consecutive { n, .. } => *n,
            Slots::Map(m) => m.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot of the particle `id`.
    ///
    /// # Panics
    /// If no particle has that id.
    pub fn slot(&self, id: u64) -> usize {
        match self {
            Slots::Consecutive { first, n } => {
                let slot = id.wrapping_sub(*first);
                assert!(id >= *first && slot < *n as u64, "no particle has id {id}");
                slot as usize
            }
            Slots::Map(m) => {
                let k = m.partition_point(|&(i, _)| i < id);
                assert!(k < m.len() && m[k].0 == id, "no particle has id {id}");
                m[k].1
            }
        }
    }
}

/// Which particles this rank owns, and when they are cut again.
#[derive(Clone, Debug)]
pub struct Ownership {
    comm: Arc<dyn Comm>,
    domains: Domains,
    threshold: f64,
    rebalances: u64,
    migrated: u64,
}

impl Ownership {
    /// Cuts the particles into ranges of equal count along the Morton curve and returns this
    /// rank's ownership and particles (in slot order). `rows` is this rank's rows of the
    /// one-process order (`comm::even_ranges`: generated or read by rows, no rank holding every
    /// particle), which move to their owners. `threshold` is the largest rank's work over the
    /// mean above which [`Ownership::settle`] cuts again. Collective.
    pub fn start<R: Real>(
        comm: Arc<dyn Comm>,
        mut rows: ParticleData<R>,
        slots: &Slots,
        threshold: f64,
    ) -> (Self, ParticleData<R>) {
        let (x, y, z) = rows.positions().components();
        let domains = Domains::balanced(comm.as_ref(), 3, [x, y, z], &vec![1; rows.len()]);
        let destinations = domains.destinations([x, y, z]);
        rows.migrate(comm.as_ref(), &destinations)
            .expect("an unreserved container grows");
        // In slot order, as every rank's particles are after their first cut.
        let keys: Vec<usize> = rows.ids().iter().map(|&id| slots.slot(id)).collect();
        rows.apply_permutation(&Permutation::sorting_by_key(&keys));
        (
            Self {
                comm,
                domains,
                threshold,
                rebalances: 0,
                migrated: 0,
            },
            rows,
        )
    }

    /// After a step: cuts the curve again if the ranks' work (`costs`, one per particle of
    /// `p`; empty for a count) is out of balance by more than the threshold, then moves every
    /// particle to its owner. Collective.
    pub fn settle<R: Real>(
        &mut self,
        p: &mut ParticleData<R>,
        costs: &[u64],
    ) -> Result<(), CapacityError> {
        let costs: Vec<u64> = if costs.len() == p.len() {
            costs.iter().map(|&c| c.max(1)).collect()
        } else {
            vec![1; p.len()]
        };
        let (x, y, z) = p.positions().components();
        // A new cut where the work drifted apart, or where the particles outgrew the cut's cube
        // (the tree's keys would no longer follow the ranges: groups shared by two ranks).
        let outgrown = Domains::cube_of(self.comm.as_ref(), 3, [x, y, z]) != self.domains.cube();
        let imbalance = decomposition::imbalance(self.comm.as_ref(), costs.iter().sum());
        if outgrown || imbalance > self.threshold {
            self.domains = Domains::balanced(self.comm.as_ref(), 3, [x, y, z], &costs);
            self.rebalances += 1;
        }
        let destinations = self.domains.destinations([x, y, z]);
        let moved = p.migrate(self.comm.as_ref(), &destinations)?;
        self.migrated += moved.sent as u64;
        Ok(())
    }

    /// The current cut.
    pub fn domains(&self) -> &Domains {
        &self.domains
    }

    /// Times the curve was cut again.
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    /// Particles this rank has sent to others.
    pub fn migrated(&self) -> u64 {
        self.migrated
    }
}

/// This rank's rows of the one-process arrays (what a run's files hold, in slot order): the
/// particles whose slots fall in this rank's even range of the slots (`comm::even_ranges`),
/// copied from their owners with every component, in slot order. Rank `r`'s rows follow those
/// of the ranks below it, so the ranks stream them to rank 0 in rank order
/// (`mote_core::comm::RootStream`) without any rank holding them all. Collective.
pub fn rows_in_slot_order<R: Real>(
    comm: &dyn Comm,
    p: &ParticleData<R>,
    slots: &Slots,
) -> ParticleData<R> {
    // A copy outside any reservation: a rank's rows need not be as many as its particles.
    let components: [&[R]; COMPONENTS] = Component::ALL.map(|c| p.component(c));
    let mut rows = ParticleData::restore(components, p.ids());
    let n = comm::sum_of(comm, p.len() as u64) as usize;
    let ranges = comm::even_ranges(n, comm.size());
    let owner = |slot: usize| ranges.partition_point(|r| r.end <= slot) as u32;
    let destinations: Vec<u32> = p.ids().iter().map(|&id| owner(slots.slot(id))).collect();
    rows.migrate(comm, &destinations)
        .expect("an unreserved copy grows");
    let keys: Vec<usize> = rows.ids().iter().map(|&id| slots.slot(id)).collect();
    rows.apply_permutation(&Permutation::sorting_by_key(&keys));
    rows
}

/// A force solver over owned particles: before each evaluation, every rank's positions and
/// masses are gathered into the one-process order; the inner solver then computes this rank's
/// particles' accelerations ([`ForceSolver::accelerations_of`]), or, where it balances its own
/// work (the tree), its share of every particle's, handed to their owners
/// ([`ForceSolver::share`]). Only [`ForceSolver::update`] and [`ForceSolver::potential`], which
/// see the particles' ids, can be used.
pub struct OwnedSolver<R: Real> {
    inner: Box<dyn ForceSolver<R>>,
    comm: Arc<dyn Comm>,
    slots: Arc<Slots>,
    /// Every particle's position and mass in slot order.
    sources: Sources<R>,
    targets: Vec<usize>,
    costs: Vec<u64>,
    /// Each slot's owning rank, and this rank's particles' local indices by slot (from the
    /// last gather): where a shared evaluation's results go.
    owner: Vec<u32>,
    local_of: Vec<u32>,
    watch: NonFiniteWatch,
    /// The ranks' ranges of the curve (for solvers that exchange only what they need).
    cut: Option<Domains>,
    /// Whether the last evaluation needed only this rank's particles (no gathered sources).
    own_path: bool,
}

/// The gathered positions and masses, budgeted with the run (every particle, on every rank).
struct Sources<R: Real>([Buffer<R>; 4]);

impl<R: Real> Budgeted for Sources<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.0.iter().map(|b| b as &dyn BudgetedBuffer).collect()
    }

    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.0
            .iter_mut()
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

impl<R: Real> OwnedSolver<R> {
    /// `inner` over the ranks of `comm`, for the particles `slots` places.
    pub fn new(inner: Box<dyn ForceSolver<R>>, comm: Arc<dyn Comm>, slots: Arc<Slots>) -> Self {
        let b = |name| Buffer::new(name, Scaling::PerParticle(1));
        Self {
            inner,
            comm,
            slots,
            sources: Sources([
                b("source_x"),
                b("source_y"),
                b("source_z"),
                b("source_mass"),
            ]),
            targets: Vec::new(),
            costs: Vec::new(),
            owner: Vec::new(),
            local_of: Vec::new(),
            watch: NonFiniteWatch::default(),
            cut: None,
            own_path: false,
        }
    }

    /// The same solver, told the ranks' current cut (after [`Ownership::start`]; the run
    /// passes each new one with [`ForceSolver::set_cut`]): a solver that builds from each
    /// rank's own particles (the tree) then moves only the particles that left their range.
    pub fn with_cut(mut self, cut: &Domains) -> Self {
        self.cut = Some(cut.clone());
        self
    }

    /// This rank's particles' slots, into `targets`.
    fn place(&mut self, p: &ParticleData<R>) {
        self.targets.clear();
        self.targets
            .extend(p.ids().iter().map(|&id| self.slots.slot(id)));
    }

    /// Gathers every rank's positions and masses into slot order (`targets` placed first).
    fn gather(&mut self, p: &ParticleData<R>) {
        let size = std::mem::size_of::<R>();
        let record = 8 + 4 * size;
        let n = self.slots.len();
        let (x, y, z) = p.positions().components();
        let m = p.masses();
        let mut mine = Vec::with_capacity(p.len() * record);
        for i in 0..p.len() {
            mine.extend_from_slice(&(self.targets[i] as u64).to_le_bytes());
            for v in [x[i], y[i], z[i], m[i]] {
                mine.extend_from_slice(bytemuck::bytes_of(&v));
            }
        }
        let mut counts = vec![0u64; self.comm.size()];
        comm::all_gather(
            self.comm.as_ref(),
            &[mine.len() as u64],
            &vec![1; self.comm.size()],
            &mut counts,
        );
        let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
        let mut all = vec![0u8; counts.iter().sum()];
        self.comm.all_gather_bytes(&mine, &counts, &mut all);
        assert_eq!(all.len(), n * record, "every particle is on one rank");
        for b in &mut self.sources.0 {
            b.resize(n, R::zero())
                .expect("the sources were reserved for every particle");
        }
        let [sx, sy, sz, sm] = &mut self.sources.0;
        let (sx, sy, sz, sm) = (
            sx.as_mut_slice(),
            sy.as_mut_slice(),
            sz.as_mut_slice(),
            sm.as_mut_slice(),
        );
        self.owner.resize(n, 0);
        self.local_of.resize(n, 0);
        for (k, &slot) in self.targets.iter().enumerate() {
            self.local_of[slot] = k as u32;
        }
        // The records arrive in rank order: rank r's are the r-th run of `counts[r]` bytes.
        let mut rank = 0;
        let mut rank_end = counts[0];
        for (j, r) in all.chunks_exact(record).enumerate() {
            while j * record >= rank_end {
                rank += 1;
                rank_end += counts[rank];
            }
            let slot = u64::from_le_bytes(r[..8].try_into().expect("8 bytes")) as usize;
            self.owner[slot] = rank as u32;
            let v =
                |k: usize| bytemuck::pod_read_unaligned::<R>(&r[8 + k * size..8 + (k + 1) * size]);
            (sx[slot], sy[slot], sz[slot], sm[slot]) = (v(0), v(1), v(2), v(3));
        }
    }
}

impl<R: Real> SolverInfo for OwnedSolver<R> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn softening(&self) -> Softening {
        self.inner.softening()
    }

    /// This rank's targets' interactions.
    fn interactions(&self) -> u64 {
        self.inner.interactions()
    }
}

impl<R: Real> ForceSolver<R> for OwnedSolver<R> {
    fn accelerations(&mut self, _: Vec3Span<'_, R>, _: &[R], _: Vec3SpanMut<'_, R>) {
        panic!("a solver over owned particles needs their ids: call `update`");
    }

    fn potential_energy(&mut self, _: Vec3Span<'_, R>, _: &[R]) -> f64 {
        panic!("a solver over owned particles needs their ids: call `potential`");
    }

    fn update(&mut self, p: &mut ParticleData<R>) {
        self.costs.resize(p.len(), 0);
        self.place(p);
        let mut costs = std::mem::take(&mut self.costs);
        // A solver that needs only this rank's particles and what it exchanges (the tree's
        // locally essential tree); the others get every rank's sources.
        let own = {
            let v = p.view_mut();
            self.inner.owned_accelerations(
                v.position.as_span(),
                v.mass,
                &self.targets,
                self.cut.as_ref(),
                v.acceleration,
                &mut costs,
            )
        };
        self.own_path = own;
        if !own {
            self.gather(p);
        }
        let targets = std::mem::take(&mut self.targets);
        if !own {
            let [x, y, z, m] = &self.sources.0;
            let sources = Vec3Span::new(x.as_slice(), y.as_slice(), z.as_slice());
            let v = p.view_mut();
            // A solver that balances its own work computes its share, handed to the owners;
            // the others compute this rank's targets.
            match self.inner.share(sources, m.as_slice()) {
                Some(share) => deliver(
                    self.comm.as_ref(),
                    &self.owner,
                    &self.local_of,
                    share,
                    v.acceleration,
                    &mut costs,
                ),
                None => self.inner.accelerations_of(
                    sources,
                    m.as_slice(),
                    &targets,
                    v.acceleration,
                    &mut costs,
                ),
            }
        }
        let evaluation = self.watch.count();
        let mut acc = p.view_mut().acceleration;
        // A test's fault: one rank's result goes bad at the third evaluation.
        if evaluation == 3 && !acc.is_empty() && comm::fault("nan", self.comm.rank()) {
            acc.set(0, [R::nan(); 3]);
        }
        let (x, y, z) = acc.components_mut();
        self.watch.look([&*x, &*y, &*z], |k| targets[k]);
        self.targets = targets;
        self.costs = costs;
    }

    fn potential(&mut self, p: &ParticleData<R>) -> f64 {
        self.place(p);
        if let Some(w) =
            self.inner
                .owned_potential(p.positions(), p.masses(), &self.targets, self.cut.as_ref())
        {
            return w;
        }
        self.gather(p);
        let [x, y, z, m] = &self.sources.0;
        let sources = Vec3Span::new(x.as_slice(), y.as_slice(), z.as_slice());
        self.inner.potential_energy(sources, m.as_slice())
    }

    fn first_non_finite(&self) -> Option<(u64, usize)> {
        self.watch.first()
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn costs(&self) -> &[u64] {
        &self.costs
    }

    fn set_cut(&mut self, cut: &Domains) {
        self.cut = Some(cut.clone());
    }

    /// The inner solver's arrays, and the gathered sources where the last evaluation used them
    /// (a tree evaluated over owned particles needs none: not priced or reserved, and should
    /// an evaluation fall back to them, they grow outside the reservation).
    fn budgeted(&mut self) -> Vec<&mut dyn Budgeted> {
        let mut parts = self.inner.budgeted();
        if !self.own_path {
            parts.push(&mut self.sources);
        }
        parts
    }

    fn holds_every_particle(&self) -> bool {
        !self.own_path
    }
}

/// Hands a shared evaluation's results to the particles' owners (one personalised exchange;
/// a rank's own results stay): afterwards every particle of this rank has its acceleration and
/// cost. Collective.
fn deliver<R: Real>(
    comm: &dyn Comm,
    owner: &[u32],
    local_of: &[u32],
    share: Share<R>,
    acc: Vec3SpanMut<'_, R>,
    costs: &mut [u64],
) {
    let (ax, ay, az) = acc.components_mut();
    let n = costs.len();
    let got = hand_back(
        comm,
        share.index.iter().map(|&i| (owner[i] as usize, i as u64)),
        share.acc.each_ref().map(|v| &v[..]),
        &share.cost,
        |slot, a, cost| {
            let l = local_of[slot as usize] as usize;
            (ax[l], ay[l], az[l]) = (a[0], a[1], a[2]);
            costs[l] = cost;
        },
    );
    assert_eq!(got, n, "every particle of this rank got one result");
}

/// Sends each result (acceleration `acc[.][k]` and cost `cost[k]`) to the rank `to` names for
/// it with its key (`to` yields `(rank, key)` per result, in order), in one personalised
/// exchange; `put(key, acceleration, cost)` stores every result this rank keeps or receives.
/// Returns how many it stored. Collective.
pub(crate) fn hand_back<T: Real>(
    comm: &dyn Comm,
    to: impl Iterator<Item = (usize, u64)>,
    acc: [&[T]; 3],
    cost: &[u64],
    mut put: impl FnMut(u64, [T; 3], u64),
) -> usize {
    let (size, me) = (comm.size(), comm.rank());
    let bytes = std::mem::size_of::<T>();
    let record = 16 + 3 * bytes;
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); size];
    let mut got = 0;
    for (k, (rank, key)) in to.enumerate() {
        let a = [acc[0][k], acc[1][k], acc[2][k]];
        if rank == me {
            put(key, a, cost[k]);
            got += 1;
            continue;
        }
        let b = &mut out[rank];
        b.extend_from_slice(&key.to_le_bytes());
        for v in a {
            b.extend_from_slice(bytemuck::bytes_of(&v));
        }
        b.extend_from_slice(&cost[k].to_le_bytes());
    }
    let counts: Vec<usize> = out.iter().map(Vec::len).collect();
    let (recv, _) = comm::exchange(comm, &out.concat(), &counts);
    for r in recv.chunks_exact(record) {
        let word = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"));
        let v =
            |k: usize| bytemuck::pod_read_unaligned::<T>(&r[8 + k * bytes..8 + (k + 1) * bytes]);
        put(word(0), [v(0), v(1), v(2)], word(8 + 3 * bytes));
        got += 1;
    }
    got
}
