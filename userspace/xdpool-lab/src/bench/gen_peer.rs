//! `xdpool bench generator --peer PATH`: xdpool's live-frames generator against
//! xdp-trafficgen (xdp-tools; built outside the tree, never shipped) on the same lab,
//! receivers and core, alternating, over pairs of runs.
//!
//! Both send IPv6 UDP (xdp-trafficgen's `udp` mode sends nothing else) of the same
//! size from side "a" to side "b", one thread on core 0 (xdp-trafficgen's first
//! thread always runs there), kernel batch 64 (xdp-trafficgen's `udp` mode has no
//! batch option and leaves the kernel's default). Each run is measured over the same
//! window, the same way for both: the generator starts, the script waits until frames
//! move, then `lead` later reads a counter, `window` later again. The counter:
//!
//! - `refused`: the runs of the generator's own XDP program (`BPF_ENABLE_STATS` on
//!   for the measurement), i.e. frames handed to the kernel; veth refuses them all.
//! - `XDP_DROP, softirq` / `threaded`: the receiver's XDP_DROP counter (frames that
//!   arrived), as in the table above it.
//!
//! Pairs alternate the order (xdpool first in odd pairs). The table gives each tool's
//! median rate and the median and range of the per-pair ratios xdpool / peer.
use std::collections::HashSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aya::programs::loaded_programs;
use serde::Serialize;

use super::generator::Receiver;
use super::math::{spread, Spread};
use super::BenchError;
use crate::gen::count::RxCounter;
use crate::gen::{self, GenConfig};
use crate::lab::{self, LabStatus};

/// Kernel batch of both generators in the comparison.
pub const PEER_BATCH: u32 = 64;
/// The core xdp-trafficgen's single thread pins itself to.
pub const PEER_CORE: usize = 0;
/// `BPF_PROG_TYPE_XDP` in `linux/bpf.h`.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// Longest wait for the first frames of a run.
const START_LIMIT: Duration = Duration::from_secs(15);
/// xdpool gen's run: this much longer than lead + window, for its start.
const START_SLACK: Duration = Duration::from_secs(3);

/// Which generator a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    /// `xdpool gen` (in this process, the same code as the CLI).
    Xdpool,
    /// xdp-trafficgen, as a child process.
    Peer,
}

impl Tool {
    /// The name prefix of the XDP program that sends (the kernel keeps 15 bytes).
    fn program_prefix(self) -> &'static str {
        match self {
            Tool::Xdpool => "xdpool_gen_tx",
            Tool::Peer => "xdp_redirect",
        }
    }
}

/// Settings of the comparison.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// The xdp-trafficgen binary.
    pub path: PathBuf,
    /// Pairs of runs per receiver.
    pub pairs: u32,
    /// From frames moving to the first counter read.
    pub lead: Duration,
    /// Between the two counter reads.
    pub window: Duration,
}

impl PeerConfig {
    /// Checks the settings against the generator benchmark's.
    pub fn validate(&self, gen_core: usize) -> Result<(), BenchError> {
        if gen_core != PEER_CORE {
            return Err(BenchError::Config(format!(
                "--peer: xdp-trafficgen's thread always runs on core {PEER_CORE}; give --gen-core {PEER_CORE} so both generators run on the same core"
            )));
        }
        if self.pairs == 0 || self.window.is_zero() {
            return Err(BenchError::Config(
                "--peer: give at least one pair (--reps) and a window above 0".into(),
            ));
        }
        let meta = std::fs::metadata(&self.path).map_err(|e| {
            BenchError::Config(format!("--peer {}: {e}; build xdp-trafficgen outside the tree as tools/bench/README.md says (Peers)", self.path.display()))
        })?;
        use std::os::unix::fs::PermissionsExt;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(BenchError::Config(format!(
                "--peer {}: not an executable file",
                self.path.display()
            )));
        }
        Ok(())
    }
}

/// One receiver's pairs.
#[derive(Debug, Clone, Serialize)]
pub struct PeerRow {
    /// The receiver set-up.
    pub receiver: Receiver,
    /// What was counted: `handed` (program runs) or `arrived` (receiver's counter).
    pub counted: &'static str,
    /// xdpool gen's rate per pair, Mpps (in pair order).
    pub xdpool_mpps: Vec<f64>,
    /// The peer's rate per pair, Mpps.
    pub peer_mpps: Vec<f64>,
    /// xdpool gen's median and range.
    pub xdpool: Option<Spread>,
    /// The peer's median and range.
    pub peer: Option<Spread>,
    /// Median and range of the per-pair ratios xdpool / peer.
    pub ratio: Option<Spread>,
}

impl PeerRow {
    /// A row from the per-pair rates (pairs where either rate is 0 give no ratio).
    pub fn from_pairs(receiver: Receiver, xdpool_mpps: Vec<f64>, peer_mpps: Vec<f64>) -> PeerRow {
        let ratios: Vec<f64> = xdpool_mpps
            .iter()
            .zip(&peer_mpps)
            .filter(|(_, &p)| p > 0.0)
            .map(|(x, p)| x / p)
            .collect();
        PeerRow {
            receiver,
            counted: if receiver == Receiver::Refused {
                "handed"
            } else {
                "arrived"
            },
            xdpool: spread(&xdpool_mpps),
            peer: spread(&peer_mpps),
            ratio: spread(&ratios),
            xdpool_mpps,
            peer_mpps,
        }
    }
}

/// The comparison's result.
#[derive(Debug, Clone, Serialize)]
pub struct PeerResult {
    /// The peer binary.
    pub path: PathBuf,
    /// Frame size without FCS.
    pub size: usize,
    /// Seconds from frames moving to the first read.
    pub lead_s: f64,
    /// Seconds between the reads.
    pub window_s: f64,
    /// One row per receiver.
    pub rows: Vec<PeerRow>,
}

impl PeerResult {
    /// The Markdown table and its notes.
    pub fn table(&self) -> String {
        let mut out = String::from("| receiver | counted | xdpool gen Mpps | xdp-trafficgen Mpps | xdpool / xdp-trafficgen | pairs |\n|---|---|---:|---:|---:|---:|\n");
        let med = |s: &Option<Spread>| {
            s.map_or("-".to_string(), |s| {
                format!("{:.3} ({:.3}-{:.3})", s.median, s.min, s.max)
            })
        };
        let ratio = |s: &Option<Spread>| {
            s.map_or("-".to_string(), |s| {
                format!("{:.2} ({:.2}-{:.2})", s.median, s.min, s.max)
            })
        };
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.receiver.name(),
                r.counted,
                med(&r.xdpool),
                med(&r.peer),
                ratio(&r.ratio),
                r.ratio.map_or(0, |s| s.n)
            ));
        }
        out.push_str(&format!(
            "\n{} B IPv6 UDP frames (no FCS), one thread on core {PEER_CORE}, kernel batch {PEER_BATCH}, both generators; peer: {}. \
             Each run: {:.1} s after the first frames, counted over {:.1} s; pairs alternate the order. handed: runs of the \
             generator's XDP program (BPF_ENABLE_STATS); arrived: the receiver's XDP_DROP counter. Medians, ranges in brackets.\n",
            self.size,
            self.path.display(),
            self.lead_s,
            self.window_s
        ));
        out
    }
}

/// What a run counts.
enum Meter<'a> {
    /// Runs of XDP programs loaded after `before` whose name starts with the tool's.
    Runs {
        before: HashSet<u32>,
        prefix: &'static str,
    },
    /// The receiver's XDP_DROP counter.
    Arrived(&'a RxCounter),
}

impl Meter<'_> {
    fn read(&self) -> Result<u64, BenchError> {
        match self {
            Meter::Runs { before, prefix } => Ok(xdp_programs()
                .into_iter()
                .filter(|(id, name, _)| !before.contains(id) && name.starts_with(prefix))
                .map(|(_, _, runs)| runs)
                .sum()),
            Meter::Arrived(c) => Ok(c.packets()?),
        }
    }
}

/// Every loaded XDP program: (id, name, run count).
fn xdp_programs() -> Vec<(u32, String, u64)> {
    loaded_programs()
        .filter_map(Result::ok)
        .filter(|p| p.program_type() as u32 == BPF_PROG_TYPE_XDP)
        .map(|p| {
            (
                p.id(),
                p.name_as_str().unwrap_or("").to_string(),
                p.run_count(),
            )
        })
        .collect()
}

/// A generator started for one run.
enum Running {
    Xdpool(std::thread::JoinHandle<Result<gen::GenReport, gen::GenError>>),
    Peer(Child),
}

impl Running {
    fn start(
        tool: Tool,
        cfg: &PeerConfig,
        st: &LabStatus,
        size: usize,
        run_for: Duration,
    ) -> Result<Running, BenchError> {
        match tool {
            Tool::Xdpool => {
                let gcfg = GenConfig {
                    count: None,
                    duration: Some(run_for),
                    size,
                    ipv6: true,
                    flows: 1,
                    cores: vec![PEER_CORE],
                    batch: PEER_BATCH,
                    ..GenConfig::for_lab(st)
                };
                gcfg.validate()?;
                Ok(Running::Xdpool(std::thread::spawn(move || gen::run(&gcfg))))
            }
            Tool::Peer => Ok(Running::Peer(
                peer_command(&cfg.path, st, size).spawn().map_err(|e| {
                    BenchError::Peer(format!("cannot start {}: {e}", cfg.path.display()))
                })?,
            )),
        }
    }

    /// Whether the generator has already ended.
    fn finished(&mut self) -> bool {
        match self {
            Running::Xdpool(h) => h.is_finished(),
            Running::Peer(child) => child.try_wait().ok().flatten().is_some(),
        }
    }

    /// Ends the run: xdpool's generator ends at its duration (joined), the peer gets
    /// SIGINT (its way to stop) and, 10 s later, SIGKILL.
    fn stop(self) -> Result<(), BenchError> {
        match self {
            Running::Xdpool(h) => {
                h.join()
                    .map_err(|_| BenchError::Peer("xdpool gen's thread panicked".into()))??;
                Ok(())
            }
            Running::Peer(mut child) => {
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                let until = Instant::now() + Duration::from_secs(10);
                while Instant::now() < until {
                    if child.try_wait().ok().flatten().is_some() {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
                Err(BenchError::Peer(
                    "xdp-trafficgen did not end 10 s after SIGINT; killed".into(),
                ))
            }
        }
    }
}

/// `ip netns exec A PATH udp ...`: IPv6 UDP from side "a" to side "b", port 9, one
/// thread; `--pkt-size` counts the FCS.
pub fn peer_command(path: &Path, st: &LabStatus, size: usize) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &st.a.netns])
        .arg(path)
        .args([
            "udp",
            "--dst-mac",
            &lab::format_mac(&st.b.mac),
            "--src-mac",
            &lab::format_mac(&st.a.mac),
        ])
        .args([
            "--src-addr",
            &st.a.ipv6.to_string(),
            "--dst-addr",
            &st.b.ipv6.to_string(),
        ])
        .args(["--dst-port", "9", "--src-port", "9", "--threads", "1"])
        .args(["--pkt-size", &(size + super::math::FCS_BYTES).to_string()])
        .arg(&st.a.dev)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own process group: a Ctrl-C of the bench reaches the bench, which stops it.
    c.process_group(0);
    c
}

/// One windowed run: Mpps over the window.
fn windowed(
    tool: Tool,
    cfg: &PeerConfig,
    st: &LabStatus,
    size: usize,
    counter: Option<&RxCounter>,
) -> Result<f64, BenchError> {
    let meter = match counter {
        Some(c) => Meter::Arrived(c),
        None => Meter::Runs {
            before: xdp_programs().into_iter().map(|(id, _, _)| id).collect(),
            prefix: tool.program_prefix(),
        },
    };
    let base = meter.read()?;
    // xdpool's generator has no stop but its duration: long enough for a start of up
    // to START_SLACK, the lead and the window; a run that ended before the window
    // closed is refused below.
    let run_for = START_SLACK + cfg.lead + cfg.window;
    let mut running = Running::start(tool, cfg, st, size, run_for)?;
    let measured = (|| {
        let t0 = Instant::now();
        while meter.read()? == base {
            if t0.elapsed() > START_LIMIT {
                return Err(BenchError::Peer(format!(
                    "{tool:?}: no frames {} s after start",
                    START_LIMIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(cfg.lead);
        let (c1, t1) = (meter.read()?, Instant::now());
        std::thread::sleep(cfg.window);
        let (c2, t2) = (meter.read()?, Instant::now());
        if running.finished() {
            return Err(BenchError::Peer(format!(
                "{tool:?} ended before the window closed (its start took more than {} s: a loaded machine?); run again",
                START_SLACK.as_secs()
            )));
        }
        Ok(c2.saturating_sub(c1) as f64 / (t2 - t1).as_secs_f64() / 1e6)
    })();
    // Stopped whatever the measurement gave.
    let stopped = running.stop();
    let mpps = measured?;
    stopped?;
    Ok(mpps)
}

/// Runs the comparison on the bench's lab (`st`), one receiver after another; the
/// caller has set the lab up for `refused` (GRO off, no program on side "b").
pub fn run_peer_pairs(
    cfg: &PeerConfig,
    st: &LabStatus,
    size: usize,
    napi_core: usize,
    stop: &AtomicBool,
    on_progress: &mut dyn FnMut(&str),
) -> Result<(PeerResult, bool), BenchError> {
    let mut result = PeerResult {
        path: cfg.path.clone(),
        size,
        lead_s: cfg.lead.as_secs_f64(),
        window_s: cfg.window.as_secs_f64(),
        rows: Vec::new(),
    };
    for receiver in Receiver::ALL {
        let counter = match receiver {
            Receiver::Refused => None,
            _ => Some(RxCounter::attach_in(Some(&st.b.netns), &st.b.dev)?),
        };
        // Program run counts need the kernel's statistics on: held for this receiver.
        let _stats = match receiver {
            Receiver::Refused => Some(
                aya::sys::enable_stats(aya::sys::Stats::RunTime)
                    .map_err(|e| BenchError::Peer(format!("BPF_ENABLE_STATS: {e}")))?,
            ),
            _ => None,
        };
        if receiver == Receiver::DropThreaded {
            lab::set_threaded_napi(&st.b.netns, &st.b.dev, true)?;
            lab::pin_napi_threads(&st.b.dev, napi_core);
        }
        let (mut xs, mut ps) = (Vec::new(), Vec::new());
        for pair in 1..=cfg.pairs {
            let order = if pair % 2 == 1 {
                [Tool::Xdpool, Tool::Peer]
            } else {
                [Tool::Peer, Tool::Xdpool]
            };
            for tool in order {
                if stop.load(Ordering::SeqCst) {
                    return Ok((result, true));
                }
                on_progress(&format!(
                    "--peer: {} pair {pair}/{}: {tool:?}",
                    receiver.name(),
                    cfg.pairs
                ));
                let mpps = windowed(tool, cfg, st, size, counter.as_ref())?;
                match tool {
                    Tool::Xdpool => xs.push(mpps),
                    Tool::Peer => ps.push(mpps),
                }
            }
        }
        if receiver == Receiver::DropThreaded {
            lab::set_threaded_napi(&st.b.netns, &st.b.dev, false)?;
        }
        result.rows.push(PeerRow::from_pairs(receiver, xs, ps));
    }
    Ok((result, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_per_pair_and_skip_a_dead_peer_run() {
        let row = PeerRow::from_pairs(
            Receiver::DropSoftirq,
            vec![2.0, 3.0, 4.0],
            vec![1.0, 3.0, 0.0],
        );
        let r = row.ratio.unwrap();
        assert_eq!((r.n, r.min, r.max, r.median), (2, 1.0, 2.0, 1.5));
        assert_eq!(row.xdpool.unwrap().median, 3.0);
        assert_eq!(row.counted, "arrived");
        assert_eq!(
            PeerRow::from_pairs(Receiver::Refused, vec![1.0], vec![1.0]).counted,
            "handed"
        );
    }

    #[test]
    fn table_names_both_tools_and_the_ratio() {
        let rows = vec![PeerRow::from_pairs(
            Receiver::Refused,
            vec![3.0, 3.3],
            vec![2.0, 3.0],
        )];
        let t = PeerResult {
            path: "/opt/xdp-trafficgen".into(),
            size: 64,
            lead_s: 1.0,
            window_s: 3.0,
            rows,
        }
        .table();
        assert!(t.contains("| refused (no NAPI) | handed | 3.150 (3.000-3.300) | 2.500 (2.000-3.000) | 1.30 (1.10-1.50) | 2 |"), "{t}");
        assert!(t.contains("peer: /opt/xdp-trafficgen"), "{t}");
    }

    #[test]
    fn settings_are_checked() {
        let ok = PeerConfig {
            path: "/bin/sh".into(),
            pairs: 1,
            lead: Duration::from_secs(1),
            window: Duration::from_secs(1),
        };
        ok.validate(0).unwrap();
        let err = ok.validate(1).unwrap_err().to_string();
        assert!(err.contains("--gen-core 0"), "{err}");
        let err = PeerConfig {
            path: "/nonexistent/xdp-trafficgen".into(),
            ..ok.clone()
        }
        .validate(0)
        .unwrap_err()
        .to_string();
        assert!(err.contains("tools/bench/README.md"), "{err}");
        let plain = tempfile::NamedTempFile::new().unwrap();
        let err = PeerConfig {
            path: plain.path().into(),
            ..ok.clone()
        }
        .validate(0)
        .unwrap_err()
        .to_string();
        assert!(err.contains("not an executable"), "{err}");
        assert!(PeerConfig { pairs: 0, ..ok }.validate(0).is_err());
    }
}
