//! The page_pool counters. Owner-side counters have a single writer and are bumped
//! with a plain load + store (no atomic read-modify-write); counters that other
//! threads bump are ordinary atomics on paths that are already slow.

use crate::sync::{AtomicU64, Ordering};
use serde::Serialize;

/// A counter with one writer thread, readable from any thread.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Caller must be the counter's single writer (the pool's owner).
    #[inline(always)]
    pub(crate) fn inc(&self) {
        self.add(1);
    }
    #[inline(always)]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    /// Caller must be the single writer.
    #[inline(always)]
    pub(crate) fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
}

/// A counter any thread may bump.
#[derive(Debug, Default)]
pub(crate) struct SharedCounter(AtomicU64);

impl SharedCounter {
    /// Release: a reader that sees the new count (Acquire in `get`) also sees what
    /// the writer did before, e.g. the frame it put on a list before counting its
    /// `release`. Free on x86; these counters are on slow paths anyway.
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Release);
    }
    pub(crate) fn inc(&self) {
        self.add(1);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// Counters written by the pool's owner thread only.
#[derive(Debug, Default)]
pub(crate) struct OwnerCounters {
    pub(crate) alloc_fast: Counter,
    pub(crate) alloc_slow: Counter,
    pub(crate) alloc_slow_high_order: Counter,
    pub(crate) alloc_empty: Counter,
    pub(crate) alloc_refill: Counter,
    pub(crate) alloc_waive: Counter,
    pub(crate) alloc_failed: Counter,
    pub(crate) recycle_cached: Counter,
    pub(crate) recycle_cache_full: Counter,
    pub(crate) released_refcnt: Counter,
    pub(crate) hold: Counter,
    pub(crate) release: Counter,
    pub(crate) double_release: Counter,
    pub(crate) foreign_addr: Counter,
    pub(crate) not_in_fill: Counter,
    pub(crate) not_in_tx: Counter,
    /// The owner cache's length as of the last `publish_stats` (or cold path): the
    /// second source `Accounting` compares the owner map's `cached` count with.
    pub(crate) cache_len: Counter,
}

/// Counters other threads (remote returns, late returns) write.
#[derive(Debug, Default)]
pub(crate) struct RemoteCounters {
    pub(crate) ring_full: SharedCounter,
    pub(crate) released_refcnt: SharedCounter,
    pub(crate) hold: SharedCounter,
    pub(crate) release: SharedCounter,
    pub(crate) double_release: SharedCounter,
    pub(crate) foreign_addr: SharedCounter,
    pub(crate) after_destroy: SharedCounter,
}

/// A snapshot of one pool's counters (names follow the kernel's page_pool stats).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolStats {
    /// Pool id from its config.
    pub pool_id: u32,
    /// Allocations served from the owner cache. This and `recycle_cached` are kept
    /// in the owner's handle and published on every cold path, by `fill_bulk`,
    /// `PoolOwner::stats` and `publish_stats`; a remote reader may lag by one batch.
    pub alloc_fast: u64,
    /// Bulk takes from the global free list (one per slow-path allocation).
    pub alloc_slow: u64,
    /// Multi-chunk allocations.
    pub alloc_slow_high_order: u64,
    /// Refill attempts that found the return ring empty.
    pub alloc_empty: u64,
    /// Allocations served right after a refill from the return ring.
    pub alloc_refill: u64,
    /// Frames from another node sent to their node's global list during refill.
    pub alloc_waive: u64,
    /// Allocations that found nothing anywhere (returned `None`).
    pub alloc_failed: u64,
    /// Owner recycles that went into the cache.
    pub recycle_cached: u64,
    /// Owner recycles that found the cache full.
    pub recycle_cache_full: u64,
    /// Frames pushed into the return ring (from any thread).
    pub recycle_ring: u64,
    /// Ring pushes that found it full (frame went to the global list).
    pub recycle_ring_full: u64,
    /// Frag releases that were not the last reference.
    pub recycle_released_refcnt: u64,
    /// Frames that entered this pool (from the global list or another pool).
    pub hold: u64,
    /// Frames that left this pool (to the global list or another pool).
    pub release: u64,
    /// `hold - release` (wrapping): frames the pool is answerable for.
    pub inflight: u64,
    /// Returns of a frame that was already released (stale token, completion twice).
    pub double_release: u64,
    /// Addresses or tokens that do not belong to this region.
    pub foreign_addr: u64,
    /// Returns that arrived after the pool was destroyed (sent to the global list).
    pub after_destroy: u64,
    /// RX descriptors whose frame was not in the fill ring.
    pub not_in_fill: u64,
    /// Completions whose frame was not in the TX ring.
    pub not_in_tx: u64,
    /// True once the pool was destroyed.
    pub destroyed: bool,
}

impl PoolStats {
    /// Sum of the misuse counters.
    pub fn misuse(&self) -> u64 {
        self.double_release + self.foreign_addr + self.not_in_fill + self.not_in_tx
    }
}

pub(crate) fn snapshot(
    pool_id: u32,
    o: &OwnerCounters,
    r: &RemoteCounters,
    ring_pushed: u64,
    destroyed: bool,
) -> PoolStats {
    let hold = o.hold.get().wrapping_add(r.hold.get());
    let release = o.release.get().wrapping_add(r.release.get());
    PoolStats {
        pool_id,
        alloc_fast: o.alloc_fast.get(),
        alloc_slow: o.alloc_slow.get(),
        alloc_slow_high_order: o.alloc_slow_high_order.get(),
        alloc_empty: o.alloc_empty.get(),
        alloc_refill: o.alloc_refill.get(),
        alloc_waive: o.alloc_waive.get(),
        alloc_failed: o.alloc_failed.get(),
        recycle_cached: o.recycle_cached.get(),
        recycle_cache_full: o.recycle_cache_full.get(),
        recycle_ring: ring_pushed,
        recycle_ring_full: r.ring_full.get(),
        recycle_released_refcnt: o.released_refcnt.get() + r.released_refcnt.get(),
        hold,
        release,
        inflight: hold.wrapping_sub(release),
        double_release: o.double_release.get() + r.double_release.get(),
        foreign_addr: o.foreign_addr.get() + r.foreign_addr.get(),
        after_destroy: r.after_destroy.get(),
        not_in_fill: o.not_in_fill.get(),
        not_in_tx: o.not_in_tx.get(),
        destroyed,
    }
}
