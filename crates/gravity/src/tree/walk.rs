//! The group walk: one interaction list per group of targets, then the list evaluated by the
//! direct solver's SIMD kernels.
//!
//! A group is a run of sibling nodes holding at most `group_size` particles together (or a leaf,
//! whatever its size). Its walk
//! starts at the root with the group's bounding box: a node is accepted when the box's nearest
//! point lies farther than `s / theta + delta` from the node's centre of mass, opened
//! otherwise; an opened leaf adds its particles. The list (particles and accepted nodes'
//! monopoles as point masses, in walk order, plus the quadrupoles apart) depends only on the
//! tree and the group, so each target's sum runs in the same order on any thread count.

use mote_core::Real;

use mote_core::SimdLevel;
use mote_core::formula::{Float, Lanes};

use super::formula::{accepted, quadrupole_acceleration, quadrupole_potential};
use crate::direct::simd::{BlockKernel, Sources, Targets};
use crate::softening::inverse_distance;

/// The tree, read-only, in the walk's precision.
pub(crate) struct View<'a, T> {
    pub x: &'a [T],
    pub y: &'a [T],
    pub z: &'a [T],
    pub m: &'a [T],
    /// Centre of mass and squared opening radius.
    pub geometry: &'a [[T; 4]],
    pub mass: &'a [T],
    /// First child, children, first particle, particles.
    pub links: &'a [[u32; 4]],
    /// Empty for monopole trees.
    pub quad: [&'a [T]; 5],
}

pub(crate) use super::NODE;

/// One thread's interaction lists, reused from group to group.
pub(crate) struct Lists<T> {
    /// Point masses: opened leaves' particles and accepted nodes' monopoles.
    x: Vec<T>,
    y: Vec<T>,
    z: Vec<T>,
    m: Vec<T>,
    /// The particle (tree order) of each point mass, or [`NODE`] with the node's index (the
    /// potential skips the target itself).
    pub(crate) index: Vec<u32>,
    /// Accepted nodes' quadrupoles: centre of mass x, y, z, then xx, xy, xz, yy, yz.
    quad: [Vec<T>; 8],
    stack: Vec<u32>,
}

impl<T: Real> Lists<T> {
    pub fn new() -> Self {
        Self {
            x: Vec::new(),
            y: Vec::new(),
            z: Vec::new(),
            m: Vec::new(),
            index: Vec::new(),
            quad: Default::default(),
            stack: Vec::new(),
        }
    }

    /// Interactions per target of the current lists: one per entry (a node with its
    /// quadrupole is one interaction).
    pub fn len(&self) -> usize {
        self.x.len()
    }

    fn clear(&mut self) {
        for v in [&mut self.x, &mut self.y, &mut self.z, &mut self.m] {
            v.clear();
        }
        self.index.clear();
        for v in &mut self.quad {
            v.clear();
        }
        self.stack.clear();
    }

    fn push_particles(&mut self, t: &View<'_, T>, start: usize, count: usize) {
        let r = start..start + count;
        self.x.extend_from_slice(&t.x[r.clone()]);
        self.y.extend_from_slice(&t.y[r.clone()]);
        self.z.extend_from_slice(&t.z[r.clone()]);
        self.m.extend_from_slice(&t.m[r.clone()]);
        self.index.extend(r.map(|k| k as u32));
    }

    /// Builds the lists of the group whose particles are `start..start + count` (tree order).
    pub fn collect(&mut self, t: &View<'_, T>, start: usize, count: usize) {
        self.clear();
        let r = start..start + count;
        let lo = [
            min(&t.x[r.clone()]),
            min(&t.y[r.clone()]),
            min(&t.z[r.clone()]),
        ];
        let hi = [max(&t.x[r.clone()]), max(&t.y[r.clone()]), max(&t.z[r])];
        let quadrupole = !t.quad[0].is_empty();
        self.stack.push(0);
        while let Some(n) = self.stack.pop() {
            let n = n as usize;
            let [cx, cy, cz, open2] = t.geometry[n];
            let c = [cx, cy, cz];
            let [child_start, child_count, first, bodies] = t.links[n];
            let (first, bodies) = (first as usize, bodies as usize);
            if accepted(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], cx, cy, cz, open2) {
                if bodies == 1 {
                    self.push_particles(t, first, 1);
                } else {
                    self.x.push(c[0]);
                    self.y.push(c[1]);
                    self.z.push(c[2]);
                    self.m.push(t.mass[n]);
                    self.index.push(NODE | n as u32);
                    if quadrupole {
                        for (a, &ca) in c.iter().enumerate() {
                            self.quad[a].push(ca);
                        }
                        for k in 0..5 {
                            self.quad[3 + k].push(t.quad[k][n]);
                        }
                    }
                }
            } else if child_count == 0 {
                self.push_particles(t, first, bodies);
            } else {
                // Reversed, so that children are taken in Morton order.
                self.stack
                    .extend((child_start..child_start + child_count).rev());
            }
        }
    }

    /// The accelerations of the targets `start..start + count` from the current lists, into
    /// `acc` (overwritten).
    pub fn accelerations(
        &self,
        t: &View<'_, T>,
        start: usize,
        kernel: BlockKernel<T>,
        level: SimdLevel,
        eps2: T,
        acc: [&mut [T]; 3],
    ) {
        let count = acc[0].len();
        let r = start..start + count;
        let targets = Targets {
            x: &t.x[r.clone()],
            y: &t.y[r.clone()],
            z: &t.z[r],
        };
        let sources = Sources {
            x: &self.x,
            y: &self.y,
            z: &self.z,
            m: &self.m,
            eps2,
        };
        let [ax, ay, az] = acc;
        kernel(&sources, targets, ax, ay, az);
        if !self.quad[0].is_empty() {
            level.run(|| quadrupole_accelerations(&self.quad, targets, eps2, [ax, ay, az]));
        }
    }

    /// `sum_k m_k phi_k` over the targets `start..start + count`, with `phi_k` the potential
    /// of every list entry except target `k` itself, in `f64` (plain sums over `LANES`
    /// accumulators: the tree's own error, about 1e-5 of `W` at theta = 0.5, dwarfs rounding).
    pub fn potential(&self, t: &View<'_, T>, start: usize, count: usize, eps2: f64) -> f64 {
        let mut w = 0.0;
        let n = self.x.len();
        for k in start..start + count {
            let p = [t.x[k].as_f64(), t.y[k].as_f64(), t.z[k].as_f64()];
            let mut phi = [0.0f64; LANES];
            for j0 in (0..n).step_by(LANES) {
                for (l, j) in (j0..n.min(j0 + LANES)).enumerate() {
                    let d = [
                        self.x[j].as_f64() - p[0],
                        self.y[j].as_f64() - p[1],
                        self.z[j].as_f64() - p[2],
                    ];
                    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                    let own = self.index[j] == k as u32;
                    let v = self.m[j].as_f64() * inverse_distance(r2, eps2);
                    phi[l] += if own { 0.0 } else { v };
                }
            }
            for j in 0..self.quad[0].len() {
                let q = |c: usize| self.quad[c][j].as_f64();
                phi[j % LANES] += quadrupole_potential(
                    q(0) - p[0],
                    q(1) - p[1],
                    q(2) - p[2],
                    eps2,
                    q(3),
                    q(4),
                    q(5),
                    q(6),
                    q(7),
                );
            }
            w += t.m[k].as_f64() * reduce(&phi);
        }
        w
    }
}

fn min<T: Real>(v: &[T]) -> T {
    v.iter().copied().fold(T::infinity(), T::min)
}

fn max<T: Real>(v: &[T]) -> T {
    v.iter().copied().fold(T::neg_infinity(), T::max)
}

/// Nodes per step of the quadrupole kernel: the formula runs on [`Lanes`] of this many nodes.
const LANES: usize = 8;

/// Adds the quadrupole terms ([`quadrupole_acceleration`]) of every node in `q` to `acc`: the
/// formula on [`Lanes`] of `LANES` nodes (compiled for the run's SIMD level by the caller),
/// the remainder one by one, each target's lanes summed in a fixed order.
// Eight parallel arrays indexed together: a range loop reads plainest.
#[allow(clippy::needless_range_loop)]
fn quadrupole_accelerations<T: Real>(
    q: &[Vec<T>; 8],
    t: Targets<'_, T>,
    eps2: T,
    acc: [&mut [T]; 3],
) {
    type L<T> = Lanes<T, LANES>;
    let n = q[0].len();
    let full = n / LANES * LANES;
    let [ax, ay, az] = acc;
    for k in 0..ax.len() {
        let p = [t.x[k], t.y[k], t.z[k]];
        let mut sum = [L::<T>::new(0.0); 3];
        for j in (0..full).step_by(LANES) {
            let at = |c: usize| -> L<T> { Lanes(std::array::from_fn(|i| q[c][j + i])) };
            let (x, y, z) = quadrupole_acceleration(
                at(0) - L::splat(p[0]),
                at(1) - L::splat(p[1]),
                at(2) - L::splat(p[2]),
                L::splat(eps2),
                at(3),
                at(4),
                at(5),
                at(6),
                at(7),
            );
            sum[0] += x;
            sum[1] += y;
            sum[2] += z;
        }
        let mut tail = [T::zero(); 3];
        for j in full..n {
            let (x, y, z) = quadrupole_acceleration(
                q[0][j] - p[0],
                q[1][j] - p[1],
                q[2][j] - p[2],
                eps2,
                q[3][j],
                q[4][j],
                q[5][j],
                q[6][j],
                q[7][j],
            );
            tail[0] += x;
            tail[1] += y;
            tail[2] += z;
        }
        ax[k] += reduce(&sum[0].0) + tail[0];
        ay[k] += reduce(&sum[1].0) + tail[1];
        az[k] += reduce(&sum[2].0) + tail[2];
    }
}

/// Pairwise sum of the lanes in a fixed order.
fn reduce<T: Real>(v: &[T]) -> T {
    if v.len() == 1 {
        v[0]
    } else {
        let h = v.len() / 2;
        reduce(&v[..h]) + reduce(&v[h..])
    }
}
