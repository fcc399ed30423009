//! A `Port`: one (device, queue) socket's four rings and their bookkeeping, speaking
//! pool tokens only. Refill (pool -> fill ring), receive (RX ring -> descriptors the
//! pool turns into frames), reserve TX room then send, reap completions, drain, and
//! give everything back on teardown. Every undo is a pool operation (`untx`: a TX
//! descriptor that never reached the kernel goes back through the pool exactly as a
//! completion would).
//!
//! A port's TX ring carries two kinds of frames: its own pool's (marked TX in the
//! pool: `give_tx`, `give_tx_frag`) and other ports' (a frag token per chunk, kept in
//! `foreign` and released on completion: into the origin pool's return ring, or,
//! when that pool is a lane of the same worker, handed to the worker to release
//! into the pool itself, `reap_to`).
//!
//! The socket is behind [`PortIo`], so every path here runs over heap rings in unit
//! tests, without root or a kernel.

use super::action::{ActCtx, PortId};
use super::call::{EmitSite, Emitter};
use super::counters::WorkerCountersSnapshot;
use super::handoff::{Egress, Remotes};
use super::inflight::TxInflight;
use crate::config::CopyFill;
use crate::neigh::MacBook;
use crate::xsk::{
    kernel_held, RingErrors, RingsMut, Wakeup, XdpDesc, XdpStatistics, XskError, XskSocket,
    XDP_PKT_CONTD,
};
use pool::{Frag, KernelHeld, PoolOwner, Region};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// RX descriptors refused that a socket names in the log; the rest are only counted.
const REFUSALS_LOGGED: u64 = 3;

/// Largest batch a worker handles at once.
pub const MAX_BATCH: usize = 256;

/// What a port needs of its socket: the rings, the wake-ups and the kernel's
/// counters. [`XskSocket`] in the product; heap rings in tests.
pub trait PortIo: Send {
    /// The four rings.
    fn rings(&mut self) -> RingsMut<'_>;
    /// Kick RX (`recvfrom`).
    fn wakeup_rx(&self) -> Result<Wakeup, XskError>;
    /// Kick TX (`sendto`).
    fn wakeup_tx(&self) -> Result<Wakeup, XskError>;
    /// The descriptor poll() waits on (`None`: nothing to wait on).
    fn poll_fd(&self) -> Option<BorrowedFd<'_>>;
    /// XDP_STATISTICS, if readable.
    fn statistics(&self) -> Option<XdpStatistics>;
    /// Whether SO_ERROR says the device went away (reads and clears it).
    fn reports_device_gone(&self) -> bool;
    /// Ring validation counters.
    fn ring_errors(&self) -> RingErrors;
    /// Turns busy-poll on.
    fn set_busy_poll(&self, budget: u16) -> Result<(), XskError>;
    /// The socket's NAPI id, once known.
    fn napi_id(&self) -> Option<u32>;
    /// Whether it was bound in zero-copy mode.
    fn zero_copy(&self) -> bool;
}

impl PortIo for XskSocket {
    fn rings(&mut self) -> RingsMut<'_> {
        self.rings_mut()
    }
    fn wakeup_rx(&self) -> Result<Wakeup, XskError> {
        XskSocket::wakeup_rx(self)
    }
    fn wakeup_tx(&self) -> Result<Wakeup, XskError> {
        XskSocket::wakeup_tx(self)
    }
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd())
    }
    fn statistics(&self) -> Option<XdpStatistics> {
        XskSocket::statistics(self).ok()
    }
    fn reports_device_gone(&self) -> bool {
        // SO_ERROR is ENETDOWN once after the device went away.
        matches!(self.so_error(), Ok(Some(e)) if matches!(e.raw_os_error(), Some(libc::ENETDOWN) | Some(libc::ENXIO)))
    }
    fn ring_errors(&self) -> RingErrors {
        XskSocket::ring_errors(self)
    }
    fn set_busy_poll(&self, budget: u16) -> Result<(), XskError> {
        XskSocket::set_busy_poll(self, budget)
    }
    fn napi_id(&self) -> Option<u32> {
        XskSocket::napi_id(self)
    }
    fn zero_copy(&self) -> bool {
        XskSocket::zero_copy(self)
    }
}

/// Another port's frame in this port's TX ring.
#[derive(Debug)]
struct Foreign {
    token: Frag,
    origin: u16,
}

/// Ring sizes a port needs to know.
#[derive(Debug, Clone, Copy)]
pub struct PortRings {
    /// Fill ring entries.
    pub fill: u32,
    /// RX ring entries.
    pub rx: u32,
    /// Copy mode: how many frames the kernel may hold (`rings.copy_fill`).
    pub copy_fill: CopyFill,
}

/// Where `Port::reap_to` leaves the completed frames of pools of the reaping port's
/// own worker: the worker releases them into the owning lane's pool, with no return
/// ring between (that pool's owner is the same thread).
pub struct LocalReturns<'a> {
    /// The worker's lane of each socket it serves, by socket index.
    pub lane_of: &'a [Option<usize>],
    /// (lane, token), emptied by the worker after each reap.
    pub frags: &'a mut Vec<(usize, Frag)>,
}

/// One socket's rings and bookkeeping. Context rule: the owning worker's thread
/// (the pool owner lives here).
pub struct Port {
    /// Socket index in the plan (the pool's id, and the `origin` of its frames).
    pub socket: usize,
    /// The pool this socket's frames come from.
    pub pool: PoolOwner,
    /// Counters (published by the worker).
    pub c: WorkerCountersSnapshot,
    io: Option<Box<dyn PortIo>>,
    rings: PortRings,
    /// Frames the kernel may hold of the fill ring now (see `fill_target`).
    fill_target: u32,
    /// Frames put on the fill ring not yet come back through RX.
    in_fill: u32,
    /// The socket is in zero-copy mode (the driver takes fill entries ahead of
    /// traffic, so `in_fill` is no measure of the RX ring's backlog).
    zero_copy: bool,
    /// RX descriptors refused on the current socket: each took an RX ring slot
    /// without giving back a frame of ours, so the close's audit adds them back.
    rx_refused: u64,
    batch: usize,
    /// Descriptors waiting for this port's TX ring (own and other ports' frames).
    tx: Vec<XdpDesc>,
    /// Other ports' frames in `tx` or the TX ring, by chunk index.
    foreign: Box<[Option<Foreign>]>,
    shift: u32,
    inflight: TxInflight,
    addrs: Box<[u64]>,
    region: Arc<Region>,
}

/// How many frames a socket keeps with the kernel (fill ring plus taken and not yet
/// read back from RX). Zero-copy: the whole fill ring (the driver moves fill entries
/// into its own ring ahead of traffic). Copy mode: as `rings.copy_fill` says, the
/// whole fill ring (a worker that falls behind makes the kernel drop at the full RX
/// ring, after its copy) or no more than the RX ring holds (the kernel finds the
/// fill ring empty: a drop before the copy).
pub fn fill_target(rings: PortRings, zero_copy: bool) -> u32 {
    if zero_copy {
        rings.fill
    } else {
        rings.copy_fill.limit(rings.fill, rings.rx)
    }
}

impl Port {
    /// A port without a socket yet. `pool` must be the calling thread's.
    pub fn new(socket: usize, pool: PoolOwner, rings: PortRings, batch: usize) -> Port {
        let region = pool.region().clone();
        Port {
            socket,
            c: WorkerCountersSnapshot::default(),
            io: None,
            rings,
            fill_target: 0,
            in_fill: 0,
            zero_copy: false,
            rx_refused: 0,
            batch: batch.clamp(1, MAX_BATCH),
            // reflect-twice and a mirror queue two descriptors per frame.
            tx: Vec::with_capacity(2 * MAX_BATCH),
            foreign: (0..region.frames()).map(|_| None).collect(),
            shift: region.chunk_size().trailing_zeros(),
            inflight: TxInflight::new(region.frames(), region.chunk_size()),
            addrs: vec![0; MAX_BATCH].into_boxed_slice(),
            region,
            pool,
        }
    }

    /// Whether a socket is attached.
    #[inline]
    pub fn has_io(&self) -> bool {
        self.io.is_some()
    }

    /// The socket, if attached.
    #[inline]
    pub fn io(&self) -> Option<&dyn PortIo> {
        self.io.as_deref()
    }

    /// Descriptors per batch.
    #[inline]
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// A new socket: nothing of ours is in its rings yet; fill it.
    #[cold]
    pub fn attach(&mut self, io: Box<dyn PortIo>) {
        self.zero_copy = io.zero_copy();
        self.fill_target = fill_target(self.rings, self.zero_copy);
        self.io = Some(io);
        self.in_fill = 0;
        self.rx_refused = 0;
        self.inflight.reset();
        self.c.socket_attaches += 1;
        self.refill();
    }

    /// Closes the socket (the caller drained it first). Its kernel frames stay counted
    /// in the fill and TX rings until [`Port::reclaim`]. Descriptors queued for TX and
    /// not yet on the ring go back through their pools first, counted
    /// `egress_port_down_drop`: they are the closed socket's, and a later socket must
    /// not send them (another lane of this worker may have routed frames here in the
    /// pass that gives the socket up, before this port's own transmit). Then the
    /// pool's owner map is audited against the rings' own positions
    /// (`teardown_audit_failures`).
    #[cold]
    pub fn detach(&mut self, remotes: &Remotes) -> Option<Box<dyn PortIo>> {
        self.unqueue_all(remotes);
        if let Some(io) = self.io.as_mut() {
            let r = io.rings();
            let mut held = kernel_held(r.fill, r.rx, r.tx, r.completion);
            // A refused RX descriptor moved the RX ring on without giving back a
            // frame of our fill ring (it named a frame we hold, or none of ours): the
            // kernel still holds the fill frame the positions count as returned.
            held.fill = held.fill.wrapping_add(self.rx_refused);
            if self.rx_refused > 0 {
                // Visible, so that a bug of ours that reads a stale RX slot cannot
                // pass the audit unseen.
                tracing::warn!(
                    socket = self.socket,
                    refused = self.rx_refused,
                    "the close's frame audit allows for {} refused RX descriptor(s) on this socket (the kernel still holds a fill frame for each)",
                    self.rx_refused
                );
            }
            // The map counts our frames on the TX ring; the ring also carries other
            // ports' frames (`foreign`: nothing is queued off the ring any more).
            let foreign = self.foreign.iter().filter(|f| f.is_some()).count() as u64;
            held.tx = held.tx.wrapping_sub(foreign);
            self.audit(held, "at the close");
        }
        self.c.socket_releases += 1;
        self.io.take()
    }

    /// Gives back every descriptor queued for TX that never reached the ring (a
    /// frame counts once, at its last descriptor).
    #[cold]
    fn unqueue_all(&mut self, remotes: &Remotes) {
        // Taken out (keeping its capacity) while `untx` borrows the port.
        let mut cut = std::mem::take(&mut self.tx);
        for d in cut.drain(..) {
            self.c.egress_port_down_drop += u64::from(d.options & XDP_PKT_CONTD == 0);
            self.untx(d.addr, remotes);
        }
        self.tx = cut;
    }

    /// One teardown audit of this port's pool against `kernel` (what the rings say
    /// the kernel holds). Owner thread; exact while other ports run (only this pool's
    /// owner moves its cache, fill and TX frames). Returns whether it passed.
    #[cold]
    fn audit(&mut self, kernel: KernelHeld, when: &str) -> bool {
        self.c.teardown_audits += 1;
        match self.pool.audit(kernel).check() {
            Ok(()) => true,
            Err(e) => {
                self.c.teardown_audit_failures += 1;
                tracing::error!(
                    socket = self.socket,
                    "frame audit failed at socket teardown ({when}): {e}; please report this"
                );
                false
            }
        }
    }

    /// Tops the fill ring up, in batches, until the kernel holds `fill_target` frames.
    pub fn refill(&mut self) {
        if self.io.is_none() {
            return;
        }
        let mut room = self.fill_target.saturating_sub(self.in_fill) as usize;
        while room > 0 && room >= self.batch.min(room) {
            let want = room.min(MAX_BATCH);
            let got = self.pool.fill_bulk(&mut self.addrs[..want]);
            if got == 0 {
                self.c.fill_pool_empty += 1;
                return;
            }
            let put = self.put_on_fill(got);
            room -= got;
            if put < got {
                return;
            }
        }
    }

    /// Puts `addrs[..n]` (fill frames of this pool) on the fill ring; whatever the
    /// ring has no room for goes back to the pool (`take_rx` then `recycle`: the
    /// pool's own FILL -> application -> cache path).
    pub fn put_on_fill(&mut self, n: usize) -> usize {
        let Some(io) = self.io.as_mut() else { return 0 };
        let put = io.rings().fill.produce(&self.addrs[..n]);
        for &addr in &self.addrs[put..n] {
            if let Ok(f) = self.pool.take_rx(addr, 0) {
                self.pool.recycle(f);
            }
        }
        self.in_fill += put as u32;
        self.c.fill_produced += put as u64;
        put
    }

    /// Frame addresses for [`Port::put_on_fill`] (the drop fast path writes here).
    #[inline]
    pub fn fill_scratch(&mut self) -> &mut [u64] {
        &mut self.addrs
    }

    /// Takes up to `out.len()` RX descriptors (validated); returns how many were kept.
    #[inline]
    pub fn receive(&mut self, out: &mut [XdpDesc]) -> usize {
        let Some(io) = self.io.as_mut() else { return 0 };
        let got = io.rings().rx.consume_counted(out);
        // Every descriptor taken used a fill entry, dropped ones included.
        self.in_fill = self.in_fill.saturating_sub(got.taken as u32);
        got.kept
    }

    /// Reserve: how many more descriptors the TX ring would take now, beyond those
    /// already queued (0 without a socket or a TX ring).
    #[inline]
    pub fn tx_room(&mut self, want: usize) -> usize {
        let queued = self.tx.len();
        let Some(io) = self.io.as_mut() else { return 0 };
        let tx = io.rings().tx;
        if tx.size() == 0 {
            return 0;
        }
        (tx.writable((want + queued) as u32) as usize).saturating_sub(queued)
    }

    /// Whether frames left waiting in the RX ring are about to make the kernel drop
    /// the next ones: the fill ring holds less than half of what the kernel may hold
    /// (`fill_target`; with `copy_fill = "rx"` it drops at the empty fill ring), or,
    /// in copy mode, the frames the kernel took and the worker has not read fill more
    /// than half the RX ring (it drops at the full RX ring). In zero-copy the frames
    /// taken include those the driver moved into its own ring ahead of traffic, so
    /// only the fill ring's level counts there.
    #[inline]
    pub fn kernel_short(&mut self) -> bool {
        let (target, in_fill, rx) = (self.fill_target, self.in_fill, self.rings.rx);
        let copy_mode = !self.zero_copy;
        let Some(io) = self.io.as_mut() else {
            return false;
        };
        let fill = io.rings().fill.level();
        fill < target / 2 || (copy_mode && in_fill.saturating_sub(fill) > rx / 2)
    }

    /// Whether the socket has a TX ring.
    #[inline]
    pub fn has_tx_ring(&mut self) -> bool {
        self.io.as_mut().is_some_and(|io| io.rings().tx.size() > 0)
    }

    /// Queues one of this pool's frames (already given to TX in the pool).
    #[inline]
    pub fn queue_own(&mut self, d: XdpDesc) {
        self.tx.push(d);
    }

    /// Descriptors queued for TX now.
    #[inline]
    pub fn queued(&self) -> usize {
        self.tx.len()
    }

    /// Drops the queued descriptors from `start` on (a multi-buffer frame cut
    /// short): each goes back through the pool as a completion would.
    #[cold]
    pub fn unqueue_from(&mut self, start: usize, remotes: &Remotes) {
        let cut: Vec<XdpDesc> = self.tx.drain(start..).collect();
        for d in cut {
            self.untx(d.addr, remotes);
        }
    }

    /// Queues another port's frame. Without a socket the frame goes straight back
    /// to its pool (`egress_port_down_drop`). Returns whether it was queued.
    pub fn queue_foreign(&mut self, e: Egress, remotes: &Remotes) -> bool {
        if self.io.is_none() {
            self.c.egress_port_down_drop += 1;
            self.give_back(e.origin, e.token, remotes);
            return false;
        }
        let idx = (e.desc.addr >> self.shift) as usize;
        match self.foreign.get_mut(idx) {
            Some(slot @ None) => {
                *slot = Some(Foreign {
                    token: e.token,
                    origin: e.origin,
                });
                self.tx.push(e.desc);
                true
            }
            // A chunk can be in one TX ring once (the config refuses mirror_to = to);
            // anything else is a bug upstream: never lose the frame for it.
            _ => {
                self.c.completion_rejected += 1;
                self.give_back(e.origin, e.token, remotes);
                false
            }
        }
    }

    fn give_back(&mut self, origin: u16, token: Frag, remotes: &Remotes) {
        if !remotes.release(origin, token) {
            self.c.completion_rejected += 1;
            tracing::error!(
                socket = self.socket,
                origin,
                "a frame from an unknown pool; it stays out (please report)"
            );
        }
    }

    /// Send: puts what fits of the queued descriptors on the TX ring (never half a
    /// multi-buffer frame); the rest goes back through the pool, counted
    /// `tx_ring_full_drop`.
    pub fn transmit(&mut self, remotes: &Remotes) {
        if self.tx.is_empty() {
            return;
        }
        let put = match self.io.as_mut() {
            Some(io) => io.rings().tx.produce_whole_frames(&self.tx),
            None => 0,
        };
        // Summed in registers: the counters are stored once per batch.
        let (mut packets, mut bytes, mut foreign) = (0u64, 0u64, 0u64);
        for d in &self.tx[..put] {
            // A multi-buffer frame counts once, at its last descriptor.
            packets += u64::from(d.options & XDP_PKT_CONTD == 0);
            bytes += d.len as u64;
            self.inflight.sent(d.addr);
            foreign += u64::from(self.foreign[(d.addr >> self.shift) as usize].is_some());
        }
        self.c.tx_packets += packets;
        self.c.tx_bytes += bytes;
        self.c.foreign_tx += foreign;
        if self.inflight.frames() > self.c.tx_inflight_max {
            self.c.tx_inflight_max = self.inflight.frames();
            self.c.tx_inflight_chunks_at_max = self.inflight.chunks();
        }
        if put < self.tx.len() {
            self.tx_full(put, remotes);
        }
        self.tx.clear();
    }

    #[cold]
    fn tx_full(&mut self, put: usize, remotes: &Remotes) {
        // Taken out (keeping its capacity) while `untx` borrows the port; the caller
        // clears it. Every pass of a shedding worker comes here: no allocation.
        let mut queued = std::mem::take(&mut self.tx);
        for d in queued.drain(put..) {
            self.c.tx_ring_full_drop += u64::from(d.options & XDP_PKT_CONTD == 0);
            self.untx(d.addr, remotes);
        }
        self.tx = queued;
    }

    /// A TX descriptor the kernel is done with (or never got): another port's frame
    /// returns to its pool's return ring, ours to our pool.
    #[inline]
    fn untx(&mut self, addr: u64, remotes: &Remotes) -> bool {
        self.untx_to(addr, remotes, None)
    }

    /// [`untx`](Self::untx), where a frame of a pool in `local` is left there for
    /// the worker instead. True for another port's frame.
    #[inline]
    fn untx_to(
        &mut self,
        addr: u64,
        remotes: &Remotes,
        local: Option<&mut LocalReturns<'_>>,
    ) -> bool {
        match self
            .foreign
            .get_mut((addr >> self.shift) as usize)
            .and_then(Option::take)
        {
            Some(f) => {
                let lane = local
                    .as_ref()
                    .and_then(|l| l.lane_of.get(f.origin as usize).copied().flatten());
                match (lane, local) {
                    (Some(j), Some(l)) => l.frags.push((j, f.token)),
                    _ => self.give_back(f.origin, f.token, remotes),
                }
                true
            }
            None => {
                if self.pool.take_completion(addr).is_err() {
                    self.c.completion_rejected += 1;
                }
                false
            }
        }
    }

    /// Completions: TX frames the kernel is done with go back to their pools.
    pub fn reap(&mut self, remotes: &Remotes) -> usize {
        self.reap_to(remotes, None)
    }

    /// [`reap`](Self::reap), where the frames of the pools in `local` (lanes of this
    /// port's worker) are left in it for the worker to release into their pools
    /// directly, and the rest go through `remotes`.
    #[inline]
    pub fn reap_to(&mut self, remotes: &Remotes, mut local: Option<LocalReturns<'_>>) -> usize {
        let Some(io) = self.io.as_mut() else { return 0 };
        let n = io.rings().completion.consume(&mut self.addrs[..self.batch]);
        let mut foreign = 0u64;
        for i in 0..n {
            let addr = self.addrs[i];
            self.inflight.completed(addr);
            foreign += u64::from(self.untx_to(addr, remotes, local.as_mut()));
        }
        self.c.tx_completed += n as u64;
        self.c.foreign_completed += foreign;
        n
    }

    /// Frames in this port's TX ring not yet completed.
    #[inline]
    pub fn tx_pending(&self) -> u64 {
        self.inflight.frames()
    }

    /// Kicks TX when frames wait and the kernel asks (or `force`: busy-poll, where
    /// sendto is where the kernel polls). Returns false when the device is gone.
    pub fn kick_tx(&mut self, force: bool) -> bool {
        let Some(io) = self.io.as_mut() else {
            return true;
        };
        if !(force || io.rings().tx.needs_wakeup()) {
            return true;
        }
        self.c.wakeups += 1;
        self.c.tx_wakeups += 1;
        !matches!(io.wakeup_tx(), Ok(Wakeup::DeviceGone { .. }) | Err(_))
    }

    /// Kicks RX when the kernel asks (or `force`). Returns false when the device is gone.
    pub fn kick_rx(&mut self, force: bool) -> bool {
        let Some(io) = self.io.as_mut() else {
            return true;
        };
        if !(force || io.rings().fill.needs_wakeup()) {
            return true;
        }
        self.c.wakeups += 1;
        !matches!(io.wakeup_rx(), Ok(Wakeup::DeviceGone { .. }) | Err(_))
    }

    /// Recycles one batch of what the RX ring still holds (counted as drops and in
    /// `drained_rx`); returns how many descriptors were taken, bad ones included.
    pub fn drain_rx(&mut self) -> usize {
        let Some(io) = self.io.as_mut() else { return 0 };
        let mut descs = [XdpDesc::default(); 64];
        let got = io.rings().rx.consume_counted(&mut descs);
        self.in_fill = self.in_fill.saturating_sub(got.taken as u32);
        for d in &descs[..got.kept] {
            match self.pool.take_rx(d.addr, d.len) {
                Ok(f) => {
                    self.c.rx_packets += 1;
                    self.c.rx_bytes += d.len as u64;
                    self.c.action_drop += 1;
                    self.c.drained_rx += 1;
                    self.pool.recycle(f);
                }
                Err(e) => self.refuse_rx(&e),
            }
        }
        got.taken
    }

    /// An RX descriptor the pool refused (by the pool's map it names no frame of our
    /// fill ring: outside the UMEM, across a chunk, or a frame we hold elsewhere or
    /// another pool's): counted `rx_rejected`, the first few of each socket named in
    /// the log. The frame it names stays where the pool has it; the close's audit
    /// allows for the descriptor's ring slot, and says so.
    #[cold]
    #[inline(never)]
    pub(super) fn refuse_rx(&mut self, e: &pool::FrameError) {
        self.c.rx_rejected += 1;
        self.rx_refused += 1;
        if self.rx_refused <= REFUSALS_LOGGED {
            tracing::warn!(
                socket = self.socket,
                "refused an RX descriptor: {e}; counted rx_rejected{}",
                if self.rx_refused == REFUSALS_LOGGED {
                    " (further ones on this socket are only counted)"
                } else {
                    ""
                }
            );
        }
    }

    /// Gives back every frame the closed socket left in the kernel's rings: our
    /// pool's fill and TX frames, and other ports' frames still in our TX ring (to
    /// their pools). Context rule: the kernel can no longer touch them. Returns how
    /// many descriptors were reclaimed.
    pub fn reclaim(&mut self, remotes: &Remotes) -> u32 {
        debug_assert!(self.io.is_none() && self.tx.is_empty());
        let mut n = self.pool.reclaim_kernel();
        for i in 0..self.foreign.len() {
            if let Some(f) = self.foreign[i].take() {
                self.give_back(f.origin, f.token, remotes);
                self.c.foreign_reclaimed += 1;
                n += 1;
            }
        }
        self.c.reclaimed += n as u64;
        self.in_fill = 0;
        self.inflight.reset();
        // Nothing of this pool may be left in a fill or TX ring now.
        self.audit(KernelHeld::default(), "after the reclaim");
        n
    }

    /// The region the pool allocates from.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// What a packet function's `emit` and `keep` work with for a frame of this port:
    /// its pool, counters and TX queue, the worker's `out`, and the batch's `site`.
    #[inline]
    pub(super) fn emitter<'a>(
        &'a mut self,
        out: &'a mut Vec<(PortId, Egress)>,
        site: &'a EmitSite<'a>,
    ) -> Emitter<'a> {
        Emitter {
            pool: &mut self.pool,
            c: &mut self.c,
            tx: &mut self.tx,
            out,
            site,
            kept: None,
        }
    }

    /// What an action on a frame this port received works with: its pool, counters,
    /// TX queue and region, and the worker's `out`, `scratch`, MAC book and miss flag.
    #[inline]
    pub fn act_ctx<'a>(
        &'a mut self,
        out: &'a mut Vec<(PortId, Egress)>,
        scratch: &'a mut [u8],
        copybreak_bytes: u32,
        macs: &'a MacBook,
        neigh_missed: &'a mut bool,
    ) -> ActCtx<'a> {
        ActCtx {
            pool: &mut self.pool,
            c: &mut self.c,
            tx: &mut self.tx,
            out,
            region: &self.region,
            scratch,
            copybreak_bytes,
            macs,
            origin: self.socket as u16,
            neigh_missed,
        }
    }
}
