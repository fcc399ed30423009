//! The TOML configuration: schema, defaults and validation.
//!
//! Errors name the key, the line and what would be valid. Structural errors (unknown
//! keys, wrong types) come from the TOML decoder with its span; range errors come from
//! `Config::validate`, which uses the spans kept in [`toml::Spanned`] fields.

use crate::steer::XdpAttachMode;
use serde::Deserialize;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

pub mod keys;

/// A configuration error: key, line (1-based, when known) and what would be valid.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// The dotted key, e.g. `umem.chunk_size`.
    pub key: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// What is wrong and what would be valid.
    pub message: String,
    /// The file the error is in, when loaded from a file.
    pub file: Option<PathBuf>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            write!(f, ": ")?;
        } else if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        // "-": no one key is at fault (an unreadable file, a TOML syntax error).
        if self.key == "-" {
            return write!(f, "{}", self.message);
        }
        write!(f, "invalid config key `{}`: {}", self.key, self.message)
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The single-interface form (one port named "main"); `[[port]]` is the general one.
    #[serde(default)]
    pub interface: Option<InterfaceConfig>,
    /// `[[port]]`: the (device, queues) xdpool serves, each named; all share one UMEM.
    #[serde(default, rename = "port")]
    pub ports: Vec<PortConfig>,
    /// The UMEM (frame memory).
    #[serde(default)]
    pub umem: UmemConfig,
    /// Ring sizes.
    #[serde(default)]
    pub rings: RingsConfig,
    /// Worker threads.
    #[serde(default)]
    pub workers: WorkersConfig,
    /// Steering rules, first match wins. Frames that match none pass to the kernel.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleConfig>,
    /// Stats export.
    #[serde(default)]
    pub stats: StatsConfig,
    /// The packet functions the program registered (`action = "call"` rules name
    /// them): not from the file, kept so that a reload validates against them.
    #[serde(skip)]
    pub handlers: Arc<HandlerTable>,
}

/// What the program registered for `action = "call"` rules: each handler's name and
/// what it declared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlerTable {
    /// In registration order: a handler's index here is its id.
    pub handlers: Vec<HandlerDecl>,
}

impl HandlerTable {
    /// The table of `handlers`, in registration order; two handlers may not share a
    /// name (the error says which). `App` and the test harness both build theirs here,
    /// so that they refuse the same programs.
    pub fn new(handlers: Vec<HandlerDecl>) -> Result<HandlerTable, String> {
        for (i, h) in handlers.iter().enumerate() {
            if handlers[..i].iter().any(|o| o.name == h.name) {
                return Err(format!(
                    "two handlers are registered as `{}`: give each its own name",
                    h.name
                ));
            }
        }
        Ok(HandlerTable { handlers })
    }

    /// The id of the handler registered as `name`; the error names the ones there are.
    pub fn id_of(&self, name: &str) -> Result<u16, String> {
        match self.handlers.iter().position(|h| h.name == name) {
            Some(i) => Ok(i as u16),
            None if self.handlers.is_empty() => Err(format!(
                "no handler named `{name}`: this program registers no packet functions"
            )),
            None => Err(format!(
                "no handler named `{name}`: this program registers {}",
                self.handlers
                    .iter()
                    .map(|h| format!("`{}`", h.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// One registered handler, as the config sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerDecl {
    /// The name rules give as `handler`.
    pub name: String,
    /// The ports (by name) it may send frames to, besides back out of the arrival port.
    pub ports: Vec<String>,
    /// Most descriptors one frame puts on the arrival port's TX ring.
    pub tx_per_frame: usize,
    /// How often its lanes want [`Handler::tick`](crate::Handler::tick) (none: never).
    pub tick: Option<std::time::Duration>,
}

/// A `call` rule's handler, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpec {
    /// The handler's id (its index in [`HandlerTable::handlers`]).
    pub handler: u16,
    /// The rule's `arg`; rules of one list with the same text share one
    /// (`Packet::shared_arg`).
    pub arg: Option<Arc<str>>,
    /// The rule's `name`.
    pub rule_name: Option<String>,
    /// Descriptors one frame may put on the arrival port's TX ring.
    pub own_tx: usize,
    /// Ports (by index) the handler may hand frames to.
    pub egress: Vec<usize>,
}

/// `[interface]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceConfig {
    /// Interface name, e.g. `xdpb0` or `enp1s0f0`.
    pub name: Spanned<String>,
    /// Network namespace (a name under /run/netns) to enter before anything else.
    #[serde(default)]
    pub netns: Option<String>,
    /// XDP attach mode: native (default) or skb.
    #[serde(default)]
    pub xdp_mode: XdpAttachMode,
    /// Zero-copy AF_XDP: `true` (refused on veth), `false` (default here), `"auto"`.
    #[serde(default = "zero_copy_off")]
    pub zero_copy: Spanned<ZeroCopy>,
    /// Multi-buffer AF_XDP (`XDP_USE_SG`): frames larger than a chunk (jumbo MTU)
    /// arrive as a chain of chunks. Needed when the MTU does not fit one chunk.
    #[serde(default = "default_multi_buffer")]
    pub multi_buffer: Spanned<bool>,
    /// RX queues to serve, one worker each: a list, or `"all"` (every RX queue the
    /// device has, followed across re-attach).
    #[serde(default = "default_queues")]
    pub queues: Spanned<Queues>,
}

/// `[[port]]`: one device (and its queues) xdpool serves, under a name rules use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Port name: `[a-z0-9_-]`, 1..15 characters; used by rules and stats labels.
    pub name: Spanned<String>,
    /// Interface name, e.g. `xdpf0`.
    pub interface: Spanned<String>,
    /// Network namespace the device lives in (a name under /run/netns; none: the
    /// namespace xdpool is started in). Ports may live in different namespaces: one
    /// UMEM is shared across them (XDP_SHARED_UMEM binds across namespaces).
    #[serde(default)]
    pub netns: Option<Spanned<String>>,
    /// XDP attach mode: native (default) or skb.
    #[serde(default)]
    pub xdp_mode: XdpAttachMode,
    /// `"auto"` (default: try zero-copy, fall back to copy with one log line), `true`, `false`.
    #[serde(default = "zero_copy_auto")]
    pub zero_copy: Spanned<ZeroCopy>,
    /// Multi-buffer AF_XDP (`XDP_USE_SG`); one UMEM means every port must agree.
    #[serde(default = "default_multi_buffer")]
    pub multi_buffer: Spanned<bool>,
    /// RX queues to serve, one socket (and by default one worker) each: a list, or
    /// `"all"` (every RX queue the device has, followed across re-attach).
    #[serde(default = "default_queues")]
    pub queues: Spanned<Queues>,
}

/// The RX queues a port serves.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "QueuesText")]
pub enum Queues {
    /// These queues, as listed.
    List(Vec<u32>),
    /// `"all"`: every RX queue of the device. `run` resolves it to the most queues the
    /// device can have ([`Config::resolve_all_queues`]; 0 until then) and binds, at
    /// every bring-up, those the device has at that moment.
    All(u32),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum QueuesText {
    List(Vec<u32>),
    Text(String),
}

impl TryFrom<QueuesText> for Queues {
    type Error = String;
    fn try_from(t: QueuesText) -> Result<Self, String> {
        match t {
            QueuesText::List(v) => Ok(Queues::List(v)),
            QueuesText::Text(s) if s == "all" => Ok(Queues::All(0)),
            QueuesText::Text(s) => Err(format!(
                "queues = \"{s}\" is not valid: use a list such as [0, 1], or \"all\""
            )),
        }
    }
}

impl Queues {
    /// The queues planned: the list, or 0..n for `"all"` (one until resolved).
    pub fn planned(&self) -> Vec<u32> {
        match self {
            Queues::List(v) => v.clone(),
            Queues::All(n) => (0..(*n).max(1)).collect(),
        }
    }
}

/// Zero-copy wish of a port: `true`, `false` or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(try_from = "ZeroCopyText")]
pub enum ZeroCopy {
    /// Copy mode (`XDP_COPY`).
    Off,
    /// Zero-copy or fail (`XDP_ZEROCOPY`).
    On,
    /// Try zero-copy; fall back to copy mode, saying why once.
    Auto,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ZeroCopyText {
    Bool(bool),
    Text(String),
}

impl TryFrom<ZeroCopyText> for ZeroCopy {
    type Error = String;
    fn try_from(t: ZeroCopyText) -> Result<Self, String> {
        match t {
            ZeroCopyText::Bool(true) => Ok(ZeroCopy::On),
            ZeroCopyText::Bool(false) => Ok(ZeroCopy::Off),
            ZeroCopyText::Text(s) if s == "auto" => Ok(ZeroCopy::Auto),
            ZeroCopyText::Text(s) => Err(format!(
                "zero_copy = \"{s}\" is not valid: use true, false or \"auto\""
            )),
        }
    }
}

fn zero_copy_off() -> Spanned<ZeroCopy> {
    Spanned::new(0..0, ZeroCopy::Off)
}

fn zero_copy_auto() -> Spanned<ZeroCopy> {
    Spanned::new(0..0, ZeroCopy::Auto)
}

/// One port, normalized from `[[port]]` or the old `[interface]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortDef {
    /// Port name ("main" for the `[interface]` form).
    pub name: String,
    /// Interface name.
    pub interface: String,
    /// Namespace of the device.
    pub netns: Option<String>,
    /// Queues planned (for `queues = "all"`, every queue the device can have).
    pub queues: Vec<u32>,
    /// `queues = "all"`: at each bring-up, serve the planned queues the device has.
    pub follow_queues: bool,
    /// XDP attach mode.
    pub xdp_mode: XdpAttachMode,
    /// Zero-copy wish.
    pub zero_copy: ZeroCopy,
    /// Multi-buffer sockets.
    pub multi_buffer: bool,
}

/// The port name the `[interface]` form gets.
pub const MAIN_PORT: &str = "main";

/// The most `[[port]]`s one process runs (a verdict names its port in two bytes).
pub const MAX_PORTS: usize = 4096;

fn default_multi_buffer() -> Spanned<bool> {
    Spanned::new(0..0, false)
}

fn default_queues() -> Spanned<Queues> {
    Spanned::new(0..0, Queues::List(vec![0]))
}

/// `[umem]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UmemConfig {
    /// Number of frames (chunks).
    pub frames: Spanned<u32>,
    /// Chunk size: 2048 or 4096.
    pub chunk_size: Spanned<u32>,
    /// Back the UMEM with huge pages (falls back with a warning).
    pub hugepages: bool,
}

/// `umem.frames` when the file names none and the queues need no more
/// ([`Config::size_default_frames`]).
const DEFAULT_FRAMES: u32 = 8192;

/// The most `umem.frames` (8 GiB of 2048-byte chunks).
const MAX_FRAMES: u32 = 1 << 22;

impl Default for UmemConfig {
    fn default() -> Self {
        UmemConfig {
            frames: Spanned::new(0..0, DEFAULT_FRAMES),
            chunk_size: Spanned::new(0..0, 2048),
            hugepages: false,
        }
    }
}

/// `[rings]`: sizes in descriptors, powers of two.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RingsConfig {
    /// Fill ring (per queue).
    pub fill: Spanned<u32>,
    /// Completion ring (per queue).
    pub completion: Spanned<u32>,
    /// RX ring (per socket).
    pub rx: Spanned<u32>,
    /// TX ring (per socket).
    pub tx: Spanned<u32>,
    /// Copy mode: frames one TX wake-up sends (`XDP_MAX_TX_SKB_BUDGET`); `None`: the
    /// TX ring's size, 0: the kernel's 32.
    pub tx_budget: Option<Spanned<u32>>,
    /// Copy mode: how many frames a socket lets the kernel hold.
    pub copy_fill: CopyFill,
}

/// `rings.copy_fill`: in copy mode, how many frames a socket lets the kernel hold
/// (those on its fill ring plus those received and not yet read from RX). Zero-copy
/// always hands the driver the whole fill ring.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyFill {
    /// The whole fill ring, as xsk_fwd and xdpsock keep theirs. A worker that falls
    /// behind makes the kernel copy a frame and then drop it at the full RX ring
    /// (`rx ring full`): the receiving core's work. Forwarding 1500 B frames on the
    /// Intel lab it sent 1.22x what `rx` did (the kernel's copy from the UMEM at
    /// `sendto` was the cheaper; why is not established: docs/benchmarks.md).
    #[default]
    Full,
    /// At most the RX ring's size: a worker that falls behind makes the kernel find
    /// the fill ring empty and drop before its copy (`fill ring empty`), which saves
    /// the receiving core a copy per dropped frame (rxdrop with the generator on the
    /// receiving core: 1.05x `full`).
    Rx,
}

impl CopyFill {
    /// Frames the kernel may hold in copy mode, for rings of `fill` and `rx`.
    pub fn limit(self, fill: u32, rx: u32) -> u32 {
        match self {
            CopyFill::Full => fill,
            CopyFill::Rx => fill.min(rx),
        }
    }
}

impl RingsConfig {
    /// The TX budget asked of the kernel per socket (0: leave the kernel's).
    pub fn tx_budget(&self) -> u32 {
        self.tx_budget
            .as_ref()
            .map_or(*self.tx.get_ref(), |b| *b.get_ref())
    }
}

impl Default for RingsConfig {
    fn default() -> Self {
        RingsConfig {
            fill: Spanned::new(0..0, 4096),
            completion: Spanned::new(0..0, 2048),
            rx: Spanned::new(0..0, 2048),
            tx: Spanned::new(0..0, 2048),
            tx_budget: None,
            copy_fill: CopyFill::Full,
        }
    }
}

/// `[workers]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// One core per queue, in the order of `interface.queues`. Empty: pick from the
    /// device's NUMA node (or all online cores).
    pub cores: Spanned<Vec<usize>>,
    /// How a worker waits: `spin` (busy loop), `poll` (poll(2)), `busy-poll`.
    pub mode: WaitMode,
    /// Descriptors per batch.
    pub batch: Spanned<u32>,
    /// `copybreak`: frames of at most this many bytes are copied into a frag and their
    /// RX chunk goes straight back to the fill ring; larger ones are forwarded as
    /// `l2fwd`. At most half a chunk (a bigger frag is a whole chunk: nothing saved).
    pub copybreak_bytes: Spanned<u32>,
    /// `busy-poll` mode: frames per busy poll (SO_BUSY_POLL_BUDGET). Above 64 the
    /// kernel asks for CAP_NET_ADMIN.
    pub busy_poll_budget: Spanned<u32>,
    /// `poll` mode: after a pass that received frames, sleep this many microseconds
    /// before looking again instead of waiting in poll(), so that frames gather in the
    /// RX ring and a busy worker is woken per nap rather than per kernel flush (about
    /// every 64 frames). 0: always poll(). Frames arriving during one nap must fit in
    /// the RX ring (rate x nap < rings.rx).
    pub poll_coalesce_us: Spanned<u32>,
    /// What a worker does while its transmit side is the bottleneck: `hold` frames in
    /// the RX ring (the kernel drops them, at the full RX ring or with `copy_fill =
    /// "rx"` at the empty fill ring) or `shed` (take them, drop what TX cannot take,
    /// counted by the worker).
    pub tx_bottleneck: TxBottleneck,
    /// What a packet function's panic does: `drop` the frame and go on (counted
    /// `handler_panic`, logged once per queue) or `stop` the run with an error.
    pub handler_panic: HandlerPanic,
}

/// `workers.handler_panic`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandlerPanic {
    /// Drop the frame, count it and go on.
    #[default]
    Drop,
    /// Drop the frame and stop the run: every port detached, exit code non-zero.
    Stop,
}

/// `workers.tx_bottleneck`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxBottleneck {
    /// Leave frames in the RX ring; once the kernel holds all it may (`rings.copy_fill`)
    /// it drops the next frames at the full RX ring or, with `copy_fill = "rx"`, at the
    /// empty fill ring (before copying them). The most frames sent back in copy mode.
    #[default]
    Hold,
    /// Hold until the kernel runs short (`Port::kernel_short`: the fill ring below half
    /// its target or, in copy mode, the frames not yet read over half the RX ring),
    /// then take whole batches and drop what TX cannot take (`tx_ring_full`): the
    /// drops are the worker's, and a congested egress does not stall the lane's other
    /// traffic. In copy mode each shed frame has cost the kernel a copy.
    Shed,
}

/// Default `workers.copybreak_bytes`.
pub const DEFAULT_COPYBREAK_BYTES: u32 = 256;
/// Default `workers.busy_poll_budget` (the kernel's NAPI weight).
pub const DEFAULT_BUSY_POLL_BUDGET: u32 = 64;
/// Default `workers.poll_coalesce_us`, the first nap's length (the worker sizes the
/// rest): 100 us holds 200 frames at 2 Mpps, far below the default RX ring, and cut a
/// poll worker's context switches about ninefold on the lab.
pub const DEFAULT_POLL_COALESCE_US: u32 = 100;
/// Largest `workers.poll_coalesce_us`.
pub const MAX_POLL_COALESCE_US: u32 = 1000;

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig {
            cores: Spanned::new(0..0, vec![]),
            mode: WaitMode::Poll,
            batch: Spanned::new(0..0, 64),
            copybreak_bytes: Spanned::new(0..0, DEFAULT_COPYBREAK_BYTES),
            busy_poll_budget: Spanned::new(0..0, DEFAULT_BUSY_POLL_BUDGET),
            poll_coalesce_us: Spanned::new(0..0, DEFAULT_POLL_COALESCE_US),
            tx_bottleneck: TxBottleneck::Hold,
            handler_panic: HandlerPanic::Drop,
        }
    }
}

/// How a worker waits for frames.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitMode {
    /// Busy loop: lowest latency, one core at 100%.
    Spin,
    /// poll(2) with a short timeout.
    #[default]
    Poll,
    /// SO_PREFER_BUSY_POLL + SO_BUSY_POLL + SO_BUSY_POLL_BUDGET set on every socket;
    /// the loop drives RX with `recvfrom` (the kernel busy-polls the device's NAPI
    /// there) and TX with `sendto`. If the kernel refuses the options, the worker
    /// warns once and spins instead.
    BusyPoll,
}

/// What a worker does with a frame steered to it (as written in a rule).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(try_from = "String", rename_all = "kebab-case")]
pub enum Action {
    /// Count and recycle (rxdrop).
    #[default]
    Drop,
    /// Swap MACs and transmit on the same socket (zero-copy: the RX chunk is sent).
    L2fwd,
    /// Send out of another port (`to`), MACs rewritten as `mac` says; the descriptor
    /// moves, the bytes stay (one shared UMEM).
    Forward,
    /// Swap MACs and send the frame back twice on the same socket, by reference: two
    /// TX descriptors on the RX chunk (`frame_into_frag` + `ref_frag`), recycled at the
    /// second completion. The sender sees 2N frames for N. (Called `mirror` before
    /// ports existed; a port mirror is `mirror_to`.)
    ReflectTwice,
    /// Like `l2fwd`, but frames of at most `workers.copybreak_bytes` are copied into
    /// small frags (several per chunk, one TX descriptor each) so that their RX chunk
    /// goes straight back to the fill ring; larger frames are forwarded as `l2fwd`.
    Copybreak,
    /// Leave the frame to the kernel (the XDP program passes it; never reaches a worker).
    Pass,
    /// Drop in the XDP program (never reaches a worker).
    Xdpdrop,
    /// Hand the frame to a packet function of the program (`handler = "name"`, an
    /// optional `arg`): an application built on the library registers it with
    /// `App::handler`; the `xdpool` binary has none.
    Call,
}

/// Every action name, as a rule writes it.
pub const ACTION_NAMES: &str =
    "drop, l2fwd, forward, reflect-twice, copybreak, pass, xdpdrop, call";

impl TryFrom<String> for Action {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Ok(match s.as_str() {
            "drop" => Action::Drop,
            "l2fwd" => Action::L2fwd,
            "forward" => Action::Forward,
            "reflect-twice" => Action::ReflectTwice,
            "copybreak" => Action::Copybreak,
            "pass" => Action::Pass,
            "xdpdrop" => Action::Xdpdrop,
            "call" => Action::Call,
            "mirror" => {
                return Err("action `mirror` was renamed `reflect-twice` (the frame sent back twice on the same socket); \
                            for a port mirror keep the action and add mirror_to = \"<port>\""
                    .into())
            }
            other => return Err(format!("unknown variant `{other}`: use one of {ACTION_NAMES}")),
        })
    }
}

impl Action {
    /// The name a rule writes.
    pub fn name(self) -> &'static str {
        match self {
            Action::Drop => "drop",
            Action::L2fwd => "l2fwd",
            Action::Forward => "forward",
            Action::ReflectTwice => "reflect-twice",
            Action::Copybreak => "copybreak",
            Action::Pass => "pass",
            Action::Xdpdrop => "xdpdrop",
            Action::Call => "call",
        }
    }
}

/// How `forward` sets the MAC addresses of a frame leaving another port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum MacRewrite {
    /// Exchange source and destination.
    Swap,
    /// Destination: the next hop's MAC from the egress namespace's neighbour table
    /// (by the frame's destination IP); source: the egress device's MAC.
    Neigh,
    /// Destination: this MAC; source: the egress device's MAC.
    Fixed([u8; 6]),
    /// As they are (a packet function wrote them, or means them so).
    Keep,
}

/// `[[rule]]`: match fields are ANDed; an absent field matches anything.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// A name for the rule's counters (`[A-Za-z0-9_.-]`, 1..64, unique per port); a
    /// reload carries a named rule's counters to the new rule of the same name.
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    /// The port whose XDP program holds the rule (may be omitted with one port).
    #[serde(default)]
    pub port: Option<Spanned<String>>,
    /// IP protocol: `udp`, `tcp`, `icmp`, `icmpv6` or a number.
    #[serde(default)]
    pub proto: Option<Spanned<String>>,
    /// Destination port or range: `9` or `"1000-2000"`.
    #[serde(default)]
    pub dst_port: Option<Spanned<PortSpec>>,
    /// Destination address or prefix: `"198.18.0.2"`, `"198.18.0.0/15"`, `"2001:2::/48"`.
    #[serde(default)]
    pub dst: Option<Spanned<String>>,
    /// Source port or range, as `dst_port`.
    #[serde(default)]
    pub src_port: Option<Spanned<PortSpec>>,
    /// Source address or prefix, as `dst` (and of the same family when both are given).
    #[serde(default)]
    pub src: Option<Spanned<String>>,
    /// The outer VLAN tag's id, 0..4094: only frames tagged with it match (an
    /// untagged frame never; a double-tagged one by its outer tag).
    #[serde(default)]
    pub vlan: Option<Spanned<i64>>,
    /// What to do with matching frames.
    #[serde(default)]
    pub action: Action,
    /// `call`: the name of the packet function the program registered.
    #[serde(default)]
    pub handler: Option<Spanned<String>>,
    /// `call`: a string the handler reads with every frame of this rule.
    #[serde(default)]
    pub arg: Option<Spanned<String>>,
    /// `forward`: the egress port.
    #[serde(default)]
    pub to: Option<Spanned<String>>,
    /// `forward`: "swap" (default), "neigh" or a MAC "aa:bb:cc:dd:ee:ff".
    #[serde(default)]
    pub mac: Option<Spanned<String>>,
    /// drop, l2fwd, forward: a copy (by reference) of each matched frame also leaves
    /// this port.
    #[serde(default)]
    pub mirror_to: Option<Spanned<String>>,
    /// `capture = { file = "/var/tmp/r.pcapng", snaplen = 128, count = 1000 }`: the
    /// daemon also writes the rule's frames to this pcapng file (the frame still takes
    /// its action).
    #[serde(default)]
    pub capture: Option<Spanned<CaptureConfig>>,
}

/// A rule's `capture = { ... }` table.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CaptureConfig {
    /// The pcapng file (an absolute path; created or truncated at start or reload).
    pub file: Spanned<String>,
    /// Bytes kept of each frame (default: a whole single-buffer frame, the chunk size).
    #[serde(default)]
    pub snaplen: Option<Spanned<u32>>,
    /// Frames to write, then the file is flushed and closed (default: no limit).
    #[serde(default)]
    pub count: Option<Spanned<u64>>,
}

/// A rule's file capture, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSpec {
    /// The pcapng file.
    pub file: PathBuf,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// Frames to write (0: no limit).
    pub count: u64,
}

/// A rule list as `Config::parse_rules` gives it: the rules, and each rule's `name`
/// and `capture` (in rule order).
pub type ParsedRules = (
    Vec<ValidRule>,
    Vec<Option<String>>,
    Vec<Option<CaptureSpec>>,
);

/// Largest `capture.snaplen` (one chunk of the largest UMEM chunk size).
pub const MAX_CAPTURE_SNAPLEN: u32 = 4096;

/// A port or a port range as written in the config.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PortSpec {
    /// One port.
    One(i64),
    /// `"lo-hi"` or `"port"`.
    Text(String),
    /// Any other value (a list, a table, a boolean): refused by the rule's check,
    /// which says what to write, where the decoder's own error could not.
    Other(toml::Value),
}

/// `[stats]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// Prometheus text endpoint, e.g. `127.0.0.1:9717`. Absent: off.
    pub prometheus: Option<Spanned<String>>,
    /// Control socket path for `xdpool stats` (mode 0600).
    pub control_socket: PathBuf,
    /// Print the live one-line view every second.
    pub live: bool,
    /// TLS and basic auth for the HTTP endpoint: a web config file in the exporter
    /// toolkit's format (`stats::web`).
    pub web_config: Option<PathBuf>,
    /// Serve a non-loopback `prometheus` without a web config, on purpose.
    pub insecure_remote: bool,
    /// A group whose members may ask `stats` (socket 0660, its directory 0750).
    pub control_group: Option<String>,
}

impl Default for StatsConfig {
    fn default() -> Self {
        StatsConfig {
            prometheus: None,
            control_socket: PathBuf::from(DEFAULT_CONTROL_SOCKET),
            live: true,
            web_config: None,
            insecure_remote: false,
            control_group: None,
        }
    }
}

/// Where `xdpool run` listens and `xdpool stats` asks by default.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/xdpool/xdpool.sock";

/// A validated steering rule, ready for the XDP program's rule map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidRule {
    /// IP protocol, if matched.
    pub proto: Option<u8>,
    /// Destination port range (inclusive), if matched.
    pub dst_port: Option<(u16, u16)>,
    /// Destination prefix, if matched.
    pub dst: Option<(IpAddr, u8)>,
    /// Source port range (inclusive), if matched.
    pub src_port: Option<(u16, u16)>,
    /// Source prefix, if matched.
    pub src: Option<(IpAddr, u8)>,
    /// Outer VLAN tag's id, if matched.
    pub vlan: Option<u16>,
    /// Action.
    pub action: Action,
    /// Index (in [`Config::ports`]) of the port whose program holds the rule.
    pub port: usize,
    /// `forward`: index of the egress port.
    pub to: Option<usize>,
    /// `forward`: the MAC rewrite.
    pub mac: MacRewrite,
    /// Index of the port a copy of each matched frame also leaves.
    pub mirror_to: Option<usize>,
    /// `call`: the handler and its argument.
    pub call: Option<CallSpec>,
}

#[cfg(test)]
impl ValidRule {
    /// A rule that matches every frame on `port`: `action` (to port `to`), MACs
    /// swapped, no mirror. Tests build their rule lists from it.
    pub(crate) fn every(action: Action, port: usize, to: Option<usize>) -> ValidRule {
        ValidRule {
            proto: None,
            dst_port: None,
            dst: None,
            src_port: None,
            src: None,
            vlan: None,
            action,
            port,
            to,
            mac: MacRewrite::Swap,
            mirror_to: None,
            call: None,
        }
    }
}

impl ValidRule {
    /// A rule without conditions: it takes every frame, malformed ones included.
    pub fn matches_anything(&self) -> bool {
        self.proto.is_none()
            && self.dst_port.is_none()
            && self.dst.is_none()
            && self.src_port.is_none()
            && self.src.is_none()
            && self.vlan.is_none()
    }
}

fn line_of(text: &str, offset: usize) -> Option<usize> {
    if offset == 0 && text.is_empty() {
        return None;
    }
    Some(
        text[..offset.min(text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1,
    )
}

impl Config {
    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_with(path, Arc::default())
    }

    /// [`load`](Self::load) for a program with packet functions: `call` rules are
    /// checked against `handlers`.
    pub fn load_with(path: &Path, handlers: Arc<HandlerTable>) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            key: "-".into(),
            line: None,
            message: format!("cannot read the config file: {e}; check the path (`xdpool run` takes it with --config; configs/ in the source tree has examples)"),
            file: Some(path.to_path_buf()),
        })?;
        Self::parse_with(&text, handlers).map_err(|mut e| {
            e.file = Some(path.to_path_buf());
            e
        })
    }

    /// Parses and validates config text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Self::parse_with(text, Arc::default())
    }

    /// [`parse`](Self::parse), checking `call` rules against `handlers`.
    pub fn parse_with(text: &str, handlers: Arc<HandlerTable>) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| decode_error(text, e))?;
        cfg.handlers = handlers;
        cfg.size_default_frames();
        cfg.validate(text)?;
        Ok(cfg)
    }

    /// `umem.frames` when the file leaves it out: 8192, or as many as the planned
    /// queues need where that is more (fill + tx + 256 each), so that a config that
    /// names no size is never refused for it. Given in the file, it is kept (and
    /// checked).
    fn size_default_frames(&mut self) {
        if self.frames_sized() {
            let frames = self.frames_needed().max(u64::from(DEFAULT_FRAMES));
            let frames = u32::try_from(frames).unwrap_or(u32::MAX);
            self.umem.frames = Spanned::new(0..0, frames);
        }
    }

    /// The frames that keep every planned queue supplied: its fill and TX rings and
    /// 256 of cache each.
    fn frames_needed(&self) -> u64 {
        let sockets: usize = self.ports().iter().map(|p| p.queues.len()).sum();
        let (fill, tx) = (*self.rings.fill.get_ref(), *self.rings.tx.get_ref());
        // In u64: this runs before the rings' sizes are checked (any u32 may come).
        (u64::from(fill) + u64::from(tx) + 256) * sockets as u64
    }

    /// Whether `umem.frames` was left out of the file (and so sized here).
    pub fn frames_sized(&self) -> bool {
        self.umem.frames.span() == (0..0)
    }

    /// Range and consistency checks that the decoder cannot do.
    fn validate(&self, text: &str) -> Result<(), ConfigError> {
        let err = |key: &str, span: std::ops::Range<usize>, message: String| ConfigError {
            key: key.to_string(),
            line: if span == (0..0) {
                None
            } else {
                line_of(text, span.start)
            },
            message,
            file: None,
        };
        self.validate_ports(&err)?;
        let ports = self.ports();
        let sockets: usize = ports.iter().map(|p| p.queues.len()).sum();
        let cs = *self.umem.chunk_size.get_ref();
        if cs != 2048 && cs != 4096 {
            return Err(err(
                "umem.chunk_size",
                self.umem.chunk_size.span(),
                format!("{cs} is not valid: use 2048 or 4096"),
            ));
        }
        for (key, v) in [
            ("rings.fill", &self.rings.fill),
            ("rings.completion", &self.rings.completion),
            ("rings.rx", &self.rings.rx),
            ("rings.tx", &self.rings.tx),
        ] {
            let n = *v.get_ref();
            if !n.is_power_of_two() || !(64..=32768).contains(&n) {
                return Err(err(
                    key,
                    v.span(),
                    format!("{n} is not valid: use a power of two from 64 to 32768"),
                ));
            }
        }
        if let Some(b) = &self.rings.tx_budget {
            let (n, tx) = (*b.get_ref(), *self.rings.tx.get_ref());
            if n != 0 && !(32..=tx).contains(&n) {
                return Err(err(
                    "rings.tx_budget",
                    b.span(),
                    format!("{n} is not valid: use 32 to rings.tx = {tx} (frames per TX wake-up), or 0 for the kernel's default of 32"),
                ));
            }
        }
        let fill = *self.rings.fill.get_ref();
        let rx = *self.rings.rx.get_ref();
        if fill < rx {
            return Err(err(
                "rings.fill",
                self.rings.fill.span(),
                format!("{fill} is smaller than rings.rx = {rx}: the fill ring must hold at least the RX ring (with zero_copy also the device's RX ring, which the driver fills ahead of traffic), or frames the RX ring has room for find no buffer; use fill >= {rx} (zero-copy: >= {})", (rx * 2).next_power_of_two()),
            ));
        }
        if let Some(msg) = self.frames_shortfall().or_else(|| self.frames_excess()) {
            return Err(err("umem.frames", self.umem.frames.span(), msg));
        }
        let cores = self.workers.cores.get_ref();
        if !cores.is_empty() {
            if cores.len() != sockets {
                return Err(err("workers.cores", self.workers.cores.span(), format!("{} core(s) for {sockets} queue(s): give one core per queue, in the order ports and their queues are listed, or leave it empty", cores.len())));
            }
            let online = online_cpus();
            for c in cores {
                if !online.contains(c) {
                    return Err(err(
                        "workers.cores",
                        self.workers.cores.span(),
                        format!(
                            "core {c} is not online: online cores are {}",
                            fmt_list(&online)
                        ),
                    ));
                }
            }
        }
        let batch = *self.workers.batch.get_ref();
        if batch == 0 || batch > 256 {
            return Err(err(
                "workers.batch",
                self.workers.batch.span(),
                format!("{batch} is not valid: use 1..256"),
            ));
        }
        let copybreak = *self.workers.copybreak_bytes.get_ref();
        if copybreak == 0 || copybreak > cs / 2 {
            return Err(err(
                "workers.copybreak_bytes",
                self.workers.copybreak_bytes.span(),
                format!("{copybreak} is not valid: use 1..{} (at most half of umem.chunk_size = {cs}; a larger copy takes a whole chunk and saves nothing)", cs / 2),
            ));
        }
        let budget = *self.workers.busy_poll_budget.get_ref();
        if budget == 0 || budget > 1024 {
            return Err(err("workers.busy_poll_budget", self.workers.busy_poll_budget.span(), format!("{budget} is not valid: use 1..1024 (64, the NAPI weight, needs no CAP_NET_ADMIN)")));
        }
        let nap = *self.workers.poll_coalesce_us.get_ref();
        if nap > MAX_POLL_COALESCE_US {
            return Err(err(
                "workers.poll_coalesce_us",
                self.workers.poll_coalesce_us.span(),
                format!("{nap} is not valid: use 0..{MAX_POLL_COALESCE_US} microseconds (0 turns coalescing off); frames arriving during one nap must fit in the RX ring"),
            ));
        }
        if self.rules.is_empty() {
            return Err(err("rule", 0..0, "no [[rule]] given: add at least one, e.g.\n[[rule]]\nproto = \"udp\"\naction = \"drop\"".into()));
        }
        if self.rules.len() > 64 {
            return Err(err(
                "rule",
                0..0,
                format!("{} rules given: at most 64", self.rules.len()),
            ));
        }
        let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
        let mut named: Vec<(usize, &str)> = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let v = validate_rule(r, &names, &self.handlers).map_err(|(key, span, msg)| {
                // A key the rule lacks has no span: the rule's `[[rule]]` line then.
                let span = match span {
                    std::ops::Range { start: 0, end: 0 } => {
                        rule_header(text, i).map_or(0..0, |o| o..o + 1)
                    }
                    s => s,
                };
                err(&format!("rule[{i}].{key}"), span, msg)
            })?;
            if let Some(n) = &r.name {
                let name = n.get_ref().as_str();
                let ok = (1..=64).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
                if !ok {
                    return Err(err(
                        &format!("rule[{i}].name"),
                        n.span(),
                        format!(
                            "`{name}` is not a valid rule name: use 1..64 of A-Z a-z 0-9 _ . -"
                        ),
                    ));
                }
                if named.contains(&(v.port, name)) {
                    return Err(err(&format!("rule[{i}].name"), n.span(), format!("`{name}` names another rule of port `{}` already: rule names are unique per port", names[v.port])));
                }
                named.push((v.port, name));
            }
        }
        let mut files: Vec<(usize, PathBuf)> = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let Some(c) = &r.capture else { continue };
            let spec = validate_capture(c, r.action, cs)
                .map_err(|(key, span, msg)| err(&format!("rule[{i}].capture{key}"), span, msg))?;
            if let Some((j, _)) = files.iter().find(|(_, f)| *f == spec.file) {
                return Err(err(&format!("rule[{i}].capture.file"), c.get_ref().file.span(), format!("`{}` is written by rule[{j}]'s capture already: give each rule its own file", spec.file.display())));
            }
            files.push((i, spec.file));
        }
        if ports.iter().any(|p| p.multi_buffer) {
            let (key, span) = match (&self.interface, self.ports.first()) {
                (Some(i), _) => ("interface.multi_buffer", i.multi_buffer.span()),
                (None, Some(p)) => ("port.multi_buffer", p.multi_buffer.span()),
                (None, None) => ("port.multi_buffer", 0..0),
            };
            for (i, r) in self.rules.iter().enumerate() {
                if matches!(
                    r.action,
                    Action::ReflectTwice | Action::Copybreak | Action::Forward | Action::Call
                ) || r.mirror_to.is_some()
                {
                    let what = if r.mirror_to.is_some() {
                        "mirror_to".to_string()
                    } else {
                        format!("`{}`", r.action.name())
                    };
                    return Err(err(
                        key,
                        span,
                        format!("rule[{i}] uses {what}, which takes single-buffer frames only: with multi_buffer = true use drop, l2fwd, pass or xdpdrop, or turn multi_buffer off"),
                    ));
                }
            }
        }
        if let Some(p) = &self.stats.prometheus {
            let Ok(addr) = p.get_ref().parse::<std::net::SocketAddr>() else {
                return Err(err(
                    "stats.prometheus",
                    p.span(),
                    format!(
                        "`{}` is not an address:port, e.g. \"127.0.0.1:9717\"",
                        p.get_ref()
                    ),
                ));
            };
            if !addr.ip().is_loopback()
                && self.stats.web_config.is_none()
                && !self.stats.insecure_remote
            {
                return Err(err(
                    "stats.prometheus",
                    p.span(),
                    format!("`{addr}` is beyond loopback and there is no stats.web_config: anyone who can reach it would read the traffic stats. Set stats.web_config to a web config with TLS and basic auth, or stats.insecure_remote = true to serve it in the clear on purpose (e.g. behind a NetworkPolicy)"),
                ));
            }
        }
        Ok(())
    }

    /// Why `umem.frames` cannot keep every planned queue supplied, if it cannot.
    pub fn frames_shortfall(&self) -> Option<String> {
        let sockets: usize = self.ports().iter().map(|p| p.queues.len()).sum();
        let (frames, fill, tx) = (
            *self.umem.frames.get_ref(),
            *self.rings.fill.get_ref(),
            *self.rings.tx.get_ref(),
        );
        let needed = self.frames_needed();
        ((frames as u64) < needed).then(|| format!("{frames} frames cannot keep {sockets} queue(s) supplied (fill {fill} + tx {tx} + 256 cache per queue): use at least {needed}"))
    }

    /// Why `umem.frames` is more than a UMEM may have, if it is.
    pub fn frames_excess(&self) -> Option<String> {
        let frames = *self.umem.frames.get_ref();
        let why = if self.frames_sized() {
            " (left out of the file, it was sized for the queues: give fewer queues or smaller rings.fill / rings.tx)"
        } else {
            ""
        };
        (frames > MAX_FRAMES)
            .then(|| format!("{frames} frames are over the limit of {MAX_FRAMES}{why}"))
    }

    /// Resolves every `queues = "all"` to `max_queues(interface)`, the most RX queues
    /// the device can have (run calls it once the namespace is entered); then checks
    /// that `umem.frames` supplies them all.
    pub fn resolve_all_queues(
        &mut self,
        mut max_queues: impl FnMut(&str, Option<&str>) -> u32,
    ) -> Result<(), String> {
        if let Some(i) = &mut self.interface {
            if let Queues::All(n) = i.queues.get_mut() {
                *n = max_queues(i.name.get_ref(), i.netns.as_deref()).clamp(1, 64);
            }
        }
        for p in &mut self.ports {
            if let Queues::All(n) = p.queues.get_mut() {
                *n = max_queues(
                    p.interface.get_ref(),
                    p.netns.as_ref().map(|n| n.get_ref().as_str()),
                )
                .clamp(1, 64);
            }
        }
        self.size_default_frames();
        match self.frames_shortfall().or_else(|| self.frames_excess()) {
            Some(msg) => Err(format!("umem.frames: {msg} (queues = \"all\" plans a socket for every RX queue the device can have)")),
            None => Ok(()),
        }
    }

    /// Each rule's `name`, in rule order.
    pub fn rule_names(&self) -> Vec<Option<String>> {
        self.rules
            .iter()
            .map(|r| r.name.as_ref().map(|n| n.get_ref().clone()))
            .collect()
    }

    /// Each rule's `capture`, validated, in rule order.
    pub fn rule_captures(&self) -> Vec<Option<CaptureSpec>> {
        let cs = *self.umem.chunk_size.get_ref();
        self.rules
            .iter()
            .map(|r| {
                r.capture
                    .as_ref()
                    .map(|c| validate_capture(c, r.action, cs).expect("validated at load"))
            })
            .collect()
    }

    /// The `[[rule]]` tables of `text` for an instance running `self`, validated
    /// with the usual key-and-line errors. `text` is either a whole config file
    /// (validated as one; its ports must be the running ones, and only its rules are
    /// used) or a file of `[[rule]]` tables only (checked against the running ports).
    pub fn parse_rules(&self, text: &str) -> Result<ParsedRules, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| decode_error(text, e))?;
        let cfg = if table.keys().any(|k| k != "rule") {
            let cfg = Config::parse_with(text, self.handlers.clone())?;
            // `queues = "all"` as written, not as resolved: the running instance's
            // list is the device's queues, the file's is not resolved yet.
            let key = |p: &PortDef| {
                (
                    p.name.clone(),
                    p.interface.clone(),
                    if p.follow_queues {
                        "\"all\"".to_string()
                    } else {
                        format!("{:?}", p.queues)
                    },
                    p.netns.clone(),
                )
            };
            let (new, old): (Vec<_>, Vec<_>) = (
                cfg.ports().iter().map(key).collect(),
                self.ports().iter().map(key).collect(),
            );
            if new != old {
                let list = |v: &[(String, String, String, Option<String>)]| {
                    v.iter()
                        .map(|(n, i, q, _)| format!("{n} ({i}, queues {q})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(ConfigError {
                    key: "port".into(),
                    line: None,
                    message: format!("the file's ports ({}) are not the running instance's ({}): a reload changes [[rule]] tables only; restart xdpool to change ports", list(&new), list(&old)),
                    file: None,
                });
            }
            cfg
        } else {
            #[derive(Deserialize)]
            struct RulesOnly {
                #[serde(default, rename = "rule")]
                rules: Vec<RuleConfig>,
            }
            let only: RulesOnly = toml::from_str(text).map_err(|e| decode_error(text, e))?;
            let mut cfg = self.clone();
            cfg.rules = only.rules;
            cfg.validate(text)?;
            cfg
        };
        Ok((cfg.valid_rules(), cfg.rule_names(), cfg.rule_captures()))
    }

    /// The rules, validated.
    pub fn valid_rules(&self) -> Vec<ValidRule> {
        let ports = self.ports();
        let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
        let mut args: std::collections::HashSet<Arc<str>> = Default::default();
        self.rules
            .iter()
            .map(|r| {
                let mut v = validate_rule(r, &names, &self.handlers).expect("validated at load");
                // One `Arc` per arg text: a handler tells a frame's arg from the last
                // one it parsed by the pointer (`Packet::shared_arg`), rule to rule.
                if let Some(a) = v.call.as_mut().and_then(|c| c.arg.as_mut()) {
                    match args.get(&**a) {
                        Some(same) => *a = same.clone(),
                        None => {
                            args.insert(a.clone());
                        }
                    }
                }
                v
            })
            .collect()
    }

    /// The ports, in the order listed: `[[port]]`, or the `[interface]` table as one
    /// port named [`MAIN_PORT`].
    pub fn ports(&self) -> Vec<PortDef> {
        if let Some(i) = &self.interface {
            return vec![PortDef {
                name: MAIN_PORT.into(),
                interface: i.name.get_ref().clone(),
                netns: i.netns.clone(),
                queues: i.queues.get_ref().planned(),
                follow_queues: matches!(i.queues.get_ref(), Queues::All(_)),
                xdp_mode: i.xdp_mode,
                zero_copy: *i.zero_copy.get_ref(),
                multi_buffer: *i.multi_buffer.get_ref(),
            }];
        }
        self.ports
            .iter()
            .map(|p| PortDef {
                name: p.name.get_ref().clone(),
                interface: p.interface.get_ref().clone(),
                netns: p.netns.as_ref().map(|n| n.get_ref().clone()),
                queues: p.queues.get_ref().planned(),
                follow_queues: matches!(p.queues.get_ref(), Queues::All(_)),
                xdp_mode: p.xdp_mode,
                zero_copy: *p.zero_copy.get_ref(),
                multi_buffer: *p.multi_buffer.get_ref(),
            })
            .collect()
    }

    /// The first port's namespace: the one the process enters at start (where its
    /// threads live); other ports may name other namespaces (`PortDef::netns`).
    pub fn netns(&self) -> Option<String> {
        self.ports().into_iter().next().and_then(|p| p.netns)
    }

    fn validate_ports(
        &self,
        err: &dyn Fn(&str, std::ops::Range<usize>, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let check_queues = |key: &str, q: &Spanned<Queues>| -> Result<(), ConfigError> {
            let list = match q.get_ref() {
                Queues::List(v) => v,
                Queues::All(_) if !self.workers.cores.get_ref().is_empty() => {
                    return Err(err(key, q.span(), "queues = \"all\" with workers.cores: the queue count is the device's, so cores cannot be given per queue; list the queues, or leave workers.cores empty".into()));
                }
                Queues::All(_) => return Ok(()),
            };
            if list.is_empty() {
                return Err(err(
                    key,
                    q.span(),
                    "at least one queue is needed, e.g. queues = [0]".into(),
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            for q_ in list {
                if !seen.insert(*q_) {
                    return Err(err(
                        key,
                        q.span(),
                        format!("queue {q_} is listed twice: each queue gets exactly one worker"),
                    ));
                }
                if *q_ >= 64 {
                    return Err(err(
                        key,
                        q.span(),
                        format!("queue {q_} is out of range: valid queues are 0..63"),
                    ));
                }
            }
            Ok(())
        };
        let check_ifname = |key: &str, n: &Spanned<String>| -> Result<(), ConfigError> {
            let name = n.get_ref();
            if name.is_empty()
                || name.len() > 15
                || name.contains('/')
                || name.contains(char::is_whitespace)
            {
                return Err(err(key, n.span(), format!("`{name}` is not a valid interface name (1-15 characters, no '/' or spaces)")));
            }
            Ok(())
        };
        match (&self.interface, self.ports.is_empty()) {
            (Some(_), false) => return Err(err("port", self.ports[0].name.span(), "both [interface] and [[port]] given: use [[port]] tables only (the [interface] form is one port named \"main\")".into())),
            (None, true) => return Err(err("port", 0..0, "no port given: add a [[port]] table (name, interface, netns, queues), or the single-interface [interface] table".into())),
            (Some(i), true) => {
                check_ifname("interface.name", &i.name)?;
                return check_queues("interface.queues", &i.queues);
            }
            (None, false) => {}
        }
        let mut names = std::collections::BTreeSet::new();
        let mut devices = std::collections::BTreeSet::new();
        let first = &self.ports[0];
        if let Some(p) = self.ports.get(MAX_PORTS) {
            return Err(err(
                "port.name",
                p.name.span(),
                format!("{} ports: one process takes at most {MAX_PORTS}; run another process for the rest", self.ports.len()),
            ));
        }
        for p in &self.ports {
            let name = p.name.get_ref();
            if name.is_empty()
                || name.len() > 15
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            {
                return Err(err("port.name", p.name.span(), format!("`{name}` is not a valid port name: 1-15 characters of a-z, 0-9, '_' and '-'")));
            }
            if !names.insert(name.clone()) {
                return Err(err(
                    "port.name",
                    p.name.span(),
                    format!("port `{name}` is defined twice: port names must be unique"),
                ));
            }
            check_ifname("port.interface", &p.interface)?;
            if let Some(ns) = &p.netns {
                check_netns_name("port.netns", ns, err)?;
            }
            // A device is known by its name in its namespace: eth0 in two containers
            // are two devices.
            if !devices.insert((
                p.netns.as_ref().map(|n| n.get_ref().clone()),
                p.interface.get_ref().clone(),
            )) {
                let where_ = p
                    .netns
                    .as_ref()
                    .map(|n| format!(" in namespace `{}`", n.get_ref()))
                    .unwrap_or_default();
                return Err(err("port.interface", p.interface.span(), format!("interface `{}`{where_} belongs to two ports: give each device one [[port]] with all its queues", p.interface.get_ref())));
            }
            check_queues("port.queues", &p.queues)?;
            if *p.zero_copy.get_ref() != ZeroCopy::Auto
                && self.ports.iter().any(|q| {
                    *q.zero_copy.get_ref() != ZeroCopy::Auto
                        && q.zero_copy.get_ref() != p.zero_copy.get_ref()
                })
            {
                return Err(err("port.zero_copy", p.zero_copy.span(), "zero_copy = true and false on ports of one UMEM: the kernel gives every socket of a UMEM the same mode; use \"auto\" or the same value everywhere".into()));
            }
            if p.multi_buffer.get_ref() != first.multi_buffer.get_ref() {
                return Err(err("port.multi_buffer", p.multi_buffer.span(), "multi_buffer differs between ports: the UMEM is shared, so every port must agree".into()));
            }
        }
        Ok(())
    }

    /// The cores to pin workers to: configured, else online cores round-robin.
    pub fn worker_cores(&self) -> Vec<usize> {
        let cores = self.workers.cores.get_ref();
        if !cores.is_empty() {
            return cores.clone();
        }
        let online = online_cpus();
        let n: usize = self.ports().iter().map(|p| p.queues.len()).sum();
        (0..n)
            .map(|i| online[(online.len() - 1 - i % online.len()) % online.len()])
            .collect()
    }
}

/// A namespace name as `ip netns` takes it: a file name under /run/netns.
fn check_netns_name(
    key: &str,
    n: &Spanned<String>,
    err: &dyn Fn(&str, std::ops::Range<usize>, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let name = n.get_ref();
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > 255
        || name.contains('/')
        || name.contains('\0')
    {
        return Err(err(key, n.span(), format!("`{name}` is not a namespace name: a name under /run/netns (as `ip netns add NAME` makes), without '/'")));
    }
    Ok(())
}

/// A TOML decoding error as a [`ConfigError`] (line, and the key when serde names it).
fn decode_error(text: &str, e: toml::de::Error) -> ConfigError {
    let line = e.span().and_then(|s| line_of(text, s.start));
    let msg = e.message().to_string();
    let key = msg
        .split('`')
        .nth(1)
        .filter(|_| msg.starts_with("unknown field") || msg.starts_with("missing field"))
        .map(str::to_string)
        .or_else(|| e.span().and_then(|s| key_at(text, s.start)))
        .unwrap_or_else(|| "-".to_string());
    ConfigError {
        key,
        line,
        message: msg,
        file: None,
    }
}

/// The dotted key whose value is at byte `offset` of `text` (`rings.copy_fill`,
/// `rule[1].action`): the `key =` of that line under the table header above it.
/// None where the line is not a plain `key = value` under a table header.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let start = text
        .get(..offset.min(text.len()))?
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (name, _) = line.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    // The last header above the line; an array of tables is indexed by how many of
    // its headers came before.
    let above = &text[..start];
    let (table, array) = above.lines().rev().find_map(header)?;
    let table = if array {
        let n = above
            .lines()
            .filter(|l| header(l) == Some((table, true)))
            .count();
        format!("{table}[{}]", n.checked_sub(1)?)
    } else {
        table.to_string()
    };
    Some(format!("{table}.{name}"))
}

/// A table header line: its name and whether it is an array of tables (`[[rule]]`).
/// None for any other line (a key, a comment, a row of a multi-line array).
fn header(line: &str) -> Option<(&str, bool)> {
    let line = line.trim();
    let ((inner, after), array) = if let Some(rest) = line.strip_prefix("[[") {
        (rest.split_once("]]")?, true)
    } else {
        (line.strip_prefix('[')?.split_once(']')?, false)
    };
    let inner = inner.trim();
    let after = after.trim();
    let is_key = |b: u8| b.is_ascii_alphanumeric() || b"_-. ".contains(&b);
    (!inner.is_empty() && inner.bytes().all(is_key) && (after.is_empty() || after.starts_with('#')))
        .then_some((inner, array))
}

type RuleErr = (&'static str, std::ops::Range<usize>, String);

/// The byte offset of the `i`-th `[[rule]]` header in `text` (None for rules written
/// another way, as an inline array).
fn rule_header(text: &str, i: usize) -> Option<usize> {
    let mut offset = 0;
    let mut seen = 0;
    for line in text.split_inclusive('\n') {
        // The table headers as `key_at` reads them (`[[ rule ]]`, a trailing comment);
        // like it, a header-like line inside a multi-line string is taken as one.
        if header(line) == Some(("rule", true)) {
            if seen == i {
                return Some(offset + (line.len() - line.trim_start().len()));
            }
            seen += 1;
        }
        offset += line.len();
    }
    None
}

fn validate_rule(
    r: &RuleConfig,
    ports: &[&str],
    handlers: &HandlerTable,
) -> Result<ValidRule, RuleErr> {
    let find = |key: &'static str, n: &Spanned<String>| -> Result<usize, RuleErr> {
        ports
            .iter()
            .position(|p| *p == n.get_ref().as_str())
            .ok_or_else(|| {
                (
                    key,
                    n.span(),
                    format!(
                        "no port named `{}`: ports are {}",
                        n.get_ref(),
                        ports.join(", ")
                    ),
                )
            })
    };
    let port = match &r.port {
        Some(n) => find("port", n)?,
        None if ports.len() == 1 => 0,
        None => {
            return Err((
                "port",
                0..0,
                format!(
                    "which port's program holds this rule? add port = \"<name>\" (ports are {})",
                    ports.join(", ")
                ),
            ))
        }
    };
    let to = match (&r.to, r.action) {
        (Some(n), Action::Forward) => {
            let to = find("to", n)?;
            if to == port {
                return Err(("to", n.span(), format!("`forward` to the port the frame came in on: use action = \"l2fwd\" to send it back out of `{}`", ports[port])));
            }
            Some(to)
        }
        (None, Action::Forward) => {
            return Err((
                "to",
                0..0,
                format!(
                    "`forward` needs to = \"<port>\" (ports are {})",
                    ports.join(", ")
                ),
            ))
        }
        (Some(n), a) => {
            return Err((
                "to",
                n.span(),
                format!("`to` belongs to action = \"forward\", not `{}`", a.name()),
            ))
        }
        (None, _) => None,
    };
    let mac = match (&r.mac, r.action) {
        (None, _) => MacRewrite::Swap,
        (Some(m), Action::Forward) => parse_mac_rewrite(m.get_ref()).ok_or_else(|| ("mac", m.span(), format!("`{}` is not valid: use \"swap\", \"neigh\" or a MAC like \"02:00:00:00:00:01\"", m.get_ref())))?,
        (Some(m), a) => return Err(("mac", m.span(), format!("`mac` belongs to action = \"forward\", not `{}`", a.name()))),
    };
    let mirror_to = match &r.mirror_to {
        None => None,
        Some(n) => {
            if !matches!(r.action, Action::Drop | Action::L2fwd | Action::Forward) {
                return Err((
                    "mirror_to",
                    n.span(),
                    format!(
                        "mirror_to works with drop, l2fwd and forward, not `{}`",
                        r.action.name()
                    ),
                ));
            }
            let m = find("mirror_to", n)?;
            if m == port {
                return Err(("mirror_to", n.span(), "mirror_to the port the frame came in on: use action = \"reflect-twice\" to send it back twice".into()));
            }
            if Some(m) == to {
                return Err(("mirror_to", n.span(), "mirror_to the port the frame is forwarded to would send it twice there: name a monitor port".into()));
            }
            Some(m)
        }
    };
    let proto = match &r.proto {
        None => None,
        Some(p) => Some(match p.get_ref().to_ascii_lowercase().as_str() {
            "udp" => 17,
            "tcp" => 6,
            "icmp" => 1,
            "icmpv6" => 58,
            other => other.parse::<u8>().map_err(|_| ("proto", p.span(), format!("`{other}` is not a protocol: use udp, tcp, icmp, icmpv6 or a number 0..255")))?,
        }),
    };
    let dst_port = port_range("dst_port", r.dst_port.as_ref(), proto)?;
    let src_port = port_range("src_port", r.src_port.as_ref(), proto)?;
    let dst = prefix("dst", r.dst.as_ref())?;
    let src = prefix("src", r.src.as_ref())?;
    if let (Some((d, _)), Some((a, _)), Some(s)) = (dst, src, &r.src) {
        if d.is_ipv4() != a.is_ipv4() {
            return Err(("src", s.span(), format!("src {a} and dst {d} are of different IP families: a frame has one; write both as IPv4 or both as IPv6, or split the rule in two")));
        }
    }
    // ICMP by name is the family's own: icmp with an IPv6 prefix (or icmpv6 with an
    // IPv4 one) is a rule that cannot mean what it says.
    if let (Some(p), Some((addr, _))) = (&r.proto, dst.or(src)) {
        let named = p.get_ref().to_ascii_lowercase();
        let clash = match named.as_str() {
            "icmp" if addr.is_ipv6() => Some("icmpv6"),
            "icmpv6" if addr.is_ipv4() => Some("icmp"),
            _ => None,
        };
        if let Some(other) = clash {
            let key = if dst.is_some() { "dst" } else { "src" };
            return Err((
                "proto",
                p.span(),
                format!(
                    "proto = \"{named}\" with {key} {addr}: ICMP over {} is proto = \"{other}\"",
                    if addr.is_ipv6() { "IPv6" } else { "IPv4" }
                ),
            ));
        }
    }
    let call = validate_call(r, port, ports, handlers)?;
    let vlan = match &r.vlan {
        None => None,
        Some(v) => match u16::try_from(*v.get_ref()) {
            Ok(id) if id <= 4094 => Some(id),
            _ => return Err(("vlan", v.span(), format!("{} is not a VLAN id: use 0..4094 (the outer 802.1Q/802.1ad tag's id; 4095 is reserved)", v.get_ref()))),
        },
    };
    Ok(ValidRule {
        proto,
        dst_port,
        dst,
        src_port,
        src,
        vlan,
        action: r.action,
        port,
        to,
        mac,
        mirror_to,
        call,
    })
}

/// A `call` rule's `handler` (registered by the program, its declared ports in the
/// config) and `arg`; both keys belong to `call` only.
fn validate_call(
    r: &RuleConfig,
    port: usize,
    ports: &[&str],
    handlers: &HandlerTable,
) -> Result<Option<CallSpec>, RuleErr> {
    if r.action != Action::Call {
        for (key, v) in [("handler", &r.handler), ("arg", &r.arg)] {
            if let Some(v) = v {
                return Err((
                    key,
                    v.span(),
                    format!(
                        "`{key}` belongs to action = \"call\", not `{}`",
                        r.action.name()
                    ),
                ));
            }
        }
        return Ok(None);
    }
    let Some(name) = &r.handler else {
        return Err((
            "handler",
            0..0,
            "`call` needs handler = \"<name>\": the name the program registered with App::handler"
                .into(),
        ));
    };
    let Some(id) = handlers
        .handlers
        .iter()
        .position(|h| h.name == *name.get_ref())
    else {
        let message = if handlers.handlers.is_empty() {
            format!(
                "no handler named `{}`: this program registers no packet functions (the xdpool \
                 binary has none); build your own with xdpool::App (docs/library.md)",
                name.get_ref()
            )
        } else {
            let known: Vec<&str> = handlers.handlers.iter().map(|h| h.name.as_str()).collect();
            format!(
                "no handler named `{}`: this program registers {}",
                name.get_ref(),
                known.join(", ")
            )
        };
        return Err(("handler", name.span(), message));
    };
    let decl = &handlers.handlers[id];
    let mut egress = Vec::new();
    for p in &decl.ports {
        let Some(i) = ports.iter().position(|n| n == p) else {
            return Err((
                "handler",
                name.span(),
                format!(
                    "handler `{}` declares it sends to port `{p}`, which this config does not have \
                     (ports are {}): add the port, or declare the ports the config has",
                    decl.name,
                    ports.join(", ")
                ),
            ));
        };
        if i != port && !egress.contains(&i) {
            egress.push(i);
        }
    }
    Ok(Some(CallSpec {
        handler: id as u16,
        arg: r.arg.as_ref().map(|a| Arc::from(a.get_ref().as_str())),
        rule_name: r.name.as_ref().map(|n| n.get_ref().clone()),
        own_tx: decl.tx_per_frame,
        egress,
    }))
}

/// A `dst_port` / `src_port` value: one port or an inclusive range; only with
/// proto udp or tcp.
fn port_range(
    key: &'static str,
    spec: Option<&Spanned<PortSpec>>,
    proto: Option<u8>,
) -> Result<Option<(u16, u16)>, RuleErr> {
    let Some(s) = spec else { return Ok(None) };
    let bad = |what: String| {
        (
            key,
            s.span(),
            format!("{what}: use a port 0..65535 or a range \"lo-hi\""),
        )
    };
    let parse = |t: &str| {
        t.trim()
            .parse::<u16>()
            .map_err(|_| bad(format!("`{t}` is not a port")))
    };
    let (lo, hi) = match s.get_ref() {
        PortSpec::One(n) => {
            let p = u16::try_from(*n).map_err(|_| bad(format!("{n} is out of range")))?;
            (p, p)
        }
        PortSpec::Text(t) => match t.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let p = parse(t)?;
                (p, p)
            }
        },
        PortSpec::Other(toml::Value::Array(_)) => {
            return Err(bad(
                "a list is not taken (write one rule per port or range)".into(),
            ))
        }
        PortSpec::Other(v) => return Err(bad(format!("a {} is not a port", v.type_str()))),
    };
    if lo > hi {
        return Err(bad(format!("range {lo}-{hi} is empty")));
    }
    if !matches!(proto, Some(6) | Some(17)) {
        return Err((
            key,
            s.span(),
            "a port needs proto = \"udp\" or \"tcp\" in the same rule".into(),
        ));
    }
    Ok(Some((lo, hi)))
}

/// A `dst` / `src` value: an address (a host prefix) or `addr/len`.
fn prefix(
    key: &'static str,
    text: Option<&Spanned<String>>,
) -> Result<Option<(IpAddr, u8)>, RuleErr> {
    let Some(d) = text else { return Ok(None) };
    let text = d.get_ref();
    let bad = || {
        (key, d.span(), format!("`{text}` is not an address or prefix, e.g. \"198.18.0.2\" or \"198.18.0.0/15\" or \"2001:2::/48\""))
    };
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (
            a.parse::<IpAddr>().map_err(|_| bad())?,
            l.parse::<u8>().map_err(|_| bad())?,
        ),
        None => {
            let a = text.parse::<IpAddr>().map_err(|_| bad())?;
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err((
            key,
            d.span(),
            format!("prefix length {len} is too long for {addr}: at most {max}"),
        ));
    }
    Ok(Some((addr, len)))
}

/// A rule's `capture` table: an absolute file path, snaplen 1..=4096 (default the
/// chunk size), count at least 1 (default none), on a rule whose frames reach a worker.
/// Errors name the key below `capture` (`.file`, `.snaplen`, `.count`, or none).
fn validate_capture(
    c: &Spanned<CaptureConfig>,
    action: Action,
    chunk_size: u32,
) -> Result<CaptureSpec, RuleErr> {
    if !action.reaches_userspace() {
        return Err((
            "",
            c.span(),
            format!("action `{}` is settled in the XDP program and no worker sees its frames, so nothing can copy them: capture a rule whose action reaches the workers (drop, l2fwd, forward, reflect-twice, copybreak), or use tcpdump for `pass`", action.name()),
        ));
    }
    let cc = c.get_ref();
    let file = cc.file.get_ref();
    let path = Path::new(file);
    let bad = |why: &str| (".file", cc.file.span(), format!("`{file}` {why}"));
    if file.is_empty() {
        return Err(bad(
            "is empty: name a pcapng file, e.g. file = \"/var/tmp/rule.pcapng\"",
        ));
    }
    if !path.is_absolute() {
        return Err(bad("is not an absolute path (the daemon's working directory is not yours): write it from /, e.g. \"/var/tmp/rule.pcapng\""));
    }
    if file.ends_with('/')
        || path.file_name().is_none()
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(bad("does not name a file (it ends in a directory, `/` or `..`): give the file's name, e.g. \"/var/tmp/rule.pcapng\""));
    }
    let snaplen = match &cc.snaplen {
        None => chunk_size.min(MAX_CAPTURE_SNAPLEN),
        Some(s) => {
            let n = *s.get_ref();
            if n == 0 || n > MAX_CAPTURE_SNAPLEN {
                return Err((".snaplen", s.span(), format!("{n} is not valid: use 1..{MAX_CAPTURE_SNAPLEN} bytes (a frame is at most one chunk)")));
            }
            n
        }
    };
    let count = match &cc.count {
        None => 0,
        Some(n) if *n.get_ref() == 0 => return Err((".count", n.span(), "0 is not valid: give the number of frames to write (at least 1), or leave count out to write until xdpool stops".into())),
        Some(n) => *n.get_ref(),
    };
    Ok(CaptureSpec {
        file: path.to_path_buf(),
        snaplen,
        count,
    })
}

/// `"swap"`, `"neigh"` or `"aa:bb:cc:dd:ee:ff"`.
pub fn parse_mac_rewrite(s: &str) -> Option<MacRewrite> {
    match s {
        "swap" => Some(MacRewrite::Swap),
        "neigh" => Some(MacRewrite::Neigh),
        _ => {
            let parts: Vec<&str> = s.split(':').collect();
            if parts.len() != 6 {
                return None;
            }
            let mut mac = [0u8; 6];
            for (m, p) in mac.iter_mut().zip(parts) {
                if p.len() != 2 {
                    return None;
                }
                *m = u8::from_str_radix(p, 16).ok()?;
            }
            Some(MacRewrite::Fixed(mac))
        }
    }
}

/// Online CPUs, from /sys/devices/system/cpu/online (falls back to 0..nproc).
pub fn online_cpus() -> Vec<usize> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let mut v = Vec::new();
        for part in s.trim().split(',') {
            match part.split_once('-') {
                Some((a, b)) => {
                    if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                        v.extend(a..=b);
                    }
                }
                None => {
                    if let Ok(a) = part.parse() {
                        v.push(a)
                    }
                }
            }
        }
        if !v.is_empty() {
            return v;
        }
    }
    (0..std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1))
        .collect()
}

fn fmt_list(v: &[usize]) -> String {
    v.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[interface]
name = "xdpb0"
netns = "xdpool-b"
queues = [0]

[umem]
frames = 8192
chunk_size = 2048

[[rule]]
proto = "udp"
dst_port = "9-10"
action = "drop"
"#;

    #[test]
    fn a_remote_endpoint_needs_a_web_config_or_insecure_remote() {
        let with = |stats: &str| format!("{GOOD}\n[stats]\n{stats}\n");
        let e = Config::parse(&with("prometheus = \"0.0.0.0:9717\"")).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line.is_some()),
            ("stats.prometheus", true),
            "{e}"
        );
        assert!(e.message.contains("stats.insecure_remote = true"), "{e}");
        Config::parse(&with(
            "prometheus = \"0.0.0.0:9717\"\ninsecure_remote = true",
        ))
        .unwrap();
        Config::parse(&with(
            "prometheus = \"[::]:9717\"\nweb_config = \"/etc/xdpool/web.yml\"",
        ))
        .unwrap();
        Config::parse(&with("prometheus = \"127.0.0.1:9717\"")).unwrap();
        Config::parse(&with("prometheus = \"[::1]:9717\"")).unwrap();
    }

    #[test]
    fn tx_budget_is_the_tx_ring_unless_set_and_reaches_the_plan() {
        let with = |rings: &str| Config::parse(&format!("{GOOD}\n[rings]\n{rings}\n")).unwrap();
        let budget = |c: &Config| crate::plan::plan(c, &[]).umem.tx_budget;
        assert_eq!(budget(&with("tx = 512")), 512);
        assert_eq!(budget(&with("tx = 512\ntx_budget = 64")), 64);
        assert_eq!(budget(&with("tx_budget = 0")), 0, "0: the kernel's default");
        assert_eq!(budget(&with("tx_budget = 2048")), 2048);
    }

    #[test]
    fn copy_fill_defaults_to_full_takes_rx_and_reaches_the_plan() {
        let with = |rings: &str| Config::parse(&format!("{GOOD}\n[rings]\n{rings}\n"));
        let planned = |c: &Config| crate::plan::plan(c, &[]).umem.copy_fill;
        assert_eq!(planned(&with("fill = 4096").unwrap()), CopyFill::Full);
        assert_eq!(planned(&with("copy_fill = \"rx\"").unwrap()), CopyFill::Rx);
        assert_eq!(
            planned(&with("copy_fill = \"full\"").unwrap()),
            CopyFill::Full
        );
        let e = with("copy_fill = \"half\"").unwrap_err();
        assert_eq!(e.key, "rings.copy_fill", "{e}");
        assert!(
            e.to_string().contains("full") && e.to_string().contains("rx"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_value_names_its_key_and_line() {
        let e = Config::parse(&format!("{GOOD}\n[workers]\nmode = \"nap\"\n")).unwrap_err();
        assert_eq!(e.key, "workers.mode", "{e}");
        assert!(e.line.is_some(), "{e}");
        // GOOD has one rule: this is the second, with spaces in its header.
        let rules = format!("{GOOD}\n[[ rule ]]\nproto = \"udp\"\naction = \"teleport\"\n");
        let e = Config::parse(&rules).unwrap_err();
        assert_eq!(e.key, "rule[1].action", "{e}");
    }

    #[test]
    fn a_header_is_a_table_name_in_brackets_alone_on_its_line() {
        assert_eq!(header("[rings]"), Some(("rings", false)));
        assert_eq!(header("  [[ rule ]]  # the second"), Some(("rule", true)));
        assert_eq!(header("[stats.web]"), Some(("stats.web", false)));
        // A row of a multi-line array, a key, a comment: no header.
        assert_eq!(header("  [1],"), None);
        assert_eq!(header("[\"198.18.0.1\"]"), None);
        assert_eq!(header("mode = \"spin\""), None);
        assert_eq!(header("# [rings]"), None);
    }

    #[test]
    fn good_config_loads() {
        let c = Config::parse(GOOD).unwrap();
        assert_eq!(
            c.valid_rules()[0],
            ValidRule {
                proto: Some(17),
                dst_port: Some((9, 10)),
                dst: None,
                src_port: None,
                src: None,
                vlan: None,
                action: Action::Drop,
                port: 0,
                to: None,
                mac: MacRewrite::Swap,
                mirror_to: None,
                call: None
            }
        );
        let ports = c.ports();
        assert_eq!(
            (
                ports[0].name.as_str(),
                ports[0].interface.as_str(),
                ports[0].netns.as_deref()
            ),
            ("main", "xdpb0", Some("xdpool-b"))
        );
    }

    #[test]
    fn shipped_configs_load() {
        for f in ["lab.toml", "nic-example.toml"] {
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../configs")
                .join(f);
            let text = std::fs::read_to_string(&p).unwrap();
            // nic-example names cores that may not exist here; structure must still parse.
            let parsed: Result<Config, _> = toml::from_str(&text);
            assert!(parsed.is_ok(), "{f}: {:?}", parsed.err());
        }
        Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/lab.toml"))
            .unwrap();
    }

    /// Table of bad configs: (edit applied to GOOD, key named, line named, text in message).
    #[test]
    fn bad_configs_name_key_line_and_fix() {
        let cases: &[(&str, &str, &str, Option<usize>, &str)] = &[
            (
                "chunk_size = 2048",
                "chunk_size = 3000",
                "umem.chunk_size",
                Some(9),
                "2048 or 4096",
            ),
            (
                "chunk_size = 2048",
                "chunk_size = \"big\"",
                "umem.chunk_size",
                Some(9),
                "expected",
            ),
            (
                "queues = [0]",
                "queues = [0, 0]",
                "interface.queues",
                Some(5),
                "listed twice",
            ),
            (
                "queues = [0]",
                "queues = [99]",
                "interface.queues",
                Some(5),
                "0..63",
            ),
            (
                "queues = [0]",
                "queues = [0]\ncolour = \"red\"",
                "colour",
                Some(6),
                "unknown field",
            ),
            (
                "dst_port = \"9-10\"",
                "dst_port = \"10-9\"",
                "rule[0].dst_port",
                Some(13),
                "empty",
            ),
            (
                "dst_port = \"9-10\"",
                "dst_port = 70000",
                "rule[0].dst_port",
                Some(13),
                "out of range",
            ),
            (
                "proto = \"udp\"",
                "proto = \"sctpish\"",
                "rule[0].proto",
                Some(12),
                "not a protocol",
            ),
            (
                "action = \"drop\"",
                "action = \"explode\"",
                "rule[0].action",
                Some(14),
                "unknown variant",
            ),
            (
                "frames = 8192",
                "frames = 100",
                "umem.frames",
                Some(8),
                "at least",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\ncores = [4096]",
                "workers.cores",
                Some(7),
                "not online",
            ),
            (
                "[umem]",
                "[rings]\nfill = 1000\n[umem]",
                "rings.fill",
                Some(8),
                "power of two",
            ),
            (
                "[umem]",
                "[rings]\nfill = 1024\nrx = 2048\n[umem]",
                "rings.fill",
                Some(8),
                "smaller than rings.rx",
            ),
            (
                "[umem]",
                "[rings]\ntx_budget = 16\n[umem]",
                "rings.tx_budget",
                Some(8),
                "use 32 to rings.tx = 2048",
            ),
            (
                "[umem]",
                "[rings]\ntx = 1024\ntx_budget = 2048\n[umem]",
                "rings.tx_budget",
                Some(9),
                "use 32 to rings.tx = 1024",
            ),
            (
                "name = \"xdpb0\"",
                "name = \"a/b\"",
                "interface.name",
                Some(3),
                "not a valid interface name",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\ncopybreak_bytes = 0",
                "workers.copybreak_bytes",
                Some(7),
                "use 1..1024",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\ncopybreak_bytes = 1025",
                "workers.copybreak_bytes",
                Some(7),
                "half of umem.chunk_size",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\nbusy_poll_budget = 0",
                "workers.busy_poll_budget",
                Some(7),
                "use 1..1024",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\nbusy_poll_budget = 5000",
                "workers.busy_poll_budget",
                Some(7),
                "CAP_NET_ADMIN",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\nmode = \"busy\"",
                "workers.mode",
                Some(7),
                "unknown variant",
            ),
            (
                "queues = [0]",
                "queues = [0]\n[workers]\npoll_coalesce_us = 5000",
                "workers.poll_coalesce_us",
                Some(7),
                "use 0..1000",
            ),
            (
                "queues = [0]",
                "queues = [0]\nmulti_buffer = 1",
                "interface.multi_buffer",
                Some(6),
                "expected a boolean",
            ),
            // The source and VLAN keys (line 13 is the rule's dst_port line, replaced).
            (
                "dst_port = \"9-10\"",
                "src_port = \"10-9\"",
                "rule[0].src_port",
                Some(13),
                "range 10-9 is empty",
            ),
            (
                "dst_port = \"9-10\"",
                "src_port = -1",
                "rule[0].src_port",
                Some(13),
                "-1 is out of range",
            ),
            (
                "dst_port = \"9-10\"",
                "src_port = \"x-9\"",
                "rule[0].src_port",
                Some(13),
                "`x` is not a port",
            ),
            (
                "dst_port = \"9-10\"",
                "dst_port = [53, 123]",
                "rule[0].dst_port",
                Some(13),
                "write one rule per port or range",
            ),
            (
                "dst_port = \"9-10\"",
                "dst_port = true",
                "rule[0].dst_port",
                Some(13),
                "a boolean is not a port: use a port 0..65535",
            ),
            (
                "proto = \"udp\"\ndst_port = \"9-10\"",
                "src_port = 53",
                "rule[0].src_port",
                Some(12),
                "needs proto = \"udp\" or \"tcp\"",
            ),
            (
                "proto = \"udp\"\ndst_port = \"9-10\"",
                "proto = \"icmp\"\nsrc_port = 53",
                "rule[0].src_port",
                Some(13),
                "needs proto",
            ),
            (
                "dst_port = \"9-10\"",
                "src = \"198.18.0.0/33\"",
                "rule[0].src",
                Some(13),
                "at most 32",
            ),
            (
                "dst_port = \"9-10\"",
                "src = \"2001:2::/129\"",
                "rule[0].src",
                Some(13),
                "at most 128",
            ),
            (
                "dst_port = \"9-10\"",
                "src = \"198.18.0\"",
                "rule[0].src",
                Some(13),
                "not an address or prefix",
            ),
            (
                "dst_port = \"9-10\"",
                "dst = \"2001:2::/48\"\nsrc = \"198.18.0.0/15\"",
                "rule[0].src",
                Some(14),
                "different IP families",
            ),
            (
                "dst_port = \"9-10\"",
                "dst = \"198.18.0.1\"\nsrc = \"2001:2::1\"",
                "rule[0].src",
                Some(14),
                "both as IPv4 or both as IPv6",
            ),
            (
                "proto = \"udp\"\ndst_port = \"9-10\"",
                "proto = \"icmp\"\nsrc = \"2001:2::/48\"",
                "rule[0].proto",
                Some(12),
                "proto = \"icmpv6\"",
            ),
            (
                "proto = \"udp\"\ndst_port = \"9-10\"",
                "proto = \"icmpv6\"\ndst = \"198.18.0.0/15\"",
                "rule[0].proto",
                Some(12),
                "proto = \"icmp\"",
            ),
            (
                "dst_port = \"9-10\"",
                "vlan = 4095",
                "rule[0].vlan",
                Some(13),
                "4095 is reserved",
            ),
            (
                "dst_port = \"9-10\"",
                "vlan = 5000",
                "rule[0].vlan",
                Some(13),
                "5000 is not a VLAN id: use 0..4094",
            ),
            (
                "dst_port = \"9-10\"",
                "vlan = -1",
                "rule[0].vlan",
                Some(13),
                "not a VLAN id",
            ),
            (
                "dst_port = \"9-10\"",
                "vlan = \"5\"",
                "rule[0].vlan",
                Some(13),
                "expected i64",
            ),
            (
                "dst_port = \"9-10\"",
                "sport = 9",
                "sport",
                Some(13),
                "unknown field",
            ),
        ];
        for (from, to, key, line, msg) in cases {
            let text = GOOD.replacen(from, to, 1);
            assert_ne!(text, GOOD, "edit {from} -> {to} did not apply");
            let e = Config::parse(&text).expect_err(to);
            assert_eq!(&e.key, key, "{to}: {e}");
            assert_eq!(e.line, *line, "{to}: {e}");
            assert!(e.to_string().contains(msg), "{to}: `{e}` lacks `{msg}`");
        }
    }

    #[test]
    fn rule_capture_parses_with_defaults_and_bad_ones_name_key_and_line() {
        let with = |cap: &str| {
            GOOD.replacen(
                "action = \"drop\"",
                &format!("action = \"drop\"\ncapture = {cap}"),
                1,
            )
        };
        let c = Config::parse(&with(
            r#"{ file = "/var/tmp/r.pcapng", snaplen = 128, count = 10 }"#,
        ))
        .unwrap();
        assert_eq!(
            c.rule_captures(),
            vec![Some(CaptureSpec {
                file: "/var/tmp/r.pcapng".into(),
                snaplen: 128,
                count: 10
            })]
        );
        let c = Config::parse(&with(r#"{ file = "/var/tmp/r.pcapng" }"#)).unwrap();
        assert_eq!(
            c.rule_captures()[0],
            Some(CaptureSpec {
                file: "/var/tmp/r.pcapng".into(),
                snaplen: 2048,
                count: 0
            }),
            "defaults: a whole chunk, no limit"
        );
        assert_eq!(Config::parse(GOOD).unwrap().rule_captures(), vec![None]);
        // (capture value, key, line, text in message); the capture is on line 15.
        let cases: &[(&str, &str, Option<usize>, &str)] = &[
            (
                r#"{ file = "r.pcapng" }"#,
                "rule[0].capture.file",
                Some(15),
                "not an absolute path",
            ),
            (
                r#"{ file = "" }"#,
                "rule[0].capture.file",
                Some(15),
                "is empty",
            ),
            (
                r#"{ file = "/var/tmp/" }"#,
                "rule[0].capture.file",
                Some(15),
                "does not name a file",
            ),
            (
                r#"{ file = "/var/tmp/.." }"#,
                "rule[0].capture.file",
                Some(15),
                "does not name a file",
            ),
            (
                r#"{ file = "/var/tmp/r.pcapng", snaplen = 0 }"#,
                "rule[0].capture.snaplen",
                Some(15),
                "1..4096",
            ),
            (
                r#"{ file = "/var/tmp/r.pcapng", snaplen = 9000 }"#,
                "rule[0].capture.snaplen",
                Some(15),
                "1..4096",
            ),
            (
                r#"{ file = "/var/tmp/r.pcapng", count = 0 }"#,
                "rule[0].capture.count",
                Some(15),
                "at least 1",
            ),
            (
                r#"{ file = "/var/tmp/r.pcapng", colour = 1 }"#,
                "colour",
                Some(15),
                "unknown field `colour`",
            ),
            (
                r#"{ snaplen = 64 }"#,
                "file",
                Some(15),
                "missing field `file`",
            ),
            (
                r#""/var/tmp/r.pcapng""#,
                "rule[0].capture",
                Some(15),
                "expected",
            ),
        ];
        for (cap, key, line, msg) in cases {
            let e = Config::parse(&with(cap)).expect_err(cap);
            assert_eq!((e.key.as_str(), e.line), (*key, *line), "{cap}: {e}");
            assert!(e.to_string().contains(msg), "{cap}: `{e}` lacks `{msg}`");
        }
        let pass = with(r#"{ file = "/var/tmp/r.pcapng" }"#).replacen(
            "action = \"drop\"",
            "action = \"pass\"",
            1,
        );
        let e = Config::parse(&pass).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line),
            ("rule[0].capture", Some(15)),
            "{e}"
        );
        assert!(e.to_string().contains("no worker sees"), "{e}");
        let twice = format!(
            "{}[[rule]]\nproto = \"tcp\"\ncapture = {{ file = \"/var/tmp/r.pcapng\" }}\n",
            with(r#"{ file = "/var/tmp/r.pcapng" }"#)
        );
        let e = Config::parse(&twice).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line),
            ("rule[1].capture.file", Some(18)),
            "{e}"
        );
        assert!(e.to_string().contains("rule[0]'s capture already"), "{e}");
    }

    #[test]
    fn source_and_vlan_keys_parse() {
        let text = GOOD.replacen("dst_port = \"9-10\"", "dst_port = 9\nsrc_port = \"1024-2047\"\nsrc = \"198.18.0.0/15\"\ndst = \"198.19.0.1\"\nvlan = 100", 1);
        let r = &Config::parse(&text).unwrap().valid_rules()[0];
        assert_eq!(
            (r.src_port, r.dst_port, r.vlan),
            (Some((1024, 2047)), Some((9, 9)), Some(100))
        );
        assert_eq!(r.src, Some(("198.18.0.0".parse().unwrap(), 15)));
        assert_eq!(r.dst, Some(("198.19.0.1".parse().unwrap(), 32)));
        // One port, IPv6 source host, VLAN 0 (priority-tagged frames) and 4094.
        let text = GOOD.replacen(
            "dst_port = \"9-10\"",
            "src_port = 53\nsrc = \"2001:2::7\"\nvlan = 0",
            1,
        );
        let r = &Config::parse(&text).unwrap().valid_rules()[0];
        assert_eq!(
            (r.src_port, r.src, r.vlan, r.dst_port),
            (
                Some((53, 53)),
                Some(("2001:2::7".parse().unwrap(), 128)),
                Some(0),
                None
            )
        );
        let text = GOOD.replacen("proto = \"udp\"\ndst_port = \"9-10\"", "vlan = 4094", 1);
        let r = &Config::parse(&text).unwrap().valid_rules()[0];
        assert_eq!(
            (r.vlan, r.proto),
            (Some(4094), None),
            "a VLAN id alone is a rule"
        );
        // icmp by number is not checked against the family; both IPv6 prefixes are fine.
        let text = GOOD.replacen(
            "proto = \"udp\"\ndst_port = \"9-10\"",
            "proto = \"1\"\nsrc = \"2001:2::/48\"\ndst = \"2001:2:0:1::/64\"",
            1,
        );
        assert_eq!(
            Config::parse(&text).unwrap().valid_rules()[0].proto,
            Some(1)
        );
        // A reload file goes through the same checks.
        let c = Config::parse(GOOD).unwrap();
        let e = c
            .parse_rules("[[rule]]\nproto = \"tcp\"\nsrc_port = \"9-1\"\naction = \"drop\"\n")
            .unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line),
            ("rule[0].src_port", Some(3)),
            "{e}"
        );
    }

    #[test]
    fn tx_bottleneck_defaults_to_hold_and_takes_shed() {
        let c = Config::parse(GOOD).unwrap();
        assert_eq!(c.workers.tx_bottleneck, TxBottleneck::Hold);
        let shed = GOOD.replacen(
            "queues = [0]",
            "queues = [0]\n[workers]\ntx_bottleneck = \"shed\"",
            1,
        );
        assert_eq!(
            Config::parse(&shed).unwrap().workers.tx_bottleneck,
            TxBottleneck::Shed
        );
        let bad = GOOD.replacen(
            "queues = [0]",
            "queues = [0]\n[workers]\ntx_bottleneck = \"drop\"",
            1,
        );
        let e = Config::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("hold") && e.contains("shed"), "{e}");
    }

    #[test]
    fn reflect_twice_and_copybreak_parse_with_defaults() {
        let text = GOOD.replacen(
            "action = \"drop\"",
            "action = \"reflect-twice\"\n[[rule]]\nproto = \"tcp\"\naction = \"copybreak\"",
            1,
        );
        let c = Config::parse(&text).unwrap();
        let actions: Vec<Action> = c.valid_rules().iter().map(|r| r.action).collect();
        assert_eq!(actions, vec![Action::ReflectTwice, Action::Copybreak]);
        assert_eq!(
            *c.workers.copybreak_bytes.get_ref(),
            DEFAULT_COPYBREAK_BYTES
        );
        assert_eq!(
            *c.workers.busy_poll_budget.get_ref(),
            DEFAULT_BUSY_POLL_BUDGET
        );
        assert_eq!(
            *c.workers.poll_coalesce_us.get_ref(),
            DEFAULT_POLL_COALESCE_US
        );
        // With 4096-byte chunks the copybreak ceiling doubles.
        let big = GOOD
            .replacen("chunk_size = 2048", "chunk_size = 4096", 1)
            .replacen(
                "queues = [0]",
                "queues = [0]\n[workers]\ncopybreak_bytes = 2048\nmode = \"busy-poll\"",
                1,
            );
        let c = Config::parse(&big).unwrap();
        assert_eq!(*c.workers.copybreak_bytes.get_ref(), 2048);
        assert_eq!(c.workers.mode, WaitMode::BusyPoll);
    }

    #[test]
    fn multi_buffer_refuses_single_buffer_actions() {
        let mb = GOOD.replacen("queues = [0]", "queues = [0]\nmulti_buffer = true", 1);
        let c = Config::parse(&mb).unwrap();
        assert!(c.ports()[0].multi_buffer);
        for action in ["reflect-twice", "copybreak"] {
            let text = mb.replacen("action = \"drop\"", &format!("action = \"{action}\""), 1);
            let e = Config::parse(&text).expect_err(action);
            assert_eq!(
                (e.key.as_str(), e.line),
                ("interface.multi_buffer", Some(6)),
                "{e}"
            );
            assert!(
                e.to_string().contains(&format!("rule[0] uses `{action}`")),
                "{e}"
            );
        }
        let l2fwd = mb.replacen("action = \"drop\"", "action = \"l2fwd\"", 1);
        Config::parse(&l2fwd).unwrap();
    }

    #[test]
    fn old_mirror_name_is_refused_naming_the_new_one() {
        let text = GOOD.replacen("action = \"drop\"", "action = \"mirror\"", 1);
        let e = Config::parse(&text).unwrap_err();
        assert_eq!(e.line, Some(14), "{e}");
        assert!(
            e.to_string().contains("renamed `reflect-twice`")
                && e.to_string().contains("mirror_to"),
            "{e}"
        );
    }

    const PORTS: &str = r#"
[[port]]
name = "in"
interface = "xdpf0"
netns = "fwd"

[[port]]
name = "out"
interface = "xdpf1"
netns = "fwd"
zero_copy = "auto"

[[port]]
name = "mon"
interface = "xdpf2"
netns = "fwd"
zero_copy = false

[umem]
frames = 32768

[[rule]]
port = "in"
proto = "udp"
dst_port = "9"
action = "forward"
to = "out"
mac = "neigh"
mirror_to = "mon"
"#;

    /// A key a rule lacks is named with the line of the rule's `[[rule]]`.
    #[test]
    fn a_missing_rule_key_names_the_rules_line() {
        let line = PORTS.lines().position(|l| l == "[[rule]]").unwrap() + 1;
        let e = Config::parse(&PORTS.replacen("port = \"in\"\n", "", 1)).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line),
            ("rule[0].port", Some(line)),
            "{e}"
        );
        let two = format!("{PORTS}\n[[rule]]\nport = \"in\"\naction = \"call\"\n");
        let e = Config::parse(&two).unwrap_err();
        let lines: Vec<&str> = two.lines().collect();
        let second = lines.iter().rposition(|l| *l == "[[rule]]").unwrap() + 1;
        assert_eq!(
            (e.key.as_str(), e.line),
            ("rule[1].handler", Some(second)),
            "{e}"
        );
        assert_eq!(rule_header("rule = [{ action = \"drop\" }]", 0), None);
        // Spaces in the brackets and a comment after them are still the header.
        let spaced = two.replace("[[rule]]", "[[ rule ]] # a rule");
        let e = Config::parse(&spaced).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line),
            ("rule[1].handler", Some(second)),
            "{e}"
        );
    }

    /// An unreadable file is named with the reason and what to give instead, not as a
    /// key of it.
    #[test]
    fn an_unreadable_file_is_named_not_a_key() {
        let e = Config::load_with(Path::new("/nonexistent/x.toml"), Arc::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/nonexistent/x.toml: cannot read the config file:")
                && e.contains("check the path")
                && !e.contains("invalid config key"),
            "{e}"
        );
    }

    /// Left out, `umem.frames` is 8192 or what the queues need, whichever is more;
    /// given, it is kept and checked.
    #[test]
    fn unnamed_frames_are_sized_for_the_queues() {
        let three = PORTS.replacen("[umem]\nframes = 32768\n", "", 1);
        // Three ports of one queue: (4096 + 2048 + 256) x 3.
        let c = Config::parse(&three).unwrap();
        assert_eq!(*c.umem.frames.get_ref(), 19200);
        // One queue needs less than 8192: the default stays.
        let one = GOOD.replacen("frames = 8192\n", "", 1);
        assert_eq!(*Config::parse(&one).unwrap().umem.frames.get_ref(), 8192);
        // queues = "all" is sized again once resolved (4 queues: 25600).
        let mut all = Config::parse(&one.replacen("queues = [0]", "queues = \"all\"", 1)).unwrap();
        all.resolve_all_queues(|_, _| 4).unwrap();
        assert_eq!(*all.umem.frames.get_ref(), 25600);
        // Rings too large to sum in 32 bits: refused by their own check, no panic.
        let huge = one.replacen("[[rule]]", "[rings]\nfill = 4294967295\n\n[[rule]]", 1);
        assert!(Config::parse(&huge).is_err());
        // Sized past the limit once resolved: refused, saying why.
        let mut big = Config::parse(
            &one.replacen("queues = [0]", "queues = \"all\"", 1)
                .replacen(
                    "[[rule]]",
                    "[rings]\nfill = 32768\ntx = 32768\n\n[[rule]]",
                    1,
                ),
        )
        .unwrap();
        let e = big.resolve_all_queues(|_, _| 64).unwrap_err();
        assert!(e.contains("over the limit of 4194304"), "{e}");
        // Named, too many is refused for itself (not as a sized default).
        let e = Config::parse(&GOOD.replacen("frames = 8192", "frames = 4194305", 1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("4194305 frames are over the limit of 4194304") && !e.contains("left out"),
            "{e}"
        );
        // Named, too few is still refused, with the number to use.
        let e = Config::parse(&three.replacen("[[rule]]", "[umem]\nframes = 8192\n\n[[rule]]", 1))
            .unwrap_err();
        assert!(e.to_string().contains("use at least 19200"), "{e}");
    }

    #[test]
    fn queues_all_parses_resolves_and_is_checked() {
        let all = GOOD
            .replacen("queues = [0]", "queues = \"all\"", 1)
            .replacen("frames = 8192", "frames = 16384", 1);
        let mut c = Config::parse(&all).unwrap();
        assert_eq!(c.ports()[0].queues, vec![0]);
        assert!(c.ports()[0].follow_queues);
        c.resolve_all_queues(|_, _| 2).unwrap();
        assert_eq!(c.ports()[0].queues, vec![0, 1]);
        // A whole-file reload of the same text is the same ports ("all" as written),
        // and a list in its place is not.
        c.parse_rules(&all).unwrap();
        let e = c
            .parse_rules(&all.replacen("queues = \"all\"", "queues = [0, 1]", 1))
            .unwrap_err();
        assert!(e.to_string().contains("queues \"all\""), "{e}");
        assert!(!Config::parse(GOOD).unwrap().ports()[0].follow_queues);
        let bad =
            Config::parse(&GOOD.replacen("queues = [0]", "queues = \"some\"", 1)).unwrap_err();
        assert!(bad.to_string().contains("\"all\""), "{bad}");
        let cores = Config::parse(&GOOD.replacen(
            "queues = [0]",
            "queues = \"all\"\n[workers]\ncores = [0]",
            1,
        ))
        .unwrap_err();
        assert!(cores.to_string().contains("workers.cores"), "{cores}");
        // 64 queues need more frames than the config has.
        let mut many = Config::parse(&all).unwrap();
        assert!(many
            .resolve_all_queues(|_, _| 64)
            .unwrap_err()
            .contains("umem.frames"));
    }

    #[test]
    fn ports_and_forward_rules_parse() {
        let c = Config::parse(PORTS).unwrap();
        let ports = c.ports();
        assert_eq!(
            ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["in", "out", "mon"]
        );
        assert_eq!(
            ports.iter().map(|p| p.zero_copy).collect::<Vec<_>>(),
            [ZeroCopy::Auto, ZeroCopy::Auto, ZeroCopy::Off]
        );
        assert_eq!(c.netns().as_deref(), Some("fwd"));
        let r = &c.valid_rules()[0];
        assert_eq!(
            (r.port, r.action, r.to, r.mac, r.mirror_to),
            (0, Action::Forward, Some(1), MacRewrite::Neigh, Some(2))
        );
        let fixed = PORTS.replace("mac = \"neigh\"", "mac = \"02:00:00:00:00:aB\"");
        assert_eq!(
            Config::parse(&fixed).unwrap().valid_rules()[0].mac,
            MacRewrite::Fixed([2, 0, 0, 0, 0, 0xab])
        );
    }

    /// Ports in different namespaces share one UMEM: accepted, each port keeps its
    /// own; the same interface name is two devices in two namespaces, one in one.
    #[test]
    fn ports_in_different_namespaces_are_accepted() {
        let split = PORTS.replacen(
            "netns = \"fwd\"\nzero_copy = \"auto\"",
            "netns = \"fwd2\"\nzero_copy = \"auto\"",
            1,
        );
        let c = Config::parse(&split).unwrap();
        let ns: Vec<Option<String>> = c.ports().into_iter().map(|p| p.netns).collect();
        assert_eq!(
            ns,
            [
                Some("fwd".to_string()),
                Some("fwd2".to_string()),
                Some("fwd".to_string())
            ]
        );
        assert_eq!(
            c.netns().as_deref(),
            Some("fwd"),
            "the process enters the first port's namespace"
        );
        // No netns: the namespace xdpool starts in, next to a named one.
        assert!(Config::parse(&PORTS.replacen(
            "netns = \"fwd\"\nzero_copy = false\n",
            "zero_copy = false\n",
            1
        ))
        .is_ok());
        // The same device name in two namespaces: two devices.
        let same_name = split.replacen("interface = \"xdpf1\"", "interface = \"xdpf0\"", 1);
        assert_eq!(
            Config::parse(&same_name).unwrap().ports()[1].interface,
            "xdpf0"
        );
        // ... and in one namespace: one device for two ports, refused.
        let e = Config::parse(&PORTS.replacen("interface = \"xdpf1\"", "interface = \"xdpf0\"", 1))
            .unwrap_err();
        assert_eq!(e.key, "port.interface");
        assert!(
            e.to_string()
                .contains("in namespace `fwd` belongs to two ports"),
            "{e}"
        );
        // queues = "all" is resolved in each port's namespace.
        let mut all = Config::parse(&split.replace("[umem]", "queues = \"all\"\n[umem]")).unwrap();
        let mut asked = Vec::new();
        all.resolve_all_queues(|dev, ns| {
            asked.push((dev.to_string(), ns.map(str::to_string)));
            1
        })
        .unwrap();
        assert_eq!(asked, [("xdpf2".to_string(), Some("fwd".to_string()))]);
    }

    /// Bad port configs: (edit applied to PORTS, key named, text in message).
    #[test]
    fn bad_port_configs_name_key_and_fix() {
        let cases: &[(&str, &str, &str, &str)] = &[
            (
                "to = \"out\"",
                "to = \"nowhere\"",
                "rule[0].to",
                "no port named `nowhere`",
            ),
            ("to = \"out\"\n", "", "rule[0].to", "needs to ="),
            (
                "to = \"out\"",
                "to = \"in\"",
                "rule[0].to",
                "use action = \"l2fwd\"",
            ),
            (
                "mirror_to = \"mon\"",
                "mirror_to = \"out\"",
                "rule[0].mirror_to",
                "twice",
            ),
            (
                "mirror_to = \"mon\"",
                "mirror_to = \"in\"",
                "rule[0].mirror_to",
                "reflect-twice",
            ),
            (
                "mac = \"neigh\"",
                "mac = \"02:00\"",
                "rule[0].mac",
                "\"swap\", \"neigh\"",
            ),
            ("port = \"in\"\n", "", "rule[0].port", "which port"),
            (
                "name = \"mon\"",
                "name = \"in\"",
                "port.name",
                "defined twice",
            ),
            ("name = \"mon\"", "name = \"Mon!\"", "port.name", "a-z, 0-9"),
            (
                "interface = \"xdpf2\"",
                "interface = \"xdpf1\"",
                "port.interface",
                "two ports",
            ),
            (
                "netns = \"fwd\"\nzero_copy = false",
                "netns = \"../fwd\"\nzero_copy = false",
                "port.netns",
                "not a namespace name",
            ),
            (
                "netns = \"fwd\"\nzero_copy = false",
                "netns = \"\"\nzero_copy = false",
                "port.netns",
                "not a namespace name",
            ),
            (
                "zero_copy = \"auto\"",
                "zero_copy = true",
                "port.zero_copy",
                "same mode",
            ),
            (
                "zero_copy = \"auto\"",
                "zero_copy = \"maybe\"",
                "port[1].zero_copy",
                "true, false or \"auto\"",
            ),
            (
                "action = \"forward\"",
                "action = \"reflect-twice\"",
                "rule[0].to",
                "belongs to action = \"forward\"",
            ),
            (
                "frames = 32768",
                "frames = 10000",
                "umem.frames",
                "3 queue(s)",
            ),
            (
                "[umem]",
                "[interface]\nname = \"x\"\n[umem]",
                "port",
                "both [interface] and [[port]]",
            ),
        ];
        for (from, to, key, msg) in cases {
            let text = PORTS.replacen(from, to, 1);
            assert_ne!(text, PORTS, "edit {from} -> {to} did not apply");
            let e = Config::parse(&text).expect_err(to);
            assert_eq!(&e.key, key, "{to}: {e}");
            assert!(e.to_string().contains(msg), "{to}: `{e}` lacks `{msg}`");
        }
    }

    /// A verdict names its port in two bytes: more ports than `MAX_PORTS` are
    /// refused by name, before anything else is built for them.
    #[test]
    fn more_ports_than_a_verdict_can_name_are_refused() {
        let ports = |n: usize| {
            let extra: String = (3..n)
                .map(|k| {
                    format!(
                        "[[port]]\nname = \"p{k}\"\ninterface = \"xdpx{k}\"\nnetns = \"fwd\"\n\n"
                    )
                })
                .collect();
            PORTS.replacen("[umem]", &format!("{extra}[umem]"), 1)
        };
        let e = Config::parse(&ports(MAX_PORTS + 1)).unwrap_err();
        assert_eq!(e.key, "port.name", "{e}");
        assert!(e.to_string().contains("at most 4096"), "{e}");
        let at_most = Config::parse(&ports(MAX_PORTS));
        assert!(
            at_most
                .as_ref()
                .map_or_else(|e| !e.message.contains("at most 4096"), |_| true),
            "{MAX_PORTS} ports are allowed: {:?}",
            at_most.err()
        );
    }

    #[test]
    fn missing_rules_rejected() {
        let text = GOOD.split("[[rule]]").next().unwrap();
        let e = Config::parse(text).unwrap_err();
        assert_eq!(e.key, "rule");
        assert!(e.message.contains("[[rule]]"));
    }

    #[test]
    fn port_without_proto_rejected() {
        let text = GOOD.replacen("proto = \"udp\"\n", "", 1);
        let e = Config::parse(&text).unwrap_err();
        assert_eq!(e.key, "rule[0].dst_port");
    }

    #[test]
    fn prefixes_parse() {
        let text = GOOD.replacen("dst_port = \"9-10\"", "dst = \"2001:2::/48\"", 1);
        let c = Config::parse(&text).unwrap();
        assert_eq!(
            c.valid_rules()[0].dst,
            Some(("2001:2::".parse().unwrap(), 48))
        );
        let bad = GOOD.replacen("dst_port = \"9-10\"", "dst = \"198.18.0.0/40\"", 1);
        assert_eq!(Config::parse(&bad).unwrap_err().key, "rule[0].dst");
    }
}
