//! One pool per worker: the owner-only alloc cache, refill from the return ring, the
//! global slow path, recycling, frags, kernel hand-off tracking and teardown.

use crate::accounting::{KernelHeld, PoolAudit};
use crate::error::{FrameError, PoolError};
use crate::frame::{
    frame_tag, Buf, Frag, Frame, FrameMeta, Location, State, FRAG_BIAS, GEN_MASK, NO_OWNER,
};
use crate::region::Region;
use crate::ring::{PushError, ReturnRing};
use crate::stats::{snapshot, OwnerCounters, PoolStats, RemoteCounters};
use crate::sync::Ordering;
use crate::Accounting;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries in the owner cache (the kernel's PP_ALLOC_CACHE_SIZE).
pub const CACHE_SIZE: usize = 128;
/// Frags are handed out in multiples of this many bytes.
pub const FRAG_ALIGN: u32 = 64;

/// Per-pool settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// Id used in stats and logs.
    pub id: u32,
    /// Node whose frames this pool keeps; others are waived on refill.
    pub preferred_node: u32,
    /// Return ring capacity (rounded up to a power of two).
    pub ring_size: u32,
    /// Frames moved per refill or slow-path take (at most `CACHE_SIZE`).
    pub bulk: u32,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            id: 0,
            preferred_node: 0,
            ring_size: 1024,
            bulk: 64,
        }
    }
}

/// The part of a pool other threads see: return ring and counters.
pub(crate) struct PoolShared {
    pub(crate) id: u32,
    pub(crate) slot: u32,
    pub(crate) ring: ReturnRing,
    pub(crate) owner: CachePadded<OwnerCounters>,
    pub(crate) remote: CachePadded<RemoteCounters>,
}

impl PoolShared {
    /// Destroyed, no handle left but the registry's, and no frame attributed to it.
    pub(crate) fn is_retired(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) == 1 && self.ring.is_closed() && self.stats().inflight == 0
    }

    fn stats(&self) -> PoolStats {
        snapshot(
            self.id,
            &self.owner,
            &self.remote,
            self.ring.pushed(),
            self.ring.is_closed(),
        )
    }
}

struct FragCursor {
    idx: u32,
    gen: u32,
    offset: u32,
    users: u32,
}

/// The owner's handle: alloc and direct recycle. Neither `Send` nor `Sync`, so the
/// cache can only be touched by the thread that created it.
pub struct PoolOwner {
    pub(crate) cache_len: usize,
    /// Entries are `generation << 32 | index`, so popping needs no metadata load.
    pub(crate) cache: [u64; CACHE_SIZE],
    /// Hot counters live here (registers in a tight loop) and are published to the
    /// shared counters on every cold path and by `publish_stats`.
    pub(crate) hot_alloc_fast: u64,
    pub(crate) hot_recycle_cached: u64,
    /// Cache length when the live `OwnerBatch` last synced its counts (batch only).
    pub(crate) batch_base_len: usize,
    pub(crate) meta: Arc<[FrameMeta]>,
    /// A second handle on `meta`, lent to each `OwnerBatch` (moved, not cloned, so a
    /// batch costs no atomic).
    pub(crate) batch_meta: Option<Arc<[FrameMeta]>>,
    region: Arc<Region>,
    shared: Arc<PoolShared>,
    pub(crate) slot: u32,
    pub(crate) chunk: u32,
    pub(crate) tag: u16,
    /// `Frame::tag` of this region's tokens.
    pub(crate) frame_tag: std::num::NonZeroU32,
    node: u32,
    bulk: usize,
    frag: Option<FragCursor>,
    /// References of split chunks this pool put in its TX ring (chunk -> count). A TX
    /// ring belongs to one pool, so its references are counted here, owner-only.
    tx_frags: HashMap<u32, u32>,
    torn_down: bool,
    _owner_thread_only: PhantomData<*const ()>,
}

/// Return path for other threads, plus read-only stats. `Send + Sync + Clone`.
#[derive(Clone)]
pub struct PoolRemote {
    region: Arc<Region>,
    shared: Arc<PoolShared>,
}

/// What `PoolOwner::destroy` did, and a handle to wait for frames still out.
#[must_use = "check inflight, or wait() for the frames still out"]
pub struct DestroyReport {
    /// Pool id.
    pub pool_id: u32,
    /// Frames moved from the cache (and the open frag chunk) to the global lists.
    pub released_cached: u32,
    /// Frames drained from the return ring to the global lists.
    pub released_ring: u32,
    /// Frames still out (application, fill or TX rings) at destroy time.
    pub inflight: u64,
    region: Arc<Region>,
    shared: Arc<PoolShared>,
}

impl std::fmt::Debug for DestroyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestroyReport")
            .field("pool_id", &self.pool_id)
            .field("released_cached", &self.released_cached)
            .field("released_ring", &self.released_ring)
            .field("inflight", &self.inflight)
            .finish()
    }
}

impl DestroyReport {
    /// Frames of the destroyed pool still out now.
    pub fn inflight_now(&self) -> u64 {
        self.shared.stats().inflight
    }

    /// One retry (page_pool_release_retry): returns the inflight count and warns,
    /// naming the pool, while it is not zero.
    pub fn retry(&self) -> u64 {
        let n = self.inflight_now();
        if n != 0 {
            tracing::warn!(
                pool = self.pool_id,
                inflight = n,
                "stalled pool shutdown: pool {}: {} inflight",
                self.pool_id,
                n
            );
        }
        n
    }

    /// Retry until every frame came back or `timeout` passed (warning about once a
    /// second). The memory stays valid either way; late returns go to global lists.
    pub fn wait(&self, timeout: Duration) -> Result<(), PoolError> {
        let start = Instant::now();
        let mut next_warn = start;
        loop {
            let n = self.inflight_now();
            if n == 0 {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(PoolError::StalledShutdown {
                    pool: self.pool_id,
                    inflight: n,
                });
            }
            if Instant::now() >= next_warn {
                self.retry();
                next_warn += Duration::from_secs(1);
            }
            crate::sync::pause(Duration::from_millis(1));
        }
    }

    /// The destroyed pool's counters now.
    pub fn stats(&self) -> PoolStats {
        self.shared.stats()
    }

    /// Region accounting after the destroy.
    pub fn accounting(&self) -> Accounting {
        self.region.accounting()
    }
}

impl PoolOwner {
    /// Create a pool on the calling thread (which becomes its owner).
    pub fn new(region: &Arc<Region>, cfg: PoolConfig) -> PoolOwner {
        let mut node = cfg.preferred_node;
        if node >= region.nodes() {
            tracing::warn!(
                pool = cfg.id,
                node,
                nodes = region.nodes(),
                "preferred node does not exist; using node 0"
            );
            node = 0;
        }
        let shared = region.register_pool(|slot| {
            Arc::new(PoolShared {
                id: cfg.id,
                slot,
                ring: ReturnRing::new(cfg.ring_size as usize),
                owner: CachePadded::new(OwnerCounters::default()),
                remote: CachePadded::new(RemoteCounters::default()),
            })
        });
        PoolOwner {
            cache_len: 0,
            cache: [0; CACHE_SIZE],
            hot_alloc_fast: 0,
            hot_recycle_cached: 0,
            batch_base_len: 0,
            slot: shared.slot,
            meta: region.meta.clone(),
            batch_meta: Some(region.meta.clone()),
            chunk: region.chunk_size(),
            region: region.clone(),
            shared,
            tag: region.tag(),
            frame_tag: frame_tag(
                region.tag(),
                std::num::NonZeroU8::new(region.shift()).expect("chunk shift is at least 11"),
            ),
            node,
            bulk: (cfg.bulk as usize).clamp(1, CACHE_SIZE),
            frag: None,
            tx_frags: HashMap::new(),
            torn_down: false,
            _owner_thread_only: PhantomData,
        }
    }

    #[inline(always)]
    pub(crate) fn state(&self, idx: u32) -> State {
        State(self.meta[idx as usize].state.load(Ordering::Relaxed))
    }

    #[inline(always)]
    pub(crate) fn set_state(&self, idx: u32, st: State) {
        self.meta[idx as usize].state.store(st.0, Ordering::Relaxed)
    }

    /// Handle for other threads.
    pub fn remote(&self) -> PoolRemote {
        PoolRemote {
            region: self.region.clone(),
            shared: self.shared.clone(),
        }
    }
    /// Pool id.
    pub fn id(&self) -> u32 {
        self.shared.id
    }
    /// The region the pool allocates from.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }
    /// Frames in the owner cache now.
    pub fn cached(&self) -> usize {
        self.cache_len
    }
    /// Counter snapshot (publishes the hot counters first).
    pub fn stats(&self) -> PoolStats {
        self.publish_stats();
        self.shared.stats()
    }
    /// Region-wide accounting (publishes this pool's cache length first; other
    /// owners' lengths are as of their last `publish_stats`).
    pub fn accounting(&self) -> Accounting {
        self.publish_stats();
        self.region.accounting()
    }

    /// Make the fast-path counters (`alloc_fast`, `recycle_cached`) visible to
    /// `PoolRemote::stats`. Cold paths do it too; a worker calls it once per batch.
    #[inline]
    pub fn publish_stats(&self) {
        self.shared.owner.cache_len.set(self.cache_len as u64);
        self.shared.owner.alloc_fast.set(self.hot_alloc_fast);
        self.shared
            .owner
            .recycle_cached
            .set(self.hot_recycle_cached);
    }

    // ---- alloc -------------------------------------------------------------------

    /// Fast path: pop the owner cache. Empty cache: refill from the return ring, then
    /// the global list. `None` when every frame is out.
    #[inline]
    pub fn alloc(&mut self) -> Option<Frame> {
        let e = self.alloc_entry()?;
        Some(self.hand_out(e, Location::Application))
    }

    #[inline]
    fn alloc_entry(&mut self) -> Option<u64> {
        if self.cache_len > 0 {
            self.cache_len -= 1;
            self.hot_alloc_fast += 1;
            // The mask is a no-op (cache_len < CACHE_SIZE) that spares a bounds check.
            return Some(self.cache[self.cache_len & (CACHE_SIZE - 1)]);
        }
        self.alloc_entry_cold()
    }

    /// Give out a cache entry: new generation, new location; no metadata load.
    #[inline]
    pub(crate) fn hand_out(&self, entry: u64, loc: Location) -> Frame {
        // Next generation (wrapping): the entry's high half plus one.
        let key = entry.wrapping_add(1 << 32);
        let idx = key as u32;
        self.set_state(idx, State(GEN_MASK & key | State::new(0, self.slot, loc).0));
        Frame {
            key,
            tag: self.frame_tag,
        }
    }

    #[cold]
    #[inline(never)]
    fn alloc_entry_cold(&mut self) -> Option<u64> {
        self.publish_stats();
        if self.refill_from_ring() {
            self.shared.owner.alloc_refill.inc();
        } else if self.take_from_global() {
            self.shared.owner.alloc_slow.inc();
        } else {
            self.shared.owner.alloc_failed.inc();
            return None;
        }
        self.cache_len -= 1;
        Some(self.cache[self.cache_len])
    }

    /// Move up to `bulk` frames from the return ring to the cache, waiving frames of
    /// other nodes to their node's global list. True if the cache got frames.
    fn refill_from_ring(&mut self) -> bool {
        let mut buf = [0u32; CACHE_SIZE];
        let want = self.bulk.min(CACHE_SIZE - self.cache_len);
        let n = self.shared.ring.pop_bulk(&mut buf[..want]);
        if n == 0 {
            self.shared.owner.alloc_empty.inc();
            return self.cache_len > 0;
        }
        // The count stays in a register; waiving (rare) is out of line.
        let cached_bits = State::new(0, self.slot, Location::Cached).0;
        let mut len = self.cache_len;
        for &idx in &buf[..n] {
            let m = &self.meta[idx as usize];
            if m.node != self.node {
                self.waive(idx);
                continue;
            }
            let gen = m.state.load(Ordering::Relaxed) & GEN_MASK;
            m.state.store(gen | cached_bits, Ordering::Relaxed);
            // want <= CACHE_SIZE - cache_len, so len stays below CACHE_SIZE.
            self.cache[len & (CACHE_SIZE - 1)] = gen | idx as u64;
            len += 1;
        }
        self.cache_len = len;
        len > 0
    }

    #[cold]
    #[inline(never)]
    fn waive(&self, idx: u32) {
        self.shared.owner.alloc_waive.inc();
        self.to_global(idx);
    }

    /// Slow path: a bulk from the preferred node's global list, other nodes after.
    fn take_from_global(&mut self) -> bool {
        let mut buf = [0u32; CACHE_SIZE];
        let nodes = self.region.nodes();
        for k in 0..nodes {
            let node = (self.node + k) % nodes;
            let n = self.region.global_take(node, &mut buf[..self.bulk]);
            if n > 0 {
                self.shared.owner.hold.add(n as u64);
                for &idx in buf[..n].iter().rev() {
                    let gen = self.state(idx).gen();
                    self.cache_push(idx, gen);
                }
                return true;
            }
        }
        false
    }

    /// Caller checked there is room.
    #[inline]
    fn cache_push(&mut self, idx: u32, gen: u32) {
        self.set_state(idx, State::new(gen, self.slot, Location::Cached));
        self.cache[self.cache_len] = ((gen as u64) << 32) | idx as u64;
        self.cache_len += 1;
    }

    /// `chunks` frames at once for a jumbo / multi-buffer packet, straight from the
    /// global lists (counted as `alloc_slow_high_order`); all or nothing.
    pub fn alloc_high_order(&mut self, chunks: u32) -> Option<Vec<Frame>> {
        if chunks == 0 || chunks > self.region.frames() {
            return None;
        }
        let mut idxs = vec![0u32; chunks as usize];
        let mut got = 0;
        let nodes = self.region.nodes();
        for k in 0..nodes {
            got += self
                .region
                .global_take((self.node + k) % nodes, &mut idxs[got..]);
            if got == idxs.len() {
                break;
            }
        }
        if got < idxs.len() {
            for &idx in &idxs[..got] {
                self.region.global_put(idx);
            }
            self.shared.owner.alloc_failed.inc();
            return None;
        }
        self.shared.owner.alloc_slow_high_order.inc();
        self.shared.owner.hold.add(got as u64);
        Some(
            idxs.into_iter()
                .map(|idx| {
                    self.hand_out(
                        ((self.state(idx).gen() as u64) << 32) | idx as u64,
                        Location::Application,
                    )
                })
                .collect(),
        )
    }

    // ---- recycle -----------------------------------------------------------------

    /// Direct recycle from the owner: cache; full cache: return ring; full ring:
    /// global list. A stale or foreign token is counted and dropped.
    #[inline]
    pub fn recycle(&mut self, f: Frame) {
        if self.is_mine_in_app(&f) {
            self.recycle_index(f.idx(), f.gen());
        } else {
            self.recycle_checked(f);
        }
    }

    /// The common case in one compare: this region, this pool, the current token.
    #[inline]
    pub(crate) fn is_mine_in_app(&self, f: &Frame) -> bool {
        f.tag == self.frame_tag
            && (f.idx() as usize) < self.meta.len()
            && self.state(f.idx()).0
                == GEN_MASK & f.key | State::new(0, self.slot, Location::Application).0
    }

    #[cold]
    #[inline(never)]
    fn recycle_checked(&mut self, f: Frame) {
        let Some(st) = self.check_held(&f) else {
            return;
        };
        if st.owner() != self.slot {
            self.adopt(st.owner());
        }
        self.recycle_index(f.idx(), f.gen());
    }

    /// Same as `recycle`, but through the unified frag reference count (what a frame
    /// costs when frag support is on); used by the benchmark to price that support.
    #[inline]
    pub fn recycle_unified(&mut self, f: Frame) {
        if !self.is_mine_in_app(&f) {
            let Some(st) = self.check_held(&f) else {
                return;
            };
            if st.owner() != self.slot {
                self.adopt(st.owner());
            }
        }
        if self.unref(f.idx()) {
            self.recycle_index(f.idx(), f.gen());
        }
    }

    /// The frame leaves the pool for the global list (page_pool's "release page").
    pub fn release_to_global(&mut self, f: Frame) {
        let Some(st) = self.check_held(&f) else {
            return;
        };
        if st.owner() != self.slot {
            self.adopt(st.owner());
        }
        self.to_global(f.idx());
    }

    /// A frame this pool holds goes to the cache (or ring, or global list).
    #[inline]
    fn recycle_index(&mut self, idx: u32, gen: u32) {
        if self.cache_len < CACHE_SIZE {
            self.cache_push(idx, gen);
            self.hot_recycle_cached += 1;
            return;
        }
        self.recycle_cache_full(idx);
    }

    #[cold]
    #[inline(never)]
    fn recycle_cache_full(&mut self, idx: u32) {
        self.publish_stats();
        self.shared.owner.recycle_cache_full.inc();
        self.set_state(idx, self.state(idx).with(self.slot, Location::Ring));
        match self.shared.ring.push(idx) {
            Ok(()) => {}
            Err(PushError::Full(idx)) => {
                self.shared.remote.ring_full.inc();
                self.to_global(idx);
            }
            Err(PushError::Closed(idx)) => self.to_global(idx),
        }
    }

    /// Listed first, counted after (see `PoolRemote::push_or_global`).
    fn to_global(&self, idx: u32) {
        self.region.global_put(idx);
        self.shared.owner.release.inc();
    }

    /// The frame came from another pool: it moves to this one.
    #[cold]
    fn adopt(&self, old: u32) {
        self.shared.owner.hold.inc();
        release_on(&self.region, old);
    }

    #[inline(always)]
    fn check_held(&self, f: &Frame) -> Option<State> {
        if self
            .region
            .check_token(f.region(), f.idx(), f.addr())
            .is_err()
        {
            return self.refuse_foreign(f);
        }
        let st = self.state(f.idx());
        if st.gen() != f.gen() || st.loc() != Location::Application {
            return self.refuse_stale(f, st);
        }
        Some(st)
    }

    #[cold]
    #[inline(never)]
    fn refuse_foreign(&self, f: &Frame) -> Option<State> {
        self.shared.owner.foreign_addr.inc();
        tracing::warn!(
            pool = self.shared.id,
            addr = f.addr(),
            "frame from another region returned; dropped"
        );
        None
    }

    #[cold]
    #[inline(never)]
    fn refuse_stale(&self, f: &Frame, st: State) -> Option<State> {
        self.shared.owner.double_release.inc();
        tracing::warn!(pool = self.shared.id, frame = f.idx(), where_ = ?st.loc(), "frame released twice; dropped");
        None
    }

    /// Drop one reference; true when it was the last (count is back to 1).
    #[inline]
    fn unref(&self, idx: u32) -> bool {
        let last = unref_one(&self.meta, idx);
        if !last {
            self.shared.owner.released_refcnt.inc();
        }
        last
    }

    // ---- frags -------------------------------------------------------------------

    /// A piece of `size` bytes (rounded up to `FRAG_ALIGN`). Pieces of more than half
    /// a chunk get a whole, unsplit chunk (count 1); smaller ones are packed, the
    /// chunk's count biased so that handing them out needs no atomic.
    #[inline(always)]
    pub fn alloc_frag(&mut self, size: u32) -> Option<Frag> {
        let chunk = self.chunk;
        if size == 0 || size > chunk {
            return None;
        }
        if size * 2 > chunk {
            let e = self.alloc_entry()?;
            let f = self.hand_out(e, Location::Application);
            return Some(self.frag_token(f.idx(), f.gen(), 0, size));
        }
        self.alloc_frag_packed(size)
    }

    #[inline(never)]
    fn alloc_frag_packed(&mut self, size: u32) -> Option<Frag> {
        let chunk = self.chunk;
        let size = size.div_ceil(FRAG_ALIGN) * FRAG_ALIGN;
        if let Some(c) = &mut self.frag {
            if c.offset + size <= chunk {
                let (idx, gen, offset) = (c.idx, c.gen, c.offset);
                c.offset += size;
                c.users += 1;
                return Some(self.frag_token(idx, gen, offset, size));
            }
            self.frag_drain();
        }
        let e = self.alloc_entry()?;
        let f = self.hand_out(e, Location::Application);
        self.meta[f.idx() as usize]
            .refcount
            .store(FRAG_BIAS, Ordering::Relaxed);
        self.frag = Some(FragCursor {
            idx: f.idx(),
            gen: f.gen(),
            offset: size,
            users: 1,
        });
        Some(self.frag_token(f.idx(), f.gen(), 0, size))
    }

    /// A whole frame the application holds becomes one frag of count 1 covering
    /// `[offset, offset + len)` of its chunk (unified counting: an unsplit frame is
    /// one big frag). `ref_frag` then shares it by reference (mirror, clone) with no
    /// copy; the last release or TX completion recycles the chunk into this pool.
    /// Refused and counted like `recycle`: a foreign or stale token. A range that
    /// is empty or crosses the chunk recycles the frame and returns `OutOfChunk`.
    #[inline]
    pub fn frame_into_frag(&mut self, f: Frame, offset: u32, len: u32) -> Result<Frag, FrameError> {
        // The common case in one compare (this region, this pool, the current
        // token, held by the application) and the range; the rest out of line.
        if self.is_mine_in_app(&f)
            && len != 0
            && offset.checked_add(len).is_some_and(|end| end <= self.chunk)
        {
            // A `Frame` token is only ever given for an unsplit chunk.
            debug_assert!(self.meta[f.idx() as usize].is_last_ref());
            return Ok(Frag::new(f.key, self.frame_tag, offset as u16, len as u16));
        }
        self.frame_into_frag_checked(f, offset, len)
    }

    /// `frame_into_frag` past its one-compare case: every check again, in order.
    #[cold]
    #[inline(never)]
    fn frame_into_frag_checked(
        &mut self,
        f: Frame,
        offset: u32,
        len: u32,
    ) -> Result<Frag, FrameError> {
        match self.check_held(&f) {
            Some(st)
                if st.owner() == self.slot
                    && len != 0
                    && offset.checked_add(len).is_some_and(|end| end <= self.chunk) =>
            {
                // A `Frame` token is only ever given for an unsplit chunk.
                debug_assert!(self.meta[f.idx() as usize].is_last_ref());
                Ok(self.frag_token(f.idx(), f.gen(), offset, len))
            }
            st => self.frame_into_frag_slow(f, st, offset, len),
        }
    }

    /// `frame_into_frag` for a refused token, a frame of another pool (adopted
    /// here) or a range outside the chunk.
    #[cold]
    #[inline(never)]
    fn frame_into_frag_slow(
        &mut self,
        f: Frame,
        st: Option<State>,
        offset: u32,
        len: u32,
    ) -> Result<Frag, FrameError> {
        let Some(st) = st else {
            let addr = f.addr();
            return Err(match self.region.check_token(f.region(), f.idx(), addr) {
                Ok(_) => FrameError::DoubleRelease { addr },
                Err(_) => FrameError::Foreign { addr },
            });
        };
        if st.owner() != self.slot {
            self.adopt(st.owner());
            self.set_state(f.idx(), st.with(self.slot, Location::Application));
        }
        if len == 0 || offset.checked_add(len).is_none_or(|end| end > self.chunk) {
            let addr = f.addr() + offset as u64;
            self.recycle_index(f.idx(), f.gen());
            return Err(FrameError::OutOfChunk { addr, len });
        }
        debug_assert!(self.meta[f.idx() as usize].is_last_ref());
        Ok(self.frag_token(f.idx(), f.gen(), offset, len))
    }

    /// Whole chunk or frag by size, like the kernel's `page_pool_alloc()`.
    pub fn alloc_sized(&mut self, size: u32) -> Option<Buf> {
        let chunk = self.chunk;
        if size == 0 || size > chunk {
            return None;
        }
        if size * 2 > chunk {
            return self.alloc().map(Buf::Whole);
        }
        self.alloc_frag(size).map(Buf::Frag)
    }

    #[inline]
    pub(crate) fn frag_token(&self, idx: u32, gen: u32, offset: u32, len: u32) -> Frag {
        // offset and len are below the chunk size (at most 4096).
        Frag::new(
            ((gen as u64) << 32) | idx as u64,
            self.frame_tag,
            offset as u16,
            len as u16,
        )
    }

    /// Stop packing into the open chunk: remove the unused bias. If every piece was
    /// already released the chunk is recycled here.
    pub fn frag_drain(&mut self) {
        let Some(c) = self.frag.take() else { return };
        let meta = &self.meta[c.idx as usize];
        let unused = FRAG_BIAS - c.users;
        if meta.refcount.fetch_sub(unused, Ordering::AcqRel) == unused {
            meta.refcount.store(1, Ordering::Relaxed);
            self.recycle_index(c.idx, c.gen);
        }
    }

    /// Release one frag reference; the last one recycles the chunk into this pool.
    #[inline(always)]
    pub fn release_frag(&mut self, f: Frag) {
        if f.region() != self.tag || f.idx() as usize >= self.meta.len() {
            return self.foreign_frag(f);
        }
        if self.unref(f.idx()) {
            if self.state(f.idx()) == State::new(f.gen(), self.slot, Location::Application) {
                self.recycle_index(f.idx(), f.gen());
            } else {
                self.recycle_adopted_chunk(f.idx());
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn foreign_frag(&self, f: Frag) {
        self.shared.owner.foreign_addr.inc();
        tracing::warn!(
            pool = self.shared.id,
            addr = f.addr(),
            "frag from another region released; dropped"
        );
    }

    #[cold]
    #[inline(never)]
    fn recycle_adopted_chunk(&mut self, idx: u32) {
        let st = self.state(idx);
        if st.owner() != self.slot {
            self.adopt(st.owner());
        }
        self.recycle_index(idx, st.gen());
    }

    /// Another reference to the same piece (clone, mirror, coalesce). Takes a `Frag`,
    /// so it can only reference memory a pool handed out.
    ///
    /// # Panics
    /// If the frag is from another region (a programming error, counted first).
    pub fn ref_frag(&self, f: &Frag) -> Frag {
        if self
            .region
            .check_token(f.region(), f.idx(), f.addr())
            .is_err()
        {
            self.shared.owner.foreign_addr.inc();
            panic!(
                "ref_frag on a frag of another region (addr {:#x})",
                f.addr()
            );
        }
        self.meta[f.idx() as usize]
            .refcount
            .fetch_add(1, Ordering::Relaxed);
        Frag { ..*f }
    }

    // ---- kernel hand-off -----------------------------------------------------------

    /// Allocate up to `out.len()` frames for the fill ring, mark them FILL and write
    /// their UMEM addresses. Returns how many were written.
    /// Also publishes the hot counters (a worker calls this once per batch).
    pub fn fill_bulk(&mut self, out: &mut [u64]) -> usize {
        let mut n = 0;
        while n < out.len() {
            // Straight from the cache with the count in a register; refill when dry.
            let take = (out.len() - n).min(self.cache_len);
            let top = self.cache_len;
            for (k, slot) in out[n..n + take].iter_mut().enumerate() {
                let e = self.cache[(top - 1 - k) & (CACHE_SIZE - 1)];
                *slot = self.hand_out(e, Location::Fill).addr();
            }
            self.cache_len = top - take;
            self.hot_alloc_fast += take as u64;
            n += take;
            if n == out.len() {
                break;
            }
            let Some(e) = self.alloc_entry_cold() else {
                break;
            };
            out[n] = self.hand_out(e, Location::Fill).addr();
            n += 1;
        }
        self.publish_stats();
        n
    }

    /// An RX descriptor: the frame moves FILL -> application. `addr` may point past
    /// the chunk start (headroom). Rejected (and counted): foreign addresses, lengths
    /// crossing the chunk, frames not in this pool's fill ring.
    pub fn take_rx(&mut self, addr: u64, len: u32) -> Result<Frame, FrameError> {
        let entry = self.rx_entry(addr, len)?;
        Ok(self.hand_out(entry, Location::Application))
    }

    /// The cache-style entry (generation, index) of the frame an RX descriptor names,
    /// after checking it lies in one chunk and is in this pool's fill ring; a refusal
    /// is counted.
    #[inline]
    fn rx_entry(&mut self, addr: u64, len: u32) -> Result<u64, FrameError> {
        let idx = match self.region.check_addr(addr, len) {
            Ok(i) => i,
            Err(e) => {
                self.shared.owner.foreign_addr.inc();
                return Err(e);
            }
        };
        let st = self.state(idx);
        // Location and owner in one compare (the generation aside).
        if st.0 & !GEN_MASK != State::new(0, self.slot, Location::Fill).0 {
            self.shared.owner.not_in_fill.inc();
            return Err(FrameError::NotInFill {
                addr,
                location: st.loc(),
            });
        }
        Ok(((st.gen() as u64) << 32) | idx as u64)
    }

    /// An RX descriptor whose frame the application drops unread: the frame goes
    /// straight back to the fill ring, as the kernel's page_pool recycles an
    /// XDP_DROP page into its cache and the driver refills from there. Validated as
    /// [`take_rx`](Self::take_rx) (same errors, same counters); counted as one
    /// cached recycle and one fast alloc. The frame's state is not written: it was in
    /// this pool's fill ring and goes straight back there, and no token was given for
    /// it in between, so there is no stale token for a new generation to refuse.
    /// Returns the chunk's address for the fill ring: the caller must put it there
    /// (or take it back with `take_rx`).
    #[inline]
    pub fn rx_drop(&mut self, addr: u64, len: u32) -> Result<u64, FrameError> {
        let entry = self.rx_entry(addr, len)?;
        self.hot_recycle_cached += 1;
        self.hot_alloc_fast += 1;
        Ok(self.entry_addr(entry))
    }

    /// The chunk address of a cache-style entry (generation, index).
    #[inline(always)]
    fn entry_addr(&self, entry: u64) -> u64 {
        Frame {
            key: entry,
            tag: self.frame_tag,
        }
        .addr()
    }

    /// Hand a frame to TX; returns the descriptor address (chunk base + `offset`).
    /// A bad `offset` recycles the frame and returns the error.
    #[inline]
    pub fn give_tx(&mut self, f: Frame, offset: u32) -> Result<u64, FrameError> {
        // The common case in one compare, as `recycle`; the rest out of line.
        if self.is_mine_in_app(&f) && offset < self.chunk {
            self.set_state(
                f.idx(),
                State(GEN_MASK & f.key | State::new(0, self.slot, Location::Tx).0),
            );
            return Ok(f.addr() + offset as u64);
        }
        self.give_tx_checked(f, offset)
    }

    /// `give_tx` past its one-compare case: every check again, in order.
    #[cold]
    #[inline(never)]
    fn give_tx_checked(&mut self, f: Frame, offset: u32) -> Result<u64, FrameError> {
        let Some(st) = self.check_held(&f) else {
            return Err(FrameError::DoubleRelease { addr: f.addr() });
        };
        if st.owner() != self.slot {
            self.adopt(st.owner());
        }
        if offset >= self.chunk {
            let addr = f.addr() + offset as u64;
            self.recycle_index(f.idx(), f.gen());
            return Err(FrameError::OutOfChunk { addr, len: 0 });
        }
        self.set_state(f.idx(), st.with(self.slot, Location::Tx));
        Ok(f.addr() + offset as u64)
    }

    /// Hand a frag's reference to TX; returns its address. Several TX descriptors may
    /// share a chunk; each completion drops one reference.
    pub fn give_tx_frag(&mut self, f: Frag) -> Result<u64, FrameError> {
        if self
            .region
            .check_token(f.region(), f.idx(), f.addr())
            .is_err()
        {
            self.shared.owner.foreign_addr.inc();
            return Err(FrameError::Foreign { addr: f.addr() });
        }
        let meta = &self.meta[f.idx() as usize];
        if meta.refcount.load(Ordering::Acquire) == 1 {
            // The only reference: the whole chunk is in TX.
            let st = self.state(f.idx());
            if st.owner() != self.slot {
                self.adopt(st.owner());
            }
            self.set_state(f.idx(), st.with(self.slot, Location::Tx));
        } else {
            *self.tx_frags.entry(f.idx()).or_insert(0) += 1;
        }
        Ok(f.addr())
    }

    /// A TX completion: drop the TX ring's reference (recycle when last). Rejected and
    /// counted: foreign addresses, frames not in TX (double completion included).
    #[inline]
    pub fn take_completion(&mut self, addr: u64) -> Result<(), FrameError> {
        let idx = match self.region.check_addr(addr, 0) {
            Ok(i) => i,
            Err(e) => {
                self.shared.owner.foreign_addr.inc();
                return Err(e);
            }
        };
        let st = self.state(idx);
        // Location and owner in one compare (the generation aside).
        if st.0 & !GEN_MASK == State::new(0, self.slot, Location::Tx).0 {
            self.recycle_index(idx, st.gen());
            return Ok(());
        }
        if let Some(refs) = self.tx_frags.get_mut(&idx) {
            *refs -= 1;
            if *refs == 0 {
                self.tx_frags.remove(&idx);
            }
            if self.unref(idx) {
                let st = self.state(idx);
                if st.owner() != self.slot {
                    self.adopt(st.owner());
                }
                self.recycle_index(idx, st.gen());
            }
            return Ok(());
        }
        if st.loc().is_released() {
            self.shared.owner.double_release.inc();
            return Err(FrameError::DoubleRelease { addr });
        }
        self.shared.owner.not_in_tx.inc();
        Err(FrameError::NotInTx {
            addr,
            location: st.loc(),
        })
    }

    /// The device is gone: every frame this pool had in a fill or TX ring (and every
    /// frag reference it had in TX) goes back to the global lists. Returns how many
    /// descriptors were reclaimed.
    pub fn reclaim_kernel(&mut self) -> u32 {
        let mut n = 0;
        for idx in 0..self.region.frames() {
            let st = self.state(idx);
            if st.owner() != self.slot {
                continue;
            }
            if matches!(st.loc(), Location::Fill | Location::Tx) {
                self.to_global(idx);
                n += 1;
            }
        }
        for (idx, refs) in std::mem::take(&mut self.tx_frags) {
            for _ in 0..refs {
                n += 1;
                if self.unref(idx) {
                    let st = self.state(idx);
                    if st.owner() != self.slot {
                        self.adopt(st.owner());
                    }
                    self.to_global(idx);
                }
            }
        }
        self.publish_stats();
        if n > 0 {
            tracing::info!(
                pool = self.shared.id,
                reclaimed = n,
                "reclaimed frames from the kernel's rings"
            );
        }
        n
    }

    // ---- audit ---------------------------------------------------------------------

    /// Compares what the owner map says this pool holds with second sources: the
    /// cache's real entries, and what the kernel holds according to the socket rings'
    /// own positions (`kernel`, from the xsk rings). Owner thread, between batches; a
    /// frame moving on another thread does not disturb it (only this pool's cache,
    /// fill and TX frames are counted, and only the owner moves those).
    pub fn audit(&self, kernel: KernelHeld) -> PoolAudit {
        let mut a = PoolAudit {
            cache_len: self.cache_len as u64,
            fill_rings: kernel.fill,
            tx_rings: kernel.tx,
            ..PoolAudit::default()
        };
        let frames = self.meta.len();
        for idx in 0..frames as u32 {
            let st = self.state(idx);
            if st.owner() != self.slot {
                continue;
            }
            match st.loc() {
                Location::Cached => a.cached_map += 1,
                Location::Fill => a.fill_map += 1,
                Location::Tx => a.tx_map += 1,
                _ => {}
            }
        }
        // Several TX descriptors may share a split chunk: one reference each.
        a.tx_map += self.tx_frags.values().map(|&n| n as u64).sum::<u64>();
        // Each cache entry must name a distinct frame the map says is cached here,
        // with the generation the entry carries.
        let mut seen = vec![false; frames];
        for &e in &self.cache[..self.cache_len] {
            let idx = e as u32 as usize;
            let ok = idx < frames
                && !std::mem::replace(&mut seen[idx], true)
                && self.state(idx as u32)
                    == State::new((e >> 32) as u32, self.slot, Location::Cached);
            if !ok {
                a.cache_entries_bad += 1;
            }
        }
        a
    }

    // ---- teardown ----------------------------------------------------------------

    /// Release the cache and the return ring to the global lists and close the ring:
    /// later returns from any thread go to the global lists. Frames still out stay
    /// valid; the report says how many and can wait for them (warning while they stay
    /// out). Call `reclaim_kernel` first if the socket is gone.
    pub fn destroy(mut self) -> DestroyReport {
        let (released_cached, released_ring) = self.teardown();
        let inflight = self.shared.stats().inflight;
        let report = DestroyReport {
            pool_id: self.shared.id,
            released_cached,
            released_ring,
            inflight,
            region: self.region.clone(),
            shared: self.shared.clone(),
        };
        if inflight != 0 {
            report.retry();
        }
        report
    }

    fn teardown(&mut self) -> (u32, u32) {
        if self.torn_down {
            return (0, 0);
        }
        self.torn_down = true;
        self.publish_stats();
        self.frag_drain();
        // Refuse new ring entries, so this drain is the last one.
        let region = &self.region;
        let shared = &self.shared;
        let ring = shared.ring.close_and_drain(|idx| {
            region.global_put(idx);
            shared.owner.release.inc();
        }) as u32;
        let cached = self.cache_len as u32;
        while self.cache_len > 0 {
            self.cache_len -= 1;
            self.to_global(self.cache[self.cache_len] as u32);
        }
        self.shared.owner.cache_len.set(0);
        tracing::debug!(pool = self.shared.id, cached, ring, "pool torn down");
        (cached, ring)
    }
}

impl Drop for PoolOwner {
    fn drop(&mut self) {
        self.teardown();
    }
}

impl std::fmt::Debug for PoolOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolOwner")
            .field("id", &self.shared.id)
            .field("cached", &self.cache_len)
            .finish()
    }
}

impl std::fmt::Debug for PoolRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolRemote")
            .field("id", &self.shared.id)
            .finish()
    }
}

/// The pool in `slot` lost a frame to another pool or the global list.
fn release_on(region: &Region, slot: u32) {
    if slot == NO_OWNER {
        return;
    }
    if let Some(p) = region.pool_by_slot(slot) {
        p.remote.release.inc();
    }
}

/// Drop one reference on a chunk. The plain load first: an unsplit chunk (count 1)
/// pays no read-modify-write. True when it was the last reference.
#[inline(always)]
fn unref_one(meta: &[FrameMeta], idx: u32) -> bool {
    let rc = &meta[idx as usize].refcount;
    if rc.load(Ordering::Acquire) == 1 {
        return true;
    }
    unref_shared(rc)
}

/// A split chunk: the read-modify-write only frags pay for.
#[inline(never)]
fn unref_shared(rc: &crate::sync::AtomicU32) -> bool {
    if rc.fetch_sub(1, Ordering::AcqRel) == 1 {
        rc.store(1, Ordering::Relaxed);
        return true;
    }
    false
}

impl PoolRemote {
    /// Return a frame from any thread: into the return ring, or (full ring, destroyed
    /// pool) the global list.
    pub fn recycle(&self, f: Frame) {
        if self
            .region
            .check_token(f.region(), f.idx(), f.addr())
            .is_err()
        {
            return self.foreign_frame(&f);
        }
        let st = self.region.state(f.idx());
        if st.gen() != f.gen() || st.loc() != Location::Application {
            return self.stale_frame(&f);
        }
        self.push_or_global(f.idx(), st);
    }

    #[cold]
    #[inline(never)]
    fn foreign_frame(&self, f: &Frame) {
        self.shared.remote.foreign_addr.inc();
        tracing::warn!(
            pool = self.shared.id,
            addr = f.addr(),
            "frame from another region returned; dropped"
        );
    }

    #[cold]
    #[inline(never)]
    fn stale_frame(&self, f: &Frame) {
        self.shared.remote.double_release.inc();
        tracing::warn!(
            pool = self.shared.id,
            frame = f.idx(),
            "frame released twice; dropped"
        );
    }

    /// Release a frag reference from any thread; the last one returns the chunk.
    pub fn release_frag(&self, f: Frag) {
        if self
            .region
            .check_token(f.region(), f.idx(), f.addr())
            .is_err()
        {
            self.shared.remote.foreign_addr.inc();
            tracing::warn!(
                pool = self.shared.id,
                addr = f.addr(),
                "frag from another region released; dropped"
            );
            return;
        }
        if unref_one(&self.region.meta, f.idx()) {
            let st = self.region.state(f.idx());
            self.push_or_global(f.idx(), st);
        } else {
            self.shared.remote.released_refcnt.inc();
        }
    }

    /// Every `release` here is counted after the frame is listed (in the ring or on
    /// a global list), never before: a `DestroyReport` that reads inflight 0 then
    /// finds every frame of the pool where the owner map says (seed 004's window).
    fn push_or_global(&self, idx: u32, st: State) {
        let slot = self.shared.slot;
        let from = st.owner();
        let adopted = from != slot;
        if adopted {
            self.shared.remote.hold.inc();
        }
        self.region.set_state(idx, st.with(slot, Location::Ring));
        match self.shared.ring.push(idx) {
            Ok(()) => {}
            Err(PushError::Full(idx)) => {
                self.shared.remote.ring_full.inc();
                self.region.global_put(idx);
                self.shared.remote.release.inc();
            }
            Err(PushError::Closed(idx)) => {
                tracing::debug!(
                    pool = self.shared.id,
                    frame = idx,
                    "return after destroy: to the global list"
                );
                self.shared.remote.after_destroy.inc();
                self.region.global_put(idx);
                self.shared.remote.release.inc();
            }
        }
        if adopted {
            release_on(&self.region, from);
        }
    }

    /// Counter snapshot.
    pub fn stats(&self) -> PoolStats {
        self.shared.stats()
    }
    /// Region-wide accounting.
    pub fn accounting(&self) -> Accounting {
        self.region.accounting()
    }
    /// Pool id.
    pub fn id(&self) -> u32 {
        self.shared.id
    }
    /// True once the owner destroyed (or dropped) the pool.
    pub fn is_destroyed(&self) -> bool {
        self.shared.ring.is_closed()
    }
}
