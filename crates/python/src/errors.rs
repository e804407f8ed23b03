//! The library's errors as Python exceptions, with the program's messages: a configuration
//! mistake is a `ValueError` naming the key, a memory limit a `MemoryError` with the byte
//! counts, a state that blew up a `mote.SimulationError` naming the particle and the step, a
//! stop request a `KeyboardInterrupt`.

use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;

use mote_io::runner::RunError;

create_exception!(
    mote,
    SimulationError,
    PyRuntimeError,
    "A simulation that could not go on: a state that became NaN or infinite (the message names \
     the particle and the step), no stable time step, or a device that failed."
);

/// A configuration error (`section.key: what is wrong and what is allowed`).
pub fn config(e: mote_io::ConfigError) -> PyErr {
    // The library says "(set with --set)" of a key given on the command line; from Python the
    // key was a keyword argument or an entry of `set=`, which the key names already.
    PyValueError::new_err(e.to_string().replace(" (set with --set)", ""))
}

/// A run's error as the exception a Python user expects of it.
pub fn run(e: RunError) -> PyErr {
    let message = e.to_string();
    match e {
        RunError::Capacity(_) => PyMemoryError::new_err(message),
        RunError::InitialConditions(_)
        | RunError::Refused(_)
        | RunError::Gravity(_)
        | RunError::Cloud(_) => PyValueError::new_err(message),
        RunError::Interrupted { .. } | RunError::Stopped { .. } => {
            PyKeyboardInterrupt::new_err(message)
        }
        RunError::File(_) => PyOSError::new_err(message),
        RunError::NonFinite { .. } | RunError::Meshless { .. } | RunError::Gpu(_) => {
            SimulationError::new_err(message)
        }
        // Several MPI ranks: never in the module (it runs on one process), but named anyway.
        RunError::Rank(_) => SimulationError::new_err(message),
    }
}

/// Runs `f` (a configured run) on a worker thread with the interpreter released, while this
/// thread looks for Ctrl-C every 50 ms through Python's own handler (whatever handler the user
/// installed) and, when it raises, asks the run to stop at its next step boundary
/// ([`mote_io::interrupt`]: the run writes its checkpoint and ends with `Interrupted`). Returns
/// what `f` returned and the exception the handler raised, if it did. The request is withdrawn
/// before and after, so one Ctrl-C stops one run.
pub fn with_interrupts<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> T + Send,
) -> (T, Option<PyErr>) {
    mote_io::interrupt::clear();
    let mut raised = None;
    let out = std::thread::scope(|scope| {
        let worker = scope.spawn(f);
        loop {
            let finished = py.detach(|| {
                let started = Instant::now();
                while !worker.is_finished() && started.elapsed() < Duration::from_millis(50) {
                    std::thread::sleep(Duration::from_millis(2));
                }
                worker.is_finished()
            });
            if raised.is_none()
                && let Err(e) = py.check_signals()
            {
                raised = Some(e);
                mote_io::interrupt::request(2);
            }
            if finished {
                break worker.join();
            }
        }
    });
    mote_io::interrupt::clear();
    match out {
        Ok(out) => (out, raised),
        // A panic in the run: carried on to this thread, where pyo3 turns it into an exception.
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
