//! A lane: one socket a worker serves. Its [`Port`], the port's rule lookup, the
//! frames the application holds, a multi-buffer frame being received, and the
//! socket hand-over with the control thread.

use super::action::{Act, PortId, Verdict};
use super::handoff::Remotes;
use super::port::Port;
use super::rules::LaneRules;
use super::shared::PortShared;
use super::{LaneSpec, WorkerExit, DESTROY_WAIT, MAX_CHAIN};
use crate::config::WaitMode;
use crate::xsk::{XdpDesc, XdpStatistics};
use pool::Frame;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a lane's rules need per frame: own TX descriptors, ports handed to.
#[derive(Debug, Clone)]
pub(super) struct LaneNeeds {
    pub own_tx: usize,
    pub egress: Vec<PortId>,
}

/// A frame the application keeps, with what it read from it.
pub(super) struct Held {
    frame: Frame,
    addr: u64,
    len: u32,
    digest: u64,
}

/// FNV-1a over a frame's bytes: enough to notice that someone wrote into it.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An idle port's RX wake-ups back off to one every 2^RX_KICK_BACKOFF passes (see
/// `Lane::kick`).
const RX_KICK_BACKOFF: u32 = 6;

pub(super) struct Lane {
    pub port: Port,
    pub shared: Arc<PortShared>,
    pub rules: LaneRules,
    pub queue_pos: usize,
    pub needs: LaneNeeds,
    pub held: Vec<Held>,
    /// Buffers of a multi-buffer frame received so far (the last one ends it).
    pub chain: Vec<(Frame, XdpDesc)>,
    /// A buffer of the frame in `chain` was refused: drop the frame when it ends.
    pub chain_broken: bool,
    busy_poll: bool,
    busy_poll_warned: bool,
    napi_checked: bool,
    /// The last pass ended with a busy-poll recvfrom on a socket with a NAPI id.
    polled_napi: bool,
    /// RX wake-ups in a row that found no frame by the next pass, and the passes
    /// still to skip before the next (see `kick`).
    rx_idle_kicks: u32,
    rx_kick_wait: u32,
    /// How the loop waits for this lane: the configured mode, or poll() where
    /// busy-poll cannot work on this socket.
    pub wait: WaitMode,
    xsk_total: XdpStatistics,
    /// Frames received since the worker last went idle (what a nap gathered).
    pub rx_since_idle: u64,
}

impl Lane {
    pub(super) fn new(port: Port, shared: Arc<PortShared>, spec: LaneSpec, mode: WaitMode) -> Lane {
        let rules = LaneRules::new(spec.rules);
        let (own_tx, egress) = rules.current.classifier.needs();
        Lane {
            port,
            shared,
            needs: LaneNeeds { own_tx, egress },
            rules,
            queue_pos: spec.queue_pos,
            held: Vec::new(),
            chain: Vec::with_capacity(MAX_CHAIN),
            chain_broken: false,
            busy_poll: false,
            busy_poll_warned: false,
            napi_checked: false,
            polled_napi: false,
            rx_since_idle: 0,
            rx_idle_kicks: 0,
            rx_kick_wait: 0,
            wait: mode,
            xsk_total: XdpStatistics::default(),
        }
    }

    /// A new socket: fill it, then return what the application held across the loss.
    #[cold]
    pub(super) fn start(&mut self, io: Box<dyn super::PortIo>, budget: u16, mode: WaitMode) {
        self.busy_poll = false;
        self.napi_checked = false;
        self.polled_napi = false;
        self.rx_idle_kicks = 0;
        self.rx_kick_wait = 0;
        self.rx_since_idle = 0;
        self.wait = mode;
        if mode == WaitMode::BusyPoll {
            self.enable_busy_poll(io.as_ref(), budget);
        }
        self.port.attach(io);
        self.shared.handover().started();
        self.release_held();
        tracing::info!(port = %self.shared.port, queue = self.shared.queue, "worker running on a new socket");
    }

    /// Gives the socket up: what the RX ring still holds (valid frames) and the
    /// completions are taken, then the socket closes. The frames the kernel held stay
    /// counted in the fill and TX rings until the control thread says `reclaim`.
    #[cold]
    pub(super) fn give_up(&mut self, remotes: &Remotes) {
        self.drop_chain();
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut quiet = 0;
        while quiet < 3 && Instant::now() < deadline {
            let got = self.port.drain_rx() + self.port.reap(remotes);
            if got == 0 {
                quiet += 1;
                std::thread::sleep(Duration::from_millis(2));
            } else {
                quiet = 0;
            }
        }
        self.publish(true);
        let failures = self.port.c.teardown_audit_failures;
        if let Some(io) = self.port.detach(remotes) {
            add_xsk(&mut self.xsk_total, &io.statistics().unwrap_or_default());
        }
        self.note_audit(failures);
        self.busy_poll = false;
        self.shared.handover().gave_up();
        self.shared.counters.publish(&self.port.c);
        tracing::info!(port = %self.shared.port, queue = self.shared.queue, "socket given up; kernel frames wait to be reclaimed");
    }

    /// Takes back what the closed socket left in the kernel's rings.
    pub(super) fn reclaim(&mut self, remotes: &Remotes) {
        let failures = self.port.c.teardown_audit_failures;
        let n = self.port.reclaim(remotes);
        self.note_audit(failures);
        self.verify_held();
        self.shared.handover().reclaimed();
        self.shared.counters.publish(&self.port.c);
        tracing::info!(port = %self.shared.port, queue = self.shared.queue, reclaimed = n, held = self.held.len(), "kernel frames reclaimed");
    }

    /// Tells the control thread when a teardown audit failed since `failures` (before
    /// the hand-over moves on, which publishes it).
    fn note_audit(&self, failures: u64) {
        if self.port.c.teardown_audit_failures != failures {
            self.shared
                .teardown_audit_failed
                .store(true, Ordering::Relaxed);
        }
    }

    /// Publishes the counters (and, with `stats`, the kernel's).
    pub(super) fn publish(&mut self, stats: bool) {
        self.shared.counters.publish(&self.port.c);
        if !stats {
            return;
        }
        let Some(io) = self.port.io() else { return };
        if let Some(s) = io.statistics() {
            *self
                .shared
                .xsk_stats
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = s;
        }
        if io.reports_device_gone() {
            tracing::info!(port = %self.shared.port, queue = self.shared.queue, "SO_ERROR reports the device gone");
            self.shared.device_gone.store(true, Ordering::Relaxed);
        }
        *self
            .shared
            .ring_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = io.ring_errors();
    }

    /// Wake-ups after a pass: TX when frames wait (busy-poll: always, sendto is where
    /// the kernel polls), RX when the kernel asks (busy-poll: recvfrom on an empty pass).
    #[inline]
    pub(super) fn kick(&mut self, tx_work: bool, got: usize) {
        let mut alive = true;
        if tx_work {
            alive &= self.port.kick_tx(self.busy_poll);
        }
        if self.busy_poll && got > 0 && !self.napi_checked {
            self.check_napi();
        }
        // Frames found after a busy poll of a known NAPI: that poll served them.
        if self.polled_napi && got > 0 {
            self.port.c.busy_poll_served += 1;
        }
        self.polled_napi = false;
        if self.busy_poll && got == 0 {
            self.port.c.busy_poll_calls += 1;
            alive &= self.port.kick_rx(true);
            self.polled_napi = self.napi_checked;
        } else if got > 0 {
            self.rx_idle_kicks = 0;
            self.rx_kick_wait = 0;
            alive &= self.port.kick_rx(false);
        } else if self.rx_kick_wait > 0 {
            self.rx_kick_wait -= 1;
        } else {
            // Nothing received: the kernel may ask for a wake-up that finds nothing to
            // do. virtio-net in zero-copy sets the fill ring's flag whenever its RX
            // queue is full of buffers (nothing to add), so an idle port that kicked
            // each pass made a recvfrom and a NAPI run a pass for no frame (in the
            // guest, an egress-only port: some 900 000 in a run of seconds). From the
            // second kick in a row that finds no frame, the passes to the next double,
            // up to 2^RX_KICK_BACKOFF: a port starved of buffers waits that long at most.
            let kicks = self.port.c.wakeups;
            alive &= self.port.kick_rx(false);
            if self.port.c.wakeups != kicks {
                self.rx_kick_wait = (1u32 << self.rx_idle_kicks.min(RX_KICK_BACKOFF)) - 1;
                self.rx_idle_kicks = self.rx_idle_kicks.saturating_add(1);
            }
        }
        if !alive {
            self.shared.device_gone.store(true, Ordering::Relaxed);
        }
    }

    /// Once per batch: takes a rule list the control thread published (and what it
    /// needs per frame).
    #[inline]
    pub(super) fn refresh_rules(&mut self) {
        if self.rules.refresh() {
            let (own_tx, egress) = self.rules.current.classifier.needs();
            self.needs = LaneNeeds { own_tx, egress };
            self.port.c.rules_taken += 1;
        }
    }

    /// Every frame steered here is dropped unread: nothing is sent, nothing read,
    /// nothing held (not during a rule hand-over: each frame's tag is read then).
    #[inline]
    pub(super) fn drops_unread(&self, hold: usize) -> bool {
        let c = &self.rules.current.classifier;
        !self.rules.by_tag() && c.is_uniform() && c.uniform() == Verdict::DROP && hold == 0
    }

    /// `receive` for [`drops_unread`](Self::drops_unread): each frame goes straight
    /// back to the fill ring in one batch (`PoolOwner::rx_drop`).
    pub(super) fn receive_drop(&mut self, descs: &[XdpDesc], remotes: &Remotes) {
        let mut back = 0;
        for &d in descs {
            if self.in_chain(&d) {
                self.chain_desc(d, remotes);
                continue;
            }
            match self.port.pool.rx_drop(d.addr, d.len) {
                Ok(addr) => {
                    self.port.fill_scratch()[back] = addr;
                    back += 1;
                    let c = &mut self.port.c;
                    c.rx_drop_to_fill += 1;
                    c.rx_packets += 1;
                    c.rx_bytes += d.len as u64;
                    c.action_drop += 1;
                }
                Err(e) => self.port.refuse_rx(&e),
            }
        }
        if back > 0 {
            // Each of these took a fill entry, so the ring has room for them all.
            self.port.put_on_fill(back);
            self.port.pool.publish_stats();
        }
    }

    /// A single-buffer RX descriptor as a frame of our pool, counted, with its verdict.
    #[inline(always)]
    pub(super) fn take(&mut self, d: XdpDesc) -> Option<(Frame, Verdict)> {
        let mut frame = match self.port.pool.take_rx(d.addr, d.len) {
            Ok(f) => f,
            Err(e) => {
                self.port.refuse_rx(&e);
                return None;
            }
        };
        self.port.c.rx_packets += 1;
        self.port.c.rx_bytes += d.len as u64;
        // take_rx checked addr..addr+len lies in the frame's chunk.
        let offset = (d.addr - frame.addr()) as u32;
        let (verdict, unknown) = self
            .rules
            .verdict(self.port.region(), &mut frame, offset, d.len);
        self.port.c.rule_untagged += u64::from(unknown);
        Some((frame, verdict))
    }

    /// The application keeps a dropped frame (`--hold-frames`) while it holds fewer
    /// than `hold`; the frame comes back when it is not kept.
    #[inline(always)]
    pub(super) fn hold(
        &mut self,
        frame: Frame,
        d: XdpDesc,
        v: Verdict,
        hold: usize,
    ) -> Option<Frame> {
        if hold == 0 || v != Verdict::DROP || self.held.len() >= hold {
            return Some(frame);
        }
        self.keep_held(frame, d)
    }

    #[cold]
    #[inline(never)]
    fn keep_held(&mut self, frame: Frame, d: XdpDesc) -> Option<Frame> {
        let offset = (d.addr - frame.addr()) as u32;
        let sum = digest(
            self.port
                .region()
                .frame_bytes(&frame, offset, d.len)
                .unwrap_or(&[]),
        );
        self.held.push(Held {
            digest: sum,
            frame,
            addr: d.addr,
            len: d.len,
        });
        self.port.c.held_taken += 1;
        self.port.c.held = self.held.len() as u64;
        None
    }

    /// Re-reads every held frame: the memory must still be mapped and unchanged.
    fn verify_held(&mut self) {
        for h in &self.held {
            match self
                .port
                .region()
                .frame_bytes(&h.frame, (h.addr - h.frame.addr()) as u32, h.len)
            {
                Some(bytes) if digest(bytes) == h.digest => self.port.c.held_verified += 1,
                _ => {
                    self.port.c.held_corrupt += 1;
                    tracing::error!(
                        queue = self.shared.queue,
                        addr = h.addr,
                        "a held frame changed while the device was away"
                    );
                }
            }
        }
    }

    /// The application returns every frame it held.
    pub(super) fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        self.verify_held();
        let n = self.held.len() as u64;
        for h in self.held.drain(..) {
            self.port.pool.recycle(h.frame);
        }
        self.port.c.held_returned += n;
        // A held frame matched the drop rule: returned, it is dropped, so that
        // action_drop + held (now) accounts for every frame the rule matched.
        self.port.c.action_drop += n;
        self.port.c.held = 0;
    }

    #[cold]
    fn enable_busy_poll(&mut self, io: &dyn super::PortIo, budget: u16) {
        match io.set_busy_poll(budget) {
            Ok(()) => {
                self.busy_poll = true;
                self.port.c.busy_poll_sockets += 1;
                tracing::info!(
                    queue = self.shared.queue,
                    budget,
                    "busy-poll on (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET)"
                );
                self.require_irq_deferral();
            }
            Err(e) => {
                self.port.c.busy_poll_refused += 1;
                self.wait = WaitMode::Spin;
                if !self.busy_poll_warned {
                    self.busy_poll_warned = true;
                    tracing::warn!(queue = self.shared.queue, error = %e, "busy-poll refused; spinning instead");
                }
            }
        }
    }

    /// Busy-poll needs the device's interrupts deferred (xdpool requires the
    /// settings, it does not change them): say what they are, and how to set them.
    #[cold]
    fn require_irq_deferral(&self) {
        let dev = &self.shared.interface;
        match crate::xsk::IrqDeferral::read(dev) {
            Some(d) if d.defers() => tracing::info!(
                interface = %dev, napi_defer_hard_irqs = d.defer_hard_irqs, gro_flush_timeout_ns = d.gro_flush_timeout_ns,
                "busy-poll: {dev}'s interrupts stay deferred while the worker polls"
            ),
            Some(d) => tracing::warn!(
                interface = %dev, napi_defer_hard_irqs = d.defer_hard_irqs, gro_flush_timeout_ns = d.gro_flush_timeout_ns,
                "busy-poll: {dev} does not defer its interrupts, so the NAPI runs on every interrupt and busy polls find \
                 little; set both: echo 2 > /sys/class/net/{dev}/napi_defer_hard_irqs; echo 200000 > /sys/class/net/{dev}/gro_flush_timeout"
            ),
            None => {
                tracing::debug!(interface = %dev, "busy-poll: no napi_defer_hard_irqs in this sysfs")
            }
        }
    }

    /// Busy-poll drives the NAPI the kernel noted on the socket with its first
    /// frames; without one (veth) recvfrom polls nothing: wait in poll() instead.
    #[cold]
    fn check_napi(&mut self) {
        self.napi_checked = true;
        if let Some(id) = self.port.io().and_then(|io| io.napi_id()) {
            tracing::info!(
                queue = self.shared.queue,
                napi_id = id,
                "busy-poll drives NAPI {id}"
            );
            self.port.c.busy_poll_napi += 1;
            return;
        }
        self.busy_poll = false;
        self.wait = WaitMode::Poll;
        self.port.c.busy_poll_no_napi += 1;
        tracing::warn!(
            queue = self.shared.queue,
            "busy-poll: the device gave this socket no NAPI id (veth gives none), so recvfrom has nothing to poll; \
             waiting in poll() instead (use mode = \"poll\" on this device)"
        );
    }

    /// The end: destroy the pool (waiting a while for frames other ports still hold).
    pub(super) fn finish(self) -> WorkerExit {
        let c = self.port.c;
        let id = self.port.pool.id();
        let report = self.port.pool.destroy();
        let mut inflight_at_destroy = report.inflight;
        if inflight_at_destroy > 0 {
            if let Err(e) = report.wait(DESTROY_WAIT) {
                inflight_at_destroy = report.inflight_now();
                tracing::warn!(error = %e, "stalled shutdown: pool {id}, {inflight_at_destroy} inflight");
            } else {
                inflight_at_destroy = 0;
            }
        }
        // Taken after the destroy (and the wait): the cache and the return ring are
        // back on the global lists, so `inflight` here agrees with the region's
        // accounting, and `destroyed` is true.
        let pool_stats = report.stats();
        WorkerExit {
            port: self.shared.port.clone(),
            interface: self.shared.interface.clone(),
            queue: self.shared.queue,
            zero_copy: self.shared.zero_copy.load(Ordering::SeqCst),
            drained_rx: c.drained_rx,
            reclaimed: c.reclaimed,
            inflight_at_destroy,
            counters: c,
            pool: pool_stats,
            xsk: self.xsk_total,
            handler_events: crate::summary::handler_events(&self.shared.user_counters),
        }
    }
}

/// Sums the kernel counters of successive sockets.
fn add_xsk(sum: &mut XdpStatistics, s: &XdpStatistics) {
    sum.rx_dropped += s.rx_dropped;
    sum.rx_invalid_descs += s.rx_invalid_descs;
    sum.tx_invalid_descs += s.tx_invalid_descs;
    sum.rx_ring_full += s.rx_ring_full;
    sum.rx_fill_ring_empty_descs += s.rx_fill_ring_empty_descs;
    sum.tx_ring_empty_descs += s.tx_ring_empty_descs;
}

impl Verdict {
    /// Whether the frame is sent back on the receiving socket (multi-buffer chains
    /// support this and drop).
    pub(super) fn is_l2fwd(&self) -> bool {
        self.act() == Act::L2fwd && self.mirror_to().is_none()
    }
}
