//! The Internet checksum updated where a field under it changes (RFC 1624, eqn. 3:
//! `HC' = ~(~HC + ~m + m')`), without summing the data again: what a NAT or a load
//! balancer needs after it rewrites an address or a port. [`Packet`]'s
//! [`set_ipv4_src`](crate::Packet::set_ipv4_src),
//! [`set_ipv4_dst`](crate::Packet::set_ipv4_dst),
//! [`set_src_port`](crate::Packet::set_src_port) and
//! [`set_dst_port`](crate::Packet::set_dst_port) use it; use it directly for other
//! fields. A change is made of the 16-bit words the checksum sums, at even offsets
//! of the data it covers: a field of one byte changes with its neighbour (the IPv4
//! TTL as `of16` over header bytes 8..10, the TTL and the protocol).
//!
//! ```
//! use xdpool::wire::checksum::Change;
//! // An IPv4 header's checksum field at bytes 10..12, its destination at 16..20.
//! let mut ip = [
//!     0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
//! ];
//! let sum = xdpool::wire::build::checksum(&[&ip]);
//! ip[10..12].copy_from_slice(&sum.to_be_bytes());
//! let change = Change::of32([198, 18, 0, 2], [198, 18, 1, 9]);
//! ip[16..20].copy_from_slice(&[198, 18, 1, 9]);
//! assert!(change.apply(&mut ip, 10));
//! assert_eq!(xdpool::wire::build::checksum(&[&ip]), 0, "the header sums to zero again");
//! ```
//!
//! [`Packet`]: crate::Packet

/// What changing a field from `old` to `new` adds to the one's-complement sum of the
/// data a checksum covers (`~m + m'` for each 16-bit word of it). Made once, applied
/// to every checksum the field is under: an IPv4 address is under the IPv4 header's
/// and, through the pseudo-header, the UDP or TCP one.
#[derive(Debug, Clone, Copy)]
pub struct Change(u32);

/// Folds a sum of at most five 16-bit words to 16 bits (end-around carry).
#[inline]
fn fold(mut sum: u32) -> u32 {
    sum = (sum & 0xffff) + (sum >> 16);
    (sum & 0xffff) + (sum >> 16)
}

impl Change {
    /// No change.
    pub const NONE: Change = Change(0);

    /// A 16-bit field (a port, an identifier) from `old` to `new`.
    #[inline]
    #[must_use]
    pub fn of16(old: u16, new: u16) -> Change {
        // At most two words: unfolded, as `of32`'s four.
        Change(u32::from(!old) + u32::from(new))
    }

    /// A 32-bit field (an IPv4 address, in network order) from `old` to `new`.
    #[inline]
    #[must_use]
    pub fn of32(old: [u8; 4], new: [u8; 4]) -> Change {
        let word = |b: [u8; 4], i: usize| u32::from(u16::from_be_bytes([b[i], b[i + 1]]));
        Change((0xffff - word(old, 0)) + (0xffff - word(old, 2)) + word(new, 0) + word(new, 2))
    }

    /// This change and `other` together (two fields under one checksum).
    #[inline]
    #[must_use]
    pub fn and(self, other: Change) -> Change {
        Change(fold(fold(self.0) + fold(other.0)))
    }

    /// Updates the 16-bit checksum at `frame[at..at + 2]`; `false`, and nothing
    /// written, when those bytes are not in `frame`.
    #[inline]
    pub fn apply(self, frame: &mut [u8], at: usize) -> bool {
        let Some(field) = frame.get_mut(at..).and_then(|f| f.first_chunk_mut::<2>()) else {
            return false;
        };
        *field = self.updated(*field);
        true
    }

    /// As [`apply`](Self::apply), for a UDP checksum: 0 (the sender computed none,
    /// which IPv4 allows) stays 0, and a result of 0 is written as 0xffff, its other
    /// form in one's complement (RFC 768).
    #[inline]
    pub fn apply_udp(self, frame: &mut [u8], at: usize) -> bool {
        let Some(field) = frame.get_mut(at..).and_then(|f| f.first_chunk_mut::<2>()) else {
            return false;
        };
        *field = match self.updated(*field) {
            _ if *field == [0, 0] => [0, 0],
            [0, 0] => [0xff, 0xff],
            c => c,
        };
        true
    }

    /// `HC' = ~(~HC + ~m + m')` for the checksum `hc` (network order). The change is
    /// at most four words (`of32`) or one folded sum (`and`): with `~HC`, two folds.
    #[inline]
    fn updated(self, hc: [u8; 2]) -> [u8; 2] {
        let hc = u16::from_be_bytes(hc);
        (!(fold(u32::from(!hc) + self.0) as u16)).to_be_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build::checksum;
    use proptest::prelude::*;

    proptest! {
        /// An updated checksum is the checksum summed anew over the changed data, for
        /// any data, any field and any values (a 0xffff / 0x0000 pair of equivalent
        /// forms aside: both verify).
        #[test]
        fn an_update_equals_a_new_sum(
            mut data in proptest::collection::vec(any::<u8>(), 8..64),
            at in 0usize..30,
            new in any::<[u8; 4]>(),
            two_fields in any::<bool>(),
        ) {
            let n = data.len() & !1;
            data.truncate(n);
            // The checksum lives in the first two bytes; the field (at an even
            // offset, as in the headers) in the rest.
            let at = 2 + 2 * (at % ((n - 6) / 2 + 1));
            data[0..2].copy_from_slice(&[0, 0]);
            let sum = checksum(&[&data]);
            data[0..2].copy_from_slice(&sum.to_be_bytes());
            let old: [u8; 4] = data[at..at + 4].try_into().unwrap();
            let mut change = Change::of32(old, new);
            data[at..at + 4].copy_from_slice(&new);
            if two_fields && at + 6 <= n {
                let o = u16::from_be_bytes([data[at + 4], data[at + 5]]);
                let v = o.wrapping_mul(31).wrapping_add(7);
                change = change.and(Change::of16(o, v));
                data[at + 4..at + 6].copy_from_slice(&v.to_be_bytes());
            }
            prop_assert!(change.apply(&mut data, 0));
            prop_assert_eq!(checksum(&[&data]), 0, "the data verifies: {:?}", data);
        }
    }

    #[test]
    fn out_of_range_writes_nothing_and_udp_zero_stays() {
        let mut b = [1u8, 2, 3];
        assert!(!Change::of16(1, 2).apply(&mut b, 2));
        assert!(!Change::of16(1, 2).apply(&mut b, usize::MAX));
        assert!(!Change::of16(1, 2).apply_udp(&mut b, usize::MAX));
        assert_eq!(b, [1, 2, 3]);
        let mut u = [0u8, 0];
        assert!(Change::of16(1, 2).apply_udp(&mut u, 0));
        assert_eq!(u, [0, 0], "no UDP checksum stays none");
        // A checksum whose update comes to 0 is sent as 0xffff.
        let mut u = 0xfffeu16.to_be_bytes();
        assert!(Change::of16(1, 0).apply_udp(&mut u, 0));
        assert_eq!(u, [0xff, 0xff]);
        // A sum that needs the second fold: ~0x0000 + (~1 + 2) = 0x1ffff -> 0xfffe
        // (one fold and a truncation would give 0xffff).
        let mut c = [0u8, 0];
        assert!(Change::of16(1, 2).apply(&mut c, 0));
        assert_eq!(c, 0xfffeu16.to_be_bytes());
        // No change, however written, leaves a checksum as it was (0xffff and 0x0000
        // aside, one value in one's complement).
        for none in [
            Change::NONE,
            Change::of16(5, 5),
            Change::NONE.and(Change::of32([1; 4], [1; 4])),
        ] {
            let mut c = 0x1234u16.to_be_bytes();
            assert!(none.apply(&mut c, 0));
            assert_eq!(c, 0x1234u16.to_be_bytes());
        }
    }
}
