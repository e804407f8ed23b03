//! The tree over ranks that own their particles: each rank builds the part of the one-process
//! tree that holds its own particles, shares the few nodes whose particles lie on several
//! ranks, and receives from the others only the nodes and particles its walks open (its
//! *locally essential tree*), so memory and work per rank follow its own particles
//! (decision 0029).
//!
//! An evaluation on every rank:
//! 1. **The evaluation set**: the particles whose keys (over the one-process tree's cube) fall
//!    in the rank's range of the Morton curve, sent there from whichever rank holds them (the
//!    holder gets the results back). Sorted by key and one-process index, the ranks' sets are
//!    consecutive runs of the one-process tree order.
//! 2. **The shared nodes** ([`discover`]): the nodes whose particles lie on several ranks
//!    (*top* nodes) and their children that lie on one (*roots*, built by that rank), found
//!    level by level from counts and key extremes summed and maximised over the ranks. A group
//!    of targets the one-process tree would form across two ranks moves whole to the lower one,
//!    and the nodes are found again: every group is then one rank's.
//! 3. **The build**: each rank builds the subtrees under its roots with the one-process
//!    builder (the same cells, splits and moments); the roots' moments are gathered and every
//!    rank combines the top nodes' from them in child order, as the one-process build does. The
//!    nodes are the one-process tree's, bit for bit.
//! 4. **The essential tree**: each rank sends every other rank the nodes of its subtrees that a
//!    walk from a box around a run of that rank's groups visits, and the particles of the
//!    leaves it opens: a node accepted for a box is accepted for every group inside it, so
//!    every node a group's walk needs arrives, in the one-process tree's child order.
//! 5. **The walk**: each rank walks its own groups with the one-process walk; lists, and so
//!    accelerations and potential energies, are bitwise those of one process. The results go
//!    back to the particles' holders.

use std::ops::Range;

use mote_core::comm::{self, Comm};
use mote_core::decomposition::Domains;
use mote_core::morton::{interleave, quantise};
use mote_core::{Real, SimdLevel};

use super::build::{Builder, KEY_BITS, Moments, NodeArrays, child_cell, combine, compress};
use super::formula::accepted;
use super::{Multipole, Tree, TreeError, TreeSettings};
use crate::direct::simd::DirectKernels;

/// A link no walk may follow (a remote node's children or particles this rank never received).
const NONE: u32 = u32::MAX;

/// The fewest boxes a rank's groups are merged into for the other ranks' exports (a box holds
/// at most `1 / BOXES` of the rank's particles; boxes also end where the curve jumps): fewer
/// boxes send more nodes (a box around several groups opens more than each of them), more
/// boxes cost more walks on the exporting ranks.
const BOXES: usize = 64;

/// One particle of a rank's evaluation set.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Particle<T> {
    /// Morton key over the tree's cube.
    pub key: u64,
    /// The particle's index in the one-process arrays (the sort's tie-break, as in one
    /// process).
    pub slot: u64,
    /// The rank holding the particle and its index there: where its result goes.
    pub holder: u32,
    pub index: u32,
    /// x, y, z, mass.
    pub p: [T; 4],
}

impl<T: Real> Particle<T> {
    const BYTES: usize = 24 + 4 * std::mem::size_of::<T>();

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.slot.to_le_bytes());
        out.extend_from_slice(&self.holder.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(&self.p));
    }

    fn read(b: &[u8]) -> Self {
        let u64_at = |k: usize| u64::from_le_bytes(b[k..k + 8].try_into().expect("8 bytes"));
        let u32_at = |k: usize| u32::from_le_bytes(b[k..k + 4].try_into().expect("4 bytes"));
        let size = std::mem::size_of::<T>();
        Self {
            key: u64_at(0),
            slot: u64_at(8),
            holder: u32_at(16),
            index: u32_at(20),
            p: std::array::from_fn(|a| {
                bytemuck::pod_read_unaligned(&b[24 + a * size..24 + (a + 1) * size])
            }),
        }
    }
}

/// Sends each particle to the rank `dest` names (its own stay) and returns this rank's
/// particles after the exchange: its own first, then the arrivals in rank order. Collective.
fn route<T: Real>(
    comm: &dyn Comm,
    set: Vec<Particle<T>>,
    dest: impl Fn(&Particle<T>) -> usize,
) -> Vec<Particle<T>> {
    let (size, me) = (comm.size(), comm.rank());
    let mut to: Vec<Vec<u8>> = vec![Vec::new(); size];
    let mut kept = Vec::with_capacity(set.len());
    for q in set {
        let d = dest(&q);
        if d == me {
            kept.push(q);
        } else {
            q.write(&mut to[d]);
        }
    }
    let counts: Vec<usize> = to.iter().map(Vec::len).collect();
    let (recv, _) = comm::exchange(comm, &to.concat(), &counts);
    kept.extend(recv.chunks_exact(Particle::<T>::BYTES).map(Particle::read));
    kept
}

/// A node every rank knows: a top node (its particles lie on several ranks) or a root (a child
/// of a top node whose particles are all on one rank, which builds its subtree).
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    /// The cell the parent gave it (before the one-octant shrinking), and its keys.
    level: u32,
    corner: [f64; 3],
    side: f64,
    keys: Range<u64>,
    /// Particles, over all ranks.
    count: u64,
    /// The lowest and highest ranks holding some of them.
    lowest: u32,
    highest: u32,
    /// A top node's cell (after shrinking) and children (indices into the shared nodes, in
    /// octant order; empty for a leaf). Unused for roots.
    cell: (u32, [f64; 3], f64),
    children: Range<usize>,
}

impl Shared {
    fn is_top(&self) -> bool {
        self.lowest != self.highest
    }

    /// The rank that builds a root.
    fn owner(&self) -> Option<usize> {
        (!self.is_top()).then_some(self.lowest as usize)
    }
}

/// The keys of the cells at `level`: a key's cell prefix shift.
fn shift(level: u32) -> u32 {
    3 * (KEY_BITS - level)
}

/// The particles of `keys` (sorted) whose Morton key lies in `range`.
fn local(keys: &[u128], range: &Range<u64>) -> Range<usize> {
    let at = |k: u64| keys.partition_point(|&x| ((x >> 32) as u64) < k);
    at(range.start)..at(range.end)
}

/// Presence of a count on this rank, for a maximum over ranks: `[rank + 1, size - rank]` when
/// `count > 0`, else zeros (the maxima give the highest and the lowest rank holding some).
fn presence(comm: &dyn Comm, count: usize) -> [u64; 2] {
    if count > 0 {
        [comm.rank() as u64 + 1, (comm.size() - comm.rank()) as u64]
    } else {
        [0, 0]
    }
}

/// Finds the shared nodes of the tree of every rank's `keys` (each rank's sorted keys, `key <<
/// 32 | slot`, a consecutive run of the one-process order) over the cube at `lo` with `side`.
/// Node 0 is the root; a top node's children are consecutive. Collective: at most two small
/// reductions of each kind per level.
pub(crate) fn discover(
    comm: &dyn Comm,
    keys: &[u128],
    settings: &TreeSettings,
    lo: [f64; 3],
    side: f64,
) -> Vec<Shared> {
    let size = comm.size() as u64;
    let whole = 0..1u64 << (3 * KEY_BITS);
    let n = keys.len();
    let mut sums = [n as u64];
    comm.sum_u64(&mut sums);
    let mut pres = presence(comm, n);
    comm.max_u64(&mut pres);
    let mut shared = vec![Shared {
        level: 0,
        corner: lo,
        side,
        keys: whole,
        count: sums[0],
        lowest: (size - pres[1]) as u32,
        highest: pres[0].saturating_sub(1) as u32,
        cell: (0, lo, side),
        children: 0..0,
    }];
    if sums[0] == 0 {
        shared[0].lowest = 0;
        shared[0].highest = 0;
        return shared;
    }
    let mut frontier: Vec<usize> = if shared[0].is_top() { vec![0] } else { vec![] };
    while !frontier.is_empty() {
        // The keys' extremes of each top node: its cell after shrinking.
        let mut ext = Vec::with_capacity(2 * frontier.len());
        for &t in &frontier {
            let r = local(keys, &shared[t].keys);
            if r.is_empty() {
                ext.extend([0, 0]);
            } else {
                ext.extend([
                    (keys[r.end - 1] >> 32) as u64,
                    !((keys[r.start] >> 32) as u64),
                ]);
            }
        }
        comm.max_u64(&mut ext);
        let mut split = Vec::new();
        for (j, &t) in frontier.iter().enumerate() {
            let (last, first) = (ext[2 * j], !ext[2 * j + 1]);
            let s = &mut shared[t];
            s.cell = compress(
                (first as u128) << 32,
                (last as u128) << 32,
                s.level,
                s.corner,
                s.side,
            );
            if s.count as usize > settings.leaf_size && s.cell.0 < KEY_BITS {
                split.push((t, (first >> shift(s.cell.0)) << shift(s.cell.0)));
            }
        }
        // Each split node's octants: counts and the ranks holding them.
        let mut counts = Vec::with_capacity(8 * split.len());
        let mut pres = Vec::with_capacity(16 * split.len());
        for &(t, base) in &split {
            let child = shift(shared[t].cell.0 + 1);
            for o in 0..8u64 {
                let start = base + (o << child);
                let c = local(keys, &(start..start + (1 << child))).len();
                counts.push(c as u64);
                pres.extend(presence(comm, c));
            }
        }
        comm.sum_u64(&mut counts);
        comm.max_u64(&mut pres);
        let mut next = Vec::new();
        for (j, &(t, base)) in split.iter().enumerate() {
            let (level, corner, side) = shared[t].cell;
            let child = shift(level + 1);
            let first = shared.len();
            for o in 0..8 {
                let count = counts[8 * j + o];
                if count == 0 {
                    continue;
                }
                let (c, half) = child_cell(corner, side, o);
                let start = base + ((o as u64) << child);
                let node = Shared {
                    level: level + 1,
                    corner: c,
                    side: half,
                    keys: start..start + (1 << child),
                    count,
                    lowest: (size - pres[16 * j + 2 * o + 1]) as u32,
                    highest: (pres[16 * j + 2 * o] - 1) as u32,
                    cell: (level + 1, c, half),
                    children: 0..0,
                };
                if node.is_top() {
                    next.push(shared.len());
                }
                shared.push(node);
            }
            shared[t].children = first..shared.len();
        }
        frontier = next;
    }
    shared
}

/// A group of targets in terms of the shared nodes, as the one-process tree forms it.
#[derive(Clone, Debug)]
enum Unit {
    /// Consecutive sibling nodes walked together (or one node).
    Group(Range<usize>),
    /// A root with more than a group's particles: its owner forms the groups below it.
    Subtree(usize),
}

/// The groups of the shared nodes below `n`, in order (the one-process `make_groups`).
fn units(shared: &[Shared], n: usize, size: u64, out: &mut Vec<Unit>) {
    let s = &shared[n];
    if s.count <= size || (s.is_top() && s.children.is_empty()) {
        out.push(Unit::Group(n..n + 1));
        return;
    }
    if !s.is_top() {
        out.push(Unit::Subtree(n));
        return;
    }
    let mut run: Option<(Range<usize>, u64)> = None;
    for c in s.children.clone() {
        let cc = shared[c].count;
        if cc > size {
            if let Some((r, _)) = run.take() {
                out.push(Unit::Group(r));
            }
            units(shared, c, size, out);
            continue;
        }
        run = match run {
            Some((r, rc)) if rc + cc <= size => Some((r.start..c + 1, rc + cc)),
            Some((r, _)) => {
                out.push(Unit::Group(r));
                Some((c..c + 1, cc))
            }
            None => Some((c..c + 1, cc)),
        };
    }
    if let Some((r, _)) = run {
        out.push(Unit::Group(r));
    }
}

/// The rank that walks a group: `None` where its particles lie on several ranks.
fn group_owner(shared: &[Shared], r: &Range<usize>) -> Option<usize> {
    let o = shared[r.start].owner()?;
    shared[r.clone()]
        .iter()
        .all(|s| s.owner() == Some(o))
        .then_some(o)
}

/// What one rank evaluated.
#[derive(Clone, Debug, Default)]
pub(crate) struct Evaluated {
    /// This rank's groups' potential-energy sums, in order (when no accelerations were asked
    /// for).
    pub potential: Vec<f64>,
    /// Interactions evaluated on this rank.
    pub interactions: u64,
    /// Nodes and particles received from the other ranks.
    pub imported: [usize; 2],
    /// Groups walked on this rank.
    pub groups: usize,
}

/// Where an evaluation's accelerations go: the holder's arrays (x, y, z) and costs (each
/// particle's list length), in the holder's order.
pub(crate) type Out<'a, T> = ([&'a mut [T]; 3], &'a mut [u64]);

/// Builds this rank's part of the one-process tree of every rank's particles (`pos`, `m`
/// with their one-process indices `slots`) into `tree`, receives its essential tree, and walks
/// its groups: the accelerations and costs of this rank's particles into `out`, or, without
/// `out`, each group's potential-energy sum. `cut`: the ranks' ranges of the curve, used where
/// its cube is the tree's (else the particles are cut by count). Collective; non-finite input
/// on any rank fails on every rank, with `out` untouched.
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate<T: Real + DirectKernels>(
    comm: &dyn Comm,
    tree: &mut Tree<T>,
    settings: &TreeSettings,
    pos: [&[T]; 3],
    m: &[T],
    slots: &[usize],
    cut: Option<&Domains>,
    level: SimdLevel,
    eps2: f64,
    out: Option<Out<'_, T>>,
    backend: mote_core::CpuBackend,
) -> Result<Evaluated, TreeError> {
    let me = comm.rank();
    let n_total = comm::sum_of(comm, m.len() as u64) as usize;
    if n_total >= 1 << 31 {
        return Err(TreeError::TooMany(n_total));
    }
    // Non-finite input anywhere fails everywhere (the one-process build fails).
    let bad = (0..m.len())
        .find(|&i| !(pos.iter().all(|p| p[i].as_f64().is_finite()) && m[i].as_f64().is_finite()));
    if comm::max_of(comm, bad.is_some() as u64) != 0 {
        return Err(TreeError::NonFinite {
            index: bad.unwrap_or(usize::MAX),
        });
    }
    if n_total == 0 {
        tree.resize_essential(&[], 0)?;
        return Ok(Evaluated::default());
    }
    let (lo, side) = Domains::cube_of(comm, 3, pos);
    if !(side.is_finite() && lo.iter().all(|c| c.is_finite())) {
        return Err(TreeError::Span);
    }
    let domains = match cut {
        Some(d) if d.cube() == (lo, side) => d.clone(),
        _ => Domains::balanced(comm, 3, pos, &vec![1; m.len()]),
    };

    // 1. The evaluation set.
    let key = |i: usize| {
        let q: [u64; 3] =
            std::array::from_fn(|a| quantise(pos[a][i].as_f64(), lo[a], side, KEY_BITS));
        interleave(q, KEY_BITS)
    };
    let set: Vec<Particle<T>> = (0..m.len())
        .map(|i| Particle {
            key: key(i),
            slot: slots[i] as u64,
            holder: me as u32,
            index: i as u32,
            p: [pos[0][i], pos[1][i], pos[2][i], m[i]],
        })
        .collect();
    let sort = |set: &mut Vec<Particle<T>>| set.sort_unstable_by_key(|q| (q.key, q.slot));
    let keys_of = |set: &[Particle<T>]| -> Vec<u128> {
        set.iter()
            .map(|q| ((q.key as u128) << 32) | q.slot as u128)
            .collect()
    };
    let mut set = route(comm, set, |q| domains.owner(q.key));
    sort(&mut set);

    // 2. The shared nodes; groups across ranks move to their lowest rank.
    let group_size = settings.group_size as u64;
    let mut shared = discover(comm, &keys_of(&set), settings, lo, side);
    let mut plan = Vec::new();
    units(&shared, 0, group_size, &mut plan);
    let moves: Vec<(Range<u64>, usize)> = plan
        .iter()
        .filter_map(|u| match u {
            Unit::Group(r) if group_owner(&shared, r).is_none() => {
                let to = shared[r.clone()].iter().map(|s| s.lowest).min();
                let keys = shared[r.start].keys.start..shared[r.end - 1].keys.end;
                Some((keys, to.expect("a group has nodes") as usize))
            }
            _ => None,
        })
        .collect();
    if comm::max_of(comm, moves.len() as u64) != 0 {
        set = route(comm, set, |q| {
            let k = moves.partition_point(|(r, _)| r.end <= q.key);
            match moves.get(k) {
                Some((r, to)) if r.contains(&q.key) => *to,
                _ => me,
            }
        });
        sort(&mut set);
        shared = discover(comm, &keys_of(&set), settings, lo, side);
        plan.clear();
        units(&shared, 0, group_size, &mut plan);
    }

    // 3. The build: this rank's subtrees, then the top nodes from every root's moments.
    let n = set.len();
    let keys = keys_of(&set);
    let quadrupole = settings.multipole == Multipole::Quadrupole;
    // A subtree of `k` particles has fewer than `2k` nodes; the whole tree gets at most one
    // per particle (beyond that one process makes larger leaves, which is refused below).
    let capacity = (shared.len() + 2 * n).min(n_total.max(shared.len()));
    // A test's fault: one rank's reservation is too small for its tree.
    let resized = if comm::fault("essential", comm.rank()) {
        Err(TreeError::Memory("capacity exceeded (test fault)".into()))
    } else {
        tree.resize_essential(&keys, capacity)
    };
    agreed(comm, resized)?;
    {
        let order = tree.order.as_mut_slice();
        let [px, py, pz] = &mut tree.pos;
        let (px, py, pz, pm) = (
            px.as_mut_slice(),
            py.as_mut_slice(),
            pz.as_mut_slice(),
            tree.mass.as_mut_slice(),
        );
        for (k, q) in set.iter().enumerate() {
            order[k] = k as u32;
            (px[k], py[k], pz[k], pm[k]) = (q.p[0], q.p[1], q.p[2], q.p[3]);
        }
    }
    let mut moments = vec![Moments::default(); shared.len()];
    let mut cells = vec![[0.0f64; 4]; shared.len()];
    let mut mine_roots = Vec::new();
    let descendants = {
        let mut b = Builder {
            keys: tree.keys.as_slice(),
            x: tree.pos[0].as_slice(),
            y: tree.pos[1].as_slice(),
            z: tree.pos[2].as_slice(),
            m: tree.mass.as_slice(),
            settings,
            quadrupole,
            capacity,
            used: shared.len(),
            clamped: false,
            out: NodeArrays {
                geometry: tree.geometry.as_mut_slice(),
                mass: tree.node_mass.as_mut_slice(),
                links: tree.links.as_mut_slice(),
                quad: tree.quad.each_mut().map(|b| b.as_mut_slice()),
            },
        };
        for (i, s) in shared.iter().enumerate() {
            if s.owner() != Some(me) {
                continue;
            }
            let r = local(&keys, &s.keys);
            moments[i] = b.node(i, r.start, r.end, s.level, s.corner, s.side);
            // The root's cell after shrinking, for the other ranks' copy of its record.
            let (_, c, sd) = compress(keys[r.start], keys[r.end - 1], s.level, s.corner, s.side);
            cells[i] = [c[0], c[1], c[2], sd];
            mine_roots.push(i);
        }
        (b.used - shared.len(), b.clamped)
    };
    let (descendants, clamped) = descendants;
    let total_nodes = shared.len() as u64 + comm::sum_of(comm, descendants as u64);
    if total_nodes > n_total as u64 || comm::max_of(comm, clamped as u64) != 0 {
        return Err(TreeError::Nodes {
            nodes: total_nodes as usize,
            particles: n_total,
        });
    }
    // Every root's moments and cell, gathered in rank order, each rank's in index order.
    let mut mine = Vec::with_capacity(14 * mine_roots.len());
    for &i in &mine_roots {
        mine.extend_from_slice(bytemuck::cast_slice::<Moments, f64>(&[moments[i]]));
        mine.extend_from_slice(&cells[i]);
    }
    let (all, _) = comm::all_gather_varied(comm, &mine);
    // The roots in the order their records arrive: by owner, each owner's by index.
    let mut roots: Vec<(usize, usize)> = (0..shared.len())
        .filter_map(|i| shared[i].owner().map(|o| (o, i)))
        .collect();
    roots.sort_unstable();
    assert_eq!(roots.len() * 14, all.len(), "one record per root");
    for (&(_, i), r) in roots.iter().zip(all.chunks_exact(14)) {
        moments[i] = bytemuck::pod_read_unaligned(bytemuck::cast_slice(&r[..10]));
        cells[i] = [r[10], r[11], r[12], r[13]];
    }
    let nodes_here = shared.len() + descendants;
    {
        let mut out = NodeArrays {
            geometry: tree.geometry.as_mut_slice(),
            mass: tree.node_mass.as_mut_slice(),
            links: tree.links.as_mut_slice(),
            quad: tree.quad.each_mut().map(|b| b.as_mut_slice()),
        };
        for i in (0..shared.len()).rev() {
            let s = &shared[i];
            if let Some(owner) = s.owner() {
                let [cx, cy, cz, sd] = cells[i];
                out.write(i, &moments[i], [cx, cy, cz], sd, settings.theta, quadrupole);
                if owner != me {
                    out.links[i] = [NONE, 1, NONE, s.count as u32];
                }
                continue;
            }
            assert!(
                !s.children.is_empty(),
                "no group lies on two ranks, so neither does a leaf"
            );
            let parts: Vec<Moments> = s.children.clone().map(|c| moments[c]).collect();
            let (_, corner, sd) = s.cell;
            moments[i] = combine(&parts, corner, sd, quadrupole);
            out.write(i, &moments[i], corner, sd, settings.theta, quadrupole);
            out.links[i] = [
                s.children.start as u32,
                s.children.len() as u32,
                NONE,
                s.count as u32,
            ];
        }
    }
    tree.nodes = nodes_here;

    // This rank's groups, in order.
    tree.groups.truncate(0);
    for u in &plan {
        match u {
            Unit::Group(r) => {
                let owner = group_owner(&shared, r).expect("every group is one rank's");
                if owner == me {
                    let start = local(&keys, &shared[r.start].keys).start;
                    let count: u64 = shared[r.clone()].iter().map(|s| s.count).sum();
                    tree.groups
                        .push([start as u32, count as u32])
                        .expect("groups are at most one per particle, as reserved");
                }
            }
            Unit::Subtree(i) if shared[*i].owner() == Some(me) => {
                tree.make_groups(*i, settings.group_size);
            }
            Unit::Subtree(_) => {}
        }
    }
    debug_assert_eq!(
        tree.groups
            .as_slice()
            .iter()
            .map(|g| g[1] as usize)
            .sum::<usize>(),
        n,
        "the groups tile the rank's particles"
    );

    // 4. The essential tree.
    let imported = essential(comm, tree, &shared, n)?;

    // 5. The walk.
    let mut done = Evaluated {
        imported,
        groups: tree.group_count(),
        ..Evaluated::default()
    };
    let Some(out) = out else {
        done.potential = super::potential_of(tree, 0..tree.group_count(), eps2, backend);
        return Ok(done);
    };
    let all: Vec<usize> = (0..tree.group_count()).collect();
    let lengths = super::walk_all(tree, &all, level, T::cast(eps2), backend);
    let mut cost = vec![0u64; n];
    for (&[s, c], &l) in tree.groups.as_slice().iter().zip(&lengths) {
        cost[s as usize..(s + c) as usize].fill(l);
        done.interactions += c as u64 * l;
    }
    let acc = tree.acc.each_ref().map(|b| &b.as_slice()[..n]);
    deliver(comm, &set, acc, &cost, out);
    Ok(done)
}

/// Hands each particle's acceleration and cost to the rank holding it (the evaluation set
/// `set`'s results `acc` and `cost`, in its order). Collective.
fn deliver<T: Real>(
    comm: &dyn Comm,
    set: &[Particle<T>],
    acc: [&[T]; 3],
    cost: &[u64],
    out: Out<'_, T>,
) {
    let ([ox, oy, oz], costs) = out;
    let n = costs.len();
    let got = crate::owned::hand_back(
        comm,
        set.iter().map(|q| (q.holder as usize, q.index as u64)),
        acc,
        cost,
        |i, a, c| {
            let i = i as usize;
            (ox[i], oy[i], oz[i], costs[i]) = (a[0], a[1], a[2], c);
        },
    );
    assert_eq!(got, n, "every particle of this rank got one result");
}

/// Boxes around runs of consecutive `groups` (of the `n` particles of `view`) for the other
/// ranks' exports: a run grows while its box stays within twice the longest side of its
/// largest group's box and holds at most `n / BOXES` particles. Consecutive groups along the
/// curve are usually neighbours, but the curve jumps, and a box across a jump (or around a
/// sparse region's groups) would make the other ranks send everything it opens; such groups
/// get boxes of their own.
fn boxes<T: Real>(view: &super::walk::View<'_, T>, groups: &[[u32; 2]], n: usize) -> Vec<[T; 6]> {
    let cap = n.div_ceil(BOXES).max(1);
    let side = |b: &[T; 6]| {
        (0..3)
            .map(|a| (b[3 + a] - b[a]).as_f64())
            .fold(0.0, f64::max)
    };
    let mut out: Vec<[T; 6]> = Vec::new();
    let mut run: Option<([T; 6], f64, usize)> = None;
    for &[start, count] in groups {
        let r = start as usize..(start + count) as usize;
        let mut g = [T::infinity(); 6];
        for a in 0..3 {
            g[3 + a] = T::neg_infinity();
        }
        for (a, c) in [view.x, view.y, view.z].into_iter().enumerate() {
            for &v in &c[r.clone()] {
                g[a] = g[a].min(v);
                g[3 + a] = g[3 + a].max(v);
            }
        }
        let own = side(&g);
        run = match run {
            Some((b, largest, k)) => {
                let merged: [T; 6] = std::array::from_fn(|a| {
                    if a < 3 {
                        b[a].min(g[a])
                    } else {
                        b[a].max(g[a])
                    }
                });
                let largest = largest.max(own);
                if k + r.len() <= cap && side(&merged) <= 2.0 * largest {
                    Some((merged, largest, k + r.len()))
                } else {
                    out.push(b);
                    Some((g, own, r.len()))
                }
            }
            None => Some((g, own, r.len())),
        };
    }
    out.extend(run.map(|(b, _, _)| b));
    out
}

/// `result` where it succeeded on every rank, else an error on every rank (this rank's own, or
/// one naming another rank's). Collective.
fn agreed(comm: &dyn Comm, result: Result<(), TreeError>) -> Result<(), TreeError> {
    let failed = comm::max_of(comm, result.is_err() as u64) != 0;
    match result {
        Err(e) => Err(e),
        Ok(()) if failed => Err(TreeError::Elsewhere),
        Ok(()) => Ok(()),
    }
}

/// Sends every other rank the nodes and particles of this rank's subtrees its walks need and
/// appends what the others send to `tree` (whose first `shared.len()` nodes are the shared
/// ones and first `n` particles this rank's). Returns the nodes and particles received.
/// Collective.
fn essential<T: Real>(
    comm: &dyn Comm,
    tree: &mut Tree<T>,
    shared: &[Shared],
    n: usize,
) -> Result<[usize; 2], TreeError> {
    let (size, me) = (comm.size(), comm.rank());
    if size == 1 {
        return Ok([0, 0]);
    }
    // Boxes around runs of this rank's groups, gathered.
    let view = super::view(tree);
    let mine = boxes(&view, tree.groups.as_slice(), n);
    let (boxes, counts) = comm::all_gather_varied(comm, &mine);
    let quadrupole = !view.quad[0].is_empty();
    let record = 20 + (if quadrupole { 10 } else { 5 }) * std::mem::size_of::<T>();
    let pbytes = 4 * std::mem::size_of::<T>();

    // Exports: for each rank, the nodes of this rank's subtrees a walk from each of its boxes
    // visits (marked 1; 2: its particles are needed too).
    let nodes = tree.nodes;
    // Per destination only the nodes its boxes visit are touched, then cleared: the work is
    // the visits, not the rank's nodes times the ranks.
    let mut mark = vec![0u8; nodes];
    let mut place = vec![NONE; nodes];
    let mut touched: Vec<usize> = Vec::new();
    let mut stack = Vec::new();
    let mut send: Vec<u8> = Vec::new();
    let mut send_counts = vec![0usize; size];
    let mut at = 0;
    for (q, &c) in counts.iter().enumerate() {
        let theirs = &boxes[at..at + c];
        at += c;
        if q == me {
            continue;
        }
        for b in theirs {
            stack.push(0u32);
            while let Some(k) = stack.pop() {
                let k = k as usize;
                let shared_top = k < shared.len() && shared[k].is_top();
                if k < shared.len() && !shared_top && shared[k].owner() != Some(me) {
                    continue;
                }
                let [cx, cy, cz, open2] = view.geometry[k];
                let [cs, cc, _, bodies] = view.links[k];
                let ok = accepted(b[0], b[1], b[2], b[3], b[4], b[5], cx, cy, cz, open2);
                if !shared_top {
                    if mark[k] == 0 {
                        touched.push(k);
                    }
                    mark[k] |= 1;
                    if (ok && bodies == 1) || (!ok && cc == 0) {
                        mark[k] |= 2;
                    }
                }
                if !ok && cc != 0 {
                    stack.extend(cs..cs + cc);
                }
            }
        }
        let start = send.len();
        // Serialised in index order: roots, then descendants; a child block is exported whole
        // or not at all, so it stays consecutive.
        touched.sort_unstable();
        for (j, &k) in touched.iter().enumerate() {
            place[k] = j as u32;
        }
        let count = touched.len() as u32;
        let mut particles = 0u32;
        let mut body: Vec<u8> = Vec::new();
        let mut parts: Vec<u8> = Vec::new();
        for &k in &touched {
            let [cs, cc, ps, pc] = view.links[k];
            let child = if cc != 0 && mark[cs as usize] != 0 {
                place[cs as usize]
            } else {
                NONE
            };
            let first = if mark[k] & 2 != 0 {
                let f = particles;
                for j in ps as usize..(ps + pc) as usize {
                    for v in [view.x[j], view.y[j], view.z[j], view.m[j]] {
                        parts.extend_from_slice(bytemuck::bytes_of(&v));
                    }
                }
                particles += pc;
                f
            } else {
                NONE
            };
            let root = if k < shared.len() { k as u32 } else { NONE };
            for w in [root, child, cc, first, pc] {
                body.extend_from_slice(&w.to_le_bytes());
            }
            body.extend_from_slice(bytemuck::cast_slice(&view.geometry[k]));
            body.extend_from_slice(bytemuck::bytes_of(&view.mass[k]));
            if quadrupole {
                for qk in &view.quad {
                    body.extend_from_slice(bytemuck::bytes_of(&qk[k]));
                }
            }
        }
        send.extend_from_slice(&(count as u64).to_le_bytes());
        send.extend_from_slice(&(particles as u64).to_le_bytes());
        send.extend_from_slice(&body);
        send.extend_from_slice(&parts);
        send_counts[q] = send.len() - start;
        for k in touched.drain(..) {
            (mark[k], place[k]) = (0, NONE);
        }
    }
    let (recv, recv_counts) = comm::exchange(comm, &send, &send_counts);

    // Imports: sized first, then appended.
    let word = |b: &[u8], k: usize| u64::from_le_bytes(b[k..k + 8].try_into().expect("8 bytes"));
    let mut messages = Vec::new();
    let mut at = 0;
    for &c in &recv_counts {
        if c > 0 {
            messages.push(&recv[at..at + c]);
        }
        at += c;
    }
    let (mut new_nodes, mut new_particles) = (0usize, 0usize);
    for msg in &messages {
        new_nodes += word(msg, 0) as usize;
        new_particles += word(msg, 8) as usize;
    }
    agreed(
        comm,
        tree.grow_essential(n + new_particles, tree.nodes + new_nodes),
    )?;
    let (mut node_at, mut part_at) = (tree.nodes, n);
    let (mut got_nodes, mut got_particles) = (0, 0);
    let tsize = std::mem::size_of::<T>();
    for msg in messages {
        let count = word(msg, 0) as usize;
        let particles = word(msg, 8) as usize;
        let body = &msg[16..16 + count * record];
        let parts = &msg[16 + count * record..];
        debug_assert_eq!(parts.len(), particles * pbytes);
        let u32_at = |r: &[u8], k: usize| u32::from_le_bytes(r[k..k + 4].try_into().expect("4"));
        let t_at = |r: &[u8], k: usize| -> T { bytemuck::pod_read_unaligned(&r[k..k + tsize]) };
        // Where each record goes: roots onto the shared copy, the rest appended in order.
        let mut place = Vec::with_capacity(count);
        for r in body.chunks_exact(record) {
            let root = u32_at(r, 0);
            if root != NONE {
                place.push(root as usize);
            } else {
                place.push(node_at);
                node_at += 1;
                got_nodes += 1;
            }
        }
        for (j, r) in body.chunks_exact(record).enumerate() {
            let k = place[j];
            let (child, cc, first, pc) = (u32_at(r, 4), u32_at(r, 8), u32_at(r, 12), u32_at(r, 16));
            tree.links.as_mut_slice()[k] = [
                if child == NONE {
                    NONE
                } else {
                    place[child as usize] as u32
                },
                cc,
                if first == NONE {
                    NONE
                } else {
                    (part_at + first as usize) as u32
                },
                pc,
            ];
            tree.geometry.as_mut_slice()[k] = std::array::from_fn(|a| t_at(r, 20 + a * tsize));
            tree.node_mass.as_mut_slice()[k] = t_at(r, 20 + 4 * tsize);
            if quadrupole {
                for (qk, b) in tree.quad.iter_mut().enumerate() {
                    b.as_mut_slice()[k] = t_at(r, 20 + (5 + qk) * tsize);
                }
            }
        }
        for (j, p) in parts.chunks_exact(pbytes).enumerate() {
            let v =
                |a: usize| -> T { bytemuck::pod_read_unaligned(&p[a * tsize..(a + 1) * tsize]) };
            tree.pos[0].as_mut_slice()[part_at + j] = v(0);
            tree.pos[1].as_mut_slice()[part_at + j] = v(1);
            tree.pos[2].as_mut_slice()[part_at + j] = v(2);
            tree.mass.as_mut_slice()[part_at + j] = v(3);
        }
        part_at += particles;
        got_particles += particles;
    }
    tree.nodes = node_at;
    Ok([got_nodes, got_particles])
}
