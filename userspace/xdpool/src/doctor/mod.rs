//! `xdpool doctor`: whether this machine and each port's device can run a config,
//! checked before a run, one line per check: ok, warn or fail, what was found, the fix.
//!
//! The checks are functions over a root directory that holds `proc/` and `sys/` (`/`
//! on a live machine, a fixture tree in the tests) plus the few facts only a live
//! probe gives ([`HostFacts`], [`PortFacts`]: an AF_XDP socket, the netdev netlink
//! family, ethtool). [`diagnose`] gathers those on this machine; a port in a network
//! namespace of its own is looked at from a thread inside that namespace, with a
//! private mount of sysfs, because `/sys` shows the devices of the namespace that
//! mounted it.
//!
//! `xdpool run` runs the same checks at start and logs them; a failing check stops
//! only what run itself refuses (a missing interface, capabilities, zero-copy asked
//! of a driver without it).

pub mod host;
pub mod netdev;
pub mod port;

use std::path::Path;

use serde::Serialize;

use crate::config::Config;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Nothing to do.
    Ok,
    /// xdpool runs, but slower, with less, or not as configured.
    Warn,
    /// xdpool will refuse or not work as configured.
    Fail,
}

impl Level {
    /// `ok`, `warn` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check's name (`kernel`, `zero_copy`, ...).
    pub check: &'static str,
    /// The port it is about (`None`: the host).
    pub port: Option<String>,
    /// The port's interface.
    pub interface: Option<String>,
    /// The outcome.
    pub level: Level,
    /// What was found.
    pub found: String,
    /// What to do (none when ok).
    pub fix: Option<String>,
}

impl Check {
    /// A passing check.
    pub fn ok(check: &'static str, found: impl Into<String>) -> Check {
        Check {
            check,
            port: None,
            interface: None,
            level: Level::Ok,
            found: found.into(),
            fix: None,
        }
    }

    /// A warning with its fix.
    pub fn warn(check: &'static str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            level: Level::Warn,
            fix: Some(fix.into()),
            ..Check::ok(check, found)
        }
    }

    /// A failure with its fix.
    pub fn fail(check: &'static str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            level: Level::Fail,
            fix: Some(fix.into()),
            ..Check::ok(check, found)
        }
    }

    /// The same check, about a port.
    pub fn on_port(mut self, port: &str, interface: &str) -> Check {
        self.port = Some(port.to_string());
        self.interface = Some(interface.to_string());
        self
    }

    /// The one line `xdpool doctor` prints.
    pub fn line(&self) -> String {
        let scope = match (&self.port, &self.interface) {
            (Some(p), Some(i)) => format!("port {p} ({i}) "),
            _ => String::new(),
        };
        let mut line = format!(
            "{:<4}  {scope}{}: {}",
            self.level.name(),
            self.check,
            self.found
        );
        if let Some(fix) = &self.fix {
            line.push_str("; fix: ");
            line.push_str(fix);
        }
        line
    }
}

/// Every check's result, host first, then each port's.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The checks, in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// The worst level (ok for an empty report).
    pub fn worst(&self) -> Level {
        self.checks
            .iter()
            .map(|c| c.level)
            .max()
            .unwrap_or(Level::Ok)
    }

    /// How many checks came out at `level`.
    pub fn count(&self, level: Level) -> usize {
        self.checks.iter().filter(|c| c.level == level).count()
    }

    /// The checks, one line each, and a closing count.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            out.push_str(&c.line());
            out.push('\n');
        }
        out.push_str(&format!(
            "{} ok, {} warn, {} fail\n",
            self.count(Level::Ok),
            self.count(Level::Warn),
            self.count(Level::Fail)
        ));
        out
    }

    /// The report as JSON: `{"checks": [...], "ok": N, "warn": N, "fail": N}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "checks": self.checks,
            "ok": self.count(Level::Ok),
            "warn": self.count(Level::Warn),
            "fail": self.count(Level::Fail),
        })
    }

    /// Logs each check through `tracing` (`xdpool run` at start): ok at debug,
    /// warn and fail at warn, since run goes on where it does not refuse by itself.
    pub fn log(&self) {
        for c in &self.checks {
            match c.level {
                Level::Ok => {
                    tracing::debug!(check = c.check, port = ?c.port, "doctor: {}", c.line())
                }
                Level::Warn | Level::Fail => {
                    tracing::warn!(check = c.check, port = ?c.port, "doctor: {}", c.line())
                }
            }
        }
        tracing::info!(
            ok = self.count(Level::Ok),
            warn = self.count(Level::Warn),
            fail = self.count(Level::Fail),
            "doctor: host and port checks done (xdpool doctor prints them all)"
        );
    }
}

/// A config to check a bare interface with (`xdpool doctor --interface IF [--netns
/// NS]`): one port named `main`, every other key at its default (zero-copy `auto`).
/// Decoded but not validated: it has no rules, which a run needs and the checks do not.
pub fn interface_config(interface: &str, netns: Option<&str>) -> Result<Config, toml::de::Error> {
    let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut text = format!(
        "[[port]]\nname = \"main\"\ninterface = {}\n",
        quote(interface)
    );
    if let Some(ns) = netns {
        text.push_str(&format!("netns = {}\n", quote(ns)));
    }
    toml::from_str(&text)
}

/// A config without ports, every key at its default: `xdpool doctor` without
/// arguments checks the host only, for a run of the default UMEM size.
pub fn host_config() -> Config {
    toml::from_str("").expect("every key of the config has a default but the ports")
}

/// Runs every check on this machine for `cfg`.
pub fn diagnose(cfg: &Config) -> Report {
    let root = Path::new("/");
    let mut checks = host::checks(root, cfg, &HostFacts::probe());
    let ports = cfg.ports();
    let cores = cfg.workers.cores.get_ref();
    let mut offset = 0;
    for (i, p) in ports.iter().enumerate() {
        // `workers.cores` lists one core per socket, ports and queues in order.
        let mine: Vec<usize> = cores
            .iter()
            .skip(offset)
            .take(p.queues.len())
            .copied()
            .collect();
        offset += p.queues.len();
        let input = port::PortInput::of(cfg, i, &mine);
        checks.extend(port::checks_live(&input));
    }
    Report { checks }
}

/// What only a live probe of the host tells.
#[derive(Debug)]
pub struct HostFacts {
    /// Opening an AF_XDP socket: `Ok`, or the errno it failed with.
    pub af_xdp: Result<(), i32>,
}

impl HostFacts {
    /// Probes this machine.
    pub fn probe() -> HostFacts {
        HostFacts {
            af_xdp: crate::xsk::sys::xdp_socket()
                .map(drop)
                .map_err(|e| e.raw_os_error().unwrap_or(0)),
        }
    }
}

/// What only a live probe of a port's device tells (netlink, ethtool).
#[derive(Debug, Clone)]
pub struct PortFacts {
    /// The device's XDP features (netdev netlink), or why they could not be read.
    pub xdp: Result<netdev::XdpFeatures, String>,
    /// Whether rx-vlan-offload is on (`ethtool -k DEV`), or why it could not be read.
    pub rx_vlan_offload: Result<bool, String>,
    /// RX queues the device has by its channels (`ethtool -l DEV`: combined + rx), or
    /// why they could not be read (a device without channels).
    pub rx_channels: Result<u32, String>,
}

#[cfg(test)]
mod tests;
