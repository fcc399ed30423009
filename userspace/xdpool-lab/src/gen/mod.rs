//! Traffic generator: UDP frames of a chosen size, sent from inside a namespace.
//!
//! Three engines:
//! - [`Engine::Live`]: `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` on an XDP
//!   program that returns XDP_TX, so every injected frame is transmitted out of the
//!   ingress device (`ndo_xdp_xmit`). On veth the frame lands on the peer's RX queue
//!   `sending CPU % rx queues`, so one pinned thread per core fills one queue.
//! - [`Engine::Pktgen`]: the kernel's pktgen through `/proc/net/pktgen`, where the
//!   kernel has it.
//! - [`Engine::Afxdp`]: an AF_XDP socket's TX ring (copy mode, queue 0), where live
//!   frames are unavailable (see [`afxdp`]).
//!
//! Frame size is the size handed to the device, without FCS (see [`packet`]).
//! The live engine reports frames *handed to the kernel*: a frame the device could not
//! transmit is dropped silently, so the receiving count ([`count::RxCounter`]) is the
//! truth.
#[allow(unsafe_code)] // the generator's own AF_XDP socket and frames
pub mod afxdp;
pub mod count;
pub mod live;
pub mod packet;
pub mod pktgen;
pub mod seq;
pub mod sink;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::lab::{self, LabStatus};
use crate::netns::NetnsError;
use packet::{PacketError, PortRange};

/// Which generator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// BPF_PROG_RUN live frames (XDP_TX out of the ingress device).
    Live,
    /// Kernel pktgen (`/proc/net/pktgen`).
    Pktgen,
    /// AF_XDP TX (copy mode) on queue 0, templates packed in the recycler's frags.
    Afxdp,
}

/// What the frames carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    /// The same template bytes over and over (every engine).
    Template,
    /// Each frame its own number and bytes derived from it, UDP checksum recomputed
    /// ([`seq`]): a receiver ([`sink::SeqSink`]) can check every frame. AF_XDP engine only.
    Sequenced,
}

/// What to send, from where, how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// Namespace to send from (`None`: the caller's).
    pub netns: Option<String>,
    /// Device to send out of.
    pub dev: String,
    /// Total frames over all threads; at least one of `count`/`duration` is needed.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Frame size without FCS.
    pub size: usize,
    /// IPv6 instead of IPv4.
    pub ipv6: bool,
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source and destination (used when `ipv6` is false).
    pub ipv4: (Ipv4Addr, Ipv4Addr),
    /// IPv6 source and destination (used when `ipv6` is true).
    pub ipv6_addrs: (Ipv6Addr, Ipv6Addr),
    /// UDP source ports (flows).
    pub src_ports: PortRange,
    /// UDP destination ports (flows).
    pub dst_ports: PortRange,
    /// At most this many distinct flows (template frames).
    pub flows: usize,
    /// Total rate limit over all threads, frames per second.
    pub rate_pps: Option<u64>,
    /// One sending thread per core, pinned there (empty: the current CPU only, unpinned).
    pub cores: Vec<usize>,
    /// Live engine: frames per kernel batch (1..=256; 0 means the kernel's 64).
    pub batch: u32,
    /// Live engine: most frames per BPF_PROG_RUN call. Calls are as large as the
    /// count allows, about 100 ms long under a rate, about 1 s under a duration alone
    /// (see [`live::frames_for_next_call`]).
    pub chunk: u32,
    /// Engine.
    pub engine: Engine,
    /// AF_XDP engine: the device's TX queue to send on (a veth peer receives on the
    /// same queue). The live engine reaches the peer queue of the sending CPU instead.
    pub queue: u32,
    /// Pktgen engine: its proc directory (`None`: `/proc/thread-self/net/pktgen`,
    /// i.e. the one of the namespace we send from).
    pub pktgen_root: Option<PathBuf>,
    /// What the frames carry.
    pub payload: Payload,
    /// [`Payload::Sequenced`]: the first frame's number (then counting up).
    pub seq_first: u64,
}

impl GenConfig {
    /// Sends from the lab's side "a" to side "b", 64-byte IPv4 frames, one flow,
    /// on core 0. Set `count` or `duration` before running.
    pub fn for_lab(status: &LabStatus) -> Self {
        Self {
            netns: Some(status.a.netns.clone()),
            dev: status.a.dev.clone(),
            count: None,
            duration: None,
            size: 64,
            ipv6: false,
            src_mac: status.a.mac,
            dst_mac: status.b.mac,
            ipv4: (status.a.ipv4, status.b.ipv4),
            ipv6_addrs: (status.a.ipv6, status.b.ipv6),
            src_ports: PortRange::single(9),
            dst_ports: PortRange::single(9),
            flows: 64,
            rate_pps: None,
            cores: vec![0],
            batch: 64,
            chunk: 1 << 22,
            engine: Engine::Live,
            queue: 0,
            pktgen_root: None,
            payload: Payload::Template,
            seq_first: 0,
        }
    }

    /// Sends from the forward lab's sender (xdps0 in P-src) through xdpool's port
    /// "in" (destination MAC: xdpf0's) to the receiver behind port "out", 198.18.2.1
    /// (IPv6 2001:2:0:2::1), UDP port 9, sequenced payloads over the AF_XDP engine,
    /// one flow, unpinned. Set `count` or `duration` before running.
    pub fn for_forward_lab(prefix: &str) -> Result<Self, lab::LabError> {
        use lab::forward::{outer_end, port_end, ForwardNames, Link, Role};
        let names = ForwardNames::from_prefix(prefix)?;
        let (src, via, dst) = (
            outer_end(Link::In),
            port_end(Link::In),
            outer_end(Link::Out),
        );
        Ok(Self {
            netns: Some(names.netns(Role::Src).to_string()),
            dev: src.dev.to_string(),
            src_mac: src.mac,
            dst_mac: via.mac,
            ipv4: (src.ipv4, dst.ipv4),
            ipv6_addrs: (src.ipv6, dst.ipv6),
            src_ports: PortRange::single(1024),
            flows: 1,
            cores: vec![],
            engine: Engine::Afxdp,
            payload: Payload::Sequenced,
            ..Self::default_lab()
        })
    }

    /// The default lab's addresses, without looking the lab up.
    pub fn default_lab() -> Self {
        let names =
            lab::LabNames::from_prefix(lab::DEFAULT_PREFIX).expect("default prefix is valid");
        let side = |netns: String, dev: String, mac, ipv4, ipv6| lab::LabSide {
            netns,
            dev,
            ifindex: 0,
            mac,
            ipv4,
            ipv6,
            rx_queues: 1,
            tx_queues: 1,
        };
        Self::for_lab(&LabStatus {
            already_up: false,
            a: side(
                names.netns_a,
                names.dev_a,
                lab::MAC_A,
                lab::IPV4_A,
                lab::IPV6_A,
            ),
            b: side(
                names.netns_b,
                names.dev_b,
                lab::MAC_B,
                lab::IPV4_B,
                lab::IPV6_B,
            ),
        })
    }

    /// Source and destination IPs for the chosen family.
    pub fn ips(&self) -> (IpAddr, IpAddr) {
        if self.ipv6 {
            (self.ipv6_addrs.0.into(), self.ipv6_addrs.1.into())
        } else {
            (self.ipv4.0.into(), self.ipv4.1.into())
        }
    }

    /// The template frames for this configuration.
    pub fn templates(&self) -> Result<Vec<Vec<u8>>, PacketError> {
        let (src_ip, dst_ip) = self.ips();
        packet::build_flows(&packet::FlowSpec {
            base: packet::UdpFrameSpec {
                src_mac: self.src_mac,
                dst_mac: self.dst_mac,
                src_ip,
                dst_ip,
                src_port: self.src_ports.first,
                dst_port: self.dst_ports.first,
                frame_size: self.size,
            },
            src_ports: self.src_ports,
            dst_ports: self.dst_ports,
            max_flows: self.flows,
        })
    }

    /// Checks what can be checked without the kernel.
    pub fn validate(&self) -> Result<(), GenError> {
        if self.count.is_none() && self.duration.is_none() {
            return Err(GenError::Config(
                "no limit: give --count or --duration (traffic is always bounded)".into(),
            ));
        }
        if self.count == Some(0) {
            return Err(GenError::Config(
                "--count 0 sends nothing: give a positive count".into(),
            ));
        }
        if self.rate_pps == Some(0) {
            return Err(GenError::Config(
                "--rate 0 sends nothing: give a positive rate or leave it out".into(),
            ));
        }
        if self.batch > 256 {
            return Err(GenError::Config(format!(
                "batch {} too large: the kernel takes at most 256",
                self.batch
            )));
        }
        if self.chunk == 0 {
            return Err(GenError::Config(
                "chunk 0: give at least 1 frame per call".into(),
            ));
        }
        if self.queue != 0 && self.engine != Engine::Afxdp {
            return Err(GenError::Config(format!(
                "--queue {} is for --engine afxdp: the live engine's frames reach the peer queue of the sending CPU (choose it with --cores), pktgen picks its own",
                self.queue
            )));
        }
        packet::check_frame_size(self.size, self.ipv6)?;
        if self.payload == Payload::Sequenced {
            if self.engine != Engine::Afxdp {
                return Err(GenError::Config("--payload sequenced writes every frame and needs --engine afxdp (the live and pktgen engines resend one template)".into()));
            }
            let min = seq::min_frame_size(self.ipv6);
            let max = afxdp::CHUNK_SIZE as usize;
            if self.size < min || self.size > max {
                return Err(GenError::Config(format!("--payload sequenced takes frame sizes {min}..={max} (one chunk, room for the number): got {}", self.size)));
            }
        }
        // Traffic stays between namespaces of ours, inside the benchmarking ranges.
        match self.netns.as_deref() {
            None | Some("") => {
                return Err(GenError::Config(
                    "no network namespace: the generator only sends from a namespace (e.g. the lab's, --netns xdpool-a), never from the root namespace".into(),
                ))
            }
            Some(_) => {}
        }
        let v4_ok = |a: std::net::Ipv4Addr| {
            (u32::from(a) & 0xfffe_0000) == u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0))
        };
        let v6_ok = |a: std::net::Ipv6Addr| a.segments()[..3] == [0x2001, 0x0002, 0x0000];
        if !v4_ok(self.ipv4.0) || !v4_ok(self.ipv4.1) {
            return Err(GenError::Config(format!("IPv4 {} -> {} is outside 198.18.0.0/15, the benchmarking range the generator is limited to", self.ipv4.0, self.ipv4.1)));
        }
        if !v6_ok(self.ipv6_addrs.0) || !v6_ok(self.ipv6_addrs.1) {
            return Err(GenError::Config(format!("IPv6 {} -> {} is outside 2001:2::/48, the benchmarking range the generator is limited to", self.ipv6_addrs.0, self.ipv6_addrs.1)));
        }
        let mut cores = self.cores.clone();
        cores.sort_unstable();
        cores.dedup();
        if cores.len() != self.cores.len() {
            return Err(GenError::Config(format!(
                "cores {:?} repeat a core: give each core once",
                self.cores
            )));
        }
        Ok(())
    }
}

/// One sending thread's share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadReport {
    /// Core it was pinned to (`None`: unpinned).
    pub core: Option<usize>,
    /// Frames handed to the kernel.
    pub sent: u64,
    /// Wall time the thread sent for.
    pub elapsed: Duration,
    /// Its rate, frames per second.
    pub pps: f64,
    /// BPF_PROG_RUN calls (live) or 0 (pktgen).
    pub calls: u64,
}

/// Result of one generator run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenReport {
    /// Engine that sent.
    pub engine: Engine,
    /// Frame size without FCS.
    pub size: usize,
    /// Frames handed to the kernel, all threads. Not necessarily received: count
    /// on the receiving side for the truth.
    pub sent: u64,
    /// Wall time from first to last thread.
    pub elapsed: Duration,
    /// `sent / elapsed`, frames per second.
    pub pps: f64,
    /// `pps * size * 8` in Gbit/s (no FCS, preamble or gap counted).
    pub gbps: f64,
    /// Per thread.
    pub per_thread: Vec<ThreadReport>,
    /// What `sent` means for this engine.
    pub note: &'static str,
}

impl GenReport {
    fn new(
        engine: Engine,
        size: usize,
        elapsed: Duration,
        per_thread: Vec<ThreadReport>,
        note: &'static str,
    ) -> Self {
        let sent = per_thread.iter().map(|t| t.sent).sum();
        let pps = rate(sent, elapsed);
        Self {
            engine,
            size,
            sent,
            elapsed,
            pps,
            gbps: pps * size as f64 * 8.0 / 1e9,
            per_thread,
            note,
        }
    }

    /// One line for humans: `sent 1000000 frames of 64 B in 0.21 s: 4.76 Mpps, 2.44 Gbit/s (handed to the kernel)`.
    pub fn summary(&self) -> String {
        format!(
            "sent {} frames of {} B in {:.3} s: {:.3} Mpps, {:.2} Gbit/s ({})",
            self.sent,
            self.size,
            self.elapsed.as_secs_f64(),
            self.pps / 1e6,
            self.gbps,
            self.note
        )
    }
}

fn rate(n: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// Generator errors.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The configuration cannot work.
    #[error("invalid generator settings: {0}")]
    Config(String),
    /// Bad frame parameters.
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// Namespace or device lookup failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Loading the generator's XDP program failed.
    #[error("loading the generator XDP program failed: {0}; run as root (CAP_BPF, CAP_NET_ADMIN)")]
    Load(String),
    /// Pinning a thread failed.
    #[error("pinning the generator thread to core {core} failed: {source}; pick cores from `nproc` (0..N-1) that this process may use")]
    Affinity {
        /// Core asked for.
        core: usize,
        /// Cause.
        source: nix::Error,
    },
    /// BPF_PROG_RUN failed.
    #[error("BPF_PROG_RUN (live frames) on {dev} failed: {detail}; {hint}")]
    TestRun {
        /// Device.
        dev: String,
        /// Cause.
        detail: String,
        /// What to do.
        hint: &'static str,
    },
    /// Frame larger than the device accepts.
    #[error("frame size {size} exceeds {dev}'s MTU {mtu} + 14: use --size {max} or less, or raise the MTU")]
    TooBigForDevice {
        /// Frame size.
        size: usize,
        /// Device.
        dev: String,
        /// Its MTU.
        mtu: u32,
        /// Largest frame size it takes.
        max: usize,
    },
    /// This kernel has no pktgen.
    #[error("kernel pktgen is not available here ({root} is missing): load it with `modprobe pktgen` if the kernel has it, or use `--engine live`")]
    PktgenUnavailable {
        /// Directory looked for.
        root: PathBuf,
    },
    /// Talking to pktgen failed.
    #[error("pktgen: {0}")]
    Pktgen(#[from] pktgen::PktgenError),
    /// The AF_XDP engine failed.
    #[error(transparent)]
    Afxdp(#[from] afxdp::AfxdpError),
    /// A sending thread panicked.
    #[error("a generator thread panicked: {0}; this is a bug, please report it")]
    ThreadPanicked(String),
}

/// Runs the generator with the configured engine and reports what was sent.
pub fn run(cfg: &GenConfig) -> Result<GenReport, GenError> {
    cfg.validate()?;
    match cfg.engine {
        Engine::Live => live::run_live(cfg),
        Engine::Pktgen => pktgen::run_pktgen(cfg),
        Engine::Afxdp => afxdp::run_afxdp(cfg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbounded_runs_are_refused() {
        let cfg = GenConfig::default_lab();
        let err = cfg.validate().unwrap_err();
        assert!(err.to_string().contains("--count or --duration"), "{err}");
    }

    #[test]
    fn settings_are_checked() {
        let ok = GenConfig {
            count: Some(10),
            ..GenConfig::default_lab()
        };
        ok.validate().unwrap();
        for bad in [
            GenConfig {
                batch: 257,
                ..ok.clone()
            },
            GenConfig {
                chunk: 0,
                ..ok.clone()
            },
            GenConfig {
                queue: 1,
                ..ok.clone()
            },
            GenConfig {
                netns: None,
                ..ok.clone()
            },
            // Just past 198.18.0.0/15: refused by validate(), never sent.
            GenConfig {
                ipv4: ("198.20.0.1".parse().unwrap(), ok.ipv4.1),
                ..ok.clone()
            },
            GenConfig {
                ipv6_addrs: (ok.ipv6_addrs.0, "2001:db8::1".parse().unwrap()),
                ..ok.clone()
            },
            GenConfig {
                count: Some(0),
                ..ok.clone()
            },
            GenConfig {
                rate_pps: Some(0),
                ..ok.clone()
            },
            GenConfig {
                cores: vec![0, 0],
                ..ok.clone()
            },
            GenConfig {
                payload: Payload::Sequenced,
                ..ok.clone()
            },
            GenConfig {
                payload: Payload::Sequenced,
                engine: Engine::Afxdp,
                size: 2049,
                ..ok.clone()
            },
            GenConfig {
                payload: Payload::Sequenced,
                engine: Engine::Afxdp,
                size: 64,
                ipv6: true,
                ..ok.clone()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(GenError::Config(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            GenConfig {
                size: 59,
                ..ok.clone()
            }
            .validate(),
            Err(GenError::Packet(_))
        ));
        assert!(matches!(
            GenConfig {
                size: 61,
                ipv6: true,
                ..ok
            }
            .validate(),
            Err(GenError::Packet(_))
        ));
    }

    #[test]
    fn lab_templates_use_lab_addresses() {
        let cfg = GenConfig {
            src_ports: "1000-1007".parse().unwrap(),
            flows: 4,
            ipv6: true,
            ..GenConfig::default_lab()
        };
        let t = cfg.templates().unwrap();
        assert_eq!(t.len(), 4);
        assert!(t
            .iter()
            .all(|f| f.len() == 64 && f[0..6] == lab::MAC_B && f[6..12] == lab::MAC_A));
        assert!(t
            .iter()
            .all(|f| f[22 + 16..22 + 32] == lab::IPV6_B.octets()));
    }

    #[test]
    fn forward_lab_frames_go_to_the_receiver_through_port_in() {
        let cfg = GenConfig {
            count: Some(10),
            ..GenConfig::for_forward_lab("xdpool").unwrap()
        };
        cfg.validate().unwrap();
        assert_eq!(
            (cfg.netns.as_deref(), cfg.dev.as_str()),
            (Some("xdpool-src"), "xdps0")
        );
        let t = cfg.templates().unwrap();
        assert_eq!(t.len(), 1);
        let f = &t[0];
        // dst MAC xdpf0's, src MAC xdps0's, 198.18.1.1 -> 198.18.2.1, UDP 1024 -> 9.
        assert_eq!(f[0..6], [0x02, 0x78, 0x64, 0x70, 1, 2]);
        assert_eq!(f[6..12], [0x02, 0x78, 0x64, 0x70, 1, 1]);
        assert_eq!(f[26..34], [198, 18, 1, 1, 198, 18, 2, 1]);
        assert_eq!(f[34..38], [4, 0, 0, 9]);
        assert!(GenConfig::for_forward_lab("bad prefix").is_err());
    }

    #[test]
    fn report_arithmetic() {
        let t = |sent| ThreadReport {
            core: Some(0),
            sent,
            elapsed: Duration::from_millis(500),
            pps: 0.0,
            calls: 1,
        };
        let r = GenReport::new(
            Engine::Live,
            100,
            Duration::from_secs(2),
            vec![t(3_000_000), t(1_000_000)],
            "x",
        );
        assert_eq!(r.sent, 4_000_000);
        assert_eq!(r.pps, 2_000_000.0);
        assert!((r.gbps - 1.6).abs() < 1e-9);
        assert!(r.summary().contains("2.000 Mpps"), "{}", r.summary());
    }
}
