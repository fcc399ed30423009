//! Port checks: the device, its driver and XDP features, its RX queues against
//! `queues`, the frame size a chunk (and igb's zero-copy buffer) takes, rx-vlan-offload
//! under VLAN rules, the NAPI settings busy-poll needs, and its NUMA node against the
//! workers' cores. Each reads the device's sysfs under `root` and the live facts.

use std::path::{Path, PathBuf};

use super::{netdev, Check, PortFacts};
use crate::config::{Config, PortDef, WaitMode, ZeroCopy};
use crate::steer::XdpAttachMode;

/// What the port checks need of the config, for one port.
#[derive(Debug, Clone)]
pub struct PortInput {
    /// The port.
    pub def: PortDef,
    /// `umem.chunk_size`.
    pub chunk_size: u32,
    /// Rules on this port that match `vlan`.
    pub vlan_rules: usize,
    /// `workers.mode = "busy-poll"`.
    pub busy_poll: bool,
    /// The `workers.cores` of this port's sockets (empty: run picks them).
    pub cores: Vec<usize>,
}

impl PortInput {
    /// Port `index` of `cfg`, whose sockets run on `cores`.
    pub fn of(cfg: &Config, index: usize, cores: &[usize]) -> PortInput {
        PortInput {
            def: cfg.ports()[index].clone(),
            chunk_size: *cfg.umem.chunk_size.get_ref(),
            vlan_rules: cfg
                .valid_rules()
                .iter()
                .filter(|r| r.port == index && r.vlan.is_some())
                .count(),
            busy_poll: cfg.workers.mode == WaitMode::BusyPoll,
            cores: cores.to_vec(),
        }
    }
}

fn dev_dir(root: &Path, dev: &str) -> PathBuf {
    root.join("sys/class/net").join(dev)
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Every port check, over the sysfs under `root` and the live `facts`.
pub fn checks(root: &Path, input: &PortInput, facts: &PortFacts) -> Vec<Check> {
    let p = &input.def;
    let on = |c: Check| c.on_port(&p.name, &p.interface);
    if !dev_dir(root, &p.interface).exists() {
        let ns = p
            .netns
            .as_deref()
            .map_or("this namespace".to_string(), |n| {
                format!("network namespace {n}")
            });
        return vec![on(Check::fail(
            "interface",
            format!("no device {} in {ns}", p.interface),
            "fix the port's interface (ip link shows the names), or bring the lab up (xdpool lab up)",
        ))];
    }
    let driver = driver_of(root, &p.interface);
    let mut out = vec![
        driver_check(driver.as_deref()),
        xdp_native(&facts.xdp, p.xdp_mode),
        zero_copy(&facts.xdp, p.zero_copy, p.xdp_mode, driver.as_deref()),
        multi_buffer(&facts.xdp, p.multi_buffer, p.zero_copy),
        queues(
            root,
            &p.interface,
            &p.queues,
            p.follow_queues,
            facts.rx_channels.as_ref().ok().copied(),
        ),
        frame_size(root, p, input.chunk_size, driver.as_deref()),
        rx_vlan_offload(
            &facts.rx_vlan_offload,
            input.vlan_rules,
            &p.interface,
            driver.is_none(),
        ),
        busy_poll_irq(root, &p.interface, input.busy_poll),
        numa(root, &p.interface, &input.cores),
    ];
    out.iter_mut().for_each(|c| *c = on(c.clone()));
    out
}

/// The kernel driver of `dev` (`device/driver` link; `None`: no bus device).
pub fn driver_of(root: &Path, dev: &str) -> Option<String> {
    let link = std::fs::read_link(dev_dir(root, dev).join("device/driver")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

fn driver_check(driver: Option<&str>) -> Check {
    match driver {
        Some(d) => Check::ok("driver", d.to_string()),
        None => Check::ok(
            "driver",
            "none in sysfs: a virtual device (veth, virtual functions' representors, ...)",
        ),
    }
}

/// Native XDP with redirect (to the AF_XDP sockets) when `xdp_mode = "native"`.
pub fn xdp_native(xdp: &Result<netdev::XdpFeatures, String>, mode: XdpAttachMode) -> Check {
    let need = netdev::act::BASIC | netdev::act::REDIRECT;
    match (mode, xdp) {
        (XdpAttachMode::Skb, _) => Check::ok("xdp_native", "not asked: xdp_mode = \"skb\" (generic XDP works on every device)"),
        (_, Ok(f)) if f.has(need) => Check::ok("xdp_native", format!("xdp-features {}", f.names())),
        (_, Ok(f)) => Check::fail(
            "xdp_native",
            format!("xdp-features {}: the driver has no native XDP with redirect", f.names()),
            "set xdp_mode = \"skb\" for this port (slower), or use a NIC whose driver has native XDP",
        ),
        (_, Err(e)) => Check::warn(
            "xdp_native",
            format!("cannot read the XDP features: {e}"),
            "on Linux 6.3+ the netdev netlink family reports them; otherwise run and see whether the attach is refused (exit 6)",
        ),
    }
}

/// AF_XDP zero-copy against the port's `zero_copy` wish.
pub fn zero_copy(
    xdp: &Result<netdev::XdpFeatures, String>,
    wish: ZeroCopy,
    mode: XdpAttachMode,
    driver: Option<&str>,
) -> Check {
    let has = match xdp {
        Ok(f) => f.has(netdev::act::XSK_ZEROCOPY),
        Err(e) if wish == ZeroCopy::Off => {
            return Check::ok("zero_copy", format!("not asked (zero_copy = false); features unknown: {e}"))
        }
        Err(e) => {
            return Check::warn(
                "zero_copy",
                format!("cannot read the XDP features: {e}"),
                "run once and read the log: zero_copy = true is refused (exit 7) where the driver lacks it",
            )
        }
    };
    let drv = driver.unwrap_or("the device");
    match (wish, has, mode) {
        (ZeroCopy::Off, true, _) => Check::ok("zero_copy", format!("off (zero_copy = false); {drv} supports it")),
        (ZeroCopy::Off, false, _) => Check::ok("zero_copy", "off (zero_copy = false)"),
        (_, true, XdpAttachMode::Native) => Check::ok("zero_copy", format!("{drv} supports AF_XDP zero-copy")),
        (ZeroCopy::On, _, _) => Check::fail(
            "zero_copy",
            match mode {
                XdpAttachMode::Skb => "zero_copy = true with xdp_mode = \"skb\": generic XDP has no zero-copy".to_string(),
                XdpAttachMode::Native => format!("zero_copy = true but {drv} has no AF_XDP zero-copy (xsk-zerocopy)"),
            },
            "set zero_copy = \"auto\" or false (copy mode); xdpool run refuses this port (exit 7)",
        ),
        (ZeroCopy::Auto, _, _) => Check::warn(
            "zero_copy",
            format!("zero_copy = \"auto\" but {drv} has no zero-copy here: the port runs in copy mode"),
            "use a driver with AF_XDP zero-copy (igb, ice, i40e, mlx5, virtio_net 6.x) in native mode, or set zero_copy = false to say so",
        ),
    }
}

/// Multi-buffer frames (`multi_buffer = true`): rx-sg in native XDP, and more than one
/// segment per frame in zero-copy.
pub fn multi_buffer(xdp: &Result<netdev::XdpFeatures, String>, asked: bool, zc: ZeroCopy) -> Check {
    if !asked {
        return Check::ok("multi_buffer", "not asked (multi_buffer = false)");
    }
    let f = match xdp {
        Ok(f) => f,
        Err(e) => {
            return Check::warn(
                "multi_buffer",
                format!("cannot read the XDP features: {e}"),
                "check jumbo frames arrive (rx_multi_buffer in xdpool stats)",
            )
        }
    };
    if !f.has(netdev::act::RX_SG) {
        return Check::warn(
            "multi_buffer",
            format!("multi_buffer = true but xdp-features {} lack rx-sg: frames longer than a chunk are dropped", f.names()),
            "keep the MTU within one chunk (umem.chunk_size = 4096), or use a driver with rx-sg",
        );
    }
    if zc != ZeroCopy::Off && f.has(netdev::act::XSK_ZEROCOPY) && f.zc_max_segs <= 1 {
        return Check::warn(
            "multi_buffer",
            format!(
                "zero-copy takes {} segment(s) per frame: multi-buffer frames need copy mode",
                f.zc_max_segs
            ),
            "set zero_copy = false on this port for jumbo frames",
        );
    }
    Check::ok(
        "multi_buffer",
        format!("rx-sg; zero-copy up to {} segments", f.zc_max_segs),
    )
}

/// RX queues the device has now (`queues/rx-*` in sysfs).
pub fn rx_queue_count(root: &Path, dev: &str) -> Option<u32> {
    let dir = std::fs::read_dir(dev_dir(root, dev).join("queues")).ok()?;
    Some(
        dir.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count() as u32,
    )
}

/// The device's RX queues against the configured ones: its channel count
/// (`channels`, from `ethtool -l`, what `xdpool run` reads) where it has channels,
/// else the `queues/rx-*` of sysfs. sysfs alone is wrong on a device that is down:
/// igb there lists the queues of its allocation (8), not the 2 channels it opens with.
pub fn queues(
    root: &Path,
    dev: &str,
    planned: &[u32],
    follow: bool,
    channels: Option<u32>,
) -> Check {
    let Some(n) = channels.or_else(|| rx_queue_count(root, dev)) else {
        return Check::warn(
            "queues",
            format!("no {dev}/queues in sysfs"),
            "check the device in `ethtool -l`",
        );
    };
    if follow {
        return Check::ok("queues", format!("queues = \"all\": {n} RX queue(s) now"));
    }
    let beyond: Vec<String> = planned
        .iter()
        .filter(|&&q| q >= n)
        .map(|q| q.to_string())
        .collect();
    if !beyond.is_empty() {
        return Check::fail(
            "queues",
            format!(
                "queue(s) {} configured but {dev} has {n} RX queue(s)",
                beyond.join(", ")
            ),
            format!(
                "list queues below {n}, or raise the channel count: ethtool -L {dev} combined {}",
                planned.iter().max().map_or(1, |m| m + 1)
            ),
        );
    }
    let unserved = n as usize - planned.len().min(n as usize);
    if unserved > 0 {
        return Check::warn(
            "queues",
            format!("{} of {n} RX queue(s) served: frames RSS puts on the other {unserved} go to the kernel, unseen", planned.len()),
            format!("serve every queue (queues = \"all\"), or steer the traffic to the served ones (ethtool -L {dev} combined {} or ethtool -X/-N)", planned.len()),
        );
    }
    Check::ok("queues", format!("{n} RX queue(s), all served"))
}

/// The longest frame the MTU allows against one chunk, and against igb's zero-copy
/// RX buffer ([`crate::device::zero_copy_rx_limit`]).
pub fn frame_size(root: &Path, p: &PortDef, chunk_size: u32, driver: Option<&str>) -> Check {
    let Some(mtu) =
        read(&dev_dir(root, &p.interface).join("mtu")).and_then(|s| s.parse::<u32>().ok())
    else {
        return Check::warn(
            "frame_size",
            "no mtu in sysfs",
            "check the device with `ip link`",
        );
    };
    let frame = mtu + 14;
    let room = crate::summary::single_buffer_room(chunk_size);
    if p.multi_buffer {
        return Check::ok(
            "frame_size",
            format!("MTU {mtu}: multi_buffer = true chains chunks for longer frames"),
        );
    }
    if frame > room {
        return Check::warn(
            "frame_size",
            format!("MTU {mtu}: frames up to {frame} B, but one {chunk_size} B chunk holds {room} B; the kernel drops longer ones (rx_dropped)"),
            format!("set multi_buffer = true, umem.chunk_size = 4096, or an MTU of {} or less", room - 14),
        );
    }
    if p.zero_copy != ZeroCopy::Off {
        if let Some(d) = driver {
            if let Some(limit) = crate::device::zero_copy_rx_limit(d, room).filter(|&l| frame > l) {
                let fix = if chunk_size < 4096 {
                    let bigger = crate::summary::single_buffer_room(4096);
                    let whole = crate::device::zero_copy_rx_limit(d, bigger).unwrap_or(bigger);
                    format!("set umem.chunk_size = 4096 (frames up to {whole} B) or an MTU of {} or less", limit - 14)
                } else {
                    format!("set an MTU of {} or less", limit - 14)
                };
                return Check::warn(
                    "frame_size",
                    format!("MTU {mtu}: in zero-copy {d} receives frames up to {limit} B whole with {chunk_size} B chunks (its RX buffer is set in 1 KiB units); longer ones arrive cut and are counted malformed"),
                    fix,
                );
            }
        }
    }
    Check::ok(
        "frame_size",
        format!("MTU {mtu}: frames up to {frame} B fit one {chunk_size} B chunk ({room} B room)"),
    )
}

/// rx-vlan-offload must be off where a rule matches `vlan`: a NIC that strips the tag
/// hands XDP an untagged frame, which no VLAN rule matches. A virtual device (veth)
/// strips nothing: a tag in the frame's bytes stays, but one a VLAN device on the peer
/// left in the skb's metadata (the peer's tx-vlan-offload) never reaches XDP.
pub fn rx_vlan_offload(
    offload: &Result<bool, String>,
    vlan_rules: usize,
    dev: &str,
    virtual_dev: bool,
) -> Check {
    if vlan_rules == 0 {
        return Check::ok(
            "rx_vlan_offload",
            "not needed: no rule of this port matches vlan",
        );
    }
    match offload {
        Ok(false) => Check::ok("rx_vlan_offload", format!("off: the {vlan_rules} VLAN rule(s) see the tag")),
        Ok(true) if virtual_dev => Check::warn(
            "rx_vlan_offload",
            format!("on, {vlan_rules} rule(s) match vlan, and {dev} is virtual: tags in the frames' bytes reach XDP, tags a VLAN device on the peer put in metadata do not"),
            "turn tx-vlan-offload off where the tagged frames are sent (ethtool -K PEER txvlan off), so the tag travels in the frame",
        ),
        Ok(true) => Check::fail(
            "rx_vlan_offload",
            format!("on, and {vlan_rules} rule(s) match vlan: the NIC strips the tag before XDP, so they never match"),
            format!("ethtool -K {dev} rxvlan off"),
        ),
        Err(e) => Check::warn(
            "rx_vlan_offload",
            format!("cannot read it ({e}) and {vlan_rules} rule(s) match vlan"),
            format!("check `ethtool -k {dev} | grep rx-vlan-offload` says off"),
        ),
    }
}

/// `napi_defer_hard_irqs` and `gro_flush_timeout` for `workers.mode = "busy-poll"`.
pub fn busy_poll_irq(root: &Path, dev: &str, busy_poll: bool) -> Check {
    if !busy_poll {
        return Check::ok("busy_poll_irq", "not needed: workers.mode is not busy-poll");
    }
    let dir = dev_dir(root, dev);
    let d = read(&dir.join("napi_defer_hard_irqs"))
        .zip(read(&dir.join("gro_flush_timeout")))
        .and_then(|(a, b)| crate::xsk::IrqDeferral::parse(&a, &b));
    let fix = format!(
        "echo 2 > /sys/class/net/{dev}/napi_defer_hard_irqs; echo 200000 > /sys/class/net/{dev}/gro_flush_timeout"
    );
    match d {
        None => Check::warn("busy_poll_irq", "no napi_defer_hard_irqs or gro_flush_timeout in sysfs", fix),
        Some(d) if d.defers() => Check::ok(
            "busy_poll_irq",
            format!("napi_defer_hard_irqs {}, gro_flush_timeout {} ns: interrupts stay off while workers busy-poll", d.defer_hard_irqs, d.gro_flush_timeout_ns),
        ),
        Some(d) => Check::warn(
            "busy_poll_irq",
            format!("napi_defer_hard_irqs {}, gro_flush_timeout {} ns: every interrupt runs the NAPI itself, so busy polls find the frames taken", d.defer_hard_irqs, d.gro_flush_timeout_ns),
            fix,
        ),
    }
}

fn parse_cpulist(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<usize>().ok()),
        }
    }
    v
}

/// The NUMA node of `cpu` (`sys/devices/system/node/nodeN/cpulist`).
pub fn node_of_cpu(root: &Path, cpu: usize) -> Option<u32> {
    let dir = std::fs::read_dir(root.join("sys/devices/system/node")).ok()?;
    dir.flatten().find_map(|e| {
        let node: u32 = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
        let list = std::fs::read_to_string(e.path().join("cpulist")).ok()?;
        parse_cpulist(&list).contains(&cpu).then_some(node)
    })
}

/// The device's NUMA node against the cores its workers run on.
pub fn numa(root: &Path, dev: &str, cores: &[usize]) -> Check {
    let node =
        read(&dev_dir(root, dev).join("device/numa_node")).and_then(|s| s.parse::<i64>().ok());
    let Some(node) = node.filter(|&n| n >= 0).map(|n| n as u32) else {
        return Check::ok(
            "numa",
            "the device has no NUMA node (virtual, or a single-node machine)",
        );
    };
    if cores.is_empty() {
        return Check::ok(
            "numa",
            format!("device on node {node}; workers.cores empty: run picks cores of node {node}"),
        );
    }
    let away: Vec<String> = cores
        .iter()
        .filter_map(|&c| match node_of_cpu(root, c) {
            Some(n) if n != node => Some(format!("{c} (node {n})")),
            _ => None,
        })
        .collect();
    if away.is_empty() {
        return Check::ok("numa", format!("device and workers' cores on node {node}"));
    }
    let local =
        read(&root.join(format!("sys/devices/system/node/node{node}/cpulist"))).unwrap_or_default();
    Check::warn(
        "numa",
        format!(
            "device on node {node}, but workers.cores has {}: every frame crosses the interconnect",
            away.join(", ")
        ),
        format!("pick cores of node {node} ({local}) in workers.cores, or leave it empty"),
    )
}

/// Runs the port checks on this machine: in the port's namespace when it has one, on
/// a thread that also mounts that namespace's sysfs privately (never seen outside it).
pub fn checks_live(input: &PortInput) -> Vec<Check> {
    let p = &input.def;
    let Some(ns) = p.netns.clone() else {
        return checks(Path::new("/"), input, &facts(&p.interface));
    };
    let fail = |found: String, fix: &str| {
        vec![Check::fail("netns", found, fix).on_port(&p.name, &p.interface)]
    };
    let res = std::thread::scope(|s| {
        s.spawn(|| -> Result<Vec<Check>, (String, &'static str)> {
            let _guard = crate::netns::enter(&ns).map_err(|e| {
                (
                    e.to_string(),
                    "create the namespace (xdpool lab up) or fix the port's netns",
                )
            })?;
            private_sysfs().map_err(|e| {
                (
                    format!("cannot mount the sysfs of network namespace {ns} on this thread: {e}"),
                    "run as root (CAP_SYS_ADMIN)",
                )
            })?;
            Ok(checks(Path::new("/"), input, &facts(&p.interface)))
        })
        .join()
    });
    match res {
        Ok(Ok(c)) => c,
        Ok(Err((found, fix))) => fail(found, fix),
        Err(_) => fail(
            format!("the check thread for namespace {ns} panicked"),
            "report a bug",
        ),
    }
}

/// Gives the calling thread a mount namespace of its own, with `/sys` mounted again
/// so that it shows the thread's network namespace (what `ip netns exec` does for a
/// process). `/` becomes a slave first, so nothing mounted here reaches the host.
fn private_sysfs() -> nix::Result<()> {
    use nix::mount::{mount, MsFlags};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )?;
    mount(
        Some("sysfs"),
        "/sys",
        Some("sysfs"),
        MsFlags::empty(),
        None::<&str>,
    )
}

/// The live facts of `dev` in the calling thread's namespace.
pub fn facts(dev: &str) -> PortFacts {
    let xdp = crate::netns::ifindex(dev)
        .map_err(|e| e.to_string())
        .and_then(|i| netdev::xdp_features(i).map_err(|e| e.to_string()));
    PortFacts {
        xdp,
        rx_vlan_offload: crate::netns::rx_vlan_offload(dev).map_err(|e| e.to_string()),
        rx_channels: crate::netns::rx_queues(dev)
            .map(|q| q.now)
            .map_err(|e| e.to_string()),
    }
}
