//! Ethernet II header and 802.1Q / 802.1ad tags.
use super::{be16, Layer, ParseError};

/// Ethernet II header length (no FCS: AF_XDP and XDP never see it).
pub const ETH_HLEN: usize = 14;
/// Length of one VLAN tag (TCI + inner ethertype).
pub const VLAN_HLEN: usize = 4;
/// Most VLAN tags accepted (double tagging, QinQ).
pub const MAX_VLAN_TAGS: usize = 2;
/// IPv4 ethertype.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// ARP ethertype.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// IPv6 ethertype.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q customer tag TPID.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// 802.1ad service tag TPID (QinQ outer tag).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

/// Whether `ethertype` announces a VLAN tag.
#[inline]
pub(crate) fn is_vlan_tpid(ethertype: u16) -> bool {
    ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ
}

/// A bounds-checked view of an Ethernet II header.
#[derive(Debug, Clone, Copy)]
pub struct EthernetHeader<'a> {
    buf: &'a [u8],
}

impl<'a> EthernetHeader<'a> {
    /// Views `buf` as an Ethernet frame; fails if it is shorter than [`ETH_HLEN`].
    #[inline]
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < ETH_HLEN {
            return Err(ParseError::Truncated {
                layer: Layer::Ethernet,
                need: ETH_HLEN,
                have: buf.len(),
            });
        }
        Ok(Self { buf })
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_mac(&self) -> [u8; 6] {
        let b = self.buf;
        [b[0], b[1], b[2], b[3], b[4], b[5]]
    }

    /// Source MAC address.
    #[inline]
    pub fn src_mac(&self) -> [u8; 6] {
        let b = self.buf;
        [b[6], b[7], b[8], b[9], b[10], b[11]]
    }

    /// The outer ethertype (a TPID when the frame is tagged).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        be16(self.buf, 12)
    }
}

/// One VLAN tag as found on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct VlanTag {
    /// Tag protocol identifier: [`ETHERTYPE_VLAN`] or [`ETHERTYPE_QINQ`].
    pub tpid: u16,
    /// Tag control information (PCP, DEI, VID).
    pub tci: u16,
}

impl VlanTag {
    /// VLAN identifier (12 bits).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }

    /// Priority code point (3 bits).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci & 0x1000 != 0
    }
}

/// Swaps the destination and source MAC addresses in place (l2fwd's rewrite).
///
/// Fails with [`ParseError::Truncated`] if `frame` is shorter than an Ethernet header.
#[inline]
pub fn swap_macs(frame: &mut [u8]) -> Result<(), ParseError> {
    if frame.len() < ETH_HLEN {
        return Err(ParseError::Truncated {
            layer: Layer::Ethernet,
            need: ETH_HLEN,
            have: frame.len(),
        });
    }
    let (dst, rest) = frame.split_at_mut(6);
    dst.swap_with_slice(&mut rest[..6]);
    Ok(())
}
