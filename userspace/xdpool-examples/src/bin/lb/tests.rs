use super::backends::Backends;
use super::Lb;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use xdpool::testing::{FrameBuilder, Harness, Steered};

const B: [&str; 4] = [
    "02:00:00:00:01:01=198.18.2.1",
    "02:00:00:00:01:02=198.18.2.2",
    "02:00:00:00:01:03=198.18.2.3",
    "02:00:00:00:01:04=198.18.2.4",
];

fn config(arg: &str) -> String {
    xdpool::testing::two_ports(&format!(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"lb\"\narg = \"{arg}\""
    ))
}

/// Flow `i`'s frame: a distinct (source IP, source port) per flow, to one VIP.
fn flow(i: u32, tcp: bool, tag: u8) -> Vec<u8> {
    let src = Ipv4Addr::new(198, 18, 64 + (i >> 16) as u8, (i >> 8) as u8);
    let b = FrameBuilder::new()
        .macs([2, 0, 0, 0, 0, 0xb0], [2, 0, 0, 0, 0, 0xa0])
        .ipv4(src, Ipv4Addr::new(198, 19, 0, 1))
        .payload(&[tag; 21]); // odd length: the checksums' odd-byte padding too
    let port = 1024 + (i & 0xff) as u16;
    if tcp {
        b.tcp(port, 80, 0x10)
    } else {
        b.udp(port, 80)
    }
    .build()
    .bytes
}

/// Sends flows `0..n` (one frame each) and returns each one's backend index.
fn backend_of_each(arg: &str, n: u32) -> Vec<usize> {
    let mut h = Harness::builder(&config(arg))
        .handler("lb", Lb)
        .build()
        .unwrap();
    for i in 0..n {
        assert_eq!(h.send("in", &flow(i, i % 2 == 0, 0)), Steered::Worker);
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), n as usize);
    assert_eq!(h.user_counter("in", "lb", "balanced"), u64::from(n));
    h.check_accounting().unwrap();
    out.iter().map(|o| usize::from(o[5]) - 1).collect()
}

#[test]
fn ten_thousand_flows_spread_evenly_over_four_backends() {
    let of = backend_of_each(&B.join(","), 10_000);
    let mut per = [0u32; 4];
    for b in of {
        per[b] += 1;
    }
    // 2 500 each on average; binomial sd ~43: +-10% is over 5 sd.
    for (b, n) in per.iter().enumerate() {
        assert!(
            (2250..=2750).contains(n),
            "backend {b}: {n} of 10000 flows ({per:?})"
        );
    }
}

#[test]
fn every_frame_of_a_flow_goes_to_one_backend() {
    let mut h = Harness::builder(&config(&B.join(",")))
        .handler("lb", Lb)
        .build()
        .unwrap();
    for round in 0..20u8 {
        for i in 0..200 {
            h.send("in", &flow(i, i % 2 == 0, round));
        }
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 4000);
    let mut seen: HashMap<Vec<u8>, u8> = HashMap::new();
    for o in &out {
        // The flow: source IP and both ports.
        let key = [&o[26..30], &o[34..38]].concat();
        let b = *seen.entry(key).or_insert(o[5]);
        assert_eq!(o[5], b, "a flow changed backend");
    }
    assert_eq!(seen.len(), 200);
    h.check_accounting().unwrap();
}

#[test]
fn removing_a_backend_moves_exactly_its_flows() {
    let before = backend_of_each(&B.join(","), 10_000);
    // Backend 2 (02:..:03) leaves; the others keep their identity.
    let after = backend_of_each(&[B[0], B[1], B[3]].join(","), 10_000);
    let mut moved = [0u32; 4];
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        if *b == 2 {
            assert_ne!(*a, 2, "flow {i} still on the removed backend");
            moved[*a] += 1;
        } else {
            assert_eq!(a, b, "flow {i} moved from backend {b}, which stayed");
        }
    }
    let gone = before.iter().filter(|b| **b == 2).count() as u32;
    assert_eq!(moved.iter().sum::<u32>(), gone);
    // The removed backend's flows spread over the three left, none over-loaded.
    for n in [moved[0], moved[1], moved[3]] {
        assert!(n > gone / 5, "{moved:?}");
    }
}

/// The Internet checksum of `parts`, from scratch.
fn sum(parts: &[&[u8]]) -> u16 {
    let mut s: u32 = 0;
    for p in parts {
        for c in p.chunks(2) {
            s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Whether the IPv4 header and the UDP/TCP checksums of `f` (no options) verify.
fn checksums_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let l4 = &f[34..14 + usize::from(u16::from_be_bytes([ip[2], ip[3]]))];
    let len = (l4.len() as u16).to_be_bytes();
    let pseudo = [&ip[12..20], &[0, ip[9]], &len[..]].concat();
    sum(&[ip]) == 0 && (ip[9] == 17 && l4[6..8] == [0, 0] || sum(&[&pseudo, l4]) == 0)
}

#[test]
fn the_destination_ip_and_every_checksum_are_rewritten_correctly() {
    let mut h = Harness::builder(&config(&B.join(",")))
        .handler("lb", Lb)
        .build()
        .unwrap();
    let mut sent = Vec::new();
    for i in 0..500u32 {
        let mut f = flow(i * 7919, i % 2 == 0, i as u8);
        if i % 10 == 1 {
            f[40..42].copy_from_slice(&[0, 0]); // a UDP frame without checksum
        }
        assert!(checksums_ok(&f));
        h.send("in", &f);
        sent.push(f);
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 500);
    for (i, (o, f)) in out.iter().zip(&sent).enumerate() {
        let b = usize::from(o[5]);
        assert_eq!(&o[..5], &[2, 0, 0, 0, 1]);
        assert_eq!(
            &o[6..12],
            &[2, 0, 0, 0, 0xd0, 1],
            "source: the egress device's MAC"
        );
        assert_eq!(
            &o[30..34],
            &[198, 18, 2, b as u8],
            "frame {i}: the backend's IP"
        );
        assert!(checksums_ok(o), "frame {i}: a checksum no longer verifies");
        if i % 10 == 1 {
            assert_eq!(&o[40..42], &[0, 0], "no UDP checksum stays none");
        }
        let blank = |x: &[u8]| {
            let mut x = x.to_vec();
            let l4sum = if x[23] == 6 { 50 } else { 40 };
            for at in [24, 25, 30, 31, 32, 33, l4sum, l4sum + 1] {
                x[at] = 0;
            }
            x
        };
        assert_eq!(
            blank(o)[12..],
            blank(f)[12..],
            "only the destination and checksums change"
        );
    }
    h.check_accounting().unwrap();
}

#[test]
fn a_mac_only_backend_list_leaves_the_ip_and_a_bad_arg_drops_and_counts() {
    let mut h = Harness::builder(&config("02:00:00:00:01:09"))
        .handler("lb", Lb)
        .build()
        .unwrap();
    let f = flow(1, false, 1);
    h.send("in", &f);
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], &[2, 0, 0, 0, 1, 9]);
    assert_eq!(out[0][12..], f[12..]);

    let mut h = Harness::builder(&config("02:00:00:00:01=198.18.2.1"))
        .handler("lb", Lb)
        .build()
        .unwrap();
    for i in 0..10 {
        h.send("in", &flow(i, false, 0));
    }
    h.run();
    assert!(h.sent("out").is_empty());
    assert_eq!(h.user_counter("in", "lb", "bad_arg"), 10);
    assert_eq!(h.counter("in", "action_drop"), 10);
    h.check_accounting().unwrap();
}

#[test]
fn the_arg_is_checked_and_backends_keep_their_flows_by_identity() {
    assert!(Backends::parse("").unwrap_err().contains("no backends"));
    assert!(Backends::parse("02:00:00:00:01:01=198.18.2.300")
        .unwrap_err()
        .contains("not an IPv4 address"));
    assert!(Backends::parse("02:00:00:00:01:01,02:00:00:00:01:01")
        .unwrap_err()
        .contains("twice"));
    let all = Backends::parse(&B.join(",")).unwrap();
    let reordered = Backends::parse(&[B[3], B[1], B[0], B[2]].join(",")).unwrap();
    assert_eq!(all.len(), 4);
    for flow in 0..100_000u64 {
        let f = flow.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        assert_eq!(
            all.pick(f),
            reordered.pick(f),
            "the list's order does not matter"
        );
    }
}

#[test]
fn the_shipped_config_balances_over_its_three_backends() {
    let config = include_str!("../../../../../configs/examples/lb.toml");
    let mut h = Harness::builder(config).handler("lb", Lb).build().unwrap();
    for i in 0..300 {
        assert_eq!(h.send("in", &flow(i, i % 2 == 0, 0)), Steered::Worker);
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 300);
    let mut per = [0; 3];
    for o in &out {
        assert_eq!(&o[..6], &[0x02, 0x78, 0x64, 0x70, 0x02, 0x01]);
        assert_eq!(&o[30..33], &[198, 18, 2]);
        per[usize::from(o[33]) - 11] += 1;
        assert!(checksums_ok(o));
    }
    assert!(per.iter().all(|n| *n > 60), "{per:?}");
    h.check_accounting().unwrap();
}

#[test]
fn each_rule_balances_over_its_own_arg_on_one_lane() {
    // Two rules, two backend lists, frames interleaved: the cached list follows
    // the arg of each frame's rule.
    let config = format!(
        "{}\n[[rule]]\nport = \"in\"\nproto = \"tcp\"\naction = \"call\"\nhandler = \"lb\"\narg = \"02:00:00:00:02:01\"\n",
        config(&B.join(",")).replace("port = \"in\"\naction", "port = \"in\"\nproto = \"udp\"\naction")
    );
    let mut h = Harness::builder(&config).handler("lb", Lb).build().unwrap();
    for i in 0..100 {
        h.send("in", &flow(i, i % 2 == 0, 0));
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 100);
    for o in &out {
        if o[23] == 6 {
            assert_eq!(
                &o[..6],
                &[2, 0, 0, 0, 2, 1],
                "TCP: the second rule's one backend"
            );
            assert_eq!(&o[30..34], &[198, 19, 0, 1], "MAC-only: the IP stays");
        } else {
            assert_eq!(&o[..5], &[2, 0, 0, 0, 1], "UDP: the first rule's backends");
        }
    }
    h.check_accounting().unwrap();
}

#[test]
fn a_control_message_removes_a_backend_on_a_running_lb_and_moves_only_its_flows() {
    let mut h = Harness::builder(&config(&B.join(",")))
        .handler("lb", Lb)
        .build()
        .unwrap();
    let backend_of_each = |h: &mut Harness<_>| {
        for i in 0..2_000 {
            h.send("in", &flow(i, false, 0));
        }
        h.run();
        let out = h.sent("out");
        assert_eq!(out.len(), 2_000);
        out.iter()
            .map(|o| usize::from(o[5]) - 1)
            .collect::<Vec<_>>()
    };
    let before = backend_of_each(&mut h);
    assert_eq!(h.control("lb", &[B[0], B[1], B[3]].join(",")), Ok(2));
    let after = backend_of_each(&mut h);
    let mut moved = 0;
    for (b, a) in before.iter().zip(&after) {
        if *b == 2 {
            assert_ne!(*a, 2);
            moved += 1;
        } else {
            assert_eq!(a, b, "a flow of a backend that stayed moved");
        }
    }
    assert!(moved > 300, "{moved} flows were on backend 2");
    // A bad list is refused by every lane and the running one stays.
    let e = h.control("lb", "02:00:00:00:01:01=nonsense").unwrap_err();
    assert!(e.starts_with("in queue 0: "), "{e}");
    assert_eq!(backend_of_each(&mut h), after);
    h.check_accounting().unwrap();
}

/// Two VIPs: the UDP rule's arg and the TCP rule's, each with its own backends.
fn two_vips(udp: &str, tcp: &str) -> String {
    xdpool::testing::two_ports(&format!(
        "[[rule]]\nport = \"in\"\nname = \"udp-vip\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"lb\"\narg = \"{udp}\"\n\
         [[rule]]\nport = \"in\"\nname = \"tcp-vip\"\nproto = \"tcp\"\naction = \"call\"\nhandler = \"lb\"\narg = \"{tcp}\""
    ))
}

/// Runs 200 flows, UDP and TCP in turn: the backend index (into `B`) each frame went
/// to, with whether it was TCP.
fn alternate<H: xdpool::HandlerSet>(h: &mut Harness<H>) -> Vec<(bool, usize)> {
    for i in 0..200 {
        assert_eq!(h.send("in", &flow(i, i % 2 == 1, 0)), Steered::Worker);
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 200, "every frame balanced");
    out.iter()
        .map(|o| (o[23] == 6, usize::from(o[5]) - 1))
        .collect()
}

fn used(of: &[(bool, usize)], tcp: bool) -> std::collections::BTreeSet<usize> {
    of.iter()
        .filter(|(t, _)| *t == tcp)
        .map(|(_, b)| *b)
        .collect()
}

/// Two rules with different args alternate frame by frame: each keeps its own
/// backends, and a list given by `control` replaces both and stays through the
/// alternation (each rule's arg is parsed once, not at every switch: a switch that
/// re-read the arg dropped the controlled list).
#[test]
fn two_vips_keep_their_own_backends_and_a_controlled_list_stays_across_them() {
    let mut h = Harness::builder(&two_vips(&[B[0], B[1]].join(","), &[B[2], B[3]].join(",")))
        .handler("lb", Lb)
        .build()
        .unwrap();
    let of = alternate(&mut h);
    assert_eq!(
        used(&of, false),
        [0, 1].into(),
        "UDP over the UDP VIP's backends"
    );
    assert_eq!(
        used(&of, true),
        [2, 3].into(),
        "TCP over the TCP VIP's backends"
    );

    assert_eq!(h.control("lb", B[3]), Ok(2));
    let of = alternate(&mut h);
    assert!(
        of.iter().all(|(_, b)| *b == 3),
        "the controlled list for both rules, every frame: {of:?}"
    );
    assert_eq!(h.user_counter("in", "lb", "balanced"), 400);
    assert_eq!(h.user_counter("in", "lb", "bad_arg"), 0);
    h.check_accounting().unwrap();
}

/// A reload that changes the list but leaves the args' texts keeps a controlled
/// list; one that changes an arg puts the rules' backends back, the changed arg's
/// new ones, from the first frame that brings the changed arg (UDP flow 0 comes
/// before it).
#[test]
fn a_reload_that_changes_an_arg_ends_a_controlled_list_one_that_does_not_keeps_it() {
    let (udp, tcp) = ([B[0], B[1]].join(","), [B[2], B[3]].join(","));
    let mut h = Harness::builder(&two_vips(&udp, &tcp))
        .handler("lb", Lb)
        .build()
        .unwrap();
    alternate(&mut h);
    assert_eq!(h.control("lb", B[3]), Ok(2));
    // The same args, one more rule: the port's list changes (new `Arc`s, a new
    // generation), the args' texts do not.
    let more = "\n[[rule]]\nport = \"in\"\nproto = \"udp\"\ndst_port = \"53\"\naction = \"drop\"\n";
    h.reload(&(two_vips(&udp, &tcp) + more)).unwrap();
    let of = alternate(&mut h);
    assert!(
        of.iter().all(|(_, b)| *b == 3),
        "the same args: the controlled list stays: {of:?}"
    );

    h.reload(&two_vips(&udp, B[1])).unwrap();
    let of = alternate(&mut h);
    assert_eq!(
        of[0],
        (false, 3),
        "before the changed arg's first frame: controlled"
    );
    assert_eq!(used(&of[1..], false), [0, 1].into(), "UDP: its arg again");
    assert_eq!(used(&of[1..], true), [1].into(), "TCP: its new arg");

    // A reload that changes the ports is refused and changes nothing.
    let more =
        two_vips(B[0], B[0]) + "\n[[port]]\nname = \"extra\"\ninterface = \"c0\"\nqueues = [0]\n";
    let e = h.reload(&more).unwrap_err();
    assert!(e.to_string().contains("not ports"), "{e}");
    let of = alternate(&mut h);
    assert_eq!(used(&of, true), [1].into());
    h.check_accounting().unwrap();
}

/// A frame the lb's own rewrite does not take goes through `Packet::set_ipv4_dst`:
/// IPv4 with options (rewritten there, every checksum verifies), UDP-Lite and a TCP
/// frame whose source route is under way (refused: dropped and counted
/// `unsupported`, never sent with a checksum left wrong).
#[test]
fn frames_with_options_or_other_checksums_go_through_the_setter() {
    let mut h = Harness::builder(&config(B[0]))
        .handler("lb", Lb)
        .build()
        .unwrap();
    let (src, vip) = (Ipv4Addr::new(198, 18, 64, 1), Ipv4Addr::new(198, 19, 0, 1));
    let with = |opts: &[u8]| {
        FrameBuilder::new()
            .ipv4(src, vip)
            .ipv4_options(opts)
            .tcp(1000, 80, 0x10)
            .payload(&[7; 9])
            .build()
            .bytes
    };
    let lite = FrameBuilder::new()
        .ipv4(src, vip)
        .ip_proto(136)
        .payload(&[0; 12])
        .build()
        .bytes;
    for f in [
        with(&[1, 1, 1, 1]),
        lite,
        with(&[131, 7, 4, 198, 19, 7, 7, 1]),
    ] {
        assert_eq!(h.send("in", &f), Steered::Worker);
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 1, "only the frame with NOP options leaves");
    let o = &out[0];
    // IPv4 header of 24 bytes (one word of options), then TCP.
    let (ip, l4) = (&o[14..38], &o[38..]);
    assert_eq!(&ip[16..20], &[198, 18, 2, 1], "the backend's IP");
    let len = (l4.len() as u16).to_be_bytes();
    let pseudo = [&ip[12..20], &[0, 6], &len[..]].concat();
    assert_eq!(
        (sum(&[ip]), sum(&[&pseudo, l4])),
        (0, 0),
        "checksums verify"
    );
    assert_eq!(h.user_counter("in", "lb", "unsupported"), 2);
    h.check_accounting().unwrap();
}
