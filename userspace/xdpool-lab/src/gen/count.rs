//! Receive-side counter: `xdp-prog/count.bpf.c` attached to a device counts every
//! frame and byte per CPU and drops it. UDP frames (what the generators send) are
//! counted apart from all other frames, so the lab's own IPv6 chatter (MLD reports,
//! router solicitations after link up) does not spoil exact counts. Tests use it as the truth for "how many
//! frames arrived"; benchmarks use it as the XDP_DROP ceiling.
use aya::maps::PerCpuArray;
use aya::programs::{Xdp, XdpMode};
use aya::Ebpf;

use crate::netns::{self, NetnsError};

/// Name of the program in `count.bpf.o`.
pub const COUNT_PROGRAM: &str = "xdpool_count";
/// Name of its per-CPU map.
pub const COUNT_MAP: &str = "xdpool_count_map";

static COUNT_OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/count.bpf.o"));

/// Errors from the receive counter.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    /// Loading the BPF object or program failed.
    #[error("loading the XDP counter failed: {0}; run as root (CAP_BPF, CAP_NET_ADMIN)")]
    Load(String),
    /// Attaching failed (another program already attached, device gone, ...).
    #[error("attaching the XDP counter to ifindex {ifindex} failed: {detail}; detach any other XDP program from the device first")]
    Attach {
        /// Interface index.
        ifindex: u32,
        /// Cause.
        detail: String,
    },
    /// Reading the counters failed.
    #[error("reading the XDP counter map failed: {0}")]
    Read(String),
    /// Namespace or device lookup failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
}

/// Frame and byte totals, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RxCounts {
    /// UDP frames (over IPv4 or IPv6) seen.
    pub packets: u64,
    /// Bytes of those frames (frame size, no FCS).
    pub bytes: u64,
    /// All other frames seen (ARP, ICMPv6, ...).
    pub other_packets: u64,
}

const SLOT_UDP: u32 = 0;
const SLOT_OTHER: u32 = 1;

/// An attached counter; detaches (its bpf_link closes) on drop.
pub struct RxCounter {
    ebpf: Ebpf,
    ifindex: u32,
}

impl std::fmt::Debug for RxCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxCounter")
            .field("ifindex", &self.ifindex)
            .finish()
    }
}

impl RxCounter {
    /// Attaches to `ifindex` in the calling thread's namespace (native mode where
    /// the driver has it, which veth does).
    pub fn attach(ifindex: u32) -> Result<Self, CountError> {
        let mut ebpf = Ebpf::load(COUNT_OBJ).map_err(|e| CountError::Load(e.to_string()))?;
        let prog: &mut Xdp = ebpf
            .program_mut(COUNT_PROGRAM)
            .ok_or_else(|| CountError::Load(format!("no program {COUNT_PROGRAM} in count.bpf.o")))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| CountError::Load(e.to_string()))?;
        prog.load().map_err(|e| CountError::Load(e.to_string()))?;
        prog.attach_to_if_index(ifindex, XdpMode::default())
            .map_err(|e| CountError::Attach {
                ifindex,
                detail: e.to_string(),
            })?;
        tracing::debug!(ifindex, "rx counter attached");
        Ok(Self { ebpf, ifindex })
    }

    /// Attaches to `dev` inside the named namespace (`None`: the current one). The
    /// bpf_link keeps the attachment wherever the calling thread goes afterwards.
    pub fn attach_in(netns: Option<&str>, dev: &str) -> Result<Self, CountError> {
        match netns {
            None => Self::attach(netns::ifindex(dev)?),
            Some(ns) => netns::in_netns(ns, || Self::attach(netns::ifindex(dev)?))?,
        }
    }

    /// Interface index the counter is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Current totals.
    pub fn counts(&self) -> Result<RxCounts, CountError> {
        let map = self
            .ebpf
            .map(COUNT_MAP)
            .ok_or_else(|| CountError::Read(format!("no map {COUNT_MAP}")))?;
        let array: PerCpuArray<_, [u64; 2]> =
            PerCpuArray::try_from(map).map_err(|e| CountError::Read(e.to_string()))?;
        let sum = |key: u32| -> Result<[u64; 2], CountError> {
            let per_cpu = array
                .get(&key, 0)
                .map_err(|e| CountError::Read(e.to_string()))?;
            Ok(per_cpu
                .iter()
                .fold([0, 0], |acc, slot| [acc[0] + slot[0], acc[1] + slot[1]]))
        };
        let [packets, bytes] = sum(SLOT_UDP)?;
        let [other_packets, _] = sum(SLOT_OTHER)?;
        Ok(RxCounts {
            packets,
            bytes,
            other_packets,
        })
    }

    /// UDP frames counted so far.
    pub fn packets(&self) -> Result<u64, CountError> {
        self.counts().map(|c| c.packets)
    }

    /// Bytes of UDP frames counted so far.
    pub fn bytes(&self) -> Result<u64, CountError> {
        self.counts().map(|c| c.bytes)
    }

    /// Polls until the packet count stops changing for `quiet`, or `limit` passes;
    /// returns the last counts. For tests: frames still in a NAPI ring settle fast.
    pub fn settle(
        &self,
        quiet: std::time::Duration,
        limit: std::time::Duration,
    ) -> Result<RxCounts, CountError> {
        let start = std::time::Instant::now();
        let mut last = self.counts()?;
        let mut stable_since = std::time::Instant::now();
        while start.elapsed() < limit {
            std::thread::sleep(quiet / 4);
            let now = self.counts()?;
            if now != last {
                last = now;
                stable_since = std::time::Instant::now();
            } else if stable_since.elapsed() >= quiet {
                break;
            }
        }
        Ok(last)
    }
}
