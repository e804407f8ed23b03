//! A cloud split between ranks: each rank holds the particles it owns and the *halo* it reads,
//! and exchanges the halo's per-particle records after every pass that writes them.
//!
//! The split (decision 0030): rank `r` owns the contiguous range `r` of the one-process particle
//! order cut into whole blocks ([`mote_core::comm::block_ranges`], the ranges the replicated
//! passes split by). Its halo is the rings of the one-process neighbour graph around its
//! particles: their neighbours (ring 1), and theirs (ring 2) where a pass reads what a
//! neighbour's list gives (the conservative formulation's reverse coefficients, WENO's stencil
//! validity, a boundary particle's interior neighbour). A rank keeps own and halo particles in
//! the one-process order, so its own particles are one contiguous run of its local indices, and
//! searches them on the one-process bins ([`crate::NeighbourSearch::with_bounds`]): each bin
//! lists its particles in ascending index, so every local list of an own particle (and, with
//! two rings, of a ring-1 particle) is the one-process list (the same neighbours in the same
//! order, renumbered), and so are their MLS coefficients and reverse slots. The outer ring's
//! lists are incomplete; nothing an own particle's result depends on reads them.
//!
//! No rank needs the whole cloud to find its halo (decision 0033, [`split_own`]): from its own
//! particles it gathers every particle within the rings' reach ([`around`]: ring 1 lies within
//! one search radius, ring 2 within two), searches them on the one-process bins and keeps the
//! rings of those local lists, which are the one-process rings. One ring holds every own
//! particle's neighbours: enough for the passes of the MLS-divergence formulation, which read no
//! neighbour's list; the conservative formulation reads a neighbour's coefficient (its reverse
//! slot), whose fit needs the neighbour's whole list: two rings.
//!
//! A moving cloud (decision 0031) holds a halo by distance instead ([`around`]: every particle
//! within the search radius, or two, plus a skin of an own particle, found from the own
//! particles without the whole cloud), and its Morton reorderings migrate particles between
//! ranks ([`reorder`]).
//!
//! Every pass that writes a record per particle from its neighbours' inputs computes it for the
//! own particles only, then [`Halo::exchange`] copies the owners' records into the whole halo.
//! Element-wise work (the Runge-Kutta stage combinations) runs on every local
//! particle and gives the owners' bits, so the whole local state stays the one-process state
//! restricted to the rank's particles. Reductions (the stable step, MOOD's counts, the
//! finiteness check) run over the own particles and combine over the ranks.

use std::ops::Range;
use std::sync::Arc;

use mote_core::Real;
use mote_core::columns::Permutation;
use mote_core::comm::{self, Comm, Share};

use crate::cloud::Cloud;
use crate::error::CloudError;
use crate::search::{NeighbourList, NeighbourSearch, SearchGrid, SlotLayout};

/// Particles per block of the one-process order that ranks own whole (or, on a replicated
/// cloud, compute: the passes' ranges, `scheme::on_own_blocks`).
pub const OWN_BLOCK: usize = 256;

/// The ranks' ranges of the one-process order `0..n` over `parts` ranks: contiguous, whole
/// [`OWN_BLOCK`]s. One cut for the split cloud's ownership and the replicated passes' ranges.
pub fn own_ranges(n: usize, parts: usize) -> Vec<Range<usize>> {
    comm::block_ranges(n, parts, OWN_BLOCK)
}

/// The rings of neighbours a split cloud's halo holds: two where a pass reads what a
/// neighbour's list gives (`reads_lists`: the conservative formulation's reverse coefficients,
/// WENO's stencil validity, [`crate::scheme::reads_neighbour_lists`]) and for a boundary
/// particle's interior neighbour (up to two hops away, with `boundary` particles in the cloud);
/// one otherwise (every neighbour record comes by exchange). One rule for every backend.
pub fn rings(boundary: bool, reads_lists: bool) -> usize {
    if boundary || reads_lists { 2 } else { 1 }
}

/// What a rank holds of a split cloud and how its halo is refreshed.
#[derive(Debug)]
pub struct Halo {
    comm: Arc<dyn Comm>,
    /// The own particles' local indices.
    own: Range<usize>,
    /// The one-process index of the first own particle.
    first: usize,
    /// The one-process particle count.
    total: usize,
    /// The one-process index of every local particle (ascending).
    global: Vec<usize>,
    /// Local indices of the own particles other ranks read, grouped by reading rank.
    send: Vec<u32>,
    /// Particles sent to each rank.
    send_counts: Vec<usize>,
    /// Local indices of the halo particles, grouped by owning rank (ascending one-process
    /// index within a group, as the owners send them).
    recv: Vec<u32>,
    /// Particles received from each rank.
    recv_counts: Vec<usize>,
}

impl Halo {
    /// The communicator of the split.
    pub fn comm(&self) -> &dyn Comm {
        self.comm.as_ref()
    }

    /// The communicator of the split, shared (another backend's passes over the same split).
    pub fn comm_shared(&self) -> Arc<dyn Comm> {
        self.comm.clone()
    }

    /// The communicator of the split, shared.
    pub(crate) fn comm_arc(&self) -> Arc<dyn Comm> {
        self.comm.clone()
    }

    /// The own particles' local indices.
    pub fn own(&self) -> Range<usize> {
        self.own.clone()
    }

    /// The one-process index of the first own particle (the own particles are the
    /// one-process particles `first..first + own().len()`).
    pub fn first(&self) -> usize {
        self.first
    }

    /// The one-process particle count.
    pub fn total(&self) -> usize {
        self.total
    }

    /// This rank's share of the one-process order: its own particles' local indices, over the
    /// ranks (what sums over a split cloud reduce over).
    pub fn share(&self) -> Share<'_> {
        Share {
            comm: self.comm.as_ref(),
            first: self.first,
            own_start: self.own.start,
            own_end: self.own.end,
            total: self.total,
        }
    }

    /// The one-process index of every local particle, ascending.
    pub fn global(&self) -> &[usize] {
        &self.global
    }

    /// The local index of one-process particle `g`, if this rank holds it.
    pub fn local_of(&self, g: usize) -> Option<usize> {
        self.global.binary_search(&g).ok()
    }

    /// Halo particles (the local particles this rank does not own).
    pub fn halo_len(&self) -> usize {
        self.recv.len()
    }

    /// Own particles that other ranks read (counted once per reading rank).
    pub fn sent_len(&self) -> usize {
        self.send.len()
    }

    /// The local indices of the own particles other ranks read, grouped by reading rank: the
    /// records [`exchange_packed`](Self::exchange_packed) sends, in its order.
    pub fn sent(&self) -> &[u32] {
        &self.send
    }

    /// The local indices of the halo particles, grouped by owning rank: the records
    /// [`exchange_packed`](Self::exchange_packed) returns, in its order.
    pub fn received(&self) -> &[u32] {
        &self.recv
    }

    /// The exchange of records packed by the caller (a device's own particles, gathered there):
    /// `send` holds `width` values for each of [`sent`](Self::sent) in order; returns the halo's
    /// records from their owners, `width` values for each of [`received`](Self::received) in
    /// order. Collective.
    pub fn exchange_packed<T: bytemuck::Pod>(&self, send: &[T], width: usize) -> Vec<T> {
        assert_eq!(
            send.len(),
            self.send.len() * width,
            "one record per sent particle"
        );
        if self.comm.size() == 1 || width == 0 {
            return vec![T::zeroed(); self.recv.len() * width];
        }
        self.swap_packed(send, width)
    }

    /// Copies the owners' records into the halo: `data` holds `width` values per local particle;
    /// afterwards every halo particle's record is its owner's. Collective.
    pub fn exchange<T: bytemuck::Pod>(&self, data: &mut [T], width: usize) {
        let recv = self.swap(width, |i, send: &mut Vec<T>| {
            send.extend_from_slice(&data[i * width..(i + 1) * width]);
        });
        for (&i, r) in self.recv.iter().zip(recv.chunks_exact(width.max(1))) {
            let i = i as usize;
            data[i * width..(i + 1) * width].copy_from_slice(r);
        }
    }

    /// [`exchange`](Self::exchange) of several arrays of one value per local particle (the
    /// variables of a state) in one message per rank. Collective.
    pub fn exchange_columns<T: bytemuck::Pod>(&self, columns: &mut [&mut [T]]) {
        let width = columns.len();
        let recv = self.swap(width, |i, send: &mut Vec<T>| {
            send.extend(columns.iter().map(|c| c[i]));
        });
        for (&i, r) in self.recv.iter().zip(recv.chunks_exact(width.max(1))) {
            for (column, &x) in columns.iter_mut().zip(r) {
                column[i as usize] = x;
            }
        }
    }

    /// The all-to-all both forms share: `pack(i, send)` appends own particle `i`'s record of
    /// `width` values for each rank that reads it; returns the halo's records from their
    /// owners, in the order of the halo's local indices (`recv`). Empty on one rank.
    fn swap<T: bytemuck::Pod>(&self, width: usize, pack: impl Fn(usize, &mut Vec<T>)) -> Vec<T> {
        if self.comm.size() == 1 || width == 0 {
            return Vec::new();
        }
        let mut send: Vec<T> = Vec::with_capacity(self.send.len() * width);
        for &i in &self.send {
            pack(i as usize, &mut send);
        }
        self.swap_packed(&send, width)
    }

    /// The all-to-all of records packed in `send` (see [`swap`](Self::swap)).
    fn swap_packed<T: bytemuck::Pod>(&self, send: &[T], width: usize) -> Vec<T> {
        let record = width * std::mem::size_of::<T>();
        let send_counts: Vec<usize> = self.send_counts.iter().map(|c| c * record).collect();
        let recv_counts: Vec<usize> = self.recv_counts.iter().map(|c| c * record).collect();
        let mut recv = vec![T::zeroed(); self.recv.len() * width];
        // Messages to the bordering ranks only (point to point on MPI).
        self.comm.sparse_exchange_bytes(
            bytemuck::cast_slice(send),
            &send_counts,
            bytemuck::cast_slice_mut(&mut recv),
            &recv_counts,
        );
        recv
    }

    /// The first failure over the ranks, in the one-process order: each rank passes its own
    /// first (`None` where it has none); every rank gets back the lowest failing rank's record.
    /// Ranks own consecutive runs of the one-process order, so that record is the failure one
    /// process finds first. Collective.
    pub fn first_failure<const N: usize>(&self, mine: Option<[u64; N]>) -> Option<[u64; N]> {
        first_failure(self.comm.as_ref(), mine)
    }

    /// The largest of `value` over the ranks (values whose bit patterns order as the numbers
    /// do: non-negative floats). Collective.
    pub fn max_of(&self, value: u64) -> u64 {
        comm::max_of(self.comm.as_ref(), value)
    }

    /// `values` summed over the ranks. Collective.
    pub fn sum(&self, values: &mut [u64]) {
        self.comm.sum_u64(values);
    }
}

fn first_failure<const N: usize>(comm: &dyn Comm, mine: Option<[u64; N]>) -> Option<[u64; N]> {
    let size = comm.size();
    if size == 1 {
        return mine;
    }
    let mut record = [0u64; N];
    let flag = match mine {
        Some(r) => {
            record = r;
            1
        }
        None => 0,
    };
    let mut all = vec![0u64; size * (N + 1)];
    let mut own = vec![flag];
    own.extend_from_slice(&record);
    comm::all_gather(comm, &own, &vec![N + 1; size], &mut all);
    all.chunks_exact(N + 1)
        .find(|c| c[0] == 1)
        .map(|c| std::array::from_fn(|k| c[k + 1]))
}

/// Marks the local particles `own` and `rings` rings (1 or 2) of neighbours around them in
/// `list` (of `len` local particles).
fn rings_of<L: SlotLayout>(
    list: &NeighbourList<L>,
    own: Range<usize>,
    rings: usize,
    len: usize,
) -> Vec<bool> {
    let mut holds = vec![false; len];
    holds[own.clone()].fill(true);
    let mut first_ring = Vec::new();
    for i in own {
        for j in list.neighbours(i) {
            let j = j as usize;
            if !holds[j] {
                holds[j] = true;
                first_ring.push(j);
            }
        }
    }
    if rings > 1 {
        for &j in &first_ring {
            for k in list.neighbours(j) {
                holds[k as usize] = true;
            }
        }
    }
    holds
}

/// This rank's part of a split cloud: the particles of `cloud` that `holds` marks (in order:
/// `global(i)`, the one-process index of local particle `i`, ascending), which include the
/// rank's own particles `mine` of the one-process order (of `total` particles), and the
/// [`Halo`] that refreshes the others from their owners (who learn which of their particles
/// each rank reads). Collective.
fn keep_held<R: Real, const D: usize>(
    mut cloud: Cloud<R, D>,
    holds: &[bool],
    global: impl Fn(usize) -> usize,
    mine: Range<usize>,
    total: usize,
    comm: Arc<dyn Comm>,
) -> (Cloud<R, D>, Halo) {
    let size = comm.size();
    let ranges = own_ranges(total, size);
    let kept: Vec<usize> = (0..cloud.len()).filter(|&i| holds[i]).collect();
    let held: Vec<usize> = kept.iter().map(|&i| global(i)).collect();
    let own_start = held.partition_point(|&i| i < mine.start);
    let own = own_start..own_start + mine.len();
    // The halo in ascending one-process index: grouped by owner in rank order, since the
    // owners' ranges follow each other.
    let owner = |g: usize| ranges.partition_point(|r| r.end <= g);
    let mut recv = Vec::new();
    let mut recv_counts = vec![0usize; size];
    let mut request: Vec<u64> = Vec::new();
    for (local, &g) in held.iter().enumerate() {
        if !mine.contains(&g) {
            recv.push(local as u32);
            recv_counts[owner(g)] += 1;
            request.push(g as u64);
        }
    }
    // Each owner learns which of its particles each rank reads.
    let bytes: Vec<usize> = recv_counts.iter().map(|c| c * 8).collect();
    let (asked, asked_bytes) =
        comm::exchange(comm.as_ref(), bytemuck::cast_slice(&request), &bytes);
    let send: Vec<u32> = asked
        .chunks_exact(8)
        .map(|b| {
            let g = u64::from_ne_bytes(b.try_into().expect("8 bytes")) as usize;
            (g - mine.start + own.start) as u32
        })
        .collect();
    let send_counts: Vec<usize> = asked_bytes.iter().map(|b| b / 8).collect();
    // The held particles first, in order, then dropped.
    let n = cloud.len();
    let mut order = kept;
    order.extend((0..n).filter(|&i| !holds[i]));
    let perm = Permutation::new(order).expect("a permutation of the particles");
    cloud.apply_permutation(&perm);
    cloud.truncate(held.len());
    (
        cloud,
        Halo {
            comm,
            own,
            first: mine.start,
            total,
            global: held,
            send,
            send_counts,
            recv,
            recv_counts,
        },
    )
}

/// Splits a cloud for this rank of `comm` from its own particles alone: `own` holds the
/// one-process particles `first..first + own.len()` of `total`, which must be this rank's
/// range of [`own_ranges`]. The rank gathers every particle within `rings` search radii of its
/// own (with a margin: [`around`]), searches them within `radius` on the whole cloud's bins
/// (its extent agreed over the ranks), and keeps its own particles and their `rings` rings of
/// neighbours (1 or 2) in the one-process order: the rings of the whole cloud's neighbour
/// graph, found without the whole cloud or its neighbour lists.
/// Returns the search too (the whole cloud's bins), which gives the part the one-process lists
/// of its own particles (and ring 1's, with two rings). Collective.
#[allow(clippy::too_many_arguments)]
pub fn split_own<R: Real, const D: usize, L: SlotLayout>(
    own: Cloud<R, D>,
    first: usize,
    total: usize,
    radius: f64,
    rings: usize,
    backend: mote_core::CpuBackend,
    comm: Arc<dyn Comm>,
) -> Result<(Cloud<R, D>, Halo, NeighbourSearch), CloudError> {
    let mine = first..first + own.len();
    // Agreed, so that no rank waits for one that refused.
    let wrong = u64::from(own_ranges(total, comm.size()).get(comm.rank()) != Some(&mine));
    if comm::max_of(comm.as_ref(), wrong) == 1 {
        return Err(CloudError::invalid(
            "own particles",
            format!("{mine:?} of {total}"),
            "every rank's rows its range of the one-process order (halo::own_ranges)",
        ));
    }
    let (min, max) = extent(comm.as_ref(), own.positions(), 0..own.len());
    let mut search = NeighbourSearch::new(radius)?.with_bounds(&min, &max);
    // A neighbour's neighbour lies within two radii; the margin covers the rounding of
    // distances and cell coordinates (what it adds is dropped below).
    let width = rings as f64 * radius * 1.01;
    let (local, wide) = around(own, first, total, width, comm.clone())?;
    let mut list = NeighbourList::<L>::default();
    search.build(&local, backend, &mut list)?;
    let holds = rings_of(&list, wide.own(), rings, local.len());
    drop(list);
    let (part, halo) = keep_held(local, &holds, |i| wide.global[i], mine, total, comm);
    Ok((part, halo, search))
}

/// The extremes of the particles `rows` of `pos` over every rank: on a split cloud whose ranks
/// pass their own particles, the one-process bounding box, bit for bit (extremes are exact).
/// Collective.
pub(crate) fn extent<R: Real, const D: usize>(
    comm: &dyn Comm,
    pos: [&[R]; D],
    rows: Range<usize>,
) -> ([f64; D], [f64; D]) {
    // One maximum over the ranks of order-preserving bit patterns: of `-min`, then of `max`.
    let ordered = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 { !b } else { b | 1 << 63 }
    };
    let unordered = |k: u64| f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k });
    let mut v = vec![0u64; 2 * D];
    for a in 0..D {
        let (lo, hi) = pos[a][rows.clone()]
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x.as_f64()), hi.max(x.as_f64()))
            });
        v[a] = ordered(-lo);
        v[D + a] = ordered(hi);
    }
    comm.max_u64(&mut v);
    (
        std::array::from_fn(|a| -unordered(v[a])),
        std::array::from_fn(|a| unordered(v[D + a])),
    )
}

/// Builds a rank's part of a split cloud from its `own` particles (the one-process particles
/// `first..first + own.len()` of `total`, in that order): every particle of another rank within
/// `width` of an own particle is copied here (a superset: those in the same or an adjacent cell
/// of edge `width`). With `width` at least twice the search radius the halo holds both rings of
/// [`split_own`]'s graph halo at these positions, and more while the particles move less than
/// half of `width`'s excess over it (the moving clouds' skin). Only ranks whose cells' boxes
/// border each other exchange their occupied cells, then the particles. Collective.
pub fn around<R: Real, const D: usize>(
    mut own: Cloud<R, D>,
    first: usize,
    total: usize,
    width: f64,
    comm: Arc<dyn Comm>,
) -> Result<(Cloud<R, D>, Halo), CloudError> {
    let (size, me) = (comm.size(), comm.rank());
    let n = own.len();
    let (min, max) = extent(comm.as_ref(), own.positions(), 0..n);
    // Cells of edge at least the width over the whole cloud: particles within the width of
    // each other lie in the same or adjacent cells.
    let grid = SearchGrid::covering(width, own.domain(), min, max);
    let pos = own.positions();
    let coords: Vec<[usize; D]> = (0..n)
        .map(|i| grid.bin_coord::<f64>(std::array::from_fn(|a| pos[a][i].as_f64())))
        .collect();
    let cell_of: Vec<u64> = coords.iter().map(|&c| grid.linear(c) as u64).collect();
    // Each rank's box of occupied cells (lower corner u64::MAX: no particles).
    let mut bounds = vec![u64::MAX; D];
    bounds.extend([0u64; D]);
    for c in &coords {
        for a in 0..D {
            bounds[a] = bounds[a].min(c[a] as u64);
            bounds[D + a] = bounds[D + a].max(c[a] as u64);
        }
    }
    let mut boxes = vec![0u64; 2 * D * size];
    comm::all_gather(comm.as_ref(), &bounds, &vec![2 * D; size], &mut boxes);
    let bordering = |q: usize| {
        let (a, b) = (
            &boxes[2 * D * me..2 * D * (me + 1)],
            &boxes[2 * D * q..2 * D * (q + 1)],
        );
        if q == me || a[0] == u64::MAX || b[0] == u64::MAX {
            return false;
        }
        (0..D).all(|d| {
            let (a0, a1, b0, b1) = (a[d] as i64, a[D + d] as i64, b[d] as i64, b[D + d] as i64);
            let n = grid.cells[d] as i64;
            let shifts: &[i64] = if grid.periodic[d] { &[-n, 0, n] } else { &[0] };
            shifts.iter().any(|s| a0 <= b1 + s + 1 && b0 + s <= a1 + 1)
        })
    };
    // Occupied cells to the bordering ranks; back come theirs.
    let mut occupied = cell_of.clone();
    occupied.sort_unstable();
    occupied.dedup();
    let mut send: Vec<u64> = Vec::new();
    let mut send_bytes = vec![0usize; size];
    for (q, bytes) in send_bytes.iter_mut().enumerate() {
        if bordering(q) {
            send.extend_from_slice(&occupied);
            *bytes = occupied.len() * 8;
        }
    }
    let (got, got_bytes) = comm::exchange(comm.as_ref(), bytemuck::cast_slice(&send), &send_bytes);
    let got: Vec<u64> = got
        .chunks_exact(8)
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .collect();
    // Each bordering rank gets the own particles in or next to its cells, in order.
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); size];
    let mut at = 0;
    for (q, &bytes) in got_bytes.iter().enumerate() {
        let theirs = &got[at..at + bytes / 8];
        at += bytes / 8;
        if theirs.is_empty() {
            continue;
        }
        let mut wanted = Vec::new();
        for &c in theirs {
            grid.adjacent(grid.unlinear(c as usize), |n| wanted.push(n as u64));
        }
        wanted.sort_unstable();
        wanted.dedup();
        groups[q] = (0..n)
            .filter(|&i| wanted.binary_search(&cell_of[i]).is_ok())
            .collect();
    }
    // The copies, with their one-process indices, then every local particle in that order.
    let mut global: mote_core::Buffer<u64> =
        mote_core::Buffer::new("one_process_index", mote_core::Scaling::PerParticle(1));
    global.resize(n, 0)?;
    for (i, g) in global.as_mut_slice().iter_mut().enumerate() {
        *g = (first + i) as u64;
    }
    let recv_counts = {
        let mut arrays = own.arrays_mut();
        arrays.push(&mut global);
        let counts = mote_core::columns::copy_all(comm.as_ref(), &mut arrays, &groups)?;
        let perm = Permutation::sorting_by_key(global.as_slice());
        let mut arrays = own.arrays_mut();
        arrays.push(&mut global);
        mote_core::columns::permute_all(&mut arrays, &perm);
        counts
    };
    let global: Vec<usize> = global.as_slice().iter().map(|&g| g as usize).collect();
    let own_start = global.partition_point(|&g| g < first);
    let own_range = own_start..own_start + n;
    let recv: Vec<u32> = (0..global.len())
        .filter(|i| !own_range.contains(i))
        .map(|i| i as u32)
        .collect();
    let send: Vec<u32> = groups
        .iter()
        .flatten()
        .map(|&i| (own_start + i) as u32)
        .collect();
    let send_counts = groups.iter().map(Vec::len).collect();
    Ok((
        own,
        Halo {
            comm,
            own: own_range,
            first,
            total,
            global,
            send,
            send_counts,
            recv,
            recv_counts,
        },
    ))
}

/// Sorts a split cloud along the Morton curve of the whole cloud, as
/// [`Cloud::reorder_morton`] sorts one process's (by key over the whole cloud's bounding box,
/// ties in the old order): `own` holds this rank's particles `first..first + own.len()` of the
/// old one-process order and afterwards its range of the new one ([`own_ranges`]; particles
/// migrate between ranks with every array). Collective: a sample sort of the keys and their
/// old indices, the new indices sent back to the old owners, then the particles moved.
pub fn reorder<R: Real, const D: usize>(
    own: &mut Cloud<R, D>,
    first: usize,
    total: usize,
    comm: &dyn Comm,
) -> Result<(), CloudError> {
    let (size, me) = (comm.size(), comm.rank());
    let n = own.len();
    let (lo, hi) = extent(comm, own.positions(), 0..n);
    let keys = own.morton_keys_over(lo, hi);
    let mut items: Vec<[u64; 2]> = (0..n).map(|i| [keys[i], (first + i) as u64]).collect();
    items.sort_unstable();
    // Splitters from evenly spaced samples of every rank's sorted items.
    let samples: Vec<[u64; 2]> = {
        let s = n.min(64);
        (0..s).map(|k| items[k * n / s]).collect()
    };
    let (mut all, _) = comm::all_gather_varied(comm, &samples);
    all.sort_unstable();
    let splitters: Vec<[u64; 2]> = (1..size).map(|j| all[j * all.len() / size]).collect();
    let pack = |groups: &[Vec<[u64; 2]>]| {
        let bytes: Vec<usize> = groups.iter().map(|g| g.len() * 16).collect();
        let flat: Vec<[u64; 2]> = groups.iter().flatten().copied().collect();
        let (got, _) = comm::exchange(comm, bytemuck::cast_slice(&flat), &bytes);
        got.chunks_exact(16)
            .map(|b| {
                let w = |k: usize| u64::from_ne_bytes(b[8 * k..8 * k + 8].try_into().expect("8"));
                [w(0), w(1)]
            })
            .collect::<Vec<[u64; 2]>>()
    };
    let mut buckets: Vec<Vec<[u64; 2]>> = vec![Vec::new(); size];
    for &item in &items {
        buckets[splitters.partition_point(|s| *s <= item)].push(item);
    }
    let mut mine = pack(&buckets);
    mine.sort_unstable();
    let mut counts = vec![0u64; size];
    comm::all_gather(comm, &[mine.len() as u64], &vec![1; size], &mut counts);
    let offset: u64 = counts[..me].iter().sum();
    // (old index, new index) back to the old owners.
    let ranges = own_ranges(total, size);
    let owner = |g: usize| ranges.partition_point(|r| r.end <= g);
    let mut back: Vec<Vec<[u64; 2]>> = vec![Vec::new(); size];
    for (k, item) in mine.iter().enumerate() {
        back[owner(item[1] as usize)].push([item[1], offset + k as u64]);
    }
    let mut new_index: mote_core::Buffer<u64> =
        mote_core::Buffer::new("new_one_process_index", mote_core::Scaling::PerParticle(1));
    new_index.resize(n, 0)?;
    for [old, new] in pack(&back) {
        new_index.as_mut_slice()[old as usize - first] = new;
    }
    let destinations: Vec<u32> = new_index
        .as_slice()
        .iter()
        .map(|&g| owner(g as usize) as u32)
        .collect();
    let mut arrays = own.arrays_mut();
    arrays.push(&mut new_index);
    mote_core::columns::migrate_all(comm, &mut arrays, &destinations)?;
    let perm = Permutation::sorting_by_key(new_index.as_slice());
    let mut arrays = own.arrays_mut();
    arrays.push(&mut new_index);
    mote_core::columns::permute_all(&mut arrays, &perm);
    debug_assert_eq!(own.len(), ranges[me].len());
    Ok(())
}

/// Cuts the one-process `cloud` (the same on every rank) down to this rank's own rows
/// ([`own_ranges`]) and returns `(first, total)`: the one-process index of its first row and the
/// particle count, as a rank's part of a split cloud is described
/// ([`crate::MeshlessSimulation::split_part`]).
pub fn own_rows<R: Real, const D: usize>(
    cloud: &mut Cloud<R, D>,
    comm: &dyn Comm,
) -> (usize, usize) {
    let total = cloud.len();
    let mine = own_ranges(total, comm.size())[comm.rank()].clone();
    keep_own(cloud, mine.clone());
    (mine.start, total)
}

/// Keeps the particles `own` of `cloud` (a rank's own particles, dropping its halo), in order.
pub(crate) fn keep_own<R: Real, const D: usize>(cloud: &mut Cloud<R, D>, own: Range<usize>) {
    if own.start > 0 {
        let n = cloud.len();
        let order: Vec<usize> = own.clone().chain(0..own.start).chain(own.end..n).collect();
        cloud.apply_permutation(&Permutation::new(order).expect("a permutation of the particles"));
    }
    cloud.truncate(own.len());
}

/// A copy of the own particles of `local` (this rank's cloud of a split simulation), every
/// array, with `orders` (one per local particle: the current reconstruction orders) in place of
/// the cloud's, in the one-process order: this rank's rows of a run's files, which the ranks
/// stream to rank 0 in rank order ([`mote_core::comm::RootStream`]) so that no rank holds the
/// whole cloud.
pub fn own_part<R: Real, const D: usize>(
    halo: &Halo,
    local: &Cloud<R, D>,
    orders: &[u8],
) -> Cloud<R, D> {
    let mut part = local.clone();
    part.orders_mut().copy_from_slice(orders);
    keep_own(&mut part, halo.own());
    part
}
