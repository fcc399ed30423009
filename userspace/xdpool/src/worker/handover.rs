//! The socket hand-over between the control thread and one socket's worker, as one
//! state machine in one atomic (it replaced four loose flags and a slot):
//!
//! ```text
//!            offer                take             started
//!   Idle ─────────────> Offered ───────> Taken ─────────────> Running
//!    ^  <─────────────     │               │ request_release     │ request_release
//!    │   withdraw          │               v                     v
//!    │   (request_release) │             Releasing <─────────────┘
//!    │                                     │ gave_up (drained, closed)
//!    │  reclaimed       request_reclaim    v
//!    └───────── Reclaim <─────────────── Closed
//! ```
//!
//! Who moves which edge: the control thread leaves `Idle` (offer), withdraws an
//! offer not yet taken, asks for a release (`Taken`/`Running` -> `Releasing`) and
//! says when the kernel can no longer touch the closed socket's frames (`Closed` ->
//! `Reclaim`). The worker takes the offer, says it runs (rings filled), gives the
//! socket up and reclaims. Every edge is a compare-and-swap, so the two threads
//! racing on `Offered` (take vs withdraw) or on `Taken` (started vs release) agree on
//! one winner. The worker's last use of a socket happens before the `Closed` it
//! publishes (release); the control thread's closing of the kernel side happens
//! before the `Reclaim` it publishes. Every control request then wakes the worker
//! ([`Wake`]): the worker looks at the phase after it cleared its wake-up, so a
//! request made while it falls asleep is never missed.
//!
//! The atomic and the slot come through a facade: std normally, loom's under the
//! `loom` feature, where `loom_models` checks this code as it ships.

use std::sync::atomic::Ordering;
use std::sync::Arc;

#[cfg(not(feature = "loom"))]
use std::sync::{atomic::AtomicU8, Mutex};

#[cfg(feature = "loom")]
use loom::sync::{atomic::AtomicU8, Mutex};

/// Where one socket's hand-over stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// No socket; nothing of a closed one left to reclaim.
    Idle = 0,
    /// A socket waits in the slot for the worker.
    Offered = 1,
    /// The worker took it and fills its rings.
    Taken = 2,
    /// The worker runs on it (rings filled: frames may flow).
    Running = 3,
    /// The control thread asked for it back; the worker drains and closes it.
    Releasing = 4,
    /// Closed by the worker; the kernel's frames wait to be reclaimed.
    Closed = 5,
    /// The control thread says the kernel can no longer touch them: reclaim.
    Reclaim = 6,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Idle,
            1 => Phase::Offered,
            2 => Phase::Taken,
            3 => Phase::Running,
            4 => Phase::Releasing,
            5 => Phase::Closed,
            // Only `Phase as u8` is ever stored.
            _ => Phase::Reclaim,
        }
    }
}

/// How a control request wakes the worker (its eventfd in the product).
pub trait Wake: Send + Sync {
    /// Makes the worker's next (or current) wait return.
    fn wake(&self);
}

/// One socket's hand-over. `T` is the socket (`XskSocket` in the product).
pub struct Handover<T, W: Wake> {
    phase: AtomicU8,
    slot: Mutex<Option<T>>,
    waker: Arc<W>,
}

impl<T, W: Wake> Handover<T, W> {
    /// Idle, waking the worker through `waker`.
    pub fn new(waker: Arc<W>) -> Self {
        Handover {
            phase: AtomicU8::new(Phase::Idle as u8),
            slot: Mutex::new(None),
            waker,
        }
    }

    /// The phase now (acquire: what the other side did before it moved here is
    /// visible).
    #[inline]
    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    fn cas(&self, from: Phase, to: Phase) -> bool {
        self.phase
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Moves to `to` from whichever of `from` the phase is in (the other side may
    /// move it between two of them meanwhile: retried on what it saw).
    fn shift(&self, from: &[Phase], to: Phase) -> bool {
        let mut now = self.phase.load(Ordering::Acquire);
        loop {
            if !from.iter().any(|&f| f as u8 == now) {
                return false;
            }
            match self
                .phase
                .compare_exchange(now, to as u8, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
    }

    fn slot(&self) -> impl std::ops::DerefMut<Target = Option<T>> + '_ {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    // ---- control thread ------------------------------------------------------------

    /// Offers `sock` to the worker. Returns what was not handed over: an earlier
    /// offer not yet taken (replaced), or `sock` itself when the worker still holds
    /// a socket or has not reclaimed a closed one's frames.
    pub fn offer(&self, sock: T) -> Option<T> {
        let earlier = self.withdraw_offer();
        if self.phase() != Phase::Idle {
            return Some(sock);
        }
        *self.slot() = Some(sock);
        // Only the control thread leaves Idle: this cannot fail; a CAS all the same.
        let offered = self.cas(Phase::Idle, Phase::Offered);
        debug_assert!(offered, "only the control thread leaves Idle");
        self.waker.wake();
        earlier
    }

    /// Takes back an offer the worker has not taken (`Offered` -> `Idle`).
    pub fn withdraw_offer(&self) -> Option<T> {
        if self.cas(Phase::Offered, Phase::Idle) {
            return self.slot().take();
        }
        None
    }

    /// Asks the worker to give its socket up (drain RX, reap, close). An offer not
    /// yet taken is withdrawn and returned instead.
    pub fn request_release(&self) -> Option<T> {
        if let Some(sock) = self.withdraw_offer() {
            return Some(sock);
        }
        if self.shift(&[Phase::Taken, Phase::Running], Phase::Releasing) {
            self.waker.wake();
        }
        None
    }

    /// Says the kernel can no longer touch the frames the closed socket left in its
    /// rings (`Closed` -> `Reclaim`); the worker takes them back. Returns whether
    /// there was a closed socket.
    pub fn request_reclaim(&self) -> bool {
        let asked = self.cas(Phase::Closed, Phase::Reclaim);
        if asked {
            self.waker.wake();
        }
        asked
    }

    /// Whether the worker holds a socket (taken, running or being given up).
    pub fn has_socket(&self) -> bool {
        matches!(
            self.phase(),
            Phase::Taken | Phase::Running | Phase::Releasing
        )
    }

    /// Whether a socket is offered and the worker does not run on it yet.
    pub fn socket_pending(&self) -> bool {
        matches!(self.phase(), Phase::Offered | Phase::Taken)
    }

    /// Whether a closed socket's frames wait to be reclaimed.
    pub fn reclaim_pending(&self) -> bool {
        matches!(self.phase(), Phase::Closed | Phase::Reclaim)
    }

    // ---- worker --------------------------------------------------------------------

    /// Takes the offered socket (`Offered` -> `Taken`), if any.
    pub fn take(&self) -> Option<T> {
        if self.cas(Phase::Offered, Phase::Taken) {
            return self.slot().take();
        }
        None
    }

    /// The taken socket's rings are filled (`Taken` -> `Running`). A release asked
    /// meanwhile stands: the worker sees `Releasing` on its next look.
    pub fn started(&self) {
        self.cas(Phase::Taken, Phase::Running);
    }

    /// The worker closed its socket and will not touch it again (`Taken`, `Running`
    /// or `Releasing` -> `Closed`, release: its last use happens before).
    pub fn gave_up(&self) {
        self.shift(
            &[Phase::Taken, Phase::Running, Phase::Releasing],
            Phase::Closed,
        );
    }

    /// Puts the hand-over in phase `p` (unit tests of one worker standing for
    /// another's state).
    #[cfg(test)]
    pub(crate) fn set_phase_for_test(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::Release);
    }

    /// The closed socket's frames are back (`Reclaim`, or `Closed` at the stop,
    /// -> `Idle`).
    pub fn reclaimed(&self) {
        self.shift(&[Phase::Closed, Phase::Reclaim], Phase::Idle);
    }
}

/// Loom models of the hand-over as it ships (its atomic and slot through the
/// facade), with the worker's loop and the control thread's waits mirrored from
/// `Worker::run`/`Worker::service` and `lifecycle.rs`, and the eventfd played by a
/// counter under a mutex and condvar (a wake-up lost makes the worker block for
/// good: loom reports the deadlock, or the control thread's spin exceeds the branch
/// limit). Each socket's ring memory is a loom cell: the worker uses it while it
/// holds the socket, the kernel side (played by the control thread) closes it once
/// the socket is given back, the worker's reclaim reads it; an access not ordered
/// after the other side's fails the model. `cargo test -p xdpool --profile checked
/// --features loom --lib worker::handover::loom_models`.
#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicBool, AtomicUsize};
    use loom::sync::Condvar;
    use loom::thread;
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

    /// The worker's eventfd: `wake` adds one, `poll` waits while it is zero, `clear`
    /// empties it (two steps, as `Worker::sleep` does them).
    struct EventFd {
        count: Mutex<u64>,
        cv: Condvar,
    }

    impl Wake for EventFd {
        fn wake(&self) {
            *self.count.lock().unwrap() += 1;
            self.cv.notify_one();
        }
    }

    impl EventFd {
        fn poll(&self) {
            let mut n = self.count.lock().unwrap();
            while *n == 0 {
                n = self.cv.wait(n).unwrap();
            }
        }
        fn clear(&self) {
            *self.count.lock().unwrap() = 0;
        }
    }

    const SOCKETS: usize = 2;

    /// Adds `n` to a ring cell (0: reads it); loom checks the access is ordered
    /// after every other thread's.
    fn touch(cell: &UnsafeCell<u32>, n: u32) -> u32 {
        if n == 0 {
            // SAFETY: loom's cell: the pointer is valid for this call; loom fails the
            // model on an access that races another thread's.
            return cell.with(|r| unsafe { *r });
        }
        // SAFETY: as above.
        cell.with_mut(|r| unsafe {
            *r += n;
            *r
        })
    }

    struct Counts {
        drops: [AtomicUsize; SOCKETS],
        reclaims: [AtomicUsize; SOCKETS],
        taken: [AtomicBool; SOCKETS],
    }

    /// A socket: dropping it closes it (counted).
    struct Sock {
        id: usize,
        counts: Arc<Counts>,
    }

    impl Drop for Sock {
        fn drop(&mut self) {
            self.counts.drops[self.id].fetch_add(1, Relaxed);
        }
    }

    struct World {
        h: Handover<Sock, EventFd>,
        efd: Arc<EventFd>,
        /// Each socket's ring memory.
        ring: [UnsafeCell<u32>; SOCKETS],
        counts: Arc<Counts>,
        stop: AtomicBool,
    }

    impl World {
        // The ring cells are loom's (not Sync): loom runs its threads on one OS thread,
        // its spawn asks no Send, and it checks every access to them.
        #[allow(clippy::arc_with_non_send_sync)]
        fn new() -> Arc<World> {
            let efd = Arc::new(EventFd {
                count: Mutex::new(0),
                cv: Condvar::new(),
            });
            Arc::new(World {
                h: Handover::new(efd.clone()),
                efd,
                ring: [UnsafeCell::new(0), UnsafeCell::new(0)],
                counts: Arc::new(Counts {
                    drops: [AtomicUsize::new(0), AtomicUsize::new(0)],
                    reclaims: [AtomicUsize::new(0), AtomicUsize::new(0)],
                    taken: [AtomicBool::new(false), AtomicBool::new(false)],
                }),
                stop: AtomicBool::new(false),
            })
        }

        fn sock(&self, id: usize) -> Sock {
            Sock {
                id,
                counts: self.counts.clone(),
            }
        }

        /// The control thread's waits (lifecycle.rs polls with sleeps).
        fn wait(&self, cond: impl Fn(&World) -> bool) {
            while !cond(self) {
                thread::yield_now();
            }
        }

        /// lifecycle's bring_up wait: the worker runs on the socket, rings filled.
        fn ready(&self) -> bool {
            self.h.has_socket() && !self.h.socket_pending()
        }

        /// The kernel side of a socket given back closes (its fd, or the UMEM): until
        /// here the kernel may write its rings.
        fn kernel_closes(&self, id: usize) {
            touch(&self.ring[id], 100);
        }

        /// The control thread's stop (run.rs: `stop` set, every worker woken).
        fn stop(&self) {
            self.stop.store(true, Release);
            self.efd.wake();
        }

        fn drops(&self, id: usize) -> usize {
            self.counts.drops[id].load(Relaxed)
        }

        fn reclaims(&self, id: usize) -> usize {
            self.counts.reclaims[id].load(Relaxed)
        }

        fn taken(&self, id: usize) -> bool {
            self.counts.taken[id].load(Relaxed)
        }
    }

    /// The worker: `Worker::run`'s loop over one lane (service, one batch, sleep
    /// when idle) and `Worker::finish`.
    struct Lane {
        held: Option<Sock>,
        closed: Option<usize>,
        batches: u32,
    }

    impl Lane {
        fn start(&mut self, w: &World, s: Sock) {
            assert!(
                self.held.is_none() && self.closed.is_none(),
                "a socket taken over another"
            );
            w.counts.taken[s.id].store(true, Relaxed);
            // attach + refill: the worker writes the new socket's rings.
            touch(&w.ring[s.id], 1);
            self.held = Some(s);
            self.batches = 2;
            w.h.started();
        }

        fn give_up(&mut self, w: &World) {
            if let Some(s) = self.held.take() {
                // drain RX, reap, then close.
                touch(&w.ring[s.id], 1);
                self.closed = Some(s.id);
                drop(s);
            }
            w.h.gave_up();
        }

        fn reclaim(&mut self, w: &World) {
            let id = self
                .closed
                .take()
                .expect("reclaim without a socket given up");
            // What the kernel left in the rings; it must be done with them.
            let left = touch(&w.ring[id], 0);
            assert!(left >= 100, "reclaimed before the kernel side closed");
            w.counts.reclaims[id].fetch_add(1, Relaxed);
            w.h.reclaimed();
        }

        fn run(mut self, w: &World) {
            while !w.stop.load(Acquire) {
                let mut busy = true;
                match w.h.phase() {
                    Phase::Offered => match w.h.take() {
                        Some(s) => self.start(w, s),
                        None => busy = false,
                    },
                    Phase::Releasing => self.give_up(w),
                    Phase::Reclaim => self.reclaim(w),
                    _ => busy = false,
                }
                if let Some(s) = &self.held {
                    if self.batches > 0 {
                        // One batch on the socket's rings.
                        touch(&w.ring[s.id], 1);
                        self.batches -= 1;
                        busy = true;
                    }
                }
                if !busy {
                    w.efd.poll();
                    w.efd.clear();
                }
            }
            // finish: give up, reclaim (the UMEM is closed by now), drop an offer.
            if self.held.is_some() {
                self.give_up(w);
            }
            if w.h.reclaim_pending() {
                if let Some(id) = self.closed {
                    w.kernel_closes(id);
                }
                self.reclaim(w);
            }
            drop(w.h.withdraw_offer());
        }
    }

    fn model(name: &str, body: impl Fn(Arc<World>) + Sync + Send + 'static) {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = runs.clone();
        let started = std::time::Instant::now();
        loom::model(move || {
            let w = World::new();
            let wk = w.clone();
            let worker = thread::spawn(move || {
                Lane {
                    held: None,
                    closed: None,
                    batches: 0,
                }
                .run(&wk)
            });
            body(w.clone());
            worker.join().unwrap();
            assert_eq!(w.h.phase(), Phase::Idle, "the hand-over ends idle");
            for id in 0..SOCKETS {
                // A socket the worker took closes once and is reclaimed once (the
                // stop reclaims the last one); one never taken is never reclaimed.
                let want = usize::from(w.taken(id));
                assert_eq!(w.reclaims(id), want, "socket {id}: reclaims");
                if w.taken(id) {
                    assert_eq!(w.drops(id), 1, "socket {id}: closes");
                }
            }
            count.fetch_add(1, Relaxed);
        });
        let runs = runs.load(Relaxed);
        println!(
            "{name}: {runs} interleavings in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        assert!(runs > 1, "{name}: one interleaving only");
    }

    /// Control offers a socket, the worker takes it; control asks for it back while
    /// the worker is in a batch; the worker gives it back, the kernel side closes,
    /// reclaim happens once; a second socket is offered and runs; the stop.
    #[test]
    fn offer_release_reclaim_reoffer() {
        model("handover_cycle", |w| {
            assert!(w.h.offer(w.sock(0)).is_none());
            w.wait(World::ready);
            assert!(w.h.request_release().is_none());
            w.wait(|w| !w.h.has_socket());
            w.kernel_closes(0);
            assert!(
                w.h.request_reclaim(),
                "a socket given back waits for its reclaim"
            );
            w.wait(|w| !w.h.reclaim_pending());
            assert_eq!(w.reclaims(0), 1);
            assert!(w.h.offer(w.sock(1)).is_none(), "re-offer after the reclaim");
            w.wait(World::ready);
            w.stop();
        });
    }

    /// A release asked right after the offer races the worker's take: either the
    /// offer is withdrawn (the worker never saw it) or the worker gives it back.
    /// Either way the socket closes once and is reclaimed once exactly when taken.
    #[test]
    fn release_races_the_take() {
        model("release_vs_take", |w| {
            assert!(w.h.offer(w.sock(0)).is_none());
            drop(w.h.request_release());
            w.wait(|w| !w.h.has_socket());
            if w.h.reclaim_pending() {
                w.kernel_closes(0);
                assert!(w.h.request_reclaim());
                w.wait(|w| !w.h.reclaim_pending());
            }
            let (dropped, taken, reclaimed) = (w.drops(0), w.taken(0), w.reclaims(0));
            assert_eq!(dropped, 1, "the socket closes once");
            assert_eq!(
                reclaimed,
                usize::from(taken),
                "reclaimed once exactly when the worker took it"
            );
            w.stop();
        });
    }

    /// A second offer while the first is being taken: the one not handed over comes
    /// back to the control thread; the worker runs on the other; each closes once.
    #[test]
    fn reoffer_races_the_take() {
        model("reoffer_vs_take", |w| {
            assert!(w.h.offer(w.sock(0)).is_none());
            // The socket not handed over is closed at once (dropped here).
            let back =
                w.h.offer(w.sock(1))
                    .expect("one of the two is not handed over")
                    .id;
            let runs = 1 - back;
            w.wait(World::ready);
            assert!(
                w.taken(runs) && !w.taken(back),
                "the worker runs on the socket handed over"
            );
            assert_eq!(w.drops(back), 1);
            w.stop();
        });
    }
}
