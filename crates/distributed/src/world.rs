//! MPI's world communicator as a [`Comm`].

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use mote_core::comm::{self, Comm, install_world};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use crate::Started;

/// The world communicator. Calls are serialised by a lock, so MPI's "serialized" thread level
/// suffices; the engine calls it from one thread at a time anyway (its rayon workers never
/// communicate).
struct World {
    comm: Mutex<SimpleCommunicator>,
    rank: usize,
    size: usize,
    local_rank: usize,
    received: AtomicU64,
}

// SAFETY: MPI is initialised with at least MPI_THREAD_SERIALIZED (checked in `start`), which
// allows calls from any thread as long as no two overlap; the mutex guarantees that.
unsafe impl Send for World {}
// SAFETY: as above: every use of the communicator goes through the mutex.
unsafe impl Sync for World {}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MPI world, rank {} of {}", self.rank, self.size)
    }
}

impl Comm for World {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn local_rank(&self) -> usize {
        self.local_rank
    }

    fn all_gather_bytes(&self, mine: &[u8], counts: &[usize], out: &mut [u8]) {
        assert_eq!(counts.len(), self.size, "one count per rank");
        assert_eq!(
            counts[self.rank],
            mine.len(),
            "this rank's count is its length"
        );
        let offsets = offsets(counts);
        assert_eq!(
            out.len(),
            counts.iter().sum::<usize>(),
            "room for every part"
        );
        let total = out.len();
        if total == 0 {
            // Nothing anywhere (every rank knows it from the same counts). MPI would also see
            // two empty buffers at one dangling address as an aliased send and receive.
            return;
        }
        let limit = call_limit();
        let comm = self.comm.lock().expect("no MPI call panicked");
        if total <= limit {
            let n: Vec<i32> = counts.iter().map(|&c| c as i32).collect();
            let d: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
            let mut part = PartitionMut::new(out, n, d);
            comm.all_gather_varcount_into(mine, &mut part);
        } else {
            // MPI's counts and displacements are 32-bit: a larger gather goes in rounds, each
            // rank sending at most `limit / size` bytes per round into a staging buffer, copied
            // into place (every rank computes the same rounds from the same counts).
            let share = (limit / self.size).max(1);
            let rounds = counts.iter().map(|c| c.div_ceil(share)).max().unwrap_or(0);
            let mut staging = vec![0u8; share * self.size];
            for round in 0..rounds {
                let from = round * share;
                let part: Vec<usize> = counts
                    .iter()
                    .map(|&c| c.saturating_sub(from).min(share))
                    .collect();
                let disp: Vec<usize> = (0..self.size).map(|r| r * share).collect();
                let send = &mine[from.min(mine.len())..][..part[self.rank]];
                let n: Vec<i32> = part.iter().map(|&c| c as i32).collect();
                let d: Vec<i32> = disp.iter().map(|&o| o as i32).collect();
                let mut into = PartitionMut::new(&mut staging[..], n, d);
                comm.all_gather_varcount_into(send, &mut into);
                for r in (0..self.size).filter(|&r| part[r] > 0) {
                    out[offsets[r] + from..][..part[r]]
                        .copy_from_slice(&staging[disp[r]..][..part[r]]);
                }
            }
        }
        drop(comm);
        self.received
            .fetch_add((total - mine.len()) as u64, Ordering::Relaxed);
    }

    fn max_u64(&self, values: &mut [u64]) {
        let send = values.to_vec();
        let comm = self.comm.lock().expect("no MPI call panicked");
        comm.all_reduce_into(&send[..], values, SystemOperation::max());
    }

    fn sum_u64(&self, values: &mut [u64]) {
        let send = values.to_vec();
        let comm = self.comm.lock().expect("no MPI call panicked");
        comm.all_reduce_into(&send[..], values, SystemOperation::sum());
    }

    fn all_to_all_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
    ) {
        comm::check_exchange(self.size, send, send_counts, recv, recv_counts);
        let (send_at, recv_at) = (offsets(send_counts), offsets(recv_counts));
        // MPI's counts and displacements are 32-bit: messages go in rounds of at most
        // `limit / size` bytes per pair, through staging buffers. The number of rounds depends
        // on every rank's messages, so it is agreed first (one small reduction).
        let share = (call_limit() / self.size).max(1);
        let longest = send_counts
            .iter()
            .chain(recv_counts)
            .max()
            .copied()
            .unwrap_or(0);
        let mut rounds = [longest.div_ceil(share) as u64];
        let comm = self.comm.lock().expect("no MPI call panicked");
        comm.all_reduce_into(&[rounds[0]][..], &mut rounds[..], SystemOperation::max());
        let mut out_stage = vec![0u8; share.min(send.len().max(1)) * self.size];
        let mut in_stage = vec![0u8; share.min(recv.len().max(1)) * self.size];
        let slot = |counts: &[usize], from: usize| -> Vec<usize> {
            counts
                .iter()
                .map(|&c| c.saturating_sub(from).min(share))
                .collect()
        };
        for round in 0..rounds[0] as usize {
            let from = round * share;
            let (out_part, in_part) = (slot(send_counts, from), slot(recv_counts, from));
            // Staged at stride `share` per rank when the messages are large, packed otherwise.
            let stride_out = out_stage.len() / self.size;
            let stride_in = in_stage.len() / self.size;
            for r in (0..self.size).filter(|&r| out_part[r] > 0) {
                out_stage[r * stride_out..][..out_part[r]]
                    .copy_from_slice(&send[send_at[r] + from..][..out_part[r]]);
            }
            let n_out: Vec<i32> = out_part.iter().map(|&c| c as i32).collect();
            let n_in: Vec<i32> = in_part.iter().map(|&c| c as i32).collect();
            let d_out: Vec<i32> = (0..self.size).map(|r| (r * stride_out) as i32).collect();
            let d_in: Vec<i32> = (0..self.size).map(|r| (r * stride_in) as i32).collect();
            comm.all_to_all_varcount_into(
                &Partition::new(&out_stage[..], n_out, d_out),
                &mut PartitionMut::new(&mut in_stage[..], n_in, d_in),
            );
            for r in (0..self.size).filter(|&r| in_part[r] > 0) {
                recv[recv_at[r] + from..][..in_part[r]]
                    .copy_from_slice(&in_stage[r * stride_in..][..in_part[r]]);
            }
        }
        drop(comm);
        let got = recv.len() - recv_counts[self.rank];
        self.received.fetch_add(got as u64, Ordering::Relaxed);
    }

    fn sparse_exchange_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv: &mut [u8],
        recv_counts: &[usize],
    ) {
        comm::check_exchange(self.size, send, send_counts, recv, recv_counts);
        let (send_at, recv_at) = (offsets(send_counts), offsets(recv_counts));
        let me = self.rank;
        recv[recv_at[me]..][..recv_counts[me]]
            .copy_from_slice(&send[send_at[me]..][..send_counts[me]]);
        // MPI's counts are 32-bit: a message travels in pieces of at most `call_limit()`
        // bytes, which both sides cut alike and MPI delivers in order (one tag, one pair).
        let piece = call_limit();
        let mut into: Vec<(usize, &mut [u8])> = Vec::new();
        let mut rest = &mut recv[..];
        for (r, &c) in recv_counts.iter().enumerate() {
            let (head, tail) = rest.split_at_mut(c);
            rest = tail;
            if r != me && c > 0 {
                into.push((r, head));
            }
        }
        let comm = self.comm.lock().expect("no MPI call panicked");
        mpi::request::scope(|scope| {
            let mut requests = Vec::new();
            for (r, buf) in into {
                let from = comm.process_at_rank(r as i32);
                for part in buf.chunks_mut(piece) {
                    requests.push(from.immediate_receive_into_with_tag(scope, part, SPARSE_TAG));
                }
            }
            for (r, &c) in send_counts.iter().enumerate() {
                if r == me || c == 0 {
                    continue;
                }
                let to = comm.process_at_rank(r as i32);
                for part in send[send_at[r]..][..c].chunks(piece) {
                    requests.push(to.immediate_send_with_tag(scope, part, SPARSE_TAG));
                }
            }
            for request in requests {
                request.wait();
            }
        });
        drop(comm);
        let got = recv.len() - recv_counts[me];
        self.received.fetch_add(got as u64, Ordering::Relaxed);
    }

    fn bytes_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    fn abort(&self, code: i32) -> ! {
        // Not through the lock: a panic may have happened while it was held.
        SimpleCommunicator::world().abort(code)
    }
}

/// The tag of [`Comm::sparse_exchange_bytes`]'s messages (every other call is a collective).
const SPARSE_TAG: i32 = 31;

/// Where each rank's part starts in a buffer of the parts in rank order.
fn offsets(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let o = *at;
            *at += c;
            Some(o)
        })
        .collect()
}

/// The most bytes one gather call moves over all ranks: 1 GiB (MPI's counts and displacements are
/// 32-bit), or `MOTE_GATHER_LIMIT` bytes where the tests set it (small, so that a small run
/// gathers in many rounds).
fn call_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("MOTE_GATHER_LIMIT")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&v: &usize| v > 0)
            .map_or(1 << 30, |v: usize| v.min(1 << 30))
    })
}

/// Initialises MPI and installs the world as the process's communicator.
pub(crate) fn start() -> Result<Started, String> {
    let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Serialized)
        .ok_or("MPI was initialised already")?;
    if threading < mpi::Threading::Serialized {
        return Err(format!(
            "this MPI library provides thread level {threading:?}; mote needs at least \
             Serialized (MPI_THREAD_SERIALIZED)"
        ));
    }
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    // The ranks that share this machine's memory (and its GPUs), in world-rank order.
    let local_rank = world.split_shared(world.rank()).rank() as usize;
    let comm: Arc<dyn Comm> = Arc::new(World {
        comm: Mutex::new(world),
        rank,
        size,
        local_rank,
        received: AtomicU64::new(0),
    });
    install_world(comm.clone()).map_err(|_| "a communicator was installed already")?;
    // A panic on one rank would leave the others waiting in their next collective: print it
    // as usual, then end every rank.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        eprintln!("error: rank {rank} of {size} panicked; ending every rank");
        comm.abort(70);
    }));
    Ok(Started {
        size,
        rank,
        _universe: Some(universe),
    })
}
