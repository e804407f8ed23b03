//! Errors of the meshless crate.

use mote_core::CapacityError;

/// What can go wrong building a cloud or its neighbour lists.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// A parameter is outside its allowed range.
    #[error("invalid {name} = {value}: {allowed}")]
    InvalidParameter {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// The state holds a NaN or an infinity after a step.
    #[error(
        "non-finite state: variable {variable} of particle id {id} at {position}, {when} step {step} (t = {time})"
    )]
    NonFinite {
        /// The variable.
        variable: usize,
        /// The particle's stable id.
        id: u64,
        /// Its position.
        position: String,
        /// "before" or "after" the step.
        when: &'static str,
        /// Steps taken.
        step: u64,
        /// Simulated time.
        time: f64,
    },
    /// A budgeted buffer is full.
    #[error(transparent)]
    Capacity(#[from] CapacityError),
}

impl CloudError {
    /// An [`CloudError::InvalidParameter`].
    pub fn invalid(name: &'static str, value: impl ToString, allowed: impl ToString) -> Self {
        CloudError::InvalidParameter {
            name,
            value: value.to_string(),
            allowed: allowed.to_string(),
        }
    }
}
