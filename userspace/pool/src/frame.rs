//! Per-frame metadata (the `struct page` of a UMEM chunk) and the tokens handed out
//! for frames and frags.

use crate::sync::{AtomicU32, AtomicU64};
use serde::Serialize;
use std::num::{NonZeroU32, NonZeroU64, NonZeroU8};

/// Where a frame is: the owner map's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[repr(u8)]
pub enum Location {
    /// On a global per-node free list.
    Free = 0,
    /// In a pool's owner-only alloc cache.
    Cached = 1,
    /// In a pool's return ring.
    Ring = 2,
    /// Handed to the kernel through a fill ring.
    Fill = 3,
    /// Handed to the kernel through a TX ring.
    Tx = 4,
    /// Held by the application (a `Frame`, or the frags of a chunk).
    Application = 5,
}

impl Location {
    pub(crate) fn from_bits(b: u8) -> Location {
        match b {
            0 => Location::Free,
            1 => Location::Cached,
            2 => Location::Ring,
            3 => Location::Fill,
            4 => Location::Tx,
            _ => Location::Application,
        }
    }

    /// True where the pool, not a user, holds the frame.
    pub fn is_released(self) -> bool {
        matches!(self, Location::Free | Location::Cached | Location::Ring)
    }
}

/// Owner slot meaning "no pool" (frames on a global list).
pub(crate) const NO_OWNER: u32 = 0x00FF_FFFF;

/// The generation half of a `State` word and of a cache entry / `Frame::key`.
pub(crate) const GEN_MASK: u64 = !0xFFFF_FFFF;

/// Bias a frag chunk's count starts at, so that handing out frags needs no atomic.
pub(crate) const FRAG_BIAS: u32 = 1 << 30;

/// Frame state packed in one word: generation (signature) | owner slot | location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(pub u64);

impl State {
    #[inline]
    pub(crate) const fn new(gen: u32, owner: u32, loc: Location) -> State {
        State(((gen as u64) << 32) | (((owner & NO_OWNER) as u64) << 8) | loc as u64)
    }
    #[inline]
    pub(crate) fn gen(self) -> u32 {
        (self.0 >> 32) as u32
    }
    #[inline]
    pub(crate) fn owner(self) -> u32 {
        ((self.0 >> 8) as u32) & NO_OWNER
    }
    #[inline]
    pub(crate) fn loc(self) -> Location {
        Location::from_bits(self.0 as u8)
    }
    #[inline]
    pub(crate) fn with(self, owner: u32, loc: Location) -> State {
        State::new(self.gen(), owner, loc)
    }
}

/// Metadata of one chunk. `state` is written only by whoever holds the frame (or the
/// structure the frame sits in), so plain (Relaxed) stores suffice; hand-over between
/// threads is ordered by the ring or lock that carries the index.
#[derive(Debug)]
pub(crate) struct FrameMeta {
    pub(crate) state: AtomicU64,
    /// `pp_ref_count`: 1 for an unsplit frame, N (or biased) for a split one.
    pub(crate) refcount: AtomicU32,
    pub(crate) node: u32,
}

impl FrameMeta {
    pub(crate) fn new(node: u32) -> FrameMeta {
        FrameMeta {
            state: AtomicU64::new(State::new(0, NO_OWNER, Location::Free).0),
            refcount: AtomicU32::new(1),
            node,
        }
    }

    /// `pp_ref_count` reads 1: the only reference (an unsplit frame, or the last
    /// user of a split one). A plain load, no read-modify-write.
    #[inline(always)]
    pub(crate) fn is_last_ref(&self) -> bool {
        self.refcount.load(crate::sync::Ordering::Acquire) == 1
    }
}

/// An owned token for one whole chunk, held by the application. Not `Clone`: a chunk
/// has exactly one token. It carries the generation it was handed out with, which is
/// checked on return (a stale or foreign token is counted as misuse, not trusted).
/// Dropping a `Frame` instead of returning it leaks the chunk (it stays inflight).
#[must_use = "a dropped Frame is leaked until the region goes; recycle it"]
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    /// `gen << 32 | idx`, the owner cache's entry format: a token moves as one word.
    pub(crate) key: u64,
    /// `shift << 16 | region tag`. Non-zero (chunks are 2048 or 4096 bytes, so the
    /// shift is at least 11), so `Option<Frame>` needs no tag.
    pub(crate) tag: NonZeroU32,
}

impl Frame {
    #[inline(always)]
    pub(crate) fn idx(&self) -> u32 {
        self.key as u32
    }
    #[inline(always)]
    pub(crate) fn gen(&self) -> u32 {
        (self.key >> 32) as u32
    }
    #[inline(always)]
    pub(crate) fn region(&self) -> u16 {
        self.tag.get() as u16
    }
    #[inline(always)]
    fn shift(&self) -> u32 {
        self.tag.get() >> 16
    }
    /// Chunk index in the region.
    pub fn index(&self) -> u32 {
        self.idx()
    }
    /// UMEM address (offset from the region's start) of the chunk.
    pub fn addr(&self) -> u64 {
        (self.idx() as u64) << self.shift()
    }
    /// Chunk size in bytes.
    pub fn chunk_size(&self) -> u32 {
        1 << self.shift()
    }
}

/// The `tag` word of a region's frame tokens.
#[inline(always)]
pub(crate) fn frame_tag(region: u16, shift: NonZeroU8) -> NonZeroU32 {
    NonZeroU32::new(((shift.get() as u32) << 16) | region as u32).unwrap_or(NonZeroU32::MIN)
}

/// An owned reference to a piece of a chunk. Not `Clone`: more references are taken
/// with `PoolOwner::ref_frag`, which only accepts a `Frag`, so a pool reference can
/// only ever be taken on memory the pool handed out.
#[must_use = "a dropped Frag leaks its reference; release it"]
#[derive(Debug, PartialEq, Eq)]
pub struct Frag {
    /// `gen << 32 | idx` of the chunk, as in `Frame::key`.
    pub(crate) key: u64,
    /// `len << 48 | offset << 32 | tag` (`tag` as `Frame::tag`, never zero): a
    /// token is two words, each written and read whole, so one copied through
    /// memory never waits on a store of a smaller piece of it.
    pub(crate) word: NonZeroU64,
}

impl Frag {
    #[inline(always)]
    pub(crate) fn new(key: u64, tag: NonZeroU32, offset: u16, len: u16) -> Frag {
        Frag {
            key,
            word: NonZeroU64::from(tag) | (u64::from(len) << 48 | u64::from(offset) << 32),
        }
    }
    /// As `Frame::tag`.
    #[inline(always)]
    pub(crate) fn tag(&self) -> NonZeroU32 {
        NonZeroU32::new(self.word.get() as u32).unwrap_or(NonZeroU32::MIN)
    }
    #[inline(always)]
    fn offset16(&self) -> u16 {
        (self.word.get() >> 32) as u16
    }
    #[inline(always)]
    pub(crate) fn len16(&self) -> u16 {
        (self.word.get() >> 48) as u16
    }
    #[inline(always)]
    pub(crate) fn idx(&self) -> u32 {
        self.key as u32
    }
    #[inline(always)]
    pub(crate) fn gen(&self) -> u32 {
        (self.key >> 32) as u32
    }
    #[inline(always)]
    pub(crate) fn region(&self) -> u16 {
        self.word.get() as u16
    }
    /// Index of the chunk this piece is in.
    pub fn frame_index(&self) -> u32 {
        self.idx()
    }
    /// Offset of the piece inside its chunk.
    pub fn offset(&self) -> u32 {
        self.offset16() as u32
    }
    /// Length of the piece.
    pub fn len(&self) -> u32 {
        self.len16() as u32
    }
    /// True for an empty piece (never handed out by the pool).
    pub fn is_empty(&self) -> bool {
        self.len16() == 0
    }
    /// UMEM address of the piece.
    pub fn addr(&self) -> u64 {
        ((self.idx() as u64) << ((self.word.get() as u32) >> 16)) + self.offset16() as u64
    }
}

/// What `PoolOwner::alloc_sized` returns: a whole chunk or a frag, chosen by size.
#[must_use = "a dropped Buf is leaked; recycle or release it"]
#[derive(Debug, PartialEq, Eq)]
pub enum Buf {
    /// A whole chunk (size above half a chunk).
    Whole(Frame),
    /// A piece of a shared chunk.
    Frag(Frag),
}

impl Buf {
    /// UMEM address of the buffer.
    pub fn addr(&self) -> u64 {
        match self {
            Buf::Whole(f) => f.addr(),
            Buf::Frag(f) => f.addr(),
        }
    }
    /// Usable length: the chunk size or the frag's length.
    pub fn len(&self) -> u32 {
        match self {
            Buf::Whole(f) => f.chunk_size(),
            Buf::Frag(f) => f.len(),
        }
    }
    /// Never true for a buffer the pool handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_packs_and_unpacks() {
        let s = State::new(0xDEAD_BEEF, 0x12_3456, Location::Tx);
        assert_eq!(s.gen(), 0xDEAD_BEEF);
        assert_eq!(s.owner(), 0x12_3456);
        assert_eq!(s.loc(), Location::Tx);
        let t = s.with(NO_OWNER, Location::Free);
        assert_eq!(
            (t.gen(), t.owner(), t.loc()),
            (0xDEAD_BEEF, NO_OWNER, Location::Free)
        );
        for l in 0..6u8 {
            assert_eq!(Location::from_bits(l) as u8, l);
        }
    }

    #[test]
    fn a_frag_keeps_its_tag_offset_and_length_in_one_word() {
        let tag = frame_tag(0xbeef, NonZeroU8::new(12).unwrap());
        let f = Frag::new(7 << 32 | 3, tag, 4095, 0xffff);
        assert_eq!((f.idx(), f.gen(), f.region()), (3, 7, 0xbeef));
        assert_eq!((f.tag(), f.offset(), f.len()), (tag, 4095, 0xffff));
        assert_eq!(f.addr(), 3 * 4096 + 4095);
        let g = Frag::new(0, tag, 0, 0);
        assert_eq!((g.offset(), g.len(), g.tag()), (0, 0, tag));
        assert!(g.is_empty());
    }

    #[test]
    fn tokens_are_small() {
        // Small enough to travel in two registers, Option included.
        assert!(std::mem::size_of::<Option<Frame>>() <= 16);
        assert!(std::mem::size_of::<Option<Frag>>() <= 16);
    }
}
