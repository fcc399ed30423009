//! `OwnerBatch`: the same paths, counters, misuse checks and accounting as
//! `PoolOwner::alloc` / `recycle`, with the cache count kept in the batch.
#![cfg(not(feature = "loom"))]

use pool::*;
use std::collections::HashSet;

mod common;
use common::{ok_with, pool, region};

#[test]
fn batch_counts_like_the_pool_and_writes_back_on_drop() {
    let r = region(256, 2048, 1);
    let mut p = pool(&r, 1);
    let held = {
        let mut b = p.batch();
        // Empty cache: the first alloc takes the slow path (a bulk of 64).
        let f = b.alloc().unwrap();
        assert_eq!(b.cached(), 63);
        let mut held = vec![f];
        for _ in 0..9 {
            held.push(b.alloc().unwrap());
        }
        for _ in 0..5 {
            b.recycle(held.pop().unwrap());
        }
        assert_eq!(b.cached(), 63 - 9 + 5);
        held
    };
    assert_eq!(p.cached(), 59, "drop wrote the count back");
    let s = p.stats();
    assert_eq!(
        (s.alloc_slow, s.alloc_fast, s.recycle_cached, s.hold),
        (1, 9, 5, 64)
    );
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.cached, a.application, a.free), (59, 5, 192));
    for f in held {
        assert_eq!(r.location(f.index()), Some(Location::Application));
        p.recycle(f);
    }
    assert_eq!(ok_with(&r, &[&p]).cached, 64);
    assert_eq!(p.stats().recycle_cached, 10);
}

#[test]
fn batch_alloc_never_hands_out_a_frame_twice_and_frames_stay_usable() {
    let r = region(300, 2048, 1);
    let mut p = pool(&r, 1);
    let mut b = p.batch();
    let mut seen = HashSet::new();
    let mut held = Vec::new();
    // Crosses the cache several times: slow path, then exhaustion.
    while let Some(f) = b.alloc() {
        assert!(
            seen.insert(f.index()),
            "frame {} handed out twice",
            f.index()
        );
        held.push(f);
    }
    assert_eq!(held.len(), 300);
    drop(b);
    assert_eq!(p.stats().alloc_failed, 1);
    assert_eq!(ok_with(&r, &[&p]).application, 300);
    r.write_frame(&mut held[7], 0, &[0x5A; 32]).unwrap();
    assert_eq!(r.frame_bytes(&held[7], 0, 32).unwrap(), &[0x5A; 32]);
    let idx = held[7].index();
    let mut b = p.batch();
    for f in held {
        b.recycle(f);
    }
    drop(b);
    let s = p.stats();
    // 128 fit the cache, the rest go to the return ring.
    assert_eq!(
        (s.recycle_cached, s.recycle_cache_full, s.recycle_ring),
        (128, 172, 172)
    );
    assert_eq!(r.location(idx), Some(Location::Cached), "released");
    let a = ok_with(&r, &[&p]);
    assert_eq!((a.cached, a.ring, a.free, a.application), (128, 172, 0, 0));
}

#[test]
fn batch_catches_foreign_and_adopts_other_pools_frames() {
    let r1 = region(128, 2048, 1);
    let r2 = region(128, 2048, 1);
    let mut p1 = pool(&r1, 1);
    let mut p2 = pool(&r2, 2);
    let mut p3 = pool(&r1, 3);
    let foreign = p2.alloc().unwrap();
    let foreign_frag = p2.alloc_frag(2000).unwrap();
    let other_pool = p3.alloc().unwrap();
    let idx = other_pool.index();
    let mut b = p1.batch();
    b.recycle(foreign);
    b.release_frag(foreign_frag);
    b.recycle(other_pool);
    assert_eq!(b.cached(), 1, "the other pool's frame was adopted");
    drop(b);
    let s = p1.stats();
    assert_eq!((s.foreign_addr, s.hold, s.recycle_cached), (2, 1, 1));
    assert_eq!(p3.stats().release, 1);
    assert_eq!(r1.location(idx), Some(Location::Cached));
    ok_with(&r1, &[&p1, &p2, &p3]);
    assert_eq!(
        ok_with(&r2, &[&p1, &p2, &p3]).application,
        2,
        "nothing of r2 moved"
    );
}

#[test]
fn batch_frags_whole_inline_split_through_the_pool() {
    let r = region(128, 2048, 1);
    let mut p = pool(&r, 1);
    let mut b = p.batch();
    let whole = b.alloc_frag(1500).unwrap();
    assert_eq!((whole.offset(), whole.len()), (0, 1500));
    let pieces: Vec<Frag> = (0..4).map(|_| b.alloc_frag(500).unwrap()).collect();
    let chunk = pieces[0].frame_index();
    assert!(pieces.iter().all(|f| f.frame_index() == chunk));
    assert!(b.alloc_frag(0).is_none() && b.alloc_frag(4096).is_none());
    b.release_frag(whole);
    let cached = b.cached();
    for f in pieces {
        b.release_frag(f);
    }
    assert_eq!(b.cached(), cached, "open frag chunk keeps its bias");
    drop(b);
    p.frag_drain();
    let s = p.stats();
    assert_eq!(s.recycle_released_refcnt, 4);
    assert_eq!(ok_with(&r, &[&p]).application, 0);
    // An unsplit frame through the unified count.
    let mut b = p.batch();
    let f = b.alloc().unwrap();
    b.recycle_unified(f);
    drop(b);
    assert_eq!(ok_with(&r, &[&p]).application, 0);
}

#[test]
fn a_leaked_batch_leaks_frames_but_never_hands_one_out_twice() {
    let r = region(128, 2048, 1);
    let mut p = pool(&r, 1);
    let f = p.alloc().unwrap();
    p.recycle(f);
    assert_eq!(p.cached(), 64);
    let mut b = p.batch();
    let g = b.alloc().unwrap();
    let g_idx = g.index();
    std::mem::forget(b);
    // The pool lent its cache to the batch: it starts over from the global list.
    assert_eq!(p.cached(), 0);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while let Some(h) = p.alloc() {
        assert_ne!(h.index(), g_idx);
        assert!(seen.insert(h.index()));
        out.push(h);
    }
    assert_eq!(
        seen.len(),
        64,
        "the 63 lent frames stay with the lost batch"
    );
    // Still a working pool, and a new batch still works.
    p.recycle(g);
    let mut b = p.batch();
    assert_eq!(b.alloc().map(|f| f.index()), Some(g_idx));
}
