//! UDP test frames over IPv4 and IPv6.
//!
//! **Frame size** here means the bytes handed to the device: Ethernet header through
//! the end of the UDP payload, *excluding* the 4-byte FCS, which the NIC appends (and
//! veth never has). This is what XDP sees as `data_end - data`, what `rx_bytes`
//! counts, and what kernel pktgen's `pkt_size` means. So the classic "64-byte
//! frame" of RFC 2544 is `size = 60` here; `size = 64` is 68 bytes on a wire.
//! Limits: at least [`MIN_FRAME`] (60, the Ethernet minimum without FCS) and large
//! enough for the headers (62 for IPv6); at most [`MAX_FRAME`] (the generator
//! further limits it to the device's MTU + 14).
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Ethernet header length.
pub const ETH_HLEN: usize = 14;
/// IPv4 header length (no options).
pub const IPV4_HLEN: usize = 20;
/// IPv6 header length.
pub const IPV6_HLEN: usize = 40;
/// UDP header length.
pub const UDP_HLEN: usize = 8;
/// Smallest frame we build: the Ethernet minimum without FCS.
pub const MIN_FRAME: usize = 60;
/// Largest frame we build (9000-byte jumbo MTU + Ethernet header).
pub const MAX_FRAME: usize = 9014;
/// Payload starts with this tag (when it fits), so captures are easy to recognise.
pub const PAYLOAD_TAG: &[u8; 6] = b"XDPOOL";

/// Errors from building frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Requested size out of range.
    #[error("frame size {size} out of range: use {min}..={max} bytes (without FCS)")]
    BadSize {
        /// Requested size.
        size: usize,
        /// Smallest allowed for this address family.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
    /// Source and destination are different address families.
    #[error("source {src} and destination {dst} are different IP versions: use two IPv4 or two IPv6 addresses")]
    MixedFamilies {
        /// Source address.
        src: IpAddr,
        /// Destination address.
        dst: IpAddr,
    },
    /// A port range that could not be parsed or is reversed.
    #[error("invalid port range {0:?}: use PORT or FIRST-LAST with FIRST <= LAST")]
    BadPortRange(String),
}

/// An inclusive range of UDP ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

impl PortRange {
    /// `first..=last`; rejects reversed ranges.
    pub fn new(first: u16, last: u16) -> Result<Self, PacketError> {
        if first > last {
            return Err(PacketError::BadPortRange(format!("{first}-{last}")));
        }
        Ok(Self { first, last })
    }

    /// A single port.
    pub const fn single(port: u16) -> Self {
        Self {
            first: port,
            last: port,
        }
    }

    /// Number of ports in the range.
    pub fn len(&self) -> u32 {
        u32::from(self.last - self.first) + 1
    }

    /// Always false: a range holds at least one port.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th port, wrapping around.
    pub fn nth(&self, i: u32) -> u16 {
        self.first + (i % self.len()) as u16
    }
}

impl FromStr for PortRange {
    type Err = PacketError;

    /// `9` or `1000-1999`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || PacketError::BadPortRange(s.to_string());
        match s.split_once('-') {
            None => s.trim().parse().map(Self::single).map_err(|_| bad()),
            Some((a, b)) => {
                let a = a.trim().parse().map_err(|_| bad())?;
                let b = b.trim().parse().map_err(|_| bad())?;
                Self::new(a, b).map_err(|_| bad())
            }
        }
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// Everything that makes one UDP frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFrameSpec {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IP source (same family as `dst_ip`).
    pub src_ip: IpAddr,
    /// IP destination.
    pub dst_ip: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Frame size without FCS (see the module docs).
    pub frame_size: usize,
}

/// Smallest frame size for an address family.
pub fn min_frame_size(ipv6: bool) -> usize {
    let headers = ETH_HLEN + UDP_HLEN + if ipv6 { IPV6_HLEN } else { IPV4_HLEN };
    headers.max(MIN_FRAME)
}

/// Checks a frame size for an address family.
pub fn check_frame_size(size: usize, ipv6: bool) -> Result<(), PacketError> {
    let min = min_frame_size(ipv6);
    if size < min || size > MAX_FRAME {
        return Err(PacketError::BadSize {
            size,
            min,
            max: MAX_FRAME,
        });
    }
    Ok(())
}

/// Builds one Ethernet + IPv4/IPv6 + UDP frame with valid IPv4 header and UDP
/// checksums. The payload is [`PAYLOAD_TAG`] (if it fits) then bytes counting up.
pub fn build_udp_frame(spec: &UdpFrameSpec) -> Result<Vec<u8>, PacketError> {
    let ipv6 = match (spec.src_ip, spec.dst_ip) {
        (IpAddr::V4(_), IpAddr::V4(_)) => false,
        (IpAddr::V6(_), IpAddr::V6(_)) => true,
        (src, dst) => return Err(PacketError::MixedFamilies { src, dst }),
    };
    check_frame_size(spec.frame_size, ipv6)?;
    let size = spec.frame_size;
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    let ip_len = size - ETH_HLEN;
    let l3 = ETH_HLEN;
    let l4 = l3 + if ipv6 { IPV6_HLEN } else { IPV4_HLEN };
    let udp_len = size - l4;

    // UDP header and payload first: the checksum covers them.
    f[l4..l4 + 2].copy_from_slice(&spec.src_port.to_be_bytes());
    f[l4 + 2..l4 + 4].copy_from_slice(&spec.dst_port.to_be_bytes());
    f[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let payload = &mut f[l4 + UDP_HLEN..];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = i as u8;
    }
    if payload.len() >= PAYLOAD_TAG.len() {
        payload[..PAYLOAD_TAG.len()].copy_from_slice(PAYLOAD_TAG);
    }

    let mut pseudo = Vec::with_capacity(40);
    match (spec.src_ip, spec.dst_ip) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut f[l3..l4];
            ip[0] = 0x45; // version 4, 5 words
            ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
            ip[8] = 64; // TTL
            ip[9] = 17; // UDP
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let sum = internet_checksum(&[ip]);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            pseudo.extend_from_slice(&src.octets());
            pseudo.extend_from_slice(&dst.octets());
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let ip = &mut f[l3..l4];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            ip[6] = 17; // next header: UDP
            ip[7] = 64; // hop limit
            ip[8..24].copy_from_slice(&src.octets());
            ip[24..40].copy_from_slice(&dst.octets());
            pseudo.extend_from_slice(&src.octets());
            pseudo.extend_from_slice(&dst.octets());
            pseudo.extend_from_slice(&(udp_len as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
        }
        _ => unreachable!("families checked above"),
    }
    let mut sum = internet_checksum(&[&pseudo, &f[l4..]]);
    if sum == 0 {
        // 0 means "no checksum" in UDP over IPv4 and is forbidden over IPv6.
        sum = 0xffff;
    }
    f[l4 + 6..l4 + 8].copy_from_slice(&sum.to_be_bytes());
    Ok(f)
}

/// RFC 1071 checksum over the concatenation of `parts` (each part but the last must
/// have an even length).
pub fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A set of flows: one template frame per (source port, destination port) pair,
/// walking the source range fastest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    /// Fields common to every frame (ports are overwritten).
    pub base: UdpFrameSpec,
    /// Source ports to walk.
    pub src_ports: PortRange,
    /// Destination ports to walk.
    pub dst_ports: PortRange,
    /// At most this many templates (at least 1).
    pub max_flows: usize,
}

/// Builds the template frames of a flow set: `min(max_flows, |src| * |dst|)` frames.
pub fn build_flows(spec: &FlowSpec) -> Result<Vec<Vec<u8>>, PacketError> {
    let n_src = spec.src_ports.len() as usize;
    let total = n_src * spec.dst_ports.len() as usize;
    let n = total.min(spec.max_flows.max(1));
    (0..n)
        .map(|i| {
            let mut one = spec.base.clone();
            one.src_port = spec.src_ports.nth((i % n_src) as u32);
            one.dst_port = spec.dst_ports.nth((i / n_src) as u32);
            build_udp_frame(&one)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const DST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn spec(ipv6: bool, size: usize) -> UdpFrameSpec {
        let (src_ip, dst_ip) = if ipv6 {
            (
                IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
                IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2)),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            )
        };
        UdpFrameSpec {
            src_mac: SRC_MAC,
            dst_mac: DST_MAC,
            src_ip,
            dst_ip,
            src_port: 4321,
            dst_port: 9,
            frame_size: size,
        }
    }

    /// One's-complement sum written out independently of `internet_checksum`:
    /// a valid header or segment (checksum field included) sums to 0xffff.
    fn ones_complement_sum(bytes: &[u8]) -> u16 {
        let mut padded = bytes.to_vec();
        if padded.len() % 2 == 1 {
            padded.push(0);
        }
        let mut acc: u32 = 0;
        for pair in padded.chunks(2) {
            acc += (pair[0] as u32) << 8 | pair[1] as u32;
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    fn check(frame: &[u8], ipv6: bool, size: usize) {
        assert_eq!(frame.len(), size);
        let p = SlicedPacket::from_ethernet(frame).expect("frame parses");
        let eth = p
            .link
            .as_ref()
            .and_then(|l| l.to_header())
            .expect("ethernet");
        let eth = match eth {
            etherparse::LinkHeader::Ethernet2(e) => e,
            other => panic!("not ethernet: {other:?}"),
        };
        assert_eq!((eth.source, eth.destination), (SRC_MAC, DST_MAC));
        let udp = match &p.transport {
            Some(TransportSlice::Udp(u)) => u.clone(),
            other => panic!("not udp: {other:?}"),
        };
        assert_eq!((udp.source_port(), udp.destination_port()), (4321, 9));
        let l4 = ETH_HLEN + if ipv6 { IPV6_HLEN } else { IPV4_HLEN };
        assert_eq!(udp.length() as usize, size - l4);
        assert_ne!(udp.checksum(), 0);
        let pseudo: Vec<u8> = match p.net.as_ref().expect("ip") {
            NetSlice::Ipv4(ip) => {
                assert!(!ipv6);
                let h = ip.header();
                assert_eq!(h.source_addr(), Ipv4Addr::new(198, 18, 0, 1));
                assert_eq!(h.destination_addr(), Ipv4Addr::new(198, 18, 0, 2));
                assert_eq!(h.total_len() as usize, size - ETH_HLEN);
                assert_eq!(
                    ones_complement_sum(&frame[ETH_HLEN..l4]),
                    0xffff,
                    "IPv4 header checksum"
                );
                let mut v = h.source().to_vec();
                v.extend_from_slice(&h.destination());
                v.extend_from_slice(&[0, 17]);
                v.extend_from_slice(&(udp.length()).to_be_bytes());
                v
            }
            NetSlice::Ipv6(ip) => {
                assert!(ipv6);
                let h = ip.header();
                assert_eq!(h.source_addr(), Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1));
                assert_eq!(
                    h.destination_addr(),
                    Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2)
                );
                assert_eq!(h.payload_length() as usize, size - l4);
                let mut v = h.source().to_vec();
                v.extend_from_slice(&h.destination());
                v.extend_from_slice(&(udp.length() as u32).to_be_bytes());
                v.extend_from_slice(&[0, 0, 0, 17]);
                v
            }
        };
        let mut segment = pseudo;
        segment.extend_from_slice(&frame[l4..]);
        assert_eq!(ones_complement_sum(&segment), 0xffff, "UDP checksum");
        // And etherparse agrees.
        let headers = etherparse::PacketHeaders::from_ethernet_slice(frame).unwrap();
        let expected = match (&headers.net, &headers.transport) {
            (
                Some(etherparse::NetHeaders::Ipv4(ip, _)),
                Some(etherparse::TransportHeader::Udp(u)),
            ) => u.calc_checksum_ipv4(ip, headers.payload.slice()).unwrap(),
            (
                Some(etherparse::NetHeaders::Ipv6(ip, _)),
                Some(etherparse::TransportHeader::Udp(u)),
            ) => u.calc_checksum_ipv6(ip, headers.payload.slice()).unwrap(),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(expected, udp.checksum());
    }

    #[test]
    fn ipv4_frames_parse_with_valid_checksums() {
        for size in [60, 64, 333, 1500, 1514] {
            check(&build_udp_frame(&spec(false, size)).unwrap(), false, size);
        }
    }

    #[test]
    fn ipv6_frames_parse_with_valid_checksums() {
        for size in [62, 64, 333, 1500, 1514] {
            check(&build_udp_frame(&spec(true, size)).unwrap(), true, size);
        }
    }

    #[test]
    fn sizes_out_of_range_are_named_errors() {
        assert_eq!(
            build_udp_frame(&spec(false, 59)).unwrap_err(),
            PacketError::BadSize {
                size: 59,
                min: 60,
                max: MAX_FRAME
            }
        );
        assert_eq!(
            build_udp_frame(&spec(true, 61)).unwrap_err(),
            PacketError::BadSize {
                size: 61,
                min: 62,
                max: MAX_FRAME
            }
        );
        assert!(matches!(
            build_udp_frame(&spec(false, MAX_FRAME + 1)),
            Err(PacketError::BadSize { .. })
        ));
        let mut mixed = spec(false, 100);
        mixed.dst_ip = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(matches!(
            build_udp_frame(&mixed),
            Err(PacketError::MixedFamilies { .. })
        ));
    }

    #[test]
    fn payload_carries_the_tag() {
        let f = build_udp_frame(&spec(false, 100)).unwrap();
        assert_eq!(&f[42..48], PAYLOAD_TAG);
    }

    #[test]
    fn port_ranges_parse() {
        assert_eq!("9".parse::<PortRange>().unwrap(), PortRange::single(9));
        let r: PortRange = "1000-1003".parse().unwrap();
        assert_eq!(
            (r.len(), r.nth(0), r.nth(3), r.nth(4)),
            (4, 1000, 1003, 1000)
        );
        assert_eq!(r.to_string(), "1000-1003");
        for bad in ["", "x", "5-3", "1-70000", "1-2-3"] {
            assert!(bad.parse::<PortRange>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn flows_cover_port_pairs() {
        let fs = FlowSpec {
            base: spec(false, 64),
            src_ports: "1000-1003".parse().unwrap(),
            dst_ports: "9-10".parse().unwrap(),
            max_flows: 64,
        };
        let frames = build_flows(&fs).unwrap();
        assert_eq!(frames.len(), 8);
        let mut pairs: Vec<(u16, u16)> = frames
            .iter()
            .map(|f| {
                check_ports_valid(f);
                (
                    u16::from_be_bytes([f[34], f[35]]),
                    u16::from_be_bytes([f[36], f[37]]),
                )
            })
            .collect();
        pairs.sort();
        pairs.dedup();
        assert_eq!(pairs.len(), 8);
        let capped = build_flows(&FlowSpec { max_flows: 3, ..fs }).unwrap();
        assert_eq!(capped.len(), 3);
    }

    fn check_ports_valid(f: &[u8]) {
        let p = etherparse::PacketHeaders::from_ethernet_slice(f).unwrap();
        let (Some(etherparse::NetHeaders::Ipv4(ip, _)), Some(etherparse::TransportHeader::Udp(u))) =
            (&p.net, &p.transport)
        else {
            panic!("not udp/ipv4");
        };
        assert_eq!(
            u.calc_checksum_ipv4(ip, p.payload.slice()).unwrap(),
            u.checksum
        );
    }
}
