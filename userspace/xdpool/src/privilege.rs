//! The privilege check every command that touches the kernel makes first: the
//! capabilities xdpool needs, read from /proc/self/status.

use crate::error::RunError;

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

/// Fails with [`RunError::Privilege`] unless the process has the capabilities xdpool
/// needs (root has them all).
pub fn require_privileges(what: &str) -> Result<(), RunError> {
    // CAP_NET_ADMIN=12, CAP_NET_RAW=13, CAP_IPC_LOCK=14, CAP_SYS_ADMIN=21, CAP_PERFMON=38,
    // CAP_BPF=39. CAP_PERFMON: the verifier allows packet pointers moved by a variable
    // (IPv6 extension headers, IP lengths) only to it (Spectre v1 hardening otherwise
    // refuses the steering program: "pointer arithmetic ... prohibited for !root").
    let missing = missing_capabilities(effective_caps().unwrap_or(0));
    if missing.is_empty() {
        return Ok(());
    }
    Err(RunError::Privilege(format!(
            "{what} needs root (missing {}); run it with sudo, or grant the capabilities: setcap cap_net_admin,cap_net_raw,cap_ipc_lock,cap_bpf,cap_perfmon,cap_sys_admin+ep target/release/xdpool",
        missing.join(", ")
    )))
}

/// Of [`REQUIRED_CAPABILITIES`], those the effective set `eff` lacks, by name.
pub fn missing_capabilities(eff: u64) -> Vec<&'static str> {
    REQUIRED_CAPABILITIES
        .iter()
        .filter(|(bit, _)| {
            let has = eff & (1u64 << bit) != 0;
            // CAP_SYS_ADMIN implies CAP_BPF and CAP_PERFMON (older kernels have neither).
            !(has || ((*bit == 38 || *bit == 39) && eff & (1u64 << 21) != 0))
        })
        .map(|(_, n)| *n)
        .collect()
}

/// The effective capability set of this process, from /proc/self/status.
pub fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

/// The `CapEff:` line of a `/proc/PID/status` text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
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
}
