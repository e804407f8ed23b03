//! Tree gravity: a Barnes-Hut octree with monopole or quadrupole moments, O(N log N) per
//! evaluation.
//!
//! [`TreeSolver`] rebuilds the [`Tree`] at every evaluation ([`build`]: bounding cube, Morton
//! keys, a sort, nodes with their moments), then walks it once per group of targets
//! ([`walk`]): a node of size `s` whose centre of mass lies `delta` from its cell's centre is
//! accepted for a group when the group's nearest point is farther than `s / theta + delta`
//! from the centre of mass. For `theta <= 1` this distance exceeds the largest distance from
//! the centre of mass to any point of the cell (`sqrt(3)/2 s + delta`), so a cell is never
//! accepted for a particle inside it. Each group's list is evaluated by the direct solver's
//! SIMD kernels; lists depend only on the tree, so results are bitwise identical on any thread
//! count. Softening is the direct solver's.
//!
//! Across ranks ([`mote_core::comm`]) every rank builds the same tree from the whole state and
//! walks its own contiguous range of groups (groups follow the Morton curve), cut by the
//! measured cost of the previous evaluation (each particle's list length; particle counts at the
//! first): a group's result does not depend on the other groups, so the gathered accelerations
//! are bitwise identical on any rank count. Ranks that own their particles build the tree in
//! parts instead, each walking its own groups with its locally essential tree (`essential`,
//! decision 0029), with the same results.
//!
//! ```
//! use mote_core::{CpuBackend, ParticleData};
//! use mote_gravity::tree::{TreeSettings, TreeSolver};
//! use mote_gravity::{ForceSolver, KernelChoice, Softening};
//!
//! let mut p = ParticleData::<f64>::new();
//! p.push([0.0, 0.0, 0.0], [0.0; 3], 1.0).unwrap();
//! p.push([2.0, 0.0, 0.0], [0.0; 3], 1.0).unwrap();
//! let mut solver = TreeSolver::new(
//!     Softening::NONE,
//!     TreeSettings::default(),
//!     KernelChoice::Auto,
//!     CpuBackend::Serial,
//! )
//! .unwrap();
//! solver.update(&mut p);
//! assert_eq!(p.accelerations().x(), &[0.25, -0.25]);
//! ```

pub mod build;
mod cut;
pub(crate) mod essential;
pub mod formula;
mod walk;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use mote_core::comm::{self, Comm};
use mote_core::decomposition::Domains;

use mote_core::{Budgeted, BudgetedBuffer, CpuBackend, Real, SimdLevel, Vec3Span, Vec3SpanMut};
use rayon::prelude::*;

use crate::direct::simd::DirectKernels;
use crate::direct::{Kernel, KernelChoice};
use crate::error::GravityError;
use crate::softening::Softening;
use crate::solver::{ForceSolver, NonFiniteWatch, Share, SolverInfo};
pub use build::{KEY_BITS, Tree};
pub use cut::GroupCut;
use walk::{Lists, View};

/// The flag of an interaction-list entry that is an accepted node (the node's index in the other
/// bits; a particle's entry is its index in tree order). Particle counts stay below it.
pub const NODE: u32 = 1 << 31;

/// Which moments of a node's mass distribution accepted nodes contribute.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Multipole {
    /// Mass at the centre of mass.
    #[default]
    Monopole,
    /// The monopole plus the traceless quadrupole about the centre of mass.
    Quadrupole,
}

impl Multipole {
    /// `monopole` or `quadrupole`.
    pub fn name(self) -> &'static str {
        match self {
            Multipole::Monopole => "monopole",
            Multipole::Quadrupole => "quadrupole",
        }
    }
}

impl fmt::Display for Multipole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Multipole {
    type Err = GravityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "monopole" => Ok(Multipole::Monopole),
            "quadrupole" => Ok(Multipole::Quadrupole),
            _ => Err(GravityError::UnknownName {
                what: "multipole",
                name: s.to_string(),
                expected: "monopole, quadrupole",
            }),
        }
    }
}

/// The tree's accuracy and shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeSettings {
    /// Opening angle: smaller is more accurate and slower. In `(0, 1]`.
    pub theta: f64,
    /// Moments of accepted nodes.
    pub multipole: Multipole,
    /// Most particles in a leaf (a leaf at the keys' finest level may hold more).
    pub leaf_size: usize,
    /// Most targets sharing one interaction list.
    pub group_size: usize,
}

impl TreeSettings {
    /// Default opening angle.
    pub const THETA: f64 = 0.5;
    /// Default leaf size (measured: `docs/performance.md`).
    pub const LEAF_SIZE: usize = 16;
    /// Default group size (measured: `docs/performance.md`).
    pub const GROUP_SIZE: usize = 128;

    /// Checked settings.
    pub fn new(
        theta: f64,
        multipole: Multipole,
        leaf_size: usize,
        group_size: usize,
    ) -> Result<Self, GravityError> {
        if !(theta > 0.0 && theta <= 1.0) {
            return Err(GravityError::invalid(
                "theta",
                theta,
                "an opening angle in (0, 1] (above 1 a cell could be accepted for a particle inside it)",
            ));
        }
        if !(1..=65_536).contains(&leaf_size) {
            return Err(GravityError::invalid(
                "leaf_size",
                leaf_size,
                "a particle count in 1..=65536",
            ));
        }
        if !(1..=65_536).contains(&group_size) {
            return Err(GravityError::invalid(
                "group_size",
                group_size,
                "a particle count in 1..=65536",
            ));
        }
        Ok(Self {
            theta,
            multipole,
            leaf_size,
            group_size,
        })
    }
}

impl TreeSettings {
    /// These settings, checked as [`TreeSettings::new`] checks them.
    pub fn checked(self) -> Result<Self, GravityError> {
        Self::new(self.theta, self.multipole, self.leaf_size, self.group_size)
    }
}

impl Default for TreeSettings {
    fn default() -> Self {
        Self {
            theta: Self::THETA,
            multipole: Multipole::Monopole,
            leaf_size: Self::LEAF_SIZE,
            group_size: Self::GROUP_SIZE,
        }
    }
}

/// Why a tree cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// A position or mass is NaN or infinite.
    #[error("particle {index} has a non-finite position or mass")]
    NonFinite {
        /// The first such particle.
        index: usize,
    },
    /// The positions span more than the largest finite number.
    #[error("the positions span more than the largest finite number")]
    Span,
    /// More particles than the tree's 31-bit indices address.
    #[error("{0} particles: the tree indexes at most 2^31 - 1")]
    TooMany(usize),
    /// Over ranks that own their particles: the tree needs more nodes than particles, where
    /// one process caps the nodes at the particle count (larger leaves where it runs out),
    /// which a tree built in parts cannot reproduce; the evaluation builds the whole tree on
    /// every rank instead.
    #[error("the tree needs {nodes} nodes for {particles} particles")]
    Nodes {
        /// Nodes the tree needs.
        nodes: usize,
        /// Particles.
        particles: usize,
    },
    /// A rank's tree arrays do not fit its memory reservation.
    #[error("the tree's arrays: {0}")]
    Memory(String),
    /// Over ranks: another rank's tree arrays do not fit its reservation (that rank reports
    /// its own [`TreeError::Memory`]).
    #[error("another rank's tree arrays do not fit its reservation")]
    Elsewhere,
}

/// Timings and counts of the last evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeStats {
    /// Seconds to build the tree (bounds, keys, sort, nodes).
    pub build_seconds: f64,
    /// Seconds to walk it and evaluate the lists.
    pub walk_seconds: f64,
    /// Interactions (target-particle and target-node) evaluated.
    pub interactions: u64,
    /// Nodes built.
    pub nodes: usize,
    /// Groups walked.
    pub groups: usize,
}

/// Barnes-Hut tree gravity on a CPU backend, in the precision `R` of the run.
pub struct TreeSolver<R: Real> {
    softening: Softening,
    settings: TreeSettings,
    kernel: Kernel,
    backend: CpuBackend,
    tree: Tree<R>,
    interactions: u64,
    stats: TreeStats,
    comm: Arc<dyn Comm>,
    /// The measured costs the ranks' shares are balanced by.
    cut: GroupCut,
    /// The ranks' ranges of particles in tree order in the last evaluation.
    shares: Vec<Range<usize>>,
    watch: NonFiniteWatch,
    /// Over owned particles: the nodes and particles the last evaluation received from the
    /// other ranks.
    imported: [usize; 2],
    /// Why an evaluation first gave NaN accelerations on this rank ([`ForceSolver::failure`]).
    failure: Option<String>,
}

impl<R: Real> TreeSolver<R> {
    /// A solver with the given softening, tree settings, list kernel and backend. The kernel is
    /// a fast one (`reference` is direct summation only); fails where the CPU cannot run it.
    pub fn new(
        softening: Softening,
        settings: TreeSettings,
        kernel: KernelChoice,
        backend: CpuBackend,
    ) -> Result<Self, GravityError> {
        let kernel = kernel.resolve()?;
        if kernel == Kernel::Reference {
            return Err(GravityError::invalid(
                "kernel",
                "reference",
                "a fast kernel (auto, scalar, avx2, avx512) for the tree: the reference kernel is direct summation's yardstick",
            ));
        }
        let settings = settings.checked()?;
        Ok(Self {
            softening,
            settings,
            kernel,
            backend,
            tree: Tree::new(settings.multipole),
            interactions: 0,
            stats: TreeStats::default(),
            comm: comm::world(),
            cut: GroupCut::new(),
            shares: Vec::new(),
            watch: NonFiniteWatch::default(),
            imported: [0, 0],
            failure: None,
        })
    }

    /// The same solver on the ranks of `comm` instead of the process's world.
    pub fn with_comm(mut self, comm: Arc<dyn Comm>) -> Self {
        self.comm = comm;
        self
    }

    /// The backend it runs on.
    pub fn backend(&self) -> CpuBackend {
        self.backend
    }

    /// The settings.
    pub fn settings(&self) -> TreeSettings {
        self.settings
    }

    /// Timings and counts of the last evaluation.
    pub fn stats(&self) -> TreeStats {
        self.stats
    }

    /// The tree of the last evaluation.
    pub fn tree(&self) -> &Tree<R> {
        &self.tree
    }

    /// Over owned particles: the nodes and particles the last evaluation received from the
    /// other ranks (its locally essential tree's remote part).
    pub fn imported(&self) -> [usize; 2] {
        self.imported
    }

    /// Walks this rank's range of the groups of the tree just built (cut by measured cost; every
    /// group on one process) into the tree's accelerations. Returns the ranges, this rank's
    /// list lengths and every group's (gathered on several ranks: the next cut's costs).
    fn walk_cut(&mut self) -> (Vec<Range<usize>>, Vec<u64>, Vec<u64>) {
        let Kernel::Fast(level) = self.kernel else {
            unreachable!("the constructor refuses the reference kernel")
        };
        let eps2 = self.softening.epsilon2::<f64>();
        let size = self.comm.size();
        let groups = if size > 1 {
            self.cut.group_ranges(&self.tree, size)
        } else {
            comm::even_ranges(self.tree.group_count(), 1)
        };
        let mine: Vec<usize> = groups[self.comm.rank()].clone().collect();
        let lengths = match concrete(&mut self.tree) {
            Concrete::F32(t) => walk_f32(t, &mine, level, eps2, self.backend),
            Concrete::F64(t) => walk_f64(t, &mine, level, eps2, self.backend),
        };
        let all = if size > 1 {
            self.cut
                .gather(self.comm.as_ref(), &self.tree, &groups, &lengths)
        } else {
            lengths.clone()
        };
        (groups, lengths, all)
    }

    /// Counts an evaluation's interactions and keeps its figures (the walk started at `walk`).
    fn record(&mut self, build_seconds: f64, walk: Instant, interactions: u64, groups: usize) {
        self.interactions += interactions;
        self.stats = TreeStats {
            build_seconds,
            walk_seconds: walk.elapsed().as_secs_f64(),
            interactions,
            nodes: self.tree.node_count(),
            groups,
        };
    }

    /// Computes the accelerations, or says why the input has no tree (a non-finite position
    /// or mass, positions spanning more than the largest float); `acc` is untouched then.
    pub fn try_accelerations(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        acc: Vec3SpanMut<'_, R>,
    ) -> Result<(), TreeError> {
        let n = positions.len();
        assert_eq!(
            acc.len(),
            n,
            "acceleration and position arrays of unequal length"
        );
        let clock = Instant::now();
        self.tree
            .build(positions, masses, &self.settings, self.backend)?;
        let build_seconds = clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (groups, _, costs) = self.walk_cut();
        if self.comm.size() > 1 {
            // Every particle's acceleration, on every rank.
            self.shares = GroupCut::particle_ranges(&self.tree, &groups);
            self.watch.count();
            let own = self.shares[self.comm.rank()].clone();
            let mine = self.tree.acc.each_ref().map(|b| &b.as_slice()[own.clone()]);
            let order = self.tree.order.as_slice();
            self.watch.look(mine, |k| order[own.start + k] as usize);
            let scratch = &mut Vec::new();
            for a in &mut self.tree.acc {
                comm::gather_parts(
                    self.comm.as_ref(),
                    &mut a.as_mut_slice()[..n],
                    &self.shares,
                    scratch,
                );
            }
        }
        let interactions = group_interactions(self.tree.groups.as_slice(), &costs);
        // Back to the caller's order.
        let order = self.tree.order.as_slice();
        let (ax, ay, az) = acc.components_mut();
        for (out, sorted) in [ax, ay, az].into_iter().zip(&self.tree.acc) {
            for (k, &v) in sorted.as_slice()[..n].iter().enumerate() {
                out[order[k] as usize] = v;
            }
        }
        self.record(build_seconds, clock, interactions, self.tree.group_count());
        Ok(())
    }
}

impl<R: Real> TreeSolver<R> {
    /// Keeps the first failure that is this rank's own cause: not another rank's
    /// ([`TreeError::Elsewhere`]) nor non-finite input (the consequence of an earlier NaN,
    /// which the run's finiteness check traces).
    fn fail(&mut self, e: TreeError) {
        if self.failure.is_none()
            && !matches!(e, TreeError::Elsewhere | TreeError::NonFinite { .. })
        {
            self.failure = Some(e.to_string());
        }
    }

    /// An evaluation over ranks that own their particles (`essential`): accelerations and
    /// costs into `out`, or without it each of this rank's groups' potential sum.
    fn owned(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        slots: &[usize],
        cut: Option<&Domains>,
        out: Option<(Vec3SpanMut<'_, R>, &mut [u64])>,
    ) -> Result<essential::Evaluated, TreeError> {
        let Kernel::Fast(level) = self.kernel else {
            unreachable!("the constructor refuses the reference kernel")
        };
        let eps2 = self.softening.epsilon2::<f64>();
        let (x, y, z) = positions.components();
        let comm = self.comm.clone();
        #[allow(clippy::too_many_arguments)]
        fn go<T: Real + DirectKernels, R: Real>(
            comm: &dyn Comm,
            tree: &mut Tree<T>,
            settings: &TreeSettings,
            pos: [&[R]; 3],
            m: &[R],
            slots: &[usize],
            cut: Option<&Domains>,
            level: SimdLevel,
            eps2: f64,
            out: Option<(Vec3SpanMut<'_, R>, &mut [u64])>,
            backend: CpuBackend,
        ) -> Result<essential::Evaluated, TreeError> {
            fn c<R: Real, T: Real>(v: &[R]) -> &[T] {
                bytemuck::cast_slice(v)
            }
            fn cm<R: Real, T: Real>(v: &mut [R]) -> &mut [T] {
                bytemuck::cast_slice_mut(v)
            }
            let out = out.map(|(acc, costs)| {
                let (ax, ay, az) = acc.components_mut();
                ([cm(ax), cm(ay), cm(az)], costs)
            });
            essential::evaluate(
                comm,
                tree,
                settings,
                pos.map(c::<R, T>),
                c(m),
                slots,
                cut,
                level,
                eps2,
                out,
                backend,
            )
        }
        let (pos, settings, backend) = ([x, y, z], self.settings, self.backend);
        // One call for either precision of the tree.
        macro_rules! go {
            ($t:expr) => {
                go(
                    comm.as_ref(),
                    $t,
                    &settings,
                    pos,
                    masses,
                    slots,
                    cut,
                    level,
                    eps2,
                    out,
                    backend,
                )
            };
        }
        match concrete(&mut self.tree) {
            Concrete::F32(t) => go!(t),
            Concrete::F64(t) => go!(t),
        }
    }
}

impl<R: Real> SolverInfo for TreeSolver<R> {
    fn name(&self) -> String {
        format!(
            "tree/{}/theta={}/{}",
            self.kernel, self.settings.theta, self.settings.multipole
        )
    }

    fn softening(&self) -> Softening {
        self.softening
    }

    fn interactions(&self) -> u64 {
        self.interactions
    }
}

impl<R: Real> ForceSolver<R> for TreeSolver<R> {
    /// Unusable input (see [`TreeSolver::try_accelerations`]) gives NaN accelerations, which the
    /// run's finiteness check reports with the particle.
    fn accelerations(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        mut acc: Vec3SpanMut<'_, R>,
    ) {
        if let Err(e) = self.try_accelerations(positions, masses, acc.reborrow()) {
            self.fail(e);
            acc.fill([R::nan(); 3]);
        }
    }

    /// The potential energy of the tree's approximation (the same lists as the forces), in
    /// `f64`; NaN where the input has no tree.
    fn potential_energy(&mut self, positions: Vec3Span<'_, R>, masses: &[R]) -> f64 {
        if self
            .tree
            .build(positions, masses, &self.settings, self.backend)
            .is_err()
        {
            return f64::NAN;
        }
        let eps2 = self.softening.epsilon2::<f64>();
        let groups = comm::even_ranges(self.tree.group_count(), self.comm.size());
        let mine = groups[self.comm.rank()].clone();
        let mut partial = vec![0.0f64; self.tree.group_count()];
        partial[mine.clone()].copy_from_slice(&match concrete(&mut self.tree) {
            Concrete::F32(t) => potential_f32(t, mine, eps2, self.backend),
            Concrete::F64(t) => potential_f64(t, mine, eps2, self.backend),
        });
        comm::gather_parts(self.comm.as_ref(), &mut partial, &groups, &mut Vec::new());
        // Compensated, in group order: the same on every thread and rank count.
        let mut w = crate::direct::reference::CompensatedSum::default();
        for p in partial {
            w.add(p);
        }
        -0.5 * w.value()
    }

    fn first_non_finite(&self) -> Option<(u64, usize)> {
        self.watch.first()
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }

    /// This rank's range of groups, cut by measured cost as in [`ForceSolver::accelerations`]
    /// (every rank builds the one-process tree from the gathered sources): each group is walked
    /// by one rank only, and the range's particles' results go to their owners.
    fn share(&mut self, positions: Vec3Span<'_, R>, masses: &[R]) -> Option<Share<R>> {
        let n = positions.len();
        let (size, rank) = (self.comm.size(), self.comm.rank());
        let clock = Instant::now();
        if self
            .tree
            .build(positions, masses, &self.settings, self.backend)
            .is_err()
        {
            // The same sources everywhere, so every rank fails alike: NaN for an even share.
            let index: Vec<usize> = comm::even_ranges(n, size)[rank].clone().collect();
            let nan = vec![R::nan(); index.len()];
            let cost = vec![1; index.len()];
            return Some(Share {
                index,
                acc: [nan.clone(), nan.clone(), nan],
                cost,
            });
        }
        let build_seconds = clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (groups, lengths, all) = self.walk_cut();
        let own = GroupCut::particle_ranges(&self.tree, &groups)[rank].clone();
        let order = &self.tree.order()[own.clone()];
        let index: Vec<usize> = order.iter().map(|&i| i as usize).collect();
        let acc = self
            .tree
            .acc
            .each_ref()
            .map(|b| b.as_slice()[own.clone()].to_vec());
        let mut cost = Vec::with_capacity(own.len());
        for (&[_, count], &l) in self.tree.groups()[groups[rank].clone()]
            .iter()
            .zip(&lengths)
        {
            cost.extend(std::iter::repeat_n(l, count as usize));
        }
        let interactions = group_interactions(self.tree.groups(), &all);
        self.record(build_seconds, clock, interactions, groups[rank].len());
        Some(Share { index, acc, cost })
    }

    /// The one-process tree built over the ranks, each walking its own groups with its
    /// locally essential tree (`essential`).
    fn owned_accelerations(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        slots: &[usize],
        cut: Option<&Domains>,
        mut acc: Vec3SpanMut<'_, R>,
        costs: &mut [u64],
    ) -> bool {
        let clock = Instant::now();
        match self.owned(positions, masses, slots, cut, Some((acc.reborrow(), costs))) {
            Ok(done) => {
                self.record(0.0, clock, done.interactions, done.groups);
                self.imported = done.imported;
            }
            // A tree one process builds with larger leaves for want of nodes: built whole on
            // every rank instead (every rank sees the same totals, so all fall back alike).
            Err(TreeError::Nodes { .. }) => return false,
            Err(e) => {
                self.fail(e);
                acc.fill([R::nan(); 3]);
                costs.fill(1);
            }
        }
        true
    }

    fn owned_potential(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        slots: &[usize],
        cut: Option<&Domains>,
    ) -> Option<f64> {
        let done = match self.owned(positions, masses, slots, cut, None) {
            Ok(done) => done,
            Err(TreeError::Nodes { .. }) => return None,
            Err(_) => return Some(f64::NAN),
        };
        // Every group's sum in the one-process order (the ranks' groups follow the curve),
        // added as one process adds them.
        let (all, _) = comm::all_gather_varied(self.comm.as_ref(), &done.potential);
        let mut w = crate::direct::reference::CompensatedSum::default();
        for p in all {
            w.add(p);
        }
        Some(-0.5 * w.value())
    }

    fn budgeted(&mut self) -> Vec<&mut dyn Budgeted> {
        vec![&mut self.tree]
    }
}

impl<R: Real> Budgeted for TreeSolver<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.tree.buffers()
    }

    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.tree.buffers_mut()
    }
}

/// What a rank owning a Morton range of the tree's groups would import from the other ranks to
/// walk them on its own: its locally essential tree, the remote entries of the interaction
/// lists of its leaves (remote nodes accepted whole, remote particles of opened leaves). Leaves,
/// not groups: a group of sparse sibling cells can have a box around the whole system, which a
/// distributed tree would not send for. The measure of a distributed tree's halo (`mote bench
/// decomposition`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Imports {
    /// Remote nodes accepted whole (their monopole, and quadrupole where the tree has one).
    pub nodes: usize,
    /// Remote particles of opened leaves (and remote nodes of one particle).
    pub particles: usize,
    /// The rank's own particles.
    pub own: usize,
}

impl<R: Real> Tree<R> {
    /// Each group's walk cost, interactions (its particles times its list's length), as a
    /// distributed run's cut measures it; the tree must be built.
    pub fn group_costs(&self) -> Vec<u64> {
        let view = view(self);
        let mut lists = Lists::new();
        self.groups
            .as_slice()
            .iter()
            .map(|&[start, count]| {
                lists.collect(&view, start as usize, count as usize);
                count as u64 * lists.len() as u64
            })
            .collect()
    }

    /// The imports of a rank owning the groups `groups` of this tree, which must be built.
    pub fn imports(&self, groups: std::ops::Range<usize>) -> Imports {
        let all = self.groups.as_slice();
        let Some(first) = all.get(groups.start) else {
            return Imports::default();
        };
        let n = self.order.len();
        let end = all.get(groups.end).map_or(n, |&[s, _]| s as usize);
        let own = first[0] as usize..end;
        let view = view(self);
        let mut lists = Lists::new();
        // Entries already counted: particles by index, nodes after them.
        let mut seen = vec![false; n + self.nodes];
        let mut imports = Imports {
            own: own.len(),
            ..Imports::default()
        };
        let links = &self.links.as_slice()[..self.nodes];
        for &[_, children, start, count] in links {
            if children != 0 || !own.contains(&(start as usize)) {
                continue;
            }
            lists.collect(&view, start as usize, count as usize);
            for &i in &lists.index {
                // A node wholly inside the range is the rank's own; one that straddles ranks
                // (a top-tree node) needs the remote part's moments, so it counts.
                let (slot, local) = if i & NODE != 0 {
                    let k = (i & !NODE) as usize;
                    let [_, _, s, c] = links[k];
                    let (s, c) = (s as usize, c as usize);
                    (n + k, own.start <= s && s + c <= own.end)
                } else {
                    (i as usize, own.contains(&(i as usize)))
                };
                let node = slot >= n;
                if seen[slot] || local {
                    continue;
                }
                seen[slot] = true;
                if node {
                    imports.nodes += 1;
                } else {
                    imports.particles += 1;
                }
            }
        }
        imports
    }
}

/// The tree's arrays as slices.
fn view<T: Real>(tree: &Tree<T>) -> View<'_, T> {
    fn c<T: Real>(b: &mote_core::Buffer<T>) -> &[T] {
        b.as_slice()
    }
    let nodes = tree.nodes;
    let quad = |k: usize| {
        let q = c(&tree.quad[k]);
        &q[..q.len().min(nodes)]
    };
    View {
        x: c(&tree.pos[0]),
        y: c(&tree.pos[1]),
        z: c(&tree.pos[2]),
        m: c(&tree.mass),
        geometry: tree.geometry.as_slice(),
        mass: c(&tree.node_mass),
        links: tree.links.as_slice(),
        quad: [quad(0), quad(1), quad(2), quad(3), quad(4)],
    }
}

/// Which precision a tree is in: the precision-specific work is compiled once in this crate
/// for `f32` and `f64` (`build_f32`, `walk_f64`, ...) instead of in every crate that runs a
/// `TreeSolver<R>` (decision 0014).
pub(crate) enum Concrete<'a> {
    F32(&'a mut Tree<f32>),
    F64(&'a mut Tree<f64>),
}

pub(crate) fn concrete<R: Real>(tree: &mut Tree<R>) -> Concrete<'_> {
    let any: &mut dyn std::any::Any = tree;
    if any.is::<Tree<f32>>() {
        Concrete::F32(any.downcast_mut().expect("checked"))
    } else {
        Concrete::F64(any.downcast_mut().expect("a Real is f32 or f64"))
    }
}

/// `p` as a span of `T`, which is `R` itself.
pub(crate) fn cast_span<R: Real, T: Real>(p: Vec3Span<'_, R>) -> Vec3Span<'_, T> {
    let (x, y, z) = p.components();
    Vec3Span::new(
        bytemuck::cast_slice(x),
        bytemuck::cast_slice(y),
        bytemuck::cast_slice(z),
    )
}

/// Interactions evaluated: each group's list length times its particle count (`groups` as
/// [`Tree::groups`] gives them, `lengths` one per group).
pub fn group_interactions(groups: &[[u32; 2]], lengths: &[u64]) -> u64 {
    groups
        .iter()
        .zip(lengths)
        .map(|(&[_, count], &l)| count as u64 * l)
        .sum()
}

fn walk_f32(
    tree: &mut Tree<f32>,
    groups: &[usize],
    level: SimdLevel,
    eps2: f64,
    backend: CpuBackend,
) -> Vec<u64> {
    walk_all(tree, groups, level, eps2 as f32, backend)
}

fn walk_f64(
    tree: &mut Tree<f64>,
    groups: &[usize],
    level: SimdLevel,
    eps2: f64,
    backend: CpuBackend,
) -> Vec<u64> {
    walk_all(tree, groups, level, eps2, backend)
}

fn potential_f32(
    tree: &Tree<f32>,
    groups: Range<usize>,
    eps2: f64,
    backend: CpuBackend,
) -> Vec<f64> {
    potential_of(tree, groups, eps2, backend)
}

fn potential_f64(
    tree: &Tree<f64>,
    groups: Range<usize>,
    eps2: f64,
    backend: CpuBackend,
) -> Vec<f64> {
    potential_of(tree, groups, eps2, backend)
}

/// Each group's potential-energy sum (of the groups `groups`) from the same lists as the forces.
fn potential_of<T: Real>(
    tree: &Tree<T>,
    groups: Range<usize>,
    eps2: f64,
    backend: CpuBackend,
) -> Vec<f64> {
    let view = view(tree);
    let groups = &tree.groups.as_slice()[groups];
    backend.install(|| {
        groups
            .par_iter()
            .map_init(Lists::new, |lists, &[s, c]| {
                let (s, c) = (s as usize, c as usize);
                lists.collect(&view, s, c);
                lists.potential(&view, s, c, eps2)
            })
            .collect()
    })
}

/// Walks the groups `groups` (ascending) and evaluates their lists into the tree's acceleration
/// arrays; returns each group's list length.
fn walk_all<T: Real + DirectKernels>(
    tree: &mut Tree<T>,
    groups: &[usize],
    level: SimdLevel,
    eps2: T,
    backend: CpuBackend,
) -> Vec<u64> {
    let kernel = T::kernel(level);
    // The accelerations are taken out while the rest of the tree is read.
    let blank = || mote_core::Buffer::new("", mote_core::Scaling::PerParticle(1));
    let mut acc = std::mem::replace(&mut tree.acc, [blank(), blank(), blank()]);
    let lengths = walk_into(tree, groups, &mut acc, kernel, level, eps2, backend);
    tree.acc = acc;
    lengths
}

fn walk_into<T: Real + DirectKernels>(
    tree: &Tree<T>,
    groups: &[usize],
    acc: &mut [mote_core::Buffer<T>; 3],
    kernel: crate::direct::simd::BlockKernel<T>,
    level: mote_core::SimdLevel,
    eps2: T,
    backend: CpuBackend,
) -> Vec<u64> {
    let [ax, ay, az] = acc;
    let (mut ax, mut ay, mut az) = (ax.as_mut_slice(), ay.as_mut_slice(), az.as_mut_slice());
    let view = view(tree);
    // One output range per group: the groups tile the particles in order.
    let mut items = Vec::with_capacity(groups.len());
    let mut wanted = groups.iter().peekable();
    for (g, &[start, count]) in tree.groups.as_slice().iter().enumerate() {
        if wanted.peek().is_none() {
            break;
        }
        let count = count as usize;
        let (hx, tx) = std::mem::take(&mut ax).split_at_mut(count);
        let (hy, ty) = std::mem::take(&mut ay).split_at_mut(count);
        let (hz, tz) = std::mem::take(&mut az).split_at_mut(count);
        (ax, ay, az) = (tx, ty, tz);
        if wanted.next_if_eq(&&g).is_some() {
            items.push((start as usize, [hx, hy, hz]));
        }
    }
    backend.install(|| {
        items
            .into_par_iter()
            .map_init(Lists::new, |lists, (start, acc)| {
                lists.collect(&view, start, acc[0].len());
                lists.accelerations(&view, start, kernel, level, eps2, acc);
                lists.len() as u64
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_core::ParticleData;

    /// For every group and every node its walk accepts: the node holds none of the group's
    /// particles, and every one of them lies beyond the node's opening radius.
    fn check_acceptance(p: &ParticleData<f64>, settings: TreeSettings) -> usize {
        let mut tree = Tree::<f64>::new(settings.multipole);
        tree.build(p.positions(), p.masses(), &settings, CpuBackend::Serial)
            .unwrap();
        let view = view(&tree);
        let mut lists = Lists::<f64>::new();
        let mut accepted = 0;
        for &[s, c] in tree.groups.as_slice() {
            let (s, c) = (s as usize, c as usize);
            lists.collect(&view, s, c);
            for &e in &lists.index {
                if e & walk::NODE == 0 {
                    continue;
                }
                accepted += 1;
                let n = (e & !walk::NODE) as usize;
                let [_, _, ns, nc] = view.links[n];
                let (ns, nc) = (ns as usize, nc as usize);
                assert!(
                    ns + nc <= s || s + c <= ns,
                    "node {n} holds a target of group {s}"
                );
                let [cx, cy, cz, open2] = view.geometry[n];
                for k in s..s + c {
                    let d2 = (view.x[k] - cx).powi(2)
                        + (view.y[k] - cy).powi(2)
                        + (view.z[k] - cz).powi(2);
                    assert!(d2 > open2, "target {k} inside node {n}'s opening radius");
                }
            }
        }
        accepted
    }

    #[test]
    fn no_node_is_accepted_for_a_particle_inside_it() {
        // A heavy clump in one corner of the box and light particles spread through it: the
        // clump's centre of mass sits far from the geometric centres of the cells it shares
        // with the light particles, where a criterion on the distance to the centre of mass
        // alone would accept those cells for particles inside them.
        let mut p = ParticleData::<f64>::new();
        let mut rng = mote_core::rng::Rng::new(3);
        for _ in 0..2000 {
            let u = [rng.uniform(), rng.uniform(), rng.uniform()];
            p.push(u.map(|c| 0.05 * c), [0.0; 3], 1.0).unwrap();
        }
        for _ in 0..2000 {
            let u = [rng.uniform(), rng.uniform(), rng.uniform()];
            p.push(u, [0.0; 3], 1e-3).unwrap();
        }
        for theta in [1.0, 0.7, 0.3] {
            for leaf_size in [1, 8, 64] {
                let settings =
                    TreeSettings::new(theta, Multipole::Monopole, leaf_size, 64).unwrap();
                assert!(check_acceptance(&p, settings) > 0);
            }
        }
        let plummer = crate::initial_conditions::plummer::<f64>(3000, 9).unwrap();
        assert!(
            check_acceptance(
                &plummer,
                TreeSettings::new(1.0, Multipole::Quadrupole, 4, 16).unwrap()
            ) > 0
        );
    }
}
