//! The capture stream on the control socket.
//!
//! The client writes `capture {"rule":N,"count":C,"snaplen":S}` (N an index or a
//! rule's name as a string) and a newline. The
//! instance answers one JSON line: `{"error": "..."}` (and closes), or [`Started`].
//! Then records follow, each a 24-byte little-endian header (`len` u32, `orig_len`
//! u32, `ts_ns` u64, `socket` u32, 4 reserved bytes) and `len` bytes. A header
//! whose `len` is [`END`] ends the stream; one JSON line ([`Ended`]) follows it.

use serde::{Deserialize, Serialize};

/// The command word.
pub const COMMAND: &str = "capture";

/// Bytes of a record header.
pub const HEADER: usize = 24;

/// `len` of the header that ends the stream.
pub const END: u32 = u32::MAX;

/// What the client asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The rule: its index in the running list (0-based, the order of the last
    /// applied `[[rule]]` tables) or its `name`.
    pub rule: super::live::RuleRef,
    /// Frames to capture (0: until the client stops).
    pub count: u64,
    /// Bytes of each frame to keep.
    pub snaplen: u32,
}

/// One interface (socket) frames may come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Socket index, as in each record.
    pub socket: u32,
    /// `port/interface/queue`, for the pcapng interface name.
    pub name: String,
}

/// The instance's answer when the capture started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// The rule's index in the running list when the capture started.
    pub rule: usize,
    /// Its name, if it has one.
    #[serde(default)]
    pub name: Option<String>,
    /// Its port's name.
    pub port: String,
    /// Its action (config name).
    pub action: String,
    /// Snaplen in force.
    pub snaplen: u32,
    /// The port's sockets.
    pub interfaces: Vec<Interface>,
}

/// Why and how the stream ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    /// Records sent.
    pub sent: u64,
    /// Copies the workers skipped because every record was in flight.
    pub dropped: u64,
    /// `count` reached, or the instance stopping.
    pub reason: String,
}

/// Encodes a record header.
pub fn header(len: u32, orig_len: u32, ts_ns: u64, socket: u32) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&orig_len.to_le_bytes());
    h[8..16].copy_from_slice(&ts_ns.to_le_bytes());
    h[16..20].copy_from_slice(&socket.to_le_bytes());
    h
}

/// A record as the client receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Socket index.
    pub socket: u32,
    /// Length on the wire.
    pub orig_len: u32,
    /// Timestamp, ns since the epoch.
    pub ts_ns: u64,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// What the decoder found next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A record.
    Record(Received),
    /// The end marker and the instance's closing line.
    End(Ended),
    /// Not enough bytes yet.
    More,
}

/// A malformed stream.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A record longer than any snaplen.
    #[error("record of {0} bytes in the capture stream, more than any snaplen: the instance speaks another version of the protocol; use the xdpool binary of the running instance")]
    TooLong(u32),
    /// The closing line is not JSON.
    #[error("unreadable end of the capture stream: {0}")]
    BadEnd(serde_json::Error),
}

/// Splits the byte stream into records (bytes arrive in any pieces).
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already decoded (dropped at the next push: no copy per record).
    start: usize,
}

impl Decoder {
    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.drain(..self.start);
        self.start = 0;
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete item.
    pub fn next_item(&mut self) -> Result<Next, StreamError> {
        let buf = &self.buf[self.start..];
        if buf.len() < HEADER {
            return Ok(Next::More);
        }
        let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
        let len = u32_at(0);
        if len == END {
            let Some(nl) = buf[HEADER..].iter().position(|b| *b == b'\n') else {
                return Ok(Next::More);
            };
            let end =
                serde_json::from_slice(&buf[HEADER..HEADER + nl]).map_err(StreamError::BadEnd)?;
            self.start += HEADER + nl + 1;
            return Ok(Next::End(end));
        }
        if len > super::MAX_SNAPLEN {
            return Err(StreamError::TooLong(len));
        }
        if buf.len() < HEADER + len as usize {
            return Ok(Next::More);
        }
        let rec = Received {
            orig_len: u32_at(4),
            ts_ns: u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes")),
            socket: u32_at(16),
            data: buf[HEADER..HEADER + len as usize].to_vec(),
        };
        self.start += HEADER + len as usize;
        Ok(Next::Record(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_the_end_decode_from_any_split() {
        let mut stream = Vec::new();
        for i in 0..5u32 {
            let data: Vec<u8> = (0..i as u8 * 7).collect();
            stream.extend_from_slice(&header(data.len() as u32, 1000 + i, 42 + i as u64, i));
            stream.extend_from_slice(&data);
        }
        stream.extend_from_slice(&header(END, 0, 0, 0));
        let end = Ended {
            sent: 5,
            dropped: 1,
            reason: "count reached".into(),
        };
        stream.extend_from_slice(serde_json::to_string(&end).unwrap().as_bytes());
        stream.push(b'\n');
        for piece in [1, 3, 24, 25, 1000] {
            let mut d = Decoder::default();
            let (mut recs, mut ended) = (Vec::new(), None);
            for chunk in stream.chunks(piece) {
                d.push(chunk);
                loop {
                    match d.next_item().unwrap() {
                        Next::Record(r) => recs.push(r),
                        Next::End(e) => ended = Some(e),
                        Next::More => break,
                    }
                }
            }
            assert_eq!(recs.len(), 5, "pieces of {piece}");
            assert_eq!(
                recs[3],
                Received {
                    socket: 3,
                    orig_len: 1003,
                    ts_ns: 45,
                    data: (0..21).collect()
                }
            );
            assert_eq!(ended.as_ref(), Some(&end));
        }
    }

    #[test]
    fn an_oversized_record_is_refused() {
        let mut d = Decoder::default();
        d.push(&header(super::super::MAX_SNAPLEN + 1, 0, 0, 0));
        assert!(matches!(d.next_item(), Err(StreamError::TooLong(_))));
    }
}
