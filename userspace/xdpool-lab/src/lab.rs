//! The lab: two network namespaces joined by one veth pair, for tests and benchmarks.
//!
//! ```text
//!   netns PREFIX-a                      netns PREFIX-b
//!   dev  <stem>a0  <==== veth ====>  dev <stem>b0
//!   198.18.0.1/24, 2001:2::1/64         198.18.0.2/24, 2001:2::2/64
//! ```
//!
//! Both veth ends are created inside the namespaces (`ip -n A link add .. peer ..
//! netns B`); nothing is ever made in the root namespace. Addresses come from the
//! benchmarking ranges (198.18.0.0/15, 2001:2::/48). Neighbour entries are static, so
//! no ARP or ND ever runs.
//!
//! Redirected frames (`ndo_xdp_xmit`: XDP_TX/XDP_REDIRECT, live-frames BPF_PROG_RUN)
//! reach a veth peer only when the peer runs NAPI, which veth does when the peer has
//! an XDP program attached **or** GRO enabled. The lab turns GRO on by default on
//! both ends ([`LabConfig::gro`]) so the generator works into a bare lab; with GRO
//! off, frames are dropped silently until an XDP program is attached on the receiver.
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::netns::{self, NetnsError};

pub mod forward;

/// Prefix of the default lab (`xdpool lab up`).
pub const DEFAULT_PREFIX: &str = "xdpool";
/// IPv4 address of the generator side "a".
pub const IPV4_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// IPv4 address of the receiving side "b".
pub const IPV4_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// IPv4 prefix length of the lab link.
pub const IPV4_PREFIX_LEN: u8 = 24;
/// IPv6 address of side "a".
pub const IPV6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
/// IPv6 address of side "b".
pub const IPV6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
/// IPv6 prefix length of the lab link.
pub const IPV6_PREFIX_LEN: u8 = 64;
/// MAC address of side "a" (locally administered).
pub const MAC_A: [u8; 6] = [0x02, 0x78, 0x64, 0x70, 0x00, 0x0a];
/// MAC address of side "b" (locally administered).
pub const MAC_B: [u8; 6] = [0x02, 0x78, 0x64, 0x70, 0x00, 0x0b];

/// Errors from setting up or tearing down a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The prefix cannot make valid namespace and device names.
    #[error("invalid lab prefix {0:?}: use 1-32 characters from [A-Za-z0-9_-]")]
    BadPrefix(String),
    /// Queue count out of range.
    #[error("invalid queue count {0}: use 1..=64")]
    BadQueues(u32),
    /// `ip` is not installed.
    #[error("`ip` (iproute2) not found: run `make setup` to install iproute2")]
    IpMissing,
    /// An `ip` command failed.
    #[error("`{command}` failed: {stderr}; {hint}")]
    Command {
        /// The command line.
        command: String,
        /// Its standard error, trimmed.
        stderr: String,
        /// What the user should do.
        hint: &'static str,
    },
    /// Output of an `ip` command could not be understood.
    #[error("could not parse the output of `{command}`: {detail}; check the iproute2 version (`ip -V`, 5.x or newer is needed)")]
    Parse {
        /// The command line.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// A namespace operation failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
}

/// Names of everything one lab creates, derived from its prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabNames {
    /// Prefix the names come from.
    pub prefix: String,
    /// Generator-side namespace (`PREFIX-a`).
    pub netns_a: String,
    /// Receiving-side namespace (`PREFIX-b`).
    pub netns_b: String,
    /// veth end in `netns_a`.
    pub dev_a: String,
    /// veth end in `netns_b`.
    pub dev_b: String,
}

impl LabNames {
    /// Derives the names: namespaces `PREFIX-a`/`PREFIX-b`; devices `<stem>a0` and
    /// `<stem>b0`, where the stem is the prefix with a leading `xdpool` shortened to
    /// `xdp` and cut to 13 characters (interface names hold 15). The default prefix
    /// gives `xdpool-a`/`xdpool-b` and `xdpa0`/`xdpb0`.
    pub fn from_prefix(prefix: &str) -> Result<Self, LabError> {
        check_prefix(prefix)?;
        let stem = match prefix.strip_prefix("xdpool") {
            Some(rest) => format!("xdp{rest}"),
            None => prefix.to_string(),
        };
        let stem: String = stem.chars().take(13).collect();
        Ok(Self {
            prefix: prefix.to_string(),
            netns_a: format!("{prefix}-a"),
            netns_b: format!("{prefix}-b"),
            dev_a: format!("{stem}a0"),
            dev_b: format!("{stem}b0"),
        })
    }
}

/// 1-32 characters from [A-Za-z0-9_-].
fn check_prefix(prefix: &str) -> Result<(), LabError> {
    let valid = !prefix.is_empty()
        && prefix.len() <= 32
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(LabError::BadPrefix(prefix.to_string()))
    }
}

fn check_queues(queues: Option<u32>) -> Result<(), LabError> {
    match queues {
        Some(q) if !(1..=64).contains(&q) => Err(LabError::BadQueues(q)),
        _ => Ok(()),
    }
}

/// What `lab up` should build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabConfig {
    /// Name prefix (default [`DEFAULT_PREFIX`]).
    pub prefix: String,
    /// RX and TX queues per veth end (`None`: the kernel default, 1).
    pub queues: Option<u32>,
    /// Enable GRO on both ends, so redirected frames reach a peer without an XDP
    /// program (see the module docs). Default true.
    pub gro: bool,
    /// Enable threaded NAPI on both ends (`/sys/class/net/DEV/threaded`).
    pub threaded_napi: bool,
    /// MTU of both veth ends (`None`: the kernel default, 1500). Above about 3500
    /// an XDP program on veth must take multi-buffer frames (`xdp.frags`).
    pub mtu: Option<u32>,
    /// Forward topology only: xdpool's ports "out" and "mon" in a namespace of their
    /// own, `PREFIX-fwd2` (ports in two namespaces, one UMEM).
    pub split_netns: bool,
}

impl Default for LabConfig {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_string(),
            queues: None,
            gro: true,
            threaded_napi: false,
            mtu: None,
            split_netns: false,
        }
    }
}

impl LabConfig {
    /// The default lab with another prefix (tests use a unique one each).
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            ..Self::default()
        }
    }
}

/// One side of a running lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabSide {
    /// Namespace name.
    pub netns: String,
    /// veth device name.
    pub dev: String,
    /// Interface index inside `netns`.
    pub ifindex: u32,
    /// MAC address.
    pub mac: [u8; 6],
    /// IPv4 address.
    pub ipv4: Ipv4Addr,
    /// IPv6 address.
    pub ipv6: Ipv6Addr,
    /// Number of RX queues.
    pub rx_queues: u32,
    /// Number of TX queues.
    pub tx_queues: u32,
}

/// The state of a lab after `up` (or as found).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabStatus {
    /// True when `up` found the lab already complete and changed nothing.
    pub already_up: bool,
    /// Generator side.
    pub a: LabSide,
    /// Receiving side.
    pub b: LabSide,
}

/// Creates and removes labs.
#[derive(Debug)]
pub struct Lab;

impl Lab {
    /// Builds the lab, or reports it as `already_up` when it exists complete. A
    /// half-built lab (left by a crash) is removed and rebuilt. On failure midway
    /// everything made so far is removed again.
    pub fn up(cfg: &LabConfig) -> Result<LabStatus, LabError> {
        let names = LabNames::from_prefix(&cfg.prefix)?;
        check_queues(cfg.queues)?;
        if let Some(mut status) = Self::status(&cfg.prefix)? {
            status.already_up = true;
            return Ok(status);
        }
        if netns::exists(&names.netns_a) || netns::exists(&names.netns_b) {
            tracing::warn!(prefix = %cfg.prefix, "found a half-built lab; removing it first");
            Self::down(&cfg.prefix)?;
        }
        if let Err(e) = build(cfg, &names) {
            if let Err(cleanup) = Self::down(&cfg.prefix) {
                tracing::error!(error = %cleanup, "cleanup after a failed lab up also failed");
            }
            return Err(e);
        }
        let status = Self::status(&cfg.prefix)?.ok_or_else(|| LabError::Parse {
            command: format!("ip -n {} link show {}", names.netns_a, names.dev_a),
            detail: "the lab vanished right after it was built".to_string(),
        })?;
        tracing::info!(prefix = %cfg.prefix, a = %names.dev_a, b = %names.dev_b, "lab up");
        Ok(status)
    }

    /// Removes the lab of this prefix, whichever topology is up: the two-namespace
    /// lab's `PREFIX-a`/`PREFIX-b` and the forward lab's `PREFIX-src`/`-fwd`/`-dst`
    /// (deleting a namespace deletes its veth ends, which deletes the pairs).
    /// Returns whether anything existed.
    pub fn down(prefix: &str) -> Result<bool, LabError> {
        let names = LabNames::from_prefix(prefix)?;
        let fwd = forward::ForwardNames::from_prefix(prefix)?.split(true);
        let mut removed = false;
        let mut first_err = None;
        // Try all, even when one fails, so a guard never leaves half a lab.
        for ns in [names.netns_a.as_str(), names.netns_b.as_str()]
            .into_iter()
            .chain(fwd.all())
        {
            if netns::exists(ns) {
                match ip(&["netns", "del", ns], "run as root") {
                    Ok(_) => removed = true,
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(removed),
        }
    }

    /// The lab as it is now, or `None` when it is not (completely) there.
    pub fn status(prefix: &str) -> Result<Option<LabStatus>, LabError> {
        let names = LabNames::from_prefix(prefix)?;
        if !netns::exists(&names.netns_a) || !netns::exists(&names.netns_b) {
            return Ok(None);
        }
        let a = side(&names.netns_a, &names.dev_a, IPV4_A, IPV6_A)?;
        let b = side(&names.netns_b, &names.dev_b, IPV4_B, IPV6_B)?;
        match (a, b) {
            (Some(a), Some(b)) => Ok(Some(LabStatus {
                already_up: false,
                a,
                b,
            })),
            _ => Ok(None),
        }
    }
}

/// Brings a lab up on creation and down on drop (for tests).
#[derive(Debug)]
pub struct LabGuard {
    prefix: String,
    status: LabStatus,
}

impl LabGuard {
    /// Builds the lab with [`Lab::up`]; it is removed when the guard drops.
    pub fn up(cfg: &LabConfig) -> Result<Self, LabError> {
        Ok(Self {
            prefix: cfg.prefix.clone(),
            status: Lab::up(cfg)?,
        })
    }

    /// The lab's addresses, devices and indexes.
    pub fn status(&self) -> &LabStatus {
        &self.status
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        if let Err(e) = Lab::down(&self.prefix) {
            tracing::error!(prefix = %self.prefix, error = %e, "lab down failed; remove it with `xdpool lab down`");
        }
    }
}

fn build(cfg: &LabConfig, n: &LabNames) -> Result<(), LabError> {
    ip(&["netns", "add", &n.netns_a], "run as root")?;
    ip(&["netns", "add", &n.netns_b], "run as root")?;

    let queues = cfg.queues.map(|q| q.to_string());
    let mut add: Vec<&str> = vec!["-n", &n.netns_a, "link", "add", &n.dev_a];
    if let Some(q) = &queues {
        add.extend(["numtxqueues", q, "numrxqueues", q]);
    }
    add.extend([
        "type", "veth", "peer", "name", &n.dev_b, "netns", &n.netns_b,
    ]);
    if let Some(q) = &queues {
        add.extend(["numtxqueues", q, "numrxqueues", q]);
    }
    ip(&add, "check that the kernel has veth (modprobe veth)")?;

    let mac_a = format_mac(&MAC_A);
    let mac_b = format_mac(&MAC_B);
    let v4 = |a: Ipv4Addr| format!("{a}/{IPV4_PREFIX_LEN}");
    let v6 = |a: Ipv6Addr| format!("{a}/{IPV6_PREFIX_LEN}");
    let sides = [
        (
            &n.netns_a,
            &n.dev_a,
            &mac_a,
            v4(IPV4_A),
            v6(IPV6_A),
            IPV4_B,
            IPV6_B,
            &mac_b,
        ),
        (
            &n.netns_b,
            &n.dev_b,
            &mac_b,
            v4(IPV4_B),
            v6(IPV6_B),
            IPV4_A,
            IPV6_A,
            &mac_a,
        ),
    ];
    for (ns, dev, mac, addr4, addr6, peer4, peer6, peer_mac) in &sides {
        let (peer4, peer6) = (peer4.to_string(), peer6.to_string());
        ip(
            &["-n", ns, "link", "set", dev, "address", mac],
            "run as root",
        )?;
        ip(&["-n", ns, "addr", "add", addr4, "dev", dev], "run as root")?;
        ip(
            &["-n", ns, "addr", "add", addr6, "dev", dev, "nodad"],
            "check that IPv6 is enabled",
        )?;
        for peer in [&peer4, &peer6] {
            ip(
                &[
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    peer,
                    "lladdr",
                    peer_mac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ],
                "run as root",
            )?;
        }
        if let Some(mtu) = cfg.mtu {
            ip(
                &["-n", ns, "link", "set", dev, "mtu", &mtu.to_string()],
                "veth takes MTUs from 68 to 65535",
            )?;
        }
        ip(&["-n", ns, "link", "set", "lo", "up"], "run as root")?;
        ip(&["-n", ns, "link", "set", dev, "up"], "run as root")?;
        if cfg.gro {
            netns::in_netns(ns, || netns::set_gro(dev, true))??;
        }
        if cfg.threaded_napi {
            set_threaded_napi(ns, dev, true)?;
        }
    }
    Ok(())
}

/// Turns threaded NAPI on or off for `dev` in `ns` (`/sys/class/net/DEV/threaded`).
/// sysfs shows the namespace of whoever mounted it, so this runs `ip netns exec`,
/// which mounts a fresh /sys for the child.
pub fn set_threaded_napi(ns: &str, dev: &str, on: bool) -> Result<(), LabError> {
    let path = format!("/sys/class/net/{dev}/threaded");
    let args = [
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        &format!("echo {} > {path}", u8::from(on)),
    ];
    ip(
        &args,
        "threaded NAPI needs Linux 5.12 or newer; leave it off otherwise",
    )
}

/// Pins the threaded-NAPI kernel threads of `dev` (`napi/DEV-ID`) to `core`. veth
/// recreates its NAPI when an XDP program comes or goes, so call this after each
/// attach. Returns how many threads were pinned.
pub fn pin_napi_threads(dev: &str, core: usize) -> usize {
    // Thread names are cut at 15 bytes (TASK_COMM_LEN - 1).
    let prefix: String = format!("napi/{dev}-").chars().take(15).collect();
    let mut set = nix::sched::CpuSet::new();
    if set.set(core).is_err() {
        return 0;
    }
    let mut pinned = 0;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim_end().starts_with(&prefix) {
            match nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set) {
                Ok(()) => pinned += 1,
                Err(e) => tracing::warn!(pid, error = %e, "could not pin a NAPI thread"),
            }
        }
    }
    if pinned == 0 {
        tracing::warn!(dev, "no threaded NAPI thread found to pin");
    }
    pinned
}

fn side(ns: &str, dev: &str, ipv4: Ipv4Addr, ipv6: Ipv6Addr) -> Result<Option<LabSide>, LabError> {
    let args = ["-n", ns, "-j", "-d", "link", "show", "dev", dev];
    let command = format!("ip {}", args.join(" "));
    let out = run_ip(&args)?;
    if !out.status.success() {
        // Missing device: the lab is incomplete.
        return Ok(None);
    }
    let parse_err = |detail: String| LabError::Parse {
        command: command.clone(),
        detail,
    };
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| parse_err(e.to_string()))?;
    let link = json.get(0).ok_or_else(|| parse_err("empty list".into()))?;
    let field_u32 = |name: &str| {
        link.get(name)
            .and_then(|v| v.as_u64())
            .map(|v| v as u32)
            .ok_or_else(|| parse_err(format!("no field {name}")))
    };
    let mac_text = link
        .get("address")
        .and_then(|v| v.as_str())
        .ok_or_else(|| parse_err("no field address".into()))?;
    let mac = parse_mac(mac_text).ok_or_else(|| parse_err(format!("bad MAC {mac_text}")))?;
    Ok(Some(LabSide {
        netns: ns.to_string(),
        dev: dev.to_string(),
        ifindex: field_u32("ifindex")?,
        mac,
        ipv4,
        ipv6,
        rx_queues: field_u32("num_rx_queues")?,
        tx_queues: field_u32("num_tx_queues")?,
    }))
}

/// MTU of `dev` in the named namespace (`None`: the calling thread's).
pub fn link_mtu(netns: Option<&str>, dev: &str) -> Result<u32, LabError> {
    let mut args = Vec::new();
    if let Some(ns) = netns {
        args.extend(["-n", ns]);
    }
    args.extend(["-j", "link", "show", "dev", dev]);
    let command = format!("ip {}", args.join(" "));
    let out = run_ip(&args)?;
    if !out.status.success() {
        return Err(LabError::Command {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            hint: "check the device and namespace names (is the lab up?)",
        });
    }
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| LabError::Parse {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    json.get(0)
        .and_then(|l| l.get("mtu"))
        .and_then(|m| m.as_u64())
        .map(|m| m as u32)
        .ok_or(LabError::Parse {
            command,
            detail: "no field mtu".into(),
        })
}

fn run_ip(args: &[&str]) -> Result<std::process::Output, LabError> {
    Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                LabError::IpMissing
            } else {
                LabError::Command {
                    command: format!("ip {}", args.join(" ")),
                    stderr: e.to_string(),
                    hint: "run as root",
                }
            }
        })
}

fn ip(args: &[&str], hint: &'static str) -> Result<(), LabError> {
    tracing::debug!(command = %format!("ip {}", args.join(" ")), "lab");
    let out = run_ip(args)?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let hint = if stderr.contains("Operation not permitted") {
        "run as root"
    } else {
        hint
    };
    Err(LabError::Command {
        command: format!("ip {}", args.join(" ")),
        stderr,
        hint,
    })
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names() {
        let n = LabNames::from_prefix(DEFAULT_PREFIX).unwrap();
        assert_eq!(
            (
                n.netns_a.as_str(),
                n.netns_b.as_str(),
                n.dev_a.as_str(),
                n.dev_b.as_str()
            ),
            ("xdpool-a", "xdpool-b", "xdpa0", "xdpb0")
        );
    }

    #[test]
    fn long_prefixes_fit_interface_names() {
        let n = LabNames::from_prefix("xdpool-t4194303-99").unwrap();
        assert!(n.dev_a.len() <= 15 && n.dev_b.len() <= 15, "{n:?}");
        assert_ne!(n.dev_a, n.dev_b);
        assert_eq!(n.netns_a, "xdpool-t4194303-99-a");
    }

    #[test]
    fn bad_prefixes_are_rejected() {
        for p in ["", "a b", "x/y", &"p".repeat(33)] {
            assert!(
                matches!(LabNames::from_prefix(p), Err(LabError::BadPrefix(_))),
                "{p:?}"
            );
        }
    }

    #[test]
    fn mac_round_trip() {
        assert_eq!(format_mac(&MAC_B), "02:78:64:70:00:0b");
        assert_eq!(parse_mac("02:78:64:70:00:0b"), Some(MAC_B));
        assert_eq!(parse_mac("02:78:64:70:00"), None);
        assert_eq!(parse_mac("02:78:64:70:00:0b:00"), None);
        assert_eq!(parse_mac("02:78:64:70:00:zz"), None);
    }

    #[test]
    fn addresses_are_in_benchmarking_ranges() {
        for a in [IPV4_A, IPV4_B] {
            assert_eq!(a.octets()[0], 198);
            assert!(a.octets()[1] & 0xfe == 18);
        }
        for a in [IPV6_A, IPV6_B] {
            assert_eq!(&a.segments()[..3], &[0x2001, 2, 0]);
        }
    }
}
