//! NUMA topology: how many nodes, which CPU is on which node. Injectable so that
//! tests can run a multi-node layout on a single-node machine.

use std::ops::Range;

/// The NUMA layout the region and pools are built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: u32,
    cpu_node: Vec<u32>,
    real: bool,
    /// Share of the frames per node (see [`Topology::placed_on`]); `None`: even.
    weights: Option<Vec<u32>>,
}

impl Topology {
    /// One node, every CPU on it. Memory is not bound.
    pub fn single_node() -> Topology {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Topology {
            nodes: 1,
            cpu_node: vec![0; cpus],
            real: false,
            weights: None,
        }
    }

    /// A made-up layout of `nodes` nodes (CPUs spread round-robin). Used by tests to
    /// prove the per-node paths; memory is never bound for a fake topology.
    pub fn fake(nodes: u32) -> Topology {
        let nodes = nodes.max(1);
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Topology {
            nodes,
            cpu_node: (0..cpus as u32).map(|c| c % nodes).collect(),
            real: false,
            weights: None,
        }
    }

    /// Read the machine's layout from `/sys/devices/system/node`. Falls back to a
    /// single node when sysfs has no NUMA information.
    pub fn detect() -> Topology {
        let mut cpu_node = Vec::new();
        let mut nodes = 0u32;
        if let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") {
            for entry in dir.flatten() {
                let name = entry.file_name();
                let Some(n) = name.to_str().and_then(|s| s.strip_prefix("node")) else {
                    continue;
                };
                let Ok(node) = n.parse::<u32>() else { continue };
                nodes = nodes.max(node + 1);
                let Ok(list) = std::fs::read_to_string(entry.path().join("cpulist")) else {
                    continue;
                };
                for cpu in parse_cpulist(list.trim()) {
                    let cpu = cpu as usize;
                    if cpu_node.len() <= cpu {
                        cpu_node.resize(cpu + 1, 0);
                    }
                    cpu_node[cpu] = node;
                }
            }
        }
        if nodes == 0 {
            return Topology::single_node();
        }
        Topology {
            nodes,
            cpu_node,
            real: true,
            weights: None,
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Node of a CPU (node 0 for an unknown CPU).
    pub fn node_of_cpu(&self, cpu: u32) -> u32 {
        self.cpu_node.get(cpu as usize).copied().unwrap_or(0)
    }

    /// True when memory must be bound with mbind: a detected layout with several nodes.
    pub fn binds_memory(&self) -> bool {
        self.real && self.nodes > 1
    }

    /// Split `frames` into one contiguous range per node, each boundary a multiple of
    /// `align` frames (so that a node boundary never splits a page): evenly, or by
    /// the weights [`placed_on`](Self::placed_on) set (a node of weight 0 gets none).
    pub fn node_ranges(&self, frames: u32, align: u32) -> Vec<Range<u32>> {
        match &self.weights {
            Some(w) => split_weighted(frames, w, align),
            None => split_ranges(frames, self.nodes, align),
        }
    }

    /// Places the frames on the nodes in proportion to `weights` (one per node, e.g.
    /// the sockets whose NIC sits on each node) instead of evenly. Ignored (even
    /// split) when the length is not the node count or every weight is 0.
    pub fn placed_on(mut self, weights: Vec<u32>) -> Topology {
        if weights.len() == self.nodes as usize && weights.iter().any(|&w| w > 0) {
            self.weights = Some(weights);
        }
        self
    }

    /// The node of network device `iface`'s bus device, as this process's sysfs
    /// shows it (`/sys/class/net/IFACE/device/numa_node`); `None` for a device without
    /// one (veth, a virtual device: no `device` link) or where the firmware gives -1.
    pub fn net_device_node(iface: &str) -> Option<u32> {
        let path = std::path::Path::new("/sys/class/net")
            .join(iface)
            .join("device/numa_node");
        parse_numa_node(&std::fs::read_to_string(path).ok()?)
    }
}

/// `numa_node`'s content: a node, or -1 for none.
pub(crate) fn parse_numa_node(s: &str) -> Option<u32> {
    s.trim()
        .parse::<i64>()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

pub(crate) fn split_weighted(frames: u32, weights: &[u32], align: u32) -> Vec<Range<u32>> {
    let align = align.max(1) as u64;
    let total: u64 = weights.iter().map(|&w| w as u64).sum::<u64>().max(1);
    let last = weights.iter().rposition(|&w| w > 0).unwrap_or(0);
    let mut out = Vec::with_capacity(weights.len());
    let (mut start, mut cum) = (0u32, 0u64);
    for (n, &w) in weights.iter().enumerate() {
        cum += w as u64;
        let end = if n >= last {
            frames
        } else {
            let raw = frames as u64 * cum / total;
            ((raw / align * align) as u32).clamp(start, frames)
        };
        out.push(start..end);
        start = end;
    }
    out
}

pub(crate) fn split_ranges(frames: u32, nodes: u32, align: u32) -> Vec<Range<u32>> {
    split_weighted(frames, &vec![1; nodes.max(1) as usize], align)
}

fn parse_cpulist(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_all_frames_and_respect_alignment() {
        let r = split_ranges(1000, 2, 2);
        assert_eq!(r, vec![0..500, 500..1000]);
        let r = split_ranges(1001, 3, 4);
        assert_eq!(r.first().unwrap().start, 0);
        assert_eq!(r.last().unwrap().end, 1001);
        for w in r.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(w[0].end % 4, 0);
        }
        assert_eq!(split_ranges(10, 1, 2), vec![0..10]);
    }

    #[test]
    fn weighted_ranges_follow_the_weights_and_skip_nodes_of_weight_0() {
        // Everything on node 1 (the NIC's), nothing on node 0.
        assert_eq!(split_weighted(8192, &[0, 1], 2), vec![0..0, 0..8192]);
        assert_eq!(split_weighted(8192, &[1, 0], 2), vec![0..8192, 8192..8192]);
        assert_eq!(split_weighted(1000, &[1, 3], 4), vec![0..248, 248..1000]);
        let t = Topology::fake(2).placed_on(vec![0, 1]);
        assert_eq!(t.node_ranges(64, 2), vec![0..0, 0..64]);
        // A wrong length or all zero: the even split.
        assert_eq!(
            Topology::fake(2).placed_on(vec![1]).node_ranges(64, 2),
            vec![0..32, 32..64]
        );
        assert_eq!(
            Topology::fake(2).placed_on(vec![0, 0]).node_ranges(64, 2),
            vec![0..32, 32..64]
        );
    }

    #[test]
    fn numa_node_parses_minus_one_as_none() {
        assert_eq!(parse_numa_node("1\n"), Some(1));
        assert_eq!(parse_numa_node("-1\n"), None);
        assert_eq!(parse_numa_node(""), None);
        assert_eq!(Topology::net_device_node("lo"), None);
    }

    #[test]
    fn cpulist_parses_ranges_and_singles() {
        assert_eq!(parse_cpulist("0-3,8,10-11"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist(""), Vec::<u32>::new());
    }

    #[test]
    fn fake_topology_spreads_cpus_and_never_binds() {
        let t = Topology::fake(2);
        assert_eq!(t.nodes(), 2);
        assert!(!t.binds_memory());
        assert_eq!(t.node_of_cpu(0), 0);
        assert_eq!(t.node_of_cpu(9999), 0);
        let d = Topology::detect();
        assert!(d.nodes() >= 1);
    }
}
