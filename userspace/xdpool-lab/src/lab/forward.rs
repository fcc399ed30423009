//! The `forward` lab: three namespaces, so that xdpool in the middle one moves frames
//! between two of its ports and a receiver counts them (SPEC-forward.md).
//!
//! ```text
//!  P-src                 P-fwd (xdpool)                       P-dst
//!  xdps0 <==== veth ===> xdpf0  port "in"
//!  198.18.1.1            198.18.1.2
//!                        xdpf1  port "out" <==== veth ====> xdpd0
//!                        198.18.2.2                         198.18.2.1
//!                        xdpf2  port "mon" <==== veth ====> xdpm0
//!                        198.18.3.2                         198.18.3.1
//! ```
//!
//! With `split_netns` (`xdpool lab up --topology forward --split-netns`), xdpf1 and
//! xdpf2 live in a fourth namespace, P-fwd2: xdpool's ports in two namespaces, one
//! UMEM (configs/forward-split.toml).
//!
//! Device names are fixed (each lives in its own namespace), so configs are fixed too;
//! only the namespaces take the prefix. Every MAC is fixed and every neighbour entry
//! is permanent, so `mac = "neigh"` and the generator need no ARP or ND. P-fwd keeps
//! IP forwarding off (set explicitly: a new namespace may inherit it from the host),
//! so a frame reaches P-dst only when xdpool forwards it. RX checksum offload is off on
//! every end, so the receiving stacks verify UDP checksums (veth would otherwise
//! mark every frame as verified).
//!
//! The plan (which `ip` commands, in which order) is a pure function, unit-tested
//! without root; [`ForwardLab`] runs it.
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use super::{format_mac, ip, side, LabConfig, LabError, LabSide, IPV4_PREFIX_LEN, IPV6_PREFIX_LEN};
use crate::netns;

/// Sender's device (in P-src).
pub const SRC_DEV: &str = "xdps0";
/// xdpool's port "in" (in P-fwd), peer of [`SRC_DEV`].
pub const IN_DEV: &str = "xdpf0";
/// xdpool's port "out" (in P-fwd), peer of [`DST_DEV`].
pub const OUT_DEV: &str = "xdpf1";
/// xdpool's port "mon" (in P-fwd), peer of [`MON_DEV`].
pub const MON_PORT_DEV: &str = "xdpf2";
/// Receiver's device behind port "out" (in P-dst).
pub const DST_DEV: &str = "xdpd0";
/// Receiver's device behind port "mon" (in P-dst).
pub const MON_DEV: &str = "xdpm0";

/// The role of a namespace in the forward lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The sender (`P-src`).
    Src,
    /// xdpool's namespace (`P-fwd`).
    Fwd,
    /// The namespace of xdpool's ports "out" and "mon": `P-fwd2` when the lab is
    /// split, else `P-fwd`.
    Fwd2,
    /// The receiver (`P-dst`).
    Dst,
}

/// One of the lab's three veth pairs, named after xdpool's port on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// xdps0 (P-src) <-> xdpf0 (P-fwd).
    In,
    /// xdpf1 (P-fwd) <-> xdpd0 (P-dst).
    Out,
    /// xdpf2 (P-fwd) <-> xdpm0 (P-dst).
    Mon,
}

impl Link {
    /// All three, in the order they are built.
    pub const ALL: [Link; 3] = [Link::In, Link::Out, Link::Mon];

    /// The xdpool port's name on this link (as in configs/forward.toml).
    pub fn port_name(self) -> &'static str {
        match self {
            Link::In => "in",
            Link::Out => "out",
            Link::Mon => "mon",
        }
    }

    /// The link's two ends: (the end in P-fwd, the outer end in P-src or P-dst).
    pub fn ends(self) -> (End, End) {
        let subnet = self.subnet();
        let (fwd_dev, fwd_role, outer_dev, outer_role) = match self {
            Link::In => (IN_DEV, Role::Fwd, SRC_DEV, Role::Src),
            Link::Out => (OUT_DEV, Role::Fwd2, DST_DEV, Role::Dst),
            Link::Mon => (MON_PORT_DEV, Role::Fwd2, MON_DEV, Role::Dst),
        };
        (
            End::new(fwd_role, fwd_dev, subnet, 2),
            End::new(outer_role, outer_dev, subnet, 1),
        )
    }

    /// The link's subnet number: 198.18.S.0/24 and 2001:2:0:S::/64.
    fn subnet(self) -> u8 {
        match self {
            Link::In => 1,
            Link::Out => 2,
            Link::Mon => 3,
        }
    }
}

/// One veth end: where it lives and its fixed addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct End {
    /// The namespace it lives in.
    pub role: Role,
    /// Device name.
    pub dev: &'static str,
    /// MAC address: 02:78:64:70:SUBNET:HOST (locally administered).
    pub mac: [u8; 6],
    /// 198.18.SUBNET.HOST.
    pub ipv4: Ipv4Addr,
    /// 2001:2:0:SUBNET::HOST.
    pub ipv6: Ipv6Addr,
}

impl End {
    fn new(role: Role, dev: &'static str, subnet: u8, host: u8) -> Self {
        Self {
            role,
            dev,
            mac: [0x02, 0x78, 0x64, 0x70, subnet, host],
            ipv4: Ipv4Addr::new(198, 18, subnet, host),
            ipv6: Ipv6Addr::new(0x2001, 2, 0, u16::from(subnet), 0, 0, 0, u16::from(host)),
        }
    }
}

/// The end of `link` in P-fwd (xdpool's port).
pub fn port_end(link: Link) -> End {
    link.ends().0
}

/// The outer end of `link` (the sender's or a receiver's device).
pub fn outer_end(link: Link) -> End {
    link.ends().1
}

/// Namespace names of one forward lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardNames {
    /// Prefix the names come from.
    pub prefix: String,
    /// `PREFIX-src`.
    pub src: String,
    /// `PREFIX-fwd`.
    pub fwd: String,
    /// `PREFIX-dst`.
    pub dst: String,
    /// `PREFIX-fwd2` when the lab is split (ports "out" and "mon" there).
    pub fwd2: Option<String>,
}

impl ForwardNames {
    /// `PREFIX-src`, `PREFIX-fwd`, `PREFIX-dst`; the prefix is checked as for the
    /// two-namespace lab.
    pub fn from_prefix(prefix: &str) -> Result<Self, LabError> {
        super::check_prefix(prefix)?;
        Ok(Self {
            prefix: prefix.to_string(),
            src: format!("{prefix}-src"),
            fwd: format!("{prefix}-fwd"),
            dst: format!("{prefix}-dst"),
            fwd2: None,
        })
    }

    /// The split lab's names (`PREFIX-fwd2` too) when `split`.
    pub fn split(mut self, split: bool) -> Self {
        self.fwd2 = split.then(|| format!("{}-fwd2", self.prefix));
        self
    }

    /// The namespace of a role.
    pub fn netns(&self, role: Role) -> &str {
        match role {
            Role::Src => &self.src,
            Role::Fwd => &self.fwd,
            Role::Fwd2 => self.fwd2.as_deref().unwrap_or(&self.fwd),
            Role::Dst => &self.dst,
        }
    }

    /// All of them (three, four when split), in the order they are created.
    pub fn all(&self) -> Vec<&str> {
        let mut v = vec![self.src.as_str(), self.fwd.as_str()];
        v.extend(self.fwd2.as_deref());
        v.push(&self.dst);
        v
    }

    /// xdpool's namespaces (P-fwd, and P-fwd2 when split).
    pub fn xdpool_netns(&self) -> Vec<&str> {
        let mut v = vec![self.fwd.as_str()];
        v.extend(self.fwd2.as_deref());
        v
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// One `ip` command.
    Ip {
        /// Arguments after `ip`.
        args: Vec<String>,
        /// The hint shown when it fails.
        hint: &'static str,
    },
    /// Write a value under `/proc/sys/` from inside a namespace (no procps needed).
    Sysctl {
        /// The namespace.
        netns: String,
        /// Path under /proc/sys/, e.g. `net/ipv4/ip_forward`.
        key: &'static str,
        /// The value written.
        value: &'static str,
    },
}

impl Step {
    /// The step as one line (`ip` arguments, or `sysctl NS KEY=VALUE`), for tests and logs.
    pub fn line(&self) -> String {
        match self {
            Step::Ip { args, .. } => args.join(" "),
            Step::Sysctl { netns, key, value } => format!("sysctl {netns} {key}={value}"),
        }
    }
}

fn step(args: &[&str], hint: &'static str) -> Step {
    Step::Ip {
        args: args.iter().map(|a| a.to_string()).collect(),
        hint,
    }
}

const ROOT: &str = "run as root";

/// The commands that build one link: the veth pair (made inside P-fwd, its peer
/// moved straight into the outer namespace), MACs, addresses, MTU, the permanent
/// neighbour entries both ways, the outer side's routes through xdpool's end, and
/// link up. Re-running it after the pair was deleted restores the link exactly.
pub fn plan_link(names: &ForwardNames, link: Link, cfg: &LabConfig) -> Vec<Step> {
    let (port, outer) = link.ends();
    let fwd_ns = names.netns(port.role);
    let outer_ns = names.netns(outer.role);
    let mut steps = Vec::new();
    let queues = cfg.queues.map(|q| q.to_string());
    let mut add: Vec<&str> = vec!["-n", fwd_ns, "link", "add", port.dev];
    if let Some(q) = &queues {
        add.extend(["numtxqueues", q, "numrxqueues", q]);
    }
    add.extend(["type", "veth", "peer", "name", outer.dev, "netns", outer_ns]);
    if let Some(q) = &queues {
        add.extend(["numtxqueues", q, "numrxqueues", q]);
    }
    steps.push(step(&add, "check that the kernel has veth (modprobe veth)"));
    for (me, ns, peer) in [(port, fwd_ns, outer), (outer, outer_ns, port)] {
        let mac = format_mac(&me.mac);
        let peer_mac = format_mac(&peer.mac);
        let v4 = format!("{}/{IPV4_PREFIX_LEN}", me.ipv4);
        let v6 = format!("{}/{IPV6_PREFIX_LEN}", me.ipv6);
        steps.push(step(
            &["-n", ns, "link", "set", me.dev, "address", &mac],
            ROOT,
        ));
        if let Some(mtu) = cfg.mtu {
            steps.push(step(
                &["-n", ns, "link", "set", me.dev, "mtu", &mtu.to_string()],
                "veth takes MTUs from 68 to 65535",
            ));
        }
        steps.push(step(&["-n", ns, "addr", "add", &v4, "dev", me.dev], ROOT));
        steps.push(step(
            &["-n", ns, "addr", "add", &v6, "dev", me.dev, "nodad"],
            "check that IPv6 is enabled",
        ));
        for peer_ip in [peer.ipv4.to_string(), peer.ipv6.to_string()] {
            steps.push(step(
                &[
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    &peer_ip,
                    "lladdr",
                    &peer_mac,
                    "dev",
                    me.dev,
                    "nud",
                    "permanent",
                ],
                ROOT,
            ));
        }
        steps.push(step(&["-n", ns, "link", "set", me.dev, "up"], ROOT));
        // veth marks what it receives as checksum-verified while rx-checksumming is
        // on: off, the receiving stack checks every UDP checksum (InCsumErrors).
        steps.push(step(
            &["netns", "exec", ns, "ethtool", "-K", me.dev, "rx", "off"],
            "install ethtool (`make setup`)",
        ));
    }
    // Routes need the device up. The sender reaches both receiver subnets through
    // xdpool's "in" end; the receiver answers (and passes reverse-path checks) for
    // the sender's subnet through "out".
    let routes: &[(Role, Link, &[Link])] = &[
        (Role::Src, Link::In, &[Link::Out, Link::Mon]),
        (Role::Dst, Link::Out, &[Link::In]),
    ];
    for &(role, via_link, to) in routes {
        if via_link != link {
            continue;
        }
        let ns = names.netns(role);
        let via = port_end(via_link);
        for &dest in to {
            let (v4, v6) = subnet_prefixes(dest);
            steps.push(step(
                &[
                    "-n",
                    ns,
                    "route",
                    "replace",
                    &v4,
                    "via",
                    &via.ipv4.to_string(),
                ],
                ROOT,
            ));
            steps.push(step(
                &[
                    "-n",
                    ns,
                    "-6",
                    "route",
                    "replace",
                    &v6,
                    "via",
                    &via.ipv6.to_string(),
                ],
                ROOT,
            ));
        }
    }
    steps
}

/// 198.18.S.0/24 and 2001:2:0:S::/64 of a link.
pub fn subnet_prefixes(link: Link) -> (String, String) {
    let s = link.subnet();
    (
        format!("198.18.{s}.0/{IPV4_PREFIX_LEN}"),
        format!("2001:2:0:{s}::/{IPV6_PREFIX_LEN}"),
    )
}

/// The whole lab: the namespaces, loopback up and IP forwarding off in P-fwd, then
/// each link.
pub fn plan(names: &ForwardNames, cfg: &LabConfig) -> Vec<Step> {
    let mut steps = Vec::new();
    for ns in names.all() {
        steps.push(step(&["netns", "add", ns], ROOT));
        steps.push(step(&["-n", ns, "link", "set", "lo", "up"], ROOT));
    }
    // Explicitly off: only xdpool may move frames from P-src to P-dst.
    for ns in names.xdpool_netns() {
        for key in ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"] {
            steps.push(Step::Sysctl {
                netns: ns.to_string(),
                key,
                value: "0",
            });
        }
    }
    for link in Link::ALL {
        steps.extend(plan_link(names, link, cfg));
    }
    steps
}

/// The forward lab as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardStatus {
    /// True when `up` found the lab already complete and changed nothing.
    pub already_up: bool,
    /// The namespaces.
    pub names: ForwardNames,
    /// xdps0 in P-src.
    pub src: LabSide,
    /// xdpool's ports in P-fwd: xdpf0 ("in"), xdpf1 ("out"), xdpf2 ("mon").
    pub ports: [LabSide; 3],
    /// xdpd0 in P-dst, behind "out".
    pub dst: LabSide,
    /// xdpm0 in P-dst, behind "mon".
    pub mon: LabSide,
}

impl ForwardStatus {
    /// xdpool's end of `link`.
    pub fn port(&self, link: Link) -> &LabSide {
        &self.ports[link as usize]
    }
}

/// Creates and removes forward labs.
#[derive(Debug)]
pub struct ForwardLab;

impl ForwardLab {
    /// Builds the lab (`cfg.gro`, `threaded_napi`, `queues` and `mtu` apply to all
    /// six ends), or reports it `already_up`. A half-built one is removed first; on
    /// failure midway everything made so far is removed.
    pub fn up(cfg: &LabConfig) -> Result<ForwardStatus, LabError> {
        let names = ForwardNames::from_prefix(&cfg.prefix)?.split(cfg.split_netns);
        super::check_queues(cfg.queues)?;
        if let Some(mut st) =
            Self::status(&cfg.prefix)?.filter(|st| st.names.fwd2.is_some() == cfg.split_netns)
        {
            st.already_up = true;
            return Ok(st);
        }
        if names
            .clone()
            .split(true)
            .all()
            .iter()
            .any(|ns| netns::exists(ns))
        {
            tracing::warn!(prefix = %cfg.prefix, "found a half-built forward lab; removing it first");
            super::Lab::down(&cfg.prefix)?;
        }
        let built = run_steps(&plan(&names, cfg)).and_then(|()| {
            Link::ALL
                .iter()
                .try_for_each(|&l| tune_link(&names, l, cfg))
        });
        if let Err(e) = built {
            if let Err(cleanup) = super::Lab::down(&cfg.prefix) {
                tracing::error!(error = %cleanup, "cleanup after a failed lab up also failed");
            }
            return Err(e);
        }
        let st = Self::status(&cfg.prefix)?.ok_or_else(|| LabError::Parse {
            command: format!("ip -n {} link show {IN_DEV}", names.fwd),
            detail: "the forward lab vanished right after it was built".to_string(),
        })?;
        tracing::info!(prefix = %cfg.prefix, "forward lab up");
        Ok(st)
    }

    /// Re-creates one link after its veth pair was deleted (a test deletes one to
    /// take a port's device away): the same names, MACs, addresses, neighbours and
    /// routes as `up` made.
    pub fn recreate_link(cfg: &LabConfig, link: Link) -> Result<(), LabError> {
        let names = ForwardNames::from_prefix(&cfg.prefix)?.split(cfg.split_netns);
        run_steps(&plan_link(&names, link, cfg))?;
        tune_link(&names, link, cfg)
    }

    /// Deletes one link's veth pair (both ends go).
    pub fn delete_link(prefix: &str, link: Link) -> Result<(), LabError> {
        let names =
            ForwardNames::from_prefix(prefix)?.split(netns::exists(&format!("{prefix}-fwd2")));
        ip(
            &[
                "-n",
                names.netns(port_end(link).role),
                "link",
                "del",
                port_end(link).dev,
            ],
            "is the forward lab up?",
        )
    }

    /// A split lab's P-fwd2 replaced, as a container restart does (see
    /// [`ForwardLab::replace_netns`]).
    pub fn replace_fwd2(cfg: &LabConfig) -> Result<(), LabError> {
        Self::replace_netns(cfg, Role::Fwd2)
    }

    /// One of xdpool's namespaces (`Role::Fwd` or `Role::Fwd2`) replaced, as a
    /// container restart does: the name is deleted, the old veth pairs go (deleted
    /// from their outer ends: a namespace someone still holds lives on, with its
    /// devices, after its name is gone), and a new one is made under the name with
    /// the same links, names, MACs, addresses, neighbours and routes.
    pub fn replace_netns(cfg: &LabConfig, role: Role) -> Result<(), LabError> {
        let names = ForwardNames::from_prefix(&cfg.prefix)?.split(cfg.split_netns);
        let ns = names.netns(role).to_string();
        let links: Vec<Link> = Link::ALL
            .into_iter()
            .filter(|&l| names.netns(port_end(l).role) == ns)
            .collect();
        if links.is_empty() || matches!(role, Role::Src | Role::Dst) {
            return Err(LabError::Parse {
                command: format!("replace namespace {ns}"),
                detail: "not one of xdpool's namespaces (P-fwd, P-fwd2) in this lab".into(),
            });
        }
        ip(&["netns", "del", &ns], "is the forward lab up?")?;
        for &link in &links {
            let outer = outer_end(link);
            // Gone already when nothing held the old namespace.
            let _ = ip(
                &["-n", names.netns(outer.role), "link", "del", outer.dev],
                "",
            );
        }
        let mut steps = vec![
            step(&["netns", "add", &ns], ROOT),
            step(&["-n", &ns, "link", "set", "lo", "up"], ROOT),
        ];
        for key in ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"] {
            steps.push(Step::Sysctl {
                netns: ns.clone(),
                key,
                value: "0",
            });
        }
        for &link in &links {
            steps.extend(plan_link(&names, link, cfg));
        }
        run_steps(&steps)?;
        links.iter().try_for_each(|&l| tune_link(&names, l, cfg))
    }

    /// The lab as it is now, or `None` when it is not (completely) there.
    pub fn status(prefix: &str) -> Result<Option<ForwardStatus>, LabError> {
        let names = ForwardNames::from_prefix(prefix)?;
        let names = names.split(netns::exists(&format!("{prefix}-fwd2")));
        if !names.all().iter().all(|ns| netns::exists(ns)) {
            return Ok(None);
        }
        let get = |e: End| side(names.netns(e.role), e.dev, e.ipv4, e.ipv6);
        let (Some(src), Some(p_in), Some(p_out), Some(p_mon), Some(dst), Some(mon)) = (
            get(outer_end(Link::In))?,
            get(port_end(Link::In))?,
            get(port_end(Link::Out))?,
            get(port_end(Link::Mon))?,
            get(outer_end(Link::Out))?,
            get(outer_end(Link::Mon))?,
        ) else {
            return Ok(None);
        };
        Ok(Some(ForwardStatus {
            already_up: false,
            names,
            src,
            ports: [p_in, p_out, p_mon],
            dst,
            mon,
        }))
    }
}

/// GRO (so redirected frames reach a peer without an XDP program) and threaded NAPI,
/// as the two-namespace lab does.
fn tune_link(names: &ForwardNames, link: Link, cfg: &LabConfig) -> Result<(), LabError> {
    let (port, outer) = link.ends();
    for end in [port, outer] {
        let ns = names.netns(end.role);
        if cfg.gro {
            netns::in_netns(ns, || netns::set_gro(end.dev, true))??;
        }
        if cfg.threaded_napi {
            super::set_threaded_napi(ns, end.dev, true)?;
        }
    }
    Ok(())
}

fn run_steps(steps: &[Step]) -> Result<(), LabError> {
    for s in steps {
        match s {
            Step::Ip { args, hint } => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ip(&args, hint)?;
            }
            Step::Sysctl {
                netns: ns,
                key,
                value,
            } => {
                let path = format!("/proc/sys/{key}");
                // /proc/sys/net is the namespace of whoever opens it.
                netns::in_netns(ns, || std::fs::write(&path, value))?.map_err(|e| {
                    LabError::Command {
                        command: format!("echo {value} > {path} (in {ns})"),
                        stderr: e.to_string(),
                        hint: ROOT,
                    }
                })?;
            }
        }
    }
    Ok(())
}

/// Brings a forward lab up on creation and down on drop (for tests and the demo).
#[derive(Debug)]
pub struct ForwardLabGuard {
    cfg: LabConfig,
    status: ForwardStatus,
}

impl ForwardLabGuard {
    /// Builds the lab with [`ForwardLab::up`]; it is removed when the guard drops.
    pub fn up(cfg: &LabConfig) -> Result<Self, LabError> {
        Ok(Self {
            cfg: cfg.clone(),
            status: ForwardLab::up(cfg)?,
        })
    }

    /// The lab's namespaces, devices and addresses.
    pub fn status(&self) -> &ForwardStatus {
        &self.status
    }

    /// The configuration it was built with (for [`ForwardLab::recreate_link`]).
    pub fn config(&self) -> &LabConfig {
        &self.cfg
    }
}

impl Drop for ForwardLabGuard {
    fn drop(&mut self) {
        if let Err(e) = super::Lab::down(&self.cfg.prefix) {
            tracing::error!(prefix = %self.cfg.prefix, error = %e, "lab down failed; remove it with `xdpool lab down`");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(steps: &[Step]) -> Vec<String> {
        steps.iter().map(Step::line).collect()
    }

    #[test]
    fn names_take_the_prefix_devices_do_not() {
        let n = ForwardNames::from_prefix("xdpool").unwrap();
        assert_eq!(n.all(), ["xdpool-src", "xdpool-fwd", "xdpool-dst"]);
        assert!(matches!(
            ForwardNames::from_prefix("a b"),
            Err(LabError::BadPrefix(_))
        ));
        let devs: Vec<&str> = Link::ALL
            .iter()
            .flat_map(|l| [l.ends().0.dev, l.ends().1.dev])
            .collect();
        assert_eq!(devs, ["xdpf0", "xdps0", "xdpf1", "xdpd0", "xdpf2", "xdpm0"]);
    }

    #[test]
    fn addresses_match_the_spec_table() {
        let rows: Vec<(Role, &str, String, String)> = Link::ALL
            .iter()
            .flat_map(|l| {
                let (a, b) = l.ends();
                [a, b]
            })
            .map(|e| {
                (
                    e.role,
                    e.dev,
                    format!("{}/24", e.ipv4),
                    format!("{}/64", e.ipv6),
                )
            })
            .collect();
        let want = [
            (Role::Fwd, "xdpf0", "198.18.1.2/24", "2001:2:0:1::2/64"),
            (Role::Src, "xdps0", "198.18.1.1/24", "2001:2:0:1::1/64"),
            // Fwd2 is P-fwd unless the lab is split.
            (Role::Fwd2, "xdpf1", "198.18.2.2/24", "2001:2:0:2::2/64"),
            (Role::Dst, "xdpd0", "198.18.2.1/24", "2001:2:0:2::1/64"),
            (Role::Fwd2, "xdpf2", "198.18.3.2/24", "2001:2:0:3::2/64"),
            (Role::Dst, "xdpm0", "198.18.3.1/24", "2001:2:0:3::1/64"),
        ];
        for (got, want) in rows.iter().zip(want) {
            assert_eq!((got.0, got.1, got.2.as_str(), got.3.as_str()), want);
        }
        // All six MACs differ, all locally administered unicast.
        let macs: std::collections::BTreeSet<[u8; 6]> = Link::ALL
            .iter()
            .flat_map(|l| [l.ends().0.mac, l.ends().1.mac])
            .collect();
        assert_eq!(macs.len(), 6);
        assert!(macs.iter().all(|m| m[0] & 0x03 == 0x02));
    }

    #[test]
    fn plan_makes_every_veth_end_inside_a_lab_namespace() {
        let names = ForwardNames::from_prefix("t1").unwrap();
        let cmds = joined(&plan(&names, &LabConfig::with_prefix("t1")));
        for c in cmds.iter().filter(|c| c.contains(" link add ")) {
            // `-n NS link add` creates inside NS; the peer goes straight to another lab namespace.
            assert!(c.starts_with("-n t1-fwd link add "), "{c}");
            assert!(
                c.ends_with("netns t1-src") || c.ends_with("netns t1-dst"),
                "{c}"
            );
        }
        assert_eq!(cmds.iter().filter(|c| c.contains(" link add ")).count(), 3);
        // Nothing outside the lab's namespaces: every command names one of them.
        for c in &cmds {
            assert!(
                c.starts_with("-n t1-")
                    || c.starts_with("netns add t1-")
                    || c.starts_with("sysctl t1-fwd ")
                    || c.starts_with("netns exec t1-"),
                "{c}"
            );
        }
        assert!(cmds.contains(&"sysctl t1-fwd net/ipv4/ip_forward=0".to_string()));
        assert!(cmds.contains(&"sysctl t1-fwd net/ipv6/conf/all/forwarding=0".to_string()));
    }

    #[test]
    fn plan_installs_the_spec_neighbours_and_routes() {
        let names = ForwardNames::from_prefix("t2").unwrap();
        let cmds = joined(&plan(&names, &LabConfig::with_prefix("t2")));
        for want in [
            "-n t2-fwd neigh replace 198.18.2.1 lladdr 02:78:64:70:02:01 dev xdpf1 nud permanent",
            "-n t2-fwd neigh replace 198.18.3.1 lladdr 02:78:64:70:03:01 dev xdpf2 nud permanent",
            "-n t2-fwd neigh replace 198.18.1.1 lladdr 02:78:64:70:01:01 dev xdpf0 nud permanent",
            "-n t2-src neigh replace 198.18.1.2 lladdr 02:78:64:70:01:02 dev xdps0 nud permanent",
            "-n t2-src route replace 198.18.2.0/24 via 198.18.1.2",
            "-n t2-src route replace 198.18.3.0/24 via 198.18.1.2",
            "-n t2-src -6 route replace 2001:2:0:2::/64 via 2001:2:0:1::2",
            "-n t2-dst neigh replace 198.18.2.2 lladdr 02:78:64:70:02:02 dev xdpd0 nud permanent",
            "-n t2-dst route replace 198.18.1.0/24 via 198.18.2.2",
            "-n t2-fwd neigh replace 2001:2:0:2::1 lladdr 02:78:64:70:02:01 dev xdpf1 nud permanent",
            "netns exec t2-dst ethtool -K xdpd0 rx off",
            "netns exec t2-dst ethtool -K xdpm0 rx off",
            "netns exec t2-src ethtool -K xdps0 rx off",
        ] {
            assert!(cmds.iter().any(|c| c == want), "missing `ip {want}` in\n{}", cmds.join("\n"));
        }
        // A route is added only after its device is up.
        let up = cmds
            .iter()
            .position(|c| c == "-n t2-src link set xdps0 up")
            .unwrap();
        let route = cmds
            .iter()
            .position(|c| c.starts_with("-n t2-src route"))
            .unwrap();
        assert!(up < route);
    }

    #[test]
    fn a_split_lab_puts_out_and_mon_in_fwd2_and_in_in_fwd() {
        let names = ForwardNames::from_prefix("t5").unwrap().split(true);
        assert_eq!(names.all(), ["t5-src", "t5-fwd", "t5-fwd2", "t5-dst"]);
        let cmds = joined(&plan(&names, &LabConfig::with_prefix("t5")));
        assert!(
            cmds.iter()
                .any(|c| c.starts_with("-n t5-fwd link add xdpf0 ") && c.ends_with("netns t5-src")),
            "{cmds:#?}"
        );
        assert!(cmds.iter().any(|c| c.starts_with("-n t5-fwd2 link add xdpf1 ") && c.ends_with("netns t5-dst")), "{cmds:#?}");
        assert!(
            cmds.iter()
                .any(|c| c.starts_with("-n t5-fwd2 link add xdpf2 ")),
            "{cmds:#?}"
        );
        assert!(
            cmds.contains(&"sysctl t5-fwd2 net/ipv4/ip_forward=0".to_string()),
            "{cmds:#?}"
        );
        // Not split: the same plan as before, fwd2 is fwd.
        let one = ForwardNames::from_prefix("t5").unwrap();
        assert_eq!(one.netns(Role::Fwd2), "t5-fwd");
        assert!(joined(&plan(&one, &LabConfig::with_prefix("t5")))
            .iter()
            .all(|c| !c.contains("fwd2")));
    }

    #[test]
    fn the_split_config_names_the_split_labs_namespaces() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../configs/forward-split.toml"
        ))
        .unwrap();
        let cfg = crate::config::Config::parse(&text).unwrap();
        let names = ForwardNames::from_prefix(super::super::DEFAULT_PREFIX)
            .unwrap()
            .split(true);
        let ns: Vec<(String, Option<String>)> = cfg
            .ports()
            .into_iter()
            .map(|p| (p.interface, p.netns))
            .collect();
        let want: Vec<(String, Option<String>)> = Link::ALL
            .iter()
            .map(|&l| {
                (
                    port_end(l).dev.to_string(),
                    Some(names.netns(port_end(l).role).to_string()),
                )
            })
            .collect();
        assert_eq!(ns, want);
    }

    #[test]
    fn a_link_plan_rebuilds_only_that_link() {
        let names = ForwardNames::from_prefix("t3").unwrap();
        let cfg = LabConfig {
            queues: Some(2),
            mtu: Some(9000),
            ..LabConfig::with_prefix("t3")
        };
        let cmds = joined(&plan_link(&names, Link::Out, &cfg));
        assert_eq!(cmds[0], "-n t3-fwd link add xdpf1 numtxqueues 2 numrxqueues 2 type veth peer name xdpd0 netns t3-dst numtxqueues 2 numrxqueues 2");
        assert!(
            cmds.iter().all(|c| !c.contains("xdpf0")
                && !c.contains("xdps0")
                && !c.contains("xdpm0")
                && !c.contains("xdpf2")),
            "{cmds:#?}"
        );
        assert!(cmds.contains(&"-n t3-dst link set xdpd0 mtu 9000".to_string()));
        assert!(cmds.contains(&"-n t3-dst route replace 198.18.1.0/24 via 198.18.2.2".to_string()));
        // Every command of the full plan that concerns this link is in the link plan.
        let full = joined(&plan(&names, &cfg));
        for c in full
            .iter()
            .filter(|c| c.contains("xdpf1") || c.contains("xdpd0"))
        {
            assert!(cmds.contains(c), "{c}");
        }
    }

    #[test]
    fn addresses_are_in_benchmarking_ranges() {
        for l in Link::ALL {
            for e in [l.ends().0, l.ends().1] {
                assert_eq!(
                    u32::from(e.ipv4) & 0xfffe_0000,
                    u32::from(Ipv4Addr::new(198, 18, 0, 0))
                );
                assert_eq!(&e.ipv6.segments()[..3], &[0x2001, 2, 0]);
            }
        }
    }
}
