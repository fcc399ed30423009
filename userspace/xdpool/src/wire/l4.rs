//! UDP and TCP header views.
use super::{be16, be32, Layer, ParseError};

/// UDP header length.
pub const UDP_HLEN: usize = 8;
/// TCP header length without options.
pub const TCP_MIN_HLEN: usize = 20;

/// A bounds-checked view of a UDP header.
///
/// `new_checked` guarantees 8 bytes are present and the length field is at least 8; the
/// caller compares the length field with the IP payload (a fragment may be shorter).
#[derive(Debug, Clone, Copy)]
pub struct UdpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> UdpHeader<'a> {
    /// Views `buf`, the IP payload starting at the UDP header.
    #[inline]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < UDP_HLEN {
            return Err(ParseError::Truncated {
                layer: Layer::Udp,
                need: UDP_HLEN,
                have: buf.len(),
            });
        }
        let len = usize::from(be16(buf, 4));
        if len < UDP_HLEN {
            return Err(ParseError::LengthTooShort {
                layer: Layer::Udp,
                claimed: len,
                min: UDP_HLEN,
            });
        }
        Ok(Self { buf })
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }

    /// Length field: header plus payload.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(be16(self.buf, 4))
    }

    /// Always false: `new_checked` refuses a length below 8.
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Checksum as found (not verified).
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf, 6)
    }
}

/// A bounds-checked view of a TCP header.
///
/// `new_checked` guarantees data offset >= 5 and that the header with options fits.
#[derive(Debug, Clone, Copy)]
pub struct TcpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> TcpHeader<'a> {
    /// Views `buf`, the IP payload starting at the TCP header.
    #[inline]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < TCP_MIN_HLEN {
            return Err(ParseError::Truncated {
                layer: Layer::Tcp,
                need: TCP_MIN_HLEN,
                have: buf.len(),
            });
        }
        let offset = buf[12] >> 4;
        if offset < 5 {
            return Err(ParseError::BadTcpOffset { offset });
        }
        let hlen = usize::from(offset) * 4;
        if hlen > buf.len() {
            return Err(ParseError::Truncated {
                layer: Layer::Tcp,
                need: hlen,
                have: buf.len(),
            });
        }
        Ok(Self { buf })
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }

    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u32 {
        be32(self.buf, 4)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack(&self) -> u32 {
        be32(self.buf, 8)
    }

    /// Header length in bytes, options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[12] >> 4) * 4
    }

    /// Flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buf[13]
    }
}
