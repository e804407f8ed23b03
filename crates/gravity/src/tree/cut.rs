//! The ranks' shares of a tree's groups: contiguous ranges of groups (groups follow the Morton
//! curve) of equal measured cost, what both tree solvers (CPU and device) cut their walks by.

use std::ops::Range;

use mote_core::Real;
use mote_core::comm::{self, Comm};

use super::Tree;

/// The cost each particle had in the last evaluation (its group's list length), kept in the
/// caller's order so that it survives the next build's reordering; the next evaluation's cut
/// is balanced by it.
#[derive(Clone, Debug, Default)]
pub struct GroupCut {
    costs: Vec<u64>,
}

impl GroupCut {
    /// A cut with no measurements yet (the first one balances particle counts).
    pub fn new() -> Self {
        Self::default()
    }

    /// The `parts` ranges of groups of `tree` (just built): balanced by the costs of the last
    /// evaluation where there are some for these particles, else by particle count.
    pub fn group_ranges<R: Real>(&self, tree: &Tree<R>, parts: usize) -> Vec<Range<usize>> {
        let order = tree.order();
        let known = self.costs.len() == order.len();
        let cost: Vec<u64> = tree
            .groups()
            .iter()
            .map(|&[start, count]| {
                let r = start as usize..(start + count) as usize;
                if known {
                    r.map(|k| self.costs[order[k] as usize].max(1)).sum()
                } else {
                    count as u64
                }
            })
            .collect();
        comm::cost_ranges(&cost, parts)
    }

    /// The particles (in tree order) of each range of groups.
    pub fn particle_ranges<R: Real>(tree: &Tree<R>, groups: &[Range<usize>]) -> Vec<Range<usize>> {
        let g = tree.groups();
        let n = tree.order().len();
        let start = |i: usize| g.get(i).map_or(n, |&[s, _]| s as usize);
        groups
            .iter()
            .map(|r| start(r.start)..start(r.end))
            .collect()
    }

    /// Every group's list length, on every rank, from each rank's lengths of its own range of
    /// `groups` (`own`), kept as the particles' costs for the next cut.
    pub fn gather<R: Real>(
        &mut self,
        comm: &dyn Comm,
        tree: &Tree<R>,
        groups: &[Range<usize>],
        own: &[u64],
    ) -> Vec<u64> {
        let mut all = vec![0u64; tree.group_count()];
        all[groups[comm.rank()].clone()].copy_from_slice(own);
        comm::gather_parts(comm, &mut all, groups, &mut Vec::new());
        let order = tree.order();
        self.costs.resize(order.len(), 0);
        for (&[s, c], &k) in tree.groups().iter().zip(&all) {
            for &i in &order[s as usize..(s + c) as usize] {
                self.costs[i as usize] = k;
            }
        }
        all
    }
}
