//! The interface integrators call to evaluate gravity.

use mote_core::decomposition::Domains;
use mote_core::{Budgeted, ParticleData, Real, Vec3Span, Vec3SpanMut};

use crate::softening::Softening;

/// What [`ForceSolver::first_non_finite`] reports, for the solvers that split their work
/// between ranks: the evaluations counted, and the first in which this rank's own results held a
/// non-finite value, with that particle's index.
#[derive(Clone, Copy, Debug, Default)]
pub struct NonFiniteWatch {
    evaluations: u64,
    first: Option<(u64, usize)>,
}

impl NonFiniteWatch {
    /// Counts an evaluation; its number, from 1.
    pub fn count(&mut self) -> u64 {
        self.evaluations += 1;
        self.evaluations
    }

    /// Looks at this rank's own results `[x, y, z]` of the evaluation just counted: the first
    /// non-finite entry `k` is kept as particle `index(k)`, unless an earlier evaluation had one.
    pub fn look<T: Real>(&mut self, [x, y, z]: [&[T]; 3], index: impl Fn(usize) -> usize) {
        if self.first.is_none() {
            self.first = (0..x.len())
                .find(|&k| !(x[k].is_finite() && y[k].is_finite() && z[k].is_finite()))
                .map(|k| (self.evaluations, index(k)));
        }
    }

    /// The first evaluation with a non-finite result on this rank, and the particle.
    pub fn first(&self) -> Option<(u64, usize)> {
        self.first
    }
}

/// A rank's share of a force evaluation ([`ForceSolver::share`]): the particles it computed
/// (indices into the sources), their accelerations and their costs (interactions).
#[derive(Clone, Debug, Default)]
pub struct Share<R> {
    /// The particles, as indices into the sources.
    pub index: Vec<usize>,
    /// Their accelerations, x, y and z.
    pub acc: [Vec<R>; 3],
    /// Their costs.
    pub cost: Vec<u64>,
}

/// Which force solver a run uses.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SolverKind {
    /// Direct summation, O(N^2): exact to rounding.
    #[default]
    Direct,
    /// The Barnes-Hut tree, O(N log N): approximate, controlled by the opening angle.
    Tree,
}

impl SolverKind {
    /// `direct` or `tree`.
    pub fn name(self) -> &'static str {
        match self {
            SolverKind::Direct => "direct",
            SolverKind::Tree => "tree",
        }
    }
}

/// What every force solver reports about itself, whatever the precision it runs in.
pub trait SolverInfo {
    /// A short name, for example `direct/avx512`.
    fn name(&self) -> String;

    /// The softening every interaction uses.
    fn softening(&self) -> Softening;

    /// Pairwise interactions evaluated so far (N(N-1) per direct evaluation).
    fn interactions(&self) -> u64;
}

/// An acceleration field: computes every particle's gravitational acceleration from positions
/// and masses.
///
/// Implementations read only the position and mass arrays and write only the acceleration
/// arrays. `Send`, like [`Integrator`](crate::Integrator): a simulation may be driven from
/// another thread.
pub trait ForceSolver<R: Real>: SolverInfo + Send {
    /// Writes the acceleration of every particle into `acc`.
    fn accelerations(&mut self, positions: Vec3Span<'_, R>, masses: &[R], acc: Vec3SpanMut<'_, R>);

    /// The total potential energy `W = -1/2 sum_i sum_(j != i) m_i m_j / sqrt(r_ij^2 + eps^2)`,
    /// with the same softening as the accelerations, accumulated in `f64`.
    fn potential_energy(&mut self, positions: Vec3Span<'_, R>, masses: &[R]) -> f64;

    /// The solver's own memory (the tree's arrays), priced in the run's budget with the
    /// particles; empty for solvers that keep none.
    fn budgeted(&mut self) -> Vec<&mut dyn Budgeted> {
        Vec::new()
    }

    /// The accelerations of the particles `targets` only (indices into `positions`, in any
    /// order; every particle is a source), into `acc` (row `k` for `targets[k]`), and each
    /// target's measured cost (the interactions it took) into `costs`. What a rank that owns
    /// some of the particles asks for (decision 0028). The default computes every particle's
    /// acceleration with [`ForceSolver::accelerations`] (on several ranks as collectively as
    /// that) and keeps the targets', at a cost of 1 each.
    fn accelerations_of(
        &mut self,
        positions: Vec3Span<'_, R>,
        masses: &[R],
        targets: &[usize],
        acc: Vec3SpanMut<'_, R>,
        costs: &mut [u64],
    ) {
        let n = positions.len();
        let mut all = [vec![R::zero(); n], vec![R::zero(); n], vec![R::zero(); n]];
        {
            let [x, y, z] = &mut all;
            self.accelerations(positions, masses, Vec3SpanMut::new(x, y, z));
        }
        let (ax, ay, az) = acc.components_mut();
        for (k, &t) in targets.iter().enumerate() {
            (ax[k], ay[k], az[k]) = (all[0][t], all[1][t], all[2][t]);
        }
        costs.fill(1);
    }

    /// For solvers that balance their own work between ranks (the tree: ranges of groups of
    /// equal measured cost): this rank's share of an evaluation of every particle of
    /// `positions` (each particle in exactly one rank's share, the same split on every rank),
    /// with each result's index and cost. The caller hands the results to the particles'
    /// owners. `None` (the default) for solvers that compute whichever targets a rank asks for
    /// ([`ForceSolver::accelerations_of`]). Collective.
    fn share(&mut self, _positions: Vec3Span<'_, R>, _masses: &[R]) -> Option<Share<R>> {
        None
    }

    /// Over owned particles, for solvers that need each rank's own particles only, plus what
    /// they exchange (the tree's locally essential tree, decision 0029): the accelerations and
    /// costs of this rank's particles (`positions`, `masses` and their one-process indices
    /// `slots`), with `cut` the ranks' current ranges of the Morton curve. Non-finite input
    /// gives NaN accelerations. `false` (the default), with nothing computed, for solvers that
    /// need every source gathered. Collective.
    fn owned_accelerations(
        &mut self,
        _positions: Vec3Span<'_, R>,
        _masses: &[R],
        _slots: &[usize],
        _cut: Option<&Domains>,
        _acc: Vec3SpanMut<'_, R>,
        _costs: &mut [u64],
    ) -> bool {
        false
    }

    /// The potential energy over owned particles, as [`ForceSolver::owned_accelerations`]
    /// computes forces (NaN for non-finite input); `None` (the default) for solvers that need
    /// every source gathered. Collective.
    fn owned_potential(
        &mut self,
        _positions: Vec3Span<'_, R>,
        _masses: &[R],
        _slots: &[usize],
        _cut: Option<&Domains>,
    ) -> Option<f64> {
        None
    }

    /// Over owned particles: the ranks' current ranges of the Morton curve, kept for the next
    /// evaluations (a no-op for other solvers).
    fn set_cut(&mut self, _cut: &Domains) {}

    /// Whether the solver's arrays grow with every rank's particles together (true, the
    /// default) or only with this rank's share (a solver over owned particles whose inner
    /// solver needs no gathered sources): what a rank's memory is priced for.
    fn holds_every_particle(&self) -> bool {
        true
    }

    /// The potential energy of `particles` ([`ForceSolver::potential_energy`] of their
    /// positions and masses; a solver over owned particles gathers every rank's first).
    fn potential(&mut self, particles: &ParticleData<R>) -> f64 {
        self.potential_energy(particles.positions(), particles.masses())
    }

    /// Over owned particles: each particle's cost in the last evaluation, in the particles'
    /// order (what the ranks are balanced by). Empty for other solvers.
    fn costs(&self) -> &[u64] {
        &[]
    }

    /// Where work is split between ranks: the first evaluation (counted from 1) in which this
    /// rank computed a non-finite acceleration, and that particle's index. A NaN computed on
    /// one rank reaches every rank through the next evaluation's sources, so this is how a run
    /// names the rank it started on. `None` where it never happened, or on one process.
    fn first_non_finite(&self) -> Option<(u64, usize)> {
        None
    }

    /// Why an evaluation first gave non-finite accelerations on this rank, where the solver
    /// knows: a tree it could not build, or whose arrays outgrew this rank's reservation (this
    /// rank's own cause; a rank that stopped because another failed, or whose input was
    /// already non-finite, has none). `None` otherwise.
    fn failure(&self) -> Option<String> {
        None
    }

    /// Recomputes the accelerations of `particles` from their positions and masses.
    fn update(&mut self, particles: &mut ParticleData<R>) {
        let v = particles.view_mut();
        self.accelerations(v.position.as_span(), v.mass, v.acceleration);
    }
}

#[cfg(test)]
mod tests {
    use super::NonFiniteWatch;

    #[test]
    fn the_watch_keeps_the_first_non_finite_evaluation_and_particle() {
        let mut w = NonFiniteWatch::default();
        let fine = [1.0f64, 2.0];
        assert_eq!(w.count(), 1);
        w.look([&fine, &fine, &fine], |k| 10 + k);
        assert_eq!(w.first(), None);
        assert_eq!(w.count(), 2);
        w.look([&fine, &[3.0, f64::NAN], &fine], |k| 10 + k);
        assert_eq!(w.first(), Some((2, 11)));
        // A later one does not replace it.
        assert_eq!(w.count(), 3);
        w.look([&[f64::INFINITY, 0.0], &fine, &fine], |k| 10 + k);
        assert_eq!(w.first(), Some((2, 11)));
    }
}
