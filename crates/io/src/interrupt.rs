//! Stop requests: a run checks [`requested`] after every step and, when a stop was asked
//! for, writes its checkpoint and diagnostics and ends with
//! [`RunError::Interrupted`](crate::runner::RunError::Interrupted). The program sets the request from its SIGINT and
//! SIGTERM handlers (a store to an atomic, which is all a signal handler may safely do); a
//! library user may call [`request`] from anywhere.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The signal number of the first stop request, 0 while none came.
static REQUEST: AtomicUsize = AtomicUsize::new(0);

/// The flag a signal handler stores its signal number into.
pub fn flag() -> &'static AtomicUsize {
    &REQUEST
}

/// Asks the running simulation to stop after its current step (`signal`: the signal number
/// to report, e.g. 2 for SIGINT; any non-zero value).
pub fn request(signal: usize) {
    REQUEST.store(signal.max(1), Ordering::SeqCst);
}

/// The signal number of a pending stop request, if any.
pub fn requested() -> Option<usize> {
    match REQUEST.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Withdraws a pending request (for a library user who runs again after an interrupted run).
pub fn clear() {
    REQUEST.store(0, Ordering::SeqCst);
}
