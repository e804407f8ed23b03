//! Convergence studies.
//!
//! Gravity: a configuration run at successively halved time steps, with the errors and observed
//! orders. For a Kepler pair the error is against the exact solution (Kepler's equation);
//! otherwise it is the difference to the next finer level (self-convergence), so the last level
//! has none.
//!
//! Meshless: a problem with an exact solution run at successively halved particle spacings (the
//! time step follows from the CFL number), each level a complete run directory; the L1, L2 and
//! max errors of every conserved variable at the end time and the observed orders.

use std::path::{Path, PathBuf};

use mote_core::{CpuBackend, ParticleData, PrecisionJob, Real};
use mote_gravity::{DirectSolver, KernelChoice, Simulation, Softening};
use serde::Serialize;

use crate::config::{GravityConfig, InitialConditionsKind};
use crate::files::{CsvWriter, FileError};
use crate::meshless::{MeshlessConfig, run_meshless};
use crate::runner::{Progress, RunError, initial_particles};
use mote_cloud::exact::Errors;

/// One level of a study.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Level {
    /// Time step.
    pub dt: f64,
    /// Steps to the end time.
    pub steps: u64,
    /// RMS position error over the particles (None at the finest level of a self-convergence
    /// study).
    pub error: Option<f64>,
    /// `log2(error / next error)`: the order between this level and the next.
    pub order: Option<f64>,
}

/// The result of a study.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Study {
    /// `exact` (Kepler) or `self` (successive levels).
    pub reference: &'static str,
    /// The levels, coarsest first.
    pub levels: Vec<Level>,
}

/// Runs `config` at `levels` time steps `dt, dt/2, ...` to its end time (no outputs).
pub fn convergence_gravity(config: &GravityConfig, levels: usize) -> Result<Study, RunError> {
    config.run.precision.dispatch(Job { config, levels })
}

struct Job<'a> {
    config: &'a GravityConfig,
    levels: usize,
}

/// Exact positions of a Kepler pair started at pericentre (see `mote_gravity`'s Kepler set-up).
pub fn kepler_exact(a: f64, e: f64, m1: f64, m2: f64, t: f64) -> [[f64; 3]; 2] {
    let mu = m1 + m2;
    let n = (mu / (a * a * a)).sqrt();
    let mean = (n * t).rem_euclid(2.0 * std::f64::consts::PI);
    let mut ecc = if e < 0.8 { mean } else { std::f64::consts::PI };
    for _ in 0..50 {
        let f = ecc - e * ecc.sin() - mean;
        let step = f / (1.0 - e * ecc.cos());
        ecc -= step;
        if step.abs() < 1e-16 {
            break;
        }
    }
    let x = a * (ecc.cos() - e);
    let y = a * (1.0 - e * e).sqrt() * ecc.sin();
    let (f1, f2) = (m2 / mu, m1 / mu);
    [[-f1 * x, -f1 * y, 0.0], [f2 * x, f2 * y, 0.0]]
}

fn positions<R: Real>(p: &ParticleData<R>) -> Vec<[f64; 3]> {
    (0..p.len())
        .map(|i| p.positions().get(i).map(|x| x.as_f64()))
        .collect()
}

fn rms(a: &[[f64; 3]], b: &[[f64; 3]]) -> f64 {
    let s: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (0..3).map(|k| (x[k] - y[k]).powi(2)).sum::<f64>())
        .sum();
    (s / a.len() as f64).sqrt()
}

impl PrecisionJob for Job<'_> {
    type Output = Result<Study, RunError>;

    fn run<R: Real>(self) -> Self::Output {
        let c = self.config;
        let backend = CpuBackend::threads(c.run.threads);
        // In engine time (G = 1, crate::units); the levels report the run's time steps.
        let s = c.units().time_factor();
        let end = c.run.end_time * s;
        let mut finals = Vec::new();
        let mut levels = Vec::new();
        for k in 0..self.levels {
            let dt = c.run.dt * s / (1u64 << k) as f64;
            let steps = (end / dt).ceil() as u64;
            let h = end / steps as f64;
            let solver = DirectSolver::new(
                Softening::new(c.solver.softening)?,
                c.solver.kernel.parse::<KernelChoice>()?,
                backend,
            )?;
            let mut sim = Simulation::new(
                initial_particles::<R>(&c.initial_conditions)?,
                Box::new(solver),
                c.integrator.kind.build(backend),
            );
            sim.run(steps, h);
            finals.push(positions(&sim.particles));
            levels.push(Level {
                dt: h / s,
                steps,
                error: None,
                order: None,
            });
        }
        let ic = c.initial_conditions.clone().with_defaults();
        let reference = if ic.kind == InitialConditionsKind::Kepler {
            let exact = kepler_exact(
                ic.semi_major_axis.unwrap_or(1.0),
                ic.eccentricity.unwrap_or(0.0),
                ic.m1.unwrap_or(0.5),
                ic.m2.unwrap_or(0.5),
                end,
            );
            for (l, f) in levels.iter_mut().zip(&finals) {
                l.error = Some(rms(f, &exact));
            }
            "exact"
        } else {
            for k in 0..levels.len().saturating_sub(1) {
                levels[k].error = Some(rms(&finals[k], &finals[k + 1]));
            }
            "self"
        };
        for k in 0..levels.len().saturating_sub(1) {
            if let (Some(a), Some(b)) = (levels[k].error, levels[k + 1].error) {
                levels[k].order = Some((a / b).log2() / (levels[k].dt / levels[k + 1].dt).log2());
            }
        }
        Ok(Study { reference, levels })
    }
}

/// Writes `convergence.csv` and `convergence.png` (error against time step, log-log) into
/// `dir`; returns the files.
pub fn write_study(dir: &Path, study: &Study) -> Result<Vec<PathBuf>, FileError> {
    std::fs::create_dir_all(dir).map_err(|e| FileError {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let csv_path = dir.join("convergence.csv");
    let mut csv = CsvWriter::create(&csv_path, &["dt", "steps", "error", "order"])?;
    for l in &study.levels {
        csv.row(&[
            l.dt,
            l.steps as f64,
            l.error.unwrap_or(f64::NAN),
            l.order.unwrap_or(f64::NAN),
        ])?;
    }
    let csv_path = csv.finish()?;
    let points: Vec<(f64, f64)> = study
        .levels
        .iter()
        .filter_map(|l| l.error.map(|e| (l.dt, e)))
        .collect();
    let png = dir.join("convergence.png");
    crate::plot::loglog(
        &png,
        &points,
        "time step",
        &format!("position error ({} reference)", study.reference),
    )?;
    Ok(vec![csv_path, png])
}

/// One level of a meshless study.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeshlessLevel {
    /// Particles per unit length.
    pub resolution: usize,
    /// The nominal particle spacing.
    pub spacing: f64,
    /// Particles inside the domain.
    pub particles: usize,
    /// Steps to the end time.
    pub steps: u64,
    /// The errors of every conserved variable (by name) at the end time.
    pub errors: Vec<(String, Errors)>,
    /// The observed orders `log(e_coarser / e) / log(h_coarser / h)` in L1, L2 and max of every
    /// variable against the next coarser level (none on the coarsest).
    pub orders: Vec<[Option<f64>; 3]>,
    /// The level's run directory.
    pub dir: PathBuf,
}

/// The result of a meshless study.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeshlessStudy {
    /// The problem's name.
    pub problem: String,
    /// The scheme's reconstruction order (the order a smooth solution should show).
    pub order: usize,
    /// The end time the errors are measured at.
    pub end_time: f64,
    /// The levels, coarsest first.
    pub levels: Vec<MeshlessLevel>,
}

/// The resolutions of a study of `levels` levels whose finest is `finest`: halved from one
/// level to the next coarser, each at least 4 particles per unit length.
pub fn meshless_resolutions(finest: usize, levels: usize) -> Result<Vec<usize>, String> {
    let resolutions: Vec<usize> = (0..levels)
        .map(|k| {
            let divisor = 1u64 << (levels - 1 - k).min(63);
            (finest as f64 / divisor as f64).round() as usize
        })
        .collect();
    if resolutions[0] < 4 {
        return Err(format!(
            "{levels} levels halving from problem.resolution = {finest} would start at {} \
             particles per unit length (at least 4): use fewer levels or a finer resolution",
            resolutions[0]
        ));
    }
    Ok(resolutions)
}

/// Runs `config` at `levels` resolutions, the finest its own `problem.resolution` and each
/// coarser one half the one above, into `dir/rNNNN` (run directories as `mote run` writes them,
/// with the initial and final snapshots); `force` replaces earlier level directories.
/// `on_level` is called as each level ends. Refused, before anything runs, for a problem
/// without an exact solution.
pub fn convergence_meshless(
    config: &MeshlessConfig,
    levels: usize,
    dir: &Path,
    force: bool,
    git_commit: &str,
    on_level: &mut dyn FnMut(&MeshlessLevel),
) -> Result<MeshlessStudy, RunError> {
    let config = config.clone().with_defaults();
    if !config.has_exact_solution() {
        return Err(RunError::Refused(format!(
            "problem `{}` has no exact solution to measure errors against; `mote convergence` \
             runs the problems that have one (advection_wave, burgers_top_hat, sod, \
             isentropic_vortex, riemann)",
            config.problem.kind.name()
        )));
    }
    let finest = config.problem.resolution.expect("filled by with_defaults");
    let resolutions = meshless_resolutions(finest, levels).map_err(RunError::Refused)?;
    let mut study = MeshlessStudy {
        problem: config.problem.kind.name().to_string(),
        order: config.scheme.order,
        end_time: config.run.end_time.expect("filled by with_defaults"),
        levels: Vec::new(),
    };
    for resolution in resolutions {
        let mut c = config.clone();
        c.problem.resolution = Some(resolution);
        c.output.snapshots = 1;
        let level_dir = dir.join(format!("r{resolution:04}"));
        let report = run_meshless(&c, &level_dir, force, git_commit, &mut |_: Progress| {})?;
        let orders = match study.levels.last() {
            None => vec![[None; 3]; report.variable_errors.len()],
            Some(coarser) => {
                let ratio = (coarser.spacing / report.spacing).ln();
                coarser
                    .errors
                    .iter()
                    .zip(&report.variable_errors)
                    .map(|((_, a), (_, b))| {
                        let order = |x: f64, y: f64| {
                            (x > 0.0 && y > 0.0 && ratio > 0.0).then(|| (x / y).ln() / ratio)
                        };
                        [order(a.l1, b.l1), order(a.l2, b.l2), order(a.max, b.max)]
                    })
                    .collect()
            }
        };
        let level = MeshlessLevel {
            resolution,
            spacing: report.spacing,
            particles: report.interior_particles,
            steps: report.steps,
            errors: report.variable_errors,
            orders,
            dir: level_dir,
        };
        on_level(&level);
        study.levels.push(level);
    }
    Ok(study)
}

/// Writes `convergence.csv` (one row per level: resolution, spacing, particles, steps, then for
/// every variable its L1, L2 and max errors and their observed orders) and `convergence.png`
/// (the L1 error of every variable against the spacing, log-log, with the slope of the
/// scheme's order) into `dir`; returns the files.
pub fn write_meshless_study(dir: &Path, study: &MeshlessStudy) -> Result<Vec<PathBuf>, FileError> {
    std::fs::create_dir_all(dir).map_err(|e| FileError {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let names: Vec<&str> = study.levels[0]
        .errors
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    let mut header: Vec<String> = ["resolution", "spacing", "particles", "steps"]
        .map(String::from)
        .to_vec();
    for n in &names {
        for norm in ["l1", "l2", "max"] {
            header.push(format!("{norm}_error_{n}"));
        }
        for norm in ["l1", "l2", "max"] {
            header.push(format!("{norm}_order_{n}"));
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut csv = CsvWriter::create(&dir.join("convergence.csv"), &header)?;
    for l in &study.levels {
        let mut row = vec![
            l.resolution as f64,
            l.spacing,
            l.particles as f64,
            l.steps as f64,
        ];
        for ((_, e), o) in l.errors.iter().zip(&l.orders) {
            row.extend([e.l1, e.l2, e.max]);
            row.extend(o.map(|x| x.unwrap_or(f64::NAN)));
        }
        csv.row(&row)?;
    }
    let csv_path = csv.finish()?;
    let series: Vec<(String, Vec<(f64, f64)>)> = names
        .iter()
        .enumerate()
        .map(|(v, n)| {
            let points = study
                .levels
                .iter()
                .map(|l| (l.spacing, l.errors[v].1.l1))
                .collect();
            (n.to_string(), points)
        })
        .collect();
    let png = dir.join("convergence.png");
    crate::plot::loglog_series(
        &png,
        &series,
        &crate::plot::Axes {
            x: "particle spacing h",
            y: "L1 error at the end time (volume-weighted mean |u - u_exact|)",
            title: &format!(
                "{}: convergence at t = {}, order-{} scheme",
                study.problem, study.end_time, study.order
            ),
        },
        Some(study.order as f64),
    )?;
    Ok(vec![csv_path, png])
}
