//! Tree construction: bounding cube, Morton keys, one sort, and a node array built top-down
//! over the sorted keys with its moments summed bottom-up.
//!
//! The nodes are component arrays like the particles (centre of mass, mass, squared opening
//! radius, quadrupole, child and body ranges). Children of a node are contiguous, in Morton
//! order; a node whose particles all fall into one octant takes that octant's smaller cell
//! instead of gaining a single child, so every internal node has at least two children. A node
//! becomes a leaf at `leaf_size` particles or fewer, at the keys' finest level (particles closer
//! than `side / 2^21` share a leaf, whatever their number), or when the node capacity (one node
//! per particle, the memory the budget priced) would be exceeded: a larger leaf costs time,
//! never accuracy, since an opened leaf is summed exactly.

use mote_core::morton::{interleave, quantise};
use mote_core::{Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling, Vec3Span};
use rayon::slice::ParallelSliceMut;

use super::{Multipole, TreeError, TreeSettings};

/// Bits of a key per axis (63-bit keys): the tree is at most this many levels below the root.
pub const KEY_BITS: u32 = 21;

/// The tree over one set of positions, rebuilt at every force evaluation.
pub struct Tree<R: Real> {
    /// `key << 32 | index`, sorted: the particles in Morton order.
    pub(crate) keys: Buffer<u128>,
    /// `order[k]`: the original index of the `k`-th particle in tree order.
    pub(crate) order: Buffer<u32>,
    /// Positions and masses in tree order.
    pub(crate) pos: [Buffer<R>; 3],
    pub(crate) mass: Buffer<R>,
    /// Accelerations in tree order.
    pub(crate) acc: [Buffer<R>; 3],
    /// Node centre of mass (x, y, z) and `(s / theta + delta)^2`: a node is accepted for targets
    /// farther than this from its centre of mass. One record: the walk reads them together.
    pub(crate) geometry: Buffer<[R; 4]>,
    /// Node masses.
    pub(crate) node_mass: Buffer<R>,
    /// First child, number of children (0: a leaf), first particle (tree order), number of
    /// particles.
    pub(crate) links: Buffer<[u32; 4]>,
    /// Traceless quadrupole `sum m (3 d d - |d|^2 I)` about the centre of mass: xx, xy, xz, yy,
    /// yz (zz = -xx - yy). Empty for monopole trees.
    pub(crate) quad: [Buffer<R>; 5],
    /// The groups of targets sharing a walk (first particle, count): runs of sibling nodes of
    /// at most `group_size` particles, or larger leaves; they tile `0..N` in ascending order.
    pub(crate) groups: Buffer<[u32; 2]>,
    /// Nodes in use.
    pub(crate) nodes: usize,
    /// Whether the last build ran out of node capacity (a node left a larger leaf).
    capped: bool,
    multipole: Multipole,
}

/// A node's moments while the tree is built: always `f64` (ten values, in this order: shared
/// between ranks as they are).
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct Moments {
    pub(crate) mass: f64,
    pub(crate) com: [f64; 3],
    /// xx, xy, xz, yy, yz, zz.
    pub(crate) quad: [f64; 6],
}

impl<R: Real> Tree<R> {
    /// An empty tree for `multipole` moments.
    pub fn new(multipole: Multipole) -> Self {
        fn p<T: bytemuck::Pod>(name: &'static str) -> Buffer<T> {
            Buffer::new(name, Scaling::PerParticle(1))
        }
        Self {
            keys: p("tree keys"),
            order: p("tree order"),
            pos: [p("tree x"), p("tree y"), p("tree z")],
            mass: p("tree mass"),
            acc: [p("tree ax"), p("tree ay"), p("tree az")],
            geometry: p("node centre of mass and opening radius"),
            node_mass: p("node mass"),
            links: p("node children and particles"),
            quad: [
                p("node quadrupole xx"),
                p("node quadrupole xy"),
                p("node quadrupole xz"),
                p("node quadrupole yy"),
                p("node quadrupole yz"),
            ],
            groups: p("tree groups"),
            nodes: 0,
            capped: false,
            multipole,
        }
    }

    /// Nodes of the last build.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Whether the last build ran out of nodes (one per particle) and left some node a leaf
    /// above `leaf_size` (tightly clustered particles with small leaves).
    pub fn capped(&self) -> bool {
        self.capped
    }

    /// Groups of the last build.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The particles' original indices in tree order.
    pub fn order(&self) -> &[u32] {
        &self.order.as_slice()[..self.keys.len()]
    }

    /// Positions in tree order.
    pub fn positions(&self) -> [&[R]; 3] {
        let n = self.keys.len();
        self.pos.each_ref().map(|b| &b.as_slice()[..n])
    }

    /// Masses in tree order.
    pub fn masses(&self) -> &[R] {
        &self.mass.as_slice()[..self.keys.len()]
    }

    /// Per node: centre of mass x, y, z and the squared opening radius.
    pub fn node_geometry(&self) -> &[[R; 4]] {
        &self.geometry.as_slice()[..self.nodes]
    }

    /// Per node: mass.
    pub fn node_masses(&self) -> &[R] {
        &self.node_mass.as_slice()[..self.nodes]
    }

    /// Per node: first child, children (0: a leaf), first particle, particles.
    pub fn node_links(&self) -> &[[u32; 4]] {
        &self.links.as_slice()[..self.nodes]
    }

    /// Per node: the traceless quadrupole xx, xy, xz, yy, yz (empty for a monopole tree).
    pub fn quadrupoles(&self) -> [&[R]; 5] {
        let n = if self.multipole == Multipole::Quadrupole {
            self.nodes
        } else {
            0
        };
        self.quad.each_ref().map(|b| &b.as_slice()[..n])
    }

    /// The groups of targets sharing a walk: first particle and count, tiling the particles.
    pub fn groups(&self) -> &[[u32; 2]] {
        self.groups.as_slice()
    }

    /// Builds the tree of `pos` and `mass` (what every evaluation does first).
    pub fn build(
        &mut self,
        pos: Vec3Span<'_, R>,
        mass: &[R],
        settings: &TreeSettings,
        backend: CpuBackend,
    ) -> Result<(), TreeError> {
        match super::concrete(self) {
            super::Concrete::F32(t) => {
                build_f32(t, super::cast_span(pos), cast(mass), settings, backend)
            }
            super::Concrete::F64(t) => {
                build_f64(t, super::cast_span(pos), cast(mass), settings, backend)
            }
        }
    }

    /// The build, instantiated only by [`build_f32`] and [`build_f64`].
    fn build_generic(
        &mut self,
        pos: Vec3Span<'_, R>,
        mass: &[R],
        settings: &TreeSettings,
        backend: CpuBackend,
    ) -> Result<(), TreeError> {
        let n = pos.len();
        assert_eq!(mass.len(), n, "mass and position arrays of unequal length");
        if n >= (1 << 31) {
            return Err(TreeError::TooMany(n));
        }
        let (lo, side) = bounding_cube(pos, mass, backend)?;
        self.resize(n);
        self.nodes = 0;
        self.groups.truncate(0);
        if n == 0 {
            return Ok(());
        }

        // Keys with the index in the low bits: unique, so the unstable parallel sort is
        // deterministic.
        let (x, y, z) = pos.components();
        backend.for_each_particle(self.keys.as_mut_slice(), |i| {
            let q = [
                quantise(x[i].as_f64(), lo[0], side, KEY_BITS),
                quantise(y[i].as_f64(), lo[1], side, KEY_BITS),
                quantise(z[i].as_f64(), lo[2], side, KEY_BITS),
            ];
            ((interleave(q, KEY_BITS) as u128) << 32) | i as u128
        });
        let keys = self.keys.as_mut_slice();
        backend.install(|| keys.par_sort_unstable());
        let keys = self.keys.as_slice();
        backend.for_each_particle(self.order.as_mut_slice(), |k| keys[k] as u32);
        let order = self.order.as_slice();
        let [px, py, pz] = &mut self.pos;
        backend.for_each_particle(
            (
                px.as_mut_slice(),
                py.as_mut_slice(),
                pz.as_mut_slice(),
                self.mass.as_mut_slice(),
            ),
            |k| {
                let i = order[k] as usize;
                (x[i], y[i], z[i], mass[i])
            },
        );

        let mut b = Builder {
            keys: self.keys.as_slice(),
            x: self.pos[0].as_slice(),
            y: self.pos[1].as_slice(),
            z: self.pos[2].as_slice(),
            m: self.mass.as_slice(),
            settings,
            quadrupole: self.multipole == Multipole::Quadrupole,
            capacity: n,
            used: 1,
            clamped: false,
            out: NodeArrays {
                geometry: self.geometry.as_mut_slice(),
                mass: self.node_mass.as_mut_slice(),
                links: self.links.as_mut_slice(),
                quad: self.quad.each_mut().map(|b| b.as_mut_slice()),
            },
        };
        b.node(0, 0, n, 0, lo, side);
        self.nodes = b.used;
        self.capped = b.clamped;
        self.make_groups(0, settings.group_size);
        Ok(())
    }

    /// Appends the groups under node `n`: the node itself if it holds at most `size`
    /// particles or is a leaf; otherwise runs of consecutive children that together hold at
    /// most `size` (so groups are fuller than single nodes), and the groups of larger children.
    pub(crate) fn make_groups(&mut self, n: usize, size: usize) {
        const WHY: &str = "groups are at most one per particle, as reserved";
        let [first, children, start, count] = self.links.as_slice()[n];
        if count as usize <= size || children == 0 {
            self.groups.push([start, count]).expect(WHY);
            return;
        }
        let mut run: Option<[u32; 2]> = None;
        for c in first as usize..(first + children) as usize {
            let [_, _, cs, cc] = self.links.as_slice()[c];
            if cc as usize > size {
                if let Some(r) = run.take() {
                    self.groups.push(r).expect(WHY);
                }
                self.make_groups(c, size);
                continue;
            }
            run = match run {
                Some([rs, rc]) if (rc + cc) as usize <= size => Some([rs, rc + cc]),
                Some(r) => {
                    self.groups.push(r).expect(WHY);
                    Some([cs, cc])
                }
                None => Some([cs, cc]),
            };
        }
        if let Some(r) = run {
            self.groups.push(r).expect(WHY);
        }
    }

    /// Sizes the arrays of a rank's part of a tree over ranks ([`super::essential`]): its
    /// particles' sorted `keys` and `nodes` node slots (the shared nodes and its subtrees');
    /// [`Tree::grow_essential`] adds room for the nodes and particles other ranks send.
    pub(crate) fn resize_essential(
        &mut self,
        keys: &[u128],
        nodes: usize,
    ) -> Result<(), TreeError> {
        let n = keys.len();
        let zero = R::zero();
        self.keys.resize(n, 0).map_err(memory)?;
        self.keys.as_mut_slice().copy_from_slice(keys);
        self.order.resize(n, 0).map_err(memory)?;
        for b in self.pos.iter_mut().chain(&mut self.acc) {
            b.resize(n, zero).map_err(memory)?;
        }
        self.mass.resize(n, zero).map_err(memory)?;
        self.nodes = 0;
        self.groups.truncate(0);
        self.grow_essential(n, nodes)
    }

    /// Room for `particles` particles (this rank's first) and `nodes` nodes in a tree over
    /// ranks.
    pub(crate) fn grow_essential(
        &mut self,
        particles: usize,
        nodes: usize,
    ) -> Result<(), TreeError> {
        let zero = R::zero();
        for b in &mut self.pos {
            b.resize(particles, zero).map_err(memory)?;
        }
        self.mass.resize(particles, zero).map_err(memory)?;
        self.node_mass.resize(nodes, zero).map_err(memory)?;
        self.geometry.resize(nodes, [zero; 4]).map_err(memory)?;
        self.links.resize(nodes, [0; 4]).map_err(memory)?;
        if self.multipole == Multipole::Quadrupole {
            for b in &mut self.quad {
                b.resize(nodes, zero).map_err(memory)?;
            }
        }
        Ok(())
    }

    /// Sizes the per-particle and per-node arrays for `n` particles (node capacity: `n`).
    fn resize(&mut self, n: usize) {
        const WHY: &str = "the tree's arrays are priced and reserved with the particles";
        if self.keys.len() == n {
            return;
        }
        self.keys.resize(n, 0).expect(WHY);
        self.order.resize(n, 0).expect(WHY);
        let zero = R::zero();
        for b in self.pos.iter_mut().chain(&mut self.acc) {
            b.resize(n, zero).expect(WHY);
        }
        self.mass.resize(n, zero).expect(WHY);
        self.node_mass.resize(n, zero).expect(WHY);
        self.geometry.resize(n, [zero; 4]).expect(WHY);
        self.links.resize(n, [0; 4]).expect(WHY);
        if self.multipole == Multipole::Quadrupole {
            for b in &mut self.quad {
                b.resize(n, zero).expect(WHY);
            }
        }
    }
}

/// A reservation too small for a tree over ranks' arrays.
fn memory(e: mote_core::CapacityError) -> TreeError {
    TreeError::Memory(e.to_string())
}

fn cast<R: Real, T: Real>(v: &[R]) -> &[T] {
    bytemuck::cast_slice(v)
}

// The build for each precision, compiled once here rather than in every crate that runs a tree
// (the generic body is private; decision 0014).
fn build_f32(
    t: &mut Tree<f32>,
    pos: Vec3Span<'_, f32>,
    mass: &[f32],
    settings: &TreeSettings,
    backend: CpuBackend,
) -> Result<(), TreeError> {
    t.build_generic(pos, mass, settings, backend)
}

fn build_f64(
    t: &mut Tree<f64>,
    pos: Vec3Span<'_, f64>,
    mass: &[f64],
    settings: &TreeSettings,
    backend: CpuBackend,
) -> Result<(), TreeError> {
    t.build_generic(pos, mass, settings, backend)
}

impl<R: Real> Budgeted for Tree<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v: Vec<&dyn BudgetedBuffer> = vec![&self.keys, &self.order, &self.mass];
        v.extend(self.pos.iter().map(|b| b as &dyn BudgetedBuffer));
        v.extend(self.acc.iter().map(|b| b as &dyn BudgetedBuffer));
        v.extend([
            &self.geometry as &dyn BudgetedBuffer,
            &self.node_mass,
            &self.links,
            &self.groups,
        ]);
        if self.multipole == Multipole::Quadrupole {
            v.extend(self.quad.iter().map(|b| b as &dyn BudgetedBuffer));
        }
        v
    }

    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        let quadrupole = self.multipole == Multipole::Quadrupole;
        let mut v: Vec<&mut dyn BudgetedBuffer> =
            vec![&mut self.keys, &mut self.order, &mut self.mass];
        v.extend(self.pos.iter_mut().map(|b| b as &mut dyn BudgetedBuffer));
        v.extend(self.acc.iter_mut().map(|b| b as &mut dyn BudgetedBuffer));
        v.extend([
            &mut self.geometry as &mut dyn BudgetedBuffer,
            &mut self.node_mass,
            &mut self.links,
            &mut self.groups,
        ]);
        if quadrupole {
            v.extend(self.quad.iter_mut().map(|b| b as &mut dyn BudgetedBuffer));
        }
        v
    }
}

/// The cube holding every particle ([`mote_core::morton::stable_cube`] of their box): its
/// lower corner and side. Fails on a non-finite position or mass.
fn bounding_cube<R: Real>(
    pos: Vec3Span<'_, R>,
    mass: &[R],
    backend: CpuBackend,
) -> Result<([f64; 3], f64), TreeError> {
    let (x, y, z) = pos.components();
    let n = x.len();
    type Bounds = ([f64; 3], [f64; 3], Option<usize>);
    let bounds = backend.map_reduce(
        n,
        16_384,
        |range| {
            let mut lo = [f64::INFINITY; 3];
            let mut hi = [f64::NEG_INFINITY; 3];
            let mut bad = None;
            for i in range {
                let p = [x[i].as_f64(), y[i].as_f64(), z[i].as_f64()];
                if bad.is_none() && !(p.iter().all(|c| c.is_finite()) && mass[i].is_finite()) {
                    bad = Some(i);
                }
                for a in 0..3 {
                    lo[a] = lo[a].min(p[a]);
                    hi[a] = hi[a].max(p[a]);
                }
            }
            (lo, hi, bad)
        },
        |a: Bounds, b: Bounds| {
            (
                std::array::from_fn(|k| a.0[k].min(b.0[k])),
                std::array::from_fn(|k| a.1[k].max(b.1[k])),
                a.2.or(b.2),
            )
        },
    );
    let Some((lo, hi, bad)) = bounds else {
        return Ok(([0.0; 3], 1.0));
    };
    if let Some(index) = bad {
        return Err(TreeError::NonFinite { index });
    }
    let side = (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
    if !side.is_finite() {
        return Err(TreeError::Span);
    }
    // A cube that moves in steps (the ranks' Morton ranges use it too, so a rank's particles
    // stay a contiguous run of the tree's order while they move).
    let (corner, side) = mote_core::morton::stable_cube(lo, hi);
    if !(side.is_finite() && corner.iter().all(|c| c.is_finite())) {
        return Err(TreeError::Span);
    }
    Ok((corner, side))
}

/// The node arrays the builder writes.
pub(crate) struct NodeArrays<'a, R> {
    pub(crate) geometry: &'a mut [[R; 4]],
    pub(crate) mass: &'a mut [R],
    pub(crate) links: &'a mut [[u32; 4]],
    pub(crate) quad: [&'a mut [R]; 5],
}

impl<R: Real> NodeArrays<'_, R> {
    /// Writes node `idx`'s centre of mass, squared opening radius, mass and quadrupole from
    /// its `moments` and its cell (`corner`, `side`); the links are the caller's.
    pub(crate) fn write(
        &mut self,
        idx: usize,
        moments: &Moments,
        corner: [f64; 3],
        side: f64,
        theta: f64,
        quadrupole: bool,
    ) {
        let centre = corner.map(|c| c + 0.5 * side);
        let delta = (0..3)
            .map(|a| (moments.com[a] - centre[a]).powi(2))
            .sum::<f64>()
            .sqrt();
        let open = side / theta + delta;
        self.geometry[idx] = [
            R::cast(moments.com[0]),
            R::cast(moments.com[1]),
            R::cast(moments.com[2]),
            R::cast(open * open),
        ];
        self.mass[idx] = R::cast(moments.mass);
        if quadrupole {
            for (k, q) in [0, 1, 2, 3, 4].into_iter().enumerate() {
                self.quad[k][idx] = R::cast(moments.quad[q]);
            }
        }
    }
}

pub(crate) struct Builder<'a, R: Real> {
    pub(crate) keys: &'a [u128],
    pub(crate) x: &'a [R],
    pub(crate) y: &'a [R],
    pub(crate) z: &'a [R],
    pub(crate) m: &'a [R],
    pub(crate) settings: &'a TreeSettings,
    pub(crate) quadrupole: bool,
    pub(crate) capacity: usize,
    pub(crate) used: usize,
    /// Whether a node stayed a leaf for want of node capacity.
    pub(crate) clamped: bool,
    pub(crate) out: NodeArrays<'a, R>,
}

/// The child octant of key `k` below a node at `level` (bit 2: x, bit 1: y, bit 0: z).
#[inline]
pub(crate) fn octant(k: u128, level: u32) -> usize {
    ((k >> (32 + 3 * (KEY_BITS - 1 - level))) & 7) as usize
}

/// The cell of a node whose particles' keys run from `first` to `last`, starting from the cell
/// at `corner` with `side` at depth `level`: while they all fall into one octant, that octant's
/// cell (a node never has a single child).
pub(crate) fn compress(
    first: u128,
    last: u128,
    mut level: u32,
    mut corner: [f64; 3],
    mut side: f64,
) -> (u32, [f64; 3], f64) {
    while level < KEY_BITS && octant(first, level) == octant(last, level) {
        let o = octant(first, level);
        side *= 0.5;
        for (a, c) in corner.iter_mut().enumerate() {
            if o >> (2 - a) & 1 == 1 {
                *c += side;
            }
        }
        level += 1;
    }
    (level, corner, side)
}

/// The cell of octant `o` of the cell at `corner` with `side`: its corner and side.
pub(crate) fn child_cell(corner: [f64; 3], side: f64, o: usize) -> ([f64; 3], f64) {
    let half = side * 0.5;
    let child = std::array::from_fn(|a| corner[a] + if o >> (2 - a) & 1 == 1 { half } else { 0.0 });
    (child, half)
}

impl<R: Real> Builder<'_, R> {
    /// Builds node `idx` over the particles `start..end` in the cell at `corner` with `side` at
    /// depth `level`, and returns its moments.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn node(
        &mut self,
        idx: usize,
        start: usize,
        end: usize,
        level: u32,
        corner: [f64; 3],
        side: f64,
    ) -> Moments {
        let (first, last) = (self.keys[start], self.keys[end - 1]);
        // One occupied octant: take its cell instead of making a single child.
        let (level, corner, side) = compress(first, last, level, corner, side);
        let count = end - start;
        // Child ranges, in octant order.
        let mut bounds = [start; 9];
        let mut children = 0;
        if count > self.settings.leaf_size && level < KEY_BITS {
            let keys = &self.keys[start..end];
            let mut lo = 0;
            for o in 0..8 {
                let hi = keys.partition_point(|&k| octant(k, level) <= o);
                if hi > lo {
                    bounds[children + 1] = start + hi;
                    children += 1;
                }
                lo = hi;
            }
            if self.used + children > self.capacity {
                children = 0;
                self.clamped = true;
            }
        }
        let moments = if children == 0 {
            self.leaf_moments(start, end, corner, side)
        } else {
            let first_child = self.used;
            self.used += children;
            let mut parts = [Moments::default(); 8];
            for c in 0..children {
                let (s, e) = (bounds[c], bounds[c + 1]);
                // The child's cell: its octant of this cell.
                let (child_corner, half) = child_cell(corner, side, octant(self.keys[s], level));
                parts[c] = self.node(first_child + c, s, e, level + 1, child_corner, half);
            }
            self.out.links[idx][0] = first_child as u32;
            combine(&parts[..children], corner, side, self.quadrupole)
        };
        if children == 0 {
            self.out.links[idx][0] = 0;
        }
        self.out.links[idx][1] = children as u32;
        self.out.links[idx][2] = start as u32;
        self.out.links[idx][3] = count as u32;
        self.out.write(
            idx,
            &moments,
            corner,
            side,
            self.settings.theta,
            self.quadrupole,
        );
        moments
    }

    /// Moments of the particles `start..end` directly.
    fn leaf_moments(&self, start: usize, end: usize, corner: [f64; 3], side: f64) -> Moments {
        let mut mass = 0.0;
        let mut first = [0.0; 3];
        for k in start..end {
            let m = self.m[k].as_f64();
            mass += m;
            first[0] += m * self.x[k].as_f64();
            first[1] += m * self.y[k].as_f64();
            first[2] += m * self.z[k].as_f64();
        }
        let com = if mass != 0.0 {
            first.map(|f| f / mass)
        } else {
            corner.map(|c| c + 0.5 * side)
        };
        let mut quad = [0.0; 6];
        if self.quadrupole {
            for k in start..end {
                let d = [
                    self.x[k].as_f64() - com[0],
                    self.y[k].as_f64() - com[1],
                    self.z[k].as_f64() - com[2],
                ];
                add_quadrupole(&mut quad, self.m[k].as_f64(), d);
            }
        }
        Moments { mass, com, quad }
    }
}

/// Moments of a node from its children's (in child order): masses add, centres of mass
/// average, and each child's quadrupole is shifted to the new centre (parallel-axis theorem).
pub(crate) fn combine(parts: &[Moments], corner: [f64; 3], side: f64, quadrupole: bool) -> Moments {
    let mass: f64 = parts.iter().map(|p| p.mass).sum();
    let com = if mass != 0.0 {
        std::array::from_fn(|a| parts.iter().map(|p| p.mass * p.com[a]).sum::<f64>() / mass)
    } else {
        corner.map(|c| c + 0.5 * side)
    };
    let mut quad = [0.0; 6];
    if quadrupole {
        for p in parts {
            for (q, pq) in quad.iter_mut().zip(p.quad) {
                *q += pq;
            }
            let d = std::array::from_fn(|a| p.com[a] - com[a]);
            add_quadrupole(&mut quad, p.mass, d);
        }
    }
    Moments { mass, com, quad }
}

/// Adds `m (3 d d - |d|^2 I)` to `q` (xx, xy, xz, yy, yz, zz).
#[inline]
fn add_quadrupole(q: &mut [f64; 6], m: f64, d: [f64; 3]) {
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    q[0] += m * (3.0 * d[0] * d[0] - r2);
    q[1] += m * 3.0 * d[0] * d[1];
    q[2] += m * 3.0 * d[0] * d[2];
    q[3] += m * (3.0 * d[1] * d[1] - r2);
    q[4] += m * 3.0 * d[1] * d[2];
    q[5] += m * (3.0 * d[2] * d[2] - r2);
}
