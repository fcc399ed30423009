//! Why a run could not start or did not end well: [`RunError`], one variant per
//! reason. The library never exits the process; the `xdpool` binary maps each
//! variant to its documented exit code (xdpool-cli's exit.rs, listed in the README).

/// An error of [`crate::run::run`] (and of [`crate::privilege::require_privileges`]).
/// Each carries a one-line reason that says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The config file or an option cannot work.
    #[error("{0}")]
    Usage(String),
    /// Not root, or a needed capability (or the memlock limit) is missing.
    #[error("{0}")]
    Privilege(String),
    /// An interface or a network namespace does not exist.
    #[error("{0}")]
    InterfaceMissing(String),
    /// The driver refused the XDP attach mode.
    #[error("{0}")]
    XdpModeRefused(String),
    /// The driver refused zero-copy AF_XDP.
    #[error("{0}")]
    ZeroCopyRefused(String),
    /// A device went away and re-attaching was turned off (`no_reattach`).
    #[error("{0}")]
    DeviceGone(String),
    /// A port's network namespace was deleted or replaced under the run and
    /// re-attaching was turned off.
    #[error("{0}")]
    NetnsReplaced(String),
    /// A packet function panicked and `workers.handler_panic = "stop"` was set.
    #[error("{0}")]
    HandlerPanicked(String),
    /// Any other failure.
    #[error("{0}")]
    Failure(String),
}

impl RunError {
    /// The process exit code `xdpool run` ends with for this error (the README's
    /// table), for a program's own `main`:
    /// `std::process::exit(e.exit_code())`.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Failure(_) => 1,
            RunError::Usage(_) => 2,
            RunError::Privilege(_) => 3,
            RunError::InterfaceMissing(_) => 4,
            RunError::XdpModeRefused(_) => 6,
            RunError::ZeroCopyRefused(_) => 7,
            RunError::DeviceGone(_) => 8,
            RunError::NetnsReplaced(_) => 10,
            RunError::HandlerPanicked(_) => 12,
        }
    }
}
