//! Ports in two network namespaces on one UMEM (issue 15), as root, on the split
//! forward lab (`xdpool lab up --topology forward --split-netns`):
//!
//! P-src (xdps0) -> port "in" (xdpf0, in P-fwd) -> port "out" (xdpf1, in P-fwd2)
//! -> P-dst (xdpd0). Each port's socket, program, ethtool and neighbour lookups are
//! in its own namespace; the devices' ifindexes collide across the two (every veth
//! pair made first in a fresh namespace gets the same numbers), so a step done in
//! the wrong namespace binds, attaches or listens to the wrong device.
//! The generator numbers every frame; the receiver checks every byte.

mod common;

use common::*;
use std::net::SocketAddr;
use std::time::Duration;
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::sink::SeqSink;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::forward::{outer_end, ForwardLab, Link};

/// `n` sequenced UDP frames of `size` bytes to port `dst_port`, numbers from `first`,
/// at `pps`, from the sender through port "in". Returns frames sent.
fn send(prefix: &str, dst_port: u16, n: u64, first: u64, size: usize, pps: u64) -> u64 {
    let g = GenConfig {
        count: Some(n),
        seq_first: first,
        size,
        rate_pps: Some(pps),
        dst_ports: PortRange::single(dst_port),
        ..GenConfig::for_forward_lab(prefix).unwrap()
    };
    gen::run(&g).expect("generator from the sender").sent
}

/// The two tests pace traffic for a quiet machine: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn ifindex_in(ns: &str, dev: &str) -> u32 {
    xdpool::internal::netns::ifindex_in(Some(ns), dev).unwrap()
}

/// 100 000 frames from P-src through "in" (P-fwd) out of "out" (P-fwd2) to P-dst:
/// each arrives once, byte-exact; "in"'s and "out"'s workers (two cores) hand the
/// frames over on the one UMEM, and they come home through the return ring.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn forward_between_ports_in_two_namespaces_delivers_each_frame_once_byte_exact() {
    require_root!();
    let _s = serial();
    let rig = ForwardRig::up_split(&unique_prefix("xnf"), "nsfwd");
    let prefix = rig.st.names.prefix.clone();
    let (fwd, fwd2) = (
        rig.st.names.fwd.clone(),
        rig.st.names.fwd2.clone().expect("a split lab"),
    );
    assert_eq!(
        (
            rig.st.ports[0].netns.as_str(),
            rig.st.ports[1].netns.as_str()
        ),
        (fwd.as_str(), fwd2.as_str())
    );
    // The case that makes the namespace matter: the same ifindex names xdpf0 in P-fwd
    // and xdpf1 in P-fwd2.
    eprintln!(
        "ifindex: xdpf0 {} in {fwd}, xdpf1 {} in {fwd2}",
        ifindex_in(&fwd, "xdpf0"),
        ifindex_in(&fwd2, "xdpf1")
    );
    const N: u64 = 100_000;
    let cfg = rig.config(
        "nsfwd",
        &["in", "out"],
        "cores = [0, 1]\nmode = \"poll\"",
        &forward_rule(9, "in", "out", ""),
    );
    // A deeper fill ring: a worker descheduled on a loaded machine for up to 300 ms
    // at 25 000/s still finds fill entries (4096 were not always enough at a load of 7).
    patch_config(&cfg, "fill = 4096", "fill = 8192");
    let sink = SeqSink::udp(
        &rig.st.names.dst,
        SocketAddr::from((outer_end(Link::Out).ipv4, 9)),
        0,
        N,
    )
    .expect("UDP receiver in P-dst");
    let run = XdpoolRun::start(&cfg, &[]);
    // Paced below what a loaded two-core machine forwards without loss (4 s; at
    // 50 000/s a load average of 7 on two cores made the kernel miss fill entries).
    assert_eq!(send(&prefix, 9, N / 2, 0, 64, 25_000), N / 2);
    assert_eq!(send(&prefix, 9, N / 2, N / 2, 1400, 25_000), N / 2);
    let r = sink.settle(Duration::from_millis(1000), Duration::from_secs(20));
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    assert!(
        r.exact(),
        "receiver in P-dst: {}; first missing {:?}; xdpool's drops {:#} counters {:#}",
        r.line(),
        sink.missing_sample(8),
        s["drops"],
        s["counters"]
    );
    assert_eq!(
        r.bytes,
        (N / 2) * (64 - 42) + (N / 2) * (1400 - 42),
        "UDP payload bytes"
    );
    assert_eq!(s["packets"].as_u64().unwrap(), N, "xdpool received: {s:#}");
    assert_eq!(counter(&s, "forwarded"), N, "{s:#}");
    assert_eq!(
        counter(&s, "foreign_completed"),
        N,
        "every frame completed on out's worker and went home: {s:#}"
    );
    assert!(
        pool_counter(&s, "recycle_ring") > 0,
        "no frame came back through a return ring: {s:#}"
    );
    assert_all_frames_back(&s);
}

/// P-fwd2 ("out"'s namespace) deleted and made again under traffic, as a container
/// restart does (the old veth pairs go with it). Port "in", in P-fwd, keeps its
/// socket throughout and takes every frame sent; the frames meant for "out" while it
/// is away are each delivered or named in a counter; once the new P-fwd2 appears
/// "out" re-attaches there and every frame arrives again, once, byte-exact.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn replacing_one_namespace_under_traffic_keeps_the_other_port_running() {
    require_root!();
    let _s = serial();
    let rig = ForwardRig::up_split(&unique_prefix("xnr"), "nsrepl");
    let prefix = rig.st.names.prefix.clone();
    const NA: u64 = 60_000; // 2 s at 30 000/s
    const N2: u64 = 20_000;
    const PROBE: u64 = 1 << 40;
    let cfg = rig.config(
        "nsrepl",
        &["in", "out"],
        "mode = \"poll\"",
        &forward_rule(9, "in", "out", ""),
    );
    patch_config(&cfg, "fill = 4096", "fill = 8192");
    let sink = SeqSink::udp(
        &rig.st.names.dst,
        SocketAddr::from((outer_end(Link::Out).ipv4, 9)),
        0,
        NA + N2,
    )
    .expect("UDP receiver in P-dst");
    let run = XdpoolRun::start(&cfg, &[]);
    let sent = std::thread::scope(|s| {
        let a = s.spawn(|| send(&prefix, 9, NA, 0, 64, 30_000));
        std::thread::sleep(Duration::from_millis(700));
        ForwardLab::replace_fwd2(rig.lab_config()).expect("replace P-fwd2");
        a.join().unwrap()
    });
    assert_eq!(sent, NA);
    let before = sink.report();
    assert!(
        before.unique > 0 && before.unique < NA,
        "across the replacement: {}",
        before.line()
    );
    // Probes (numbers outside the expected range) until "out" forwards again, in the new P-fwd2.
    let mut probes = 0;
    let back = wait_for(Duration::from_secs(15), || {
        send(&prefix, 9, 1, PROBE + probes, 64, 1000);
        probes += 1;
        std::thread::sleep(Duration::from_millis(100));
        sink.report().out_of_range > 0
    });
    assert!(
        back,
        "port out did not forward within 15 s of the new P-fwd2"
    );
    assert_eq!(send(&prefix, 9, N2, NA, 64, 30_000), N2);
    let r = sink.settle(Duration::from_millis(1000), Duration::from_secs(20));
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!((r.duplicates, r.corrupt), (0, 0), "{}", r.line());
    let missing_after = sink
        .missing_sample(usize::MAX)
        .into_iter()
        .filter(|&m| m >= NA)
        .count();
    assert_eq!(
        missing_after,
        0,
        "frames sent after the new namespace were lost: {}",
        r.line()
    );
    let n = |v: &serde_json::Value, k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {v:#}"))
    };
    let workers = s["workers"].as_array().expect("workers");
    let by_port = |p: &str| {
        &workers
            .iter()
            .find(|w| w["port"] == p)
            .unwrap_or_else(|| panic!("no worker for port {p}: {s:#}"))["counters"]
    };
    let (in_c, out_c) = (by_port("in"), by_port("out"));
    // "in" kept its one socket (given up only at the stop) and took every frame.
    assert_eq!(
        (n(in_c, "socket_attaches"), n(in_c, "socket_releases")),
        (1, 1),
        "port in was taken down: {in_c:#}"
    );
    assert_eq!(n(in_c, "rx_packets"), NA + N2 + probes, "port in: {in_c:#}");
    // "out" came back once, on a new socket in the new namespace.
    assert_eq!(n(out_c, "socket_attaches"), 2, "{out_c:#}");
    // One loss (out's device went with the old namespace; counted as what was seen
    // first: down, deleted or netns_replaced) and one re-attach.
    assert_eq!(
        (
            &s["device"]["losses"],
            &s["device"]["reattaches"],
            &s["device"]["reattach_failures"]
        ),
        (&1.into(), &1.into(), &0.into()),
        "{:#}",
        s["device"]
    );
    // Every frame "in" took: forwarded or dropped named; on out's TX ring completed
    // or reclaimed with the old socket, once.
    assert_eq!(
        n(in_c, "rx_packets"),
        n(in_c, "forwarded") + n(in_c, "neigh_miss_drop"),
        "{in_c:#}"
    );
    let named = n(out_c, "egress_port_down_drop")
        + n(out_c, "tx_ring_full_drop")
        + n(in_c, "egress_port_down_drop")
        + n(in_c, "egress_full_drop");
    assert_eq!(
        n(in_c, "forwarded"),
        n(out_c, "foreign_tx") + named,
        "in: {in_c:#}\nout: {out_c:#}"
    );
    assert_eq!(
        n(out_c, "foreign_tx"),
        n(out_c, "foreign_completed") + n(out_c, "foreign_reclaimed"),
        "{out_c:#}"
    );
    let completed = n(out_c, "foreign_completed");
    assert!(
        r.unique + r.out_of_range <= completed,
        "delivered {} + probes {} > completed on out {completed}",
        r.unique,
        r.out_of_range
    );
    eprintln!(
        "P-fwd2 replaced under traffic: sent {} taken by in {} delivered {} (probes {}); neigh misses {}; named drops {named}; out: on TX {} completed {completed} reclaimed {}",
        NA + N2 + probes,
        n(in_c, "rx_packets"),
        r.unique,
        r.out_of_range,
        n(in_c, "neigh_miss_drop"),
        n(out_c, "foreign_tx"),
        n(out_c, "foreign_reclaimed"),
    );
    assert_all_frames_back(&s);
}

/// P-fwd ("in"'s namespace, where the UMEM's first socket was made and the process
/// lives) replaced while "out" runs in P-fwd2: every port goes down (the UMEM goes
/// with its first socket), the control thread follows the name, and both ports come
/// back, "out" still in P-fwd2, "in" in the new P-fwd; every frame sent afterwards
/// arrives once, byte-exact, and every frame is accounted at the end.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn replacing_the_namespace_of_the_umems_first_socket_brings_both_ports_back() {
    require_root!();
    let _s = serial();
    let rig = ForwardRig::up_split(&unique_prefix("xnh"), "nshome");
    let prefix = rig.st.names.prefix.clone();
    const N1: u64 = 20_000;
    const N2: u64 = 20_000;
    const PROBE: u64 = 1 << 40;
    let cfg = rig.config(
        "nshome",
        &["in", "out"],
        "mode = \"poll\"",
        &forward_rule(9, "in", "out", ""),
    );
    patch_config(&cfg, "fill = 4096", "fill = 8192");
    let sink = SeqSink::udp(
        &rig.st.names.dst,
        SocketAddr::from((outer_end(Link::Out).ipv4, 9)),
        0,
        N1 + N2,
    )
    .expect("UDP receiver in P-dst");
    let run = XdpoolRun::start(&cfg, &[]);
    assert_eq!(send(&prefix, 9, N1, 0, 64, 30_000), N1);
    let r1 = sink.settle(Duration::from_millis(500), Duration::from_secs(10));
    assert_eq!(r1.unique, N1, "before: {}", r1.line());
    ForwardLab::replace_netns(rig.lab_config(), xdpool_lab::lab::forward::Role::Fwd)
        .expect("replace P-fwd");
    let mut probes = 0;
    let back = wait_for(Duration::from_secs(15), || {
        // The sender's device is new too: a send may fail while it comes up.
        let g = GenConfig {
            count: Some(1),
            seq_first: PROBE + probes,
            size: 64,
            rate_pps: Some(1000),
            ..GenConfig::for_forward_lab(&prefix).unwrap()
        };
        let _ = gen::run(&g);
        probes += 1;
        std::thread::sleep(Duration::from_millis(100));
        sink.report().out_of_range > 0
    });
    assert!(back, "no forwarding within 15 s of the new P-fwd");
    assert_eq!(send(&prefix, 9, N2, N1, 64, 30_000), N2);
    let r = sink.settle(Duration::from_millis(1000), Duration::from_secs(20));
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        (r.unique, r.duplicates, r.corrupt),
        (N1 + N2, 0, 0),
        "{}",
        r.line()
    );
    let workers = s["workers"].as_array().expect("workers");
    for w in workers {
        assert_eq!(
            w["counters"]["socket_attaches"], 2,
            "each port came back once: {w:#}"
        );
    }
    assert_eq!(s["device"]["reattach_failures"], 0, "{:#}", s["device"]);
    assert_all_frames_back(&s);
}
