//! Loading the XDP programs of `xdp-prog/xdpool.bpf.c`, filling their rule map,
//! attaching them through a bpf_link and reading their counters.
//!
//! `xdpool_steer` sends frames that match a [`Rule`] to the AF_XDP socket of their
//! receive queue; `xdpool_ceiling` counts and drops everything (the in-kernel
//! ceiling for throughput runs). `xdpool_steer` is loaded for the [`Shape`] of its
//! rule list, so it runs only the parsing and checks that list needs; a list of
//! another shape loads another program and swaps it in with a bpf_link update. Both attach with `BPF_LINK_CREATE` only, never
//! a netlink attachment, so a process that dies leaves no program behind.

#[allow(unsafe_code)] // aya::Pod for the structs shared with the XDP program
pub mod abi;
mod error;
#[allow(unsafe_code)] // BPF_LINK_CREATE through the bpf syscall
mod link;
pub mod netlink;
mod rule;
mod shape;

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::time::Duration;

use aya::maps::{Array, Map, MapData, PerCpuArray, PerCpuValues, XskMap};
use aya::programs::{TestRun, TestRunOptions, Xdp};
use aya::{Ebpf, EbpfLoader};
use serde::{Deserialize, Serialize};

pub use error::SteerError;
pub use netlink::xdp_program_on;
pub use rule::{Rule, RuleAction, RuleMatch};
pub use shape::Shape;

use abi::{BankAbi, ConfigAbi, RuleAbi, RuleHitsAbi};

/// The object built from `xdp-prog/xdpool.bpf.c` by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdpool.bpf.o"));

const STEER_PROG: &str = "xdpool_steer";
/// The same program for single-buffer frames (section "xdp": no length helper).
const STEER_PROG_1BUF: &str = "xdpool_steer_1buf";
/// The two above for a shape that tests protocol and destination port only
/// ([`Shape::port_only`]): compiled without the other fields.
const STEER_PROG_PORT: &str = "xdpool_steer_port";
const STEER_PROG_1BUF_PORT: &str = "xdpool_steer_1buf_port";
const CEILING_PROG: &str = "xdpool_ceiling";

/// `XDP_FLAGS_SKB_MODE` and `XDP_FLAGS_DRV_MODE` from `linux/if_link.h`.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Where the kernel runs the XDP program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpAttachMode {
    /// In the driver (fast; the driver must support XDP).
    #[default]
    Native,
    /// Generic XDP on the skb path (works everywhere, slower).
    Skb,
}

impl XdpAttachMode {
    fn flags(self) -> u32 {
        match self {
            XdpAttachMode::Native => XDP_FLAGS_DRV_MODE,
            XdpAttachMode::Skb => XDP_FLAGS_SKB_MODE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            XdpAttachMode::Native => "native",
            XdpAttachMode::Skb => "skb",
        }
    }
}

impl std::fmt::Display for XdpAttachMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for XdpAttachMode {
    type Err = String;

    /// `native` or `skb`, as in the config file's `xdp_mode`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "native" => Ok(XdpAttachMode::Native),
            "skb" => Ok(XdpAttachMode::Skb),
            _ => Err(format!("unknown XDP mode `{s}`: use `native` or `skb`")),
        }
    }
}

/// The steering program's counters, summed over CPUs.
///
/// Every frame the program sees increments exactly one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct XdpCounters {
    /// Redirected into an AF_XDP socket.
    pub steered: u64,
    /// Matched a steer rule, but no socket was registered for the queue (passed).
    pub no_socket: u64,
    /// Passed to the kernel by a pass rule or because no rule matched.
    pub passed: u64,
    /// Dropped by a drop rule.
    pub dropped: u64,
    /// Malformed headers; passed to the kernel, never steered.
    pub malformed: u64,
}

impl std::ops::Add for XdpCounters {
    type Output = XdpCounters;
    fn add(self, o: XdpCounters) -> XdpCounters {
        XdpCounters {
            steered: self.steered + o.steered,
            no_socket: self.no_socket + o.no_socket,
            passed: self.passed + o.passed,
            dropped: self.dropped + o.dropped,
            malformed: self.malformed + o.malformed,
        }
    }
}

impl XdpCounters {
    /// All frames the program has seen.
    pub fn total(&self) -> u64 {
        self.steered + self.no_socket + self.passed + self.dropped + self.malformed
    }
}

/// True when an error chain ends in EPERM or EACCES.
fn is_permission_error(mut err: &(dyn std::error::Error + 'static)) -> bool {
    loop {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                return true;
            }
        }
        match err.source() {
            Some(next) => err = next,
            None => return false,
        }
    }
}

/// Loads the embedded object (maps created) and one program in it.
fn load_program(name: &'static str) -> Result<Ebpf, SteerError> {
    load_object(&mut EbpfLoader::new(), OBJECT, name)
}

/// The steering program's name in the object for `shape`: `frags` the
/// multi-buffer one.
fn steer_prog(frags: bool, shape: &Shape) -> &'static str {
    match (frags, shape.port_only()) {
        (true, false) => STEER_PROG,
        (false, false) => STEER_PROG_1BUF,
        (true, true) => STEER_PROG_PORT,
        (false, true) => STEER_PROG_1BUF_PORT,
    }
}

/// Loads the steering program `steer_prog` names for `frags` and `shape`, specialized
/// for `shape`: the shape becomes the object's frozen `.rodata`, which the verifier
/// reads as constants.
fn load_steer(shape: &Shape, frags: bool) -> Result<Ebpf, SteerError> {
    let count = shape.rule_count();
    let fields = shape.fields();
    let families = shape.families();
    let match_all = u32::from(shape.match_all().unwrap_or(0));
    let mut loader = EbpfLoader::new();
    loader
        .override_global("shape_rule_count", &count, true)
        .override_global("shape_fields", &fields, true)
        .override_global("shape_families", &families, true)
        .override_global("shape_match_all", &match_all, true);
    let ebpf = load_object(&mut loader, OBJECT, steer_prog(frags, shape))?;
    tracing::debug!(%shape, frags, "steering program loaded for its shape");
    Ok(ebpf)
}

fn load_object(
    loader: &mut EbpfLoader<'_>,
    object: &[u8],
    name: &'static str,
) -> Result<Ebpf, SteerError> {
    let mut ebpf = loader.load(object).map_err(|e| {
        if is_permission_error(&e) {
            SteerError::NotPermitted {
                what: "creating BPF maps",
            }
        } else {
            SteerError::Object(e)
        }
    })?;
    let prog = xdp_mut(&mut ebpf, name)?;
    prog.load().map_err(|source| {
        if is_permission_error(&source) {
            // The verifier's own words (which check needs which capability).
            tracing::debug!(program = name, error = ?source, "program load refused");
            SteerError::NotPermitted {
                what: "loading the XDP program",
            }
        } else {
            SteerError::Program { name, source }
        }
    })?;
    tracing::debug!(program = name, "XDP program loaded");
    Ok(ebpf)
}

fn xdp_mut<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut Xdp, SteerError> {
    ebpf.program_mut(name)
        .ok_or(SteerError::MissingInObject {
            what: "program",
            name,
        })?
        .try_into()
        .map_err(|source| SteerError::Program { name, source })
}

fn xdp<'a>(ebpf: &'a Ebpf, name: &'static str) -> Result<&'a Xdp, SteerError> {
    ebpf.program(name)
        .ok_or(SteerError::MissingInObject {
            what: "program",
            name,
        })?
        .try_into()
        .map_err(|source| SteerError::Program { name, source })
}

fn map_mut<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut aya::maps::Map, SteerError> {
    ebpf.map_mut(name)
        .ok_or(SteerError::MissingInObject { what: "map", name })
}

fn map<'a>(ebpf: &'a Ebpf, name: &'static str) -> Result<&'a aya::maps::Map, SteerError> {
    ebpf.map(name)
        .ok_or(SteerError::MissingInObject { what: "map", name })
}

/// Sum over CPUs of entry `index` of a per-CPU `u64` array.
fn percpu_sum(ebpf: &Ebpf, name: &'static str, index: u32) -> Result<u64, SteerError> {
    let array: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map(ebpf, name)?)
        .map_err(|source| SteerError::Map { name, source })?;
    let values = array
        .get(&index, 0)
        .map_err(|source| SteerError::Map { name, source })?;
    Ok(values.iter().sum())
}

fn read_counters(map: &Map) -> Result<XdpCounters, SteerError> {
    let array: PerCpuArray<&MapData, u64> =
        PerCpuArray::try_from(map).map_err(|source| SteerError::Map {
            name: "counters",
            source,
        })?;
    let get = |index: u32| -> Result<u64, SteerError> {
        let values = array.get(&index, 0).map_err(|source| SteerError::Map {
            name: "counters",
            source,
        })?;
        Ok(values.iter().sum())
    };
    Ok(XdpCounters {
        steered: get(abi::CNT_STEERED)?,
        no_socket: get(abi::CNT_NO_SOCKET)?,
        passed: get(abi::CNT_PASSED)?,
        dropped: get(abi::CNT_DROPPED)?,
        malformed: get(abi::CNT_MALFORMED)?,
    })
}

fn live_counters(ebpf: &Ebpf) -> Result<XdpCounters, SteerError> {
    read_counters(map(ebpf, "counters")?)
}

/// Writes a whole bank (one entry of the `rules` map, `MAX_RULES` rules).
fn write_bank(ebpf: &mut Ebpf, bank: u32, entries: &[RuleAbi]) -> Result<(), SteerError> {
    let mut map: Array<&mut MapData, BankAbi> =
        Array::try_from(map_mut(ebpf, "rules")?).map_err(|source| SteerError::Map {
            name: "rules",
            source,
        })?;
    let mut value: BankAbi = [RuleAbi::default(); abi::MAX_RULES];
    value[..entries.len()].copy_from_slice(entries);
    map.set(bank, value, 0).map_err(|source| SteerError::Map {
        name: "rules",
        source,
    })
}

/// Zeroes the hit counters of bank `bank` (before a list is written into it).
fn zero_rule_hits(ebpf: &mut Ebpf, bank: u32) -> Result<(), SteerError> {
    let mut hits: PerCpuArray<&mut MapData, RuleHitsAbi> =
        PerCpuArray::try_from(map_mut(ebpf, "rule_hits")?).map_err(|source| SteerError::Map {
            name: "rule_hits",
            source,
        })?;
    let cpus =
        aya::util::nr_cpus().map_err(|(what, source)| SteerError::Kernel { what, source })?;
    for i in 0..abi::MAX_RULES as u32 {
        let zero =
            PerCpuValues::try_from(vec![RuleHitsAbi::default(); cpus]).map_err(|source| {
                SteerError::Kernel {
                    what: "per-CPU values",
                    source,
                }
            })?;
        hits.set(bank * abi::MAX_RULES as u32 + i, zero, 0)
            .map_err(|source| SteerError::Map {
                name: "rule_hits",
                source,
            })?;
    }
    Ok(())
}

/// The `config` map's live word (`xdpool.h`): generation, tagging, bank.
pub(crate) fn live_word(generation: u32, bank: u32, tagging: bool) -> u32 {
    (generation << abi::LIVE_GEN_SHIFT) | if tagging { abi::LIVE_TAGGING } else { 0 } | (bank & 1)
}

/// Writes the `config` map's live word.
fn write_live(
    ebpf: &mut Ebpf,
    generation: u32,
    bank: u32,
    tagging: bool,
) -> Result<(), SteerError> {
    let mut config: Array<&mut MapData, ConfigAbi> = Array::try_from(map_mut(ebpf, "config")?)
        .map_err(|source| SteerError::Map {
            name: "config",
            source,
        })?;
    config
        .set(
            0,
            ConfigAbi {
                live: live_word(generation, bank, tagging),
                reserved: 0,
            },
            0,
        )
        .map_err(|source| SteerError::Map {
            name: "config",
            source,
        })
}

/// Sum over CPUs of rule `rule` of bank `bank` in a `rule_hits` map.
fn read_hits(map: &Map, bank: u32, rule: usize) -> Result<RuleCounts, SteerError> {
    let array: PerCpuArray<&MapData, RuleHitsAbi> =
        PerCpuArray::try_from(map).map_err(|source| SteerError::Map {
            name: "rule_hits",
            source,
        })?;
    let values = array
        .get(&(bank * abi::MAX_RULES as u32 + rule as u32), 0)
        .map_err(|source| SteerError::Map {
            name: "rule_hits",
            source,
        })?;
    Ok(values
        .iter()
        .fold(RuleCounts::default(), |a, v| RuleCounts {
            packets: a.packets + v.packets,
            bytes: a.bytes + v.bytes,
        }))
}

/// Packets and bytes a rule matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuleCounts {
    /// Frames.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl std::ops::Add for RuleCounts {
    type Output = RuleCounts;
    fn add(self, o: RuleCounts) -> RuleCounts {
        RuleCounts {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// The hit counters of one rule list: which bank of which `rule_hits` map, what
/// older lists carried into its rules.
#[derive(Debug)]
struct ListHits {
    /// `None`: the live program's map; `Some`: the map of the program a shape
    /// change replaced.
    map: Option<Map>,
    bank: u32,
    len: usize,
    /// Final counts carried into each rule (from lists retired two swaps ago or more).
    base: Vec<RuleCounts>,
    /// `carry[i]`: the rule of the previous list that rule `i` continues.
    carry: Vec<Option<usize>>,
}

impl ListHits {
    fn new(bank: u32, len: usize, carry: &[Option<usize>]) -> ListHits {
        let carry = (0..len).map(|i| carry.get(i).copied().flatten()).collect();
        ListHits {
            map: None,
            bank,
            len,
            base: vec![RuleCounts::default(); len],
            carry,
        }
    }

    /// This list's own hits of rule `i` (nothing carried).
    fn own(&self, live: &Ebpf, i: usize) -> Result<RuleCounts, SteerError> {
        match &self.map {
            Some(m) => read_hits(m, self.bank, i),
            None => read_hits(map(live, "rule_hits")?, self.bank, i),
        }
    }

    /// Rule `i`'s total, without what it carries from the previous list.
    fn settled(&self, live: &Ebpf, i: usize) -> Result<RuleCounts, SteerError> {
        Ok(self.base[i] + self.own(live, i)?)
    }
}

/// A bpf_link attachment; dropping it detaches the program.
#[derive(Debug)]
struct Attachment {
    ifindex: u32,
    link: OwnedFd,
}

/// Attaches `prog` through a bpf_link, mapping the kernel's answers to what the user should do.
fn attach_link(
    prog: &Xdp,
    name: &'static str,
    ifindex: u32,
    mode: XdpAttachMode,
) -> Result<Attachment, SteerError> {
    // Also proves the interface exists in this network namespace.
    if let Some(prog_id) = xdp_program_on(ifindex)? {
        return Err(SteerError::AlreadyAttached {
            ifindex,
            prog_id: Some(prog_id),
        });
    }
    let prog_fd = prog
        .fd()
        .map_err(|source| SteerError::Program { name, source })?;
    match link::xdp_link_create(prog_fd.as_fd(), ifindex, mode.flags()) {
        Ok(link) => {
            tracing::info!(ifindex, %mode, "XDP program attached through bpf_link");
            Ok(Attachment { ifindex, link })
        }
        Err(source) => Err(match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => SteerError::NotPermitted {
                what: "attaching XDP",
            },
            Some(libc::ENODEV) => SteerError::InterfaceMissing { ifindex },
            Some(libc::EBUSY) | Some(libc::EEXIST) => SteerError::AlreadyAttached {
                ifindex,
                prog_id: xdp_program_on(ifindex).ok().flatten(),
            },
            _ if mode == XdpAttachMode::Native => SteerError::ModeRefused {
                ifindex,
                mode: mode.name(),
                source,
            },
            _ => SteerError::Attach { ifindex, source },
        }),
    }
}

/// Shortest input `BPF_PROG_TEST_RUN` accepts for XDP (an Ethernet header).
pub const TEST_RUN_MIN_FRAME: usize = 14;

/// Runs an XDP program `repeat` times on `frame` with `BPF_PROG_TEST_RUN`;
/// returns the last XDP action and the kernel's mean time per run.
fn test_run_xdp(prog: &Xdp, frame: &[u8], repeat: u32) -> Result<(u32, Duration), SteerError> {
    // The kernel refuses shorter input with EINVAL (also when the bytes are
    // moved into XDP metadata); name that instead of a bare EINVAL.
    if frame.len() < TEST_RUN_MIN_FRAME {
        return Err(SteerError::FrameTooShortForTestRun {
            len: frame.len(),
            min: TEST_RUN_MIN_FRAME,
        });
    }
    let opts = TestRunOptions {
        data_in: Some(frame),
        repeat: repeat.max(1),
        ..TestRunOptions::default()
    };
    let result = prog.test_run(opts).map_err(|e| {
        if is_permission_error(&e) {
            SteerError::NotPermitted {
                what: "BPF_PROG_TEST_RUN",
            }
        } else {
            SteerError::TestRun(e)
        }
    })?;
    Ok((result.return_value, result.duration))
}

/// The loaded steering program, its maps and (when attached) its bpf_link.
#[derive(Debug)]
pub struct Steering {
    ebpf: Ebpf,
    /// What the loaded program is specialized for.
    shape: Shape,
    attachment: Option<Attachment>,
    /// Bank of the `rules` map the program reads.
    live_bank: u32,
    /// Generation of the live list (the tag of the frames it steers); 0 before any.
    generation: u32,
    /// Hit counters of the live list, and of the list it replaced (whose
    /// counters a frame that started on it may still move).
    hits: ListHits,
    retired_hits: Option<ListHits>,
    /// Registered AF_XDP sockets by queue, to register again in a reloaded program.
    xsks: BTreeMap<u32, RawFd>,
    /// The `counters` map of the program replaced last; it may still count a frame
    /// that started on it just before the swap.
    retired_counters: Option<Map>,
    /// Counts of the programs replaced before that one.
    folded: XdpCounters,
    /// The loaded program is `xdpool_steer` (multi-buffer), not `xdpool_steer_1buf`.
    frags: bool,
    /// Multi-buffer frames are wanted whatever the MTU (`multi_buffer = true`).
    frags_required: bool,
    /// Steered frames are tagged (a hot reload's hand-over is under way).
    tagging: bool,
    /// The live list, encoded: what a program of the other kind is loaded with.
    entries: Vec<RuleAbi>,
}

/// Largest MTU taken to fit one buffer in every driver's XDP (veth takes about
/// 3 500, igb and virtio-net about 3 000); above it the multi-buffer program is
/// attached. Where the guess is wrong the kernel refuses the single-buffer one at
/// attach and the multi-buffer one is attached instead.
const ONE_BUFFER_MTU: u32 = 1500;

/// Largest generation a frame's tag holds (`32 - TAG_GEN_SHIFT` bits); the next wraps to 1.
pub const MAX_GENERATION: u32 = (1 << (32 - abi::TAG_GEN_SHIFT)) - 1;

/// The generation after `g` (never 0: a zero tag means "no tag").
pub fn next_generation(g: u32) -> u32 {
    if g >= MAX_GENERATION {
        1
    } else {
        g + 1
    }
}

impl Steering {
    /// Loads `xdpool_steer` for the empty rule list: every frame passes, unparsed,
    /// until [`Steering::set_rules`] is called.
    pub fn load() -> Result<Self, SteerError> {
        let shape = Shape::of(&[]);
        let ebpf = load_steer(&shape, true)?;
        Ok(Steering {
            ebpf,
            shape,
            attachment: None,
            live_bank: 0,
            generation: 0,
            hits: ListHits::new(0, 0, &[]),
            retired_hits: None,
            xsks: BTreeMap::new(),
            retired_counters: None,
            folded: XdpCounters::default(),
            frags: true,
            frags_required: false,
            tagging: false,
            entries: Vec::new(),
        })
    }

    /// Loads `xdpool_steer` for the shape of `rules`, with `rules` set: what
    /// [`Steering::load`] and [`Steering::set_rules`] do, with one verification
    /// instead of two.
    pub fn with_rules(rules: &[Rule]) -> Result<Self, SteerError> {
        let entries = rule::encode_rules(rules)?;
        let shape = Shape::of(&entries[..rules.len()]);
        let mut ebpf = load_steer(&shape, true)?;
        write_bank(&mut ebpf, 0, &entries)?;
        write_live(&mut ebpf, 1, 0, false)?;
        Ok(Steering {
            ebpf,
            shape,
            attachment: None,
            live_bank: 0,
            generation: 1,
            hits: ListHits::new(0, rules.len(), &[]),
            retired_hits: None,
            xsks: BTreeMap::new(),
            retired_counters: None,
            folded: XdpCounters::default(),
            frags: true,
            frags_required: false,
            tagging: false,
            entries: entries[..rules.len()].to_vec(),
        })
    }

    /// The shape the loaded program is specialized for.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Replaces the rule list while the program runs; no frame is lost.
    ///
    /// A list of the loaded program's [`Shape`] is written into the idle bank and
    /// made live with one word write, so a frame sees either the old or the new
    /// list. A list of another shape loads a program for it (rules written, the
    /// registered sockets added) and, when attached, swaps it in with a bpf_link
    /// update: each frame runs the old or the new program. Rule hit counters
    /// restart from zero for the new list; the frame counters carry on.
    pub fn set_rules(&mut self, rules: &[Rule]) -> Result<(), SteerError> {
        self.set_rules_carrying(rules, &[], next_generation(self.generation))
    }

    /// [`Steering::set_rules`] with the list's `generation` (the tag of the frames it
    /// steers, see `xdpool.h`; not 0, at most [`MAX_GENERATION`]) and, for each new
    /// rule, the rule of the current list whose counters it continues
    /// ([`Steering::rule_counts`]; missing entries continue none).
    pub fn set_rules_carrying(
        &mut self,
        rules: &[Rule],
        carry: &[Option<usize>],
        generation: u32,
    ) -> Result<(), SteerError> {
        let entries = rule::encode_rules(rules)?;
        let shape = Shape::of(&entries[..rules.len()]);
        // The list retired by the previous swap has been off for a whole swap:
        // its counts are final. Fold what the live list carries from it.
        self.fold_retired()?;
        if shape != self.shape {
            self.reload(shape, &entries, rules.len(), carry, generation, self.frags)?;
            self.entries = entries[..rules.len()].to_vec();
            return Ok(());
        }
        let next = 1 - self.live_bank;
        zero_rule_hits(&mut self.ebpf, next)?;
        write_bank(&mut self.ebpf, next, &entries)?;
        write_live(&mut self.ebpf, generation, next, self.tagging)?;
        self.entries = entries[..rules.len()].to_vec();
        self.live_bank = next;
        self.generation = generation;
        let old = std::mem::replace(&mut self.hits, ListHits::new(next, rules.len(), carry));
        self.retired_hits = Some(old);
        tracing::info!(
            rules = rules.len(),
            bank = next,
            generation,
            "steering rules set"
        );
        Ok(())
    }

    /// Folds the retired list's final counts into the live list's base.
    fn fold_retired(&mut self) -> Result<(), SteerError> {
        let Some(retired) = self.retired_hits.take() else {
            self.hits.carry.iter_mut().for_each(|c| *c = None);
            return Ok(());
        };
        for i in 0..self.hits.len {
            if let Some(j) = self.hits.carry[i].take() {
                if j < retired.len {
                    let add = retired.settled(&self.ebpf, j)?;
                    self.hits.base[i] = self.hits.base[i] + add;
                }
            }
        }
        Ok(())
    }

    /// Loads a program for `shape` with `entries` in bank 0 and the registered
    /// sockets in its XSKMAP, then puts it where the old one was.
    #[cold]
    fn reload(
        &mut self,
        shape: Shape,
        entries: &[RuleAbi],
        rule_count: usize,
        carry: &[Option<usize>],
        generation: u32,
        frags: bool,
    ) -> Result<(), SteerError> {
        let mut next = load_steer(&shape, frags)?;
        write_bank(&mut next, 0, entries)?;
        write_live(&mut next, generation, 0, self.tagging)?;
        {
            let mut xsks: XskMap<&mut MapData> = XskMap::try_from(map_mut(&mut next, "xsks")?)
                .map_err(|source| SteerError::Map {
                    name: "xsks",
                    source,
                })?;
            for (&queue, &fd) in &self.xsks {
                xsks.set(queue, fd, 0)
                    .map_err(|source| SteerError::Xsk { queue, source })?;
            }
        }
        if let Some(a) = &self.attachment {
            let (new_name, old_name) = (
                steer_prog(frags, &shape),
                steer_prog(self.frags, &self.shape),
            );
            let new_fd = xdp(&next, new_name)?
                .fd()
                .map_err(|source| SteerError::Program {
                    name: new_name,
                    source,
                })?;
            let old_fd = xdp(&self.ebpf, old_name)?
                .fd()
                .map_err(|source| SteerError::Program {
                    name: old_name,
                    source,
                })?;
            link::xdp_link_update(a.link.as_fd(), new_fd.as_fd(), old_fd.as_fd()).map_err(
                |source| match source.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => SteerError::NotPermitted {
                        what: "replacing the XDP program",
                    },
                    _ => SteerError::Attach {
                        ifindex: a.ifindex,
                        source,
                    },
                },
            )?;
        }
        let mut old = std::mem::replace(&mut self.ebpf, next);
        // The program retired before this one has been off the link for a whole
        // reload: nothing runs on it any more, its counts are final.
        if let Some(map) = self.retired_counters.take() {
            self.folded = self.folded + read_counters(&map)?;
        }
        self.retired_counters = Some(old.take_map("counters").ok_or(
            SteerError::MissingInObject {
                what: "map",
                name: "counters",
            },
        )?);
        let mut retired = std::mem::replace(&mut self.hits, ListHits::new(0, rule_count, carry));
        retired.map = Some(
            old.take_map("rule_hits")
                .ok_or(SteerError::MissingInObject {
                    what: "map",
                    name: "rule_hits",
                })?,
        );
        self.retired_hits = Some(retired);
        if self.attachment.is_some() {
            tracing::info!(from = %self.shape, to = %shape, generation, "steering program replaced for a new rule shape (bpf_link update)");
        } else {
            tracing::debug!(from = %self.shape, to = %shape, generation, "steering program reloaded for a new rule shape");
        }
        self.shape = shape;
        self.live_bank = 0;
        self.generation = generation;
        self.frags = frags;
        Ok(())
    }

    /// Whether the loaded program takes multi-buffer frames (`xdpool_steer`) or
    /// single-buffer ones only (`xdpool_steer_1buf`, which counts bytes without a
    /// helper call).
    pub fn frags(&self) -> bool {
        self.frags
    }

    /// Loads the multi-buffer (`true`) or the single-buffer program with the live
    /// list, its counters carried; nothing when that one is loaded. Used before
    /// attaching; attached, the swap is a bpf_link update.
    pub fn use_frags(&mut self, frags: bool) -> Result<(), SteerError> {
        if frags == self.frags {
            return Ok(());
        }
        self.fold_retired()?;
        let entries = self.entries.clone();
        let carry: Vec<Option<usize>> = (0..entries.len()).map(Some).collect();
        self.reload(
            self.shape.clone(),
            &entries,
            entries.len(),
            &carry,
            self.generation,
            frags,
        )
    }

    /// Multi-buffer frames are wanted whatever the MTU (the sockets are
    /// multi-buffer): [`Steering::attach`] then always attaches `xdpool_steer`.
    pub fn require_frags(&mut self, required: bool) {
        self.frags_required = required;
    }

    /// Turns the tagging of steered frames on or off (`xdpool.h`): on for a hot
    /// reload's hand-over only (worker/rules.rs), since a tag costs a helper call
    /// and a write per frame.
    pub fn set_tagging(&mut self, on: bool) -> Result<(), SteerError> {
        if on == self.tagging {
            return Ok(());
        }
        write_live(&mut self.ebpf, self.generation, self.live_bank, on)?;
        self.tagging = on;
        tracing::debug!(on, generation = self.generation, "steered frames tagged");
        Ok(())
    }

    /// Whether steered frames are tagged now.
    pub fn tagging(&self) -> bool {
        self.tagging
    }

    /// Generation of the live rule list (0 before any list was set).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Attaches to `ifindex` through a bpf_link (never netlink), so the program
    /// goes away with this process.
    pub fn attach(&mut self, ifindex: u32, mode: XdpAttachMode) -> Result<(), SteerError> {
        if let Some(a) = &self.attachment {
            return Err(SteerError::AttachedHere { ifindex: a.ifindex });
        }
        // The single-buffer program where the MTU fits one buffer (no length
        // helper per frame); the kernel then keeps the MTU there while attached.
        let one_buffer = !self.frags_required
            && netlink::link_mtu(ifindex)
                .ok()
                .flatten()
                .is_some_and(|m| m <= ONE_BUFFER_MTU);
        self.use_frags(!one_buffer)?;
        let name = steer_prog(self.frags, &self.shape);
        let first = attach_link(xdp(&self.ebpf, name)?, name, ifindex, mode);
        let attachment = match first {
            Err(SteerError::ModeRefused { .. } | SteerError::Attach { .. }) if !self.frags => {
                // Refused for the MTU (veth checks its peer's): the multi-buffer one.
                tracing::debug!(
                    ifindex,
                    "single-buffer XDP program refused; attaching the multi-buffer one"
                );
                self.use_frags(true)?;
                let name = steer_prog(true, &self.shape);
                attach_link(xdp(&self.ebpf, name)?, name, ifindex, mode)?
            }
            r => r?,
        };
        self.attachment = Some(attachment);
        Ok(())
    }

    /// Detaches from the interface (closes the bpf_link).
    pub fn detach(&mut self) -> Result<(), SteerError> {
        let attachment = self.attachment.take().ok_or(SteerError::NotAttached)?;
        tracing::info!(ifindex = attachment.ifindex, "XDP program detached");
        drop(attachment.link);
        Ok(())
    }

    /// Interface the program is attached to, if any.
    pub fn attached_to(&self) -> Option<u32> {
        self.attachment.as_ref().map(|a| a.ifindex)
    }

    /// Kernel id of the loaded program (what [`xdp_program_on`] reports once attached).
    pub fn program_id(&self) -> Result<u32, SteerError> {
        let name = steer_prog(self.frags, &self.shape);
        let prog = xdp(&self.ebpf, name)?;
        prog.info()
            .map(|i| i.id())
            .map_err(|source| SteerError::Program { name, source })
    }

    /// Steers frames of receive queue `queue` to the AF_XDP socket `fd`. The fd
    /// must stay open until [`Steering::unregister_xsk`]: a reload registers it again.
    pub fn register_xsk(&mut self, queue: u32, fd: RawFd) -> Result<(), SteerError> {
        let mut xsks = self.xsk_map(queue)?;
        xsks.set(queue, fd, 0)
            .map_err(|source| SteerError::Xsk { queue, source })?;
        self.xsks.insert(queue, fd);
        Ok(())
    }

    /// Removes the socket of `queue`; its frames then fall back to the kernel (`no_socket`).
    pub fn unregister_xsk(&mut self, queue: u32) -> Result<(), SteerError> {
        self.xsks.remove(&queue);
        let mut xsks = self.xsk_map(queue)?;
        xsks.unset(queue)
            .map_err(|source| SteerError::Xsk { queue, source })
    }

    fn xsk_map(&mut self, queue: u32) -> Result<XskMap<&mut MapData>, SteerError> {
        if queue >= abi::MAX_QUEUES {
            return Err(SteerError::QueueOutOfRange {
                queue,
                max: abi::MAX_QUEUES,
            });
        }
        XskMap::try_from(map_mut(&mut self.ebpf, "xsks")?).map_err(|source| SteerError::Map {
            name: "xsks",
            source,
        })
    }

    /// The counters, summed over CPUs and over every program this `Steering`
    /// has loaded (a reload does not restart them).
    pub fn counters(&self) -> Result<XdpCounters, SteerError> {
        let retired = match &self.retired_counters {
            Some(map) => read_counters(map)?,
            None => XdpCounters::default(),
        };
        Ok(self.folded + retired + live_counters(&self.ebpf)?)
    }

    /// Frames matched by each rule of the current list, in list order, since the
    /// list was set.
    pub fn rule_hits(&self) -> Result<Vec<u64>, SteerError> {
        (0..self.hits.len)
            .map(|i| self.hits.own(&self.ebpf, i).map(|c| c.packets))
            .collect()
    }

    /// Packets and bytes of each rule of the current list, with what each rule
    /// continues from the lists before it ([`Steering::set_rules_carrying`]). A frame
    /// is counted once, in the list that matched it, whether the swap came before
    /// or after it.
    pub fn rule_counts(&self) -> Result<Vec<RuleCounts>, SteerError> {
        (0..self.hits.len)
            .map(|i| {
                let mut c = self.hits.settled(&self.ebpf, i)?;
                if let (Some(j), Some(r)) = (self.hits.carry[i], &self.retired_hits) {
                    if j < r.len {
                        c = c + r.settled(&self.ebpf, j)?;
                    }
                }
                Ok(c)
            })
            .collect()
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`, queue 0) and returns
    /// the XDP action (`XDP_DROP` = 1, `XDP_PASS` = 2, `XDP_REDIRECT` = 4).
    /// Counters move exactly as for a received frame.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, SteerError> {
        test_run_xdp(
            xdp(&self.ebpf, steer_prog(self.frags, &self.shape))?,
            frame,
            1,
        )
        .map(|(action, _)| action)
    }

    /// Runs the program `repeat` times on `frame` in the kernel; returns the XDP
    /// action and the kernel-measured mean time per run. Counters move `repeat` times.
    pub fn test_run_timed(&self, frame: &[u8], repeat: u32) -> Result<(u32, Duration), SteerError> {
        test_run_xdp(
            xdp(&self.ebpf, steer_prog(self.frags, &self.shape))?,
            frame,
            repeat,
        )
    }
}

/// The `xdpool_ceiling` program: counts every frame and drops it.
#[derive(Debug)]
pub struct Ceiling {
    ebpf: Ebpf,
    attachment: Option<Attachment>,
}

impl Ceiling {
    /// Loads the program without attaching it.
    pub fn load() -> Result<Self, SteerError> {
        Ok(Ceiling {
            ebpf: load_program(CEILING_PROG)?,
            attachment: None,
        })
    }

    /// Loads the program and attaches it to `ifindex` through a bpf_link.
    pub fn load_and_attach(ifindex: u32, mode: XdpAttachMode) -> Result<Self, SteerError> {
        let mut ceiling = Self::load()?;
        let prog = xdp(&ceiling.ebpf, CEILING_PROG)?;
        ceiling.attachment = Some(attach_link(prog, CEILING_PROG, ifindex, mode)?);
        Ok(ceiling)
    }

    /// Frames counted and dropped so far, summed over CPUs.
    pub fn dropped(&self) -> Result<u64, SteerError> {
        percpu_sum(&self.ebpf, "ceiling_frames", 0)
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`); returns the XDP action.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, SteerError> {
        test_run_xdp(xdp(&self.ebpf, CEILING_PROG)?, frame, 1).map(|(action, _)| action)
    }
}

/// An XDP program of another object, loaded but never attached, that runs under
/// `BPF_PROG_TEST_RUN` as the steering program does: `xdpool bench steer` measures
/// the steering program against `xdpool_redirect_ref` (`xdp-prog/redirect.bpf.c`,
/// built by xdpool-lab), which redirects every frame to its queue's socket and does
/// nothing else.
#[derive(Debug)]
pub struct ReferenceProgram {
    ebpf: Ebpf,
    name: &'static str,
}

impl ReferenceProgram {
    /// Loads program `name` of `object` (an XSKMAP in it stays empty: every run of a
    /// redirect falls back to XDP_PASS, as the steering program's steer rules do under
    /// test).
    pub fn load(object: &[u8], name: &'static str) -> Result<Self, SteerError> {
        Ok(ReferenceProgram {
            ebpf: load_object(&mut EbpfLoader::new(), object, name)?,
            name,
        })
    }

    /// Runs the program `repeat` times on `frame`; the XDP action and the kernel's
    /// mean time per run.
    pub fn test_run_timed(&self, frame: &[u8], repeat: u32) -> Result<(u32, Duration), SteerError> {
        test_run_xdp(xdp(&self.ebpf, self.name)?, frame, repeat)
    }
}
