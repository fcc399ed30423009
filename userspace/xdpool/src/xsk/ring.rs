//! The four AF_XDP rings, each a typed wrapper over one raw single-producer,
//! single-consumer ring core.
//!
//! Memory ordering follows the kernel's `xsk_queue.h`: the side that reads entries
//! does one acquire load of the other side's index per batch, and publishes its own
//! index with one release store per batch. Indices the kernel publishes are checked
//! by [`check_producer_advance`] / [`check_consumer_advance`] before any slot is read,
//! and the pair found when a ring is mapped by `start_pair_is_valid`.
//!
//! Context rule: a ring has one owner (the worker of its queue); it is `Send`, not
//! `Sync`, and every operation takes `&mut self`.

#[cfg(any(test, fuzzing, feature = "testing"))]
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
#[cfg(any(test, fuzzing, feature = "testing"))]
use std::sync::Arc;

use slot::{AtomicU32, Slot};

/// The ring's atomics and entry slots: std (and plain memory) normally; loom's under
/// the `loom` feature, so `loom_models` checks this protocol code as it ships. Under
/// loom only heap rings are built (a loom atomic is not a kernel word).
#[cfg(not(feature = "loom"))]
mod slot {
    pub(super) use std::sync::atomic::AtomicU32;
    /// An entry in ring memory.
    pub(super) type Slot<T> = T;
    /// # Safety
    /// `p` points to a valid entry the caller's side owns under the SPSC protocol.
    #[inline(always)]
    pub(super) unsafe fn read<T: Copy>(p: *const Slot<T>) -> T {
        // SAFETY: caller contract.
        unsafe { p.read() }
    }
    /// # Safety
    /// As for `read`.
    #[inline(always)]
    pub(super) unsafe fn write<T: Copy>(p: *mut Slot<T>, v: T) {
        // SAFETY: caller contract.
        unsafe { p.write(v) }
    }
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) type HeapSlot<T> = std::cell::UnsafeCell<T>;
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) fn heap_slot<T>(v: T) -> HeapSlot<T> {
        std::cell::UnsafeCell::new(v)
    }
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) fn heap_ptr<T>(s: &HeapSlot<T>) -> *mut Slot<T> {
        s.get()
    }
    /// The first entry, with provenance over the whole slice.
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) fn heap_base<T>(s: &[HeapSlot<T>]) -> *mut Slot<T> {
        std::cell::UnsafeCell::raw_get(s.as_ptr())
    }
}

#[cfg(feature = "loom")]
mod slot {
    pub(super) use loom::sync::atomic::AtomicU32;
    /// An entry, tracked by loom: a read not ordered after its write fails the model.
    pub(super) type Slot<T> = loom::cell::UnsafeCell<T>;
    /// # Safety
    /// `p` points to a valid entry the caller's side owns under the SPSC protocol.
    pub(super) unsafe fn read<T: Copy>(p: *const Slot<T>) -> T {
        // SAFETY: caller contract.
        unsafe { (*p).with(|v| v.read()) }
    }
    /// # Safety
    /// As for `read`.
    pub(super) unsafe fn write<T: Copy>(p: *mut Slot<T>, v: T) {
        // SAFETY: caller contract.
        unsafe { (*p).with_mut(|q| q.write(v)) }
    }
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) type HeapSlot<T> = Slot<T>;
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) fn heap_slot<T>(v: T) -> HeapSlot<T> {
        loom::cell::UnsafeCell::new(v)
    }
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) fn heap_ptr<T>(s: &HeapSlot<T>) -> *mut Slot<T> {
        s as *const Slot<T> as *mut Slot<T>
    }
    #[cfg(any(test, fuzzing, feature = "testing"))]
    pub(super) fn heap_base<T>(s: &[HeapSlot<T>]) -> *mut Slot<T> {
        s.as_ptr() as *mut Slot<T>
    }
}

use super::desc::{
    check_consumer_advance, check_producer_advance, RingErrors, UmemLayout, XdpDesc,
};
use super::sys::MmapRegion;

/// `XDP_RING_NEED_WAKEUP` in the ring's flags word.
const NEED_WAKEUP: u32 = libc::XDP_RING_NEED_WAKEUP;

/// What keeps a ring's memory alive.
enum Backing {
    /// The kernel's ring, mmap'd from the socket; unmapped on drop.
    Mmap(#[allow(dead_code)] MmapRegion),
    /// Heap memory shared with a [`HeapRingPeer`] (tests, simulations).
    #[cfg(any(test, fuzzing, feature = "testing"))]
    Heap(#[allow(dead_code)] Arc<dyn Any + Send + Sync>),
}

/// Raw ring core: pointers to the shared producer, consumer and flags words and to
/// the entry array, plus this side's cached copies of both indices.
struct RawRing<T: Copy> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<Slot<T>>,
    size: u32,
    mask: u32,
    /// Producer rings: our producer. Consumer rings: last valid producer seen.
    cached_prod: u32,
    /// Consumer rings: our consumer. Producer rings: last valid consumer seen.
    cached_cons: u32,
    /// Our own index when we took the ring over (after any restart): entries we
    /// produced or consumed since are `ours - start`, wrapping.
    start: u32,
    _backing: Backing,
}

// SAFETY: the ring's memory is owned by `_backing` (an mmap or an Arc'd heap block),
// not tied to a thread; the kernel (or peer) side only touches it through atomics and
// slots it owns under the SPSC protocol. `RawRing` is not `Sync`: one owner at a time.
unsafe impl<T: Copy + Send> Send for RawRing<T> {}

/// Which side of a ring this process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// We write entries (fill, TX); the kernel owns the consumer index.
    Producer,
    /// We read entries (RX, completion); the kernel owns the producer index.
    Consumer,
}

impl<T: Copy> RawRing<T> {
    /// Takes over a ring whose indices may already have moved, and returns it with the
    /// ring's first error counts. A starting pair with more than `size` entries
    /// between them is counted in `ring_index_jump` and replaced by an empty ring at
    /// the kernel's index (`restart_empty`).
    ///
    /// # Safety
    /// `producer`, `consumer`, `flags` must point to aligned u32 words and `entries`
    /// to `size` entries of `T`, all valid for as long as `backing` lives, and the
    /// other side must follow the SPSC ring protocol. `size` must be a power of two.
    unsafe fn new(
        producer: NonNull<AtomicU32>,
        consumer: NonNull<AtomicU32>,
        flags: NonNull<AtomicU32>,
        entries: NonNull<Slot<T>>,
        size: u32,
        side: Side,
        backing: Backing,
    ) -> (Self, RingErrors) {
        debug_assert!(size.is_power_of_two());
        // SAFETY: the caller guarantees the words are valid.
        let (prod, cons) = unsafe {
            (
                producer.as_ref().load(Ordering::Acquire),
                consumer.as_ref().load(Ordering::Acquire),
            )
        };
        let ring = Self {
            producer,
            consumer,
            flags,
            entries,
            size,
            mask: size - 1,
            cached_prod: prod,
            cached_cons: cons,
            start: 0,
            _backing: backing,
        };
        let mut errors = RingErrors::default();
        let mut ring = if start_pair_is_valid(prod, cons, size) {
            ring
        } else {
            ring.restart_empty(side, &mut errors)
        };
        ring.start = ring.ours(side);
        (ring, errors)
    }

    /// The starting pair was impossible, so neither index says which slots are live.
    /// Count it and start empty at the index the kernel owns, publishing ours equal
    /// to it: nothing of ours is on a ring that was just mapped, so skipping the
    /// window loses no frame, and the kernel sees the same empty ring we do. Keeping
    /// our own index instead would leave the pair impossible for the kernel too, and
    /// every later reading would count as a jump.
    #[cold]
    #[inline(never)]
    fn restart_empty(mut self, side: Side, errors: &mut RingErrors) -> Self {
        errors.ring_index_jump += 1;
        tracing::warn!(
            producer = self.cached_prod,
            consumer = self.cached_cons,
            size = self.size,
            ?side,
            "AF_XDP ring mapped with more entries than slots; starting it empty at the kernel's index"
        );
        match side {
            Side::Consumer => {
                self.cached_cons = self.cached_prod;
                self.consumer().store(self.cached_cons, Ordering::Release);
            }
            Side::Producer => {
                self.cached_prod = self.cached_cons;
                self.producer().store(self.cached_prod, Ordering::Release);
            }
        }
        self
    }

    /// The index this side owns.
    fn ours(&self, side: Side) -> u32 {
        match side {
            Side::Producer => self.cached_prod,
            Side::Consumer => self.cached_cons,
        }
    }

    /// Entries this side produced (or consumed) since it took the ring over, modulo
    /// 2^32: differences of two such counts are exact while fewer than 2^32 entries
    /// are outstanding.
    fn moved(&self, side: Side) -> u32 {
        self.ours(side).wrapping_sub(self.start)
    }

    #[inline]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid while `_backing` lives (constructor contract).
        unsafe { self.producer.as_ref() }
    }

    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: valid while `_backing` lives (constructor contract).
        unsafe { self.consumer.as_ref() }
    }

    #[inline]
    fn needs_wakeup(&self) -> bool {
        // SAFETY: valid while `_backing` lives (constructor contract).
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & NEED_WAKEUP != 0
    }

    /// Consumer side: how many entries (at most `want`) may be read now. Loads the
    /// producer (acquire) only when the cached view has too few.
    #[inline]
    fn readable(&mut self, want: u32, errors: &mut RingErrors) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < want {
            let new_prod = self.producer().load(Ordering::Acquire);
            match check_producer_advance(self.cached_prod, self.cached_cons, new_prod, self.size) {
                Some(n) => {
                    self.cached_prod = new_prod;
                    avail = n;
                }
                None => index_jump(errors),
            }
        }
        avail.min(want)
    }

    /// Reads entry `i` of the readable window.
    #[inline]
    fn read(&self, i: u32) -> T {
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size; the entry was published by the producer's release store,
        // which our acquire load of the producer in `readable` synchronised with.
        unsafe { slot::read(self.entries.as_ptr().add(slot)) }
    }

    /// Consumer side: hands `n` read entries back to the producer (release).
    #[inline]
    fn release(&mut self, n: u32) {
        if n > 0 {
            self.cached_cons = self.cached_cons.wrapping_add(n);
            self.consumer().store(self.cached_cons, Ordering::Release);
        }
    }

    /// Producer side: how many slots (at most `want`) may be written now. Loads the
    /// consumer (acquire) only when the cached view has too few.
    #[inline]
    fn writable(&mut self, want: u32, errors: &mut RingErrors) -> u32 {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < want {
            let new_cons = self.consumer().load(Ordering::Acquire);
            match check_consumer_advance(self.cached_prod, self.cached_cons, new_cons, self.size) {
                Some(n) => {
                    self.cached_cons = new_cons;
                    free = n;
                }
                None => index_jump(errors),
            }
        }
        free.min(want)
    }

    /// Writes entry `i` of the writable window.
    #[inline]
    fn write(&mut self, i: u32, value: T) {
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size and the slot is free: the consumer index we loaded with
        // acquire says the other side finished reading it.
        unsafe { slot::write(self.entries.as_ptr().add(slot), value) }
    }

    /// Writes as many of `items` as fit after the producer, in order, publishes them
    /// with one release store and returns how many (the fill and TX rings).
    #[inline]
    fn produce(&mut self, items: &[T], errors: &mut RingErrors) -> usize {
        let n = self.writable(clamp_len(items.len()), errors);
        for (i, &v) in items[..n as usize].iter().enumerate() {
            self.write(i as u32, v);
        }
        self.submit(n);
        n as usize
    }

    /// Producer side: publishes `n` written entries (release).
    #[inline]
    fn submit(&mut self, n: u32) {
        if n > 0 {
            self.cached_prod = self.cached_prod.wrapping_add(n);
            self.producer().store(self.cached_prod, Ordering::Release);
        }
    }
}

/// Whether the index pair found when a ring is mapped is possible: at most `size`
/// entries between them (`prod - cons`, wrapping). A fresh kernel ring starts at
/// 0/0, but any pair that passes is a valid start.
#[inline]
fn start_pair_is_valid(prod: u32, cons: u32, size: u32) -> bool {
    prod.wrapping_sub(cons) <= size
}

#[cold]
#[inline(never)]
fn index_jump(errors: &mut RingErrors) {
    errors.ring_index_jump += 1;
    tracing::debug!("AF_XDP ring index jumped; reading ignored");
}

#[cold]
#[inline(never)]
fn bad_rx_desc(errors: &mut RingErrors, desc: &XdpDesc, why: super::desc::BadDesc) {
    errors.rx_bad_desc += 1;
    tracing::debug!(
        addr = desc.addr,
        len = desc.len,
        ?why,
        "dropped bad RX descriptor"
    );
}

#[cold]
#[inline(never)]
fn bad_comp_addr(errors: &mut RingErrors, addr: u64) {
    errors.comp_bad_addr += 1;
    tracing::debug!(addr, "dropped completion address outside the UMEM");
}

fn clamp_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The fill ring: we hand empty UMEM chunks to the kernel for RX.
pub struct FillRing {
    raw: RawRing<u64>,
    errors: RingErrors,
}

impl FillRing {
    /// Puts as many of `addrs` as fit on the ring, in order, and returns how many.
    /// Addresses are not checked here; the kernel checks them (the pool owns them).
    #[inline]
    pub fn produce(&mut self, addrs: &[u64]) -> usize {
        self.raw.produce(addrs, &mut self.errors)
    }

    /// Whether the kernel asks for a wake-up (`XskSocket::wakeup_rx`) to pick up
    /// fill entries. Meaningful only when bound with `need_wakeup`.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.raw.needs_wakeup()
    }

    /// Ring size in entries.
    pub fn size(&self) -> u32 {
        self.raw.size
    }

    /// Validation counters of this ring.
    pub fn errors(&self) -> RingErrors {
        self.errors
    }

    /// Entries put on the ring since it was mapped (mod 2^32), from our own index.
    pub fn submitted(&self) -> u32 {
        self.raw.moved(Side::Producer)
    }

    /// Entries on the ring the kernel has not taken yet (reads the kernel's consumer
    /// index; an impossible one is counted in `ring_index_jump` and the cached view
    /// kept).
    #[inline]
    pub fn level(&mut self) -> u32 {
        let size = self.raw.size;
        size - self.raw.writable(size, &mut self.errors)
    }
}

/// The completion ring: the kernel returns UMEM addresses of sent TX frames.
pub struct CompletionRing {
    raw: RawRing<u64>,
    layout: UmemLayout,
    errors: RingErrors,
}

impl CompletionRing {
    /// Takes up to `out.len()` completed addresses. Addresses outside the UMEM are
    /// counted in `comp_bad_addr` and dropped, so the count returned may be less
    /// than the number taken off the ring.
    #[inline]
    pub fn consume(&mut self, out: &mut [u64]) -> usize {
        let n = self.raw.readable(clamp_len(out.len()), &mut self.errors);
        let mut kept = 0;
        for i in 0..n {
            let addr = self.raw.read(i);
            if self.layout.check_comp(addr) {
                out[kept] = addr;
                kept += 1;
            } else {
                bad_comp_addr(&mut self.errors, addr);
            }
        }
        self.raw.release(n);
        kept
    }

    /// Completions taken off the ring since it was mapped (mod 2^32), dropped ones
    /// included.
    pub fn taken(&self) -> u32 {
        self.raw.moved(Side::Consumer)
    }

    /// Ring size in entries.
    pub fn size(&self) -> u32 {
        self.raw.size
    }

    /// Validation counters of this ring.
    pub fn errors(&self) -> RingErrors {
        self.errors
    }
}

/// What one [`RxRing::consume_counted`] took off the RX ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxConsumed {
    /// Descriptors taken off the ring, dropped ones included. Each used one fill-ring
    /// entry, so this is what leaves the fill count.
    pub taken: usize,
    /// Validated descriptors, written to the front of `out`.
    pub kept: usize,
}

/// The RX ring: the kernel hands us received frames.
pub struct RxRing {
    raw: RawRing<XdpDesc>,
    layout: UmemLayout,
    errors: RingErrors,
}

impl RxRing {
    /// Takes up to `out.len()` received descriptors and returns how many were kept
    /// (in `out[..kept]`). Only validated descriptors are kept; bad ones are counted
    /// in `rx_bad_desc` and dropped (their memory is never touched). Code that counts
    /// fill-ring entries needs [`RxRing::consume_counted`]: a dropped descriptor used
    /// one too.
    #[inline]
    pub fn consume(&mut self, out: &mut [XdpDesc]) -> usize {
        self.consume_counted(out).kept
    }

    /// As [`RxRing::consume`], and also says how many descriptors were taken off the
    /// ring, dropped ones included.
    #[inline]
    pub fn consume_counted(&mut self, out: &mut [XdpDesc]) -> RxConsumed {
        let n = self.raw.readable(clamp_len(out.len()), &mut self.errors);
        // The mode tested once for the batch, not per descriptor.
        let kept = if self.layout.unaligned() {
            self.read_checked::<true>(n, out)
        } else {
            self.read_checked::<false>(n, out)
        };
        self.raw.release(n);
        RxConsumed {
            taken: n as usize,
            kept,
        }
    }

    /// Copies the `n` readable descriptors that pass [`UmemLayout::check_rx_in`] to
    /// `out`, counting the others; returns how many it copied.
    #[inline(always)]
    fn read_checked<const UNALIGNED: bool>(&mut self, n: u32, out: &mut [XdpDesc]) -> usize {
        let mut kept = 0;
        for i in 0..n {
            let desc = self.raw.read(i);
            match self.layout.check_rx_in::<UNALIGNED>(&desc) {
                Ok(()) => {
                    out[kept] = desc;
                    kept += 1;
                }
                Err(why) => bad_rx_desc(&mut self.errors, &desc, why),
            }
        }
        kept
    }

    /// Descriptors taken off the ring since it was mapped (mod 2^32), rejected ones
    /// included: each used one fill entry.
    pub fn taken(&self) -> u32 {
        self.raw.moved(Side::Consumer)
    }

    /// Ring size in entries.
    pub fn size(&self) -> u32 {
        self.raw.size
    }

    /// Validation counters of this ring.
    pub fn errors(&self) -> RingErrors {
        self.errors
    }
}

/// The TX ring: we hand frames to the kernel for sending. A socket bound without one
/// (`tx_size` 0: no rule transmits) has an absent ring that takes nothing; poll() on
/// such a socket then skips the kernel's copy-mode TX path.
pub struct TxRing {
    raw: Option<RawRing<XdpDesc>>,
    errors: RingErrors,
}

impl TxRing {
    /// The ring of a socket bound without a TX ring.
    pub(crate) fn absent() -> TxRing {
        TxRing {
            raw: None,
            errors: RingErrors::default(),
        }
    }

    /// Puts as many of `descs` as fit on the ring, in order, and returns how many.
    /// In copy mode, or when `needs_wakeup()`, follow with `XskSocket::wakeup_tx`.
    #[inline]
    pub fn produce(&mut self, descs: &[XdpDesc]) -> usize {
        match &mut self.raw {
            Some(raw) => raw.produce(descs, &mut self.errors),
            None => 0,
        }
    }

    /// As [`TxRing::produce`], but never splits a multi-buffer frame: the prefix put
    /// on the ring ends with a descriptor without `XDP_PKT_CONTD`. (A frame cut in two
    /// would make the kernel glue the next frame onto its first half.) Returns how
    /// many were put; the rest did not fit.
    #[inline]
    pub fn produce_whole_frames(&mut self, descs: &[XdpDesc]) -> usize {
        let Some(raw) = &mut self.raw else { return 0 };
        let room = raw.writable(clamp_len(descs.len()), &mut self.errors) as usize;
        let mut n = room;
        // Back off to the end of the last whole frame within `room`.
        while n > 0 && descs[n - 1].options & super::desc::XDP_PKT_CONTD != 0 {
            n -= 1;
        }
        raw.produce(&descs[..n], &mut self.errors)
    }

    /// Whether the kernel asks for a `sendto` to process the TX ring.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.raw.as_ref().is_some_and(RawRing::needs_wakeup)
    }

    /// How many descriptors, up to `want`, a `produce` now would take (0 for an
    /// absent ring). Reads the kernel's consumer index only when the cached view
    /// shows too little room.
    #[inline]
    pub fn writable(&mut self, want: u32) -> u32 {
        match &mut self.raw {
            Some(raw) => raw.writable(clamp_len(want as usize), &mut self.errors),
            None => 0,
        }
    }

    /// Descriptors put on the ring since it was mapped (mod 2^32; 0 when absent).
    pub fn submitted(&self) -> u32 {
        self.raw.as_ref().map_or(0, |r| r.moved(Side::Producer))
    }

    /// Ring size in entries (0: bound without a TX ring).
    pub fn size(&self) -> u32 {
        self.raw.as_ref().map_or(0, |r| r.size)
    }

    /// Validation counters of this ring.
    pub fn errors(&self) -> RingErrors {
        self.errors
    }
}

/// What one socket's rings say the kernel holds, from our own ring positions alone
/// (not the pool's owner map), for `PoolOwner::audit`: fill entries submitted minus
/// RX descriptors taken, TX descriptors submitted minus completions taken. Sum it
/// over the sockets of one pool. Exact at any time on the ring owner's thread.
pub fn kernel_held(
    fill: &FillRing,
    rx: &RxRing,
    tx: &TxRing,
    comp: &CompletionRing,
) -> pool::KernelHeld {
    pool::KernelHeld {
        fill: u64::from(fill.submitted().wrapping_sub(rx.taken())),
        tx: u64::from(tx.submitted().wrapping_sub(comp.taken())),
    }
}

/// The kernel's half of a mmap'd ring: where its words and entries lie.
pub(crate) struct MappedRing {
    pub region: MmapRegion,
    pub producer: usize,
    pub consumer: usize,
    pub flags: usize,
    pub desc: usize,
    pub size: u32,
}

impl MappedRing {
    /// # Safety
    /// The offsets and size must come from `XDP_MMAP_OFFSETS` and the ring size set
    /// on the socket that `region` maps, and the entry type must match the ring.
    unsafe fn into_raw<T: Copy>(self, side: Side) -> (RawRing<T>, RingErrors) {
        let base = self.region.as_ptr();
        // The kernel's offsets, checked in every build: a ring whose words or entries
        // would fall outside the mapping is a kernel we do not understand.
        let len = self.region.len();
        let entries_end = (self.size as usize)
            .checked_mul(core::mem::size_of::<T>())
            .and_then(|n| n.checked_add(self.desc));
        assert!(
            entries_end.is_some_and(|end| end <= len) && [self.producer, self.consumer, self.flags].iter().all(|&o| o.checked_add(4).is_some_and(|e| e <= len)),
            "XDP_MMAP_OFFSETS outside the {len}-byte ring mapping (producer {}, consumer {}, flags {}, desc {}, size {}): unsupported kernel",
            self.producer,
            self.consumer,
            self.flags,
            self.desc,
            self.size
        );
        // SAFETY: the offsets lie inside the mapping (caller contract, checked above);
        // the kernel aligns the words to 4 and the entries to their size.
        unsafe {
            let word = |off: usize| NonNull::new_unchecked(base.add(off).cast::<AtomicU32>());
            RawRing::new(
                word(self.producer),
                word(self.consumer),
                word(self.flags),
                NonNull::new_unchecked(base.add(self.desc).cast::<Slot<T>>()),
                self.size,
                side,
                Backing::Mmap(self.region),
            )
        }
    }

    /// # Safety
    /// As for `into_raw`: a fill ring mapping.
    pub(crate) unsafe fn into_fill(self) -> FillRing {
        // SAFETY: forwarded caller contract.
        let (raw, errors) = unsafe { self.into_raw(Side::Producer) };
        FillRing { raw, errors }
    }

    /// # Safety
    /// As for `into_raw`: a completion ring mapping.
    pub(crate) unsafe fn into_completion(self, layout: UmemLayout) -> CompletionRing {
        // SAFETY: forwarded caller contract.
        let (raw, errors) = unsafe { self.into_raw(Side::Consumer) };
        CompletionRing {
            raw,
            layout,
            errors,
        }
    }

    /// # Safety
    /// As for `into_raw`: an RX ring mapping.
    pub(crate) unsafe fn into_rx(self, layout: UmemLayout) -> RxRing {
        // SAFETY: forwarded caller contract.
        let (raw, errors) = unsafe { self.into_raw(Side::Consumer) };
        RxRing {
            raw,
            layout,
            errors,
        }
    }

    /// # Safety
    /// As for `into_raw`: a TX ring mapping.
    pub(crate) unsafe fn into_tx(self) -> TxRing {
        // SAFETY: forwarded caller contract.
        let (raw, errors) = unsafe { self.into_raw(Side::Producer) };
        TxRing {
            raw: Some(raw),
            errors,
        }
    }
}

/// Ring memory on the heap, laid out like the kernel's: three words and the entries.
#[cfg(any(test, fuzzing, feature = "testing"))]
struct HeapRingMem<T> {
    producer: AtomicU32,
    consumer: AtomicU32,
    flags: AtomicU32,
    entries: Box<[slot::HeapSlot<T>]>,
}

// SAFETY: entries are accessed under the SPSC protocol (each slot owned by one side at
// a time, handed over with release/acquire on the index words).
#[cfg(any(test, fuzzing, feature = "testing"))]
unsafe impl<T: Send> Sync for HeapRingMem<T> {}

/// The other side of a ring built on heap memory: it plays the kernel in tests and
/// simulations. It may also break the protocol on purpose (publish bad indices or
/// descriptors) to exercise validation; it never causes an out-of-bounds access.
#[cfg(any(test, fuzzing, feature = "testing"))]
pub struct HeapRingPeer<T: Copy> {
    mem: Arc<HeapRingMem<T>>,
}

#[cfg(any(test, fuzzing, feature = "testing"))]
impl<T: Copy + Default + Send + 'static> HeapRingPeer<T> {
    /// A ring (with its first error counts) and its peer, starting at producer
    /// `prod` and consumer `cons`; an impossible pair is handled as for a mapped ring.
    fn new_pair(size: u32, prod: u32, cons: u32, side: Side) -> (RawRing<T>, RingErrors, Self) {
        assert!(size.is_power_of_two(), "ring size must be a power of two");
        let mem = Arc::new(HeapRingMem {
            producer: AtomicU32::new(prod),
            consumer: AtomicU32::new(cons),
            flags: AtomicU32::new(0),
            entries: (0..size).map(|_| slot::heap_slot(T::default())).collect(),
        });
        let (raw, errors) = {
            let m: &HeapRingMem<T> = &mem;
            // SAFETY: all pointers point into `mem`, kept alive by the backing Arc;
            // `UnsafeCell<T>` has the layout of `T`.
            unsafe {
                RawRing::new(
                    NonNull::from(&m.producer),
                    NonNull::from(&m.consumer),
                    NonNull::from(&m.flags),
                    NonNull::new_unchecked(slot::heap_base(&m.entries)),
                    size,
                    side,
                    Backing::Heap(mem.clone() as Arc<dyn Any + Send + Sync>),
                )
            }
        };
        (raw, errors, Self { mem })
    }

    /// The producer word.
    pub fn producer(&self) -> u32 {
        self.mem.producer.load(Ordering::Acquire)
    }

    /// The consumer word.
    pub fn consumer(&self) -> u32 {
        self.mem.consumer.load(Ordering::Acquire)
    }

    /// Publishes a producer index (release), valid or not.
    pub fn set_producer(&self, v: u32) {
        self.mem.producer.store(v, Ordering::Release);
    }

    /// Publishes a consumer index (release), valid or not.
    pub fn set_consumer(&self, v: u32) {
        self.mem.consumer.store(v, Ordering::Release);
    }

    /// Sets or clears `XDP_RING_NEED_WAKEUP`.
    pub fn set_need_wakeup(&self, on: bool) {
        let v = if on { NEED_WAKEUP } else { 0 };
        self.mem.flags.store(v, Ordering::Relaxed);
    }

    /// Writes the entry at ring index `idx` (masked). Call only for slots the
    /// peer owns (between the consumer and producer from the peer's point of view).
    pub fn write(&self, idx: u32, value: T) {
        let slot = (idx as usize) & (self.mem.entries.len() - 1);
        // SAFETY: slot is in bounds; under the SPSC protocol the ring owner does not
        // access a slot the peer owns. A test that breaks this races only on plain
        // `Copy` data in a slot, never out of bounds.
        unsafe { slot::write(slot::heap_ptr(&self.mem.entries[slot]), value) }
    }

    /// Reads the entry at ring index `idx` (masked).
    pub fn read(&self, idx: u32) -> T {
        let slot = (idx as usize) & (self.mem.entries.len() - 1);
        // SAFETY: as for `write`.
        unsafe { slot::read(slot::heap_ptr(&self.mem.entries[slot])) }
    }

    /// Kernel-style produce: writes `values` after the current producer and
    /// publishes them. Returns how many fit.
    pub fn produce(&self, values: &[T]) -> usize {
        let prod = self.producer();
        let free = self.mem.entries.len() as u32 - prod.wrapping_sub(self.consumer());
        let n = (values.len() as u32).min(free);
        for (i, v) in values[..n as usize].iter().enumerate() {
            self.write(prod.wrapping_add(i as u32), *v);
        }
        self.set_producer(prod.wrapping_add(n));
        n as usize
    }

    /// Kernel-style consume: reads up to `out.len()` published entries and releases them.
    pub fn consume(&self, out: &mut [T]) -> usize {
        let cons = self.consumer();
        let n = (out.len() as u32).min(self.producer().wrapping_sub(cons));
        for (i, o) in out[..n as usize].iter_mut().enumerate() {
            *o = self.read(cons.wrapping_add(i as u32));
        }
        self.set_consumer(cons.wrapping_add(n));
        n as usize
    }
}

#[cfg(any(test, fuzzing, feature = "testing"))]
impl FillRing {
    /// A fill ring on heap memory, with the peer that plays the kernel.
    pub fn new_heap(size: u32) -> (Self, HeapRingPeer<u64>) {
        Self::new_heap_at(size, 0, 0)
    }

    /// As `new_heap`, with the ring's words starting at `prod` / `cons`.
    pub fn new_heap_at(size: u32, prod: u32, cons: u32) -> (Self, HeapRingPeer<u64>) {
        let (raw, errors, peer) = HeapRingPeer::new_pair(size, prod, cons, Side::Producer);
        (Self { raw, errors }, peer)
    }
}

#[cfg(any(test, fuzzing, feature = "testing"))]
impl CompletionRing {
    /// A completion ring on heap memory, with the peer that plays the kernel.
    pub fn new_heap(size: u32, layout: UmemLayout) -> (Self, HeapRingPeer<u64>) {
        Self::new_heap_at(size, layout, 0, 0)
    }

    /// As `new_heap`, with the ring's words starting at `prod` / `cons`.
    pub fn new_heap_at(
        size: u32,
        layout: UmemLayout,
        prod: u32,
        cons: u32,
    ) -> (Self, HeapRingPeer<u64>) {
        let (raw, errors, peer) = HeapRingPeer::new_pair(size, prod, cons, Side::Consumer);
        (
            Self {
                raw,
                layout,
                errors,
            },
            peer,
        )
    }
}

#[cfg(any(test, fuzzing, feature = "testing"))]
impl RxRing {
    /// An RX ring on heap memory, with the peer that plays the kernel.
    pub fn new_heap(size: u32, layout: UmemLayout) -> (Self, HeapRingPeer<XdpDesc>) {
        Self::new_heap_at(size, layout, 0, 0)
    }

    /// As `new_heap`, with the ring's words starting at `prod` / `cons`.
    pub fn new_heap_at(
        size: u32,
        layout: UmemLayout,
        prod: u32,
        cons: u32,
    ) -> (Self, HeapRingPeer<XdpDesc>) {
        let (raw, errors, peer) = HeapRingPeer::new_pair(size, prod, cons, Side::Consumer);
        (
            Self {
                raw,
                layout,
                errors,
            },
            peer,
        )
    }
}

#[cfg(any(test, fuzzing, feature = "testing"))]
impl TxRing {
    /// A TX ring on heap memory, with the peer that plays the kernel.
    pub fn new_heap(size: u32) -> (Self, HeapRingPeer<XdpDesc>) {
        Self::new_heap_at(size, 0, 0)
    }

    /// As `new_heap`, with the ring's words starting at `prod` / `cons`.
    pub fn new_heap_at(size: u32, prod: u32, cons: u32) -> (Self, HeapRingPeer<XdpDesc>) {
        let (raw, errors, peer) = HeapRingPeer::new_pair(size, prod, cons, Side::Producer);
        (
            Self {
                raw: Some(raw),
                errors,
            },
            peer,
        )
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn layout() -> UmemLayout {
        UmemLayout::new(64 * 2048, 2048, 0, false)
    }

    fn desc(addr: u64, len: u32) -> XdpDesc {
        XdpDesc {
            addr,
            len,
            options: 0,
        }
    }

    fn rx_at(size: u32, start: u32) -> (RxRing, HeapRingPeer<XdpDesc>) {
        RxRing::new_heap_at(size, layout(), start, start)
    }

    fn fill_at(size: u32, start: u32) -> (FillRing, HeapRingPeer<u64>) {
        FillRing::new_heap_at(size, start, start)
    }

    #[test]
    fn fill_ring_wraps_around_u32_and_keeps_order() {
        let (mut fill, peer) = fill_at(8, u32::MAX - 5);
        let mut next = 0u64;
        let mut expect = 0u64;
        let mut got = [0u64; 8];
        for round in 0..20 {
            let batch: Vec<u64> = (next..next + 5).map(|i| i * 2048).collect();
            let n = fill.produce(&batch);
            assert_eq!(n, 5, "round {round}: ring drained each round, 5 must fit");
            next += n as u64;
            let m = peer.consume(&mut got[..]);
            assert_eq!(m, 5);
            for a in &got[..m] {
                assert_eq!(*a, expect * 2048);
                expect += 1;
            }
        }
        assert_eq!(peer.producer(), (u32::MAX - 5).wrapping_add(100));
        assert_eq!(fill.errors(), RingErrors::default());
    }

    #[test]
    fn producer_batches_are_limited_by_free_slots() {
        let (mut fill, peer) = fill_at(8, 0);
        let addrs: Vec<u64> = (0..20).map(|i| i * 2048).collect();
        assert_eq!(fill.produce(&addrs[..3]), 3);
        assert_eq!(fill.produce(&addrs[3..]), 5, "only 5 slots left");
        assert_eq!(fill.produce(&addrs[8..]), 0, "full");
        let mut out = [0u64; 2];
        assert_eq!(peer.consume(&mut out), 2);
        assert_eq!(out, [0, 2048]);
        assert_eq!(fill.produce(&addrs[8..]), 2, "two slots freed");
        assert_eq!(peer.producer(), 10);
    }

    #[test]
    fn rx_consume_in_small_batches_across_wrap() {
        let (mut rx, peer) = rx_at(16, u32::MAX - 3);
        let descs: Vec<XdpDesc> = (0..12)
            .map(|i| desc(i * 2048 + 256, 60 + i as u32))
            .collect();
        assert_eq!(peer.produce(&descs), 12);
        let mut out = [XdpDesc::default(); 5];
        let mut seen = Vec::new();
        loop {
            let n = rx.consume(&mut out);
            if n == 0 {
                break;
            }
            assert!(n <= 5);
            seen.extend_from_slice(&out[..n]);
        }
        assert_eq!(seen, descs);
        assert_eq!(peer.consumer(), (u32::MAX - 3).wrapping_add(12));
        assert_eq!(rx.errors(), RingErrors::default());
    }

    #[test]
    fn rx_producer_jump_is_counted_and_nothing_is_read() {
        let (mut rx, peer) = rx_at(8, 100);
        assert_eq!(peer.produce(&[desc(256, 64), desc(2048 + 256, 64)]), 2);
        let mut out = [XdpDesc::default(); 1];
        assert_eq!(rx.consume(&mut out), 1);
        // Producer leaps more than a ring ahead of our consumer (101).
        peer.set_producer(101 + 9);
        let mut out = [XdpDesc::default(); 8];
        let n = rx.consume(&mut out);
        assert_eq!(n, 1, "only the entry published before the jump is read");
        assert_eq!(out[0], desc(2048 + 256, 64));
        assert_eq!(rx.errors().ring_index_jump, 1);
        assert_eq!(
            peer.consumer(),
            102,
            "consumer never moves past the last valid producer"
        );
        // Producer moves backwards.
        peer.set_producer(90);
        assert_eq!(rx.consume(&mut out), 0);
        assert_eq!(rx.errors().ring_index_jump, 2);
        // A valid producer again: reading resumes.
        peer.write(102, desc(4 * 2048, 100));
        peer.set_producer(103);
        assert_eq!(rx.consume(&mut out), 1);
        assert_eq!(out[0], desc(4 * 2048, 100));
        assert_eq!(rx.errors().ring_index_jump, 2);
    }

    #[test]
    fn fill_consumer_jump_is_counted() {
        let (mut fill, peer) = fill_at(8, 0);
        assert_eq!(
            fill.produce(&[0, 2048, 4096, 6144, 8192, 10240, 12288, 14336]),
            8
        );
        // Kernel claims to have consumed more than we produced.
        peer.set_consumer(9);
        assert_eq!(fill.produce(&[0]), 0, "no slot is trusted free");
        assert_eq!(fill.errors().ring_index_jump, 1);
        peer.set_consumer(3);
        assert_eq!(fill.produce(&[0, 2048, 4096, 6144]), 3);
        // Backwards from 3 to 2.
        peer.set_consumer(2);
        assert_eq!(fill.produce(&[0]), 0);
        assert_eq!(fill.errors().ring_index_jump, 2);
    }

    #[test]
    fn ring_mapped_at_a_valid_pair_starts_there_even_across_the_wrap() {
        // Three entries published before we took the ring over; indices wrap past u32::MAX.
        let (mut rx, peer) = RxRing::new_heap_at(8, layout(), 1, u32::MAX - 1);
        let descs = [
            desc(256, 64),
            desc(2048 + 256, 65),
            desc(2 * 2048 + 256, 66),
        ];
        for (i, d) in descs.iter().enumerate() {
            peer.write((u32::MAX - 1).wrapping_add(i as u32), *d);
        }
        let mut out = [XdpDesc::default(); 8];
        assert_eq!(rx.consume(&mut out), 3);
        assert_eq!(&out[..3], &descs);
        assert_eq!(peer.consumer(), 1);
        assert_eq!(rx.errors(), RingErrors::default());
        // prod - cons == size is a full ring, not an error.
        let (mut fill, peer) = FillRing::new_heap_at(8, 3, u32::MAX - 4);
        assert_eq!(fill.errors(), RingErrors::default());
        assert_eq!(fill.produce(&[0]), 0, "full: the kernel holds all 8 slots");
        peer.set_consumer(u32::MAX - 2);
        assert_eq!(fill.produce(&[0, 2048, 4096, 6144]), 2);
        assert_eq!(peer.producer(), 5);
        assert_eq!(fill.errors(), RingErrors::default());
    }

    #[test]
    fn rx_ring_mapped_with_an_impossible_pair_starts_empty_at_the_kernels_producer() {
        // (producer, consumer): more than a ring apart, consumer past producer, and
        // one slot too many across the wrap.
        for (prod, cons) in [(9, 0), (0, 1), (100, 7), (4, u32::MAX - 4)] {
            let (mut rx, peer) = RxRing::new_heap_at(8, layout(), prod, cons);
            assert_eq!(rx.errors().ring_index_jump, 1, "({prod}, {cons})");
            assert_eq!(
                peer.consumer(),
                prod,
                "({prod}, {cons}): our consumer is published at the kernel's producer"
            );
            let mut out = [XdpDesc::default(); 8];
            assert_eq!(
                rx.consume(&mut out),
                0,
                "({prod}, {cons}): nothing in the impossible window is read"
            );
            // The kernel goes on from its producer and sees all 8 slots free.
            let descs: Vec<XdpDesc> = (0..8)
                .map(|i| desc(i * 2048 + 256, 60 + i as u32))
                .collect();
            assert_eq!(peer.produce(&descs), 8, "({prod}, {cons})");
            assert_eq!(rx.consume(&mut out), 8, "({prod}, {cons})");
            assert_eq!(&out[..], &descs[..]);
            assert_eq!(peer.consumer(), prod.wrapping_add(8));
            assert_eq!(
                rx.errors().ring_index_jump,
                1,
                "({prod}, {cons}): no later reading is a jump"
            );
        }
    }

    #[test]
    fn fill_ring_mapped_with_an_impossible_pair_starts_empty_at_the_kernels_consumer() {
        for (prod, cons) in [(9, 0), (0, 1), (100, 7), (4, u32::MAX - 4)] {
            let (mut fill, peer) = FillRing::new_heap_at(8, prod, cons);
            assert_eq!(fill.errors().ring_index_jump, 1, "({prod}, {cons})");
            assert_eq!(
                peer.producer(),
                cons,
                "({prod}, {cons}): our producer is published at the kernel's consumer"
            );
            let mut back = [0u64; 8];
            assert_eq!(
                peer.consume(&mut back),
                0,
                "({prod}, {cons}): the kernel sees an empty ring"
            );
            let addrs: Vec<u64> = (0..10).map(|i| i * 2048).collect();
            assert_eq!(
                fill.produce(&addrs),
                8,
                "({prod}, {cons}): all 8 slots are free"
            );
            assert_eq!(peer.consume(&mut back), 8);
            assert_eq!(
                &back[..],
                &addrs[..8],
                "the kernel reads exactly what we wrote, in order"
            );
            assert_eq!(fill.produce(&addrs[8..]), 2);
            assert_eq!(
                fill.errors().ring_index_jump,
                1,
                "({prod}, {cons}): no later reading is a jump"
            );
        }
    }

    #[test]
    fn completion_and_tx_rings_check_their_starting_pair_too() {
        let (mut comp, peer) = CompletionRing::new_heap_at(4, layout(), 50, 40);
        assert_eq!(comp.errors().ring_index_jump, 1);
        assert_eq!(peer.consumer(), 50);
        assert_eq!(peer.produce(&[2048, 4096]), 2);
        let mut out = [0u64; 4];
        assert_eq!(comp.consume(&mut out), 2);
        assert_eq!(&out[..2], &[2048, 4096]);
        let (mut tx, peer) = TxRing::new_heap_at(4, 40, 50);
        assert_eq!(tx.errors().ring_index_jump, 1);
        assert_eq!(peer.producer(), 50);
        assert_eq!(tx.produce(&[desc(0, 60); 5]), 4);
        let mut sent = [XdpDesc::default(); 4];
        assert_eq!(peer.consume(&mut sent), 4);
        assert_eq!(
            comp.errors().ring_index_jump + tx.errors().ring_index_jump,
            2
        );
    }

    #[test]
    fn bad_rx_descriptors_are_counted_and_never_returned() {
        let (mut rx, peer) = rx_at(16, 0);
        let good1 = desc(256, 64);
        let good2 = desc(63 * 2048, 2048);
        let bad = [
            desc(64 * 2048, 64),    // past the end of the UMEM
            desc(2048 - 32, 64),    // crosses a chunk boundary
            desc(3 * 2048, 0),      // empty
            desc(3 * 2048, 2049),   // longer than a chunk
            desc(u64::MAX - 8, 64), // wraps
        ];
        let mut all = vec![good1];
        all.extend_from_slice(&bad);
        all.push(good2);
        assert_eq!(peer.produce(&all), 7);
        let mut out = [XdpDesc::default(); 16];
        let n = rx.consume(&mut out);
        assert_eq!(&out[..n], &[good1, good2]);
        assert_eq!(rx.errors().rx_bad_desc, 5);
        assert_eq!(
            peer.consumer(),
            7,
            "bad entries are consumed (dropped), not left behind"
        );
    }

    #[test]
    fn an_unaligned_rx_ring_checks_its_batch_in_unaligned_mode() {
        // The ring tests the mode once per batch: an unaligned UMEM's descriptor may
        // cross a chunk boundary and carries its offset in the top 16 bits.
        let layout = UmemLayout::new(8 * 4096, 4096, 0, true);
        let (mut rx, peer) = RxRing::new_heap_at(16, layout, 0, 0);
        let crossing = desc(4096 - 32, 64);
        let offset = desc((100 << 48) | 4000, 1000); // 4100..5100
        let past = desc(((1 << 16) - 1) << 48 | (8 * 4096 - 100), 64);
        assert_eq!(peer.produce(&[crossing, offset, past]), 3);
        let mut out = [XdpDesc::default(); 16];
        let n = rx.consume(&mut out);
        assert_eq!(&out[..n], &[crossing, offset]);
        assert_eq!(rx.errors().rx_bad_desc, 1);
        // The same descriptors in aligned mode, all three refused: the first crosses
        // a chunk, the other two carry offset bits that put them past the UMEM.
        let (mut rx, peer) =
            RxRing::new_heap_at(16, UmemLayout::new(8 * 4096, 4096, 0, false), 0, 0);
        assert_eq!(peer.produce(&[crossing, offset, past]), 3);
        assert_eq!(rx.consume(&mut out), 0);
        assert_eq!(rx.errors().rx_bad_desc, 3);
    }

    #[test]
    fn rx_taken_count_includes_rejected_descriptors() {
        let (mut rx, peer) = rx_at(16, 0);
        let all = [
            desc(256, 64),
            desc(64 * 2048, 64),
            desc(2 * 2048, 0),
            desc(3 * 2048 + 256, 100),
        ];
        assert_eq!(peer.produce(&all), 4);
        let mut out = [XdpDesc::default(); 3];
        // Three taken, one of them rejected: the fill count must drop by 3, not 2.
        assert_eq!(
            rx.consume_counted(&mut out),
            RxConsumed { taken: 3, kept: 1 }
        );
        assert_eq!(out[0], all[0]);
        assert_eq!(
            rx.consume_counted(&mut out),
            RxConsumed { taken: 1, kept: 1 }
        );
        assert_eq!(out[0], all[3]);
        assert_eq!(rx.errors().rx_bad_desc, 2);
        // A batch of nothing but bad descriptors still empties the ring.
        assert_eq!(
            peer.produce(&[desc(64 * 2048, 64), desc(u64::MAX - 8, 64)]),
            2
        );
        assert_eq!(
            rx.consume_counted(&mut out),
            RxConsumed { taken: 2, kept: 0 }
        );
        assert_eq!(rx.consume_counted(&mut out), RxConsumed::default());
        assert_eq!(peer.consumer(), 6);
    }

    #[test]
    fn completion_addresses_outside_umem_are_counted() {
        let (mut comp, peer) = CompletionRing::new_heap(8, layout());
        assert_eq!(peer.produce(&[0, 64 * 2048, 5 * 2048 + 100, u64::MAX]), 4);
        let mut out = [0u64; 8];
        let n = comp.consume(&mut out);
        assert_eq!(&out[..n], &[0, 5 * 2048 + 100]);
        assert_eq!(comp.errors().comp_bad_addr, 2);
        assert_eq!(peer.consumer(), 4);
    }

    #[test]
    fn tx_ring_needs_wakeup_follows_the_flag() {
        let (mut tx, peer) = TxRing::new_heap(4);
        assert!(!tx.needs_wakeup());
        peer.set_need_wakeup(true);
        assert!(tx.needs_wakeup());
        assert_eq!(tx.produce(&[desc(0, 60); 6]), 4);
        let mut out = [XdpDesc::default(); 4];
        assert_eq!(peer.consume(&mut out), 4);
        assert_eq!(out, [desc(0, 60); 4]);
    }

    #[test]
    fn absent_tx_ring_takes_nothing_and_never_asks_for_a_wakeup() {
        let mut tx = TxRing::absent();
        assert_eq!(tx.produce(&[desc(0, 60)]), 0);
        assert_eq!(tx.produce_whole_frames(&[desc(0, 60)]), 0);
        assert!(!tx.needs_wakeup());
        assert_eq!(tx.size(), 0);
    }

    #[test]
    fn tx_whole_frames_never_split_a_multi_buffer_frame() {
        let (mut tx, peer) = TxRing::new_heap(4);
        let c = |addr| XdpDesc {
            addr,
            len: 2048,
            options: super::super::desc::XDP_PKT_CONTD,
        };
        // A 1-buffer frame, then a 3-buffer frame: 4 descriptors fit exactly.
        let frames = [desc(0, 60), c(2048), c(4096), desc(6144, 100)];
        assert_eq!(tx.produce_whole_frames(&frames), 4);
        let mut out = [XdpDesc::default(); 4];
        assert_eq!(peer.consume(&mut out), 4);
        // Room for 4, but the second frame (3 buffers) would need 5: only the first goes.
        let frames = [
            desc(0, 60),
            desc(100, 60),
            c(2048),
            c(4096),
            desc(6144, 100),
        ];
        assert_eq!(tx.produce_whole_frames(&frames), 2);
        assert_eq!(peer.consume(&mut out), 2);
        assert_eq!(out[..2], [desc(0, 60), desc(100, 60)]);
        // A frame longer than the room is never started.
        let (mut small, _peer) = TxRing::new_heap(2);
        assert_eq!(
            small.produce_whole_frames(&[c(0), c(2048), desc(4096, 1)]),
            0
        );
    }

    #[test]
    fn rx_ring_across_threads_delivers_everything_in_order() {
        const N: u64 = 100_000;
        let (mut rx, peer) = rx_at(64, u32::MAX - 1000);
        let producer = std::thread::spawn(move || {
            let mut i = 0u64;
            let start = std::time::Instant::now();
            while i < N && start.elapsed() < std::time::Duration::from_secs(20) {
                let batch: Vec<XdpDesc> = (i..(i + 16).min(N))
                    .map(|k| desc((k % 64) * 2048, (k % 2000) as u32 + 1))
                    .collect();
                i += peer.produce(&batch) as u64;
            }
            i
        });
        let mut got = 0u64;
        let mut out = [XdpDesc::default(); 32];
        let start = std::time::Instant::now();
        while got < N && start.elapsed() < std::time::Duration::from_secs(20) {
            let n = rx.consume(&mut out);
            for d in &out[..n] {
                assert_eq!(*d, desc((got % 64) * 2048, (got % 2000) as u32 + 1));
                got += 1;
            }
        }
        assert_eq!(producer.join().unwrap(), N);
        assert_eq!(got, N);
        assert_eq!(rx.errors(), RingErrors::default());
    }

    /// A pool and one socket's four heap rings, each starting at its own index (two
    /// of them just before the u32 wrap), with the peers that play the kernel.
    struct Socket {
        pool: pool::PoolOwner,
        fill: FillRing,
        rx: RxRing,
        tx: TxRing,
        comp: CompletionRing,
        kfill: HeapRingPeer<u64>,
        krx: HeapRingPeer<XdpDesc>,
        ktx: HeapRingPeer<XdpDesc>,
        kcomp: HeapRingPeer<u64>,
    }

    impl Socket {
        fn new() -> Socket {
            use pool::{PoolConfig, PoolOwner, Region, RegionConfig, Topology};
            let region = Region::new(RegionConfig {
                frames: 64,
                chunk_size: 2048,
                hugepages: false,
                topology: Topology::single_node(),
            })
            .unwrap();
            let (fill, kfill) = FillRing::new_heap_at(16, u32::MAX - 2, u32::MAX - 2);
            let (rx, krx) = RxRing::new_heap_at(16, layout(), 7, 7);
            let (tx, ktx) = TxRing::new_heap_at(16, 100, 100);
            let (comp, kcomp) = CompletionRing::new_heap_at(16, layout(), u32::MAX, u32::MAX);
            Socket {
                pool: PoolOwner::new(&region, PoolConfig::default()),
                fill,
                rx,
                tx,
                comp,
                kfill,
                krx,
                ktx,
                kcomp,
            }
        }

        fn audit(&self) -> Result<(), String> {
            self.pool
                .audit(kernel_held(&self.fill, &self.rx, &self.tx, &self.comp))
                .check()
        }

        /// A normal run: fill 8, the kernel receives 3 (holding 2 more), we take
        /// them, send 2 (one completes) and recycle the third. Audited at each step.
        fn traffic(&mut self) {
            let mut addrs = [0u64; 8];
            assert_eq!(self.pool.fill_bulk(&mut addrs), 8);
            assert_eq!(self.fill.produce(&addrs), 8);
            self.audit().unwrap();
            let mut k = [0u64; 5];
            assert_eq!(self.kfill.consume(&mut k), 5);
            assert_eq!(
                self.krx
                    .produce(&[desc(k[0], 60), desc(k[1], 61), desc(k[2], 62)]),
                3
            );
            self.audit().unwrap();
            let mut out = [XdpDesc::default(); 4];
            assert_eq!(self.rx.consume(&mut out), 3);
            let mut frames: Vec<_> = out[..3]
                .iter()
                .map(|d| self.pool.take_rx(d.addr, d.len).unwrap())
                .collect();
            self.audit().unwrap();
            self.pool.recycle(frames.pop().unwrap());
            let sends: Vec<XdpDesc> = frames
                .into_iter()
                .map(|f| desc(self.pool.give_tx(f, 0).unwrap(), 60))
                .collect();
            assert_eq!(self.tx.produce(&sends), 2);
            self.audit().unwrap();
            let mut sent = [XdpDesc::default(); 1];
            assert_eq!(self.ktx.consume(&mut sent), 1);
            assert_eq!(self.kcomp.produce(&[sent[0].addr]), 1);
            let mut done = [0u64; 4];
            assert_eq!(self.comp.consume(&mut done), 1);
            self.pool.take_completion(done[0]).unwrap();
            self.audit().unwrap();
            assert_eq!(
                kernel_held(&self.fill, &self.rx, &self.tx, &self.comp),
                pool::KernelHeld { fill: 5, tx: 1 }
            );
        }
    }

    #[test]
    fn ring_positions_agree_with_the_pool_and_catch_a_lost_or_doubled_fill_frame() {
        let mut s = Socket::new();
        s.traffic();
        // Lost: a frame marked for the fill ring that never got there.
        let mut one = [0u64; 1];
        assert_eq!(s.pool.fill_bulk(&mut one), 1);
        assert!(s.audit().unwrap_err().contains("fill rings"));
        // Doubled: put on the ring twice.
        assert_eq!(s.fill.produce(&[one[0], one[0]]), 2);
        assert!(s.audit().unwrap_err().contains("fill rings"));
    }

    #[test]
    fn ring_positions_agree_with_the_pool_and_catch_a_lost_or_doubled_tx_frame() {
        let mut s = Socket::new();
        s.traffic();
        let f = s.pool.alloc().unwrap();
        let addr = s.pool.give_tx(f, 0).unwrap();
        // Lost: handed to TX in the map, never put on the ring.
        assert!(s.audit().unwrap_err().contains("TX descriptors"));
        // Doubled: on the ring twice.
        assert_eq!(s.tx.produce(&[desc(addr, 60), desc(addr, 60)]), 2);
        assert!(s.audit().unwrap_err().contains("TX descriptors"));
    }

    #[test]
    fn a_rejected_rx_descriptor_leaves_its_frame_counted_in_fill_and_the_audit_says_so() {
        let mut s = Socket::new();
        s.traffic();
        // The kernel hands back a descriptor outside the UMEM: the ring drops it (its
        // fill entry is used) and the frame it should have named stays Fill in the map.
        let mut k = [0u64; 1];
        assert_eq!(s.kfill.consume(&mut k), 1);
        assert_eq!(s.krx.produce(&[desc(64 * 2048, 60)]), 1);
        let mut out = [XdpDesc::default(); 2];
        assert_eq!(
            s.rx.consume_counted(&mut out),
            RxConsumed { taken: 1, kept: 0 }
        );
        assert!(s.audit().unwrap_err().contains("fill rings"));
    }

    /// Cost of the batched ring path, one thread playing both sides (no kernel):
    /// `cargo test --release -p xdpool --lib ring_batch_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement; run in release"]
    fn ring_batch_cost() {
        const ROUNDS: u64 = 200_000;
        const BATCH: usize = 64;
        let (mut rx, peer) = rx_at(2048, 0);
        let batch: Vec<XdpDesc> = (0..BATCH as u64).map(|i| desc(i * 2048, 64)).collect();
        let mut out = [XdpDesc::default(); BATCH];
        let mut got = 0u64;
        let start = std::time::Instant::now();
        for _ in 0..ROUNDS {
            assert_eq!(peer.produce(&batch), BATCH);
            got += rx.consume(&mut out) as u64;
        }
        let ns = start.elapsed().as_nanos() as f64 / (ROUNDS * BATCH as u64) as f64;
        assert_eq!(got, ROUNDS * BATCH as u64);
        let (mut fill, fpeer) = fill_at(2048, 0);
        let addrs: Vec<u64> = (0..BATCH as u64).map(|i| i * 2048).collect();
        let mut back = [0u64; BATCH];
        let start = std::time::Instant::now();
        for _ in 0..ROUNDS {
            assert_eq!(fill.produce(&addrs), BATCH);
            assert_eq!(fpeer.consume(&mut back), BATCH);
        }
        let fns = start.elapsed().as_nanos() as f64 / (ROUNDS * BATCH as u64) as f64;
        eprintln!("| ring | batch | ns/entry (incl. peer side) |\n|---|---|---|\n| rx consume + validate | {BATCH} | {ns:.2} |\n| fill produce | {BATCH} | {fns:.2} |");
    }
}

/// Loom models of the ring protocol as it ships (atomics and entry slots through
/// `slot`), with the heap peer playing the kernel on another thread:
/// `cargo test -p xdpool --profile checked --features loom --lib xsk::ring::loom_models`.
/// An entry read not ordered after its write (a weakened release/acquire) fails the
/// model; so does an entry read outside the published window.
#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::*;
    use loom::thread;
    use std::sync::atomic::AtomicUsize as StdCount;

    fn layout() -> UmemLayout {
        UmemLayout::new(64 * 2048, 2048, 0, false)
    }

    fn desc(k: u64) -> XdpDesc {
        XdpDesc {
            addr: k * 2048 + 256,
            len: 60 + k as u32,
            options: 0,
        }
    }

    fn model(name: &str, body: impl Fn() + Sync + Send + 'static) {
        let runs = Arc::new(StdCount::new(0));
        let count = runs.clone();
        loom::model(move || {
            body();
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
        println!("{name}: {runs} interleavings");
        assert!(runs > 1, "{name}: one interleaving only");
    }

    /// The kernel produces 3 RX descriptors into a 2-slot ring whose indices wrap
    /// past u32::MAX; we consume them in order, each exactly once.
    #[test]
    fn rx_ring_wraps_and_delivers_in_order() {
        model("rx_wrap", || {
            let (mut rx, peer) = RxRing::new_heap_at(2, layout(), u32::MAX - 1, u32::MAX - 1);
            let kernel = thread::spawn(move || {
                let mut k = 0;
                while k < 3 {
                    k += peer.produce(&[desc(k)]) as u64;
                    thread::yield_now();
                }
                peer
            });
            let mut got = Vec::new();
            let mut out = [XdpDesc::default(); 2];
            while got.len() < 3 {
                let n = rx.consume(&mut out);
                got.extend_from_slice(&out[..n]);
                if n == 0 {
                    thread::yield_now();
                }
            }
            let peer = kernel.join().unwrap();
            assert_eq!(got, vec![desc(0), desc(1), desc(2)]);
            assert_eq!(peer.consumer(), (u32::MAX - 1).wrapping_add(3));
            assert_eq!(rx.errors(), RingErrors::default());
        });
    }

    /// We produce 3 fill addresses into a 2-slot ring; the kernel consumes them in
    /// order; the ring positions say the kernel took them all.
    #[test]
    fn fill_ring_hands_over_every_slot_once() {
        model("fill_wrap", || {
            let (mut fill, peer) = FillRing::new_heap_at(2, u32::MAX, u32::MAX);
            let kernel = thread::spawn(move || {
                let mut got = Vec::new();
                let mut out = [0u64; 2];
                while got.len() < 3 {
                    let n = peer.consume(&mut out);
                    got.extend_from_slice(&out[..n]);
                    if n == 0 {
                        thread::yield_now();
                    }
                }
                got
            });
            let addrs = [0u64, 2048, 4096];
            let mut put = 0;
            while put < 3 {
                put += fill.produce(&addrs[put..]);
                if put < 3 {
                    thread::yield_now();
                }
            }
            assert_eq!(kernel.join().unwrap(), addrs);
            assert_eq!(fill.submitted(), 3);
            assert_eq!(fill.errors(), RingErrors::default());
        });
    }

    /// A misbehaving kernel publishes a producer index out of range (more entries
    /// than slots: a torn or garbage word), then the right one. Whatever we read in
    /// between, no slot outside the published window is read, the bad index is
    /// counted, and the one real descriptor arrives once.
    #[test]
    fn out_of_range_producer_index_is_rejected() {
        model("torn_producer", || {
            let (mut rx, peer) = RxRing::new_heap_at(2, layout(), 5, 5);
            let kernel = thread::spawn(move || {
                peer.write(5, desc(1));
                // 5 + 3 is more than a 2-slot ring ahead of the consumer.
                peer.set_producer(8);
                thread::yield_now();
                peer.set_producer(6);
            });
            let mut out = [XdpDesc::default(); 2];
            let mut got = Vec::new();
            for _ in 0..3 {
                let n = rx.consume(&mut out);
                got.extend_from_slice(&out[..n]);
                thread::yield_now();
            }
            kernel.join().unwrap();
            loop {
                let n = rx.consume(&mut out);
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&out[..n]);
            }
            assert_eq!(got, vec![desc(1)]);
            assert_eq!(
                rx.errors().rx_bad_desc,
                0,
                "a slot outside the window was read"
            );
            // Seen or not, depending on when we looked; never trusted.
            assert!(rx.errors().ring_index_jump <= 3);
        });
    }
}
