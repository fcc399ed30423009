//! The worker's classifier against the XDP program, over every match field (root
//! only: the real verifier and `BPF_PROG_TEST_RUN`; nothing is sent anywhere).
//!
//! Both sides decide which rule a frame matches: `xdpool_steer` in the kernel and
//! `worker::classify::Classifier` (over `wire::parse`) in the worker, which acts on
//! the frame under the rule the program steered it by. For every non-empty set of
//! the six match fields (proto, dst_port, src_port, dst, src, vlan: 63 sets, each a
//! program shape of its own, some with a catch-all tail that adds non-IP frames),
//! the match-all shape, and 64 rules using every field (the verifier's longest
//! program), random rule lists (through `plan::steer_rule`, the product's
//! conversion) and random well-formed frames (untagged, 802.1Q, QinQ; IPv4 with and
//! without options, non-first fragments, IPv6 with and without a hop-by-hop
//! header; UDP, TCP, ICMP; ARP), half of them aimed at one rule's values, must get
//! the same first match on both sides, and the program must count each frame once.
//!
//! Frames per list: `XDPOOL_XDP_FIELDS_FRAMES` (default 300); seed
//! `XDPOOL_FUZZ_SEED` (printed).
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use xdpool::internal::config::{Action, MacRewrite, ValidRule};
use xdpool::internal::plan::steer_rule;
use xdpool::internal::steer::{abi, Rule, Shape, Steering};
use xdpool::internal::wire::build::{ExtHeader, FrameBuilder};
use xdpool::internal::wire::fuzz::XorShift64;
use xdpool::internal::worker::classify::{verdict, Classifier};

#[macro_use]
mod common;

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const UDP: u8 = 17;
const TCP: u8 = 6;

/// The six fields, in the bit order of a field set, with their `MATCH_*` bit.
const FIELDS: [(&str, u32); 6] = [
    ("proto", abi::MATCH_PROTO),
    ("dst_port", abi::MATCH_DST_PORT),
    ("src_port", abi::MATCH_SRC_PORT),
    ("dst", abi::MATCH_DST_ADDR),
    ("src", abi::MATCH_SRC_ADDR),
    ("vlan", abi::MATCH_VLAN),
];
const F_PROTO: u8 = 1;
const F_DPORT: u8 = 2;
const F_SPORT: u8 = 4;
const F_DST: u8 = 8;
const F_SRC: u8 = 16;
const F_VLAN: u8 = 32;

/// Values rules and frames draw from, few enough that they meet often.
const PORTS: [u16; 6] = [0, 9, 53, 1024, 4500, 65535];
const VLANS: [u16; 6] = [0, 1, 5, 100, 2049, 4094];
const V4: [[u8; 4]; 4] = [
    [198, 18, 0, 1],
    [198, 18, 0, 2],
    [198, 18, 1, 7],
    [198, 19, 200, 3],
];
const V6: [&str; 4] = [
    "2001:2::1",
    "2001:2::2",
    "2001:2:0:1::7",
    "2001:2:0:ff00::3",
];
const V4_LENS: [u8; 7] = [0, 8, 15, 16, 24, 31, 32];
const V6_LENS: [u8; 7] = [0, 16, 32, 48, 64, 127, 128];

fn pick<T: Copy>(rng: &mut XorShift64, from: &[T]) -> T {
    from[rng.below(from.len())]
}

fn v4(rng: &mut XorShift64) -> Ipv4Addr {
    Ipv4Addr::from(pick(rng, &V4))
}

fn v6(rng: &mut XorShift64) -> Ipv6Addr {
    pick(rng, &V6).parse().unwrap()
}

fn range(rng: &mut XorShift64) -> (u16, u16) {
    let lo = pick(rng, &PORTS);
    let hi = if rng.one_in(2) {
        lo
    } else {
        lo.saturating_add(rng.below(2000) as u16)
    };
    (lo, hi)
}

/// A rule with exactly the fields of `set` (the prefixes of one family).
fn random_rule(rng: &mut XorShift64, set: u8) -> ValidRule {
    let ports = set & (F_DPORT | F_SPORT) != 0;
    let proto = (set & F_PROTO != 0).then(|| {
        if ports {
            pick(rng, &[UDP, TCP])
        } else {
            pick(rng, &[UDP, TCP, 1, 58])
        }
    });
    let six = rng.one_in(2);
    let mut prefix = || -> (IpAddr, u8) {
        if six {
            (IpAddr::V6(v6(rng)), pick(rng, &V6_LENS))
        } else {
            (IpAddr::V4(v4(rng)), pick(rng, &V4_LENS))
        }
    };
    let dst = (set & F_DST != 0).then(&mut prefix);
    let src = (set & F_SRC != 0).then(&mut prefix);
    let action = pick(
        rng,
        &[Action::Drop, Action::L2fwd, Action::Pass, Action::Xdpdrop],
    );
    ValidRule {
        proto,
        dst_port: (set & F_DPORT != 0).then(|| range(rng)),
        dst,
        src_port: (set & F_SPORT != 0).then(|| range(rng)),
        src,
        vlan: (set & F_VLAN != 0).then(|| pick(rng, &VLANS)),
        action,
        port: 0,
        to: None,
        mac: MacRewrite::Swap,
        mirror_to: None,
        call: None,
    }
}

fn catch_all(action: Action) -> ValidRule {
    ValidRule {
        proto: None,
        dst_port: None,
        dst: None,
        src_port: None,
        src: None,
        vlan: None,
        action,
        port: 0,
        to: None,
        mac: MacRewrite::Swap,
        mirror_to: None,
        call: None,
    }
}

/// 1..=4 rules whose fields together are exactly `set`; sometimes a catch-all last.
fn random_list(rng: &mut XorShift64, set: u8) -> Vec<ValidRule> {
    let n = 1 + rng.below(4);
    let mut sets: Vec<u8> = (0..n)
        .map(|_| loop {
            let s = (rng.next_u64() as u8) & set;
            if s != 0 {
                break s;
            }
        })
        .collect();
    let missing = set & !sets.iter().fold(0, |a, s| a | s);
    let last = rng.below(n);
    sets[last] |= missing;
    let mut rules: Vec<ValidRule> = sets.into_iter().map(|s| random_rule(rng, s)).collect();
    if rng.one_in(3) {
        rules.push(catch_all(pick(rng, &[Action::Drop, Action::Pass])));
    }
    rules
}

fn in_range(r: Option<(u16, u16)>, rng: &mut XorShift64) -> u16 {
    match r {
        None => pick(rng, &PORTS),
        Some((lo, hi)) => {
            if rng.one_in(2) {
                lo
            } else {
                hi
            }
        }
    }
}

/// A well-formed frame; with `aim`, one that a rule's values would match (before
/// the random choices that may still miss it: the other family, no tag, ICMP...).
fn random_frame(rng: &mut XorShift64, aim: Option<&ValidRule>) -> Vec<u8> {
    let mut b = FrameBuilder::new();
    let tags = pick(rng, &[0usize, 1, 1, 2]);
    let want_vlan = aim.and_then(|r| r.vlan);
    for i in 0..tags {
        let id = if i == 0 {
            want_vlan.unwrap_or_else(|| pick(rng, &VLANS))
        } else {
            pick(rng, &VLANS)
        };
        let tpid = if i == 0 && tags == 2 && rng.one_in(2) {
            0x88a8
        } else {
            0x8100
        };
        // PCP and DEI bits above the id: only the low 12 bits are the id.
        let tci = (rng.below(16) as u16) << 12 | id;
        b = b.vlan(tpid, tci);
    }
    let prefix_family = aim.and_then(|r| r.dst.or(r.src)).map(|(a, _)| a.is_ipv6());
    let kind = match prefix_family {
        Some(six) if !rng.one_in(8) => usize::from(six),
        _ => pick(rng, &[0usize, 0, 1, 1, 2]),
    };
    // The aimed rule's addresses themselves (the prefix's own address is inside it).
    let (want_src, want_dst) = (
        aim.and_then(|r| r.src).map(|p| p.0),
        aim.and_then(|r| r.dst).map(|p| p.0),
    );
    match kind {
        0 => {
            let addr = |want: Option<IpAddr>, rng: &mut XorShift64| match want {
                Some(IpAddr::V4(a)) => a,
                _ => v4(rng),
            };
            let (src, dst) = (addr(want_src, rng), addr(want_dst, rng));
            b = b.ipv4(src, dst);
            if rng.one_in(4) {
                b = b.ipv4_options(&[1, 1, 1, 1]); // NOPs: the full parse, not parse_common
            }
            if rng.one_in(8) {
                b = b.ipv4_fragment(8 * (1 + rng.below(100) as u16), rng.one_in(2), 7);
                // no L4 header
            }
        }
        1 => {
            let addr = |want: Option<IpAddr>, rng: &mut XorShift64| match want {
                Some(IpAddr::V6(a)) => a,
                _ => v6(rng),
            };
            let (src, dst) = (addr(want_src, rng), addr(want_dst, rng));
            b = b.ipv6(src, dst);
            if rng.one_in(4) {
                b = b.ipv6_ext(ExtHeader::HopByHop { len8: 0 });
            }
        }
        _ => return b.raw_ethertype(0x0806).payload(&[0u8; 28]).build().bytes,
    }
    let proto = aim
        .and_then(|r| r.proto)
        .filter(|_| !rng.one_in(8))
        .unwrap_or_else(|| pick(rng, &[UDP, UDP, TCP, 1, 58]));
    let (sport, dport) = (
        in_range(aim.and_then(|r| r.src_port), rng),
        in_range(aim.and_then(|r| r.dst_port), rng),
    );
    b = match proto {
        UDP => b.udp(sport, dport),
        TCP => b.tcp(sport, dport, 0x10),
        p => b.ip_proto(p),
    };
    b.payload(&[0xab; 18]).build().bytes
}

/// The program's verdict on one frame: the rule it hit (by the hit counters), after
/// checking that exactly one counter moved and the action is the rule's.
struct Runner {
    steering: Steering,
    rules: Vec<Rule>,
    hits: Vec<u64>,
    counted: u64,
}

impl Runner {
    fn new(rules: Vec<Rule>) -> Runner {
        let steering = Steering::with_rules(&rules)
            .unwrap_or_else(|e| panic!("the verifier refused the program for {rules:?}: {e}"));
        let hits = steering.rule_hits().unwrap();
        Runner {
            steering,
            rules,
            hits,
            counted: 0,
        }
    }

    fn run(&mut self, frame: &[u8]) -> Result<Option<usize>, String> {
        let action = self
            .steering
            .test_run(frame)
            .map_err(|e| format!("test run: {e}"))?;
        let hits = self.steering.rule_hits().unwrap();
        let before = std::mem::replace(&mut self.hits, hits);
        let moved: Vec<usize> = (0..before.len())
            .filter(|&i| self.hits[i] != before[i])
            .collect();
        self.counted += 1;
        let c = self.steering.counters().unwrap();
        if c.total() != self.counted || c.malformed != 0 || c.steered != 0 {
            return Err(format!(
                "counters {c:?} after {} well-formed frames (no socket)",
                self.counted
            ));
        }
        match moved.as_slice() {
            [] if action == XDP_PASS => Ok(None),
            [i] if self.hits[*i] - before[*i] == 1 => {
                let want = match self.rules[*i].action {
                    xdpool::internal::steer::RuleAction::Drop => XDP_DROP,
                    _ => XDP_PASS,
                };
                if action == want {
                    Ok(Some(*i))
                } else {
                    Err(format!("rule {i} hit, action {action}, want {want}"))
                }
            }
            _ => Err(format!("rule hits moved at {moved:?}, action {action}")),
        }
    }
}

fn fields_of(set: u8) -> String {
    let names: Vec<&str> = FIELDS
        .iter()
        .enumerate()
        .filter(|(i, _)| set & (1 << i) != 0)
        .map(|(_, f)| f.0)
        .collect();
    names.join("|")
}

fn hex(frame: &[u8]) -> String {
    frame.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `frames` random frames over one list; returns (the program's shape, frames,
/// matched by some rule).
fn check_list(
    rng: &mut XorShift64,
    rules: &[ValidRule],
    frames: u64,
    failures: &mut Vec<String>,
) -> (Shape, u64, u64) {
    let steer: Vec<Rule> = rules.iter().map(steer_rule).collect();
    let classifier = Classifier::new(rules.to_vec());
    let mut runner = Runner::new(steer);
    let shape = runner.steering.shape().clone();
    let mut matched = 0;
    for _ in 0..frames {
        let aim = rng.one_in(2).then(|| &rules[rng.below(rules.len())]);
        let frame = random_frame(rng, aim);
        if let Err(e) = xdpool::internal::wire::parse(&frame) {
            failures.push(format!(
                "the generator built a frame the parser rejects ({e}): {}",
                hex(&frame)
            ));
            continue;
        }
        let worker = classifier.first_match(&frame);
        // The verdict the worker acts on (its short paths included: the protocol
        // table, the plain-frame walk) is the matched rule's, for a frame it gets.
        if let Some(want) = worker.and_then(|i| verdict(&rules[i], i)) {
            let got = classifier.classify(&frame);
            if got != want {
                failures.push(format!(
                    "classify gave {:?}, rule {worker:?} says {:?}; frame {}",
                    got.act(),
                    want.act(),
                    hex(&frame)
                ));
            }
        }
        match runner.run(&frame) {
            Ok(program) if program == worker => matched += u64::from(program.is_some()),
            Ok(program) => failures.push(format!(
                "program matched rule {program:?}, classifier {worker:?}; rules {:?}; frame {}",
                runner
                    .rules
                    .iter()
                    .map(|r| r.matcher.to_string())
                    .collect::<Vec<_>>(),
                hex(&frame)
            )),
            Err(e) => failures.push(format!("{e}; frame {}", hex(&frame))),
        }
        if failures.len() >= 5 {
            break;
        }
    }
    (shape, frames, matched)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| xdpool::internal::wire::fuzz::parse_seed(&v))
        .unwrap_or(default)
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn classifier_and_program_pick_the_same_rule_over_every_field_set() {
    require_root!();
    let seed = xdpool::internal::wire::fuzz::seed_from_env("XDPOOL_FUZZ_SEED");
    let per_list = env_u64("XDPOOL_XDP_FIELDS_FRAMES", 300);
    println!("seed {seed:#x} (replay: XDPOOL_FUZZ_SEED={seed:#x}), {per_list} frames per list");
    let mut rng = XorShift64::new(seed);
    let mut failures = Vec::new();
    let (mut frames, mut matched, mut lists) = (0u64, 0u64, 0u64);
    for set in 1u8..64 {
        let rules = random_list(&mut rng, set);
        // Each field set is its own shape: the program parses and tests exactly these.
        let want_bits: u32 = FIELDS
            .iter()
            .enumerate()
            .filter(|(i, _)| set & (1 << i) != 0)
            .map(|(_, f)| f.1)
            .sum();
        let (shape, n, m) = check_list(&mut rng, &rules, per_list, &mut failures);
        assert_eq!(
            shape.fields(),
            want_bits,
            "fields {}: shape {shape}",
            fields_of(set)
        );
        println!(
            "fields {:<40} {shape}: {m} of {n} frames matched a rule",
            fields_of(set)
        );
        (frames, matched, lists) = (frames + n, matched + m, lists + 1);
        assert!(
            failures.is_empty(),
            "fields {}: {} failure(s):\n{}",
            fields_of(set),
            failures.len(),
            failures.join("\n")
        );
    }
    // Match-all, then the longest list with every field (the verifier's worst case).
    let mut all = vec![catch_all(Action::Drop)];
    all.extend(random_list(&mut rng, 63));
    let mut longest: Vec<ValidRule> = (0..abi::MAX_RULES)
        .map(|_| random_rule(&mut rng, 63))
        .collect();
    longest[abi::MAX_RULES - 1] = random_rule(&mut rng, F_VLAN);
    for (name, rules) in [("match-all", all), ("64 rules, every field", longest)] {
        let (shape, n, m) = check_list(&mut rng, &rules, per_list, &mut failures);
        println!("{name} ({shape}): {m} of {n} frames matched a rule");
        (frames, matched, lists) = (frames + n, matched + m, lists + 1);
        assert!(
            failures.is_empty(),
            "{name}: {} failure(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    println!("{lists} lists, {frames} frames, {matched} matched a rule, the rest no rule, all alike on both sides");
    // Both outcomes were reached often, so agreement is no accident of one side.
    assert!(
        matched > frames / 10 && matched < frames * 9 / 10,
        "{matched} of {frames} matched"
    );
}
