//! What a packet function decides for a frame.

use crate::config::MacRewrite;
use std::fmt;

/// A port of the running program, as a handler names it: from
/// [`LaneSetup::port`](super::LaneSetup::port) (the ports its
/// [`Declaration`](super::Declaration) names) or [`Packet::port`](super::Packet::port)
/// (the arrival port). Copy it freely; it cannot be made from a number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRef(pub(crate) u16);

impl fmt::Debug for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port#{}", self.0)
    }
}

/// How the frame's MAC addresses are rewritten as it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mac {
    /// As the handler left them.
    AsIs,
    /// Destination and source exchanged.
    Swap,
    /// Destination: the next hop's MAC from the egress namespace's neighbour table
    /// (by the frame's destination IP); source: the egress device's MAC. A frame whose
    /// next hop is unknown is dropped and counted: `xdpool_drops_total` with
    /// `reason="next_hop_unknown"` in the metrics, `neigh_miss_drop` in
    /// `xdpool stats --json` and in the test harness's `Harness::counter`.
    NextHop,
    /// Destination: this MAC; source: the egress device's MAC.
    To([u8; 6]),
}

impl Mac {
    pub(crate) fn rewrite(self) -> MacRewrite {
        match self {
            Mac::AsIs => MacRewrite::Keep,
            Mac::Swap => MacRewrite::Swap,
            Mac::NextHop => MacRewrite::Neigh,
            Mac::To(m) => MacRewrite::Fixed(m),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Drop,
    Back,
    Forward(PortRef),
}

/// What becomes of a frame after its handler returns: dropped (its chunk goes back
/// to the pool), sent back out of the arrival port, or forwarded to another port;
/// each optionally mirrored to a port by reference (no copy). The frame's bytes are
/// sent as the handler left them unless [`with_mac`](Self::with_mac) says otherwise.
///
/// ```
/// use xdpool::{Mac, Verdict};
/// let v = Verdict::back().with_mac(Mac::Swap); // what the built-in `l2fwd` does
/// assert!(v.sends());
/// assert!(!Verdict::drop().sends());
/// ```
#[must_use = "a handler returns its verdict"]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Verdict(u128);

// A verdict is one u128, so that a handler returns it in two registers and the
// worker reads it back whole (a struct of small fields came back through memory as
// pieces, and the load of the whole waited for each of them). Bits:
const KIND: u32 = 0; // 2 bits: 0 drop, 1 back, 2 forward
const TO: u32 = 2; // 16 bits: the forward port
const MAC: u32 = 18; // 2 bits: 0 as is, 1 swap, 2 next hop, 3 to
const MIRRORED: u32 = 20; // 1 bit
const MIRROR: u32 = 21; // 16 bits: the mirror port
const MAC_BYTES: u32 = 64; // 48 bits: the `Mac::To` address

/// A MAC address as the low 48 bits of a word (a verdict's bits hold it so).
#[inline(always)]
pub(crate) const fn mac_word(mac: [u8; 6]) -> u64 {
    let [a, b, c, d, e, f] = mac;
    u64::from_le_bytes([a, b, c, d, e, f, 0, 0])
}

/// The MAC address in the low 48 bits of `word`.
#[inline(always)]
pub(crate) const fn mac_of_word(word: u64) -> [u8; 6] {
    let [a, b, c, d, e, f, _, _] = word.to_le_bytes();
    [a, b, c, d, e, f]
}

impl Verdict {
    const fn with_kind(kind: u128, to: u16) -> Verdict {
        Verdict(kind << KIND | (to as u128) << TO)
    }

    /// The frame's chunk goes back to the pool (counted `action_drop`).
    #[inline]
    pub const fn drop() -> Verdict {
        Verdict::with_kind(0, 0)
    }

    /// The frame leaves the port it arrived on (its own chunk, no copy).
    #[inline]
    pub const fn back() -> Verdict {
        Verdict::with_kind(1, 0)
    }

    /// The frame leaves `to` (its chunk moves, no copy). `to` must be a port the
    /// handler declared; forwarding to the arrival port is [`back`](Self::back).
    #[inline]
    pub const fn forward(to: PortRef) -> Verdict {
        Verdict::with_kind(2, to.0)
    }

    /// Rewrites the MACs as the frame leaves (not for [`drop`](Self::drop), where
    /// it does nothing).
    #[inline]
    pub const fn with_mac(self, mac: Mac) -> Verdict {
        let (how, bytes) = match mac {
            Mac::AsIs => (0, [0; 6]),
            Mac::Swap => (1, [0; 6]),
            Mac::NextHop => (2, [0; 6]),
            Mac::To(m) => (3, m),
        };
        let bytes = mac_word(bytes) as u128;
        let cleared = self.0 & !(3 << MAC | 0xffff_ffff_ffff << MAC_BYTES);
        Verdict(cleared | how << MAC | bytes << MAC_BYTES)
    }

    /// A second reference to the frame (as it leaves, after any rewrite) also leaves
    /// `port` (a declared port). With [`drop`](Self::drop), only the mirror copy is
    /// sent.
    #[inline]
    pub const fn mirror(self, port: PortRef) -> Verdict {
        let cleared = self.0 & !(0x1_ffff << MIRRORED);
        Verdict(cleared | 1 << MIRRORED | (port.0 as u128) << MIRROR)
    }

    /// What becomes of the frame itself.
    #[inline(always)]
    pub(crate) const fn kind(self) -> Kind {
        match (self.0 >> KIND) & 3 {
            0 => Kind::Drop,
            1 => Kind::Back,
            _ => Kind::Forward(PortRef((self.0 >> TO) as u16)),
        }
    }

    /// The MAC rewrite.
    #[inline(always)]
    pub(crate) const fn mac(self) -> Mac {
        match (self.0 >> MAC) & 3 {
            0 => Mac::AsIs,
            1 => Mac::Swap,
            2 => Mac::NextHop,
            _ => Mac::To(mac_of_word((self.0 >> MAC_BYTES) as u64)),
        }
    }

    /// The mirror port, if any.
    #[inline(always)]
    pub(crate) const fn mirror_port(self) -> Option<PortRef> {
        if (self.0 >> MIRRORED) & 1 == 0 {
            None
        } else {
            Some(PortRef((self.0 >> MIRROR) as u16))
        }
    }

    /// Whether the frame (not counting a mirror) leaves a port.
    #[inline]
    pub const fn sends(&self) -> bool {
        !matches!(self.kind(), Kind::Drop)
    }
}

impl fmt::Debug for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verdict")
            .field("kind", &self.kind())
            .field("mac", &self.mac())
            .field("mirror", &self.mirror_port())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind, MAC rewrite and mirror comes back as it was given, in any order
    /// of the builders, and a later builder replaces an earlier one.
    #[test]
    fn a_verdict_keeps_what_it_was_given() {
        let macs = [
            Mac::AsIs,
            Mac::Swap,
            Mac::NextHop,
            Mac::To([0xff; 6]),
            Mac::To([2, 0, 0, 0, 0, 1]),
        ];
        let kinds = [
            (Verdict::drop(), Kind::Drop),
            (Verdict::back(), Kind::Back),
            (Verdict::forward(PortRef(0)), Kind::Forward(PortRef(0))),
            (
                Verdict::forward(PortRef(u16::MAX)),
                Kind::Forward(PortRef(u16::MAX)),
            ),
        ];
        for (v, kind) in kinds {
            assert_eq!(
                (v.kind(), v.mac(), v.mirror_port()),
                (kind, Mac::AsIs, None)
            );
            for mac in macs {
                for mirror in [None, Some(PortRef(0)), Some(PortRef(u16::MAX))] {
                    let mut w = v.with_mac(Mac::To([7; 6])).with_mac(mac);
                    if let Some(m) = mirror {
                        w = w.mirror(PortRef(3)).mirror(m);
                    }
                    assert_eq!((w.kind(), w.mac(), w.mirror_port()), (kind, mac, mirror));
                    assert_eq!(w.sends(), kind != Kind::Drop);
                    if let Some(m) = mirror {
                        assert_eq!(v.mirror(m).with_mac(mac), w, "builders in the other order");
                    }
                }
            }
        }
    }
}
