//! The library's errors as Python exceptions, with the program's messages: a configuration
//! mistake is a `ValueError` naming the key, a memory limit a `MemoryError` with the byte
//! counts, a state that blew up a `mote.SimulationError` naming the particle and the step, a
//! stop request a `KeyboardInterrupt`.

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
    }
}

/// Runs `f` with the interpreter released and SIGINT turned into a stop request at the next
/// step boundary ([`mote_io::interrupt`]): Python's own handler would only run once `f`
/// returned. The request is withdrawn before and after, so one Ctrl-C stops one run.
pub fn with_sigint<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    mote_io::interrupt::clear();
    let flag = mote_io::interrupt::flag();
    // Only the main thread receives Python's signals; elsewhere the handler is not touched.
    let id = signal_hook::flag::register_usize(signal_hook::consts::SIGINT, flag, 2).ok();
    let out = py.detach(f);
    if let Some(id) = id {
        signal_hook::low_level::unregister(id);
    }
    mote_io::interrupt::clear();
    out
}
