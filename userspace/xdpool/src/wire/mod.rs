//! Wire formats: a total, allocation-free packet parser over `&[u8]`.
//!
//! [`parse`] walks Ethernet, up to two VLAN tags (0x8100 / 0x88a8), IPv4 (options,
//! fragments) or IPv6 (extension-header chain, bounded), then UDP or TCP, and returns a
//! [`Parsed`] summary or a [`ParseError`] that names what is wrong. Every length field is
//! checked against the buffer before it is used, so any byte sequence yields `Ok` or
//! `Err`, never a panic, and every range in an `Ok` result lies inside the buffer.
//!
//! The per-layer views ([`EthernetHeader`], [`Ipv4Header`], [`Ipv6Header`],
//! [`UdpHeader`], [`TcpHeader`]) are usable on their own. [`build`] assembles frames for
//! tests, the corpus and generators; [`fuzz`] is the stable-Rust mutation fuzzer.
//!
//! Not checked: IPv4 header and L4 checksums (the NIC or the kernel's stack does that,
//! and the data path does not need them to classify). A handler that rewrites a field
//! under one updates it with [`checksum`] (incrementally, RFC 1624), or through
//! [`Packet`](crate::Packet)'s address and port setters, which do it for it.

pub mod build;
pub mod checksum;
mod error;
mod ethernet;
pub mod fuzz;
mod ipv4;
mod ipv6;
mod l4;
mod packet;

pub use error::{Layer, ParseError};
pub use ethernet::{
    swap_macs, EthernetHeader, VlanTag, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6,
    ETHERTYPE_QINQ, ETHERTYPE_VLAN, ETH_HLEN, MAX_VLAN_TAGS, VLAN_HLEN,
};
pub(crate) use ipv4::source_route_under_way;
pub use ipv4::{Ipv4Header, IPV4_MIN_HLEN};
pub use ipv6::{Ipv6Header, IPV6_HLEN, MAX_EXT_HEADERS};
pub use l4::{TcpHeader, UdpHeader, TCP_MIN_HLEN, UDP_HLEN};
pub use packet::{parse, Fragment, Parsed, L3};
pub(crate) use packet::{parse_any, PlainV4};

/// IP protocol numbers the parser knows by name.
pub mod proto {
    /// IPv6 hop-by-hop options header.
    pub const HOPOPT: u8 = 0;
    /// ICMP for IPv4.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP (its checksum covers a pseudo-header, as UDP's and TCP's do).
    pub const DCCP: u8 = 33;
    /// IPv6 routing header.
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 fragment header.
    pub const IPV6_FRAG: u8 = 44;
    /// Encapsulating security payload (ends the header chain).
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMP for IPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 destination options header.
    pub const IPV6_OPTS: u8 = 60;
    /// IPv6 mobility header.
    pub const MOBILITY: u8 = 135;
    /// UDP-Lite (its checksum covers a pseudo-header, as UDP's does).
    pub const UDPLITE: u8 = 136;
}

/// Reads a big-endian u16 at `at`; callers have checked `at + 2 <= b.len()`.
#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian u32 at `at`; callers have checked `at + 4 <= b.len()`.
#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The bytes of `b` from `off` on; empty when `off` is past the end.
#[inline(always)]
fn tail(b: &[u8], off: usize) -> &[u8] {
    b.get(off..).unwrap_or(&[])
}

#[cfg(test)]
mod tests;
