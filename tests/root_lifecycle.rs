//! The device lifecycle as a user meets it (issues 14 and 17), on the veth lab, as
//! root: RX queues no socket serves are warned about and reported, `queues = "all"`
//! follows the device's queue count, `ready` waits for carrier, held frames are
//! counted as the drops they are and the summary's pool block is taken after the
//! pool is destroyed, and a replaced network namespace is followed.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::{Lab, LabConfig, LabStatus};

const DROP_UDP9: &str = "[[rule]]\nproto = \"udp\"\ndst_port = \"9\"\naction = \"drop\"\n";

/// These tests share two cores with everything else: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sh(cmd: &[&str]) {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .expect("command runs");
    assert!(
        out.status.success(),
        "{}: {}",
        cmd.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn snap(sock: &Path) -> Value {
    xdpool::internal::stats::control::query(sock).unwrap_or(Value::Null)
}

fn rx(sock: &Path) -> u64 {
    snap(sock)["total"]["rx_packets"].as_u64().unwrap_or(0)
}

/// `n` UDP frames to port 9 from side a, many flows over `cores` sender threads (so
/// that a 2-queue veth spreads them). Returns how many the sender's veth put into
/// the receiver's rings. The rest it refused because a 256-slot ring was full (the
/// receiver's NAPI deferred to ksoftirqd on a loaded machine); ethtool names them
/// (`xdp_xmit_errors`) and they never reach the XDP program, so the tests count from
/// what was delivered.
fn send(st: &LabStatus, n: u64, cores: &[usize]) -> u64 {
    let (into_ring, refused) = veth_delivery(&st.a.netns, &st.a.dev, n, || {
        let mut g = GenConfig::for_lab(st);
        g.count = Some(n);
        g.cores = cores.to_vec();
        g.rate_pps = Some(50_000);
        g.chunk = 1024;
        g.dst_ports = PortRange::single(9);
        assert_eq!(gen::run(&g).expect("generator").sent, n);
    });
    if refused > 0 {
        eprintln!("the sender's veth refused {refused} of {n} (receiver's ring full)");
    }
    assert!(
        into_ring >= n / 2,
        "only {into_ring} of {n} reached the receiver (its veth refused {refused}): too little traffic to test with"
    );
    into_ring
}

/// A device with two RX queues served on [0] only: a WARN names the device, the
/// queue left out and what to do, the summary says so, and the XDP program passed
/// what RSS put on queue 1. `queues = "all"` on the same device: both served, no
/// warning, nothing passed for lack of a socket.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn unserved_rx_queues_are_warned_about_and_all_serves_them() {
    require_root!();
    let _s = serial();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("lq"),
            queues: Some(2),
            ..LabConfig::default()
        },
        "lq",
    );
    const N: u64 = 4000;

    let cfg = rig.config("q0", &[0], DROP_UDP9);
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        run.ready_within(Duration::from_secs(20)),
        "not ready: {}",
        run.log()
    );
    let delivered = send(&rig.st, N, &[0, 1]);
    wait_for(Duration::from_secs(5), || {
        rx(&rig.sock) + snap(&rig.sock)["xdp"]["no_socket"].as_u64().unwrap_or(0) >= delivered
    });
    let (code, s, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    let dev = &rig.st.b.dev;
    let warn = log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("have no xdpool socket"))
        .unwrap_or_else(|| panic!("no WARN for the unserved queue:\n{log}"));
    assert!(
        warn.contains(dev.as_str()) && warn.contains("[1]") && warn.contains("queues = \"all\""),
        "the WARN names the device, queue 1 and the fix: {warn}"
    );
    assert_eq!(s["device"]["unserved_rx_queues"], 1, "{:#}", s["device"]);
    assert_eq!(
        s["device"]["queues"][0]["unserved"],
        serde_json::json!([1]),
        "{:#}",
        s["device"]
    );
    let no_socket = s["xdp"]["no_socket"].as_u64().unwrap();
    assert!(
        no_socket > 0,
        "RSS put frames on queue 1, which nobody serves: {:#}",
        s["xdp"]
    );
    assert_eq!(
        s["packets"].as_u64().unwrap() + no_socket + named_rx_drops(&s),
        delivered,
        "{s:#}"
    );
    assert_all_frames_back(&s);

    patch_config(&cfg, "queues = [0]", "queues = \"all\"");
    patch_config(&cfg, "frames = 16384", "frames = 32768");
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        run.ready_within(Duration::from_secs(20)),
        "not ready: {}",
        run.log()
    );
    let delivered = send(&rig.st, N, &[0, 1]);
    wait_for(Duration::from_secs(5), || rx(&rig.sock) >= delivered);
    let (code, s, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("have no xdpool socket"), "{log}");
    assert_eq!(s["device"]["unserved_rx_queues"], 0, "{:#}", s["device"]);
    assert_eq!(
        s["device"]["queues"][0]["served"],
        serde_json::json!([0, 1]),
        "{:#}",
        s["device"]
    );
    let per_queue: Vec<u64> = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| counter(w, "rx_packets"))
        .collect();
    assert!(
        per_queue.len() == 2 && per_queue.iter().all(|n| *n > 0),
        "both queues' workers receive: {per_queue:?}"
    );
    assert_eq!(s["xdp"]["no_socket"], 0, "{:#}", s["xdp"]);
    assert_eq!(
        s["packets"].as_u64().unwrap() + named_rx_drops(&s),
        delivered,
        "{s:#}"
    );
    assert_all_frames_back(&s);
}

/// `queues = "all"` under a running instance: the channel count raised with
/// `ethtool -L` gets a socket on the new queue; the device deleted and made again
/// with one queue gets one socket, and no warning.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn queues_all_follows_the_channel_count_and_a_recreated_device() {
    require_root!();
    let _s = serial();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("lf"),
            queues: Some(2),
            ..LabConfig::default()
        },
        "lf",
    );
    let (a, b) = (&rig.st.a, &rig.st.b);
    // veth refuses native XDP on fewer RX queues than its peer has TX queues.
    sh(&[
        "ip", "netns", "exec", &a.netns, "ethtool", "-L", &a.dev, "tx", "1",
    ]);
    sh(&[
        "ip", "netns", "exec", &b.netns, "ethtool", "-L", &b.dev, "rx", "1",
    ]);
    let cfg = rig.config("all", &[0], DROP_UDP9);
    patch_config(&cfg, "queues = [0]", "queues = \"all\"");
    patch_config(&cfg, "frames = 16384", "frames = 32768");
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        run.ready_within(Duration::from_secs(20)),
        "not ready: {}",
        run.log()
    );
    let queues = |s: &Value| {
        (
            s["device"]["queues"][0]["served"].clone(),
            s["device"]["queues"][0]["device_rx_queues"].clone(),
        )
    };
    assert_eq!(
        queues(&snap(&rig.sock)),
        (serde_json::json!([0]), serde_json::json!(1))
    );

    sh(&[
        "ip", "netns", "exec", &b.netns, "ethtool", "-L", &b.dev, "rx", "2",
    ]);
    let grew = wait_for(Duration::from_secs(5), || {
        queues(&snap(&rig.sock)) == (serde_json::json!([0, 1]), serde_json::json!(2))
    });
    assert!(
        grew,
        "no socket on the new queue: {:#}\n{}",
        snap(&rig.sock)["device"],
        run.log()
    );

    sh(&["ip", "-n", &a.netns, "link", "del", &a.dev]);
    sh(&[
        "ip", "-n", &a.netns, "link", "add", &a.dev, "type", "veth", "peer", "name", &b.dev,
        "netns", &b.netns,
    ]);
    sh(&["ip", "-n", &a.netns, "link", "set", &a.dev, "up"]);
    sh(&["ip", "-n", &b.netns, "link", "set", &b.dev, "up"]);
    let shrank = wait_for(Duration::from_secs(5), || {
        queues(&snap(&rig.sock)) == (serde_json::json!([0]), serde_json::json!(1))
    });
    assert!(
        shrank,
        "not back on the one-queue device: {:#}\n{}",
        snap(&rig.sock)["device"],
        run.log()
    );
    let (code, s, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("have no xdpool socket"), "{log}");
    assert_eq!(s["device"]["unserved_rx_queues"], 0);
    assert!(
        s["device"]["reattaches"].as_u64().unwrap() >= 2,
        "{:#}",
        s["device"]
    );
    assert_all_frames_back(&s);
}

/// Carrier follows the peer's admin state on veth: with the peer down xdpool
/// attaches but does not say `ready`, and says what it waits for; with the peer up
/// it does.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn ready_waits_for_carrier() {
    require_root!();
    let _s = serial();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("lc"),
            ..LabConfig::default()
        },
        "lc",
    );
    let a = &rig.st.a;
    sh(&["ip", "-n", &a.netns, "link", "set", &a.dev, "down"]);
    let cfg = rig.config("c", &[0], DROP_UDP9);
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        wait_for(Duration::from_secs(20), || snap(&rig.sock)["device"]
            ["state"]
            == "attached"),
        "never attached: {}",
        run.log()
    );
    assert!(
        !run.ready_within(Duration::from_millis(1500)),
        "ready without carrier:\n{}",
        run.log()
    );
    assert!(
        run.log().contains("not ready yet: waiting for carrier"),
        "{}",
        run.log()
    );
    sh(&["ip", "-n", &a.netns, "link", "set", &a.dev, "up"]);
    assert!(
        run.ready_within(Duration::from_secs(5)),
        "not ready once the carrier came:\n{}",
        run.log()
    );
    const N: u64 = 2000;
    let delivered = send(&rig.st, N, &[0]);
    wait_for(Duration::from_secs(5), || rx(&rig.sock) >= delivered);
    let (code, s, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(
        s["packets"].as_u64().unwrap() + named_rx_drops(&s),
        delivered,
        "{s:#}"
    );
}

/// `--hold-frames`: frames the drop rule matched and the application kept are
/// dropped when it returns them, so `action_drop` = packets; the per-worker pool
/// block is read after the pool is destroyed and agrees with the region (inflight 0).
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn held_frames_are_counted_and_the_pool_block_is_final() {
    require_root!();
    let _s = serial();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("lh"),
            ..LabConfig::default()
        },
        "lh",
    );
    let cfg = rig.config("h", &[0], DROP_UDP9);
    let run = XdpoolRun::spawn(&cfg, &["--hold-frames", "16"]);
    assert!(
        run.ready_within(Duration::from_secs(20)),
        "not ready: {}",
        run.log()
    );
    const N: u64 = 3000;
    let delivered = send(&rig.st, N, &[0]);
    wait_for(Duration::from_secs(5), || rx(&rig.sock) >= delivered);
    let live = snap(&rig.sock);
    let held_now = live["total"]["held"].as_u64().unwrap();
    assert_eq!(held_now, 16, "{:#}", live["total"]);
    assert_eq!(
        live["total"]["action_drop"].as_u64().unwrap() + held_now,
        live["total"]["rx_packets"].as_u64().unwrap(),
        "while held: drops + held = received"
    );
    let (code, s, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    let packets = s["packets"].as_u64().unwrap();
    assert_eq!(
        s["drops"]["action_drop"].as_u64().unwrap(),
        packets,
        "held frames returned at the end are drops: {:#}",
        s["counters"]
    );
    assert_eq!(counter(&s, "held_taken"), 16);
    let pool = &s["workers"][0]["pool"];
    assert_eq!(pool["destroyed"], true, "{pool:#}");
    assert_eq!(
        pool["inflight"], 0,
        "the pool block is taken after the destroy: {pool:#}"
    );
    assert_all_frames_back(&s);
}

/// The configured namespace deleted and made again (with its veth) under traffic,
/// as a container restart does: xdpool notices, enters the new one, re-attaches,
/// and counts traffic again; the accounting is exact at the end.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn a_replaced_namespace_is_followed() {
    require_root!();
    let _s = serial();
    let lab = LabConfig {
        prefix: unique_prefix("ln"),
        ..LabConfig::default()
    };
    let rig = LabRig::up(lab.clone(), "ln");
    let cfg = rig.config("n", &[0], DROP_UDP9);
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        run.ready_within(Duration::from_secs(20)),
        "not ready: {}",
        run.log()
    );
    const N: u64 = 3000;
    let delivered = send(&rig.st, N, &[0]);
    assert!(
        wait_for(Duration::from_secs(5), || rx(&rig.sock) >= delivered),
        "{}",
        run.log()
    );
    // Traffic while the namespaces go (the sender fails once its device is gone).
    let st = rig.st.clone();
    let traffic = std::thread::spawn(move || {
        let mut g = GenConfig::for_lab(&st);
        g.duration = Some(Duration::from_millis(600));
        g.rate_pps = Some(20_000);
        g.chunk = 256;
        let _ = gen::run(&g);
    });
    std::thread::sleep(Duration::from_millis(200));
    Lab::down(&lab.prefix).expect("lab down");
    let st2 = Lab::up(&lab).expect("lab up again");
    traffic.join().unwrap();
    let back = wait_for(Duration::from_secs(5), || {
        let d = snap(&rig.sock)["device"].clone();
        d["netns_replaced"] == 1 && d["state"] == "attached"
    });
    assert!(
        back,
        "not re-attached in the new namespace: {:#}\n{}",
        snap(&rig.sock)["device"],
        run.log()
    );
    let before = rx(&rig.sock);
    let delivered = send(&st2, N, &[0]);
    assert!(
        wait_for(Duration::from_secs(5), || rx(&rig.sock)
            >= before + delivered),
        "traffic not counted in the new namespace:\n{}",
        run.log()
    );
    let (code, s, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("was replaced by a new one of that name"),
        "{log}"
    );
    assert_eq!(
        s["packets"].as_u64().unwrap(),
        before + delivered,
        "every frame of the burst counted, once: {s:#}"
    );
    assert_all_frames_back(&s);
}

/// With `--no-reattach` a replaced namespace ends the run with its own exit code
/// and a reason.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn a_replaced_namespace_with_no_reattach_exits_with_code_10() {
    require_root!();
    let _s = serial();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("lx"),
            ..LabConfig::default()
        },
        "lx",
    );
    let cfg = rig.config("x", &[0], DROP_UDP9);
    let run = XdpoolRun::spawn(&cfg, &["--no-reattach"]);
    assert!(
        run.ready_within(Duration::from_secs(20)),
        "not ready: {}",
        run.log()
    );
    // The namespace's name is dropped and made again; the devices stay in the old one
    // (xdpool keeps it alive), so only the name tells.
    sh(&["ip", "netns", "del", &rig.st.b.netns]);
    sh(&["ip", "netns", "add", &rig.st.b.netns]);
    let (code, s, log) = run.wait_exit();
    assert_eq!(code, Some(10), "{log}");
    assert!(
        log.contains("--no-reattach") && log.contains(&rig.st.b.netns),
        "{log}"
    );
    assert_eq!(s["accounting_ok"], true);
    assert_all_frames_back(&s);
}
