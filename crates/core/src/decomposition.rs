//! Particles owned by ranks: each rank owns one contiguous range of the Morton curve
//! ([`Domains`]), cut so that every rank's particles carry nearly the same measured cost, and
//! particles whose key left their rank's range move to the new owner with every array of their
//! container ([`crate::columns::migrate_all`], through the container's one list of arrays).
//!
//! This is the decomposition of the owned-particle design (decision 0028): a rank keeps its own
//! particles only, and the passes that read other ranks' particles receive them (sources,
//! essential trees, halos). The cut is the same on every rank: the bounding cube comes from exact
//! reductions of the coordinates and the splitting keys from a bisection on integer costs summed
//! over ranks, so no rank can disagree about who owns a particle.

use std::ops::Range;

use crate::comm::{self, Comm};
use crate::morton;
use crate::real::Real;

/// Contiguous ranges of the Morton curve over one cube, one per rank.
///
/// ```
/// use mote_core::comm::SingleProcess;
/// use mote_core::decomposition::Domains;
///
/// let x = [0.0, 1.0, 2.0, 3.0];
/// let zero = [0.0; 4];
/// let d = Domains::balanced(&SingleProcess, 3, [&x, &zero, &zero], &[1; 4]);
/// assert_eq!(d.destinations([&x, &zero, &zero]), vec![0; 4]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Domains {
    dimension: usize,
    lo: [f64; 3],
    side: f64,
    /// `size + 1` keys: rank `r` owns the keys `splitters[r]..splitters[r + 1]` (the last rank
    /// also the largest key).
    splitters: Vec<u64>,
}

impl Domains {
    /// The domains of `comm`'s ranks for the particles the ranks hold together: each rank passes
    /// its own positions (`dimension` of the three arrays are read) and each particle's cost
    /// (list lengths, neighbour counts, or 1 for a cut by count). The cube bounds every rank's
    /// particles; each rank's range holds as near `1 / size` of the total cost as whole keys
    /// allow (particles with one key stay together). All costs zero cuts by count.
    /// Collective.
    ///
    /// # Panics
    /// If `dimension` is not 1, 2 or 3, or the arrays differ in length from `costs`.
    pub fn balanced<R: Real>(
        comm: &dyn Comm,
        dimension: usize,
        positions: [&[R]; 3],
        costs: &[u64],
    ) -> Self {
        assert!((1..=3).contains(&dimension), "dimension {dimension}");
        let n = costs.len();
        assert!(
            positions[..dimension].iter().all(|p| p.len() == n),
            "positions and costs of unequal length"
        );
        let (lo, side) = bounding_cube(comm, dimension, positions);
        let mut d = Self {
            dimension,
            lo,
            side,
            splitters: vec![0; comm.size() + 1],
        };
        let size = comm.size();
        *d.splitters.last_mut().expect("size + 1 splitters") = u64::MAX;
        if size == 1 {
            return d;
        }
        // This rank's keys in order with their running costs: the cost below any key is one
        // binary search away.
        let keys = d.keys(positions);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by_key(|&i| keys[i]);
        let by_count = comm::sum_of(comm, costs.iter().sum()) == 0;
        let sorted: Vec<u64> = order.iter().map(|&i| keys[i]).collect();
        let mut below = Vec::with_capacity(n + 1);
        below.push(0u64);
        for &i in &order {
            let c = if by_count { 1 } else { costs[i] };
            below.push(below.last().expect("starts with 0") + c);
        }
        let total = comm::sum_of(comm, below[n]);
        // Splitter p is the smallest key with at least p / size of the cost below it, found by
        // bisection over the key space, all splitters at once, one sum per round.
        let targets: Vec<u64> = (1..size)
            .map(|p| (total as u128 * p as u128 / size as u128) as u64)
            .collect();
        let mut bounds: Vec<(u64, u64)> = vec![(0, d.key_end()); size - 1];
        while bounds.iter().any(|(l, h)| l < h) {
            let mut cost: Vec<u64> = bounds
                .iter()
                .map(|&(l, h)| below[sorted.partition_point(|&k| k < l + (h - l) / 2)])
                .collect();
            comm.sum_u64(&mut cost);
            for ((l, h), (c, t)) in bounds.iter_mut().zip(cost.iter().zip(&targets)) {
                let mid = *l + (*h - *l) / 2;
                if *l < *h {
                    if c >= t {
                        *h = mid;
                    } else {
                        *l = mid + 1;
                    }
                }
            }
        }
        for (s, (l, _)) in d.splitters[1..size].iter_mut().zip(bounds) {
            *s = l;
        }
        d
    }

    /// The cube [`Domains::balanced`] would quantise every rank's particles over now: where it
    /// differs from [`Domains::cube`], the particles outgrew the cut's cube (and the gravity
    /// tree's keys no longer follow the cut). Collective.
    pub fn cube_of<R: Real>(
        comm: &dyn Comm,
        dimension: usize,
        positions: [&[R]; 3],
    ) -> ([f64; 3], f64) {
        bounding_cube(comm, dimension, positions)
    }

    /// One past the largest key.
    fn key_end(&self) -> u64 {
        1u64 << (self.bits() * self.dimension as u32)
    }

    /// Bits per axis of a key.
    fn bits(&self) -> u32 {
        [62, 31, 21][self.dimension - 1]
    }

    /// The space dimension the keys cover.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The cube the keys quantise: its lowest corner and its side.
    pub fn cube(&self) -> ([f64; 3], f64) {
        (self.lo, self.side)
    }

    /// The keys each rank owns, in rank order.
    pub fn key_ranges(&self) -> Vec<Range<u64>> {
        self.splitters.windows(2).map(|w| w[0]..w[1]).collect()
    }

    /// The Morton key of each particle (positions outside the cube fall in its border cells).
    pub fn keys<R: Real>(&self, positions: [&[R]; 3]) -> Vec<u64> {
        let n = positions[0].len();
        let bits = self.bits();
        let q = |axis: usize, i: usize| {
            morton::quantise(positions[axis][i].as_f64(), self.lo[axis], self.side, bits)
        };
        (0..n)
            .map(|i| match self.dimension {
                1 => q(0, i),
                2 => morton::interleave([q(0, i), q(1, i)], bits),
                _ => morton::interleave([q(0, i), q(1, i), q(2, i)], bits),
            })
            .collect()
    }

    /// The rank that owns `key`.
    pub fn owner(&self, key: u64) -> usize {
        let size = self.splitters.len() - 1;
        self.splitters[1..size].partition_point(|&s| s <= key)
    }

    /// The owning rank of each particle, for [`crate::columns::migrate_all`].
    pub fn destinations<R: Real>(&self, positions: [&[R]; 3]) -> Vec<u32> {
        self.keys(positions)
            .into_iter()
            .map(|k| self.owner(k) as u32)
            .collect()
    }
}

/// How unevenly the ranks' work is spread: the largest rank's cost over the mean (1 when
/// even; the slowest rank sets a step's time, so this is the step's slowdown). Collective.
pub fn imbalance(comm: &dyn Comm, cost: u64) -> f64 {
    let total = comm::sum_of(comm, cost);
    let largest = comm::max_of(comm, cost);
    if total == 0 {
        1.0
    } else {
        largest as f64 * comm.size() as f64 / total as f64
    }
}

/// The cube over every rank's particles: the lowest corner of their bounding box and its
/// largest extent, widened a little so the largest coordinates fall inside. Exact reductions, so
/// every rank gets the same cube.
fn bounding_cube<R: Real>(
    comm: &dyn Comm,
    dimension: usize,
    positions: [&[R]; 3],
) -> ([f64; 3], f64) {
    // Per axis the largest coordinate and the largest negated one, as order-preserving bits.
    let mut extremes = [0u64; 6];
    for axis in 0..dimension {
        for &x in positions[axis] {
            let x = x.as_f64();
            if x.is_finite() {
                extremes[2 * axis] = extremes[2 * axis].max(ordered(x));
                extremes[2 * axis + 1] = extremes[2 * axis + 1].max(ordered(-x));
            }
        }
    }
    comm.max_u64(&mut extremes);
    let (mut lo, mut hi) = ([0.0; 3], [0.0; 3]);
    for axis in 0..dimension {
        if extremes[2 * axis] == 0 {
            continue; // no finite coordinate anywhere
        }
        hi[axis] = from_ordered(extremes[2 * axis]);
        lo[axis] = -from_ordered(extremes[2 * axis + 1]);
    }
    // The cube the gravity tree builds on: a rank's range stays a run of the tree's order.
    let (corner, side) = morton::stable_cube(lo, hi);
    if side.is_finite() && corner.iter().all(|c| c.is_finite()) {
        (corner, side)
    } else {
        (lo, 1.0)
    }
}

/// `x`'s bits mapped so that unsigned order is numeric order (and every finite value maps above
/// 0).
fn ordered(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

/// The inverse of [`ordered`].
fn from_ordered(o: u64) -> f64 {
    f64::from_bits(if o >> 63 == 1 { o & !(1 << 63) } else { !o })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::{on_thread_ranks, thread_ranks};
    use crate::memory::Budgeted;
    use crate::rng::Rng;
    use crate::{Component, ParticleData};

    #[test]
    fn ordered_bits_keep_the_order() {
        let xs = [-3.5, -1e-300, -0.0, 0.0, 1e-300, 2.0, 1e300];
        for w in xs.windows(2) {
            assert!(ordered(w[0]) <= ordered(w[1]), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(from_ordered(ordered(x)).to_bits(), x.to_bits());
        }
    }

    /// Points spread over the ranks in an order unrelated to space.
    fn points(seed: u64, n: usize) -> [Vec<f64>; 3] {
        let mut rng = Rng::new(seed);
        let mut p = [vec![], vec![], vec![]];
        for _ in 0..n {
            // Dense near the origin, as a cluster is: a cut by count is not a cut by volume.
            let r = rng.uniform().powi(3);
            for axis in &mut p {
                axis.push(r * (2.0 * rng.uniform() - 1.0));
            }
        }
        p
    }

    #[test]
    fn every_rank_gets_the_same_balanced_cut() {
        for size in [1, 2, 3, 5] {
            let ranks = thread_ranks(size);
            let results = on_thread_ranks(&ranks, |c| {
                let p = points(7 + c.rank() as u64, 300 + 50 * c.rank());
                let pos = [&p[0][..], &p[1][..], &p[2][..]];
                // Costs that vary: particle i costs 1 + i % 7.
                let costs: Vec<u64> = (0..p[0].len()).map(|i| 1 + i as u64 % 7).collect();
                let d = Domains::balanced(c.as_ref(), 3, pos, &costs);
                // The cost each rank would own after the cut.
                let dest = d.destinations(pos);
                let mut owned = vec![0u64; size];
                for (i, &r) in dest.iter().enumerate() {
                    owned[r as usize] += costs[i];
                }
                c.sum_u64(&mut owned);
                (d, owned)
            });
            let (d0, owned) = &results[0];
            assert!(
                results.iter().all(|(d, _)| d == d0),
                "one cut on {size} ranks"
            );
            let total: u64 = owned.iter().sum();
            let mean = total as f64 / size as f64;
            for &o in owned {
                // Whole particles: off by at most the largest single cost (7).
                assert!((o as f64 - mean).abs() <= 7.0, "{owned:?} on {size} ranks");
            }
            let ranges = d0.key_ranges();
            assert_eq!(ranges.len(), size);
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        }
    }

    #[test]
    fn a_cut_by_count_when_no_cost_was_measured() {
        let ranks = thread_ranks(4);
        let owned = on_thread_ranks(&ranks, |c| {
            let p = points(3, 400);
            let pos = [&p[0][..], &p[1][..], &p[2][..]];
            let d = Domains::balanced(c.as_ref(), 2, pos, &[0; 400]);
            let mut count = vec![0u64; 4];
            for r in d.destinations(pos) {
                count[r as usize] += 1;
            }
            c.sum_u64(&mut count);
            count
        });
        // Four identical point sets: each point's key appears four times, so whole keys move
        // in fours.
        for &k in &owned[0] {
            assert!((396..=404).contains(&k), "{:?}", owned[0]);
        }
    }

    /// `n` particles with every array distinct, ids `0..n`: the same set on every rank.
    fn whole_set(n: usize) -> ParticleData<f64> {
        let p = points(11, n);
        let mut d = ParticleData::<f64>::zeroed(n);
        for (k, c) in Component::ALL.into_iter().enumerate() {
            let a = d.component_mut(c);
            for i in 0..n {
                a[i] = if k < 3 {
                    p[k][i]
                } else {
                    (1000 * k + i) as f64 + 0.25
                };
            }
        }
        d
    }

    fn bits(p: &ParticleData<f64>) -> Vec<Vec<u64>> {
        let mut all: Vec<Vec<u64>> = Component::ALL
            .iter()
            .map(|&c| p.component(c).iter().map(|x| x.to_bits()).collect())
            .collect();
        all.push(p.ids().to_vec());
        all
    }

    #[test]
    fn particles_migrate_to_their_owners_and_back_whole() {
        let n = 1000;
        let whole = whole_set(n);
        for size in [1, 2, 3, 4] {
            let ranks = thread_ranks(size);
            let results = on_thread_ranks(&ranks, |c| {
                // Each rank starts with a block of ids, unrelated to space.
                let mine = comm::even_ranges(n, size)[c.rank()].clone();
                let mut p = whole.clone();
                p.retain(|i| mine.contains(&i));
                let pos = |p: &ParticleData<f64>| {
                    let s = p.positions();
                    [s.x().to_vec(), s.y().to_vec(), s.z().to_vec()]
                };
                let x = pos(&p);
                let d = Domains::balanced(c.as_ref(), 3, [&x[0], &x[1], &x[2]], &vec![1; p.len()]);
                let dest = d.destinations([&x[0], &x[1], &x[2]]);
                let moved = p.migrate(c.as_ref(), &dest).unwrap();
                // Every particle now lies in its rank's range.
                let x = pos(&p);
                let here = d.destinations([&x[0], &x[1], &x[2]]);
                assert!(here.iter().all(|&r| r as usize == c.rank()));
                let count = p.len();
                // Everything back to rank 0, in id order: the set it started as.
                p.migrate(c.as_ref(), &vec![0; p.len()]).unwrap();
                p.sort_by_id();
                (moved, count, p)
            });
            let counts: usize = results.iter().map(|r| r.1).sum();
            assert_eq!(counts, n, "no particle lost or doubled on {size} ranks");
            let sent: usize = results.iter().map(|r| r.0.sent).sum();
            let received: usize = results.iter().map(|r| r.0.received).sum();
            assert_eq!(sent, received);
            if size > 1 {
                assert!(sent > 0, "a block of ids is not a Morton range");
                for r in &results {
                    // A cut by count: each rank holds a quarter, give or take.
                    assert!(r.1.abs_diff(n / size) <= 2, "{} on {size} ranks", r.1);
                }
            }
            assert_eq!(bits(&results[0].2), bits(&whole), "{size} ranks");
            assert!(results[1..].iter().all(|r| r.2.is_empty()));
        }
    }

    #[test]
    fn a_rank_without_room_stops_every_rank_before_anything_moves() {
        let ranks = thread_ranks(3);
        let results = on_thread_ranks(&ranks, |c| {
            let mut p = whole_set(10);
            if c.rank() == 1 {
                // Rank 1's arrays are reserved for exactly what it holds.
                for b in p.buffers_mut() {
                    b.reserve_and_freeze(10).unwrap();
                }
            }
            let before = bits(&p);
            let e = p.migrate(c.as_ref(), &[1; 10]).unwrap_err();
            assert_eq!(bits(&p), before, "nothing moved on rank {}", c.rank());
            e
        });
        assert_eq!(results[1].what, "buffer `position_x`");
        for e in [&results[0], &results[2]] {
            assert_eq!(e.what, "the particles migrating to rank 1 of 3");
            assert_eq!(
                (e.requested, e.available),
                (results[1].requested, results[1].available)
            );
        }
    }

    #[test]
    fn imbalance_is_the_largest_share_over_the_mean() {
        let ranks = thread_ranks(4);
        let got = on_thread_ranks(&ranks, |c| imbalance(c.as_ref(), [1, 1, 1, 5][c.rank()]));
        assert!(got.iter().all(|&g| g == 2.5));
    }
}
