//! RX, completion and fill rings over heap memory that a hostile "kernel" writes:
//! arbitrary descriptors, producer and consumer indices (out of range, backwards,
//! torn). What the rings hand us must be inside the UMEM (checked here with our own
//! arithmetic, not the validator's), and the counts must stay within the ring.
#![no_main]
use libfuzzer_sys::fuzz_target;
use xdpool::internal::xsk::{CompletionRing, FillRing, RxRing, UmemLayout, XdpDesc};

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    /// Near the current index most of the time, anywhere sometimes.
    fn index_near(&mut self, at: u32) -> u32 {
        match self.u8() % 4 {
            0 => self.u32(),
            _ => at.wrapping_add(i32::from(self.u8() as i8) as u32),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let size = 1u32 << (1 + b.u8() % 5);
    let chunk: u32 = if b.u8() & 1 == 0 { 2048 } else { 4096 };
    let frames = 1 + u64::from(b.u8() % 32);
    let umem = frames * u64::from(chunk);
    let unaligned = b.u8() & 1 == 1;
    let layout = UmemLayout::new(umem, chunk, 0, unaligned);
    let start = b.u32();
    let skew = b.u32() % (size + 2);
    let (mut rx, krx) = RxRing::new_heap_at(size, layout, start, start.wrapping_sub(skew));
    let rx_start = krx.consumer();
    let (mut comp, kcomp) =
        CompletionRing::new_heap_at(size, layout, start, start.wrapping_sub(skew));
    let comp_start = kcomp.consumer();
    let (mut fill, kfill) = FillRing::new_heap_at(size, start.wrapping_sub(skew), start);
    let fill_start = kfill.producer();
    // The furthest consumer the kernel ever published that was a valid advance: the
    // ring may rely on it (a later backwards write does not take slots back).
    let mut fill_trusted = kfill.consumer();
    let mut rx_taken = 0u32;
    let mut comp_taken = 0u32;
    let mut out = [XdpDesc::default(); 8];
    let mut addrs = [0u64; 8];
    for _ in 0..64 {
        if b.0.is_empty() {
            break;
        }
        match b.u8() % 7 {
            0 => {
                let at = krx.producer().wrapping_add(u32::from(b.u8() % 4));
                krx.write(
                    at,
                    XdpDesc {
                        addr: b.u64() % (umem * 2 + 64),
                        len: b.u32() % (2 * chunk + 2),
                        options: b.u32(),
                    },
                );
            }
            1 => krx.set_producer(b.index_near(krx.producer())),
            2 => {
                let want = 1 + usize::from(b.u8() % 8);
                let got = rx.consume_counted(&mut out[..want]);
                assert!(
                    got.kept <= got.taken && got.taken <= want,
                    "{got:?} of {want}"
                );
                for d in &out[..got.kept] {
                    let base = if unaligned {
                        d.addr & ((1 << 48) - 1)
                    } else {
                        d.addr
                    };
                    let off = if unaligned { d.addr >> 48 } else { 0 };
                    let start = u128::from(base) + u128::from(off);
                    let end = start + u128::from(d.len);
                    assert!(d.len > 0 && d.len <= chunk && end <= u128::from(umem), "bad RX descriptor let through: {d:?} (umem {umem}, chunk {chunk}, unaligned {unaligned})");
                    if !unaligned {
                        assert_eq!(
                            start / u128::from(chunk),
                            (end - 1) / u128::from(chunk),
                            "crosses a chunk: {d:?}"
                        );
                    }
                }
                rx_taken = rx_taken.wrapping_add(got.taken as u32);
                assert_eq!(
                    krx.consumer().wrapping_sub(rx_start),
                    rx_taken,
                    "consumer moved other than by what was taken"
                );
                assert_eq!(rx.taken(), rx_taken);
            }
            3 => {
                let at = kcomp.producer().wrapping_add(u32::from(b.u8() % 4));
                kcomp.write(at, b.u64() % (umem * 2 + 64));
            }
            4 => kcomp.set_producer(b.index_near(kcomp.producer())),
            5 => {
                let want = 1 + usize::from(b.u8() % 8);
                let before = kcomp.consumer();
                let kept = comp.consume(&mut addrs[..want]);
                let taken = kcomp.consumer().wrapping_sub(before);
                assert!(kept <= want && taken as usize <= want);
                for &a in &addrs[..kept] {
                    let base = if unaligned {
                        (a & ((1 << 48) - 1)) + (a >> 48)
                    } else {
                        a
                    };
                    assert!(
                        base < umem,
                        "completion outside the UMEM let through: {a:#x} (umem {umem})"
                    );
                }
                comp_taken = comp_taken.wrapping_add(taken);
                assert_eq!(comp.taken(), comp_taken);
                let _ = comp_start;
            }
            _ => {
                let cons = b.index_near(kfill.consumer());
                kfill.set_consumer(cons);
                let prod_before = kfill.producer();
                if cons.wrapping_sub(fill_trusted) <= prod_before.wrapping_sub(fill_trusted) {
                    fill_trusted = cons;
                }
                let n = usize::from(b.u8() % 9);
                let put = fill.produce(&addrs[..n]);
                assert!(put <= n);
                assert_eq!(kfill.producer().wrapping_sub(prod_before), put as u32);
                assert_eq!(kfill.producer().wrapping_sub(fill_start), fill.submitted());
                // Never a slot the kernel has not released by a valid advance.
                assert!(
                    kfill.producer().wrapping_sub(fill_trusted) <= size,
                    "fill ring overfilled"
                );
            }
        }
    }
});
