//! `PoolOwner::frame_into_frag`: a received frame shared by reference (mirror) with no
//! copy, its chunk recycled at the last reference, the owner map exact throughout.
#![cfg(not(feature = "loom"))]

use pool::*;

mod common;
use common::{ok, ok_with, pool, region};

/// One frame through the fill ring and back as an RX descriptor at `headroom`.
fn receive(p: &mut PoolOwner, headroom: u32, len: u32) -> (Frame, u64) {
    let mut addrs = [0u64; 1];
    assert_eq!(p.fill_bulk(&mut addrs), 1);
    let rx = addrs[0] + headroom as u64;
    (p.take_rx(rx, len).unwrap(), rx)
}

#[test]
fn mirror_by_reference_two_tx_descriptors_one_chunk() {
    let r = region(16, 2048, 1);
    let mut p = pool(&r, 1);
    let (frame, rx) = receive(&mut p, 256, 100);
    let idx = frame.index();
    let frag = p.frame_into_frag(frame, 256, 100).unwrap();
    assert_eq!(
        (frag.addr(), frag.offset(), frag.len(), frag.frame_index()),
        (rx, 256, 100, idx)
    );
    let second = p.ref_frag(&frag);
    let s0 = p.stats();
    let a = p.give_tx_frag(frag).unwrap();
    let b = p.give_tx_frag(second).unwrap();
    assert_eq!(
        (a, b),
        (rx, rx),
        "both descriptors point at the received bytes"
    );
    // The chunk is shared, so it stays with the application while TX holds its refs.
    let acc = ok_with(&r, &[&p]);
    assert_eq!((acc.application, acc.tx), (1, 0));
    p.take_completion(a).unwrap();
    assert_eq!(r.location(idx), Some(Location::Application));
    let s1 = p.stats();
    assert_eq!(s1.recycle_released_refcnt - s0.recycle_released_refcnt, 1);
    assert_eq!(s1.recycle_cached, s0.recycle_cached);
    p.take_completion(b).unwrap();
    assert_eq!(
        r.location(idx),
        Some(Location::Cached),
        "last reference recycles"
    );
    let s2 = p.stats();
    assert_eq!(s2.recycle_cached - s1.recycle_cached, 1);
    assert_eq!(s2.recycle_released_refcnt, s1.recycle_released_refcnt);
    // A third completion for the same address is a double completion.
    assert_eq!(
        p.take_completion(a),
        Err(FrameError::DoubleRelease { addr: a })
    );
    assert_eq!(p.stats().double_release - s2.double_release, 1);
    let acc = ok_with(&r, &[&p]);
    assert_eq!((acc.application, acc.tx), (0, 0));
    // No frame left the pool or came into it: conversion is bookkeeping only.
    assert_eq!((p.stats().hold, p.stats().release), (s0.hold, s0.release));
}

#[test]
fn unsplit_conversion_pays_no_atomic_and_goes_to_tx_whole() {
    let r = region(16, 2048, 1);
    let mut p = pool(&r, 1);
    let (frame, _) = receive(&mut p, 0, 64);
    let idx = frame.index();
    let frag = p.frame_into_frag(frame, 0, 64).unwrap();
    let s0 = p.stats();
    p.release_frag(frag);
    assert_eq!(r.location(idx), Some(Location::Cached));
    let s1 = p.stats();
    assert_eq!(s1.recycle_released_refcnt, s0.recycle_released_refcnt);
    assert_eq!(s1.recycle_cached - s0.recycle_cached, 1);
    // Alone in TX, the whole chunk is tracked as TX.
    let (frame, rx) = receive(&mut p, 128, 64);
    let idx = frame.index();
    let frag = p.frame_into_frag(frame, 128, 64).unwrap();
    assert_eq!(p.give_tx_frag(frag).unwrap(), rx);
    assert_eq!(r.location(idx), Some(Location::Tx));
    assert_eq!(ok_with(&r, &[&p]).tx, 1);
    p.take_completion(rx).unwrap();
    assert_eq!(r.location(idx), Some(Location::Cached));
    assert!(matches!(
        p.take_completion(rx),
        Err(FrameError::DoubleRelease { .. })
    ));
    ok_with(&r, &[&p]);
}

#[test]
fn application_reference_outlives_tx_reference() {
    let r = region(16, 2048, 1);
    let mut p = pool(&r, 1);
    let (frame, rx) = receive(&mut p, 0, 60);
    let idx = frame.index();
    let frag = p.frame_into_frag(frame, 0, 60).unwrap();
    let kept = p.ref_frag(&frag);
    p.give_tx_frag(frag).unwrap();
    p.take_completion(rx).unwrap();
    assert_eq!(
        r.location(idx),
        Some(Location::Application),
        "still referenced"
    );
    p.release_frag(kept);
    assert_eq!(r.location(idx), Some(Location::Cached));
    ok_with(&r, &[&p]);
}

#[test]
fn bad_ranges_recycle_the_frame_and_say_why() {
    let r = region(16, 2048, 1);
    let mut p = pool(&r, 1);
    for (offset, len) in [(0, 0), (2000, 100), (u32::MAX, 2), (2048, 1)] {
        let (frame, _) = receive(&mut p, 0, 64);
        let idx = frame.index();
        let err = p.frame_into_frag(frame, offset, len).unwrap_err();
        assert!(
            matches!(err, FrameError::OutOfChunk { len: l, .. } if l == len),
            "{offset}+{len}: {err:?}"
        );
        assert_eq!(r.location(idx), Some(Location::Cached), "not leaked");
    }
    // The full chunk is a valid range.
    let (frame, _) = receive(&mut p, 0, 64);
    let f = p.frame_into_frag(frame, 0, 2048).unwrap();
    assert_eq!(f.len(), 2048);
    p.release_frag(f);
    let acc = ok_with(&r, &[&p]);
    assert_eq!(acc.application, 0);
}

#[test]
fn foreign_frames_are_refused_and_counted() {
    let r = region(8, 2048, 1);
    let other = region(8, 2048, 1);
    let mut p = pool(&r, 1);
    let mut q = pool(&other, 2);
    let stranger = q.alloc().unwrap();
    let addr = stranger.addr();
    let s0 = p.stats();
    assert_eq!(
        p.frame_into_frag(stranger, 0, 64),
        Err(FrameError::Foreign { addr })
    );
    assert_eq!(p.stats().foreign_addr - s0.foreign_addr, 1);
    ok_with(&r, &[&p]);
}

#[test]
fn a_frame_of_another_pool_is_adopted() {
    let r = region(16, 2048, 1);
    let mut a = pool(&r, 1);
    let mut b = pool(&r, 2);
    let frame = a.alloc().unwrap();
    let idx = frame.index();
    let (a0, b0) = (a.stats(), b.stats());
    let frag = b.frame_into_frag(frame, 0, 64).unwrap();
    assert_eq!(b.stats().hold - b0.hold, 1);
    assert_eq!(a.stats().release - a0.release, 1);
    let twin = b.ref_frag(&frag);
    let t = b.give_tx_frag(frag).unwrap();
    let u = b.give_tx_frag(twin).unwrap();
    b.take_completion(t).unwrap();
    b.take_completion(u).unwrap();
    assert_eq!(r.location(idx), Some(Location::Cached));
    assert_eq!(
        b.stats().recycle_cached - b0.recycle_cached,
        1,
        "into b's cache"
    );
    ok(&r);
}

#[test]
fn reclaim_kernel_drops_both_mirror_references() {
    let r = region(16, 2048, 1);
    let mut p = pool(&r, 1);
    let (frame, _) = receive(&mut p, 0, 64);
    let idx = frame.index();
    let frag = p.frame_into_frag(frame, 0, 64).unwrap();
    let twin = p.ref_frag(&frag);
    p.give_tx_frag(frag).unwrap();
    p.give_tx_frag(twin).unwrap();
    assert_eq!(p.reclaim_kernel(), 2);
    assert_eq!(r.location(idx), Some(Location::Free));
    let acc = ok_with(&r, &[&p]);
    assert_eq!((acc.application, acc.tx, acc.fill), (0, 0, 0));
}
