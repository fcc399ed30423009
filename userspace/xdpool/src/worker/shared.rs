//! What one socket's worker shares with the control thread and with other workers:
//! counters, the socket hand-over (offer, release, reclaim), the handoff queue of
//! frames other ports send out of this one, and the worker's wake-up.

use super::counters::WorkerCounters;
use super::handoff::Egress;
use super::handover::{Handover, Phase, Wake};
use crate::xsk::{RingErrors, XdpStatistics, XskSocket};
use crossbeam_queue::ArrayQueue;
use nix::sys::eventfd::{EfdFlags, EventFd};
use pool::{PoolRemote, PoolStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Wakes a worker that sleeps in poll(): the control thread after a request, other
/// workers after handing it frames.
pub struct Waker {
    fd: EventFd,
    /// The worker is about to sleep or sleeps (set before its last look at its
    /// queues, so a producer that sees it false knows the worker will look).
    sleeping: AtomicBool,
}

impl Wake for Waker {
    fn wake(&self) {
        Waker::wake(self);
    }
}

impl Waker {
    /// A fresh eventfd; fails only when out of file descriptors.
    pub fn new() -> nix::Result<Arc<Waker>> {
        Ok(Arc::new(Waker {
            fd: EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?,
            sleeping: AtomicBool::new(false),
        }))
    }

    /// Wakes the worker unconditionally.
    pub fn wake(&self) {
        // EAGAIN only when the counter is near overflow: the worker is awake then.
        let _ = self.fd.write(1);
    }

    /// Wakes the worker only if it sleeps (what a producing worker calls per batch).
    pub fn wake_if_sleeping(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    pub(crate) fn set_sleeping(&self, on: bool) {
        self.sleeping.store(on, Ordering::SeqCst);
    }

    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    pub(crate) fn clear(&self) {
        let _ = self.fd.read();
    }
}

/// State of one socket (one (port, queue)) shared with the control thread and the
/// other workers.
///
/// The control thread moves a socket's worker between sockets when the device goes
/// away and comes back: it offers a socket with [`PortShared::offer_socket`], and asks
/// for it back with [`PortShared::request_release`]; the worker drains, closes it
/// ([`PortShared::has_socket`] turns false), and later, when the control thread says
/// the kernel can no longer touch them, reclaims the frames the kernel held. The pool
/// stays alive across sockets. The hand-over is one state machine
/// ([`super::handover`], loom-checked).
pub struct PortShared {
    /// Index of this socket in the plan (also its pool's id).
    pub socket: usize,
    /// Port name.
    pub port: String,
    /// Interface.
    pub interface: String,
    /// Queue served.
    pub queue: u32,
    /// Core pinned to, if any.
    pub core: Option<usize>,
    /// Counters.
    pub counters: WorkerCounters,
    /// The pool's remote handle, set once the worker has built its pool.
    pub pool: Mutex<Option<PoolRemote>>,
    /// Last XDP_STATISTICS read.
    pub xsk_stats: Mutex<XdpStatistics>,
    /// Ring validation errors (refreshed with the stats).
    pub ring_errors: Mutex<RingErrors>,
    /// Set when a wake-up or SO_ERROR reported the device gone; cleared by the
    /// control thread when it has handled it.
    pub device_gone: AtomicBool,
    /// Whether the socket now served was bound in zero-copy mode.
    pub zero_copy: AtomicBool,
    /// Set by the worker when a teardown audit of this socket's pool failed (a frame
    /// lost or doubled); taken by the control thread once the teardown is done.
    pub teardown_audit_failed: AtomicBool,
    /// Frames other ports' workers send out of this socket.
    pub inbound: ArrayQueue<Egress>,
    /// The worker's wake-up (shared by every socket of one worker).
    pub waker: Arc<Waker>,
    /// The counters this socket's packet functions registered.
    pub user_counters: crate::api::UserCounters,
    handover: Handover<XskSocket, Waker>,
}

impl PortShared {
    /// Fresh shared state; `handoff` is the capacity of the inbound queue.
    pub fn new(
        socket: usize,
        port: &str,
        interface: &str,
        queue: u32,
        core: Option<usize>,
        handoff: usize,
        waker: Arc<Waker>,
    ) -> Arc<PortShared> {
        Arc::new(PortShared {
            socket,
            port: port.to_string(),
            interface: interface.to_string(),
            queue,
            core,
            counters: WorkerCounters::default(),
            pool: Mutex::new(None),
            xsk_stats: Mutex::new(XdpStatistics::default()),
            ring_errors: Mutex::new(Default::default()),
            device_gone: AtomicBool::new(false),
            zero_copy: AtomicBool::new(false),
            teardown_audit_failed: AtomicBool::new(false),
            inbound: ArrayQueue::new(handoff.max(1)),
            handover: Handover::new(waker.clone()),
            waker,
            user_counters: Default::default(),
        })
    }

    /// Wakes the worker if it waits in poll().
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// The pool's stats, once the worker has started.
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|r| r.stats())
    }

    /// Hands a freshly bound socket to the worker. Returns the socket not handed
    /// over: an earlier offer not yet taken, or this one while the worker still has
    /// (or has not reclaimed) a socket.
    pub fn offer_socket(&self, sock: XskSocket) -> Option<XskSocket> {
        self.zero_copy.store(sock.zero_copy(), Ordering::SeqCst);
        self.handover.offer(sock)
    }

    /// Asks the worker to give its socket up (drain RX, reap, close). A socket offered
    /// but not yet taken is dropped here.
    pub fn request_release(&self) {
        drop(self.handover.request_release());
    }

    /// Whether the worker holds a socket (false once a release is done).
    pub fn has_socket(&self) -> bool {
        self.handover.has_socket()
    }

    /// Asks the worker to take back the frames its closed socket left in the fill and
    /// TX rings. Context rule: only once the kernel can no longer touch them (the
    /// socket's own descriptor closed, or the UMEM closed for its first socket).
    pub fn request_reclaim(&self) {
        self.handover.request_reclaim();
    }

    /// Whether frames of a closed socket still wait to be reclaimed.
    pub fn reclaim_pending(&self) -> bool {
        self.handover.reclaim_pending()
    }

    /// Whether a socket is offered and the worker does not run on it yet (rings not
    /// yet filled).
    pub fn socket_pending(&self) -> bool {
        self.handover.socket_pending()
    }

    /// The worker's side of the hand-over.
    pub(crate) fn handover(&self) -> &Handover<XskSocket, Waker> {
        &self.handover
    }

    /// Where the hand-over stands.
    pub(crate) fn phase(&self) -> Phase {
        self.handover.phase()
    }
}
