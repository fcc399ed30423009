//! Running the sweep: lab up, then per size, repetition and subject one bounded
//! generator run and a count at the subject; lab down at the end, on error and after
//! Ctrl-C (the lab is a [`LabGuard`], each `xdpool run` child a `RunChild` that
//! stops it by PID when dropped).
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::report::{self, NapiMode, Placement, Sample, Subject, SweepReport};
use super::BenchError;
use crate::config::WaitMode;
use crate::gen::count::RxCounter;
use crate::gen::{self, GenConfig, GenReport};
use crate::lab::{LabConfig, LabGuard, LabStatus};

/// UDP port the generator sends to and the child's rule matches.
pub(super) const PORT: u16 = 9;
/// Counts are read once they stop moving for this long...
const SETTLE_QUIET: Duration = Duration::from_millis(100);
/// ...or after this long at most.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);
/// How long `xdpool run` may take to attach.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long `xdpool run` may take to drain and exit after SIGINT.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

/// What to sweep and where.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    /// Lab prefix (namespaces `PREFIX-a`, `PREFIX-b`); the lab is built and removed.
    pub prefix: String,
    /// Frame sizes without FCS, 60..=1514.
    pub sizes: Vec<usize>,
    /// Repetitions per size and subject.
    pub reps: u32,
    /// Frames per generator run.
    pub count: u64,
    /// Time limit of one generator run.
    pub time_limit: Duration,
    /// Generator core.
    pub gen_core: usize,
    /// xdpool worker core.
    pub worker_core: usize,
    /// NAPI mode of the veth pair.
    pub napi: NapiMode,
    /// Threaded NAPI: pin the receiving NAPI threads to this core.
    pub napi_core: Option<usize>,
    /// Worker wait mode.
    pub worker_mode: WaitMode,
    /// Live-frames batch size.
    pub batch: u32,
    /// The `xdpool` binary that runs rxdrop and l2fwd.
    pub xdpool_exe: PathBuf,
}

impl SweepConfig {
    /// The default sweep (64..1500 B, 3 repetitions of 2 M frames, generator on core
    /// 0, worker on core 1, softirq NAPI) with lab prefix `xdptput`.
    pub fn new(xdpool_exe: PathBuf) -> Self {
        Self {
            prefix: "xdptput".into(),
            sizes: vec![64, 128, 256, 512, 1024, 1500],
            reps: 3,
            count: 2_000_000,
            time_limit: Duration::from_secs(10),
            gen_core: 0,
            worker_core: 1,
            napi: NapiMode::Softirq,
            napi_core: None,
            worker_mode: WaitMode::Poll,
            batch: 64,
            xdpool_exe,
        }
    }

    /// Checks what can be checked before touching the system.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.sizes.is_empty() {
            return bad("no sizes: give --sizes, e.g. 64,1500".into());
        }
        if let Some(s) = self.sizes.iter().find(|s| !(60..=1514).contains(*s)) {
            return bad(format!("size {s} is outside 60..=1514 (frame without FCS, MTU 1500): pick sizes in that range"));
        }
        if self.reps == 0 {
            return bad("--reps 0 measures nothing: give 1 or more".into());
        }
        if self.count == 0 {
            return bad("--count 0 sends nothing: give a positive frame count".into());
        }
        if self.time_limit.is_zero() {
            return bad("a time limit of 0 s sends nothing: give a positive --time-limit".into());
        }
        let online = crate::config::online_cpus();
        for (what, core) in [
            ("--gen-core", Some(self.gen_core)),
            ("--worker-core", Some(self.worker_core)),
            ("--napi-core", self.napi_core),
        ] {
            if let Some(core) = core.filter(|c| !online.contains(c)) {
                return bad(format!(
                    "{what} {core} is not an online CPU (online: {online:?})"
                ));
            }
        }
        if self.napi_core.is_some() && self.napi != NapiMode::Threaded {
            return bad(
                "--napi-core needs --napi threaded (softirq NAPI runs on the core that sends)"
                    .into(),
            );
        }
        if !self.xdpool_exe.exists() {
            return bad(format!(
                "xdpool binary {} not found: build it with `make build`",
                self.xdpool_exe.display()
            ));
        }
        Ok(())
    }

    fn placement(&self) -> Placement {
        let napi_core = match (self.napi, self.napi_core) {
            (NapiMode::Softirq, _) => format!(
                "on the sending core: veth schedules the receiver's NAPI where frames are transmitted, \
                 core {} for generated frames, core {} for l2fwd frames coming back",
                self.gen_core, self.worker_core
            ),
            (NapiMode::Threaded, Some(c)) => format!("napi/<dev> kernel threads pinned to core {c}"),
            (NapiMode::Threaded, None) => "napi/<dev> kernel threads, not pinned (the scheduler's choice)".into(),
        };
        Placement {
            generator_core: self.gen_core,
            generator_engine: format!("BPF_PROG_RUN live frames, batch {}, 1 thread", self.batch),
            napi_mode: self.napi,
            napi_core,
            worker_core: self.worker_core,
            worker_mode: wait_mode_name(self.worker_mode).into(),
        }
    }

    /// Measurements the sweep makes in all.
    pub fn total_measurements(&self) -> usize {
        self.sizes.len() * self.reps as usize * Subject::ALL.len()
    }
}

pub(super) fn wait_mode_name(m: WaitMode) -> &'static str {
    match m {
        WaitMode::Spin => "spin",
        WaitMode::Poll => "poll",
        WaitMode::BusyPoll => "busy-poll",
    }
}

/// Where the sweep is, for a progress display.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Frame size being measured.
    pub size: usize,
    /// Its position in the sweep, from 1.
    pub size_index: usize,
    /// Sizes in all.
    pub sizes: usize,
    /// Repetition, from 1.
    pub rep: u32,
    /// Repetitions in all.
    pub reps: u32,
    /// Subject being measured.
    pub subject: Subject,
    /// Measurements finished.
    pub done: usize,
    /// Measurements in all.
    pub total: usize,
    /// Time since the sweep began.
    pub elapsed: Duration,
    /// Estimated time left (after the first measurement).
    pub eta: Option<Duration>,
}

impl Progress {
    /// `size 64 B (1/6), rep 2/3, rxdrop: 4/54 done, 0:12 elapsed, ETA 2:30`
    pub fn line(&self) -> String {
        let mmss = |d: Duration| format!("{}:{:02}", d.as_secs() / 60, d.as_secs() % 60);
        format!(
            "size {} B ({}/{}), rep {}/{}, {}: {}/{} done, {} elapsed, ETA {}",
            self.size,
            self.size_index,
            self.sizes,
            self.rep,
            self.reps,
            self.subject.name(),
            self.done,
            self.total,
            mmss(self.elapsed),
            self.eta.map_or_else(|| "?".to_string(), mmss)
        )
    }
}

/// Estimated time left: the mean time per finished measurement times those left.
pub fn eta(elapsed: Duration, done: usize, total: usize) -> Option<Duration> {
    (done > 0).then(|| elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

/// The sweep's private directory for configs, summaries, logs and the child's control
/// socket: an unpredictable name under the temp dir (so nobody can plant a file or
/// symlink there first), mode 0700, removed on drop. `run_sweep` holds it until its
/// end, so it goes on errors and after Ctrl-C too (the stop flag ends the sweep
/// normally); only a SIGKILL leaves it behind.
pub(super) struct WorkDir(Option<tempfile::TempDir>);

impl WorkDir {
    pub(super) fn new() -> Result<Self, BenchError> {
        use std::os::unix::fs::PermissionsExt;
        let parent = std::env::temp_dir();
        let dir = tempfile::Builder::new()
            .prefix("xdpool-tput-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&parent)
            .map_err(|source| BenchError::Io {
                path: parent,
                source,
            })?;
        Ok(Self(Some(dir)))
    }

    pub(super) fn path(&self) -> &Path {
        self.0.as_ref().expect("the dir lives until drop").path()
    }

    /// Leaves the directory in place (a failed child's log and config are in it, and
    /// the error names them).
    pub(super) fn keep(&mut self) {
        if let Some(dir) = self.0.take() {
            let path = dir.keep();
            tracing::info!(dir = %path.display(), "kept the sweep's temp dir for the failed run's log");
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let Some(dir) = self.0.take() else { return };
        let path = dir.path().to_path_buf();
        if let Err(e) = dir.close() {
            tracing::warn!(dir = %path.display(), error = %e, "could not remove the sweep's temp dir");
        }
    }
}

/// The config of the `xdpool run` child: the lab's receiving veth, one queue, one
/// worker on `worker_core`, UDP to port 9 (`PORT`) steered with `action`.
pub fn child_config(
    lab: &LabStatus,
    worker_core: usize,
    mode: WaitMode,
    action: Subject,
    control: &Path,
) -> String {
    let on = ChildDevice {
        dev: &lab.b.dev,
        netns: Some(&lab.b.netns),
        zero_copy: "false",
        queues: "[0]".into(),
        frames: 8192,
    };
    child_config_on(&on, Some(worker_core), mode, action, control)
}

/// The device an `xdpool run` child serves: name, namespace, and the TOML values of
/// `zero_copy` and `queues`.
pub struct ChildDevice<'a> {
    /// Interface.
    pub dev: &'a str,
    /// Its namespace (`None`: the caller's).
    pub netns: Option<&'a str>,
    /// `zero_copy` as TOML (`false`, `"auto"`).
    pub zero_copy: &'a str,
    /// `queues` as TOML (`[0]`, `[0, 1]`).
    pub queues: String,
    /// UMEM frames.
    pub frames: usize,
}

/// The config of an `xdpool run` child on `on`: one worker on `worker_core` (`None`:
/// `workers.cores` empty, xdpool's choice), UDP to port 9 (`PORT`) steered with `action`.
pub fn child_config_on(
    on: &ChildDevice,
    worker_core: Option<usize>,
    mode: WaitMode,
    action: Subject,
    control: &Path,
) -> String {
    let action = match action {
        Subject::L2fwd => "l2fwd",
        _ => "drop",
    };
    let netns = on
        .netns
        .map(|ns| format!("netns = \"{ns}\"\n"))
        .unwrap_or_default();
    format!(
        "# written by `xdpool bench throughput`\n\
         [interface]\nname = \"{dev}\"\n{netns}xdp_mode = \"native\"\nzero_copy = {zc}\nqueues = {queues}\n\n\
         [umem]\nframes = {frames}\nchunk_size = 2048\nhugepages = false\n\n\
         [rings]\nfill = 4096\ncompletion = 2048\nrx = 2048\ntx = 2048\n\n\
         [workers]\ncores = [{cores}]\nmode = \"{mode}\"\nbatch = 64\n\n\
         [[rule]]\nproto = \"udp\"\ndst_port = {PORT}\naction = \"{action}\"\n\n\
         [stats]\ncontrol_socket = \"{control}\"\nlive = false\n",
        dev = on.dev,
        zc = on.zero_copy,
        queues = on.queues,
        frames = on.frames,
        cores = worker_core.map(|c| c.to_string()).unwrap_or_default(),
        mode = wait_mode_name(mode),
        control = control.display(),
    )
}

/// An `xdpool run` child process; stopped by PID (SIGINT, then SIGKILL) when dropped.
pub(super) struct RunChild {
    child: Child,
    what: String,
    config: PathBuf,
    log: PathBuf,
}

impl RunChild {
    /// Starts `xdpool run` and waits for its `ready` line.
    pub(super) fn start(
        exe: &Path,
        config: &Path,
        summary: &Path,
        log: &Path,
        run_for: Duration,
        what: &str,
    ) -> Result<Self, BenchError> {
        let child_err = |detail: String| BenchError::Child {
            what: what.to_string(),
            detail,
            config: config.to_path_buf(),
            log: log.to_path_buf(),
        };
        let log_file = std::fs::File::create(log).map_err(|source| BenchError::Io {
            path: log.to_path_buf(),
            source,
        })?;
        let mut child = Command::new(exe)
            .args([
                "--log",
                "warn",
                "run",
                "--quiet",
                "--ready-line",
                "--duration",
            ])
            .arg(format!("{:.1}", run_for.as_secs_f64()))
            .arg("--config")
            .arg(config)
            .arg("--summary-json")
            .arg(summary)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| child_err(format!("cannot start {}: {e}", exe.display())))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut me = RunChild {
            child,
            what: what.to_string(),
            config: config.to_path_buf(),
            log: log.to_path_buf(),
        };
        // The read blocks; a thread lets us give up after READY_TIMEOUT (the child then
        // gets stopped, its stdout closes and the thread ends).
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let ok = reader.read_line(&mut line).is_ok() && line.trim() == "ready";
            let _ = tx.send(ok);
            // Keep reading so the child never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(true) => Ok(me),
            Ok(false) => {
                let status = me.stop();
                Err(child_err(format!(
                    "it exited before attaching ({status}): {}",
                    log_tail(log)
                )))
            }
            Err(_) => {
                let status = me.stop();
                Err(child_err(format!(
                    "not attached after {READY_TIMEOUT:?} ({status}): {}",
                    log_tail(log)
                )))
            }
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Asks the child to stop (SIGINT: it drains, detaches and writes its summary) and
    /// waits; SIGKILL after [`EXIT_TIMEOUT`]. Returns how it ended, in words.
    fn stop(&mut self) -> String {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status.to_string();
        }
        let _ = kill(self.pid(), Signal::SIGINT);
        let deadline = Instant::now() + EXIT_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.to_string();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!(pid = self.child.id(), what = %self.what, "xdpool run did not exit after SIGINT; killing it");
        let _ = self.child.kill();
        self.child
            .wait()
            .map(|s| format!("killed after {EXIT_TIMEOUT:?}: {s}"))
            .unwrap_or_else(|e| e.to_string())
    }

    /// Stops the child and checks it ended well.
    pub(super) fn finish(mut self) -> Result<(), BenchError> {
        let status = self.stop();
        match self.child.try_wait() {
            Ok(Some(s)) if s.success() => Ok(()),
            _ => Err(BenchError::Child {
                what: self.what.clone(),
                detail: format!("it ended with {status}: {}", log_tail(&self.log)),
                config: self.config.clone(),
                log: self.log.clone(),
            }),
        }
    }
}

impl Drop for RunChild {
    fn drop(&mut self) {
        self.stop();
    }
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        "(no log output)".into()
    } else {
        tail
    }
}

/// Polls `read` until it stops changing for [`SETTLE_QUIET`] (or [`SETTLE_LIMIT`]).
pub(super) fn settle(mut read: impl FnMut() -> Result<u64, BenchError>) -> Result<u64, BenchError> {
    let start = Instant::now();
    let mut last = read()?;
    let mut stable_since = Instant::now();
    while start.elapsed() < SETTLE_LIMIT {
        std::thread::sleep(SETTLE_QUIET / 4);
        let now = read()?;
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if stable_since.elapsed() >= SETTLE_QUIET {
            break;
        }
    }
    Ok(last)
}

struct Bench<'a> {
    cfg: &'a SweepConfig,
    lab: LabStatus,
    dir: PathBuf,
    back: RxCounter,
}

impl Bench<'_> {
    fn gen_config(&self, size: usize) -> GenConfig {
        GenConfig {
            count: Some(self.cfg.count),
            duration: Some(self.cfg.time_limit),
            size,
            src_ports: gen::packet::PortRange::single(PORT),
            dst_ports: gen::packet::PortRange::single(PORT),
            cores: vec![self.cfg.gen_core],
            batch: self.cfg.batch,
            ..GenConfig::for_lab(&self.lab)
        }
    }

    fn pin_napi(&self) {
        if let (NapiMode::Threaded, Some(core)) = (self.cfg.napi, self.cfg.napi_core) {
            for dev in [&self.lab.a.dev, &self.lab.b.dev] {
                crate::lab::pin_napi_threads(dev, core);
            }
        }
    }

    fn sample(
        &self,
        subject: Subject,
        size: usize,
        rep: u32,
        sent: &GenReport,
        received: u64,
        acc: Option<bool>,
    ) -> Sample {
        let secs = sent.elapsed.as_secs_f64();
        let rate = |n: u64| {
            if secs > 0.0 {
                n as f64 / secs / 1e6
            } else {
                0.0
            }
        };
        Sample {
            subject,
            size,
            rep,
            sent: sent.sent,
            received,
            gen_elapsed_s: secs,
            gen_mpps: rate(sent.sent),
            mpps: rate(received),
            accounting_ok: acc,
        }
    }

    fn measure_ceiling(&self, size: usize, rep: u32) -> Result<Sample, BenchError> {
        // The counter drops every frame in XDP like `steer::Ceiling`, and counts UDP
        // apart from the lab's own IPv6 chatter, so received == sent exactly.
        let ceiling = RxCounter::attach_in(Some(&self.lab.b.netns), &self.lab.b.dev)?;
        self.pin_napi();
        let before = ceiling.packets()?;
        let sent = gen::run(&self.gen_config(size))?;
        let after = settle(|| Ok(ceiling.packets()?))?;
        drop(ceiling);
        Ok(self.sample(Subject::Ceiling, size, rep, &sent, after - before, None))
    }

    fn measure_xdpool(
        &self,
        subject: Subject,
        size: usize,
        rep: u32,
    ) -> Result<Sample, BenchError> {
        let name = subject.name();
        let config = self.dir.join(format!("{name}.toml"));
        let summary = self.dir.join(format!("{name}-summary.json"));
        let log = self.dir.join(format!("{name}-{size}-{rep}.log"));
        let text = child_config(
            &self.lab,
            self.cfg.worker_core,
            self.cfg.worker_mode,
            subject,
            &self.dir.join("control.sock"),
        );
        std::fs::write(&config, text).map_err(|source| BenchError::Io {
            path: config.clone(),
            source,
        })?;
        let _ = std::fs::remove_file(&summary);
        let what = format!("{name} at {size} B");
        let run_for = self.cfg.time_limit + Duration::from_secs(30);
        let child = RunChild::start(
            &self.cfg.xdpool_exe,
            &config,
            &summary,
            &log,
            run_for,
            &what,
        )?;
        self.pin_napi();
        let back_before = self.back.packets()?;
        let sent = gen::run(&self.gen_config(size))?;
        // l2fwd: let the frames still in rings come back before stopping the worker.
        let back_after = settle(|| Ok(self.back.packets()?))?;
        child.finish()?;
        let child_err = |detail: String| BenchError::Child {
            what: what.clone(),
            detail,
            config: config.clone(),
            log: log.clone(),
        };
        let text = std::fs::read_to_string(&summary)
            .map_err(|e| child_err(format!("no summary at {}: {e}", summary.display())))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| child_err(format!("bad summary JSON: {e}")))?;
        let accounting_ok = json["accounting_ok"].as_bool();
        if accounting_ok != Some(true) {
            tracing::warn!(%what, "xdpool run reported a frame accounting mismatch");
        }
        let received = match subject {
            Subject::L2fwd => back_after - back_before,
            _ => json["packets"]
                .as_u64()
                .ok_or_else(|| child_err("summary has no `packets`".into()))?,
        };
        let _ = std::fs::remove_file(&log);
        Ok(self.sample(subject, size, rep, &sent, received, accounting_ok))
    }
}

/// The running kernel's release (`uname -r`), or "unknown".
pub(crate) fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the sweep (see the module docs). `stop` is checked between measurements
/// (see [`super::signal::install_stop_flag`]); when it is set the sweep ends early
/// and the report says `interrupted`. The lab is removed before this returns,
/// whatever happened.
pub fn run_sweep(
    cfg: &SweepConfig,
    stop: &AtomicBool,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<SweepReport, BenchError> {
    cfg.validate()?;
    let mut workdir = WorkDir::new()?;
    let lab_cfg = LabConfig {
        queues: Some(1),
        gro: true,
        threaded_napi: cfg.napi == NapiMode::Threaded,
        ..LabConfig::with_prefix(cfg.prefix.clone())
    };
    let lab = LabGuard::up(&lab_cfg)?;
    if lab.status().already_up {
        tracing::warn!(prefix = %cfg.prefix, "a lab with this prefix already existed; the sweep uses it and removes it at the end");
    }
    let st = lab.status().clone();
    let back = RxCounter::attach_in(Some(&st.a.netns), &st.a.dev)?;
    let bench = Bench {
        cfg,
        lab: st,
        dir: workdir.path().to_path_buf(),
        back,
    };
    let started = Instant::now();
    let total = cfg.total_measurements();
    let mut samples = Vec::with_capacity(total);
    let mut interrupted = false;
    'sweep: for (i, &size) in cfg.sizes.iter().enumerate() {
        for rep in 1..=cfg.reps {
            for subject in Subject::ALL {
                if stop.load(Ordering::SeqCst) {
                    interrupted = true;
                    break 'sweep;
                }
                let done = samples.len();
                on_progress(&Progress {
                    size,
                    size_index: i + 1,
                    sizes: cfg.sizes.len(),
                    rep,
                    reps: cfg.reps,
                    subject,
                    done,
                    total,
                    elapsed: started.elapsed(),
                    eta: eta(started.elapsed(), done, total),
                });
                let measured = match subject {
                    Subject::Ceiling => bench.measure_ceiling(size, rep),
                    _ => bench.measure_xdpool(subject, size, rep),
                };
                let sample = match measured {
                    Ok(s) => s,
                    Err(e) => {
                        if matches!(e, BenchError::Child { .. }) {
                            workdir.keep();
                        }
                        return Err(e);
                    }
                };
                tracing::debug!(?sample, "measured");
                // A Ctrl-C during the run also stopped the child early: discard it.
                if stop.load(Ordering::SeqCst) {
                    interrupted = true;
                    break 'sweep;
                }
                samples.push(sample);
            }
        }
    }
    drop(bench);
    drop(lab);
    Ok(SweepReport {
        kernel: kernel_release(),
        frames_per_run: cfg.count,
        reps: cfg.reps,
        time_limit_s: cfg.time_limit.as_secs_f64(),
        size_note: report::SIZE_NOTE.into(),
        gbps_note: report::GBPS_NOTE.into(),
        placement: cfg.placement(),
        rows: report::build_rows(&samples),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Action, Config};

    fn lab() -> LabStatus {
        let g = GenConfig::default_lab();
        let side = |ns: &str, dev: &str| crate::lab::LabSide {
            netns: ns.into(),
            dev: dev.into(),
            ifindex: 2,
            mac: g.src_mac,
            ipv4: g.ipv4.0,
            ipv6: g.ipv6_addrs.0,
            rx_queues: 1,
            tx_queues: 1,
        };
        LabStatus {
            already_up: false,
            a: side("xdptput-a", "xdptputa0"),
            b: side("xdptput-b", "xdptputb0"),
        }
    }

    #[test]
    fn work_dir_is_private_unpredictable_and_removed_with_its_contents() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (WorkDir::new().unwrap(), WorkDir::new().unwrap());
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("xdpool-tput-")
                && name != format!("xdpool-tput-{}", std::process::id()),
            "{name}"
        );
        assert_eq!(
            std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // What a measurement leaves there: config, summary, log, the child's socket.
        let path = a.path().to_path_buf();
        for f in ["rxdrop.toml", "rxdrop-summary.json", "rxdrop-64-1.log"] {
            std::fs::write(path.join(f), "x").unwrap();
        }
        let _listener = std::os::unix::net::UnixListener::bind(path.join("control.sock")).unwrap();
        drop(a);
        assert!(!path.exists(), "{} left behind", path.display());
        let other = b.path().to_path_buf();
        drop(b);
        assert!(!other.exists());
    }

    #[test]
    fn child_config_parses_with_the_right_action() {
        for (subject, action) in [
            (Subject::Rxdrop, Action::Drop),
            (Subject::L2fwd, Action::L2fwd),
        ] {
            let text = child_config(
                &lab(),
                1,
                WaitMode::BusyPoll,
                subject,
                Path::new("/tmp/x/control.sock"),
            );
            let cfg = Config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let port = &cfg.ports()[0];
            assert_eq!(port.interface, "xdptputb0");
            assert_eq!(port.netns.as_deref(), Some("xdptput-b"));
            assert_eq!(cfg.worker_cores(), vec![1]);
            assert_eq!(cfg.workers.mode, WaitMode::BusyPoll);
            let rules = cfg.valid_rules();
            assert_eq!(rules.len(), 1);
            assert_eq!(
                (rules[0].proto, rules[0].dst_port, rules[0].action),
                (Some(17), Some((PORT, PORT)), action)
            );
            assert!(!cfg.stats.live);
            assert_eq!(cfg.stats.control_socket, Path::new("/tmp/x/control.sock"));
        }
    }

    #[test]
    fn settings_are_checked() {
        let exe = std::env::current_exe().unwrap();
        let ok = SweepConfig {
            gen_core: 0,
            worker_core: 0,
            ..SweepConfig::new(exe)
        };
        ok.validate().unwrap();
        assert_eq!(ok.total_measurements(), 6 * 3 * 3);
        for bad in [
            SweepConfig {
                sizes: vec![],
                ..ok.clone()
            },
            SweepConfig {
                sizes: vec![64, 59],
                ..ok.clone()
            },
            SweepConfig {
                sizes: vec![1515],
                ..ok.clone()
            },
            SweepConfig {
                reps: 0,
                ..ok.clone()
            },
            SweepConfig {
                count: 0,
                ..ok.clone()
            },
            SweepConfig {
                time_limit: Duration::ZERO,
                ..ok.clone()
            },
            SweepConfig {
                gen_core: 4096,
                ..ok.clone()
            },
            SweepConfig {
                napi_core: Some(0),
                ..ok.clone()
            },
            SweepConfig {
                xdpool_exe: "/nonexistent/xdpool".into(),
                ..ok.clone()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(BenchError::Config(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn eta_and_progress_line() {
        assert_eq!(eta(Duration::from_secs(10), 0, 54), None);
        assert_eq!(
            eta(Duration::from_secs(10), 5, 54),
            Some(Duration::from_secs(98))
        );
        assert_eq!(eta(Duration::from_secs(10), 54, 54), Some(Duration::ZERO));
        let p = Progress {
            size: 64,
            size_index: 1,
            sizes: 6,
            rep: 2,
            reps: 3,
            subject: Subject::Rxdrop,
            done: 4,
            total: 54,
            elapsed: Duration::from_secs(12),
            eta: Some(Duration::from_secs(150)),
        };
        assert_eq!(
            p.line(),
            "size 64 B (1/6), rep 2/3, rxdrop: 4/54 done, 0:12 elapsed, ETA 2:30"
        );
    }

    #[test]
    fn placement_names_the_cores() {
        let cfg = SweepConfig::new("/bin/true".into());
        let p = cfg.placement();
        assert_eq!(
            (p.generator_core, p.worker_core, p.napi_mode),
            (0, 1, NapiMode::Softirq)
        );
        assert!(
            p.napi_core.contains("core 0") && p.napi_core.contains("core 1"),
            "{}",
            p.napi_core
        );
        let t = SweepConfig {
            napi: NapiMode::Threaded,
            napi_core: Some(1),
            ..cfg
        }
        .placement();
        assert!(t.napi_core.contains("pinned to core 1"));
    }
}
