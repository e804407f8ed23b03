//! # mote-python
//!
//! The compiled part of the Python package `mote` (`mote._mote`; the package's `__init__.py`
//! re-exports it and adds the pure-Python conveniences). It wraps the library, not the program:
//!
//! - [`gravity::Gravity`]: an N-body simulation built from NumPy arrays or the built-in initial
//!   conditions, driven step by step, whose particle arrays are zero-copy NumPy views;
//! - [`run`]: a configured run, exactly what `mote run` runs (the same library function, the
//!   same run directory);
//! - [`load`]: the arrays of a snapshot (`.vtu`, `.hdf5`) or a checkpoint.
//!
//! Errors reach Python as exceptions carrying the program's messages ([`errors`]); no panic
//! does (pyo3 turns one into `PanicException`, and the module's own code does not panic on
//! user input).

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyDict;

mod errors;
mod gravity;
mod load;
mod meshless;
mod settings;
mod views;

pub use errors::SimulationError;

/// A configured run: what `mote run CONFIG --out OUT [--force] [--set K=V ...]` runs.
/// Returns the run directory and the summary; the Python wrapper (`mote.run`) reads the
/// diagnostics and snapshot list from the directory.
#[pyfunction]
#[pyo3(signature = (config, set, out, force, threads))]
fn run_config<'py>(
    py: Python<'py>,
    config: Option<PathBuf>,
    set: Option<&Bound<'py, PyDict>>,
    out: Option<PathBuf>,
    force: bool,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut overrides = Vec::new();
    settings::set_overrides(set, &mut overrides)?;
    if let Some(t) = threads {
        overrides.push(format!("run.threads={t}"));
    }
    let (text, stem) = mote_io::config::read_config_text(config.as_deref()).map_err(|e| {
        let path = config.as_deref().unwrap_or(Path::new("")).display();
        match e.kind() {
            std::io::ErrorKind::NotFound => {
                pyo3::exceptions::PyFileNotFoundError::new_err(format!("{path}: {e}"))
            }
            _ => pyo3::exceptions::PyOSError::new_err(format!("{path}: {e}")),
        }
    })?;
    let source = mote_io::Source {
        file: config.as_deref(),
        text: &text,
    };
    let parsed = mote_io::Config::parse(&source, &overrides).map_err(errors::config)?;
    let dir = out.unwrap_or_else(|| Path::new("runs").join(&stem));
    mote_io::files::check_run_dir(&dir, force)
        .map_err(|e| pyo3::exceptions::PyFileExistsError::new_err(e.to_string()))?;
    let commit = env!("MOTE_GIT_COMMIT");
    let summary = PyDict::new(py);
    // The run holds no Python object: it runs on a worker thread with the interpreter
    // released, and a Ctrl-C asks it to stop at the next step boundary (it writes its
    // checkpoint, as the program does on SIGINT).
    let (outcome, raised) = errors::with_interrupts(py, || match &parsed {
        mote_io::Config::Gravity(c) => {
            mote_io::runner::run_gravity(c, &dir, force, commit, &mut |_| {}).map(Summary::Gravity)
        }
        mote_io::Config::Meshless(c) => {
            mote_io::meshless::run_meshless(c, &dir, force, commit, &mut |_| {})
                .map(Summary::Meshless)
        }
    });
    // A run that a Ctrl-C stopped reports its own interruption (with its checkpoint); one that
    // ended before the request was seen reports the handler's exception.
    let outcome = outcome.map_err(errors::run)?;
    if let Some(e) = raised {
        return Err(e);
    }
    match outcome {
        Summary::Gravity(r) => {
            summary.set_item("physics", "gravity")?;
            summary.set_item("particles", r.particles)?;
            summary.set_item("steps", r.steps)?;
            summary.set_item("time", r.time)?;
            summary.set_item("energy_error", r.energy_error)?;
            summary.set_item("virial_ratio", r.virial_ratio)?;
            summary.set_item("wall_seconds", r.wall_seconds)?;
            summary.set_item("dir", r.dir)?;
        }
        Summary::Meshless(r) => {
            summary.set_item("physics", "meshless")?;
            summary.set_item("problem", r.problem)?;
            summary.set_item("particles", r.particles)?;
            summary.set_item("steps", r.steps)?;
            summary.set_item("time", r.time)?;
            summary.set_item("mood_reductions", r.mood.reductions)?;
            if let Some(e) = r.errors {
                summary.set_item("error_l1", e.l1)?;
                summary.set_item("error_relative_l2", e.relative_l2)?;
            }
            summary.set_item("wall_seconds", r.wall_seconds)?;
            summary.set_item("dir", r.dir)?;
        }
    }
    Ok(summary)
}

/// What a configured run reports.
enum Summary {
    Gravity(mote_io::runner::RunReport),
    Meshless(mote_io::meshless::MeshlessReport),
}

/// The version of the library the module was built from, and its commit.
#[pyfunction]
fn build_info() -> (String, String, bool) {
    (
        env!("CARGO_PKG_VERSION").to_string(),
        env!("MOTE_GIT_COMMIT").to_string(),
        cfg!(feature = "hdf5"),
    )
}

/// The compiled module `mote._mote`.
#[pymodule]
fn _mote(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add_class::<gravity::Gravity>()?;
    m.add_class::<meshless::Meshless>()?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(load::load_file, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    Ok(())
}
