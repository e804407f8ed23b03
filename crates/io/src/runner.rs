//! Running a configured simulation: build it, price and reserve its memory, advance it to the
//! end time, and write the run directory.
//!
//! A run directory holds `config.toml` (every resolved setting), `provenance.json` (what ran,
//! where, when) and `diagnostics.csv` (conserved quantities over time). Every file is written
//! atomically; the diagnostics grow in `diagnostics.csv.partial` until the run ends.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use mote_core::memory::{MemoryModel, ReserveOptions, memory_limit, reserve};
use mote_core::{
    Budgeted, CapacityError, CapacityUnit, CpuBackend, MachineInfo, ParticleData, PrecisionJob,
    Real,
};
use mote_gravity::initial_conditions as ic;
use mote_gravity::{
    Diagnostics, DirectSolver, GravityError, Integrator, KernelChoice, Simulation, Softening,
    SolverInfo,
};
use serde::Serialize;

use crate::config::{GravityConfig, InitialConditions, InitialConditionsKind, parse_memory_limit};
use crate::files::{CsvWriter, FileError, create_run_dir, write_atomic};

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file could not be written.
    #[error(transparent)]
    File(#[from] FileError),
    /// The run does not fit its memory limit.
    #[error(transparent)]
    Capacity(#[from] CapacityError),
    /// Invalid physical parameters.
    #[error(transparent)]
    Gravity(#[from] GravityError),
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

/// Where a run stands, for progress display.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Steps taken.
    pub step: u64,
    /// Steps the run will take.
    pub total_steps: u64,
    /// Simulated time.
    pub time: f64,
    /// Relative energy error at the last diagnostics output.
    pub energy_error: f64,
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
    kernel: String,
    precision: String,
    seed: Option<u64>,
    particles: usize,
    memory_limit_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    machine: MachineInfo,
    started: String,
    finished: Option<String>,
    wall_seconds: Option<f64>,
    steps: Option<u64>,
    final_relative_energy_error: Option<f64>,
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
fn particle_count(ic: &InitialConditions) -> usize {
    match ic.kind {
        InitialConditionsKind::Kepler => 2,
        InitialConditionsKind::GalaxyCollision => 2 * ic.particles.unwrap_or(0),
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
    use InitialConditionsKind::*;
    let c = c.clone().with_defaults();
    let n = c.particles.unwrap_or(0);
    let seed = c.seed.unwrap_or(1);
    let get = |v: Option<f64>| v.expect("filled by with_defaults");
    match c.kind {
        Plummer => ic::plummer(n, seed),
        UniformSphere => ic::uniform_sphere(n, get(c.radius), get(c.virial_ratio), seed),
        ColdCollapse => ic::cold_collapse(n, get(c.radius), seed),
        Kepler => ic::kepler(&ic::Kepler {
            semi_major_axis: get(c.semi_major_axis),
            eccentricity: get(c.eccentricity),
            m1: get(c.m1),
            m2: get(c.m2),
        }),
        DiscGalaxy => ic::disc_galaxy(&galaxy(&c), seed),
        GalaxyCollision => {
            let g = galaxy(&c);
            ic::galaxy_collision(
                &ic::GalaxyCollision {
                    first: g,
                    second: g,
                    separation: get(c.separation),
                    pericentre: get(c.pericentre),
                    inclination: get(c.inclination_degrees).to_radians(),
                },
                seed,
            )
        }
    }
}

/// Fails, naming the particle, if any position or velocity of `p` is NaN or infinite.
/// `csv` is where the diagnostics written so far are.
pub fn check_finite<R: Real>(
    p: &ParticleData<R>,
    step: u64,
    time: f64,
    csv: &Path,
) -> Result<(), RunError> {
    for (name, span) in [("position", p.positions()), ("velocity", p.velocities())] {
        let (x, y, z) = span.components();
        if let Some(index) =
            (0..p.len()).find(|&i| !(x[i].is_finite() && y[i].is_finite() && z[i].is_finite()))
        {
            return Err(RunError::NonFinite {
                step,
                time,
                id: p.ids()[index],
                index,
                what: format!("{name} {:?}", span.get(index)),
                csv: csv.display().to_string(),
            });
        }
    }
    Ok(())
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

impl PrecisionJob for GravityRun<'_> {
    type Output = Result<RunReport, RunError>;

    fn run<R: Real>(self) -> Self::Output {
        let c = self.config;
        let started = SystemTime::now();
        let clock = Instant::now();
        let backend = CpuBackend::threads(c.run.threads);
        let n = particle_count(&c.initial_conditions.clone().with_defaults());
        let integrator: Box<dyn Integrator<R>> = c.integrator.kind.build(backend);

        // Price the run before allocating it: a limit that cannot hold it fails here, with the
        // estimate and the limit in the message.
        let limit = match &c.run.memory_limit {
            Some(text) => Some(parse_memory_limit(text).expect("validated with the config")),
            None => memory_limit(),
        };
        let options = ReserveOptions::default();
        if let Some(limit) = limit {
            let prototype = ParticleData::<R>::new();
            let model = MemoryModel::of(&[&prototype, integrator.as_ref() as &dyn Budgeted]);
            let needed = model.bytes(n, 0);
            let usable = (limit as f64 * (1.0 - options.tolerance)) as u64;
            if needed > usable {
                return Err(CapacityError {
                    what: format!(
                        "memory limit for {n} particles in {} (estimate {needed} bytes; limit \
                         {limit} bytes less {:.0} % tolerance)",
                        R::PRECISION,
                        options.tolerance * 100.0
                    ),
                    requested: needed,
                    available: usable,
                    unit: CapacityUnit::Bytes,
                }
                .into());
            }
        }

        let softening = Softening::new(c.solver.softening)?;
        let kernel: KernelChoice = c.solver.kernel.parse()?;
        let solver = DirectSolver::new(softening, kernel, backend)?;
        let particles = initial_particles::<R>(&c.initial_conditions)?;
        create_run_dir(self.dir, self.force)?;
        write_atomic(&self.dir.join("config.toml"), c.to_toml().as_bytes())?;
        let mut sim = Simulation::new(particles, Box::new(solver.clone()), integrator);
        let reservation = match limit {
            Some(limit) => Some(reserve(&mut sim.budgeted_parts(), limit, options)?),
            None => None,
        };

        let mut provenance = Provenance {
            mote_version: env!("CARGO_PKG_VERSION"),
            git_commit: self.git_commit,
            physics: "gravity",
            backend: "cpu".to_string(),
            threads: backend.thread_count(),
            kernel: solver.name(),
            precision: R::PRECISION.to_string(),
            seed: c.initial_conditions.seed,
            particles: sim.particles.len(),
            memory_limit_bytes: limit,
            reserved_bytes: reservation.map(|r| r.bytes),
            machine: MachineInfo::detect(),
            started: humantime::format_rfc3339_seconds(started).to_string(),
            finished: None,
            wall_seconds: None,
            steps: None,
            final_relative_energy_error: None,
        };
        let provenance_path = self.dir.join("provenance.json");
        let write_provenance = |p: &Provenance<'_>| {
            write_atomic(
                &provenance_path,
                serde_json::to_string_pretty(p)
                    .expect("serialisable")
                    .as_bytes(),
            )
        };
        write_provenance(&provenance)?;

        let csv_path = self.dir.join("diagnostics.csv");
        let mut csv = CsvWriter::create(&csv_path, &DIAGNOSTICS_HEADER)?;
        let end = c.run.end_time;
        let dt = c.run.dt;
        // Steps of `dt`; the last one shortened to land exactly on the end time (a remainder
        // below a millionth of a step is absorbed into the previous step).
        let total_steps = ((end / dt) * (1.0 - 1e-12)).ceil().max(1.0) as u64;
        let step_end = |k: u64| if k >= total_steps { end } else { k as f64 * dt };
        let d0 = sim.diagnostics(backend);
        let e0 = d0.total;
        let write_row = |csv: &mut CsvWriter, step: u64, time: f64, d: &Diagnostics, wall: f64| {
            csv.row(&[
                step as f64,
                time,
                d.kinetic,
                d.potential,
                d.total,
                d.relative_energy_error(e0),
                d.momentum[0],
                d.momentum[1],
                d.momentum[2],
                d.angular_momentum[0],
                d.angular_momentum[1],
                d.angular_momentum[2],
                d.virial_ratio,
                d.mass,
                wall,
            ])
        };
        write_row(&mut csv, 0, 0.0, &d0, 0.0)?;
        let mut time = 0.0;
        let mut last = d0;
        for k in 1..=total_steps {
            let t_next = step_end(k);
            sim.step(t_next - time);
            time = t_next;
            if k % c.output.diagnostics_every == 0 || k == total_steps {
                check_finite(
                    &sim.particles,
                    k,
                    time,
                    &crate::files::partial_path(&csv_path),
                )?;
                last = sim.diagnostics(backend);
                write_row(&mut csv, k, time, &last, clock.elapsed().as_secs_f64())?;
                (self.progress)(Progress {
                    step: k,
                    total_steps,
                    time,
                    energy_error: last.relative_energy_error(e0),
                });
            }
        }
        csv.finish()?;
        let wall = clock.elapsed().as_secs_f64();
        provenance.finished =
            Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
        provenance.wall_seconds = Some(wall);
        provenance.steps = Some(total_steps);
        provenance.final_relative_energy_error = Some(last.relative_energy_error(e0));
        write_provenance(&provenance)?;
        Ok(RunReport {
            dir: self.dir.to_path_buf(),
            steps: total_steps,
            time,
            energy_error: last.relative_energy_error(e0),
            virial_ratio: last.virial_ratio,
            wall_seconds: wall,
            kernel: solver.name(),
            particles: sim.particles.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nan_in_the_state_is_reported_with_the_particle() {
        let mut p = ic::plummer::<f64>(100, 3).unwrap();
        let csv = Path::new("runs/x/diagnostics.csv.partial");
        assert!(check_finite(&p, 5, 0.5, csv).is_ok());
        // Injected NaN in one particle's velocity, after a permutation so index != id.
        p.apply_permutation(&mote_core::Permutation::new((0..100).rev().collect()).unwrap());
        p.view_mut().velocity.set(10, [0.0, f64::NAN, 0.0]);
        let e = check_finite(&p, 7, 0.875, csv).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("step 7, time 0.875: particle id 89 (index 10)"),
            "{text}"
        );
        assert!(text.contains("velocity [0.0, NaN, 0.0]"), "{text}");
        assert!(text.contains("diagnostics.csv.partial"), "{text}");
    }

    #[test]
    fn every_kind_builds_the_particles_it_announces() {
        use InitialConditionsKind::*;
        for kind in [
            Plummer,
            UniformSphere,
            ColdCollapse,
            Kepler,
            DiscGalaxy,
            GalaxyCollision,
        ] {
            let c = InitialConditions {
                kind,
                particles: Some(64),
                ..Default::default()
            };
            let c = if kind == Kepler {
                InitialConditions {
                    kind,
                    ..Default::default()
                }
            } else {
                c
            };
            let p = initial_particles::<f32>(&c).unwrap();
            assert_eq!(
                p.len(),
                particle_count(&c.clone().with_defaults()),
                "{kind:?}"
            );
        }
    }
}
