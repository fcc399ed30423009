//! The worker actions beyond drop and l2fwd (reflect-twice, copybreak), busy-poll, and the
//! fill ring in a steady rxdrop run, on the veth lab, as root. The sender's veth
//! carries an XDP counter, so what comes back is counted where it arrives.

mod common;

use common::*;
use std::time::Duration;
use xdpool_lab::gen::count::RxCounter;
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::{LabConfig, LabStatus};

fn rule(action: &str) -> String {
    format!("[[rule]]\nproto = \"udp\"\ndst_port = \"9\"\naction = \"{action}\"\n")
}

/// Replaces the `[workers]` table of a config written by `write_config`.
fn set_workers(cfg: &std::path::Path, workers: &str) {
    patch_config(
        cfg,
        "[workers]\nmode = \"poll\"\n",
        &format!("[workers]\n{workers}\n"),
    );
}

/// Sends `n` UDP frames of `size` bytes to port 9 at `pps`.
fn send(st: &LabStatus, n: u64, size: usize, pps: Option<u64>) {
    let mut g = GenConfig::for_lab(st);
    g.count = Some(n);
    g.size = size;
    g.rate_pps = pps;
    g.chunk = 1024;
    g.dst_ports = PortRange::single(9);
    assert_eq!(gen::run(&g).expect("generator").sent, n);
}

/// Sends `n` jumbo UDP frames of `size` bytes to port 9 through the AF_XDP engine
/// (multi-buffer chains) on TX queue `queue`, at 5 000 frames/s.
///
/// The rate: the RX ring holds 4096 descriptors, 682 of these 6-chunk frames, and
/// only the worker's reading of RX makes room (the kernel may hold the lab's whole
/// fill ring of 8192 chunks, `rings.copy_fill`). At 50 000/s a worker that fell 14 ms
/// behind on a loaded CI machine (137 wakeups for 1000 frames, TX never the limit:
/// `rx_limited_by_tx` 3) let the kernel drop 300 (then at the fill ring, when it held
/// at most the RX ring's 4096 chunks): counted, but not what these tests are about.
/// At 5 000/s it would have to fall 136 ms behind.
fn send_jumbo(st: &LabStatus, n: u64, size: usize, queue: u32) {
    let mut g = GenConfig::for_lab(st);
    g.count = Some(n);
    g.size = size;
    g.rate_pps = Some(5_000);
    g.engine = gen::Engine::Afxdp;
    g.queue = queue;
    g.dst_ports = PortRange::single(9);
    assert_eq!(
        gen::run(&g).expect("AF_XDP generator, multi-buffer").sent,
        n
    );
}

/// Turns `interface.multi_buffer` on in a config written by `write_config`.
fn set_multi_buffer(cfg: &std::path::Path, queues: &str) {
    patch_config(cfg, queues, &format!("{queues}\nmulti_buffer = true"));
}

fn total(sock: &std::path::Path, key: &str) -> u64 {
    xdpool::internal::stats::control::query(sock)
        .map(|s| s["total"][key].as_u64().unwrap_or(0))
        .unwrap_or(0)
}

/// reflect-twice (was `mirror`): every such frame leaves twice (two descriptors, one frag, two
/// references), both copies arrive at the sender, every reference is released and
/// the chunk recycled. Small frames (packed frags) and large ones (a frag that is a
/// whole chunk) both.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn reflect_twice_delivers_each_frame_twice_and_releases_every_reference() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xm"),
            ..LabConfig::default()
        },
        "mirror",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("mirror", &[0], &rule("reflect-twice"));
    let back =
        RxCounter::attach_in(Some(&st.a.netns), &st.a.dev).expect("counter on the sender's veth");
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 5_000;
    send(st, N, 64, Some(100_000));
    send(st, N, 1400, Some(100_000));
    wait_for(Duration::from_secs(5), || {
        total(sock, "tx_completed") >= 4 * N
    });
    let returned = back
        .settle(Duration::from_millis(500), Duration::from_secs(10))
        .expect("counts");
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let rx = s["packets"].as_u64().unwrap();
    let mirrored = counter(&s, "reflected_twice");
    let tx = counter(&s, "tx_packets");
    eprintln!(
        "reflect-twice: sent {} rx {rx} mirrored {mirrored} tx {tx} returned {} ; drops {}",
        2 * N,
        returned.packets,
        s["drops"]
    );
    assert_eq!(
        mirrored
            + counter(&s, "rx_too_short")
            + counter(&s, "frag_alloc_failed")
            + counter(&s, "rx_rejected"),
        rx,
        "every received frame mirrored or named: {s:#}"
    );
    assert_eq!(
        tx + counter(&s, "tx_ring_full_drop"),
        2 * mirrored,
        "two descriptors per mirrored frame: {s:#}"
    );
    assert_eq!(counter(&s, "tx_completed"), tx, "every TX completed");
    assert_eq!(
        returned.packets, tx,
        "the sender got every copy sent back: {returned:?} / {s:#}"
    );
    assert!(
        returned.packets >= 2 * 2 * N * 9 / 10,
        "only {} of {} came back",
        returned.packets,
        4 * N
    );
    assert_eq!(rx + named_rx_drops(&s), 2 * N, "{s:#}");
    // Each mirrored frame's first completion is not the last reference.
    let refcnt = s["workers"][0]["pool"]["recycle_released_refcnt"]
        .as_u64()
        .unwrap();
    assert!(
        refcnt >= mirrored,
        "released_refcnt {refcnt} < mirrored {mirrored}"
    );
    assert_all_frames_back(&s);
}

/// copybreak: small frames are copied into packed frags (several TX descriptors in
/// one chunk) and their RX chunk goes straight back; larger frames are forwarded as
/// l2fwd. Fewer chunks than frames were in TX at the peak, and every frame came back.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn copybreak_packs_small_frames_into_fewer_chunks_and_returns_all() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xc"),
            ..LabConfig::default()
        },
        "copybreak",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("copybreak", &[0], &rule("copybreak"));
    // A large batch lets a burst sit in TX at once.
    set_workers(&cfg, "mode = \"poll\"\nbatch = 256\ncopybreak_bytes = 256");
    let back =
        RxCounter::attach_in(Some(&st.a.netns), &st.a.dev).expect("counter on the sender's veth");
    let run = XdpoolRun::start(&cfg, &[]);
    const SMALL: u64 = 20_000;
    const LARGE: u64 = 5_000;
    send(st, SMALL, 64, Some(500_000));
    wait_for(Duration::from_secs(5), || {
        total(sock, "tx_completed") >= SMALL
    });
    // One snapshot after the small frames: the peak gauge is theirs alone.
    let mid = xdpool::internal::stats::control::query(sock).expect("stats");
    let t = |k: &str| {
        mid["total"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing"))
    };
    let (small_rx, copied) = (t("rx_packets"), t("copybreak_copied"));
    let (peak_frames, peak_chunks) = (t("tx_inflight_max"), t("tx_inflight_chunks_at_max"));
    eprintln!("copybreak, 64-byte frames: rx {small_rx} copied {copied}; peak in TX {peak_frames} frames in {peak_chunks} chunks");
    assert_eq!(
        copied + t("rx_too_short") + t("frag_alloc_failed") + t("rx_rejected"),
        small_rx,
        "every small frame copied or named"
    );
    assert!(
        small_rx >= SMALL * 9 / 10,
        "only {small_rx} of {SMALL} received"
    );
    assert!(
        peak_frames >= 3,
        "a burst should sit in TX at once (peak {peak_frames})"
    );
    assert!(
        peak_chunks < peak_frames,
        "packed frags: {peak_frames} frames in TX occupied {peak_chunks} chunks"
    );
    // 64-byte frags, 32 to a 2048-byte chunk: the peak fits in about frames/32 chunks.
    assert!(
        peak_chunks <= peak_frames / 32 + 2,
        "{peak_frames} small frames should pack 32 to a chunk, got {peak_chunks} chunks"
    );
    send(st, LARGE, 512, Some(100_000));
    wait_for(Duration::from_secs(5), || {
        total(sock, "tx_completed") >= small_rx + LARGE * 9 / 10
    });
    let returned = back
        .settle(Duration::from_millis(500), Duration::from_secs(10))
        .expect("counts");
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let rx = s["packets"].as_u64().unwrap();
    let tx = counter(&s, "tx_packets");
    eprintln!("copybreak: total rx {rx} tx {tx} returned {}; peak in TX over the run {} frames in {} chunks; drops {}", returned.packets, counter(&s, "tx_inflight_max"), counter(&s, "tx_inflight_chunks_at_max"), s["drops"]);
    assert_eq!(
        counter(&s, "copybreak_copied"),
        copied,
        "512-byte frames (above copybreak_bytes) are not copied"
    );
    assert_eq!(
        tx + counter(&s, "tx_ring_full_drop")
            + counter(&s, "rx_too_short")
            + counter(&s, "frag_alloc_failed")
            + counter(&s, "rx_rejected"),
        rx,
        "{s:#}"
    );
    assert_eq!(counter(&s, "tx_completed"), tx, "every TX completed");
    assert_eq!(
        returned.packets, tx,
        "every frame sent back arrived: {returned:?} / {s:#}"
    );
    assert_eq!(rx + named_rx_drops(&s), SMALL + LARGE, "{s:#}");
    assert_all_frames_back(&s);
}

/// rxdrop at a steady 500 kpps: the worker keeps the fill ring topped up, so the
/// kernel never finds it empty. (An overloaded worker shows here too: in copy mode
/// the kernel holds at most an RX ring's worth of frames, so it runs out of fill
/// entries when the RX ring is full; the next test makes that happen.)
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn rxdrop_steady_state_never_empties_the_fill_ring() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xf"),
            ..LabConfig::default()
        },
        "fill",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("fill", &[0], &rule("drop"));
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 300_000;
    let (into_ring, refused) =
        veth_delivery(&st.a.netns, &st.a.dev, N, || send(st, N, 64, Some(500_000)));
    wait_for(Duration::from_secs(5), || {
        total(sock, "rx_packets") >= into_ring
    });
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    eprintln!(
        "rxdrop: {} of {N} received, {:.3} Mpps while active; drops {}",
        s["packets"],
        s["mpps"].as_f64().unwrap(),
        s["drops"]
    );
    assert_eq!(
        s["drops"]["rx_fill_ring_empty"], 0,
        "the fill ring ran dry: {s:#}"
    );
    assert_eq!(s["workers"][0]["xsk"]["rx_fill_ring_empty_descs"], 0);
    assert_eq!(
        counter(&s, "fill_pool_empty"),
        0,
        "the pool always had frames for the fill ring"
    );
    // A poll worker (the default poll_coalesce_us) napped between passes while
    // frames flowed (one nap follows the last frames anyway: ask for many), and the
    // fill ring still never ran dry (above).
    assert!(counter(&s, "poll_naps") >= 10, "{s:#}");
    // Exact from the generator on. Before the program, the sender's veth refuses
    // frames when the receiver's 256-slot ring is full (its NAPI deferred to
    // ksoftirqd on a loaded machine), and names them (ethtool's xdp_xmit_errors).
    let steered = s["xdp"]["steered"].as_u64().unwrap();
    assert_eq!(
        steered, into_ring,
        "the program steered every frame that reached it: {s:#}"
    );
    assert_eq!(
        s["packets"].as_u64().unwrap() + named_rx_drops(&s),
        steered,
        "{s:#}"
    );
    assert!(steered >= N / 2, "only {steered} of {N} reached the program (the sender's veth refused {refused}): too little traffic to call this a steady state: {s:#}");
    assert_eq!(counter(&s, "action_drop"), s["packets"].as_u64().unwrap());
    // Each dropped frame went straight from RX back to the fill ring (rx_drop), but
    // those the teardown drained (through the cache): one cached recycle per drop.
    assert_eq!(
        counter(&s, "rx_drop_to_fill") + counter(&s, "drained_rx"),
        counter(&s, "action_drop"),
        "{s:#}"
    );
    assert_eq!(
        s["workers"][0]["pool"]["recycle_cached"].as_u64(),
        Some(counter(&s, "action_drop")),
        "{s:#}"
    );
    assert_all_frames_back(&s);
}

/// rxdrop with a worker far slower than the traffic (a 64-slot RX ring, and a 1 ms
/// nap each time it finds the ring empty after taking frames), `rings.copy_fill =
/// "rx"`: in copy mode the worker hands the kernel no more frames than the RX ring
/// holds, so the kernel runs out of fill entries before the RX ring overflows and
/// drops each excess frame before copying it (`rx_fill_ring_empty`), never after
/// (`rx_ring_full`, a copy for nothing). The drops add up: the kernel counts such a
/// frame in `rx_dropped` too, and the summary counts it once.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn overloaded_copy_mode_worker_drops_before_the_copy_with_copy_fill_rx() {
    require_root!();
    let (s, steered) = overloaded_rxdrop("xo", "rx");
    let d = &s["drops"];
    assert!(
        d["rx_fill_ring_empty"].as_u64().unwrap() > steered / 10,
        "the worker kept up, so this proves nothing: {s:#}"
    );
    assert_eq!(
        d["rx_ring_full"], 0,
        "the kernel copied frames the RX ring had no room for: {s:#}"
    );
    assert_eq!(
        s["workers"][0]["xsk"]["rx_dropped"], d["rx_fill_ring_empty"],
        "the kernel's own count of the same drops"
    );
}

/// The same overload with the default `rings.copy_fill = "full"`: the kernel holds
/// the whole fill ring (8192 against the RX ring's 64), never finds it empty, and
/// drops the excess at the full RX ring, after its copy; named once, accounted.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn overloaded_copy_mode_worker_drops_at_the_full_rx_ring_with_the_whole_fill_ring() {
    require_root!();
    let (s, steered) = overloaded_rxdrop("xf", "full");
    let d = &s["drops"];
    assert!(
        d["rx_ring_full"].as_u64().unwrap() > steered / 10,
        "the worker kept up, so this proves nothing: {s:#}"
    );
    assert_eq!(
        d["rx_fill_ring_empty"], 0,
        "the kernel ran out of fill entries: the whole fill ring was not handed over: {s:#}"
    );
}

/// Runs rxdrop overloaded (see the two tests above) with `rings.copy_fill =
/// copy_fill`; checks what holds either way (every frame steered is received or
/// dropped for one named reason, no frame lost) and returns the summary and the
/// frames steered.
fn overloaded_rxdrop(prefix: &str, copy_fill: &str) -> (serde_json::Value, u64) {
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix(prefix),
            ..LabConfig::default()
        },
        "over",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("over", &[0], &rule("drop"));
    patch_config(
        &cfg,
        "rx = 4096",
        &format!("rx = 64\ncopy_fill = \"{copy_fill}\""),
    );
    set_workers(&cfg, "mode = \"poll\"\npoll_coalesce_us = 1000");
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 300_000;
    let (into_ring, refused) = veth_delivery(&st.a.netns, &st.a.dev, N, || send(st, N, 64, None));
    wait_for(Duration::from_secs(5), || total(sock, "rx_packets") > 0);
    // What is left in the 64-slot RX ring goes in one pass.
    std::thread::sleep(Duration::from_millis(300));
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let rx = s["packets"].as_u64().unwrap();
    let d = &s["drops"];
    eprintln!("rxdrop overloaded, copy_fill {copy_fill}: into the ring {into_ring} (veth refused {refused}), received {rx}; drops {d}");
    let steered = s["xdp"]["steered"].as_u64().unwrap();
    assert_eq!(steered, into_ring, "{s:#}");
    assert_eq!(
        d["rx_dropped"], 0,
        "a fill-ring-empty drop counted twice, or an unexplained drop: {s:#}"
    );
    assert_eq!(
        rx + named_rx_drops(&s),
        steered,
        "received or dropped for a named reason, each once: {s:#}"
    );
    assert_eq!(counter(&s, "action_drop"), rx);
    assert_all_frames_back(&s);
    (s, steered)
}

/// l2fwd faster than the TX ring drains: the worker leaves frames in the RX ring
/// (back-pressure, `rx_limited_by_tx`) instead of taking them and dropping them at a
/// full TX ring, so every frame it received went back out, and what the kernel could
/// not deliver is named at the RX ring.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn l2fwd_with_a_full_tx_ring_holds_frames_in_rx_instead_of_dropping_them() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xh"),
            ..LabConfig::default()
        },
        "hold",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("hold", &[0], &rule("l2fwd"));
    // A small TX ring, the kernel's 32 frames per sendto (a budget of the whole
    // ring would empty it at every kick) and the generator flat out: TX fills for sure.
    patch_config(&cfg, "tx = 2048", "tx = 64\ntx_budget = 0");
    set_workers(&cfg, "mode = \"spin\"");
    let back =
        RxCounter::attach_in(Some(&st.a.netns), &st.a.dev).expect("counter on the sender's veth");
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 500_000;
    let (into_ring, _) = veth_delivery(&st.a.netns, &st.a.dev, N, || send(st, N, 64, None));
    wait_for(Duration::from_secs(5), || {
        total(sock, "tx_completed") >= total(sock, "rx_packets") && total(sock, "rx_packets") > 0
    });
    let returned = back
        .settle(Duration::from_millis(500), Duration::from_secs(10))
        .expect("counts");
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let rx = s["packets"].as_u64().unwrap();
    let tx = counter(&s, "tx_packets");
    eprintln!("l2fwd, tx ring 64: offered {N}, into the ring {into_ring}, rx {rx}, tx {tx}, back {}, passes limited by TX room {}; drops {}", returned.packets, counter(&s, "rx_limited_by_tx"), s["drops"]);
    assert!(
        counter(&s, "rx_limited_by_tx") > 0,
        "the TX ring never filled, so this proves nothing: {s:#}"
    );
    assert_eq!(
        counter(&s, "tx_ring_full_drop"),
        0,
        "a received frame was dropped at a full TX ring: {s:#}"
    );
    assert_eq!(tx, rx, "every received frame was sent back: {s:#}");
    assert_eq!(counter(&s, "tx_completed"), tx, "every TX completed");
    assert_eq!(
        returned.packets, tx,
        "the sender got every frame sent back: {returned:?} / {s:#}"
    );
    assert_eq!(s["xdp"]["steered"].as_u64().unwrap(), into_ring, "{s:#}");
    assert_eq!(
        rx + named_rx_drops(&s),
        into_ring,
        "received or named at the RX ring: {s:#}"
    );
    assert!(rx >= N / 100, "only {rx} of {N} forwarded: {s:#}");
    assert_all_frames_back(&s);
}

/// busy-poll: the socket options are set when the worker takes its socket, the loop
/// drives RX with recvfrom, and l2fwd still returns every frame.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn busy_poll_sets_socket_options_and_forwards_every_frame() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xb"),
            ..LabConfig::default()
        },
        "busy",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("busy", &[0], &rule("l2fwd"));
    set_workers(&cfg, "mode = \"busy-poll\"\nbusy_poll_budget = 64");
    let back =
        RxCounter::attach_in(Some(&st.a.netns), &st.a.dev).expect("counter on the sender's veth");
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 10_000;
    send(st, N, 64, Some(100_000));
    wait_for(Duration::from_secs(5), || {
        total(sock, "tx_completed") >= N * 9 / 10
    });
    let returned = back
        .settle(Duration::from_millis(500), Duration::from_secs(10))
        .expect("counts");
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    eprintln!(
        "busy-poll: rx {} returned {} busy-poll calls {}",
        s["packets"],
        returned.packets,
        counter(&s, "busy_poll_calls")
    );
    // As root on a kernel with CONFIG_NET_RX_BUSY_POLL the options are accepted.
    assert_eq!(counter(&s, "busy_poll_sockets"), 1, "{s:#}");
    assert_eq!(counter(&s, "busy_poll_refused"), 0);
    assert!(
        counter(&s, "busy_poll_calls") > 0,
        "RX is driven by recvfrom in busy-poll mode"
    );
    // veth gives AF_XDP sockets no NAPI id (Linux 6.18), so there is nothing for
    // recvfrom to poll: the worker notices with the first frames, says so, and waits
    // in poll() instead of spinning against the NAPI thread that delivers.
    assert_eq!(counter(&s, "busy_poll_no_napi"), 1, "{s:#}");
    let tx = counter(&s, "tx_packets");
    assert_eq!(
        tx + counter(&s, "tx_ring_full_drop"),
        s["packets"].as_u64().unwrap()
    );
    assert_eq!(counter(&s, "tx_completed"), tx);
    assert_eq!(returned.packets, tx, "{returned:?} / {s:#}");
    assert!(
        returned.packets >= N * 9 / 10,
        "only {} of {N} came back",
        returned.packets
    );
    assert_all_frames_back(&s);
}

/// Multi-buffer frames on the second queue of a two-queue lab: the AF_XDP generator
/// sends on queue 1, so the peer receives them there; queue 1's worker takes each
/// 9000-byte chain as one frame, queue 0's sees none, and every frame is accounted.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn jumbo_frames_on_the_second_queue_arrive_whole_at_its_worker() {
    require_root!();
    const SIZE: usize = 9000;
    const N: u64 = 1_000;
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xk"),
            mtu: Some(9000),
            queues: Some(2),
            ..LabConfig::default()
        },
        "jumboq",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("jumboq", &[0, 1], &rule("drop"));
    set_multi_buffer(&cfg, "queues = [0, 1]");
    let run = XdpoolRun::start(&cfg, &[]);
    send_jumbo(st, N, SIZE, 1);
    wait_for(Duration::from_secs(5), || {
        total(sock, "rx_packets") >= N * 9 / 10
    });
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let workers = s["workers"].as_array().unwrap();
    let per_queue: Vec<(u64, u64, u64)> = workers
        .iter()
        .map(|w| {
            (
                w["queue"].as_u64().unwrap(),
                counter(w, "rx_packets"),
                counter(w, "rx_multi_buffer"),
            )
        })
        .collect();
    eprintln!("jumbo on queue 1: per queue (queue, rx, multi-buffer) {per_queue:?}");
    let rx = s["packets"].as_u64().unwrap();
    assert!(
        rx >= N * 9 / 10,
        "only {rx} of {N} jumbo frames arrived: {s:#}"
    );
    assert_eq!(
        per_queue,
        vec![(0, 0, 0), (1, rx, rx)],
        "all on queue 1, each a multi-buffer frame"
    );
    assert_eq!(
        s["bytes"].as_u64().unwrap(),
        rx * SIZE as u64,
        "each counted once, whole: {s:#}"
    );
    assert_eq!(
        rx + named_rx_drops(&s),
        s["xdp"]["steered"].as_u64().unwrap(),
        "{s:#}"
    );
    assert_eq!(counter(&s, "rx_chain_dropped"), 0);
    assert_all_frames_back(&s);
}

/// Jumbo frames (MTU 9000) with `interface.multi_buffer = true`: the AF_XDP generator
/// sends each 9000-byte frame as a chain of 5 chunks, the worker receives it as a
/// chain of 6 buffers (`XDP_PKT_CONTD`), counts one frame of 9000 bytes, and with
/// l2fwd sends the same chain back, where the sender's counter sees whole frames.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn jumbo_frames_arrive_whole_and_l2fwd_returns_them_whole() {
    require_root!();
    const SIZE: usize = 9000;
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xj"),
            mtu: Some(9000),
            ..LabConfig::default()
        },
        "jumbo",
    );
    let st = &rig.st;
    let back =
        RxCounter::attach_in(Some(&st.a.netns), &st.a.dev).expect("counter on the sender's veth");
    for (action, n) in [("drop", 2_000u64), ("l2fwd", 1_000)] {
        let cfg = rig.config(&format!("jumbo-{action}"), &[0], &rule(action));
        set_multi_buffer(&cfg, "queues = [0]");
        let before = back.counts().unwrap();
        let run = XdpoolRun::start(&cfg, &[]);
        send_jumbo(st, n, SIZE, 0);
        let returned = back
            .settle(Duration::from_millis(300), Duration::from_secs(10))
            .expect("counts");
        let (code, s, out) = run.stop();
        assert_eq!(code, Some(0), "{out}");
        let lost = named_rx_drops(&s);
        eprintln!(
            "jumbo {action}: rx {} ({} B) multi-buffer {} dropped {lost}",
            s["packets"],
            s["bytes"],
            counter(&s, "rx_multi_buffer")
        );
        let rx = s["packets"].as_u64().unwrap();
        let steered = s["xdp"]["steered"].as_u64().unwrap();
        assert_eq!(
            rx + lost,
            steered,
            "every frame the program steered was received or dropped for a named reason: {s:#}"
        );
        assert!(
            rx >= n * 9 / 10,
            "only {rx} of {n} jumbo frames arrived: {s:#}"
        );
        assert_eq!(
            s["bytes"].as_u64().unwrap(),
            rx * SIZE as u64,
            "each counted once, whole: {s:#}"
        );
        assert_eq!(
            counter(&s, "rx_multi_buffer"),
            rx,
            "every 9000-byte frame spans several chunks"
        );
        assert_eq!(counter(&s, "rx_chain_dropped"), 0);
        if action == "l2fwd" {
            let tx = counter(&s, "tx_packets");
            assert_eq!(tx + counter(&s, "tx_ring_full_drop"), rx);
            let got = returned.packets - before.packets;
            assert_eq!(
                got, tx,
                "every frame sent back arrived at the sender: {returned:?} / {s:#}"
            );
            assert_eq!(
                returned.bytes - before.bytes,
                got * SIZE as u64,
                "and arrived whole"
            );
        }
        assert_all_frames_back(&s);
    }
}
