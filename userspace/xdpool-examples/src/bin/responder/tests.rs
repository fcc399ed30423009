use super::{Answers, Responder};
use std::net::Ipv4Addr;
use xdpool::testing::{FrameBuilder, Harness, Steered};

const CONFIG: &str = include_str!("../../../../../configs/examples/responder.toml");
const OURS: [u8; 6] = [0x02, 0x78, 0x64, 0x70, 0x00, 0x0b];
const PEER: [u8; 6] = [0x02, 0x78, 0x64, 0x70, 0x00, 0x0a];

fn arp_request(target: [u8; 4]) -> Vec<u8> {
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&PEER);
    arp.extend_from_slice(&[198, 18, 0, 1]);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&target);
    arp.extend_from_slice(&[0; 18]); // padding to 60 bytes
    FrameBuilder::new()
        .macs([0xff; 6], PEER)
        .raw_ethertype(0x0806)
        .payload(&arp)
        .build()
        .bytes
}

/// An ICMP echo request (id 7, sequence `seq`) from 198.18.0.1 to `dst`.
fn echo_request(dst: [u8; 4], seq: u16) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0, 7];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(b"xdpool responder test 0123456789");
    let c = sum(&[&icmp]);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = FrameBuilder::new()
        .macs(OURS, PEER)
        .ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::from(dst))
        .ip_proto(1)
        .payload(&icmp)
        .build()
        .bytes;
    // A TTL a few hops spent (the reply's is 64 again), the header re-summed.
    f[22] = 61;
    f[24..26].copy_from_slice(&[0, 0]);
    let c = sum(&[&f[14..34]]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
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

fn harness() -> Harness<impl xdpool::HandlerSet> {
    Harness::builder(CONFIG)
        .handler("responder", Responder)
        .build()
        .unwrap()
}

#[test]
fn an_arp_request_for_our_address_becomes_its_reply() {
    let mut h = harness();
    for _ in 0..5 {
        assert_eq!(
            h.send("lab", &arp_request([198, 18, 0, 9])),
            Steered::Worker
        );
    }
    assert_eq!(
        h.send("lab", &arp_request([198, 18, 0, 7])),
        Steered::Worker
    );
    h.run();
    let out = h.sent("lab");
    assert_eq!(out.len(), 5, "only the asked-for address is answered");
    let req = arp_request([198, 18, 0, 9]);
    for o in &out {
        assert_eq!(&o[..6], &PEER);
        assert_eq!(&o[6..12], &OURS);
        assert_eq!(&o[12..14], &[8, 6]);
        assert_eq!(&o[14..22], &[0, 1, 8, 0, 6, 4, 0, 2], "a reply");
        assert_eq!(&o[22..28], &OURS, "sender: our MAC");
        assert_eq!(
            &o[28..32],
            &[198, 18, 0, 9],
            "sender: the address asked for"
        );
        assert_eq!(&o[32..38], &PEER, "target: who asked");
        assert_eq!(&o[38..42], &[198, 18, 0, 1]);
        assert_eq!(o.len(), req.len());
    }
    assert_eq!(h.user_counter("lab", "responder", "arp_replies"), 5);
    assert_eq!(h.user_counter("lab", "responder", "ignored"), 1);
    assert_eq!(
        h.counter("lab", "handler_emitted"),
        5,
        "each reply a new frame"
    );
    assert_eq!(h.counter("lab", "action_drop"), 6, "every request dropped");
    h.check_accounting().unwrap();
}

#[test]
fn an_echo_request_becomes_an_echo_reply_with_valid_checksums() {
    let mut h = harness();
    for seq in 0..100 {
        assert_eq!(
            h.send("lab", &echo_request([198, 18, 0, 9], seq)),
            Steered::Worker
        );
    }
    assert_eq!(
        h.send("lab", &echo_request([198, 18, 0, 2], 0)),
        Steered::Passed,
        "another address's ping is the kernel's"
    );
    h.run();
    let out = h.sent("lab");
    assert_eq!(out.len(), 100);
    for (seq, o) in out.iter().enumerate() {
        let req = echo_request([198, 18, 0, 9], seq as u16);
        assert_eq!(&o[..6], &PEER);
        assert_eq!(&o[6..12], &OURS);
        let (ip, icmp) = (&o[14..34], &o[34..]);
        assert_eq!(&ip[12..16], &[198, 18, 0, 9], "from the address pinged");
        assert_eq!(&ip[16..20], &[198, 18, 0, 1]);
        assert_eq!(ip[8], 64);
        assert_eq!(sum(&[ip]), 0, "IPv4 header checksum");
        assert_eq!(icmp[0], 0, "echo reply");
        assert_eq!(sum(&[icmp]), 0, "ICMP checksum");
        assert_eq!(icmp[4..], req[38..], "id, sequence and data echoed");
    }
    assert_eq!(h.user_counter("lab", "responder", "echo_replies"), 100);
    assert_eq!(h.counter("lab", "tx_packets"), 100);
    assert_eq!(
        h.counter("lab", "handler_emitted"),
        100,
        "each reply a new frame"
    );
    assert_eq!(
        h.counter("lab", "action_drop"),
        100,
        "every request dropped"
    );
    h.check_accounting().unwrap();
}

#[test]
fn other_frames_are_dropped_and_counted() {
    let mut h = harness();
    let ipv6 = FrameBuilder::new()
        .ipv6("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap())
        .ip_proto(59)
        .build()
        .bytes;
    let lldp = FrameBuilder::new()
        .raw_ethertype(0x88cc)
        .payload(&[0; 46])
        .build()
        .bytes;
    let mut not_request = arp_request([198, 18, 0, 9]);
    not_request[21] = 2; // an ARP reply: not answered
    for f in [&ipv6, &lldp, &not_request] {
        assert_eq!(h.send("lab", f), Steered::Worker);
    }
    h.run();
    assert!(h.sent("lab").is_empty());
    assert_eq!(h.user_counter("lab", "responder", "ignored"), 3);
    assert_eq!(h.counter("lab", "action_drop"), 3);
    h.check_accounting().unwrap();
}

#[test]
fn the_arg_names_a_mac_and_addresses() {
    assert_eq!(
        Answers::parse("mac=02:00:00:00:00:01,ip=198.18.0.2,ip=198.18.0.3").unwrap(),
        Answers {
            mac: [2, 0, 0, 0, 0, 1],
            ips: vec![Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3)]
        }
    );
    assert!(Answers::parse("ip=198.18.0.2")
        .unwrap_err()
        .contains("mac=MAC is required"));
    assert!(Answers::parse("mac=02:00:00:00:00:01")
        .unwrap_err()
        .contains("no ip"));
    assert!(Answers::parse("mac=02:00:00:00:00,ip=198.18.0.2")
        .unwrap_err()
        .contains("not a MAC"));
    assert!(Answers::parse("name=x").unwrap_err().contains("write mac="));
}
