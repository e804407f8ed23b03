//! MPI's world communicator as a [`Comm`].

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use mote_core::comm::{Comm, install_world};
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
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
        let offsets: Vec<usize> = counts
            .iter()
            .scan(0, |at, &c| {
                let o = *at;
                *at += c;
                Some(o)
            })
            .collect();
        assert_eq!(
            out.len(),
            counts.iter().sum::<usize>(),
            "room for every part"
        );
        // MPI counts and displacements are 32-bit: one gather moves at most 2 GiB (268 million
        // f64 values: one acceleration component of 268 million bodies).
        let total = out.len();
        if total > i32::MAX as usize {
            panic!(
                "one gather of {total} bytes: MPI moves at most {} in one call; runs this large \
                 are not supported yet",
                i32::MAX
            );
        }
        let n: Vec<i32> = counts.iter().map(|&c| c as i32).collect();
        let d: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
        let comm = self.comm.lock().expect("no MPI call panicked");
        let mut part = PartitionMut::new(out, n, d);
        comm.all_gather_varcount_into(mine, &mut part);
        drop(comm);
        self.received
            .fetch_add((total - mine.len()) as u64, Ordering::Relaxed);
    }

    fn max_u64(&self, values: &mut [u64]) {
        let send = values.to_vec();
        let comm = self.comm.lock().expect("no MPI call panicked");
        comm.all_reduce_into(&send[..], values, SystemOperation::max());
    }

    fn bytes_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    fn abort(&self, code: i32) -> ! {
        // Not through the lock: a panic may have happened while it was held.
        SimpleCommunicator::world().abort(code)
    }
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
