//! Errors of the gravity crate.

/// What can go wrong setting up or running an N-body computation.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GravityError {
    /// A kernel was requested that this CPU cannot run.
    #[error("kernel `{requested}` is not available on this CPU (detected SIMD levels: {detected})")]
    KernelUnavailable {
        /// The kernel asked for.
        requested: String,
        /// What the CPU supports.
        detected: String,
    },
    /// A parameter is outside its allowed range.
    #[error("invalid {name} = {value}: {allowed}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The value given, as text.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A name could not be parsed.
    #[error("unknown {what} `{name}`: expected one of {expected}")]
    UnknownName {
        /// What kind of name.
        what: &'static str,
        /// The name given.
        name: String,
        /// The accepted names.
        expected: &'static str,
    },
}

impl GravityError {
    /// An [`GravityError::InvalidParameter`] for `name = value`.
    pub fn invalid(name: &'static str, value: impl ToString, allowed: &'static str) -> Self {
        GravityError::InvalidParameter {
            name,
            value: value.to_string(),
            allowed,
        }
    }
}
