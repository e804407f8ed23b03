//! The processes one simulation runs on: a [`Comm`] (MPI's world communicator in a run under
//! `mpirun`, [`SingleProcess`] otherwise), the few collective operations the engine needs,
//! and the partitions of work between ranks.
//!
//! The engine's distributed design (decision 0027) keeps every rank's particle state whole and
//! splits the *work*: each rank evaluates the forces of its share of the targets, and the
//! shares are gathered so that every rank holds every result. Each result is computed by the
//! same arithmetic as on one process (a target's sum never depends on which other targets share
//! its rank), so a run is bitwise identical on any number of ranks; every decision that could
//! differ between ranks (a signal, a wall-clock checkpoint, a failure) is agreed with
//! [`Comm::max_u64`] or [`agree`] before it is acted on, so no rank waits for one that left.
//!
//! The communicator of the process is installed once by the program ([`install_world`]) and
//! read by the solvers ([`world`]); a library user who never installs one runs on one process.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// A group of processes running one simulation together. Collective operations must be called
/// by every rank, in the same order, with consistent arguments.
pub trait Comm: Send + Sync + fmt::Debug {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn size(&self) -> usize;

    /// This process's rank among the ranks on its own machine (what picks its GPU).
    fn local_rank(&self) -> usize;

    /// Every rank's `mine` concatenated in rank order into `out`; `counts[r]` is rank `r`'s
    /// byte count (`counts[rank()] == mine.len()`, `out.len()` their sum).
    fn all_gather_bytes(&self, mine: &[u8], counts: &[usize], out: &mut [u8]);

    /// Replaces each element of `values` by its maximum over all ranks.
    fn max_u64(&self, values: &mut [u64]);

    /// Replaces each element of `values` by its sum over all ranks (integers: exact in any
    /// order; the caller keeps sums below `2^64`).
    fn sum_u64(&self, values: &mut [u64]);

    /// Personalised exchange (MPI's all-to-all): `send` holds this rank's message to each rank
    /// in rank order, `send_counts[r]` bytes for rank `r`; `recv` receives every rank's message
    /// to this one in rank order, `recv_counts[r]` bytes from rank `r` (the caller learns them
    /// first, for example by an exchange of counts). The message to itself is copied.
    fn all_to_all_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
    );

    /// [`all_to_all_bytes`](Self::all_to_all_bytes) where most counts are zero (a halo
    /// exchange between bordering ranks, pieces streamed to one rank): only the ranks with a
    /// message exchange anything, point to point, so a rank waits for its peers' messages, not
    /// for every rank. The counts must match both ways (`recv_counts[r]` is what rank `r` sends
    /// this one): a rank posts a receive only where it expects bytes. By default the
    /// all-to-all itself (one process, thread ranks).
    fn sparse_exchange_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
    ) {
        self.all_to_all_bytes(send, send_counts, recv, recv_counts);
    }

    /// Bytes this rank has received from other ranks so far (for the scaling figures).
    fn bytes_received(&self) -> u64;

    /// Ends every rank of the run at once with exit status `code` (after a panic: the other
    /// ranks would wait for this one forever).
    fn abort(&self, code: i32) -> !;
}

/// One process: rank 0 of 1. Gathers copy, reductions are the identity.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleProcess;

impl Comm for SingleProcess {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn local_rank(&self) -> usize {
        0
    }

    fn all_gather_bytes(&self, mine: &[u8], counts: &[usize], out: &mut [u8]) {
        assert_eq!(counts, [mine.len()], "one rank gathers its own bytes");
        out.copy_from_slice(mine);
    }

    fn max_u64(&self, _values: &mut [u64]) {}

    fn sum_u64(&self, _values: &mut [u64]) {}

    fn all_to_all_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
    ) {
        assert_eq!(send_counts, [send.len()], "one rank sends to itself");
        assert_eq!(recv_counts, [recv.len()], "one rank receives from itself");
        recv.copy_from_slice(send);
    }

    fn bytes_received(&self) -> u64 {
        0
    }

    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

static WORLD: OnceLock<Arc<dyn Comm>> = OnceLock::new();

/// Makes `comm` the communicator of this process (once, before any simulation is built).
/// Returns `comm` back if one was installed already.
pub fn install_world(comm: Arc<dyn Comm>) -> Result<(), Arc<dyn Comm>> {
    WORLD.set(comm)
}

/// The communicator of this process: the installed one, else [`SingleProcess`].
pub fn world() -> Arc<dyn Comm> {
    WORLD
        .get_or_init(|| Arc::new(SingleProcess) as Arc<dyn Comm>)
        .clone()
}

/// [`Comm::all_gather_bytes`] on plain values: every rank's `mine` in rank order into `out`
/// (`counts` in elements).
pub fn all_gather<T: bytemuck::Pod>(comm: &dyn Comm, mine: &[T], counts: &[usize], out: &mut [T]) {
    let size = std::mem::size_of::<T>();
    let bytes: Vec<usize> = counts.iter().map(|c| c * size).collect();
    comm.all_gather_bytes(
        bytemuck::cast_slice(mine),
        &bytes,
        bytemuck::cast_slice_mut(out),
    );
}

/// Gathers, on every rank, the slices `out[ranges[r]]` that each rank `r` computed in place:
/// afterwards `out` holds every rank's part. `ranges` tile `0..out.len()` in rank order.
/// `scratch` keeps this rank's part while `out` is overwritten (reused between calls).
pub fn gather_parts<T: bytemuck::Pod>(
    comm: &dyn Comm,
    out: &mut [T],
    ranges: &[Range<usize>],
    scratch: &mut Vec<T>,
) {
    if comm.size() == 1 {
        return;
    }
    let mine = ranges[comm.rank()].clone();
    scratch.clear();
    scratch.extend_from_slice(&out[mine]);
    let counts: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
    all_gather(comm, scratch, &counts, out);
}

/// Every rank's `mine`, concatenated in rank order, with each rank's count (the counts
/// gathered first). Collective.
pub fn all_gather_varied<T: bytemuck::Pod>(comm: &dyn Comm, mine: &[T]) -> (Vec<T>, Vec<usize>) {
    let size = comm.size();
    let mut counts = vec![0u64; size];
    all_gather(comm, &[mine.len() as u64], &vec![1; size], &mut counts);
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let mut all = vec![T::zeroed(); counts.iter().sum()];
    all_gather(comm, mine, &counts, &mut all);
    (all, counts)
}

/// The maximum of `value` over all ranks.
pub fn max_of(comm: &dyn Comm, value: u64) -> u64 {
    let mut v = [value];
    comm.max_u64(&mut v);
    v[0]
}

/// Rank `root`'s `mine` on every rank (the other ranks' `mine` is ignored). Collective.
pub fn broadcast_bytes(comm: &dyn Comm, root: usize, mine: &[u8]) -> Vec<u8> {
    if comm.size() == 1 {
        return mine.to_vec();
    }
    let len = max_of(
        comm,
        if comm.rank() == root {
            mine.len() as u64
        } else {
            0
        },
    ) as usize;
    let counts: Vec<usize> = (0..comm.size())
        .map(|r| if r == root { len } else { 0 })
        .collect();
    let mut out = vec![0u8; len];
    let send = if comm.rank() == root { mine } else { &[] };
    comm.all_gather_bytes(send, &counts, &mut out);
    out
}

/// Checks the arguments of [`Comm::all_to_all_bytes`]: one count per rank each way, and the
/// counts cover the buffers.
///
/// # Panics
/// Where they do not.
pub fn check_exchange(
    size: usize,
    send: &[u8],
    send_counts: &[usize],
    recv: &[u8],
    recv_counts: &[usize],
) {
    assert_eq!(send_counts.len(), size, "one send count per rank");
    assert_eq!(recv_counts.len(), size, "one receive count per rank");
    assert_eq!(
        send.len(),
        send_counts.iter().sum::<usize>(),
        "counts cover the sends"
    );
    assert_eq!(
        recv.len(),
        recv_counts.iter().sum::<usize>(),
        "counts cover the receives"
    );
}

/// The sum of `value` over all ranks.
pub fn sum_of(comm: &dyn Comm, value: u64) -> u64 {
    let mut v = [value];
    comm.sum_u64(&mut v);
    v[0]
}

/// [`Comm::all_to_all_bytes`] with the counts exchanged first: `send` holds this rank's
/// messages in rank order (`send_counts[r]` bytes for rank `r`); returns the messages this
/// rank received, concatenated in rank order, and their byte counts per sending rank.
pub fn exchange(comm: &dyn Comm, send: &[u8], send_counts: &[usize]) -> (Vec<u8>, Vec<usize>) {
    let size = comm.size();
    assert_eq!(send_counts.len(), size, "one count per rank");
    assert_eq!(
        send.len(),
        send_counts.iter().sum::<usize>(),
        "counts cover the sends"
    );
    // Each rank tells each rank how much follows: one fixed-size all-to-all.
    let counts: Vec<u64> = send_counts.iter().map(|&c| c as u64).collect();
    let mut recv_counts = vec![0u64; size];
    comm.all_to_all_bytes(
        bytemuck::cast_slice(&counts),
        &vec![8; size],
        bytemuck::cast_slice_mut(&mut recv_counts),
        &vec![8; size],
    );
    let recv_counts: Vec<usize> = recv_counts.iter().map(|&c| c as usize).collect();
    let mut recv = vec![0u8; recv_counts.iter().sum()];
    comm.all_to_all_bytes(send, send_counts, &mut recv, &recv_counts);
    (recv, recv_counts)
}

/// A failure on one or more ranks, agreed by all of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankFailure {
    /// The lowest failing rank.
    pub rank: usize,
    /// Ranks that failed.
    pub failed: usize,
    /// The ranks in the run.
    pub size: usize,
    /// The lowest failing rank's message.
    pub message: String,
    /// The lowest failing rank's class of failure (the caller's code, e.g. an exit status).
    pub code: u8,
}

impl fmt::Display for RankFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The same failure everywhere (the same file missing on every rank) needs no rank.
        if self.size == 1 || self.failed == self.size {
            return f.write_str(&self.message);
        }
        write!(f, "rank {} of {}: {}", self.rank, self.size, self.message)?;
        if self.failed > 1 {
            write!(f, " ({} ranks failed; the lowest is reported)", self.failed)?;
        }
        Ok(())
    }
}

impl std::error::Error for RankFailure {}

/// Agrees on whether every rank succeeded: each rank passes its own failure (`code`,
/// message) or `None`; every rank gets back the same answer: `Ok` when none failed, else the
/// lowest failing rank's message. Collective (every rank must call it at the same point), so a
/// failure on one rank stops them all instead of leaving the others waiting in the next
/// collective.
pub fn agree(comm: &dyn Comm, failure: Option<(u8, &str)>) -> Result<(), RankFailure> {
    let size = comm.size();
    // Round 1: who failed, and how long each message is.
    let mine = failure.map_or([0u64, 0], |(code, m)| [1 + code as u64, m.len() as u64]);
    let mut heads = vec![0u64; 2 * size];
    all_gather(comm, &mine, &vec![2; size], &mut heads);
    let failed: Vec<usize> = (0..size).filter(|&r| heads[2 * r] != 0).collect();
    let Some(&rank) = failed.first() else {
        return Ok(());
    };
    // Round 2: the messages themselves.
    let lengths: Vec<usize> = (0..size).map(|r| heads[2 * r + 1] as usize).collect();
    let mut text = vec![0u8; lengths.iter().sum()];
    comm.all_gather_bytes(
        failure.map_or(&[][..], |(_, m)| m.as_bytes()),
        &lengths,
        &mut text,
    );
    let start: usize = lengths[..rank].iter().sum();
    Err(RankFailure {
        rank,
        failed: failed.len(),
        size,
        message: String::from_utf8_lossy(&text[start..start + lengths[rank]]).into_owned(),
        code: (heads[2 * rank] - 1) as u8,
    })
}

/// `x`'s bits mapped so that they order as the numbers do (`-inf` lowest, then negative,
/// zeros, positive, `+inf`, NaN of positive sign highest), for reductions of floats as integers.
pub fn order_key(x: f64) -> u64 {
    // Negative floats order backwards as bits: flip them all; positive ones get the top bit.
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

/// The largest of each of `values` over the ranks (each position reduced on its own). Floats
/// are compared through an order-preserving map of their bits, so NaN sorts above `+inf`: pass
/// values without NaN. Collective.
pub fn max_f64s(comm: &dyn Comm, values: &mut [f64]) {
    if comm.size() == 1 {
        return;
    }
    let key = order_key;
    let unkey = |k: u64| f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k });
    let mut keys: Vec<u64> = values.iter().map(|&x| key(x)).collect();
    comm.max_u64(&mut keys);
    for (v, k) in values.iter_mut().zip(keys) {
        *v = unkey(k);
    }
}

/// A rank's share of an array in the one-process order that it holds part of: the local
/// indices `own` it owns (the one-process items `first..first + own.len()` of `total`), and the
/// ranks that hold the rest. One process's share is all of it ([`Share::whole`]).
#[derive(Clone, Copy, Debug)]
pub struct Share<'a> {
    /// The ranks.
    pub comm: &'a dyn Comm,
    /// The one-process index of the first owned item.
    pub first: usize,
    /// The local indices this rank owns.
    pub own_start: usize,
    /// One past the last owned local index.
    pub own_end: usize,
    /// The one-process item count.
    pub total: usize,
}

impl Share<'static> {
    /// One process holding all `n` items.
    pub fn whole(n: usize) -> Self {
        Share {
            comm: &SingleProcess,
            first: 0,
            own_start: 0,
            own_end: n,
            total: n,
        }
    }
}

impl Share<'_> {
    /// The owned local indices.
    pub fn own(&self) -> Range<usize> {
        self.own_start..self.own_end
    }
}

/// Bytes rank 0 receives at once while [`RootStream::stream`] collects a column: the ranks'
/// pieces travel in groups of consecutive ranks up to this size (one rank at least).
pub const STREAM_BYTES: usize = 64 << 20;

/// Rows of an array in the one-process order split between the ranks in rank order (rank `r`
/// holds `rows()[r]` consecutive rows, after those of the ranks below it), streamed to rank 0
/// for writing: rank 0 holds its own rows and one group of pieces at a time, never the whole
/// array. What a run's files are written from without a whole copy on any rank.
#[derive(Debug)]
pub struct RootStream<'a> {
    comm: &'a dyn Comm,
    rows: Vec<usize>,
}

impl RootStream<'static> {
    /// One process holding all `n` rows.
    pub fn one(n: usize) -> Self {
        RootStream {
            comm: &SingleProcess,
            rows: vec![n],
        }
    }
}

impl<'a> RootStream<'a> {
    /// This rank holding `mine` rows: every rank's count gathered. Collective.
    pub fn new(comm: &'a dyn Comm, mine: usize) -> Self {
        let size = comm.size();
        let mut rows = vec![0u64; size];
        all_gather(comm, &[mine as u64], &vec![1; size], &mut rows);
        RootStream {
            comm,
            rows: rows.into_iter().map(|r| r as usize).collect(),
        }
    }

    /// The ranks.
    pub fn comm(&self) -> &'a dyn Comm {
        self.comm
    }

    /// Rows per rank.
    pub fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// The one-process row count.
    pub fn total(&self) -> usize {
        self.rows.iter().sum()
    }

    /// This rank's rows.
    pub fn mine(&self) -> usize {
        self.rows[self.comm.rank()]
    }

    /// Whether this rank is rank 0, the one that writes.
    pub fn is_root(&self) -> bool {
        self.comm.rank() == 0
    }

    /// Every rank's `mine` (its rows of one column, `width` bytes per row) to rank 0, in the
    /// one-process order: on rank 0, `write(first_row, bytes)` receives consecutive runs of rows
    /// (its own first), each whole ranks' pieces; the other ranks only send. Collective.
    ///
    /// # Panics
    /// If `mine` is not this rank's rows times `width` bytes.
    pub fn stream(&self, mine: &[u8], width: usize, mut write: impl FnMut(usize, &[u8])) {
        let (me, size) = (self.comm.rank(), self.comm.size());
        assert_eq!(mine.len(), self.rows[me] * width, "this rank's rows");
        if me == 0 && !mine.is_empty() {
            write(0, mine);
        }
        let mut first = self.rows[0];
        let mut r = 1;
        while r < size {
            // Ranks r..end send together, up to STREAM_BYTES (one rank at least).
            let mut end = r + 1;
            let mut bytes = self.rows[r] * width;
            while end < size && bytes + self.rows[end] * width <= STREAM_BYTES {
                bytes += self.rows[end] * width;
                end += 1;
            }
            if bytes > 0 {
                let sending = (r..end).contains(&me);
                let mut send_counts = vec![0; size];
                if sending {
                    send_counts[0] = mine.len();
                }
                let mut recv_counts = vec![0; size];
                if me == 0 {
                    for (c, rows) in recv_counts[r..end].iter_mut().zip(&self.rows[r..end]) {
                        *c = rows * width;
                    }
                }
                let mut recv = vec![0u8; recv_counts.iter().sum()];
                let send = if sending { mine } else { &[] };
                self.comm
                    .sparse_exchange_bytes(send, &send_counts, &mut recv, &recv_counts);
                if me == 0 {
                    write(first, &recv);
                }
            }
            first += self.rows[r..end].iter().sum::<usize>();
            r = end;
        }
    }
}

/// `0..n` cut into `parts` contiguous ranges whose lengths differ by at most one, in order.
pub fn even_ranges(n: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.max(1);
    (0..parts)
        .map(|p| n * p / parts..n * (p + 1) / parts)
        .collect()
}

/// `0..n` cut into `parts` contiguous ranges of whole blocks of `block` items (the last range
/// ends at `n`): a pass that runs blocks of `block` from its range's start then sees the same
/// blocks as on one process.
pub fn block_ranges(n: usize, parts: usize, block: usize) -> Vec<Range<usize>> {
    let block = block.max(1);
    even_ranges(n.div_ceil(block), parts)
        .into_iter()
        .map(|r| (r.start * block).min(n)..(r.end * block).min(n))
        .collect()
}

/// Items `0..costs.len()` cut into `parts` contiguous ranges of nearly equal total cost: range
/// `p` ends at the first item where the running total reaches `(p + 1) / parts` of the whole.
/// Integer costs, so every rank computes the same cut.
pub fn cost_ranges(costs: &[u64], parts: usize) -> Vec<Range<usize>> {
    let parts = parts.max(1);
    let total: u128 = costs.iter().map(|&c| c as u128).sum();
    let mut ranges = Vec::with_capacity(parts);
    let (mut start, mut sum, mut i) = (0usize, 0u128, 0usize);
    for p in 0..parts {
        let target = total * (p as u128 + 1) / parts as u128;
        while i < costs.len() && (sum < target || p + 1 == parts) {
            sum += costs[i] as u128;
            i += 1;
        }
        ranges.push(start..i);
        start = i;
    }
    ranges
}

/// Where the program was started by an MPI launcher: the number of processes it started, read
/// from the launcher's environment (Open MPI, MPICH/Hydra, PMIx, Slurm). 1 otherwise.
pub fn launched_size() -> usize {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_SIZE",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse::<usize>().ok())
    .unwrap_or(1)
}

/// This process's rank as the MPI launcher's environment gives it (0 without a launcher): for
/// messages before MPI is (or can be) started.
pub fn launched_rank() -> usize {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse::<usize>().ok())
        .unwrap_or(0)
}

/// A fault the tests inject on one rank (`MOTE_FAULT=kind@rank`, e.g. `nan@1`): whether fault
/// `kind` is asked for on `rank`. Never set outside tests; documented in `docs/testing.md`.
pub fn fault(kind: &str, rank: usize) -> bool {
    static FAULT: OnceLock<Option<(String, usize)>> = OnceLock::new();
    FAULT
        .get_or_init(|| {
            let v = std::env::var("MOTE_FAULT").ok()?;
            let (k, r) = v.split_once('@')?;
            Some((k.to_string(), r.parse().ok()?))
        })
        .as_ref()
        .is_some_and(|(k, r)| k == kind && *r == rank)
}

/// Ranks as threads of one process: `size` communicators that gather and reduce through shared
/// memory, one per thread. For tests of the distributed code paths without MPI (each thread
/// plays one rank); not a way to run simulations.
pub fn thread_ranks(size: usize) -> Vec<Arc<dyn Comm>> {
    let shared = Arc::new(Shared {
        size,
        barrier: std::sync::Barrier::new(size),
        slots: std::sync::Mutex::new(vec![Vec::new(); size]),
    });
    (0..size)
        .map(|rank| {
            Arc::new(ThreadRank {
                shared: shared.clone(),
                rank,
                received: std::sync::atomic::AtomicU64::new(0),
            }) as Arc<dyn Comm>
        })
        .collect()
}

/// Runs `f` on each of `ranks` ([`thread_ranks`]), each on its own thread (a collective
/// needs every rank inside it at once), and returns the results in rank order. For tests.
pub fn on_thread_ranks<T: Send>(
    ranks: &[Arc<dyn Comm>],
    f: impl Fn(Arc<dyn Comm>) -> T + Sync,
) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .iter()
            .map(|c| {
                let f = &f;
                s.spawn(move || f(c.clone()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[derive(Debug)]
struct Shared {
    size: usize,
    barrier: std::sync::Barrier,
    slots: std::sync::Mutex<Vec<Vec<u8>>>,
}

#[derive(Debug)]
struct ThreadRank {
    shared: Arc<Shared>,
    rank: usize,
    received: std::sync::atomic::AtomicU64,
}

impl ThreadRank {
    /// Posts `mine`, waits for every rank's, hands them to `read`, and waits until every rank
    /// has read before a slot can be posted again.
    fn exchange(&self, mine: &[u8], read: impl FnOnce(&[Vec<u8>])) {
        self.shared.slots.lock().expect("no rank panicked")[self.rank] = mine.to_vec();
        self.shared.barrier.wait();
        read(&self.shared.slots.lock().expect("no rank panicked"));
        self.shared.barrier.wait();
    }
}

impl Comm for ThreadRank {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    /// Every thread-rank is on this machine.
    fn local_rank(&self) -> usize {
        self.rank
    }

    fn all_gather_bytes(&self, mine: &[u8], counts: &[usize], out: &mut [u8]) {
        assert_eq!(
            counts[self.rank],
            mine.len(),
            "this rank's count is its length"
        );
        self.exchange(mine, |slots| {
            let mut at = 0;
            for (r, slot) in slots.iter().enumerate() {
                assert_eq!(slot.len(), counts[r], "rank {r} sent its announced count");
                out[at..at + slot.len()].copy_from_slice(slot);
                at += slot.len();
            }
        });
        let got = (out.len() - mine.len()) as u64;
        self.received
            .fetch_add(got, std::sync::atomic::Ordering::Relaxed);
    }

    fn max_u64(&self, values: &mut [u64]) {
        let mine: Vec<u8> = bytemuck::cast_slice(values).to_vec();
        self.exchange(&mine, |slots| {
            for slot in slots {
                let theirs: Vec<u64> = bytemuck::pod_collect_to_vec(slot);
                for (v, t) in values.iter_mut().zip(theirs) {
                    *v = (*v).max(t);
                }
            }
        });
    }

    fn sum_u64(&self, values: &mut [u64]) {
        let mine: Vec<u8> = bytemuck::cast_slice(values).to_vec();
        self.exchange(&mine, |slots| {
            // Every rank adds the same slots in rank order: the same sums everywhere.
            values.fill(0);
            for slot in slots {
                let theirs: Vec<u64> = bytemuck::pod_collect_to_vec(slot);
                for (v, t) in values.iter_mut().zip(theirs) {
                    *v = v.checked_add(t).expect("a sum over ranks below 2^64");
                }
            }
        });
    }

    fn all_to_all_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
    ) {
        let size = self.shared.size;
        check_exchange(size, send, send_counts, recv, recv_counts);
        // The slot holds the counts ahead of the messages, so each reader finds its part.
        let mut post: Vec<u8> = send_counts
            .iter()
            .flat_map(|&c| (c as u64).to_le_bytes())
            .collect();
        post.extend_from_slice(send);
        let me = self.rank;
        self.exchange(&post, |slots| {
            let mut at = 0;
            for (r, slot) in slots.iter().enumerate() {
                let count = |k: usize| {
                    u64::from_le_bytes(slot[8 * k..8 * k + 8].try_into().expect("8 bytes")) as usize
                };
                let offset = 8 * size + (0..me).map(count).sum::<usize>();
                assert_eq!(
                    count(me),
                    recv_counts[r],
                    "rank {r} sent the announced count"
                );
                recv[at..at + recv_counts[r]].copy_from_slice(&slot[offset..offset + count(me)]);
                at += recv_counts[r];
            }
        });
        let got = recv.len() - recv_counts[me];
        self.received
            .fetch_add(got as u64, std::sync::atomic::Ordering::Relaxed);
    }

    fn bytes_received(&self) -> u64 {
        self.received.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn abort(&self, code: i32) -> ! {
        panic!("rank {} aborted the run with status {code}", self.rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank's rows reach rank 0 in the one-process order, whole, with their first rows;
    /// a rank without rows sends nothing; pieces larger than a group travel alone.
    #[test]
    fn a_root_stream_delivers_every_row_in_order() {
        for size in 1..=4 {
            for rows in [vec![5, 0, 3, 7], vec![0, 4, 4, 1], vec![2, 2, 2, 2]] {
                let rows = &rows[..size];
                let width = 3;
                let start = |r: usize| rows[..r].iter().sum::<usize>();
                let got = on_thread_ranks(&thread_ranks(size), |comm| {
                    let me = comm.rank();
                    let mine: Vec<u8> = (start(me) * width..start(me + 1) * width)
                        .map(|b| b as u8)
                        .collect();
                    let stream = RootStream::new(comm.as_ref(), rows[me]);
                    assert_eq!(stream.total(), start(size));
                    let mut out = Vec::new();
                    stream.stream(&mine, width, |first, bytes| {
                        assert_eq!(first * width, out.len(), "consecutive runs");
                        out.extend_from_slice(bytes);
                    });
                    out
                });
                let all: Vec<u8> = (0..start(size) * width).map(|b| b as u8).collect();
                assert_eq!(got[0], all, "{size} ranks, rows {rows:?}");
                assert!(got[1..].iter().all(Vec::is_empty), "only rank 0 writes");
            }
        }
    }

    #[test]
    fn even_ranges_tile_in_order() {
        let r = even_ranges(10, 3);
        assert_eq!(r, vec![0..3, 3..6, 6..10]);
        assert_eq!(even_ranges(2, 4), vec![0..0, 0..1, 1..1, 1..2]);
    }

    #[test]
    fn block_ranges_keep_blocks_whole() {
        assert_eq!(
            block_ranges(1000, 3, 256),
            vec![0..256, 256..512, 512..1000]
        );
        assert_eq!(block_ranges(100, 2, 256), vec![0..0, 0..100]);
    }

    #[test]
    fn cost_ranges_balance_and_tile() {
        // One expensive item first: the first range holds it alone.
        let r = cost_ranges(&[10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2);
        assert_eq!(r, vec![0..1, 1..11]);
        let costs = [3u64; 12];
        assert_eq!(cost_ranges(&costs, 4), vec![0..3, 3..6, 6..9, 9..12]);
        // More parts than items: empty ranges, still tiling.
        let r = cost_ranges(&[1, 1], 4);
        assert_eq!(r.last().unwrap().end, 2);
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn one_process_agrees_with_itself() {
        assert_eq!(agree(&SingleProcess, None), Ok(()));
        let e = agree(&SingleProcess, Some((2, "bad file"))).unwrap_err();
        assert_eq!(
            (e.rank, e.code, e.to_string()),
            (0, 2, "bad file".to_string())
        );
        let mut out = [0u32; 3];
        all_gather(&SingleProcess, &[1u32, 2, 3], &[3], &mut out);
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn thread_ranks_gather_reduce_and_agree() {
        let ranks = thread_ranks(3);
        let results = on_thread_ranks(&ranks, |c| {
            let r = c.rank();
            // Rank r contributes r + 1 copies of r.
            let mine = vec![r as u32; r + 1];
            let mut out = vec![0u32; 6];
            all_gather(c.as_ref(), &mine, &[1, 2, 3], &mut out);
            let max = max_of(c.as_ref(), 10 * r as u64);
            assert_eq!(sum_of(c.as_ref(), 10 * r as u64), 30);
            let said = broadcast_bytes(c.as_ref(), 2, format!("rank {r}").as_bytes());
            assert_eq!(said, b"rank 2");
            // Rank r sends r + 1 bytes of value 10 r + s to each rank s.
            let send: Vec<u8> = (0..3)
                .flat_map(|s| vec![(10 * r + s) as u8; r + 1])
                .collect();
            let (got, counts) = exchange(c.as_ref(), &send, &[r + 1; 3]);
            assert_eq!(counts, [1, 2, 3]);
            let expected: Vec<u8> = (0..3)
                .flat_map(|q| vec![(10 * q + r) as u8; q + 1])
                .collect();
            assert_eq!(got, expected);
            let failure = (r == 1).then_some((2u8, "no such file"));
            let agreed = agree(c.as_ref(), failure);
            let ok = agree(c.as_ref(), None);
            (out, max, agreed, ok)
        });
        for (out, max, agreed, ok) in results {
            assert_eq!(out, [0, 1, 1, 2, 2, 2]);
            assert_eq!(max, 20);
            let e = agreed.unwrap_err();
            assert_eq!((e.rank, e.code, e.failed), (1, 2, 1));
            assert_eq!(e.to_string(), "rank 1 of 3: no such file");
            assert_eq!(ok, Ok(()));
        }
    }
}
