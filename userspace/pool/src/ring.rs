//! The pool's return ring: bounded, many producers (any thread), one consumer (the
//! pool's owner). A closed flag in the producer index makes "destroy while another
//! thread returns a frame" impossible to lose: a producer either claimed a slot
//! before the close (and the closing consumer waits for it) or sees the flag.

use crate::sync::{spin_hint, AtomicU32, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

const CLOSED: usize = 1 << (usize::BITS - 1);

struct Slot {
    /// Vyukov sequence: `pos` = free for the producer at pos, `pos + 1` = holds a value.
    seq: AtomicUsize,
    val: AtomicU32,
}

/// Why a push did not go into the ring; the frame index is handed back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PushError {
    Full(u32),
    Closed(u32),
}

pub(crate) struct ReturnRing {
    tail: CachePadded<AtomicUsize>,
    /// Written only by the consumer; read by others for statistics.
    head: CachePadded<AtomicUsize>,
    slots: Box<[Slot]>,
    mask: usize,
}

impl ReturnRing {
    /// `capacity` is rounded up to a power of two (at least 2).
    pub(crate) fn new(capacity: usize) -> ReturnRing {
        let cap = capacity.max(2).next_power_of_two();
        let slots = (0..cap)
            .map(|i| Slot {
                seq: AtomicUsize::new(i),
                val: AtomicU32::new(0),
            })
            .collect();
        ReturnRing {
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(AtomicUsize::new(0)),
            slots,
            mask: cap - 1,
        }
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Any thread.
    pub(crate) fn push(&self, val: u32) -> Result<(), PushError> {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            if pos & CLOSED != 0 {
                return Err(PushError::Closed(val));
            }
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as isize;
            if diff == 0 {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        slot.val.store(val, Ordering::Relaxed);
                        slot.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(now) => pos = now,
                }
            } else if diff < 0 {
                return Err(PushError::Full(val));
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Consumer only (the owning pool, or its destroy). `None` when empty, or when the
    /// next producer has claimed its slot but not yet written it.
    pub(crate) fn pop(&self) -> Option<u32> {
        let pos = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[pos & self.mask];
        if slot.seq.load(Ordering::Acquire) != pos.wrapping_add(1) {
            return None;
        }
        let val = slot.val.load(Ordering::Relaxed);
        slot.seq
            .store(pos.wrapping_add(self.mask + 1), Ordering::Release);
        self.head.store(pos.wrapping_add(1), Ordering::Relaxed);
        Some(val)
    }

    /// Consumer only: pop up to `out.len()` values, publishing the new head once.
    pub(crate) fn pop_bulk(&self, out: &mut [u32]) -> usize {
        let head = self.head.load(Ordering::Relaxed);
        let mut n = 0;
        while n < out.len() {
            let pos = head.wrapping_add(n);
            let slot = &self.slots[pos & self.mask];
            if slot.seq.load(Ordering::Acquire) != pos.wrapping_add(1) {
                break;
            }
            out[n] = slot.val.load(Ordering::Relaxed);
            slot.seq
                .store(pos.wrapping_add(self.mask + 1), Ordering::Release);
            n += 1;
        }
        if n > 0 {
            self.head.store(head.wrapping_add(n), Ordering::Relaxed);
        }
        n
    }

    /// Consumer only. Close the ring to producers and hand every value that was or is
    /// being pushed to `sink`. After this returns no value can enter the ring again.
    pub(crate) fn close_and_drain(&self, mut sink: impl FnMut(u32)) -> usize {
        let end = self.tail.fetch_or(CLOSED, Ordering::AcqRel) & !CLOSED;
        let mut n = 0;
        while self.head.load(Ordering::Relaxed) != end {
            match self.pop() {
                Some(v) => {
                    sink(v);
                    n += 1;
                }
                // A producer claimed this slot before the close and is writing it.
                None => spin_hint(),
            }
        }
        n
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.tail.load(Ordering::Relaxed) & CLOSED != 0
    }

    /// Values ever pushed (the `recycle_ring` statistic).
    pub(crate) fn pushed(&self) -> u64 {
        (self.tail.load(Ordering::Relaxed) & !CLOSED) as u64
    }

    /// Values in the ring now (exact only when no push is in progress).
    pub(crate) fn len(&self) -> usize {
        let t = self.tail.load(Ordering::Acquire) & !CLOSED;
        t.wrapping_sub(self.head.load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn fifo_full_and_wraparound() {
        let r = ReturnRing::new(3);
        assert_eq!(r.capacity(), 4);
        for round in 0..5u32 {
            for i in 0..4 {
                r.push(round * 10 + i).unwrap();
            }
            assert_eq!(r.push(99), Err(PushError::Full(99)));
            assert_eq!(r.len(), 4);
            for i in 0..4 {
                assert_eq!(r.pop(), Some(round * 10 + i));
            }
            assert_eq!(r.pop(), None);
        }
        assert_eq!(r.pushed(), 20);
    }

    #[test]
    fn pop_bulk_takes_what_is_there_across_the_wrap() {
        let r = ReturnRing::new(4);
        for i in 0..3 {
            r.push(i).unwrap();
        }
        let mut out = [0u32; 2];
        assert_eq!(r.pop_bulk(&mut out), 2);
        assert_eq!(out, [0, 1]);
        for i in 3..6 {
            r.push(i).unwrap();
        }
        assert_eq!(r.push(9), Err(PushError::Full(9)));
        let mut out = [0u32; 8];
        assert_eq!(r.pop_bulk(&mut out), 4);
        assert_eq!(&out[..4], &[2, 3, 4, 5]);
        assert_eq!(r.pop_bulk(&mut out), 0);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn close_drains_and_refuses() {
        let r = ReturnRing::new(8);
        r.push(1).unwrap();
        r.push(2).unwrap();
        let mut got = vec![];
        assert_eq!(r.close_and_drain(|v| got.push(v)), 2);
        assert_eq!(got, vec![1, 2]);
        assert!(r.is_closed());
        assert_eq!(r.push(3), Err(PushError::Closed(3)));
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn many_producers_lose_nothing() {
        let r = std::sync::Arc::new(ReturnRing::new(64));
        let hs: Vec<_> = (0..2u32)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let mut full = 0;
                    for i in 0..1000u32 {
                        let mut v = t * 1000 + i;
                        loop {
                            match r.push(v) {
                                Ok(()) => break,
                                Err(PushError::Full(b)) => {
                                    full += 1;
                                    v = b;
                                    std::thread::yield_now();
                                }
                                Err(PushError::Closed(_)) => unreachable!(),
                            }
                        }
                    }
                    full
                })
            })
            .collect();
        let mut seen = vec![false; 2000];
        let mut n = 0;
        while n < 2000 {
            if let Some(v) = r.pop() {
                assert!(!seen[v as usize], "value {v} seen twice");
                seen[v as usize] = true;
                n += 1;
            } else {
                std::thread::yield_now();
            }
        }
        for h in hs {
            h.join().unwrap();
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(r.pushed(), 2000);
    }
}
