//! Planning: the validated config, turned into what runs, without touching a
//! device. Which sockets (one per (port, queue)), which worker serves each and on
//! which core, each port's rules (for its XDP program and its workers), whether a
//! port needs a TX ring, and the one UMEM every socket shares. Pure, so it is
//! unit-tested; `lifecycle` and `run` do the I/O.

use crate::config::{Action, Config, PortDef, ValidRule, ZeroCopy};
use crate::steer::XdpAttachMode;
use crate::steer::{Rule, RuleAction, RuleMatch};

/// Everything `run` builds, decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Ports, in config order.
    pub ports: Vec<PortPlan>,
    /// Sockets, port by port, queue by queue (the index is the pool id).
    pub sockets: Vec<SocketPlan>,
    /// Workers and the sockets each serves.
    pub workers: Vec<WorkerPlan>,
    /// The UMEM and ring sizes.
    pub umem: UmemPlan,
}

/// One port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPlan {
    /// The port as configured.
    pub def: PortDef,
    /// Its rules, in order (its XDP program's and its workers' lookup).
    pub rules: Vec<ValidRule>,
    /// Whether its sockets need a TX ring: a rule sends back out of it, or another
    /// port's rule forwards or mirrors to it. Without one, poll() skips the kernel's
    /// copy-mode TX path.
    pub transmits: bool,
    /// Its sockets (indexes into `Plan::sockets`), in queue order.
    pub sockets: Vec<usize>,
}

/// One (port, queue) socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketPlan {
    /// Port index.
    pub port: usize,
    /// Queue id.
    pub queue: u32,
    /// Position of the queue in its port's list.
    pub queue_pos: usize,
    /// Worker index.
    pub worker: usize,
}

/// One worker thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerPlan {
    /// Core to pin to.
    pub core: Option<usize>,
    /// Sockets served.
    pub sockets: Vec<usize>,
}

/// The shared UMEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmemPlan {
    /// Chunks.
    pub frames: u32,
    /// Chunk size.
    pub chunk_size: u32,
    /// Huge pages.
    pub hugepages: bool,
    /// Fill ring size (per socket).
    pub fill: u32,
    /// Completion ring size (per socket).
    pub completion: u32,
    /// RX ring size.
    pub rx: u32,
    /// TX ring size (for ports that transmit).
    pub tx: u32,
    /// Frames per copy-mode TX wake-up asked of the kernel (0: its default of 32).
    pub tx_budget: u32,
    /// Copy mode: how many frames a socket lets the kernel hold (`rings.copy_fill`).
    pub copy_fill: crate::config::CopyFill,
    /// Zero-copy for the UMEM: the kernel gives every socket sharing a UMEM the mode
    /// of its first, so one wish for all: `On` if every port says true, `Off` if one
    /// says false, `Auto` otherwise.
    pub zero_copy: ZeroCopy,
    /// Multi-buffer sockets (every port agrees; validated).
    pub multi_buffer: bool,
}

/// Plans a run of `cfg` with workers on `cores` (one per socket, in order; fewer
/// cores leave the rest unpinned). Sockets given the same core share one worker
/// thread, which serves them in turn (two spinning threads on one core would each get
/// half of it, and hand frames to each other through their queues besides).
pub fn plan(cfg: &Config, cores: &[usize]) -> Plan {
    let defs = cfg.ports();
    let rules = cfg.valid_rules();
    let mut ports: Vec<PortPlan> = defs
        .into_iter()
        .enumerate()
        .map(|(i, def)| PortPlan {
            def,
            rules: rules.iter().filter(|r| r.port == i).cloned().collect(),
            transmits: false,
            sockets: Vec::new(),
        })
        .collect();
    for r in &rules {
        ports[r.port].transmits |= sends_back(r.action);
        let declared = r.call.iter().flat_map(|c| c.egress.iter().copied());
        for p in r.to.into_iter().chain(r.mirror_to).chain(declared) {
            ports[p].transmits = true;
        }
    }
    let mut sockets = Vec::new();
    let mut workers = Vec::new();
    for (pi, p) in ports.iter_mut().enumerate() {
        for (pos, &queue) in p.def.queues.iter().enumerate() {
            let s = sockets.len();
            let core = cores.get(s).copied();
            let worker = match core
                .and_then(|c| workers.iter().position(|w: &WorkerPlan| w.core == Some(c)))
            {
                Some(w) => {
                    workers[w].sockets.push(s);
                    w
                }
                None => {
                    workers.push(WorkerPlan {
                        core,
                        sockets: vec![s],
                    });
                    workers.len() - 1
                }
            };
            sockets.push(SocketPlan {
                port: pi,
                queue,
                queue_pos: pos,
                worker,
            });
            p.sockets.push(s);
        }
    }
    let wishes: Vec<ZeroCopy> = ports.iter().map(|p| p.def.zero_copy).collect();
    let zero_copy = if wishes.contains(&ZeroCopy::Off) {
        ZeroCopy::Off
    } else if wishes.iter().all(|z| *z == ZeroCopy::On) {
        ZeroCopy::On
    } else {
        ZeroCopy::Auto
    };
    let umem = UmemPlan {
        frames: *cfg.umem.frames.get_ref(),
        chunk_size: *cfg.umem.chunk_size.get_ref(),
        hugepages: cfg.umem.hugepages,
        fill: *cfg.rings.fill.get_ref(),
        completion: *cfg.rings.completion.get_ref(),
        rx: *cfg.rings.rx.get_ref(),
        tx: *cfg.rings.tx.get_ref(),
        tx_budget: cfg.rings.tx_budget(),
        copy_fill: cfg.rings.copy_fill,
        zero_copy,
        multi_buffer: ports.iter().any(|p| p.def.multi_buffer),
    };
    Plan {
        ports,
        sockets,
        workers,
        umem,
    }
}

/// The workers' cores, one per socket (port by port, queue by queue): `configured`
/// (`workers.cores`) when it is not empty. Otherwise each socket takes a core of its
/// port's device's NUMA node (`nic_node[port]`, from sysfs), highest first and in
/// turn, so that the worker, its pool and the NIC's DMA share a node; a port whose
/// device has no node (veth: -1), or a node without an online core, takes from all
/// online cores, highest first (socket `i` gets the `i`-th highest, as before).
/// Pure: `node_of` maps a CPU to its node.
pub fn choose_cores(
    configured: &[usize],
    port_sockets: &[usize],
    nic_node: &[Option<u32>],
    online: &[usize],
    node_of: &dyn Fn(usize) -> u32,
) -> Vec<usize> {
    if !configured.is_empty() {
        return configured.to_vec();
    }
    if online.is_empty() {
        return Vec::new();
    }
    let mut taken_on_node: std::collections::BTreeMap<u32, usize> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for (port, &n) in port_sockets.iter().enumerate() {
        let local: Vec<usize> = match nic_node.get(port).copied().flatten() {
            Some(node) => online
                .iter()
                .copied()
                .filter(|&c| node_of(c) == node)
                .collect(),
            None => Vec::new(),
        };
        for _ in 0..n {
            let i = out.len();
            let core = match nic_node.get(port).copied().flatten() {
                Some(node) if !local.is_empty() => {
                    let k = taken_on_node.entry(node).or_insert(0);
                    let c = local[local.len() - 1 - *k % local.len()];
                    *k += 1;
                    c
                }
                _ => online[online.len() - 1 - i % online.len()],
            };
            out.push(core);
        }
    }
    out
}

/// Each port's device's NUMA node as sysfs shows it (`None`: no node, e.g. veth).
pub fn nic_nodes(cfg: &Config) -> Vec<Option<u32>> {
    cfg.ports()
        .iter()
        .map(|p| pool::Topology::net_device_node(&p.interface))
        .collect()
}

/// [`choose_cores`] on this machine: `workers.cores`, or cores of each NIC's node
/// (read from sysfs), logged.
pub fn machine_cores(cfg: &Config, topo: &pool::Topology) -> Vec<usize> {
    let ports = cfg.ports();
    let port_sockets: Vec<usize> = ports.iter().map(|p| p.queues.len()).collect();
    let nodes = nic_nodes(cfg);
    let cores = choose_cores(
        cfg.workers.cores.get_ref(),
        &port_sockets,
        &nodes,
        &crate::config::online_cpus(),
        &|c| topo.node_of_cpu(c as u32),
    );
    if cfg.workers.cores.get_ref().is_empty() {
        let devs: Vec<String> = ports
            .iter()
            .zip(&nodes)
            .map(|(p, n)| {
                format!(
                    "{} node {}",
                    p.interface,
                    n.map_or("none".into(), |n| n.to_string())
                )
            })
            .collect();
        tracing::info!(?cores, "workers.cores is empty: workers on cores {cores:?}, taken from each NIC's NUMA node ({})", devs.join(", "));
    }
    cores
}

/// The UMEM's placement: its frames on the NICs' nodes, in proportion to the
/// sockets on each (`mbind` per node on a machine of several); evenly over the nodes
/// when no device has a node (veth), as before.
pub fn umem_topology(cfg: &Config, plan: &Plan, topo: pool::Topology) -> pool::Topology {
    let nodes = nic_nodes(cfg);
    let mut weights = vec![0u32; topo.nodes() as usize];
    for s in &plan.sockets {
        if let Some(n) = nodes
            .get(s.port)
            .copied()
            .flatten()
            .filter(|&n| (n as usize) < weights.len())
        {
            weights[n as usize] += 1;
        }
    }
    topo.placed_on(weights)
}

/// One rule in the XDP program's form: the same conditions; the action as the
/// program sees it (to a worker, to the kernel, or dropped in XDP).
pub fn steer_rule(r: &ValidRule) -> Rule {
    let matcher = RuleMatch::Fields {
        proto: r.proto,
        dst_port: r.dst_port,
        dst_prefix: r.dst,
        src_port: r.src_port,
        src_prefix: r.src,
        vlan: r.vlan,
    }
    .normalized();
    let action = match r.action {
        Action::Drop
        | Action::L2fwd
        | Action::Forward
        | Action::ReflectTwice
        | Action::Copybreak
        | Action::Call => RuleAction::Steer,
        Action::Pass => RuleAction::Pass,
        Action::Xdpdrop => RuleAction::Drop,
    };
    Rule { matcher, action }
}

/// Whether `a` sends frames back out of the receiving port.
fn sends_back(a: Action) -> bool {
    match a {
        // A handler may send any frame back (`Verdict::back`).
        Action::L2fwd | Action::ReflectTwice | Action::Copybreak | Action::Call => true,
        Action::Drop | Action::Forward | Action::Pass | Action::Xdpdrop => false,
    }
}

impl PortPlan {
    /// The port's rules in the XDP program's form.
    pub fn steer_rules(&self) -> Vec<Rule> {
        self.rules.iter().map(steer_rule).collect()
    }

    /// The XDP attach mode.
    pub fn xdp_mode(&self, over: Option<XdpAttachMode>) -> XdpAttachMode {
        over.unwrap_or(self.def.xdp_mode)
    }

    /// Whether some rule of this port uses `mac = "neigh"` or a fixed MAC (the
    /// control thread then reads device MACs and neighbours).
    pub fn needs_macs(&self) -> bool {
        // A packet function may ask for any rewrite (`Mac::To`, `Mac::NextHop`).
        self.rules.iter().any(|r| {
            (r.action == Action::Forward && r.mac != crate::config::MacRewrite::Swap)
                || r.action == Action::Call
        })
    }
}

/// The namespaces the ports live in, each once, in the order first named (the first
/// port's first: the one the process enters), and each port's index into that list.
/// `None` is the namespace xdpool was started in.
pub fn namespaces(ports: &[PortDef]) -> (Vec<Option<String>>, Vec<usize>) {
    let mut list: Vec<Option<String>> = Vec::new();
    let of_port = ports
        .iter()
        .map(|p| match list.iter().position(|n| *n == p.netns) {
            Some(i) => i,
            None => {
                list.push(p.netns.clone());
                list.len() - 1
            }
        })
        .collect();
    (list, of_port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MacRewrite;

    const FWD: &str = r#"
[[port]]
name = "in"
interface = "xdpf0"
netns = "ns"
queues = [0, 1]

[[port]]
name = "out"
interface = "xdpf1"
netns = "ns"
zero_copy = false

[[port]]
name = "mon"
interface = "xdpf2"
netns = "ns"

[umem]
frames = 65536

[[rule]]
port = "in"
proto = "udp"
dst_port = "9"
action = "forward"
to = "out"
mac = "neigh"
mirror_to = "mon"

[[rule]]
port = "out"
proto = "udp"
action = "drop"
"#;

    #[test]
    fn each_namespace_is_listed_once_and_each_port_points_at_its_own() {
        let one = Config::parse(FWD).unwrap().ports();
        assert_eq!(
            namespaces(&one),
            (vec![Some("ns".to_string())], vec![0, 0, 0])
        );
        let split = FWD
            .replacen(
                "netns = \"ns\"\nzero_copy = false",
                "netns = \"ns2\"\nzero_copy = false",
                1,
            )
            .replacen("netns = \"ns\"\n\n[umem]", "\n[umem]", 1);
        let two = Config::parse(&split).unwrap().ports();
        assert_eq!(
            namespaces(&two),
            (
                vec![Some("ns".to_string()), Some("ns2".to_string()), None],
                vec![0, 1, 2]
            )
        );
    }

    #[test]
    fn default_cores_come_from_the_nic_node_and_fall_back_to_all_online() {
        // Four CPUs, two nodes: 0 and 2 on node 0, 1 and 3 on node 1.
        let online = [0, 1, 2, 3];
        let node_of = |c: usize| (c % 2) as u32;
        // Configured cores win.
        assert_eq!(
            choose_cores(&[5, 6], &[2], &[Some(1)], &online, &node_of),
            [5, 6]
        );
        // No node (veth): the highest online cores, as before.
        assert_eq!(
            choose_cores(&[], &[3], &[None], &online, &node_of),
            [3, 2, 1]
        );
        // The NIC on node 1: node 1's cores, highest first, then round again.
        assert_eq!(
            choose_cores(&[], &[3], &[Some(1)], &online, &node_of),
            [3, 1, 3]
        );
        assert_eq!(
            choose_cores(&[], &[2], &[Some(0)], &online, &node_of),
            [2, 0]
        );
        // Two ports on two nodes; a port without a node keeps the old choice by index.
        assert_eq!(
            choose_cores(
                &[],
                &[1, 1, 1],
                &[Some(0), Some(1), None],
                &online,
                &node_of
            ),
            [2, 3, 1]
        );
        // A node with no online core: all online cores.
        assert_eq!(
            choose_cores(&[], &[2], &[Some(7)], &online, &node_of),
            [3, 2]
        );
        // One node machine, NIC on node 0: the same as before.
        assert_eq!(choose_cores(&[], &[2], &[Some(0)], &[0, 1], &|_| 0), [1, 0]);
        assert_eq!(choose_cores(&[], &[2], &[None], &[0, 1], &|_| 0), [1, 0]);
    }

    #[test]
    fn plan_gives_each_port_its_sockets_rules_workers_and_one_umem() {
        let cfg = Config::parse(FWD).unwrap();
        let p = plan(&cfg, &[3, 2, 1, 0]);
        let names: Vec<&str> = p.ports.iter().map(|p| p.def.name.as_str()).collect();
        assert_eq!(names, ["in", "out", "mon"]);
        // One socket per (port, queue), in config order, one worker each, cores in order.
        let s: Vec<(usize, u32, usize, usize)> = p
            .sockets
            .iter()
            .map(|s| (s.port, s.queue, s.queue_pos, s.worker))
            .collect();
        assert_eq!(s, [(0, 0, 0, 0), (0, 1, 1, 1), (1, 0, 0, 2), (2, 0, 0, 3)]);
        assert_eq!(
            p.workers.iter().map(|w| w.core).collect::<Vec<_>>(),
            [Some(3), Some(2), Some(1), Some(0)]
        );
        assert_eq!(p.ports[0].sockets, [0, 1]);
        // Rules go to their port; forward's target and the mirror port transmit,
        // the ingress port (which only forwards) binds no TX ring.
        assert_eq!(p.ports[0].rules.len(), 1);
        assert_eq!(p.ports[1].rules.len(), 1);
        assert!(p.ports[2].rules.is_empty());
        assert_eq!(
            (
                p.ports[0].transmits,
                p.ports[1].transmits,
                p.ports[2].transmits
            ),
            (false, true, true)
        );
        let r = &p.ports[0].rules[0];
        assert_eq!(
            (r.to, r.mac, r.mirror_to),
            (Some(1), MacRewrite::Neigh, Some(2))
        );
        assert!(p.ports[0].needs_macs() && !p.ports[1].needs_macs());
        assert_eq!(p.ports[0].steer_rules()[0].action, RuleAction::Steer);
        // "out" says false: the one UMEM is copy mode for all.
        assert_eq!(p.umem.zero_copy, ZeroCopy::Off);
        assert_eq!(p.umem.frames, 65536);
        // Fewer cores than sockets: the rest run unpinned.
        let p = plan(&cfg, &[5]);
        assert_eq!(
            p.workers.iter().map(|w| w.core).collect::<Vec<_>>(),
            [Some(5), None, None, None]
        );
        // Sockets given the same core share one worker: in/0 and out/0 on core 1.
        let p = plan(&cfg, &[1, 2, 1, 2]);
        assert_eq!(
            p.workers
                .iter()
                .map(|w| (w.core, w.sockets.clone()))
                .collect::<Vec<_>>(),
            [(Some(1), vec![0, 2]), (Some(2), vec![1, 3])]
        );
        assert_eq!(
            p.sockets.iter().map(|s| s.worker).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
    }

    #[test]
    fn old_interface_form_is_one_port_named_main_and_zero_copy_wishes_combine() {
        let text = "[interface]\nname = \"xdpb0\"\nqueues = [0]\n[[rule]]\nproto = \"udp\"\naction = \"l2fwd\"\n";
        let p = plan(&Config::parse(text).unwrap(), &[]);
        assert_eq!(p.ports.len(), 1);
        assert_eq!(p.ports[0].def.name, "main");
        assert!(p.ports[0].transmits);
        assert_eq!(
            p.umem.zero_copy,
            ZeroCopy::Off,
            "[interface] keeps zero_copy = false by default"
        );
        let auto = FWD.replace("zero_copy = false", "zero_copy = \"auto\"");
        assert_eq!(
            plan(&Config::parse(&auto).unwrap(), &[]).umem.zero_copy,
            ZeroCopy::Auto
        );
        let on = FWD
            .replace("zero_copy = false\n", "")
            .replace("netns = \"ns\"\n", "netns = \"ns\"\nzero_copy = true\n");
        assert_eq!(
            plan(&Config::parse(&on).unwrap(), &[]).umem.zero_copy,
            ZeroCopy::On
        );
    }
}
