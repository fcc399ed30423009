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
    /// next hop is unknown is dropped and counted (`next_hop_unknown`).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub(crate) kind: Kind,
    pub(crate) mac: Mac,
    pub(crate) mirror: Option<PortRef>,
}

impl Verdict {
    /// The frame's chunk goes back to the pool (counted `action_drop`).
    #[inline]
    pub const fn drop() -> Verdict {
        Verdict {
            kind: Kind::Drop,
            mac: Mac::AsIs,
            mirror: None,
        }
    }

    /// The frame leaves the port it arrived on (its own chunk, no copy).
    #[inline]
    pub const fn back() -> Verdict {
        Verdict {
            kind: Kind::Back,
            mac: Mac::AsIs,
            mirror: None,
        }
    }

    /// The frame leaves `to` (its chunk moves, no copy). `to` must be a port the
    /// handler declared; forwarding to the arrival port is [`back`](Self::back).
    #[inline]
    pub const fn forward(to: PortRef) -> Verdict {
        Verdict {
            kind: Kind::Forward(to),
            mac: Mac::AsIs,
            mirror: None,
        }
    }

    /// Rewrites the MACs as the frame leaves (not for [`drop`](Self::drop), where
    /// it does nothing).
    #[inline]
    pub const fn with_mac(mut self, mac: Mac) -> Verdict {
        self.mac = mac;
        self
    }

    /// A second reference to the frame (as it leaves, after any rewrite) also leaves
    /// `port` (a declared port). With [`drop`](Self::drop), only the mirror copy is
    /// sent.
    #[inline]
    pub const fn mirror(mut self, port: PortRef) -> Verdict {
        self.mirror = Some(port);
        self
    }

    /// Whether the frame (not counting a mirror) leaves a port.
    #[inline]
    pub const fn sends(&self) -> bool {
        !matches!(self.kind, Kind::Drop)
    }
}
