//! `xdpool_steer` against the malformed-frame corpus of `tests/corpus/wire/` and a
//! bounded kernel-side fuzz, both under the real verifier and `BPF_PROG_TEST_RUN`
//! (root only). Nothing is sent anywhere and no interface is touched.
//!
//! Two references judge the program's verdict on each frame:
//! - the Rust parser (`wire::parse`), which the workers trust: a frame it rejects
//!   must never be steered, except where the two parsers differ by design (each
//!   difference is named, justified and counted below);
//! - `xdp_model`, a line-by-line model of the C program's parse as `xdpool.h`
//!   specifies it: the kernel's verdict must equal it exactly on every frame. It
//!   also records which checks the C program skips, which is what makes a
//!   difference from the Rust parser "by design" rather than a bug.
//!
//! Fuzz bounds: `XDPOOL_XDP_FUZZ_FRAMES` frames (default 100 000) or
//! `XDPOOL_FUZZ_SECS` seconds (default 30), whichever comes first; the seed is
//! `XDPOOL_FUZZ_SEED` (default fixed, printed).
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use xdpool::internal::steer::{
    Rule, RuleAction, RuleMatch, SteerError, Steering, XdpCounters, TEST_RUN_MIN_FRAME,
};
use xdpool::internal::wire::fuzz::{mutate, XorShift64};
use xdpool::internal::wire::{parse, Layer, ParseError, Parsed, L3};

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

const UDP: u8 = 17;
const TCP: u8 = 6;

/// Longest fuzz frame. `BPF_PROG_TEST_RUN` keeps `4096 - 256 (headroom) - 320
/// (skb_shared_info)` = 3520 bytes linear and moves the rest into fragments the
/// program cannot see; staying well below keeps the program's view the whole frame.
const MAX_FUZZ_FRAME: usize = 2048;

#[macro_use]
mod common;

fn hex(frame: &[u8]) -> String {
    frame
        .iter()
        .fold(String::with_capacity(frame.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

// ---- the corpus ------------------------------------------------------------

struct CorpusFrame {
    name: String,
    bytes: Vec<u8>,
    /// `ok ...` or `err <Kind> ...` from expected.txt.
    expected: String,
}

fn corpus() -> Vec<CorpusFrame> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../xdpool/tests/corpus/wire");
    let text =
        std::fs::read_to_string(dir.join("expected.txt")).expect("tests/corpus/wire/expected.txt");
    let frames: Vec<CorpusFrame> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, expected) = l
                .split_once(" -> ")
                .unwrap_or_else(|| panic!("bad expected.txt line {l:?}"));
            let bytes = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            CorpusFrame {
                name: name.to_string(),
                bytes,
                expected: expected.to_string(),
            }
        })
        .collect();
    let on_disk = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "bin")
        })
        .count();
    assert_eq!(
        frames.len(),
        on_disk,
        "every corpus file needs a line in expected.txt"
    );
    frames
}

// ---- what the program did with one frame ------------------------------------

/// The program's verdict on one frame, read from its counters and rule hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum XdpVerdict {
    /// The kernel refused the input before the program ran (shorter than Ethernet).
    TooShort,
    /// Counted `malformed`, passed, no rule hit.
    Malformed,
    /// A steer rule (by position) matched; no socket, so `no_socket` and passed.
    Hit(usize),
    /// No rule matched: `passed`.
    Passed,
}

impl std::fmt::Display for XdpVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            XdpVerdict::TooShort => f.write_str("EINVAL (<14 B)"),
            XdpVerdict::Malformed => f.write_str("malformed"),
            XdpVerdict::Hit(r) => write!(f, "no_socket, rule {r}"),
            XdpVerdict::Passed => f.write_str("passed"),
        }
    }
}

/// Runs frames through a loaded program and checks the accounting of each run.
struct Runner {
    steering: Steering,
    counters: XdpCounters,
    hits: Vec<u64>,
}

impl Runner {
    fn new(rules: Vec<Rule>) -> Self {
        let mut steering =
            Steering::load().expect("xdpool_steer must pass the verifier on this kernel and load");
        steering.set_rules(&rules).expect("set_rules");
        let counters = steering.counters().unwrap();
        let hits = steering.rule_hits().unwrap();
        assert_eq!(counters.total(), 0);
        Runner {
            steering,
            counters,
            hits,
        }
    }

    /// One `BPF_PROG_TEST_RUN`. Err describes an accounting or action violation.
    fn run(&mut self, frame: &[u8]) -> Result<XdpVerdict, String> {
        let action = match self.steering.test_run(frame) {
            Ok(a) => a,
            Err(SteerError::FrameTooShortForTestRun { len, min })
                if frame.len() < TEST_RUN_MIN_FRAME =>
            {
                assert_eq!((len, min), (frame.len(), TEST_RUN_MIN_FRAME));
                let now = self.steering.counters().unwrap();
                if now != self.counters {
                    return Err(format!(
                        "a refused {len}-byte frame moved counters: {:?} -> {now:?}",
                        self.counters
                    ));
                }
                return Ok(XdpVerdict::TooShort);
            }
            Err(e) => return Err(format!("test run failed: {e}")),
        };
        let now = self.steering.counters().unwrap();
        let hits = self.steering.rule_hits().unwrap();
        let before = std::mem::replace(&mut self.counters, now);
        let hits_before = std::mem::replace(&mut self.hits, hits);
        let moved = [
            ("steered", now.steered - before.steered),
            ("no_socket", now.no_socket - before.no_socket),
            ("passed", now.passed - before.passed),
            ("dropped", now.dropped - before.dropped),
            ("malformed", now.malformed - before.malformed),
        ];
        let total: u64 = moved.iter().map(|m| m.1).sum();
        let hit: Vec<usize> = (0..self.hits.len())
            .filter(|&i| self.hits[i] != hits_before[i])
            .collect();
        let hit_sum: u64 = self.hits.iter().zip(&hits_before).map(|(a, b)| a - b).sum();
        if total != 1 || hit_sum > 1 {
            return Err(format!("counters moved {moved:?} (sum {total}), rule hits moved by {hit_sum}: want exactly one counter +1"));
        }
        // Only steer rules are loaded: the program may answer PASS or REDIRECT, nothing else.
        if action != XDP_PASS && action != XDP_REDIRECT {
            return Err(format!("action {action} from a steer-only rule set"));
        }
        let counter = moved.iter().find(|m| m.1 == 1).unwrap().0;
        match (counter, hit.as_slice(), action) {
            ("malformed", [], XDP_PASS) => Ok(XdpVerdict::Malformed),
            ("passed", [], XDP_PASS) => Ok(XdpVerdict::Passed),
            // The XSKMAP is empty: a matching steer rule falls back to XDP_PASS.
            ("no_socket", [r], XDP_PASS) => Ok(XdpVerdict::Hit(*r)),
            _ => Err(format!("inconsistent run: counter {counter}, rule hits {hit:?}, action {action} (XSKMAP is empty)")),
        }
    }
}

// ---- the two references ----------------------------------------------------

/// A rule's conditions (None: any).
#[derive(Default)]
struct Cond {
    proto: Option<u8>,
    dst_port: Option<(u16, u16)>,
    src_port: Option<(u16, u16)>,
    dst: Option<(IpAddr, u8)>,
    src: Option<(IpAddr, u8)>,
    vlan: Option<u16>,
}

fn conds(m: &RuleMatch) -> Cond {
    match *m {
        RuleMatch::All => Cond::default(),
        RuleMatch::Fields {
            proto,
            dst_port,
            dst_prefix,
            src_port,
            src_prefix,
            vlan,
        } => Cond {
            proto,
            dst_port,
            src_port,
            dst: dst_prefix,
            src: src_prefix,
            vlan,
        },
    }
}

/// What a rule can look at in a well-formed frame: the C program's `struct
/// parsed`, or the same read from the Rust parser's `Parsed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CView {
    /// 0 (not IP), 4 or 6.
    family: u8,
    proto: u8,
    /// (source, destination) when UDP or TCP with its header.
    ports: Option<(u16, u16)>,
    saddr: Option<IpAddr>,
    daddr: Option<IpAddr>,
    /// The outer VLAN tag's id.
    vlan: Option<u16>,
}

impl CView {
    fn of_parsed(p: &Parsed) -> CView {
        let family = match p.l3() {
            L3::V4 { .. } => 4,
            L3::V6 { .. } => 6,
            L3::None => 0,
        };
        CView {
            family,
            proto: p.ip_proto().unwrap_or(0),
            ports: p.ports(),
            saddr: p.src_ip(),
            daddr: p.dst_ip(),
            vlan: p.outer_vlan_id(),
        }
    }
}

fn in_prefix(addr: Option<IpAddr>, (net, len): (IpAddr, u8)) -> bool {
    match (addr, net) {
        (Some(IpAddr::V4(a)), IpAddr::V4(n)) => {
            len == 0 || (u32::from(a) ^ u32::from(n)) >> (32 - u32::from(len)) == 0
        }
        (Some(IpAddr::V6(a)), IpAddr::V6(n)) => {
            len == 0 || (u128::from(a) ^ u128::from(n)) >> (128 - u32::from(len)) == 0
        }
        _ => false,
    }
}

/// Whether every condition of `c` holds for `v` (xdpool.h "Semantics").
fn holds(c: &Cond, v: &CView) -> bool {
    let in_range = |r: Option<(u16, u16)>, port: Option<u16>| {
        r.is_none_or(|(lo, hi)| port.is_some_and(|p| (lo..=hi).contains(&p)))
    };
    c.proto.is_none_or(|want| v.family != 0 && v.proto == want)
        && in_range(c.dst_port, v.ports.map(|p| p.1))
        && in_range(c.src_port, v.ports.map(|p| p.0))
        && c.dst.is_none_or(|p| in_prefix(v.daddr, p))
        && c.src.is_none_or(|p| in_prefix(v.saddr, p))
        && c.vlan.is_none_or(|want| v.vlan == Some(want))
}

/// What the rules would do with a frame the Rust parser accepted (first match wins).
fn verdict_from_parser(p: &Parsed, rules: &[Rule]) -> XdpVerdict {
    let v = CView::of_parsed(p);
    match rules.iter().position(|r| holds(&conds(&r.matcher), &v)) {
        Some(i) => XdpVerdict::Hit(i),
        None => XdpVerdict::Passed,
    }
}

/// Checks the C program skips, so a Rust rejection behind them is no program bug.
#[derive(Debug, Clone, Copy, Default)]
struct Skipped {
    /// A third VLAN TPID was left as the ethertype (C walks two tags).
    vlan_beyond_two: bool,
    /// IPv4 options present; C does not walk them.
    ipv4_options: bool,
    /// Non-first fragment: C does not check offset + length against 65535.
    nonfirst_fragment: bool,
    /// A hop-by-hop header after the first position; C accepts it anywhere.
    hop_by_hop_later: bool,
    /// C stopped the IPv6 chain where the Rust parser walks on: at AH (51) or
    /// mobility (135), which C does not know, or after its 6-header limit.
    ipv6_walk_stopped: bool,
    /// First fragment of a fragmented datagram (IPv4 MF or IPv6 M flag set, offset 0).
    first_fragment_more: bool,
}

struct Model {
    /// None: malformed.
    view: Option<CView>,
    /// The frame kind after the VLAN walk (4, 6, 0 for non-IP); None when the
    /// VLAN tags themselves are malformed.
    kind: Option<u8>,
    skipped: Skipped,
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// Mirror of `xdp-prog/xdpool.bpf.c`'s parse_frame, as `xdpool.h` documents it.
fn xdp_model(f: &[u8]) -> Model {
    let mut skipped = Skipped::default();
    let view = model_parse(f, &mut skipped);
    Model {
        view,
        kind: model_kind(f),
        skipped,
    }
}

const C_MAX_VLAN: usize = 2;

/// What the program sees after its VLAN walk: the frame kind, None when the walk
/// itself finds the frame malformed (cut tag, third tag).
fn model_kind(f: &[u8]) -> Option<u8> {
    if f.len() < 14 {
        return None;
    }
    let mut h_proto = be16(f, 12);
    let mut cur = 14;
    for _ in 0..C_MAX_VLAN {
        if h_proto != 0x8100 && h_proto != 0x88a8 {
            break;
        }
        if cur + 4 > f.len() {
            return None;
        }
        h_proto = be16(f, cur + 2);
        cur += 4;
    }
    match h_proto {
        0x8100 | 0x88a8 => None,
        0x0800 => Some(4),
        0x86dd => Some(6),
        _ => Some(0),
    }
}

/// The frame kinds a rule list can match (xdpool.h `shape_families`): the
/// program passes frames of the other kinds unparsed.
fn model_families(rules: &[Rule]) -> [bool; 3] {
    let mut kinds = [false; 3]; // non-IP, IPv4, IPv6
    for r in rules {
        let c = conds(&r.matcher);
        if c.proto.is_none()
            && c.dst_port.is_none()
            && c.src_port.is_none()
            && c.dst.is_none()
            && c.src.is_none()
        {
            kinds[0] = true; // no condition only an IP frame meets (VLAN holds for any)
        }
        let family = c.dst.or(c.src).map(|(a, _)| a.is_ipv6());
        kinds[1] |= family.is_none_or(|six| !six);
        kinds[2] |= family.is_none_or(|six| six);
    }
    kinds
}
const C_MAX_IPV6_EXT: usize = 6;

fn model_parse(f: &[u8], s: &mut Skipped) -> Option<CView> {
    let len = f.len();
    if len < 14 {
        return None;
    }
    let mut h_proto = be16(f, 12);
    let mut cur = 14;
    let mut vlan = None;
    for _ in 0..C_MAX_VLAN {
        if h_proto != 0x8100 && h_proto != 0x88a8 {
            break;
        }
        if cur + 4 > len {
            return None;
        }
        vlan = vlan.or(Some(be16(f, cur) & 0x0fff)); // the outer tag's id
        h_proto = be16(f, cur + 2);
        cur += 4;
    }
    s.vlan_beyond_two = h_proto == 0x8100 || h_proto == 0x88a8;
    if s.vlan_beyond_two {
        return None; // the program counts a third tag malformed
    }
    let view = match h_proto {
        0x0800 => model_ipv4(f, cur, s),
        0x86dd => model_ipv6(f, cur, s),
        _ => Some(CView::default()),
    };
    view.map(|v| CView { vlan, ..v })
}

fn model_ipv4(f: &[u8], l3: usize, s: &mut Skipped) -> Option<CView> {
    if l3 + 20 > f.len() {
        return None;
    }
    let (version, ihl) = (f[l3] >> 4, usize::from(f[l3] & 0xf));
    if version != 4 || ihl < 5 {
        return None;
    }
    let hlen = ihl * 4;
    let tot = usize::from(be16(f, l3 + 2));
    if tot < hlen || l3 + tot > f.len() {
        return None;
    }
    s.ipv4_options = ihl > 5;
    let addr = |at: usize| Some(IpAddr::from(<[u8; 4]>::try_from(&f[at..at + 4]).unwrap()));
    let mut v = CView {
        family: 4,
        proto: f[l3 + 9],
        saddr: addr(l3 + 12),
        daddr: addr(l3 + 16),
        ..CView::default()
    };
    let frag = be16(f, l3 + 6);
    if frag & 0x1fff != 0 {
        s.nonfirst_fragment = true;
        return Some(v);
    }
    s.first_fragment_more = frag & 0x2000 != 0;
    v.ports = model_l4(f, l3 + hlen, tot - hlen, v.proto, s.first_fragment_more)?;
    Some(v)
}

fn model_ipv6(f: &[u8], l3: usize, s: &mut Skipped) -> Option<CView> {
    if l3 + 40 > f.len() || f[l3] >> 4 != 6 {
        return None;
    }
    let mut remaining = usize::from(be16(f, l3 + 4));
    let mut cur = l3 + 40;
    if cur + remaining > f.len() {
        return None;
    }
    let addr = |at: usize| Some(IpAddr::from(<[u8; 16]>::try_from(&f[at..at + 16]).unwrap()));
    let base = CView {
        family: 6,
        saddr: addr(l3 + 8),
        daddr: addr(l3 + 24),
        ..CView::default()
    };
    let mut next = f[l3 + 6];
    let mut walked = 0;
    while walked < C_MAX_IPV6_EXT {
        match next {
            0 | 43 | 60 => {
                s.hop_by_hop_later |= next == 0 && walked != 0;
                if cur + 2 > f.len() {
                    return None;
                }
                let ext = (usize::from(f[cur + 1]) + 1) * 8;
                if ext > remaining {
                    return None;
                }
                next = f[cur];
                cur += ext;
                remaining -= ext;
            }
            44 => {
                if remaining < 8 || cur + 8 > f.len() {
                    return None;
                }
                next = f[cur];
                let frag = be16(f, cur + 2);
                cur += 8;
                remaining -= 8;
                if frag & 0xfff8 != 0 {
                    s.nonfirst_fragment = true;
                    return Some(CView {
                        proto: next,
                        ..base
                    });
                }
                s.first_fragment_more |= frag & 1 != 0;
            }
            _ => break,
        }
        walked += 1;
    }
    // The Rust parser also walks AH and mobility headers, and up to 8 headers.
    s.ipv6_walk_stopped = matches!(next, 0 | 43 | 44 | 51 | 60 | 135);
    let ports = model_l4(f, cur, remaining, next, s.first_fragment_more)?;
    Some(CView {
        proto: next,
        ports,
        ..base
    })
}

/// Outer None: malformed; inner: (source, destination) ports when UDP or TCP.
fn model_l4(
    f: &[u8],
    l4: usize,
    l4_len: usize,
    proto: u8,
    more_fragments: bool,
) -> Option<Option<(u16, u16)>> {
    match proto {
        UDP => {
            if l4_len < 8 || l4 + 8 > f.len() {
                return None;
            }
            let ulen = usize::from(be16(f, l4 + 4));
            if ulen < 8 || (!more_fragments && ulen > l4_len) {
                return None;
            }
            Some(Some((be16(f, l4), be16(f, l4 + 2))))
        }
        TCP => {
            if l4_len < 20 || l4 + 20 > f.len() {
                return None;
            }
            let doff = usize::from(f[l4 + 12] >> 4);
            if doff < 5 || doff * 4 > l4_len {
                return None;
            }
            Some(Some((be16(f, l4), be16(f, l4 + 2))))
        }
        _ => Some(None),
    }
}

/// The program's verdict as xdpool.h specifies it for the list's shape.
fn verdict_from_model(m: &Model, frame_len: usize, rules: &[Rule]) -> XdpVerdict {
    if frame_len < TEST_RUN_MIN_FRAME {
        return XdpVerdict::TooShort;
    }
    // Match-all shape: rule 0 has no condition and takes every frame unparsed.
    if rules.first().is_some_and(|r| r.matcher == RuleMatch::All) {
        return XdpVerdict::Hit(0);
    }
    // A frame kind no rule can match is passed unparsed, malformed or not.
    if let Some(kind) = m.kind {
        if !model_families(rules)[match kind {
            4 => 1,
            6 => 2,
            _ => 0,
        }] {
            return XdpVerdict::Passed;
        }
    }
    let Some(v) = m.view else {
        return XdpVerdict::Malformed;
    };
    match rules.iter().position(|r| holds(&conds(&r.matcher), &v)) {
        Some(i) => XdpVerdict::Hit(i),
        None => XdpVerdict::Passed,
    }
}

/// Why the program accepts a frame the Rust parser rejects, when the reason is a
/// check the program skips by design. None: unexplained (a bug on one side).
fn why_program_accepts(s: &Skipped, err: &ParseError) -> Option<&'static str> {
    use ParseError as E;
    // Checked from the most specific to the widest.
    match err {
        E::TooManyVlanTags if s.vlan_beyond_two => {
            Some("third VLAN tag: program walks 2 tags, then sees a TPID as a non-IP ethertype")
        }
        E::BadIpv4Option { .. } if s.ipv4_options => Some("IPv4 options: program skips them by IHL, never walks the TLVs"),
        E::FragmentTooLarge { .. } if s.nonfirst_fragment => {
            Some("fragment past 65535: program does not check offset+length (reassembly drops it)")
        }
        E::HopByHopNotFirst if s.hop_by_hop_later => Some("hop-by-hop not first: program accepts it at any position"),
        E::TooManyExtHeaders { .. }
        | E::BadExtHeader { .. }
        | E::HopByHopNotFirst
        | E::FragmentTooLarge { .. }
        | E::BadTcpOffset { .. }
        | E::Truncated { layer: Layer::Ipv6Ext | Layer::Udp | Layer::Tcp, .. }
        | E::LengthLies { layer: Layer::Udp, .. }
        | E::LengthTooShort { layer: Layer::Udp, .. }
            if s.ipv6_walk_stopped =>
        {
            Some("IPv6 chain: program stops at AH/mobility or after 6 headers; the parser walks on (AH, 8 headers)")
        }
        _ => None,
    }
}

/// Why the program counts malformed a frame the Rust parser accepts.
fn why_program_rejects(p: &Parsed, m: &Model) -> &'static str {
    if m.skipped.first_fragment_more
        && p.ip_proto() == Some(UDP)
        && p.fragment().is_some_and(|f| f.is_first() && f.more)
    {
        "UDP first fragment: program requires UDP length <= fragment payload; parser allows the datagram length"
    } else {
        "unexplained"
    }
}

fn parser_verdict(r: &Result<Parsed, ParseError>) -> String {
    match r {
        Ok(p) => {
            let proto = p.ip_proto().map_or("-".to_string(), |v| v.to_string());
            let dport = p.dst_port().map_or("-".to_string(), |v| v.to_string());
            format!("ok proto={proto} dport={dport}")
        }
        Err(e) => format!("err {}", e.kind()),
    }
}

// ---- the corpus under the program --------------------------------------------

/// Every well-formed frame hits rule 1. Rule 0 (IP protocol 255, reserved, in no
/// corpus file) keeps the program parsing: a list whose rule 0 has no condition
/// is the match-all shape, which parses nothing (`other_shapes_follow_the_model`).
fn catch_all() -> Vec<Rule> {
    let reserved = Rule {
        matcher: RuleMatch::dst(Some(255), None, None),
        action: RuleAction::Steer,
    };
    vec![reserved, Rule::all(RuleAction::Steer)]
}

/// Rule 0: UDP to port 9; rule 1: UDP to 53..=4500 (so port and protocol both count).
fn udp_ports() -> Vec<Rule> {
    let udp = |lo, hi| Rule {
        matcher: RuleMatch::dst(Some(UDP), Some((lo, hi)), None),
        action: RuleAction::Steer,
    };
    vec![udp(9, 9), udp(53, 4500)]
}

/// A corpus file on which the program's verdict differs from the one the Rust
/// parser implies, by design: (file, verdict under `catch_all`, verdict under
/// `udp_ports`, why).
type CorpusException = (&'static str, XdpVerdict, XdpVerdict, &'static str);

const EXCEPTIONS: &[CorpusException] = &[
    // The kernel refuses test input shorter than an Ethernet header with EINVAL
    // before the program runs; no driver delivers such a frame either.
    (
        "truncated_eth_13.bin",
        XdpVerdict::TooShort,
        XdpVerdict::TooShort,
        "kernel refuses < 14 bytes (EINVAL)",
    ),
    // The program steps over IPv4 options by IHL without walking the TLVs; the
    // kernel's ip_options_compile (and the worker's parser) drop these. UDP port 9.
    (
        "ipv4_option_len_0.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Hit(0),
        "IPv4 option TLVs not walked",
    ),
    (
        "ipv4_option_overrun.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Hit(0),
        "IPv4 option TLVs not walked",
    ),
    // A non-first fragment is judged by its own header only; offset + length past
    // 65535 is caught at reassembly (ip_frag_queue / ip6_frag_queue), not in XDP.
    // It has no ports, so the port rules pass it.
    (
        "ipv4_frag_ping_of_death.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Passed,
        "fragment end past 65535 not checked",
    ),
    (
        "ipv6_frag_ping_of_death.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Passed,
        "fragment end past 65535 not checked",
    ),
    // The program accepts hop-by-hop at any position (RFC 8200 4.1 order is not
    // enforced in XDP); it walks on to UDP port 9.
    (
        "ipv6_hbh_not_first.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Hit(0),
        "hop-by-hop order not enforced",
    ),
    // The program skips at most 6 extension headers (XDPOOL_MAX_IPV6_EXT, a
    // verifier budget), the parser 8: past 6 the program leaves L4 unknown, so no
    // port rule matches and the parser's 9-header refusal is never reached.
    (
        "ipv6_ext_chain_9.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Passed,
        "program stops after 6 ext headers",
    ),
    (
        "ipv6_ext_chain_8_udp.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Passed,
        "program stops after 6 ext headers: port unseen",
    ),
    // The program does not know AH (51): it ends the chain there with proto 51,
    // so it never sees AH's length (0 here) nor the UDP header behind it.
    (
        "ipv6_ah_len_0.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Passed,
        "AH ends the program's chain",
    ),
    (
        "ipv6_routing_ah_udp.bin",
        XdpVerdict::Hit(1),
        XdpVerdict::Passed,
        "AH ends the program's chain: port 4500 unseen",
    ),
];

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn every_corpus_frame_is_counted_once_and_no_malformed_frame_is_steered() {
    require_root!();
    let frames = corpus();
    let rule_sets = [("catch-all", catch_all()), ("udp-ports", udp_ports())];
    let mut runners: Vec<Runner> = rule_sets
        .iter()
        .map(|(_, r)| Runner::new(r.clone()))
        .collect();
    let mut table = String::new();
    let _ = writeln!(
        table,
        "{:<36} {:<26} {:<20} {:<20} exception",
        "file", "parser", "xdp catch-all", "xdp udp-ports"
    );
    let mut failures = Vec::new();
    let mut exceptions_used = HashSet::new();
    let mut malformed_expected = [0u64; 2];
    let mut too_short = [0u64; 2];

    for f in &frames {
        let parsed = parse(&f.bytes);
        let pv = parser_verdict(&parsed);
        // The corpus and the parser agree (wire_corpus checks the details).
        let want_kind = f
            .expected
            .split_whitespace()
            .take(if f.expected.starts_with("err") { 2 } else { 1 })
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            pv.starts_with(&want_kind),
            "{}: parser says {pv}, expected.txt says {}",
            f.name,
            f.expected
        );
        let exception = EXCEPTIONS.iter().find(|e| e.0 == f.name);
        let model = xdp_model(&f.bytes);
        let mut got = Vec::new();
        for (k, ((set, rules), runner)) in rule_sets.iter().zip(runners.iter_mut()).enumerate() {
            let verdict = match runner.run(&f.bytes) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{} [{set}]: {e}", f.name));
                    got.push("ERROR".to_string());
                    continue;
                }
            };
            got.push(verdict.to_string());
            let from_parser = match &parsed {
                Ok(p) => verdict_from_parser(p, rules),
                Err(_) => XdpVerdict::Malformed,
            };
            if from_parser == XdpVerdict::Malformed {
                malformed_expected[k] += 1;
            }
            let want = match exception {
                Some(e) => {
                    if (if k == 0 { e.1 } else { e.2 }) != from_parser {
                        exceptions_used.insert(e.0);
                    }
                    if k == 0 {
                        e.1
                    } else {
                        e.2
                    }
                }
                None => from_parser,
            };
            if verdict != want {
                failures.push(format!(
                    "{} [{set}]: program {verdict}, want {want} (parser: {pv})",
                    f.name
                ));
            }
            // Whatever the exception table says, a file the parser rejects hits no
            // rule unless a skipped check explains it.
            if let (Err(e), XdpVerdict::Hit(_)) = (&parsed, verdict) {
                if why_program_accepts(&model.skipped, e).is_none() {
                    failures.push(format!(
                        "{} [{set}]: malformed ({}) yet hit a rule, unexplained",
                        f.name,
                        e.kind()
                    ));
                }
            }
            let modelled = verdict_from_model(&model, f.bytes.len(), rules);
            if verdict != modelled {
                failures.push(format!(
                    "{} [{set}]: program {verdict}, model of xdpool.bpf.c {modelled}",
                    f.name
                ));
            }
            if verdict == XdpVerdict::TooShort {
                too_short[k] += 1;
            }
        }
        let _ = writeln!(
            table,
            "{:<36} {:<26} {:<20} {:<20} {}",
            f.name,
            pv,
            got[0],
            got.get(1).map_or("", String::as_str),
            exception.map_or("", |e| e.3)
        );
    }
    println!("{table}");
    for (k, runner) in runners.iter().enumerate() {
        let c = runner.steering.counters().unwrap();
        println!(
            "{}: {c:?}, rule hits {:?}",
            rule_sets[k].0,
            runner.steering.rule_hits().unwrap()
        );
        // Every file but the refused one was counted exactly once.
        assert_eq!(c.total(), frames.len() as u64 - too_short[k], "{c:?}");
        assert_eq!(c.steered, 0, "XSKMAP is empty");
    }
    for e in EXCEPTIONS {
        assert!(
            frames.iter().any(|f| f.name == e.0),
            "exception for a file not in the corpus: {}",
            e.0
        );
        assert!(
            exceptions_used.contains(e.0),
            "{}: program agrees with the parser; drop the stale exception",
            e.0
        );
    }
    // Most malformed files are counted malformed: the exceptions are few and named.
    let malformed_counted = runners[0].steering.counters().unwrap().malformed;
    let rejected_elsewhere = EXCEPTIONS
        .iter()
        .filter(|e| {
            frames
                .iter()
                .any(|f| f.name == e.0 && parse(&f.bytes).is_err())
        })
        .count() as u64;
    assert_eq!(
        malformed_counted,
        malformed_expected[0] - rejected_elsewhere
    );
    assert!(
        failures.is_empty(),
        "{} disagreement(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The rule lists of `other_shapes_follow_the_model`, one per program shape that
/// the two tests above do not load.
fn other_shapes() -> Vec<(&'static str, Vec<Rule>)> {
    let steer = |proto, dst_port, dst_prefix| Rule {
        matcher: RuleMatch::dst(proto, dst_port, dst_prefix),
        action: RuleAction::Steer,
    };
    let any_v6 = Some(("::".parse().unwrap(), 0));
    let src = |proto, src_port, prefix: Option<(&str, u8)>, vlan| Rule {
        matcher: RuleMatch::Fields {
            proto,
            dst_port: None,
            dst_prefix: None,
            src_port,
            src_prefix: prefix.map(|(a, l)| (a.parse().unwrap(), l)),
            vlan,
        },
        action: RuleAction::Steer,
    };
    let any_v4 = Some(("0.0.0.0".parse().unwrap(), 0));
    let every_field = Rule {
        matcher: RuleMatch::Fields {
            proto: Some(UDP),
            dst_port: Some((0, 65535)),
            dst_prefix: any_v4,
            src_port: Some((0, 65535)),
            src_prefix: any_v4,
            vlan: Some(10),
        },
        action: RuleAction::Steer,
    };
    let mut sixty_four: Vec<Rule> = (0..63u16)
        .map(|i| steer(Some(UDP), Some((100 + i, 100 + i)), None))
        .collect();
    sixty_four.push(steer(Some(TCP), None, None));
    vec![
        // No parse: rule 0 takes every frame, malformed ones included.
        ("match-all", vec![Rule::all(RuleAction::Steer)]),
        // IPv4 only: IPv6 and non-IP frames pass unparsed (counted passed).
        ("ipv4-only", vec![steer(Some(UDP), None, any_v4)]),
        // IPv6 only, ports: IPv4 and non-IP frames pass unparsed.
        ("ipv6-only", vec![steer(None, Some((0, 65535)), any_v6)]),
        // The longest list, proto and port conditions.
        ("64-rules", sixty_four),
        // The source and VLAN fields: VLAN-only rules also parse non-IP frames. The
        // corpus' tags: vlan_single_udp 100, vlan_double_udp 10 outside 20,
        // vlan_double_8100_ipv6_tcp 30 outside 40; an inner id never matches.
        (
            "vlan",
            vec![
                src(None, None, None, Some(100)),
                src(Some(UDP), None, None, Some(20)),
                src(Some(TCP), None, None, Some(30)),
                src(None, Some((0, 65535)), None, None),
            ],
        ),
        (
            "src-v4",
            vec![
                src(
                    Some(UDP),
                    Some((1024, 4096)),
                    Some(("198.18.0.0", 15)),
                    None,
                ),
                src(None, None, Some(("0.0.0.0", 0)), None),
            ],
        ),
        (
            "src-v6",
            vec![
                src(None, None, Some(("2001:2::", 48)), None),
                src(Some(TCP), Some((0, 65535)), Some(("::", 0)), None),
            ],
        ),
        (
            "every-field",
            vec![
                every_field,
                src(None, None, None, Some(1)),
                src(None, Some((0, 65535)), None, None),
            ],
        ),
    ]
}

/// Every other shape against the model of xdpool.h, on the corpus and a short
/// bounded fuzz of it: the verdict and the one-counter-per-frame accounting.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn other_shapes_follow_the_model() {
    require_root!();
    let frames: Vec<Vec<u8>> = corpus().into_iter().map(|f| f.bytes).collect();
    let per_shape = env_u64("XDPOOL_XDP_FUZZ_FRAMES", 100_000) / 10;
    let mut failures = Vec::new();
    for (set, rules) in other_shapes() {
        let mut runner = Runner::new(rules.clone());
        let shape = runner.steering.shape().to_string();
        let mut rng = XorShift64::new(0x5a_9e ^ per_shape);
        let mut buf = Vec::new();
        let (mut ran, mut refused) = (0u64, 0u64);
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for n in 0..frames.len() as u64 + per_shape {
            let frame: &[u8] = if (n as usize) < frames.len() {
                &frames[n as usize]
            } else {
                let base = &frames[rng.below(frames.len())];
                mutate(&mut rng, base, &frames, &mut buf, &[]);
                buf.truncate(MAX_FUZZ_FRAME);
                &buf
            };
            ran += 1;
            let verdict = match runner.run(frame) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("[{set}] {e}; frame {}", hex(frame)));
                    continue;
                }
            };
            refused += u64::from(verdict == XdpVerdict::TooShort);
            *seen.entry(verdict.to_string()).or_default() += 1;
            let model = xdp_model(frame);
            let want = verdict_from_model(&model, frame.len(), &rules);
            if verdict != want {
                failures.push(format!(
                    "[{set}] program {verdict}, model {want}; frame {}",
                    hex(frame)
                ));
            }
            if failures.len() > 10 {
                break;
            }
        }
        let c = runner.steering.counters().unwrap();
        println!("{set} ({shape}): {ran} frames, verdicts {seen:?}, counters {c:?}");
        assert!(
            failures.is_empty(),
            "{} failure(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
        assert_eq!(
            c.total(),
            ran - refused,
            "[{set}] one counter step per frame: {c:?}"
        );
        assert_eq!(
            runner.steering.rule_hits().unwrap().iter().sum::<u64>(),
            c.no_socket,
            "[{set}] rule hits"
        );
        if set == "match-all" {
            assert_eq!((c.malformed, c.passed), (0, 0), "match-all parses nothing");
        } else {
            assert!(
                c.passed > 0 && c.no_socket > 0,
                "[{set}] the frames should reach both verdicts: {c:?}"
            );
        }
    }
}

// ---- bounded kernel-side fuzz ---------------------------------------------------

/// A number from the environment, hex (`0x...`, as the reports print seeds) or decimal.
fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => xdpool::internal::wire::fuzz::parse_seed(&v)
            .unwrap_or_else(|| panic!("{name}={v:?}: use hex (0x...) or decimal")),
        Err(_) => default,
    }
}

/// Offsets of length and type fields in a frame the parser accepts, for the
/// structure-aware mutations.
fn fields_of(frame: &[u8], out: &mut Vec<usize>) {
    out.clear();
    out.push(12);
    if let Ok(p) = parse(frame) {
        let l3 = p.l3_offset();
        out.push(l3 - 2);
        match p.l3() {
            L3::V4 { .. } => out.extend([l3, l3 + 2, l3 + 6, l3 + 9, l3 + 20, l3 + 21]),
            L3::V6 { .. } => out.extend([l3, l3 + 4, l3 + 6, l3 + 40, l3 + 41, l3 + 42, l3 + 43]),
            L3::None => {}
        }
        if let Some(l4) = p.l4_offset() {
            out.extend([l4 + 2, l4 + 4, l4 + 12]);
        }
    }
    out.retain(|&o| o + 1 < frame.len());
}

/// Steer rules that tell apart "UDP with ports", "TCP with ports" and "anything else".
fn fuzz_rules() -> Vec<Rule> {
    let any_port = |proto| Rule {
        matcher: RuleMatch::dst(Some(proto), Some((0, u16::MAX)), None),
        action: RuleAction::Steer,
    };
    vec![any_port(UDP), any_port(TCP), Rule::all(RuleAction::Steer)]
}

#[derive(Default)]
struct Tally {
    count: u64,
    sample: Vec<u8>,
}

fn tally(map: &mut BTreeMap<String, Tally>, key: String, frame: &[u8]) {
    let t = map.entry(key).or_default();
    t.count += 1;
    if t.sample.is_empty() || frame.len() < t.sample.len() {
        t.sample = frame.to_vec();
    }
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn bounded_fuzz_never_steers_what_the_parser_rejects_and_counts_each_frame_once() {
    require_root!();
    let max_frames = env_u64("XDPOOL_XDP_FUZZ_FRAMES", 100_000);
    let budget = Duration::from_secs(env_u64("XDPOOL_FUZZ_SECS", 30));
    let seed = xdpool::internal::wire::fuzz::seed_from_env("XDPOOL_FUZZ_SEED");
    println!("kernel fuzz seed {seed:#x} (replay: XDPOOL_FUZZ_SEED={seed:#x})");
    let rules = fuzz_rules();
    let mut runner = Runner::new(rules.clone());
    let mut rng = XorShift64::new(seed);

    let mut pool: Vec<Vec<u8>> = corpus()
        .into_iter()
        .map(|f| f.bytes)
        .filter(|b| !b.is_empty())
        .collect();
    let seeds = pool.len();
    let mut seen_outcomes = HashSet::new();
    let mut verdicts: BTreeMap<String, u64> = BTreeMap::new();
    let mut accepted_by_design: BTreeMap<String, Tally> = BTreeMap::new();
    let mut rejected_by_program: BTreeMap<String, Tally> = BTreeMap::new();
    let mut l4_differs: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures: Vec<String> = Vec::new();
    let (mut execs, mut refused, mut parser_ok, mut parser_err) = (0u64, 0u64, 0u64, 0u64);
    let mut buf = Vec::with_capacity(MAX_FUZZ_FRAME);
    let mut fields = Vec::new();
    let mut current = 0;
    let start = Instant::now();

    while execs < max_frames && start.elapsed() < budget && failures.len() < 10 {
        // The corpus itself first, then mutations of the pool.
        if (execs as usize) < seeds {
            buf.clear();
            buf.extend_from_slice(&pool[execs as usize]);
        } else {
            if execs % 32 == 0 {
                current = rng.below(pool.len());
                fields_of(&pool[current], &mut fields);
            }
            mutate(&mut rng, &pool[current], &pool, &mut buf, &fields);
            buf.truncate(MAX_FUZZ_FRAME);
        }
        execs += 1;
        let frame = buf.as_slice();
        let verdict = match runner.run(frame) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{e}; frame {}", hex(frame)));
                continue;
            }
        };
        *verdicts.entry(verdict.to_string()).or_default() += 1;
        if verdict == XdpVerdict::TooShort {
            refused += 1;
            continue;
        }
        let model = xdp_model(frame);
        let modelled = verdict_from_model(&model, frame.len(), &rules);
        if verdict != modelled {
            failures.push(format!(
                "program {verdict}, model of xdpool.bpf.c {modelled}; frame {}",
                hex(frame)
            ));
        }
        let parsed = parse(frame);
        let category = match (&parsed, verdict) {
            (Ok(p), XdpVerdict::Malformed) => {
                parser_ok += 1;
                let why = why_program_rejects(p, &model);
                tally(&mut rejected_by_program, why.to_string(), frame);
                why
            }
            (Ok(p), v) => {
                parser_ok += 1;
                let from_parser = verdict_from_parser(p, &rules);
                if v != from_parser {
                    // Same acceptance, different L4 (AH / 6-header limit hide the port).
                    let why = if model.skipped.ipv6_walk_stopped {
                        "ipv6 chain stopped early"
                    } else {
                        "unexplained"
                    };
                    tally(
                        &mut l4_differs,
                        format!("parser {from_parser} / program {v}: {why}"),
                        frame,
                    );
                    if why == "unexplained" {
                        failures.push(format!("parser {from_parser}, program {v}, no skipped check explains it; frame {}", hex(frame)));
                    }
                }
                "agree"
            }
            (Err(_), XdpVerdict::Malformed) => {
                parser_err += 1;
                "agree"
            }
            (Err(e), v) => {
                parser_err += 1;
                // (b): a frame the parser rejects reaches a rule only through a check
                // the program skips by design.
                match why_program_accepts(&model.skipped, e) {
                    Some(why) => {
                        tally(&mut accepted_by_design, why.to_string(), frame);
                        why
                    }
                    None => {
                        failures.push(format!(
                            "parser rejects ({e}) but program says {v}; frame {}",
                            hex(frame)
                        ));
                        "unexplained accept"
                    }
                }
            }
        };
        let kind = parsed.as_ref().map_or_else(|e| e.kind(), |_| "ok");
        if seen_outcomes.insert((verdict, kind, category)) && pool.len() < 1024 {
            pool.push(frame.to_vec());
        }
    }
    let elapsed = start.elapsed();
    let c = runner.steering.counters().unwrap();
    let hits = runner.steering.rule_hits().unwrap();

    println!(
        "kernel fuzz: seed {seed:#x}, {execs} frames in {:.2} s ({:.0} frames/s), {refused} refused (<14 B), pool {} (from {seeds} corpus frames)",
        elapsed.as_secs_f64(),
        execs as f64 / elapsed.as_secs_f64().max(1e-9),
        pool.len()
    );
    println!("program verdicts: {verdicts:?}");
    println!("counters {c:?}, rule hits {hits:?}; parser ok {parser_ok}, parser err {parser_err}");
    for (title, map) in [
        (
            "parser rejects, program accepts (by design)",
            &accepted_by_design,
        ),
        (
            "parser accepts, program counts malformed",
            &rejected_by_program,
        ),
        ("both accept, rule differs", &l4_differs),
    ] {
        println!("{title}:");
        for (why, t) in map {
            println!(
                "  {:>6}  {why}\n          shortest: {}",
                t.count,
                hex(&t.sample)
            );
        }
    }

    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    // (a) over the whole run: one counter step per frame the kernel accepted.
    assert_eq!(c.total(), execs - refused, "{c:?}");
    assert_eq!(hits.iter().sum::<u64>(), c.no_socket + c.steered);
    assert_eq!(c.steered, 0, "XSKMAP is empty");
    assert_eq!(
        (c.dropped, c.passed),
        (0, 0),
        "the last rule matches every well-formed frame"
    );
    assert!(
        execs as usize > seeds,
        "the budget ran out before any mutation"
    );
    assert!(
        c.malformed > 0 && c.no_socket > 0,
        "the fuzz should reach both verdicts: {c:?}"
    );
}

// ---- reproducer for the disagreement the fuzz finds ------------------------------

fn corpus_file(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../xdpool/tests/corpus/wire")
            .join(name),
    )
    .unwrap()
}

/// The first fragment of a fragmented UDP datagram carries the datagram's UDP
/// length, larger than the fragment. The parser accepts it (and the kernel stack
/// reassembles it); xdpool.bpf.c's parse_l4 compares the UDP length with the
/// fragment's payload and counts it malformed, so a port rule never sees the first
/// fragment while a protocol rule steers the later ones away from the kernel.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn udp_first_fragment_with_datagram_length_reaches_port_rules() {
    require_root!();
    // IPv4: MF set, offset 0, 32 bytes of UDP in this fragment, UDP length 1024.
    let mut v4 = corpus_file("ipv4_frag_first_udp.bin");
    v4[38..40].copy_from_slice(&1024u16.to_be_bytes());
    // IPv6: the atomic fragment with M set and UDP length 1000 (8 bytes present).
    let mut v6 = corpus_file("ipv6_atomic_frag_udp.bin");
    v6[57] |= 1;
    v6[66..68].copy_from_slice(&1000u16.to_be_bytes());
    let rules = vec![Rule {
        matcher: RuleMatch::dst(Some(UDP), Some((9, 9)), None),
        action: RuleAction::Steer,
    }];
    let mut runner = Runner::new(rules.clone());
    for (what, frame) in [("IPv4", &v4), ("IPv6", &v6)] {
        let p =
            parse(frame).unwrap_or_else(|e| panic!("{what}: parser rejects the reproducer: {e}"));
        assert!(
            p.fragment().is_some_and(|f| f.is_first() && f.more),
            "{what}: not a first fragment"
        );
        assert_eq!(
            verdict_from_parser(&p, &rules),
            XdpVerdict::Hit(0),
            "{what}"
        );
        let got = runner.run(frame).unwrap();
        assert_eq!(
            got,
            XdpVerdict::Hit(0),
            "{what} first fragment {}: program says {got}",
            hex(frame)
        );
    }
}
