//! Running a configured simulation: build it, price and reserve its memory, advance it to the
//! end time, and write the run directory.
//!
//! A run directory holds `config.toml` (every resolved setting), `provenance.json` (what ran,
//! where, when), `diagnostics.csv` (conserved quantities over time), `snapshots/*.vtu` with
//! `snapshots.pvd` (ParaView) and `checkpoint.mote` (the whole state, for `mote resume`). Every
//! file is written atomically; the diagnostics grow in `diagnostics.csv.partial` until the run
//! ends. Snapshots and checkpoints are written at the first step boundary at or after their
//! times: no step is shortened for output, so the output schedule never changes the physics (a
//! resumed run repeats an uninterrupted one bit for bit). Only the end time is hit exactly. A
//! checkpoint is also written every `output.checkpoint_wall_interval` of wall-clock time and when
//! a stop is requested (SIGINT, SIGTERM: [`crate::interrupt`]).
//!
//! Under MPI ([`mote_core::comm`], decisions 0027 to 0029) every rank runs this same loop on
//! the particles it owns (a range of the Morton curve, [`mote_gravity::owned`]): it advances
//! them, computes their forces (the tree from its locally essential tree, direct summation from
//! every rank's gathered positions), and hands them to their new owner after each step; the
//! diagnostics are summed across the ranks, snapshots and checkpoints gathered on rank 0 in the
//! one-process order, and rank 0 alone writes the run directory. Whatever
//! could happen on one rank and not the others (a file that cannot be read or written, memory
//! that cannot be reserved, a signal, the wall clock) is agreed by all ranks before it is acted
//! on ([`agreed`]), so every rank stops together with the same message.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use mote_core::comm::{self, Comm, RankFailure, RootStream};
use mote_core::memory::{self, MemoryModel, ReserveOptions, reserve};
use mote_core::{
    Budgeted, CapacityError, CpuBackend, DeviceSpec, MachineInfo, ParticleData, PrecisionJob, Real,
};
use mote_gpu::{Gpu, GpuDirectSolver, GpuError, GpuTreeSolver};
use mote_gravity::initial_conditions as ic;
use mote_gravity::owned::{OwnedSolver, Ownership, Slots, rows_in_slot_order};
use mote_gravity::{
    Diagnostics, DirectSolver, ForceSolver, GravityError, Integrator, KernelChoice, Simulation,
    Softening, SolverKind, TreeSolver,
};
use serde::Serialize;

use crate::checkpoint;
use crate::config::{
    ConfigError, GravityConfig, InitialConditions, InitialConditionsKind, Source,
    parse_memory_limit,
};
use crate::files::{CsvWriter, FileError, create_run_dir, write_atomic, write_json};
use crate::schedule::{Outputs, parse_wall_interval};
use crate::snapshot::{self, Column, Family, Header, Snapshot, SnapshotFormat, Values};
use crate::units::Units;
use crate::vtk::{self, Field};

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file could not be written.
    #[error(transparent)]
    File(#[from] FileError),
    /// The initial conditions' file is unreadable or holds bad values (the message names the
    /// dataset or line and the first bad index); nothing was written.
    #[error("initial conditions: {0}")]
    InitialConditions(FileError),
    /// The run does not fit its memory limit.
    #[error(transparent)]
    Capacity(#[from] CapacityError),
    /// Invalid physical parameters.
    #[error(transparent)]
    Gravity(#[from] GravityError),
    /// The GPU could not be opened or failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A meshless problem or scheme could not be built.
    #[error(transparent)]
    Cloud(#[from] mote_cloud::CloudError),
    /// What the configuration asks for cannot be done (e.g. a convergence study of a problem
    /// without an exact solution); refused before anything runs.
    #[error("{0}")]
    Refused(String),
    /// A meshless run stopped: a non-finite state (the message names the particle) or no
    /// stable time step.
    #[error(
        "step {step} from time {time}: {reason}; the diagnostics up to the previous row are in {csv}"
    )]
    Meshless {
        /// The step that failed.
        step: u64,
        /// The simulated time it started from.
        time: f64,
        /// What went wrong.
        reason: String,
        /// Where the diagnostics so far are.
        csv: String,
    },
    /// A stop was requested (SIGINT, SIGTERM; see [`crate::interrupt`]): the step in progress
    /// was finished, the diagnostics row and a checkpoint written.
    #[error(
        "interrupted by {} at step {step}, time {time}: checkpoint written to {checkpoint}; \
         continue with `mote resume {checkpoint}`", signal_name(*signal)
    )]
    Interrupted {
        /// The signal number (2: SIGINT, 15: SIGTERM).
        signal: usize,
        /// The last step finished.
        step: u64,
        /// The simulated time reached.
        time: f64,
        /// The checkpoint written.
        checkpoint: String,
    },
    /// A stop was requested and the run stopped at a step boundary, but it writes no
    /// checkpoint to resume from (a moving cloud, a relaxation run).
    #[error(
        "stopped by {} at step {step}, time {time}: {why}", signal_name(*signal)
    )]
    Stopped {
        /// The signal number.
        signal: usize,
        /// The last step finished.
        step: u64,
        /// The simulated time reached.
        time: f64,
        /// Why there is no checkpoint.
        why: String,
    },
    /// Some rank of a distributed run failed (the message names the lowest failing rank); every
    /// rank stops with this error.
    #[error(transparent)]
    Rank(#[from] RankFailure),
    /// The state became NaN or infinite.
    #[error(
        "non-finite state at step {step}, time {time}: particle id {id} (index {index}) has {what}; \
         the diagnostics up to the previous output are in {csv}"
    )]
    NonFinite {
        /// The step after which it was found.
        step: u64,
        /// The simulated time.
        time: f64,
        /// The particle's stable id.
        id: u64,
        /// Its index in the arrays.
        index: usize,
        /// Which quantity and its value.
        what: String,
        /// Where the diagnostics so far are.
        csv: String,
    },
}

/// The name of signal number `signal`, for messages.
pub fn signal_name(signal: usize) -> String {
    match signal {
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// The memory limit a run is priced against: the configured one, else the process-wide one,
/// else the default budget ([`memory::default_budget`]: the memory available now less a
/// The class of a failure, for the exit status every rank of a distributed run gives: 2 for
/// bad input (the initial conditions), 1 for anything else.
pub fn failure_code(e: &RunError) -> u8 {
    match e {
        RunError::InitialConditions(_) => 2,
        RunError::Rank(f) => f.code,
        _ => 1,
    }
}

/// On several ranks, agrees on `result` (collective: every rank calls it at the same point):
/// if any rank failed, every rank returns [`RunError::Rank`] with the lowest failing rank's
/// message. On one process, `result` itself.
pub fn agreed<T>(result: Result<T, RunError>) -> Result<T, RunError> {
    let world = comm::world();
    if world.size() == 1 {
        return result;
    }
    let failure = result
        .as_ref()
        .err()
        .map(|e| (failure_code(e), e.to_string()));
    comm::agree(
        world.as_ref(),
        failure.as_ref().map(|(c, m)| (*c, m.as_str())),
    )?;
    result
}

/// The number of the next snapshot of the run in `dir` (after those in `list`): rank 0 looks
/// (only it touches the run directory), and its answer, or its failure, is every rank's of
/// `stream` before any rows travel. Collective.
pub(crate) fn snapshot_number(
    dir: &Path,
    list: &[(f64, String)],
    stream: &RootStream<'_>,
) -> Result<u64, RunError> {
    let number = stream.is_root().then(|| snapshot::next_number(dir, list));
    let failure = number
        .as_ref()
        .and_then(|n| n.as_ref().err())
        .map(ToString::to_string);
    comm::agree(stream.comm(), failure.as_deref().map(|m| (1, m)))?;
    Ok(number.map_or(Ok(0), |n| n)?)
}

/// Runs `write` with the ranks that hold rows of the run's files: where each rank holds its own
/// (`split`), every rank (collective, the outcome agreed); else rank 0 alone, holding every row
/// ([`on_root`]: every rank holds the whole state).
pub(crate) fn by_row_holders(
    split: bool,
    world: &dyn Comm,
    write: impl FnOnce(&dyn Comm) -> Result<(), RunError>,
) -> Result<(), RunError> {
    if split {
        agreed(write(world))
    } else {
        on_root(world, || write(&comm::SingleProcess))
    }
}

/// `write`, on rank 0 only (the rank that writes the run directory), agreed by every rank.
pub(crate) fn on_root<T: Default>(
    comm: &dyn Comm,
    write: impl FnOnce() -> Result<T, RunError>,
) -> Result<T, RunError> {
    agreed(if comm.rank() == 0 {
        write()
    } else {
        Ok(T::default())
    })
}

/// margin).
pub fn effective_memory_limit(configured: Option<&str>) -> Option<u64> {
    explicit_memory_limit(configured).or_else(memory::default_budget)
}

/// The memory limit a run's buffers are reserved against (sized once and frozen): one the user
/// set, in the configuration or for the process. The default budget only prices a run:
/// reserving against it would size every buffer to fill the machine's free memory.
pub fn explicit_memory_limit(configured: Option<&str>) -> Option<u64> {
    configured
        .map(|text| parse_memory_limit(text).expect("validated with the config"))
        .or_else(memory::memory_limit)
}

/// Where a run stands, for progress display.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Steps taken.
    pub step: u64,
    /// Steps the run will take (an estimate where the step size adapts).
    pub total_steps: u64,
    /// Simulated time.
    pub time: f64,
    /// The family's headline quantity at the last diagnostics row (gravity: the relative
    /// energy error; meshless: the step size).
    pub status: String,
}

/// What a finished run reports.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The run directory.
    pub dir: PathBuf,
    /// Steps taken.
    pub steps: u64,
    /// Final simulated time.
    pub time: f64,
    /// Final relative energy error.
    pub energy_error: f64,
    /// Final virial ratio.
    pub virial_ratio: f64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// The force kernel that ran.
    pub kernel: String,
    /// Particles.
    pub particles: usize,
}

#[derive(Serialize)]
struct Provenance<'a> {
    mote_version: &'a str,
    git_commit: &'a str,
    physics: &'a str,
    backend: String,
    threads: usize,
    /// MPI ranks that ran it (each with `threads` threads).
    ranks: usize,
    /// Bytes rank 0 received from the other ranks (on several ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_received: Option<u64>,
    /// On several ranks: times the particles were cut into new ranges, and particles that
    /// moved between ranks (all ranks together), in this run (since its start or resumption).
    #[serde(skip_serializing_if = "Option::is_none")]
    rebalances: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    migrated: Option<u64>,
    kernel: String,
    precision: String,
    seed: Option<u64>,
    particles: usize,
    memory_limit_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    machine: MachineInfo,
    started: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed_from: Option<String>,
    finished: Option<String>,
    wall_seconds: Option<f64>,
    steps: Option<u64>,
    final_relative_energy_error: Option<f64>,
    /// G and the units every number of the run is in.
    units: Units,
}

/// Runs `config` into `dir` (created; an existing non-empty one only with `force`).
/// `git_commit` goes into the provenance record; `progress` is called at every diagnostics
/// output.
pub fn run_gravity(
    config: &GravityConfig,
    dir: &Path,
    force: bool,
    git_commit: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunReport, RunError> {
    config.run.precision.dispatch(GravityRun {
        config,
        dir,
        force,
        git_commit,
        progress,
    })
}

struct GravityRun<'a> {
    config: &'a GravityConfig,
    dir: &'a Path,
    force: bool,
    git_commit: &'a str,
    progress: &'a mut dyn FnMut(Progress),
}

/// Particles a configuration will create.
pub fn particle_count(ic: &InitialConditions) -> usize {
    match ic.kind {
        InitialConditionsKind::Kepler => 2,
        InitialConditionsKind::GalaxyCollision => ic.particles.unwrap_or(0).saturating_mul(2),
        _ => ic.particles.unwrap_or(0),
    }
}

fn galaxy(ic: &InitialConditions) -> ic::DiscGalaxy {
    let d = ic::DiscGalaxy::default();
    ic::DiscGalaxy {
        particles: ic.particles.unwrap_or(d.particles),
        bulge_mass: ic.bulge_mass.unwrap_or(d.bulge_mass),
        bulge_scale: ic.bulge_scale.unwrap_or(d.bulge_scale),
        disc_mass: ic.disc_mass.unwrap_or(d.disc_mass),
        disc_scale_length: ic.disc_scale_length.unwrap_or(d.disc_scale_length),
        disc_scale_height: ic.disc_scale_height.unwrap_or(d.disc_scale_height),
        disc_dispersion: ic.disc_dispersion.unwrap_or(d.disc_dispersion),
    }
}

/// The initial particles of a (defaults-resolved) configuration.
pub fn initial_particles<R: Real>(c: &InitialConditions) -> Result<ParticleData<R>, GravityError> {
    let n = particle_count(&c.clone().with_defaults());
    initial_rows(c, ic::Rows::all(n))
}

/// The particles `rows` of [`initial_particles`] (bit for bit; collective over `rows.comm`):
/// what each rank of a run on several makes, no rank holding every particle.
pub fn initial_rows<R: Real>(
    c: &InitialConditions,
    rows: ic::Rows<'_>,
) -> Result<ParticleData<R>, GravityError> {
    use InitialConditionsKind::*;
    let c = c.clone().with_defaults();
    let n = c.particles.unwrap_or(0);
    let seed = c.seed.unwrap_or(1);
    let get = |v: Option<f64>| v.expect("filled by with_defaults");
    match c.kind {
        Plummer => ic::plummer_rows(n, seed, rows),
        UniformSphere => ic::uniform_sphere_rows(n, get(c.radius), get(c.virial_ratio), seed, rows),
        ColdCollapse => ic::uniform_sphere_rows(n, get(c.radius), 0.0, seed, rows),
        // Two bodies: made whole, cut to the rows.
        Kepler => ic::kepler(&ic::Kepler {
            semi_major_axis: get(c.semi_major_axis),
            eccentricity: get(c.eccentricity),
            m1: get(c.m1),
            m2: get(c.m2),
        })
        .map(|mut p| {
            p.retain(|i| rows.range().contains(&i));
            p
        }),
        DiscGalaxy => ic::disc_galaxy_rows(&galaxy(&c), seed, rows),
        GalaxyCollision => {
            let g = galaxy(&c);
            ic::galaxy_collision_rows(
                &ic::GalaxyCollision {
                    first: g,
                    second: g,
                    separation: get(c.separation),
                    pericentre: get(c.pericentre),
                    inclination: get(c.inclination_degrees).to_radians(),
                },
                seed,
                rows,
            )
        }
        File => Err(GravityError::InvalidParameter {
            name: "initial_conditions.kind",
            value: "file".into(),
            allowed: "bodies from a file are read by `mote run` (`file_particles`); this command needs generated initial conditions",
        }),
    }
}

/// The bodies read from a file as the engine's particles in precision `R`: velocities from the
/// run's units to the engine's (divided by `time_factor`, `sqrt(G)`; exact in N-body units),
/// accelerations zero (the integrator computes them), the file's ids.
pub fn file_particles<R: Real>(b: &crate::initial::Bodies, time_factor: f64) -> ParticleData<R> {
    let cast =
        |v: &[f64], scale: f64| -> Vec<R> { v.iter().map(|&x| R::cast(x / scale)).collect() };
    let [x, y, z] = b.position.each_ref().map(|v| cast(v, 1.0));
    let [vx, vy, vz] = b.velocity.each_ref().map(|v| cast(v, time_factor));
    let zero = vec![R::zero(); b.len()];
    let m = cast(&b.mass, 1.0);
    ParticleData::restore([&x, &y, &z, &vx, &vy, &vz, &zero, &zero, &zero, &m], &b.ids)
}

/// A non-finite state found on several ranks (collective: every rank finds it at the same
/// step), with the rank where it began: the rank that computed the run's first non-finite
/// acceleration (the earliest force evaluation, the lowest rank among equals).
///
/// Where the solver knows why it gave non-finite accelerations (a tree it could not build, or
/// whose arrays outgrew a rank's reservation), that is the message, with the rank it happened
/// on (agreed: the lowest such rank).
fn owned_by<R: Real>(mut e: RunError, solver: &mut dyn ForceSolver<R>) -> RunError {
    let world = comm::world();
    let RunError::NonFinite { what, .. } = &mut e else {
        return e;
    };
    let failure = solver.failure();
    if world.size() == 1 {
        if let Some(f) = failure {
            what.push_str(&format!("; the force evaluation failed: {f}"));
        }
        return e;
    }
    if let Err(f) = comm::agree(world.as_ref(), failure.as_deref().map(|m| (1, m))) {
        what.push_str(&format!("; the force evaluation failed on {f}"));
        return e;
    }
    let mine = solver.first_non_finite();
    // Earliest evaluation (as the largest complement), then lowest rank, then its particle.
    let evaluation = u64::MAX - comm::max_of(world.as_ref(), mine.map_or(0, |(k, _)| u64::MAX - k));
    let first = mine.is_some_and(|(k, _)| k == evaluation);
    let rank = world.size() as u64
        - comm::max_of(
            world.as_ref(),
            if first {
                (world.size() - world.rank()) as u64
            } else {
                0
            },
        );
    let particle = comm::max_of(
        world.as_ref(),
        match mine {
            Some((_, i)) if first && rank == world.rank() as u64 => i as u64 + 1,
            _ => 0,
        },
    );
    if particle > 0 {
        what.push_str(&format!(
            "; the first non-finite acceleration (particle index {}, force evaluation \
             {evaluation}) was computed on rank {rank} of {}",
            particle - 1,
            world.size()
        ));
    }
    e
}

/// Fails, naming the particle, if any position or velocity of `p` is NaN or infinite.
/// `csv` is where the diagnostics written so far are.
pub fn check_finite<R: Real>(
    p: &ParticleData<R>,
    step: u64,
    time: f64,
    csv: &Path,
) -> Result<(), RunError> {
    match first_non_finite(p) {
        Some((index, what)) => Err(RunError::NonFinite {
            step,
            time,
            id: p.ids()[index],
            index,
            what,
            csv: csv.display().to_string(),
        }),
        None => Ok(()),
    }
}

/// The first particle of `p` whose position or velocity is NaN or infinite: its index and
/// what it has ("velocity [NaN, 0.0, 1.0]").
pub fn first_non_finite<R: Real>(p: &ParticleData<R>) -> Option<(usize, String)> {
    for (name, span) in [("position", p.positions()), ("velocity", p.velocities())] {
        let (x, y, z) = span.components();
        if let Some(index) =
            (0..p.len()).find(|&i| !(x[i].is_finite() && y[i].is_finite() && z[i].is_finite()))
        {
            return Some((index, format!("{name} {:?}", span.get(index))));
        }
    }
    None
}

const DIAGNOSTICS_HEADER: [&str; 15] = [
    "step",
    "time",
    "kinetic",
    "potential",
    "total",
    "relative_energy_error",
    "momentum_x",
    "momentum_y",
    "momentum_z",
    "angular_momentum_x",
    "angular_momentum_y",
    "angular_momentum_z",
    "virial_ratio",
    "mass",
    "wall_seconds",
];

/// Steps `sim` on the grid `k dt` ([`next_time`]) towards `end`, the clock set to each step's
/// end exactly, until it reaches `end` or `stop()`, asked after every step, says to stop.
/// Returns whether it reached `end`. Every front end steps a gravity simulation through this
/// (the run, the Python module, `mote bench api`), so all take the same steps.
pub fn step_towards<R: Real>(
    sim: &mut Simulation<R>,
    dt: f64,
    end: f64,
    mut stop: impl FnMut() -> bool,
) -> bool {
    let mut time = sim.time();
    while time < end {
        let next = next_time(time, dt, end);
        sim.step(next - time);
        time = next;
        sim.set_time(time);
        if stop() {
            break;
        }
    }
    time >= end
}

/// The end of the step that starts at `t`: the next point of the grid `k dt`, or the end time
/// if that comes first. The same `t` always gives the same step, so a resumed run retraces an
/// uninterrupted one; output times do not enter (outputs are written at the step boundary that
/// reaches them).
pub fn next_time(t: f64, dt: f64, end: f64) -> f64 {
    let q = t / dt;
    let k = if (q - q.round()).abs() < 1e-9 * q.abs().max(1.0) {
        q.round()
    } else {
        q.floor()
    };
    let grid = (k + 1.0) * dt;
    // A grid point within rounding of the end is the end.
    if grid >= end - 1e-12 * end.abs().max(1.0) {
        end
    } else {
        grid
    }
}

/// Where and how a run writes its snapshots.
pub(crate) struct SnapshotSink<'a> {
    /// The run directory.
    pub dir: &'a Path,
    /// `[output] format`.
    pub format: SnapshotFormat,
    /// `[output] compression`.
    pub compression: u8,
    /// The resolved configuration, stored in HDF5 snapshots.
    pub config: String,
    /// The commit the program was built from.
    pub commit: &'a str,
}

impl SnapshotSink<'_> {
    /// The HDF5 header of a snapshot at `time` (the rest filled by the caller).
    pub fn header(&self, family: Family, dimension: usize, time: f64, box_size: f64) -> Header {
        Header {
            family,
            dimension,
            time,
            box_size,
            units_cgs: None,
            unit_names: ["1", "1", "1", "1"].map(String::from),
            compression: self.compression,
            spacing: Vec::new(),
            config: self.config.clone(),
            commit: self.commit.to_string(),
        }
    }
}

/// A snapshot of `p` at `time`, in the configured formats: `snapshots/snap_NNNNN.vtu` (with the
/// `.pvd` listing all so far) and/or `snapshots/snap_NNNNN.hdf5` (with `snapshots.json`).
/// Velocities and accelerations are converted from the engine's (G = 1) to the run's units
/// (`sqrt(G)` and `G` times; see [`crate::units`]); `time` is the run's. The HDF5 file keeps the
/// run's precision. `p` is this rank's rows of the files (its slot range on ranks that own
/// their particles, [`rows_in_slot_order`]); rank 0 of `ranks` writes, the others' rows
/// streamed to it. Collective over `ranks`.
fn write_snapshot<R: Real>(
    sink: &SnapshotSink<'_>,
    p: &ParticleData<R>,
    time: f64,
    units: &Units,
    list: &mut Vec<(f64, String)>,
    ranks: &dyn Comm,
) -> Result<(), RunError> {
    let stream = RootStream::new(ranks, p.len());
    let number = snapshot_number(sink.dir, list, &stream)?;
    let (vt, g) = (units.time_factor(), units.g);
    if sink.format.vtk() {
        let interleave = |s: mote_core::Vec3Span<'_, R>, scale: f64| -> Vec<f64> {
            let (x, y, z) = s.components();
            (0..x.len())
                .flat_map(|i| [x[i].as_f64(), y[i].as_f64(), z[i].as_f64()].map(|v| v * scale))
                .collect()
        };
        let points = interleave(p.positions(), 1.0);
        let velocity = interleave(p.velocities(), vt);
        let acceleration = interleave(p.accelerations(), g);
        let mass: Vec<f64> = p.masses().iter().map(|m| m.as_f64()).collect();
        let fields = [
            Field::U64("id", p.ids()),
            Field::Vec3F64("velocity", &velocity),
            Field::Vec3F64("acceleration", &acceleration),
            Field::F64("mass", &mass),
        ];
        snapshot::add_vtk(sink.dir, number, time, list, &points, &fields, &stream)?;
    }
    if sink.format.hdf5() {
        // Scaled in f64 and rounded once to the run's precision; a factor of 1 (N-body units)
        // leaves every value's bits as they are.
        let interleave = |s: mote_core::Vec3Span<'_, R>, scale: f64| -> Values {
            let (x, y, z) = s.components();
            Values::real::<R>(
                (0..x.len()).flat_map(|i| [x[i], y[i], z[i]].map(|v| R::cast(v.as_f64() * scale))),
            )
        };
        let mut header = sink.header(Family::Gravity, 3, time, 0.0);
        header.units_cgs = units.si.map(|[l, m, v]| [l * 100.0, m * 1000.0, v * 100.0]);
        header.unit_names =
            [&units.length, &units.mass, &units.velocity, &units.time].map(|n| n.to_string());
        let columns = vec![
            Column::vector("Coordinates", interleave(p.positions(), 1.0)),
            Column::vector("Velocities", interleave(p.velocities(), vt)),
            Column::vector("Accelerations", interleave(p.accelerations(), g)),
            Column::scalar("Masses", Values::real::<R>(p.masses().iter().copied())),
            Column::scalar("ParticleIDs", Values::U64(p.ids().to_vec())),
        ];
        let snapshot = Snapshot { header, columns };
        snapshot::add_hdf5(sink.dir, number, list, &snapshot, &stream)?;
    }
    Ok(())
}

/// Where a run starts: fresh from the configuration, or from a checkpoint.
struct Start<R: Real> {
    /// This rank's rows of the one-process order (`comm::even_ranges`; every particle on one
    /// process).
    particles: ParticleData<R>,
    /// The one-process index of the first of them.
    first: usize,
    step: u64,
    time: f64,
    initial_energy: Option<f64>,
    snapshots: Vec<(f64, String)>,
    resumed_from: Option<PathBuf>,
}

impl PrecisionJob for GravityRun<'_> {
    type Output = Result<RunReport, RunError>;

    fn run<R: Real>(self) -> Self::Output {
        let c = self.config;
        let backend = CpuBackend::threads(c.run.threads);
        let integrator: Box<dyn Integrator<R>> = c.integrator.kind.build(backend);
        let mut solver = make_solver::<R>(c)?;
        // Bodies from a file are read and checked first (they are the count to price), all
        // before the run directory exists: a bad file writes nothing.
        let world = comm::world();
        let (particles, first, time) = if c.initial_conditions.kind == InitialConditionsKind::File {
            let path = c.initial_conditions.path.as_deref().unwrap_or_default();
            // Every rank reads the file (on a shared file system): agreed, since one rank may
            // fail to where the others succeed.
            let fault = if comm::fault("read", world.rank()) {
                Err(FileError {
                    path: path.into(),
                    message: "cannot be read (a fault injected by a test)".into(),
                })
            } else {
                Ok(())
            };
            agreed(fault.map_err(RunError::InitialConditions))?;
            // Each rank reads and checks its rows (collective; failures agreed inside).
            let part = crate::initial::read_bodies_rows(Path::new(path), world.as_ref())
                .map_err(RunError::InitialConditions)?;
            let bodies = &part.bodies;
            let s = c.units().time_factor();
            let time = bodies.time * s;
            if time >= c.run.end_time * s {
                return Err(RunError::InitialConditions(FileError {
                    path: path.into(),
                    message: format!(
                        "its time {} (/Header/Time) is not before run.end_time = {}: the run \
                         starts at the file's time",
                        bodies.time, c.run.end_time
                    ),
                }));
            }
            price(c, part.total, integrator.as_ref(), solver.as_mut())?;
            (file_particles::<R>(bodies, s), part.first, time)
        } else {
            let n = particle_count(&c.initial_conditions.clone().with_defaults());
            price(c, n, integrator.as_ref(), solver.as_mut())?;
            // Each rank makes its rows only.
            let rows = comm::even_ranges(n, world.size())[world.rank()].clone();
            let first = rows.start;
            let made =
                initial_rows::<R>(&c.initial_conditions, ic::Rows::new(rows, world.as_ref()));
            (made?, first, 0.0)
        };
        on_root(world.as_ref(), || Ok(create_run_dir(self.dir, self.force)?))?;
        let start = Start {
            particles,
            first,
            step: 0,
            time,
            initial_energy: None,
            snapshots: Vec::new(),
            resumed_from: None,
        };
        drive(
            c,
            self.dir,
            start,
            integrator,
            solver,
            self.git_commit,
            self.progress,
        )
    }
}

/// The simulation `c` describes, in precision `R`, at its start and without any output: the
/// solver and integrator it names, its initial conditions (or `bodies`, checked by the caller,
/// in N-body units), priced against the memory limit before anything is allocated, the
/// accelerations computed. For front ends that drive a simulation step by step (the Python
/// module); [`run_gravity`] is the configured run with its outputs. Units are not applied: the
/// simulation is in N-body units (G = 1).
pub fn gravity_simulation<R: Real>(
    c: &GravityConfig,
    bodies: Option<&crate::initial::Bodies>,
) -> Result<Simulation<R>, RunError> {
    let integrator: Box<dyn Integrator<R>> =
        c.integrator.kind.build(CpuBackend::threads(c.run.threads));
    let mut solver = make_solver::<R>(c)?;
    let particles = match bodies {
        Some(b) => {
            price(c, b.len(), integrator.as_ref(), solver.as_mut())?;
            file_particles::<R>(b, 1.0)
        }
        None => {
            if c.initial_conditions.kind == InitialConditionsKind::File {
                return Err(RunError::Refused(
                    "initial_conditions.kind = \"file\": give the bodies as arrays instead".into(),
                ));
            }
            let n = particle_count(&c.initial_conditions.clone().with_defaults());
            price(c, n, integrator.as_ref(), solver.as_mut())?;
            initial_particles::<R>(&c.initial_conditions)?
        }
    };
    Ok(Simulation::new(particles, solver, integrator))
}

/// Seconds of `steps` steps of the simulation `c` describes (built by [`gravity_simulation`],
/// stepped by [`step_towards`]), measured `repeat` times in a row on one simulation: what `mote
/// bench api` reports, the reference the Python module's overhead is measured against. Here,
/// beside the run's own instantiations of the solvers and integrators, so the program does not
/// compile a second copy of them (7 s of its release build).
pub fn time_gravity_steps(
    c: &GravityConfig,
    steps: u64,
    repeat: usize,
) -> Result<Vec<f64>, RunError> {
    struct Job<'a>(&'a GravityConfig, u64, usize);
    impl PrecisionJob for Job<'_> {
        type Output = Result<Vec<f64>, RunError>;
        fn run<R: Real>(self) -> Self::Output {
            let Job(c, steps, repeat) = self;
            let mut sim = gravity_simulation::<R>(c, None)?;
            let dt = c.run.dt;
            let mut times = Vec::with_capacity(repeat);
            for _ in 0..repeat.max(1) {
                let started = Instant::now();
                let end = sim.time() + steps as f64 * dt;
                step_towards(&mut sim, dt, end, || false);
                times.push(started.elapsed().as_secs_f64());
            }
            Ok(times)
        }
    }
    c.run.precision.dispatch(Job(c, steps, repeat))
}

/// Fails, before anything is allocated, if the memory limit cannot hold `n` particles with the
/// integrator's and the solver's arrays.
fn price<R: Real>(
    c: &GravityConfig,
    n: usize,
    integrator: &dyn Integrator<R>,
    solver: &mut dyn ForceSolver<R>,
) -> Result<Option<u64>, RunError> {
    let prototype = ParticleData::<R>::new();
    let mut parts: Vec<&dyn Budgeted> = vec![&prototype, integrator as &dyn Budgeted];
    let own = solver.budgeted();
    parts.extend(own.into_iter().map(|b| &*b));
    price_model::<R>(c, n, MemoryModel::of(&parts))
}

/// [`price`] for the parts of a simulation that exists.
fn price_parts<R: Real>(
    c: &GravityConfig,
    n: usize,
    parts: &[&mut dyn Budgeted],
) -> Result<Option<u64>, RunError> {
    let parts: Vec<&dyn Budgeted> = parts.iter().map(|p| &**p).collect();
    price_model::<R>(c, n, MemoryModel::of(&parts))
}

fn price_model<R: Real>(
    c: &GravityConfig,
    n: usize,
    model: MemoryModel,
) -> Result<Option<u64>, RunError> {
    let limit = effective_memory_limit(c.run.memory_limit.as_deref());
    if let Some(limit) = limit {
        let needed = model.bytes(n, 0);
        memory::price(
            || {
                format!(
                    "memory limit for {n} particles in {} (estimate {needed} bytes)",
                    R::PRECISION
                )
            },
            needed,
            limit,
            ReserveOptions::default().tolerance,
        )?;
    }
    Ok(limit)
}

/// Continues the run whose latest checkpoint is `checkpoint` (in its run directory), with the
/// configuration it carries and `overrides` on top (typically a later `run.end_time`). The
/// continuation is bitwise identical to a run that was never interrupted.
pub fn resume_gravity(
    checkpoint_path: &Path,
    overrides: &[String],
    git_commit: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunReport, ResumeError> {
    // Every rank opens the checkpoint (rank 0 checks its checksum, reading it through once) and
    // later reads its rows: agreed, since one rank may fail where the others read.
    let first = comm::world().rank() == 0;
    let opened =
        agreed(checkpoint::open(checkpoint_path, first).map_err(RunError::File)).map_err(|e| {
            match e {
                RunError::File(f) => ResumeError::File(f),
                other => ResumeError::Run(other),
            }
        })?;
    let checkpoint::AnyHeader::Gravity(header) = opened.header().clone() else {
        return Err(FileError {
            path: checkpoint_path.to_path_buf(),
            message: "a meshless run's checkpoint, not a gravity run's".into(),
        }
        .into());
    };
    let config = GravityConfig::parse(
        &Source {
            file: Some(checkpoint_path),
            text: &header.config,
        },
        overrides,
    )?;
    let dir = check_resume(
        checkpoint_path,
        (config.run.precision, header.precision),
        config.run.end_time,
        // The checkpoint's clock is the engine's (crate::units).
        header.time / config.units().time_factor(),
    )?;
    let job = ResumeJob {
        config: &config,
        dir: &dir,
        header: &header,
        opened: &opened,
        path: checkpoint_path,
        git_commit,
        progress,
    };
    Ok(config.run.precision.dispatch(job)?)
}

/// The checks every resume makes before it builds anything: the configured precision is the
/// checkpoint's (`precision`: configured, checkpoint's), and the end time `end` lies beyond the
/// checkpoint's `time`. Returns the run directory (the checkpoint's).
pub(crate) fn check_resume(
    checkpoint_path: &Path,
    precision: (mote_core::Precision, mote_core::Precision),
    end: f64,
    time: f64,
) -> Result<PathBuf, ResumeError> {
    let refuse = |key: &str, message: String| {
        Err(ResumeError::Config(ConfigError {
            file: Some(checkpoint_path.to_path_buf()),
            line: None,
            key: Some(key.into()),
            message,
        }))
    };
    if precision.0 != precision.1 {
        return refuse(
            "run.precision",
            format!(
                "the checkpoint holds {} arrays; the precision cannot change on resume",
                precision.1
            ),
        );
    }
    if end <= time {
        return refuse(
            "run.end_time",
            format!(
                "the checkpoint is at t = {time}; set a later end time, e.g. --set run.end_time={}",
                2.0 * time
            ),
        );
    }
    Ok(checkpoint_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".")))
}

/// Why a resume failed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The configuration (with overrides) is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The checkpoint cannot be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// The continued run failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

struct ResumeJob<'a> {
    config: &'a GravityConfig,
    dir: &'a Path,
    header: &'a checkpoint::Header,
    opened: &'a checkpoint::Opened,
    path: &'a Path,
    git_commit: &'a str,
    progress: &'a mut dyn FnMut(Progress),
}

impl PrecisionJob for ResumeJob<'_> {
    type Output = Result<RunReport, RunError>;

    fn run<R: Real>(self) -> Self::Output {
        let c = self.config;
        let backend = CpuBackend::threads(c.run.threads);
        // Each rank reads its rows of the one-process order.
        let world = comm::world();
        let n = agreed(self.opened.gravity_count::<R>().map_err(RunError::File))?;
        let rows = comm::even_ranges(n, world.size())[world.rank()].clone();
        let first = rows.start;
        let particles = agreed(self.opened.gravity_rows::<R>(rows).map_err(RunError::File))?;
        let integrator: Box<dyn Integrator<R>> = c.integrator.kind.build(backend);
        let mut solver = make_solver::<R>(c)?;
        price(c, n, integrator.as_ref(), solver.as_mut())?;
        let start = Start {
            particles,
            first,
            step: self.header.step,
            time: self.header.time,
            initial_energy: Some(self.header.initial_energy),
            snapshots: vtk::existing_snapshots(self.dir, &self.header.snapshots),
            resumed_from: Some(self.path.to_path_buf()),
        };
        drive(
            c,
            self.dir,
            start,
            integrator,
            solver,
            self.git_commit,
            self.progress,
        )
    }
}

/// The force solver the configuration asks for. Called before the run directory is touched:
/// a device that cannot be opened loses nothing. On several ranks, agreed: a device that one
/// rank cannot open stops every rank.
pub fn make_solver<R: Real>(c: &GravityConfig) -> Result<Box<dyn ForceSolver<R>>, RunError> {
    agreed(open_solver(c))
}

fn open_solver<R: Real>(c: &GravityConfig) -> Result<Box<dyn ForceSolver<R>>, RunError> {
    let softening = Softening::new(c.solver.softening)?;
    let world = comm::world();
    if c.run.backend == "gpu" {
        let spec: DeviceSpec =
            c.run
                .device
                .parse()
                .map_err(|e: mote_core::BackendError| GpuError::NoDevice {
                    spec: c.run.device.clone(),
                    reason: e.to_string(),
                })?;
        // On several ranks the ranks of one machine take its devices in turn.
        let spec = if world.size() > 1 {
            mote_gpu::rank_device(spec, world.local_rank())?
        } else {
            spec
        };
        let gpu = Gpu::open(spec)?;
        if c.solver.kind == SolverKind::Tree {
            return Ok(Box::new(GpuTreeSolver::<R>::new(
                gpu,
                softening,
                c.solver.tree_settings()?,
            )?));
        }
        return Ok(Box::new(GpuDirectSolver::new(
            gpu,
            softening,
            R::PRECISION,
        )?));
    }
    let kernel: KernelChoice = c.solver.kernel.parse()?;
    if c.solver.kind == SolverKind::Tree {
        return Ok(Box::new(TreeSolver::<R>::new(
            softening,
            c.solver.tree_settings()?,
            kernel,
            CpuBackend::threads(c.run.threads),
        )?));
    }
    Ok(Box::new(DirectSolver::new(
        softening,
        kernel,
        CpuBackend::threads(c.run.threads),
    )?))
}

/// The diagnostics of a run's state: of its particles on one process; on ranks that own their
/// particles (`slots` places them), the potential energy from every rank together and the
/// other sums over each rank's own particles, exact and reduced (`Diagnostics::owned`): the
/// one-process numbers, bit for bit, on every rank. Collective.
fn measure<R: Real>(
    sim: &mut Simulation<R>,
    slots: Option<&Slots>,
    backend: CpuBackend,
) -> Diagnostics {
    if slots.is_none() {
        return sim.diagnostics(backend);
    }
    let potential = sim.potential();
    Diagnostics::owned(comm::world().as_ref(), &sim.particles, potential)
}

/// [`check_finite`] of a run's state: on ranks that own their particles (`slots` places them),
/// the one-process finding (the first non-finite position in the one-process order, else the
/// first velocity), found by every rank among its own and agreed. Collective.
fn check_state<R: Real>(
    sim: &Simulation<R>,
    slots: Option<&Slots>,
    step: u64,
    time: f64,
    csv: &Path,
) -> Result<(), RunError> {
    let Some(slots) = slots else {
        return check_finite(&sim.particles, step, time, csv);
    };
    let world = comm::world();
    let p = &sim.particles;
    let own: Vec<usize> = p.ids().iter().map(|&id| slots.slot(id)).collect();
    for (name, span) in [("position", p.positions()), ("velocity", p.velocities())] {
        let (x, y, z) = span.components();
        let bad = (0..p.len())
            .filter(|&i| !(x[i].is_finite() && y[i].is_finite() && z[i].is_finite()))
            .min_by_key(|&i| own[i]);
        // The lowest slot over the ranks, then the rank holding it tells the others.
        let mut lowest = [bad.map_or(0, |i| !(own[i] as u64))];
        world.max_u64(&mut lowest);
        if lowest[0] == 0 {
            continue;
        }
        let slot = !lowest[0] as usize;
        let mine = bad.filter(|&i| own[i] == slot);
        let root = comm::max_of(world.as_ref(), mine.map_or(0, |_| world.rank() as u64 + 1)) - 1;
        let text = mine.map_or_else(String::new, |i| {
            format!("{name} {:?}|{}", span.get(i), p.ids()[i])
        });
        let got = comm::broadcast_bytes(world.as_ref(), root as usize, text.as_bytes());
        let got = String::from_utf8_lossy(&got).into_owned();
        let (what, id) = got.rsplit_once('|').expect("the finder's message");
        return Err(RunError::NonFinite {
            step,
            time,
            id: id.parse().expect("an id"),
            index: slot,
            what: what.to_string(),
            csv: csv.display().to_string(),
        });
    }
    Ok(())
}

/// Runs from `start` to the end time, writing everything into `dir` (which exists).
fn drive<R: Real>(
    c: &GravityConfig,
    dir: &Path,
    start: Start<R>,
    integrator: Box<dyn Integrator<R>>,
    solver: Box<dyn ForceSolver<R>>,
    git_commit: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunReport, RunError> {
    let started = SystemTime::now();
    let clock = Instant::now();
    let backend = CpuBackend::threads(c.run.threads);
    let on_gpu = c.run.backend == "gpu";
    let solver_name = solver.name();
    // Rank 0 writes the run directory; the other ranks compute with it and agree on every
    // write's outcome (`on_root`).
    let world = comm::world();
    on_root(world.as_ref(), || {
        Ok(write_atomic(
            &dir.join("config.toml"),
            c.to_toml().as_bytes(),
        )?)
    })?;
    let fresh = start.resumed_from.is_none();
    // On several ranks each keeps the particles of its range of the Morton curve (sent there
    // from each rank's rows), and the forces come from every rank's positions gathered in the
    // one-process order (decision 0028); `n` is every rank's particles together.
    let n = comm::sum_of(world.as_ref(), start.particles.len() as u64) as usize;
    let slots = std::sync::Arc::new(Slots::of_rows(
        world.as_ref(),
        start.particles.ids(),
        start.first,
    ));
    let owned = world.size() > 1;
    let (mut ownership, particles, solver) = if owned {
        let (o, local) = Ownership::start(world.clone(), start.particles, &slots, c.run.rebalance);
        let solver: Box<dyn ForceSolver<R>> =
            Box::new(OwnedSolver::new(solver, world.clone(), slots.clone()).with_cut(o.domains()));
        (Some(o), local, solver)
    } else {
        (None, start.particles, solver)
    };
    let mut sim = if fresh {
        let mut sim = Simulation::new(particles, solver, integrator);
        // Initial conditions from a file start at the file's time.
        sim.set_time(start.time);
        sim
    } else {
        Simulation::restore(particles, solver, integrator, start.time, start.step)
    };
    // Each rank is priced for what it holds: every particle, or on owned particles with a
    // solver that needs no gathered sources (the tree) twice its even share (the cut by cost
    // and the locally essential tree's imports: 30 to 50 % of a rank's own particles on the
    // Plummer sphere at 2 ranks, docs/performance.md).
    let priced = if owned && !sim.solver().holds_every_particle() {
        n.min(2 * n.div_ceil(world.size()))
    } else {
        n
    };
    let limit = {
        let parts = sim.budgeted_parts();
        price_parts::<R>(c, priced, &parts)?
    };
    // Each rank reserves its own memory (the limit is per rank): agreed, since one rank's
    // machine may refuse what the others' grant.
    let reservation = agreed(match explicit_memory_limit(c.run.memory_limit.as_deref()) {
        _ if comm::fault("memory", world.rank()) => Err(RunError::Capacity(CapacityError {
            what: "the run's reservation (a fault injected by a test)".into(),
            requested: 1,
            available: 0,
            unit: mote_core::CapacityUnit::Bytes,
        })),
        Some(limit) => reserve(&mut sim.budgeted_parts(), limit, ReserveOptions::default())
            .map(Some)
            .map_err(RunError::from),
        None => Ok(None),
    })?;
    let mut provenance = Provenance {
        mote_version: env!("CARGO_PKG_VERSION"),
        git_commit,
        physics: "gravity",
        backend: if on_gpu && world.size() > 1 {
            format!(
                "gpu {} on rank 0 (each rank takes its machine's devices in turn from there)",
                c.run.device
            )
        } else if on_gpu {
            format!("gpu {}", c.run.device)
        } else {
            "cpu".to_string()
        },
        threads: backend.thread_count(),
        ranks: world.size(),
        bytes_received: None,
        rebalances: None,
        migrated: None,
        kernel: solver_name.clone(),
        precision: R::PRECISION.to_string(),
        seed: c.initial_conditions.seed,
        particles: n,
        memory_limit_bytes: limit,
        reserved_bytes: reservation.map(|r| r.bytes),
        machine: MachineInfo::detect(),
        started: humantime::format_rfc3339_seconds(started).to_string(),
        resumed_from: start.resumed_from.as_ref().map(|p| p.display().to_string()),
        finished: None,
        wall_seconds: None,
        steps: None,
        final_relative_energy_error: None,
        units: c.units(),
    };
    let provenance_path = dir.join("provenance.json");
    let write_provenance =
        |p: &Provenance<'_>| on_root(world.as_ref(), || Ok(write_json(&provenance_path, p)?));
    write_provenance(&provenance)?;

    let csv_path = dir.join("diagnostics.csv");
    let mut csv = on_root(world.as_ref(), || {
        Ok(Some(if fresh {
            CsvWriter::create(&csv_path, &DIAGNOSTICS_HEADER)?
        } else {
            CsvWriter::append(&csv_path, &DIAGNOSTICS_HEADER, sim.steps())?
        }))
    })?;
    // The engine runs with G = 1 in the time sqrt(G) t (crate::units): its clock, steps and
    // checkpoints are in engine time; what is written is converted back.
    let units = c.units();
    let s = units.time_factor();
    let sink = SnapshotSink {
        dir,
        format: c.output.format,
        compression: c.output.compression,
        config: c.to_toml(),
        commit: git_commit,
    };
    let end = c.run.end_time * s;
    let dt = c.run.dt * s;
    let mut outputs = Outputs::new(
        end,
        c.output.snapshots,
        c.output.checkpoint_interval.map(|t| t * s),
        parse_wall_interval(&c.output.checkpoint_wall_interval).expect("validated with the config"),
        c.output.diagnostics_every,
        sim.time(),
    );
    let estimate = |t: f64| ((end - t) / dt).ceil().max(0.0) as u64;
    let total_steps = sim.steps() + estimate(sim.time());
    let mut snapshots = start.snapshots;
    // This rank's rows of the files on ranks that own their particles (`None` where every rank
    // holds the whole state and rank 0 writes it alone).
    let rows = |sim: &Simulation<R>| -> Option<ParticleData<R>> {
        owned.then(|| rows_in_slot_order(world.as_ref(), &sim.particles, &slots))
    };
    let placed = owned.then_some(slots.as_ref());
    let first = measure(&mut sim, placed, backend);
    let e0 = start.initial_energy.unwrap_or(first.total);
    let g = units.g;
    let write_row =
        |csv: &mut Option<CsvWriter>, step: u64, time: f64, d: &Diagnostics, wall: f64| {
            let Some(csv) = csv else {
                return Ok(());
            };
            csv.row(&[
                step as f64,
                time / s,
                d.kinetic * g,
                d.potential * g,
                d.total * g,
                d.relative_energy_error(e0),
                d.momentum[0] * s,
                d.momentum[1] * s,
                d.momentum[2] * s,
                d.angular_momentum[0] * s,
                d.angular_momentum[1] * s,
                d.angular_momentum[2] * s,
                d.virial_ratio,
                d.mass,
                wall,
            ])
        };
    if fresh {
        on_root(world.as_ref(), || {
            Ok(write_row(&mut csv, 0, sim.time(), &first, 0.0)?)
        })?;
        let part = rows(&sim);
        by_row_holders(owned, world.as_ref(), |ranks| {
            let p = part.as_ref().unwrap_or(&sim.particles);
            write_snapshot(&sink, p, sim.time() / s, &units, &mut snapshots, ranks)
        })?;
    }
    let checkpoint_path = dir.join("checkpoint.mote");
    let save = |sim: &Simulation<R>,
                p: &ParticleData<R>,
                snapshots: &[(f64, String)],
                ranks: &dyn Comm| {
        let header = checkpoint::Header {
            mote_version: env!("CARGO_PKG_VERSION").to_string(),
            step: sim.steps(),
            time: sim.time(),
            precision: R::PRECISION,
            config: c.to_toml(),
            initial_energy: e0,
            snapshots: snapshots.to_vec(),
        };
        checkpoint::write(
            &checkpoint_path,
            &header,
            p,
            &RootStream::new(ranks, p.len()),
        )
    };
    let mut time = sim.time();
    let mut last = first;
    while time < end {
        step_towards(&mut sim, dt, end, || true);
        time = sim.time();
        let k = sim.steps();
        if let Some(o) = &mut ownership {
            // Particles that left this rank's range go to their owner; a new cut first if the
            // ranks' measured work drifted apart (every rank decides alike: a reduction).
            let costs = sim.solver().costs().to_vec();
            o.settle(&mut sim.particles, &costs)?;
            sim.solver().set_cut(o.domains());
        }
        let mut due = outputs.after_step(k, time);
        // A signal or the wall clock may reach one rank and not another.
        due.agree(world.as_ref());
        // The files hold the state in the one-process order: each rank's rows of it.
        let part = if due.snapshot || due.checkpoint {
            rows(&sim)
        } else {
            None
        };
        if due.row {
            // The same verdict on every rank (on owned particles, agreed by reductions).
            check_state(
                &sim,
                placed,
                k,
                time / s,
                &crate::files::partial_path(&csv_path),
            )
            .map_err(|e| owned_by(e, sim.solver()))?;
            last = measure(&mut sim, placed, backend);
            on_root(world.as_ref(), || {
                Ok(write_row(
                    &mut csv,
                    k,
                    time,
                    &last,
                    clock.elapsed().as_secs_f64(),
                )?)
            })?;
            progress(Progress {
                step: k,
                total_steps,
                time: time / s,
                status: format!("|dE/E| = {:.2e}", last.relative_energy_error(e0)),
            });
        }
        if due.snapshot {
            by_row_holders(owned, world.as_ref(), |ranks| {
                let p = part.as_ref().unwrap_or(&sim.particles);
                write_snapshot(&sink, p, time / s, &units, &mut snapshots, ranks)
            })?;
        }
        if due.checkpoint {
            by_row_holders(owned, world.as_ref(), |ranks| {
                let p = part.as_ref().unwrap_or(&sim.particles);
                Ok(save(&sim, p, &snapshots, ranks)?)
            })?;
            outputs.saved();
        }
        if let Some(signal) = due.stop {
            provenance.steps = Some(k);
            write_provenance(&provenance)?;
            return Err(RunError::Interrupted {
                signal,
                step: k,
                time: time / s,
                checkpoint: checkpoint_path.display().to_string(),
            });
        }
    }
    on_root(world.as_ref(), || {
        Ok(csv.take().map(CsvWriter::finish).transpose()?)
    })?;
    let wall = clock.elapsed().as_secs_f64();
    provenance.finished = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    provenance.wall_seconds = Some(wall);
    provenance.steps = Some(sim.steps());
    provenance.bytes_received = (world.size() > 1).then(|| world.bytes_received());
    if let Some(o) = &ownership {
        provenance.rebalances = Some(o.rebalances());
        provenance.migrated = Some(comm::sum_of(world.as_ref(), o.migrated()));
    }
    provenance.final_relative_energy_error = Some(last.relative_energy_error(e0));
    write_provenance(&provenance)?;
    Ok(RunReport {
        dir: dir.to_path_buf(),
        steps: sim.steps(),
        time: time / s,
        energy_error: last.relative_energy_error(e0),
        virial_ratio: last.virial_ratio,
        wall_seconds: wall,
        kernel: solver_name.clone(),
        particles: n,
    })
}
