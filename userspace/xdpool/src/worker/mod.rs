//! Pinned worker threads. A worker owns one or more sockets ("lanes": a [`Port`],
//! its pool, its rule lookup); by default one per (port, queue). Loop, per lane:
//! reap completions -> refill the fill ring -> take an RX batch, each frame through
//! its action ([`action`]) -> hand frames for other ports to them ([`handoff`]) ->
//! put frames other ports sent here on the TX ring -> TX -> wake the kernel when it
//! asks. Counters are single-writer locals published with plain stores.
//!
//! Wait modes: `spin`, `poll` (poll(2) on every lane's socket and the worker's
//! eventfd), and `busy-poll` (socket options set when a socket is taken; RX driven
//! with `recvfrom` and TX with `sendto` on every empty pass).

pub mod action;
mod call;
mod capture;
mod chain;
pub mod classify;
pub mod counters;
pub mod handoff;
#[allow(unsafe_code)] // loom models: loom's UnsafeCell
pub mod handover;
#[cfg(any(test, feature = "testing"))]
#[allow(unsafe_code)] // the test's kernel side writes and reads frames in the UMEM
pub(crate) mod harness;
pub mod inflight;
mod lane;
pub mod mailbox;
pub mod port;
pub mod rules;
pub mod shared;
#[cfg(test)]
#[allow(unsafe_code)] // reads frames out of a test UMEM
mod tests;

pub use call::install_panic_hook;
pub use counters::{WorkerCounters, WorkerCountersSnapshot};
pub use port::{fill_target, Port, PortIo, PortRings, MAX_BATCH};
pub use shared::{PortShared, Waker};

use crate::api::{HandlerSet, KeptStore, LaneSetup, PortRef, RuleOf, Tick};
use crate::config::HandlerDecl;
use crate::config::{MacRewrite, WaitMode};
use crate::neigh::{MacBook, Neighbours};
use crate::xsk::{XdpDesc, XdpStatistics};
use action::{Act, PortId};
use handoff::{Egress, Remotes};
use handover::Phase;
use lane::Lane;
use pool::{PoolConfig, PoolOwner, PoolStats, Region};
use port::LocalReturns;
use serde::Serialize;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most buffers of one multi-buffer frame; a longer chain is dropped whole and counted.
pub const MAX_CHAIN: usize = 32;

/// While busy, the loop publishes its counters (and looks at the clock) once in
/// this many passes.
const PUBLISH_EVERY: u32 = 64;

/// How long an idle `poll` worker sleeps at most (requests wake it at once through
/// its eventfd; this bounds only how stale the kernel socket stats get).
const POLL_TIMEOUT_MS: u16 = 1000;

/// Most extra batches one pass takes while shedding: the transmit side is the
/// bottleneck, and a `sendto()` between two passes can take longer than a batch
/// of arrivals, so one batch a pass would still let the fill ring run empty.
const SHED_BATCHES: usize = 16;

/// How often the sockets' kernel counters (`XDP_STATISTICS`) are read (the control
/// loop moves [`Fabric::stats_due`] on).
pub const STATS_EVERY: Duration = Duration::from_millis(100);

/// How long a worker waits for frames still out when its pools are destroyed.
pub const DESTROY_WAIT: Duration = Duration::from_millis(500);

/// One socket a worker serves.
#[derive(Debug, Clone)]
pub struct LaneSpec {
    /// Socket index in the plan (pool id).
    pub socket: usize,
    /// Port index in the plan.
    pub port: PortId,
    /// Position of this queue among its port's queues (picks the egress queue).
    pub queue_pos: usize,
    /// The socket's rule list (the control thread publishes reloads into it).
    pub rules: Arc<rules::RuleSlot>,
    /// Ring sizes.
    pub rings: PortRings,
}

/// What a worker is told to do.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// Core to pin to (`None`: not pinned).
    pub core: Option<usize>,
    /// Descriptors per batch.
    pub batch: usize,
    /// How to wait when idle.
    pub mode: WaitMode,
    /// The sockets served.
    pub lanes: Vec<LaneSpec>,
    /// Frames the application keeps per socket (0: none), held across device losses.
    pub hold_frames: usize,
    /// `copybreak`: frames of at most this many bytes are copied into frags.
    pub copybreak_bytes: u32,
    /// `busy-poll` mode: SO_BUSY_POLL_BUDGET.
    pub busy_poll_budget: u16,
    /// `poll` mode: nap after a pass that received frames (zero: poll() at once).
    pub poll_coalesce: Duration,
    /// `workers.tx_bottleneck = "shed"`: shed once the fill ring runs low (`rx_budget`).
    pub shed: bool,
    /// `workers.handler_panic = "stop"`: a handler's panic stops the run (the frame is
    /// dropped and counted either way).
    pub stop_on_handler_panic: bool,
}

impl WorkerSpec {
    /// What `[workers]` of `cfg` says, for `lanes` on `core`, keeping `hold_frames`
    /// per socket: the one place a worker's settings are read from the config (the
    /// runtime's and the test harness's workers alike).
    pub fn from_config(
        cfg: &crate::config::Config,
        core: Option<usize>,
        lanes: Vec<LaneSpec>,
        hold_frames: usize,
    ) -> WorkerSpec {
        let w = &cfg.workers;
        WorkerSpec {
            core,
            batch: *w.batch.get_ref() as usize,
            mode: w.mode,
            lanes,
            hold_frames,
            copybreak_bytes: *w.copybreak_bytes.get_ref(),
            // Validated to 1..=1024.
            busy_poll_budget: *w.busy_poll_budget.get_ref() as u16,
            poll_coalesce: Duration::from_micros(u64::from(*w.poll_coalesce_us.get_ref())),
            shed: w.tx_bottleneck == crate::config::TxBottleneck::Shed,
            stop_on_handler_panic: w.handler_panic == crate::config::HandlerPanic::Stop,
        }
    }
}

/// `poll` mode's nap while traffic flows (`workers.poll_coalesce_us`), sized by what
/// the naps gather: 5/4 as long after a nap that brought in an eighth to a third of
/// the RX ring, 3/4 after one that brought in over two thirds, from a quarter of the
/// configured length to four times it (at most [`MAX_POLL_COALESCE_US`]); after one
/// that brought in less than an eighth, the configured length again. A nap is a
/// sleep on a timer, which costs the worker's core the same however long it is (about
/// 14-24 us of CPU on the lab's virtual machine): the fewer frames a nap gathers, the
/// more that is per frame. At a high rate a long nap overflows the RX ring; at a low
/// one a nap gathers a handful of frames however long it is, and a long one would
/// only make them wait and leave less room for a burst. Each burst of traffic (after
/// a poll() sleep) starts from the configured length. The frames are counted per
/// socket: the busiest one's against its ring.
///
/// [`MAX_POLL_COALESCE_US`]: crate::config::MAX_POLL_COALESCE_US
#[derive(Debug, Clone, Copy)]
struct Nap {
    configured: Duration,
    len: Duration,
    min: Duration,
    max: Duration,
    /// The smallest RX ring of the worker's sockets.
    ring: u64,
}

impl Nap {
    fn new(configured: Duration, ring: u32) -> Nap {
        Nap {
            configured,
            len: configured,
            min: configured / 4,
            max: (configured * 4).min(Duration::from_micros(u64::from(
                crate::config::MAX_POLL_COALESCE_US,
            ))),
            ring: u64::from(ring),
        }
    }

    /// Back to the configured length (after a poll() sleep: traffic had paused).
    fn restart(&mut self) {
        self.len = self.configured;
    }

    /// How long the next nap is (zero: no naps, poll() at once).
    fn len(&self) -> Duration {
        self.len
    }

    /// A nap ended and `got` frames came in before the worker went idle again.
    fn gathered(&mut self, got: u64) {
        if got * 3 > self.ring * 2 {
            self.len = (self.len * 3 / 4).max(self.min);
        } else if got * 8 < self.ring {
            // A trickle: the configured length, so that a burst (a paced sender
            // catching up) finds the worker awake as soon as it would have been,
            // and a nap shortened by heavier traffic is not kept short.
            self.restart();
        } else if got * 3 < self.ring {
            self.len = (self.len * 5 / 4).min(self.max);
        }
    }
}

/// What every worker shares: each socket's shared state, which sockets a port has,
/// every pool's return handle, and the MAC book.
pub struct Fabric {
    /// Every socket's shared state, by socket index.
    pub sockets: Vec<Arc<PortShared>>,
    /// Socket indexes of each port, by port index.
    pub port_sockets: Vec<Vec<usize>>,
    /// Every pool's remote handle, by socket index.
    pub remotes: Arc<Remotes>,
    /// Device MACs and next hops.
    pub neighbours: Arc<Neighbours>,
    /// Packet capture: off unless `xdpool capture` runs.
    pub capture: Arc<crate::capture::CaptureTap>,
    /// The tap of the rules' `capture` files (empty while no rule has one).
    pub file_capture: Arc<crate::capture::CaptureTap>,
    /// The first handler panic, when `workers.handler_panic = "stop"`: the control
    /// loop stops the run with it.
    pub handler_failure: std::sync::Mutex<Option<String>>,
    /// Control messages for the packet functions' lanes.
    pub mailbox: mailbox::Mailbox,
    /// Moved on by the control loop every [`STATS_EVERY`]: a worker reads its
    /// sockets' kernel counters when it changed. The clock is the control loop's:
    /// where the kernel's clocksource is not the TSC (a TCG guest's is the HPET),
    /// every `clock_gettime` is a system call, too dear for the worker's loop.
    pub stats_due: std::sync::atomic::AtomicU64,
}

impl Fabric {
    /// The socket of port `port` that frames from queue position `pos` leave by.
    #[inline]
    pub fn egress_socket(&self, port: PortId, pos: usize) -> usize {
        let s = &self.port_sockets[port];
        s[pos % s.len()]
    }
}

/// How one socket's service ended.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerExit {
    /// Port name.
    pub port: String,
    /// Interface.
    pub interface: String,
    /// Queue served.
    pub queue: u32,
    /// Whether the last socket was bound in zero-copy mode.
    pub zero_copy: bool,
    /// Frames drained from the RX ring after the stop (all socket teardowns).
    pub drained_rx: u64,
    /// Frames taken back from the kernel's hands (fill and TX rings), all teardowns.
    pub reclaimed: u64,
    /// Frames still out when the pool was destroyed and the wait timed out.
    pub inflight_at_destroy: u64,
    /// Final counters.
    pub counters: WorkerCountersSnapshot,
    /// Final pool stats.
    pub pool: PoolStats,
    /// Kernel socket stats, summed over every socket served.
    pub xsk: XdpStatistics,
    /// The counters this socket's packet functions kept, at the end.
    pub handler_events: Vec<crate::summary::HandlerEvent>,
}

/// Pins the calling thread to `core`.
pub fn pin_to_core(core: usize) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(core)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

/// Runs a worker until `stop` is set, on whatever sockets the control thread offers
/// (none at first is fine). Each lane's pool is built here (the owner never leaves
/// this thread). On each release and at the end a lane drains RX, reaps, closes its
/// socket and, when told, reclaims the kernel's frames; at the end the pools are
/// destroyed. Context: the worker's own thread.
pub fn run(
    region: Arc<Region>,
    spec: WorkerSpec,
    fabric: Arc<Fabric>,
    stop: Arc<AtomicBool>,
) -> Vec<WorkerExit> {
    run_with(region, spec, fabric, stop, Arc::new(()))
}

/// [`run`] with a program's packet functions: the loop is compiled for `H`, so a
/// `call` rule's handler is inlined into it. Each lane's handler state is made here,
/// on the worker's thread, and lives as long as the lane (across sockets and
/// reloads).
pub fn run_with<H: HandlerSet>(
    region: Arc<Region>,
    spec: WorkerSpec,
    fabric: Arc<Fabric>,
    stop: Arc<AtomicBool>,
    handlers: Arc<H>,
) -> Vec<WorkerExit> {
    if let Some(core) = spec.core {
        if let Err(e) = pin_to_core(core) {
            tracing::warn!(core, error = %e, "could not pin worker; running unpinned");
        }
    }
    // Borrowed by every pass: a clone per pass would be an atomic read-modify-write
    // (two with the drop) for nothing.
    let remotes = fabric.remotes.clone();
    let mut w = Worker::new(&region, spec, fabric, handlers);
    let mut passes: u32 = 0;
    let mut was_busy = false;
    while !stop.load(Ordering::Relaxed) {
        w.refresh_book();
        w.handler_chores(Instant::now);
        let mut busy = false;
        for i in 0..w.lanes.len() {
            w.service(i);
            busy |= w.step_with(i, &remotes, &region);
        }
        passes = passes.wrapping_add(1);
        // Publishing (some forty stores per lane) is not free: every PUBLISH_EVERY
        // passes, on the first idle pass after work, and on each idle pass of a
        // worker that polls (it may sleep next).
        if passes.is_multiple_of(PUBLISH_EVERY) || (!busy && (was_busy || w.polls())) {
            w.publish(false);
        }
        was_busy = busy;
        if !busy {
            w.idle();
        }
    }
    w.finish()
}

struct Worker<H: HandlerSet> {
    spec: WorkerSpec,
    /// The program's packet functions and each lane's state of them.
    handlers: Arc<H>,
    handler_lanes: Vec<H::Lanes>,
    /// Each lane's frames its handlers keep (`Packet::keep`).
    kept: Vec<Rc<KeptStore>>,
    /// Lanes whose handler panicked already (one log line each).
    panic_logged: Vec<bool>,
    lanes: Vec<Lane>,
    fabric: Arc<Fabric>,
    /// Lane index of each socket this worker serves, by socket index.
    local: Vec<Option<usize>>,
    /// Completed frames of this worker's own pools (by lane), between a lane's reap
    /// and their release into that lane's pool (`release_local`).
    returns: Vec<(usize, pool::Frag)>,
    /// Frames for other ports from the batch being processed.
    out: Vec<(PortId, Egress)>,
    descs: Box<[XdpDesc]>,
    /// Where `copybreak` copies a frame (one chunk).
    scratch: Box<[u8]>,
    book: Arc<MacBook>,
    book_version: u64,
    /// Sockets of other workers handed frames this pass (woken if asleep).
    woken: Vec<usize>,
    /// The `Fabric::stats_due` the last kernel counters were read for.
    stats_seen: u64,
    /// `poll` mode's nap while traffic flows, sized by what the last ones gathered.
    nap: Nap,
    /// The last idle was a nap (so the frames received since were gathered by it).
    napped: bool,
    /// The last `rx_budget` took a whole batch to shed (see there).
    shedding: bool,
    /// The last control message this worker's lanes answered.
    mail_seen: u64,
    /// How often the handlers want their lanes ticked (the shortest they asked for).
    tick_every: Option<Duration>,
    next_tick: Option<Instant>,
}

impl<H: HandlerSet> Worker<H> {
    fn new(
        region: &Arc<Region>,
        spec: WorkerSpec,
        fabric: Arc<Fabric>,
        handlers: Arc<H>,
    ) -> Worker<H> {
        let node = spec
            .core
            .map(|c| region.topology().node_of_cpu(c as u32))
            .unwrap_or(0);
        let mut local = vec![None; fabric.sockets.len()];
        let mut lanes = Vec::new();
        for (i, ls) in spec.lanes.iter().enumerate() {
            let pool = PoolOwner::new(
                region,
                PoolConfig {
                    id: ls.socket as u32,
                    preferred_node: node,
                    ..PoolConfig::default()
                },
            );
            let shared = fabric.sockets[ls.socket].clone();
            *shared.pool.lock().unwrap_or_else(|p| p.into_inner()) = Some(pool.remote());
            fabric.remotes.set(ls.socket, pool.remote());
            local[ls.socket] = Some(i);
            let port = Port::new(ls.socket, pool, ls.rings, spec.batch);
            lanes.push(Lane::new(port, shared, ls.clone(), spec.mode));
        }
        let handler_lanes = handler_lanes(&*handlers, &spec, &fabric);
        let book = fabric.neighbours.current();
        let mut decls = Vec::new();
        handlers.decls(&mut decls);
        let tick_every = decls.iter().filter_map(|d| d.tick).min();
        Worker {
            panic_logged: vec![false; lanes.len()],
            kept: (0..lanes.len()).map(|_| Rc::default()).collect(),
            handler_lanes,
            handlers,
            book_version: fabric.neighbours.version(),
            book,
            lanes,
            returns: Vec::with_capacity(MAX_BATCH),
            local,
            out: Vec::with_capacity(2 * MAX_BATCH),
            descs: vec![XdpDesc::default(); MAX_BATCH].into_boxed_slice(),
            scratch: vec![0; region.chunk_size() as usize].into_boxed_slice(),
            woken: Vec::new(),
            stats_seen: 0,
            nap: Nap::new(
                spec.poll_coalesce,
                spec.lanes.iter().map(|l| l.rings.rx).min().unwrap_or(0),
            ),
            napped: false,
            shedding: false,
            mail_seen: fabric.mailbox.posted(),
            tick_every,
            next_tick: None,
            fabric,
            spec,
        }
    }

    /// Between passes: a control message for the handlers' lanes, if one was
    /// posted (one load), and the lanes' ticks when due (the clock is read only
    /// when some handler asked for ticks).
    #[inline]
    fn handler_chores(&mut self, now: impl FnOnce() -> Instant) {
        let posted = self.fabric.mailbox.posted();
        if posted != self.mail_seen {
            self.mail_seen = posted;
            self.answer_mail(posted);
        }
        if let Some(every) = self.tick_every {
            let now = now();
            if self.next_tick.is_none_or(|t| now >= t) {
                self.next_tick = Some(now + every);
                self.tick(now);
            }
        }
    }

    /// Hands control message `seq` to each lane's handler state; the answers go
    /// back through the mailbox.
    #[cold]
    fn answer_mail(&mut self, seq: u64) {
        let fabric = self.fabric.clone();
        fabric.mailbox.take(seq, |handler, text| {
            let mut answers = Vec::with_capacity(self.lanes.len());
            for (i, lane) in self.lanes.iter().enumerate() {
                let lanes = &mut self.handler_lanes[i];
                let result = match call::guarded(|| self.handlers.control(handler, lanes, text)) {
                    Ok(r) => r,
                    Err(payload) => Err(format!(
                        "the handler panicked: {}",
                        call::panic_message(&*payload)
                    )),
                };
                answers.push(mailbox::Answer {
                    port: lane.shared.port.clone(),
                    queue: lane.shared.queue,
                    result,
                });
            }
            answers
        });
    }

    /// Every attached lane's handlers ticked at `now`; what they sent leaves as a
    /// batch's frames do.
    fn tick(&mut self, now: Instant) {
        let remotes = self.fabric.remotes.clone();
        for i in 0..self.lanes.len() {
            if !self.lanes[i].port.has_io() {
                continue;
            }
            let Worker {
                lanes,
                out,
                scratch,
                book,
                spec,
                fabric,
                handlers,
                handler_lanes,
                panic_logged,
                kept,
                ..
            } = self;
            let lane = &mut lanes[i];
            let region = lane.port.region().clone();
            let egress = std::mem::take(&mut lane.needs.egress);
            let declared = call::Declared::new(spec.lanes[i].port, &egress);
            let site = call::EmitSite {
                region: &region,
                book,
                origin: lane.port.socket as u16,
                declared: &declared,
                store: &kept[i],
            };
            let mut emitter = lane.port.emitter(out, &site);
            let port = PortRef(spec.lanes[i].port as u16);
            let queue = lane.shared.queue;
            let lanes_i = &mut handler_lanes[i];
            let ticked = call::guarded(|| {
                let mut t = Tick::new(now, port, queue, &mut emitter);
                handlers.tick(lanes_i, &mut t)
            });
            lane.needs.egress = egress;
            if let Err(payload) = ticked {
                handler_panicked(&mut panic_logged[i], spec, fabric, lane, payload);
            }
            let mut missed = false;
            settle_kept(
                lane,
                &kept[i],
                spec.lanes[i].port,
                out,
                scratch,
                spec,
                book,
                &mut missed,
            );
            if missed {
                fabric.neighbours.report_miss();
            }
            self.route(i, &remotes);
        }
    }

    fn polls(&self) -> bool {
        self.lanes.iter().any(|l| l.wait == WaitMode::Poll)
    }

    #[inline]
    fn refresh_book(&mut self) {
        let v = self.fabric.neighbours.version();
        if v != self.book_version {
            self.book_version = v;
            self.book = self.fabric.neighbours.current();
        }
    }

    /// Requests of the control thread for lane `i` (one look at its hand-over's
    /// phase): take an offered socket, give the current one up, reclaim a closed
    /// one's frames.
    #[inline]
    fn service(&mut self, i: usize) {
        let lane = &mut self.lanes[i];
        match lane.shared.phase() {
            Phase::Idle | Phase::Taken | Phase::Running | Phase::Closed => {}
            Phase::Offered => {
                if let Some(sock) = lane.shared.handover().take() {
                    lane.start(Box::new(sock), self.spec.busy_poll_budget, self.spec.mode);
                }
            }
            Phase::Releasing => lane.give_up(&self.fabric.remotes),
            Phase::Reclaim => lane.reclaim(&self.fabric.remotes),
        }
    }

    /// [`step_with`](Self::step_with) for a test.
    #[cfg(test)]
    fn step(&mut self, i: usize) -> bool {
        let (remotes, region) = (
            self.fabric.remotes.clone(),
            self.lanes[i].port.region().clone(),
        );
        self.step_with(i, &remotes, &region)
    }

    /// [`receive_with`](Self::receive_with) for a test.
    #[cfg(test)]
    fn receive(&mut self, i: usize) -> usize {
        let region = self.lanes[i].port.region().clone();
        self.receive_with(i, &region)
    }

    /// One pass over lane `i`; returns whether anything moved. `remotes` is the
    /// fabric's and `region` the UMEM every lane's pool draws from, borrowed for the
    /// whole run by the caller.
    #[inline]
    fn step_with(&mut self, i: usize, remotes: &Remotes, region: &Region) -> bool {
        self.lanes[i].refresh_rules();
        if !self.lanes[i].port.has_io() {
            return self.pump(i, remotes) > 0;
        }
        let local = LocalReturns {
            lane_of: &self.local,
            frags: &mut self.returns,
        };
        let reaped = self.lanes[i].port.reap_to(remotes, Some(local));
        self.release_local();
        self.lanes[i].port.refill();
        let mut got = 0;
        // Shedding (`receive` took a whole batch to shed): drop in bulk (what the TX
        // side cannot take goes back to the pool at `transmit`) and restock the fill
        // ring, up to SHED_BATCHES more batches, until the kernel is no longer short
        // (`Port::kernel_short`).
        for extra in 0..=SHED_BATCHES {
            got += self.receive_with(i, region);
            if !std::mem::take(&mut self.shedding) || extra == SHED_BATCHES {
                break;
            }
            self.route(i, remotes);
            self.lanes[i].port.transmit(remotes);
            self.lanes[i].port.refill();
        }
        self.lanes[i].rx_since_idle += got as u64;
        self.route(i, remotes);
        let pumped = self.pump(i, remotes);
        let lane = &mut self.lanes[i];
        lane.port.transmit(remotes);
        let tx_pending = lane.port.tx_pending() > 0;
        lane.kick(reaped > 0 || tx_pending, got);
        // Frames in TX keep the loop awake: poll() reports RX only.
        got > 0 || reaped > 0 || tx_pending || pumped > 0
    }

    /// What the last reap left for pools of this worker goes straight into them: a
    /// forwarded frame is back in its pool's cache with no return ring, no atomic
    /// index, no second pass over it when that pool refills.
    #[inline]
    fn release_local(&mut self) {
        if self.returns.is_empty() {
            return;
        }
        for (j, token) in self.returns.drain(..) {
            self.lanes[j].port.pool.release_frag(token);
        }
        // A pool whose socket is gone no longer refills, and so no longer publishes
        // its cache's length: publish it here, or the region's check at rest (every
        // port down) finds its cache short of the frames it now holds.
        for lane in &mut self.lanes {
            if !lane.port.has_io() {
                lane.port.pool.publish_stats();
            }
        }
    }

    /// How many RX descriptors to take: no more than the own TX ring and the egress
    /// ports' queues have room for (a frame left in the RX ring waits; one taken and
    /// then refused would be handled for nothing). With `shed`, once the frames
    /// waiting in RX leave the kernel short (`Port::kernel_short`: the fill ring
    /// below half its target, or in copy mode the RX ring more than half full): the
    /// whole batch, what the TX side cannot take dropped by the worker and its chunks
    /// back on the fill ring, so a TX bottleneck ends in the worker's drop counters
    /// rather than the kernel's drop (at the empty fill ring or the full RX ring), and
    /// a congested egress does not stall the lane's other traffic.
    #[inline]
    fn rx_budget(&mut self, i: usize) -> usize {
        let batch = self.lanes[i].port.batch();
        let own = self.lanes[i].needs.own_tx;
        let mut want = batch;
        if own > 0 && self.lanes[i].port.has_tx_ring() {
            want = want.min(self.lanes[i].port.tx_room(batch * own) / own);
        }
        for k in 0..self.lanes[i].needs.egress.len() {
            let p = self.lanes[i].needs.egress[k];
            let s = self.fabric.egress_socket(p, self.lanes[i].queue_pos);
            let room = match self.local[s] {
                // A port without a socket takes frames to count them dropped.
                Some(j) if self.lanes[j].port.has_io() => self.lanes[j].port.tx_room(batch),
                Some(_) => batch,
                None if !self.fabric.sockets[s].has_socket() => batch,
                None => {
                    let q = &self.fabric.sockets[s].inbound;
                    q.capacity() - q.len()
                }
            };
            want = want.min(room);
        }
        if want < batch {
            if self.spec.shed && self.lanes[i].port.kernel_short() {
                self.lanes[i].port.c.rx_shed_passes += 1;
                self.shedding = true;
                return batch;
            }
            self.lanes[i].port.c.rx_limited_by_tx += 1;
        }
        want
    }

    /// One RX batch of lane `i`, each frame through its action; `region` is the
    /// lane's pool's.
    fn receive_with(&mut self, i: usize, region: &Region) -> usize {
        let want = self.rx_budget(i);
        if want == 0 {
            return 0;
        }
        let Worker {
            lanes,
            out,
            descs,
            scratch,
            book,
            spec,
            fabric,
            handlers,
            handler_lanes,
            panic_logged,
            kept,
            ..
        } = self;
        let lane = &mut lanes[i];
        let n = lane.port.receive(&mut descs[..want]);
        let capture = capture::target_for(&fabric.capture, spec.lanes[i].port);
        let to_file = lane.rules.captures_to_file();
        if capture.is_none() && !to_file && lane.drops_unread(spec.hold_frames) {
            lane.receive_drop(&descs[..n], &fabric.remotes);
            return n;
        }
        // Every action reads the frame (its MACs at least): start the misses now.
        for d in &descs[..n] {
            lane.port.region().prefetch(d.addr);
        }
        debug_assert!(std::ptr::eq(region, &**lane.port.region()));
        let origin = lane.port.socket as u16;
        // Out of the lane for the batch, so that the batch's borrow of it leaves the
        // lane free (put back below; the rules change only between batches).
        let egress = std::mem::take(&mut lane.needs.egress);
        let declared = call::Declared::new(spec.lanes[i].port, &egress);
        let emit_site = call::EmitSite {
            region,
            book,
            origin,
            declared: &declared,
            store: &kept[i],
        };
        let handler_lanes = &mut handler_lanes[i];
        let queue = lane.shared.queue;
        let mut missed = false;
        for &d in descs[..n].iter() {
            if lane.in_chain(&d) {
                lane.chain_desc(d, &fabric.remotes);
                continue;
            }
            let Some((frame, verdict)) = lane.take(d) else {
                continue;
            };
            if capture.is_some() || to_file {
                lane.capture(&frame, d, capture, &fabric.capture, &fabric.file_capture);
            }
            let Some(frame) = lane.hold(frame, d, verdict, spec.hold_frames) else {
                continue;
            };
            let (mut frame, mut d) = (frame, d);
            let (mut act, mut mirror) = (verdict.act(), verdict.mirror_to());
            if let Act::Call { handler, rule } = act {
                lane.port.c.handler_calls += 1;
                let site = call::CallSite {
                    queue,
                    rule: Some(RuleOf {
                        rules: &lane.rules,
                        index: rule,
                    }),
                    declared: &declared,
                };
                let mut emitter = lane.port.emitter(out, &emit_site);
                let called = call::call(
                    &**handlers,
                    handler_lanes,
                    handler,
                    &mut frame,
                    d,
                    &site,
                    &mut emitter,
                );
                // Whatever the call did (or a refusal before it), the lookup's
                // parse was this frame's only.
                crate::api::forget_parse();
                if let Some(slot) = emitter.kept {
                    // The handle answers for the frame now, whatever else happened.
                    let d = called.as_ref().map_or(d, |(nd, _, _)| *nd);
                    kept[i].fill(slot, frame, d);
                    lane.port.c.kept_taken += 1;
                    if let Err(call::Refused::Panic(payload)) = called {
                        handler_panicked(&mut panic_logged[i], spec, fabric, lane, payload);
                    }
                    continue;
                }
                match called {
                    Ok((nd, a, m)) => {
                        // Field by field: the descriptor came back as pieces, and a
                        // copy of the whole would wait on each of them.
                        d.addr = nd.addr;
                        d.len = nd.len;
                        // The handler's action as it came apart (not packed into a
                        // `Verdict` again to be unpacked by `apply_act`).
                        let rewritten = match a {
                            Act::Back {
                                mac: MacRewrite::Keep,
                            } => Some(None),
                            Act::Forward {
                                to,
                                mac: MacRewrite::Keep,
                            } => Some(Some(to)),
                            Act::Back { .. }
                            | Act::Forward { .. }
                            | Act::Drop
                            | Act::L2fwd
                            | Act::ReflectTwice
                            | Act::Copybreak
                            | Act::Call { .. } => None,
                        };
                        if let Some(to) = rewritten {
                            // Its MACs rewritten on the handler's view already.
                            let mut cx = lane.port.act_ctx(
                                out,
                                scratch,
                                spec.copybreak_bytes,
                                book,
                                &mut missed,
                            );
                            action::send_rewritten(to, m, frame, d, &mut cx);
                            continue;
                        }
                        (act, mirror) = (a, m);
                    }
                    Err(refused) => {
                        lane.port.pool.recycle(frame);
                        match refused {
                            call::Refused::Verdict => lane.port.c.handler_refused += 1,
                            call::Refused::NeighMiss => {
                                lane.port.c.neigh_miss_drop += 1;
                                missed = true;
                            }
                            call::Refused::Panic(payload) => {
                                handler_panicked(&mut panic_logged[i], spec, fabric, lane, payload);
                            }
                        }
                        continue;
                    }
                }
            }
            let mut cx = lane
                .port
                .act_ctx(out, scratch, spec.copybreak_bytes, book, &mut missed);
            action::apply_act(act, mirror, frame, d, &mut cx);
        }
        lane.needs.egress = egress;
        settle_kept(
            lane,
            &kept[i],
            spec.lanes[i].port,
            out,
            scratch,
            spec,
            book,
            &mut missed,
        );
        if missed {
            fabric.neighbours.report_miss();
        }
        n
    }

    /// Hands the batch's frames for other ports to them: straight onto the TX queue
    /// of a lane of this worker, else into the owning worker's handoff queue (full:
    /// the frame goes back to our pool, counted).
    #[inline]
    fn route(&mut self, i: usize, remotes: &Remotes) {
        if !self.out.is_empty() {
            self.route_out(i, remotes);
        }
    }

    fn route_out(&mut self, i: usize, remotes: &Remotes) {
        let pos = self.lanes[i].queue_pos;
        let mut out = std::mem::take(&mut self.out);
        // A batch mostly goes to one port: its socket is looked up (a division)
        // once per run of frames to the same port.
        let mut last: Option<(PortId, usize)> = None;
        for (p, e) in out.drain(..) {
            let s = match last {
                Some((q, s)) if q == p => s,
                _ => {
                    let s = self.fabric.egress_socket(p, pos);
                    last = Some((p, s));
                    s
                }
            };
            if let Some(j) = self.local[s] {
                self.lanes[j].port.queue_foreign(e, remotes);
                continue;
            }
            match self.fabric.sockets[s].inbound.push(e) {
                Ok(()) => {
                    if !self.woken.contains(&s) {
                        self.woken.push(s);
                    }
                }
                Err(e) => {
                    let port = &mut self.lanes[i].port;
                    port.c.egress_full_drop += 1;
                    port.pool.release_frag(e.token);
                }
            }
        }
        self.out = out;
        for s in self.woken.drain(..) {
            self.fabric.sockets[s].waker.wake_if_sleeping();
        }
    }

    /// Moves frames other workers handed lane `i` onto its TX queue, as far as the
    /// TX ring has room (the rest waits in the queue: back-pressure). Without a
    /// socket every frame goes straight back to its pool, counted.
    fn pump(&mut self, i: usize, remotes: &Remotes) -> usize {
        let lane = &mut self.lanes[i];
        let q = &lane.shared.inbound;
        if q.is_empty() {
            return 0;
        }
        let room = if lane.port.has_io() {
            lane.port.tx_room(MAX_BATCH)
        } else {
            usize::MAX
        };
        let mut n = 0;
        while n < room {
            let Some(e) = q.pop() else { break };
            lane.port.queue_foreign(e, remotes);
            n += 1;
        }
        n
    }

    fn publish(&mut self, force_stats: bool) {
        let due = self.fabric.stats_due.load(Ordering::Relaxed);
        let stats = force_stats || due != self.stats_seen;
        self.stats_seen = due;
        for lane in &mut self.lanes {
            lane.publish(stats);
        }
    }

    fn idle(&mut self) {
        for lane in &mut self.lanes {
            lane.port.c.idle_loops += 1;
        }
        if !self.polls() {
            std::hint::spin_loop();
            return;
        }
        // The most any one lane received: each has its own RX ring to fill.
        let got = self
            .lanes
            .iter_mut()
            .map(|l| std::mem::take(&mut l.rx_since_idle))
            .max()
            .unwrap_or(0);
        if got > 0 && !self.nap.len().is_zero() {
            // Traffic is flowing: let a batch gather instead of being woken per flush.
            if std::mem::replace(&mut self.napped, true) {
                self.nap.gathered(got);
            }
            for lane in &mut self.lanes {
                lane.port.c.poll_naps += 1;
            }
            std::thread::sleep(self.nap.len());
            return;
        }
        if std::mem::take(&mut self.napped) {
            // Traffic paused: the next burst starts from the configured nap.
            self.nap.restart();
        }
        self.sleep();
    }

    /// poll() on every lane's socket and the worker's eventfd.
    fn sleep(&mut self) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let Some(waker) = self.lanes.first().map(|l| l.shared.waker.clone()) else {
            std::thread::sleep(Duration::from_millis(1));
            return;
        };
        waker.set_sleeping(true);
        if self.lanes.iter().any(|l| !l.shared.inbound.is_empty()) {
            waker.set_sleeping(false);
            return;
        }
        let mut fds: Vec<PollFd<'_>> = self
            .lanes
            .iter()
            .filter_map(|l| l.port.io().and_then(|io| io.poll_fd()))
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        fds.push(PollFd::new(waker.fd(), PollFlags::POLLIN));
        // No longer than until the handlers' next tick.
        let ms = self.next_tick.map_or(POLL_TIMEOUT_MS, |t| {
            let left = t.saturating_duration_since(Instant::now()).as_millis() + 1;
            left.min(u128::from(POLL_TIMEOUT_MS)) as u16
        });
        let _ = poll(&mut fds, PollTimeout::from(ms));
        let woke = fds
            .last()
            .and_then(|f| f.revents())
            .is_some_and(|r| !r.is_empty());
        drop(fds);
        waker.set_sleeping(false);
        if woke {
            waker.clear();
        }
    }

    /// The stop: give every socket up, reclaim, return held frames, destroy pools.
    fn finish(mut self) -> Vec<WorkerExit> {
        let remotes = self.fabric.remotes.clone();
        for lane in &mut self.lanes {
            if lane.port.has_io() {
                lane.give_up(&remotes);
            }
        }
        for i in 0..self.lanes.len() {
            // Frames other workers handed us after our socket went.
            self.pump(i, &remotes);
        }
        // The handlers' states go first: each Kept they hold gives its frame back.
        drop(std::mem::take(&mut self.handler_lanes));
        for i in 0..self.lanes.len() {
            let store = self.kept[i].clone();
            let port = self.spec.lanes[i].port;
            let mut missed = false;
            let (out, scratch, spec, book) =
                (&mut self.out, &mut self.scratch, &self.spec, &self.book);
            settle_kept_frames(
                &mut self.lanes[i],
                &store,
                port,
                out,
                scratch,
                spec,
                book,
                &mut missed,
            );
            let leaked = store.drain_all();
            if !leaked.is_empty() {
                let lane = &mut self.lanes[i];
                lane.port.c.kept_leaked += leaked.len() as u64;
                tracing::error!(
                    port = %lane.shared.port, queue = lane.shared.queue,
                    "{} kept frames were never returned (a Kept handle leaked, e.g. with mem::forget): \
                     they stay out of the pool (stalled shutdown)",
                    leaked.len()
                );
                // Their tokens go with the handles: the frames stay counted as the
                // application's, which the pool's destroy reports.
                drop(leaked);
            }
        }
        if !self.out.is_empty() && !self.lanes.is_empty() {
            self.route(0, &remotes);
        }
        for lane in &mut self.lanes {
            if lane.shared.reclaim_pending() {
                // The control thread closed the UMEM before setting `stop` (or gave up
                // waiting for us); the process is ending either way.
                lane.reclaim(&remotes);
            }
            drop(lane.shared.handover().withdraw_offer());
            lane.release_held();
        }
        self.publish(true);
        self.lanes.into_iter().map(Lane::finish).collect()
    }
}

/// Every lane's handler state, made on the worker's thread (the states may be
/// `!Send`): a lane's [`LaneSetup`] names its port, queue and the ports of the plan.
fn handler_lanes<H: HandlerSet>(handlers: &H, spec: &WorkerSpec, fabric: &Fabric) -> Vec<H::Lanes> {
    let mut decls: Vec<HandlerDecl> = Vec::new();
    handlers.decls(&mut decls);
    let port_names: Vec<String> = fabric
        .port_sockets
        .iter()
        .map(|s| {
            s.first()
                .map_or_else(String::new, |&s| fabric.sockets[s].port.clone())
        })
        .collect();
    spec.lanes
        .iter()
        .map(|ls| {
            let shared = &fabric.sockets[ls.socket];
            let mut setup = LaneSetup {
                port: PortRef(ls.port as u16),
                queue: shared.queue,
                port_names: &port_names,
                handler: "",
                declared: &[],
                counters: &shared.user_counters,
            };
            handlers.lanes(&mut setup, &decls)
        })
        .collect()
}

/// A handler panicked on lane `lane` (its frame is already dropped and counted):
/// logged once per lane; with `workers.handler_panic = "stop"` the control loop is
/// told to stop the run.
#[cold]
#[inline(never)]
fn handler_panicked(
    logged: &mut bool,
    spec: &WorkerSpec,
    fabric: &Fabric,
    lane: &mut Lane,
    payload: Box<dyn std::any::Any + Send>,
) {
    lane.port.c.handler_panics += 1;
    let msg = call::panic_message(&*payload);
    if !std::mem::replace(logged, true) {
        tracing::error!(
            port = %lane.shared.port, queue = lane.shared.queue,
            "a packet function panicked: {msg}; its frame was dropped (counted handler_panic; \
             further panics on this queue are counted, not logged)"
        );
    }
    if spec.stop_on_handler_panic {
        let mut first = fabric
            .handler_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| {
            format!(
                "a packet function panicked on port {} queue {}: {msg}",
                lane.shared.port, lane.shared.queue
            )
        });
    }
}

/// After a batch or a tick: acts on lane `lane`'s kept frames whose handles were
/// dropped or sent, if any, and updates its `kept` gauge.
#[inline]
#[allow(clippy::too_many_arguments)]
fn settle_kept(
    lane: &mut Lane,
    store: &KeptStore,
    port: PortId,
    out: &mut Vec<(PortId, Egress)>,
    scratch: &mut [u8],
    spec: &WorkerSpec,
    book: &MacBook,
    missed: &mut bool,
) {
    if !store.returned.borrow().is_empty() || !store.sent.borrow().is_empty() {
        settle_kept_frames(lane, store, port, out, scratch, spec, book, missed);
    }
    let c = &mut lane.port.c;
    c.kept = c.kept_taken - c.kept_returned - c.kept_sent;
}

/// Acts on lane `lane`'s kept frames whose handles were dropped (back to the pool)
/// or sent (the handler's verdict, as for a frame of this batch).
#[cold]
#[allow(clippy::too_many_arguments)]
fn settle_kept_frames(
    lane: &mut Lane,
    store: &KeptStore,
    port: PortId,
    out: &mut Vec<(PortId, Egress)>,
    scratch: &mut [u8],
    spec: &WorkerSpec,
    book: &MacBook,
    missed: &mut bool,
) {
    let returned = std::mem::take(&mut *store.returned.borrow_mut());
    for slot in returned {
        if let Some((frame, _)) = store.take(slot) {
            lane.port.pool.recycle(frame);
            lane.port.c.kept_returned += 1;
        }
    }
    let sent = std::mem::take(&mut *store.sent.borrow_mut());
    let declared = call::Declared::new(port, &lane.needs.egress);
    let site = call::CallSite {
        queue: lane.shared.queue,
        rule: None,
        declared: &declared,
    };
    for (slot, v) in sent {
        let Some((frame, d)) = store.take(slot) else {
            continue;
        };
        let Some((act, mirror)) = call::verdict(v, &site) else {
            lane.port.pool.recycle(frame);
            lane.port.c.kept_returned += 1;
            continue;
        };
        lane.port.c.kept_sent += 1;
        let mut cx = lane
            .port
            .act_ctx(out, scratch, spec.copybreak_bytes, book, missed);
        action::apply_act(act, mirror, frame, d, &mut cx);
    }
}
