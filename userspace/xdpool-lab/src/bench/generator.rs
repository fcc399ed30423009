//! `xdpool bench generator`: the live-frames generator's own rate on the lab, for
//! three receivers side by side in one run, at each kernel batch size asked for.
//!
//! - `refused`: the receiving veth has no XDP program and GRO off, so it has no NAPI
//!   and `ndo_xdp_xmit` refuses every frame at once. What is left is the cost of
//!   making and handing over frames: the generator's own ceiling, and the set-up in
//!   which a generator figure such as xdp-trafficgen's is usually quoted.
//! - `drop, softirq`: an XDP_DROP counter on the receiver; veth runs the receiver's
//!   NAPI in softirq on the sending core, so one core makes and drops every frame.
//! - `drop, threaded`: the same counter, with the receiver's NAPI in a kernel thread
//!   pinned to another core.
//!
//! `handed` is frames handed to the kernel per second of generator time; `arrived`
//! is what the counter saw in the same time (both from the same runs).
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::gen_peer::{run_peer_pairs, PeerConfig, PeerResult};
use super::math::{spread, Spread};
use super::BenchError;
use crate::gen::count::RxCounter;
use crate::gen::{self, GenConfig};
use crate::lab::{self, LabConfig, LabGuard, LabStatus};

/// Settings of `xdpool bench generator`.
#[derive(Debug, Clone)]
pub struct GenBenchConfig {
    /// Lab name prefix.
    pub prefix: String,
    /// Frame size without FCS.
    pub size: usize,
    /// Frames per run.
    pub count: u64,
    /// Runs per point.
    pub reps: u32,
    /// Kernel batch sizes to compare (`BPF_F_TEST_XDP_LIVE_FRAMES` batch).
    pub batches: Vec<u32>,
    /// Core the generator thread is pinned to.
    pub gen_core: usize,
    /// Core of the receiver's NAPI thread in the `drop, threaded` set-up.
    pub napi_core: usize,
    /// Time limit of one run.
    pub time_limit: Duration,
    /// Also compare with xdp-trafficgen, pair by pair ([`super::gen_peer`]).
    pub peer: Option<PeerConfig>,
}

impl GenBenchConfig {
    /// Checks what can be checked before the lab exists.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.batches.is_empty() || self.batches.iter().any(|&b| !(1..=256).contains(&b)) {
            return bad(format!(
                "--batches {:?}: give one or more values in 1..=256",
                self.batches
            ));
        }
        if self.reps == 0 || self.count == 0 {
            return bad("--reps and --count must be at least 1".into());
        }
        if !(60..=1514).contains(&self.size) {
            return bad(format!("--size {}: 60..=1514", self.size));
        }
        let online = crate::config::online_cpus();
        for (what, core) in [
            ("--gen-core", self.gen_core),
            ("--napi-core", self.napi_core),
        ] {
            if !online.contains(&core) {
                return bad(format!(
                    "{what} {core} is not an online CPU (online: {online:?})"
                ));
            }
        }
        if let Some(peer) = &self.peer {
            peer.validate(self.gen_core)?;
        }
        Ok(())
    }
}

/// The receiver of one set-up (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Receiver {
    /// No NAPI on the receiver: frames refused at `ndo_xdp_xmit`.
    Refused,
    /// XDP_DROP counter, NAPI in softirq on the generator's core.
    DropSoftirq,
    /// XDP_DROP counter, threaded NAPI on another core.
    DropThreaded,
}

impl Receiver {
    /// All set-ups, in the order they are measured.
    pub const ALL: [Receiver; 3] = [
        Receiver::Refused,
        Receiver::DropSoftirq,
        Receiver::DropThreaded,
    ];

    /// Name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Receiver::Refused => "refused (no NAPI)",
            Receiver::DropSoftirq => "XDP_DROP, NAPI softirq",
            Receiver::DropThreaded => "XDP_DROP, NAPI threaded",
        }
    }
}

/// One point: a receiver and a batch size over the repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct GenRow {
    /// The receiver set-up.
    pub receiver: Receiver,
    /// Kernel batch size.
    pub batch: u32,
    /// Core of the receiver's NAPI (`None` when it has none).
    pub napi_core: Option<usize>,
    /// Frames handed to the kernel per second, Mpps.
    pub handed_mpps: Spread,
    /// Frames the receiver counted per second of generator time, Mpps (`None` for
    /// `refused`, which has nothing to count with).
    pub arrived_mpps: Option<Spread>,
    /// Frames counted / frames handed over all repetitions.
    pub arrived_fraction: Option<f64>,
}

/// The result of `xdpool bench generator`.
#[derive(Debug, Clone, Serialize)]
pub struct GenBenchReport {
    /// Kernel release.
    pub kernel: String,
    /// Frame size without FCS.
    pub size: usize,
    /// Frames per run.
    pub count: u64,
    /// Runs per point.
    pub reps: u32,
    /// Generator core.
    pub gen_core: usize,
    /// One row per receiver and batch.
    pub rows: Vec<GenRow>,
    /// The comparison with xdp-trafficgen (`--peer`).
    pub peer: Option<PeerResult>,
    /// Whether Ctrl-C ended the run early.
    pub interrupted: bool,
}

impl GenBenchReport {
    /// The Markdown table and its notes.
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "| receiver | NAPI core | batch | handed Mpps | arrived Mpps | arrived / handed |\n",
        );
        out.push_str("|---|---:|---:|---:|---:|---:|\n");
        let fmt = |s: &Spread| format!("{:.3} ±{:.1}%", s.median, s.spread_pct);
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.receiver.name(),
                r.napi_core.map_or("-".to_string(), |c| c.to_string()),
                r.batch,
                fmt(&r.handed_mpps),
                r.arrived_mpps.as_ref().map_or("-".to_string(), fmt),
                r.arrived_fraction
                    .map_or("-".to_string(), |f| format!("{:.1}%", f * 100.0)),
            ));
        }
        out.push_str(&format!(
            "\n{} B frames (no FCS), {} frames per run, median of {} run(s), ±: (max - min) / median. \
             Generator: BPF_PROG_RUN live frames, 1 thread on core {}. Handed: frames given to the kernel / \
             generator time. Arrived: frames an XDP_DROP counter on the receiving veth saw / the same time. \
             refused: the receiver has no NAPI (no XDP program, GRO off), so veth refuses each frame at \
             ndo_xdp_xmit; that row is the generator's own ceiling. Kernel {}.\n",
            self.size, self.count, self.reps, self.gen_core, self.kernel
        ));
        if let Some(peer) = &self.peer {
            out.push('\n');
            out.push_str(&peer.table());
        }
        out
    }
}

/// Runs the generator benchmark (see the module docs). The lab is removed before
/// this returns, whatever happened; `stop` (Ctrl-C) ends it between runs.
pub fn run_gen_bench(
    cfg: &GenBenchConfig,
    stop: &AtomicBool,
    on_progress: &mut dyn FnMut(&str),
) -> Result<GenBenchReport, BenchError> {
    cfg.validate()?;
    // A lab that exists is someone's (and may have GRO on): leave it alone.
    if lab::Lab::status(&cfg.prefix)?.is_some() {
        return Err(BenchError::Config(format!(
            "a lab with prefix `{}` already exists; pick another --prefix, or remove it (`xdpool lab down --prefix {}`) if it is not in use",
            cfg.prefix, cfg.prefix
        )));
    }
    // GRO off on both ends: without an XDP program the receiver then has no NAPI.
    let lab_cfg = LabConfig {
        queues: Some(1),
        gro: false,
        threaded_napi: false,
        ..LabConfig::with_prefix(cfg.prefix.clone())
    };
    let guard = LabGuard::up(&lab_cfg)?;
    let st = guard.status().clone();
    let total = Receiver::ALL.len() * cfg.batches.len() * cfg.reps as usize;
    let started = Instant::now();
    let mut done = 0usize;
    let mut rows = Vec::new();
    let mut interrupted = false;
    'all: for receiver in Receiver::ALL {
        let counter = match receiver {
            Receiver::Refused => None,
            _ => Some(RxCounter::attach_in(Some(&st.b.netns), &st.b.dev)?),
        };
        let napi_core = match receiver {
            Receiver::Refused => None,
            Receiver::DropSoftirq => Some(cfg.gen_core),
            Receiver::DropThreaded => {
                lab::set_threaded_napi(&st.b.netns, &st.b.dev, true)?;
                lab::pin_napi_threads(&st.b.dev, cfg.napi_core);
                Some(cfg.napi_core)
            }
        };
        for &batch in &cfg.batches {
            let (mut handed, mut arrived) = (Vec::new(), Vec::new());
            let (mut sent_all, mut counted_all) = (0u64, 0u64);
            for rep in 1..=cfg.reps {
                if stop.load(Ordering::SeqCst) {
                    interrupted = true;
                    break 'all;
                }
                let eta = super::sweep::eta(started.elapsed(), done, total);
                on_progress(&format!(
                    "{} batch {batch} run {rep}/{} ({}/{total}{})",
                    receiver.name(),
                    cfg.reps,
                    done + 1,
                    eta.map(|e| format!(", about {:.0} s left", e.as_secs_f64()))
                        .unwrap_or_default()
                ));
                let before = counter.as_ref().map(RxCounter::packets).transpose()?;
                let report = gen::run(&gen_config(cfg, &st, batch))?;
                let secs = report.elapsed.as_secs_f64().max(1e-9);
                handed.push(report.sent as f64 / secs / 1e6);
                sent_all += report.sent;
                if let (Some(c), Some(before)) = (&counter, before) {
                    let after = c
                        .settle(Duration::from_millis(200), Duration::from_secs(3))?
                        .packets;
                    let got = after.saturating_sub(before);
                    counted_all += got;
                    arrived.push(got as f64 / secs / 1e6);
                }
                done += 1;
            }
            rows.push(GenRow {
                receiver,
                batch,
                napi_core,
                handed_mpps: spread(&handed).ok_or_else(|| BenchError::Config("no runs".into()))?,
                arrived_mpps: spread(&arrived),
                arrived_fraction: counter
                    .as_ref()
                    .and_then(|_| super::math::fraction(counted_all as f64, sent_all as f64)),
            });
        }
        if receiver == Receiver::DropThreaded {
            lab::set_threaded_napi(&st.b.netns, &st.b.dev, false)?;
        }
        drop(counter);
    }
    // The lab is back to `refused` (no program on side "b", GRO off, NAPI in softirq).
    let mut peer = None;
    if let (Some(pcfg), false) = (&cfg.peer, interrupted) {
        let (result, stopped) =
            run_peer_pairs(pcfg, &st, cfg.size, cfg.napi_core, stop, on_progress)?;
        interrupted = stopped;
        peer = Some(result);
    }
    drop(guard);
    Ok(GenBenchReport {
        kernel: super::sweep::kernel_release(),
        size: cfg.size,
        count: cfg.count,
        reps: cfg.reps,
        gen_core: cfg.gen_core,
        rows,
        peer,
        interrupted,
    })
}

fn gen_config(cfg: &GenBenchConfig, st: &LabStatus, batch: u32) -> GenConfig {
    GenConfig {
        count: Some(cfg.count),
        duration: Some(cfg.time_limit),
        size: cfg.size,
        cores: vec![cfg.gen_core],
        batch,
        ..GenConfig::for_lab(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> GenBenchConfig {
        GenBenchConfig {
            prefix: "xg".into(),
            size: 64,
            count: 1000,
            reps: 1,
            batches: vec![64],
            gen_core: 0,
            napi_core: 0,
            time_limit: Duration::from_secs(1),
            peer: None,
        }
    }

    #[test]
    fn settings_out_of_range_are_named() {
        for (bad, key) in [
            (
                GenBenchConfig {
                    batches: vec![0],
                    ..cfg()
                },
                "--batches",
            ),
            (
                GenBenchConfig {
                    batches: vec![],
                    ..cfg()
                },
                "--batches",
            ),
            (
                GenBenchConfig {
                    batches: vec![257],
                    ..cfg()
                },
                "--batches",
            ),
            (GenBenchConfig { size: 59, ..cfg() }, "--size"),
            (GenBenchConfig { reps: 0, ..cfg() }, "--reps"),
            (
                GenBenchConfig {
                    gen_core: 4096,
                    ..cfg()
                },
                "--gen-core",
            ),
            (
                GenBenchConfig {
                    napi_core: 4096,
                    ..cfg()
                },
                "--napi-core",
            ),
        ] {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err} should name {key}");
        }
        cfg().validate().unwrap();
    }

    #[test]
    fn table_has_a_row_per_point_and_dashes_where_nothing_counts() {
        let s = |m| spread(&[m]).unwrap();
        let report = GenBenchReport {
            kernel: "k".into(),
            size: 64,
            count: 10,
            reps: 1,
            gen_core: 0,
            rows: vec![
                GenRow {
                    receiver: Receiver::Refused,
                    batch: 64,
                    napi_core: None,
                    handed_mpps: s(7.5),
                    arrived_mpps: None,
                    arrived_fraction: None,
                },
                GenRow {
                    receiver: Receiver::DropThreaded,
                    batch: 256,
                    napi_core: Some(1),
                    handed_mpps: s(6.0),
                    arrived_mpps: Some(s(4.5)),
                    arrived_fraction: Some(0.75),
                },
            ],
            peer: None,
            interrupted: false,
        };
        let t = report.table();
        assert!(
            t.contains("| refused (no NAPI) | - | 64 | 7.500 ±0.0% | - | - |"),
            "{t}"
        );
        assert!(
            t.contains("| XDP_DROP, NAPI threaded | 1 | 256 | 6.000 ±0.0% | 4.500 ±0.0% | 75.0% |"),
            "{t}"
        );
    }
}
