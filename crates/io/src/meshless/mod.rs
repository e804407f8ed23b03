//! Running a configured meshless simulation: build the problem, price and reserve its memory,
//! step it to the end time at the configured CFL number, and write the run directory.
//!
//! The run directory holds `config.toml` (every resolved setting), `provenance.json` (what
//! ran, where, when, how it ended), `diagnostics.csv` (per row: step, time, step size, the
//! total of every conserved variable over the interior particles, the range of the first
//! variable, its L1 and relative L2 errors against the exact solution where the problem has one
//! and the other variables' L1 errors,
//! MOOD's order reductions and the positivity floors that acted since the previous row; a
//! moving cloud's particle count and what adaptivity did; with boundary particles, on the CPU,
//! `outflow_NAME`: what every variable lost through the faces so far, the time integral of the
//! central flux at the faces, so that `total + outflow` is what stays constant) and
//! `snapshots/*.vtu` with `snapshots.pvd` for ParaView (every particle, boundary layers included,
//! with its tag, order, volume, conserved and primitive variables). Files are written atomically;
//! the diagnostics grow in `diagnostics.csv.partial` until the run ends. Snapshot times and the
//! end are hit exactly. `checkpoint.mote` (the state, the clock and the run's totals; see
//! [`crate::checkpoint`]) is written at the end and every `output.checkpoint_interval`;
//! [`resume_meshless`] continues from it, bit for bit as if never interrupted.

pub mod config;
pub mod expression;
mod file;
mod session;

pub use session::{MeshlessSession, RealSlice, RealSliceMut, SessionError};

use expression::{Parsed, Value};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use mote_cloud::adapt::Adaptivity;
use mote_cloud::boundary::Boundaries;
use mote_cloud::cloud::INTERIOR;
use mote_cloud::equations::{Burgers, Equation, Euler, KineticTransport, LinearAdvection};
use mote_cloud::exact;
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::{MoodSettings, MoodStats};
use mote_cloud::motion::{Motion, StateVelocity};
use mote_cloud::problems::{self, Problem, ProblemOptions};
use mote_cloud::scheme::{Limiter, Muscl, WENO_CENTRAL_WEIGHT};
use mote_cloud::time::{ImexTableau, Tableau};
use mote_cloud::{Cloud, CloudError, Weight};
use mote_core::comm::{self, Comm, RootStream, Share, SingleProcess};
use mote_core::memory::{self, ReserveOptions};
use mote_core::{Backend, CpuBackend, DeviceSpec, MachineInfo, Precision, Real};
use mote_gpu::meshless::{OnDevice, Scheme, Simulation};
use mote_gpu::{GpuError, GpuFloat};
use serde::Serialize;

pub use config::{
    InitialSection, MeshlessConfig, MeshlessOutputSection, MeshlessRunSection, ProblemKind,
    ProblemSection, SchemeSection, StateSection, Values,
};

use crate::checkpoint::{self, AnyHeader, MeshlessHeader};
use crate::config::{Source, parse_memory_limit};
use crate::files::{CsvWriter, FileError, create_run_dir, partial_path, write_atomic, write_json};
use crate::runner::SnapshotSink;
use crate::runner::{
    Progress, ResumeError, RunError, agreed, by_row_holders, check_resume, effective_memory_limit,
    explicit_memory_limit, on_root, snapshot_number,
};
use crate::schedule::{Outputs, parse_wall_interval};
use crate::snapshot::{self, Column, Family, Snapshot, Values as Stored};
use crate::vtk::{self, Field};

/// What a finished meshless run reports.
#[derive(Clone, Debug, Serialize)]
pub struct MeshlessReport {
    /// The run directory.
    pub dir: PathBuf,
    /// The problem's name.
    pub problem: String,
    /// Particles, boundary layers included.
    pub particles: usize,
    /// Mean neighbours per particle.
    pub neighbours_mean: f64,
    /// Steps taken.
    pub steps: u64,
    /// Final simulated time.
    pub time: f64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Errors of the first variable against the exact solution at the end, where one exists.
    pub errors: Option<exact::Errors>,
    /// Errors of every conserved variable (by name) at the end, where an exact solution exists.
    pub variable_errors: Vec<(String, exact::Errors)>,
    /// Particles inside the domain (boundary layers left out).
    pub interior_particles: usize,
    /// The nominal particle spacing (the largest over the axes).
    pub spacing: f64,
    /// MOOD's statistics over the run.
    pub mood: MoodStats,
    /// Positivity floor events over the run (`None` on the device, which does not count them).
    pub floor_events: Option<u64>,
}

/// The scheme a configuration describes, for equation `eq`. On failure, the configuration key
/// to blame and why.
pub fn build_scheme<R: Real, const D: usize, E: Equation<R, D>>(
    eq: E,
    s: &SchemeSection,
) -> Result<Muscl<R, D, E>, (&'static str, CloudError)> {
    let scheme = Muscl::new(eq, s.order, s.formulation, Weight::default())
        .map_err(|e| ("scheme.order", e))?;
    let flux = FluxKind::by_name(&s.flux).map_err(|e| ("scheme.flux", e))?;
    let scheme = scheme.with_flux(flux).map_err(|e| ("scheme.flux", e))?;
    let limiter =
        Limiter::by_name(&s.limiter, &s.limiter_mode).map_err(|e| ("scheme.limiter", e))?;
    let scheme = scheme
        .with_limiter(limiter)
        .map_err(|e| ("scheme.limiter", e))?;
    if s.weno {
        // The central fit's weight of the WENO-type combination: the value validated in the
        // tests (docs/validation.md).
        scheme
            .with_weno(WENO_CENTRAL_WEIGHT)
            .map_err(|e| ("scheme.weno", e))
    } else {
        Ok(scheme)
    }
}

/// Builds the configured scheme for the problem's equation (no cloud needed), so that a
/// combination the equation refuses is a configuration error.
pub(crate) fn check_scheme(c: &MeshlessConfig) -> Result<(), (&'static str, CloudError)> {
    let s = &c.scheme;
    let gamma = c.problem.gamma.unwrap_or(1.4);
    let euler = |e: Result<(), CloudError>| e.map_err(|e| ("problem.gamma", e));
    if c.relaxation.is_some() {
        // The scheme transports the kinetic variables: its flux and limiter must suit the
        // kinetic transport (validated: 1-D or 2-D, periodic).
        let m = if c.problem.is_gas() {
            c.dimension() + 2
        } else {
            1
        };
        return match c.dimension() {
            1 => build_scheme::<f64, 1, _>(KineticTransport::<1>::new(m, 1.0), s).map(drop),
            _ => build_scheme::<f64, 2, _>(KineticTransport::<2>::new(m, 1.0), s).map(drop),
        };
    }
    match (c.problem.kind, c.dimension()) {
        (ProblemKind::AdvectionWave, 1) => {
            build_scheme::<f64, 1, _>(LinearAdvection::scalar([1.0], 1), s).map(drop)
        }
        (ProblemKind::AdvectionWave, 2) => {
            build_scheme::<f64, 2, _>(LinearAdvection::scalar([1.0; 2], 1), s).map(drop)
        }
        (ProblemKind::AdvectionWave, _) => {
            build_scheme::<f64, 3, _>(LinearAdvection::scalar([1.0; 3], 1), s).map(drop)
        }
        (ProblemKind::BurgersTopHat, _) => build_scheme::<f64, 1, _>(Burgers::<1>, s).map(drop),
        (ProblemKind::Custom | ProblemKind::File, d) if !c.problem.is_gas() => {
            if c.problem.equation.as_deref() == Some("burgers") {
                build_scheme::<f64, 1, _>(Burgers::<1>, s).map(drop)
            } else {
                match d {
                    1 => build_scheme::<f64, 1, _>(LinearAdvection::scalar([1.0], 1), s).map(drop),
                    2 => {
                        build_scheme::<f64, 2, _>(LinearAdvection::scalar([1.0; 2], 1), s).map(drop)
                    }
                    _ => {
                        build_scheme::<f64, 3, _>(LinearAdvection::scalar([1.0; 3], 1), s).map(drop)
                    }
                }
            }
        }
        (ProblemKind::Riemann, _) if !c.problem.is_gas() => {
            if c.problem.equation.as_deref() == Some("burgers") {
                build_scheme::<f64, 1, _>(Burgers::<1>, s).map(drop)
            } else {
                build_scheme::<f64, 1, _>(LinearAdvection::scalar([1.0], 1), s).map(drop)
            }
        }
        (_, 1) => {
            let eq = Euler::<1>::new(gamma);
            euler(eq.as_ref().map(drop).map_err(Clone::clone))?;
            build_scheme::<f64, 1, _>(eq.expect("checked"), s).map(drop)
        }
        (_, 3) => {
            let eq = Euler::<3>::new(gamma);
            euler(eq.as_ref().map(drop).map_err(Clone::clone))?;
            build_scheme::<f64, 3, _>(eq.expect("checked"), s).map(drop)
        }
        _ => {
            let eq = Euler::<2>::new(gamma);
            euler(eq.as_ref().map(drop).map_err(Clone::clone))?;
            build_scheme::<f64, 2, _>(eq.expect("checked"), s).map(drop)
        }
    }
}

/// Runs `config` into `dir` (created; an existing non-empty one only with `force`). The run
/// directory is created only once the problem is built and its memory priced, so a mistake
/// leaves nothing behind. `progress` is called at every diagnostics row.
pub fn run_meshless(
    config: &MeshlessConfig,
    dir: &Path,
    force: bool,
    git_commit: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<MeshlessReport, RunError> {
    let config = config.clone().with_defaults();
    let run = MeshlessRun {
        interior: None,
        config: &config,
        dir,
        force,
        git_commit,
        progress,
        resume: None,
        session: false,
    };
    run.launch().map(Outcome::into_report)
}

/// The simulation `config` describes, built and priced as [`run_meshless`] builds and prices
/// it, at time 0 and without a run directory, for a caller that steps it
/// ([`MeshlessSession::step`] takes the run's steps). Runs on the cpu backend only: a device
/// run's state lives on the device (use [`run_meshless`]).
pub fn meshless_session(config: &MeshlessConfig) -> Result<Box<dyn MeshlessSession>, RunError> {
    let config = config.clone().with_defaults();
    if config.run.backend != "cpu" {
        return Err(RunError::Refused(format!(
            "run.backend = \"{}\": a simulation stepped from Python runs on the cpu backend \
             (a configured run, mote.run, runs on a device)",
            config.run.backend
        )));
    }
    let run = MeshlessRun {
        interior: None,
        config: &config,
        dir: Path::new(""),
        force: false,
        git_commit: "",
        progress: &mut |_| {},
        resume: None,
        session: true,
    };
    match run.launch()? {
        Outcome::Session(s) => Ok(s),
        Outcome::Report(_) => unreachable!("a session run returns its session"),
    }
}

/// What [`MeshlessRun::launch`] ends with: a run's report, or the built simulation of a
/// session. Once per run: the size of the report does not matter.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    Report(MeshlessReport),
    Session(Box<dyn MeshlessSession>),
}

impl Outcome {
    /// The report of a run (a run that is not a session always ends with one).
    fn into_report(self) -> MeshlessReport {
        match self {
            Outcome::Report(r) => r,
            Outcome::Session(_) => unreachable!("a run without `session` reports"),
        }
    }
}

/// Continues the meshless run whose latest checkpoint is `checkpoint_path` (in its run
/// directory), with the configuration it carries and `overrides` on top (typically a later
/// `run.end_time`). The cloud is rebuilt from the configuration and must have the checkpoint's
/// particles (same ids, in the same order); the state, the clock, the snapshot list and MOOD's
/// totals continue. The continuation is bitwise identical to a run that was never interrupted,
/// given the same output schedule after the checkpoint.
pub fn resume_meshless(
    checkpoint_path: &Path,
    overrides: &[String],
    git_commit: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<MeshlessReport, ResumeError> {
    // Every rank opens the checkpoint (rank 0 checks its checksum, reading it through once) and
    // later reads the rows it needs: agreed, since one rank may fail where the others read.
    let first = mote_core::comm::world().rank() == 0;
    let opened =
        agreed(checkpoint::open(checkpoint_path, first).map_err(RunError::File)).map_err(|e| {
            match e {
                RunError::File(f) => ResumeError::File(f),
                other => ResumeError::Run(other),
            }
        })?;
    let AnyHeader::Meshless(header) = opened.header().clone() else {
        return Err(FileError {
            path: checkpoint_path.to_path_buf(),
            message: "a gravity run's checkpoint, not a meshless run's".into(),
        }
        .into());
    };
    let config = MeshlessConfig::parse(
        &Source {
            file: Some(checkpoint_path),
            text: &header.config,
        },
        overrides,
    )?;
    let dir = check_resume(
        checkpoint_path,
        (config.run.precision, header.precision),
        config.run.end_time.expect("filled by with_defaults"),
        header.time,
    )?;
    let run = MeshlessRun {
        interior: None,
        config: &config,
        dir: &dir,
        force: true,
        git_commit,
        progress,
        resume: Some(Resume {
            header: &header,
            opened: &opened,
            path: checkpoint_path,
        }),
        session: false,
    };
    Ok(run.launch()?.into_report())
}

/// Where a resumed run picks up.
#[derive(Clone, Copy)]
struct Resume<'a> {
    header: &'a MeshlessHeader,
    /// The checkpoint, whose rows each rank reads.
    opened: &'a checkpoint::Opened,
    path: &'a Path,
}

struct MeshlessRun<'a> {
    config: &'a MeshlessConfig,
    dir: &'a Path,
    force: bool,
    git_commit: &'a str,
    progress: &'a mut dyn FnMut(Progress),
    /// The checkpoint a resumed run continues from.
    resume: Option<Resume<'a>>,
    /// The interior particles of a `file` problem (priced as read; the others are priced from
    /// their resolution).
    interior: Option<usize>,
    /// Build the simulation and return it ([`Outcome::Session`]) instead of running it.
    session: bool,
}

impl MeshlessRun<'_> {
    /// Runs on the configured backend, in the configured precision.
    fn launch(self) -> Result<Outcome, RunError> {
        let config = self.config;
        let backend = if config.run.backend == "gpu" {
            let spec: DeviceSpec = config
                .run
                .device
                .parse()
                .expect("validated with the config");
            Backend::Device(spec)
        } else {
            Backend::Cpu(CpuBackend::threads(config.run.threads))
        };
        if config.relaxation.is_some() {
            return self.relaxed(backend);
        }
        // 3-D Euler is instantiated in f64 only (validated): one engine, not two (build time).
        if config.problem.kind == ProblemKind::Riemann
            && config.problem.is_gas()
            && config.dimension() == 3
        {
            return self.gas_riemann::<f64, 3>(backend);
        }
        match config.run.precision {
            Precision::F32 => self.run::<f32>(backend),
            Precision::F64 => self.run::<f64>(backend),
        }
    }

    /// The configured problem in precision `R` on `backend`.
    fn run<R: GpuFloat>(self, backend: Backend) -> Result<Outcome, RunError> {
        let p = &self.config.problem;
        let gamma = p.gamma.unwrap_or(1.4);
        match (p.kind, self.config.dimension()) {
            (ProblemKind::AdvectionWave, 1) => {
                self.drive(problems::advection_wave::<R, 1>, backend)
            }
            (ProblemKind::AdvectionWave, 2) => {
                self.drive(problems::advection_wave::<R, 2>, backend)
            }
            (ProblemKind::AdvectionWave, _) => {
                self.drive(problems::advection_wave::<R, 3>, backend)
            }
            (ProblemKind::BurgersTopHat, _) => self.drive(problems::burgers_top_hat::<R>, backend),
            (ProblemKind::Sod, _) => self.drive(|o| problems::sod::<R>(o, gamma), backend),
            (ProblemKind::IsentropicVortex, _) => {
                self.drive(|o| problems::isentropic_vortex::<R>(o, gamma), backend)
            }
            (ProblemKind::Quadrant, _) => {
                self.drive(|o| problems::quadrant::<R>(o, gamma), backend)
            }
            (ProblemKind::DoubleMach, _) => {
                self.drive(|o| problems::double_mach::<R>(o, gamma), backend)
            }
            (ProblemKind::Riemann, d) => self.riemann::<R>(d, backend),
            (ProblemKind::GreshoVortex, _) => {
                self.drive(|o| problems::gresho_vortex::<R>(o, gamma), backend)
            }
            (ProblemKind::KelvinHelmholtz, _) => {
                self.drive(|o| problems::kelvin_helmholtz::<R>(o, gamma), backend)
            }
            (ProblemKind::Noh, _) => self.drive(|o| problems::noh::<R>(o, gamma), backend),
            (ProblemKind::Sedov, _) => self.drive(|o| problems::sedov::<R>(o, gamma), backend),
            (ProblemKind::Custom, d) => self.custom::<R>(d, backend),
            (ProblemKind::File, d) => self.file::<R>(d, backend),
        }
    }

    /// The configured problem through its kinetic relaxation system (validated: a periodic
    /// problem in 1-D or 2-D, f64, the cpu backend). Only these engines are instantiated with
    /// the kinetic transport (build time: each is a MUSCL scheme compiled for every variable
    /// count).
    fn relaxed(self, backend: Backend) -> Result<Outcome, RunError> {
        let p = &self.config.problem;
        let gamma = p.gamma.unwrap_or(1.4);
        match (p.kind, self.config.dimension()) {
            (ProblemKind::AdvectionWave, 1) => self.drive_with(
                &problems::advection_wave::<f64, 1>,
                backend,
                relaxed_simulation,
            ),
            (ProblemKind::AdvectionWave, 2) => self.drive_with(
                &problems::advection_wave::<f64, 2>,
                backend,
                relaxed_simulation,
            ),
            (ProblemKind::BurgersTopHat, _) => self.drive_with(
                &problems::burgers_top_hat::<f64>,
                backend,
                relaxed_simulation,
            ),
            (ProblemKind::IsentropicVortex, _) => self.drive_with(
                &|o| problems::isentropic_vortex::<f64>(o, gamma),
                backend,
                relaxed_simulation,
            ),
            (ProblemKind::GreshoVortex, _) => self.drive_with(
                &|o| problems::gresho_vortex::<f64>(o, gamma),
                backend,
                relaxed_simulation,
            ),
            (ProblemKind::KelvinHelmholtz, _) => self.drive_with(
                &|o| problems::kelvin_helmholtz::<f64>(o, gamma),
                backend,
                relaxed_simulation,
            ),
            (ProblemKind::Sedov, _) => self.drive_with(
                &|o| problems::sedov::<f64>(o, gamma),
                backend,
                relaxed_simulation,
            ),
            (kind, dim) => Err(RunError::Refused(format!(
                "[relaxation] is not built for problem `{}` in {dim}-D",
                kind.name()
            ))),
        }
    }

    /// The configured custom problem (validated: Euler in 1-D and 2-D, Burgers in 1-D,
    /// advection in 1-3-D; every expression parses).
    fn custom<R: GpuFloat>(self, dim: usize, backend: Backend) -> Result<Outcome, RunError> {
        let p = &self.config.problem;
        let initial = p.initial.as_ref().expect("validated");
        let periodic = p.periodic.unwrap_or(true);
        let equation = p.equation.as_deref().unwrap_or("euler");
        let u = || {
            initial
                .u
                .as_ref()
                .map(|v| field(v, dim))
                .expect("validated")
        };
        match (equation, dim) {
            ("euler", 1) => self.custom_gas::<R, 1>(backend),
            ("euler", _) => self.custom_gas::<R, 2>(backend),
            ("burgers", _) => {
                let u = u();
                self.drive(
                    |o| {
                        let u0 = |x: [f64; 1]| finite("problem.initial.u", &u, &x);
                        problems::custom_scalar::<R, 1, _>(o, Burgers::<1>, periodic, u0, None)
                    },
                    backend,
                )
            }
            (_, 1) => self.custom_advection::<R, 1>(u(), backend),
            (_, 2) => self.custom_advection::<R, 2>(u(), backend),
            _ => self.custom_advection::<R, 3>(u(), backend),
        }
    }

    /// The configured `file` problem (validated like a custom one: Euler in 1-D and 2-D,
    /// Burgers in 1-D, advection in 1-3-D): the particles and state of its HDF5 file, read
    /// and checked before anything is written.
    fn file<R: GpuFloat>(mut self, dim: usize, backend: Backend) -> Result<Outcome, RunError> {
        let config = self.config;
        let p = &config.problem;
        let periodic = p.periodic.unwrap_or(true);
        let path = Path::new(p.path.as_deref().expect("validated"));
        // On several CPU ranks each rank reads its rows and holds its part of the cloud
        // (decision 0035); else every rank reads the whole file. Failures are agreed.
        let world = mote_core::comm::world();
        let comm: Arc<dyn Comm> = if by_parts(config) {
            world
        } else {
            Arc::new(SingleProcess)
        };
        let particles =
            agreed(file::read(path, dim, periodic, comm).map_err(RunError::InitialConditions))?;
        self.interior = Some(particles.total());
        match (p.equation.as_deref().unwrap_or("euler"), dim) {
            ("euler", 1) => self.file_gas::<R, 1>(&particles, backend),
            ("euler", _) => self.file_gas::<R, 2>(&particles, backend),
            ("burgers", _) => {
                let u = vec![
                    particles
                        .column("u")
                        .map_err(RunError::InitialConditions)?
                        .to_vec(),
                ];
                let cloud = particles
                    .cloud::<R, 1>(periodic, &u)
                    .map_err(RunError::InitialConditions)?;
                let cloud = file_cloud(&particles, &u, cloud, by_parts(config), periodic);
                self.drive(
                    |o| {
                        Ok(problems::scalar_from_cloud(
                            cloud(o)?,
                            Burgers::<1>,
                            periodic,
                        ))
                    },
                    backend,
                )
            }
            (_, 1) => self.file_advection::<R, 1>(&particles, backend),
            (_, 2) => self.file_advection::<R, 2>(&particles, backend),
            _ => self.file_advection::<R, 3>(&particles, backend),
        }
    }

    /// A gas from a file in `D` dimensions: the conserved variables where the file has them
    /// (a mote snapshot: bit for bit), else from `Density`, `Velocities` and `Pressure` through
    /// the equation's own conversion.
    fn file_gas<R: GpuFloat, const D: usize>(
        self,
        f: &file::FileParticles,
        backend: Backend,
    ) -> Result<Outcome, RunError>
    where
        Euler<D>: Equation<R, D> + OnDevice<D>,
    {
        let p = &self.config.problem;
        let gamma = p.gamma.unwrap_or(1.4);
        let periodic = p.periodic.unwrap_or(true);
        let walls = p.faces.as_deref() == Some("slip_wall");
        let eq = Euler::<D>::new(gamma)?;
        let bad = RunError::InitialConditions;
        let names = problems::gas_variables::<D>();
        let conserved = names[1..].iter().all(|n| f.has(n));
        let mut state: Vec<Vec<f64>> = Vec::with_capacity(D + 2);
        if conserved {
            state.push(f.positive("Density").map_err(bad)?.to_vec());
            for n in &names[1..] {
                state.push(f.column(n).map_err(bad)?.to_vec());
            }
        } else {
            let rho = f.positive("Density").map_err(bad)?;
            let pressure = f.positive("Pressure").map_err(bad)?;
            let velocity = (0..D)
                .map(|d| f.column(&format!("Velocities_{d}")))
                .collect::<Result<Vec<_>, _>>()
                .map_err(bad)?;
            state = vec![Vec::with_capacity(f.len()); D + 2];
            // One primitive and one conservative state, reused for every particle.
            let (mut w, mut u) = ([0.0; 5], [0.0; 5]);
            let (w, u) = (&mut w[..D + 2], &mut u[..D + 2]);
            for i in 0..f.len() {
                w[0] = rho[i];
                for d in 0..D {
                    w[1 + d] = velocity[d][i];
                }
                w[D + 1] = pressure[i];
                Equation::<f64, D>::to_conservative(&eq, w, u);
                for (column, &x) in state.iter_mut().zip(u.iter()) {
                    column.push(x);
                }
            }
        }
        let cloud = f.cloud::<R, D>(periodic, &state).map_err(bad)?;
        let cloud = file_cloud(f, &state, cloud, by_parts(self.config), periodic);
        self.drive(
            |o| problems::gas_from_cloud::<R, D>(cloud(o)?, gamma, periodic, walls),
            backend,
        )
    }

    /// An advected scalar `u` from a file in `D` dimensions.
    fn file_advection<R: GpuFloat, const D: usize>(
        self,
        f: &file::FileParticles,
        backend: Backend,
    ) -> Result<Outcome, RunError>
    where
        LinearAdvection<D>: Equation<R, D> + OnDevice<D>,
    {
        let p = &self.config.problem;
        let periodic = p.periodic.unwrap_or(true);
        let equation = LinearAdvection::scalar(advection_velocity::<D>(p), 1);
        let u = vec![f.column("u").map_err(RunError::InitialConditions)?.to_vec()];
        let cloud = f
            .cloud::<R, D>(periodic, &u)
            .map_err(RunError::InitialConditions)?;
        let cloud = file_cloud(f, &u, cloud, by_parts(self.config), periodic);
        self.drive(
            |o| {
                Ok(problems::scalar_from_cloud(
                    cloud(o)?,
                    equation.clone(),
                    periodic,
                ))
            },
            backend,
        )
    }

    /// A custom gas in `D` dimensions.
    fn custom_gas<R: GpuFloat, const D: usize>(self, backend: Backend) -> Result<Outcome, RunError>
    where
        Euler<D>: Equation<R, D> + OnDevice<D>,
    {
        let p = &self.config.problem;
        let initial = p.initial.as_ref().expect("validated");
        let gamma = p.gamma.unwrap_or(1.4);
        let periodic = p.periodic.unwrap_or(true);
        let walls = p.faces.as_deref() == Some("slip_wall");
        let density = field(initial.density.as_ref().expect("validated"), D);
        let pressure = field(initial.pressure.as_ref().expect("validated"), D);
        let velocity: Vec<Parsed> = match &initial.velocity {
            Some(v) => v.to_vec().iter().map(|c| field(c, D)).collect(),
            None => vec![field(&Value::Number(0.0), D); D],
        };
        let state = |x: [f64; D]| -> Result<(f64, [f64; D], f64), CloudError> {
            let rho = positive("problem.initial.density", &density, &x)?;
            let p = positive("problem.initial.pressure", &pressure, &x)?;
            let mut v = [0.0; D];
            for (c, f) in v.iter_mut().zip(&velocity) {
                *c = finite("problem.initial.velocity", f, &x)?;
            }
            Ok((rho, v, p))
        };
        self.drive(
            |o| problems::custom_gas::<R, D>(o, gamma, periodic, walls, state),
            backend,
        )
    }

    /// A custom advected profile `u` in `D` dimensions; exact on a periodic box (the profile
    /// carried along).
    fn custom_advection<R: GpuFloat, const D: usize>(
        self,
        u: Parsed,
        backend: Backend,
    ) -> Result<Outcome, RunError>
    where
        LinearAdvection<D>: Equation<R, D> + OnDevice<D>,
    {
        let p = &self.config.problem;
        let periodic = p.periodic.unwrap_or(true);
        let velocity = advection_velocity::<D>(p);
        self.drive(
            |o| {
                let exact: Option<problems::ExactFn<D>> = periodic.then(|| {
                    let u = u.clone();
                    let domain = mote_cloud::Domain::unit_periodic();
                    Box::new(move |x: [f64; D], t: f64, out: &mut [f64]| {
                        out[0] = exact::advected(|y: [f64; D]| u.at(&y), velocity, t, domain)(x);
                    }) as problems::ExactFn<D>
                });
                let u0 = |x: [f64; D]| finite("problem.initial.u", &u, &x);
                let equation = LinearAdvection::scalar(velocity, 1);
                problems::custom_scalar::<R, D, _>(o, equation, periodic, u0, exact)
            },
            backend,
        )
    }

    /// The configured Riemann problem (validated: 1-D or 2-D Euler, 1-D scalar; 3-D Euler is
    /// run by `launch` in f64).
    fn riemann<R: GpuFloat>(self, dim: usize, backend: Backend) -> Result<Outcome, RunError> {
        let p = &self.config.problem;
        let end = self.config.run.end_time.expect("filled by with_defaults");
        let position = p.diaphragm.expect("filled by with_defaults");
        let (left, right) = (
            p.left.as_ref().expect("validated"),
            p.right.as_ref().expect("validated"),
        );
        match (p.equation.as_deref().expect("filled by with_defaults"), dim) {
            ("burgers", _) => {
                let (l, r) = (left.u.expect("validated"), right.u.expect("validated"));
                self.drive(
                    |o| problems::burgers_riemann::<R>(o, l, r, position, end),
                    backend,
                )
            }
            ("advection", _) => {
                let (l, r) = (left.u.expect("validated"), right.u.expect("validated"));
                self.drive(
                    |o| problems::advection_riemann::<R>(o, l, r, position, end),
                    backend,
                )
            }
            (_, 1) => self.gas_riemann::<R, 1>(backend),
            _ => self.gas_riemann::<R, 2>(backend),
        }
    }

    /// The configured Riemann problem of the Euler equations in `D` dimensions.
    fn gas_riemann<R: GpuFloat, const D: usize>(self, backend: Backend) -> Result<Outcome, RunError>
    where
        Euler<D>: Equation<R, D> + OnDevice<D>,
    {
        let p = &self.config.problem;
        let gamma = p.gamma.unwrap_or(1.4);
        let end = self.config.run.end_time.expect("filled by with_defaults");
        let vector = |v: &[f64]| -> [f64; D] { std::array::from_fn(|d| v[d]) };
        let gas = |s: &config::StateSection| problems::GasData::<D> {
            density: s.density.expect("validated"),
            velocity: vector(s.velocity.as_deref().expect("filled by with_defaults")),
            pressure: s.pressure.expect("validated"),
        };
        let (left, right) = (
            gas(p.left.as_ref().expect("validated")),
            gas(p.right.as_ref().expect("validated")),
        );
        let diaphragm = problems::Diaphragm {
            position: p.diaphragm.expect("filled by with_defaults"),
            normal: vector(p.normal.as_deref().expect("filled by with_defaults")),
        };
        self.drive(
            |o| problems::gas_riemann::<R, D>(o, gamma, left, right, diaphragm, end),
            backend,
        )
    }
}

/// The advection velocity of a custom or file problem: `[problem.initial] velocity` (numbers,
/// validated), else `(1, 0.5, 0.25)`.
fn advection_velocity<const D: usize>(p: &config::ProblemSection) -> [f64; D] {
    let given = p.initial.as_ref().and_then(|i| i.velocity.as_ref());
    match given.map(Values::to_vec) {
        Some(v) => std::array::from_fn(|d| match v[d] {
            Value::Number(c) => c,
            Value::Expression(_) => unreachable!("validated: numbers"),
        }),
        None => std::array::from_fn(|d| [1.0, 0.5, 0.25][d]),
    }
}

/// A validated value of `[problem.initial]` ready to evaluate.
fn field(value: &Value, dim: usize) -> Parsed {
    Parsed::parse(value, dim).expect("validated with the configuration")
}

/// `field` at `x`, which must be finite; an error names `key` and the position.
fn finite<const D: usize>(
    key: &'static str,
    field: &Parsed,
    x: &[f64; D],
) -> Result<f64, CloudError> {
    let v = field.at(x);
    if v.is_finite() {
        Ok(v)
    } else {
        Err(CloudError::invalid(
            key,
            format!("{v} at {x:?}"),
            "a finite value at every particle (is the expression defined over the whole box?)",
        ))
    }
}

/// `field` at `x`, which must be finite and positive; an error names `key` and the position.
fn positive<const D: usize>(
    key: &'static str,
    field: &Parsed,
    x: &[f64; D],
) -> Result<f64, CloudError> {
    let v = finite(key, field, x)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(CloudError::invalid(
            key,
            format!("{v} at {x:?}"),
            "a value > 0 at every particle",
        ))
    }
}

/// The scheme a configuration describes (validated with the configuration: see
/// [`check_scheme`]).
fn scheme_of(s: &SchemeSection) -> Result<Scheme, CloudError> {
    Ok(Scheme {
        order: s.order,
        formulation: s.formulation,
        flux: FluxKind::by_name(&s.flux)?,
        limiter: Limiter::by_name(&s.limiter, &s.limiter_mode)?,
        // The central fit's weight of the WENO-type combination: the value validated in the
        // tests (docs/validation.md).
        weno: s.weno.then_some(WENO_CENTRAL_WEIGHT),
        // A relaxation run names an IMEX pair here, which replaces the explicit stepper
        // (`Simulation::relaxed`); its explicit tableau is never used.
        tableau: Tableau::by_name(&s.stepper).unwrap_or_else(|_| Tableau::ssp_rk3()),
        mood: MoodSettings::by_name(&s.mood, &s.mood_strategy)?,
    })
}

/// A simulation's error as the run reports it: a set-up or memory error as such, anything
/// else as the device's.
fn run_error(e: GpuError) -> RunError {
    match e {
        GpuError::Cloud(e) => RunError::Cloud(e),
        GpuError::Capacity(e) => RunError::Capacity(e),
        e => RunError::Gpu(e),
    }
}

/// The cloud of `problem` with every particle at the scheme's order, and what the run keeps of
/// the problem besides.
fn split<R: Real, const D: usize, E>(
    c: &MeshlessConfig,
    problem: Problem<R, D, E>,
) -> (Cloud<R, D>, E, Boundaries<R, D>, ProblemRest<D>) {
    let Problem {
        name,
        mut cloud,
        equation,
        boundaries,
        variables,
        primitive,
        exact,
        ..
    } = problem;
    for o in cloud.orders_mut() {
        *o = c.scheme.order as u8;
    }
    let rest = ProblemRest {
        name,
        variables,
        primitive,
        exact,
    };
    (cloud, equation, boundaries, rest)
}

/// What builds a run's problem from the resolution, jitter and boundary layers.
type BuildProblem<'a, R, const D: usize, E> =
    dyn Fn(&ProblemOptions) -> Result<Problem<R, D, E>, CloudError> + 'a;

/// What makes a run's simulation of its problem: the configured simulation, neighbours within
/// the radius, on the backend; the problem's cloud is the whole cloud, or with `Some((first,
/// total))` this rank's own particles `first..first + len` of `total`
/// ([`ProblemOptions::ranks`]).
type MakeSimulation<R, const D: usize, E> =
    fn(
        &MeshlessConfig,
        Problem<R, D, E>,
        f64,
        Backend,
        Option<(usize, usize)>,
    ) -> Result<(Simulation<R, D>, ProblemRest<D>), RunError>;

/// The configured simulation of `problem` with neighbours within `radius`, on `backend`, with
/// its motion and adaptivity; `part` as [`MakeSimulation`]'s.
fn simulation<R: GpuFloat, const D: usize, E>(
    c: &MeshlessConfig,
    problem: Problem<R, D, E>,
    radius: f64,
    backend: Backend,
    part: Option<(usize, usize)>,
) -> Result<(Simulation<R, D>, ProblemRest<D>), RunError>
where
    E: Equation<R, D> + OnDevice<D> + Clone + 'static,
{
    let (cloud, equation, boundaries, rest) = split(c, problem);
    let scheme = scheme_of(&c.scheme)?;
    // On several ranks the cloud is split between them (each holds its own particles and a
    // halo; decisions 0030, 0031); an adaptive one runs with the state on every rank.
    let world = mote_core::comm::world();
    // A part's ranks agree (a rank may hold no particle to ask).
    let motion = match part {
        Some(_) => agreed(motion_of(&c.motion, &equation, &cloud))?,
        None => motion_of(&c.motion, &equation, &cloud)?,
    };
    let adaptive = motion.is_some() && c.adaptivity.every > 0;
    // A whole cloud on several CPU ranks (the price's one-process prototype, the same on every
    // rank) is cut to the rank's rows first.
    let mut cloud = cloud;
    let part = match (backend, part) {
        (Backend::Cpu(_), None) if world.size() > 1 && !adaptive => {
            Some(mote_cloud::halo::own_rows(&mut cloud, world.as_ref()))
        }
        (_, part) => part,
    };
    let mut sim = match (backend, part) {
        (backend, Some((first, total))) => {
            // On a device each rank takes its machine's devices in turn.
            let backend = match backend {
                Backend::Device(spec) => Backend::Device(agreed(
                    mote_gpu::rank_device(spec, world.local_rank()).map_err(RunError::from),
                )?),
                cpu => cpu,
            };
            agreed(
                Simulation::split_part(
                    cloud, first, total, equation, boundaries, radius, &scheme, backend, world,
                )
                .map_err(run_error),
            )?
        }
        _ => Simulation::new(cloud, equation, boundaries, radius, &scheme, backend)
            .map_err(run_error)?,
    };
    if let Some(motion) = motion {
        sim = sim
            .with_motion(motion, c.motion.reorder_distance)
            .map_err(run_error)?;
        let a = &c.adaptivity;
        if a.every > 0 {
            let adapt = Adaptivity {
                hole_fraction: a.hole_fraction,
                merge_fraction: a.merge_fraction,
            };
            sim = sim.with_adaptivity(adapt, a.every).map_err(run_error)?;
        }
    }
    Ok((sim, rest))
}

/// The configured simulation of `problem` through its kinetic relaxation system (a
/// [`MakeSimulation`] of the f64 engines only).
fn relaxed_simulation<const D: usize, E>(
    c: &MeshlessConfig,
    problem: Problem<f64, D, E>,
    radius: f64,
    backend: Backend,
    part: Option<(usize, usize)>,
) -> Result<(Simulation<f64, D>, ProblemRest<D>), RunError>
where
    E: Equation<f64, D> + Clone + 'static,
{
    let r = c.relaxation.as_ref().expect("a relaxation run");
    let (cloud, equation, _periodic, rest) = split(c, problem);
    let scheme = scheme_of(&c.scheme)?;
    let tableau = ImexTableau::by_name(&c.scheme.stepper)?;
    // On several ranks the kinetic cloud is split between them (decision 0030), from each
    // rank's own particles where it generated only those (decision 0033).
    let world = mote_core::comm::world();
    let ranks = (world.size() > 1 && matches!(backend, Backend::Cpu(_))).then_some(world);
    let sim = Simulation::relaxed(
        cloud, equation, r.speed, r.epsilon, tableau, radius, &scheme, backend, ranks, part,
    )
    .map_err(run_error)?;
    Ok((sim, rest))
}

/// Whether a run on several ranks builds each rank's part of the cloud only: every run that is
/// not adaptive (an adaptive cloud runs with the state on every rank), on the CPU or a device
/// per rank (decision 0036). Generated problems are made by parts (decision 0033), files read
/// by rows (decision 0035), and the cloud is split between the ranks (decision 0030).
fn by_parts(c: &MeshlessConfig) -> bool {
    mote_core::comm::world().size() > 1 && !(c.motion.kind != "none" && c.adaptivity.every > 0)
}

/// The cloud a `file` problem's build hands over: the file's `cloud` (a rank's part where the
/// cloud is split between ranks, `parts`), except for the price's prototype on split ranks
/// (asked for without `ProblemOptions::ranks`), which cannot be a rank's part (it is built on
/// one process, the same on every rank): a small lattice on the file's box in the state of the
/// file's first particle ([`file::FileParticles::prototype`]).
fn file_cloud<R: Real, const D: usize>(
    f: &file::FileParticles,
    state: &[Vec<f64>],
    cloud: Cloud<R, D>,
    parts: bool,
    periodic: bool,
) -> impl Fn(&ProblemOptions) -> Result<Cloud<R, D>, CloudError> {
    // Collective: every rank asks, whether or not it will need it.
    let sample = f.first_state(state);
    move |o: &ProblemOptions| {
        if parts && o.ranks.is_none() {
            file::FileParticles::prototype::<R, D>(
                periodic,
                o.resolution,
                o.boundary_layers,
                &sample,
            )
        } else {
            Ok(cloud.clone())
        }
    }
}

/// The configured motion of `cloud` under `equation` (`None`: a fixed cloud).
fn motion_of<R: Real, const D: usize, E>(
    m: &config::MotionSection,
    equation: &E,
    cloud: &Cloud<R, D>,
) -> Result<Option<Box<dyn Motion<R, D>>>, RunError>
where
    E: Equation<R, D> + Clone + 'static,
{
    let (lo, hi) = cloud.domain().bounds();
    match m.kind.as_str() {
        "none" => Ok(None),
        "flow" => {
            // Asked of a real state (the first particle's): a made-up one could trip the
            // equation's positivity floors and count an event. (A rank's part may hold none:
            // the other ranks ask.)
            let probe: Option<Vec<R>> = (!cloud.is_empty())
                .then(|| (0..cloud.variables()).map(|v| cloud.state(v)[0]).collect());
            if probe.is_some_and(|p| equation.flow_velocity(&p).is_none()) {
                return Err(RunError::Refused(format!(
                    "motion.kind = \"flow\": the equation `{}` has no flow velocity to move \
                     the particles with (use a prescribed motion)",
                    equation.name()
                )));
            }
            let eq = equation.clone();
            let mover = StateVelocity::new("flow", m.fraction.unwrap_or(1.0), move |u: &[R]| {
                eq.flow_velocity(u).unwrap_or([R::zero(); D])
            })?;
            Ok(Some(Box::new(mover)))
        }
        kind => {
            let len = std::array::from_fn(|d| hi[d] - lo[d]);
            let motion = mote_cloud::motion::builtin::<D>(kind, m.speed.unwrap_or(0.5), lo, len)?;
            Ok(Some(Box::new(motion)))
        }
    }
}

/// Everything a run's output needs to know about the run.
#[derive(Serialize)]
struct Provenance<'a> {
    mote_version: &'a str,
    git_commit: &'a str,
    physics: &'a str,
    problem: &'a str,
    equation: &'a str,
    backend: &'a str,
    threads: usize,
    /// MPI ranks that ran it (each with `threads` threads).
    ranks: usize,
    /// Bytes rank 0 received from the other ranks (on several ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_received: Option<u64>,
    /// Halo particles rank 0 holds besides its own, where the cloud is split between ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    halo_particles: Option<usize>,
    /// Halos found (the first included) on a moving cloud split between ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    halos_found: Option<u64>,
    /// Steps redone on a wider halo, on a moving cloud split between ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    steps_redone: Option<u64>,
    precision: String,
    particles: usize,
    interior_particles: usize,
    neighbours_mean: f64,
    radius_spacings: f64,
    memory_limit_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    machine: MachineInfo,
    started: String,
    resumed_from: Option<String>,
    finished: Option<String>,
    wall_seconds: Option<f64>,
    steps: Option<u64>,
    errors: Option<exact::Errors>,
    mood: Option<MoodStats>,
    floor_events: Option<u64>,
    /// The kinetic speed of a relaxation run.
    #[serde(skip_serializing_if = "Option::is_none")]
    kinetic_speed: Option<f64>,
    /// What adaptivity did over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    adaptivity: Option<AdaptSummary>,
}

/// Adaptivity's totals over a run, for the provenance.
#[derive(Serialize)]
struct AdaptSummary {
    inserted: usize,
    unfilled: usize,
    merged: usize,
    removed: usize,
    particles_at_end: usize,
}

impl MeshlessRun<'_> {
    /// The search radius in particle spacings: the configured one, or enough neighbours for the
    /// MLS fit of the order (at least order 2's, so that every order sees the same
    /// neighbourhoods near boundaries).
    fn radius_factor<const D: usize>(&self) -> f64 {
        let s = &self.config.scheme;
        s.radius
            .unwrap_or_else(|| default_radius_factor::<D>(s.order.max(2)))
    }

    /// Builds the problem with `build`, prices it on the host (host runs), makes its
    /// simulation on `backend`, reserves its memory, runs it and writes the run directory.
    fn drive<R: GpuFloat, const D: usize, E>(
        self,
        build: impl Fn(&ProblemOptions) -> Result<Problem<R, D, E>, CloudError>,
        backend: Backend,
    ) -> Result<Outcome, RunError>
    where
        E: Equation<R, D> + OnDevice<D> + Clone + 'static,
    {
        self.drive_with(&build, backend, simulation)
    }

    /// [`drive`](Self::drive) with the simulation made by `make`. `build` and `make` are
    /// passed as a trait object and a function pointer, so that this (long) function is
    /// compiled once per precision, dimension and equation, not once per problem.
    fn drive_with<R: GpuFloat, const D: usize, E>(
        self,
        build: &BuildProblem<'_, R, D, E>,
        backend: Backend,
        make: MakeSimulation<R, D, E>,
    ) -> Result<Outcome, RunError>
    where
        E: Equation<R, D> + OnDevice<D> + Clone + 'static,
    {
        let c = self.config;
        let price = matches!(backend, Backend::Cpu(_));
        let started = SystemTime::now();
        let clock = Instant::now();
        let factor = self.radius_factor::<D>();
        // On several ranks each rank generates only its own particles of a lattice problem
        // (`ProblemOptions::ranks`) or reads its rows of a file, and the cloud is split from
        // them (on the CPU or a device per rank); an adaptive run (the state on every rank)
        // builds the whole cloud on every rank.
        let world = mote_core::comm::world();
        let parts = by_parts(c);
        let options = ProblemOptions {
            resolution: c.problem.resolution.expect("filled by with_defaults"),
            jitter: c.problem.jitter,
            seed: c.problem.seed,
            // The layers an interior particle's neighbourhood reaches: layer k lies k spacings
            // beyond the first interior row, so `floor(factor)` of them. A deeper layer would
            // only hold particles with no interior particle within two neighbour hops (at
            // corners), which the boundary conditions refuse.
            boundary_layers: (factor.floor() as usize).max(1),
            ranks: parts.then(|| world.clone()),
        };
        let given = c
            .run
            .memory_limit
            .as_deref()
            .map(|text| parse_memory_limit(text).expect("validated with the config"));
        // The host's limit (given, else the process's, else the default budget: the memory
        // available now) prices a host run before its lists exist; a device run is budgeted on
        // the device, against the given limit or the device's memory.
        let limit = if price {
            effective_memory_limit(c.run.memory_limit.as_deref())
        } else {
            given
        };
        // An impossible size is refused before the cloud is built: its interior particles alone
        // (resolution^D per unit volume, a lower bound) must fit the limit.
        if price && let Some(limit) = limit {
            let interior = self
                .interior
                .map_or((options.resolution as f64).powi(D as i32), |n| n as f64);
            self.price(build, make, &options, interior.min(1e18) as usize, limit)?;
        }
        let (mut problem, part) = if parts {
            // A part's set-up may fail on some ranks only (a user's initial state).
            let problem = agreed(build(&options).map_err(RunError::from))?;
            let mut total = [problem.cloud.len() as u64];
            world.sum_u64(&mut total);
            let total = total[0] as usize;
            let first = mote_cloud::halo::own_ranges(total, world.size())[world.rank()].start;
            (problem, Some((first, total)))
        } else {
            (build(&options)?, None)
        };
        if let Some(r) = self.resume {
            match part {
                Some(rows) => agreed(load_state(&mut problem.cloud, r, Some(rows)))?,
                None => load_state(&mut problem.cloud, r, None)?,
            }
        }
        let radius = factor * max_spacing(&problem.cloud);
        let mut counts = [
            problem.cloud.len() as u64,
            problem
                .cloud
                .tags()
                .iter()
                .filter(|&&t| t == INTERIOR)
                .count() as u64,
        ];
        if part.is_some() {
            world.sum_u64(&mut counts);
        }
        let (n, interior) = (counts[0] as usize, counts[1] as usize);
        if price && let Some(limit) = limit {
            self.price(build, make, &options, n, limit)?;
        }
        let (mut sim, rest) = make(c, problem, radius, backend, part)?;
        // Buffers are reserved (sized once, frozen) against a limit the user set; the default
        // budget only prices the run.
        // Each rank reserves its own memory: agreed, since one rank's machine may refuse.
        let reserved = agreed(
            sim.reserve(if price {
                explicit_memory_limit(c.run.memory_limit.as_deref())
            } else {
                given
            })
            .map_err(run_error),
        )?;
        if self.session {
            return Ok(Outcome::Session(Box::new(session::Session {
                sim,
                rest,
                config: c.clone(),
                first_dt: None,
                mood: MoodStats::default(),
                time: 0.0,
            })));
        }
        // On several MPI ranks rank 0 writes the run directory and every rank agrees on each
        // write's outcome (`on_root`, as the gravity runner does; decision 0027).
        if let Some(r) = self.resume {
            sim.restore_clock(r.header.simulation_time, r.header.step);
        } else {
            on_root(world.as_ref(), || Ok(create_run_dir(self.dir, self.force)?))?;
        }
        on_root(world.as_ref(), || {
            Ok(write_atomic(
                &self.dir.join("config.toml"),
                c.to_toml().as_bytes(),
            )?)
        })?;
        let sink = SnapshotSink {
            dir: self.dir,
            format: c.output.format,
            compression: c.output.compression,
            config: c.to_toml(),
            commit: self.git_commit,
        };

        let neighbours_mean = sim.neighbours_mean();
        let backend = CpuBackend::threads(c.run.threads);
        let backend_name = sim.backend();
        let mut provenance = Provenance {
            mote_version: env!("CARGO_PKG_VERSION"),
            git_commit: self.git_commit,
            physics: "meshless",
            problem: rest.name,
            equation: sim.equation_name(),
            backend: &backend_name,
            threads: backend.thread_count(),
            ranks: world.size(),
            bytes_received: None,
            halo_particles: sim.halo_particles(),
            halos_found: None,
            steps_redone: None,
            precision: R::PRECISION.to_string(),
            particles: n,
            interior_particles: interior,
            neighbours_mean,
            radius_spacings: factor,
            memory_limit_bytes: reserved.map(|r| r.limit),
            reserved_bytes: reserved.map(|r| r.bytes),
            machine: MachineInfo::detect(),
            started: humantime::format_rfc3339_seconds(started).to_string(),
            resumed_from: self.resume.map(|r| r.path.display().to_string()),
            finished: None,
            wall_seconds: None,
            steps: None,
            errors: None,
            mood: None,
            floor_events: None,
            kinetic_speed: sim.kinetic_speed(),
            adaptivity: None,
        };
        let provenance_path = self.dir.join("provenance.json");
        let write_provenance =
            |p: &Provenance<'_>| on_root(world.as_ref(), || Ok(write_json(&provenance_path, p)?));
        write_provenance(&provenance)?;

        let mut header: Vec<String> = ["step", "time", "dt"].map(String::from).to_vec();
        header.extend(rest.variables.iter().map(|v| format!("total_{v}")));
        header.push(format!("min_{}", rest.variables[0]));
        header.push(format!("max_{}", rest.variables[0]));
        if rest.exact.is_some() {
            header.push(format!("l1_error_{}", rest.variables[0]));
            header.push(format!("relative_l2_error_{}", rest.variables[0]));
            // The other variables' L1 errors after the first's (a steady vortex's error is in
            // its momentum, not its density).
            header.extend(rest.variables[1..].iter().map(|v| format!("l1_error_{v}")));
        }
        header.extend(["mood_reductions", "floor_events"].map(String::from));
        // A moving cloud's particle count, and what adaptivity did so far.
        let moving = c.motion.moves();
        let adapting = moving && c.adaptivity.every > 0;
        if moving {
            header.push("particles".into());
        }
        if adapting {
            header.extend(["inserted", "merged", "removed"].map(String::from));
        }
        // What the totals lost through the boundary faces, integrated over time (a CPU run
        // with boundary particles): `total + outflow` is what the scheme conserves.
        let m = rest.variables.len();
        let mut rate = vec![0.0; m];
        let balance = sim.boundary_flux(&mut rate);
        let mut outflow = self
            .resume
            .and_then(|r| r.header.outflow.clone())
            .unwrap_or_else(|| vec![0.0; m]);
        if balance {
            header.extend(rest.variables.iter().map(|v| format!("outflow_{v}")));
        }
        header.push("wall_seconds".into());
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let csv_path = self.dir.join("diagnostics.csv");
        let mut csv = on_root(world.as_ref(), || {
            Ok(Some(if self.resume.is_some() {
                CsvWriter::append(&csv_path, &header, sim.steps())?
            } else {
                CsvWriter::create(&csv_path, &header)?
            }))
        })?;

        let end = c.run.end_time.expect("filled by with_defaults");
        let cfl = c.run.cfl;
        let start_time = self.resume.map_or(0.0, |r| r.header.time);
        let mut outputs = Outputs::new(
            end,
            c.output.snapshots,
            c.output.checkpoint_interval,
            parse_wall_interval(&c.output.checkpoint_wall_interval)
                .expect("validated with the config"),
            c.output.diagnostics_every,
            start_time,
        );
        let mut snapshots = self.resume.map_or_else(Vec::new, |r| {
            vtk::existing_snapshots(self.dir, &r.header.snapshots)
        });
        // Floor events counted before a resume (this process's engine counts from zero).
        let floors_before = self.resume.and_then(|r| r.header.floor_events);
        let mut totals = Totals {
            mood: self
                .resume
                .map_or_else(MoodStats::default, |r| r.header.mood),
            floors_reported: 0,
        };
        let row = |sim: &mut Simulation<R, D>,
                   time: f64,
                   dt: f64,
                   totals: &mut Totals,
                   outflow: &[f64],
                   csv: &mut Option<CsvWriter>|
         -> Result<(), RunError> {
            let mood = sim.take_mood_stats();
            let floors = sim.floor_events();
            totals.add(&mood);
            // Sums and extremes over each rank's own particles, reduced over the ranks: the
            // one-process values, bit for bit (the sums are exact), without gathering the cloud.
            sim.sync()?;
            let (cloud, share) = (sim.cloud(), sim.share());
            let mut values = vec![sim.steps() as f64, time, dt];
            values.extend(exact::totals_of(cloud, share));
            let (lo, hi) = range(cloud.state(0), cloud.tags(), share);
            values.extend([lo, hi]);
            if let Some(ex) = &rest.exact {
                let e = exact::errors_all_of(cloud, share, |x, out| ex(x, time, out));
                values.extend([e[0].l1, e[0].relative_l2]);
                values.extend(e[1..].iter().map(|e| e.l1));
            }
            // The device does not count floor events: NaN, not a misleading 0.
            let new_floors = floors.map_or(f64::NAN, |f| (f - totals.floors_reported) as f64);
            values.extend([mood.reductions as f64, new_floors]);
            if moving {
                values.push(share.total as f64);
            }
            if adapting {
                let a = sim.adapt_stats();
                values.extend([a.inserted, a.merged, a.removed].map(|k| k as f64));
            }
            if balance {
                values.extend(outflow);
            }
            values.push(clock.elapsed().as_secs_f64());
            totals.floors_reported = floors.unwrap_or(0);
            // Every rank computes the row (its MOOD counts are taken); rank 0 writes it.
            agreed(match csv {
                Some(csv) => csv.row(&values).map_err(RunError::from),
                None => Ok(()),
            })
        };
        let checkpoint_path = self.dir.join("checkpoint.mote");
        // A moving or relaxation run writes no checkpoint (see MeshlessConfig::resumable).
        let resumable = c.resumable();
        let last_state = if resumable {
            format!("The last good state is in {}", checkpoint_path.display())
        } else {
            "This run writes no checkpoint (a moving cloud or a relaxation run)".to_string()
        };
        // What a checkpoint reads, brought to the host by every rank before the ranks write
        // it: a split cloud's own particles (`None` on one process, whose cloud is whole), and
        // the floor events so far.
        type Saved<R, const D: usize> = (Option<Cloud<R, D>>, Option<u64>);
        let checkpoint_state = |sim: &mut Simulation<R, D>| -> Result<Saved<R, D>, RunError> {
            if !resumable {
                return Ok((None, None));
            }
            sim.sync()?;
            let part = sim.own_part()?;
            let floors = sim.floor_events().map(|f| f + floors_before.unwrap_or(0));
            Ok((part, floors))
        };
        // Every rank of `ranks` passes its rows; rank 0 writes the one-process file
        // (collective over `ranks`).
        #[allow(clippy::too_many_arguments)]
        let save = |sim: &Simulation<R, D>,
                    part: &Option<Cloud<R, D>>,
                    floor_events: Option<u64>,
                    time: f64,
                    totals: &Totals,
                    snapshots: &[(f64, String)],
                    first_dt: f64,
                    outflow: &[f64],
                    ranks: &dyn Comm|
         -> Result<(), RunError> {
            if !resumable {
                return Ok(());
            }
            let cloud = part.as_ref().unwrap_or(sim.cloud());
            let stream = RootStream::new(ranks, cloud.len());
            let header = MeshlessHeader {
                mote_version: env!("CARGO_PKG_VERSION").to_string(),
                physics: "meshless".to_string(),
                step: sim.steps(),
                time,
                simulation_time: sim.time(),
                precision: R::PRECISION,
                config: c.to_toml(),
                snapshots: snapshots.to_vec(),
                particles: stream.total(),
                variables: cloud.variables(),
                mood: totals.mood,
                floor_events,
                first_dt: Some(first_dt),
                outflow: balance.then(|| outflow.to_vec()),
            };
            let state: Vec<&[R]> = (0..cloud.variables()).map(|v| cloud.state(v)).collect();
            Ok(checkpoint::write_meshless(
                &checkpoint_path,
                &header,
                cloud.ids(),
                &state,
                &stream,
            )?)
        };
        let mut time = match self.resume {
            Some(r) => r.header.time,
            None => {
                row(&mut sim, 0.0, 0.0, &mut totals, &outflow, &mut csv)?;
                // Every rank passes its rows of a split cloud; rank 0 writes.
                let (part, orders) = snapshot_state(&mut sim)?;
                let cloud = part.as_ref().unwrap_or(sim.cloud());
                by_row_holders(part.is_some(), world.as_ref(), |ranks| {
                    let rows = (cloud, &orders[..]);
                    write_snapshot(&sink, &sim, rows, &rest, 0.0, &mut snapshots, ranks)
                })?;
                0.0
            }
        };
        // The first stable step (a resumed run's from its checkpoint): the reference a
        // collapsing step is measured against.
        let mut first_dt = self.resume.and_then(|r| r.header.first_dt);
        while time < end {
            let csv_so_far = || partial_path(&csv_path).display().to_string();
            let steps = sim.steps();
            let fail = |step: u64, reason: String| RunError::Meshless {
                step,
                time,
                reason,
                csv: csv_so_far(),
            };
            let Advanced {
                time: t_next,
                reference,
            } = match advance(&mut sim, time, end, cfl, c.run.min_dt_ratio, &mut first_dt) {
                Ok(a) => a,
                Err(StepFailure::Gpu(e)) => return Err(e.into()),
                Err(StepFailure::Collapsed { stable, reference }) => {
                    let (part, floors) = checkpoint_state(&mut sim)?;
                    by_row_holders(part.is_some(), world.as_ref(), |ranks| {
                        save(
                            &sim, &part, floors, time, &totals, &snapshots, reference, &outflow,
                            ranks,
                        )
                    })?;
                    sim.sync()?;
                    let reason = collapse_reason(
                        &sim,
                        (sim.cloud(), sim.share()),
                        c,
                        (stable, reference),
                        (time, end),
                        &format!("{last_state} "),
                    );
                    return Err(fail(steps + 1, reason));
                }
                Err(StepFailure::Unstable(stable)) => {
                    return Err(fail(steps, unstable_reason(stable)));
                }
                Err(StepFailure::Step(e)) => return Err(fail(steps + 1, e.to_string())),
            };
            let dt = t_next - time;
            time = t_next;
            if balance {
                // The trapezoidal rule over the step, from the rates at both ends.
                let before = rate.clone();
                sim.boundary_flux(&mut rate);
                for ((o, a), b) in outflow.iter_mut().zip(&before).zip(&rate) {
                    *o += 0.5 * dt * (a + b);
                }
            }
            let mut due = outputs.after_step(sim.steps(), time);
            // A signal or the wall clock may reach one rank and not another.
            due.agree(world.as_ref());
            if due.row {
                row(&mut sim, time, dt, &mut totals, &outflow, &mut csv)?;
                // At the last step size (the stable one, or the shorter step to the end).
                let remaining = ((end - time) / dt).ceil() as u64;
                (self.progress)(Progress {
                    step: sim.steps(),
                    total_steps: sim.steps() + remaining,
                    time,
                    status: format!("dt = {dt:.3e}"),
                });
            }
            if due.snapshot {
                let (part, orders) = snapshot_state(&mut sim)?;
                let cloud = part.as_ref().unwrap_or(sim.cloud());
                by_row_holders(part.is_some(), world.as_ref(), |ranks| {
                    let rows = (cloud, &orders[..]);
                    write_snapshot(&sink, &sim, rows, &rest, time, &mut snapshots, ranks)
                })?;
            }
            if due.checkpoint {
                let (part, floors) = checkpoint_state(&mut sim)?;
                by_row_holders(part.is_some(), world.as_ref(), |ranks| {
                    save(
                        &sim, &part, floors, time, &totals, &snapshots, reference, &outflow, ranks,
                    )
                })?;
                outputs.saved();
            }
            if let Some(signal) = due.stop {
                provenance.steps = Some(sim.steps());
                write_provenance(&provenance)?;
                if !resumable {
                    return Err(RunError::Stopped {
                        signal,
                        step: sim.steps(),
                        time,
                        why: "a moving cloud or a relaxation run writes no checkpoint: it \
                              cannot be resumed"
                            .into(),
                    });
                }
                return Err(RunError::Interrupted {
                    signal,
                    step: sim.steps(),
                    time,
                    checkpoint: checkpoint_path.display().to_string(),
                });
            }
        }
        on_root(world.as_ref(), || {
            Ok(csv.take().map(CsvWriter::finish).transpose()?)
        })?;
        sim.sync()?;
        let (cloud, share) = (sim.cloud(), sim.share());
        let variable_errors: Vec<(String, exact::Errors)> = rest
            .exact
            .as_ref()
            .map(|ex| exact::errors_all_of(cloud, share, |x, out| ex(x, time, out)))
            .unwrap_or_default()
            .into_iter()
            .zip(&rest.variables)
            .map(|(e, name)| (name.clone(), e))
            .collect();
        let errors = variable_errors.first().map(|(_, e)| *e);
        let spacing = max_spacing(cloud);
        let wall = clock.elapsed().as_secs_f64();
        provenance.finished =
            Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
        provenance.wall_seconds = Some(wall);
        provenance.steps = Some(sim.steps());
        provenance.errors = errors;
        provenance.mood = Some(totals.mood);
        provenance.bytes_received = (world.size() > 1).then(|| world.bytes_received());
        if let Some((found, redone)) = sim.halo_rebuilds() {
            provenance.halos_found = Some(found);
            provenance.steps_redone = Some(redone);
        }
        let floor_events = sim.floor_events().map(|f| f + floors_before.unwrap_or(0));
        provenance.floor_events = floor_events;
        if c.adaptivity.every > 0 {
            let a = sim.adapt_stats();
            provenance.adaptivity = Some(AdaptSummary {
                inserted: a.inserted,
                unfilled: a.unfilled,
                merged: a.merged,
                removed: a.removed,
                particles_at_end: share.total,
            });
        }
        write_provenance(&provenance)?;
        Ok(Outcome::Report(MeshlessReport {
            dir: self.dir.to_path_buf(),
            problem: rest.name.to_string(),
            particles: n,
            neighbours_mean,
            steps: sim.steps(),
            time,
            wall_seconds: wall,
            errors,
            variable_errors,
            interior_particles: interior,
            spacing,
            mood: totals.mood,
            floor_events,
        }))
    }

    /// Fails, before the full run's neighbour lists and MLS coefficients exist, if `limit`
    /// cannot hold `particles` particles: the bytes per particle and per neighbour slot, and
    /// the slots per particle, are measured on the same problem at a low resolution.
    fn price<R: GpuFloat, const D: usize, E: Equation<R, D> + OnDevice<D> + 'static>(
        &self,
        build: &BuildProblem<'_, R, D, E>,
        make: MakeSimulation<R, D, E>,
        options: &ProblemOptions,
        particles: usize,
        limit: u64,
    ) -> Result<(), RunError> {
        let small = ProblemOptions {
            resolution: options.resolution.min(16),
            ranks: None,
            ..options.clone()
        };
        let prototype = build(&small)?;
        let radius = self.radius_factor::<D>() * max_spacing(&prototype.cloud);
        let cpu = Backend::Cpu(CpuBackend::threads(self.config.run.threads));
        let (mut sim, _) = make(self.config, prototype, radius, cpu, None)?;
        let model = sim.memory_model();
        let slots = (particles as f64 * model.slots_per_particle()).ceil() as usize;
        let needed = model.bytes(particles, slots);
        memory::price(
            || {
                format!(
                    "memory limit for {particles} particles and about {slots} neighbour slots in \
                     {} (estimate {needed} bytes)",
                    R::PRECISION
                )
            },
            needed,
            limit,
            ReserveOptions::default().tolerance,
        )?;
        Ok(())
    }
}

/// A step taken: the time it reached, and the first step's size (the reference a collapsing
/// step is measured against).
pub(crate) struct Advanced {
    pub time: f64,
    pub reference: f64,
}

/// Why [`advance`] took no step.
pub(crate) enum StepFailure {
    /// The stable step could not be computed (a device error).
    Gpu(GpuError),
    /// The stable step is not a positive number (a state without wave speeds or a degenerate
    /// cloud).
    Unstable(f64),
    /// The stable step fell below `run.min_dt_ratio` of the first.
    Collapsed { stable: f64, reference: f64 },
    /// The step failed (a state that is not finite; the error names the particle).
    Step(GpuError),
}

/// One step of the stable size at `cfl` from `time`, ending at `end` if that comes first: the
/// steps every front end takes (the configured run, the Python module's session), written once
/// so that both take the same ones. `first_dt` is the first step's size, set by the first call.
pub(crate) fn advance<R: GpuFloat, const D: usize>(
    sim: &mut Simulation<R, D>,
    time: f64,
    end: f64,
    cfl: f64,
    min_dt_ratio: f64,
    first_dt: &mut Option<f64>,
) -> Result<Advanced, StepFailure> {
    let stable = sim.stable_dt(cfl).map_err(StepFailure::Gpu)?;
    if !(stable.is_finite() && stable > 0.0) {
        return Err(StepFailure::Unstable(stable));
    }
    let reference = *first_dt.get_or_insert(stable);
    if stable < min_dt_ratio * reference {
        return Err(StepFailure::Collapsed { stable, reference });
    }
    // Only the end is hit exactly: outputs are written at the step boundary that reaches them,
    // so they never change the steps.
    let t_next = if time + stable >= end {
        end
    } else {
        time + stable
    };
    sim.step(t_next - time).map_err(StepFailure::Step)?;
    Ok(Advanced {
        time: t_next,
        reference,
    })
}

/// What a stable step that is not a positive number says.
pub(crate) fn unstable_reason(stable: f64) -> String {
    format!(
        "the stable time step is {stable:e} (a state without wave speeds or a degenerate cloud)"
    )
}

/// What a collapsed step says: the sizes, the particle that limits it, `last_state` (where the
/// last good state is, with a trailing space, or nothing) and what to change.
pub(crate) fn collapse_reason<R: GpuFloat, const D: usize>(
    sim: &Simulation<R, D>,
    (cloud, share): (&Cloud<R, D>, Share<'_>),
    c: &MeshlessConfig,
    (stable, reference): (f64, f64),
    (time, end): (f64, f64),
    last_state: &str,
) -> String {
    format!(
        "the stable time step collapsed to {stable:.3e}, below run.min_dt_ratio = {:e} of the \
         first step {reference:.3e} (about {:.1e} more steps to the end time {end}); {}. \
         {last_state}(lower run.cfl or scheme.order, add a limiter or MOOD, or lower \
         run.min_dt_ratio to go on)",
        c.run.min_dt_ratio,
        (end - time) / stable,
        limiting_particle(sim, cloud, share),
    )
}

/// Loads the state of checkpoint `r` into `cloud` (built from the same configuration), after
/// checking that the cloud has the checkpoint's particles: the whole cloud, or with
/// `Some((first, total))` a rank's part, the checkpoint's rows `first..first + len` of `total`.
fn load_state<R: Real, const D: usize>(
    cloud: &mut mote_cloud::Cloud<R, D>,
    r: Resume<'_>,
    part: Option<(usize, usize)>,
) -> Result<(), RunError> {
    let (first, total) = part.unwrap_or((0, cloud.len()));
    let rows = first..first + cloud.len();
    let mismatch = |what: String| FileError {
        path: r.path.to_path_buf(),
        message: format!(
            "{what}: the configuration does not rebuild the checkpoint's cloud (was it \
             changed, e.g. problem.resolution, problem.seed or scheme.radius?)"
        ),
    };
    if total != r.header.particles || cloud.variables() != r.header.variables {
        return Err(mismatch(format!(
            "{total} particles with {} variables built, {} with {} in the checkpoint",
            cloud.variables(),
            r.header.particles,
            r.header.variables
        ))
        .into());
    }
    // This rank's rows only (on one process, all of them).
    let (ids, state) = r.opened.meshless_rows::<R>(rows)?;
    if cloud.ids() != ids.as_slice() {
        return Err(mismatch("the particle ids differ".into()).into());
    }
    for (v, values) in state.iter().enumerate() {
        cloud.state_var_mut(v).copy_from_slice(values);
    }
    Ok(())
}

/// What a run keeps of its problem besides the simulation.
struct ProblemRest<const D: usize> {
    name: &'static str,
    variables: Vec<String>,
    primitive: Vec<String>,
    exact: Option<problems::ExactFn<D>>,
}

/// MOOD's statistics summed over the run, and the floor count last reported.
#[derive(Default)]
struct Totals {
    mood: MoodStats,
    floors_reported: u64,
}

impl Totals {
    fn add(&mut self, m: &MoodStats) {
        self.mood.add(m);
    }
}

/// Which interior particle has the fastest wave (along any axis) in the current state: the one
/// that limits the time step, for the message of a collapsing step. Found among each rank's
/// own particles of `cloud` (`share`) and agreed: the one-process answer (the first in the
/// one-process order of the fastest, a NaN speed the worst there is) on every rank.
/// Collective.
fn limiting_particle<R: GpuFloat, const D: usize>(
    sim: &Simulation<R, D>,
    cloud: &Cloud<R, D>,
    share: Share<'_>,
) -> String {
    let m = cloud.variables();
    let mut u = vec![R::zero(); m];
    let mut worst: Option<(usize, f64)> = None;
    for i in share.own().filter(|&i| cloud.tags()[i] == INTERIOR) {
        for (v, x) in u.iter_mut().enumerate() {
            *x = cloud.state(v)[i];
        }
        for d in 0..D {
            let n: [R; D] = std::array::from_fn(|k| if k == d { R::one() } else { R::zero() });
            let speed = sim.wave_speed(&u, n).as_f64();
            // A NaN speed is the worst there is.
            let worse = match worst {
                None => true,
                Some((_, w)) => !w.is_nan() && (speed.is_nan() || speed > w),
            };
            if worse {
                worst = Some((i, speed));
            }
        }
    }
    // The fastest over the ranks (NaN above every speed; 0: no interior particle), then the
    // lowest one-process index among the ranks that hold it, whose rank tells the others.
    let key = |s: f64| {
        if s.is_nan() {
            u64::MAX
        } else {
            comm::order_key(s)
        }
    };
    let fastest = comm::max_of(share.comm, worst.map_or(0, |(_, s)| key(s)));
    let global = |i: usize| share.first + i - share.own_start;
    let candidate = worst.filter(|&(_, s)| key(s) == fastest);
    let lowest = !comm::max_of(
        share.comm,
        candidate.map_or(0, |(i, _)| !(global(i) as u64)),
    );
    let mine = candidate.filter(|&(i, _)| global(i) as u64 == lowest);
    let holder = comm::max_of(share.comm, mine.map_or(0, |_| share.comm.rank() as u64));
    let text = match mine {
        Some((i, speed)) => {
            let pos: Vec<String> = (0..D)
                .map(|d| format!("{:.6e}", cloud.positions()[d][i].as_f64()))
                .collect();
            let state: Vec<String> = (0..m)
                .map(|v| format!("{:.6e}", cloud.state(v)[i].as_f64()))
                .collect();
            format!(
                "particle id {} (index {}) at ({}) limits it, with wave speed {speed:.3e} and \
                 state ({})",
                cloud.ids()[i],
                global(i),
                pos.join(", "),
                state.join(", ")
            )
        }
        None => "no interior particle limits it".to_string(),
    };
    if fastest == 0 {
        return text;
    }
    let told = comm::broadcast_bytes(share.comm, holder as usize, text.as_bytes());
    String::from_utf8_lossy(&told).into_owned()
}

/// The largest nominal spacing over the axes of `cloud`.
fn max_spacing<R: Real, const D: usize>(cloud: &mote_cloud::Cloud<R, D>) -> f64 {
    cloud.spacing().into_iter().fold(0.0, f64::max)
}

/// The smallest and largest value of `u` over the interior particles of every rank's `share`.
/// Collective.
fn range<R: Real>(u: &[R], tags: &[u32], share: Share<'_>) -> (f64, f64) {
    let own = share.own();
    let (lo, hi) = u[own.clone()]
        .iter()
        .zip(tags[own].iter())
        .filter(|(_, t)| **t == INTERIOR)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (x, _)| {
            (lo.min(x.as_f64()), hi.max(x.as_f64()))
        });
    let mut extremes = [-lo, hi];
    comm::max_f64s(share.comm, &mut extremes);
    (-extremes[0], extremes[1])
}

/// A snapshot of every particle at `time` in the configured formats: `snapshots/snap_NNNNN.vtu`
/// (with the `.pvd` listing all so far) and/or `snapshots/snap_NNNNN.hdf5` (with
/// `snapshots.json`; the run's precision, the Gadget names for a gas).
/// What a snapshot writes of the simulation, brought to the host: this rank's rows, a split
/// cloud's own particles (`None` on one process, whose [`Simulation::cloud`] is whole), and
/// their reconstruction orders.
fn snapshot_state<R: GpuFloat, const D: usize>(
    sim: &mut Simulation<R, D>,
) -> Result<(Option<Cloud<R, D>>, Vec<u8>), RunError> {
    sim.sync()?;
    Ok(match sim.own_part()? {
        Some(part) => {
            let orders = part.orders().to_vec();
            (Some(part), orders)
        }
        None => (None, sim.orders()?),
    })
}

/// Writes a snapshot of `cloud` (this rank's rows: [`snapshot_state`]'s), with its `orders`;
/// `sim` converts the states to primitive variables. Rank 0 of `ranks` writes the files, the
/// other ranks' rows streamed to it in order; a failure is rank 0's. Collective over `ranks`.
fn write_snapshot<R: GpuFloat, const D: usize>(
    sink: &SnapshotSink<'_>,
    sim: &Simulation<R, D>,
    (cloud, orders): (&Cloud<R, D>, &[u8]),
    rest: &ProblemRest<D>,
    time: f64,
    list: &mut Vec<(f64, String)>,
    ranks: &dyn Comm,
) -> Result<(), RunError> {
    let stream = RootStream::new(ranks, cloud.len());
    let number = snapshot_number(sink.dir, list, &stream)?;
    let (n, m) = (cloud.len(), cloud.variables());
    let primitive = primitive_fields(sim, cloud, rest);
    // The exact solution at the snapshot's time, in the variables a picture shows (the
    // primitive ones where the equation has them): `exact_NAME`, for `mote plot` and ParaView.
    let (exact_names, exact_values) = match &rest.exact {
        Some(ex) => exact_fields(sim, cloud, rest, ex, time),
        None => (Vec::new(), Vec::new()),
    };
    let pos = cloud.positions();
    if sink.format.vtk() {
        let orders: Vec<f64> = orders.iter().map(|&o| f64::from(o)).collect();
        let points: Vec<f64> = (0..n)
            .flat_map(|i| {
                std::array::from_fn::<f64, 3, _>(|d| if d < D { pos[d][i].as_f64() } else { 0.0 })
            })
            .collect();
        let tags: Vec<u64> = cloud.tags().iter().map(|&t| u64::from(t)).collect();
        let volumes: Vec<f64> = cloud.volumes().iter().map(|v| v.as_f64()).collect();
        let conserved: Vec<Vec<f64>> = (0..m)
            .map(|v| cloud.state(v).iter().map(|x| x.as_f64()).collect())
            .collect();
        let mut fields = vec![
            Field::U64("id", cloud.ids()),
            Field::U64("tag", &tags),
            Field::F64("order", &orders),
            Field::F64("volume", &volumes),
        ];
        for (name, values) in rest.variables.iter().zip(&conserved) {
            fields.push(Field::F64(name, values));
        }
        for (name, values) in rest.primitive.iter().zip(&primitive) {
            if !rest.variables.contains(name) {
                fields.push(Field::F64(name, values));
            }
        }
        for (name, values) in exact_names.iter().zip(&exact_values) {
            fields.push(Field::F64(name, values));
        }
        snapshot::add_vtk(sink.dir, number, time, list, &points, &fields, &stream)?;
    }
    if sink.format.hdf5() {
        let (lo, hi) = cloud.domain().bounds();
        let box_size = (0..D).map(|d| hi[d] - lo[d]).fold(0.0, f64::max);
        let mut columns = vec![
            Column::vector(
                "Coordinates",
                Stored::real::<R>((0..n).flat_map(|i| {
                    std::array::from_fn::<R, 3, _>(|d| if d < D { pos[d][i] } else { R::zero() })
                })),
            ),
            Column::scalar("ParticleIDs", Stored::U64(cloud.ids().to_vec())),
            Column::scalar("Tag", Stored::U32(cloud.tags().to_vec())),
            Column::scalar(
                "Order",
                Stored::U32(orders.iter().map(|&o| u32::from(o)).collect()),
            ),
            Column::scalar("Volume", Stored::real::<R>(cloud.volumes().iter().copied())),
        ];
        let gas = rest.primitive.iter().any(|p| p == "pressure");
        // A gas's mass is its density times its volume; a scalar equation's "mass" the volume
        // (Gadget readers expect `Masses`).
        let masses: Vec<f64> = (0..n)
            .map(|i| {
                let v = cloud.volumes()[i].as_f64();
                if gas {
                    cloud.state(0)[i].as_f64() * v
                } else {
                    v
                }
            })
            .collect();
        columns.push(Column::scalar(
            "Masses",
            Stored::real_from_f64::<R>(&masses),
        ));
        for (k, name) in rest.variables.iter().enumerate() {
            let values = Stored::real::<R>(cloud.state(k).iter().copied());
            let name = if gas && name == "density" {
                "Density"
            } else {
                name
            };
            columns.push(Column::scalar(name, values));
        }
        if gas {
            let col = |name: &str| rest.primitive.iter().position(|p| p == name);
            // The velocity columns, looked up once (not per particle).
            let v_cols = ["velocity_x", "velocity_y", "velocity_z"].map(col);
            let velocity: Vec<f64> = (0..n)
                .flat_map(|i| v_cols.map(|c| c.map_or(0.0, |c| primitive[c][i])))
                .collect();
            columns.push(Column::vector(
                "Velocities",
                Stored::real_from_f64::<R>(&velocity),
            ));
            if let Some(p) = col("pressure") {
                columns.push(Column::scalar(
                    "Pressure",
                    Stored::real_from_f64::<R>(&primitive[p]),
                ));
                // Specific internal energy E / rho - |v|^2 / 2, from the conserved variables
                // (no equation-of-state parameter needed).
                let energy = rest.variables.iter().position(|v| v == "energy");
                let internal: Vec<f64> = (0..n)
                    .map(|i| {
                        let rho = cloud.state(0)[i].as_f64();
                        let e = energy.map_or(0.0, |k| cloud.state(k)[i].as_f64());
                        let v2: f64 = velocity[3 * i..3 * i + 3].iter().map(|x| x * x).sum();
                        e / rho - 0.5 * v2
                    })
                    .collect();
                columns.push(Column::scalar(
                    "InternalEnergy",
                    Stored::real_from_f64::<R>(&internal),
                ));
            }
        }
        for (name, values) in exact_names.iter().zip(&exact_values) {
            columns.push(Column::scalar(name, Stored::real_from_f64::<R>(values)));
        }
        let mut header = sink.header(Family::Meshless, D, time, box_size);
        header.spacing = cloud.spacing().to_vec();
        let snapshot = Snapshot { header, columns };
        snapshot::add_hdf5(sink.dir, number, list, &snapshot, &stream)?;
    }
    Ok(())
}

/// The primitive variables at every particle, where the equation has primitive variables whose
/// names differ from the conserved ones (Euler: velocity and pressure; `rest.primitive` names
/// them), through the equation's own conversion; else none.
fn primitive_fields<R: GpuFloat, const D: usize>(
    sim: &Simulation<R, D>,
    cloud: &Cloud<R, D>,
    rest: &ProblemRest<D>,
) -> Vec<Vec<f64>> {
    let (n, m) = (cloud.len(), cloud.variables());
    if rest.primitive.is_empty() {
        return vec![Vec::new(); m];
    }
    let mut primitive: Vec<Vec<f64>> = vec![Vec::with_capacity(n); m];
    let (mut u, mut w) = (vec![R::zero(); m], vec![R::zero(); m]);
    for i in 0..n {
        for (v, x) in u.iter_mut().enumerate() {
            *x = cloud.state(v)[i];
        }
        sim.to_primitive(&u, &mut w);
        for (col, x) in primitive.iter_mut().zip(&w) {
            col.push(x.as_f64());
        }
    }
    primitive
}

/// The exact solution at every particle at `time` as named columns: the primitive variables
/// where the equation has them (converted by the equation, as the state's are), else the
/// conserved ones; each named `exact_NAME`.
fn exact_fields<R: GpuFloat, const D: usize>(
    sim: &Simulation<R, D>,
    cloud: &Cloud<R, D>,
    rest: &ProblemRest<D>,
    ex: &problems::ExactFn<D>,
    time: f64,
) -> (Vec<String>, Vec<Vec<f64>>) {
    let (n, m) = (cloud.len(), cloud.variables());
    let primitive = !rest.primitive.is_empty();
    let names = if primitive {
        &rest.primitive
    } else {
        &rest.variables
    };
    let mut columns = vec![Vec::with_capacity(n); m];
    let (mut exact, mut u, mut w) = (vec![0.0; m], vec![R::zero(); m], vec![R::zero(); m]);
    for i in 0..n {
        ex(cloud.position_of(i), time, &mut exact);
        if primitive {
            for (x, &e) in u.iter_mut().zip(&exact) {
                *x = R::cast(e);
            }
            sim.to_primitive(&u, &mut w);
            for (col, x) in columns.iter_mut().zip(&w) {
                col.push(x.as_f64());
            }
        } else {
            for (col, &e) in columns.iter_mut().zip(&exact) {
                col.push(e);
            }
        }
    }
    (
        names.iter().map(|n| format!("exact_{n}")).collect(),
        columns,
    )
}
