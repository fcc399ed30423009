//! The whole-frame parse and its result.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use super::ethernet::{
    is_vlan_tpid, EthernetHeader, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_HLEN, MAX_VLAN_TAGS,
    VLAN_HLEN,
};
use super::ipv4::Ipv4Header;
use super::ipv6::{walk_ext_headers, Ipv6Header, IPV6_HLEN};
use super::l4::{TcpHeader, UdpHeader, UDP_HLEN};
use super::{be16, proto, tail, Layer, ParseError};

/// Largest IP datagram a fragment may belong to.
const MAX_DATAGRAM: usize = 65535;

/// Network-layer addresses of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3 {
    /// Not IP (ARP, LLDP, an 802.3 length field, ...).
    None,
    /// IPv4 source and destination.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
    },
    /// IPv6 source and destination.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
    },
}

impl L3 {
    /// Source address, if IP.
    #[inline]
    pub fn src(&self) -> Option<IpAddr> {
        match *self {
            L3::None => None,
            L3::V4 { src, .. } => Some(IpAddr::V4(src)),
            L3::V6 { src, .. } => Some(IpAddr::V6(src)),
        }
    }

    /// Destination address, if IP.
    #[inline]
    pub fn dst(&self) -> Option<IpAddr> {
        match *self {
            L3::None => None,
            L3::V4 { dst, .. } => Some(IpAddr::V4(dst)),
            L3::V6 { dst, .. } => Some(IpAddr::V6(dst)),
        }
    }
}

/// Fragmentation information (IPv4 header or IPv6 fragment header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// Offset of this fragment's data in the datagram, in bytes.
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
    /// Datagram identification (IPv4: 16 bits).
    pub id: u32,
}

impl Fragment {
    /// Whether this fragment carries the start of the datagram (and so the L4 header).
    #[inline]
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }
}

/// What [`parse`] found in a frame. Offsets index the parsed buffer; all are inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    vlans: [VlanTag; MAX_VLAN_TAGS],
    vlan_count: u8,
    ethertype: u16,
    l3: L3,
    l3_offset: u16,
    ip_proto: Option<u8>,
    fragment: Option<Fragment>,
    l4_offset: Option<u16>,
    ports: Option<(u16, u16)>,
    tcp_flags: Option<u8>,
    payload_start: usize,
    payload_end: usize,
}

impl Parsed {
    /// VLAN tags, outermost first (0, 1 or 2 of them).
    #[inline]
    pub fn vlan_tags(&self) -> &[VlanTag] {
        &self.vlans[..usize::from(self.vlan_count)]
    }

    /// VID of the outermost tag, if tagged.
    #[inline]
    pub fn outer_vlan_id(&self) -> Option<u16> {
        (self.vlan_count > 0).then(|| self.vlans[0].vid())
    }

    /// VID of the innermost tag, if tagged (equals the outer one for a single tag).
    #[inline]
    pub fn inner_vlan_id(&self) -> Option<u16> {
        (self.vlan_count > 0).then(|| self.vlans[usize::from(self.vlan_count) - 1].vid())
    }

    /// Ethertype after the VLAN tags.
    #[inline]
    pub fn ethertype(&self) -> u16 {
        self.ethertype
    }

    /// Network-layer addresses.
    #[inline]
    pub fn l3(&self) -> L3 {
        self.l3
    }

    /// Offset of the network header (the end of the link header when not IP).
    #[inline]
    pub fn l3_offset(&self) -> usize {
        usize::from(self.l3_offset)
    }

    /// Source address, if IP.
    #[inline]
    pub fn src_ip(&self) -> Option<IpAddr> {
        self.l3.src()
    }

    /// Destination address, if IP.
    #[inline]
    pub fn dst_ip(&self) -> Option<IpAddr> {
        self.l3.dst()
    }

    /// Upper-layer protocol: IPv4's protocol field, or for IPv6 the next header after
    /// the extension headers (for a non-first fragment, the fragment header's).
    #[inline]
    pub fn ip_proto(&self) -> Option<u8> {
        self.ip_proto
    }

    /// Fragment information, if the packet is a fragment (or has an IPv6 fragment header).
    #[inline]
    pub fn fragment(&self) -> Option<Fragment> {
        self.fragment
    }

    /// Whether the packet is part of a fragmented datagram (MF set or offset non-zero).
    /// An IPv6 atomic fragment (offset 0, M clear) is not.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        matches!(self.fragment, Some(f) if f.more || f.offset != 0)
    }

    /// Offset of the UDP/TCP header, when one was parsed.
    #[inline]
    pub fn l4_offset(&self) -> Option<usize> {
        self.l4_offset.map(usize::from)
    }

    /// (source, destination) ports for UDP and TCP in an unfragmented packet or a
    /// first fragment; None otherwise.
    #[inline]
    pub fn ports(&self) -> Option<(u16, u16)> {
        self.ports
    }

    /// L4 source port.
    #[inline]
    pub fn src_port(&self) -> Option<u16> {
        self.ports.map(|p| p.0)
    }

    /// L4 destination port.
    #[inline]
    pub fn dst_port(&self) -> Option<u16> {
        self.ports.map(|p| p.1)
    }

    /// TCP flags byte, for TCP.
    #[inline]
    pub fn tcp_flags(&self) -> Option<u8> {
        self.tcp_flags
    }

    /// The innermost payload: after the L4 header (bounded by the UDP length or the IP
    /// length), else after the IP headers, else after the link header. Link padding
    /// beyond the IP length is never included.
    #[inline]
    pub fn payload(&self) -> Range<usize> {
        self.payload_start..self.payload_end
    }
}

/// Parses a frame that starts with an Ethernet II header (no FCS).
///
/// Total: every input yields `Ok` or a [`ParseError`]; no allocation, no panic.
/// Unknown ethertypes and IP protocols are `Ok` with the fields that apply left `None`.
/// A non-first fragment has no L4 header, so no ports; a first fragment's L4 header must
/// be complete (tiny first fragments, RFC 1858, are refused as truncated).
#[inline]
pub fn parse(frame: &[u8]) -> Result<Parsed, ParseError> {
    match parse_plain_v4(frame) {
        Some(p) => Ok(p),
        None => parse_any(frame),
    }
}

/// The most common frame, read in one go: untagged IPv4 without options, not a
/// fragment, carrying a whole UDP or TCP header. What [`PlainV4::read`] returns
/// is small enough to stay in registers; [`PlainV4::parsed`] is the `Parsed`
/// the general walk gives the same frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainV4 {
    pub(crate) src: Ipv4Addr,
    pub(crate) dst: Ipv4Addr,
    pub(crate) proto: u8,
    /// (source, destination).
    pub(crate) ports: (u16, u16),
    tcp_flags: Option<u8>,
    payload_start: u32,
    payload_end: u32,
}

impl PlainV4 {
    const IP: usize = ETH_HLEN;
    const TP: usize = ETH_HLEN + 20;

    /// `None` for every other frame, and for one of this shape that
    /// [`parse_any`] would refuse; when `Some`, [`parsed`](Self::parsed) is what
    /// [`parse_any`] returns (the tests and the fuzzer compare the two on every
    /// input they make).
    ///
    /// The general walk spends most of its instructions on what this frame
    /// lacks (the VLAN loop, options, fragment rules, the error values it might
    /// return): 184 of them per frame in the worker's rule lookup, where this
    /// takes about 40 (callgrind, `l2fwd-2rules` in `tools/bench/handler-cost.sh`).
    #[inline]
    pub(crate) fn read(frame: &[u8]) -> Option<PlainV4> {
        const IP: usize = PlainV4::IP;
        const TP: usize = PlainV4::TP;
        let h: &[u8; TP + 8] = frame.first_chunk()?;
        // Ethertype IPv4, version 4 with IHL 5, MF clear and offset 0 (DF may be set).
        if be16(h, 12) != ETHERTYPE_IPV4 || h[IP] != 0x45 || be16(h, IP + 6) & 0x3fff != 0 {
            return None;
        }
        let total = usize::from(be16(h, IP + 2));
        // The datagram lies inside the frame (link padding may follow it).
        if total > frame.len() - IP {
            return None;
        }
        let end = IP + total;
        let proto = h[IP + 9];
        let (ports, tcp_flags, payload_start, payload_end) = match proto {
            proto::UDP => {
                let len = usize::from(be16(h, TP + 4));
                if len < UDP_HLEN || TP + len > end {
                    return None;
                }
                (
                    (be16(h, TP), be16(h, TP + 2)),
                    None,
                    TP + UDP_HLEN,
                    TP + len,
                )
            }
            proto::TCP => {
                let tcp: &[u8; TP + 20] = frame.first_chunk()?;
                let hlen = usize::from(tcp[TP + 12] >> 4) * 4;
                if hlen < 20 || TP + hlen > end {
                    return None;
                }
                (
                    (be16(tcp, TP), be16(tcp, TP + 2)),
                    Some(tcp[TP + 13]),
                    TP + hlen,
                    end,
                )
            }
            _ => return None,
        };
        Some(PlainV4 {
            src: Ipv4Addr::new(h[IP + 12], h[IP + 13], h[IP + 14], h[IP + 15]),
            dst: Ipv4Addr::new(h[IP + 16], h[IP + 17], h[IP + 18], h[IP + 19]),
            proto,
            ports,
            tcp_flags,
            // Both at most IP + total: 14 + 65 535 does not fit 16 bits.
            payload_start: payload_start as u32,
            payload_end: payload_end as u32,
        })
    }

    /// The whole parse of the frame this was read from.
    #[inline]
    pub(crate) fn parsed(self) -> Parsed {
        Parsed {
            vlans: [VlanTag::default(); MAX_VLAN_TAGS],
            vlan_count: 0,
            ethertype: ETHERTYPE_IPV4,
            l3: L3::V4 {
                src: self.src,
                dst: self.dst,
            },
            l3_offset: PlainV4::IP as u16,
            ip_proto: Some(self.proto),
            fragment: None,
            l4_offset: Some(PlainV4::TP as u16),
            ports: Some(self.ports),
            tcp_flags: self.tcp_flags,
            payload_start: self.payload_start as usize,
            payload_end: self.payload_end as usize,
        }
    }
}

/// [`PlainV4::read`] as a whole parse.
#[inline]
pub(crate) fn parse_plain_v4(frame: &[u8]) -> Option<Parsed> {
    PlainV4::read(frame).map(PlainV4::parsed)
}

/// [`parse`] by the general walk, for any frame.
pub(crate) fn parse_any(frame: &[u8]) -> Result<Parsed, ParseError> {
    let eth = EthernetHeader::new_checked(frame)?;
    let mut p = Parsed {
        vlans: [VlanTag::default(); MAX_VLAN_TAGS],
        vlan_count: 0,
        ethertype: eth.ethertype(),
        l3: L3::None,
        l3_offset: ETH_HLEN as u16,
        ip_proto: None,
        fragment: None,
        l4_offset: None,
        ports: None,
        tcp_flags: None,
        payload_start: 0,
        payload_end: 0,
    };
    let mut off = ETH_HLEN;
    while is_vlan_tpid(p.ethertype) {
        let count = usize::from(p.vlan_count);
        if count == MAX_VLAN_TAGS {
            return Err(ParseError::TooManyVlanTags);
        }
        let tag = tail(frame, off);
        if tag.len() < VLAN_HLEN {
            return Err(ParseError::Truncated {
                layer: Layer::Vlan,
                need: VLAN_HLEN,
                have: tag.len(),
            });
        }
        p.vlans[count] = VlanTag {
            tpid: p.ethertype,
            tci: be16(tag, 0),
        };
        p.vlan_count += 1;
        p.ethertype = be16(tag, 2);
        off += VLAN_HLEN;
    }
    p.l3_offset = off as u16;
    match p.ethertype {
        ETHERTYPE_IPV4 => parse_ipv4(frame, off, &mut p)?,
        ETHERTYPE_IPV6 => parse_ipv6(frame, off, &mut p)?,
        _ => p.set_payload(off, frame.len()),
    }
    Ok(p)
}

impl Parsed {
    #[inline]
    fn set_payload(&mut self, start: usize, end: usize) {
        self.payload_start = start;
        self.payload_end = end;
    }
}

#[inline]
fn parse_ipv4(frame: &[u8], off: usize, p: &mut Parsed) -> Result<(), ParseError> {
    let ip = Ipv4Header::new_checked(tail(frame, off))?;
    let hlen = ip.header_len();
    let total = ip.total_len();
    p.l3 = L3::V4 {
        src: ip.src(),
        dst: ip.dst(),
    };
    p.ip_proto = Some(ip.protocol());
    let start = off + hlen;
    let end = off + total;
    let frag_offset = ip.frag_offset();
    let more = ip.more_fragments();
    if more || frag_offset != 0 {
        let len = total - hlen;
        if usize::from(frag_offset) + len > MAX_DATAGRAM {
            return Err(ParseError::FragmentTooLarge {
                offset: usize::from(frag_offset),
                len,
            });
        }
        p.fragment = Some(Fragment {
            offset: frag_offset,
            more,
            id: u32::from(ip.ident()),
        });
        if frag_offset != 0 {
            p.set_payload(start, end);
            return Ok(());
        }
    }
    parse_l4(frame, start, end, ip.protocol(), more, p)
}

#[inline]
fn parse_ipv6(frame: &[u8], off: usize, p: &mut Parsed) -> Result<(), ParseError> {
    let ip = Ipv6Header::new_checked(tail(frame, off))?;
    p.l3 = L3::V6 {
        src: ip.src(),
        dst: ip.dst(),
    };
    let chain = walk_ext_headers(ip.payload(), ip.next_header())?;
    p.ip_proto = Some(chain.proto);
    p.fragment = chain.fragment;
    let start = off + IPV6_HLEN + chain.offset;
    let end = off + IPV6_HLEN + ip.payload_len();
    match chain.fragment {
        Some(f) if f.offset != 0 => {
            let len = end - start;
            if usize::from(f.offset) + len > MAX_DATAGRAM {
                return Err(ParseError::FragmentTooLarge {
                    offset: usize::from(f.offset),
                    len,
                });
            }
            p.set_payload(start, end);
            Ok(())
        }
        Some(f) => parse_l4(frame, start, end, chain.proto, f.more, p),
        None => parse_l4(frame, start, end, chain.proto, false, p),
    }
}

/// Parses UDP or TCP in `frame[start..end]`; `fragmented` relaxes the UDP length check
/// (the length covers the whole datagram, not this first fragment).
#[inline]
fn parse_l4(
    frame: &[u8],
    start: usize,
    end: usize,
    ip_proto: u8,
    fragmented: bool,
    p: &mut Parsed,
) -> Result<(), ParseError> {
    let l4 = frame.get(start..end).unwrap_or(&[]);
    match ip_proto {
        proto::UDP => {
            let udp = UdpHeader::new_checked(l4)?;
            let len = udp.len();
            let payload_end = if fragmented {
                end
            } else if len > l4.len() {
                return Err(ParseError::LengthLies {
                    layer: Layer::Udp,
                    claimed: len,
                    have: l4.len(),
                });
            } else {
                start + len
            };
            p.l4_offset = Some(start as u16);
            p.ports = Some((udp.src_port(), udp.dst_port()));
            p.set_payload(start + UDP_HLEN, payload_end);
        }
        proto::TCP => {
            let tcp = TcpHeader::new_checked(l4)?;
            p.l4_offset = Some(start as u16);
            p.ports = Some((tcp.src_port(), tcp.dst_port()));
            p.tcp_flags = Some(tcp.flags());
            p.set_payload(start + tcp.header_len(), end);
        }
        _ => p.set_payload(start, end),
    }
    Ok(())
}
