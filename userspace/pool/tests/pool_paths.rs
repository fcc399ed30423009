//! Every alloc / recycle path and the counter each one moves, with the accounting
//! invariant checked after each scenario.
#![cfg(not(feature = "loom"))]

use pool::*;
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{ok, ok_with, pool, region};

/// Counters that changed between two snapshots, as (name, delta).
fn delta(a: &PoolStats, b: &PoolStats) -> Vec<(&'static str, u64)> {
    let pairs = [
        ("alloc_fast", a.alloc_fast, b.alloc_fast),
        ("alloc_slow", a.alloc_slow, b.alloc_slow),
        (
            "alloc_slow_high_order",
            a.alloc_slow_high_order,
            b.alloc_slow_high_order,
        ),
        ("alloc_empty", a.alloc_empty, b.alloc_empty),
        ("alloc_refill", a.alloc_refill, b.alloc_refill),
        ("alloc_waive", a.alloc_waive, b.alloc_waive),
        ("alloc_failed", a.alloc_failed, b.alloc_failed),
        ("recycle_cached", a.recycle_cached, b.recycle_cached),
        (
            "recycle_cache_full",
            a.recycle_cache_full,
            b.recycle_cache_full,
        ),
        ("recycle_ring", a.recycle_ring, b.recycle_ring),
        (
            "recycle_ring_full",
            a.recycle_ring_full,
            b.recycle_ring_full,
        ),
        (
            "recycle_released_refcnt",
            a.recycle_released_refcnt,
            b.recycle_released_refcnt,
        ),
        ("hold", a.hold, b.hold),
        ("release", a.release, b.release),
        ("double_release", a.double_release, b.double_release),
        ("foreign_addr", a.foreign_addr, b.foreign_addr),
        ("after_destroy", a.after_destroy, b.after_destroy),
        ("not_in_fill", a.not_in_fill, b.not_in_fill),
        ("not_in_tx", a.not_in_tx, b.not_in_tx),
    ];
    pairs
        .iter()
        .filter(|(_, x, y)| x != y)
        .map(|(n, x, y)| (*n, y - x))
        .collect()
}

#[test]
fn first_alloc_is_slow_then_fast_then_cached() {
    let r = region(256, 2048, 1);
    let mut p = pool(&r, 1);
    let s0 = p.stats();
    let f = p.alloc().unwrap();
    // cache was empty, ring empty -> bulk of 64 from the global list
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("alloc_slow", 1), ("alloc_empty", 1), ("hold", 64)]
    );
    assert_eq!(p.cached(), 63);
    assert_eq!(r.location(f.index()), Some(Location::Application));
    let s1 = p.stats();
    let g = p.alloc().unwrap();
    assert_eq!(delta(&s1, &p.stats()), vec![("alloc_fast", 1)]);
    assert_ne!(f.index(), g.index());
    let s2 = p.stats();
    p.recycle(f);
    p.recycle(g);
    assert_eq!(delta(&s2, &p.stats()), vec![("recycle_cached", 2)]);
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.cached, a.free, a.application), (64, 192, 0));
    assert_eq!(p.stats().inflight, 64);
}

#[test]
fn cache_full_goes_to_ring_and_refill_takes_it_back() {
    let r = region(512, 2048, 1);
    let mut p = pool(&r, 1);
    let frames: Vec<Frame> = (0..200).map(|_| p.alloc().unwrap()).collect();
    let s = p.stats();
    assert_eq!((s.alloc_slow, s.alloc_fast, s.hold), (4, 196, 256));
    assert_eq!(p.cached(), 56);
    let s0 = p.stats();
    for f in frames {
        p.recycle(f);
    }
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![
            ("recycle_cached", 72),
            ("recycle_cache_full", 128),
            ("recycle_ring", 128)
        ]
    );
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.cached, a.ring, a.free), (128, 128, 256));
    // Empty the cache, then the next alloc refills 64 from the ring.
    let held: Vec<Frame> = (0..128).map(|_| p.alloc().unwrap()).collect();
    let s1 = p.stats();
    let f = p.alloc().unwrap();
    assert_eq!(delta(&s1, &p.stats()), vec![("alloc_refill", 1)]);
    assert_eq!(p.cached(), 63);
    assert_eq!(ok_with(&r, &[&p]).ring, 64);
    p.recycle(f);
    for f in held {
        p.recycle(f);
    }
    ok_with(&r, &[&p]);
}

#[test]
fn remote_recycle_uses_ring_and_full_ring_goes_global() {
    let r = region(64, 2048, 1);
    let mut p = PoolOwner::new(
        &r,
        PoolConfig {
            id: 3,
            ring_size: 4,
            ..Default::default()
        },
    );
    let remote = p.remote();
    let frames: Vec<Frame> = (0..6).map(|_| p.alloc().unwrap()).collect();
    let s0 = p.stats();
    let h = std::thread::spawn(move || {
        for f in frames {
            remote.recycle(f);
        }
    });
    h.join().unwrap();
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![
            ("recycle_ring", 4),
            ("recycle_ring_full", 2),
            ("release", 2)
        ]
    );
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.ring, a.free, a.cached), (4, 2, 58));
    assert_eq!(p.stats().inflight, 62);
}

#[test]
fn exhaustion_gives_none_and_counts() {
    let r = region(64, 4096, 1);
    let mut p = pool(&r, 1);
    let held: Vec<Frame> = (0..64).map(|_| p.alloc().unwrap()).collect();
    let s0 = p.stats();
    assert!(p.alloc().is_none());
    assert!(p.alloc_frag(100).is_none());
    assert!(p.alloc_high_order(2).is_none());
    let mut out = [0u64; 4];
    assert_eq!(p.fill_bulk(&mut out), 0);
    let d = delta(&s0, &p.stats());
    // high order goes straight to the global lists: no ring look, so no `empty`
    assert_eq!(d, vec![("alloc_empty", 3), ("alloc_failed", 4)]);
    assert_eq!(ok_with(&r, &[&p]).application, 64);
    for f in held {
        p.recycle(f);
    }
    assert_eq!(ok_with(&r, &[&p]).cached, 64);
}

#[test]
fn waive_sends_other_node_frames_to_their_list() {
    // Two fake nodes: frames 0..64 on node 0, 64..128 on node 1.
    let r = region(128, 2048, 2);
    let mut p0 = PoolOwner::new(
        &r,
        PoolConfig {
            id: 0,
            preferred_node: 0,
            ..Default::default()
        },
    );
    let mut p1 = PoolOwner::new(
        &r,
        PoolConfig {
            id: 1,
            preferred_node: 1,
            ..Default::default()
        },
    );
    let from_node1: Vec<Frame> = (0..10).map(|_| p1.alloc().unwrap()).collect();
    assert!(from_node1.iter().all(|f| r.node_of(f.index()) == Some(1)));
    // A node-0 frame and ten node-1 frames come back through p0's ring.
    let mine = p0.alloc().unwrap();
    let held: Vec<Frame> = (0..63).map(|_| p0.alloc().unwrap()).collect();
    assert_eq!(p0.cached(), 0);
    let remote0 = p0.remote();
    remote0.recycle(mine);
    for f in from_node1 {
        remote0.recycle(f);
    }
    let s0 = p0.stats();
    let p1_before = p1.stats();
    let got = p0.alloc().unwrap();
    assert_eq!(r.node_of(got.index()), Some(0));
    assert_eq!(
        delta(&s0, &p0.stats()),
        vec![("alloc_refill", 1), ("alloc_waive", 10), ("release", 10)]
    );
    // p0 adopted the frames when they came back to it and released them on waive.
    assert_eq!(p0.stats().hold, s0.hold);
    assert_eq!(delta(&p1_before, &p1.stats()), vec![]);
    assert_eq!(r.free_per_node(), vec![0, 10]);
    ok_with(&r, &[&p0, &p1]);
    p0.recycle(got);
    for f in held {
        p0.recycle(f);
    }
    let total_inflight = p0.stats().inflight + p1.stats().inflight;
    let a = ok_with(&r, &[&p0, &p1]);
    assert_eq!(total_inflight, a.total - a.free);
}

#[test]
fn frags_pack_then_last_release_recycles() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 1);
    let frags: Vec<Frag> = (0..8).map(|_| p.alloc_frag(200).unwrap()).collect();
    let chunk = frags[0].frame_index();
    for (i, f) in frags.iter().enumerate() {
        assert_eq!(f.frame_index(), chunk);
        assert_eq!(f.offset(), i as u32 * 256, "200 rounds up to 256");
        assert_eq!(f.len(), 256);
        assert_eq!(f.addr(), chunk as u64 * 2048 + i as u64 * 256);
    }
    // The ninth does not fit: a new chunk.
    let ninth = p.alloc_frag(200).unwrap();
    assert_ne!(ninth.frame_index(), chunk);
    let s0 = p.stats();
    for f in frags {
        p.release_frag(f);
    }
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("recycle_cached", 1), ("recycle_released_refcnt", 7)]
    );
    assert_eq!(r.location(chunk), Some(Location::Cached));
    // The open chunk is recycled when drained after its only frag went.
    p.release_frag(ninth);
    let s1 = p.stats();
    p.frag_drain();
    assert_eq!(delta(&s1, &p.stats()), vec![("recycle_cached", 1)]);
    let a = ok_with(&r, &[&p]);
    assert_eq!(a.application, 0);
}

#[test]
fn whole_frag_and_alloc_sized_choose_by_size() {
    let r = region(64, 4096, 1);
    let mut p = pool(&r, 1);
    let _ = p.alloc().map(|f| p.recycle(f));
    let s0 = p.stats();
    let w = p.alloc_frag(3000).unwrap();
    assert_eq!(w.offset(), 0);
    p.release_frag(w);
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("alloc_fast", 1), ("recycle_cached", 1)],
        "unsplit: no refcnt release"
    );
    match p.alloc_sized(2049).unwrap() {
        Buf::Whole(f) => p.recycle(f),
        b => panic!("expected a whole chunk, got {b:?}"),
    }
    match p.alloc_sized(2048).unwrap() {
        Buf::Frag(f) => {
            assert_eq!(f.len(), 2048);
            p.release_frag(f)
        }
        b => panic!("expected a frag, got {b:?}"),
    }
    assert!(p.alloc_sized(0).is_none());
    assert!(p.alloc_sized(4097).is_none());
    p.frag_drain();
    assert_eq!(ok_with(&r, &[&p]).application, 0);
}

#[test]
fn ref_frag_takes_a_reference_and_remote_release_counts() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 1);
    let whole = p.alloc_frag(2048).unwrap();
    let clone = p.ref_frag(&whole);
    assert_eq!(clone.addr(), whole.addr());
    let s0 = p.stats();
    let remote = p.remote();
    std::thread::spawn(move || remote.release_frag(clone))
        .join()
        .unwrap();
    assert_eq!(delta(&s0, &p.stats()), vec![("recycle_released_refcnt", 1)]);
    assert_eq!(r.location(whole.frame_index()), Some(Location::Application));
    let idx = whole.frame_index();
    p.release_frag(whole);
    assert_eq!(r.location(idx), Some(Location::Cached));
    // After a split chunk drains to zero its count is 1 again: a whole frag of it
    // takes the no-atomic path (released_refcnt does not move).
    let s1 = p.stats();
    let again = p.alloc_frag(2048).unwrap();
    assert_eq!(again.frame_index(), idx);
    p.release_frag(again);
    assert_eq!(
        delta(&s1, &p.stats()),
        vec![("alloc_fast", 1), ("recycle_cached", 1)]
    );
    ok_with(&r, &[&p]);
}

#[test]
fn high_order_is_counted_apart() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 1);
    let s0 = p.stats();
    let jumbo = p.alloc_high_order(5).unwrap();
    assert_eq!(jumbo.len(), 5);
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("alloc_slow_high_order", 1), ("hold", 5)]
    );
    assert!(p.alloc_high_order(100).is_none());
    assert_eq!(ok_with(&r, &[&p]).application, 5);
    for f in jumbo {
        p.recycle(f);
    }
    assert_eq!(ok_with(&r, &[&p]).cached, 5);
}

#[test]
fn rx_drop_puts_the_frame_straight_back_in_fill() {
    let r = region(256, 2048, 1);
    let mut p = pool(&r, 1);
    let mut addrs = [0u64; 4];
    assert_eq!(p.fill_bulk(&mut addrs), 4);
    let mut q = pool(&r, 2);
    let mut other = [0u64; 1];
    assert_eq!(q.fill_bulk(&mut other), 1);
    let a0 = ok_with(&r, &[&p]);
    let s0 = p.stats();
    // The chunk's address comes back (headroom dropped); the frame stays in fill.
    assert_eq!(p.rx_drop(addrs[2] + 256, 64), Ok(addrs[2]));
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("alloc_fast", 1), ("recycle_cached", 1)]
    );
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.fill, a.application, a.cached), (5, 0, a0.cached));
    // Same errors and counters as take_rx: foreign, past the chunk, not in fill.
    let s1 = p.stats();
    assert_eq!(
        p.rx_drop(256 * 2048, 64),
        Err(FrameError::Foreign { addr: 256 * 2048 })
    );
    assert!(matches!(
        p.rx_drop(addrs[1] + 2000, 100),
        Err(FrameError::OutOfChunk { .. })
    ));
    let f = p.take_rx(addrs[0], 64).unwrap();
    assert_eq!(
        p.rx_drop(addrs[0], 64),
        Err(FrameError::NotInFill {
            addr: addrs[0],
            location: Location::Application
        })
    );
    assert_eq!(
        delta(&s1, &p.stats()),
        vec![("foreign_addr", 2), ("not_in_fill", 1)]
    );
    // Another pool's fill frame is refused too.
    assert!(matches!(
        p.rx_drop(other[0], 64),
        Err(FrameError::NotInFill { .. })
    ));
    // A frame that went through rx_drop is an ordinary fill frame afterwards.
    let g = p.take_rx(addrs[2], 64).unwrap();
    p.recycle(f);
    p.recycle(g);
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.fill, a.cached), (3, a0.cached + 2));
}

#[test]
fn fill_rx_tx_completion_track_the_owner_map() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 1);
    let mut addrs = [0u64; 8];
    assert_eq!(p.fill_bulk(&mut addrs), 8);
    assert_eq!(ok_with(&r, &[&p]).fill, 8);
    assert!(addrs.iter().all(|a| a % 2048 == 0));
    // RX with 256 bytes of headroom.
    let mut f = p.take_rx(addrs[0] + 256, 1000).unwrap();
    assert_eq!(f.addr(), addrs[0]);
    assert_eq!(r.frame_bytes(&f, 256, 1000).map(|b| b.len()), Some(1000));
    let s0 = p.stats();
    assert_eq!(
        p.take_rx(addrs[0], 64),
        Err(FrameError::NotInFill {
            addr: addrs[0],
            location: Location::Application
        })
    );
    assert_eq!(
        p.take_rx(64 * 2048, 64),
        Err(FrameError::Foreign { addr: 64 * 2048 })
    );
    assert!(matches!(
        p.take_rx(addrs[1] + 2000, 100),
        Err(FrameError::OutOfChunk { .. })
    ));
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("foreign_addr", 2), ("not_in_fill", 1)]
    );
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.fill, a.application), (7, 1));
    r.write_frame(&mut f, 0, &[0xAB; 64]).unwrap();
    let tx = p.give_tx(f, 128).unwrap();
    assert_eq!(tx, addrs[0] + 128);
    assert_eq!(ok_with(&r, &[&p]).tx, 1);
    let s1 = p.stats();
    p.take_completion(tx).unwrap();
    assert_eq!(delta(&s1, &p.stats()), vec![("recycle_cached", 1)]);
    // Completion twice: the frame is already back.
    assert_eq!(
        p.take_completion(tx),
        Err(FrameError::DoubleRelease { addr: tx })
    );
    // Completion of a frame that is in the fill ring.
    assert_eq!(
        p.take_completion(addrs[2]),
        Err(FrameError::NotInTx {
            addr: addrs[2],
            location: Location::Fill
        })
    );
    let s = p.stats();
    assert_eq!((s.double_release, s.not_in_tx), (1, 1));
    assert_eq!(r.misuse(), RegionMisuse::default());
    ok_with(&r, &[&p]);
}

#[test]
fn frags_share_a_chunk_in_tx() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 1);
    let a = p.alloc_frag(100).unwrap();
    let b = p.alloc_frag(100).unwrap();
    let idx = a.frame_index();
    p.frag_drain();
    let ta = p.give_tx_frag(a).unwrap();
    let tb = p.give_tx_frag(b).unwrap();
    assert_eq!((ta, tb), (idx as u64 * 2048, idx as u64 * 2048 + 128));
    assert_eq!(
        r.location(idx),
        Some(Location::Application),
        "a split chunk stays with the application"
    );
    p.take_completion(tb).unwrap();
    assert_eq!(r.location(idx), Some(Location::Application));
    p.take_completion(ta).unwrap();
    assert_eq!(r.location(idx), Some(Location::Cached));
    assert!(p.take_completion(ta).is_err());
    // A lone whole frag in TX is tracked as TX.
    let w = p.alloc_frag(2048).unwrap();
    let tw = p.give_tx_frag(w).unwrap();
    assert_eq!(ok_with(&r, &[&p]).tx, 1);
    p.take_completion(tw).unwrap();
    ok_with(&r, &[&p]);
}

#[test]
fn reclaim_kernel_returns_fill_and_tx_frames() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 1);
    let mut addrs = [0u64; 10];
    p.fill_bulk(&mut addrs);
    let f = p.alloc().unwrap();
    p.give_tx(f, 0).unwrap();
    let a = p.alloc_frag(100).unwrap();
    let b = p.alloc_frag(100).unwrap();
    p.give_tx_frag(a).unwrap();
    let keep = p.alloc().unwrap();
    let s0 = p.stats();
    assert_eq!(p.reclaim_kernel(), 12);
    let a = ok_with(&r, &[&p]);
    assert_eq!(
        (a.fill, a.tx, a.application),
        (0, 0, 2),
        "kept frame + frag chunk"
    );
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![("recycle_released_refcnt", 1), ("release", 11)]
    );
    p.release_frag(b);
    p.recycle(keep);
    p.frag_drain();
    assert_eq!(ok_with(&r, &[&p]).application, 0);
    // An RX for a reclaimed frame is refused.
    assert!(matches!(
        p.take_rx(addrs[0], 64),
        Err(FrameError::NotInFill {
            location: Location::Free,
            ..
        })
    ));
}

#[test]
fn frames_move_between_pools_with_hold_and_release() {
    let r = region(128, 2048, 1);
    let mut a = pool(&r, 1);
    let mut b = pool(&r, 2);
    let f = a.alloc().unwrap();
    let (a0, b0) = (a.stats(), b.stats());
    b.recycle(f);
    assert_eq!(delta(&a0, &a.stats()), vec![("release", 1)]);
    assert_eq!(
        delta(&b0, &b.stats()),
        vec![("recycle_cached", 1), ("hold", 1)]
    );
    let acc = ok(&r);
    assert_eq!(
        a.stats().inflight + b.stats().inflight,
        acc.total - acc.free
    );
}

#[test]
fn destroy_releases_cache_and_ring_and_routes_late_returns_global() {
    let r = region(128, 2048, 1);
    let mut p = PoolOwner::new(
        &r,
        PoolConfig {
            id: 7,
            ..Default::default()
        },
    );
    let remote = p.remote();
    let held: Vec<Frame> = (0..3).map(|_| p.alloc().unwrap()).collect();
    let ring_frame = p.alloc().unwrap();
    remote.recycle(ring_frame);
    let report = p.destroy();
    assert_eq!(
        (
            report.pool_id,
            report.released_cached,
            report.released_ring,
            report.inflight
        ),
        (7, 60, 1, 3)
    );
    assert!(remote.is_destroyed());
    let a = ok(&r);
    assert_eq!((a.free, a.cached, a.ring, a.application), (125, 0, 0, 3));
    assert_eq!(report.retry(), 3);
    let e = report.wait(Duration::from_millis(20)).unwrap_err();
    assert!(
        e.to_string()
            .contains("stalled pool shutdown: pool 7: 3 inflight"),
        "{e}"
    );
    // Late returns from another thread go to the global list, never the dead cache.
    let r2 = remote.clone();
    std::thread::spawn(move || {
        for f in held {
            r2.recycle(f);
        }
    })
    .join()
    .unwrap();
    let s = remote.stats();
    assert_eq!((s.after_destroy, s.inflight, s.recycle_ring), (3, 0, 1));
    report.wait(Duration::from_millis(20)).unwrap();
    let a = ok(&r);
    assert_eq!(a.free, 128);
}

#[test]
fn dropping_an_owner_tears_it_down() {
    let r = region(64, 2048, 1);
    {
        let mut p = pool(&r, 1);
        let f = p.alloc().unwrap();
        p.recycle(f);
        let _open = p.alloc_frag(64).map(|f| p.release_frag(f));
    }
    assert_eq!(ok(&r).free, 64);
}

#[test]
fn foreign_region_tokens_are_caught_and_counted() {
    let r1 = region(64, 2048, 1);
    let r2 = region(64, 2048, 1);
    let mut p1 = pool(&r1, 1);
    let mut p2 = pool(&r2, 2);
    let f = p2.alloc().unwrap();
    let g = p2.alloc().unwrap();
    let frag = p2.alloc_frag(100).unwrap();
    p1.recycle(f);
    p1.remote().recycle(g);
    p1.release_frag(frag);
    assert_eq!(p1.stats().foreign_addr, 3);
    assert_eq!(
        ok_with(&r1, &[&p1, &p2]).application,
        0,
        "nothing of r1 moved"
    );
    assert!(matches!(
        p1.give_tx(p2.alloc().unwrap(), 0),
        Err(FrameError::DoubleRelease { .. }) | Err(FrameError::Foreign { .. })
    ));
    let other = p2.alloc_frag(64).unwrap();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p1.ref_frag(&other)));
    assert!(res.is_err(), "ref_frag on foreign memory must not succeed");
}

#[test]
fn owner_is_not_send() {
    // Compile-time property: a PoolOwner cannot cross threads; PoolRemote can.
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<PoolRemote>();
    assert_send_sync::<Arc<Region>>();
    // `static_assertions`-style negative check without a crate:
    trait NotSend {
        const IS_SEND: bool = false;
    }
    impl<T: ?Sized> NotSend for T {}
    struct Probe<T: ?Sized>(std::marker::PhantomData<T>);
    #[allow(dead_code)]
    impl<T: ?Sized + Send> Probe<T> {
        const IS_SEND: bool = true;
    }
    const { assert!(!Probe::<PoolOwner>::IS_SEND) };
    const { assert!(Probe::<PoolRemote>::IS_SEND) };
    const { assert!(!Probe::<*const u8>::IS_SEND) };
}

#[test]
fn owner_overflow_cache_then_ring_then_global() {
    let r = region(256, 2048, 1);
    let mut p = PoolOwner::new(
        &r,
        PoolConfig {
            id: 4,
            ring_size: 8,
            ..Default::default()
        },
    );
    let frames: Vec<Frame> = (0..150).map(|_| p.alloc().unwrap()).collect();
    let s0 = p.stats();
    let room = CACHE_SIZE - p.cached();
    for f in frames {
        p.recycle(f);
    }
    let spill = 150 - room as u64;
    assert_eq!(
        delta(&s0, &p.stats()),
        vec![
            ("recycle_cached", room as u64),
            ("recycle_cache_full", spill),
            ("recycle_ring", 8),
            ("recycle_ring_full", spill - 8),
            ("release", spill - 8),
        ]
    );
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.cached, a.ring), (CACHE_SIZE as u64, 8));
}

#[test]
fn hot_counters_reach_remote_readers_when_published() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 5);
    let remote = p.remote();
    let f = p.alloc().unwrap(); // slow path publishes
    p.recycle(f);
    let f = p.alloc().unwrap();
    p.recycle(f);
    let before = remote.stats();
    p.publish_stats();
    let after = remote.stats();
    assert_eq!((after.alloc_fast, after.recycle_cached), (1, 2));
    assert!(before.alloc_fast <= after.alloc_fast);
    assert_eq!(p.stats(), after);
}

#[test]
fn detected_topology_builds_a_region() {
    // This machine's real layout: one node here (no mbind), several on a NUMA host
    // (placement is bound and verified).
    let t = Topology::detect();
    let nodes = t.nodes();
    let r = Region::new(RegionConfig {
        frames: 64,
        chunk_size: 4096,
        hugepages: false,
        topology: t,
    })
    .unwrap();
    assert_eq!(r.free_per_node().len() as u32, nodes);
    ok(&r);
}

#[test]
fn fill_bulk_crosses_cache_refills_and_stops_at_exhaustion() {
    let r = region(256, 2048, 1);
    let mut p = pool(&r, 6);
    let mut out = vec![0u64; 200];
    assert_eq!(p.fill_bulk(&mut out), 200);
    let s = p.stats();
    assert_eq!((s.alloc_slow, s.alloc_fast, s.hold), (4, 196, 256));
    let mut uniq = out.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), 200, "an address went to the fill ring twice");
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.fill, a.cached), (200, 56));
    let mut more = vec![0u64; 100];
    assert_eq!(p.fill_bulk(&mut more), 56, "only what is left");
    assert_eq!(p.stats().alloc_failed, 1);
    assert_eq!(p.reclaim_kernel(), 256);
    assert_eq!(ok_with(&r, &[&p]).free, 256);
}

#[test]
fn destroyed_pool_slots_are_reused_once_unreachable() {
    let r = region(64, 2048, 1);
    for cycle in 0..20 {
        let mut p = pool(&r, cycle);
        let f = p.alloc().unwrap();
        p.recycle(f);
        let rep = p.destroy();
        assert_eq!(rep.inflight, 0);
    }
    assert_eq!(
        r.pools_registered(),
        1,
        "re-attach cycles must not grow the registry"
    );
    // A destroyed pool with a frame still out keeps its slot.
    let mut p = pool(&r, 100);
    let held = p.alloc().unwrap();
    let rep = p.destroy();
    let q = pool(&r, 101);
    assert_eq!(r.pools_registered(), 2);
    q.remote().recycle(held);
    assert_eq!(rep.inflight_now(), 0);
    drop(rep);
    drop(q);
    let _again = pool(&r, 102);
    assert_eq!(r.pools_registered(), 2);
    ok(&r);
}

/// A view of a frame needs its token: frames in a fill or TX ring, or released, have
/// no token to ask with (the `compile_fail` examples on `Region::frame_bytes` show
/// the borrow rules). With the token, the view is the descriptor's bytes, and only
/// inside the chunk.
#[test]
fn frame_bytes_takes_the_token_and_stays_in_its_chunk() {
    let r = region(64, 2048, 1);
    let mut p = pool(&r, 0);
    let mut addrs = [0u64; 1];
    assert_eq!(p.fill_bulk(&mut addrs), 1);
    // RX with headroom: the descriptor's offset in the chunk is addr - frame.addr().
    let rx = addrs[0] + 256;
    let mut f = p.take_rx(rx, 64).unwrap();
    let offset = (rx - f.addr()) as u32;
    r.write_frame(&mut f, offset, &[0x11; 64]).unwrap();
    assert_eq!(r.frame_bytes(&f, offset, 64), Some(&[0x11; 64][..]));
    assert_eq!(
        r.frame_bytes(&f, offset, 2048 - offset).map(|b| b.len()),
        Some(1792)
    );
    assert!(
        r.frame_bytes(&f, offset, 2048 - offset + 1).is_none(),
        "crosses the chunk"
    );
    assert!(
        r.frame_bytes(&f, 2048, 1).is_none(),
        "offset past the chunk"
    );
    assert_eq!(
        r.misuse(),
        RegionMisuse {
            foreign_addr: 2,
            use_after_release: 0
        }
    );
    let tx = p.give_tx(f, offset).unwrap();
    assert_eq!(r.location((tx / 2048) as u32), Some(Location::Tx));
    p.take_completion(tx).unwrap();
    ok_with(&r, &[&p]);
}
