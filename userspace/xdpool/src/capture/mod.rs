//! Packet capture: `xdpool capture --rule N` on a running instance.
//!
//! The workers' side is a [`CaptureTap`]: one word that says whether a capture is on
//! (and for which port's rule, with which snaplen), read once per RX batch, and two
//! bounded queues of preallocated records. While a capture is on, a worker copies at
//! most snaplen bytes of each frame the rule matches into a free record and queues
//! it; no free record means the copy is skipped and counted (`capture_dropped`), the
//! worker never waits and never allocates. The frame itself goes on to its action,
//! unchanged (the copy is taken before the action rewrites anything).
//!
//! The control thread ([`session`]) owns the records while a capture runs: it puts
//! them in the free queue when the capture starts, streams filled ones to the client
//! and gives them back, and takes them all away when it stops. The client
//! ([`client`]) writes pcapng.

pub mod client;
pub mod file;
pub mod live;
pub mod session;
pub mod wire;

use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicU64, Ordering};

/// Records a capture may have in flight at once (queued for the client or free):
/// the tap's capacity. At 2 KiB each, 8 MiB while a capture runs, nothing otherwise.
pub const RECORDS: usize = 4096;

/// Largest snaplen: a whole single-buffer frame of the largest chunk.
pub const MAX_SNAPLEN: u32 = 4096;

/// One captured frame: the first `len` bytes of a frame `orig_len` long.
#[derive(Debug)]
pub struct Record {
    /// Socket index (in the plan) the frame arrived on.
    pub socket: u32,
    /// The file a rule's `capture` writes it to ([`file::FileSink::id`]; 0 for the
    /// client's capture).
    pub sink: u32,
    /// Length of the frame on the wire (without FCS).
    pub orig_len: u32,
    /// Bytes copied (at most the snaplen).
    pub len: u32,
    /// When the worker copied it, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Room for `snaplen` bytes; `data[..len]` is the copy.
    pub data: Box<[u8]>,
}

impl Record {
    /// An empty record with room for `room` bytes (the control thread allocates).
    pub fn with_room(room: usize) -> Box<Record> {
        Box::new(Record {
            socket: 0,
            sink: 0,
            orig_len: 0,
            len: 0,
            ts_ns: 0,
            data: vec![0; room].into_boxed_slice(),
        })
    }

    /// The captured bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

/// What a worker reads once per batch: which port's rule a capture wants and how
/// many bytes of each frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Port index in the plan.
    pub port: usize,
    /// The rule's key (`worker::rules::RuleSet::keys`): the same rule keeps its key
    /// across a reload that renumbers the list, so the capture follows it.
    pub rule_key: u32,
    /// Bytes to copy at most (at most [`MAX_SNAPLEN`]).
    pub snaplen: u32,
}

impl Target {
    /// Packs the target in one word: bit 63 on, port in bits 48..63, rule key in
    /// 16..48, snaplen in 0..16.
    fn pack(self) -> u64 {
        1 << 63
            | (self.port as u64 & 0x7fff) << 48
            | (self.rule_key as u64) << 16
            | (self.snaplen as u64 & 0xffff)
    }

    fn unpack(w: u64) -> Option<Target> {
        if w >> 63 == 0 {
            return None;
        }
        Some(Target {
            port: (w >> 48 & 0x7fff) as usize,
            rule_key: (w >> 16) as u32,
            snaplen: (w & 0xffff) as u32,
        })
    }
}

const _: () = assert!(MAX_SNAPLEN <= 0xffff, "the snaplen is packed in 16 bits");

/// Why a worker's copy went nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Queued for the client.
    Queued,
    /// No free record (the client reads slower than the rule matches): counted, skipped.
    Full,
}

/// The shared capture state (one per instance, in the workers' `Fabric`).
pub struct CaptureTap {
    target: AtomicU64,
    free: ArrayQueue<Box<Record>>,
    filled: ArrayQueue<Box<Record>>,
    /// Copies skipped for want of a free record since the capture started.
    dropped: AtomicU64,
}

impl Default for CaptureTap {
    fn default() -> Self {
        CaptureTap::with_capacity(RECORDS)
    }
}

impl CaptureTap {
    /// A tap holding at most `records` records (no record is allocated here).
    pub fn with_capacity(records: usize) -> CaptureTap {
        let records = records.max(1);
        CaptureTap {
            target: AtomicU64::new(0),
            free: ArrayQueue::new(records),
            filled: ArrayQueue::new(records),
            dropped: AtomicU64::new(0),
        }
    }

    /// Most records in flight.
    pub fn capacity(&self) -> usize {
        self.free.capacity()
    }

    /// The current target; what a worker reads once per batch (one relaxed load).
    #[inline]
    pub fn target(&self) -> Option<Target> {
        Target::unpack(self.target.load(Ordering::Relaxed))
    }

    /// Copies at most `snaplen` bytes of `frame` (received on `socket`) into a free
    /// record and queues it. Never blocks, never allocates. Context: any worker.
    #[inline(never)]
    pub fn offer(&self, socket: u32, frame: &[u8], snaplen: u32, ts_ns: u64) -> Offer {
        self.offer_to(0, socket, frame, snaplen, ts_ns)
    }

    /// [`CaptureTap::offer`] for the file `sink` (a rule's `capture`).
    #[inline(never)]
    pub fn offer_to(
        &self,
        sink: u32,
        socket: u32,
        frame: &[u8],
        snaplen: u32,
        ts_ns: u64,
    ) -> Offer {
        let Some(mut rec) = self.free.pop() else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Offer::Full;
        };
        let n = frame.len().min(snaplen as usize).min(rec.data.len());
        rec.data[..n].copy_from_slice(&frame[..n]);
        rec.len = n as u32;
        rec.orig_len = frame.len() as u32;
        rec.socket = socket;
        rec.sink = sink;
        rec.ts_ns = ts_ns;
        // Both queues hold `capacity` and there are never more records: no room
        // in `filled` cannot happen; should it, the record goes back, not to the heap.
        if let Err(rec) = self.filled.push(rec) {
            let _ = self.free.push(rec);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Offer::Full;
        }
        Offer::Queued
    }

    /// Starts a capture: gives the tap `records` free records of `snaplen` bytes and
    /// switches the workers on. Context: the control thread, one capture at a time.
    pub fn arm(&self, target: Target, records: usize) {
        self.target.store(0, Ordering::SeqCst);
        self.clear();
        self.dropped.store(0, Ordering::Relaxed);
        for _ in 0..records.min(self.capacity()) {
            let _ = self.free.push(Record::with_room(target.snaplen as usize));
        }
        self.target.store(target.pack(), Ordering::SeqCst);
    }

    /// Adds free records of `room` bytes until the tap holds `records` in all, for
    /// workers that copy without a target word (the file captures' tap). Returns how
    /// many it added. Context: the one thread that gives records back.
    pub fn provision(&self, records: usize, room: usize) -> usize {
        let (mut added, have) = (0, self.free.len() + self.filled.len());
        while have + added < records.min(self.capacity()) {
            if self.free.push(Record::with_room(room)).is_err() {
                break;
            }
            added += 1;
        }
        added
    }

    /// Switches the workers off. Records still queued stay until [`clear`] (a worker
    /// in the middle of a batch may still queue one).
    ///
    /// [`clear`]: CaptureTap::clear
    pub fn disarm(&self) {
        self.target.store(0, Ordering::SeqCst);
    }

    /// Frees every record the tap holds.
    pub fn clear(&self) {
        while self.filled.pop().is_some() {}
        while self.free.pop().is_some() {}
    }

    /// The next captured frame, if any. Context: the control thread.
    pub fn take(&self) -> Option<Box<Record>> {
        self.filled.pop()
    }

    /// Gives a record back after it was sent.
    pub fn give_back(&self, rec: Box<Record>) {
        // Room always: at most `capacity` records exist.
        let _ = self.free.push(rec);
    }

    /// Copies skipped since the capture started.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Nanoseconds since the Unix epoch (vDSO clock, no system call).
#[inline]
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(snaplen: u32) -> Target {
        Target {
            port: 3,
            rule_key: 5,
            snaplen,
        }
    }

    #[test]
    fn target_packs_into_one_word() {
        let t = Target {
            port: 0x7ffe,
            rule_key: 0xffff_fffe,
            snaplen: 4096,
        };
        assert_eq!(Target::unpack(t.pack()), Some(t));
        assert_eq!(Target::unpack(0), None);
        let tap = CaptureTap::with_capacity(4);
        assert_eq!(tap.target(), None, "off until armed");
        tap.arm(target(64), 4);
        assert_eq!(tap.target(), Some(target(64)));
        tap.disarm();
        assert_eq!(tap.target(), None);
    }

    #[test]
    fn queue_is_bounded_counts_drops_and_never_blocks() {
        let tap = CaptureTap::with_capacity(8);
        tap.arm(target(16), 8);
        let frame: Vec<u8> = (0..100u8).collect();
        // No reader: the first 8 are queued, every further one is dropped and counted,
        // each offer returning at once.
        let started = std::time::Instant::now();
        let results: Vec<Offer> = (0..1000).map(|i| tap.offer(i, &frame, 16, 7)).collect();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "offers returned at once"
        );
        assert_eq!(results.iter().filter(|r| **r == Offer::Queued).count(), 8);
        assert!(results[..8].iter().all(|r| *r == Offer::Queued));
        assert_eq!(tap.dropped(), 992);
        // The snaplen cuts the copy, the original length stays.
        let r = tap.take().unwrap();
        assert_eq!((r.socket, r.len, r.orig_len, r.ts_ns), (0, 16, 100, 7));
        assert_eq!(r.bytes(), &frame[..16]);
        // A record given back makes room for exactly one more.
        tap.give_back(r);
        assert_eq!(tap.offer(1000, &frame[..10], 16, 8), Offer::Queued);
        assert_eq!(tap.offer(1001, &frame, 16, 9), Offer::Full);
        assert_eq!(tap.dropped(), 993);
        let got: Vec<u32> = std::iter::from_fn(|| tap.take())
            .map(|r| r.socket)
            .collect();
        assert_eq!(
            got,
            vec![1, 2, 3, 4, 5, 6, 7, 1000],
            "in order, the short frame whole"
        );
    }

    #[test]
    fn provision_fills_the_tap_once() {
        let tap = CaptureTap::with_capacity(8);
        assert_eq!(tap.provision(8, 16), 8);
        assert_eq!(tap.provision(8, 16), 0, "full already");
        assert_eq!(
            (0..9)
                .filter(|i| tap.offer_to(1, *i, &[0; 20], 16, 0) == Offer::Queued)
                .count(),
            8
        );
        assert_eq!(tap.provision(8, 16), 0, "8 in flight");
    }

    #[test]
    fn arm_starts_fresh_and_clear_frees_everything() {
        let tap = CaptureTap::with_capacity(4);
        tap.arm(target(8), 4);
        for i in 0..6 {
            tap.offer(i, &[1; 20], 8, 0);
        }
        tap.disarm();
        // A worker still in its batch after disarm may queue; the next arm drops it.
        tap.arm(target(32), 2);
        assert_eq!(tap.dropped(), 0);
        assert!(tap.take().is_none(), "records of the last capture are gone");
        assert_eq!(tap.offer(9, &[2; 40], 32, 0), Offer::Queued);
        assert_eq!(tap.offer(10, &[2; 40], 32, 0), Offer::Queued);
        assert_eq!(
            tap.offer(11, &[2; 40], 32, 0),
            Offer::Full,
            "two records this time"
        );
        assert_eq!(tap.take().unwrap().len, 32);
        tap.clear();
        assert!(tap.take().is_none());
        assert_eq!(
            tap.offer(12, &[2; 40], 32, 0),
            Offer::Full,
            "cleared: no free record"
        );
    }

    #[test]
    fn offers_from_several_threads_are_all_queued_or_counted() {
        let tap = std::sync::Arc::new(CaptureTap::with_capacity(64));
        tap.arm(target(4), 64);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (tap, stop) = (tap.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                loop {
                    match tap.take() {
                        Some(r) => {
                            n += 1;
                            tap.give_back(r);
                        }
                        None if stop.load(Ordering::SeqCst) => return n,
                        None => std::thread::yield_now(),
                    }
                }
            })
        };
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let tap = tap.clone();
                std::thread::spawn(move || {
                    (0..20_000)
                        .filter(|i| tap.offer(w * 100_000 + i, &[0; 9], 4, 0) == Offer::Queued)
                        .count() as u64
                })
            })
            .collect();
        let queued: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
        stop.store(true, Ordering::SeqCst);
        let read = reader.join().unwrap();
        assert_eq!(read, queued, "every queued record reached the reader");
        assert_eq!(
            queued + tap.dropped(),
            60_000,
            "every offer queued or counted"
        );
    }
}
