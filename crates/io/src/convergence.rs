//! Convergence studies: a configuration run at successively halved time steps, with the errors
//! and observed orders.
//!
//! For a Kepler pair the error is against the exact solution (Kepler's equation); otherwise it
//! is the difference to the next finer level (self-convergence), so the last level has none.

use std::path::{Path, PathBuf};

use mote_core::{CpuBackend, ParticleData, PrecisionJob, Real};
use mote_gravity::{DirectSolver, KernelChoice, Simulation, Softening};
use serde::Serialize;

use crate::config::{GravityConfig, InitialConditionsKind};
use crate::files::{CsvWriter, FileError};
use crate::runner::{RunError, initial_particles};

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
        let end = c.run.end_time;
        let mut finals = Vec::new();
        let mut levels = Vec::new();
        for k in 0..self.levels {
            let dt = c.run.dt / (1u64 << k) as f64;
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
                dt: h,
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
