//! The command line (clap derive: the only crate that depends on clap).

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use xdpool::internal::steer::XdpAttachMode;
use xdpool_lab::bench::NapiMode;
use xdpool_lab::gen::Payload;

/// xdpool: an AF_XDP userspace packet processor with a page_pool-style frame recycler.
///
/// An XDP program steers the frames your rules match into AF_XDP sockets; pinned worker
/// threads process them from one UMEM whose frames are recycled like the kernel's
/// page_pool. Everything else passes to the kernel.
///
/// Quick start (as root): `xdpool lab up`, then `xdpool run --config configs/lab.toml`,
/// and in another shell `xdpool gen --count 100000`; or `make run` for all of it.
#[derive(Debug, Parser)]
#[command(name = "xdpool", version, propagate_version = true)]
pub struct Cli {
    /// Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info.
    #[arg(long, global = true, default_value = "info")]
    pub log: String,
    /// Log line format on stderr: `text` for people, `json` (one object per line, with
    /// timestamp, level and fields) for a log collector.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Attach to an interface and process frames until Ctrl-C or --duration.
    Run(RunArgs),
    /// Create or remove the built-in veth lab (two namespaces, or three with
    /// `--topology forward`; addresses from 198.18.0.0/15).
    Lab {
        /// up or down.
        #[command(subcommand)]
        action: LabAction,
    },
    /// Send a bounded number of UDP frames (the lab's generator side by default).
    Gen(GenArgs),
    /// Ask a running instance for its stats over its control socket.
    Stats(StatsArgs),
    /// Write the frames one rule matches on a running instance to a pcapng file.
    ///
    /// The workers copy at most --snaplen bytes of each frame the rule matches (first
    /// match, as the XDP program decides) into a bounded queue while the capture runs;
    /// the frames themselves go on to their action unchanged. When this client reads
    /// too slowly, copies are skipped and counted (`capture_dropped` in `xdpool
    /// stats`), never the frames. Only rules whose action reaches the workers can be
    /// captured (not `pass` or `xdpdrop`); multi-buffer frames are not captured.
    /// Example: `xdpool capture --rule 0 --count 1000 -w /tmp/rule0.pcapng` (or
    /// `--rule NAME`), then `tcpdump -r /tmp/rule0.pcapng`. For a capture without a
    /// client, give the rule `capture = { file = "..." }` in the config.
    Capture(CaptureArgs),
    /// Change the rules of a running instance without a restart.
    Rules {
        /// What to do with them.
        #[command(subcommand)]
        action: RulesAction,
    },
    /// Send a control message to a packet function of a running program built on
    /// the xdpool library (its `Handler::control`): every lane of the handler takes
    /// it between batches and answers. Example: `xdpool control lb "remove 2"`.
    /// Exit 0 when every lane took it; 1 when a lane refused it (each refusal is
    /// printed), the handler is unknown, or no instance answers.
    Control(ControlArgs),
    /// Benchmarks: the recycler's micro-benchmark, or a throughput sweep on the lab.
    Bench {
        /// Which benchmark.
        #[command(subcommand)]
        which: BenchWhich,
    },
    /// The demo behind `make run`: lab up, run for a few seconds under generated
    /// traffic, print the summary, lab down.
    Demo(DemoArgs),
    /// Check this machine and each port's device before a run: one line per check
    /// (ok, warn or fail), what was found and the fix. Exit code 1 when a check fails.
    ///
    /// Without arguments it checks the host (kernel, AF_XDP, BTF, the BPF JIT,
    /// capabilities, memlock, bpffs); with --config also every port of the config (the
    /// driver and its XDP features, zero-copy, queues, frame size, rx-vlan-offload
    /// under VLAN rules, the NAPI settings busy-poll needs, NUMA placement); with
    /// --interface one device with every config key at its default.
    Doctor(DoctorArgs),
    /// Print a shell completion script, e.g. `xdpool completions bash >
    /// /etc/bash_completion.d/xdpool` (the Debian package installs them).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the generated references (docs/reference/: config, metrics and command
    /// references, man pages, completions) from the code, or check them.
    #[command(hide = true)]
    Reference {
        /// The directory to write.
        #[arg(long, default_value = "docs/reference")]
        out: PathBuf,
        /// Only compare, and fail when a file differs.
        #[arg(long)]
        check: bool,
    },
}

/// `xdpool doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Check the host and every port of this config file.
    #[arg(short, long, value_name = "FILE", conflicts_with = "interface")]
    pub config: Option<PathBuf>,
    /// Check the host and this network device (one port, zero_copy = "auto").
    #[arg(short, long, value_name = "IF")]
    pub interface: Option<String>,
    /// The network namespace the device is in (a name under /run/netns).
    #[arg(long, value_name = "NS", requires = "interface")]
    pub netns: Option<String>,
    /// Print the report as one JSON object (checks, and the ok/warn/fail counts).
    #[arg(long)]
    pub json: bool,
}

/// `xdpool run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// TOML config file (see configs/lab.toml and the README).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Also write the end summary as JSON to this file.
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
    /// Override the config's XDP attach mode.
    #[arg(long, value_parser = xdp_mode_parser())]
    pub xdp_mode: Option<XdpAttachMode>,
    /// Exit (code 8) when the device goes away instead of waiting for it to return.
    #[arg(long)]
    pub no_reattach: bool,
    /// No live line (the summary is still printed).
    #[arg(long)]
    pub quiet: bool,
    /// Print `ready` to stdout once every port is attached, its program is on the
    /// device and its link has carrier (for scripts); until then the log says what
    /// it waits for.
    #[arg(long)]
    pub ready_line: bool,
    /// Keep up to N received frames per queue as the application would (robustness
    /// tests): they stay held across device losses and are returned, checked
    /// unchanged, after each re-attach. Held frames are frames a drop rule matched:
    /// counted in action_drop when returned.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub hold_frames: u32,
}

/// `--xdp-mode`: the library's XDP mode, parsed by its `FromStr` (the names are the
/// config file's `xdp_mode`).
fn xdp_mode_parser() -> impl TypedValueParser<Value = XdpAttachMode> {
    PossibleValuesParser::new([
        PossibleValue::new("native").help("Driver mode"),
        PossibleValue::new("skb").help("Generic (skb) mode"),
    ])
    .try_map(|s| s.parse::<XdpAttachMode>())
}

/// `xdpool lab up|down`
#[derive(Debug, Subcommand)]
pub enum LabAction {
    /// Create the lab (a no-op that says so when it exists).
    Up {
        /// `pair`: namespaces PREFIX-a (xdpa0) and PREFIX-b (xdpb0), one veth pair.
        /// `forward`: PREFIX-src (xdps0), PREFIX-fwd (xdpool's ports xdpf0 "in",
        /// xdpf1 "out", xdpf2 "mon") and PREFIX-dst (xdpd0, xdpm0), for
        /// configs/forward.toml.
        #[arg(long, value_enum, default_value = "pair")]
        topology: LabTopology,
        /// RX/TX queues on each veth end.
        #[arg(long, default_value_t = 1)]
        queues: u32,
        /// Name prefix of the namespaces (`PREFIX-a`, `PREFIX-b`; `PREFIX-src`,
        /// `PREFIX-fwd`, `PREFIX-dst` for the forward topology).
        #[arg(long, default_value = "xdpool")]
        prefix: String,
        /// MTU of both veth ends (default 1500). For jumbo frames, e.g. 9000: xdpool
        /// then needs `interface.multi_buffer = true`.
        #[arg(long, value_parser = clap::value_parser!(u32).range(68..=65535))]
        mtu: Option<u32>,
        /// Forward topology: put xdpool's ports "out" (xdpf1) and "mon" (xdpf2) in a
        /// namespace of their own, PREFIX-fwd2, so one xdpool forwards between ports
        /// in two namespaces on one UMEM (configs/forward-split.toml), as a router
        /// between two containers does.
        #[arg(long)]
        split_netns: bool,
    },
    /// Remove the lab's namespaces (and with them the veth pairs), whichever
    /// topology is up.
    Down {
        /// Name prefix of the namespaces.
        #[arg(long, default_value = "xdpool")]
        prefix: String,
    },
}

/// Which lab `xdpool lab up` builds.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LabTopology {
    /// Two namespaces joined by one veth pair (the default; configs/lab.toml).
    Pair,
    /// Sender, xdpool with three ports, receiver (configs/forward.toml).
    Forward,
}

/// `xdpool gen --payload`: what the frames carry ([`Payload`]).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PayloadArg {
    /// The same template bytes over and over (every engine).
    Template,
    /// Each frame its own number and bytes derived from it, UDP checksum recomputed
    /// ([`seq`]): a receiver ([`sink::SeqSink`]) can check every frame. AF_XDP engine only.
    Sequenced,
}

impl From<PayloadArg> for Payload {
    fn from(p: PayloadArg) -> Payload {
        match p {
            PayloadArg::Template => Payload::Template,
            PayloadArg::Sequenced => Payload::Sequenced,
        }
    }
}

/// `xdpool bench throughput --napi`: how NAPI runs on the receiving veth ([`NapiMode`]).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum NapiArg {
    /// In softirq context on the CPU that scheduled it.
    Softirq,
    /// In a kernel thread (`/sys/class/net/DEV/threaded` = 1).
    Threaded,
}

impl From<NapiArg> for NapiMode {
    fn from(n: NapiArg) -> NapiMode {
        match n {
            NapiArg::Softirq => NapiMode::Softirq,
            NapiArg::Threaded => NapiMode::Threaded,
        }
    }
}

/// Generator engine.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum EngineArg {
    /// BPF_PROG_RUN with live frames (ndo_xdp_xmit, kernel speed).
    Live,
    /// The kernel's pktgen through /proc/net/pktgen (where the kernel has it).
    Pktgen,
    /// AF_XDP TX ring on one queue (copy mode; --queue, default 0), where live frames
    /// are unavailable, and for jumbo frames.
    Afxdp,
}

/// `xdpool gen`
#[derive(Debug, Args)]
pub struct GenArgs {
    /// The lab to send into. `pair` (default): from xdpa0 in xdpool-a to 198.18.0.2.
    /// `forward`: from xdps0 in PREFIX-src through xdpool's port "in" (destination
    /// MAC xdpf0's) to 198.18.2.1 behind port "out" (2001:2:0:2::1 with --ipv6).
    #[arg(long, value_enum, default_value = "pair")]
    pub lab_topology: LabTopology,
    /// Lab name prefix (namespaces PREFIX-a, or PREFIX-src for the forward lab).
    #[arg(long, default_value = "xdpool")]
    pub prefix: String,
    /// Namespace to send from (default: the lab's sender).
    #[arg(long)]
    pub netns: Option<String>,
    /// Device to send from (default: the lab's sender; its peer receives).
    #[arg(long)]
    pub dev: Option<String>,
    /// Destination IP (IPv4, or IPv6 with --ipv6), inside 198.18.0.0/15 or 2001:2::/48.
    #[arg(long)]
    pub dst_ip: Option<std::net::IpAddr>,
    /// Destination MAC (aa:bb:cc:dd:ee:ff), e.g. the next hop's.
    #[arg(long)]
    pub dst_mac: Option<String>,
    /// `template`: one frame resent; `sequenced`: each frame numbered, its payload
    /// derived from the number and its UDP checksum recomputed, so a receiver can
    /// check every frame (needs --engine afxdp; the default with --lab-topology forward).
    #[arg(long, value_enum)]
    pub payload: Option<PayloadArg>,
    /// `sequenced`: the first frame's number.
    #[arg(long, default_value_t = 0)]
    pub seq_first: u64,
    /// Frames to send in all.
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// Frame size in bytes (without FCS), 60 to the device MTU + 14 (at most 9014).
    /// Jumbo frames (above about 3.5 KiB) need `--engine afxdp`, which sends them as
    /// multi-buffer chains of 2048-byte chunks (`xdpool lab up --mtu 9000`).
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// Stop after this many seconds even if --count is not reached.
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Frames per second in all (default: as fast as possible). The AF_XDP engine
    /// sends at most 256 at once after being held off the CPU: what fell due meanwhile
    /// is dropped from the schedule, not caught up in one burst.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Send IPv6 instead of IPv4.
    #[arg(long)]
    pub ipv6: bool,
    /// UDP destination port or range (`9` or `9-16`).
    #[arg(long, default_value = "9")]
    pub dst_ports: String,
    /// UDP source port or range; a range spreads flows over queues.
    #[arg(long, default_value = "1024")]
    pub src_ports: String,
    /// Cores to send from, one thread each (comma list). Default: core 0.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub cores: Vec<usize>,
    /// Engine (default: live; afxdp with --lab-topology forward).
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// AF_XDP engine: the device's TX queue to send on; a veth peer receives on the
    /// same queue (`xdpool lab up --queues N`). The live engine reaches the peer queue
    /// of the sending CPU instead (choose it with --cores).
    #[arg(long, default_value_t = 0)]
    pub queue: u32,
    /// Live engine: frames per kernel batch, 1..=256. Each batch ends with a flush
    /// to the device (on veth: onto the peer's 256-slot ring, then its NAPI runs).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub batch: u32,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `xdpool stats`
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Control socket of the running instance.
    #[arg(long, default_value = xdpool::internal::config::DEFAULT_CONTROL_SOCKET)]
    pub socket: PathBuf,
    /// Print the raw snapshot as JSON (for scripts) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print one value of the snapshot, named by its path (`.total.rx_packets`,
    /// `.device.losses`, `.queues.0.pool.inflight`): for scripts that poll a single
    /// figure without a JSON tool. Exits 1 when the path names nothing.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["json", "watch"])]
    pub get: Option<String>,
    /// Refresh the table in place every --interval seconds until Ctrl-C.
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
    /// Seconds between the two reads the per-second rates come from (and between
    /// refreshes with --watch); 0 shows totals only.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
}

/// `xdpool capture`
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Control socket of the running instance.
    #[arg(long, default_value = xdpool::internal::config::DEFAULT_CONTROL_SOCKET)]
    pub socket: PathBuf,
    /// The rule: its index in the rules that run now (0 is the first `[[rule]]` of
    /// the config, or of the last `xdpool rules apply`), or its `name`. The capture
    /// stays on that rule across reloads: by name, or for an unnamed rule while the
    /// reloaded list has one with the same match and action; a reload that removes
    /// it ends the capture, saying so.
    #[arg(long, value_name = "N|NAME")]
    pub rule: String,
    /// Stop after this many frames (0: until Ctrl-C or the instance stops).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Bytes kept of each frame (at most one UMEM chunk).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub snaplen: u32,
    /// The pcapng file to write (read it with `tcpdump -r FILE` or Wireshark).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub file: PathBuf,
}

/// `xdpool bench capture`
#[derive(Debug, Args)]
pub struct CaptureBenchArgs {
    /// Frames per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub count: u64,
    /// Off/on pairs at full speed.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Paced rates (frames/s) with a capture running.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "50000,100000,200000,400000,800000"
    )]
    pub rates: Vec<u64>,
    /// Frame size (bytes without FCS).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Lab prefix (namespaces PREFIX-a, PREFIX-b; built and removed).
    #[arg(long, default_value = "xdpcap")]
    pub prefix: String,
    /// The worker's core.
    #[arg(long, default_value_t = 1)]
    pub worker_core: usize,
    /// The generator's core.
    #[arg(long, default_value_t = 0)]
    pub gen_core: usize,
}

/// `xdpool rules ...`
#[derive(Debug, Subcommand)]
pub enum RulesAction {
    /// Send FILE's `[[rule]]` tables to the running instance, which validates them
    /// and swaps them in atomically (the XDP program and the workers together; no
    /// frame is lost or acted on under half of two lists). FILE is a file of
    /// `[[rule]]` tables only, or a whole config file whose ports are the running
    /// ones (only its rules are applied; other settings take a restart). A rule
    /// with a `name` keeps the counters of the running rule of that name. On any
    /// error the running rules stay: exit 2 for an invalid file (key and line
    /// named), 11 for rules the running instance cannot carry out (e.g. sending out
    /// of a port opened without a TX ring), 1 when no instance answers.
    /// `kill -HUP <pid>` reads the config file's rules again, the same way.
    Apply(RulesApplyArgs),
}

/// `xdpool rules apply`
#[derive(Debug, Args)]
pub struct RulesApplyArgs {
    /// The rules file (or whole config) to apply.
    pub file: PathBuf,
    /// Control socket of the running instance.
    #[arg(long, default_value = xdpool::internal::config::DEFAULT_CONTROL_SOCKET)]
    pub socket: PathBuf,
    /// Print the instance's reply as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `xdpool control`
#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The handler's name (what rules give as `handler`).
    pub handler: String,
    /// The message (its meaning is the handler's).
    pub message: String,
    /// Control socket of the running instance.
    #[arg(long, default_value = xdpool::internal::config::DEFAULT_CONTROL_SOCKET)]
    pub socket: PathBuf,
    /// Print the instance's reply as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `xdpool bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchWhich {
    /// The recycler micro-benchmark (mirrors the kernel's bench_page_pool_simple).
    Pool {
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Exit non-zero when a target is missed in each of up to 3 runs (or the
        /// cross-thread threads could not be pinned): what CI runs.
        #[arg(long)]
        check: bool,
    },
    /// Throughput sweep on the lab: ceiling (in-kernel XDP_DROP), rxdrop, l2fwd per size.
    Throughput(ThroughputArgs),
    /// The generator's own rate on the lab: receiver refusing (no NAPI), XDP_DROP with
    /// NAPI in softirq on the generator's core, and with threaded NAPI on another core.
    Generator(GeneratorArgs),
    /// The data path's rate without and with `xdpool capture` running (alternating),
    /// and the paced rates at which a capture writes every frame.
    Capture(CaptureBenchArgs),
    /// The steering program's ns per frame under BPF_PROG_TEST_RUN: a redirect-only
    /// reference, match-all, the lab's rule (also on the multi-buffer program), 8 mixed and 64 rules, IPv4 and IPv6,
    /// alternating; ratios to the reference.
    Steer(SteerArgs),
}

/// `xdpool bench steer`
#[derive(Debug, Args)]
pub struct SteerArgs {
    /// Rounds (each runs every program once on each frame; medians over rounds).
    #[arg(long, default_value_t = 11)]
    pub rounds: u32,
    /// BPF_PROG_TEST_RUN repeats per measurement (the kernel reports whole ns per run).
    #[arg(long, default_value_t = 2_000_000)]
    pub repeat: u32,
    /// Write the results as JSON (its directory is created).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// `xdpool bench generator`
#[derive(Debug, Args)]
pub struct GeneratorArgs {
    /// Frame size in bytes (without FCS), 60..=1514.
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// Frames per run.
    #[arg(long, default_value_t = 10_000_000)]
    pub count: u64,
    /// Runs per point (median and spread are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Kernel batch sizes to compare (comma list, each 1..=256).
    #[arg(long, value_delimiter = ',', default_value = "64,256")]
    pub batches: Vec<u32>,
    /// Generator core.
    #[arg(long, default_value_t = 0)]
    pub gen_core: usize,
    /// Core of the receiver's NAPI thread in the threaded set-up.
    #[arg(long, default_value_t = 1)]
    pub napi_core: usize,
    /// Time limit of one run, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Write the results as JSON (its directory is created).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Lab name prefix (namespaces PREFIX-a and PREFIX-b; built and removed).
    #[arg(long, default_value = "xdpgen")]
    pub prefix: String,
    /// Also run xdp-trafficgen (xdp-tools, built outside the tree: tools/bench/README.md)
    /// at this path in the same run: --reps pairs per receiver, alternating with
    /// `xdpool gen` (IPv6 UDP, core 0, batch 64, each counted over the same window the
    /// same way), and print the ratio xdpool / xdp-trafficgen.
    #[arg(long, value_name = "PATH")]
    pub peer: Option<PathBuf>,
    /// --peer: seconds from the first frames to the first counter read.
    #[arg(long, default_value_t = 1.0)]
    pub peer_lead: f64,
    /// --peer: seconds each run is counted over.
    #[arg(long, default_value_t = 3.0)]
    pub peer_window: f64,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// `xdpool bench throughput`
#[derive(Debug, Args)]
pub struct ThroughputArgs {
    /// Frame sizes to sweep (bytes without FCS, 60..=1514).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1500"
    )]
    pub sizes: Vec<u32>,
    /// Repetitions per point (median and spread are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Frames per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    pub count: u64,
    /// Time limit of one measurement's generator run, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Write the results as JSON (its directory is created).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a plot (SVG; its directory is created).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Generator core.
    #[arg(long, default_value_t = 0)]
    pub gen_core: usize,
    /// Worker core (the lab's sweep; with --iface xdpool serves every RX queue and
    /// picks the cores itself, on the NIC's NUMA node).
    #[arg(long, default_value_t = 1)]
    pub worker_core: usize,
    /// NAPI mode of the lab's veth pair.
    #[arg(long, value_enum, default_value = "softirq")]
    pub napi: NapiArg,
    /// With `--napi threaded`: pin the NAPI threads to this core.
    #[arg(long)]
    pub napi_core: Option<usize>,
    /// How the xdpool worker waits: spin, poll or busy-poll.
    #[arg(long, default_value = "poll", value_parser = ["spin", "poll", "busy-poll"])]
    pub worker_mode: String,
    /// Lab name prefix (namespaces PREFIX-a and PREFIX-b; built and removed).
    #[arg(long, default_value = "xdptput")]
    pub prefix: String,
    /// Sweep on devices that exist instead of the lab: the NIC xdpool receives on (no
    /// lab is built; rxdrop only, its frames counted against the generator's). Needs
    /// --gen-dev, a NIC that reaches it (cabled to it, or on the same QEMU hub).
    #[arg(long, requires = "gen_dev")]
    pub iface: Option<String>,
    /// With --iface: its network namespace (default: ours).
    #[arg(long, requires = "iface")]
    pub netns: Option<String>,
    /// With --iface: the NIC the generator sends out of, to --iface.
    #[arg(long, requires = "iface")]
    pub gen_dev: Option<String>,
    /// With --iface: the namespace of --gen-dev (default: ours).
    #[arg(long, requires = "iface")]
    pub gen_netns: Option<String>,
    /// With --iface: the generator, `pktgen` (default; the kernel's, /proc/net/pktgen)
    /// or `live` (needs ndo_xdp_xmit on --gen-dev). The lab's sweep sends live frames.
    #[arg(long, value_enum, requires = "iface")]
    pub engine: Option<EngineArg>,
    /// With --iface: the generator's rate, frames per second (default: flat out).
    #[arg(long, requires = "iface")]
    pub rate: Option<u64>,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// `xdpool demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The forwarding demo instead: the forward lab, xdpool forwarding from port
    /// "in" to port "out" (configs/forward.toml), sequenced frames checked one by
    /// one by a UDP socket in the receiver's namespace.
    #[arg(long)]
    pub forward: bool,
    /// Frames to send (default 1 000 000; 200 000 with --forward).
    #[arg(long)]
    pub count: Option<u64>,
    /// Frame size.
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// --forward: frames per second (default 100 000: what the receiver's UDP socket
    /// takes on this lab without dropping; the demo counts every frame there).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Config for xdpool (default configs/lab.toml; configs/forward.toml with --forward).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--xdp-mode` parses into the library's one XDP-mode enum, by its `FromStr`.
    #[test]
    fn xdp_mode_parses_into_the_library_enum() {
        let mode = |arg: &str| {
            let argv = ["xdpool", "run", "--config", "c.toml", "--xdp-mode", arg];
            match Cli::try_parse_from(argv) {
                Ok(Cli {
                    command: Command::Run(run),
                    ..
                }) => Ok(run.xdp_mode),
                Ok(other) => panic!("not `run`: {other:?}"),
                Err(e) => Err(e.kind()),
            }
        };
        assert_eq!(mode("native"), Ok(Some(XdpAttachMode::Native)));
        assert_eq!(mode("skb"), Ok(Some(XdpAttachMode::Skb)));
        assert_eq!(mode("drv"), Err(clap::error::ErrorKind::InvalidValue));
    }

    /// The command line's own value enums name the lab's types one to one.
    #[test]
    fn arg_enums_map_to_the_lab_types() {
        assert_eq!(Payload::from(PayloadArg::Template), Payload::Template);
        assert_eq!(Payload::from(PayloadArg::Sequenced), Payload::Sequenced);
        assert_eq!(NapiMode::from(NapiArg::Softirq), NapiMode::Softirq);
        assert_eq!(NapiMode::from(NapiArg::Threaded), NapiMode::Threaded);
    }
}
