//! Unit tests, property tests against etherparse, and structure-aware fuzzing.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::build::{ExtHeader, FrameBuilder};
use super::fuzz::{check_invariants, exercise, mutate, XorShift64};
use super::*;

const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2);

fn v4() -> FrameBuilder {
    FrameBuilder::new().ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 9))
}

fn v6() -> FrameBuilder {
    FrameBuilder::new().ipv6(V6_SRC, V6_DST)
}

fn err_of(frame: &[u8]) -> ParseError {
    match parse(frame) {
        Err(e) => e,
        Ok(p) => panic!("expected an error, parsed {p:?}"),
    }
}

/// The largest IPv4 datagram: its payload ends at byte 65 549 of the frame, past
/// 16 bits; the short path must say so as the general walk does.
#[test]
fn a_datagram_of_65535_bytes_ends_its_payload_past_16_bits() {
    for tcp in [false, true] {
        let b = v4().payload(&vec![0x5a; if tcp { 65_495 } else { 65_507 }]);
        let f = if tcp {
            b.tcp(1024, 80, 0x10)
        } else {
            b.udp(1024, 80)
        }
        .build()
        .bytes;
        assert_eq!(f.len(), 14 + 65_535);
        let p = parse(&f).unwrap();
        assert_eq!(Ok(p), packet::parse_any(&f), "tcp: {tcp}");
        assert_eq!(p.payload().end, 65_549, "tcp: {tcp}");
        assert!(
            packet::parse_plain_v4(&f).is_some(),
            "the short path took it"
        );
    }
}

#[test]
fn ipv4_udp_fields() {
    let f = v4().udp(5000, 9).payload(b"hello").build();
    let p = parse(&f.bytes).unwrap();
    assert_eq!(p.ethertype(), ETHERTYPE_IPV4);
    assert!(p.vlan_tags().is_empty());
    assert_eq!(p.src_ip(), Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))));
    assert_eq!(p.dst_ip(), Some(IpAddr::V4(Ipv4Addr::new(198, 19, 0, 9))));
    assert_eq!(p.ip_proto(), Some(proto::UDP));
    assert_eq!(p.ports(), Some((5000, 9)));
    assert_eq!(p.l3_offset(), 14);
    assert_eq!(p.l4_offset(), Some(34));
    assert_eq!(&f.bytes[p.payload()], b"hello");
    assert!(!p.is_fragment());
    check_invariants(&f.bytes, &p).unwrap();
}

#[test]
fn ethernet_padding_is_not_payload() {
    let mut f = v4().udp(1, 2).payload(b"ab").build().bytes;
    let len = f.len();
    f.resize(60, 0xee);
    let p = parse(&f).unwrap();
    assert_eq!(p.payload(), len - 2..len);
}

#[test]
fn double_vlan_tcp_with_options() {
    let f = v4()
        .vlan(ETHERTYPE_QINQ, 0x2064)
        .vlan(ETHERTYPE_VLAN, 200)
        .tcp(443, 8080, 0x12)
        .tcp_options(&[2, 4, 5, 0xb4])
        .payload(&[7; 10])
        .build();
    let p = parse(&f.bytes).unwrap();
    let tags = p.vlan_tags();
    assert_eq!(tags.len(), 2);
    assert_eq!(
        (tags[0].tpid, tags[0].vid(), tags[0].pcp()),
        (ETHERTYPE_QINQ, 100, 1)
    );
    assert_eq!((tags[1].tpid, tags[1].vid()), (ETHERTYPE_VLAN, 200));
    assert_eq!(p.outer_vlan_id(), Some(100));
    assert_eq!(p.inner_vlan_id(), Some(200));
    assert_eq!(p.l3_offset(), 22);
    assert_eq!(p.ports(), Some((443, 8080)));
    assert_eq!(p.tcp_flags(), Some(0x12));
    assert_eq!(p.payload().len(), 10);
    assert_eq!(p.payload().start, 22 + 20 + 24);
}

#[test]
fn third_vlan_tag_is_refused() {
    let f = v4()
        .vlan(ETHERTYPE_QINQ, 1)
        .vlan(ETHERTYPE_VLAN, 2)
        .vlan(ETHERTYPE_VLAN, 3)
        .build();
    assert_eq!(err_of(&f.bytes), ParseError::TooManyVlanTags);
}

#[test]
fn non_ip_ethertype_is_ok_without_l3() {
    let f = FrameBuilder::new()
        .raw_ethertype(ETHERTYPE_ARP)
        .payload(&[0; 28])
        .build();
    let p = parse(&f.bytes).unwrap();
    assert_eq!(p.ethertype(), ETHERTYPE_ARP);
    assert_eq!(p.l3(), L3::None);
    assert_eq!(p.ip_proto(), None);
    assert_eq!(p.ports(), None);
    assert_eq!(p.payload(), 14..42);
}

#[test]
fn ethernet_and_vlan_truncation() {
    assert_eq!(
        err_of(&[0; 13]),
        ParseError::Truncated {
            layer: Layer::Ethernet,
            need: 14,
            have: 13
        }
    );
    let f = v4().vlan(ETHERTYPE_VLAN, 5).build().bytes;
    assert_eq!(
        err_of(&f[..16]),
        ParseError::Truncated {
            layer: Layer::Vlan,
            need: 4,
            have: 2
        }
    );
}

#[test]
fn ipv4_header_errors() {
    let good = v4().udp(1, 2).payload(&[0; 8]).build();
    let l3 = good.l3_offset;
    let mut f = good.bytes.clone();
    f[l3] = 0x44;
    assert_eq!(err_of(&f), ParseError::BadIhl { ihl: 4 });
    f[l3] = 0x55;
    assert_eq!(
        err_of(&f),
        ParseError::BadIpVersion {
            layer: Layer::Ipv4,
            version: 5
        }
    );
    f[l3] = 0x4f; // 60-byte header in a 36-byte packet
    assert_eq!(
        err_of(&f),
        ParseError::Truncated {
            layer: Layer::Ipv4,
            need: 60,
            have: 36
        }
    );
    assert_eq!(
        err_of(&good.bytes[..l3 + 19]),
        ParseError::Truncated {
            layer: Layer::Ipv4,
            need: 20,
            have: 19
        }
    );

    let mut f = good.bytes.clone();
    f[l3 + 2..l3 + 4].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(
        err_of(&f),
        ParseError::LengthLies {
            layer: Layer::Ipv4,
            claimed: 100,
            have: 36
        }
    );
    f[l3 + 2..l3 + 4].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(
        err_of(&f),
        ParseError::LengthTooShort {
            layer: Layer::Ipv4,
            claimed: 19,
            min: 20
        }
    );
}

#[test]
fn ipv4_options_are_walked() {
    // NOP, NOP, record route (len 7), EOL.
    let ok = v4()
        .ipv4_options(&[1, 1, 7, 7, 4, 0, 0, 0, 0, 0])
        .udp(1, 53)
        .build();
    let p = parse(&ok.bytes).unwrap();
    assert_eq!(p.l4_offset(), Some(14 + 32));
    assert_eq!(p.dst_port(), Some(53));
    let bad_len = v4().ipv4_options(&[7, 1, 0, 0]).udp(1, 53).build();
    assert_eq!(
        err_of(&bad_len.bytes),
        ParseError::BadIpv4Option { offset: 0 }
    );
    let overrun = v4().ipv4_options(&[1, 7, 9, 0]).udp(1, 53).build();
    assert_eq!(
        err_of(&overrun.bytes),
        ParseError::BadIpv4Option { offset: 1 }
    );
}

#[test]
fn ipv4_fragments() {
    let first = v4()
        .ipv4_fragment(0, true, 77)
        .udp(1, 9)
        .payload(&[0; 16])
        .build();
    let mut bytes = first.bytes.clone();
    // The UDP length covers the whole datagram; a first fragment is shorter.
    bytes[first.l4_offset + 4..first.l4_offset + 6].copy_from_slice(&3000u16.to_be_bytes());
    let p = parse(&bytes).unwrap();
    assert!(p.is_fragment());
    assert_eq!(
        p.fragment(),
        Some(Fragment {
            offset: 0,
            more: true,
            id: 77
        })
    );
    assert_eq!(p.ports(), Some((1, 9)));
    assert_eq!(p.payload().end, bytes.len());

    let later = v4()
        .ipv4_fragment(1480, false, 77)
        .ip_proto(proto::UDP)
        .payload(&[0xab; 3])
        .build();
    let p = parse(&later.bytes).unwrap();
    assert!(p.is_fragment());
    assert_eq!(p.ip_proto(), Some(proto::UDP));
    assert_eq!(p.ports(), None);
    assert_eq!(p.l4_offset(), None);
    assert_eq!(&later.bytes[p.payload()], &[0xab; 3]);

    let death = v4()
        .ipv4_fragment(65528, false, 1)
        .ip_proto(proto::ICMP)
        .payload(&[0; 16])
        .build();
    assert_eq!(
        err_of(&death.bytes),
        ParseError::FragmentTooLarge {
            offset: 65528,
            len: 16
        }
    );

    // A tiny first fragment that splits the TCP header is refused.
    let tiny = v4()
        .ipv4_fragment(0, true, 5)
        .ip_proto(proto::TCP)
        .payload(&[0; 8])
        .build();
    assert_eq!(
        err_of(&tiny.bytes),
        ParseError::Truncated {
            layer: Layer::Tcp,
            need: 20,
            have: 8
        }
    );
}

#[test]
fn udp_and_tcp_errors() {
    let u = v4().udp(1, 2).payload(&[0; 4]).build();
    let mut f = u.bytes.clone();
    f[u.l4_offset + 4..u.l4_offset + 6].copy_from_slice(&13u16.to_be_bytes());
    assert_eq!(
        err_of(&f),
        ParseError::LengthLies {
            layer: Layer::Udp,
            claimed: 13,
            have: 12
        }
    );
    f[u.l4_offset + 4..u.l4_offset + 6].copy_from_slice(&7u16.to_be_bytes());
    assert_eq!(
        err_of(&f),
        ParseError::LengthTooShort {
            layer: Layer::Udp,
            claimed: 7,
            min: 8
        }
    );
    // A shorter UDP length is fine: the rest is IP padding, not payload.
    f[u.l4_offset + 4..u.l4_offset + 6].copy_from_slice(&10u16.to_be_bytes());
    assert_eq!(
        parse(&f).unwrap().payload(),
        u.payload_offset..u.payload_offset + 2
    );

    let t = v4().tcp(1, 2, 0x02).payload(&[0; 4]).build();
    let mut f = t.bytes.clone();
    f[t.l4_offset + 12] = 0x40;
    assert_eq!(err_of(&f), ParseError::BadTcpOffset { offset: 4 });
    f[t.l4_offset + 12] = 0x70;
    assert_eq!(
        err_of(&f),
        ParseError::Truncated {
            layer: Layer::Tcp,
            need: 28,
            have: 24
        }
    );
    f[t.l4_offset + 12] = 0x60;
    assert_eq!(parse(&f).unwrap().payload().len(), 0);

    let short = v4().ip_proto(proto::UDP).payload(&[0; 7]).build();
    assert_eq!(
        err_of(&short.bytes),
        ParseError::Truncated {
            layer: Layer::Udp,
            need: 8,
            have: 7
        }
    );
}

#[test]
fn ipv6_ext_chain_and_fragment() {
    let f = v6()
        .ipv6_ext(ExtHeader::HopByHop { len8: 0 })
        .ipv6_ext(ExtHeader::Routing { len8: 2 })
        .ipv6_ext(ExtHeader::Fragment {
            offset: 0,
            more: true,
            id: 0xdead,
        })
        .ipv6_ext(ExtHeader::Auth { len4: 4 })
        .ipv6_ext(ExtHeader::DestOpts { len8: 1 })
        .tcp(22, 2222, 0x10)
        .payload(b"xyz")
        .build();
    let p = parse(&f.bytes).unwrap();
    assert_eq!(
        p.l3(),
        L3::V6 {
            src: V6_SRC,
            dst: V6_DST
        }
    );
    assert_eq!(p.ip_proto(), Some(proto::TCP));
    assert_eq!(
        p.fragment(),
        Some(Fragment {
            offset: 0,
            more: true,
            id: 0xdead
        })
    );
    assert!(p.is_fragment());
    assert_eq!(p.l4_offset(), Some(14 + 40 + 8 + 24 + 8 + 24 + 16));
    assert_eq!(p.ports(), Some((22, 2222)));
    assert_eq!(&f.bytes[p.payload()], b"xyz");

    let later = v6()
        .ipv6_ext(ExtHeader::Fragment {
            offset: 8,
            more: false,
            id: 1,
        })
        .ip_proto(proto::UDP)
        .payload(&[1; 8])
        .build();
    let p = parse(&later.bytes).unwrap();
    assert_eq!((p.ip_proto(), p.ports()), (Some(proto::UDP), None));
    assert_eq!(p.payload(), later.l4_offset..later.bytes.len());

    // After a non-first fragment header come data bytes, not headers, even when the
    // fragment header's next header names an extension header.
    let mut later_ext = v6()
        .ipv6_ext(ExtHeader::Fragment {
            offset: 16,
            more: true,
            id: 2,
        })
        .ip_proto(proto::IPV6_OPTS)
        .payload(&[0; 16])
        .build();
    later_ext.bytes[later_ext.l4_offset + 1] = 0xff; // would claim 2048 bytes as a header
    let p = parse(&later_ext.bytes).unwrap();
    assert_eq!(p.ip_proto(), Some(proto::IPV6_OPTS));
    assert_eq!(p.payload(), later_ext.l4_offset..later_ext.bytes.len());

    let atomic = v6()
        .ipv6_ext(ExtHeader::Fragment {
            offset: 0,
            more: false,
            id: 1,
        })
        .udp(3, 4)
        .build();
    let p = parse(&atomic.bytes).unwrap();
    assert!(!p.is_fragment());
    assert_eq!(p.ports(), Some((3, 4)));
}

#[test]
fn ipv6_errors() {
    let f = v6().udp(1, 2).build();
    let l3 = f.l3_offset;
    let mut b = f.bytes.clone();
    b[l3 + 4..l3 + 6].copy_from_slice(&9u16.to_be_bytes());
    assert_eq!(
        err_of(&b),
        ParseError::LengthLies {
            layer: Layer::Ipv6,
            claimed: 49,
            have: 48
        }
    );
    b[l3] = 0x40;
    assert_eq!(
        err_of(&b),
        ParseError::BadIpVersion {
            layer: Layer::Ipv6,
            version: 4
        }
    );
    assert_eq!(
        err_of(&f.bytes[..l3 + 39]),
        ParseError::Truncated {
            layer: Layer::Ipv6,
            need: 40,
            have: 39
        }
    );

    let hbh_late = v6()
        .ipv6_ext(ExtHeader::DestOpts { len8: 0 })
        .ipv6_ext(ExtHeader::HopByHop { len8: 0 })
        .udp(1, 2)
        .build();
    assert_eq!(err_of(&hbh_late.bytes), ParseError::HopByHopNotFirst);

    let long = v6()
        .ipv6_ext(ExtHeader::Routing { len8: 3 })
        .udp(1, 2)
        .build();
    let ext = long.ext_offset.unwrap();
    let mut b = long.bytes.clone();
    b[ext + 1] = 200; // claims 1608 bytes
    assert_eq!(
        err_of(&b),
        ParseError::Truncated {
            layer: Layer::Ipv6Ext,
            need: 1608,
            have: 40
        }
    );

    let ah0 = v6().ipv6_ext(ExtHeader::Auth { len4: 1 }).udp(1, 2).build();
    let mut b = ah0.bytes.clone();
    b[ah0.ext_offset.unwrap() + 1] = 0;
    assert_eq!(
        err_of(&b),
        ParseError::BadExtHeader {
            next_header: proto::AH
        }
    );
}

#[test]
fn ext_header_count_is_bounded() {
    for n in 0..=MAX_EXT_HEADERS + 3 {
        let mut b = v6();
        for _ in 0..n {
            b = b.ipv6_ext(ExtHeader::DestOpts { len8: 0 });
        }
        let f = b.udp(7, 9).build();
        match parse(&f.bytes) {
            Ok(p) => {
                assert!(n <= MAX_EXT_HEADERS, "{n} headers accepted");
                assert_eq!(p.ports(), Some((7, 9)));
                assert_eq!(p.l4_offset(), Some(54 + 8 * n));
            }
            Err(e) => {
                assert!(n > MAX_EXT_HEADERS, "{n} headers refused: {e}");
                assert_eq!(
                    e,
                    ParseError::TooManyExtHeaders {
                        limit: MAX_EXT_HEADERS
                    }
                );
            }
        }
    }
}

#[test]
fn swap_macs_swaps_and_checks_length() {
    let mut f = FrameBuilder::new()
        .macs([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
        .build()
        .bytes;
    let before = f.clone();
    swap_macs(&mut f).unwrap();
    let e = EthernetHeader::new_checked(&f).unwrap();
    assert_eq!(e.dst_mac(), [7, 8, 9, 10, 11, 12]);
    assert_eq!(e.src_mac(), [1, 2, 3, 4, 5, 6]);
    assert_eq!(f[12..], before[12..]);
    let mut short = [0u8; 13];
    assert_eq!(
        swap_macs(&mut short),
        Err(ParseError::Truncated {
            layer: Layer::Ethernet,
            need: 14,
            have: 13
        })
    );
}

#[test]
fn builder_checksums_verify() {
    let f = v4()
        .ipv4_options(&[1, 1, 1, 1])
        .udp(1, 2)
        .payload(b"abc")
        .build();
    assert_eq!(
        build::checksum(&[&f.bytes[14..38]]),
        0,
        "IPv4 header checksum"
    );
    let s = etherparse::SlicedPacket::from_ethernet(&f.bytes).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &s.net else {
        panic!("not ipv4")
    };
    let Some(etherparse::TransportSlice::Udp(u)) = &s.transport else {
        panic!("not udp")
    };
    let hdr = u.to_header();
    assert_eq!(
        hdr.calc_checksum_ipv4(&ip.header().to_header(), u.payload())
            .unwrap(),
        hdr.checksum
    );
}

// ---------------------------------------------------------------- property tests

/// A well-formed frame description, within what etherparse also understands.
#[derive(Debug, Clone)]
struct Spec {
    vlans: Vec<(u16, u16)>,
    v6: bool,
    v4_options: Vec<u8>,
    ext: Vec<ExtHeader>,
    l4: u8, // 0 UDP, 1 TCP, 2 raw protocol 47 (GRE)
    sport: u16,
    dport: u16,
    tcp_option_words: usize,
    payload: Vec<u8>,
}

impl Spec {
    fn build(&self) -> build::BuiltFrame {
        let mut b = FrameBuilder::new();
        for &(tpid, tci) in &self.vlans {
            b = b.vlan(tpid, tci);
        }
        if self.v6 {
            b = b.ipv6(V6_SRC, V6_DST);
            for e in &self.ext {
                b = b.ipv6_ext(e.clone());
            }
        } else {
            b = b
                .ipv4(Ipv4Addr::new(198, 18, 1, 2), Ipv4Addr::new(198, 19, 3, 4))
                .ipv4_options(&self.v4_options);
        }
        b = match self.l4 {
            0 => b.udp(self.sport, self.dport),
            1 => b
                .tcp(self.sport, self.dport, 0x18)
                .tcp_options(&vec![1; 4 * self.tcp_option_words]),
            _ => b.ip_proto(47),
        };
        b.payload(&self.payload).build()
    }
}

fn v4_options() -> impl Strategy<Value = Vec<u8>> {
    let opt = prop_oneof![
        Just(vec![1u8]),
        (3u8..12).prop_map(|l| {
            let mut v = vec![7, l, 4];
            v.resize(usize::from(l), 0);
            v
        }),
    ];
    prop::collection::vec(opt, 0..4).prop_map(|v| {
        let mut o: Vec<u8> = v.concat();
        o.truncate(36);
        while !o.is_empty() && !o.len().is_multiple_of(4) {
            o.push(1);
        }
        o
    })
}

fn ext_chain() -> impl Strategy<Value = Vec<ExtHeader>> {
    (any::<[bool; 5]>(), 0u8..3, 0u8..3, 1u8..4, any::<u32>()).prop_map(|(on, a, b, c, id)| {
        let mut v = Vec::new();
        if on[0] {
            v.push(ExtHeader::HopByHop { len8: a });
        }
        if on[1] {
            v.push(ExtHeader::DestOpts { len8: b });
        }
        if on[2] {
            v.push(ExtHeader::Routing { len8: a });
        }
        if on[3] {
            // Atomic fragment: etherparse then still parses the transport header.
            v.push(ExtHeader::Fragment {
                offset: 0,
                more: false,
                id,
            });
        }
        if on[4] {
            v.push(ExtHeader::Auth { len4: c * 2 });
        }
        v
    })
}

fn spec() -> impl Strategy<Value = Spec> {
    let tag = (
        prop_oneof![Just(ETHERTYPE_VLAN), Just(ETHERTYPE_QINQ)],
        any::<u16>(),
    );
    (
        prop::collection::vec(tag, 0..=2),
        any::<bool>(),
        v4_options(),
        ext_chain(),
        0u8..3,
        any::<u16>(),
        any::<u16>(),
        0usize..10,
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(
            |(vlans, v6, v4_options, ext, l4, sport, dport, tcp_option_words, payload)| Spec {
                vlans,
                v6,
                v4_options,
                ext,
                l4,
                sport,
                dport,
                tcp_option_words,
                payload,
            },
        )
}

/// What etherparse makes of a frame, reduced to fields both parsers report.
#[derive(Debug, PartialEq)]
struct Summary {
    vids: Vec<u16>,
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<u8>,
    ports: Option<(u16, u16)>,
    payload: Vec<u8>,
}

fn oracle(frame: &[u8]) -> Option<Summary> {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice, VlanSlice};
    let s = SlicedPacket::from_ethernet(frame).ok()?;
    let vids = match &s.vlan {
        None => vec![],
        Some(VlanSlice::SingleVlan(v)) => vec![v.vlan_identifier().value()],
        Some(VlanSlice::DoubleVlan(d)) => vec![
            d.outer().vlan_identifier().value(),
            d.inner().vlan_identifier().value(),
        ],
    };
    let (src, dst, proto, ip_payload) = match &s.net {
        Some(NetSlice::Ipv4(ip)) => (
            Some(IpAddr::V4(ip.header().source_addr())),
            Some(IpAddr::V4(ip.header().destination_addr())),
            Some(ip.payload().ip_number.0),
            ip.payload().payload,
        ),
        Some(NetSlice::Ipv6(ip)) => (
            Some(IpAddr::V6(ip.header().source_addr())),
            Some(IpAddr::V6(ip.header().destination_addr())),
            Some(ip.payload().ip_number.0),
            ip.payload().payload,
        ),
        None => (None, None, None, &[][..]),
    };
    let (ports, payload) = match &s.transport {
        Some(TransportSlice::Udp(u)) => {
            (Some((u.source_port(), u.destination_port())), u.payload())
        }
        Some(TransportSlice::Tcp(t)) => {
            (Some((t.source_port(), t.destination_port())), t.payload())
        }
        _ => (None, ip_payload),
    };
    Some(Summary {
        vids,
        src,
        dst,
        proto,
        ports,
        payload: payload.to_vec(),
    })
}

fn ours(frame: &[u8]) -> Option<Summary> {
    let p = parse(frame).ok()?;
    check_invariants(frame, &p).unwrap();
    Some(Summary {
        vids: p.vlan_tags().iter().map(VlanTag::vid).collect(),
        src: p.src_ip(),
        dst: p.dst_ip(),
        proto: p.ip_proto(),
        ports: p.ports(),
        payload: frame[p.payload()].to_vec(),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn valid_frames_parse_like_the_spec_and_the_oracle(s in spec()) {
        let f = s.build();
        let p = parse(&f.bytes).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(p.vlan_tags().len(), s.vlans.len());
        prop_assert_eq!(p.l4_offset().unwrap_or(f.l4_offset), f.l4_offset);
        match s.l4 {
            0 => prop_assert_eq!(p.ip_proto(), Some(proto::UDP)),
            1 => prop_assert_eq!(p.ip_proto(), Some(proto::TCP)),
            _ => prop_assert_eq!(p.ip_proto(), Some(47)),
        }
        if s.l4 < 2 {
            prop_assert_eq!(p.ports(), Some((s.sport, s.dport)));
        } else {
            prop_assert_eq!(p.ports(), None);
        }
        prop_assert_eq!(&f.bytes[p.payload()], &s.payload[..]);
        let o = oracle(&f.bytes);
        prop_assert!(o.is_some(), "etherparse rejects a frame we built as valid");
        prop_assert_eq!(ours(&f.bytes), o);
    }

    #[test]
    fn link_padding_does_not_change_the_result(s in spec(), pad in 1usize..64) {
        let mut f = s.build().bytes;
        let before = parse(&f).unwrap();
        f.resize(f.len() + pad, 0x5a);
        prop_assert_eq!(parse(&f).unwrap(), before);
    }

    #[test]
    fn every_truncation_is_rejected_like_the_oracle(s in spec(), cut in any::<prop::sample::Index>()) {
        let f = s.build().bytes;
        let cut = cut.index(f.len());
        let r = exercise(&f[..cut]).map_err(TestCaseError::fail)?;
        prop_assert!(r.is_err(), "truncated at {} of {} parsed: {:?}", cut, f.len(), r);
        prop_assert!(oracle(&f[..cut]).is_none());
    }

    #[test]
    fn length_field_corruption_agrees_with_oracle(s in spec(), which in 0u8..3, value in 1u16..=u16::MAX) {
        let f = s.build();
        let mut b = f.bytes.clone();
        let at = match which {
            0 if s.v6 => f.l3_offset + 4,
            0 => f.l3_offset + 2,
            1 if s.l4 == 0 => f.l4_offset + 4,
            1 if s.l4 == 1 => {
                b[f.l4_offset + 12] = (value as u8) << 4;
                usize::MAX
            }
            _ if s.v6 && !s.ext.is_empty() => {
                // Hdr Ext Len of the first extension header (AH counts in 4-byte units).
                b[f.ext_offset.unwrap() + 1] = value as u8;
                usize::MAX
            }
            _ => f.l3_offset + 2,
        };
        if at != usize::MAX {
            b[at..at + 2].copy_from_slice(&value.to_be_bytes());
        }
        let r = exercise(&b).map_err(TestCaseError::fail)?;
        let o = oracle(&b);
        // Only a corrupted IPv6 extension-header length (which == 2) walks the parse
        // onto bytes that are not headers. There our parser may follow the RFCs where
        // etherparse does not, in four named ways; everything else must agree.
        let mine = ours(&b);
        if which == 2 && s.v6 && !s.ext.is_empty() && mine != o {
            let allowed = match &r {
                // Bytes that read as the fragment header of a later fragment: what
                // follows is fragment data, not headers (RFC 8200 4.5), so we stop;
                // etherparse reads on (and fails, or reports another protocol).
                Ok(p) if p.fragment().is_some_and(|f| f.offset > 0) => true,
                // ICMP / ICMPv6, which we do not parse (no ports); etherparse refuses
                // one shorter than its 8-byte header.
                Ok(p) => o.is_none() && matches!(p.ip_proto(), Some(1) | Some(58)),
                // A UDP length of 0: legal only with a Jumbo Payload option (RFC 2675),
                // which no frame here carries; etherparse takes the IPv6 length.
                Err(ParseError::LengthTooShort { layer: Layer::Udp, claimed: 0, .. }) => true,
                // A fragment whose data would end past 65 535 bytes is an error (RFC
                // 8200 4.5); etherparse does not check it.
                Err(ParseError::FragmentTooLarge { .. }) => true,
                Err(_) => false,
            };
            if allowed {
                return Ok(());
            }
        }
        prop_assert_eq!(r.is_ok(), o.is_some(), "ours {:?} vs etherparse {:?}", r, o);
        if r.is_ok() {
            prop_assert_eq!(mine, o);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _outcome = exercise(&bytes).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn ip_shaped_noise_never_panics(
        ethertype in prop_oneof![Just(ETHERTYPE_IPV4), Just(ETHERTYPE_IPV6), Just(ETHERTYPE_VLAN), Just(ETHERTYPE_QINQ)],
        first in any::<u8>(),
        rest in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.push(first);
        f.extend_from_slice(&rest);
        let _outcome = exercise(&f).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn random_ihl_and_tcp_offset(s in spec(), ihl in 0u8..16, doff in 0u8..16) {
        let f = s.build();
        let mut b = f.bytes.clone();
        if !s.v6 {
            b[f.l3_offset] = 0x40 | ihl;
        }
        if s.l4 == 1 {
            b[f.l4_offset + 12] = doff << 4;
        }
        let r = exercise(&b).map_err(TestCaseError::fail)?;
        if !s.v6 && ihl < 5 {
            prop_assert_eq!(r, Err(ParseError::BadIhl { ihl }));
        } else if s.l4 == 1 && doff < 5 && (s.v6 || usize::from(ihl) * 4 == 20 + s.v4_options.len()) {
            prop_assert_eq!(r, Err(ParseError::BadTcpOffset { offset: doff }));
        }
    }

    #[test]
    fn random_ext_header_chains(
        chain in prop::collection::vec((prop::sample::select(vec![0u8, 6, 17, 43, 44, 50, 51, 59, 60, 135]), any::<u8>(), any::<u8>()), 0..12),
        tail_len in 0usize..64,
    ) {
        // Raw chain: each entry [next, len, off, off] padded to (len % 4 + 1) * 8 bytes,
        // then `tail_len` bytes of 0x11 where the chain ends in UDP (0x1111 length).
        let mut body = Vec::new();
        for (i, &(_, len, off)) in chain.iter().enumerate() {
            let next = chain.get(i + 1).map_or(proto::UDP, |c| c.0);
            let start = body.len();
            body.extend_from_slice(&[next, len % 4, off, off]);
            body.resize(start + (usize::from(len % 4) + 1) * 8, 0);
        }
        body.resize(body.len() + tail_len, 0x11);
        let mut f = v6().build().bytes;
        f.truncate(14 + 40);
        f[14 + 4..14 + 6].copy_from_slice(&(body.len() as u16).to_be_bytes());
        f[14 + 6] = chain.first().map_or(proto::UDP, |c| c.0);
        f.extend_from_slice(&body);
        let r = exercise(&f).map_err(TestCaseError::fail)?;
        // Chains of plain options/routing/mobility headers have a known outcome.
        if chain.iter().all(|c| matches!(c.0, 43 | 60 | 135)) {
            let expected = if chain.len() > MAX_EXT_HEADERS {
                ParseError::TooManyExtHeaders { limit: MAX_EXT_HEADERS }
            } else if tail_len < 8 {
                ParseError::Truncated { layer: Layer::Udp, need: 8, have: tail_len }
            } else {
                ParseError::LengthLies { layer: Layer::Udp, claimed: 0x1111, have: tail_len }
            };
            prop_assert_eq!(r, Err(expected));
        }
        if chain.iter().skip(1).take(MAX_EXT_HEADERS).any(|c| c.0 == proto::HOPOPT)
            && chain.iter().take_while(|c| matches!(c.0, 43 | 60 | 135)).count() == chain.iter().skip(1).position(|c| c.0 == proto::HOPOPT).unwrap() + 1
        {
            prop_assert_eq!(r, Err(ParseError::HopByHopNotFirst));
        }
    }

    /// Untagged IPv4 UDP and TCP without options, the frames `parse` reads on its
    /// short path, with one header byte (Ethernet to the end of a TCP header) set
    /// to any value or the frame cut anywhere: the short path takes the frame only
    /// when the general walk parses it the same (`exercise` compares the two).
    #[test]
    fn the_short_path_agrees_with_the_general_walk(
        tcp in any::<bool>(),
        at in prop_oneof![
            // Ethertype, version/IHL, total length, flags/offset, protocol, UDP length,
            // TCP data offset: the fields the short path decides on.
            prop::sample::select(vec![12usize, 13, 14, 16, 17, 20, 21, 23, 38, 39, 46]),
            12usize..54,
        ],
        value in prop_oneof![
            prop::sample::select(vec![0u8, 1, 5, 7, 8, 0x08, 0x11, 0x20, 0x40, 0x45, 0x46, 0x50, 0x60, 0x80, 0xff]),
            any::<u8>(),
        ],
        cut in any::<prop::sample::Index>(),
        payload in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let b = v4().payload(&payload);
        let f = if tcp { b.tcp(1024, 80, 0x18) } else { b.udp(1024, 80) }.build().bytes;
        prop_assert!(packet::parse_plain_v4(&f).is_some(), "the short path missed {:02x?}", f);
        let mut m = f.clone();
        if at < m.len() {
            m[at] = value;
        }
        let _outcome = exercise(&m).map_err(TestCaseError::fail)?;
        let _outcome = exercise(&f[..cut.index(f.len() + 1)]).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn structured_mutations_keep_invariants(s in spec(), seed in any::<u64>()) {
        let f = s.build().bytes;
        let mut rng = XorShift64::new(seed);
        let mut out = Vec::new();
        let fields = [12usize, 14, 16, 18, 20, 23, 34, 38, 46, 54, 58];
        for _ in 0..64 {
            mutate(&mut rng, &f, &[], &mut out, &fields);
            let _outcome = exercise(&out).map_err(TestCaseError::fail)?;
        }
    }
}
