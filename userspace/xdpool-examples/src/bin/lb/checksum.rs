//! The Internet checksum, updated incrementally (RFC 1624, eqn. 3).

/// What changing one 4-byte field (an IPv4 address) from `old` to `new` adds to
/// the one's-complement sum of the data a checksum covers: `~m + m'` for each of
/// its two 16-bit words. Summed once, applied to every checksum the field is under
/// (the IPv4 header's, and the UDP or TCP one through the pseudo-header).
#[derive(Debug, Clone, Copy)]
pub struct Change(u32);

impl Change {
    pub fn of(old: [u8; 4], new: [u8; 4]) -> Change {
        let word = |b: [u8; 4], i: usize| u32::from(u16::from_be_bytes([b[i], b[i + 1]]));
        Change((0xffff - word(old, 0)) + (0xffff - word(old, 2)) + word(new, 0) + word(new, 2))
    }

    /// Updates the 16-bit checksum at `frame[at..at + 2]`: `HC' = ~(~HC + ~m + m')`.
    pub fn apply(self, frame: &mut [u8], at: usize) {
        let hc = u16::from_be_bytes([frame[at], frame[at + 1]]);
        // At most five 16-bit words: two folds bring it to 16 bits.
        let mut sum = u32::from(!hc) + self.0;
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        frame[at..at + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }
}
