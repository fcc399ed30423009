//! Exit codes: each environment or privilege failure a user can meet has its own code,
//! documented in the README, and a one-line reason with what to do.

use std::fmt;

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

/// The capabilities `xdpool run` checks at start: (bit, name). deploy/xdpool.service
/// and deploy/kubernetes/xdpool.yaml grant exactly these plus CAP_SYS_ADMIN (setns
/// into a port's namespace), and tests/deploy_files.rs holds them to it.
pub const REQUIRED_CAPABILITIES: [(u32, &str); 5] = [
    (12, "CAP_NET_ADMIN"),
    (13, "CAP_NET_RAW"),
    (14, "CAP_IPC_LOCK"),
    (38, "CAP_PERFMON"),
    (39, "CAP_BPF"),
];

/// Fails with [`ExitCode::Privilege`] unless the process has the capabilities xdpool
/// needs (root has them all).
pub fn require_privileges(what: &str) -> Result<(), Fatal> {
    // CAP_NET_ADMIN=12, CAP_NET_RAW=13, CAP_IPC_LOCK=14, CAP_SYS_ADMIN=21, CAP_PERFMON=38,
    // CAP_BPF=39. CAP_PERFMON: the verifier allows packet pointers moved by a variable
    // (IPv6 extension headers, IP lengths) only to it (Spectre v1 hardening otherwise
    // refuses the steering program: "pointer arithmetic ... prohibited for !root").
    let needed = REQUIRED_CAPABILITIES;
    let eff = effective_caps().unwrap_or(0);
    let missing: Vec<&str> = needed
        .iter()
        .filter(|(bit, _)| {
            let has = eff & (1u64 << bit) != 0;
            // CAP_SYS_ADMIN implies CAP_BPF and CAP_PERFMON (older kernels have neither).
            !(has || ((*bit == 38 || *bit == 39) && eff & (1u64 << 21) != 0))
        })
        .map(|(_, n)| *n)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Fatal::new(
        ExitCode::Privilege,
        format!(
            "{what} needs root (missing {}); run it with sudo, or grant the capabilities: setcap cap_net_admin,cap_net_raw,cap_ipc_lock,cap_bpf,cap_perfmon,cap_sys_admin+ep target/release/xdpool",
            missing.join(", ")
        ),
    ))
}

/// The effective capability set of this process, from /proc/self/status.
pub fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_parses() {
        assert_eq!(
            parse_cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n"),
            Some(0x1ffffffffff)
        );
        assert_eq!(parse_cap_eff("CapEff:\t0000000000000000\n"), Some(0));
        assert_eq!(parse_cap_eff("nothing"), None);
    }

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
        ];
        let mut v: Vec<u8> = all.iter().map(|c| *c as u8).collect();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), all.len());
    }
}
