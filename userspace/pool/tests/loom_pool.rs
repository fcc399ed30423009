//! Loom models of the lock-free pieces, through the crate's `sync` facade:
//! the return ring, the frag reference count, and destroy while another thread
//! returns a frame.
//!
//! `LOOM_MAX_PREEMPTIONS=2 cargo test -p pool --release --features loom --test loom_pool`
#![cfg(feature = "loom")]

use loom::thread;
use pool::*;
use std::sync::Arc;

static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static RING_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static DESTROY_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn region(frames: u32) -> Arc<Region> {
    Region::new(RegionConfig {
        frames,
        chunk_size: 4096,
        hugepages: false,
        topology: Topology::single_node(),
    })
    .unwrap()
}

fn pool(r: &Arc<Region>, ring: u32) -> PoolOwner {
    PoolOwner::new(
        r,
        PoolConfig {
            id: 1,
            preferred_node: 0,
            ring_size: ring,
            bulk: 2,
        },
    )
}

/// Two threads return frames through the ring while the owner allocates (refill
/// pops the ring). Nothing is lost or duplicated.
#[test]
fn return_ring_two_producers_and_refill() {
    loom::model(|| {
        let r = region(2);
        let mut p = pool(&r, 2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_eq!(p.cached(), 0);
        let (ra, rb) = (p.remote(), p.remote());
        let ta = thread::spawn(move || ra.recycle(a));
        let tb = thread::spawn(move || rb.recycle(b));
        // Races with the producers: may find 0, 1 or 2 frames.
        let early = p.alloc();
        ta.join().unwrap();
        tb.join().unwrap();
        let mut got = vec![];
        got.extend(early);
        while let Some(f) = p.alloc() {
            got.push(f);
        }
        let mut idx: Vec<u32> = got.iter().map(|f| f.index()).collect();
        idx.sort();
        assert_eq!(idx, vec![0, 1], "each frame exactly once");
        let a = p.accounting();
        a.check().unwrap();
        assert_eq!(a.application, 2);
        for f in got {
            p.recycle(f);
        }
        RING_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let runs = RING_RUNS.load(std::sync::atomic::Ordering::Relaxed);
    println!("return_ring: {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only");
}

/// Two frags of one chunk released on two threads: exactly one release is the last
/// and returns the chunk, once; the count is back to 1 afterwards.
#[test]
fn frag_count_last_release_exactly_once() {
    loom::model(|| {
        let r = region(2);
        let mut p = pool(&r, 4);
        let x = p.alloc_frag(64).unwrap();
        let y = p.alloc_frag(64).unwrap();
        assert_eq!(x.frame_index(), y.frame_index());
        let idx = x.frame_index();
        p.frag_drain();
        let remote = p.remote();
        let t = thread::spawn(move || remote.release_frag(y));
        p.release_frag(x);
        t.join().unwrap();
        let s = p.stats();
        assert_eq!(s.recycle_released_refcnt, 1, "one release was not the last");
        let loc = r.location(idx).unwrap();
        assert!(
            matches!(loc, Location::Cached | Location::Ring),
            "chunk returned: {loc:?}"
        );
        p.accounting().check().unwrap();
        // The count is 1 again: two whole-chunk frags later, the releases are
        // last-user releases (released_refcnt does not move).
        let before = p.stats().recycle_released_refcnt;
        let w1 = p.alloc_frag(4096).unwrap();
        let w2 = p.alloc_frag(4096).unwrap();
        p.release_frag(w1);
        p.release_frag(w2);
        assert_eq!(p.stats().recycle_released_refcnt, before);
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let runs = RUNS.load(std::sync::atomic::Ordering::Relaxed);
    println!("frag_count: {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only");
}

/// Destroy races with a remote return: the frame ends on the global list (through
/// the drained ring or the closed-ring path), never in a dead ring.
#[test]
fn destroy_while_returning() {
    loom::model(|| {
        let r = region(2);
        let mut p = pool(&r, 2);
        let f = p.alloc().unwrap();
        let remote = p.remote();
        let t = thread::spawn(move || remote.recycle(f));
        let report = p.destroy();
        t.join().unwrap();
        let a = r.accounting();
        a.check().unwrap();
        assert_eq!(a.free, 2, "frame stranded: {a:?}");
        assert_eq!(report.inflight_now(), 0);
        assert!(report.inflight <= 1);
        DESTROY_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let runs = DESTROY_RUNS.load(std::sync::atomic::Ordering::Relaxed);
    println!("destroy_while_returning: {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only");
}

static DRAIN_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static FULL_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The owner removes the frag bias (drain) while another thread releases a frag of
/// the same chunk: the chunk comes back exactly once, whoever is last.
#[test]
fn frag_drain_races_remote_release() {
    loom::model(|| {
        let r = region(2);
        let mut p = pool(&r, 4);
        let x = p.alloc_frag(64).unwrap();
        let y = p.alloc_frag(64).unwrap();
        let idx = x.frame_index();
        let remote = p.remote();
        let t = thread::spawn(move || remote.release_frag(y));
        p.release_frag(x);
        p.frag_drain();
        t.join().unwrap();
        let loc = r.location(idx).unwrap();
        assert!(
            matches!(loc, Location::Cached | Location::Ring),
            "chunk returned once: {loc:?}"
        );
        let a = p.accounting();
        a.check().unwrap();
        assert_eq!(a.application, 0);
        let s = p.stats();
        // Both releases before the drain: neither is last and the drain returns the
        // chunk; the remote release after the drain: it is the last user.
        assert!(matches!(s.recycle_released_refcnt, 1 | 2), "{s:?}");
        assert_eq!(
            s.recycle_cached + s.recycle_ring,
            1,
            "returned exactly once: {s:?}"
        );
        DRAIN_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let runs = DRAIN_RUNS.load(std::sync::atomic::Ordering::Relaxed);
    println!("frag_drain: {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only");
}

/// Two producers overflow a 2-slot ring: the overflow goes to the global list and
/// is counted; nothing is lost.
#[test]
fn ring_full_goes_global() {
    loom::model(|| {
        let r = region(3);
        let mut p = PoolOwner::new(
            &r,
            PoolConfig {
                id: 2,
                preferred_node: 0,
                ring_size: 2,
                bulk: 3,
            },
        );
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        let c = p.alloc().unwrap();
        let (ra, rb) = (p.remote(), p.remote());
        let ta = thread::spawn(move || {
            ra.recycle(a);
            ra.recycle(b);
        });
        let tb = thread::spawn(move || rb.recycle(c));
        ta.join().unwrap();
        tb.join().unwrap();
        let s = p.stats();
        assert_eq!(s.recycle_ring + s.recycle_ring_full, 3);
        assert_eq!(s.recycle_ring, 2);
        let acc = p.accounting();
        acc.check().unwrap();
        assert_eq!((acc.ring, acc.free), (2, 1));
        FULL_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let runs = FULL_RUNS.load(std::sync::atomic::Ordering::Relaxed);
    println!("ring_full: {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only");
}
