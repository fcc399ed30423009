//! Frame assembly for tests, the corpus and traffic generators (allocates; not for the
//! receive path). Lengths and checksums come out right; corrupt them afterwards using
//! the offsets in [`BuiltFrame`].
use std::net::{Ipv4Addr, Ipv6Addr};

use super::proto;

/// An IPv6 extension header to emit, in chain order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtHeader {
    /// Hop-by-hop options padded with PadN to `8 * (len8 + 1)` bytes.
    HopByHop {
        /// Hdr Ext Len field.
        len8: u8,
    },
    /// Routing header (type 0 layout, segments left 0) of `8 * (len8 + 1)` bytes.
    Routing {
        /// Hdr Ext Len field.
        len8: u8,
    },
    /// Destination options padded with PadN to `8 * (len8 + 1)` bytes.
    DestOpts {
        /// Hdr Ext Len field.
        len8: u8,
    },
    /// Fragment header.
    Fragment {
        /// Offset in bytes (multiple of 8).
        offset: u16,
        /// M flag.
        more: bool,
        /// Identification.
        id: u32,
    },
    /// Authentication header of `4 * (len4 + 2)` bytes.
    Auth {
        /// Payload Len field (at least 1).
        len4: u8,
    },
}

impl ExtHeader {
    fn number(&self) -> u8 {
        match self {
            ExtHeader::HopByHop { .. } => proto::HOPOPT,
            ExtHeader::Routing { .. } => proto::IPV6_ROUTE,
            ExtHeader::DestOpts { .. } => proto::IPV6_OPTS,
            ExtHeader::Fragment { .. } => proto::IPV6_FRAG,
            ExtHeader::Auth { .. } => proto::AH,
        }
    }

    fn emit(&self, next: u8, out: &mut Vec<u8>) {
        match *self {
            ExtHeader::HopByHop { len8 } | ExtHeader::DestOpts { len8 } => {
                let len = 8 * (usize::from(len8) + 1);
                out.extend_from_slice(&[next, len8]);
                // One PadN option covering the remaining len - 2 bytes.
                out.extend_from_slice(&[1, (len - 4) as u8]);
                out.resize(out.len() + len - 4, 0);
            }
            ExtHeader::Routing { len8 } => {
                let len = 8 * (usize::from(len8) + 1);
                out.extend_from_slice(&[next, len8, 0, 0]);
                out.resize(out.len() + len - 4, 0);
            }
            ExtHeader::Fragment { offset, more, id } => {
                let field = (offset & 0xfff8) | u16::from(more);
                out.extend_from_slice(&[next, 0]);
                out.extend_from_slice(&field.to_be_bytes());
                out.extend_from_slice(&id.to_be_bytes());
            }
            ExtHeader::Auth { len4 } => {
                let len = 4 * (usize::from(len4) + 2);
                out.extend_from_slice(&[next, len4, 0, 0]);
                out.extend_from_slice(&0x1000u32.to_be_bytes()); // SPI
                out.extend_from_slice(&1u32.to_be_bytes()); // sequence
                out.resize(out.len() + len - 12, 0);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Net {
    Raw(u16),
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        options: Vec<u8>,
        frag_offset: u16,
        more: bool,
        ident: u16,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        ext: Vec<ExtHeader>,
    },
}

#[derive(Debug, Clone)]
enum Transport {
    Raw(u8),
    Udp {
        sport: u16,
        dport: u16,
    },
    Tcp {
        sport: u16,
        dport: u16,
        flags: u8,
        options: Vec<u8>,
    },
}

/// A frame and where its layers start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltFrame {
    /// The frame bytes, Ethernet header first, no FCS.
    pub bytes: Vec<u8>,
    /// Offset of the IP header (or of the payload for a raw ethertype).
    pub l3_offset: usize,
    /// Offset of the first IPv6 extension header, when there are any.
    pub ext_offset: Option<usize>,
    /// Offset of the upper-layer header (or raw IP payload).
    pub l4_offset: usize,
    /// Offset of the application payload.
    pub payload_offset: usize,
}

/// Builds Ethernet / VLAN / IPv4|IPv6 / UDP|TCP frames with correct lengths and
/// checksums. Addresses default to the project's 198.18.0.0/15 and 2001:2::/48 ranges.
#[derive(Debug, Clone)]
pub struct FrameBuilder {
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    vlans: Vec<(u16, u16)>,
    net: Net,
    transport: Transport,
    payload: Vec<u8>,
}

impl Default for FrameBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameBuilder {
    /// IPv4 198.18.0.1 -> 198.19.0.1, UDP 1024 -> 9, empty payload.
    pub fn new() -> Self {
        Self {
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            vlans: Vec::new(),
            net: Net::V4 {
                src: Ipv4Addr::new(198, 18, 0, 1),
                dst: Ipv4Addr::new(198, 19, 0, 1),
                options: Vec::new(),
                frag_offset: 0,
                more: false,
                ident: 1,
            },
            transport: Transport::Udp {
                sport: 1024,
                dport: 9,
            },
            payload: Vec::new(),
        }
    }

    /// Sets destination and source MACs.
    pub fn macs(mut self, dst: [u8; 6], src: [u8; 6]) -> Self {
        self.dst_mac = dst;
        self.src_mac = src;
        self
    }

    /// Appends a VLAN tag (outermost first).
    pub fn vlan(mut self, tpid: u16, tci: u16) -> Self {
        self.vlans.push((tpid, tci));
        self
    }

    /// No IP: the ethertype is `ethertype` and the payload follows the link header.
    pub fn raw_ethertype(mut self, ethertype: u16) -> Self {
        self.net = Net::Raw(ethertype);
        self
    }

    /// IPv4 with these addresses.
    pub fn ipv4(mut self, src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        self.net = Net::V4 {
            src,
            dst,
            options: Vec::new(),
            frag_offset: 0,
            more: false,
            ident: 1,
        };
        self
    }

    /// IPv4 options (padded with EOL to a multiple of 4, cut at 40). No effect on IPv6.
    pub fn ipv4_options(mut self, opts: &[u8]) -> Self {
        if let Net::V4 { options, .. } = &mut self.net {
            *options = opts[..opts.len().min(40)].to_vec();
            while options.len() % 4 != 0 {
                options.push(0);
            }
        }
        self
    }

    /// IPv4 fragment fields (offset in bytes, multiple of 8). No effect on IPv6.
    pub fn ipv4_fragment(mut self, offset: u16, more_fragments: bool, id: u16) -> Self {
        if let Net::V4 {
            frag_offset,
            more,
            ident,
            ..
        } = &mut self.net
        {
            *frag_offset = offset;
            *more = more_fragments;
            *ident = id;
        }
        self
    }

    /// IPv6 with these addresses.
    pub fn ipv6(mut self, src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        self.net = Net::V6 {
            src,
            dst,
            ext: Vec::new(),
        };
        self
    }

    /// Appends an IPv6 extension header. No effect on IPv4.
    pub fn ipv6_ext(mut self, header: ExtHeader) -> Self {
        if let Net::V6 { ext, .. } = &mut self.net {
            ext.push(header);
        }
        self
    }

    /// UDP header.
    pub fn udp(mut self, sport: u16, dport: u16) -> Self {
        self.transport = Transport::Udp { sport, dport };
        self
    }

    /// TCP header with `flags`.
    pub fn tcp(mut self, sport: u16, dport: u16, flags: u8) -> Self {
        self.transport = Transport::Tcp {
            sport,
            dport,
            flags,
            options: Vec::new(),
        };
        self
    }

    /// TCP options (padded with EOL to a multiple of 4, cut at 40). No effect without TCP.
    pub fn tcp_options(mut self, opts: &[u8]) -> Self {
        if let Transport::Tcp { options, .. } = &mut self.transport {
            *options = opts[..opts.len().min(40)].to_vec();
            while options.len() % 4 != 0 {
                options.push(0);
            }
        }
        self
    }

    /// Raw IP protocol number: the payload follows the IP headers directly.
    pub fn ip_proto(mut self, protocol: u8) -> Self {
        self.transport = Transport::Raw(protocol);
        self
    }

    /// Application payload.
    pub fn payload(mut self, bytes: &[u8]) -> Self {
        self.payload = bytes.to_vec();
        self
    }

    /// Assembles the frame.
    pub fn build(&self) -> BuiltFrame {
        let mut out = Vec::with_capacity(128 + self.payload.len());
        out.extend_from_slice(&self.dst_mac);
        out.extend_from_slice(&self.src_mac);
        let mut types: Vec<u16> = self.vlans.iter().map(|v| v.0).collect();
        types.push(match self.net {
            Net::Raw(t) => t,
            Net::V4 { .. } => super::ETHERTYPE_IPV4,
            Net::V6 { .. } => super::ETHERTYPE_IPV6,
        });
        out.extend_from_slice(&types[0].to_be_bytes());
        for (i, (_, tci)) in self.vlans.iter().enumerate() {
            out.extend_from_slice(&tci.to_be_bytes());
            out.extend_from_slice(&types[i + 1].to_be_bytes());
        }
        let l3_offset = out.len();

        let (l4_proto, l4) = self.transport_bytes();
        let ext_offset;
        let l4_offset;
        match &self.net {
            Net::Raw(_) => {
                ext_offset = None;
                l4_offset = out.len();
                out.extend_from_slice(&self.payload);
                return BuiltFrame {
                    bytes: out,
                    l3_offset,
                    ext_offset,
                    l4_offset,
                    payload_offset: l4_offset,
                };
            }
            Net::V4 {
                src,
                dst,
                options,
                frag_offset,
                more,
                ident,
            } => {
                let hlen = 20 + options.len();
                let total = hlen + l4.len();
                let mut h = Vec::with_capacity(hlen);
                h.push(0x40 | (hlen / 4) as u8);
                h.push(0);
                h.extend_from_slice(&(total as u16).to_be_bytes());
                h.extend_from_slice(&ident.to_be_bytes());
                let flags = (frag_offset >> 3) | if *more { 0x2000 } else { 0 };
                h.extend_from_slice(&flags.to_be_bytes());
                h.extend_from_slice(&[64, l4_proto, 0, 0]);
                h.extend_from_slice(&src.octets());
                h.extend_from_slice(&dst.octets());
                h.extend_from_slice(options);
                let c = checksum(&[&h]);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                out.extend_from_slice(&h);
                ext_offset = None;
                l4_offset = out.len();
                let mut l4 = l4;
                let pseudo = pseudo_v4(*src, *dst, l4_proto, l4.len());
                self.fill_l4_checksum(&mut l4, &pseudo);
                out.extend_from_slice(&l4);
            }
            Net::V6 { src, dst, ext } => {
                let mut chain = Vec::new();
                let numbers: Vec<u8> = ext
                    .iter()
                    .map(ExtHeader::number)
                    .chain([l4_proto])
                    .collect();
                for (i, e) in ext.iter().enumerate() {
                    e.emit(numbers[i + 1], &mut chain);
                }
                let plen = chain.len() + l4.len();
                out.extend_from_slice(&[0x60, 0, 0, 0]);
                out.extend_from_slice(&(plen as u16).to_be_bytes());
                out.extend_from_slice(&[numbers[0], 64]);
                out.extend_from_slice(&src.octets());
                out.extend_from_slice(&dst.octets());
                ext_offset = (!ext.is_empty()).then_some(out.len());
                out.extend_from_slice(&chain);
                l4_offset = out.len();
                let mut l4 = l4;
                let pseudo = pseudo_v6(*src, *dst, l4_proto, l4.len());
                self.fill_l4_checksum(&mut l4, &pseudo);
                out.extend_from_slice(&l4);
            }
        }
        let payload_offset = out.len() - self.payload.len();
        BuiltFrame {
            bytes: out,
            l3_offset,
            ext_offset,
            l4_offset,
            payload_offset,
        }
    }

    fn transport_bytes(&self) -> (u8, Vec<u8>) {
        let mut l4 = Vec::with_capacity(60 + self.payload.len());
        let p = match &self.transport {
            Transport::Raw(p) => *p,
            Transport::Udp { sport, dport } => {
                l4.extend_from_slice(&sport.to_be_bytes());
                l4.extend_from_slice(&dport.to_be_bytes());
                l4.extend_from_slice(&((8 + self.payload.len()) as u16).to_be_bytes());
                l4.extend_from_slice(&[0, 0]);
                proto::UDP
            }
            Transport::Tcp {
                sport,
                dport,
                flags,
                options,
            } => {
                l4.extend_from_slice(&sport.to_be_bytes());
                l4.extend_from_slice(&dport.to_be_bytes());
                l4.extend_from_slice(&1u32.to_be_bytes());
                l4.extend_from_slice(&0u32.to_be_bytes());
                l4.push((((20 + options.len()) / 4) as u8) << 4);
                l4.push(*flags);
                l4.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
                l4.extend_from_slice(options);
                proto::TCP
            }
        };
        l4.extend_from_slice(&self.payload);
        (p, l4)
    }

    fn fill_l4_checksum(&self, l4: &mut [u8], pseudo: &[u8]) {
        let at = match self.transport {
            Transport::Udp { .. } => 6,
            Transport::Tcp { .. } => 16,
            Transport::Raw(_) => return,
        };
        let mut c = checksum(&[pseudo, l4]);
        if c == 0 && at == 6 {
            c = 0xffff;
        }
        l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
}

fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, p: u8, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(12);
    v.extend_from_slice(&src.octets());
    v.extend_from_slice(&dst.octets());
    v.extend_from_slice(&[0, p]);
    v.extend_from_slice(&(len as u16).to_be_bytes());
    v
}

fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, p: u8, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(&src.octets());
    v.extend_from_slice(&dst.octets());
    v.extend_from_slice(&(len as u32).to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, p]);
    v
}

/// RFC 1071 Internet checksum over the concatenation of `parts`.
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    let mut odd: Option<u8> = None;
    for part in parts {
        for &b in part.iter() {
            match odd.take() {
                Some(hi) => sum += u64::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u64::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
