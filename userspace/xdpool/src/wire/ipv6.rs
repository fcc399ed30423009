//! IPv6 header view and the extension-header walk.
use std::net::Ipv6Addr;

use super::packet::Fragment;
use super::{be16, be32, proto, Layer, ParseError};

/// Length of the fixed IPv6 header.
pub const IPV6_HLEN: usize = 40;
/// Most extension headers walked before the chain is refused (a long chain is a way to
/// hide the L4 header from filters; Linux applies a similar limit to options headers).
pub const MAX_EXT_HEADERS: usize = 8;

/// A bounds-checked view of an IPv6 packet.
///
/// `new_checked` guarantees the fixed header fits and `40 + payload_len() <= buf.len()`.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Header<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv6Header<'a> {
    /// Views `buf` (starting at the IPv6 header, possibly followed by link padding).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < IPV6_HLEN {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv6,
                need: IPV6_HLEN,
                have: buf.len(),
            });
        }
        let version = buf[0] >> 4;
        if version != 6 {
            return Err(ParseError::BadIpVersion {
                layer: Layer::Ipv6,
                version,
            });
        }
        let total = IPV6_HLEN + usize::from(be16(buf, 4));
        if total > buf.len() {
            return Err(ParseError::LengthLies {
                layer: Layer::Ipv6,
                claimed: total,
                have: buf.len(),
            });
        }
        Ok(Self { buf })
    }

    /// Payload length field (extension headers included).
    #[inline]
    pub fn payload_len(&self) -> usize {
        usize::from(be16(self.buf, 4))
    }

    /// Next header of the fixed header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buf[6]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buf[7]
    }

    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.buf, 0) >> 4) & 0xff) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        be32(self.buf, 0) & 0x000f_ffff
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(addr16(&self.buf[8..24]))
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(addr16(&self.buf[24..40]))
    }

    /// The payload as the length field bounds it (link padding excluded).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[IPV6_HLEN..IPV6_HLEN + self.payload_len()]
    }
}

#[inline]
fn addr16(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    a
}

/// Where the extension-header chain ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainEnd {
    /// Upper-layer protocol (or ESP / no-next-header / an unknown number).
    pub proto: u8,
    /// Offset of the upper-layer header inside the IPv6 payload.
    pub offset: usize,
    /// Fragment header, if one was found.
    pub fragment: Option<Fragment>,
}

/// Whether `nh` is an extension header the walk steps over.
#[inline]
fn is_ext_header(nh: u8) -> bool {
    matches!(
        nh,
        proto::HOPOPT
            | proto::IPV6_ROUTE
            | proto::IPV6_FRAG
            | proto::IPV6_OPTS
            | proto::AH
            | proto::MOBILITY
    )
}

/// Walks the extension headers at the start of `payload`, bounded by
/// [`MAX_EXT_HEADERS`]. Stops at a non-first fragment: what follows it is not a header.
pub(crate) fn walk_ext_headers(payload: &[u8], first: u8) -> Result<ChainEnd, ParseError> {
    let mut next = first;
    let mut off = 0usize;
    let mut count = 0usize;
    let mut fragment = None;
    while is_ext_header(next) {
        if next == proto::HOPOPT && count != 0 {
            return Err(ParseError::HopByHopNotFirst);
        }
        if count == MAX_EXT_HEADERS {
            return Err(ParseError::TooManyExtHeaders {
                limit: MAX_EXT_HEADERS,
            });
        }
        count += 1;
        let hdr = super::tail(payload, off);
        // Every extension header is at least 8 bytes long.
        if hdr.len() < 8 {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv6Ext,
                need: 8,
                have: hdr.len(),
            });
        }
        let len = match next {
            proto::IPV6_FRAG => 8,
            proto::AH => {
                // RFC 4302: length in 4-byte units minus 2; the fixed part alone is 12.
                if hdr[1] == 0 {
                    return Err(ParseError::BadExtHeader { next_header: next });
                }
                (usize::from(hdr[1]) + 2) * 4
            }
            _ => (usize::from(hdr[1]) + 1) * 8,
        };
        if len > hdr.len() {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv6Ext,
                need: len,
                have: hdr.len(),
            });
        }
        let this = next;
        next = hdr[0];
        off += len;
        if this == proto::IPV6_FRAG {
            let frag = Fragment {
                offset: be16(hdr, 2) & 0xfff8,
                more: hdr[3] & 1 != 0,
                id: be32(hdr, 4),
            };
            fragment = Some(frag);
            if frag.offset != 0 {
                break;
            }
        }
    }
    Ok(ChainEnd {
        proto: next,
        offset: off,
        fragment,
    })
}
