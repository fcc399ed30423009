//! The owner cache for one batch of packets (a NAPI poll's worth): the kernel's
//! `__page_pool_get_cached` / `page_pool_recycle_in_cache`, with the cache count and
//! the fast-path counters held in registers until the batch ends.
//!
//! `PoolOwner::alloc` and `recycle` must load and store the count in the pool on every
//! call, and an alloc + recycle pair then waits twice on store-to-load forwarding. A
//! batch lends the cache out: the pool's own count reads 0 while the batch lives, so a
//! leaked (forgotten) batch leaks the cached frames instead of handing them out twice.

use crate::frame::{Frag, Frame, FrameMeta, Location, State, GEN_MASK};
use crate::pool::{PoolOwner, CACHE_SIZE};
use std::mem::ManuallyDrop;
use std::num::NonZeroU32;
use std::sync::Arc;

/// Owner-cache access for one batch; get it with [`PoolOwner::batch`], drop it when the
/// batch is done (that writes the count and the counters back). Borrows the pool
/// mutably, so it is as owner-only as the pool.
#[must_use = "a batch does nothing until alloc/recycle is called on it"]
pub struct OwnerBatch<'a> {
    pool: &'a mut PoolOwner,
    /// Entries in `pool.cache`.
    len: usize,
    /// Recycles into the cache not yet added to the pool's count.
    recycle_cached: u64,
    /// Copies of the pool's fixed fields: the fast path reads them from registers,
    /// not through `pool` (which a cold call may change, as far as the compiler knows).
    /// Always `Some` until drop lends it back to the pool. `ManuallyDrop` so that
    /// the batch has no drop glue of its own beyond `Drop::drop` (kept inline).
    meta: ManuallyDrop<Option<Arc<[FrameMeta]>>>,
    /// `State` low bits (owner slot, location) of an application-held frame of this
    /// pool; a cached one's differ only in the location.
    app_bits: u64,
    chunk: u32,
    frame_tag: NonZeroU32,
}

/// `app_bits ^ CACHED_XOR` is the cached state's low bits.
const CACHED_XOR: u64 = (Location::Application as u64) ^ (Location::Cached as u64);
const _: () = assert!(
    State::new(0, 7, Location::Application).0 ^ CACHED_XOR == State::new(0, 7, Location::Cached).0
);

impl PoolOwner {
    /// Start a batch: alloc and recycle on the returned handle keep the cache count
    /// and the fast-path counters in registers. Refill, slow path and misuse checks
    /// are the pool's own (same stats, same errors).
    #[inline]
    pub fn batch(&mut self) -> OwnerBatch<'_> {
        let len = std::mem::replace(&mut self.cache_len, 0);
        self.batch_base_len = len;
        let meta = self.take_batch_meta();
        OwnerBatch {
            len,
            recycle_cached: 0,
            meta: ManuallyDrop::new(Some(meta)),
            app_bits: State::new(0, self.slot, Location::Application).0,
            chunk: self.chunk,
            frame_tag: self.frame_tag,
            pool: self,
        }
    }

    /// The lent `meta` handle; a clone only if a leaked batch never gave it back.
    #[inline]
    fn take_batch_meta(&mut self) -> Arc<[FrameMeta]> {
        match self.batch_meta.take() {
            Some(m) => m,
            None => self.meta.clone(),
        }
    }
}

impl OwnerBatch<'_> {
    /// `PoolOwner::alloc`, fast path inline.
    #[inline(always)]
    pub fn alloc(&mut self) -> Option<Frame> {
        if let Some(e) = self.pop() {
            return Some(self.hand_out(e));
        }
        self.cold(|p| p.alloc())
    }

    /// `PoolOwner::recycle`, fast path inline: a frame this pool handed out, with room
    /// in the cache. Anything else (full cache, stale or foreign token) takes the
    /// pool's own path, which counts it.
    #[inline(always)]
    pub fn recycle(&mut self, f: Frame) {
        if self.has_room() && self.frame_is_mine(&f) {
            self.push(f.key);
            return;
        }
        self.cold(|p| p.recycle(f))
    }

    /// `PoolOwner::recycle_unified`: recycle through the unified frag count (an
    /// unsplit frame's count reads 1, so it costs one load and no atomic RMW).
    #[inline(always)]
    pub fn recycle_unified(&mut self, f: Frame) {
        if self.has_room() && self.frame_is_mine(&f) && self.meta()[f.idx() as usize].is_last_ref()
        {
            self.push(f.key);
            return;
        }
        self.cold(|p| p.recycle_unified(f))
    }

    /// `PoolOwner::alloc_frag`: a piece above half a chunk is a whole, unsplit chunk
    /// from the cache (inline); smaller pieces take the pool's packing path.
    #[inline(always)]
    pub fn alloc_frag(&mut self, size: u32) -> Option<Frag> {
        if size <= self.chunk && size * 2 > self.chunk {
            let Some(e) = self.pop() else {
                // Apart from the packing path below, so the compiler keeps the
                // loop-invariant size test out of the per-element branch.
                return self
                    .cold(|p| p.alloc_frag(size).map(|f| (f, ())))
                    .map(|(f, ())| f);
            };
            let f = self.hand_out(e);
            // size is at most the chunk size (4096).
            return Some(Frag::new(f.key, f.tag, 0, size as u16));
        }
        self.cold(|p| p.alloc_frag(size))
    }

    /// `PoolOwner::release_frag`: the last reference of a chunk of this pool goes to
    /// the cache inline; shared chunks, foreign frags and a full cache take the pool's
    /// path.
    #[inline(always)]
    pub fn release_frag(&mut self, f: Frag) {
        if self.has_room()
            && self
                .held(f.tag(), f.key)
                .is_some_and(FrameMeta::is_last_ref)
        {
            self.push(f.key);
            return;
        }
        self.cold(|p| p.release_frag(f))
    }

    #[inline(always)]
    fn meta(&self) -> &[FrameMeta] {
        self.meta.as_deref().unwrap_or(&[])
    }

    /// Frames in the cache now.
    pub fn cached(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn has_room(&self) -> bool {
        self.len < CACHE_SIZE
    }

    /// `Frame` fast check: this region, this pool, the current token, held by the
    /// application. One compare of the tag, one of the state word.
    #[inline(always)]
    fn frame_is_mine(&self, f: &Frame) -> bool {
        f.tag == self.frame_tag
            && self.meta().get(f.idx() as usize).is_some_and(|m| {
                m.state.load(crate::sync::Ordering::Relaxed) == GEN_MASK & f.key | self.app_bits
            })
    }

    /// The metadata of the chunk of token (`tag`, `key`) if it is this region's, this
    /// pool's, of the current generation and held by the application.
    #[inline(always)]
    fn held(&self, tag: NonZeroU32, key: u64) -> Option<&FrameMeta> {
        if tag != self.frame_tag {
            return None;
        }
        let m = self.meta().get(key as u32 as usize)?;
        let want = GEN_MASK & key | self.app_bits;
        (m.state.load(crate::sync::Ordering::Relaxed) == want).then_some(m)
    }

    /// New generation, location Application (one store, no metadata load).
    #[inline(always)]
    fn hand_out(&self, entry: u64) -> Frame {
        // Next generation (wrapping): the entry's high half plus one.
        let key = entry.wrapping_add(1 << 32);
        self.meta()[key as u32 as usize].state.store(
            GEN_MASK & key | self.app_bits,
            crate::sync::Ordering::Relaxed,
        );
        Frame {
            key,
            tag: self.frame_tag,
        }
    }

    /// Pop the cache (an `alloc_fast`).
    #[inline(always)]
    fn pop(&mut self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // The mask is a no-op (len < CACHE_SIZE) that spares a bounds check.
        Some(self.pool.cache[self.len & (CACHE_SIZE - 1)])
    }

    /// Caller checked `has_room` and that the pool holds the frame.
    #[inline(always)]
    fn push(&mut self, key: u64) {
        self.meta()[key as u32 as usize].state.store(
            GEN_MASK & key | self.app_bits ^ CACHED_XOR,
            crate::sync::Ordering::Relaxed,
        );
        self.pool.cache[self.len & (CACHE_SIZE - 1)] = key;
        self.len += 1;
        self.recycle_cached += 1;
    }

    /// What the batch holds in registers, for the pool.
    #[inline(always)]
    fn regs(&mut self) -> Regs {
        let regs = Regs {
            len: self.len,
            // Pops follow from pushes and the length (one increment less per pair).
            alloc_fast: (self.pool.batch_base_len as u64 + self.recycle_cached) - self.len as u64,
            recycle_cached: self.recycle_cached,
        };
        self.recycle_cached = 0;
        regs
    }

    /// Give the count back to the pool, run `op` there, take the count again. The
    /// batch's fields travel by value so that they can stay in registers.
    #[inline(always)]
    fn cold<R>(&mut self, op: impl FnOnce(&mut PoolOwner) -> R) -> R {
        let regs = self.regs();
        let (r, len) = cold_path(self.pool, regs, op);
        self.len = len;
        r
    }
}

/// What a batch holds in registers, handed back to the pool.
struct Regs {
    len: usize,
    alloc_fast: u64,
    recycle_cached: u64,
}

#[cold]
#[inline(never)]
fn cold_path<R>(
    pool: &mut PoolOwner,
    regs: Regs,
    op: impl FnOnce(&mut PoolOwner) -> R,
) -> (R, usize) {
    give_back(pool, regs);
    let r = op(pool);
    let len = std::mem::replace(&mut pool.cache_len, 0);
    pool.batch_base_len = len;
    (r, len)
}

#[inline(always)]
fn give_back(pool: &mut PoolOwner, regs: Regs) {
    pool.cache_len = regs.len;
    pool.hot_alloc_fast += regs.alloc_fast;
    pool.hot_recycle_cached += regs.recycle_cached;
}

impl Drop for OwnerBatch<'_> {
    #[inline]
    fn drop(&mut self) {
        let regs = self.regs();
        give_back(self.pool, regs);
        // Lend the handle back (a move: no atomic).
        self.pool.batch_meta = self.meta.take();
    }
}

impl std::fmt::Debug for OwnerBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerBatch")
            .field("pool", &self.pool.id())
            .field("cached", &self.cached())
            .finish()
    }
}
