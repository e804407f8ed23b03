//! # mote-distributed
//!
//! One simulation over many processes: the program's start under an MPI launcher. With the
//! feature `mpi` (Open MPI or any MPI through rsmpi), [`start`] initialises MPI (with thread
//! support: each rank runs its own CPU threads), installs the world communicator as the
//! process's [`mote_core::comm::world`], and makes a panic on one rank end every rank instead
//! of leaving them waiting. Without the feature, a start by a launcher with more than one
//! process is refused: each copy would run the whole simulation into the same directory.
//!
//! The distributed algorithms themselves (work split between ranks, gathers, agreement on
//! failures) live beside the code they distribute and speak only to [`mote_core::comm::Comm`]
//! (decision 0027).

#![warn(missing_docs)]

#[cfg(feature = "mpi")]
mod world;

/// What [`start`] found: the processes of this run. Keep it until the program ends: dropping
/// it finalises MPI.
pub struct Started {
    /// Ranks in the run (1 without a launcher).
    pub size: usize,
    /// This process's rank.
    pub rank: usize,
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {}", self.rank, self.size)
    }
}

impl Started {
    /// Whether this process writes the run's files and talks to the user: rank 0.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
}

/// Whether this program was built with MPI.
pub const WITH_MPI: bool = cfg!(feature = "mpi");

/// Starts the processes of this run. Under an MPI launcher with the `mpi` feature: MPI
/// initialised, the world communicator installed. Without a launcher: one process. Fails with
/// a message where a launcher started several copies of a program built without MPI, or MPI
/// cannot start.
pub fn start() -> Result<Started, String> {
    let launched = mote_core::comm::launched_size();
    #[cfg(feature = "mpi")]
    if launched > 1 {
        return world::start();
    }
    if launched > 1 {
        return Err(format!(
            "started by an MPI launcher as {launched} processes, but this mote was built \
             without MPI: each process would run the whole simulation into the same directory. \
             Rebuild with `cargo build --release -p mote --features mpi` (needs libopenmpi-dev and \
             libclang-dev), or run one process"
        ));
    }
    Ok(Started {
        size: 1,
        rank: 0,
        #[cfg(feature = "mpi")]
        _universe: None,
    })
}
