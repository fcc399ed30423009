//! The XDP programs under the real verifier and `BPF_PROG_TEST_RUN` (root only).
//!
//! Frames are built by hand so that each malformation is exactly the one named.
//! No frame is sent anywhere; only `attach_*` creates a network namespace (with
//! a veth pair wholly inside it) and removes it on drop.

use std::net::IpAddr;

use xdpool::internal::steer::{
    xdp_program_on, Ceiling, Rule, RuleAction, RuleMatch, SteerError, Steering, XdpAttachMode,
    XdpCounters, TEST_RUN_MIN_FRAME,
};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const UDP: u8 = 17;
const TCP: u8 = 6;

#[macro_use]
mod common;

// ---- frame builders ------------------------------------------------------

/// Ethernet header with the given VLAN tag protocol ids (outer first).
fn eth(tpids: &[u16], ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    for (i, tpid) in tpids.iter().enumerate() {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&(100 + i as u16).to_be_bytes()); // TCI: VLAN id
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn udp(dport: u16, payload: usize) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&40000u16.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.resize(8 + payload, 0xab);
    h
}

fn tcp(dport: u16, data_offset_words: u8) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0..2].copy_from_slice(&40000u16.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[12] = data_offset_words << 4;
    h[13] = 0x02; // SYN
    h
}

/// IPv4 header (IHL 5, total length correct) followed by `l4`.
fn ipv4(proto: u8, dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&[198, 18, 0, 1]);
    h[16..20].copy_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

/// IPv6 header (payload length correct) followed by `rest`.
fn ipv6(next: u8, dst: &str, rest: &[u8]) -> Vec<u8> {
    let dst: std::net::Ipv6Addr = dst.parse().unwrap();
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
    h[6] = next;
    h[7] = 64;
    h[8..24].copy_from_slice(
        &"2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    h[24..40].copy_from_slice(&dst.octets());
    h.extend_from_slice(rest);
    h
}

/// A hop-by-hop / routing / destination-options header of `8 * units` bytes.
fn ext_opts(next: u8, units: u8) -> Vec<u8> {
    let mut h = vec![0u8; 8 * units as usize];
    h[0] = next;
    h[1] = units - 1;
    h
}

fn ext_frag(next: u8, offset_units: u16) -> Vec<u8> {
    let mut h = vec![0u8; 8];
    h[0] = next;
    h[2..4].copy_from_slice(&(offset_units << 3).to_be_bytes());
    h[4..8].copy_from_slice(&7u32.to_be_bytes());
    h
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn v4_udp(dst: [u8; 4], dport: u16) -> Vec<u8> {
    cat(&[&eth(&[], ETH_P_IP), &ipv4(UDP, dst, &udp(dport, 4))])
}

fn v6_udp(dst: &str, dport: u16) -> Vec<u8> {
    cat(&[&eth(&[], ETH_P_IPV6), &ipv6(UDP, dst, &udp(dport, 4))])
}

fn arp() -> Vec<u8> {
    cat(&[&eth(&[], ETH_P_ARP), &[0u8; 28]])
}

fn fields(
    proto: Option<u8>,
    dst_port: Option<(u16, u16)>,
    dst_prefix: Option<(&str, u8)>,
) -> RuleMatch {
    RuleMatch::Fields {
        proto,
        dst_port,
        dst_prefix: dst_prefix.map(|(a, l)| (a.parse::<IpAddr>().unwrap(), l)),
        src_port: None,
        src_prefix: None,
        vlan: None,
    }
}

fn rule(matcher: RuleMatch, action: RuleAction) -> Rule {
    Rule { matcher, action }
}

/// The single-buffer program (what a port with an MTU of 1500 attaches) with `rules`;
/// `single_and_multi_buffer_programs_agree` holds the multi-buffer one to it.
fn loaded(rules: &[Rule]) -> Steering {
    let mut s = Steering::load().expect("xdpool_steer must pass the verifier and load");
    s.set_rules(rules).expect("set_rules");
    s.use_frags(false)
        .expect("xdpool_steer_1buf must pass the verifier and load");
    assert!(!s.frags());
    s
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn with_rules_loads_the_same_program_as_load_then_set_rules() {
    require_root!();
    let rules = [
        rule(fields(Some(UDP), Some((9, 9)), None), RuleAction::Drop),
        Rule::all(RuleAction::Pass),
    ];
    let direct = Steering::with_rules(&rules).expect("with_rules");
    let stepwise = loaded(&rules);
    assert_eq!(direct.shape(), stepwise.shape());
    for frame in [
        v4_udp([198, 18, 0, 2], 9),
        v4_udp([198, 18, 0, 2], 10),
        arp(),
    ] {
        assert_eq!(
            direct.test_run(&frame).unwrap(),
            stepwise.test_run(&frame).unwrap()
        );
    }
    assert_eq!(direct.rule_hits().unwrap(), vec![1, 2]);
    assert_eq!(direct.counters().unwrap(), stepwise.counters().unwrap());
}

// ---- BPF_PROG_TEST_RUN ---------------------------------------------------

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn each_rule_kind_matches_its_frames_and_the_rest_passes() {
    require_root!();
    let s = loaded(&[
        rule(fields(Some(TCP), None, None), RuleAction::Steer),
        rule(fields(None, Some((9000, 9099)), None), RuleAction::Steer),
        rule(
            fields(None, None, Some(("198.19.0.0", 16))),
            RuleAction::Pass,
        ),
        rule(
            fields(None, None, Some(("2001:db8:1::", 48))),
            RuleAction::Drop,
        ),
    ]);
    let tcp80 = cat(&[
        &eth(&[], ETH_P_IP),
        &ipv4(TCP, [198, 18, 0, 2], &tcp(80, 5)),
    ]);
    // Empty XSKMAP: steer rules fall back to XDP_PASS and count no_socket.
    assert_eq!(s.test_run(&tcp80).unwrap(), XDP_PASS);
    assert_eq!(
        s.test_run(&v4_udp([198, 18, 0, 2], 9050)).unwrap(),
        XDP_PASS
    );
    assert_eq!(
        s.test_run(&v4_udp([198, 18, 0, 2], 9100)).unwrap(),
        XDP_PASS
    ); // no rule
    assert_eq!(s.test_run(&v4_udp([198, 19, 5, 5], 53)).unwrap(), XDP_PASS); // pass rule
    assert_eq!(s.test_run(&v6_udp("2001:db8:1::5", 53)).unwrap(), XDP_DROP);
    assert_eq!(s.test_run(&v6_udp("2001:db8:2::5", 53)).unwrap(), XDP_PASS); // no rule
    assert_eq!(s.test_run(&arp()).unwrap(), XDP_PASS); // no rule

    assert_eq!(s.rule_hits().unwrap(), vec![1, 1, 1, 1]);
    let c = s.counters().unwrap();
    assert_eq!(
        c,
        XdpCounters {
            steered: 0,
            no_socket: 2,
            passed: 4,
            dropped: 1,
            malformed: 0
        }
    );
    assert_eq!(c.total(), 7);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn combined_fields_must_all_match_and_first_match_wins() {
    require_root!();
    let s = loaded(&[
        rule(
            fields(Some(UDP), Some((53, 53)), Some(("198.18.0.0", 15))),
            RuleAction::Drop,
        ),
        rule(Rule::all(RuleAction::Pass).matcher, RuleAction::Pass),
        rule(Rule::all(RuleAction::Drop).matcher, RuleAction::Drop), // shadowed
    ]);
    assert_eq!(
        s.test_run(&v4_udp([198, 19, 255, 1], 53)).unwrap(),
        XDP_DROP
    );
    assert_eq!(s.test_run(&v4_udp([198, 20, 0, 1], 53)).unwrap(), XDP_PASS); // outside /15
    assert_eq!(s.test_run(&v4_udp([198, 18, 0, 1], 54)).unwrap(), XDP_PASS); // port
    let tcp53 = cat(&[
        &eth(&[], ETH_P_IP),
        &ipv4(TCP, [198, 18, 0, 1], &tcp(53, 5)),
    ]);
    assert_eq!(s.test_run(&tcp53).unwrap(), XDP_PASS); // protocol
    assert_eq!(s.rule_hits().unwrap(), vec![1, 3, 0]);
    let c = s.counters().unwrap();
    assert_eq!(
        (c.dropped, c.passed, c.malformed, c.no_socket),
        (1, 3, 0, 0)
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn match_all_steers_every_well_formed_frame() {
    require_root!();
    let s = loaded(&[Rule::all(RuleAction::Steer)]);
    for frame in [v4_udp([198, 18, 0, 2], 1), v6_udp("2001:db8::2", 2), arp()] {
        assert_eq!(
            s.test_run(&frame).unwrap(),
            XDP_PASS,
            "no socket registered: fallback is XDP_PASS"
        );
    }
    assert_eq!(s.rule_hits().unwrap(), vec![3]);
    assert_eq!(
        s.counters().unwrap(),
        XdpCounters {
            no_socket: 3,
            ..Default::default()
        }
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn vlan_single_and_double_tagged_frames_match() {
    require_root!();
    let s = loaded(&[rule(
        fields(Some(UDP), Some((9000, 9000)), None),
        RuleAction::Drop,
    )]);
    let l3 = ipv4(UDP, [198, 18, 0, 2], &udp(9000, 10));
    let single = cat(&[&eth(&[ETH_P_8021Q], ETH_P_IP), &l3]);
    let double = cat(&[&eth(&[ETH_P_8021AD, ETH_P_8021Q], ETH_P_IP), &l3]);
    let double_v6 = cat(&[
        &eth(&[ETH_P_8021AD, ETH_P_8021Q], ETH_P_IPV6),
        &ipv6(UDP, "2001:db8::9", &udp(9000, 0)),
    ]);
    assert_eq!(s.test_run(&single).unwrap(), XDP_DROP);
    assert_eq!(s.test_run(&double).unwrap(), XDP_DROP);
    assert_eq!(s.test_run(&double_v6).unwrap(), XDP_DROP);
    // A tag cut in half is malformed.
    let cut_tag = eth(&[ETH_P_8021Q], ETH_P_IP);
    assert_eq!(s.test_run(&cut_tag[..16]).unwrap(), XDP_PASS);
    // Only the outer tag present, the inner one cut.
    let cut_inner = eth(&[ETH_P_8021AD, ETH_P_8021Q], ETH_P_IP);
    assert_eq!(s.test_run(&cut_inner[..20]).unwrap(), XDP_PASS);
    assert_eq!(s.rule_hits().unwrap(), vec![3]);
    let c = s.counters().unwrap();
    assert_eq!((c.dropped, c.malformed, c.passed), (3, 2, 0));
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn ipv6_extension_headers_are_skipped_to_the_port() {
    require_root!();
    const HOPOPTS: u8 = 0;
    const ROUTING: u8 = 43;
    const FRAGMENT: u8 = 44;
    const DSTOPTS: u8 = 60;
    let s = loaded(&[rule(
        fields(Some(UDP), Some((5000, 5000)), None),
        RuleAction::Drop,
    )]);
    let chain = cat(&[
        &ext_opts(DSTOPTS, 1),
        &ext_opts(ROUTING, 3),
        &ext_opts(FRAGMENT, 2),
        &ext_frag(UDP, 0), // first fragment: UDP header follows
        &udp(5000, 16),
    ]);
    let frame = cat(&[&eth(&[], ETH_P_IPV6), &ipv6(HOPOPTS, "2001:db8::7", &chain)]);
    assert_eq!(s.test_run(&frame).unwrap(), XDP_DROP);

    // A non-first fragment has no UDP header: the port rule cannot match.
    let later = cat(&[&ext_frag(UDP, 100), &[0u8; 16]]);
    let frame = cat(&[
        &eth(&[], ETH_P_IPV6),
        &ipv6(FRAGMENT, "2001:db8::7", &later),
    ]);
    assert_eq!(s.test_run(&frame).unwrap(), XDP_PASS);

    // An extension header running past the payload is malformed.
    let frame = cat(&[
        &eth(&[], ETH_P_IPV6),
        &ipv6(HOPOPTS, "2001:db8::7", &ext_opts(UDP, 1)[..6]),
    ]);
    assert_eq!(s.test_run(&frame).unwrap(), XDP_PASS);

    assert_eq!(s.rule_hits().unwrap(), vec![1]);
    let c = s.counters().unwrap();
    assert_eq!((c.dropped, c.passed, c.malformed), (1, 1, 1));
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn ipv4_options_and_fragments() {
    require_root!();
    let s = loaded(&[
        rule(
            fields(Some(UDP), Some((7000, 7000)), None),
            RuleAction::Drop,
        ),
        rule(fields(Some(UDP), None, None), RuleAction::Pass),
    ]);
    // IHL 7: 8 bytes of options (NOPs + EOL) before UDP.
    let mut l3 = ipv4(UDP, [198, 18, 0, 3], &udp(7000, 4));
    l3[0] = 0x47;
    l3.splice(20..20, [1u8, 1, 1, 1, 1, 1, 1, 0]);
    let len = l3.len() as u16;
    l3[2..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(
        s.test_run(&cat(&[&eth(&[], ETH_P_IP), &l3])).unwrap(),
        XDP_DROP
    );

    // Non-first fragment: protocol known, ports not; falls to the proto rule.
    let mut frag = ipv4(UDP, [198, 18, 0, 3], &udp(7000, 4));
    frag[6..8].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(
        s.test_run(&cat(&[&eth(&[], ETH_P_IP), &frag])).unwrap(),
        XDP_PASS
    );

    // Ethernet padding after a short IP packet is fine.
    let padded = cat(&[&v4_udp([198, 18, 0, 3], 7000), &[0u8; 20]]);
    assert_eq!(s.test_run(&padded).unwrap(), XDP_DROP);

    assert_eq!(s.rule_hits().unwrap(), vec![2, 1]);
    assert_eq!(s.counters().unwrap().malformed, 0);
}

/// The malformed frames of `malformed_frames_are_counted_and_passed_never_steered`, named.
fn malformed_frames(valid: &[u8]) -> Vec<(String, Vec<u8>)> {
    let valid = valid.to_vec();
    let mut bad: Vec<(String, Vec<u8>)> = Vec::new();
    // Every truncation the kernel lets the program see: Ethernet only, IP header cut, IP total length lying.
    for len in TEST_RUN_MIN_FRAME..valid.len() {
        bad.push((
            format!("udp frame cut to {len} bytes"),
            valid[..len].to_vec(),
        ));
    }
    let mut ihl4 = valid.clone();
    ihl4[14] = 0x44;
    bad.push(("IHL 4".into(), ihl4));
    let mut long_total = valid.clone();
    long_total[16..18].copy_from_slice(&200u16.to_be_bytes());
    bad.push(("IPv4 total length beyond the frame".into(), long_total));
    let mut short_total = valid.clone();
    short_total[16..18].copy_from_slice(&12u16.to_be_bytes());
    bad.push(("IPv4 total length below the header".into(), short_total));
    let mut udp_len = valid.clone();
    udp_len[38..40].copy_from_slice(&100u16.to_be_bytes());
    bad.push(("UDP length beyond the IP payload".into(), udp_len));
    let mut udp_len_small = valid.clone();
    udp_len_small[38..40].copy_from_slice(&4u16.to_be_bytes());
    bad.push(("UDP length below 8".into(), udp_len_small));
    for doff in [0u8, 4] {
        let f = cat(&[
            &eth(&[], ETH_P_IP),
            &ipv4(TCP, [198, 18, 0, 2], &tcp(80, doff)),
        ]);
        bad.push((format!("TCP data offset {doff}"), f));
    }
    let f = cat(&[
        &eth(&[], ETH_P_IP),
        &ipv4(TCP, [198, 18, 0, 2], &tcp(80, 15)),
    ]);
    bad.push(("TCP data offset past the packet".into(), f));
    let mut v6_long = v6_udp("2001:db8::2", 9000);
    v6_long[18..20].copy_from_slice(&500u16.to_be_bytes());
    bad.push(("IPv6 payload length beyond the frame".into(), v6_long));
    let v6 = v6_udp("2001:db8::2", 9000);
    bad.push(("IPv6 header cut".into(), v6[..14 + 39].to_vec()));
    let mut v4_version = valid.clone();
    v4_version[14] = 0x65;
    bad.push(("IPv4 ethertype with version 6".into(), v4_version));
    bad
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn malformed_frames_are_counted_and_passed_never_steered() {
    require_root!();
    // Rule 1 takes every well-formed frame, but rule 0 has a condition, so the
    // program parses every kind of frame (the match-all shape does not: below).
    let s = loaded(&[
        rule(fields(Some(TCP), None, None), RuleAction::Steer),
        Rule::all(RuleAction::Steer),
    ]);
    assert_eq!(
        s.shape().to_string(),
        "2 rules, fields proto, parses ipv4|ipv6|non-ip"
    );
    let valid = v4_udp([198, 18, 0, 2], 9000);
    // The kernel's test run refuses input shorter than an Ethernet header (the
    // empty frame included) before the program runs: named error, no counter moves.
    for len in 0..TEST_RUN_MIN_FRAME {
        match s.test_run(&valid[..len]) {
            Err(SteerError::FrameTooShortForTestRun { len: l, min: 14 }) => assert_eq!(l, len),
            r => panic!("{len}-byte frame: expected FrameTooShortForTestRun, got {r:?}"),
        }
    }
    assert_eq!(s.counters().unwrap().total(), 0);
    let bad = malformed_frames(&valid);
    for (what, frame) in &bad {
        assert_eq!(s.test_run(frame).unwrap(), XDP_PASS, "{what}");
    }
    let c = s.counters().unwrap();
    assert_eq!(
        c,
        XdpCounters {
            malformed: bad.len() as u64,
            ..Default::default()
        },
        "{c:?}"
    );
    assert_eq!(s.rule_hits().unwrap(), vec![0, 0]);

    // The catch-all rule does take the valid frame.
    assert_eq!(s.test_run(&valid).unwrap(), XDP_PASS);
    assert_eq!(s.rule_hits().unwrap(), vec![0, 1]);
    assert_eq!(s.counters().unwrap().no_socket, 1);
}

/// Every frame of the other tests, for rule lists of several shapes: the verdict,
/// the counters and each rule's packets and bytes are the same on the single- and
/// the multi-buffer program; a frame longer than one buffer is counted whole by the
/// multi-buffer one; switching program kinds carries the counts.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn single_and_multi_buffer_programs_agree() {
    require_root!();
    let valid4 = v4_udp([198, 18, 0, 2], 9000);
    let mut frames: Vec<(String, Vec<u8>)> = malformed_frames(&valid4);
    frames.push(("v4 udp".into(), valid4.clone()));
    frames.push(("v6 udp".into(), v6_udp("2001:db8::2", 9000)));
    frames.push(("v6 udp other port".into(), v6_udp("2001:db8::2", 53)));
    frames.push(("arp".into(), arp()));
    frames.push((
        "vlan v4".into(),
        cat(&[
            &eth(&[ETH_P_8021Q], ETH_P_IP),
            &ipv4(UDP, [198, 18, 0, 2], &udp(9000, 10)),
        ]),
    ));
    frames.push((
        "v6 ext".into(),
        cat(&[
            &eth(&[], ETH_P_IPV6),
            &ipv6(0, "2001:db8::9", &cat(&[&ext_opts(UDP, 1), &udp(9000, 0)])),
        ]),
    ));
    frames.push((
        "v4 tcp".into(),
        cat(&[
            &eth(&[], ETH_P_IP),
            &ipv4(TCP, [198, 18, 0, 2], &tcp(80, 5)),
        ]),
    ));
    let lists: Vec<Vec<Rule>> = vec![
        vec![
            rule(fields(Some(TCP), None, None), RuleAction::Steer),
            Rule::all(RuleAction::Steer),
        ],
        vec![
            rule(
                fields(Some(UDP), Some((9000, 9000)), None),
                RuleAction::Drop,
            ),
            Rule::all(RuleAction::Pass),
        ],
        vec![
            rule(
                fields(None, None, Some(("198.18.0.0", 15))),
                RuleAction::Drop,
            ),
            rule(
                fields(Some(UDP), Some((1, 9000)), Some(("2001:db8::", 32))),
                RuleAction::Steer,
            ),
        ],
        vec![Rule::all(RuleAction::Drop)],
    ];
    for rules in &lists {
        let single = loaded(rules);
        let mut multi = Steering::load().unwrap();
        multi.set_rules(rules).unwrap();
        assert!(multi.frags(), "load() gives the multi-buffer program");
        for (what, f) in &frames {
            assert_eq!(
                single.test_run(f).unwrap(),
                multi.test_run(f).unwrap(),
                "{what} under {}",
                single.shape()
            );
        }
        assert_eq!(
            single.counters().unwrap(),
            multi.counters().unwrap(),
            "{}",
            single.shape()
        );
        assert_eq!(
            single.rule_counts().unwrap(),
            multi.rule_counts().unwrap(),
            "{}",
            single.shape()
        );
        // Multi -> single keeps every count; single -> multi too.
        let before = multi.rule_counts().unwrap();
        multi.use_frags(false).unwrap();
        assert!(!multi.frags());
        assert_eq!(
            multi.rule_counts().unwrap(),
            before,
            "counts carried into the single-buffer program"
        );
        assert_eq!(multi.counters().unwrap(), single.counters().unwrap());
        multi.use_frags(true).unwrap();
        assert_eq!(multi.rule_counts().unwrap(), before, "and back");
    }
    // 6 000 bytes: more than one buffer. The multi-buffer program counts all of them.
    let mut multi = Steering::load().unwrap();
    multi.set_rules(&[Rule::all(RuleAction::Drop)]).unwrap();
    let mut jumbo = v4_udp([198, 18, 0, 2], 9000);
    jumbo.resize(6000, 0);
    assert_eq!(multi.test_run(&jumbo).unwrap(), 1, "XDP_DROP");
    assert_eq!(
        multi.rule_counts().unwrap()[0].bytes,
        6000,
        "every buffer's bytes"
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn match_all_shape_hands_every_frame_to_its_action_unparsed() {
    require_root!();
    // Rule 0 without a condition: the program is the redirect and one count.
    let mut s = loaded(&[Rule::all(RuleAction::Steer)]);
    assert_eq!(s.shape().to_string(), "match-all steer");
    let valid = v4_udp([198, 18, 0, 2], 9000);
    let bad = malformed_frames(&valid);
    for (what, frame) in &bad {
        assert_eq!(
            s.test_run(frame).unwrap(),
            XDP_PASS,
            "{what}: no socket, so the redirect falls back to pass"
        );
    }
    let c = s.counters().unwrap();
    assert_eq!(
        c,
        XdpCounters {
            no_socket: bad.len() as u64,
            ..Default::default()
        },
        "malformed is not looked for: {c:?}"
    );
    assert_eq!(
        s.rule_hits().unwrap(),
        vec![bad.len() as u64],
        "rule 0's hits are the counters' sum"
    );

    // Drop everything, malformed frames included; a shadowed rule behind it never hits.
    s.set_rules(&[
        Rule::all(RuleAction::Drop),
        rule(fields(Some(UDP), None, None), RuleAction::Pass),
    ])
    .unwrap();
    assert_eq!(s.shape().to_string(), "match-all drop");
    for (what, frame) in bad.iter().take(5) {
        assert_eq!(s.test_run(frame).unwrap(), XDP_DROP, "{what}");
    }
    assert_eq!(s.test_run(&valid).unwrap(), XDP_DROP);
    assert_eq!(s.rule_hits().unwrap(), vec![6, 0]);
    let c = s.counters().unwrap();
    assert_eq!(
        c,
        XdpCounters {
            no_socket: bad.len() as u64,
            dropped: 6,
            ..Default::default()
        },
        "{c:?}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn rules_change_at_run_time_within_and_across_shapes() {
    require_root!();
    let mut s = loaded(&[Rule::all(RuleAction::Drop)]);
    let frame = v4_udp([198, 18, 0, 2], 9000);
    assert_eq!(s.test_run(&frame).unwrap(), XDP_DROP);
    let first_id = s.program_id().unwrap();
    // Another shape: another program, the counters carry on.
    s.set_rules(&[
        rule(fields(None, Some((1, 10)), None), RuleAction::Drop),
        Rule::all(RuleAction::Pass),
    ])
    .unwrap();
    let second_id = s.program_id().unwrap();
    assert_ne!(second_id, first_id, "a new shape loads a new program");
    assert_eq!(s.test_run(&frame).unwrap(), XDP_PASS);
    // The same shape (other values and actions): the bank swap, same program.
    s.set_rules(&[
        rule(fields(None, Some((9000, 9000)), None), RuleAction::Drop),
        Rule::all(RuleAction::Steer),
    ])
    .unwrap();
    assert_eq!(
        s.program_id().unwrap(),
        second_id,
        "same shape, same program"
    );
    assert_eq!(s.test_run(&frame).unwrap(), XDP_DROP);
    assert_eq!(s.rule_hits().unwrap(), vec![1, 0]);
    s.set_rules(&[
        rule(fields(None, Some((1, 10)), None), RuleAction::Drop),
        Rule::all(RuleAction::Pass),
    ])
    .unwrap();
    assert_eq!(s.program_id().unwrap(), second_id);
    assert_eq!(s.test_run(&frame).unwrap(), XDP_PASS);
    assert_eq!(
        s.rule_hits().unwrap(),
        vec![0, 1],
        "hit counters restart with a new list"
    );
    s.set_rules(&[]).unwrap();
    assert_eq!(s.test_run(&frame).unwrap(), XDP_PASS);
    assert_eq!(s.rule_hits().unwrap(), Vec::<u64>::new());
    s.set_rules(&[Rule::all(RuleAction::Drop)]).unwrap();
    assert_eq!(s.test_run(&frame).unwrap(), XDP_DROP);
    // Over four programs (two replaced since: the retired and the folded counts).
    assert_eq!(
        s.counters().unwrap(),
        XdpCounters {
            dropped: 3,
            passed: 3,
            ..Default::default()
        }
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn ceiling_program_loads_counts_and_drops() {
    require_root!();
    let ceiling = Ceiling::load().expect("xdpool_ceiling must pass the verifier");
    assert_eq!(ceiling.dropped().unwrap(), 0);
    for frame in [
        v4_udp([198, 18, 0, 2], 9),
        arp(),
        vec![0u8; 14],
        vec![0u8; 1500],
    ] {
        assert_eq!(ceiling.test_run(&frame).unwrap(), XDP_DROP);
    }
    assert_eq!(ceiling.dropped().unwrap(), 4);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn xsk_registration_checks_queue_and_fd() {
    require_root!();
    let mut s = loaded(&[]);
    assert!(matches!(
        s.register_xsk(64, 0),
        Err(SteerError::QueueOutOfRange { queue: 64, max: 64 })
    ));
    // A file descriptor that is not an AF_XDP socket is refused by the kernel.
    let not_a_socket = std::fs::File::open("/dev/null").unwrap();
    use std::os::fd::AsRawFd;
    assert!(matches!(
        s.register_xsk(0, not_a_socket.as_raw_fd()),
        Err(SteerError::Xsk { queue: 0, .. })
    ));
}

// ---- attaching (network namespace with a veth pair inside it) -------------

/// A network namespace holding a veth pair; deleted on drop, even on panic.
struct NetnsGuard {
    name: String,
}

impl NetnsGuard {
    fn new(tag: &str) -> Self {
        let name = format!("xdpool-steer-{tag}-{}", std::process::id());
        let guard = NetnsGuard { name };
        guard.ip(&["netns", "add", &guard.name]);
        guard.ip(&[
            "-n",
            &guard.name,
            "link",
            "add",
            "xsv0",
            "type",
            "veth",
            "peer",
            "name",
            "xsv1",
        ]);
        guard.ip(&["-n", &guard.name, "link", "set", "xsv0", "up"]);
        guard.ip(&["-n", &guard.name, "link", "set", "xsv1", "up"]);
        guard
    }

    fn ip(&self, args: &[&str]) {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .expect("run ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `f` on a thread that has entered the namespace.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).expect("open netns");
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("namespace thread panicked")
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ifindex(name: &str) -> u32 {
    nix::net::if_::if_nametoindex(name).expect("interface in namespace")
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn attach_uses_a_bpf_link_and_leaves_nothing_behind() {
    require_root!();
    let ns = NetnsGuard::new("attach");
    ns.run(|| {
        let xsv0 = ifindex("xsv0");
        assert_eq!(xdp_program_on(xsv0).unwrap(), None);

        let mut s = loaded(&[Rule::all(RuleAction::Steer)]);
        // From the multi-buffer program: an MTU of 1500 gets the single-buffer one.
        s.use_frags(true).unwrap();
        s.attach(xsv0, XdpAttachMode::Native)
            .expect("native XDP on veth");
        assert!(!s.frags(), "MTU 1500: the single-buffer program");
        let id = s.program_id().unwrap();
        assert_eq!(xdp_program_on(xsv0).unwrap(), Some(id));
        assert!(matches!(
            s.attach(xsv0, XdpAttachMode::Native),
            Err(SteerError::AttachedHere { .. })
        ));

        // A second loader finds the device busy and is told so.
        let mut other = loaded(&[]);
        match other.attach(xsv0, XdpAttachMode::Native) {
            Err(SteerError::AlreadyAttached { prog_id, .. }) => assert_eq!(prog_id, Some(id)),
            r => panic!("expected AlreadyAttached, got {r:?}"),
        }
        match other.attach(999_999, XdpAttachMode::Skb) {
            Err(e @ SteerError::InterfaceMissing { ifindex: 999_999 }) => {
                assert!(e.to_string().contains("ip link"), "{e}")
            }
            r => panic!("expected InterfaceMissing, got {r:?}"),
        }

        // A rule list of another shape replaces the attached program through the
        // link (BPF_LINK_UPDATE): the device runs the new one, no detach between.
        s.set_rules(&[rule(
            fields(Some(UDP), Some((9, 9)), None),
            RuleAction::Steer,
        )])
        .unwrap();
        let reloaded = s.program_id().unwrap();
        assert_ne!(reloaded, id);
        assert_eq!(xdp_program_on(xsv0).unwrap(), Some(reloaded));
        assert_eq!(s.attached_to(), Some(xsv0));

        s.detach().unwrap();
        assert_eq!(xdp_program_on(xsv0).unwrap(), None);
        assert!(matches!(s.detach(), Err(SteerError::NotAttached)));

        // Generic mode, then dropping the owner (as a dying process would) detaches.
        other
            .attach(xsv0, XdpAttachMode::Skb)
            .expect("skb XDP on veth");
        assert_eq!(
            xdp_program_on(xsv0).unwrap(),
            Some(other.program_id().unwrap())
        );
        drop(other);
        assert_eq!(xdp_program_on(xsv0).unwrap(), None);

        let ceiling =
            Ceiling::load_and_attach(xsv0, XdpAttachMode::Native).expect("ceiling attaches");
        assert!(xdp_program_on(xsv0).unwrap().is_some());
        drop(ceiling);
        assert_eq!(xdp_program_on(xsv0).unwrap(), None);

        // Multi-buffer sockets want the multi-buffer program whatever the MTU.
        let mut mb = loaded(&[Rule::all(RuleAction::Steer)]);
        mb.require_frags(true);
        mb.attach(xsv0, XdpAttachMode::Native).unwrap();
        assert!(mb.frags());
        mb.detach().unwrap();
    });
    // A jumbo MTU gets the multi-buffer program.
    let ns = NetnsGuard::new("attachmtu");
    ns.ip(&["-n", &ns.name, "link", "set", "xsv0", "mtu", "9000"]);
    ns.ip(&["-n", &ns.name, "link", "set", "xsv1", "mtu", "9000"]);
    ns.run(|| {
        let xsv0 = ifindex("xsv0");
        let mut s = loaded(&[Rule::all(RuleAction::Steer)]);
        s.attach(xsv0, XdpAttachMode::Native)
            .expect("native XDP on a 9000-byte veth");
        assert!(s.frags(), "MTU 9000: the multi-buffer program");
        assert_eq!(xdp_program_on(xsv0).unwrap(), Some(s.program_id().unwrap()));
    });
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn all_64_rules_are_walked_and_repeated_runs_count_each_frame() {
    require_root!();
    // 63 rules that miss, the 64th matches: the whole bounded loop runs.
    let mut rules: Vec<Rule> = (0..63u16)
        .map(|i| {
            rule(
                fields(Some(UDP), Some((100 + i, 100 + i)), None),
                RuleAction::Steer,
            )
        })
        .collect();
    rules.push(rule(
        fields(None, None, Some(("198.18.0.0", 15))),
        RuleAction::Drop,
    ));
    let s = loaded(&rules);
    let (action, per_run) = s.test_run_timed(&v4_udp([198, 18, 0, 2], 9), 1000).unwrap();
    assert_eq!(action, XDP_DROP);
    assert!(per_run.as_nanos() > 0);
    let hits = s.rule_hits().unwrap();
    assert_eq!(hits.len(), 64);
    assert_eq!(hits[63], 1000);
    assert!(hits[..63].iter().all(|h| *h == 0));
    assert_eq!(
        s.counters().unwrap(),
        XdpCounters {
            dropped: 1000,
            ..Default::default()
        }
    );
}

/// Rule lists of two shapes (one and two rules) that both steer the lab's UDP port 9.
fn steer_port_9(shape: usize) -> Vec<Rule> {
    let mut rules = vec![rule(
        fields(Some(UDP), Some((9, 9)), None),
        RuleAction::Steer,
    )];
    if shape % 2 == 1 {
        rules.push(rule(fields(Some(TCP), None, None), RuleAction::Pass));
    }
    rules
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn reload_under_traffic_keeps_the_socket_and_steers_every_frame() {
    use xdpool::internal::xsk::{SocketConfig, Umem, UmemConfig, XdpDesc, XskSocket};
    require_root!();
    let ns = NetnsGuard::new("reload");
    ns.run(|| {
        const CHUNK: usize = 2048;
        const CHUNKS: usize = 512;
        const BATCH: usize = 200;
        const RELOADS: usize = 10;
        let (xsv0, xsv1) = (ifindex("xsv0"), ifindex("xsv1"));
        // SAFETY: an anonymous private mapping, unmapped at the end of this closure
        // after the socket and UMEM are dropped.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHUNK * CHUNKS,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        assert_ne!(area, libc::MAP_FAILED);
        let ucfg = UmemConfig {
            chunk_size: CHUNK as u32,
            fill_size: 512,
            comp_size: 512,
            ..Default::default()
        };
        // SAFETY: the area is CHUNK * CHUNKS bytes, page aligned, and outlives the UMEM.
        let umem =
            unsafe { Umem::register(area.cast(), CHUNK * CHUNKS, ucfg) }.expect("register UMEM");
        let scfg = SocketConfig {
            rx_size: 512,
            tx_size: 0,
            zero_copy: false,
            need_wakeup: true,
            multi_buffer: false,
            tx_budget: 0,
        };
        let mut sock = XskSocket::bind(&umem, xsv1, 0, &scfg).expect("bind queue 0 of xsv1");
        let addrs: Vec<u64> = (0..CHUNKS as u64).map(|i| i * CHUNK as u64).collect();
        assert_eq!(sock.fill().produce(&addrs[..256]), 256);

        let mut s = Steering::with_rules(&steer_port_9(0)).unwrap();
        use std::os::fd::AsRawFd;
        s.register_xsk(0, sock.fd().as_raw_fd()).unwrap();
        s.attach(xsv1, XdpAttachMode::Native)
            .expect("native XDP on veth");

        let frame = cat(&[
            &eth(&[], ETH_P_IP),
            &ipv4(UDP, [198, 18, 0, 2], &udp(9, 18)),
        ]);
        let mut ids = vec![s.program_id().unwrap()];
        let mut received = 0usize;
        let mut descs = [XdpDesc::default(); 64];
        for round in 0..=RELOADS {
            common::send_raw(xsv0, &frame, BATCH, None);
            if round < RELOADS {
                // While the batch is on its way (in the veth's queue, in NAPI): another
                // shape, a new program swapped in through the link.
                s.set_rules(&steer_port_9(round + 1)).unwrap();
                ids.push(s.program_id().unwrap());
                assert_eq!(xdp_program_on(xsv1).unwrap(), Some(*ids.last().unwrap()));
            }
            let want = (round + 1) * BATCH;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while received < want && std::time::Instant::now() < deadline {
                let n = sock.rx().consume(&mut descs);
                for d in &descs[..n] {
                    assert_eq!(d.len as usize, frame.len());
                }
                let back: Vec<u64> = descs[..n]
                    .iter()
                    .map(|d| d.addr - d.addr % CHUNK as u64)
                    .collect();
                assert_eq!(sock.fill().produce(&back), n);
                received += n;
                if n == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            assert_eq!(
                received, want,
                "round {round}: every frame of the batch reaches the socket"
            );
        }
        ids.dedup();
        assert_eq!(
            ids.len(),
            RELOADS + 1,
            "each round ran another program: {ids:?}"
        );
        let c = s.counters().unwrap();
        assert_eq!(c.steered, ((RELOADS + 1) * BATCH) as u64, "{c:?}");
        assert_eq!((c.no_socket, c.dropped, c.malformed), (0, 0, 0), "{c:?}");
        drop(s);
        drop(sock);
        drop(umem);
        // SAFETY: the UMEM and socket that used the area are gone.
        unsafe { libc::munmap(area, CHUNK * CHUNKS) };
    });
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn rule_counts_have_bytes_and_carry_across_bank_and_program_swaps() {
    require_root!();
    let mut s = loaded(&[
        rule(fields(None, Some((9000, 9000)), None), RuleAction::Drop),
        Rule::all(RuleAction::Pass),
    ]);
    let hit = v4_udp([198, 18, 0, 2], 9000);
    let other = v4_udp([198, 18, 0, 2], 53);
    let (h, o) = (hit.len() as u64, other.len() as u64);
    s.test_run(&hit).unwrap();
    s.test_run(&other).unwrap();
    s.test_run(&other).unwrap();
    let c = |s: &Steering| {
        s.rule_counts()
            .unwrap()
            .iter()
            .map(|c| (c.packets, c.bytes))
            .collect::<Vec<_>>()
    };
    assert_eq!(c(&s), vec![(1, h), (2, 2 * o)]);
    // Rules swapped over (rule 0 now matches all: another program): each carries
    // its own counts (new 0 <- old 1, new 1 <- old 0).
    let g = s.generation();
    s.set_rules_carrying(
        &[
            Rule::all(RuleAction::Pass),
            rule(fields(None, Some((9000, 9000)), None), RuleAction::Drop),
        ],
        &[Some(1), Some(0)],
        g + 1,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.generation(), g + 1);
    assert_eq!(
        c(&s),
        vec![(2, 2 * o), (1, h)],
        "carried through the program swap"
    );
    s.test_run(&hit).unwrap();
    assert_eq!(
        c(&s),
        vec![(3, 2 * o + h), (1, h)],
        "match-all rule 0 counts every frame with its bytes"
    );
    // Another shape again: the old rule 1 goes on as rule 0, rule 1 is new.
    s.set_rules_carrying(
        &[
            rule(
                fields(Some(UDP), Some((9000, 9000)), None),
                RuleAction::Drop,
            ),
            Rule::all(RuleAction::Pass),
        ],
        &[Some(1), None],
        g + 2,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.test_run(&hit).unwrap();
    assert_eq!(
        c(&s),
        vec![(2, 2 * h), (0, 0)],
        "rule 0 continues the old rule 1; rule 1 starts at zero"
    );
    // Two bank swaps (same shape) on: what each rule carried is folded and kept.
    s.set_rules_carrying(
        &[
            rule(
                fields(Some(UDP), Some((9000, 9000)), None),
                RuleAction::Drop,
            ),
            Rule::all(RuleAction::Pass),
        ],
        &[Some(0), Some(1)],
        g + 3,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.set_rules_carrying(
        &[
            rule(
                fields(Some(UDP), Some((9000, 9000)), None),
                RuleAction::Drop,
            ),
            Rule::all(RuleAction::Pass),
        ],
        &[Some(0), Some(1)],
        g + 4,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.test_run(&other).unwrap();
    assert_eq!(c(&s), vec![(2, 2 * h), (1, o)]);
}
