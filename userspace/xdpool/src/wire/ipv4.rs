//! IPv4 header view: IHL, options, total length, fragmentation fields.
use std::net::Ipv4Addr;

use super::{be16, Layer, ParseError};

/// Length of an IPv4 header without options.
pub const IPV4_MIN_HLEN: usize = 20;

/// A bounds-checked view of an IPv4 packet.
///
/// `new_checked` guarantees: the header (with options) fits, IHL >= 5, the options are
/// well formed, and `header_len() <= total_len() <= buf.len()`.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Header<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv4Header<'a> {
    /// Views `buf` (starting at the IPv4 header, possibly followed by link padding).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < IPV4_MIN_HLEN {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv4,
                need: IPV4_MIN_HLEN,
                have: buf.len(),
            });
        }
        let version = buf[0] >> 4;
        if version != 4 {
            return Err(ParseError::BadIpVersion {
                layer: Layer::Ipv4,
                version,
            });
        }
        let ihl = buf[0] & 0x0f;
        if ihl < 5 {
            return Err(ParseError::BadIhl { ihl });
        }
        let hlen = usize::from(ihl) * 4;
        if hlen > buf.len() {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv4,
                need: hlen,
                have: buf.len(),
            });
        }
        let total = usize::from(be16(buf, 2));
        if total < hlen {
            return Err(ParseError::LengthTooShort {
                layer: Layer::Ipv4,
                claimed: total,
                min: hlen,
            });
        }
        if total > buf.len() {
            return Err(ParseError::LengthLies {
                layer: Layer::Ipv4,
                claimed: total,
                have: buf.len(),
            });
        }
        check_options(&buf[IPV4_MIN_HLEN..hlen])?;
        Ok(Self { buf })
    }

    /// Header length in bytes, options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[0] & 0x0f) * 4
    }

    /// Total length field: header plus payload.
    #[inline]
    pub fn total_len(&self) -> usize {
        usize::from(be16(self.buf, 2))
    }

    /// Identification field.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buf, 4)
    }

    /// DF flag.
    #[inline]
    pub fn dont_fragment(&self) -> bool {
        self.buf[6] & 0x40 != 0
    }

    /// MF flag.
    #[inline]
    pub fn more_fragments(&self) -> bool {
        self.buf[6] & 0x20 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buf, 6) & 0x1fff) << 3
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buf[8]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buf[9]
    }

    /// Header checksum as found (not verified).
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf, 10)
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[12], self.buf[13], self.buf[14], self.buf[15])
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[16], self.buf[17], self.buf[18], self.buf[19])
    }

    /// The options bytes (empty when IHL is 5).
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        &self.buf[IPV4_MIN_HLEN..self.header_len()]
    }
}

/// The option TLVs of an IPv4 options area, in order, up to EOL: (kind, the
/// option's bytes from its kind on; NOP is one byte). `Err(offset)`, and nothing
/// after it, for an option whose length is missing, under 2 or past the area.
fn option_tlvs(opts: &[u8]) -> impl Iterator<Item = Result<(u8, &[u8]), usize>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let at = i;
        let kind = *opts.get(at)?;
        match kind {
            OPT_EOL => None,
            OPT_NOP => {
                i += 1;
                Some(Ok((kind, &opts[at..at + 1])))
            }
            _ => {
                let len = opts.get(at + 1).map(|&l| usize::from(l));
                match len {
                    Some(len) if len >= 2 && at + len <= opts.len() => {
                        i += len;
                        Some(Ok((kind, &opts[at..at + len])))
                    }
                    _ => {
                        i = opts.len();
                        Some(Err(at))
                    }
                }
            }
        }
    })
}

/// Option kinds (RFC 791): end of list, no-op, loose and strict source route.
const OPT_EOL: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_LSRR: u8 = 131;
const OPT_SSRR: u8 = 137;

/// Walks the option TLVs: EOL ends the list, NOP is one byte, every other option
/// carries a length of at least 2 that stays inside the options area (RFC 791; the
/// kernel's ip_options_compile drops the same frames).
fn check_options(opts: &[u8]) -> Result<(), ParseError> {
    match option_tlvs(opts).find_map(Result::err) {
        Some(offset) => Err(ParseError::BadIpv4Option { offset }),
        None => Ok(()),
    }
}

/// Whether the IPv4 header at the start of `header` carries a loose or strict source
/// route with addresses still to visit (its pointer, 1-based, not yet past the
/// route's last address): the sender's UDP or TCP checksum then covers the route's
/// last address, not the header's destination (RFC 791; RFC 768 and 793's
/// pseudo-header). False for a header too short to say.
pub(crate) fn source_route_under_way(header: &[u8]) -> bool {
    let ihl = usize::from(header.first().map_or(0, |b| b & 0xf)) * 4;
    let opts = header.get(IPV4_MIN_HLEN..ihl).unwrap_or_default();
    option_tlvs(opts).map_while(Result::ok).any(|(kind, o)| {
        matches!(kind, OPT_LSRR | OPT_SSRR)
            && o.get(2).is_some_and(|&ptr| usize::from(ptr) + 3 <= o.len())
    })
}
