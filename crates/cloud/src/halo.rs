//! A cloud split between ranks: each rank holds the particles it owns and the *halo* it reads,
//! and exchanges the halo's per-particle records after every pass that writes them.
//!
//! The split (decision 0030): rank `r` owns the contiguous range `r` of the one-process particle
//! order cut into whole blocks ([`mote_core::comm::block_ranges`], the ranges the replicated
//! passes split by). Its halo is two rings of the one-process neighbour graph: the neighbours of
//! its particles (ring 1) and theirs (ring 2). A rank keeps own and halo particles in the
//! one-process order, so its own particles are one contiguous run of its local indices, and
//! searches them on the one-process bins ([`crate::NeighbourSearch::with_bounds`]): each bin
//! lists its particles in ascending index, so every local list of an own or ring-1 particle is
//! the one-process list (the same neighbours in the same order, renumbered), and so are their
//! MLS coefficients and reverse slots. Ring-2 particles' lists are incomplete; nothing an own
//! particle's result depends on reads them.
//!
//! Every pass that writes a record per particle from its neighbours' inputs computes it for the
//! own particles only, then [`Halo::exchange`] copies the owners' records into the halo (ring 1
//! and ring 2). Element-wise work (the Runge-Kutta stage combinations) runs on every local
//! particle and gives the owners' bits, so the whole local state stays the one-process state
//! restricted to the rank's particles. Reductions (the stable step, MOOD's counts, the
//! finiteness check) run over the own particles and combine over the ranks.

use std::ops::Range;
use std::sync::Arc;

use mote_core::Real;
use mote_core::columns::Permutation;
use mote_core::comm::{self, Comm};

use crate::cloud::Cloud;
use crate::error::CloudError;
use crate::search::{NeighbourList, SlotLayout};

/// Particles per block of the one-process order that ranks own whole (or, on a replicated
/// cloud, compute: the passes' ranges, `scheme::on_own_blocks`).
pub const OWN_BLOCK: usize = 256;

/// The ranks' ranges of the one-process order `0..n` over `parts` ranks: contiguous, whole
/// [`OWN_BLOCK`]s. One cut for the split cloud's ownership and the replicated passes' ranges.
pub fn own_ranges(n: usize, parts: usize) -> Vec<Range<usize>> {
    comm::block_ranges(n, parts, OWN_BLOCK)
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
        let record = width * std::mem::size_of::<T>();
        let mut send: Vec<T> = Vec::with_capacity(self.send.len() * width);
        for &i in &self.send {
            pack(i as usize, &mut send);
        }
        let send_counts: Vec<usize> = self.send_counts.iter().map(|c| c * record).collect();
        let recv_counts: Vec<usize> = self.recv_counts.iter().map(|c| c * record).collect();
        let mut recv = vec![T::zeroed(); self.recv.len() * width];
        self.comm.all_to_all_bytes(
            bytemuck::cast_slice(&send),
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

    /// Every rank's own values of `part` (`width` per local particle) into `whole` (`width` per
    /// particle of the one-process order), on every rank. Collective.
    pub fn gather<T: bytemuck::Pod>(&self, part: &[T], width: usize, whole: &mut [T]) {
        let counts: Vec<usize> = own_ranges(self.total, self.comm.size())
            .iter()
            .map(|r| r.len() * width)
            .collect();
        let own = &part[self.own.start * width..self.own.end * width];
        comm::all_gather(self.comm.as_ref(), own, &counts, whole);
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

/// Splits the one-process `cloud` (with its one-process neighbour `list`) for this rank of
/// `comm`: the rank's own particles and its two-ring halo, in the one-process order, and the
/// [`Halo`] that refreshes them. Every rank passes the same cloud and list. Collective.
pub fn split<R: Real, const D: usize, L: SlotLayout>(
    cloud: &Cloud<R, D>,
    list: &NeighbourList<L>,
    comm: Arc<dyn Comm>,
) -> Result<(Cloud<R, D>, Halo), CloudError> {
    let n = cloud.len();
    let (size, rank) = (comm.size(), comm.rank());
    let ranges = own_ranges(n, size);
    let mine = ranges[rank].clone();
    // Own particles, then ring 1 (their neighbours), then ring 2 (ring 1's neighbours).
    let mut holds = vec![false; n];
    holds[mine.clone()].fill(true);
    let mut first_ring = Vec::new();
    for i in mine.clone() {
        for j in list.neighbours(i) {
            let j = j as usize;
            if !holds[j] {
                holds[j] = true;
                first_ring.push(j);
            }
        }
    }
    for &j in &first_ring {
        for k in list.neighbours(j) {
            holds[k as usize] = true;
        }
    }
    let held: Vec<usize> = (0..n).filter(|&i| holds[i]).collect();
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
    // The local cloud: the held particles first, in order, then dropped.
    let mut local = cloud.clone();
    let mut order = held.clone();
    order.extend((0..n).filter(|&i| !holds[i]));
    let perm = Permutation::new(order).expect("a permutation of the particles");
    local.apply_permutation(&perm);
    local.truncate(held.len());
    Ok((
        local,
        Halo {
            comm,
            own,
            first: mine.start,
            total: n,
            global: held,
            send,
            send_counts,
            recv,
            recv_counts,
        },
    ))
}
