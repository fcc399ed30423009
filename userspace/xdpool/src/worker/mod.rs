//! Pinned worker threads: one per queue, each owning its socket, its rings and its
//! pool. Loop: reap completions -> refill the fill ring -> take an RX batch -> act ->
//! TX -> wake the kernel when it asks. Counters are single-writer: kept in locals and
//! published with plain stores once per batch (no atomic read-modify-write).
//!
//! Actions: `drop` (recycle), `l2fwd` (MAC swap, the RX chunk itself goes to TX),
//! `mirror` (MAC swap in place, the RX chunk itself queued twice by reference, no
//! copy; recycled at the last completion),
//! `copybreak` (small frames copied into packed frags, the RX chunk straight back to
//! the fill ring). The per-frame path allocates nothing: the TX batch, the copy
//! scratch and the in-flight table are sized once.
//!
//! Wait modes: `spin`, `poll` (poll(2)), and `busy-poll` (socket options set when a
//! socket is taken; RX driven with `recvfrom` and TX with `sendto` on every empty
//! pass, as the kernel's busy polling needs; spin if the kernel refuses).

pub mod classify;
pub mod inflight;

use crate::config::{Action, WaitMode};
use crate::xsk::{Wakeup, XdpDesc, XdpStatistics, XskSocket, XDP_PKT_CONTD};
use classify::Classifier;
use inflight::TxInflight;
use pool::{Frag, Frame, PoolConfig, PoolOwner, PoolRemote, PoolStats, Region};
use serde::Serialize;
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Largest batch a worker handles at once.
pub const MAX_BATCH: usize = 256;

/// How long an idle `poll` worker sleeps at most. Requests from the control thread
/// wake it at once (`WorkerShared::wake`), so this only bounds how stale the kernel
/// socket stats get after traffic stops. Long on purpose: with a 5 ms timeout, every
/// sleep armed a timer that was the CPU's next event, and on this VM that cost the
/// sending core about a quarter of its rate (`tools/bench/vs-xskref.sh`, poll
/// placement: xdpool / xskref 0.60-0.74 at 5 ms, 0.86-1.18 at 1000 ms; 100 ms was
/// in between, 0.71-0.99).
const POLL_TIMEOUT_MS: u16 = 1000;
/// Most buffers of one multi-buffer frame (the kernel sends at most MAX_SKB_FRAGS + 1,
/// 18 by default); a longer chain is dropped whole and counted.
pub const MAX_CHAIN: usize = 32;

/// While busy, the loop publishes its counters (and looks at the clock) once in
/// this many passes; each pass moves up to a batch of frames.
const PUBLISH_EVERY: u32 = 64;

/// How often the socket's kernel counters (`XDP_STATISTICS`) are read.
const STATS_EVERY: Duration = Duration::from_millis(100);

/// What a worker is told to do.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// Queue served.
    pub queue: u32,
    /// Core to pin to (`None`: not pinned).
    pub core: Option<usize>,
    /// Descriptors per batch.
    pub batch: usize,
    /// How to wait when idle.
    pub mode: WaitMode,
    /// Per-frame action.
    pub classifier: Classifier,
    /// Frames the worker keeps with the kernel: on the fill ring, or taken from it
    /// and not yet read back from RX ([`fill_target`](crate::run::fill_target)).
    pub fill_target: u32,
    /// Frames the application keeps per socket (0: none). They stay held across a
    /// device loss and are returned, checked unchanged, once a new socket runs.
    pub hold_frames: usize,
    /// `copybreak`: frames of at most this many bytes are copied into frags.
    pub copybreak_bytes: u32,
    /// `busy-poll` mode: SO_BUSY_POLL_BUDGET.
    pub busy_poll_budget: u16,
    /// `poll` mode: nap after a pass that received frames (zero: poll() at once).
    pub poll_coalesce: Duration,
}

macro_rules! counters {
    ($(#[$m:meta])* $name:ident, $snap:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Default)]
        pub struct $name { $($(#[$fm])* pub $f: AtomicU64,)* }
        /// A plain copy of the counters.
        #[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
        pub struct $snap { $($(#[$fm])* pub $f: u64,)* }
        impl $name {
            /// Reads every counter.
            pub fn snapshot(&self) -> $snap { $snap { $($f: self.$f.load(Ordering::Relaxed),)* } }
            fn publish(&self, s: &$snap) { $(self.$f.store(s.$f, Ordering::Relaxed);)* }
        }
        impl std::ops::AddAssign for $snap {
            fn add_assign(&mut self, o: $snap) { $(self.$f += o.$f;)* }
        }
    };
}

counters!(
    /// A worker's counters, written by the worker only.
    WorkerCounters, WorkerCountersSnapshot {
    /// Frames received.
    rx_packets,
    /// Bytes received.
    rx_bytes,
    /// Frames dropped by the `drop` action (rxdrop).
    action_drop,
    /// Descriptors queued for TX (`l2fwd`, `mirror` twice per frame, `copybreak`).
    tx_packets,
    /// Bytes queued for TX.
    tx_bytes,
    /// TX completions reaped.
    tx_completed,
    /// TX descriptors (l2fwd, mirror, copybreak) dropped because the TX ring was full.
    tx_ring_full_drop,
    /// Passes that took fewer RX descriptors than a batch because the TX ring had
    /// room for no more of what they send back (back-pressure instead of a drop).
    rx_limited_by_tx,
    /// RX descriptors the recycler rejected (not a frame we gave the kernel).
    rx_rejected,
    /// Frames too short to swap MACs (l2fwd), dropped.
    rx_too_short,
    /// Completion addresses the recycler rejected (not in TX).
    completion_rejected,
    /// Descriptors put on the fill ring.
    fill_produced,
    /// Times the fill ring could not be topped up because the pool was empty.
    fill_pool_empty,
    /// Wake-up syscalls made.
    wakeups,
    /// Loop iterations that found nothing to do.
    idle_loops,
    /// Frames drained from RX rings when a socket was given up.
    drained_rx,
    /// Descriptors reclaimed from the kernel's rings when a socket was given up.
    reclaimed,
    /// Sockets this worker has run on.
    socket_attaches,
    /// Sockets this worker has given up (device loss, stop).
    socket_releases,
    /// Frames the application holds now (`--hold-frames`).
    held,
    /// Frames the application has taken to hold, in total.
    held_taken,
    /// Held frames returned to the pool after a re-attach (or at the stop).
    held_returned,
    /// Held frames re-read after a socket was given up, bytes unchanged.
    held_verified,
    /// Held frames whose bytes changed or could not be read (must stay 0).
    held_corrupt,
    /// `copybreak`: frames copied into a frag (their RX chunk went straight back).
    copybreak_copied,
    /// `mirror`: frames queued twice (two descriptors on the RX chunk, two references).
    mirror_queued,
    /// Frames dropped because the pool had no memory for a frag copy.
    frag_alloc_failed,
    /// Most TX descriptors queued and not yet completed at once.
    tx_inflight_max,
    /// Distinct UMEM chunks those descriptors occupied at that moment (fewer than
    /// `tx_inflight_max` when small frames share chunks).
    tx_inflight_chunks_at_max,
    /// Sockets on which busy-poll was turned on.
    busy_poll_sockets,
    /// Sockets on which the kernel refused busy-poll (the worker spun instead).
    busy_poll_refused,
    /// `recvfrom` calls made to busy-poll RX.
    busy_poll_calls,
    /// Multi-buffer frames received (more than one descriptor, `XDP_PKT_CONTD`).
    rx_multi_buffer,
    /// Multi-buffer frames dropped whole because one of their buffers was refused or
    /// the chain was longer than [`MAX_CHAIN`] buffers.
    rx_chain_dropped,
    /// Sockets in busy-poll mode that received frames without a NAPI id (veth gives
    /// none), so recvfrom had no NAPI to poll: the worker waited in poll() instead.
    busy_poll_no_napi,
    /// `poll` mode: naps taken while traffic flowed (`workers.poll_coalesce_us`)
    /// instead of waiting in poll().
    poll_naps,
    /// Frames dropped unread straight from RX back to the fill ring
    /// (`PoolOwner::rx_drop`), without a trip through the pool's cache.
    rx_drop_to_fill,
});

/// State a worker shares with the control thread.
///
/// Besides counters, this is how the control thread moves a worker between sockets
/// when the device goes away and comes back: it offers a socket with
/// [`WorkerShared::offer_socket`], and asks for it back with
/// [`WorkerShared::request_release`]; the worker answers by draining, reclaiming and
/// closing it ([`WorkerShared::has_socket`] turns false). The pool stays alive across
/// sockets, so frames the application holds stay valid and counters continue.
pub struct WorkerShared {
    /// Queue served.
    pub queue: u32,
    /// Core pinned to, if any.
    pub core: Option<usize>,
    /// Counters.
    pub counters: WorkerCounters,
    /// The pool's remote handle, set once the worker has built its pool.
    pub pool: Mutex<Option<PoolRemote>>,
    /// Last XDP_STATISTICS read (refreshed by the worker about every 100 ms while
    /// frames move, and within about a second (`POLL_TIMEOUT_MS`) once they stop).
    pub xsk_stats: Mutex<XdpStatistics>,
    /// Ring validation errors (refreshed with the stats).
    pub ring_errors: Mutex<crate::xsk::RingErrors>,
    /// Set when a wake-up or SO_ERROR reported the device gone; cleared by the
    /// control thread when it has handled it.
    pub device_gone: AtomicBool,
    /// A socket waiting for the worker to take it.
    incoming: Mutex<Option<XskSocket>>,
    /// Asked by the control thread: give the current socket up.
    release: AtomicBool,
    /// Whether the worker is running on a socket now.
    has_socket: AtomicBool,
    /// The worker closed a socket and has not yet taken its kernel frames back.
    reclaim_pending: AtomicBool,
    /// Asked by the control thread once every socket and the UMEM are closed: take
    /// the frames the kernel held back into the pool.
    reclaim: AtomicBool,
    /// Wakes the worker from poll() when the control thread asks something of it
    /// (a socket, a release, a reclaim, the stop), so the poll timeout can be long.
    wake: EventFd,
}

impl WorkerShared {
    /// Fresh shared state for a queue; fails only if no eventfd can be made (out of
    /// file descriptors).
    pub fn new(queue: u32, core: Option<usize>) -> nix::Result<Arc<WorkerShared>> {
        let wake = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
        Ok(Arc::new(WorkerShared {
            queue,
            core,
            counters: WorkerCounters::default(),
            pool: Mutex::new(None),
            xsk_stats: Mutex::new(XdpStatistics::default()),
            ring_errors: Mutex::new(Default::default()),
            device_gone: AtomicBool::new(false),
            incoming: Mutex::new(None),
            release: AtomicBool::new(false),
            has_socket: AtomicBool::new(false),
            reclaim_pending: AtomicBool::new(false),
            reclaim: AtomicBool::new(false),
            wake,
        }))
    }

    /// Wakes the worker if it waits in poll(); call after asking it something (the
    /// methods below do) or after setting the stop flag.
    pub fn wake(&self) {
        // EAGAIN only when the counter is near overflow: the worker is awake then.
        let _ = self.wake.write(1);
    }

    /// The pool's stats, once the worker has started.
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|r| r.stats())
    }

    /// Hands a freshly bound socket to the worker, which refills its fill ring and
    /// starts on it. A socket offered earlier and not yet taken is returned.
    pub fn offer_socket(&self, sock: XskSocket) -> Option<XskSocket> {
        self.release.store(false, Ordering::SeqCst);
        let earlier = self.incoming.lock().unwrap_or_else(|p| p.into_inner()).replace(sock);
        self.wake();
        earlier
    }

    /// Asks the worker to give its socket up (drain RX, reap, close, reclaim). A
    /// socket offered but not yet taken is dropped here.
    pub fn request_release(&self) {
        drop(self.incoming.lock().unwrap_or_else(|p| p.into_inner()).take());
        self.release.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Whether the worker runs on a socket now (false once a release is done).
    pub fn has_socket(&self) -> bool {
        self.has_socket.load(Ordering::SeqCst)
    }

    /// Asks the worker to take back the frames its closed socket left in the fill and
    /// TX rings. Context rule: only once every socket on the UMEM and the UMEM itself
    /// are closed, so the kernel can no longer touch them.
    pub fn request_reclaim(&self) {
        self.reclaim.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Whether frames of a closed socket still wait to be reclaimed.
    pub fn reclaim_pending(&self) -> bool {
        self.reclaim_pending.load(Ordering::SeqCst)
    }

    /// Whether a socket is offered and not yet taken.
    pub fn socket_pending(&self) -> bool {
        self.incoming.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn take_offered(&self) -> Option<XskSocket> {
        self.incoming.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// How a worker ended.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerExit {
    /// Queue served.
    pub queue: u32,
    /// Frames drained from the RX ring after the stop (all socket teardowns).
    pub drained_rx: u64,
    /// Frames taken back from the kernel's hands (fill and TX rings), all teardowns.
    pub reclaimed: u64,
    /// Frames still out when the pool was destroyed and the wait timed out (0 unless
    /// someone outside the worker holds frames).
    pub inflight_at_destroy: u64,
    /// Final counters.
    pub counters: WorkerCountersSnapshot,
    /// Final pool stats.
    pub pool: PoolStats,
    /// Kernel socket stats, summed over every socket the worker ran on.
    pub xsk: XdpStatistics,
}

/// Pins the calling thread to `core`.
pub fn pin_to_core(core: usize) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(core)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

/// How long a worker waits for frames still out when its pool is destroyed.
pub const DESTROY_WAIT: Duration = Duration::from_millis(500);

/// Runs a worker until `stop` is set, on whatever socket the control thread offers
/// through `shared` (none at first is fine: it waits). On each release and at the
/// end it drains RX, reaps completions, closes the socket and reclaims every frame
/// the kernel held; at the end it destroys the pool and returns what happened.
/// Context: the worker's own thread (the pool owner is created here and never
/// leaves it).
pub fn run(region: Arc<Region>, spec: WorkerSpec, shared: Arc<WorkerShared>, stop: Arc<AtomicBool>) -> WorkerExit {
    if let Some(core) = spec.core {
        if let Err(e) = pin_to_core(core) {
            tracing::warn!(queue = spec.queue, core, error = %e, "could not pin worker; running unpinned");
        }
    }
    let node = spec.core.map(|c| region.topology().node_of_cpu(c as u32)).unwrap_or(0);
    let mut pool = PoolOwner::new(&region, PoolConfig { id: spec.queue, preferred_node: node, ..PoolConfig::default() });
    *shared.pool.lock().unwrap_or_else(|p| p.into_inner()) = Some(pool.remote());
    let mut w = Worker {
        batch: spec.batch.clamp(1, MAX_BATCH),
        spec,
        c: WorkerCountersSnapshot::default(),
        in_fill: 0,
        addrs: [0; MAX_BATCH],
        descs: [XdpDesc::default(); MAX_BATCH],
        // Mirror queues two descriptors per frame.
        tx: Vec::with_capacity(2 * MAX_BATCH),
        held: Vec::new(),
        scratch: vec![0; region.chunk_size() as usize].into_boxed_slice(),
        inflight: TxInflight::new(region.frames(), region.chunk_size()),
        busy_poll: false,
        busy_poll_warned: false,
        napi_checked: false,
        received_since_idle: false,
        chain: Vec::with_capacity(MAX_CHAIN),
        chain_broken: false,
        wait: WaitMode::Spin,
        region: region.clone(),
    };
    let mut sock: Option<XskSocket> = None;
    let mut xsk_total = XdpStatistics::default();
    let mut last_stats = Instant::now();
    let mut passes: u32 = 0;
    let mut was_busy = false;
    while !stop.load(Ordering::Relaxed) {
        let Some(s) = sock.as_mut() else {
            if shared.reclaim_pending() {
                // No new socket before the old one's frames are back.
                if shared.reclaim.swap(false, Ordering::SeqCst) {
                    w.reclaim(&mut pool, &shared);
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
                shared.counters.publish(&w.c);
                continue;
            }
            match shared.take_offered() {
                Some(s) => {
                    sock = Some(s);
                    w.start_on_socket(sock.as_mut().expect("just set"), &mut pool);
                    shared.has_socket.store(true, Ordering::SeqCst);
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            }
            shared.counters.publish(&w.c);
            continue;
        };
        if shared.release.load(Ordering::SeqCst) {
            add_xsk(&mut xsk_total, &w.give_up_socket(sock.take().expect("running on a socket"), &mut pool, &shared));
            shared.has_socket.store(false, Ordering::SeqCst);
            shared.counters.publish(&w.c);
            continue;
        }
        let busy = w.step(s, &mut pool, &shared);
        passes = passes.wrapping_add(1);
        // Publishing the counters (some forty stores) and reading the clock are not
        // free (the clock alone took 5% of a spinning l2fwd worker's core in perf):
        // do them every PUBLISH_EVERY passes, and on the first idle pass after work
        // (every idle pass before poll() sleeps) so that readers see a quiet
        // worker's final figures at once.
        if passes.is_multiple_of(PUBLISH_EVERY) || (!busy && (was_busy || w.wait == WaitMode::Poll)) {
            shared.counters.publish(&w.c);
            if last_stats.elapsed() >= STATS_EVERY {
                last_stats = Instant::now();
                refresh_stats(s, &shared);
            }
        }
        was_busy = busy;
        if !busy {
            w.c.idle_loops += 1;
            w.idle(s, &shared);
        }
    }
    if let Some(s) = sock.take() {
        add_xsk(&mut xsk_total, &w.give_up_socket(s, &mut pool, &shared));
        shared.has_socket.store(false, Ordering::SeqCst);
    }
    if shared.reclaim_pending() {
        // Stopping: the control thread closed the UMEM before setting `stop` (or gave
        // up waiting for us); the process is ending either way.
        w.reclaim(&mut pool, &shared);
    }
    drop(shared.take_offered());
    // The application's frames go back before the pool goes.
    w.release_held(&mut pool);
    shared.counters.publish(&w.c);
    let pool_stats = pool.stats();
    let report = pool.destroy();
    let mut inflight_at_destroy = report.inflight;
    if inflight_at_destroy > 0 {
        if let Err(e) = report.wait(DESTROY_WAIT) {
            inflight_at_destroy = report.inflight_now();
            tracing::warn!(error = %e, "stalled shutdown: pool {}, {} inflight", w.spec.queue, inflight_at_destroy);
        } else {
            inflight_at_destroy = 0;
        }
    }
    WorkerExit {
        queue: w.spec.queue,
        drained_rx: w.c.drained_rx,
        reclaimed: w.c.reclaimed,
        inflight_at_destroy,
        counters: w.c,
        pool: pool_stats,
        xsk: xsk_total,
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

fn refresh_stats(sock: &XskSocket, shared: &WorkerShared) {
    if let Ok(s) = sock.statistics() {
        *shared.xsk_stats.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }
    // SO_ERROR is ENETDOWN once after the device went away: the second signal
    // besides the wake-ups (poll() reports nothing).
    if let Ok(Some(e)) = sock.so_error() {
        if matches!(e.raw_os_error(), Some(libc::ENETDOWN) | Some(libc::ENXIO)) {
            tracing::info!(queue = shared.queue, error = %e, "SO_ERROR reports the device gone");
            shared.device_gone.store(true, Ordering::Relaxed);
        }
    }
    *shared.ring_errors.lock().unwrap_or_else(|p| p.into_inner()) = sock.ring_errors();
}

struct Worker {
    spec: WorkerSpec,
    batch: usize,
    c: WorkerCountersSnapshot,
    /// Frames we put on the fill ring that have not come back through RX.
    in_fill: u32,
    addrs: [u64; MAX_BATCH],
    descs: [XdpDesc; MAX_BATCH],
    tx: Vec<XdpDesc>,
    /// Frames the application keeps (`hold_frames`).
    held: Vec<Held>,
    /// Where `copybreak` copies a frame (one chunk).
    scratch: Box<[u8]>,
    /// TX descriptors and chunks in the kernel's hands.
    inflight: TxInflight,
    /// Busy-poll options are on for the current socket.
    busy_poll: bool,
    /// A refusal was logged already (warn once per worker).
    busy_poll_warned: bool,
    /// Busy-poll mode: the socket's NAPI id was looked at (after its first frames).
    napi_checked: bool,
    /// Frames arrived since the loop last went idle (poll mode naps then).
    received_since_idle: bool,
    /// Buffers of a multi-buffer frame received so far (the last one ends it).
    chain: Vec<(Frame, XdpDesc)>,
    /// A buffer of the frame in `chain` was refused: drop the frame when it ends.
    chain_broken: bool,
    /// How the loop waits now: the configured mode, or poll() where busy-poll
    /// cannot work on this socket.
    wait: WaitMode,
    region: Arc<Region>,
}

/// A frame the application keeps, with what it read from it.
struct Held {
    frame: Frame,
    addr: u64,
    len: u32,
    digest: u64,
}

/// FNV-1a over a frame's bytes: enough to notice that someone wrote into it.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

impl Worker {
    /// One pass of the loop; returns whether anything moved.
    #[inline]
    fn step(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner, shared: &WorkerShared) -> bool {
        let reaped = self.reap(sock, pool);
        self.refill(sock, pool);
        let got = self.receive(sock, pool);
        self.received_since_idle |= got > 0;
        if !self.tx.is_empty() {
            self.transmit(sock, pool);
        }
        let tx_pending = self.inflight.frames() > 0;
        // Busy-poll: sendto is where the kernel polls for TX, whatever the flag says.
        if (reaped > 0 || tx_pending) && (self.busy_poll || sock.tx().needs_wakeup()) {
            self.kick_tx(sock, shared);
        }
        if self.busy_poll && got > 0 && !self.napi_checked {
            self.check_napi(sock);
        }
        if self.busy_poll && got == 0 {
            // recvfrom runs the device's NAPI poll in this thread (sk_busy_loop).
            self.c.busy_poll_calls += 1;
            self.wake_rx(sock, shared);
        } else if sock.fill().needs_wakeup() {
            self.c.wakeups += 1;
            self.wake_rx(sock, shared);
        }
        // Frames waiting in TX keep the loop awake: poll() reports RX only, and a
        // copy-mode TX ring drains a budget of descriptors per sendto.
        got > 0 || reaped > 0 || tx_pending
    }

    fn wake_rx(&mut self, sock: &XskSocket, shared: &WorkerShared) {
        if let Ok(Wakeup::DeviceGone { .. }) | Err(_) = sock.wakeup_rx() {
            shared.device_gone.store(true, Ordering::Relaxed);
        }
    }

    fn kick_tx(&mut self, sock: &XskSocket, shared: &WorkerShared) {
        self.c.wakeups += 1;
        match sock.wakeup_tx() {
            Ok(Wakeup::DeviceGone { .. }) | Err(_) => shared.device_gone.store(true, Ordering::Relaxed),
            _ => {}
        }
    }

    /// Completions: TX frames the kernel is done with go back to the pool.
    fn reap(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner) -> usize {
        let n = sock.completion().consume(&mut self.addrs[..self.batch]);
        for &addr in &self.addrs[..n] {
            self.inflight.completed(addr);
            match pool.take_completion(addr) {
                Ok(()) => self.c.tx_completed += 1,
                Err(_) => self.c.completion_rejected += 1,
            }
        }
        n
    }

    /// Tops the fill ring up, in batches, until the kernel holds `fill_target` frames.
    fn refill(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner) {
        let mut room = self.spec.fill_target.saturating_sub(self.in_fill) as usize;
        while room >= self.batch.min(room.max(1)) && room > 0 {
            let want = room.min(MAX_BATCH);
            let got = pool.fill_bulk(&mut self.addrs[..want]);
            if got == 0 {
                self.c.fill_pool_empty += 1;
                return;
            }
            let put = self.put_on_fill(sock, pool, got);
            room -= got;
            if put < got {
                return;
            }
        }
    }

    /// How many RX descriptors to take this pass. Where rules send frames back, no
    /// more than the TX ring has room for: a frame taken now and then refused by a
    /// full TX ring was handled for nothing, while one left in the RX ring waits, and
    /// once the RX ring is full the kernel finds the fill ring empty and drops the
    /// next frames before copying them (copy mode: see `fill_target`).
    #[inline]
    fn rx_budget(&mut self, sock: &mut XskSocket) -> usize {
        let per = self.spec.classifier.tx_descs_per_frame();
        if per == 0 || sock.tx().size() == 0 {
            return self.batch;
        }
        let room = sock.tx().writable((self.batch * per) as u32) as usize;
        let want = (room.saturating_sub(self.tx.len()) / per).min(self.batch);
        if want < self.batch {
            self.c.rx_limited_by_tx += 1;
        }
        want
    }

    /// One RX batch, each frame through its action.
    fn receive(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner) -> usize {
        let want = self.rx_budget(sock);
        if want == 0 {
            return 0;
        }
        let consumed = sock.rx().consume_counted(&mut self.descs[..want]);
        let n = consumed.kept;
        // Every descriptor taken used a fill entry, dropped ones included.
        self.in_fill = self.in_fill.saturating_sub(consumed.taken as u32);
        if self.drops_unread() {
            return self.receive_drop(sock, pool, n);
        }
        // Every action below reads the frame (its MACs at least), which the kernel
        // wrote a while ago or on another core: start all of the batch's misses now.
        for d in &self.descs[..n] {
            self.region.prefetch(d.addr);
        }
        for i in 0..n {
            let d = self.descs[i];
            if self.in_chain(&d) {
                self.chain_desc(d, pool);
                continue;
            }
            let Ok(frame) = pool.take_rx(d.addr, d.len) else {
                self.c.rx_rejected += 1;
                continue;
            };
            self.c.rx_packets += 1;
            self.c.rx_bytes += d.len as u64;
            // take_rx checked addr..addr+len lies in the frame's chunk.
            let offset = (d.addr - frame.addr()) as u32;
            let action = if self.spec.classifier.is_uniform() {
                self.spec.classifier.uniform()
            } else {
                let bytes = self.region.frame_bytes(&frame, offset, d.len).unwrap_or(&[]);
                self.spec.classifier.classify(bytes)
            };
            match action {
                Action::Copybreak if d.len <= self.spec.copybreak_bytes => self.copy_to_tx(frame, d, pool),
                Action::L2fwd | Action::Copybreak => self.forward(frame, d, pool),
                Action::Mirror => self.mirror(frame, d, pool),
                _ if self.held.len() < self.spec.hold_frames => {
                    let sum = digest(self.region.frame_bytes(&frame, offset, d.len).unwrap_or(&[]));
                    self.held.push(Held { digest: sum, frame, addr: d.addr, len: d.len });
                    self.c.held_taken += 1;
                    self.c.held = self.held.len() as u64;
                }
                _ => {
                    self.c.action_drop += 1;
                    pool.recycle(frame);
                }
            }
        }
        n
    }

    /// Every frame steered here is dropped without being read: no rule sends
    /// anything back, none needs the bytes, the application holds none.
    #[inline]
    fn drops_unread(&self) -> bool {
        self.spec.classifier.is_uniform() && self.spec.classifier.uniform() == Action::Drop && self.spec.hold_frames == 0
    }

    /// `receive` for [`drops_unread`](Self::drops_unread): each frame goes straight
    /// back to the fill ring ([`PoolOwner::rx_drop`]) in one batch, without a trip
    /// through the cache. A multi-buffer frame (or one that follows a cut chain)
    /// takes the general path.
    fn receive_drop(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner, n: usize) -> usize {
        let mut back = 0;
        for i in 0..n {
            let d = self.descs[i];
            if self.in_chain(&d) {
                self.chain_desc(d, pool);
                continue;
            }
            match pool.rx_drop(d.addr, d.len) {
                Ok(addr) => {
                    self.addrs[back] = addr;
                    back += 1;
                    self.c.rx_drop_to_fill += 1;
                    self.c.rx_packets += 1;
                    self.c.rx_bytes += d.len as u64;
                    self.c.action_drop += 1;
                }
                Err(_) => self.c.rx_rejected += 1,
            }
        }
        if back > 0 {
            // Each of these took a fill entry, so the ring has room for them all.
            self.put_on_fill(sock, pool, back);
            pool.publish_stats();
        }
        n
    }

    /// Puts `self.addrs[..n]` (fill frames of this pool) on the fill ring, counts
    /// them, and takes back into the pool whatever the ring had no room for.
    /// Returns how many went on the ring.
    fn put_on_fill(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner, n: usize) -> usize {
        let put = sock.fill().produce(&self.addrs[..n]);
        for &addr in &self.addrs[put..n] {
            if let Ok(f) = pool.take_rx(addr, 0) {
                pool.recycle(f);
            }
        }
        self.in_fill += put as u32;
        self.c.fill_produced += put as u64;
        put
    }

    /// Whether `d` is a buffer of a multi-buffer frame: it has more to come, or it
    /// ends a frame whose earlier buffers were taken (or refused).
    #[inline]
    fn in_chain(&self, d: &XdpDesc) -> bool {
        d.options & XDP_PKT_CONTD != 0 || !self.chain.is_empty() || self.chain_broken
    }

    /// A buffer of a multi-buffer frame: taken into the chain, or, when the pool
    /// refuses it, counted and the whole frame dropped once its last buffer is seen.
    #[cold]
    fn chain_desc(&mut self, d: XdpDesc, pool: &mut PoolOwner) {
        match pool.take_rx(d.addr, d.len) {
            Ok(frame) => self.chain_part(frame, d, pool),
            Err(_) => {
                self.c.rx_rejected += 1;
                self.chain_broken = true;
                if d.options & XDP_PKT_CONTD == 0 {
                    self.drop_chain(pool);
                }
            }
        }
    }

    /// One buffer of a multi-buffer frame (`XDP_USE_SG`): kept until the last one
    /// (no `XDP_PKT_CONTD`) arrives, then the frame is acted on as a whole. `l2fwd`
    /// sends the same chain back (MACs swapped in the first buffer); every other
    /// action drops it (config refuses mirror and copybreak with multi-buffer).
    #[cold]
    fn chain_part(&mut self, frame: Frame, d: XdpDesc, pool: &mut PoolOwner) {
        if self.chain.len() == MAX_CHAIN {
            self.chain_broken = true;
        }
        if self.chain_broken {
            pool.recycle(frame);
        } else {
            self.chain.push((frame, d));
        }
        if d.options & XDP_PKT_CONTD != 0 {
            return;
        }
        if self.chain_broken {
            self.drop_chain(pool);
            return;
        }
        self.c.rx_packets += 1;
        self.c.rx_multi_buffer += 1;
        self.c.rx_bytes += self.chain.iter().map(|(_, d)| u64::from(d.len)).sum::<u64>();
        let (first, first_desc) = &self.chain[0];
        let action = if self.spec.classifier.is_uniform() {
            self.spec.classifier.uniform()
        } else {
            let offset = (first_desc.addr - first.addr()) as u32;
            let bytes = self.region.frame_bytes(first, offset, first_desc.len).unwrap_or(&[]);
            self.spec.classifier.classify(bytes)
        };
        let mut chain = std::mem::take(&mut self.chain);
        if action == Action::L2fwd {
            let last = chain.len() - 1;
            let start = self.tx.len();
            for (i, (frame, d)) in chain.drain(..).enumerate() {
                let frame = if i == 0 {
                    match self.swap_macs_in_place(frame, d, pool) {
                        Some(f) => f,
                        None => {
                            // Recycled and counted; the rest of the frame goes too.
                            self.chain_broken = true;
                            continue;
                        }
                    }
                } else if self.chain_broken {
                    pool.recycle(frame);
                    continue;
                } else {
                    frame
                };
                let offset = (d.addr - frame.addr()) as u32;
                match pool.give_tx(frame, offset) {
                    Ok(addr) => self.tx.push(XdpDesc { addr, len: d.len, options: if i < last { XDP_PKT_CONTD } else { 0 } }),
                    Err(_) => {
                        self.c.rx_rejected += 1;
                        self.chain_broken = true;
                    }
                }
            }
            if self.chain_broken {
                // Never a chain with a hole or without its end on TX: take back what
                // was queued of it (the rest was recycled or refused above).
                for d in self.tx.drain(start..) {
                    if pool.take_completion(d.addr).is_err() {
                        self.c.completion_rejected += 1;
                    }
                }
                self.c.rx_chain_dropped += 1;
            }
            self.chain_broken = false;
        } else {
            self.c.action_drop += 1;
            for (frame, _) in chain.drain(..) {
                pool.recycle(frame);
            }
        }
        self.chain = chain;
    }

    /// Drops the multi-buffer frame being received (a buffer was refused, the chain
    /// was too long, or the socket is going away).
    #[cold]
    fn drop_chain(&mut self, pool: &mut PoolOwner) {
        if !self.chain.is_empty() || self.chain_broken {
            self.c.rx_chain_dropped += 1;
        }
        for (frame, _) in self.chain.drain(..) {
            pool.recycle(frame);
        }
        self.chain_broken = false;
    }

    /// `l2fwd`: swap MACs in place and queue the RX chunk itself for TX.
    #[inline]
    fn forward(&mut self, frame: Frame, d: XdpDesc, pool: &mut PoolOwner) {
        let Some(frame) = self.swap_macs_in_place(frame, d, pool) else { return };
        let offset = (d.addr - frame.addr()) as u32;
        match pool.give_tx(frame, offset) {
            Ok(addr) => self.tx.push(XdpDesc { addr, len: d.len, options: 0 }),
            Err(_) => self.c.rx_rejected += 1,
        }
    }

    /// `mirror`: swap MACs in place, turn the RX frame into a frag (count 1) and queue
    /// it twice by reference: two TX descriptors on the same bytes, no copy. Each
    /// completion drops one reference; the last recycles the chunk.
    #[inline]
    fn mirror(&mut self, frame: Frame, d: XdpDesc, pool: &mut PoolOwner) {
        let Some(frame) = self.swap_macs_in_place(frame, d, pool) else { return };
        let offset = (d.addr - frame.addr()) as u32;
        // On error the pool recycled (or refused and counted) the frame.
        let Ok(frag) = pool.frame_into_frag(frame, offset, d.len) else {
            self.c.rx_rejected += 1;
            return;
        };
        let second = pool.ref_frag(&frag);
        self.queue_frag(second, d.len, pool);
        self.queue_frag(frag, d.len, pool);
        self.c.mirror_queued += 1;
    }

    /// `copybreak`: copy the frame, MACs swapped, into a frag and give the RX chunk
    /// straight back; queue the frag for TX. Small frags share a chunk (`alloc_frag`
    /// packs them).
    #[inline]
    fn copy_to_tx(&mut self, frame: Frame, d: XdpDesc, pool: &mut PoolOwner) {
        // Swapped in the RX chunk itself, which is given back right after the copy.
        let Some(frame) = self.swap_macs_in_place(frame, d, pool) else { return };
        let offset = (d.addr - frame.addr()) as u32;
        let Some(bytes) = self.region.frame_bytes(&frame, offset, d.len) else {
            pool.recycle(frame);
            self.c.rx_rejected += 1;
            return;
        };
        let len = bytes.len();
        self.scratch[..len].copy_from_slice(bytes);
        // The bytes are ours now: the RX chunk goes back (and to the fill ring next).
        pool.recycle(frame);
        let Some(frag) = pool.alloc_frag(d.len) else {
            self.c.frag_alloc_failed += 1;
            return;
        };
        if self.region.write_frag(&frag, &self.scratch[..len]).is_err() {
            pool.release_frag(frag);
            self.c.rx_rejected += 1;
            return;
        }
        self.c.copybreak_copied += 1;
        self.queue_frag(frag, d.len, pool);
    }

    /// The rewrite every forwarding action shares: swap the destination and source
    /// MACs in the received frame. A frame that cannot be viewed or is shorter than
    /// two MACs is recycled and counted; `None` then.
    #[inline]
    fn swap_macs_in_place(&mut self, mut frame: Frame, d: XdpDesc, pool: &mut PoolOwner) -> Option<Frame> {
        let offset = (d.addr - frame.addr()) as u32;
        let Some(bytes) = self.region.frame_bytes(&frame, offset, d.len) else {
            pool.recycle(frame);
            self.c.rx_rejected += 1;
            return None;
        };
        if bytes.len() < 12 {
            pool.recycle(frame);
            self.c.rx_too_short += 1;
            return None;
        }
        let macs = swapped_macs(bytes);
        if self.region.write_frame(&mut frame, offset, &macs).is_err() {
            pool.recycle(frame);
            self.c.rx_rejected += 1;
            return None;
        }
        Some(frame)
    }

    #[inline]
    fn queue_frag(&mut self, frag: Frag, len: u32, pool: &mut PoolOwner) {
        match pool.give_tx_frag(frag) {
            Ok(addr) => self.tx.push(XdpDesc { addr, len, options: 0 }),
            Err(_) => self.c.rx_rejected += 1,
        }
    }

    fn transmit(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner) {
        let put = sock.tx().produce_whole_frames(&self.tx);
        for d in &self.tx[..put] {
            // A multi-buffer frame counts once, at its last descriptor.
            self.c.tx_packets += u64::from(d.options & XDP_PKT_CONTD == 0);
            self.c.tx_bytes += d.len as u64;
            self.inflight.sent(d.addr);
        }
        if self.inflight.frames() > self.c.tx_inflight_max {
            self.c.tx_inflight_max = self.inflight.frames();
            self.c.tx_inflight_chunks_at_max = self.inflight.chunks();
        }
        for d in &self.tx[put..] {
            // TX ring full: the frame never reached the kernel; take it back.
            if pool.take_completion(d.addr).is_err() {
                self.c.completion_rejected += 1;
            }
            self.c.tx_ring_full_drop += u64::from(d.options & XDP_PKT_CONTD == 0);
        }
        self.tx.clear();
    }

    /// A new socket: nothing of ours is in its rings yet. Fill it, then return what
    /// the application held across the loss (checked unchanged).
    #[cold]
    fn start_on_socket(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner) {
        self.in_fill = 0;
        self.tx.clear();
        self.inflight.reset();
        self.busy_poll = false;
        self.napi_checked = false;
        self.wait = self.spec.mode;
        if self.spec.mode == WaitMode::BusyPoll {
            self.enable_busy_poll(sock);
        }
        self.refill(sock, pool);
        self.c.socket_attaches += 1;
        self.release_held(pool);
        tracing::info!(queue = self.spec.queue, fill = self.in_fill, "worker running on a new socket");
    }

    /// Gives the socket up: take what the RX ring still holds (valid frames) and the
    /// completions, close the socket, then reclaim every frame the kernel held. The
    /// XDP program is detached (or the device gone) by now, so nothing new arrives.
    #[cold]
    fn give_up_socket(&mut self, mut sock: XskSocket, pool: &mut PoolOwner, shared: &WorkerShared) -> XdpStatistics {
        // A frame whose last buffers will not come.
        self.drop_chain(pool);
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut quiet = 0;
        while quiet < 3 && Instant::now() < deadline {
            let got = self.drain_rx(&mut sock, pool) + self.reap(&mut sock, pool);
            if got == 0 {
                quiet += 1;
                std::thread::sleep(Duration::from_millis(2));
            } else {
                quiet = 0;
            }
        }
        // The owner map against the rings' own positions (issue 16's audit hook).
        let r = sock.rings_mut();
        if let Err(e) = pool.audit(crate::xsk::kernel_held(r.fill, r.rx, r.tx, r.completion)).check() {
            tracing::error!(queue = self.spec.queue, "frame audit failed at socket teardown: {e}");
        }
        refresh_stats(&sock, shared);
        let xsk = sock.statistics().unwrap_or_default();
        drop(sock);
        // The frames in the fill and TX rings stay counted there until the control
        // thread has closed the UMEM too (the first socket's descriptor lives with it,
        // and a zero-copy driver may still hold the rings): see `reclaim`.
        shared.reclaim_pending.store(true, Ordering::SeqCst);
        self.busy_poll = false;
        self.c.socket_releases += 1;
        tracing::info!(queue = self.spec.queue, "socket given up; kernel frames wait for the UMEM to close");
        xsk
    }

    /// Takes back what the closed socket left in the kernel's rings.
    fn reclaim(&mut self, pool: &mut PoolOwner, shared: &WorkerShared) {
        let reclaimed = pool.reclaim_kernel();
        self.c.reclaimed += reclaimed as u64;
        self.in_fill = 0;
        self.inflight.reset();
        self.verify_held();
        shared.reclaim_pending.store(false, Ordering::SeqCst);
        tracing::info!(queue = self.spec.queue, reclaimed, held = self.held.len(), "kernel frames reclaimed");
    }

    /// Re-reads every held frame: the memory must still be mapped and unchanged.
    fn verify_held(&mut self) {
        for h in &self.held {
            match self.region.frame_bytes(&h.frame, (h.addr - h.frame.addr()) as u32, h.len) {
                Some(bytes) if digest(bytes) == h.digest => self.c.held_verified += 1,
                _ => {
                    self.c.held_corrupt += 1;
                    tracing::error!(queue = self.spec.queue, addr = h.addr, "a held frame changed while the device was away");
                }
            }
        }
    }

    /// The application returns every frame it held.
    fn release_held(&mut self, pool: &mut PoolOwner) {
        if self.held.is_empty() {
            return;
        }
        self.verify_held();
        let n = self.held.len() as u64;
        for h in self.held.drain(..) {
            pool.recycle(h.frame);
        }
        self.c.held_returned += n;
        self.c.held = 0;
    }

    /// After the stop: everything the RX ring still holds is processed as a drop.
    /// Recycles one batch of what the RX ring still holds (counted in `drained_rx`);
    /// returns how many descriptors were taken off the ring, bad ones included.
    fn drain_rx(&mut self, sock: &mut XskSocket, pool: &mut PoolOwner) -> usize {
        let got = sock.rx().consume_counted(&mut self.descs[..MAX_BATCH]);
        self.in_fill = self.in_fill.saturating_sub(got.taken as u32);
        for d in &self.descs[..got.kept] {
            match pool.take_rx(d.addr, d.len) {
                Ok(f) => {
                    self.c.rx_packets += 1;
                    self.c.rx_bytes += d.len as u64;
                    self.c.action_drop += 1;
                    self.c.drained_rx += 1;
                    pool.recycle(f);
                }
                Err(_) => self.c.rx_rejected += 1,
            }
        }
        got.taken
    }

    /// Busy-poll options on the new socket; a refusal is logged once and the worker
    /// spins instead.
    #[cold]
    fn enable_busy_poll(&mut self, sock: &XskSocket) {
        match sock.set_busy_poll(self.spec.busy_poll_budget) {
            Ok(()) => {
                self.busy_poll = true;
                self.c.busy_poll_sockets += 1;
                tracing::info!(queue = self.spec.queue, budget = self.spec.busy_poll_budget, "busy-poll on (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET)");
            }
            Err(e) => {
                self.c.busy_poll_refused += 1;
                if !self.busy_poll_warned {
                    self.busy_poll_warned = true;
                    tracing::warn!(queue = self.spec.queue, error = %e, "busy-poll refused; spinning instead");
                }
            }
        }
    }

    /// Busy-poll drives the NAPI instance the kernel noted on the socket with its
    /// first frames. Without one (veth gives AF_XDP sockets none), recvfrom polls
    /// nothing and a spinning worker only takes the core from the kernel thread that
    /// does deliver: wait in poll() instead, and say so once.
    #[cold]
    fn check_napi(&mut self, sock: &XskSocket) {
        self.napi_checked = true;
        if let Some(id) = sock.napi_id() {
            tracing::info!(queue = self.spec.queue, napi_id = id, "busy-poll drives NAPI {id}");
            return;
        }
        self.busy_poll = false;
        self.wait = WaitMode::Poll;
        self.c.busy_poll_no_napi += 1;
        tracing::warn!(
            queue = self.spec.queue,
            "busy-poll: the device gave this socket no NAPI id (veth gives none), so recvfrom has nothing to poll; \
             waiting in poll() instead (use mode = \"poll\" on this device)"
        );
    }

    fn idle(&mut self, sock: &XskSocket, shared: &WorkerShared) {
        match self.wait {
            WaitMode::Spin | WaitMode::BusyPoll => std::hint::spin_loop(),
            WaitMode::Poll => {
                use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
                if std::mem::take(&mut self.received_since_idle) && !self.spec.poll_coalesce.is_zero() {
                    // Traffic is flowing: let a batch gather instead of being woken
                    // at every kernel flush (a wake-up costs the sending CPU too).
                    self.c.poll_naps += 1;
                    std::thread::sleep(self.spec.poll_coalesce);
                    return;
                }
                let mut fds = [
                    PollFd::new(sock.fd(), PollFlags::POLLIN),
                    PollFd::new(shared.wake.as_fd(), PollFlags::POLLIN),
                ];
                let _ = poll(&mut fds, PollTimeout::from(POLL_TIMEOUT_MS));
                if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                    // Reset the counter; the loop looks at what was asked.
                    let _ = shared.wake.read();
                }
            }
        }
    }
}

/// The first 12 bytes of `frame` with destination and source MAC exchanged.
/// `frame` must hold at least 12 bytes.
#[inline]
fn swapped_macs(frame: &[u8]) -> [u8; 12] {
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&frame[6..12]);
    macs[6..].copy_from_slice(&frame[..6]);
    macs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_macs_swaps_only_the_addresses() {
        let f: Vec<u8> = (0..20).collect();
        assert_eq!(swapped_macs(&f), [6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]);
    }
}
