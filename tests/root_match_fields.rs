//! The source and VLAN match fields end to end, as root on the veth lab: `xdpool
//! run` with VLAN and source-prefix rules, hand-built tagged (802.1Q, QinQ) and
//! untagged frames sent from the generator's namespace through an AF_PACKET socket,
//! paced so that veth never drops one; every rule counts exactly its frames, the XDP
//! program steers and drops exactly what the rules say, the worker drops exactly
//! the steered frames.

mod common;

use common::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;
use xdpool::internal::wire::build::FrameBuilder;
use xdpool_lab::lab::LabConfig;

const RULES: &str = r#"
[[rule]]
name = "vlan5"
vlan = 5
action = "drop"

[[rule]]
name = "vlan7-xdp"
vlan = 7
proto = "udp"
dst_port = 9
action = "xdpdrop"

[[rule]]
name = "src4"
proto = "udp"
src = "198.18.9.0/24"
src_port = "2000-2999"
action = "drop"

[[rule]]
name = "src6-xdp"
src = "2001:2:0:9::/64"
action = "xdpdrop"
"#;

/// Sends `frame` `count` times out of `dev` in namespace `ns` (AF_PACKET), 32 at a
/// time with a pause, so the receiving veth's ring never fills.
fn send_raw_in(ns: &str, dev: &str, frame: &[u8], count: usize) {
    let dev = dev.to_string();
    let frame = frame.to_vec();
    xdpool::internal::netns::in_netns(ns, move || {
        let ifindex = xdpool::internal::netns::ifindex(&dev).expect("sender's veth");
        send_raw(ifindex, &frame, count, Some(32));
    })
    .expect("enter the sender's namespace");
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn vlan_and_source_rules_steer_and_drop_exactly_their_frames() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xv"),
            ..LabConfig::default()
        },
        "fields",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("fields", &[0], RULES);
    let run = XdpoolRun::start(&cfg, &[]);

    let (a4, b4) = (st.a.ipv4, st.b.ipv4);
    let base = || {
        FrameBuilder::new()
            .macs(st.b.mac, st.a.mac)
            .payload(&[0x5a; 22])
    };
    let v4 =
        |b: FrameBuilder, src: Ipv4Addr, sport: u16| b.ipv4(src, b4).udp(sport, 9).build().bytes;
    let src_in: Ipv4Addr = "198.18.9.7".parse().unwrap();
    let src6_in: Ipv6Addr = "2001:2:0:9::1".parse().unwrap();
    // (what, frame, count, rule it must hit or None)
    let sends: Vec<(&str, Vec<u8>, usize, Option<usize>)> = vec![
        (
            "802.1Q vid 5 (PCP 3)",
            v4(base().vlan(0x8100, 0x6005), a4, 1024),
            1000,
            Some(0),
        ),
        (
            "QinQ outer 7, inner 5",
            v4(base().vlan(0x88a8, 7).vlan(0x8100, 5), a4, 1024),
            1000,
            Some(1),
        ),
        (
            "QinQ outer 9, inner 5: the inner id is not matched",
            v4(base().vlan(0x88a8, 9).vlan(0x8100, 5), a4, 1024),
            700,
            None,
        ),
        (
            "untagged from 198.18.9.7:2500",
            v4(base(), src_in, 2500),
            1000,
            Some(2),
        ),
        (
            "untagged from 198.18.9.7:3000, port outside the range",
            v4(base(), src_in, 3000),
            600,
            None,
        ),
        (
            "vid 9 from 198.18.9.7:2999: the source rule has no VLAN condition",
            v4(base().vlan(0x8100, 9), src_in, 2999),
            500,
            Some(2),
        ),
        (
            "IPv6 from 2001:2:0:9::1",
            base().ipv6(src6_in, st.b.ipv6).udp(1024, 9).build().bytes,
            800,
            Some(3),
        ),
        (
            "IPv6 from the lab's own address",
            base().ipv6(st.a.ipv6, st.b.ipv6).udp(1024, 9).build().bytes,
            400,
            None,
        ),
    ];
    let mut want_hits = [0u64; 4];
    for (what, frame, count, rule) in &sends {
        assert!(
            xdpool::internal::wire::parse(frame).is_ok(),
            "{what}: not a well-formed frame"
        );
        send_raw_in(&st.a.netns, &st.a.dev, frame, *count);
        if let Some(r) = rule {
            want_hits[*r] += *count as u64;
        }
    }
    let (steer_want, xdpdrop_want) = (want_hits[0] + want_hits[2], want_hits[1] + want_hits[3]);
    let snap = |k: &str| {
        xdpool::internal::stats::control::query(sock)
            .map(|s| s["xdp"][k].as_u64().unwrap_or(0))
            .unwrap_or(0)
    };
    wait_for(Duration::from_secs(5), || {
        snap("steered") >= steer_want && snap("dropped") >= xdpdrop_want
    });
    std::thread::sleep(Duration::from_millis(200));
    let s = xdpool::internal::stats::control::query(sock).expect("stats");
    let list = s["rules"]["list"]
        .as_array()
        .expect("rules in the snapshot")
        .clone();
    let got_hits: Vec<u64> = list
        .iter()
        .map(|r| r["packets"].as_u64().unwrap())
        .collect();
    let matches: Vec<&str> = list.iter().map(|r| r["match"].as_str().unwrap()).collect();
    let xdp = s["xdp"].clone();
    let (code, summary, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    eprintln!("rule hits {got_hits:?} (want {want_hits:?}); xdp {xdp}; rules {matches:?}");
    eprintln!(
        "worker: packets {} action_drop {}",
        summary["packets"],
        counter(&summary, "action_drop")
    );

    assert_eq!(
        matches,
        [
            "vlan 5",
            "vlan 7 udp dst_port 9",
            "udp src 198.18.9.0/24 src_port 2000-2999",
            "src 2001:2:0:9::/64"
        ],
        "the stats name the new fields"
    );
    assert_eq!(got_hits, want_hits, "each rule counted exactly its frames");
    assert_eq!(
        xdp["steered"].as_u64(),
        Some(steer_want),
        "steered: the vlan5 and src4 frames: {xdp}"
    );
    assert_eq!(
        xdp["dropped"].as_u64(),
        Some(xdpdrop_want),
        "dropped in XDP: the vlan7 and src6 frames: {xdp}"
    );
    assert_eq!(xdp["malformed"].as_u64(), Some(0));
    let unmatched: u64 = sends
        .iter()
        .filter(|s| s.3.is_none())
        .map(|s| s.2 as u64)
        .sum();
    // The kernel may send the lab a few frames of its own (IPv6 ND); they pass too.
    assert!(
        xdp["passed"].as_u64().unwrap() >= unmatched,
        "the unmatched frames were passed: {xdp}"
    );
    assert_eq!(
        summary["packets"].as_u64(),
        Some(steer_want),
        "the worker received the steered frames"
    );
    assert_eq!(
        counter(&summary, "action_drop"),
        steer_want,
        "and dropped each, as the rules say"
    );
}
