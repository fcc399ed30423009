//! `xdpool bench pool`: the recycler's micro-benchmark, after the kernel's
//! `bench_page_pool_simple`, with naive free lists measured in the same run. It uses
//! only the `pool` crate's public API (and `cpu`, its own CPU helpers).

#[allow(unsafe_code)] // the cycle counter and sched_{get,set}affinity
mod cpu;

use cpu::{affinity, pin_to_cpu, set_affinity, tsc};
use crossbeam_queue::ArrayQueue;
use pool::{OwnerBatch, PoolConfig, PoolOwner, Region, RegionConfig, Topology};
use serde::Serialize;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Benchmark settings.
#[derive(Debug, Clone, Serialize)]
pub struct BenchConfig {
    /// Elements per measurement.
    pub iterations: u64,
    /// Measurements per test; the minimum, median and spread are reported (the
    /// median is what targets use: one lucky or unlucky rep moves neither).
    pub repeats: u32,
    /// Frames in the benchmark region.
    pub frames: u32,
    /// Chunk size.
    pub chunk_size: u32,
    /// CPUs for the cross-thread test (allocating, freeing).
    pub cross_cpus: (usize, usize),
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            iterations: 1_000_000,
            repeats: 15,
            frames: 4096,
            chunk_size: 2048,
            cross_cpus: (0, 1),
        }
    }
}

impl BenchConfig {
    /// A tiny run for tests.
    pub fn quick() -> Self {
        BenchConfig {
            iterations: 20_000,
            repeats: 1,
            ..Default::default()
        }
    }
}

/// One test's figures.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// Test name (kernel names where they exist).
    pub name: String,
    /// Elements measured.
    pub elements: u64,
    /// TSC cycles per element (fastest rep).
    pub cycles: f64,
    /// Nanoseconds per element (fastest rep).
    pub ns: f64,
    /// Nanoseconds per element, median rep.
    pub median_ns: f64,
    /// Slowest rep minus fastest, over the median (0.05 = reps within 5%).
    pub spread: f64,
}

/// A target from the issue and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    /// What is checked.
    pub target: String,
    /// The measured value, in the target's unit.
    pub measured: f64,
    /// The limit: a maximum, or a minimum where `at_least`.
    pub limit: f64,
    /// The measured value must reach the limit rather than stay under it.
    pub at_least: bool,
    /// Met or missed.
    pub met: bool,
}

impl TargetCheck {
    /// The line `--check` prints for it when missed.
    fn missed(&self) -> String {
        format!(
            "{}: {:.2} against {} {:.2}",
            self.target,
            self.measured,
            if self.at_least { "min" } else { "max" },
            self.limit
        )
    }
}

/// What the machine looked like during the run.
#[derive(Debug, Clone, Serialize)]
pub struct MachineState {
    /// CPU model.
    pub cpu_model: String,
    /// CPUs available to the process.
    pub cpus: usize,
    /// TSC frequency measured against the monotonic clock.
    pub tsc_ghz: f64,
    /// /proc/loadavg at the start.
    pub loadavg: String,
    /// Kernel release.
    pub kernel: String,
    /// Whether every cross-thread test could pin both of its threads (each to its
    /// own CPU); a check fails without it.
    pub pinned: bool,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Settings used.
    pub config: BenchConfig,
    /// Machine state.
    pub machine: MachineState,
    /// Results in run order.
    pub results: Vec<BenchResult>,
    /// The cross-thread tests' rounds, in run order.
    pub cross_rounds: Vec<CrossRound>,
    /// Targets from the issue.
    pub targets: Vec<TargetCheck>,
}

/// One round of the cross-thread tests: `cross_thread` and the two naive free lists
/// measured back to back, each the median of its reps in the round, in ns per
/// element. The cross-thread targets are medians over rounds of the ratios within a
/// round: the pair of vCPUs the host gives the two threads changes their cache-line
/// transfer time by up to 3x between seconds, and a ratio of two figures measured
/// seconds apart mixes those states.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CrossRound {
    /// `cross_thread`.
    pub cross_thread_ns: f64,
    /// `cross_naive_mutex_vec`.
    pub mutex_vec_ns: f64,
    /// `cross_naive_crossbeam`.
    pub crossbeam_ns: f64,
}

impl BenchReport {
    /// Targets missed, plus a pinning failure (cross-thread figures from unpinned
    /// threads measure the scheduler): what `--check` fails on.
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .targets
            .iter()
            .filter(|t| !t.met)
            .map(TargetCheck::missed)
            .collect();
        if !self.machine.pinned {
            f.push(format!(
                "cross-thread threads could not be pinned to CPUs {:?}",
                self.config.cross_cpus
            ));
        }
        f
    }

    /// Figures of a test by name.
    pub fn get(&self, name: &str) -> Option<&BenchResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// A table to paste into an issue note.
    pub fn table(&self) -> String {
        let m = &self.machine;
        let mut s = format!(
            "pool bench: {} | {} CPUs | TSC {:.3} GHz | kernel {} | load {} | {} reps x {} elements | pinned {}\n",
            m.cpu_model, m.cpus, m.tsc_ghz, m.kernel, m.loadavg.trim(), self.config.repeats, self.config.iterations, m.pinned
        );
        s += &format!(
            "{:<30} {:>10} {:>9} {:>9} {:>10} {:>8}\n",
            "test", "elements", "cycles", "min ns", "median ns", "spread"
        );
        for r in &self.results {
            s += &format!(
                "{:<30} {:>10} {:>9.1} {:>9.2} {:>10.2} {:>7.0}%\n",
                r.name,
                r.elements,
                r.cycles,
                r.ns,
                r.median_ns,
                r.spread * 100.0
            );
        }
        if !self.cross_rounds.is_empty() {
            s += "\ncross-thread rounds (median ns per element in each round; cross_thread / crossbeam):\n";
            for (i, c) in self.cross_rounds.iter().enumerate() {
                s += &format!(
                    "  round {}: cross_thread {:.2}, mutex_vec {:.2}, crossbeam {:.2}; ratio {:.2}\n",
                    i + 1,
                    c.cross_thread_ns,
                    c.mutex_vec_ns,
                    c.crossbeam_ns,
                    c.cross_thread_ns / c.crossbeam_ns
                );
            }
        }
        s += "\ntargets (medians, as ratios to this run's atomic_inc / lock / naive baselines):\n";
        for t in &self.targets {
            s += &format!(
                "  {:<44} {:>9.2} ({} {:>6.2}) {}\n",
                t.target,
                t.measured,
                if t.at_least { "min" } else { "max" },
                t.limit,
                if t.met { "met" } else { "MISSED" }
            );
        }
        s
    }
}

fn tsc_ghz() -> f64 {
    let (t0, c0) = (Instant::now(), tsc());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (t1, c1) = (Instant::now(), tsc());
    (c1 - c0) as f64 / (t1 - t0).as_nanos() as f64
}

struct Runner {
    cfg: BenchConfig,
    ghz: f64,
    results: Vec<BenchResult>,
}

impl Runner {
    /// Time `body(n)`, which processes `n` iterations of `per_iter` elements each.
    fn measure(&mut self, name: &str, per_iter: u64, body: impl FnMut(u64)) {
        self.measure_n(name, self.cfg.iterations, per_iter, body)
    }

    fn measure_n(&mut self, name: &str, n: u64, per_iter: u64, body: impl FnMut(u64)) {
        let n = n.max(1);
        let mut reps = time_reps(n, self.cfg.repeats, body);
        self.record(name, n * per_iter, &mut reps);
    }

    /// Adds a result from per-rep TSC cycle counts over `elements` each.
    fn record(&mut self, name: &str, elements: u64, reps: &mut [u64]) {
        reps.sort_unstable();
        let per = |c: u64| c as f64 / elements.max(1) as f64;
        let (min, med, max) = (
            per(reps[0]),
            per(reps[reps.len() / 2]),
            per(reps[reps.len() - 1]),
        );
        tracing::debug!(name, min, med, "bench test done");
        self.results.push(BenchResult {
            name: name.into(),
            elements,
            cycles: min,
            ns: min / self.ghz,
            median_ns: med / self.ghz,
            spread: if med > 0.0 { (max - min) / med } else { 0.0 },
        });
    }
}

/// TSC cycles of each of `repeats` calls of `body(n)`, after a warm-up call.
fn time_reps(n: u64, repeats: u32, mut body: impl FnMut(u64)) -> Vec<u64> {
    body(n / 10 + 1); // warm up
    (0..repeats.max(1))
        .map(|_| {
            let c0 = tsc();
            body(n);
            tsc() - c0
        })
        .collect()
}

/// The median of TSC cycle counts (the upper one of an even count).
fn median(reps: &[u64]) -> f64 {
    let mut v = reps.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0) as f64
}

/// How many whole runs `--check` makes at most before it calls a target missed.
pub const CHECK_ATTEMPTS: usize = 3;

/// What `--check` fails on, over up to `attempts` whole runs (`each` sees every run's
/// report, with its number from 1): a target fails only when every run missed it, a
/// pinning failure in any run fails at once. The cross-thread figures move between
/// runs by up to 3x on a shared VM (where the two vCPUs sit on the host), in both
/// directions, so a single missed run is noise; a path made twice as slow misses in
/// every run.
pub fn check(
    cfg: &BenchConfig,
    attempts: usize,
    mut each: impl FnMut(usize, &BenchReport),
) -> Vec<String> {
    let runs = attempts.max(1);
    // Targets missed in every run so far, and the last run's report.
    let mut missed: Option<(Vec<String>, BenchReport)> = None;
    for n in 1..=runs {
        let report = run(cfg);
        each(n, &report);
        if !report.machine.pinned {
            return report.failures();
        }
        let still: Vec<String> = report
            .targets
            .iter()
            .filter(|t| {
                !t.met
                    && missed
                        .as_ref()
                        .is_none_or(|(before, _)| before.contains(&t.target))
            })
            .map(|t| t.target.clone())
            .collect();
        if still.is_empty() {
            return Vec::new();
        }
        missed = Some((still, report));
    }
    let Some((still, last)) = missed else {
        return Vec::new();
    };
    last.targets
        .iter()
        .filter(|t| still.contains(&t.target))
        .map(|t| {
            format!(
                "{} (missed in each of {runs} runs; the last run's figure)",
                t.missed()
            )
        })
        .collect()
}

/// Run every test and check the targets.
pub fn run(cfg: &BenchConfig) -> BenchReport {
    let ghz = tsc_ghz();
    let mut r = Runner {
        cfg: cfg.clone(),
        ghz,
        results: Vec::new(),
    };
    let region = || {
        Region::new(RegionConfig {
            frames: cfg.frames,
            chunk_size: cfg.chunk_size,
            hugepages: false,
            topology: Topology::single_node(),
        })
        .expect("benchmark region")
    };

    r.measure("for_loop", 1, |n| {
        for i in 0..n {
            black_box(i);
        }
    });
    let counter = AtomicU64::new(0);
    r.measure("atomic_inc", 1, |n| {
        for _ in 0..n {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    let lock = Mutex::new(0u64);
    r.measure("lock", 1, |n| {
        for _ in 0..n {
            *lock.lock().unwrap() += 1;
        }
    });

    let reg = region();
    let mut pool = PoolOwner::new(&reg, PoolConfig::default());
    // Each loop is a function taking the pool as `&mut`, as a worker's loop does.
    // The batched tests use an `OwnerBatch` per NAPI_BUDGET elements, as a worker
    // does per RX batch; each element is still one alloc and one recycle.
    r.measure("fast_path", 1, |n| loop_fast_path(&mut pool, n));
    r.measure("unsplit_with_frag_support", 1, |n| {
        loop_unsplit_unified(&mut pool, n)
    });
    let chunk = cfg.chunk_size;
    r.measure("frag_whole", 1, |n| loop_frag_whole(&mut pool, n, chunk));
    // The same through `PoolOwner` directly (count in memory on every call).
    r.measure("fast_path_unbatched", 1, |n| {
        loop_fast_path_unbatched(&mut pool, n)
    });
    r.measure("frag_whole_unbatched", 1, |n| {
        loop_frag_whole_unbatched(&mut pool, n, chunk)
    });
    r.measure("frag_4", 4, |n| loop_frag_4(&mut pool, n, chunk));
    pool.frag_drain();
    r.measure_n("fill_bulk_64", cfg.iterations / 64, 64, |n| {
        loop_fill_bulk(&mut pool, n)
    });
    // The rxdrop worker's steady state: each RX descriptor goes straight back to the
    // fill ring (`rx_drop`), 64 per batch.
    let mut ring64 = [0u64; 64];
    assert_eq!(pool.fill_bulk(&mut ring64), 64);
    r.measure_n("rxdrop_path_64", cfg.iterations / 64, 64, |n| {
        loop_rx_drop(&mut pool, &mut ring64, n)
    });
    for &a in &ring64 {
        let f = pool.take_rx(a, 64).expect("frame from the fill ring");
        pool.recycle(f);
    }
    let remote = pool.remote();
    r.measure("ring", 1, |n| loop_ring(&mut pool, &remote, n));
    r.measure("slow", 1, |n| loop_slow(&mut pool, n));
    drop(pool);

    let (pinned, cross_rounds) = cross_rounds(&mut r, region);

    let naive = Mutex::new((0..cfg.frames).collect::<Vec<u32>>());
    r.measure("naive_mutex_vec", 1, |n| {
        for _ in 0..n {
            let i = naive.lock().unwrap().pop().expect("index");
            naive.lock().unwrap().push(black_box(i));
        }
    });
    let q = ArrayQueue::new(cfg.frames as usize);
    for i in 0..cfg.frames {
        let _ = q.push(i);
    }
    r.measure("naive_crossbeam_arrayqueue", 1, |n| {
        for _ in 0..n {
            let i = q.pop().expect("index");
            let _ = q.push(black_box(i));
        }
    });

    let machine = MachineState {
        cpu_model: std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into()),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        tsc_ghz: ghz,
        loadavg: std::fs::read_to_string("/proc/loadavg").unwrap_or_default(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        pinned,
    };
    let targets = targets(&r.results, &cross_rounds);
    BenchReport {
        config: cfg.clone(),
        machine,
        results: r.results,
        cross_rounds,
        targets,
    }
}

// Target limits (ratios of medians; see `targets`), about twice what the shared
// 2-core AMD EPYC development machine measured in 3 runs (2026-12-01): fast 0.99,
// rxdrop 1.33, fill 2.65-2.68 (per atomic_inc); ring 1.84-1.89, slow 2.24-2.31 (per
// lock); frag_whole/fast 1.33-1.34. The cross-thread ratios, within a round since
// 2026-12-04 (AMD EPYC, docs/benchmarks.md): cross/crossbeam 1.15-1.41 in the
// release build and 1.17-1.55 in the `checked` one `make test` runs, so the limit is
// issue 27's target, 1.5, in a build without debug assertions (`xdpool bench pool
// --check`, release) and 2.0 in one with them (the `checked` build would miss 1.5 in
// the VM's slow state); cross/mutex 0.19-0.20, and 0.44-0.49 in that slow state, so 0.6.
const TARGET_FAST_PER_ATOMIC: f64 = 2.0;
const TARGET_RXDROP_PER_ATOMIC: f64 = 2.7;
const TARGET_FILL_PER_ATOMIC: f64 = 5.3;
const TARGET_RING_PER_LOCK: f64 = 3.8;
const TARGET_SLOW_PER_LOCK: f64 = 4.6;
const TARGET_CROSS_PER_CROSSBEAM: f64 = if cfg!(debug_assertions) { 2.0 } else { 1.5 };
const TARGET_CROSS_PER_MUTEX: f64 = 0.6;

/// Elements per `OwnerBatch` in the batched tests: the kernel's NAPI poll budget.
const NAPI_BUDGET: u64 = 64;

/// Run `body` on a fresh batch for every `NAPI_BUDGET` of the `n` elements.
#[inline(always)]
fn in_batches(pool: &mut PoolOwner, n: u64, mut body: impl FnMut(&mut OwnerBatch<'_>)) {
    let mut left = n;
    while left > 0 {
        let k = left.min(NAPI_BUDGET);
        let mut b = pool.batch();
        for _ in 0..k {
            body(&mut b);
        }
        left -= k;
    }
}

#[inline(never)]
fn loop_fast_path(pool: &mut PoolOwner, n: u64) {
    in_batches(pool, n, |b| {
        let f = b.alloc().expect("frame");
        b.recycle(black_box(f));
    });
}

#[inline(never)]
fn loop_unsplit_unified(pool: &mut PoolOwner, n: u64) {
    in_batches(pool, n, |b| {
        let f = b.alloc().expect("frame");
        b.recycle_unified(black_box(f));
    });
}

#[inline(never)]
fn loop_frag_whole(pool: &mut PoolOwner, n: u64, chunk: u32) {
    in_batches(pool, n, |b| {
        let f = b.alloc_frag(chunk).expect("frag");
        b.release_frag(black_box(f));
    });
}

#[inline(never)]
fn loop_fast_path_unbatched(pool: &mut PoolOwner, n: u64) {
    for _ in 0..n {
        let f = pool.alloc().expect("frame");
        pool.recycle(black_box(f));
    }
}

#[inline(never)]
fn loop_frag_whole_unbatched(pool: &mut PoolOwner, n: u64, chunk: u32) {
    for _ in 0..n {
        let f = pool.alloc_frag(chunk).expect("frag");
        pool.release_frag(black_box(f));
    }
}

#[inline(never)]
fn loop_frag_4(pool: &mut PoolOwner, n: u64, chunk: u32) {
    for _ in 0..n {
        let a = pool.alloc_frag(chunk / 4).expect("frag");
        let b = pool.alloc_frag(chunk / 4).expect("frag");
        let c = pool.alloc_frag(chunk / 4).expect("frag");
        let d = pool.alloc_frag(chunk / 4).expect("frag");
        pool.release_frag(black_box(a));
        pool.release_frag(black_box(b));
        pool.release_frag(black_box(c));
        pool.release_frag(black_box(d));
    }
}

/// The AF_XDP pattern: 64 addresses for the fill ring, then the RX and recycle of
/// each (per element: one fill alloc, one take_rx, one direct recycle).
#[inline(never)]
fn loop_fill_bulk(pool: &mut PoolOwner, n: u64) {
    let mut addrs = [0u64; 64];
    for _ in 0..n {
        let got = pool.fill_bulk(&mut addrs);
        for &a in &addrs[..got] {
            let f = pool.take_rx(a, 64).expect("frame from the fill ring");
            pool.recycle(black_box(f));
        }
    }
}

#[inline(never)]
fn loop_rx_drop(pool: &mut PoolOwner, ring: &mut [u64; 64], n: u64) {
    for _ in 0..n {
        for a in ring.iter_mut() {
            *a = pool
                .rx_drop(black_box(*a), 64)
                .expect("frame in the fill ring");
        }
    }
}

#[inline(never)]
fn loop_ring(pool: &mut PoolOwner, remote: &pool::PoolRemote, n: u64) {
    in_batches(pool, n, |b| {
        let f = b.alloc().expect("frame");
        remote.recycle(black_box(f));
    });
}

#[inline(never)]
fn loop_slow(pool: &mut PoolOwner, n: u64) {
    for _ in 0..n {
        let f = pool.alloc().expect("frame");
        pool.release_to_global(black_box(f));
    }
}

/// Rounds of the cross-thread tests (see [`CrossRound`]); `repeats` reps per test
/// are split evenly over them.
const CROSS_ROUNDS: u32 = 5;

/// What one cross-thread measurement gives: TSC cycles per rep over `elements`
/// each, and whether both threads were pinned.
struct CrossRun {
    reps: Vec<u64>,
    elements: u64,
    pinned: bool,
}

/// The cross-thread tests in rounds, each round `cross_thread` then the two naive
/// free lists; records every rep of each under its name, and returns whether every
/// thread was pinned and the rounds' medians.
fn cross_rounds(r: &mut Runner, region: impl Fn() -> Arc<Region>) -> (bool, Vec<CrossRound>) {
    let rounds = CROSS_ROUNDS.min(r.cfg.repeats.max(1));
    let per_round = (r.cfg.repeats.max(1) / rounds).max(1);
    let ns = |c: &CrossRun, ghz: f64| median(&c.reps) / c.elements.max(1) as f64 / ghz;
    let (mut thread, mut mutex, mut crossbeam) = (Vec::new(), Vec::new(), Vec::new());
    let (mut busy, mut freed) = (0u64, 0u64);
    let (mut elements, mut pinned) = (0u64, true);
    let mut out = Vec::new();
    for _ in 0..rounds {
        let (t, free_side) = cross_thread(&r.cfg, region(), per_round);
        let (m, c) = cross_naive(&r.cfg, per_round);
        if let Some((b, f)) = free_side {
            busy += b;
            freed += f;
        }
        pinned &= t.pinned && m.pinned && c.pinned;
        elements = t.elements;
        out.push(CrossRound {
            cross_thread_ns: ns(&t, r.ghz),
            mutex_vec_ns: ns(&m, r.ghz),
            crossbeam_ns: ns(&c, r.ghz),
        });
        thread.extend(t.reps);
        mutex.extend(m.reps);
        crossbeam.extend(c.reps);
    }
    r.record("cross_thread", elements, &mut thread);
    r.record("cross_thread_free_side", freed, &mut [busy]);
    r.record("cross_naive_mutex_vec", elements, &mut mutex);
    r.record("cross_naive_crossbeam", elements, &mut crossbeam);
    (pinned, out)
}

/// Alloc on one pinned thread, free (through the return ring) on another. Frames
/// travel in batches of 64 so the hand-off itself costs little per element. Also
/// returns the freeing side's busy cycles and frames.
fn cross_thread(cfg: &BenchConfig, reg: Arc<Region>, reps: u32) -> (CrossRun, Option<(u64, u64)>) {
    const BATCH: usize = 64;
    let (alloc_cpu, free_cpu) = cfg.cross_cpus;
    let to_free: Arc<ArrayQueue<Vec<pool::Frame>>> = Arc::new(ArrayQueue::new(8));
    let empties: Arc<ArrayQueue<Vec<pool::Frame>>> = Arc::new(ArrayQueue::new(16));
    for _ in 0..12 {
        let _ = empties.push(Vec::with_capacity(BATCH));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (tx_remote, rx_remote) = std::sync::mpsc::channel();
    let pinned_free = Arc::new(AtomicBool::new(false));
    let freer = {
        let (to_free, empties, stop, pinned_free) = (
            to_free.clone(),
            empties.clone(),
            stop.clone(),
            pinned_free.clone(),
        );
        std::thread::spawn(move || {
            pinned_free.store(pin_to_cpu(free_cpu), Ordering::Relaxed);
            let remote: pool::PoolRemote = rx_remote.recv().expect("remote handle");
            // The freeing side's own cost: cycles inside the recycle calls only.
            let (mut busy, mut freed) = (0u64, 0u64);
            loop {
                match to_free.pop() {
                    Some(mut batch) => {
                        let c0 = tsc();
                        freed += batch.len() as u64;
                        for f in batch.drain(..) {
                            remote.recycle(f);
                        }
                        busy += tsc() - c0;
                        let _ = empties.push(batch);
                    }
                    None if stop.load(Ordering::Acquire) => break,
                    None => std::hint::spin_loop(),
                }
            }
            (busy, freed)
        })
    };
    let mask = affinity();
    let pinned = pin_to_cpu(alloc_cpu);
    let mut pool = PoolOwner::new(
        &reg,
        PoolConfig {
            ring_size: 4096,
            ..Default::default()
        },
    );
    tx_remote.send(pool.remote()).expect("freer thread alive");
    let batches = (cfg.iterations / BATCH as u64).max(1);
    let reps = time_reps(batches, reps, |n| {
        for _ in 0..n {
            let mut batch = loop {
                match empties.pop() {
                    Some(b) => break b,
                    None => std::hint::spin_loop(),
                }
            };
            while batch.len() < BATCH {
                match pool.alloc() {
                    Some(f) => batch.push(f),
                    None => std::hint::spin_loop(),
                }
            }
            let mut b = batch;
            while let Err(back) = to_free.push(b) {
                b = back;
                std::hint::spin_loop();
            }
        }
    });
    stop.store(true, Ordering::Release);
    let free_side = freer.join().ok();
    drop(pool);
    if let Some(set) = mask {
        set_affinity(&set);
    }
    let run = CrossRun {
        reps,
        elements: batches * BATCH as u64,
        pinned: pinned && pinned_free.load(Ordering::Relaxed),
    };
    (run, free_side)
}

/// The naive cross-thread baselines: the same two pinned threads and batch hand-off
/// as `cross_thread`, with the frames' free list a `Mutex<Vec>` or a crossbeam
/// `ArrayQueue` that both threads share (alloc pops it, free pushes it).
fn cross_naive(cfg: &BenchConfig, reps: u32) -> (CrossRun, CrossRun) {
    let frames = cfg.frames;
    let mutex = Arc::new(Mutex::new((0..frames).collect::<Vec<u32>>()));
    let m2 = mutex.clone();
    let a = cross_pair(
        cfg,
        reps,
        move || mutex.lock().unwrap().pop(),
        move |i| m2.lock().unwrap().push(i),
    );
    let q = Arc::new(ArrayQueue::new(frames as usize));
    for i in 0..frames {
        let _ = q.push(i);
    }
    let q2 = q.clone();
    let b = cross_pair(
        cfg,
        reps,
        move || q.pop(),
        move |i| {
            let _ = q2.push(i);
        },
    );
    (a, b)
}

/// Alloc with `alloc` on the first cross CPU, free with `free` on the second, in
/// batches of 64.
fn cross_pair(
    cfg: &BenchConfig,
    reps: u32,
    mut alloc: impl FnMut() -> Option<u32>,
    mut free: impl FnMut(u32) + Send + 'static,
) -> CrossRun {
    const BATCH: usize = 64;
    let (alloc_cpu, free_cpu) = cfg.cross_cpus;
    let to_free: Arc<ArrayQueue<Vec<u32>>> = Arc::new(ArrayQueue::new(8));
    let empties: Arc<ArrayQueue<Vec<u32>>> = Arc::new(ArrayQueue::new(16));
    for _ in 0..12 {
        let _ = empties.push(Vec::with_capacity(BATCH));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let freer = {
        let (to_free, empties, stop) = (to_free.clone(), empties.clone(), stop.clone());
        std::thread::spawn(move || {
            let pinned = pin_to_cpu(free_cpu);
            loop {
                match to_free.pop() {
                    Some(mut batch) => {
                        for i in batch.drain(..) {
                            free(i);
                        }
                        let _ = empties.push(batch);
                    }
                    None if stop.load(Ordering::Acquire) => break,
                    None => std::hint::spin_loop(),
                }
            }
            pinned
        })
    };
    let mask = affinity();
    let pinned = pin_to_cpu(alloc_cpu);
    let batches = (cfg.iterations / BATCH as u64).max(1);
    let reps = time_reps(batches, reps, |n| {
        for _ in 0..n {
            let mut batch = loop {
                match empties.pop() {
                    Some(b) => break b,
                    None => std::hint::spin_loop(),
                }
            };
            while batch.len() < BATCH {
                match alloc() {
                    Some(i) => batch.push(black_box(i)),
                    None => std::hint::spin_loop(),
                }
            }
            let mut b = batch;
            while let Err(back) = to_free.push(b) {
                b = back;
                std::hint::spin_loop();
            }
        }
    });
    stop.store(true, Ordering::Release);
    let pinned_free = freer.join().unwrap_or(false);
    if let Some(set) = mask {
        set_affinity(&set);
    }
    CrossRun {
        reps,
        elements: batches * BATCH as u64,
        pinned: pinned && pinned_free,
    }
}

/// Targets as ratios of medians to references measured in the same run (the
/// machine's atomic increment and uncontended lock, and the naive free lists), so
/// they travel between machines; the limits sit about twice above what the shared
/// 2-core development machine gives (docs/verification.md), so a 2x slowdown of
/// the pool's path fails `--check` and noise does not.
fn targets(res: &[BenchResult], cross: &[CrossRound]) -> Vec<TargetCheck> {
    let med = |n: &str| {
        res.iter()
            .find(|r| r.name == n)
            .map(|r| r.median_ns)
            .unwrap_or(f64::NAN)
    };
    let atomic = med("atomic_inc");
    let lock = med("lock");
    let max = |target: &str, measured: f64, limit: f64| TargetCheck {
        target: target.into(),
        measured,
        limit,
        at_least: false,
        met: measured <= limit,
    };
    vec![
        max(
            "fast_path / atomic_inc",
            med("fast_path") / atomic,
            TARGET_FAST_PER_ATOMIC,
        ),
        max(
            "rxdrop_path_64 / atomic_inc",
            med("rxdrop_path_64") / atomic,
            TARGET_RXDROP_PER_ATOMIC,
        ),
        max(
            "fill_bulk_64 / atomic_inc",
            med("fill_bulk_64") / atomic,
            TARGET_FILL_PER_ATOMIC,
        ),
        max("ring / lock", med("ring") / lock, TARGET_RING_PER_LOCK),
        max("slow / lock", med("slow") / lock, TARGET_SLOW_PER_LOCK),
        max(
            "frag_whole / fast_path",
            med("frag_whole") / med("fast_path"),
            2.7,
        ),
        max(
            "cross_thread / cross_naive_crossbeam",
            round_median(cross, |c| c.cross_thread_ns / c.crossbeam_ns),
            TARGET_CROSS_PER_CROSSBEAM,
        ),
        max(
            "cross_thread / cross_naive_mutex_vec",
            round_median(cross, |c| c.cross_thread_ns / c.mutex_vec_ns),
            TARGET_CROSS_PER_MUTEX,
        ),
    ]
}

/// The median over rounds of a ratio within each round (NaN without rounds).
fn round_median(rounds: &[CrossRound], ratio: impl Fn(&CrossRound) -> f64) -> f64 {
    let mut v: Vec<f64> = rounds.iter().map(ratio).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_reports_every_test_and_target() {
        let rep = run(&BenchConfig {
            iterations: 5_000,
            repeats: 1,
            frames: 1024,
            ..Default::default()
        });
        for name in [
            "for_loop",
            "atomic_inc",
            "lock",
            "fast_path",
            "unsplit_with_frag_support",
            "frag_whole",
            "fast_path_unbatched",
            "frag_whole_unbatched",
            "frag_4",
            "ring",
            "slow",
            "cross_thread",
            "naive_mutex_vec",
            "naive_crossbeam_arrayqueue",
            "rxdrop_path_64",
            "cross_thread_free_side",
            "cross_naive_mutex_vec",
            "cross_naive_crossbeam",
        ] {
            let r = rep.get(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(r.cycles > 0.0 && r.ns > 0.0, "{name}: {r:?}");
        }
        assert_eq!(rep.get("frag_4").unwrap().elements, 4 * 5_000);
        assert_eq!(rep.targets.len(), 8);
        assert_eq!(rep.get("cross_thread").unwrap().elements, 5_000 / 64 * 64);
        assert_eq!(rep.cross_rounds.len(), 1, "one rep: one round");
        let table = rep.table();
        assert!(table.contains("fast_path") && table.contains("targets"));
        assert!(table.contains("round 1: cross_thread"), "{table}");
    }

    /// The cross-thread targets are the median over rounds of each round's ratio,
    /// not a ratio of figures from different rounds.
    #[test]
    fn cross_targets_are_the_median_of_ratios_within_rounds() {
        let round = |t: f64, m: f64, c: f64| CrossRound {
            cross_thread_ns: t,
            mutex_vec_ns: m,
            crossbeam_ns: c,
        };
        // Each round's cross_thread is 1.2x its crossbeam, in a fast and a slow
        // state of the machine; across rounds the figures differ 3x.
        let rounds = [
            round(12.0, 100.0, 10.0),
            round(36.0, 300.0, 30.0),
            round(12.0, 100.0, 10.0),
            round(36.0, 300.0, 30.0),
            round(90.0, 100.0, 10.0),
        ];
        let t = targets(&[], &rounds);
        let cross = t
            .iter()
            .find(|t| t.target == "cross_thread / cross_naive_crossbeam")
            .unwrap();
        assert!((cross.measured - 1.2).abs() < 1e-9, "{cross:?}");
        assert!(cross.met);
        let mutex = t
            .iter()
            .find(|t| t.target == "cross_thread / cross_naive_mutex_vec")
            .unwrap();
        assert!((mutex.measured - 0.12).abs() < 1e-9, "{mutex:?}");
        // A pool path 2x slower in every round misses the limit.
        let slow: Vec<CrossRound> = rounds
            .iter()
            .map(|r| round(r.cross_thread_ns * 2.0, r.mutex_vec_ns, r.crossbeam_ns))
            .collect();
        let t = targets(&[], &slow);
        let cross = t
            .iter()
            .find(|t| t.target == "cross_thread / cross_naive_crossbeam")
            .unwrap();
        assert!(!cross.met, "{cross:?}");
        assert!(round_median(&[], |r| r.crossbeam_ns).is_nan());
    }
}
