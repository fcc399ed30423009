//! Packet functions through the real worker over heap rings (`crate::testing`):
//! what leaves each port, byte for byte, the counters, and the frame accounting.

use crate::testing::{FrameBuilder, Harness, Steered};
use crate::{Counter, Declaration, Handler, LaneSetup, Mac, Packet, PortRef, Verdict};

fn udp(dport: u16, tag: u8) -> Vec<u8> {
    FrameBuilder::new()
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4("198.18.0.1".parse().unwrap(), "198.18.1.1".parse().unwrap())
        .udp(1024, dport)
        .payload(&[tag; 18])
        .build()
        .bytes
}

fn with_rules(rules: &str) -> String {
    crate::testing::two_ports(rules)
}

#[test]
fn a_closure_reflects_and_its_verdict_uses_the_built_in_rewrite() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"reflect\"",
    ))
    .handler("reflect", |_: &mut Packet<'_>| {
        Verdict::back().with_mac(Mac::Swap)
    })
    .build()
    .unwrap();
    let f = udp(9, 1);
    for _ in 0..100 {
        assert_eq!(h.send("in", &f), Steered::Worker);
    }
    h.run();
    let out = h.sent("in");
    assert_eq!(out.len(), 100);
    let mut want = f.clone();
    want[..6].copy_from_slice(&f[6..12]);
    want[6..12].copy_from_slice(&f[..6]);
    assert!(out.iter().all(|o| *o == want));
    assert_eq!(h.counter("in", "handler_calls"), 100);
    assert_eq!(h.counter("in", "tx_packets"), 100);
    assert!(h.sent("out").is_empty());
    h.check_accounting().unwrap();
}

/// Forwards to a declared port with the rule's arg as the new destination port,
/// counts by arg, and drops what it does not know.
struct Steer;
struct SteerLane {
    out: PortRef,
    forwarded: Counter,
}

impl Handler for Steer {
    type Lane = SteerLane;
    fn declare(&self) -> Declaration {
        Declaration::new().sends_to("out").tx_per_frame(0)
    }
    fn lane(&self, setup: &mut LaneSetup<'_>) -> SteerLane {
        SteerLane {
            out: setup.port("out").expect("declared"),
            forwarded: setup.counter("forwarded"),
        }
    }
    fn handle(&self, lane: &mut SteerLane, pkt: &mut Packet<'_>) -> Verdict {
        let Some(port) = pkt.arg().and_then(|a| a.parse::<u16>().ok()) else {
            return Verdict::drop();
        };
        let Ok(p) = pkt.parse() else {
            return Verdict::drop();
        };
        let (Some(17), Some(l4)) = (p.ip_proto(), p.l4_offset()) else {
            return Verdict::drop();
        };
        let at = l4 + 2;
        pkt.bytes_mut()[at..at + 2].copy_from_slice(&port.to_be_bytes());
        lane.forwarded.inc();
        Verdict::forward(lane.out).with_mac(Mac::To([2, 0, 0, 0, 0xbb, 1]))
    }
}

#[test]
fn a_handler_forwards_to_its_declared_port_with_the_rule_arg_and_counts() {
    let rules = r#"
[[rule]]
port = "in"
name = "to-53"
proto = "udp"
dst_port = 9
action = "call"
handler = "steer"
arg = "53"

[[rule]]
port = "in"
proto = "udp"
dst_port = 10
action = "call"
handler = "steer"
"#;
    let mut h = Harness::builder(&with_rules(rules))
        .handler("steer", Steer)
        .build()
        .unwrap();
    for i in 0..40 {
        h.send("in", &udp(9, i));
    }
    for i in 0..7 {
        h.send("in", &udp(10, i));
    }
    assert_eq!(
        h.send("in", &udp(11, 0)),
        Steered::Passed,
        "no rule: the kernel's"
    );
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 40);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(&o[..6], &[2, 0, 0, 0, 0xbb, 1]);
        assert_eq!(&o[6..12], &[2, 0, 0, 0, 0xd0, 1], "the egress device's MAC");
        assert_eq!(u16::from_be_bytes([o[36], o[37]]), 53);
        assert_eq!(o[o.len() - 1], i as u8, "in order");
    }
    assert_eq!(h.user_counter("in", "steer", "forwarded"), 40);
    assert_eq!(h.counter("in", "handler_calls"), 47);
    assert_eq!(h.counter("in", "action_drop"), 7, "no arg: dropped");
    assert_eq!(h.counter("in", "forwarded"), 40);
    h.check_accounting().unwrap();
}

#[test]
fn the_rule_name_and_arg_reach_the_handler() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\nname = \"r1\"\naction = \"call\"\nhandler = \"see\"\narg = \"x\"",
    ))
    .handler("see", move |pkt: &mut Packet<'_>| {
        let mut s = s.lock().unwrap();
        s.push((
            pkt.rule_name().map(String::from),
            pkt.arg().map(String::from),
            pkt.queue(),
        ));
        Verdict::drop()
    })
    .build()
    .unwrap();
    h.send("in", &udp(9, 0));
    h.run();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Some("r1".into()), Some("x".into()), 0)]
    );
}

#[test]
fn a_panicking_handler_loses_no_frame() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"boom\"",
    ))
    .handler("boom", |pkt: &mut Packet<'_>| {
        if pkt.bytes()[pkt.len() - 1] % 2 == 1 {
            panic!("odd frame");
        }
        Verdict::back()
    })
    .build()
    .unwrap();
    for i in 0..50 {
        h.send("in", &udp(9, i));
    }
    h.run();
    assert_eq!(h.sent("in").len(), 25);
    assert_eq!(h.counter("in", "handler_panics"), 25);
    assert_eq!(h.counter("in", "handler_calls"), 50);
    h.check_accounting().unwrap();
}

#[test]
fn head_and_tail_changes_leave_with_the_frame() {
    // Push a VLAN tag after the MACs and cut the payload's last 8 bytes.
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"tag\"",
    ))
    .handler("tag", |pkt: &mut Packet<'_>| {
        if pkt
            .insert(12, 4)
            .map(|t| t.copy_from_slice(&[0x81, 0, 0, 42]))
            .is_err()
            || pkt.trim_tail(8).is_err()
        {
            return Verdict::drop();
        }
        Verdict::back()
    })
    .build()
    .unwrap();
    let f = udp(9, 7);
    h.send("in", &f);
    h.run();
    let out = h.sent("in");
    assert_eq!(out.len(), 1);
    let o = &out[0];
    assert_eq!(o.len(), f.len() + 4 - 8);
    assert_eq!(&o[..12], &f[..12]);
    assert_eq!(&o[12..16], &[0x81, 0, 0, 42]);
    assert_eq!(&o[16..], &f[12..f.len() - 8]);
    h.check_accounting().unwrap();
}

/// A frame a handler cuts below two MACs and sends as it is cannot leave: it is
/// dropped, counted `rx_too_short`, its chunk back in the pool.
#[test]
fn a_frame_cut_shorter_than_two_macs_is_dropped_counted() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"cut\"",
    ))
    .handler("cut", |pkt: &mut Packet<'_>| {
        let keep = if pkt.bytes()[14 + 9] == 17 { 10 } else { 12 };
        if pkt.trim_tail(pkt.len() - keep).is_err() {
            return Verdict::drop();
        }
        Verdict::back()
    })
    .build()
    .unwrap();
    let short = udp(9, 1);
    let mut twelve = short.clone();
    twelve[14 + 9] = 6; // TCP in the IPv4 header: cut to 12 bytes, which may leave
    for _ in 0..3 {
        h.send("in", &short);
    }
    h.send("in", &twelve);
    h.run();
    assert_eq!(h.sent("in"), vec![twelve[..12].to_vec()]);
    assert_eq!(h.counter("in", "handler_calls"), 4);
    assert_eq!(h.counter("in", "rx_too_short"), 3);
    h.check_accounting().unwrap();
}

#[test]
fn a_mirror_leaves_a_declared_port_by_reference() {
    let cfg = with_rules(
        "[[port]]\nname = \"mon\"\ninterface = \"c0\"\nqueues = [0]\n\n\
         [[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"m\"",
    );
    struct Mirror;
    impl Handler for Mirror {
        type Lane = (PortRef, PortRef);
        fn declare(&self) -> Declaration {
            Declaration::new().sends_to("out").sends_to("mon")
        }
        fn lane(&self, s: &mut LaneSetup<'_>) -> (PortRef, PortRef) {
            (s.port("out").unwrap(), s.port("mon").unwrap())
        }
        fn handle(&self, l: &mut (PortRef, PortRef), _: &mut Packet<'_>) -> Verdict {
            Verdict::forward(l.0).mirror(l.1)
        }
    }
    let mut h = Harness::builder(&cfg).handler("m", Mirror).build().unwrap();
    for i in 0..10 {
        h.send("in", &udp(9, i));
    }
    h.run();
    let (out, mon) = (h.sent("out"), h.sent("mon"));
    assert_eq!(out.len(), 10);
    assert_eq!(out, mon);
    assert_eq!(h.counter("in", "mirrored"), 10);
    h.check_accounting().unwrap();
}

#[test]
fn an_undeclared_port_is_not_given_to_the_handler() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"h\"",
    ))
    .handler("h", |_: &mut Packet<'_>| Verdict::drop())
    .build()
    .unwrap();
    struct Probe;
    impl Handler for Probe {
        type Lane = ();
        fn lane(&self, s: &mut LaneSetup<'_>) {
            // Each lane sees its own arrival port and nothing undeclared.
            let other = if s.arrival_name() == "in" {
                "out"
            } else {
                "in"
            };
            assert!(s.port(other).is_none(), "{other} is not declared");
            assert_eq!(s.port(s.arrival_name()), Some(s.arrival()));
        }
        fn handle(&self, _: &mut (), _: &mut Packet<'_>) -> Verdict {
            Verdict::drop()
        }
    }
    Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"p\"",
    ))
    .handler("p", Probe)
    .build()
    .unwrap();
    h.check_accounting().unwrap();
}

#[test]
fn config_errors_name_the_rule_key_and_what_to_do() {
    let call = |extra: &str| {
        with_rules(&format!(
            "[[rule]]\nport = \"in\"\naction = \"call\"\n{extra}"
        ))
    };
    let err = |text: &str| match Harness::builder(text).handler("known", Steer).build() {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    };
    let e = err(&call("handler = \"nope\""));
    assert!(
        e.contains("rule[0].handler") && e.contains("this program registers known"),
        "{e}"
    );
    let e = err(&call(""));
    assert!(
        e.contains("rule[0].handler") && e.contains("needs handler"),
        "{e}"
    );
    let e = err(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"drop\"\narg = \"1\"",
    ));
    assert!(
        e.contains("rule[0].arg") && e.contains("belongs to action = \"call\""),
        "{e}"
    );
    let one_port = "[[port]]\nname = \"in\"\ninterface = \"a0\"\nqueues = [0]\n[[rule]]\naction = \"call\"\nhandler = \"known\"";
    let e = err(one_port);
    assert!(
        e.contains("sends to port `out`") && e.contains("line"),
        "{e}"
    );
    let e = match Harness::builder(&call("handler = \"x\"")).build() {
        Ok(_) => panic!("a program without handlers accepted a call rule"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("registers no packet functions"), "{e}");
    // Two handlers under one name: the harness refuses them as `App` does.
    let e = match Harness::builder(&call("handler = \"known\""))
        .handler("known", Steer)
        .handler("known", Steer)
        .build()
    {
        Ok(_) => panic!("two handlers named `known` accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("two handlers are registered as `known`"), "{e}");
    // And `App::check` refuses them before it reads the file.
    let e = crate::App::from_config("/nonexistent/xdpool.toml")
        .handler("known", Steer)
        .handler("known", Steer)
        .check()
        .unwrap_err()
        .to_string();
    assert!(e.contains("two handlers are registered as `known`"), "{e}");
}

/// Answers each frame with a new small frame (its first 14 bytes, MACs swapped, and
/// a marker) out of the arrival port, and drops the frame itself.
#[test]
fn emitted_frames_leave_and_are_accounted() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"answer\"",
    ))
    .handler("answer", |pkt: &mut Packet<'_>| {
        let mut reply = [0u8; 20];
        reply[..6].copy_from_slice(&pkt.bytes()[6..12]);
        reply[6..12].copy_from_slice(&pkt.bytes()[..6]);
        reply[12..14].copy_from_slice(&[0x88, 0xb5]);
        reply[14] = pkt.bytes()[pkt.len() - 1];
        let here = pkt.port();
        assert_eq!(
            pkt.emit(here, &reply[..5]),
            Err(crate::EmitError::Length(5))
        );
        pkt.emit(here, &reply).unwrap();
        Verdict::drop()
    })
    .build()
    .unwrap();
    for i in 0..300u16 {
        h.send("in", &udp(9, i as u8));
        if i % 100 == 99 {
            h.run();
        }
    }
    let out = h.sent("in");
    assert_eq!(out.len(), 300);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(o.len(), 20);
        assert_eq!(&o[..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(o[14], i as u8);
    }
    assert_eq!(h.counter("in", "handler_emitted"), 300);
    assert_eq!(h.counter("in", "action_drop"), 300);
    h.check_accounting().unwrap();
}

/// A delay line of two: each frame is kept and sent back two frames later; at the
/// end the two still kept go back to the pool when the handler's state is dropped.
#[test]
fn kept_frames_leave_later_or_go_back_when_their_handle_drops() {
    use std::collections::VecDeque;
    struct Delay;
    impl Handler for Delay {
        type Lane = VecDeque<crate::Kept>;
        fn lane(&self, _: &mut LaneSetup<'_>) -> VecDeque<crate::Kept> {
            VecDeque::new()
        }
        fn handle(&self, line: &mut VecDeque<crate::Kept>, pkt: &mut Packet<'_>) -> Verdict {
            if line.len() == 2 {
                let k = line.pop_front().unwrap();
                pkt.send_kept(k, Verdict::back()).unwrap();
            }
            let k = pkt.keep().expect("kept once");
            assert!(pkt.keep().is_none(), "not twice");
            line.push_back(k);
            Verdict::back() // not applied: kept
        }
    }
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"d\"",
    ))
    .handler("d", Delay)
    .build()
    .unwrap();
    for i in 0..10 {
        h.send("in", &udp(9, i));
        h.run();
    }
    let out = h.sent("in");
    assert_eq!(out.len(), 8);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(o[o.len() - 1], i as u8, "two frames late, in order");
    }
    assert_eq!(h.counter("in", "kept_taken"), 10);
    assert_eq!(h.counter("in", "kept_sent"), 8);
    assert_eq!(h.counter("in", "kept"), 2);
    let a = h
        .check_accounting()
        .expect_err("two frames are the application's");
    assert!(a.contains("2 frames still with the application"), "{a}");
    let end = h.finish();
    assert_eq!(
        end,
        crate::testing::Finished {
            kept_leaked: 0,
            inflight_at_destroy: 0
        }
    );
}

/// A handle leaked with mem::forget: its frame is named at the end and stays out of
/// the pool (a stalled shutdown), never silently lost.
#[test]
fn a_leaked_kept_frame_is_named_at_the_end() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"leak\"",
    ))
    .handler("leak", |pkt: &mut Packet<'_>| {
        if pkt.bytes()[pkt.len() - 1] == 3 {
            std::mem::forget(pkt.keep());
        }
        Verdict::drop()
    })
    .build()
    .unwrap();
    for i in 0..5 {
        h.send("in", &udp(9, i));
    }
    h.run();
    assert_eq!(h.counter("in", "kept"), 1);
    assert_eq!(h.counter("in", "action_drop"), 4);
    let end = h.finish();
    assert_eq!(end.kept_leaked, 1);
    assert_eq!(end.inflight_at_destroy, 1);
}

#[test]
fn a_next_hop_nobody_knows_drops_the_frame_counted_and_leaves_the_rest_alone() {
    struct NextHop;
    impl Handler for NextHop {
        type Lane = PortRef;
        fn declare(&self) -> Declaration {
            Declaration::new().sends_to("out").tx_per_frame(0)
        }
        fn lane(&self, setup: &mut LaneSetup<'_>) -> PortRef {
            setup.port("out").unwrap()
        }
        fn handle(&self, out: &mut PortRef, pkt: &mut Packet<'_>) -> Verdict {
            // Port 7 to the known next hop, the rest through the neighbour table
            // (empty here).
            match pkt.parse().ok().and_then(|p| p.dst_port()) {
                Some(7) => Verdict::forward(*out).with_mac(Mac::To([2, 0, 0, 0, 0xbb, 1])),
                _ => Verdict::forward(*out).with_mac(Mac::NextHop),
            }
        }
    }
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"nh\"",
    ))
    .handler("nh", NextHop)
    .build()
    .unwrap();
    for i in 0..10 {
        h.send("in", &udp(if i % 2 == 0 { 7 } else { 9 }, i));
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 5);
    assert!(out.iter().all(|o| o[..6] == [2, 0, 0, 0, 0xbb, 1]));
    assert_eq!(h.counter("in", "neigh_miss_drop"), 5);
    assert_eq!(h.counter("in", "handler_calls"), 10);
    h.check_accounting().unwrap();
}

/// Sends back UDP to the ports it was told to (`allow PORT`, `deny PORT` as control
/// messages), drops the rest.
struct Gate;

impl Handler for Gate {
    type Lane = Vec<u16>;
    fn lane(&self, _: &mut LaneSetup<'_>) -> Vec<u16> {
        Vec::new()
    }
    fn handle(&self, open: &mut Vec<u16>, pkt: &mut Packet<'_>) -> Verdict {
        match pkt.parse().ok().and_then(|p| p.dst_port()) {
            Some(p) if open.contains(&p) => Verdict::back(),
            _ => Verdict::drop(),
        }
    }
    fn control(&self, open: &mut Vec<u16>, msg: &str) -> Result<(), String> {
        let (verb, port) = msg
            .split_once(' ')
            .ok_or_else(|| format!("`{msg}`: say `allow PORT` or `deny PORT`"))?;
        let port: u16 = port.trim().parse().map_err(|e| format!("`{port}`: {e}"))?;
        match verb {
            "allow" => open.push(port),
            "deny" => open.retain(|&p| p != port),
            "panic" => panic!("told to"),
            _ => return Err(format!("`{verb}`: say `allow` or `deny`")),
        }
        Ok(())
    }
}

#[test]
fn a_control_message_changes_every_lanes_state_between_batches() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"gate\"\n\
         [[rule]]\nport = \"out\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"gate\"",
    ))
    .handler("gate", Gate)
    .handler("plain", |_: &mut Packet<'_>| Verdict::drop())
    .build()
    .unwrap();
    h.send("in", &udp(53, 1));
    h.run();
    assert!(h.sent("in").is_empty(), "nothing is open yet");

    // Both lanes (one per port) take it.
    assert_eq!(h.control("gate", "allow 53"), Ok(2));
    h.send("in", &udp(53, 2));
    h.send("out", &udp(53, 3));
    h.send("in", &udp(54, 4));
    h.run();
    assert_eq!(h.sent("in"), vec![udp(53, 2)]);
    assert_eq!(h.sent("out"), vec![udp(53, 3)]);

    // A refusal names the lane and the handler's words, and changes nothing.
    let e = h.control("gate", "open 53").unwrap_err();
    assert_eq!(e, "in queue 0: `open`: say `allow` or `deny`");
    let e = h.control("gate", "panic 1").unwrap_err();
    assert!(e.contains("the handler panicked: "), "{e}");
    assert!(e.contains("told to"), "{e}");
    let e = h.control("plain", "allow 1").unwrap_err();
    assert!(e.contains("this handler takes no control messages"), "{e}");
    let e = h.control("nat", "allow 1").unwrap_err();
    assert_eq!(
        e,
        "no handler named `nat`: this program registers `gate`, `plain`"
    );
    h.send("in", &udp(53, 5));
    h.run();
    assert_eq!(h.sent("in").len(), 1, "53 is still open");

    assert_eq!(h.control("gate", "deny 53"), Ok(2));
    h.send("in", &udp(53, 6));
    h.run();
    assert!(h.sent("in").is_empty());
    assert_eq!(
        h.counter("in", "handler_panics"),
        0,
        "a control panic is its answer"
    );
    h.check_accounting().unwrap();
}

/// Holds every frame for two ticks, then sends it back: a delay line.
struct DelayLine;
#[derive(Default)]
struct Delayed {
    ticks: u64,
    held: std::collections::VecDeque<(u64, crate::Kept)>,
}

impl Handler for DelayLine {
    type Lane = Delayed;
    fn declare(&self) -> Declaration {
        Declaration::new().tick_every(std::time::Duration::from_millis(10))
    }
    fn lane(&self, _: &mut LaneSetup<'_>) -> Delayed {
        Delayed::default()
    }
    fn handle(&self, lane: &mut Delayed, pkt: &mut Packet<'_>) -> Verdict {
        if let Some(k) = pkt.keep() {
            lane.held.push_back((lane.ticks, k));
        }
        Verdict::drop()
    }
    fn tick(&self, lane: &mut Delayed, tick: &mut crate::Tick<'_>) {
        lane.ticks += 1;
        while lane
            .held
            .front()
            .is_some_and(|(at, _)| at + 2 <= lane.ticks)
        {
            let (_, k) = lane.held.pop_front().unwrap();
            tick.send_kept(k, Verdict::back()).unwrap();
        }
    }
}

#[test]
fn a_tick_sends_kept_frames_when_no_new_frame_arrives() {
    use std::time::Duration;
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"delay\"",
    ))
    .handler("delay", DelayLine)
    .build()
    .unwrap();
    for i in 0..10 {
        h.send("in", &udp(9, i));
    }
    h.run();
    assert!(h.sent("in").is_empty());
    assert_eq!(h.counter("in", "kept"), 10);
    // Not due yet: no tick.
    h.advance(Duration::from_millis(5));
    h.advance(Duration::from_millis(4));
    assert!(h.sent("in").is_empty());
    // One tick: still held (two are needed).
    h.advance(Duration::from_millis(1));
    assert!(h.sent("in").is_empty());
    assert_eq!(h.counter("in", "kept"), 10);
    // The second: all ten leave, in order, with nothing new arriving.
    h.advance(Duration::from_millis(10));
    let out = h.sent("in");
    assert_eq!(out, (0..10).map(|i| udp(9, i)).collect::<Vec<_>>());
    assert_eq!(h.counter("in", "kept"), 0);
    assert_eq!(h.counter("in", "kept_sent"), 10);
    h.check_accounting().unwrap();
}

/// A UDP rule and a TCP rule calling `handler` with `arg`s `udp_arg` and
/// `tcp_arg`: their verdicts differ (the rule's position), so the worker parses
/// each frame to pick one, as with `configs/examples/lb.toml`.
fn udp_and_tcp_calls(handler: &str, udp_arg: &str, tcp_arg: &str) -> String {
    with_rules(&format!(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"{handler}\"\narg = \"{udp_arg}\"\n\n\
         [[rule]]\nport = \"in\"\nproto = \"tcp\"\naction = \"call\"\nhandler = \"{handler}\"\narg = \"{tcp_arg}\""
    ))
}

/// Frames of both families, tagged and not, UDP and TCP, with IPv4 options and an
/// IPv6 extension header: what the UDP and TCP rules take.
fn mixed_frames() -> Vec<Vec<u8>> {
    let v4 = |b: FrameBuilder| {
        b.macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4("198.18.0.1".parse().unwrap(), "198.18.1.1".parse().unwrap())
    };
    let v6 = |b: FrameBuilder| {
        b.macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap())
    };
    vec![
        v4(FrameBuilder::new())
            .udp(1024, 9)
            .payload(&[1; 18])
            .build()
            .bytes,
        v4(FrameBuilder::new()).tcp(1024, 80, 0x02).build().bytes,
        v4(FrameBuilder::new().vlan(0x8100, 7))
            .udp(1, 53)
            .payload(&[2; 30])
            .build()
            .bytes,
        v4(FrameBuilder::new())
            .ipv4_options(&[1, 1, 1, 0])
            .tcp(5, 6, 0x10)
            .build()
            .bytes,
        v6(FrameBuilder::new())
            .udp(7, 8)
            .payload(&[3; 10])
            .build()
            .bytes,
        v6(FrameBuilder::new().vlan(0x88a8, 1).vlan(0x8100, 2))
            .ipv6_ext(crate::testing::ExtHeader::DestOpts { len8: 0 })
            .tcp(9, 10, 0x18)
            .build()
            .bytes,
    ]
}

/// A handler that does not change the frame gets from `Packet::parse` exactly what
/// the parser makes of its bytes, on every kind of frame the rules take.
#[test]
fn an_unchanged_frame_parses_as_its_bytes() {
    let mut h = Harness::builder(&udp_and_tcp_calls("check", "u", "t"))
        .handler("check", |pkt: &mut Packet<'_>| {
            let p = pkt.parse();
            // Twice: the second answer is the first's.
            if p.is_ok() && p == crate::wire::parse(pkt.bytes()) && pkt.parse() == p {
                Verdict::back()
            } else {
                Verdict::drop()
            }
        })
        .build()
        .unwrap();
    let frames = mixed_frames();
    for f in &frames {
        assert_eq!(h.send("in", f), Steered::Worker);
    }
    h.run();
    assert_eq!(h.sent("in"), frames, "each frame back, unchanged, in order");
    assert_eq!(h.counter("in", "handler_calls"), frames.len() as u64);
    assert_eq!(h.counter("in", "action_drop"), 0);
    h.check_accounting().unwrap();
}

/// `Packet::shared_arg` is the rule's arg as one `Arc` per text: the UDP and the
/// TCP rule with the same text hand the handler the same one (a handler that keeps
/// it re-parses nothing from rule to rule), rules with different texts different
/// ones; a new rule list (a reload) brings new ones.
#[test]
fn rules_with_the_same_arg_text_share_one_arc() {
    let seen: std::sync::Arc<std::sync::Mutex<Vec<std::sync::Arc<str>>>> = Default::default();
    let run = |config: &str| {
        let log = seen.clone();
        let mut h = Harness::builder(config)
            .handler("see", move |pkt: &mut Packet<'_>| {
                assert_eq!(pkt.shared_arg().map(|a| &**a), pkt.arg());
                log.lock().unwrap().extend(pkt.shared_arg().cloned());
                Verdict::drop()
            })
            .build()
            .unwrap();
        let (udp4, tcp4) = (udp(9, 1), mixed_frames()[1].clone());
        for f in [&udp4, &tcp4, &udp4] {
            assert_eq!(h.send("in", f), Steered::Worker);
        }
        h.run();
        h.check_accounting().unwrap();
    };
    run(&udp_and_tcp_calls("see", "a,b", "a,b"));
    run(&udp_and_tcp_calls("see", "a,b", "c"));
    let s = seen.lock().unwrap();
    let texts: Vec<&str> = s.iter().map(|a| &**a).collect();
    assert_eq!(texts, ["a,b", "a,b", "a,b", "a,b", "c", "a,b"]);
    let same = |i: usize, j: usize| std::sync::Arc::ptr_eq(&s[i], &s[j]);
    assert!(same(0, 1) && same(1, 2), "one text, one Arc, rule to rule");
    assert!(!same(3, 4), "different texts, different Arcs");
    assert!(!same(0, 3), "another list, new Arcs (the same text)");
}

/// A handler that parses, changes the frame, and parses again sees the new
/// headers: the IP protocol rewritten in `bytes_mut()`, a VLAN tag pushed with
/// `insert` (a head adjustment).
#[test]
fn a_changed_frame_parses_anew() {
    let mut h = Harness::builder(&udp_and_tcp_calls("change", "proto", "vlan"))
        .handler("change", |pkt: &mut Packet<'_>| {
            let Ok(before) = pkt.parse() else {
                return Verdict::drop();
            };
            let changed = match pkt.arg() {
                Some("proto") => {
                    // IPv4's protocol or IPv6's next header (no extension headers here).
                    let v4 = matches!(before.l3(), crate::wire::L3::V4 { .. });
                    let at = before.l3_offset() + if v4 { 9 } else { 6 };
                    pkt.bytes_mut()[at] = 132; // SCTP: no ports parsed
                    true
                }
                Some("vlan") => pkt
                    .insert(12, 4)
                    .map(|t| t.copy_from_slice(&[0x81, 0, 0, 42]))
                    .is_ok(),
                _ => false,
            };
            let after = pkt.parse();
            let new = match (pkt.arg(), after) {
                (Some("proto"), Ok(a)) => a.ip_proto() == Some(132) && a.ports().is_none(),
                (Some("vlan"), Ok(a)) => {
                    a.outer_vlan_id() == Some(42) && a.l3_offset() == before.l3_offset() + 4
                }
                _ => false,
            };
            if changed && new && after == crate::wire::parse(pkt.bytes()) {
                Verdict::back()
            } else {
                Verdict::drop()
            }
        })
        .build()
        .unwrap();
    let udp4 = udp(9, 1);
    let tcp4 = mixed_frames()[1].clone();
    let udp6 = mixed_frames()[4].clone();
    for f in [&udp4, &tcp4, &udp6] {
        assert_eq!(h.send("in", f), Steered::Worker);
    }
    h.run();
    let mut proto4 = udp4.clone();
    proto4[14 + 9] = 132;
    let mut tagged = tcp4[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0, 0, 42]);
    tagged.extend_from_slice(&tcp4[12..]);
    let mut proto6 = udp6.clone();
    proto6[14 + 6] = 132;
    assert_eq!(h.sent("in"), vec![proto4, tagged, proto6]);
    assert_eq!(h.counter("in", "handler_calls"), 3);
    assert_eq!(h.counter("in", "action_drop"), 0);
    h.check_accounting().unwrap();
}

/// A frame the parser refuses, steered by a rule without conditions behind a UDP
/// rule (the XDP program steers a few such), is dropped by the worker's rule
/// lookup: no handler sees it.
#[test]
fn a_frame_the_rules_cannot_parse_never_reaches_a_handler() {
    let mut h = Harness::builder(&with_rules(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\naction = \"call\"\nhandler = \"h\"\narg = \"a\"\n\n\
         [[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"h\"\narg = \"b\"",
    ))
    .handler("h", |pkt: &mut Packet<'_>| {
        if pkt.parse().is_ok() {
            Verdict::back()
        } else {
            Verdict::drop()
        }
    })
    .build()
    .unwrap();
    let good = udp(9, 1);
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x44; // IHL 4: below the minimum
    let mut short = good[..14 + 10].to_vec(); // cut inside the IPv4 header
    short[14] = 0x45;
    for f in [&bad_ihl, &short] {
        assert!(crate::wire::parse(f).is_err());
        assert_eq!(
            h.send("in", f),
            Steered::Worker,
            "the rule without conditions"
        );
    }
    assert_eq!(h.send("in", &good), Steered::Worker);
    h.run();
    assert_eq!(h.sent("in"), vec![good]);
    assert_eq!(h.counter("in", "handler_calls"), 1);
    assert_eq!(h.counter("in", "action_drop"), 2);
    h.check_accounting().unwrap();
}

/// The parse kept for one port's `call` frame is that frame's only: a frame of
/// another port whose single rule calls the handler without a lookup (nothing
/// parsed) gets its own headers, not the earlier frame's. The earlier frames are
/// dropped by the handler, so nothing after their call touches them.
#[test]
fn a_kept_parse_never_reaches_another_frame() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let config = format!(
        "{}\n[[rule]]\nport = \"out\"\naction = \"call\"\nhandler = \"check\"\narg = \"o\"",
        udp_and_tcp_calls("check", "u", "t")
    );
    let wrong = std::sync::Arc::new(AtomicUsize::new(0));
    let w = wrong.clone();
    let mut h = Harness::builder(&config)
        .handler("check", move |pkt: &mut Packet<'_>| {
            if pkt.parse() != crate::wire::parse(pkt.bytes()) {
                w.fetch_add(1, Ordering::Relaxed);
            }
            match pkt.arg() {
                Some("o") => Verdict::back(),
                _ => Verdict::drop(),
            }
        })
        .build()
        .unwrap();
    let frames = mixed_frames();
    // A frame `in` looked up (its parse kept), then a different one on `out`.
    for (i, f) in frames.iter().enumerate() {
        let other = &frames[(i + 1) % frames.len()];
        assert_eq!(h.send("in", f), Steered::Worker);
        h.run();
        assert_eq!(h.send("out", other), Steered::Worker);
        h.run();
        assert_eq!(
            h.sent("out"),
            vec![other.clone()],
            "frame {i}'s successor on `out`"
        );
    }
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "parses of another frame");
    assert_eq!(h.counter("in", "handler_calls"), frames.len() as u64);
    assert_eq!(h.counter("in", "action_drop"), frames.len() as u64);
    h.check_accounting().unwrap();
}

/// `Harness::reload` replaces the rule list as a running program's reload does:
/// frames sent before it are acted on under the old list, those after under the
/// new one (a `call` rule moved from UDP to TCP, its arg changed), the handler
/// sees a new `rules_generation`, and its lane state (a count) survives. A config
/// that changes the ports, or names an unknown handler, is refused and changes
/// nothing; the same list again changes nothing either.
#[test]
fn a_reload_moves_a_call_rule_and_keeps_the_lane_state() {
    struct Count;
    impl Handler for Count {
        type Lane = u64;
        fn lane(&self, _: &mut LaneSetup<'_>) -> u64 {
            0
        }
        fn handle(&self, n: &mut u64, pkt: &mut Packet<'_>) -> Verdict {
            *n += 1;
            // The frame carries: the count, the list's generation, the arg's first byte.
            let arg = pkt.arg().map_or(0, |a| a.as_bytes()[0]);
            let gen = pkt.rules_generation() as u8;
            let count = *n as u8;
            let b = pkt.bytes_mut();
            let len = b.len();
            b[len - 3..].copy_from_slice(&[count, gen, arg]);
            Verdict::back()
        }
    }
    let one = |proto: &str, arg: &str| {
        with_rules(&format!(
            "[[rule]]\nport = \"in\"\nproto = \"{proto}\"\naction = \"call\"\nhandler = \"count\"\narg = \"{arg}\""
        ))
    };
    let mut h = Harness::builder(&one("udp", "a"))
        .handler("count", Count)
        .build()
        .unwrap();
    let (udp, tcp) = (udp(9, 1), mixed_frames()[1].clone());
    let tail = |f: &Vec<u8>| f[f.len() - 3..].to_vec();
    assert_eq!(h.send("in", &udp), Steered::Worker);
    assert_eq!(h.send("in", &tcp), Steered::Passed);
    h.run();
    let out = h.sent("in");
    assert_eq!(out.iter().map(tail).collect::<Vec<_>>(), [[1, 1, b'a']]);

    h.reload(&one("tcp", "b")).unwrap();
    assert_eq!(h.send("in", &udp), Steered::Passed);
    assert_eq!(h.send("in", &tcp), Steered::Worker);
    h.run();
    let out = h.sent("in");
    assert_eq!(
        out.iter().map(tail).collect::<Vec<_>>(),
        [[2, 2, b'b']],
        "the count goes on; a new generation and arg"
    );

    let e = h.reload(&one("tcp", "c").replace("handler = \"count\"", "handler = \"nope\""));
    assert!(e.unwrap_err().to_string().contains("nope"));
    let e = h.reload(
        &(one("udp", "c") + "\n[[port]]\nname = \"x\"\ninterface = \"c0\"\nqueues = [0]\n"),
    );
    assert!(e.unwrap_err().to_string().contains("not ports"));
    // The same list again: nothing to take, the generation stays.
    h.reload(&one("tcp", "b")).unwrap();
    assert_eq!(h.send("in", &tcp), Steered::Worker);
    h.run();
    assert_eq!(
        h.sent("in").iter().map(tail).collect::<Vec<_>>(),
        [[3, 2, b'b']]
    );
    assert_eq!(h.counter("in", "handler_calls"), 3);
    h.check_accounting().unwrap();
}

/// `Verdict::back().with_mac(Mac::To(..))`: the frame leaves the port it came in by
/// with that destination and the arrival device's MAC as source (as `forward` writes
/// the egress device's), not dropped as a next hop nobody knows.
#[test]
fn a_back_verdict_with_a_fixed_mac_writes_the_arrival_devices_mac_as_source() {
    let rules = r#"
[[rule]]
port = "in"
proto = "udp"
action = "call"
handler = "to"
"#;
    let mut h = Harness::builder(&with_rules(rules))
        .handler("to", |_: &mut Packet<'_>| {
            Verdict::back().with_mac(Mac::To([2, 0, 0, 0, 0xbb, 7]))
        })
        .build()
        .unwrap();
    for i in 0..5 {
        h.send("in", &udp(9, i));
    }
    h.run();
    let out = h.sent("in");
    assert_eq!(out.len(), 5);
    for o in &out {
        assert_eq!(&o[..12], &[2, 0, 0, 0, 0xbb, 7, 2, 0, 0, 0, 0xd0, 0]);
    }
    assert_eq!(h.counter("in", "neigh_miss_drop"), 0);
}
