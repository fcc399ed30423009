//! Loom models of pool teardown racing the threads that still return frames (the
//! window the kernel's page_pool had to close, netdev seed 004): each model
//! destroys, waits with the shipped `DestroyReport::wait` until `inflight_now()` is
//! 0, and checks the exact accounting BEFORE joining the returning threads, so a
//! release counted before its frame is listed fails the model.
//!
//! `LOOM_MAX_PREEMPTIONS=3 cargo test -p pool --profile checked --features loom --test loom_teardown`
#![cfg(feature = "loom")]

use loom::thread;
use pool::*;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Long enough never to expire inside a model (loom runs the waited-for threads
/// at every pause).
const WAIT: Duration = Duration::from_secs(3600);

fn region(frames: u32) -> Arc<Region> {
    Region::new(RegionConfig {
        frames,
        chunk_size: 4096,
        hugepages: false,
        topology: Topology::single_node(),
    })
    .unwrap()
}

fn pool(r: &Arc<Region>, id: u32, ring: u32) -> PoolOwner {
    PoolOwner::new(
        r,
        PoolConfig {
            id,
            preferred_node: 0,
            ring_size: ring,
            bulk: 2,
        },
    )
}

/// Everything back on the global lists, the owner map agreeing with the lists.
fn assert_all_free(r: &Region) {
    let a = r.accounting();
    a.check().unwrap();
    assert_eq!(a.free, a.total, "frame not on a global list: {a:?}");
}

/// Runs `body` under loom and reports (and checks) the interleavings explored.
fn model(name: &str, body: impl Fn() + Sync + Send + 'static) {
    // Per model: the tests of this file run in parallel.
    let runs = Arc::new(AtomicUsize::new(0));
    let count = runs.clone();
    loom::model(move || {
        body();
        count.fetch_add(1, Relaxed);
    });
    let runs = runs.load(Relaxed);
    println!("{name}: {runs} interleavings");
    assert!(runs > 1, "{name}: loom explored one interleaving only");
}

/// Seed 004: destroy while another thread returns the last frame; wait() says
/// "all back" only once the frame is on a list, so the accounting is exact before
/// the returning thread is joined.
#[test]
fn destroy_wait_then_account_without_join() {
    model("destroy_wait_without_join", || {
        let r = region(2);
        let mut p = pool(&r, 1, 2);
        let f = p.alloc().unwrap();
        let remote = p.remote();
        let t = thread::spawn(move || remote.recycle(f));
        let report = p.destroy();
        report.wait(WAIT).unwrap();
        assert_eq!(report.inflight_now(), 0);
        assert_all_free(&r);
        t.join().unwrap();
    });
}

/// The ring is full when destroy runs: the returning thread's push finds it full
/// (global list) or closed (global list), or lands before the close (drained).
#[test]
fn destroy_with_full_ring_and_a_late_return() {
    model("destroy_full_ring", || {
        let r = region(3);
        let mut p = pool(&r, 1, 2);
        let (a, b, c) = (p.alloc().unwrap(), p.alloc().unwrap(), p.alloc().unwrap());
        let remote = p.remote();
        remote.recycle(a);
        remote.recycle(b);
        let t = thread::spawn(move || remote.recycle(c));
        let report = p.destroy();
        report.wait(WAIT).unwrap();
        assert_all_free(&r);
        let s = report.stats();
        assert_eq!(s.recycle_ring_full + s.after_destroy, 1, "{s:?}");
        t.join().unwrap();
    });
}

/// Two threads return frames at once while the pool is destroyed.
#[test]
fn destroy_while_two_remotes_return() {
    model("destroy_two_remotes", || {
        let r = region(2);
        let mut p = pool(&r, 1, 4);
        let (a, b) = (p.alloc().unwrap(), p.alloc().unwrap());
        let (ra, rb) = (p.remote(), p.remote());
        let ta = thread::spawn(move || ra.recycle(a));
        let tb = thread::spawn(move || rb.recycle(b));
        let report = p.destroy();
        report.wait(WAIT).unwrap();
        assert_all_free(&r);
        ta.join().unwrap();
        tb.join().unwrap();
    });
}

/// Destroy races a remote `release_frag` that drops the chunk's last reference
/// (the owner released the other piece and closed the chunk before).
#[test]
fn destroy_races_remote_last_frag_release() {
    model("destroy_last_frag", || {
        let r = region(2);
        let mut p = pool(&r, 1, 2);
        let x = p.alloc_frag(64).unwrap();
        let y = p.alloc_frag(64).unwrap();
        p.frag_drain();
        p.release_frag(x);
        let remote = p.remote();
        let t = thread::spawn(move || remote.release_frag(y));
        let report = p.destroy();
        report.wait(WAIT).unwrap();
        assert_all_free(&r);
        t.join().unwrap();
    });
}

/// The frag chunk is still open (biased) at teardown while another thread
/// releases a piece: whichever of destroy's drain and the release is last returns
/// the chunk, exactly once.
#[test]
fn open_frag_chunk_at_teardown() {
    model("open_frag_at_teardown", || {
        let r = region(2);
        let mut p = pool(&r, 1, 2);
        let x = p.alloc_frag(64).unwrap();
        let y = p.alloc_frag(64).unwrap();
        p.release_frag(x);
        let remote = p.remote();
        let t = thread::spawn(move || remote.release_frag(y));
        let report = p.destroy();
        report.wait(WAIT).unwrap();
        assert_all_free(&r);
        let s = report.stats();
        assert_eq!(s.hold, s.release, "{s:?}");
        t.join().unwrap();
    });
}

/// A destroyed pool's slot is reused by a new pool while a late return of the old
/// pool's frame (through another live pool's ring) is in flight. The report is
/// dropped without waiting, as a caller may: the slot must not be handed out while
/// a frame is still attributed to it, or the new pool is charged for it.
#[test]
fn slot_reuse_races_late_return() {
    model("slot_reuse_late_return", || {
        let r = region(2);
        let keeper = pool(&r, 9, 2);
        let mut old = pool(&r, 1, 2);
        let f = old.alloc().unwrap();
        let via = keeper.remote();
        let t = thread::spawn(move || via.recycle(f));
        drop(old.destroy());
        let fresh = pool(&r, 2, 2);
        t.join().unwrap();
        let s = fresh.stats();
        assert_eq!(
            (s.hold, s.release),
            (0, 0),
            "charged for another's frame: {s:?}"
        );
        r.accounting().check().unwrap();
        // The old pool's frame now belongs to the keeper (in its ring).
        assert_eq!(keeper.stats().inflight, 1);
        drop(fresh);
        drop(keeper);
        assert_all_free(&r);
    });
}

/// `give_tx_frag` reads the count, then decides "whole chunk in TX" or "one TX
/// reference": another thread releasing the other piece in between must not make
/// the chunk come back twice or never.
#[test]
fn give_tx_frag_races_remote_release() {
    model("give_tx_frag_check_then_act", || {
        let r = region(2);
        let mut p = pool(&r, 1, 2);
        let x = p.alloc_frag(64).unwrap();
        let y = p.alloc_frag(64).unwrap();
        p.frag_drain();
        let remote = p.remote();
        let t = thread::spawn(move || remote.release_frag(y));
        // Without a switch point here loom starts the spawned thread at once and never
        // tries the owner's read of the count before the release.
        thread::yield_now();
        let addr = p.give_tx_frag(x).unwrap();
        t.join().unwrap();
        p.take_completion(addr).unwrap();
        let a = p.accounting();
        a.check().unwrap();
        assert_eq!((a.tx, a.application), (0, 0), "{a:?}");
        assert_eq!(a.cached + a.ring + a.free, 2, "{a:?}");
        // A second completion of the same descriptor is refused, not a 2nd return.
        assert!(p.take_completion(addr).is_err());
        let s = p.stats();
        assert_eq!(s.recycle_cached + s.recycle_ring, 1, "returned once: {s:?}");
    });
}
