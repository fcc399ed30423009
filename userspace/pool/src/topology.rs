//! NUMA topology: how many nodes, which CPU is on which node. Injectable so that
//! tests can run a multi-node layout on a single-node machine.

use std::ops::Range;

/// The NUMA layout the region and pools are built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: u32,
    cpu_node: Vec<u32>,
    real: bool,
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
    /// `align` frames (so that a node boundary never splits a page).
    pub fn node_ranges(&self, frames: u32, align: u32) -> Vec<Range<u32>> {
        split_ranges(frames, self.nodes, align)
    }
}

pub(crate) fn split_ranges(frames: u32, nodes: u32, align: u32) -> Vec<Range<u32>> {
    let align = align.max(1) as u64;
    let nodes = nodes.max(1) as u64;
    let mut out = Vec::with_capacity(nodes as usize);
    let mut start = 0u32;
    for n in 1..=nodes {
        let end = if n == nodes {
            frames
        } else {
            let raw = frames as u64 * n / nodes;
            ((raw / align * align) as u32).clamp(start, frames)
        };
        out.push(start..end);
        start = end;
    }
    out
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
