//! Loom models of xdpool's cross-worker return: port A's worker receives a frame
//! and hands it (as a frag token of count 1, `frame_into_frag`) to port B's worker,
//! which sends it; B reaps the completion and returns the frame to A's pool through
//! `PoolRemote::release_frag` (A's return ring), never touching A's cache. Models:
//! B returns while A refills; B and a mirror port C return two references of one
//! chunk while A refills; B returns while A's pool is destroyed. In each, every
//! frame ends up exactly once where the accounting says.
//!
//! `LOOM_MAX_PREEMPTIONS=2 cargo test -p pool --release --features loom --test loom_cross_worker`
#![cfg(feature = "loom")]

use loom::thread;
use pool::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

static REFILL_RUNS: AtomicUsize = AtomicUsize::new(0);
static MIRROR_RUNS: AtomicUsize = AtomicUsize::new(0);
static DESTROY_RUNS: AtomicUsize = AtomicUsize::new(0);

fn region(frames: u32) -> Arc<Region> {
    Region::new(RegionConfig {
        frames,
        chunk_size: 4096,
        hugepages: false,
        topology: Topology::single_node(),
    })
    .unwrap()
}

fn pool(r: &Arc<Region>) -> PoolOwner {
    PoolOwner::new(
        r,
        PoolConfig {
            id: 1,
            preferred_node: 0,
            ring_size: 2,
            bulk: 2,
        },
    )
}

/// A frame "received" by A: allocated, then turned into the token B will hold.
fn received(a: &mut PoolOwner) -> Frag {
    let f = a.alloc().expect("a free frame");
    a.frame_into_frag(f, 256, 60).expect("inside the chunk")
}

/// Allocates until the pool is dry; returns the frame indexes, sorted.
fn drain(a: &mut PoolOwner, mut got: Vec<Frame>) -> Vec<Frame> {
    while let Some(f) = a.alloc() {
        got.push(f);
    }
    got.sort_by_key(|f| f.index());
    got
}

#[test]
fn frame_sent_by_worker_b_returns_to_a_while_a_refills() {
    loom::model(|| {
        let r = region(3);
        let mut a = pool(&r);
        // Two frames forwarded to B's port; B completes both, in order.
        let (t1, t2) = (received(&mut a), received(&mut a));
        let remote = a.remote();
        let b = thread::spawn(move || {
            remote.release_frag(t1);
            remote.release_frag(t2);
        });
        // A keeps refilling its fill ring until it has every frame back (as a
        // worker's refill does pass after pass), whatever the order of B's returns.
        let mut got = Vec::new();
        while got.len() < 3 {
            match a.alloc() {
                Some(f) => got.push(f),
                None => thread::yield_now(),
            }
        }
        b.join().unwrap();
        let got = drain(&mut a, got);
        assert_eq!(
            got.iter().map(|f| f.index()).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "each frame exactly once"
        );
        let acc = a.accounting();
        acc.check().unwrap();
        assert_eq!((acc.application, acc.ring), (3, 0));
        let s = a.stats();
        assert_eq!(s.recycle_ring, 2, "both returns came through A's ring");
        assert_eq!(s.recycle_cached, 0, "B never touched A's cache");
        for f in got {
            a.recycle(f);
        }
        REFILL_RUNS.fetch_add(1, Ordering::Relaxed);
    });
    let runs = REFILL_RUNS.load(Ordering::Relaxed);
    println!("cross-worker return while refilling: {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only");
}

#[test]
fn forwarded_and_mirrored_references_return_the_chunk_once() {
    loom::model(|| {
        let r = region(2);
        let mut a = pool(&r);
        let to_b = received(&mut a);
        let to_c = a.ref_frag(&to_b);
        let (rb, rc) = (a.remote(), a.remote());
        let b = thread::spawn(move || rb.release_frag(to_b));
        let c = thread::spawn(move || rc.release_frag(to_c));
        let early = a.alloc();
        b.join().unwrap();
        c.join().unwrap();
        let got = drain(&mut a, early.into_iter().collect());
        assert_eq!(
            got.iter().map(|f| f.index()).collect::<Vec<_>>(),
            vec![0, 1],
            "the shared chunk came back once"
        );
        let s = a.stats();
        assert_eq!(
            (s.recycle_ring, s.recycle_released_refcnt),
            (1, 1),
            "one last release, one that was not"
        );
        a.accounting().check().unwrap();
        for f in got {
            a.recycle(f);
        }
        MIRROR_RUNS.fetch_add(1, Ordering::Relaxed);
    });
    assert!(MIRROR_RUNS.load(Ordering::Relaxed) > 1);
}

#[test]
fn frame_returned_by_worker_b_while_a_pool_is_destroyed() {
    loom::model(|| {
        let r = region(2);
        let mut a = pool(&r);
        let token = received(&mut a);
        let remote = a.remote();
        let b = thread::spawn(move || remote.release_frag(token));
        // A's worker stops: its pool goes while B still holds A's frame.
        let report = a.destroy();
        b.join().unwrap();
        assert_eq!(report.inflight_now(), 0, "the late return is accounted");
        let acc = report.accounting();
        acc.check().unwrap();
        // Before the close: the ring, drained by destroy; after: the global list.
        assert_eq!((acc.free, acc.ring, acc.application), (2, 0, 0), "{acc:?}");
        DESTROY_RUNS.fetch_add(1, Ordering::Relaxed);
    });
    assert!(DESTROY_RUNS.load(Ordering::Relaxed) > 1);
}
