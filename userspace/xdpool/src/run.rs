//! `xdpool run`: plan the ports (`plan`), build the one UMEM and the workers, bring
//! every port up (`lifecycle`), follow the devices through losses and returns, show
//! the live line, and on stop tear down in the order that loses nothing and report
//! (`summary`).

use crate::config::Config;
use crate::device::{
    confirm, decide, Backoff, Decision, DeviceStats, LinkEvent, LinkWatcher, LossKind,
};
use crate::error::RunError;
use crate::lifecycle::{Lifecycle, UpError};
use crate::neigh::{MacBook, Neighbours};
use crate::netns::PortNetns;
use crate::plan::{plan, Plan};
use crate::steer::Steering;
use crate::worker::handoff::Remotes;
use crate::worker::rules::{RuleSet, RuleSlot};
use crate::worker::{
    self, classify::Classifier, Fabric, LaneSpec, PortRings, PortShared, Waker,
    WorkerCountersSnapshot, WorkerExit, WorkerSpec,
};
use crate::xsk::XskError;
use pool::{Region, RegionConfig, Topology};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::summary::{
    live_line, other_rx_drops, single_buffer_room, summary_text, Drops, Summary,
};
pub use crate::worker::fill_target;

/// Options from the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Write the summary as JSON here.
    pub summary_json: Option<PathBuf>,
    /// Override the XDP mode.
    pub xdp_mode: Option<crate::steer::XdpAttachMode>,
    /// Exit when a device goes away.
    pub no_reattach: bool,
    /// No live line.
    pub quiet: bool,
    /// Print `ready` once every port is attached with its link's carrier up.
    pub ready_line: bool,
    /// Frames the application keeps per queue across device losses (0: none).
    pub hold_frames: u32,
    /// The config file, read again on SIGHUP (its `[[rule]]` tables; `reload`).
    pub config_path: Option<PathBuf>,
    /// The worker loop to run (compiled for the program's packet functions);
    /// `None`: the built-in actions only.
    pub worker: Option<WorkerBody>,
}

/// A worker thread's body: [`worker::run_with`] for one set of handlers.
#[derive(Clone)]
pub struct WorkerBody(
    #[allow(clippy::type_complexity)]
    pub  Arc<
        dyn Fn(Arc<Region>, WorkerSpec, Arc<Fabric>, Arc<AtomicBool>) -> Vec<WorkerExit>
            + Send
            + Sync,
    >,
);

impl std::fmt::Debug for WorkerBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerBody")
    }
}

fn xsk_fatal(e: XskError, iface: &str) -> RunError {
    let reason: fn(String) -> RunError = match &e {
        XskError::ZeroCopyUnsupported { .. } => RunError::ZeroCopyRefused,
        XskError::NoDevice { .. } | XskError::NoSuchQueue { .. } => RunError::InterfaceMissing,
        XskError::MemlockRefused { .. } => RunError::Privilege,
        _ => RunError::Failure,
    };
    reason(format!("AF_XDP socket on {iface}: {e}"))
}

fn steer_fatal(e: crate::steer::SteerError, iface: &str) -> RunError {
    use crate::steer::SteerError as E;
    let reason: fn(String) -> RunError = match &e {
        E::NotPermitted { .. } => RunError::Privilege,
        E::InterfaceMissing { .. } => RunError::InterfaceMissing,
        E::ModeRefused { .. } => RunError::XdpModeRefused,
        _ => RunError::Failure,
    };
    reason(format!("XDP program on {iface}: {e}"))
}

fn up_fatal(e: UpError, iface: &str) -> RunError {
    match e {
        UpError::Xsk(e) => xsk_fatal(e, iface),
        UpError::Steer(e) => steer_fatal(e, iface),
        UpError::WorkersSlow => RunError::Failure(UpError::WorkersSlow.to_string()),
        UpError::Netns(e) => RunError::InterfaceMissing(format!("port on {iface}: {e}")),
    }
}

/// Frames longer than a chunk's room are dropped by the kernel (`rx_dropped`) unless
/// the sockets are multi-buffer: say so at start when the MTU allows such frames.
/// Some drivers receive less than the room in zero-copy (igb: 1 KiB units): say
/// that too, with the chunk size that fits.
fn warn_if_mtu_needs_multi_buffer(plan: &Plan, spaces: &Spaces) {
    if plan.umem.multi_buffer {
        return;
    }
    let room = single_buffer_room(plan.umem.chunk_size);
    for (i, p) in plan.ports.iter().enumerate() {
        let Ok(Ok(Some(mtu))) = spaces
            .of(i)
            .run(|| crate::device::link_mtu(&p.def.interface))
        else {
            continue;
        };
        // Ethernet header.
        let frame = mtu + 14;
        if frame > room {
            tracing::warn!(
                interface = %p.def.interface,
                mtu,
                "frames up to {frame} B can arrive but one {} B chunk holds {room} B: longer ones are dropped by the kernel \
                 (counted in rx_dropped); set multi_buffer = true for jumbo frames",
                plan.umem.chunk_size
            );
        } else if let Some((driver, limit)) =
            port_zero_copy_limit(p, room).filter(|&(_, limit)| frame > limit)
        {
            let bigger = single_buffer_room(4096);
            let fix = if plan.umem.chunk_size < 4096 {
                let whole = crate::device::zero_copy_rx_limit(&driver, bigger).unwrap_or(bigger);
                format!(
                    "set umem.chunk_size = 4096 (frames up to {whole} B) or an MTU of {} or less",
                    limit - 14
                )
            } else {
                format!("set an MTU of {} or less", limit - 14)
            };
            tracing::warn!(
                interface = %p.def.interface,
                mtu,
                driver = %driver,
                "in zero-copy {driver} receives frames up to {limit} B whole with {} B chunks (its RX buffer size is set in 1 KiB units): \
                 a longer frame arrives cut in two and is counted malformed; {fix}",
                plan.umem.chunk_size
            );
        }
    }
}

/// A port's driver and the longest frame it receives whole in zero-copy, where that
/// is less than `room` (`device::zero_copy_rx_limit`). `None` for a port in copy mode,
/// or in a namespace of its own: sysfs shows the devices of the namespace that
/// mounted it, so such a port is not looked up there.
fn port_zero_copy_limit(p: &crate::plan::PortPlan, room: u32) -> Option<(String, u32)> {
    if p.def.zero_copy == crate::config::ZeroCopy::Off || p.def.netns.is_some() {
        return None;
    }
    let driver = crate::device::driver_of(&p.def.interface)?;
    let limit = crate::device::zero_copy_rx_limit(&driver, room)?;
    Some((driver, limit))
}

/// The namespaces of the ports (each once) and which one each port is in.
struct Spaces {
    list: Vec<PortNetns>,
    of_port: Vec<usize>,
}

impl Spaces {
    fn of(&self, port: usize) -> &PortNetns {
        &self.list[self.of_port[port]]
    }
}

/// The devices, by port, each in its port's namespace: their ifindex, or a RunError
/// saying what to do.
fn find_devices(plan: &Plan, spaces: &Spaces) -> Result<Vec<u32>, RunError> {
    plan.ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let netns = p.def.netns.as_deref();
            spaces.of(i).run(|| crate::netns::ifindex(&p.def.interface)).map_err(|e| RunError::InterfaceMissing(e.to_string())).and_then(|r| r.map_err(|_| {
                RunError::InterfaceMissing(format!(
                        "interface `{}` (port `{}`) does not exist{}; bring the lab up (`xdpool lab up`), or fix the port's interface",
                        p.def.interface,
                        p.def.name,
                        netns.map(|n| format!(" in namespace {n}")).unwrap_or_default()
                    ),
                )
            }))
        })
        .collect()
}

/// The workers' specs from the plan.
fn worker_specs(
    plan: &Plan,
    cfg: &Config,
    opts: &RunOptions,
    slots: &[Arc<RuleSlot>],
) -> Vec<WorkerSpec> {
    plan.workers
        .iter()
        .map(|w| {
            let lanes = w
                .sockets
                .iter()
                .map(|&s| {
                    let sp = &plan.sockets[s];
                    LaneSpec {
                        socket: s,
                        port: sp.port,
                        queue_pos: sp.queue_pos,
                        rules: slots[s].clone(),
                        rings: PortRings {
                            fill: plan.umem.fill,
                            rx: plan.umem.rx,
                            copy_fill: plan.umem.copy_fill,
                        },
                    }
                })
                .collect();
            WorkerSpec::from_config(cfg, w.core, lanes, opts.hold_frames as usize)
        })
        .collect()
}

/// Every socket's shared state (one waker per worker) and the fabric between them.
fn build_fabric(plan: &Plan, neighbours: Arc<Neighbours>) -> Result<Arc<Fabric>, RunError> {
    let mut wakers = Vec::new();
    for _ in &plan.workers {
        wakers.push(Waker::new().map_err(|e| {
            RunError::Failure(format!(
                "cannot make a worker's eventfd: {e} (raise ulimit -n)"
            ))
        })?);
    }
    let sockets = plan
        .sockets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let p = &plan.ports[s.port].def;
            // A TX ring's worth of frames may wait for this socket.
            PortShared::new(
                i,
                &p.name,
                &p.interface,
                s.queue,
                plan.workers[s.worker].core,
                plan.umem.tx as usize,
                wakers[s.worker].clone(),
            )
        })
        .collect();
    Ok(Arc::new(Fabric {
        sockets,
        port_sockets: plan.ports.iter().map(|p| p.sockets.clone()).collect(),
        remotes: Remotes::new(plan.sockets.len()),
        neighbours,
        capture: Default::default(),
        file_capture: Default::default(),
        handler_failure: Default::default(),
        mailbox: Default::default(),
        stats_due: Default::default(),
    }))
}

/// `xdpool control HANDLER MESSAGE`: the message handed to every lane's state of
/// the handler (each worker takes it between batches; 2 s for all to answer).
fn handler_control(
    table: Arc<crate::config::HandlerTable>,
    fabric: Arc<Fabric>,
) -> crate::stats::control::HandlerControlFn {
    Arc::new(move |name, text| {
        let id = match table.id_of(name) {
            Ok(id) => id,
            Err(e) => return serde_json::json!({ "error": e }),
        };
        let lanes = fabric.sockets.len();
        // Workers asleep in poll() are woken to take it at once.
        let wake = || {
            for s in &fabric.sockets {
                s.waker.wake_if_sleeping();
            }
        };
        let d = fabric
            .mailbox
            .send(id, text, lanes, std::time::Duration::from_secs(2), wake);
        let refused: Vec<serde_json::Value> = d
            .answers
            .iter()
            .filter_map(|a| {
                let e = a.result.as_ref().err()?;
                Some(serde_json::json!({ "port": a.port, "queue": a.queue, "error": e }))
            })
            .collect();
        serde_json::json!({
            "ok": refused.is_empty() && d.answers.len() == lanes,
            "handler": name,
            "lanes": lanes,
            "answered": d.answers.len(),
            "refused": refused,
        })
    })
}

/// Starts every worker thread; on failure stops those started.
fn start_workers(
    specs: Vec<WorkerSpec>,
    region: &Arc<Region>,
    fabric: &Arc<Fabric>,
    stop: &Arc<AtomicBool>,
    body: Option<WorkerBody>,
) -> Result<Vec<JoinHandle<Vec<WorkerExit>>>, RunError> {
    let mut handles = Vec::new();
    for (i, spec) in specs.into_iter().enumerate() {
        let (region, fabric2, worker_stop) = (region.clone(), fabric.clone(), stop.clone());
        let body = body.clone();
        match std::thread::Builder::new()
            .name(format!("xdpool-w{i}"))
            .spawn(move || match body {
                Some(b) => (b.0)(region, spec, fabric2, worker_stop),
                None => worker::run(region, spec, fabric2, worker_stop),
            }) {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop_workers(stop, fabric);
                for h in handles {
                    let _ = h.join();
                }
                return Err(RunError::Failure(format!(
                    "cannot start a worker thread: {e}"
                )));
            }
        }
    }
    Ok(handles)
}

/// Tells every worker to stop and wakes those waiting in poll().
fn stop_workers(stop: &AtomicBool, fabric: &Fabric) {
    stop.store(true, Ordering::SeqCst);
    fabric.sockets.iter().for_each(|w| w.wake());
}

/// The MAC book at start (device MACs and neighbours, each port's in its
/// namespace), when a rule needs it.
fn read_macs(plan: &Plan, ifindexes: &[u32], spaces: &Spaces) -> MacBook {
    if !plan.ports.iter().any(|p| p.needs_macs()) {
        return MacBook::new(plan.ports.len());
    }
    let ifx: Vec<Option<u32>> = ifindexes.iter().map(|&i| Some(i)).collect();
    crate::neigh::read_book_in(&spaces.list, &spaces.of_port, &ifx).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot read device MACs and neighbours; forward with mac = neigh/fixed drops until they are known");
        MacBook::new(plan.ports.len())
    })
}

/// Everything a running instance holds.
struct Running {
    plan: Plan,
    region: Arc<Region>,
    fabric: Arc<Fabric>,
    lc: Lifecycle,
    handles: Vec<JoinHandle<Vec<WorkerExit>>>,
    stop: Arc<AtomicBool>,
    /// One link watcher per namespace (`lc.netns`, by index): each hears only its
    /// namespace's devices, whose ifindexes may collide with another's.
    watchers: Vec<LinkWatcher>,
    device: Arc<DeviceStats>,
    /// Each named namespace the ports live in, followed by name.
    netns: Vec<NetnsFollow>,
    /// The namespace went under `--no-reattach`: the run ends.
    netns_gone: bool,
    /// Each socket's rule list (hot reload publishes into them).
    slots: Vec<Arc<RuleSlot>>,
    /// The rules' `capture` files and their writer.
    files: Arc<crate::capture::file::FileCaptures>,
    /// The starting list's capture files, in config rule order.
    sinks: Vec<Option<Arc<crate::capture::file::FileSink>>>,
    /// What `/healthz` and `/readyz` read: the control loop beats it and keeps its
    /// readiness current.
    health: Arc<crate::stats::http::Health>,
}

/// A configured namespace under a run. A container restart deletes it and makes
/// a new one under the same name: the devices are then in the new one, and nothing
/// in the old one will come back. Checked every 100 ms by the inode of
/// `/run/netns/NAME` against the incarnation its ports work in (`lc.netns[group]`).
struct NetnsFollow {
    name: String,
    /// Index into `lc.netns` (and `watchers`).
    group: usize,
    /// The process's namespace (the first port's): the control thread re-enters it.
    home: bool,
    /// The name was seen gone (logged once until it comes back).
    gone_logged: bool,
    /// The ports were taken down in the old namespace, the new one not entered yet.
    left: bool,
}

/// What became of the configured namespace since the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetnsChange {
    /// Still the one we are in.
    Same,
    /// No namespace has the name any more (deleted; a new one may follow).
    Deleted,
    /// A namespace of the name exists and it is not ours: replaced.
    Replaced,
}

/// Compares what `/run/netns/NAME` names now (`named`) with the namespace we are in.
pub fn netns_change(
    named: Option<crate::netns::NetnsId>,
    inside: crate::netns::NetnsId,
) -> NetnsChange {
    match named {
        None => NetnsChange::Deleted,
        Some(id) if id == inside => NetnsChange::Same,
        Some(_) => NetnsChange::Replaced,
    }
}

/// Runs the processor until the duration passes or SIGINT/SIGTERM arrives, following
/// each port's device through losses and returns (or exiting on a loss with
/// `--no-reattach`).
pub fn run(cfg: &Config, opts: &RunOptions) -> Result<Summary, RunError> {
    crate::privilege::require_privileges("xdpool run")?;
    let web = match &cfg.stats.web_config {
        Some(path) => Some(
            crate::stats::web::Web::open(path)
                .map_err(|e| RunError::Usage(format!("stats.web_config: {e}")))?,
        ),
        None => None,
    };
    let access = crate::stats::control::Access::for_group(cfg.stats.control_group.as_deref())
        .map_err(RunError::Usage)?;
    // `xdpool doctor`'s checks, logged: run goes on and refuses below only what it
    // always refused (a missing device or namespace, zero-copy the driver lacks).
    crate::doctor::diagnose(cfg).log();
    // Every port's namespace, opened before the process moves: a port without one
    // lives where xdpool was started.
    let (names, of_port) = crate::plan::namespaces(&cfg.ports());
    let mut list = Vec::new();
    for name in &names {
        list.push(PortNetns::open(name.as_deref()).map_err(|e| {
            RunError::InterfaceMissing(format!("cannot open network namespace `{}`: {e}; create it (`xdpool lab up`) or fix the port's netns", name.as_deref().unwrap_or("")))
        })?);
    }
    let spaces = Spaces { list, of_port };
    // queues = "all": a socket planned for every RX queue the device can have.
    let mut cfg = cfg.clone();
    cfg.resolve_all_queues(|dev, ns| {
        let g = names.iter().position(|n| n.as_deref() == ns).unwrap_or(0);
        spaces.list[g]
            .run(|| crate::netns::rx_queues(dev).map(|q| q.max).unwrap_or(1))
            .unwrap_or(1)
    })
    .map_err(RunError::Usage)?;
    let cfg = &cfg;
    let frames = *cfg.umem.frames.get_ref();
    if cfg.frames_sized() && frames > 8192 {
        let sockets: usize = cfg.ports().iter().map(|p| p.queues.len()).sum();
        tracing::info!(
            frames,
            sockets,
            mib = (u64::from(frames) * u64::from(*cfg.umem.chunk_size.get_ref())) >> 20,
            "umem.frames left out: sized for every queue's fill and TX rings (set it to choose)"
        );
    }
    // The process (every thread made from now on) lives in the first port's namespace.
    let netns = cfg.netns();
    if let Some(ns) = &netns {
        crate::netns::enter_forever(Some(ns)).map_err(|e| {
            RunError::InterfaceMissing(format!("cannot enter network namespace `{ns}`: {e}; create it (`xdpool lab up`) or fix the port's netns"))
        })?;
    }
    let plan = plan(cfg, &crate::plan::machine_cores(cfg, &Topology::detect()));
    let ifindexes = find_devices(&plan, &spaces)?;
    warn_if_mtu_needs_multi_buffer(&plan, &spaces);
    let stop_signal: &'static AtomicBool = crate::signal::install_stop_flag().map_err(|e| {
        RunError::Failure(format!("cannot install the SIGINT/SIGTERM handler: {e}"))
    })?;
    // Subscribed before anything is attached, so no event of our devices is missed;
    // one watcher in each namespace.
    let mut watchers = Vec::new();
    for ns in &spaces.list {
        let w = ns
            .run(LinkWatcher::start)
            .map_err(|e| RunError::Failure(e.to_string()))?;
        watchers.push(w.map_err(|e| RunError::Failure(format!("{e} (in {})", ns.label())))?);
    }
    let mut rt = start(cfg, opts, plan, &ifindexes, watchers, spaces)?;
    tracing::info!(ports = ?rt.lc.ports.iter().map(|p| (&p.name, &p.iface, p.attached)).collect::<Vec<_>>(), "attached; workers running");
    let mut service = crate::service::Service::from_env();
    let started = Instant::now();
    let snapshot_fn = crate::summary::make_snapshot_fn(
        plan_iface(&rt.plan),
        rt.fabric.sockets.clone(),
        rt.lc
            .ports
            .iter()
            .map(|p| (p.name.clone(), p.steering.clone()))
            .collect(),
        rt.region.clone(),
        rt.device.clone(),
        started,
    );
    let live = Arc::new(crate::capture::live::LiveRules::at_start(
        &cfg.valid_rules(),
        &cfg.rule_names(),
    ));
    let reloader = crate::reload::Reloader::new(
        cfg.clone(),
        opts.config_path.clone(),
        rt.plan
            .ports
            .iter()
            .cloned()
            .zip(rt.lc.ports.iter().map(|p| p.steering.clone()))
            .collect(),
        rt.slots.clone(),
        rt.fabric.sockets.clone(),
        crate::reload::RuleTaps {
            live: live.clone(),
            files: rt.files.clone(),
            sinks: rt.sinks.clone(),
        },
    );
    let snapshot_fn = crate::reload::with_rules(snapshot_fn, reloader.clone());
    let health = rt.health.clone();
    let _servers = crate::stats::start_servers(
        cfg,
        &snapshot_fn,
        Some(crate::reload::control_handler(reloader.clone())),
        Some(handler_control(cfg.handlers.clone(), rt.fabric.clone())),
        &health,
        web.as_ref(),
        access,
    );
    let _sighup = crate::reload::follow_sighup(reloader);
    crate::capture::session::enable(&_servers, live, &rt.plan, &rt.fabric);
    let seen = control_loop(
        &mut rt,
        opts,
        stop_signal,
        &snapshot_fn,
        started,
        cfg.stats.live && !opts.quiet,
        &mut service,
    );
    service.stopping(if seen.device_gone {
        "a device went away: draining"
    } else {
        "stopping: draining and detaching"
    });
    finish(rt, opts, seen, started)
}

fn plan_iface(plan: &Plan) -> String {
    plan.ports
        .first()
        .map(|p| p.def.interface.clone())
        .unwrap_or_default()
}

/// Builds the UMEM, the workers and the programs, and brings every port up.
fn start(
    cfg: &Config,
    opts: &RunOptions,
    plan: Plan,
    ifindexes: &[u32],
    watchers: Vec<LinkWatcher>,
    spaces: Spaces,
) -> Result<Running, RunError> {
    let region = Region::new(RegionConfig {
        frames: plan.umem.frames,
        chunk_size: plan.umem.chunk_size,
        hugepages: plan.umem.hugepages,
        topology: crate::plan::umem_topology(cfg, &plan, Topology::detect()),
    })
    .map_err(|e| RunError::Failure(format!("cannot build the UMEM: {e}")))?;
    let mut steerings = Vec::new();
    for p in &plan.ports {
        let mut st = Steering::load().map_err(|e| steer_fatal(e, &p.def.interface))?;
        st.set_rules(&p.steer_rules())
            .map_err(|e| steer_fatal(e, &p.def.interface))?;
        // Multi-buffer sockets take frames longer than a buffer: the xdp.frags program.
        st.require_frags(plan.umem.multi_buffer);
        steerings.push(st);
    }
    let neighbours = Neighbours::new(read_macs(&plan, ifindexes, &spaces));
    let fabric = build_fabric(&plan, neighbours)?;
    let stop = Arc::new(AtomicBool::new(false));
    // The rules' capture files, created before any frame flows.
    let files = crate::capture::file::FileCaptures::start(
        fabric.file_capture.clone(),
        crate::capture::session::interfaces(&plan)
            .into_iter()
            .flat_map(|(_, i)| i)
            .collect(),
    );
    let sinks = files
        .prepare(&cfg.rule_captures())
        .map_err(RunError::Usage)?;
    files.settle(&sinks.iter().flatten().cloned().collect::<Vec<_>>());
    let valid = cfg.valid_rules();
    let port_sinks = |p: usize| {
        valid
            .iter()
            .zip(&sinks)
            .filter(|(r, _)| r.port == p)
            .map(|(_, s)| s.clone())
            .collect::<Vec<_>>()
    };
    // The workers' side of each port's rules, under the generation its program tags with.
    let slots: Vec<Arc<RuleSlot>> = plan
        .sockets
        .iter()
        .map(|sp| {
            RuleSlot::with_set(RuleSet::with_taps(
                steerings[sp.port].generation(),
                Classifier::new(plan.ports[sp.port].rules.clone()),
                Vec::new(),
                port_sinks(sp.port),
            ))
        })
        .collect();
    let handles = start_workers(
        worker_specs(&plan, cfg, opts, &slots),
        &region,
        &fabric,
        &stop,
        opts.worker.clone(),
    )?;
    let device = DeviceStats::new(ifindexes.first().copied().unwrap_or(0));
    let netns = spaces
        .list
        .iter()
        .enumerate()
        .filter_map(|(group, ns)| {
            ns.name().map(|name| NetnsFollow {
                name: name.to_string(),
                group,
                home: group == spaces.of_port[0],
                gone_logged: false,
                left: false,
            })
        })
        .collect();
    let mut lc = Lifecycle::new(
        &plan,
        region.clone(),
        fabric.sockets.clone(),
        steerings,
        opts.xdp_mode,
        device.clone(),
        spaces.list,
        &spaces.of_port,
    );
    if plan.ports.iter().any(|p| p.needs_macs()) {
        lc.follow_macs(fabric.neighbours.clone());
    }
    let mut rt = Running {
        plan,
        region,
        fabric,
        lc,
        handles,
        stop,
        watchers,
        device,
        netns,
        netns_gone: false,
        slots,
        files,
        sinks,
        health: crate::stats::http::Health::new(crate::stats::http::HEALTH_STALE_AFTER),
    };
    if let Err((p, e)) = rt.lc.start(ifindexes) {
        let iface = rt.plan.ports[p].def.interface.clone();
        rt.lc.bring_down_all();
        stop_workers(&rt.stop, &rt.fabric);
        for h in rt.handles.drain(..) {
            let _ = h.join();
        }
        return Err(up_fatal(e, &iface));
    }
    Ok(rt)
}

/// How often device MACs and neighbours are read again while nothing asks.
const MAC_REFRESH: Duration = Duration::from_secs(5);

/// Rates seen by the control loop.
#[derive(Default)]
struct Seen {
    first: Option<Instant>,
    last: Option<Instant>,
    peak_pps: f64,
    device_gone: bool,
    netns_gone: bool,
    /// A packet function panicked under `workers.handler_panic = "stop"`.
    handler_failure: Option<String>,
}

/// The control loop: link events as they come (at most 20 ms late), each program
/// checked every 100 ms, rates sampled every 100 ms, the live line every second.
fn control_loop(
    rt: &mut Running,
    opts: &RunOptions,
    stop_signal: &AtomicBool,
    snapshot_fn: &crate::stats::SnapshotFn,
    started: Instant,
    live: bool,
    service: &mut crate::service::Service,
) -> Seen {
    let mut seen = Seen::default();
    let (mut last_line, mut last_sample, mut last_prog_check) =
        (Instant::now(), Instant::now(), Instant::now());
    let (mut last_rx, mut sample_rx) = (0u64, 0u64);
    let mut recheck = Backoff::new();
    let needs_macs = rt.plan.ports.iter().any(|p| p.needs_macs());
    let mut macs_for: Vec<Option<u32>> = rt.lc.ports.iter().map(|p| p.attached).collect();
    let mut last_macs = Instant::now();
    let mut ready = Readiness::new(rt.health.clone());
    loop {
        service.tick();
        ready.health.beat();
        follow_devices(rt, opts, &mut recheck, &mut last_prog_check);
        ready.check(rt, opts, service);
        // Read MACs again when a worker missed one, when a device came back (its MAC
        // and its neighbours' may be new), and every few seconds (entries change).
        let attached: Vec<Option<u32>> = rt.lc.ports.iter().map(|p| p.attached).collect();
        let miss = rt.fabric.neighbours.take_miss();
        if needs_macs && (miss || attached != macs_for || last_macs.elapsed() >= MAC_REFRESH) {
            refresh_macs(rt);
            macs_for = attached;
            last_macs = Instant::now();
        }
        if rt.netns_gone {
            seen.device_gone = true;
            seen.netns_gone = true;
            break;
        }
        let failure = rt
            .fabric
            .handler_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(msg) = failure {
            tracing::error!("{msg}; stopping (workers.handler_panic = \"stop\")");
            seen.handler_failure = Some(msg);
            break;
        }
        if opts.no_reattach && rt.lc.ports.iter().any(|p| p.attached.is_none()) {
            seen.device_gone = true;
            tracing::error!("a device went away; exiting (--no-reattach)");
            break;
        }
        if last_sample.elapsed() >= crate::worker::STATS_EVERY {
            last_sample = Instant::now();
            // The workers read their sockets' kernel counters next (not by their own
            // clock: see `Fabric::stats_due`).
            rt.fabric.stats_due.fetch_add(1, Ordering::Relaxed);
            let rx: u64 = rt
                .fabric
                .sockets
                .iter()
                .map(|w| w.counters.rx_packets.load(Ordering::Relaxed))
                .sum();
            if rx != sample_rx {
                let now = Instant::now();
                seen.first.get_or_insert(now);
                seen.last = Some(now);
                sample_rx = rx;
            }
            if last_line.elapsed() >= Duration::from_secs(1) {
                let pps = rx.saturating_sub(last_rx) as f64 / last_line.elapsed().as_secs_f64();
                seen.peak_pps = seen.peak_pps.max(pps);
                last_line = Instant::now();
                last_rx = rx;
                if live {
                    eprintln!(
                        "{}",
                        live_line(&snapshot_fn(), started.elapsed().as_secs_f64(), pps)
                    );
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
    seen
}

/// How long a port may wait for its carrier before the wait is logged as a warning.
const CARRIER_WARN_AFTER: Duration = Duration::from_secs(5);

/// `ready` (the `--ready-line` line, systemd's READY=1, the log line) is said once,
/// when every port is attached, its program is on the device and its link has
/// carrier: only then can frames arrive (a driver such as igb resets its link when
/// the program is attached, and frames sent before it is back are lost).
struct Readiness {
    /// `/healthz` and `/readyz`: beaten each turn, and the same rule kept current
    /// after `ready` was said (every 500 ms).
    health: Arc<crate::stats::http::Health>,
    said: bool,
    since: Instant,
    logged: Option<(usize, &'static str)>,
    warned: bool,
    last_check: Option<Instant>,
}

impl Readiness {
    fn new(health: Arc<crate::stats::http::Health>) -> Readiness {
        Readiness {
            health,
            said: false,
            since: Instant::now(),
            logged: None,
            warned: false,
            last_check: None,
        }
    }

    /// Checks every 10 ms until ready; says what it waits for when that changes,
    /// and warns once when the wait passes CARRIER_WARN_AFTER (it keeps waiting).
    fn check(&mut self, rt: &Running, opts: &RunOptions, service: &mut crate::service::Service) {
        let every = Duration::from_millis(if self.said { 500 } else { 10 });
        if self.last_check.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last_check = Some(Instant::now());
        let waiting = (0..rt.lc.ports.len()).find_map(|p| rt.lc.waits_for(p).map(|w| (p, w)));
        self.health.set_ready(waiting.is_none());
        if self.said {
            return;
        }
        match waiting {
            None => {
                self.said = true;
                let ports = rt
                    .lc
                    .ports
                    .iter()
                    .map(|p| format!("{} ({} queues {:?})", p.name, p.iface, p.served))
                    .collect::<Vec<_>>()
                    .join(", ");
                tracing::info!(
                    waited_ms = self.since.elapsed().as_secs_f64() * 1e3,
                    "ready: every port attached with carrier up: {ports}"
                );
                if opts.ready_line {
                    println!("ready");
                    let _ = std::io::stdout().flush();
                }
                service.ready(&format!("ready: {ports}"));
            }
            Some((p, what)) => {
                let port = &rt.lc.ports[p];
                if self.logged != Some((p, what)) {
                    self.logged = Some((p, what));
                    tracing::info!(port = %port.name, interface = %port.iface, "not ready yet: waiting for {what}");
                    service.status(&format!("waiting for {what} on {}", port.iface));
                }
                if !self.warned && self.since.elapsed() >= CARRIER_WARN_AFTER {
                    self.warned = true;
                    tracing::warn!(port = %port.name, interface = %port.iface, waited_s = self.since.elapsed().as_secs(), "still waiting for {what}: frames cannot arrive until then; xdpool keeps waiting and says ready when it comes");
                }
            }
        }
    }
}

/// Reads device MACs and the neighbour table again.
fn refresh_macs(rt: &mut Running) {
    let ifx: Vec<Option<u32>> = rt.lc.ports.iter().map(|p| p.attached).collect();
    match rt.lc.read_macs(&ifx) {
        Ok(book) => rt.fabric.neighbours.update(book),
        Err(e) => tracing::warn!(error = %e, "cannot re-read the neighbour table"),
    }
}

/// Link events, socket errors, program checks and re-attach attempts, port by port.
fn follow_devices(
    rt: &mut Running,
    opts: &RunOptions,
    recheck: &mut Backoff,
    last_prog_check: &mut Instant,
) {
    // Each namespace's events go to its own ports only: an ifindex (and a name)
    // means a device within one namespace.
    let mut events: Vec<(usize, LinkEvent)> = Vec::new();
    for (g, w) in rt.watchers.iter().enumerate() {
        if g == 0 {
            events.extend(w.next(Duration::from_millis(20)).map(|ev| (g, ev)));
        }
        events.extend(w.drain().into_iter().map(|ev| (g, ev)));
    }
    for (g, ev) in &events {
        for p in 0..rt.lc.ports.len() {
            if rt.lc.ports[p].ns != *g {
                continue;
            }
            let decision = decide(
                ev,
                rt.lc.ports[p].attached,
                rt.lc.ports[p].lost,
                &rt.lc.ports[p].iface.clone(),
            );
            let confirmed = confirm(decision, || rt.lc.link_now(p, ev.ifindex));
            if confirmed != decision {
                tracing::info!(port = %rt.lc.ports[p].name, ifindex = ev.ifindex, "a `down` for the device read when it is up again (an event from before a re-attach, or a down and up since): not a loss");
            }
            match confirmed {
                Decision::Lost(kind) => {
                    rt.lc.lose(p, kind);
                    recheck.reset();
                }
                Decision::Reclassified(kind) => rt.lc.reclassify(p, kind),
                Decision::Appeared { ifindex } if !opts.no_reattach => {
                    rt.lc.attach_early(p, ifindex)
                }
                Decision::Returned { ifindex }
                    if !opts.no_reattach && !rt.lc.try_reattach(p, ifindex, Instant::now()) =>
                {
                    recheck.reset()
                }
                _ => {}
            }
        }
    }
    for p in 0..rt.lc.ports.len() {
        let gone = rt.lc.ports[p].attached.is_some()
            && rt.plan.ports[p]
                .sockets
                .iter()
                .any(|&s| rt.fabric.sockets[s].device_gone.load(Ordering::Relaxed));
        if gone {
            rt.lc.lose(p, LossKind::SocketError);
            recheck.reset();
        }
    }
    if last_prog_check.elapsed() >= Duration::from_millis(100) {
        *last_prog_check = Instant::now();
        if follow_netns(rt, opts) {
            recheck.reset();
        }
        check_programs(rt, opts, recheck);
        for p in 0..rt.lc.ports.len() {
            if let Some(now) = rt.lc.queues_changed(p) {
                if !rt.lc.follow_queue_count(p, now) {
                    recheck.reset();
                }
            }
        }
    }
    if !opts.no_reattach && rt.lc.ports.iter().any(|p| p.attached.is_none()) && recheck.due() {
        // Netlink events can be lost on overrun: look for the devices directly.
        for p in 0..rt.lc.ports.len() {
            if rt.lc.ports[p].attached.is_none() {
                if let Ok(Ok(Some(link))) = rt
                    .lc
                    .in_netns(p, || crate::device::find_link(&rt.lc.ports[p].iface))
                {
                    if link.up {
                        rt.lc.try_reattach(p, link.ifindex, Instant::now());
                    }
                }
            }
        }
    }
}

/// Each configured namespace replaced? Then its ports leave the old one (torn down
/// and reclaimed as for a loss; every port, when one of them holds the UMEM's first
/// socket), the namespace is opened again by name, its link watcher is started
/// there, and its ports come back when their devices appear in it (the usual
/// re-attach). Ports in other namespaces keep running. The process's namespace (the
/// first port's) is also re-entered by the control thread. Deleted without a new
/// one yet: said once, and we stay. Returns whether a namespace was left. With
/// `--no-reattach`, a deleted or replaced namespace ends the run
/// (RunError::NetnsReplaced).
fn follow_netns(rt: &mut Running, opts: &RunOptions) -> bool {
    let mut left = false;
    for i in 0..rt.netns.len() {
        left |= follow_one_netns(rt, opts, i);
    }
    left
}

fn follow_one_netns(rt: &mut Running, opts: &RunOptions, i: usize) -> bool {
    let ns = &mut rt.netns[i];
    let group = ns.group;
    let change = netns_change(crate::netns::named_id(&ns.name), rt.lc.netns[group].id());
    match change {
        NetnsChange::Same => {
            ns.gone_logged = false;
            return false;
        }
        NetnsChange::Deleted if opts.no_reattach => {}
        NetnsChange::Deleted => {
            if !ns.gone_logged {
                ns.gone_logged = true;
                tracing::warn!(netns = %ns.name, "network namespace `{}` was deleted (/run/netns/{} is gone) while ports of xdpool live in it; waiting for a namespace of that name to be made again, then following it", ns.name, ns.name);
            }
            return false;
        }
        NetnsChange::Replaced => {}
    }
    let (name, home) = (ns.name.clone(), ns.home);
    let was_left = std::mem::replace(&mut ns.left, true);
    let ports: Vec<usize> = (0..rt.lc.ports.len())
        .filter(|&p| rt.lc.ports[p].ns == group)
        .collect();
    if opts.no_reattach {
        tracing::error!(netns = %name, ?change, "network namespace `{name}` was {}; exiting (--no-reattach)", if change == NetnsChange::Deleted { "deleted" } else { "replaced by a new one of that name" });
        rt.lc.device.lost(LossKind::NetnsReplaced);
        rt.lc.bring_down_all();
        rt.netns_gone = true;
        return true;
    }
    if !was_left {
        tracing::warn!(netns = %name, ports = ?ports.iter().map(|&p| &rt.lc.ports[p].name).collect::<Vec<_>>(), "network namespace `{name}` was replaced by a new one of that name (a container restart?): its ports leave the old one, with its devices, and follow");
        // Down in the old namespace first (the port's handle still names it).
        if ports.iter().any(|&p| rt.lc.ports[p].attached.is_some()) {
            rt.lc.device.lost(LossKind::NetnsReplaced);
        }
        rt.lc.bring_down_ports(&ports);
        // Nothing in the old namespace is ours any more (no loss there to reclassify).
        ports.iter().for_each(|&p| rt.lc.ports[p].lost = None);
    }
    if let Err(e) = rt.lc.netns[group].reopen() {
        tracing::error!(netns = %name, error = %e, "cannot open the new namespace `{name}`; trying again every 100 ms");
        return true;
    }
    if home {
        if let Err(e) = crate::netns::reenter(&name) {
            tracing::warn!(netns = %name, error = %e, "the control thread cannot enter the new namespace `{name}`; its ports' steps still run there");
        }
    }
    rt.netns[i].left = false;
    match rt.lc.netns[group].run(LinkWatcher::start) {
        Ok(Ok(w)) => rt.watchers[group] = w,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot watch link events in the new namespace; devices are looked for every 200 ms")
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot enter the new namespace to watch its links; devices are looked for every 200 ms")
        }
    }
    tracing::info!(netns = %name, "following the new namespace `{name}`; waiting for the devices there");
    true
}

/// Each attached port's program still on its device? Re-attach it if not.
fn check_programs(rt: &mut Running, opts: &RunOptions, recheck: &mut Backoff) {
    for p in 0..rt.lc.ports.len() {
        let Some(ifx) = rt.lc.ports[p].attached else {
            continue;
        };
        match rt.lc.program_present(p, ifx) {
            Some(true) => {}
            Some(false) => {
                tracing::warn!(port = %rt.lc.ports[p].name, ifindex = ifx, "our XDP program is no longer on the device (detached from outside)");
                rt.lc.device.lost(LossKind::ProgramDetached);
                if opts.no_reattach {
                    rt.lc.bring_down(p);
                } else {
                    rt.lc.reattach_program(p, ifx);
                }
            }
            None => {
                rt.lc.lose(p, LossKind::Deleted);
                recheck.reset();
            }
        }
    }
}

/// Teardown (detach first, then drain, reclaim, close), workers joined, summary.
fn finish(
    mut rt: Running,
    opts: &RunOptions,
    seen: Seen,
    started: Instant,
) -> Result<Summary, RunError> {
    let duration_s = started.elapsed().as_secs_f64();
    let rt_netns = Some(
        rt.netns
            .iter()
            .map(|n| n.name.clone())
            .collect::<Vec<_>>()
            .join(", "),
    )
    .filter(|n| !n.is_empty());
    rt.lc.bring_down_all();
    let xdp = crate::summary::sum_xdp(
        (0..rt.lc.ports.len()).map(|p| rt.lc.steering(p).counters().unwrap_or_default()),
    );
    stop_workers(&rt.stop, &rt.fabric);
    let mut exits = Vec::new();
    for h in rt.handles.drain(..) {
        match h.join() {
            Ok(e) => exits.extend(e),
            Err(_) => {
                return Err(RunError::Failure(
                    "a worker thread panicked; see the message above".into(),
                ))
            }
        }
    }
    // Every copy the workers made is written; each capture file flushed and closed.
    rt.files.finish();
    let program_left_attached = (0..rt.lc.ports.len()).any(|i| {
        let p = &rt.lc.ports[i];
        rt.lc
            .in_netns(i, || match crate::device::find_link(&p.iface) {
                Ok(Some(link)) => matches!(crate::steer::xdp_program_on(link.ifindex), Ok(Some(_))),
                _ => {
                    p.last_ifindex != 0
                        && matches!(crate::steer::xdp_program_on(p.last_ifindex), Ok(Some(_)))
                }
            })
            .unwrap_or(false)
    });
    let summary = crate::summary::build(crate::summary::Parts {
        plan: &rt.plan,
        exits,
        xdp,
        region: &rt.region,
        device: rt.device.report(),
        duration_s,
        first_seen: seen.first,
        last_seen: seen.last,
        peak_pps: seen.peak_pps,
        program_left_attached,
    });
    drop(rt);
    if let Some(path) = &opts.summary_json {
        let text = serde_json::to_string_pretty(&summary).expect("summary serializes");
        std::fs::write(path, text)
            .map_err(|e| RunError::Failure(format!("cannot write {}: {e}", path.display())))?;
    }
    if seen.netns_gone {
        return Err(RunError::NetnsReplaced(format!(
                "network namespace `{}` was deleted or replaced under the run and --no-reattach was given; frames were reclaimed (accounting {}). Run without --no-reattach to follow the namespace into its new incarnation\n{}",
                cfg_netns_name(&rt_netns),
                if summary.accounting_ok { "ok" } else { "MISMATCH" },
                summary_text(&summary)
            ),
        ));
    }
    if let Some(msg) = &seen.handler_failure {
        return Err(RunError::HandlerPanicked(format!(
                "{msg}; the run stopped (workers.handler_panic = \"stop\"), every port detached, frames reclaimed (accounting {}). Fix the handler, or set workers.handler_panic = \"drop\" to drop such frames and go on\n{}",
                if summary.accounting_ok { "ok" } else { "MISMATCH" },
                summary_text(&summary)
            )));
    }
    if seen.device_gone && opts.no_reattach {
        return Err(RunError::DeviceGone(format!(
                "{}: a device went away and --no-reattach was given; frames were reclaimed (accounting {}). Run without --no-reattach to wait for it to return\n{}",
                summary.interface,
                if summary.accounting_ok { "ok" } else { "MISMATCH" },
                summary_text(&summary)
            ),
        ));
    }
    Ok(summary)
}

fn cfg_netns_name(n: &Option<String>) -> &str {
    n.as_deref().unwrap_or("")
}

/// Sums what every socket counted.
pub fn total_counters(exits: &[WorkerExit]) -> WorkerCountersSnapshot {
    let mut c = WorkerCountersSnapshot::default();
    for e in exits {
        c += e.counters;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_followed_by_its_inode() {
        assert_eq!(netns_change(Some((4, 100)), (4, 100)), NetnsChange::Same);
        assert_eq!(netns_change(None, (4, 100)), NetnsChange::Deleted);
        assert_eq!(
            netns_change(Some((4, 101)), (4, 100)),
            NetnsChange::Replaced
        );
    }

    /// `[rings]` reaches every lane's port: the sizes and `copy_fill`.
    #[test]
    fn every_lane_gets_the_configured_rings() {
        use crate::config::CopyFill;
        let cfg = Config::parse(
            "[interface]\nname = \"xdpb0\"\nqueues = [0, 1]\n[rings]\nfill = 1024\nrx = 512\ncopy_fill = \"rx\"\n[[rule]]\naction = \"drop\"\n",
        )
        .unwrap();
        let plan = crate::plan::plan(&cfg, &[]);
        let slots: Vec<_> = plan
            .sockets
            .iter()
            .map(|_| RuleSlot::new(0, Classifier::new(Vec::new())))
            .collect();
        let specs = worker_specs(&plan, &cfg, &RunOptions::default(), &slots);
        let lanes: Vec<_> = specs.iter().flat_map(|w| &w.lanes).collect();
        assert_eq!(lanes.len(), 2);
        for l in lanes {
            assert_eq!(
                (l.rings.fill, l.rings.rx, l.rings.copy_fill),
                (1024, 512, CopyFill::Rx)
            );
        }
    }
}
