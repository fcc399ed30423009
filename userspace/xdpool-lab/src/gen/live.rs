//! Live-frames engine: `BPF_PROG_RUN` + `BPF_F_TEST_XDP_LIVE_FRAMES` on
//! `xdpool_gen_tx` (`xdp-prog/gen.bpf.c`, returns XDP_TX).
//!
//! The kernel builds `repeat` frames from `data_in` in a page pool, runs the program
//! on each in batches of `batch`, and transmits XDP_TX frames out of the ingress
//! device named in the `xdp_md` context with `ndo_xdp_xmit`. It does this on the
//! calling CPU, so each thread is pinned to its core, and on veth the frames land on
//! the peer's RX queue `cpu % rx queues`. Frames the device refuses are dropped
//! without a trace here: what we count is "handed to the kernel".
//!
//! Why `batch` matters on veth: every batch ends with `xdp_do_flush`, which puts up to
//! `batch` frames on the peer's 256-slot xdp ring and schedules its NAPI. A batch of
//! 64 (the kernel default) leaves room for the ring to drain between flushes.
use std::sync::Barrier;
use std::time::{Duration, Instant};

use aya::programs::{ProgramError, TestRun, TestRunAttrs, TestRunOptions, Xdp};
use aya::Ebpf;
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use super::{GenConfig, GenError, GenReport, ThreadReport};
use crate::netns;

/// Name of the program in `gen.bpf.o`.
pub const GEN_PROGRAM: &str = "xdpool_gen_tx";

static GEN_OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gen.bpf.o"));

/// What the live engine's `sent` means.
pub const LIVE_NOTE: &str = "handed to the kernel; count on the receiver for what arrived";

/// `struct xdp_md` for `ctx_in`: data, data_end, data_meta, ingress_ifindex,
/// rx_queue_index, egress_ifindex. The kernel wants data = 0, data_meta = 0,
/// data_end = frame length and egress_ifindex = 0.
pub fn xdp_md_ctx(frame_len: usize, ingress_ifindex: u32, rx_queue_index: u32) -> [u8; 24] {
    let fields = [0, frame_len as u32, 0, ingress_ifindex, rx_queue_index, 0];
    let mut out = [0u8; 24];
    for (dst, v) in out.chunks_exact_mut(4).zip(fields) {
        dst.copy_from_slice(&v.to_ne_bytes());
    }
    out
}

/// Splits `total` into `parts` shares that differ by at most one.
pub fn split_evenly(total: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// Runs the live engine (see the module docs). `cfg` must be validated.
pub fn run_live(cfg: &GenConfig) -> Result<GenReport, GenError> {
    let templates = cfg.templates()?;
    let mtu = crate::lab::link_mtu(cfg.netns.as_deref(), &cfg.dev)
        .map_err(|e| GenError::Config(e.to_string()))?;
    let max = mtu as usize + super::packet::ETH_HLEN;
    if cfg.size > max {
        return Err(GenError::TooBigForDevice {
            size: cfg.size,
            dev: cfg.dev.clone(),
            mtu,
            max,
        });
    }
    let cores: Vec<Option<usize>> = if cfg.cores.is_empty() {
        vec![None]
    } else {
        cfg.cores.iter().copied().map(Some).collect()
    };
    let quotas: Vec<Option<u64>> = match cfg.count {
        Some(total) => split_evenly(total, cores.len())
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None; cores.len()],
    };
    let rate = cfg.rate_pps.map(|r| r as f64 / cores.len() as f64);
    let barrier = Barrier::new(cores.len());
    let started = Instant::now();
    let results: Vec<Result<ThreadReport, GenError>> = std::thread::scope(|s| {
        let handles: Vec<_> = cores
            .iter()
            .zip(&quotas)
            .enumerate()
            .map(|(i, (&core, &quota))| {
                let (templates, barrier) = (&templates, &barrier);
                std::thread::Builder::new()
                    .name(format!("xdpool-gen-{i}"))
                    .spawn_scoped(s, move || {
                        sender(cfg, core, quota, rate, i, templates, barrier)
                    })
                    .expect("spawning a generator thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(GenError::ThreadPanicked(panic_text(&p))))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let per_thread = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    // Elapsed from the common start to the slowest thread's end, not counting loading.
    let elapsed = per_thread
        .iter()
        .map(|t| t.elapsed)
        .max()
        .unwrap_or(elapsed);
    let report = GenReport::new(
        super::Engine::Live,
        cfg.size,
        elapsed,
        per_thread,
        LIVE_NOTE,
    );
    tracing::info!(
        sent = report.sent,
        pps = report.pps.round() as u64,
        "live generator done"
    );
    Ok(report)
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

struct Sender {
    ebpf: Ebpf,
    ifindex: u32,
    _netns: Option<netns::NetnsGuard>,
}

fn prepare(cfg: &GenConfig, core: Option<usize>) -> Result<Sender, GenError> {
    if let Some(core) = core {
        let mut set = CpuSet::new();
        set.set(core)
            .map_err(|source| GenError::Affinity { core, source })?;
        sched_setaffinity(Pid::from_raw(0), &set)
            .map_err(|source| GenError::Affinity { core, source })?;
    }
    let guard = cfg.netns.as_deref().map(netns::enter).transpose()?;
    let ifindex = netns::ifindex(&cfg.dev)?;
    let mut ebpf = Ebpf::load(GEN_OBJ).map_err(|e| GenError::Load(e.to_string()))?;
    let prog: &mut Xdp = ebpf
        .program_mut(GEN_PROGRAM)
        .ok_or_else(|| GenError::Load(format!("no program {GEN_PROGRAM} in gen.bpf.o")))?
        .try_into()
        .map_err(|e: ProgramError| GenError::Load(e.to_string()))?;
    prog.load().map_err(|e| GenError::Load(e.to_string()))?;
    Ok(Sender {
        ebpf,
        ifindex,
        _netns: guard,
    })
}

fn sender(
    cfg: &GenConfig,
    core: Option<usize>,
    quota: Option<u64>,
    rate: Option<f64>,
    index: usize,
    templates: &[Vec<u8>],
    barrier: &Barrier,
) -> Result<ThreadReport, GenError> {
    let prepared = prepare(cfg, core);
    // Everyone waits, failed or not, so that no thread is left at the barrier.
    barrier.wait();
    let sender = prepared?;
    let ebpf_prog: &Xdp = sender
        .ebpf
        .program(GEN_PROGRAM)
        .ok_or_else(|| GenError::Load(format!("no program {GEN_PROGRAM} in gen.bpf.o")))?
        .try_into()
        .map_err(|e: ProgramError| GenError::Load(e.to_string()))?;
    let start = Instant::now();
    let deadline = cfg.duration.map(|d| start + d);
    let (mut sent, mut calls) = (0u64, 0u64);
    // Effective rate of the last call, fixed per-call cost included.
    let mut measured_pps = 0.0f64;
    // Threads start on different templates so flows interleave.
    let mut next_template = index;
    loop {
        let remaining = quota.map_or(u64::MAX, |q| q - sent);
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if remaining == 0 || left == Some(Duration::ZERO) {
            break;
        }
        let n = frames_for_next_call(cfg.chunk, remaining, rate, left, measured_pps);
        let frame = &templates[next_template % templates.len()];
        next_template = next_template.wrapping_add(1);
        let ctx = xdp_md_ctx(frame.len(), sender.ifindex, 0);
        let opts = TestRunOptions {
            data_in: Some(frame),
            ctx_in: Some(&ctx),
            repeat: n,
            attrs: TestRunAttrs::new().xdp_live_frames(cfg.batch),
            ..TestRunOptions::new()
        };
        let call_start = Instant::now();
        ebpf_prog
            .test_run(opts)
            .map_err(|e| test_run_error(&cfg.dev, e))?;
        sent += u64::from(n);
        calls += 1;
        measured_pps = rate_of(n, call_start.elapsed());
        if let Some(r) = rate {
            let due = Duration::from_secs_f64(sent as f64 / r);
            let now = start.elapsed();
            if due > now {
                let mut pause = due - now;
                if let Some(d) = deadline {
                    pause = pause.min(d.saturating_duration_since(Instant::now()));
                }
                std::thread::sleep(pause);
            }
        }
    }
    let elapsed = start.elapsed();
    tracing::debug!(?core, sent, calls, "generator thread done");
    Ok(ThreadReport {
        core,
        sent,
        elapsed,
        pps: super::rate(sent, elapsed),
        calls,
    })
}

/// Time one call should take when a rate must be kept (the pacing granularity: a call
/// sends its frames at full speed, then the thread sleeps until they are due).
pub const CALL_SLICE: Duration = Duration::from_millis(100);

/// Time one call should take when only a duration must be kept. Each call pays a fixed
/// cost (see [`frames_for_next_call`]) during which no frame is sent; with 1 s calls it
/// is a few percent of the run, as with xdp-trafficgen's calls of 2^20 frames. (With
/// 100 ms calls, handed frames per second were 0.92x of today's, median of 4 pairs on a
/// loaded machine.) A call never runs past the deadline by more than the error of the
/// rate measured on the previous call.
pub const DURATION_SLICE: Duration = Duration::from_secs(1);

fn rate_of(n: u32, t: Duration) -> f64 {
    f64::from(n) / t.as_secs_f64().max(1e-9)
}

/// Frames for the next BPF_PROG_RUN call. Each call with `repeat > 1` has a fixed
/// cost (the kernel swaps the program in and out of the XDP dispatcher, which waits
/// for an RCU grace period: about 25 ms measured on Linux 6.18), so calls are made
/// as large as the limits allow: `chunk` for a plain count, about [`CALL_SLICE`]
/// worth of frames under a rate, about [`DURATION_SLICE`] worth under a duration alone
/// (from the last call's measured rate, fixed cost included, so the estimate errs
/// short).
pub fn frames_for_next_call(
    chunk: u32,
    remaining: u64,
    rate: Option<f64>,
    left: Option<Duration>,
    measured_pps: f64,
) -> u32 {
    let mut n = u64::from(chunk);
    if let Some(r) = rate {
        // Never more than is due before the deadline.
        let slice = left.map_or(CALL_SLICE, |l| l.min(CALL_SLICE));
        n = n.min((r * slice.as_secs_f64()).ceil() as u64);
    }
    if let Some(left) = left {
        let cap = if rate.is_some() {
            CALL_SLICE
        } else {
            DURATION_SLICE
        };
        let slice = left.min(cap).as_secs_f64();
        let guess = if measured_pps > 0.0 {
            measured_pps * slice
        } else {
            1024.0
        };
        n = n.min(guess as u64);
    }
    n.min(remaining).max(1) as u32
}

fn test_run_error(dev: &str, e: ProgramError) -> GenError {
    let errno = match &e {
        ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
        _ => None,
    };
    let hint = match errno {
        Some(libc::EINVAL) => {
            "live frames need Linux 5.18 or newer, a frame that fits a page (about 3.5 KiB; use --engine afxdp for jumbo frames), and batch <= 256"
        }
        Some(libc::ENODEV) => "the device vanished or is in another namespace: check `ip -n NETNS link`",
        Some(libc::EPERM) | Some(libc::EACCES) => "run as root",
        Some(libc::EINTR) => "interrupted by a signal; the count of frames sent in that call is unknown",
        _ => "check `dmesg` and that the device is up",
    };
    GenError::TestRun {
        dev: dev.to_string(),
        detail: e.to_string(),
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_layout() {
        let ctx = xdp_md_ctx(64, 7, 2);
        let words: Vec<u32> = ctx
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, vec![0, 64, 0, 7, 2, 0]);
    }

    #[test]
    fn call_sizes_follow_the_limits() {
        // Plain count: as big as allowed, never more than what is left.
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, None, None, 0.0),
            1 << 22
        );
        assert_eq!(frames_for_next_call(1 << 22, 5, None, None, 0.0), 5);
        // Rate: 100 ms worth per call.
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, Some(20_000.0), None, 0.0),
            2_000
        );
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, Some(1.0), None, 0.0),
            1
        );
        let near_end = Some(Duration::from_millis(49));
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, Some(20_000.0), near_end, 1e6),
            980
        );
        // Duration alone: a small first probe, then 1 s at the measured rate, or less
        // near the end; never more than `chunk`.
        let left = Some(Duration::from_secs(5));
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, None, left, 0.0),
            1024
        );
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, None, left, 2e6),
            2_000_000
        );
        assert_eq!(
            frames_for_next_call(1 << 20, u64::MAX, None, left, 2e6),
            1 << 20
        );
        assert_eq!(
            frames_for_next_call(
                1 << 22,
                u64::MAX,
                None,
                Some(Duration::from_millis(10)),
                2e6
            ),
            20_000
        );
        // Rate and duration: the rate's 100 ms slices.
        assert_eq!(
            frames_for_next_call(1 << 22, u64::MAX, Some(2e6), left, 2e6),
            200_000
        );
    }

    #[test]
    fn shares_add_up() {
        assert_eq!(split_evenly(10, 3), vec![4, 3, 3]);
        assert_eq!(split_evenly(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split_evenly(100_000, 1), vec![100_000]);
        assert_eq!(split_evenly(7, 0), vec![7]);
    }
}
