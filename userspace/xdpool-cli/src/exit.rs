//! Exit codes: each environment or privilege failure a user can meet has its own code,
//! documented in the README, and a one-line reason with what to do. The library
//! returns typed errors ([`RunError`]); this table is the binary's alone.

use std::fmt;

use xdpool::internal::error::RunError;

/// Process exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Success.
    Ok = 0,
    /// Any other failure.
    Failure = 1,
    /// Command line or config file invalid.
    Usage = 2,
    /// Not root, or a needed capability is missing.
    Privilege = 3,
    /// The interface (or network namespace) does not exist.
    InterfaceMissing = 4,
    /// bpffs is not mounted and cannot be mounted.
    // Documented in the README and kept reserved; nothing returns it today (xdpool
    // pins nothing in bpffs).
    #[allow(dead_code)]
    BpffsMissing = 5,
    /// The driver refused the XDP attach mode.
    XdpModeRefused = 6,
    /// The driver refused zero-copy AF_XDP.
    ZeroCopyRefused = 7,
    /// The device went away and `--no-reattach` was given.
    DeviceGone = 8,
    /// Frames were still in flight at shutdown (reported, not ignored).
    StalledShutdown = 9,
    /// The network namespace was deleted or replaced under the run and
    /// `--no-reattach` was given.
    NetnsReplaced = 10,
    /// `xdpool rules apply`: valid rules the running instance refused (or could not
    /// swap in); it keeps its rules.
    RulesRefused = 11,
    /// A packet function panicked and `workers.handler_panic = "stop"` was set.
    HandlerPanicked = 12,
}

/// An error that carries its exit code; the binary prints `xdpool: <message>`.
#[derive(Debug)]
pub struct Fatal {
    /// Exit code.
    pub code: ExitCode,
    /// One-line reason and what to do.
    pub message: String,
}

impl Fatal {
    /// A fatal error with a code.
    pub fn new(code: ExitCode, message: impl Into<String>) -> Fatal {
        Fatal {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Fatal {}

impl From<RunError> for Fatal {
    fn from(e: RunError) -> Fatal {
        let code = match &e {
            RunError::Usage(_) => ExitCode::Usage,
            RunError::Privilege(_) => ExitCode::Privilege,
            RunError::InterfaceMissing(_) => ExitCode::InterfaceMissing,
            RunError::XdpModeRefused(_) => ExitCode::XdpModeRefused,
            RunError::ZeroCopyRefused(_) => ExitCode::ZeroCopyRefused,
            RunError::DeviceGone(_) => ExitCode::DeviceGone,
            RunError::NetnsReplaced(_) => ExitCode::NetnsReplaced,
            RunError::HandlerPanicked(_) => ExitCode::HandlerPanicked,
            RunError::Failure(_) => ExitCode::Failure,
        };
        Fatal::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct() {
        use ExitCode::*;
        let all = [
            Ok,
            Failure,
            Usage,
            Privilege,
            InterfaceMissing,
            BpffsMissing,
            XdpModeRefused,
            ZeroCopyRefused,
            DeviceGone,
            StalledShutdown,
            NetnsReplaced,
            RulesRefused,
            HandlerPanicked,
        ];
        let mut v: Vec<u8> = all.iter().map(|c| *c as u8).collect();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), all.len());
    }

    /// The codes the README documents, by reason: a library error keeps the code it
    /// had when the library chose codes itself.
    #[test]
    fn run_errors_keep_their_codes() {
        let m = || "m".to_string();
        let cases = [
            (RunError::Failure(m()), 1),
            (RunError::HandlerPanicked(m()), 12),
            (RunError::Usage(m()), 2),
            (RunError::Privilege(m()), 3),
            (RunError::InterfaceMissing(m()), 4),
            (RunError::XdpModeRefused(m()), 6),
            (RunError::ZeroCopyRefused(m()), 7),
            (RunError::DeviceGone(m()), 8),
            (RunError::NetnsReplaced(m()), 10),
        ];
        for (e, code) in cases {
            // A program built on the library exits with the same code.
            assert_eq!(e.exit_code(), code as i32, "{e:?}");
            let f = Fatal::from(e);
            assert_eq!(f.code as u8, code, "{f:?}");
            assert_eq!(f.message, "m");
        }
        assert_eq!(ExitCode::BpffsMissing as u8, 5);
        assert_eq!(ExitCode::StalledShutdown as u8, 9);
        assert_eq!(ExitCode::RulesRefused as u8, 11);
    }
}
