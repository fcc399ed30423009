//! Receivers that check every sequenced frame ([`super::seq`]): which numbers came,
//! how often, and whether each one's bytes were right.
//!
//! Two kinds, each a thread inside a lab namespace:
//! - [`SeqSink::udp`]: a UDP socket bound to an address. Frames reach it through the
//!   namespace's stack, so the destination MAC, the IP header and the UDP checksum
//!   must all be right for a frame to count (the kernel drops the others).
//! - [`SeqSink::packet`]: a raw packet socket that sees every frame arriving on one
//!   device, whatever its MACs (a monitor port's copies); it checks the UDP checksum
//!   itself.
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::seq::{self, PayloadError};
use crate::netns::{self, NetnsError};

/// Receive buffer asked for (SO_RCVBUFFORCE), so a short stall of the thread drops nothing.
pub const RCVBUF_BYTES: usize = 64 << 20;

/// Errors starting a sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Entering the namespace or finding the device failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The socket could not be made.
    #[error("receiver socket ({what}) in {netns}: {detail}; run as root and check the lab is up")]
    Socket {
        /// What was being done.
        what: &'static str,
        /// Namespace.
        netns: String,
        /// Cause.
        detail: String,
    },
    /// The receiving thread ended without saying it was ready.
    #[error(
        "the receiver thread in {0} ended before it was ready; this is a bug, please report it"
    )]
    NotReady(String),
}

/// What a sink has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SinkReport {
    /// Sequence numbers expected: `first..first + expected`.
    pub first: u64,
    /// How many.
    pub expected: u64,
    /// Frames (or datagrams) taken that were addressed to the sink.
    pub received: u64,
    /// Their bytes (UDP payload for a UDP sink, whole frames for a packet sink).
    pub bytes: u64,
    /// Distinct expected numbers seen with correct bytes.
    pub unique: u64,
    /// Correct frames whose number had been seen before.
    pub duplicates: u64,
    /// Correct frames with a number outside the expected range.
    pub out_of_range: u64,
    /// Frames whose bytes or checksum were wrong.
    pub corrupt: u64,
    /// The first wrong frame's error.
    pub first_corrupt: Option<String>,
    /// Expected numbers never seen.
    pub missing: u64,
}

impl SinkReport {
    /// Every expected frame exactly once, correct, and nothing else.
    pub fn exact(&self) -> bool {
        self.unique == self.expected
            && self.missing == 0
            && self.duplicates == 0
            && self.out_of_range == 0
            && self.corrupt == 0
    }

    /// One line for people.
    pub fn line(&self) -> String {
        format!(
            "received {} ({} B): {} of {} expected frames once and intact, {} missing, {} duplicated, {} corrupt, {} unexpected",
            self.received, self.bytes, self.unique, self.expected, self.missing, self.duplicates, self.corrupt, self.out_of_range
        )
    }
}

/// The bookkeeping of a sink, without any I/O (unit-tested).
#[derive(Debug, Clone)]
pub struct SeqLedger {
    first: u64,
    expected: u64,
    seen: Vec<u64>,
    report: SinkReport,
}

impl SeqLedger {
    /// Expects numbers `first..first + expected`.
    pub fn new(first: u64, expected: u64) -> Self {
        let words = usize::try_from(expected.div_ceil(64)).expect("expected count fits memory");
        Self {
            first,
            expected,
            seen: vec![0; words],
            report: SinkReport {
                first,
                expected,
                missing: expected,
                ..SinkReport::default()
            },
        }
    }

    /// Records one received frame: its length and what checking it gave.
    pub fn record(&mut self, len: usize, checked: Result<u64, PayloadError>) {
        let r = &mut self.report;
        r.received += 1;
        r.bytes += len as u64;
        let seq = match checked {
            Ok(s) => s,
            Err(e) => {
                r.corrupt += 1;
                r.first_corrupt.get_or_insert_with(|| e.to_string());
                return;
            }
        };
        let Some(i) = seq.checked_sub(self.first).filter(|&i| i < self.expected) else {
            r.out_of_range += 1;
            return;
        };
        let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        if self.seen[word] & bit != 0 {
            r.duplicates += 1;
        } else {
            self.seen[word] |= bit;
            r.unique += 1;
            r.missing -= 1;
        }
    }

    /// The counts so far.
    pub fn report(&self) -> SinkReport {
        self.report.clone()
    }

    /// The first `limit` expected numbers not seen (for a failure message).
    pub fn missing_sample(&self, limit: usize) -> Vec<u64> {
        (0..self.expected)
            .filter(|&i| self.seen[(i / 64) as usize] & (1 << (i % 64)) == 0)
            .take(limit)
            .map(|i| self.first + i)
            .collect()
    }
}

/// A running receiver; stops (and joins its thread) on drop.
pub struct SeqSink {
    ledger: Arc<Mutex<SeqLedger>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    what: String,
}

impl std::fmt::Debug for SeqSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqSink").field("what", &self.what).finish()
    }
}

enum Source {
    Udp(UdpSocket),
    Packet {
        fd: OwnedFd,
        ifindex: usize,
        dst_port: u16,
    },
}

impl SeqSink {
    /// A UDP socket bound to `addr` inside `netns`, expecting `first..first+expected`.
    pub fn udp(
        netns: &str,
        addr: SocketAddr,
        first: u64,
        expected: u64,
    ) -> Result<Self, SinkError> {
        let ns = netns.to_string();
        Self::start(
            format!("udp {addr} in {netns}"),
            netns,
            first,
            expected,
            move || {
                let err = |what, e: std::io::Error| SinkError::Socket {
                    what,
                    netns: ns.clone(),
                    detail: e.to_string(),
                };
                let sock = UdpSocket::bind(addr).map_err(|e| err("bind", e))?;
                sock.set_read_timeout(Some(Duration::from_millis(20)))
                    .map_err(|e| err("SO_RCVTIMEO", e))?;
                force_rcvbuf(&sock).map_err(|e| err("SO_RCVBUFFORCE", e))?;
                Ok(Source::Udp(sock))
            },
        )
    }

    /// A packet socket seeing every frame that arrives on `dev` inside `netns`; it
    /// counts the UDP frames to `dst_port` (others, such as IPv6 chatter, are ignored).
    pub fn packet(
        netns: &str,
        dev: &str,
        dst_port: u16,
        first: u64,
        expected: u64,
    ) -> Result<Self, SinkError> {
        let (ns, dev) = (netns.to_string(), dev.to_string());
        Self::start(
            format!("packets on {dev} in {netns}"),
            netns,
            first,
            expected,
            move || {
                use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};
                let err = |what, e: nix::Error| SinkError::Socket {
                    what,
                    netns: ns.clone(),
                    detail: e.to_string(),
                };
                let ifindex = netns::ifindex(&dev)? as usize;
                let fd = socket(
                    AddressFamily::Packet,
                    SockType::Raw,
                    SockFlag::SOCK_CLOEXEC,
                    SockProtocol::EthAll,
                )
                .map_err(|e| err("socket(AF_PACKET)", e))?;
                let tv = nix::sys::time::TimeVal::new(0, 20_000);
                nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &tv)
                    .map_err(|e| err("SO_RCVTIMEO", e))?;
                nix::sys::socket::setsockopt(
                    &fd,
                    nix::sys::socket::sockopt::RcvBufForce,
                    &RCVBUF_BYTES,
                )
                .map_err(|e| err("SO_RCVBUFFORCE", e))?;
                Ok(Source::Packet {
                    fd,
                    ifindex,
                    dst_port,
                })
            },
        )
    }

    fn start(
        what: String,
        netns: &str,
        first: u64,
        expected: u64,
        open: impl FnOnce() -> Result<Source, SinkError> + Send + 'static,
    ) -> Result<Self, SinkError> {
        let ledger = Arc::new(Mutex::new(SeqLedger::new(first, expected)));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), SinkError>>();
        let (l, s, ns) = (ledger.clone(), stop.clone(), netns.to_string());
        let thread = std::thread::Builder::new()
            .name("xdpool-sink".into())
            .spawn(move || {
                let source = netns::enter(&ns)
                    .map_err(SinkError::from)
                    .and_then(|guard| open().map(|src| (guard, src)));
                let (_guard, source) = match source {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                receive(source, &l, &s);
            })
            .map_err(|e| SinkError::Socket {
                what: "thread",
                netns: netns.to_string(),
                detail: e.to_string(),
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self {
                ledger,
                stop,
                thread: Some(thread),
                what,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(SinkError::NotReady(netns.to_string()))
            }
        }
    }

    /// The counts so far.
    pub fn report(&self) -> SinkReport {
        self.ledger.lock().expect("sink ledger").report()
    }

    /// Waits until `expected` frames arrived or nothing arrived for `quiet`, at most
    /// `limit`; returns the counts.
    pub fn settle(&self, quiet: Duration, limit: Duration) -> SinkReport {
        let start = Instant::now();
        let mut last = self.report();
        let mut since = Instant::now();
        while start.elapsed() < limit {
            if last.unique == last.expected && last.expected > 0 {
                // Give late duplicates a moment to show.
                std::thread::sleep(quiet.min(Duration::from_millis(200)));
                return self.report();
            }
            std::thread::sleep(Duration::from_millis(20));
            let now = self.report();
            if now.received != last.received {
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return now;
            }
            last = now;
        }
        self.report()
    }

    /// The first `limit` numbers not seen.
    pub fn missing_sample(&self, limit: usize) -> Vec<u64> {
        self.ledger
            .lock()
            .expect("sink ledger")
            .missing_sample(limit)
    }

    /// What it listens on (for messages).
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// Stops the thread and returns the final counts.
    pub fn stop(mut self) -> SinkReport {
        self.halt();
        self.report()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SeqSink {
    fn drop(&mut self) {
        self.halt();
    }
}

fn force_rcvbuf(sock: &UdpSocket) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(sock, nix::sys::socket::sockopt::RcvBufForce, &RCVBUF_BYTES)
        .map_err(std::io::Error::from)
}

fn receive(source: Source, ledger: &Mutex<SeqLedger>, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        match &source {
            Source::Udp(sock) => match sock.recv(&mut buf) {
                Ok(n) => ledger
                    .lock()
                    .expect("sink ledger")
                    .record(n, seq::check_payload(&buf[..n])),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "UDP receiver stopped");
                    return;
                }
            },
            Source::Packet {
                fd,
                ifindex,
                dst_port,
            } => {
                match nix::sys::socket::recvfrom::<nix::sys::socket::LinkAddr>(
                    fd.as_raw_fd(),
                    &mut buf,
                ) {
                    Ok((n, from)) => {
                        // Only frames arriving on our device (not ones it sends: PACKET_OUTGOING).
                        let ours = from.is_some_and(|a| {
                            a.ifindex() == *ifindex && a.pkttype() != libc::PACKET_OUTGOING
                        });
                        let frame = &buf[..n];
                        if ours && seq::udp_dst_port(frame) == Some(*dst_port) {
                            ledger
                                .lock()
                                .expect("sink ledger")
                                .record(n, seq::check_frame(frame));
                        }
                    }
                    Err(nix::Error::EAGAIN | nix::Error::EINTR) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "packet receiver stopped");
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_counts_each_number_once() {
        let mut l = SeqLedger::new(100, 130);
        for s in 100..230 {
            l.record(22, Ok(s));
        }
        let r = l.report();
        assert!(r.exact(), "{r:?}");
        assert_eq!(
            (r.received, r.bytes, r.unique, r.missing),
            (130, 130 * 22, 130, 0)
        );
    }

    #[test]
    fn ledger_names_missing_duplicate_corrupt_and_foreign_frames() {
        let mut l = SeqLedger::new(0, 10);
        for s in [0, 1, 2, 2, 3, 99] {
            l.record(10, Ok(s));
        }
        l.record(10, Err(PayloadError::BadTag));
        let r = l.report();
        assert!(!r.exact());
        assert_eq!(
            (
                r.received,
                r.unique,
                r.duplicates,
                r.out_of_range,
                r.corrupt,
                r.missing
            ),
            (7, 4, 1, 1, 1, 6)
        );
        assert_eq!(
            r.first_corrupt.as_deref(),
            Some("payload does not start with the XDPSEQ tag")
        );
        assert_eq!(l.missing_sample(3), vec![4, 5, 6]);
        // Below the first number is out of range too (no wrap-around).
        let mut l = SeqLedger::new(5, 1);
        l.record(1, Ok(4));
        assert_eq!(l.report().out_of_range, 1);
    }
}
