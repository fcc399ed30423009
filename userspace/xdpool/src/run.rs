//! `xdpool run`: build the UMEM, bind one socket per queue, load and attach the XDP
//! program, run the pinned workers, show the live line, and on stop tear down in the
//! right order (detach first, then drain, reclaim, close) and print the summary.

use crate::config::{Action, Config, XdpModeConfig};
use crate::exit::{ExitCode, Fatal};
use crate::steer::{Rule, RuleAction, RuleMatch, Steering, XdpAttachMode, XdpCounters};
use crate::worker::{self, classify::Classifier, WorkerCountersSnapshot, WorkerExit, WorkerShared, WorkerSpec};
use crate::xsk::{SocketConfig, Umem, UmemConfig, XskError, XskSocket};
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
}

/// Drops by reason.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Drops {
    /// By the `drop` action (rxdrop: the intended fate).
    pub action_drop: u64,
    /// Kernel: RX ring full (XDP_STATISTICS rx_ring_full).
    pub rx_ring_full: u64,
    /// Kernel: fill ring empty when a frame arrived.
    pub rx_fill_ring_empty: u64,
    /// Kernel: other RX drops.
    pub rx_dropped: u64,
    /// Kernel: invalid fill / TX descriptors.
    pub invalid_descs: u64,
    /// Ours: descriptors that failed validation or the recycler's owner check.
    pub rejected_descs: u64,
    /// l2fwd frames dropped because the TX ring was full.
    pub tx_ring_full: u64,
    /// Frames the XDP program found malformed (passed to the kernel, not steered).
    pub xdp_malformed: u64,
    /// Frames matching a steer rule while no socket was registered (passed).
    pub xdp_no_socket: u64,
}

static STOP_SIGNAL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP_SIGNAL.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that ask the run to stop.
fn install_signal_handlers() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(SigHandler::Handler(on_signal), SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to a static atomic, which is async-signal-safe.
        if let Err(e) = unsafe { sigaction(sig, &action) } {
            tracing::warn!(?sig, error = %e, "could not install signal handler");
        }
    }
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
                Action::Drop | Action::L2fwd => RuleAction::Steer,
                Action::Pass => RuleAction::Pass,
                Action::Xdpdrop => RuleAction::Drop,
            };
            Rule { matcher, action }
        })
        .collect()
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

/// Binds with retries: EBUSY comes from a socket the kernel is still tearing down.
fn bind_with_retry(umem: &Umem, ifindex: u32, queue: u32, sc: &SocketConfig) -> Result<XskSocket, XskError> {
    let mut delay = Duration::from_millis(10);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match XskSocket::bind(umem, ifindex, queue, sc) {
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tracing::debug!(queue, error = %e, ?delay, "bind busy, retrying");
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// Runs the processor until the duration passes or SIGINT/SIGTERM arrives.
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
    install_signal_handlers();
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
    // SAFETY: the region is page-aligned mmap'd memory of region.len() bytes; `region`
    // (an Arc) is declared before `umem` and held by every worker, so the memory stays
    // mapped until the UMEM and all sockets are gone; the recycler alone decides which
    // chunk the kernel may write.
    let umem = unsafe { Umem::register(region.as_ptr(), region.len(), ucfg) }.map_err(|e| xsk_fatal(e, &iface))?;
    let sc = SocketConfig {
        rx_size: *cfg.rings.rx.get_ref(),
        tx_size: *cfg.rings.tx.get_ref(),
        zero_copy: cfg.interface.zero_copy,
        need_wakeup: true,
    };
    let mut sockets = Vec::new();
    for &q in &queues {
        sockets.push(bind_with_retry(&umem, ifindex, q, &sc).map_err(|e| xsk_fatal(e, &iface))?);
    }
    let mut steering = Steering::load().map_err(|e| steer_fatal(e, &iface))?;
    steering.set_rules(&to_steer_rules(cfg)).map_err(|e| steer_fatal(e, &iface))?;
    for s in &sockets {
        use std::os::fd::AsRawFd;
        steering.register_xsk(s.queue(), s.fd().as_raw_fd()).map_err(|e| steer_fatal(e, &iface))?;
    }
    let mode = match opts.xdp_mode.unwrap_or(cfg.interface.xdp_mode) {
        XdpModeConfig::Native => XdpAttachMode::Native,
        XdpModeConfig::Skb => XdpAttachMode::Skb,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let classifier = Classifier::new(cfg.valid_rules());
    let mut shared = Vec::new();
    let mut handles = Vec::new();
    for (i, sock) in sockets.into_iter().enumerate() {
        let core = cores.get(i).copied();
        let ws = WorkerShared::new(sock.queue(), core);
        shared.push(ws.clone());
        let spec = WorkerSpec {
            queue: sock.queue(),
            core,
            batch: *cfg.workers.batch.get_ref() as usize,
            mode: cfg.workers.mode,
            classifier: classifier.clone(),
            fill_size: *cfg.rings.fill.get_ref(),
        };
        let (region, stop) = (region.clone(), stop.clone());
        let h = std::thread::Builder::new()
            .name(format!("xdpool-q{}", sock.queue()))
            .spawn(move || worker::run(sock, region, spec, ws, stop))
            .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot start a worker thread: {e}")))?;
        handles.push(h);
    }
    // Workers fill their rings first; then frames may flow.
    std::thread::sleep(Duration::from_millis(20));
    if let Err(e) = steering.attach(ifindex, mode) {
        stop.store(true, Ordering::SeqCst);
        for h in handles {
            let _ = h.join();
        }
        return Err(steer_fatal(e, &iface));
    }
    tracing::info!(interface = %iface, ifindex, ?queues, ?cores, ?mode, "attached; workers running");
    if opts.ready_line {
        println!("ready");
        let _ = std::io::stdout().flush();
    }

    let steering = Arc::new(Mutex::new(steering));
    let started = Instant::now();
    let snapshot_fn = make_snapshot_fn(iface.clone(), shared.clone(), steering.clone(), region.clone(), started);
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

    // The control loop: sample every 100 ms, print the live line every second.
    let live = cfg.stats.live && !opts.quiet;
    let mut last_line = Instant::now();
    let mut last_rx = 0u64;
    let mut first_seen: Option<Instant> = None;
    let mut last_seen: Option<Instant> = None;
    let mut sample_rx = 0u64;
    let mut peak_pps = 0f64;
    let mut device_gone = false;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let rx: u64 = shared.iter().map(|w| w.counters.rx_packets.load(Ordering::Relaxed)).sum();
        if rx != sample_rx {
            let now = Instant::now();
            first_seen.get_or_insert(now);
            last_seen = Some(now);
            sample_rx = rx;
        }
        if last_line.elapsed() >= Duration::from_secs(1) {
            let dt = last_line.elapsed().as_secs_f64();
            let pps = (rx - last_rx) as f64 / dt;
            peak_pps = peak_pps.max(pps);
            last_line = Instant::now();
            last_rx = rx;
            if live {
                let snap = snapshot_fn();
                eprintln!("{}", live_line(&snap, started.elapsed().as_secs_f64(), pps));
            }
        }
        if shared.iter().any(|w| w.device_gone.load(Ordering::Relaxed)) {
            device_gone = true;
            if opts.no_reattach {
                tracing::error!(interface = %iface, "device went away; exiting (--no-reattach)");
                break;
            }
        }
        if STOP_SIGNAL.load(Ordering::SeqCst) {
            tracing::info!("signal received: draining and detaching");
            break;
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
    }
    let duration_s = started.elapsed().as_secs_f64();

    // Teardown order: detach the program while the device exists, then let workers
    // drain what the RX ring holds, reclaim the kernel's frames and close the sockets.
    {
        let mut st = steering.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = st.detach() {
            tracing::warn!(error = %e, "detach failed");
        }
    }
    let xdp = steering.lock().unwrap_or_else(|p| p.into_inner()).counters().unwrap_or_default();
    stop.store(true, Ordering::SeqCst);
    let mut exits = Vec::new();
    for h in handles {
        match h.join() {
            Ok(e) => exits.push(e),
            Err(_) => return Err(Fatal::new(ExitCode::Failure, "a worker thread panicked; see the message above")),
        }
    }
    drop(steering);
    drop(umem);
    let accounting = region.accounting();
    let accounting_ok = accounting.check().is_ok();
    if let Err(e) = accounting.check() {
        tracing::error!("frame accounting failed: {e}");
    }
    let program_left_attached = matches!(crate::steer::xdp_program_on(ifindex), Ok(Some(_)));
    let mut counters = WorkerCountersSnapshot::default();
    let mut drops = Drops { xdp_malformed: xdp.malformed, xdp_no_socket: xdp.no_socket, ..Drops::default() };
    for e in &exits {
        counters += e.counters;
        drops.rx_ring_full += e.xsk.rx_ring_full;
        drops.rx_fill_ring_empty += e.xsk.rx_fill_ring_empty_descs;
        drops.rx_dropped += e.xsk.rx_dropped;
        drops.invalid_descs += e.xsk.rx_invalid_descs + e.xsk.tx_invalid_descs;
    }
    drops.action_drop = counters.action_drop;
    drops.rejected_descs = counters.rx_rejected + counters.completion_rejected;
    drops.tx_ring_full = counters.tx_ring_full_drop;
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
    };
    if let Some(path) = &opts.summary_json {
        let text = serde_json::to_string_pretty(&summary).expect("summary serializes");
        std::fs::write(path, text).map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot write {}: {e}", path.display())))?;
    }
    if device_gone && opts.no_reattach {
        return Err(Fatal::new(ExitCode::DeviceGone, format!("{}: device went away (--no-reattach)\n{}", summary.interface, summary_text(&summary))));
    }
    let inflight: u64 = summary.workers.iter().map(|w| w.inflight_at_destroy).sum();
    if inflight > 0 {
        for w in &summary.workers {
            if w.inflight_at_destroy > 0 {
                tracing::warn!("stalled shutdown: pool {}, {} inflight", w.queue, w.inflight_at_destroy);
            }
        }
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
         l2fwd tx     {} queued, {} completed\n\
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
    fn add_numbers_sums_nested() {
        let mut t = json!({});
        add_numbers(&mut t, &json!({"a": 1, "p": {"x": 2}, "s": "no"}));
        add_numbers(&mut t, &json!({"a": 3, "p": {"x": 4, "y": 1}}));
        assert_eq!(t, json!({"a": 4, "p": {"x": 6, "y": 1}}));
    }
}
