//! Parse errors: one variant per way a frame can be malformed.
use std::fmt;

/// The protocol layer an error was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// 802.1Q / 802.1ad tag.
    Vlan,
    /// IPv4 header (fixed part, options and total length).
    Ipv4,
    /// IPv6 fixed header.
    Ipv6,
    /// IPv6 extension header.
    Ipv6Ext,
    /// UDP header.
    Udp,
    /// TCP header.
    Tcp,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "VLAN",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Ipv6Ext => "IPv6 extension",
            Layer::Udp => "UDP",
            Layer::Tcp => "TCP",
        })
    }
}

/// Why a frame was rejected. Every variant means the frame is malformed (or uses a
/// construction the data path refuses); such frames are counted and dropped, and the
/// sender is the one to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The buffer ends inside a header.
    #[error("{layer} header truncated: needs {need} bytes, {have} present (frame cut short by the sender or the capture length)")]
    Truncated {
        /// Layer whose header is cut.
        layer: Layer,
        /// Bytes the header needs.
        need: usize,
        /// Bytes available to it.
        have: usize,
    },
    /// A third VLAN tag; only single and double (QinQ) tagging is accepted.
    #[error(
        "more than {} VLAN tags: only single and double (QinQ) tagging is supported",
        crate::wire::MAX_VLAN_TAGS
    )]
    TooManyVlanTags,
    /// The IP version nibble does not match the ethertype.
    #[error(
        "{layer} packet has version field {version}: the ethertype and the IP header disagree"
    )]
    BadIpVersion {
        /// Layer the ethertype announced.
        layer: Layer,
        /// Version nibble found.
        version: u8,
    },
    /// IPv4 IHL below 5 (20 bytes).
    #[error("IPv4 IHL {ihl} is below the minimum of 5 (20-byte header)")]
    BadIhl {
        /// IHL found (in 32-bit words).
        ihl: u8,
    },
    /// An IPv4 option has a length that is below 2 or runs past the header.
    #[error("IPv4 option at option byte {offset} has a bad length")]
    BadIpv4Option {
        /// Offset of the option inside the options area.
        offset: usize,
    },
    /// A length field claims more bytes than the buffer (or the enclosing layer) holds.
    #[error("{layer} length field claims {claimed} bytes but only {have} are present")]
    LengthLies {
        /// Layer whose length field lies.
        layer: Layer,
        /// Length the field claims.
        claimed: usize,
        /// Bytes actually present.
        have: usize,
    },
    /// A length field is smaller than the header it belongs to.
    #[error("{layer} length field {claimed} is smaller than its own header ({min} bytes)")]
    LengthTooShort {
        /// Layer whose length field is too small.
        layer: Layer,
        /// Length the field claims.
        claimed: usize,
        /// Smallest legal value.
        min: usize,
    },
    /// A fragment whose end lies beyond 65535 bytes (the "ping of death").
    #[error("fragment at offset {offset} with {len} bytes ends past 65535")]
    FragmentTooLarge {
        /// Fragment offset in bytes.
        offset: usize,
        /// Fragment payload length.
        len: usize,
    },
    /// A hop-by-hop options header that does not follow the IPv6 header directly.
    #[error("IPv6 hop-by-hop options header is not the first extension header (RFC 8200 4.1)")]
    HopByHopNotFirst,
    /// An extension header whose own fields are invalid (e.g. AH with length 0).
    #[error("IPv6 extension header {next_header} has an invalid length field")]
    BadExtHeader {
        /// Protocol number of the offending header.
        next_header: u8,
    },
    /// The IPv6 extension-header chain is longer than [`crate::wire::MAX_EXT_HEADERS`].
    #[error("more than {limit} IPv6 extension headers: chain refused")]
    TooManyExtHeaders {
        /// The limit.
        limit: usize,
    },
    /// TCP data offset below 5 (20 bytes).
    #[error("TCP data offset {offset} is below the minimum of 5 (20-byte header)")]
    BadTcpOffset {
        /// Data offset found (in 32-bit words).
        offset: u8,
    },
}

impl ParseError {
    /// The variant's name, stable for corpus expectation files and counters.
    pub fn kind(&self) -> &'static str {
        match self {
            ParseError::Truncated { .. } => "Truncated",
            ParseError::TooManyVlanTags => "TooManyVlanTags",
            ParseError::BadIpVersion { .. } => "BadIpVersion",
            ParseError::BadIhl { .. } => "BadIhl",
            ParseError::BadIpv4Option { .. } => "BadIpv4Option",
            ParseError::LengthLies { .. } => "LengthLies",
            ParseError::LengthTooShort { .. } => "LengthTooShort",
            ParseError::FragmentTooLarge { .. } => "FragmentTooLarge",
            ParseError::HopByHopNotFirst => "HopByHopNotFirst",
            ParseError::BadExtHeader { .. } => "BadExtHeader",
            ParseError::TooManyExtHeaders { .. } => "TooManyExtHeaders",
            ParseError::BadTcpOffset { .. } => "BadTcpOffset",
        }
    }
}
