//! Sequenced payloads: every frame carries its own number and bytes derived from it,
//! so a receiver can prove that each frame arrived once and unchanged.
//!
//! UDP payload: [`SEQ_TAG`] (6 bytes), the sequence number (u64, big endian), then
//! the rest filled from a xorshift generator seeded with the number. The UDP checksum
//! is recomputed for each frame, so the receiving kernel checks it too.
use std::net::{Ipv4Addr, Ipv6Addr};

use super::packet::{internet_checksum, ETH_HLEN, IPV4_HLEN, IPV6_HLEN, UDP_HLEN};

/// First bytes of a sequenced payload.
pub const SEQ_TAG: &[u8; 6] = b"XDPSEQ";
/// Tag plus the number: the shortest sequenced payload.
pub const SEQ_HEADER: usize = SEQ_TAG.len() + 8;

/// Why a payload or frame is not a correct sequenced one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Shorter than the tag and number.
    #[error("payload of {len} bytes is shorter than the {SEQ_HEADER}-byte sequence header")]
    TooShort {
        /// Payload length.
        len: usize,
    },
    /// The tag is not there: not one of ours, or its start was overwritten.
    #[error("payload does not start with the XDPSEQ tag")]
    BadTag,
    /// A byte differs from what the number implies.
    #[error("frame {seq}: payload byte {offset} is {got:#04x}, expected {want:#04x}")]
    Corrupt {
        /// The frame's number.
        seq: u64,
        /// Offset in the payload.
        offset: usize,
        /// Byte found.
        got: u8,
        /// Byte expected.
        want: u8,
    },
    /// The frame is not Ethernet + IPv4/IPv6 (no options or extension headers) + UDP.
    #[error("not an Ethernet/IP/UDP frame the generator builds: {0}")]
    NotUdp(&'static str),
    /// The UDP checksum does not verify.
    #[error("UDP checksum does not verify")]
    Checksum,
}

/// Smallest frame size (without FCS) that holds a sequenced payload.
pub fn min_frame_size(ipv6: bool) -> usize {
    let headers = ETH_HLEN + UDP_HLEN + if ipv6 { IPV6_HLEN } else { IPV4_HLEN };
    (headers + SEQ_HEADER).max(super::packet::MIN_FRAME)
}

struct Pattern(u64);

impl Pattern {
    fn new(seq: u64) -> Self {
        // Never 0 (xorshift's fixed point).
        Self(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next_byte(&mut self) -> u8 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 24) as u8
    }
}

/// Writes the sequenced payload for `seq` over all of `payload` (which must hold at
/// least [`SEQ_HEADER`] bytes).
pub fn write_payload(payload: &mut [u8], seq: u64) -> Result<(), PayloadError> {
    if payload.len() < SEQ_HEADER {
        return Err(PayloadError::TooShort { len: payload.len() });
    }
    payload[..SEQ_TAG.len()].copy_from_slice(SEQ_TAG);
    payload[SEQ_TAG.len()..SEQ_HEADER].copy_from_slice(&seq.to_be_bytes());
    let mut p = Pattern::new(seq);
    for b in &mut payload[SEQ_HEADER..] {
        *b = p.next_byte();
    }
    Ok(())
}

/// Checks every byte of a UDP payload; returns its sequence number.
pub fn check_payload(payload: &[u8]) -> Result<u64, PayloadError> {
    if payload.len() < SEQ_HEADER {
        return Err(PayloadError::TooShort { len: payload.len() });
    }
    if &payload[..SEQ_TAG.len()] != SEQ_TAG {
        return Err(PayloadError::BadTag);
    }
    let seq = u64::from_be_bytes(
        payload[SEQ_TAG.len()..SEQ_HEADER]
            .try_into()
            .expect("8 bytes"),
    );
    let mut p = Pattern::new(seq);
    for (i, &got) in payload[SEQ_HEADER..].iter().enumerate() {
        let want = p.next_byte();
        if got != want {
            return Err(PayloadError::Corrupt {
                seq,
                offset: SEQ_HEADER + i,
                got,
                want,
            });
        }
    }
    Ok(seq)
}

/// Where the UDP header of a frame starts, and the pseudo-header for its checksum.
fn udp_of(frame: &[u8]) -> Result<(usize, Vec<u8>), PayloadError> {
    if frame.len() < ETH_HLEN {
        return Err(PayloadError::NotUdp("shorter than an Ethernet header"));
    }
    let mut pseudo = Vec::with_capacity(40);
    let l4 = match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => {
            let ip = frame
                .get(ETH_HLEN..ETH_HLEN + IPV4_HLEN)
                .ok_or(PayloadError::NotUdp("short IPv4 header"))?;
            if ip[0] != 0x45 || ip[9] != 17 {
                return Err(PayloadError::NotUdp("IPv4 with options, or not UDP"));
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            pseudo.extend_from_slice(&src.octets());
            pseudo.extend_from_slice(&dst.octets());
            pseudo.extend_from_slice(&[0, 17]);
            ETH_HLEN + IPV4_HLEN
        }
        0x86dd => {
            let ip = frame
                .get(ETH_HLEN..ETH_HLEN + IPV6_HLEN)
                .ok_or(PayloadError::NotUdp("short IPv6 header"))?;
            if ip[6] != 17 {
                return Err(PayloadError::NotUdp("IPv6 next header is not UDP"));
            }
            let src: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
            let dst: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
            pseudo.extend_from_slice(&Ipv6Addr::from(src).octets());
            pseudo.extend_from_slice(&Ipv6Addr::from(dst).octets());
            pseudo.extend_from_slice(&[0, 0]);
            pseudo.extend_from_slice(&[0, 17]);
            ETH_HLEN + IPV6_HLEN
        }
        _ => return Err(PayloadError::NotUdp("neither IPv4 nor IPv6")),
    };
    let udp = frame
        .get(l4..l4 + UDP_HLEN)
        .ok_or(PayloadError::NotUdp("short UDP header"))?;
    let udp_len = u16::from_be_bytes([udp[4], udp[5]]) as usize;
    if udp_len < UDP_HLEN || l4 + udp_len > frame.len() {
        return Err(PayloadError::NotUdp("UDP length outside the frame"));
    }
    // The length last: a one's-complement sum does not depend on the order of its
    // 16-bit words, so IPv6's 32-bit length (0, len) and IPv4's 16-bit one both fit.
    pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
    Ok((l4, pseudo))
}

/// Turns a frame from `build_udp_frame` into frame number `seq`: writes the payload
/// and recomputes the UDP checksum. Nothing else changes.
pub fn stamp_frame(frame: &mut [u8], seq: u64) -> Result<(), PayloadError> {
    let (l4, pseudo) = udp_of(frame)?;
    let udp_len = u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]) as usize;
    write_payload(&mut frame[l4 + UDP_HLEN..l4 + udp_len], seq)?;
    frame[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
    let mut sum = internet_checksum(&[&pseudo, &frame[l4..l4 + udp_len]]);
    if sum == 0 {
        sum = 0xffff;
    }
    frame[l4 + 6..l4 + 8].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

/// The UDP destination port of an Ethernet/IP/UDP frame, if it is one.
pub fn udp_dst_port(frame: &[u8]) -> Option<u16> {
    let (l4, _) = udp_of(frame).ok()?;
    Some(u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]))
}

/// Checks a whole frame as a receiver on a raw socket sees it: UDP checksum, then
/// every payload byte. Returns the sequence number.
pub fn check_frame(frame: &[u8]) -> Result<u64, PayloadError> {
    let (l4, pseudo) = udp_of(frame)?;
    let udp_len = u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]) as usize;
    let segment = &frame[l4..l4 + udp_len];
    if u16::from_be_bytes([segment[6], segment[7]]) != 0
        && internet_checksum(&[&pseudo, segment]) != 0
    {
        return Err(PayloadError::Checksum);
    }
    check_payload(&segment[UDP_HLEN..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::packet::{build_udp_frame, UdpFrameSpec};
    use etherparse::{SlicedPacket, TransportSlice};

    fn frame(ipv6: bool, size: usize) -> Vec<u8> {
        let (src_ip, dst_ip) = if ipv6 {
            (
                "2001:2:0:1::1".parse().unwrap(),
                "2001:2:0:2::1".parse().unwrap(),
            )
        } else {
            ("198.18.1.1".parse().unwrap(), "198.18.2.1".parse().unwrap())
        };
        build_udp_frame(&UdpFrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip,
            dst_ip,
            src_port: 1024,
            dst_port: 9,
            frame_size: size,
        })
        .unwrap()
    }

    #[test]
    fn stamped_frames_verify_and_carry_their_number() {
        for (ipv6, size) in [
            (false, 60),
            (false, 64),
            (false, 1500),
            (true, 76),
            (true, 1500),
        ] {
            let mut f = frame(ipv6, size);
            let before = f.clone();
            for seq in [0, 1, 255, 1 << 40, u64::MAX] {
                stamp_frame(&mut f, seq).unwrap();
                assert_eq!(
                    check_frame(&f),
                    Ok(seq),
                    "ipv6 {ipv6} size {size} seq {seq}"
                );
                // Headers other than the UDP checksum are untouched.
                let l4 = if ipv6 { 54 } else { 34 };
                assert_eq!(f[..l4 + 6], before[..l4 + 6]);
                // An independent parser agrees on the checksum.
                let p = SlicedPacket::from_ethernet(&f).unwrap();
                let Some(TransportSlice::Udp(u)) = p.transport else {
                    panic!("udp")
                };
                let ok = match p.net.unwrap() {
                    etherparse::NetSlice::Ipv4(ip) => u
                        .to_header()
                        .calc_checksum_ipv4(&ip.header().to_header(), u.payload())
                        .unwrap(),
                    etherparse::NetSlice::Ipv6(ip) => u
                        .to_header()
                        .calc_checksum_ipv6(&ip.header().to_header(), u.payload())
                        .unwrap(),
                };
                assert_eq!(ok, u.checksum());
            }
        }
    }

    #[test]
    fn every_changed_byte_is_caught() {
        let mut f = frame(false, 128);
        stamp_frame(&mut f, 77).unwrap();
        let l4 = 34;
        for i in l4..f.len() {
            let mut bad = f.clone();
            bad[i] ^= 0x10;
            assert!(check_frame(&bad).is_err(), "flip at {i} not caught");
            // Without the checksum (the kernel checked it), the payload check alone
            // still catches any change past the UDP header.
            if i >= l4 + UDP_HLEN {
                assert!(
                    check_payload(&bad[l4 + UDP_HLEN..]).is_err(),
                    "payload flip at {i} not caught"
                );
            }
        }
    }

    #[test]
    fn payloads_of_different_numbers_differ_beyond_the_number() {
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        write_payload(&mut a, 1).unwrap();
        write_payload(&mut b, 2).unwrap();
        assert_ne!(a[SEQ_HEADER..], b[SEQ_HEADER..]);
        // A payload moved to another frame's number is refused.
        a[SEQ_TAG.len()..SEQ_HEADER].copy_from_slice(&2u64.to_be_bytes());
        assert!(matches!(
            check_payload(&a),
            Err(PayloadError::Corrupt { seq: 2, .. })
        ));
    }

    #[test]
    fn short_and_foreign_payloads_are_named() {
        assert_eq!(
            check_payload(&[0; 5]),
            Err(PayloadError::TooShort { len: 5 })
        );
        assert_eq!(check_payload(&[0; 20]), Err(PayloadError::BadTag));
        assert_eq!(min_frame_size(false), 60);
        assert_eq!(min_frame_size(true), 76);
        let mut small = frame(true, 62);
        assert_eq!(
            stamp_frame(&mut small, 1),
            Err(PayloadError::TooShort { len: 0 })
        );
        assert_eq!(udp_dst_port(&frame(false, 60)), Some(9));
        assert_eq!(
            check_frame(&[0; 10]),
            Err(PayloadError::NotUdp("shorter than an Ethernet header"))
        );
    }
}
