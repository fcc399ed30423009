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

/// Walks the option TLVs: EOL ends the list, NOP is one byte, every other option
/// carries a length of at least 2 that stays inside the options area (RFC 791; the
/// kernel's ip_options_compile drops the same frames).
fn check_options(opts: &[u8]) -> Result<(), ParseError> {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return Ok(()),
            1 => i += 1,
            _ => {
                let Some(&len) = opts.get(i + 1) else {
                    return Err(ParseError::BadIpv4Option { offset: i });
                };
                let len = usize::from(len);
                if len < 2 || i + len > opts.len() {
                    return Err(ParseError::BadIpv4Option { offset: i });
                }
                i += len;
            }
        }
    }
    Ok(())
}
