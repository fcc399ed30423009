//! The frame memory (one mmap'd UMEM cut into chunks), its per-frame metadata, the
//! global per-node free lists and NUMA placement. All of the crate's `unsafe` that
//! touches memory is here.

use crate::accounting::Accounting;
use crate::error::{FrameError, PoolError};
use crate::frame::{Frag, Frame, FrameMeta, Location, State, NO_OWNER};
use crate::pool::PoolShared;
use crate::stats::SharedCounter;
use crate::sync::{lock, Mutex};
use crate::topology::Topology;
use crossbeam_utils::CachePadded;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32 as StdAtomicU32, Ordering as StdOrdering};
use std::sync::Arc;

const HUGEPAGE: usize = 2 << 20;
static NEXT_TAG: StdAtomicU32 = StdAtomicU32::new(1);

/// How to build a region.
#[derive(Debug, Clone)]
pub struct RegionConfig {
    /// Number of chunks.
    pub frames: u32,
    /// Chunk size: 2048 or 4096.
    pub chunk_size: u32,
    /// Try 2 MiB hugepages (falls back to normal pages with a warning).
    pub hugepages: bool,
    /// NUMA layout; frames are split into one contiguous range per node.
    pub topology: Topology,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            frames: 4096,
            chunk_size: 2048,
            hugepages: false,
            topology: Topology::single_node(),
        }
    }
}

/// Region-wide misuse counters (validated views asked for bad addresses).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RegionMisuse {
    /// Addresses outside the region or crossing a chunk.
    pub foreign_addr: u64,
    /// Views asked for frames that are released (free, cached, in a return ring).
    pub use_after_release: u64,
}

/// The UMEM: memory, per-frame metadata and global free lists. Shared with `Arc`.
pub struct Region {
    base: NonNull<u8>,
    map_len: usize,
    len: usize,
    chunk_size: u32,
    shift: u8,
    frames: u32,
    tag: u16,
    hugepages: bool,
    topology: Topology,
    node_ranges: Vec<Range<u32>>,
    /// Shared with the pools so their fast paths reach it in one load.
    pub(crate) meta: Arc<[FrameMeta]>,
    global: Box<[CachePadded<Mutex<Vec<u32>>>]>,
    pools: Mutex<Vec<Arc<PoolShared>>>,
    misuse_foreign: SharedCounter,
    misuse_use_after_release: SharedCounter,
}

// SAFETY: the mapping is owned by the Region and only unmapped in Drop; the raw
// pointer is only turned into slices through validated, bounds-checked accessors.
unsafe impl Send for Region {}
// SAFETY: as above; all shared mutable state is behind atomics or mutexes.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("frames", &self.frames)
            .field("chunk_size", &self.chunk_size)
            .field("hugepages", &self.hugepages)
            .field("nodes", &self.topology.nodes())
            .finish()
    }
}

impl Region {
    /// Map the memory (`MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE`, hugepages if asked
    /// and available), place it per node where the machine has several, and put every
    /// frame on its node's global free list.
    pub fn new(cfg: RegionConfig) -> Result<Arc<Region>, PoolError> {
        if cfg.chunk_size != 2048 && cfg.chunk_size != 4096 {
            return Err(PoolError::InvalidConfig(format!(
                "chunk_size {} is not supported; use 2048 or 4096",
                cfg.chunk_size
            )));
        }
        if cfg.frames == 0 || cfg.frames >= NO_OWNER {
            return Err(PoolError::InvalidConfig(format!(
                "frames {} out of range; use 1..{}",
                cfg.frames, NO_OWNER
            )));
        }
        let len = cfg.frames as usize * cfg.chunk_size as usize;
        let binds = cfg.topology.binds_memory();
        let (base, map_len, hugepages) = map(len, cfg.hugepages, !binds)?;
        let region_align = if hugepages { HUGEPAGE } else { page_size() };
        let align_frames = (region_align / cfg.chunk_size as usize).max(1) as u32;
        let node_ranges = cfg.topology.node_ranges(cfg.frames, align_frames);
        // Build the struct now so Drop unmaps on a placement error.
        let mut meta = Vec::with_capacity(cfg.frames as usize);
        for (node, r) in node_ranges.iter().enumerate() {
            for _ in r.clone() {
                meta.push(FrameMeta::new(node as u32));
            }
        }
        let global = node_ranges
            .iter()
            .map(|r| CachePadded::new(Mutex::new(r.clone().rev().collect::<Vec<u32>>())))
            .collect();
        let region = Region {
            base,
            map_len,
            len,
            chunk_size: cfg.chunk_size,
            shift: cfg.chunk_size.trailing_zeros() as u8,
            frames: cfg.frames,
            tag: (NEXT_TAG.fetch_add(1, StdOrdering::Relaxed) & 0xFFFF) as u16,
            hugepages,
            topology: cfg.topology,
            node_ranges,
            meta: Arc::from(meta),
            global,
            pools: Mutex::new(Vec::new()),
            misuse_foreign: SharedCounter::default(),
            misuse_use_after_release: SharedCounter::default(),
        };
        if binds {
            region.place_nodes()?;
        }
        tracing::debug!(
            frames = region.frames,
            chunk = region.chunk_size,
            hugepages,
            "UMEM region mapped"
        );
        Ok(Arc::new(region))
    }

    fn place_nodes(&self) -> Result<(), PoolError> {
        for (node, r) in self.node_ranges.iter().enumerate() {
            if r.is_empty() {
                continue;
            }
            let node = node as u32;
            let off = (r.start as usize) << self.shift;
            let bytes = ((r.end - r.start) as usize) << self.shift;
            let err = |reason: String| PoolError::NumaPlacement {
                node,
                first: r.start,
                end: r.end,
                reason,
            };
            // SAFETY: off..off+bytes lies inside the mapping (ranges cover 0..frames).
            let ptr = unsafe { self.base.as_ptr().add(off) };
            bind_to_node(ptr, bytes, node).map_err(|e| err(format!("mbind: {e}")))?;
            populate(ptr, bytes);
            let got = node_of_addr(ptr).map_err(|e| err(format!("get_mempolicy: {e}")))?;
            if got != node {
                return Err(err(format!("memory landed on node {got}")));
            }
            tracing::info!(node, first = r.start, end = r.end, "UMEM frames {}..{} bound to NUMA node {node} (mbind MPOL_BIND, checked with get_mempolicy)", r.start, r.end);
        }
        Ok(())
    }

    /// Start of the memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }
    /// Bytes of frame memory (`frames * chunk_size`).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never true: a region has at least one frame.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Chunk size in bytes.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }
    /// Number of frames.
    pub fn frames(&self) -> u32 {
        self.frames
    }
    /// Whether the memory is hugepage-backed.
    pub fn hugepages(&self) -> bool {
        self.hugepages
    }
    /// The topology the region was built for.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }
    /// NUMA node of a frame.
    pub fn node_of(&self, index: u32) -> Option<u32> {
        self.meta.get(index as usize).map(|m| m.node)
    }
    /// Where a frame is now (owner map).
    pub fn location(&self, index: u32) -> Option<Location> {
        self.meta
            .get(index as usize)
            .map(|_| self.state(index).loc())
    }
    /// Misuse seen through the validated views.
    pub fn misuse(&self) -> RegionMisuse {
        RegionMisuse {
            foreign_addr: self.misuse_foreign.get(),
            use_after_release: self.misuse_use_after_release.get(),
        }
    }

    /// Count every frame by where the owner map says it is, and read the second
    /// sources `Accounting::check` compares it with: the global lists (lengths and
    /// contents), the return rings' lengths, the owner caches' published lengths.
    pub fn accounting(&self) -> Accounting {
        let mut a = Accounting {
            total: self.frames as u64,
            ..Default::default()
        };
        for i in 0..self.frames {
            match self.state(i).loc() {
                Location::Free => a.free += 1,
                Location::Cached => a.cached += 1,
                Location::Ring => a.ring += 1,
                Location::Fill => a.fill += 1,
                Location::Tx => a.tx += 1,
                Location::Application => a.application += 1,
            }
        }
        // The free lists' contents, not only their lengths: an entry twice, or an
        // entry whose frame the map says is elsewhere, is a frame lost or doubled
        // even where the lengths happen to agree.
        let mut seen = vec![false; self.frames as usize];
        for g in self.global.iter() {
            let list = lock(g);
            a.free_listed += list.len() as u64;
            for &idx in list.iter() {
                let ok = idx < self.frames
                    && !std::mem::replace(&mut seen[idx as usize], true)
                    && self.state(idx).loc() == Location::Free;
                if !ok {
                    a.free_list_bad += 1;
                }
            }
        }
        let pools = lock(&self.pools);
        a.ring_listed = pools.iter().map(|p| p.ring.len() as u64).sum();
        a.cached_listed = pools.iter().map(|p| p.owner.cache_len.get()).sum();
        a
    }

    /// Frames on each node's global free list.
    pub fn free_per_node(&self) -> Vec<u64> {
        self.global.iter().map(|g| lock(g).len() as u64).collect()
    }

    /// Asks the CPU to start loading the cache line at UMEM address `addr` (a
    /// received frame the caller is about to read), so that the misses of a batch
    /// overlap instead of stalling one after another. Reads nothing; an address
    /// outside the region is ignored.
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        if addr >= self.len as u64 {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: addr < len, so the pointer is inside the mapping; a prefetch is a
        // hint that neither faults nor makes any byte visible to the program.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.base.as_ptr().add(addr as usize) as *const i8);
        }
    }

    /// A view of `len` bytes at `offset` in the chunk of `frame`. The view borrows the
    /// token, so it lasts only while the frame is held, and `write_frame` (which takes
    /// `&mut Frame`) cannot run while it lives. `None`, counted, for a token that is
    /// foreign or no longer current (released, or handed out again since), for a
    /// frame not held by the application, or for a range that leaves the chunk.
    ///
    /// ```
    /// # use pool::*;
    /// let r = Region::new(RegionConfig::default()).unwrap();
    /// let mut p = PoolOwner::new(&r, PoolConfig::default());
    /// let mut f = p.alloc().unwrap();
    /// r.write_frame(&mut f, 0, &[7; 4]).unwrap();
    /// assert_eq!(r.frame_bytes(&f, 0, 4), Some(&[7u8; 4][..]));
    /// p.recycle(f);
    /// ```
    /// The view cannot outlive the token:
    /// ```compile_fail,E0505
    /// # use pool::*;
    /// let r = Region::new(RegionConfig::default()).unwrap();
    /// let mut p = PoolOwner::new(&r, PoolConfig::default());
    /// let f = p.alloc().unwrap();
    /// let view = r.frame_bytes(&f, 0, 4).unwrap();
    /// p.recycle(f);
    /// assert_eq!(view.len(), 4);
    /// ```
    /// nor overlap a write:
    /// ```compile_fail,E0502
    /// # use pool::*;
    /// let r = Region::new(RegionConfig::default()).unwrap();
    /// let mut p = PoolOwner::new(&r, PoolConfig::default());
    /// let mut f = p.alloc().unwrap();
    /// let view = r.frame_bytes(&f, 0, 4).unwrap();
    /// r.write_frame(&mut f, 0, &[7; 4]).unwrap();
    /// assert_eq!(view.len(), 4);
    /// p.recycle(f);
    /// ```
    #[inline]
    pub fn frame_bytes<'a>(&'a self, frame: &'a Frame, offset: u32, len: u32) -> Option<&'a [u8]> {
        let idx = frame.idx();
        if frame.region() != self.tag
            || idx >= self.frames
            || offset as u64 + len as u64 > self.chunk_size as u64
        {
            self.misuse_foreign.inc();
            return None;
        }
        let st = self.state(idx);
        if st.gen() != frame.gen() || st.loc() != Location::Application {
            self.refuse_view(st);
            return None;
        }
        // The region's own shift: a token's tag can collide with another region's.
        let addr = ((idx as u64) << self.shift) + offset as u64;
        // SAFETY: idx < frames and offset + len <= chunk_size, so addr..addr+len is
        // inside one chunk of the mapping, which lives as long as &self. The token is
        // current and the frame is held by the application (not in a kernel ring);
        // only the token's holder may write it, through `write_frame(&mut Frame)`,
        // which cannot run while this borrow of the token lives.
        Some(unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(addr as usize), len as usize)
        })
    }

    /// The whole chunk of `frame`, writable. The slice borrows the token mutably, so
    /// while it lives no other view of the chunk ([`frame_bytes`](Self::frame_bytes),
    /// [`write_frame`](Self::write_frame)) can exist, and the token cannot be returned.
    /// `None`, counted, for a foreign or stale token or a frame not held by the
    /// application.
    ///
    /// ```
    /// # use pool::*;
    /// let r = Region::new(RegionConfig::default()).unwrap();
    /// let mut p = PoolOwner::new(&r, PoolConfig::default());
    /// let mut f = p.alloc().unwrap();
    /// r.chunk_mut(&mut f).unwrap()[..2].copy_from_slice(&[1, 2]);
    /// assert_eq!(r.frame_bytes(&f, 0, 2), Some(&[1u8, 2][..]));
    /// p.recycle(f);
    /// ```
    /// The slice cannot outlive the token:
    /// ```compile_fail,E0505
    /// # use pool::*;
    /// let r = Region::new(RegionConfig::default()).unwrap();
    /// let mut p = PoolOwner::new(&r, PoolConfig::default());
    /// let mut f = p.alloc().unwrap();
    /// let chunk = r.chunk_mut(&mut f).unwrap();
    /// p.recycle(f);
    /// chunk[0] = 1;
    /// ```
    #[inline]
    pub fn chunk_mut<'a>(&'a self, frame: &'a mut Frame) -> Option<&'a mut [u8]> {
        let idx = frame.idx();
        if frame.region() != self.tag || idx >= self.frames {
            self.misuse_foreign.inc();
            return None;
        }
        let st = self.state(idx);
        if st.gen() != frame.gen() || st.loc() != Location::Application {
            self.refuse_view(st);
            return None;
        }
        let addr = (idx as u64) << self.shift;
        // SAFETY: idx < frames, so addr..addr+chunk_size is one chunk inside the
        // mapping, which lives as long as &self. The token is current and the frame
        // is held by the application (no kernel ring has it). A chunk has exactly one
        // `Frame` token (not Clone) and every view or write of it borrows that token,
        // so the `&mut` borrow of the token makes this slice the only access.
        Some(unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(addr as usize),
                self.chunk_size as usize,
            )
        })
    }

    /// Counts a view refused for the frame's state.
    #[cold]
    #[inline(never)]
    fn refuse_view(&self, st: State) {
        if st.loc() == Location::Application || st.loc().is_released() {
            // Stale token: released (and perhaps handed out again) since it was made.
            self.misuse_use_after_release.inc();
        } else {
            // In a fill or TX ring: the kernel may be writing or reading it.
            self.misuse_foreign.inc();
        }
    }

    /// Copy `data` into the chunk of `frame` at `offset`. Takes the token mutably so
    /// that no view from `frame_bytes` is alive while the bytes change.
    pub fn write_frame(
        &self,
        frame: &mut Frame,
        offset: u32,
        data: &[u8],
    ) -> Result<(), FrameError> {
        self.check_token(frame.region(), frame.idx(), frame.addr())?;
        let st = self.state(frame.idx());
        if st.gen() != frame.gen() || st.loc() != Location::Application {
            return Err(FrameError::DoubleRelease { addr: frame.addr() });
        }
        self.copy_in(frame.addr() + offset as u64, data)
    }

    /// Copy `data` into a frag (at most its length).
    pub fn write_frag(&self, frag: &Frag, data: &[u8]) -> Result<(), FrameError> {
        self.check_token(frag.region(), frag.idx(), frag.addr())?;
        if data.len() > frag.len() as usize {
            return Err(FrameError::OutOfChunk {
                addr: frag.addr(),
                len: data.len() as u32,
            });
        }
        self.copy_in(frag.addr(), data)
    }

    fn copy_in(&self, addr: u64, data: &[u8]) -> Result<(), FrameError> {
        let len = u32::try_from(data.len()).map_err(|_| FrameError::OutOfChunk {
            addr,
            len: u32::MAX,
        })?;
        self.check_addr(addr, len)?;
        // SAFETY: destination validated inside one chunk of the mapping; source is a
        // distinct Rust slice, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.base.as_ptr().add(addr as usize),
                data.len(),
            )
        };
        Ok(())
    }

    /// Index of the chunk holding `addr..addr+len`, or why not.
    pub(crate) fn check_addr(&self, addr: u64, len: u32) -> Result<u32, FrameError> {
        if addr >= self.len as u64 {
            return Err(FrameError::Foreign { addr });
        }
        let in_chunk = addr & (self.chunk_size as u64 - 1);
        if in_chunk + len as u64 > self.chunk_size as u64 {
            return Err(FrameError::OutOfChunk { addr, len });
        }
        Ok((addr >> self.shift) as u32)
    }

    #[inline]
    pub(crate) fn check_token(&self, tag: u16, idx: u32, addr: u64) -> Result<(), FrameError> {
        if tag != self.tag || idx >= self.frames {
            return Err(FrameError::Foreign { addr });
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn state(&self, idx: u32) -> State {
        State(
            self.meta[idx as usize]
                .state
                .load(crate::sync::Ordering::Relaxed),
        )
    }
    #[inline]
    pub(crate) fn set_state(&self, idx: u32, s: State) {
        self.meta[idx as usize]
            .state
            .store(s.0, crate::sync::Ordering::Relaxed)
    }
    pub(crate) fn tag(&self) -> u16 {
        self.tag
    }
    pub(crate) fn shift(&self) -> u8 {
        self.shift
    }
    pub(crate) fn nodes(&self) -> u32 {
        self.global.len() as u32
    }

    /// Take up to `out.len()` frames from `node`'s global list; their state is the
    /// caller's to set.
    pub(crate) fn global_take(&self, node: u32, out: &mut [u32]) -> usize {
        let mut list = lock(&self.global[node as usize]);
        let n = out.len().min(list.len());
        let start = list.len() - n;
        out[..n].copy_from_slice(&list[start..]);
        list.truncate(start);
        n
    }

    /// Put a frame on its node's global list. The caller holds the frame.
    pub(crate) fn global_put(&self, idx: u32) {
        let m = &self.meta[idx as usize];
        self.set_state(idx, self.state(idx).with(NO_OWNER, Location::Free));
        lock(&self.global[m.node as usize]).push(idx);
    }

    pub(crate) fn register_pool(
        &self,
        make: impl FnOnce(u32) -> Arc<PoolShared>,
    ) -> Arc<PoolShared> {
        let mut pools = lock(&self.pools);
        // Reuse the slot of a destroyed pool nobody can reach any more (no handle,
        // no frame attributed to it), so re-attach cycles do not grow the registry.
        if let Some(slot) = pools.iter().position(|p| p.is_retired()) {
            let shared = make(slot as u32);
            pools[slot] = shared.clone();
            return shared;
        }
        let slot = pools.len() as u32;
        assert!(slot < NO_OWNER, "more than {NO_OWNER} pools on one region");
        let shared = make(slot);
        pools.push(shared.clone());
        shared
    }

    /// Pool slots in the registry (live pools plus destroyed ones still referenced).
    pub fn pools_registered(&self) -> usize {
        lock(&self.pools).len()
    }

    pub(crate) fn pool_by_slot(&self, slot: u32) -> Option<Arc<PoolShared>> {
        lock(&self.pools).get(slot as usize).cloned()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/map_len are exactly what mmap returned; nothing borrows the
        // memory once the last Arc is gone (views borrow &self).
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.map_len) };
        if rc != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "munmap of the UMEM failed");
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

fn map(
    len: usize,
    hugepages: bool,
    populate: bool,
) -> Result<(NonNull<u8>, usize, bool), PoolError> {
    let base_flags =
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | if populate { libc::MAP_POPULATE } else { 0 };
    if hugepages {
        let map_len = len.div_ceil(HUGEPAGE) * HUGEPAGE;
        match mmap(map_len, base_flags | libc::MAP_HUGETLB) {
            Ok(p) => return Ok((p, map_len, true)),
            Err(e) => tracing::warn!(
                error = %e,
                "hugepage UMEM not available, using normal pages (reserve some in /proc/sys/vm/nr_hugepages)"
            ),
        }
    }
    let map_len = len.div_ceil(page_size()) * page_size();
    let p = mmap(map_len, base_flags).map_err(|source| PoolError::Mmap {
        len: map_len,
        source,
    })?;
    Ok((p, map_len, false))
}

fn mmap(len: usize, flags: i32) -> std::io::Result<NonNull<u8>> {
    // SAFETY: anonymous mapping at a kernel-chosen address; no existing memory is
    // affected. The result is checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    NonNull::new(p.cast()).ok_or_else(|| std::io::Error::other("mmap returned null"))
}

const MPOL_MF_STRICT: libc::c_ulong = 1;
const MPOL_MF_MOVE: libc::c_ulong = 2;
const MPOL_F_NODE: libc::c_ulong = 1;
const MPOL_F_ADDR: libc::c_ulong = 2;

/// Bind `len` bytes at `ptr` (page aligned) to `node` with MPOL_BIND, moving pages
/// already there.
pub(crate) fn bind_to_node(ptr: *mut u8, len: usize, node: u32) -> std::io::Result<()> {
    if node >= 64 {
        return Err(std::io::Error::other("nodes above 63 are not supported"));
    }
    let mask: u64 = 1 << node;
    // SAFETY: mbind only changes the policy of our own mapping; the mask pointer is
    // valid for one u64 and maxnode (65) covers exactly its bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr,
            len,
            libc::MPOL_BIND,
            &mask as *const u64,
            65 as libc::c_ulong,
            MPOL_MF_MOVE | MPOL_MF_STRICT,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Node the page at `ptr` lives on (faulting it in if needed).
pub(crate) fn node_of_addr(ptr: *mut u8) -> std::io::Result<u32> {
    let mut node: libc::c_int = -1;
    // SAFETY: get_mempolicy writes one int to `node`; with MPOL_F_ADDR it only reads
    // the policy of the page at ptr, inside our mapping. No nodemask is passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut libc::c_int,
            std::ptr::null_mut::<u64>(),
            0 as libc::c_ulong,
            ptr,
            MPOL_F_NODE | MPOL_F_ADDR,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    u32::try_from(node).map_err(|_| std::io::Error::other("negative node"))
}

fn populate(ptr: *mut u8, len: usize) {
    let step = page_size();
    let mut off = 0;
    while off < len {
        // SAFETY: ptr..ptr+len is inside our writable mapping; writing one byte per
        // page faults it in under the bound policy before any frame is handed out.
        unsafe { ptr.add(off).write_volatile(0) };
        off += step;
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn region(frames: u32, chunk: u32, nodes: u32) -> Arc<Region> {
        Region::new(RegionConfig {
            frames,
            chunk_size: chunk,
            hugepages: false,
            topology: Topology::fake(nodes),
        })
        .unwrap()
    }

    #[test]
    fn rejects_bad_config_with_advice() {
        let e = Region::new(RegionConfig {
            chunk_size: 1000,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("use 2048 or 4096"), "{e}");
        let e = Region::new(RegionConfig {
            frames: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(e, PoolError::InvalidConfig(_)));
    }

    #[test]
    fn fresh_region_is_all_free_and_split_per_node() {
        let r = region(100, 4096, 2);
        assert_eq!(r.len(), 100 * 4096);
        assert_eq!(r.frames(), 100);
        let a = r.accounting();
        assert_eq!((a.free, a.free_listed, a.total), (100, 100, 100));
        a.check().unwrap();
        assert_eq!(r.free_per_node(), vec![50, 50]);
        assert_eq!(r.node_of(0), Some(0));
        assert_eq!(r.node_of(99), Some(1));
        assert_eq!(r.node_of(100), None);
    }

    #[test]
    fn check_addr_validates_range_and_chunk() {
        let r = region(4, 2048, 1);
        assert_eq!(r.check_addr(2048 + 100, 1948), Ok(1));
        assert_eq!(
            r.check_addr(2048 + 100, 1949),
            Err(FrameError::OutOfChunk {
                addr: 2148,
                len: 1949
            })
        );
        assert_eq!(
            r.check_addr(4 * 2048, 1),
            Err(FrameError::Foreign { addr: 8192 })
        );
    }

    /// A copy of a token's words: what a stale token looks like (safe code cannot
    /// make one; a bug in the pool could).
    fn forged(f: &Frame) -> Frame {
        Frame {
            key: f.key,
            tag: f.tag,
        }
    }

    #[test]
    fn frame_bytes_needs_the_current_token() {
        use crate::pool::{PoolConfig, PoolOwner};
        let r = region(4, 2048, 1);
        let mut p = PoolOwner::new(&r, PoolConfig::default());
        let mut f = p.alloc().unwrap();
        r.write_frame(&mut f, 100, &[0x5A; 8]).unwrap();
        assert_eq!(r.frame_bytes(&f, 100, 8), Some(&[0x5A; 8][..]));
        assert_eq!(r.frame_bytes(&f, 0, 2048).map(|b| b.len()), Some(2048));
        assert_eq!(r.frame_bytes(&f, 2048, 0).map(|b| b.len()), Some(0));
        assert_eq!(r.misuse(), RegionMisuse::default());

        // Out of the chunk: offset, length, or both (no overflow at u32::MAX).
        assert!(r.frame_bytes(&f, 2000, 49).is_none());
        assert!(r.frame_bytes(&f, 2049, 0).is_none());
        assert!(r.frame_bytes(&f, u32::MAX, u32::MAX).is_none());
        assert_eq!(r.misuse().foreign_addr, 3);

        // Released: the old token is refused, before and after the chunk is handed
        // out again (with the next generation).
        let stale = forged(&f);
        let idx = f.index();
        p.recycle(f);
        assert!(r.frame_bytes(&stale, 0, 64).is_none(), "released");
        let again = p.alloc().unwrap();
        assert_eq!(again.index(), idx, "the cache hands the same chunk back");
        assert_ne!(again.gen(), stale.gen());
        assert!(r.frame_bytes(&stale, 0, 64).is_none(), "generation changed");
        assert!(r.frame_bytes(&again, 0, 64).is_some());
        assert_eq!(
            r.misuse(),
            RegionMisuse {
                foreign_addr: 3,
                use_after_release: 2
            }
        );

        // A token of another region.
        let other = region(4, 2048, 1);
        assert!(other.frame_bytes(&again, 0, 64).is_none());
        assert_eq!(other.misuse().foreign_addr, 1);
        p.recycle(again);
    }

    // ---- the accounting can fail: lose or double a frame in each place ----------

    use crate::accounting::KernelHeld;
    use crate::pool::{PoolConfig, PoolOwner};

    fn err_of(a: Accounting) -> String {
        a.check().expect_err("the check must notice")
    }

    #[test]
    fn a_frame_lost_or_doubled_on_a_global_list_fails_the_check() {
        let r = region(8, 2048, 1);
        r.accounting().check().unwrap();
        // Lost: an entry gone, its frame still Free in the map.
        let gone = lock(&r.global[0]).pop().unwrap();
        assert!(err_of(r.accounting()).contains("global lists"));
        // Doubled: the entry back, and another twice.
        lock(&r.global[0]).push(gone);
        r.accounting().check().unwrap();
        lock(&r.global[0]).push(gone);
        assert!(err_of(r.accounting()).contains("global lists"));
        // Both at once, so the lengths agree: only the contents tell.
        let other = lock(&r.global[0]).remove(0);
        assert_ne!(other, gone);
        let a = r.accounting();
        assert_eq!(a.free, a.free_listed);
        assert!(err_of(a).contains("duplicates"));
    }

    #[test]
    fn a_frame_lost_or_doubled_in_an_owner_cache_fails_both_checks() {
        let r = region(8, 2048, 1);
        let mut p = PoolOwner::new(&r, PoolConfig::default());
        let f = p.alloc().unwrap();
        p.recycle(f);
        assert!(p.cache_len > 1);
        p.accounting().check().unwrap();
        p.audit(KernelHeld::default()).check().unwrap();
        // Lost: the cache forgets its top entry; the map still says Cached.
        p.cache_len -= 1;
        assert!(err_of(p.accounting()).contains("owner caches"));
        assert!(p
            .audit(KernelHeld::default())
            .check()
            .unwrap_err()
            .contains("owner cache"));
        p.cache_len += 1;
        p.accounting().check().unwrap();
        // Doubled: the top entry twice.
        p.cache[p.cache_len] = p.cache[p.cache_len - 1];
        p.cache_len += 1;
        let audit = p.audit(KernelHeld::default());
        assert_eq!(audit.cache_entries_bad, 1, "{audit:?}");
        assert!(audit.check().is_err());
        assert!(err_of(p.accounting()).contains("owner caches"));
        p.cache_len -= 1;
    }

    #[test]
    fn a_frame_lost_or_doubled_in_a_return_ring_fails_the_check() {
        let r = region(8, 2048, 1);
        let p = PoolOwner::new(&r, PoolConfig::default());
        let remote = p.remote();
        let mut q = PoolOwner::new(
            &r,
            PoolConfig {
                id: 2,
                ..Default::default()
            },
        );
        let f = q.alloc().unwrap();
        let idx = f.index();
        remote.recycle(f);
        q.publish_stats();
        let ring = |r: &Region| lock(&r.pools)[0].clone();
        r.accounting().check().unwrap_or_else(|e| panic!("{e}"));
        // Doubled: the index pushed again behind the pool's back.
        ring(&r).ring.push(idx).unwrap();
        assert!(err_of(r.accounting()).contains("return rings"));
        // Lost: both entries popped; the map still says Ring.
        assert_eq!(ring(&r).ring.pop(), Some(idx));
        assert_eq!(ring(&r).ring.pop(), Some(idx));
        assert!(err_of(r.accounting()).contains("return rings"));
        drop(q);
    }

    #[test]
    fn a_frame_lost_or_doubled_in_a_fill_or_tx_ring_fails_the_audit() {
        let r = region(16, 2048, 1);
        let mut p = PoolOwner::new(&r, PoolConfig::default());
        let mut addrs = [0u64; 4];
        assert_eq!(p.fill_bulk(&mut addrs), 4);
        let f = p.alloc().unwrap();
        let tx = p.give_tx(f, 0).unwrap();
        let held = KernelHeld { fill: 4, tx: 1 };
        p.audit(held).check().unwrap();
        // The rings say one fill entry fewer (lost on the way) or more (doubled).
        for fill in [3, 5] {
            let e = p.audit(KernelHeld { fill, ..held }).check().unwrap_err();
            assert!(e.contains("fill rings"), "{e}");
        }
        for tx in [0, 2] {
            let e = p.audit(KernelHeld { tx, ..held }).check().unwrap_err();
            assert!(e.contains("TX descriptors"), "{e}");
        }
        // The map loses one instead: an RX descriptor the rings never saw.
        let lost = p.take_rx(addrs[0], 0).unwrap();
        assert!(p.audit(held).check().unwrap_err().contains("fill rings"));
        p.recycle(lost);
        p.take_completion(tx).unwrap();
        let e = p.audit(KernelHeld { fill: 3, tx: 1 }).check().unwrap_err();
        assert!(e.contains("TX descriptors"), "{e}");
        p.audit(KernelHeld { fill: 3, tx: 0 }).check().unwrap();
    }

    #[test]
    fn hugepage_request_falls_back_or_works() {
        let r = Region::new(RegionConfig {
            frames: 16,
            chunk_size: 4096,
            hugepages: true,
            topology: Topology::single_node(),
        })
        .unwrap();
        assert_eq!(r.len(), 16 * 4096);
        r.accounting().check().unwrap();
    }

    #[test]
    fn mbind_to_node0_and_verify_placement() {
        // Exercises the multi-node placement syscalls on this machine's node 0.
        let (p, len, _) = map(4 * page_size(), false, false).unwrap();
        bind_to_node(p.as_ptr(), len, 0).unwrap();
        populate(p.as_ptr(), len);
        assert_eq!(node_of_addr(p.as_ptr()).unwrap(), 0);
        assert!(bind_to_node(p.as_ptr(), len, 64).is_err());
        // SAFETY: p/len came from map() above and nothing references them.
        unsafe { libc::munmap(p.as_ptr().cast(), len) };
    }
}
