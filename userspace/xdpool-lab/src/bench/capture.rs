//! `xdpool bench capture`: what a running capture costs the data path, and how fast
//! a capture keeps up. On a lab of its own, one `xdpool run` child (rule 0: UDP to
//! port 9, `drop`); then
//! 1. the data path's rate without and with `xdpool capture --rule 0` running,
//!    alternating in one run (the live generator at full speed, `--count` frames);
//! 2. with a capture running, the generator paced at rising rates: at each, the
//!    frames received, written to the file and not captured (queue full).
//!
//! The capture is this process's own client ([`crate::capture::client`]) on a thread.

use super::sweep::RunChild;
use super::BenchError;
use crate::capture::client::{capture, CaptureOptions, CaptureReport};
use crate::config::WaitMode;
use crate::gen::{self, GenConfig};
use crate::lab::{LabConfig, LabGuard, LabStatus};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What to measure.
#[derive(Debug, Clone)]
pub struct CaptureBenchConfig {
    /// The `xdpool` binary for the `run` child.
    pub xdpool_exe: PathBuf,
    /// Lab prefix.
    pub prefix: String,
    /// Frames per measurement.
    pub count: u64,
    /// Off/on pairs in part 1.
    pub reps: u32,
    /// Paced rates (frames/s) for part 2.
    pub rates: Vec<u64>,
    /// Frame size.
    pub size: usize,
    /// The worker's core and the generator's.
    pub worker_core: usize,
    /// Generator core.
    pub gen_core: usize,
}

/// One measurement.
#[derive(Debug, Clone)]
pub struct CaptureSample {
    /// Capture running?
    pub capture: bool,
    /// Offered rate (None: full speed).
    pub offered_pps: Option<u64>,
    /// Frames sent.
    pub sent: u64,
    /// Frames the worker received.
    pub received: u64,
    /// Received per second of the generator's run.
    pub rx_pps: f64,
    /// Frames written to the file.
    pub written: u64,
    /// Copies skipped (queue full).
    pub not_captured: u64,
}

fn total(sock: &Path, key: &str) -> u64 {
    crate::stats::control::query(sock)
        .ok()
        .and_then(|s| s["total"][key].as_u64())
        .unwrap_or(0)
}

/// Polls until `rx_packets` stops moving (100 ms quiet, 3 s at most).
fn settled_rx(sock: &Path) -> u64 {
    let mut last = total(sock, "rx_packets");
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(100));
        let now = total(sock, "rx_packets");
        if now == last {
            break;
        }
        last = now;
    }
    last
}

/// A capture of rule 0 on its own thread until stopped.
struct Running {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<CaptureReport, crate::capture::client::CaptureError>>,
}

impl Running {
    fn start(sock: &Path, file: &Path) -> Running {
        let opts = CaptureOptions {
            socket: sock.to_path_buf(),
            rule: crate::capture::live::RuleRef::Index(0),
            count: 0,
            snaplen: 2048,
            file: file.to_path_buf(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || capture(&opts, &s2));
        // The client arms the tap within a few ms of connecting.
        std::thread::sleep(Duration::from_millis(300));
        Running { stop, thread }
    }

    fn finish(self) -> Result<CaptureReport, BenchError> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .join()
            .map_err(|_| BenchError::Config("the capture thread panicked".into()))?
            .map_err(|e| BenchError::Config(format!("capture: {e}")))
    }
}

fn measure(
    cfg: &CaptureBenchConfig,
    lab: &LabStatus,
    sock: &Path,
    file: &Path,
    with_capture: bool,
    pps: Option<u64>,
) -> Result<CaptureSample, BenchError> {
    let g = GenConfig {
        count: Some(cfg.count),
        duration: Some(Duration::from_secs(30)),
        size: cfg.size,
        rate_pps: pps,
        cores: vec![cfg.gen_core],
        ..GenConfig::for_lab(lab)
    };
    let (rx0, drop0) = (settled_rx(sock), total(sock, "capture_dropped"));
    let cap = with_capture.then(|| Running::start(sock, file));
    let sent = gen::run(&g)?;
    let rx1 = settled_rx(sock);
    let written = match cap {
        Some(c) => c.finish()?.written,
        None => 0,
    };
    let received = rx1 - rx0;
    Ok(CaptureSample {
        capture: with_capture,
        offered_pps: pps,
        sent: sent.sent,
        received,
        rx_pps: received as f64 / sent.elapsed.as_secs_f64().max(1e-9),
        written,
        not_captured: total(sock, "capture_dropped") - drop0,
    })
}

/// Runs both parts; `stop` (Ctrl-C) ends it early. The lab is removed at the end.
pub fn run(
    cfg: &CaptureBenchConfig,
    stop: &AtomicBool,
) -> Result<(Vec<CaptureSample>, Vec<CaptureSample>), BenchError> {
    let lab = LabGuard::up(&LabConfig::with_prefix(cfg.prefix.clone()))?;
    let st = lab.status().clone();
    let dir = tempfile::Builder::new()
        .prefix("xdpool-capbench-")
        .tempdir()
        .map_err(|source| BenchError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    let sock = dir.path().join("control.sock");
    let config = dir.path().join("run.toml");
    let text = super::sweep::child_config(
        &st,
        cfg.worker_core,
        WaitMode::Poll,
        super::Subject::Rxdrop,
        &sock,
    );
    std::fs::write(&config, text).map_err(|source| BenchError::Io {
        path: config.clone(),
        source,
    })?;
    let child = RunChild::start(
        &cfg.xdpool_exe,
        &config,
        &dir.path().join("summary.json"),
        &dir.path().join("run.log"),
        Duration::from_secs(3600),
        "bench capture",
    )?;
    let file = dir.path().join("bench.pcapng");
    let mut pairs = Vec::new();
    for _ in 0..cfg.reps {
        for on in [false, true] {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            pairs.push(measure(cfg, &st, &sock, &file, on, None)?);
        }
    }
    let mut paced = Vec::new();
    for &pps in &cfg.rates {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        paced.push(measure(cfg, &st, &sock, &file, true, Some(pps))?);
    }
    child.finish()?;
    Ok((pairs, paced))
}

/// The two tables.
pub fn table(cfg: &CaptureBenchConfig, pairs: &[CaptureSample], paced: &[CaptureSample]) -> String {
    let mut t = format!("data path (rule 0 drop, {} B frames, {} per run, live generator at full speed), without and with a capture, alternating:\n\n", cfg.size, cfg.count);
    t += "| capture | sent | received | rx Mpps | written | not captured |\n|---|---|---|---|---|---|\n";
    for s in pairs {
        t += &format!(
            "| {} | {} | {} | {:.3} | {} | {} |\n",
            if s.capture { "on" } else { "off" },
            s.sent,
            s.received,
            s.rx_pps / 1e6,
            s.written,
            s.not_captured
        );
    }
    let median = |on: bool| {
        let mut v: Vec<f64> = pairs
            .iter()
            .filter(|s| s.capture == on)
            .map(|s| s.rx_pps)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (off, on) = (median(false), median(true));
    t += &format!(
        "\nmedian: off {:.3} Mpps, on {:.3} Mpps, on/off {:.3}\n\n",
        off / 1e6,
        on / 1e6,
        if off > 0.0 { on / off } else { 0.0 }
    );
    t += "capture at paced rates:\n\n| offered pps | received | written | not captured | every frame captured |\n|---|---|---|---|---|\n";
    for s in paced {
        t += &format!(
            "| {} | {} | {} | {} | {} |\n",
            s.offered_pps.unwrap_or(0),
            s.received,
            s.written,
            s.not_captured,
            if s.not_captured == 0 && s.written == s.received {
                "yes"
            } else {
                "no"
            }
        );
    }
    t
}
