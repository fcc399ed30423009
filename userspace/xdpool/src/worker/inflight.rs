//! What a worker has in its TX ring: descriptors and the distinct UMEM chunks they
//! sit in. Packed frags (copybreak) put several descriptors in one chunk, so the two
//! numbers differ; this is what shows it. Owner-only, no atomics, no allocation
//! after construction.

/// TX descriptors queued and not yet completed, and the chunks they occupy.
#[derive(Debug)]
pub struct TxInflight {
    /// Descriptors in TX per chunk index.
    per_chunk: Box<[u32]>,
    shift: u32,
    frames: u64,
    chunks: u64,
}

impl TxInflight {
    /// A tracker for a UMEM of `chunks` chunks of `chunk_size` bytes (a power of two).
    pub fn new(chunks: u32, chunk_size: u32) -> TxInflight {
        debug_assert!(chunk_size.is_power_of_two());
        TxInflight {
            per_chunk: vec![0; chunks as usize].into_boxed_slice(),
            shift: chunk_size.trailing_zeros(),
            frames: 0,
            chunks: 0,
        }
    }

    /// A descriptor at UMEM address `addr` went to the TX ring.
    #[inline]
    pub fn sent(&mut self, addr: u64) {
        let Some(n) = self.per_chunk.get_mut((addr >> self.shift) as usize) else {
            return;
        };
        if *n == 0 {
            self.chunks += 1;
        }
        *n += 1;
        self.frames += 1;
    }

    /// A completion for `addr` came back. One we never sent is ignored.
    #[inline]
    pub fn completed(&mut self, addr: u64) {
        let Some(n) = self.per_chunk.get_mut((addr >> self.shift) as usize) else {
            return;
        };
        if *n == 0 {
            return;
        }
        *n -= 1;
        if *n == 0 {
            self.chunks -= 1;
        }
        self.frames -= 1;
    }

    /// The socket is gone and the kernel's frames were reclaimed: nothing is in TX.
    #[cold]
    pub fn reset(&mut self) {
        self.per_chunk.fill(0);
        self.frames = 0;
        self.chunks = 0;
    }

    /// Descriptors in TX now.
    #[inline]
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Distinct chunks those descriptors occupy.
    #[inline]
    pub fn chunks(&self) -> u64 {
        self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_descriptors_share_chunks() {
        let mut t = TxInflight::new(8, 2048);
        // Three 64-byte frags in chunk 1, one whole frame in chunk 3.
        for addr in [2048, 2048 + 64, 2048 + 128, 3 * 2048] {
            t.sent(addr);
        }
        assert_eq!((t.frames(), t.chunks()), (4, 2));
        t.completed(2048 + 64);
        assert_eq!((t.frames(), t.chunks()), (3, 2));
        t.completed(3 * 2048 + 10);
        assert_eq!((t.frames(), t.chunks()), (2, 1));
        t.completed(2048);
        t.completed(2048 + 128);
        assert_eq!((t.frames(), t.chunks()), (0, 0));
    }

    #[test]
    fn unknown_completions_and_addresses_are_ignored() {
        let mut t = TxInflight::new(4, 4096);
        t.completed(0);
        t.sent(100 * 4096);
        assert_eq!((t.frames(), t.chunks()), (0, 0));
        t.sent(4096);
        t.sent(4096 + 256);
        t.reset();
        assert_eq!((t.frames(), t.chunks()), (0, 0));
        t.completed(4096);
        assert_eq!(t.frames(), 0);
    }
}
