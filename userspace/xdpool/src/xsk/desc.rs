//! Validation of everything the kernel hands us through the rings.
//!
//! Pure functions over plain values: no memory is read here, so every check can be
//! tested without a kernel. Ring code calls these before it reads a slot or hands a
//! descriptor on; a value that fails is counted in [`RingErrors`] and dropped.

use serde::Serialize;

/// Headroom the kernel reserves in front of every RX frame (`XDP_PACKET_HEADROOM`).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// Descriptor option: more buffers of the same frame follow (multi-buffer, `XDP_USE_SG`).
pub const XDP_PKT_CONTD: u32 = 1;

/// In unaligned mode the upper 16 bits of an address carry an offset into the chunk.
const UNALIGNED_OFFSET_SHIFT: u32 = 48;
const UNALIGNED_ADDR_MASK: u64 = (1 << UNALIGNED_OFFSET_SHIFT) - 1;

/// The byte offset into the UMEM of an unaligned-mode address: the chunk's base in
/// the low 48 bits plus the offset in the top 16.
#[inline(always)]
fn unaligned_offset(addr: u64) -> u64 {
    (addr & UNALIGNED_ADDR_MASK).wrapping_add(addr >> UNALIGNED_OFFSET_SHIFT)
}

/// One RX or TX descriptor, laid out like the kernel's `struct xdp_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// Address of the packet data, as an offset into the UMEM.
    pub addr: u64,
    /// Length of the packet data in bytes.
    pub len: u32,
    /// Option bits (`XDP_PKT_CONTD`, `XDP_TX_METADATA`).
    pub options: u32,
}

const _: () = assert!(core::mem::size_of::<XdpDesc>() == 16);
const _: () = assert!(core::mem::size_of::<XdpDesc>() == core::mem::size_of::<libc::xdp_desc>());

/// Counters of values from the kernel that failed validation. Plain integers: each
/// ring has one owner thread, so counting costs no atomic operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RingErrors {
    /// A producer (or consumer) index the kernel published moved backwards, or by
    /// more than the ring size, relative to ours. The reading was ignored.
    pub ring_index_jump: u64,
    /// RX descriptors outside the UMEM, crossing a chunk boundary, or with a length
    /// of 0 or more than a chunk. Dropped, never dereferenced.
    pub rx_bad_desc: u64,
    /// Completion addresses outside the UMEM. Dropped.
    pub comp_bad_addr: u64,
}

impl RingErrors {
    /// Adds `other` into `self` (summing rings or queues).
    pub fn merge(&mut self, other: &RingErrors) {
        self.ring_index_jump += other.ring_index_jump;
        self.rx_bad_desc += other.rx_bad_desc;
        self.comp_bad_addr += other.comp_bad_addr;
    }

    /// Total of all counters.
    pub fn total(&self) -> u64 {
        self.ring_index_jump + self.rx_bad_desc + self.comp_bad_addr
    }
}

/// Why an RX descriptor was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadDesc {
    /// Length 0.
    ZeroLen,
    /// Longer than one chunk.
    TooLong,
    /// Start or end lies outside the UMEM.
    OutOfUmem,
    /// Starts in one chunk and ends in another (aligned mode).
    CrossesChunk,
}

/// Geometry of a registered UMEM, enough to validate any address the kernel returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmemLayout {
    size: u64,
    chunk_size: u32,
    headroom: u32,
    unaligned: bool,
}

impl UmemLayout {
    /// A layout of `size` bytes cut into `chunk_size` chunks. `chunk_size` must be a
    /// power of two in aligned mode (checked by `Umem::register`, asserted here).
    pub fn new(size: u64, chunk_size: u32, headroom: u32, unaligned: bool) -> Self {
        assert!(chunk_size > 0 && (unaligned || chunk_size.is_power_of_two()));
        Self {
            size,
            chunk_size,
            headroom,
            unaligned,
        }
    }

    /// Size of the UMEM in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Chunk size in bytes.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// Headroom the application reserved in every chunk (on top of the kernel's).
    pub fn headroom(&self) -> u32 {
        self.headroom
    }

    /// Whether the UMEM was registered in unaligned-chunk mode.
    pub fn unaligned(&self) -> bool {
        self.unaligned
    }

    /// Number of whole chunks.
    pub fn chunk_count(&self) -> u64 {
        self.size / u64::from(self.chunk_size)
    }

    /// The byte offset into the UMEM that `addr` designates (decodes the unaligned
    /// mode's offset bits).
    #[inline]
    pub fn offset_of(&self, addr: u64) -> u64 {
        if self.unaligned {
            unaligned_offset(addr)
        } else {
            addr
        }
    }

    /// Checks an RX descriptor: non-empty, at most one chunk long, inside the UMEM,
    /// and (aligned mode) inside one chunk.
    #[inline]
    pub fn check_rx(&self, desc: &XdpDesc) -> Result<(), BadDesc> {
        if self.unaligned {
            self.check_rx_in::<true>(desc)
        } else {
            self.check_rx_in::<false>(desc)
        }
    }

    /// [`check_rx`](Self::check_rx) for a layout whose mode the caller tested
    /// (`UNALIGNED == self.unaligned`): a ring checks a whole batch under one test.
    #[inline(always)]
    pub(crate) fn check_rx_in<const UNALIGNED: bool>(&self, desc: &XdpDesc) -> Result<(), BadDesc> {
        debug_assert_eq!(UNALIGNED, self.unaligned);
        let len = u64::from(desc.len);
        if len == 0 {
            return Err(BadDesc::ZeroLen);
        }
        if len > u64::from(self.chunk_size) {
            return Err(BadDesc::TooLong);
        }
        let start = if UNALIGNED {
            unaligned_offset(desc.addr)
        } else {
            desc.addr
        };
        // checked_add: a start near u64::MAX must not wrap back into the UMEM.
        let end = match start.checked_add(len) {
            Some(end) if end <= self.size => end,
            _ => return Err(BadDesc::OutOfUmem),
        };
        if !UNALIGNED {
            let mask = !(u64::from(self.chunk_size) - 1);
            if start & mask != (end - 1) & mask {
                return Err(BadDesc::CrossesChunk);
            }
        }
        Ok(())
    }

    /// Checks a completion address: it must designate a byte inside the UMEM.
    #[inline]
    pub fn check_comp(&self, addr: u64) -> bool {
        self.offset_of(addr) < self.size
    }
}

/// For a ring we consume (RX, completion): validates a producer index the kernel
/// published. `cached_prod`/`cons` are the last valid producer we saw and our own
/// consumer. Returns the number of entries now readable, or `None` when the new
/// producer moved backwards or more than `size` ahead of `cons` (an index jump):
/// the caller then ignores the reading and reads nothing past `cached_prod`.
#[inline]
pub fn check_producer_advance(
    cached_prod: u32,
    cons: u32,
    new_prod: u32,
    size: u32,
) -> Option<u32> {
    let held = cached_prod.wrapping_sub(cons);
    let moved = new_prod.wrapping_sub(cached_prod);
    if held > size || moved > size - held {
        return None;
    }
    Some(held + moved)
}

/// For a ring we produce (fill, TX): validates a consumer index the kernel
/// published. `prod` is our producer and `cached_cons` the last valid consumer seen.
/// Returns the number of free slots, or `None` when the new consumer moved
/// backwards or past our producer (an index jump).
#[inline]
pub fn check_consumer_advance(
    prod: u32,
    cached_cons: u32,
    new_cons: u32,
    size: u32,
) -> Option<u32> {
    let in_flight = prod.wrapping_sub(cached_cons);
    let moved = new_cons.wrapping_sub(cached_cons);
    if in_flight > size || moved > in_flight {
        return None;
    }
    Some(size - (in_flight - moved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn aligned() -> UmemLayout {
        UmemLayout::new(16 * 2048, 2048, 0, false)
    }

    #[test]
    fn rx_desc_inside_one_chunk_is_accepted() {
        let l = aligned();
        assert_eq!(
            l.check_rx(&XdpDesc {
                addr: 256,
                len: 60,
                options: 0
            }),
            Ok(())
        );
        assert_eq!(
            l.check_rx(&XdpDesc {
                addr: 15 * 2048,
                len: 2048,
                options: 0
            }),
            Ok(())
        );
    }

    #[test]
    fn rx_desc_errors_are_named() {
        let l = aligned();
        let d = |addr, len| XdpDesc {
            addr,
            len,
            options: 0,
        };
        assert_eq!(l.check_rx(&d(0, 0)), Err(BadDesc::ZeroLen));
        assert_eq!(l.check_rx(&d(0, 2049)), Err(BadDesc::TooLong));
        assert_eq!(l.check_rx(&d(16 * 2048, 64)), Err(BadDesc::OutOfUmem));
        assert_eq!(l.check_rx(&d(16 * 2048 - 10, 64)), Err(BadDesc::OutOfUmem));
        assert_eq!(l.check_rx(&d(u64::MAX - 10, 64)), Err(BadDesc::OutOfUmem));
        assert_eq!(l.check_rx(&d(2048 - 10, 64)), Err(BadDesc::CrossesChunk));
    }

    #[test]
    fn unaligned_addresses_decode_the_offset_bits() {
        let l = UmemLayout::new(8 * 4096, 4096, 0, true);
        let addr = (100u64 << 48) | 4000; // base 4000 + offset 100 = 4100
        assert_eq!(l.offset_of(addr), 4100);
        // Crossing a 4096 boundary is legal in unaligned mode.
        assert_eq!(
            l.check_rx(&XdpDesc {
                addr,
                len: 1000,
                options: 0
            }),
            Ok(())
        );
        let past = ((1u64 << 16) - 1) << 48 | (8 * 4096 - 100);
        assert_eq!(
            l.check_rx(&XdpDesc {
                addr: past,
                len: 64,
                options: 0
            }),
            Err(BadDesc::OutOfUmem)
        );
        assert!(!l.check_comp(past));
    }

    #[test]
    fn completion_address_must_be_inside() {
        let l = aligned();
        assert!(l.check_comp(0));
        assert!(l.check_comp(16 * 2048 - 1));
        assert!(!l.check_comp(16 * 2048));
    }

    #[test]
    fn producer_advance_rejects_backwards_and_too_far() {
        assert_eq!(check_producer_advance(0, 0, 8, 8), Some(8));
        assert_eq!(check_producer_advance(0, 0, 9, 8), None);
        assert_eq!(check_producer_advance(10, 5, 7, 8), None, "backwards");
        assert_eq!(check_producer_advance(10, 5, 10, 8), Some(5));
        assert_eq!(
            check_producer_advance(u32::MAX - 1, u32::MAX - 3, 3, 8),
            Some(7),
            "wraps"
        );
    }

    #[test]
    fn consumer_advance_rejects_backwards_and_past_producer() {
        assert_eq!(check_consumer_advance(8, 0, 8, 8), Some(8));
        assert_eq!(check_consumer_advance(8, 0, 9, 8), None, "past producer");
        assert_eq!(check_consumer_advance(8, 4, 3, 8), None, "backwards");
        assert_eq!(
            check_consumer_advance(2, u32::MAX - 1, 1, 8),
            Some(7),
            "wraps"
        );
    }

    proptest! {
        #[test]
        fn accepted_desc_lies_in_one_chunk(addr in 0u64..40_000, len in 0u32..5000) {
            let l = aligned();
            let d = XdpDesc { addr, len, options: 0 };
            if l.check_rx(&d).is_ok() {
                let end = addr + u64::from(len);
                prop_assert!(len > 0 && end <= l.size());
                prop_assert_eq!(addr / 2048, (end - 1) / 2048);
            }
        }

        #[test]
        fn producer_advance_never_exceeds_size(cons: u32, held in 0u32..=64, new_prod: u32) {
            let size = 64;
            let cached = cons.wrapping_add(held);
            if let Some(n) = check_producer_advance(cached, cons, new_prod, size) {
                prop_assert!(n <= size);
                prop_assert_eq!(cons.wrapping_add(n), new_prod);
                prop_assert!(n >= held);
            }
        }
    }
}
