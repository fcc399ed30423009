//! `xdpool run`: build the UMEM, bind one socket per queue, load and attach the XDP
//! program, run the pinned workers, show the live line, and on stop tear down in the
//! right order (detach first, then drain, reclaim, close) and print the summary.
//! When the device goes away (deleted, unbound, moved, set down, program detached)
//! the same teardown runs, and the run comes back on the device when it returns.

use crate::config::{Action, Config, XdpModeConfig};
use crate::device::{decide, Backoff, Decision, DeviceReport, DeviceStats, LinkEvent, LinkWatcher, LossKind};
use crate::exit::{ExitCode, Fatal};
use crate::steer::{Rule, RuleAction, RuleMatch, Steering, XdpAttachMode, XdpCounters};
use crate::worker::{self, classify::Classifier, WorkerCountersSnapshot, WorkerExit, WorkerShared, WorkerSpec};
use crate::xsk::{SocketConfig, Umem, UmemConfig, XdpStatistics, XskError, XskSocket};
use pool::{Accounting, Region, RegionConfig, Topology};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options from the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Write the summary as JSON here.
    pub summary_json: Option<PathBuf>,
    /// Override the XDP mode.
    pub xdp_mode: Option<XdpModeConfig>,
    /// Exit when the device goes away.
    pub no_reattach: bool,
    /// No live line.
    pub quiet: bool,
    /// Print `ready` once attached.
    pub ready_line: bool,
    /// Frames the application keeps per queue across device losses (0: none).
    pub hold_frames: u32,
}

/// The end-of-run summary (printed, and written with `--summary-json`).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Interface.
    pub interface: String,
    /// Queues served.
    pub queues: Vec<u32>,
    /// Worker cores.
    pub cores: Vec<usize>,
    /// Frames received by the workers.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Wall time of the run, seconds.
    pub duration_s: f64,
    /// Time between the first and the last frame seen, seconds.
    pub active_s: f64,
    /// packets / active_s, in millions.
    pub mpps: f64,
    /// Highest one-second rate seen, in millions.
    pub peak_mpps: f64,
    /// Drops and rejects by reason.
    pub drops: Drops,
    /// Worker counters, summed.
    pub counters: WorkerCountersSnapshot,
    /// The XDP program's counters.
    pub xdp: XdpCounters,
    /// Per-queue end state.
    pub workers: Vec<WorkerExit>,
    /// Where every frame of the UMEM was at the end.
    pub accounting: Accounting,
    /// Whether `free + cached + ring + fill + tx + application == total` held.
    pub accounting_ok: bool,
    /// Whether an XDP program was still attached to the device after the run.
    pub program_left_attached: bool,
    /// Device losses, re-attaches and their times.
    pub device: DeviceReport,
}

/// Drops by reason.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Drops {
    /// By the `drop` action (rxdrop: the intended fate).
    pub action_drop: u64,
    /// Kernel: RX ring full (XDP_STATISTICS rx_ring_full).
    pub rx_ring_full: u64,
    /// Kernel: fill ring empty when a frame arrived (copy mode: the frame was
    /// dropped; zero-copy: the driver found no buffer to post).
    pub rx_fill_ring_empty: u64,
    /// Kernel: other RX drops (`rx_dropped` less the fill-ring-empty drops it also
    /// counts in copy mode; e.g. frames too long for a chunk).
    pub rx_dropped: u64,
    /// Kernel: invalid fill / TX descriptors.
    pub invalid_descs: u64,
    /// Ours: descriptors that failed validation or the recycler's owner check.
    pub rejected_descs: u64,
    /// TX descriptors (l2fwd, mirror, copybreak) dropped because the TX ring was full.
    pub tx_ring_full: u64,
    /// mirror / copybreak frames dropped because the pool had no memory for a copy.
    pub frag_alloc_failed: u64,
    /// Frames the XDP program found malformed (passed to the kernel, not steered).
    pub xdp_malformed: u64,
    /// Frames matching a steer rule while no socket was registered (passed).
    pub xdp_no_socket: u64,
}


fn to_steer_rules(cfg: &Config) -> Vec<Rule> {
    cfg.valid_rules()
        .into_iter()
        .map(|r| {
            let matcher = if r.proto.is_none() && r.dst_port.is_none() && r.dst.is_none() {
                RuleMatch::All
            } else {
                RuleMatch::Fields { proto: r.proto, dst_port: r.dst_port, dst_prefix: r.dst }
            };
            let action = match r.action {
                Action::Drop | Action::L2fwd | Action::Mirror | Action::Copybreak => RuleAction::Steer,
                Action::Pass => RuleAction::Pass,
                Action::Xdpdrop => RuleAction::Drop,
            };
            Rule { matcher, action }
        })
        .collect()
}

/// Tells every worker to stop and wakes those waiting in poll().
fn stop_workers(stop: &AtomicBool, shared: &[Arc<WorkerShared>]) {
    stop.store(true, Ordering::SeqCst);
    shared.iter().for_each(|w| w.wake());
}

fn xsk_fatal(e: XskError, iface: &str) -> Fatal {
    let code = match &e {
        XskError::ZeroCopyUnsupported { .. } => ExitCode::ZeroCopyRefused,
        XskError::NoDevice { .. } | XskError::NoSuchQueue { .. } => ExitCode::InterfaceMissing,
        XskError::MemlockRefused { .. } => ExitCode::Privilege,
        _ => ExitCode::Failure,
    };
    Fatal::new(code, format!("AF_XDP socket on {iface}: {e}"))
}

fn steer_fatal(e: crate::steer::SteerError, iface: &str) -> Fatal {
    use crate::steer::SteerError as E;
    let code = match &e {
        E::NotPermitted { .. } => ExitCode::Privilege,
        E::InterfaceMissing { .. } => ExitCode::InterfaceMissing,
        E::ModeRefused { .. } => ExitCode::XdpModeRefused,
        _ => ExitCode::Failure,
    };
    Fatal::new(code, format!("XDP program on {iface}: {e}"))
}

/// Binds with retries: EBUSY comes from a socket the kernel is still tearing down
/// (socket release is asynchronous; a quick rebind after a device loss meets it).
/// Returns the socket and how many EBUSY answers it met.
fn bind_with_retry(umem: &Umem, ifindex: u32, queue: u32, sc: &SocketConfig) -> Result<(XskSocket, u64), XskError> {
    let mut delay = Duration::from_millis(5);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut busy = 0;
    loop {
        match XskSocket::bind(umem, ifindex, queue, sc) {
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                busy += 1;
                tracing::debug!(queue, error = %e, ?delay, "bind busy, retrying");
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(200));
            }
            other => return other.map(|s| (s, busy)),
        }
    }
}

/// Everything the device lifecycle needs: the memory, the workers, the program.
struct Lifecycle {
    iface: String,
    region: Arc<Region>,
    ucfg: UmemConfig,
    sc: SocketConfig,
    queues: Vec<u32>,
    shared: Vec<Arc<WorkerShared>>,
    steering: Arc<Mutex<Steering>>,
    mode: XdpAttachMode,
    device: Arc<DeviceStats>,
    program_id: Option<u32>,
    /// The kernel registration of the region; re-made on every re-attach, because a
    /// socket whose device went away can neither be rebound nor shared from.
    umem: Option<Umem>,
    /// Interface we run on (`None` while the device is away).
    attached: Option<u32>,
    /// Last interface we ran on (for the final "program left behind" check).
    last_ifindex: u32,
}

/// Why bringing the device up failed.
enum UpError {
    Xsk(XskError),
    Steer(crate::steer::SteerError),
    WorkersSlow,
}

impl std::fmt::Display for UpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpError::Xsk(e) => write!(f, "{e}"),
            UpError::Steer(e) => write!(f, "{e}"),
            UpError::WorkersSlow => f.write_str("workers did not take their sockets within 1 s; check CPU load"),
        }
    }
}

impl Lifecycle {
    fn steering(&self) -> std::sync::MutexGuard<'_, Steering> {
        self.steering.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers the region, binds one socket per queue, hands them to the workers,
    /// waits for full fill rings, then attaches the program.
    fn bring_up(&mut self, ifindex: u32) -> Result<(), UpError> {
        // SAFETY: the region is page-aligned mmap'd memory of region.len() bytes; it
        // is an Arc held by this struct and by every worker, and every Umem made here
        // is dropped (in `bring_down`, or at the end of `run`) before the region, so
        // the memory stays mapped while the kernel may use it; the recycler alone
        // decides which chunk the kernel may write.
        let umem = unsafe { Umem::register(self.region.as_ptr(), self.region.len(), self.ucfg) }.map_err(UpError::Xsk)?;
        let mut sockets = Vec::new();
        for &q in &self.queues {
            let (sock, busy) = bind_with_retry(&umem, ifindex, q, &self.sc).map_err(UpError::Xsk)?;
            if busy > 0 {
                self.device.busy_retries(busy);
                tracing::info!(queue = q, busy, "bind met EBUSY (old socket still closing); retried");
            }
            sockets.push(sock);
        }
        {
            use std::os::fd::AsRawFd;
            let mut st = self.steering();
            for s in &sockets {
                st.register_xsk(s.queue(), s.fd().as_raw_fd()).map_err(UpError::Steer)?;
            }
        }
        self.umem = Some(umem);
        self.attached = Some(ifindex);
        self.last_ifindex = ifindex;
        for (w, s) in self.shared.iter().zip(sockets) {
            w.device_gone.store(false, Ordering::SeqCst);
            drop(w.offer_socket(s));
        }
        // Rings full before frames may flow.
        let deadline = Instant::now() + Duration::from_secs(1);
        while !self.shared.iter().all(|w| w.has_socket() && !w.socket_pending()) {
            if Instant::now() >= deadline {
                return Err(UpError::WorkersSlow);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let mode = self.mode;
        self.steering().attach(ifindex, mode).map_err(UpError::Steer)?;
        Ok(())
    }

    /// Teardown in the order that loses nothing: detach the program (while the
    /// device may still exist), take the sockets out of the map, let every worker
    /// drain RX, reap, close its socket and reclaim the kernel's frames, then drop
    /// the UMEM registration. The region (and frames the application holds) stays.
    /// Ends with the accounting check at rest.
    fn bring_down(&mut self) {
        {
            let mut st = self.steering();
            if st.attached_to().is_some() {
                if let Err(e) = st.detach() {
                    tracing::warn!(error = %e, "detach failed");
                }
            }
            for &q in &self.queues {
                let _ = st.unregister_xsk(q);
            }
        }
        for w in &self.shared {
            w.request_release();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.shared.iter().any(|w| w.has_socket()) {
            if Instant::now() >= deadline {
                tracing::error!("a worker did not give its socket up within 2 s; its frames stay counted where they are");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        for w in &self.shared {
            w.device_gone.store(false, Ordering::SeqCst);
        }
        // Only with every socket and the UMEM closed can the kernel no longer touch
        // the frames it held; then the workers take them back.
        self.umem = None;
        self.attached = None;
        if self.sc.zero_copy {
            // A zero-copy driver releases its buffer pool from deferred work.
            std::thread::sleep(Duration::from_millis(100));
        }
        for w in &self.shared {
            w.request_reclaim();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.shared.iter().any(|w| w.reclaim_pending()) {
            if Instant::now() >= deadline {
                tracing::error!("a worker did not reclaim its kernel frames within 2 s; they stay counted in the fill/TX rings");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let acc = self.region.accounting();
        match acc.check() {
            Ok(()) => {
                tracing::info!(free = acc.free, cached = acc.cached, ring = acc.ring, fill = acc.fill, tx = acc.tx, application = acc.application, total = acc.total, "teardown done; frame accounting exact");
                self.device.teardown_checked(true);
            }
            Err(e) => {
                tracing::error!("frame accounting failed after teardown: {e}");
                self.device.teardown_checked(false);
            }
        }
    }

    fn lose(&mut self, kind: LossKind) {
        tracing::warn!(interface = %self.iface, ifindex = self.attached.unwrap_or(0), %kind, "device lost; tearing down");
        self.device.lost(kind);
        self.bring_down();
        tracing::info!(interface = %self.iface, "device away; waiting for it to come back");
    }

    /// Tries to come back on `ifindex`; a failure leaves everything torn down.
    fn try_reattach(&mut self, ifindex: u32, seen_up: Instant) -> bool {
        tracing::info!(interface = %self.iface, ifindex, "device is back; re-attaching");
        match self.bring_up(ifindex) {
            Ok(()) => {
                let took = seen_up.elapsed();
                self.device.reattached(ifindex, took);
                tracing::info!(interface = %self.iface, ifindex, ms = took.as_secs_f64() * 1e3, "re-attached");
                true
            }
            Err(e) => {
                tracing::warn!(interface = %self.iface, ifindex, error = %e, "re-attach failed; will retry");
                self.device.reattach_failed();
                self.bring_down();
                false
            }
        }
    }

    /// The program is gone from a device that stayed: attach it again (sockets and
    /// rings stay as they are).
    fn reattach_program(&mut self, ifindex: u32) -> bool {
        let started = Instant::now();
        let mode = self.mode;
        let mut st = self.steering();
        if st.attached_to().is_some() {
            let _ = st.detach();
        }
        match st.attach(ifindex, mode) {
            Ok(()) => {
                drop(st);
                let took = started.elapsed();
                self.device.reattached(ifindex, took);
                tracing::info!(interface = %self.iface, ifindex, ms = took.as_secs_f64() * 1e3, "XDP program re-attached");
                true
            }
            Err(e) => {
                drop(st);
                self.device.reattach_failed();
                tracing::warn!(interface = %self.iface, ifindex, error = %e, "XDP program re-attach failed; will retry");
                false
            }
        }
    }

    /// Whether our program still runs on `ifindex`; `None` when the device is gone.
    fn program_present(&self, ifindex: u32) -> Option<bool> {
        match crate::steer::xdp_program_on(ifindex) {
            Ok(Some(id)) => Some(self.program_id.is_none_or(|ours| ours == id)),
            Ok(None) => Some(false),
            Err(crate::steer::SteerError::InterfaceMissing { .. }) => None,
            Err(_) => Some(true), // netlink hiccup: no evidence either way
        }
    }
}

/// Largest frame one UMEM chunk takes in copy mode: the chunk less the kernel's
/// `XDP_PACKET_HEADROOM` (the UMEM itself reserves no headroom here).
pub fn single_buffer_room(chunk_size: u32) -> u32 {
    chunk_size - crate::xsk::XDP_PACKET_HEADROOM
}

/// How many frames a worker keeps with the kernel: on the fill ring, or taken from
/// it and not yet read back from the RX ring.
///
/// Zero-copy: the whole fill ring. The driver moves fill entries into its own RX
/// ring ahead of traffic, so the fill ring must cover the device's ring and the
/// socket's (the config check asks for fill >= rx; size it to both).
///
/// Copy mode: no more than the RX ring holds. The kernel takes a fill entry only
/// when a frame arrives, copies the frame into it and only then finds out whether
/// the RX ring has room (`rx_ring_full`: the copy was for nothing, on the core that
/// runs the device's NAPI, which may be the worker's own). With at most an RX
/// ring's worth of frames handed over, the RX ring cannot overflow: when the worker
/// falls behind, the kernel finds the fill ring empty first and drops before it
/// copies (counted `rx_fill_ring_empty`). Fewer frames in circulation also keeps
/// the kernel's copies in a smaller, warmer part of the UMEM.
pub fn fill_target(fill: u32, rx: u32, zero_copy: bool) -> u32 {
    if zero_copy {
        fill
    } else {
        fill.min(rx)
    }
}

/// The kernel's RX drops that no other counter names. In copy mode a frame that
/// finds the fill ring empty is counted twice, in `rx_dropped` and in
/// `rx_fill_ring_empty_descs`; take it out of the first so that the drops add up.
/// In zero-copy the second counts the driver's failed refills, not frames.
pub fn other_rx_drops(x: &XdpStatistics, zero_copy: bool) -> u64 {
    if zero_copy {
        x.rx_dropped
    } else {
        x.rx_dropped.saturating_sub(x.rx_fill_ring_empty_descs)
    }
}

/// Frames longer than a chunk's room are dropped by the kernel (`rx_dropped`) unless
/// the sockets are multi-buffer: say so at start when the MTU allows such frames.
fn warn_if_mtu_needs_multi_buffer(cfg: &Config, iface: &str) {
    if *cfg.interface.multi_buffer.get_ref() {
        return;
    }
    let Ok(mtu) = crate::lab::link_mtu(None, iface) else { return };
    let room = single_buffer_room(*cfg.umem.chunk_size.get_ref());
    let frame = mtu + crate::gen::packet::ETH_HLEN as u32;
    if frame > room {
        tracing::warn!(
            interface = %iface,
            mtu,
            "frames up to {frame} B can arrive but one {} B chunk holds {room} B: longer ones are dropped by the kernel \
             (counted in rx_dropped); set interface.multi_buffer = true for jumbo frames",
            cfg.umem.chunk_size.get_ref()
        );
    }
}

/// Runs the processor until the duration passes or SIGINT/SIGTERM arrives, following
/// the device through losses and returns (or exiting on a loss with `--no-reattach`).
pub fn run(cfg: &Config, opts: &RunOptions) -> Result<Summary, Fatal> {
    crate::exit::require_privileges("xdpool run")?;
    let iface = cfg.interface.name.get_ref().clone();
    if let Some(ns) = &cfg.interface.netns {
        crate::netns::enter_forever(Some(ns)).map_err(|e| {
            Fatal::new(ExitCode::InterfaceMissing, format!("cannot enter network namespace `{ns}`: {e}; create it (`xdpool lab up`) or fix interface.netns"))
        })?;
    }
    let ifindex = crate::netns::ifindex(&iface).map_err(|_| {
        Fatal::new(
            ExitCode::InterfaceMissing,
            format!(
                "interface `{iface}` does not exist{}; run `xdpool lab up` for the lab, or fix interface.name",
                cfg.interface.netns.as_deref().map(|n| format!(" in namespace {n}")).unwrap_or_default()
            ),
        )
    })?;
    warn_if_mtu_needs_multi_buffer(cfg, &iface);
    let stop_signal: &'static AtomicBool = crate::bench::signal::install_stop_flag()
        .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot install the SIGINT/SIGTERM handler: {e}")))?;
    // Subscribed before anything is attached, so no event of our device is missed.
    let watcher = LinkWatcher::start().map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    let queues = cfg.interface.queues.get_ref().clone();
    let cores = cfg.worker_cores();
    let chunk = *cfg.umem.chunk_size.get_ref();
    let region = Region::new(RegionConfig {
        frames: *cfg.umem.frames.get_ref(),
        chunk_size: chunk,
        hugepages: cfg.umem.hugepages,
        topology: Topology::detect(),
    })
    .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot build the UMEM: {e}")))?;
    let ucfg = UmemConfig {
        chunk_size: chunk,
        headroom: 0,
        fill_size: *cfg.rings.fill.get_ref(),
        comp_size: *cfg.rings.completion.get_ref(),
        unaligned: false,
    };
    // No rule transmits: bind without a TX ring, so poll() skips the kernel's copy-mode
    // TX path (it runs it on every call on a socket that has one).
    let transmits = cfg.valid_rules().iter().any(|r| matches!(r.action, Action::L2fwd | Action::Mirror | Action::Copybreak));
    let sc = SocketConfig {
        rx_size: *cfg.rings.rx.get_ref(),
        tx_size: if transmits { *cfg.rings.tx.get_ref() } else { 0 },
        zero_copy: cfg.interface.zero_copy,
        need_wakeup: true,
        multi_buffer: *cfg.interface.multi_buffer.get_ref(),
    };
    let mut steering = Steering::load().map_err(|e| steer_fatal(e, &iface))?;
    steering.set_rules(&to_steer_rules(cfg)).map_err(|e| steer_fatal(e, &iface))?;
    let program_id = steering.program_id().ok();
    let mode = match opts.xdp_mode.unwrap_or(cfg.interface.xdp_mode) {
        XdpModeConfig::Native => XdpAttachMode::Native,
        XdpModeConfig::Skb => XdpAttachMode::Skb,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let classifier = Classifier::new(cfg.valid_rules());
    let mut shared = Vec::new();
    let mut handles = Vec::new();
    // Every worker's shared state first: a failure here leaves no thread running.
    for (i, &q) in queues.iter().enumerate() {
        let ws = WorkerShared::new(q, cores.get(i).copied())
            .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot make a worker's eventfd: {e} (raise ulimit -n)")))?;
        shared.push(ws);
    }
    for (i, (&q, ws)) in queues.iter().zip(shared.clone()).enumerate() {
        let core = cores.get(i).copied();
        let spec = WorkerSpec {
            queue: q,
            core,
            batch: *cfg.workers.batch.get_ref() as usize,
            mode: cfg.workers.mode,
            classifier: classifier.clone(),
            fill_target: fill_target(*cfg.rings.fill.get_ref(), *cfg.rings.rx.get_ref(), cfg.interface.zero_copy),
            hold_frames: opts.hold_frames as usize,
            copybreak_bytes: *cfg.workers.copybreak_bytes.get_ref(),
            // Validated to 1..=1024.
            busy_poll_budget: *cfg.workers.busy_poll_budget.get_ref() as u16,
            poll_coalesce: Duration::from_micros(u64::from(*cfg.workers.poll_coalesce_us.get_ref())),
        };
        let (region, worker_stop) = (region.clone(), stop.clone());
        match std::thread::Builder::new().name(format!("xdpool-q{q}")).spawn(move || worker::run(region, spec, ws, worker_stop)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The workers already started hold no socket yet: stop them first.
                stop_workers(&stop, &shared);
                for h in handles {
                    let _ = h.join();
                }
                return Err(Fatal::new(ExitCode::Failure, format!("cannot start a worker thread: {e}")));
            }
        }
    }
    let device = DeviceStats::new(ifindex);
    let mut lc = Lifecycle {
        iface: iface.clone(),
        region: region.clone(),
        ucfg,
        sc,
        queues: queues.clone(),
        shared: shared.clone(),
        steering: Arc::new(Mutex::new(steering)),
        mode,
        device: device.clone(),
        program_id,
        umem: None,
        attached: None,
        last_ifindex: ifindex,
    };
    if let Err(e) = lc.bring_up(ifindex) {
        lc.bring_down();
        stop_workers(&stop, &shared);
        for h in handles {
            let _ = h.join();
        }
        return Err(match e {
            UpError::Xsk(e) => xsk_fatal(e, &iface),
            UpError::Steer(e) => steer_fatal(e, &iface),
            UpError::WorkersSlow => Fatal::new(ExitCode::Failure, UpError::WorkersSlow.to_string()),
        });
    }
    tracing::info!(interface = %iface, ifindex, ?queues, ?cores, ?mode, "attached; workers running");
    let mut service = crate::service::Service::from_env();
    service.ready(&format!("attached: {iface} queues {queues:?}"));
    if opts.ready_line {
        println!("ready");
        let _ = std::io::stdout().flush();
    }

    let started = Instant::now();
    let snapshot_fn = make_snapshot_fn(iface.clone(), shared.clone(), lc.steering.clone(), region.clone(), device.clone(), started);
    let _control = match crate::stats::control::ControlServer::start(&cfg.stats.control_socket, snapshot_fn.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no control socket: `xdpool stats` will not reach this instance");
            None
        }
    };
    let _prom = match &cfg.stats.prometheus {
        Some(addr) => match crate::stats::prom::PromServer::start(addr.get_ref().parse().expect("validated"), snapshot_fn.clone()) {
            Ok(s) => {
                tracing::info!(addr = %s.addr, "prometheus endpoint: GET /metrics");
                Some(s)
            }
            Err(e) => {
                tracing::warn!(error = %e, "prometheus endpoint not started");
                None
            }
        },
        None => None,
    };

    // The control loop: link events as they come (at most 20 ms late), the program
    // check every 100 ms, rate sampling every 100 ms, the live line every second.
    let live = cfg.stats.live && !opts.quiet;
    let mut last_line = Instant::now();
    let mut last_sample = Instant::now();
    let mut last_prog_check = Instant::now();
    let mut last_rx = 0u64;
    let mut first_seen: Option<Instant> = None;
    let mut last_seen: Option<Instant> = None;
    let mut sample_rx = 0u64;
    let mut peak_pps = 0f64;
    let mut device_gone = false;
    let mut recheck = Backoff::new();
    loop {
        service.tick();
        let mut events: Vec<LinkEvent> = watcher.next(Duration::from_millis(20)).into_iter().collect();
        events.extend(watcher.drain());
        for ev in &events {
            match decide(ev, lc.attached, &iface) {
                Decision::Lost(kind) => {
                    lc.lose(kind);
                    recheck.reset();
                }
                Decision::Returned { ifindex } if !opts.no_reattach && !lc.try_reattach(ifindex, Instant::now()) => {
                    recheck.reset();
                }
                _ => {}
            }
        }
        if lc.attached.is_some() && shared.iter().any(|w| w.device_gone.load(Ordering::Relaxed)) {
            lc.lose(LossKind::SocketError);
            recheck.reset();
        }
        match lc.attached {
            Some(ifx) if last_prog_check.elapsed() >= Duration::from_millis(100) => {
                last_prog_check = Instant::now();
                match lc.program_present(ifx) {
                    Some(true) => {}
                    Some(false) => {
                        tracing::warn!(interface = %iface, ifindex = ifx, "our XDP program is no longer on the device (detached from outside)");
                        lc.device.lost(LossKind::ProgramDetached);
                        if opts.no_reattach {
                            lc.bring_down();
                        } else {
                            lc.reattach_program(ifx);
                        }
                    }
                    None => {
                        lc.lose(LossKind::Deleted);
                        recheck.reset();
                    }
                }
            }
            None if !opts.no_reattach && recheck.due() => {
                // Netlink events can be lost on overrun: look for the device directly.
                if let Ok(Some(link)) = crate::device::find_link(&iface) {
                    if link.up {
                        lc.try_reattach(link.ifindex, Instant::now());
                    }
                }
            }
            _ => {}
        }
        if lc.attached.is_none() && opts.no_reattach {
            device_gone = true;
            tracing::error!(interface = %iface, "device went away; exiting (--no-reattach)");
            break;
        }
        if last_sample.elapsed() >= Duration::from_millis(100) {
            last_sample = Instant::now();
            let rx: u64 = shared.iter().map(|w| w.counters.rx_packets.load(Ordering::Relaxed)).sum();
            if rx != sample_rx {
                let now = Instant::now();
                first_seen.get_or_insert(now);
                last_seen = Some(now);
                sample_rx = rx;
            }
            if last_line.elapsed() >= Duration::from_secs(1) {
                let dt = last_line.elapsed().as_secs_f64();
                let pps = rx.saturating_sub(last_rx) as f64 / dt;
                peak_pps = peak_pps.max(pps);
                last_line = Instant::now();
                last_rx = rx;
                if live {
                    let snap = snapshot_fn();
                    eprintln!("{}", live_line(&snap, started.elapsed().as_secs_f64(), pps));
                }
            }
        }
        if stop_signal.load(Ordering::SeqCst) {
            tracing::info!("signal received: draining and detaching");
            break;
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
    }
    service.stopping(if device_gone { "device gone: draining" } else { "stopping: draining and detaching" });
    let duration_s = started.elapsed().as_secs_f64();

    // Teardown order: detach the program while the device exists, then let workers
    // drain what the RX ring holds, reclaim the kernel's frames and close the sockets.
    if lc.attached.is_some() {
        lc.bring_down();
    }
    let xdp = lc.steering().counters().unwrap_or_default();
    stop_workers(&stop, &shared);
    let mut exits = Vec::new();
    for h in handles {
        match h.join() {
            Ok(e) => exits.push(e),
            Err(_) => return Err(Fatal::new(ExitCode::Failure, "a worker thread panicked; see the message above")),
        }
    }
    let last_ifindex = lc.last_ifindex;
    drop(lc);
    drop(watcher);
    let accounting = region.accounting();
    let accounting_ok = accounting.check().is_ok();
    if let Err(e) = accounting.check() {
        tracing::error!("frame accounting failed: {e}");
    }
    let program_left_attached = match crate::device::find_link(&iface) {
        Ok(Some(link)) => matches!(crate::steer::xdp_program_on(link.ifindex), Ok(Some(_))),
        _ => matches!(crate::steer::xdp_program_on(last_ifindex), Ok(Some(_))),
    };
    let mut counters = WorkerCountersSnapshot::default();
    let mut drops = Drops { xdp_malformed: xdp.malformed, xdp_no_socket: xdp.no_socket, ..Drops::default() };
    for e in &exits {
        counters += e.counters;
        drops.rx_ring_full += e.xsk.rx_ring_full;
        drops.rx_fill_ring_empty += e.xsk.rx_fill_ring_empty_descs;
        drops.rx_dropped += other_rx_drops(&e.xsk, cfg.interface.zero_copy);
        drops.invalid_descs += e.xsk.rx_invalid_descs + e.xsk.tx_invalid_descs;
    }
    drops.action_drop = counters.action_drop;
    drops.rejected_descs = counters.rx_rejected + counters.completion_rejected;
    drops.tx_ring_full = counters.tx_ring_full_drop;
    drops.frag_alloc_failed = counters.frag_alloc_failed;
    let active_s = match (first_seen, last_seen) {
        (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let summary = Summary {
        interface: iface,
        queues,
        cores,
        packets: counters.rx_packets,
        bytes: counters.rx_bytes,
        duration_s,
        active_s,
        mpps: if active_s > 0.0 { counters.rx_packets as f64 / active_s / 1e6 } else { 0.0 },
        peak_mpps: peak_pps / 1e6,
        drops,
        counters,
        xdp,
        workers: exits,
        accounting,
        accounting_ok,
        program_left_attached,
        device: device.report(),
    };
    if let Some(path) = &opts.summary_json {
        let text = serde_json::to_string_pretty(&summary).expect("summary serializes");
        std::fs::write(path, text).map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot write {}: {e}", path.display())))?;
    }
    if device_gone && opts.no_reattach {
        return Err(Fatal::new(
            ExitCode::DeviceGone,
            format!(
                "{}: the device went away and --no-reattach was given; frames were reclaimed (accounting {}). Run without --no-reattach to wait for it to return\n{}",
                summary.interface,
                if summary.accounting_ok { "ok" } else { "MISMATCH" },
                summary_text(&summary)
            ),
        ));
    }
    Ok(summary)
}

/// Builds the stats snapshot function shared by the control socket, Prometheus and
/// the live line.
fn make_snapshot_fn(
    iface: String,
    shared: Vec<Arc<WorkerShared>>,
    steering: Arc<Mutex<Steering>>,
    region: Arc<Region>,
    device: Arc<DeviceStats>,
    started: Instant,
) -> crate::stats::SnapshotFn {
    Arc::new(move || {
        let queues: Vec<Value> = shared
            .iter()
            .map(|w| {
                let mut q = serde_json::to_value(w.counters.snapshot()).expect("serializes");
                q["queue"] = json!(w.queue);
                q["pool"] = serde_json::to_value(w.pool_stats().unwrap_or_default()).expect("serializes");
                q["xsk"] = serde_json::to_value(*w.xsk_stats.lock().unwrap_or_else(|p| p.into_inner())).expect("serializes");
                q["ring_errors"] = serde_json::to_value(*w.ring_errors.lock().unwrap_or_else(|p| p.into_inner())).expect("serializes");
                q
            })
            .collect();
        let mut total = json!({});
        for q in &queues {
            add_numbers(&mut total, q);
        }
        if let Some(obj) = total.as_object_mut() {
            obj.remove("queue");
        }
        let xdp = steering.lock().unwrap_or_else(|p| p.into_inner()).counters().unwrap_or_default();
        json!({
            "interface": iface,
            "uptime_s": started.elapsed().as_secs_f64(),
            "queues": queues,
            "total": total,
            "xdp": xdp,
            "accounting": region.accounting(),
            "device": device.snapshot(),
        })
    })
}

/// Adds every number in `src` into `dst` (same shape), creating fields as needed.
fn add_numbers(dst: &mut Value, src: &Value) {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => {
            for (k, v) in s {
                match v {
                    Value::Number(_) | Value::Object(_) => {
                        let slot = d.entry(k.clone()).or_insert_with(|| if v.is_object() { json!({}) } else { json!(0u64) });
                        add_numbers(slot, v);
                    }
                    _ => {}
                }
            }
        }
        (d @ Value::Number(_), Value::Number(s)) => {
            let sum = d.as_u64().unwrap_or(0).saturating_add(s.as_u64().unwrap_or(0));
            *d = json!(sum);
        }
        _ => {}
    }
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_u64().unwrap_or(0)
}

/// The live one-line view.
pub fn live_line(snap: &Value, t: f64, pps: f64) -> String {
    let t_ = |p: &[&str]| num(&snap["total"], p);
    let acc = &snap["accounting"];
    format!(
        "[{t:6.1}s] rx {:6.3} Mpps  total {:>11}  drop {:>11}  tx {:>9}  | fill {:>5} app {:>5} free {:>5} | pool fast {} slow {} refill {} inflight {} | ring full {} fill-empty {} | xdp steered {} passed {} malformed {}",
        pps / 1e6,
        t_(&["rx_packets"]),
        t_(&["action_drop"]),
        t_(&["tx_packets"]),
        num(acc, &["fill"]),
        num(acc, &["application"]) + num(acc, &["tx"]),
        num(acc, &["free"]) + num(acc, &["cached"]) + num(acc, &["ring"]),
        t_(&["pool", "alloc_fast"]),
        t_(&["pool", "alloc_slow"]),
        t_(&["pool", "alloc_refill"]),
        t_(&["pool", "inflight"]),
        t_(&["xsk", "rx_ring_full"]),
        t_(&["xsk", "rx_fill_ring_empty_descs"]),
        num(&snap["xdp"], &["steered"]),
        num(&snap["xdp"], &["passed"]),
        num(&snap["xdp"], &["malformed"]),
    )
}

/// The human summary.
pub fn summary_text(s: &Summary) -> String {
    let a = &s.accounting;
    let d = &s.drops;
    format!(
        "xdpool run summary — {} queues {:?} cores {:?}\n\
         packets      {} ({} bytes) in {:.2} s, active {:.2} s\n\
         rate         {:.3} Mpps average while active, {:.3} Mpps peak (1 s)\n\
         l2fwd tx     {} queued, {} completed; mirrored {}, copybreak {}; most in TX at once {} in {} chunk(s)\n\
         drops        action drop {} | kernel: rx ring full {}, fill ring empty {}, other {}, invalid descs {} | ours: rejected descs {}, tx ring full {}\n\
         xdp program  steered {} passed {} dropped {} malformed {} no-socket {}\n\
         frames       total {} = free {} + cached {} + ring {} + fill {} + tx {} + application {}  [{}]\n\
         program      {}",
        s.interface,
        s.queues,
        s.cores,
        s.packets,
        s.bytes,
        s.duration_s,
        s.active_s,
        s.mpps,
        s.peak_mpps,
        s.counters.tx_packets,
        s.counters.tx_completed,
        s.counters.mirror_queued,
        s.counters.copybreak_copied,
        s.counters.tx_inflight_max,
        s.counters.tx_inflight_chunks_at_max,
        d.action_drop,
        d.rx_ring_full,
        d.rx_fill_ring_empty,
        d.rx_dropped,
        d.invalid_descs,
        d.rejected_descs,
        d.tx_ring_full,
        s.xdp.steered,
        s.xdp.passed,
        s.xdp.dropped,
        s.xdp.malformed,
        s.xdp.no_socket,
        a.total,
        a.free,
        a.cached,
        a.ring,
        a.fill,
        a.tx,
        a.application,
        if s.accounting_ok { "ok" } else { "MISMATCH" },
        if s.program_left_attached { "STILL ATTACHED" } else { "detached" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_target_is_the_rx_ring_in_copy_mode_and_the_fill_ring_in_zero_copy() {
        assert_eq!(fill_target(4096, 2048, false), 2048);
        assert_eq!(fill_target(2048, 2048, false), 2048);
        assert_eq!(fill_target(4096, 2048, true), 4096);
        // fill < rx is refused by the config check; were it not, the ring bounds it.
        assert_eq!(fill_target(1024, 2048, false), 1024);
    }

    #[test]
    fn fill_ring_empty_drops_are_not_counted_twice_in_copy_mode() {
        // As the kernel reported them in a copy-mode overload run: 716996 frames
        // found the fill ring empty, and rx_dropped counted the same frames.
        let x = XdpStatistics { rx_dropped: 716_996 + 3, rx_fill_ring_empty_descs: 716_996, ..Default::default() };
        assert_eq!(other_rx_drops(&x, false), 3);
        assert_eq!(other_rx_drops(&x, true), 716_999);
        let odd = XdpStatistics { rx_dropped: 1, rx_fill_ring_empty_descs: 5, ..Default::default() };
        assert_eq!(other_rx_drops(&odd, false), 0);
    }

    #[test]
    fn add_numbers_sums_nested() {
        let mut t = json!({});
        add_numbers(&mut t, &json!({"a": 1, "p": {"x": 2}, "s": "no"}));
        add_numbers(&mut t, &json!({"a": 3, "p": {"x": 4, "y": 1}}));
        assert_eq!(t, json!({"a": 4, "p": {"x": 6, "y": 1}}));
    }
}
