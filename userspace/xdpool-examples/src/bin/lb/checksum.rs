//! The Internet checksum, updated incrementally (RFC 1624, eqn. 3).

/// The 16-bit checksum at `frame[at..at + 2]` after the covered bytes `old` became
/// `new` (both of even length, aligned to 16-bit words of the checksummed data):
/// `HC' = ~(~HC + ~m + m')` for each word.
pub fn update_field(frame: &mut [u8], at: usize, old: &[u8], new: &[u8]) {
    let hc = u16::from_be_bytes([frame[at], frame[at + 1]]);
    let mut sum = u32::from(!hc);
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    frame[at..at + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}
