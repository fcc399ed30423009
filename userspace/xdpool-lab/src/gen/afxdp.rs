//! AF_XDP TX engine: for kernels or devices where live frames are unavailable.
//!
//! One thread (pinned to the first of `cores`, if any) enters the namespace, builds a
//! small recycler region (4096 chunks of 2048 B), registers it as a UMEM and binds a
//! copy-mode socket (need_wakeup) to the device's queue `GenConfig::queue` (0 unless
//! `--queue`; a veth peer receives on the same queue). Frames of at most half a
//! chunk (1024 B) are packed several to a chunk with `PoolOwner::alloc_frag`; larger
//! ones get a whole chunk. Up to [`TX_SLOTS`] templates are written once, handed to
//! TX (`give_tx_frag` / `give_tx`), and then re-sent: a completed address is put back
//! on the TX ring while frames remain, and released (`take_completion`) otherwise.
//! Production stops at exactly `count`; the engine then waits (bounded) for every
//! completion, destroys the pool and checks that the region's accounting is all free.
//!
//! `sent` counts completed frames: handed to the kernel, which may still drop them.
use std::time::{Duration, Instant};

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use pool::{Accounting, PoolConfig, PoolOwner, Region, RegionConfig, Topology};

use super::{GenConfig, GenError, GenReport, ThreadReport};
use crate::netns;
use crate::xsk::{
    SocketConfig, Umem, UmemConfig, Wakeup, XdpDesc, XskError, XskSocket, XDP_PKT_CONTD,
};

/// What the AF_XDP engine's `sent` means.
pub const AFXDP_NOTE: &str =
    "handed to the kernel (TX completions); count on the receiver for what arrived";

/// Chunks in the engine's region.
pub const REGION_FRAMES: u32 = 4096;
/// Chunk size of the engine's region.
pub const CHUNK_SIZE: u32 = 2048;
/// TX, completion (and RX) ring size; also the most frames in flight.
pub const TX_SLOTS: u32 = 2048;
/// How long to wait for the last completions once production stopped.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);
/// Descriptors produced per step at most.
const BATCH: usize = 64;

/// AF_XDP engine errors.
#[derive(Debug, thiserror::Error)]
pub enum AfxdpError {
    /// Building the recycler region failed.
    #[error("AF_XDP engine: building the frame region failed: {0}")]
    Region(#[from] pool::PoolError),
    /// Socket or UMEM setup, or a wake-up, failed.
    #[error("AF_XDP engine on {dev}: {source}")]
    Xsk {
        /// Device.
        dev: String,
        /// Cause.
        source: XskError,
    },
    /// The device went away while sending.
    #[error("AF_XDP engine: {dev} went away while sending (errno {errno}): check `ip -n NETNS link` and run again")]
    DeviceGone {
        /// Device.
        dev: String,
        /// errno of the wake-up.
        errno: i32,
    },
    /// The pool could not give a frame for a template.
    #[error("AF_XDP engine: the pool ran out of frames while writing templates; this is a bug, please report it")]
    OutOfFrames,
    /// The recycler refused a frame or completion.
    #[error("AF_XDP engine: the recycler refused a frame: {0}; this is a bug, please report it")]
    Frame(#[from] pool::FrameError),
    /// Completions did not all come back in time.
    #[error("AF_XDP engine: {missing} TX completions did not come back within {limit:?}; the device may be stuck (check `ip -n NETNS link` and dmesg)")]
    Stuck {
        /// Descriptors never completed.
        missing: u64,
        /// How long we waited.
        limit: Duration,
    },
    /// Frames were lost or duplicated in the recycler.
    #[error("AF_XDP engine: frame accounting is wrong after the run: {0}; this is a bug, please report it")]
    Accounting(String),
}

/// What one AF_XDP run did, with the recycler's final accounting.
#[derive(Debug, Clone)]
pub struct AfxdpReport {
    /// The generator report (`sent` = completions).
    pub gen: GenReport,
    /// Descriptors put on the TX ring (re-sends included); equals `gen.sent`.
    pub produced: u64,
    /// Distinct template buffers (frags or frames) handed to TX.
    pub slots: u32,
    /// Chunks those buffers used (fewer than `slots` when packed as frags).
    pub chunks_used: u32,
    /// Wake-ups (`sendto`) made.
    pub wakeups: u64,
    /// The region's accounting after the pool was destroyed (all free when exact).
    pub accounting: Accounting,
}

/// Runs the AF_XDP engine and returns the generator report. `cfg` must be validated.
pub fn run_afxdp(cfg: &GenConfig) -> Result<GenReport, GenError> {
    run_afxdp_detailed(cfg).map(|r| r.gen)
}

/// Runs the AF_XDP engine; the report includes the recycler's final accounting,
/// which has been checked (`Accounting::check` and all frames free).
pub fn run_afxdp_detailed(cfg: &GenConfig) -> Result<AfxdpReport, GenError> {
    if cfg.cores.len() > 1 {
        return Err(GenError::Config(format!(
            "the afxdp engine sends from one core on one queue (--queue); give one core (--cores {}) or use --engine live",
            cfg.cores[0]
        )));
    }
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
    let core = cfg.cores.first().copied();
    let result = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("xdpool-gen-xsk".into())
            .spawn_scoped(s, || sender(cfg, core, &templates))
            .expect("spawning the generator thread")
            .join()
            .unwrap_or_else(|p| Err(GenError::ThreadPanicked(panic_text(&p))))
    })?;
    tracing::info!(
        sent = result.gen.sent,
        pps = result.gen.pps,
        "afxdp generator done"
    );
    Ok(result)
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

fn xsk_err(cfg: &GenConfig, source: XskError) -> GenError {
    GenError::Afxdp(AfxdpError::Xsk {
        dev: cfg.dev.clone(),
        source,
    })
}

/// Kicks TX; transient refusals are fine (the next step kicks again).
fn kick(cfg: &GenConfig, sock: &XskSocket, wakeups: &mut u64) -> Result<(), GenError> {
    *wakeups += 1;
    match sock.wakeup_tx().map_err(|e| xsk_err(cfg, e))? {
        Wakeup::Done | Wakeup::Retry { .. } => Ok(()),
        Wakeup::DeviceGone { errno } => Err(GenError::Afxdp(AfxdpError::DeviceGone {
            dev: cfg.dev.clone(),
            errno,
        })),
    }
}

fn sender(
    cfg: &GenConfig,
    core: Option<usize>,
    templates: &[Vec<u8>],
) -> Result<AfxdpReport, GenError> {
    if let Some(core) = core {
        let mut set = CpuSet::new();
        set.set(core)
            .map_err(|source| GenError::Affinity { core, source })?;
        sched_setaffinity(Pid::from_raw(0), &set)
            .map_err(|source| GenError::Affinity { core, source })?;
    }
    let _netns = cfg.netns.as_deref().map(netns::enter).transpose()?;
    let ifindex = netns::ifindex(&cfg.dev)?;
    let region = Region::new(RegionConfig {
        frames: REGION_FRAMES,
        chunk_size: CHUNK_SIZE,
        hugepages: false,
        topology: Topology::single_node(),
    })
    .map_err(|e| GenError::Afxdp(e.into()))?;
    let ucfg = UmemConfig {
        chunk_size: CHUNK_SIZE,
        headroom: 0,
        fill_size: TX_SLOTS,
        comp_size: TX_SLOTS,
        unaligned: false,
    };
    // SAFETY: the region is page-aligned mmap'd memory of region.len() bytes, held by
    // the Arc `region`, which is declared before `umem` and `sock` in this function
    // and so dropped after both: the memory stays mapped while the kernel may use it.
    // Only the recycler decides which chunk the kernel reads (TX only, no fill ring).
    let umem = unsafe { Umem::register(region.as_ptr(), region.len(), ucfg) }
        .map_err(|e| xsk_err(cfg, e))?;
    // Frames longer than a chunk go out as chains of chunks (multi-buffer TX).
    let multi_buffer = cfg.size > CHUNK_SIZE as usize;
    let scfg = SocketConfig {
        rx_size: TX_SLOTS,
        tx_size: TX_SLOTS,
        zero_copy: false,
        need_wakeup: true,
        multi_buffer,
        tx_budget: 0,
    };
    // A socket closed just before (the previous run of the generator) keeps its queue
    // busy until the kernel's deferred teardown ends: retry EBUSY for up to 2 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut sock = loop {
        match XskSocket::bind(&umem, ifindex, cfg.queue, &scfg) {
            Err(e) if e.is_retryable() && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            r => break r.map_err(|e| xsk_err(cfg, e))?,
        }
    };
    let mut pool = PoolOwner::new(&region, PoolConfig::default());
    if cfg.payload == super::Payload::Sequenced {
        let result = send_sequenced(cfg, &mut sock, &mut pool, &region, templates);
        drop(sock);
        drop(umem);
        return finish(cfg, core, pool, &region, result);
    }
    if multi_buffer {
        let result = send_chains(cfg, &mut sock, &mut pool, &region, templates);
        drop(sock);
        drop(umem);
        return finish(cfg, core, pool, &region, result);
    }

    let quota = cfg.count.unwrap_or(u64::MAX);
    let slots = quota.min(u64::from(TX_SLOTS)) as u32;
    let len = cfg.size as u32;
    let packed = len * 2 <= CHUNK_SIZE;
    // Write the templates once; each buffer's reference goes to TX for the whole run.
    let mut ready: Vec<u64> = Vec::with_capacity(slots as usize);
    let mut chunks = std::collections::BTreeSet::new();
    for i in 0..slots as usize {
        let data = &templates[i % templates.len()];
        let addr = if packed {
            let frag = pool
                .alloc_frag(len)
                .ok_or(GenError::Afxdp(AfxdpError::OutOfFrames))?;
            if let Err(e) = region.write_frag(&frag, data) {
                pool.release_frag(frag);
                return Err(GenError::Afxdp(e.into()));
            }
            pool.give_tx_frag(frag)
                .map_err(|e| GenError::Afxdp(e.into()))?
        } else {
            let mut frame = pool
                .alloc()
                .ok_or(GenError::Afxdp(AfxdpError::OutOfFrames))?;
            if let Err(e) = region.write_frame(&mut frame, 0, data) {
                pool.recycle(frame);
                return Err(GenError::Afxdp(e.into()));
            }
            pool.give_tx(frame, 0)
                .map_err(|e| GenError::Afxdp(e.into()))?
        };
        chunks.insert(addr / u64::from(CHUNK_SIZE));
        ready.push(addr);
    }
    pool.frag_drain();

    let outcome = send_loop(cfg, &mut sock, &mut ready, quota, len);
    // Whatever happened, give back what we hold: completed buffers first.
    for addr in ready.drain(..) {
        if let Err(e) = pool.take_completion(addr) {
            tracing::warn!(addr, error = %e, "releasing a template buffer failed");
        }
    }
    drop(sock);
    drop(umem);
    let chunks_used = chunks.len() as u32;
    let sent = outcome.map(|(produced, completed, wakeups, elapsed)| Sent {
        produced,
        completed,
        wakeups,
        elapsed,
        slots,
        chunks: chunks_used,
    });
    finish(cfg, core, pool, &region, sent)
}

/// What a send loop leaves: (report parts, or the error that stopped it).
struct Sent {
    produced: u64,
    completed: u64,
    wakeups: u64,
    elapsed: Duration,
    slots: u32,
    chunks: u32,
}

/// Checks the end of a run (socket and UMEM closed by now): completions all back,
/// pool destroyed, accounting exact.
fn finish(
    cfg: &GenConfig,
    core: Option<usize>,
    mut pool: PoolOwner,
    region: &Region,
    sent: Result<Sent, GenError>,
) -> Result<AfxdpReport, GenError> {
    let sent = match sent {
        Ok(s) => s,
        Err(e) => {
            pool.reclaim_kernel();
            drop(pool.destroy());
            return Err(e);
        }
    };
    let missing = sent.produced - sent.completed;
    if missing > 0 {
        pool.reclaim_kernel();
        drop(pool.destroy());
        return Err(GenError::Afxdp(AfxdpError::Stuck {
            missing,
            limit: DRAIN_LIMIT,
        }));
    }
    let destroyed = pool.destroy();
    destroyed
        .wait(Duration::from_secs(1))
        .map_err(|e| GenError::Afxdp(e.into()))?;
    let accounting = region.accounting();
    accounting
        .check()
        .map_err(|e| GenError::Afxdp(AfxdpError::Accounting(e)))?;
    if accounting.free != accounting.total {
        return Err(GenError::Afxdp(AfxdpError::Accounting(format!(
            "{} of {} frames free: {accounting:?}",
            accounting.free, accounting.total
        ))));
    }
    let thread = ThreadReport {
        core,
        sent: sent.completed,
        elapsed: sent.elapsed,
        pps: super::rate(sent.completed, sent.elapsed),
        calls: sent.wakeups,
    };
    let gen = GenReport::new(
        super::Engine::Afxdp,
        cfg.size,
        sent.elapsed,
        vec![thread],
        AFXDP_NOTE,
    );
    Ok(AfxdpReport {
        gen,
        produced: sent.produced,
        slots: sent.slots,
        chunks_used: sent.chunks,
        wakeups: sent.wakeups,
        accounting,
    })
}

/// Multi-buffer frames: each template is a chain of whole chunks, sent as one
/// descriptor per chunk, `XDP_PKT_CONTD` on all but the last. A chain is re-sent
/// once all its descriptors have completed. Returns with every buffer given back to
/// the pool (or, on error, still counted in TX for `reclaim_kernel`).
fn send_chains(
    cfg: &GenConfig,
    sock: &mut XskSocket,
    pool: &mut PoolOwner,
    region: &Region,
    templates: &[Vec<u8>],
) -> Result<Sent, GenError> {
    let quota = cfg.count.unwrap_or(u64::MAX);
    let per_frame = cfg.size.div_ceil(CHUNK_SIZE as usize);
    // Enough chains to keep the TX ring busy, within the region.
    let slots = quota.min(u64::from(TX_SLOTS) / per_frame as u64).max(1) as usize;
    let mut chains: Vec<Vec<XdpDesc>> = Vec::with_capacity(slots);
    let mut slot_of_chunk = vec![u32::MAX; REGION_FRAMES as usize];
    for slot in 0..slots {
        let data = &templates[slot % templates.len()];
        let mut chain = Vec::with_capacity(per_frame);
        for (i, piece) in data.chunks(CHUNK_SIZE as usize).enumerate() {
            let mut frame = pool
                .alloc()
                .ok_or(GenError::Afxdp(AfxdpError::OutOfFrames))?;
            if let Err(e) = region.write_frame(&mut frame, 0, piece) {
                pool.recycle(frame);
                return Err(GenError::Afxdp(e.into()));
            }
            let addr = pool
                .give_tx(frame, 0)
                .map_err(|e| GenError::Afxdp(e.into()))?;
            slot_of_chunk[(addr / u64::from(CHUNK_SIZE)) as usize] = slot as u32;
            let options = if i + 1 < per_frame { XDP_PKT_CONTD } else { 0 };
            chain.push(XdpDesc {
                addr,
                len: piece.len() as u32,
                options,
            });
        }
        chains.push(chain);
    }
    let mut ready: Vec<u32> = (0..slots as u32).collect();
    let mut done = vec![0usize; slots];
    let start = Instant::now();
    let mut pacer = Pacer::new(cfg.rate_pps, start);
    let deadline = cfg.duration.map(|d| start + d);
    let (mut produced, mut completed, mut wakeups) = (0u64, 0u64, 0u64);
    let mut descs: Vec<XdpDesc> = Vec::with_capacity(BATCH * per_frame);
    let mut comp = [0u64; BATCH * 4];
    let mut on_completions = |got: &[u64], ready: &mut Vec<u32>, completed: &mut u64| {
        for &addr in got {
            let slot = slot_of_chunk
                .get((addr / u64::from(CHUNK_SIZE)) as usize)
                .copied()
                .unwrap_or(u32::MAX);
            let Some(d) = done.get_mut(slot as usize) else {
                continue;
            };
            *d += 1;
            if *d == per_frame {
                *d = 0;
                ready.push(slot);
                *completed += 1;
            }
        }
    };
    let result = loop {
        let now = Instant::now();
        if produced >= quota || deadline.is_some_and(|d| now >= d) {
            break Ok(());
        }
        let n = (pacer.allowed(quota, produced, now) as usize)
            .min(ready.len())
            .min(BATCH);
        if n > 0 {
            descs.clear();
            for &slot in &ready[ready.len() - n..] {
                descs.extend_from_slice(&chains[slot as usize]);
            }
            let put = sock.tx().produce_whole_frames(&descs) / per_frame;
            // The chains put went out; the others stay ready.
            let not_put: Vec<u32> = ready[ready.len() - n + put..].to_vec();
            ready.truncate(ready.len() - n);
            ready.extend(not_put);
            produced += put as u64;
        }
        if produced > completed {
            if let Err(e) = kick(cfg, sock, &mut wakeups) {
                break Err(e);
            }
        }
        let got = sock.completion().consume(&mut comp);
        on_completions(&comp[..got], &mut ready, &mut completed);
        if n == 0 && got == 0 {
            idle(cfg.rate_pps.is_some() && !ready.is_empty());
        }
    };
    let elapsed_send = start.elapsed();
    if result.is_ok() {
        let drain_until = Instant::now() + DRAIN_LIMIT;
        while completed < produced && Instant::now() < drain_until {
            if kick(cfg, sock, &mut wakeups).is_err() {
                break;
            }
            let got = sock.completion().consume(&mut comp);
            on_completions(&comp[..got], &mut ready, &mut completed);
            if got == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
    // Chains not in the kernel's hands go back to the pool; the rest stay counted in
    // TX until `reclaim_kernel`.
    for &slot in &ready {
        for d in &chains[slot as usize] {
            if let Err(e) = pool.take_completion(d.addr) {
                tracing::warn!(addr = d.addr, error = %e, "releasing a template buffer failed");
            }
        }
    }
    result?;
    let elapsed = if completed == produced {
        start.elapsed()
    } else {
        elapsed_send
    };
    tracing::debug!(
        produced,
        completed,
        wakeups,
        per_frame,
        "afxdp multi-buffer thread done"
    );
    Ok(Sent {
        produced,
        completed,
        wakeups,
        elapsed,
        slots: slots as u32,
        chunks: (slots * per_frame) as u32,
    })
}

/// Sequenced payloads: each frame is written for its number just before it goes on
/// the TX ring, in a buffer taken from the pool (a frag packed with others when it
/// fits in half a chunk), and given back to the pool at its completion. Frame `i`
/// (from 0) is template `i % templates`, numbered `seq_first + i`.
fn send_sequenced(
    cfg: &GenConfig,
    sock: &mut XskSocket,
    pool: &mut PoolOwner,
    region: &Region,
    templates: &[Vec<u8>],
) -> Result<Sent, GenError> {
    let quota = cfg.count.unwrap_or(u64::MAX);
    let len = cfg.size as u32;
    let packed = len * 2 <= CHUNK_SIZE;
    let start = Instant::now();
    let mut pacer = Pacer::new(cfg.rate_pps, start);
    let deadline = cfg.duration.map(|d| start + d);
    let (mut produced, mut completed, mut wakeups) = (0u64, 0u64, 0u64);
    let mut chunks = std::collections::BTreeSet::new();
    let mut descs = Vec::with_capacity(BATCH);
    let mut comp = [0u64; BATCH * 4];
    let mut frame = vec![0u8; cfg.size];
    let mut reap = |sock: &mut XskSocket,
                    pool: &mut PoolOwner,
                    completed: &mut u64|
     -> Result<usize, GenError> {
        let got = sock.completion().consume(&mut comp);
        for &addr in &comp[..got] {
            pool.take_completion(addr)
                .map_err(|e| GenError::Afxdp(e.into()))?;
        }
        *completed += got as u64;
        Ok(got)
    };
    let result = loop {
        let now = Instant::now();
        if produced >= quota || deadline.is_some_and(|d| now >= d) {
            break Ok(());
        }
        let due = pacer.allowed(quota, produced, now).min(BATCH as u64) as u32;
        let n = sock.tx().writable(due) as usize;
        descs.clear();
        for i in 0..n as u64 {
            let index = produced + i;
            frame.copy_from_slice(&templates[(index % templates.len() as u64) as usize]);
            super::seq::stamp_frame(&mut frame, cfg.seq_first + index)
                .map_err(|e| GenError::Config(e.to_string()))?;
            let addr = if packed {
                let Some(frag) = pool.alloc_frag(len) else {
                    break;
                };
                if let Err(e) = region.write_frag(&frag, &frame) {
                    pool.release_frag(frag);
                    return Err(GenError::Afxdp(e.into()));
                }
                pool.give_tx_frag(frag)
                    .map_err(|e| GenError::Afxdp(e.into()))?
            } else {
                let Some(mut f) = pool.alloc() else { break };
                if let Err(e) = region.write_frame(&mut f, 0, &frame) {
                    pool.recycle(f);
                    return Err(GenError::Afxdp(e.into()));
                }
                pool.give_tx(f, 0).map_err(|e| GenError::Afxdp(e.into()))?
            };
            chunks.insert(addr / u64::from(CHUNK_SIZE));
            descs.push(XdpDesc {
                addr,
                len,
                options: 0,
            });
        }
        // `writable` said there is room for all of them.
        let put = sock.tx().produce(&descs);
        for d in &descs[put..] {
            pool.take_completion(d.addr)
                .map_err(|e| GenError::Afxdp(e.into()))?;
        }
        produced += put as u64;
        if produced > completed {
            if let Err(e) = kick(cfg, sock, &mut wakeups) {
                break Err(e);
            }
        }
        let got = match reap(sock, pool, &mut completed) {
            Ok(g) => g,
            Err(e) => break Err(e),
        };
        if put == 0 && got == 0 {
            idle(cfg.rate_pps.is_some());
        }
    };
    let elapsed_send = start.elapsed();
    if result.is_ok() {
        let drain_until = Instant::now() + DRAIN_LIMIT;
        while completed < produced && Instant::now() < drain_until {
            if kick(cfg, sock, &mut wakeups).is_err() {
                break;
            }
            if reap(sock, pool, &mut completed)? == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
    pool.frag_drain();
    result?;
    let elapsed = if completed == produced {
        start.elapsed()
    } else {
        elapsed_send
    };
    tracing::debug!(produced, completed, wakeups, "afxdp sequenced thread done");
    Ok(Sent {
        produced,
        completed,
        wakeups,
        elapsed,
        slots: 0,
        chunks: chunks.len() as u32,
    })
}

/// Nothing moved this step: under a rate with frames ready, the rate is what holds
/// them back, so sleep a little; otherwise completions are due, so only yield.
fn idle(rate_bound: bool) {
    if rate_bound {
        std::thread::sleep(Duration::from_micros(200));
    } else {
        std::thread::yield_now();
    }
}

/// Most frames a paced sender puts out at once after it was held off the CPU: what
/// fell due beyond this while it waited is forgiven, not caught up. A catch-up burst
/// of a whole stall's worth (thousands of frames after 30 ms at 100 000/s) is not the
/// rate asked for, and overflows a receiver's 2048-slot ring that the same stall held
/// off its CPU too.
pub const PACE_BURST: u64 = 256;

/// Paces production: a token bucket that fills at the rate and holds at most
/// [`PACE_BURST`] frames (one up front). Without a rate, only the quota bounds.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Option<u64>,
    /// Start of the bucket's clock; moved forward when a stall's debt is forgiven.
    epoch: Instant,
}

impl Pacer {
    /// A bucket with one frame in it at `now`.
    pub fn new(rate: Option<u64>, now: Instant) -> Pacer {
        Pacer { rate, epoch: now }
    }

    /// Frames that may be produced at `now`, `produced` so far: what is left of the
    /// quota, no more than the rate has made due, at most [`PACE_BURST`].
    pub fn allowed(&mut self, quota: u64, produced: u64, now: Instant) -> u64 {
        let left = quota.saturating_sub(produced);
        let Some(r) = self.rate.filter(|&r| r > 0) else {
            return left;
        };
        let since = now.saturating_duration_since(self.epoch);
        let due = (r as f64 * since.as_secs_f64()) as u64 + 1;
        let mut ready = due.saturating_sub(produced);
        if ready > PACE_BURST {
            // Forgive the debt: restart the clock where `produced + PACE_BURST` fall due.
            let at = Duration::from_secs_f64((produced + PACE_BURST - 1) as f64 / r as f64);
            self.epoch = now.checked_sub(at).unwrap_or(self.epoch);
            ready = PACE_BURST;
        }
        left.min(ready)
    }
}

/// Produces until the quota, deadline or rate says stop, then waits for completions.
/// Returns (produced, completed, wakeups, elapsed). Completed addresses end in `ready`.
fn send_loop(
    cfg: &GenConfig,
    sock: &mut XskSocket,
    ready: &mut Vec<u64>,
    quota: u64,
    len: u32,
) -> Result<(u64, u64, u64, Duration), GenError> {
    let start = Instant::now();
    let mut pacer = Pacer::new(cfg.rate_pps, start);
    let deadline = cfg.duration.map(|d| start + d);
    let (mut produced, mut completed, mut wakeups) = (0u64, 0u64, 0u64);
    let mut descs = [XdpDesc::default(); BATCH];
    let mut comp = [0u64; BATCH * 4];
    loop {
        let now = Instant::now();
        let stop = produced >= quota || deadline.is_some_and(|d| now >= d);
        if stop {
            break;
        }
        let n = (pacer.allowed(quota, produced, now) as usize)
            .min(ready.len())
            .min(BATCH);
        if n > 0 {
            for (d, &addr) in descs.iter_mut().zip(&ready[ready.len() - n..]) {
                *d = XdpDesc {
                    addr,
                    len,
                    options: 0,
                };
            }
            let put = sock.tx().produce(&descs[..n]);
            // `produce` takes a prefix: the rest goes back to `ready`.
            ready.truncate(ready.len() - n);
            ready.extend(descs[put..n].iter().map(|d| d.addr));
            produced += put as u64;
        }
        if produced > completed {
            kick(cfg, sock, &mut wakeups)?;
        }
        let got = sock.completion().consume(&mut comp);
        completed += got as u64;
        ready.extend_from_slice(&comp[..got]);
        if n == 0 && got == 0 {
            idle(cfg.rate_pps.is_some() && !ready.is_empty());
        }
    }
    let elapsed_send = start.elapsed();
    let drain_until = Instant::now() + DRAIN_LIMIT;
    while completed < produced && Instant::now() < drain_until {
        kick(cfg, sock, &mut wakeups)?;
        let got = sock.completion().consume(&mut comp);
        completed += got as u64;
        ready.extend_from_slice(&comp[..got]);
        if got == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    let elapsed = if completed == produced {
        start.elapsed()
    } else {
        elapsed_send
    };
    tracing::debug!(produced, completed, wakeups, "afxdp thread done");
    Ok((produced, completed, wakeups, elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_and_quota_bound_production() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut free = Pacer::new(None, t0);
        assert_eq!(free.allowed(100, 0, t0), 100);
        assert_eq!(free.allowed(100, 60, ms(9000)), 40);
        // 1000 pps: 0.2 s in, 201 may have been produced (one up front).
        let mut p = Pacer::new(Some(1000), t0);
        assert_eq!(p.allowed(u64::MAX, 0, ms(200)), 201);
        assert_eq!(p.allowed(u64::MAX, 201, ms(200)), 0);
        assert_eq!(p.allowed(10, 5, ms(1000)), 5, "the quota bounds too");
    }

    #[test]
    fn a_paced_sender_held_off_the_cpu_sends_at_most_a_burst_and_then_the_rate() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut p = Pacer::new(Some(100_000), t0);
        assert_eq!(p.allowed(u64::MAX, 0, ms(1)), 101);
        // Held off for 50 ms: 5 000 fell due, a burst goes out, the rest is forgiven.
        assert_eq!(p.allowed(u64::MAX, 101, ms(51)), PACE_BURST);
        let after = 101 + PACE_BURST;
        assert_eq!(p.allowed(u64::MAX, after, ms(51)), 0, "no catch-up");
        // ... and from there the rate again: 1 ms is 100 frames.
        assert_eq!(p.allowed(u64::MAX, after, ms(52)), 100);
    }
}
