//! Workers on a multi-queue lab, l2fwd, and the stats exports, as root.

mod common;

use common::*;
use std::io::{Read, Write};
use std::time::Duration;
use xdpool_lab::gen::count::RxCounter;
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::LabConfig;

const DROP_UDP9: &str = "[[rule]]\nproto = \"udp\"\ndst_port = \"9\"\naction = \"drop\"\n";

/// Two queues, two workers: live frames land on queue `cpu % queues`, so one
/// generator thread per core feeds each queue. Both workers must receive, and the
/// sum must be what was sent.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn two_queue_lab_each_worker_receives_on_its_queue() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xq"),
            queues: Some(2),
            ..LabConfig::default()
        },
        "mq",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("mq", &[0, 1], DROP_UDP9);
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 40_000;
    let mut g = GenConfig::for_lab(st);
    g.count = Some(N);
    g.cores = vec![0, 1];
    g.rate_pps = Some(200_000);
    g.chunk = 2048;
    g.dst_ports = PortRange::single(9);
    // Counted from what the sender's veth delivered: it refuses frames (ethtool's
    // xdp_xmit_errors) while a receiver's 256-slot ring is full, which a loaded
    // machine's deferred NAPI allows; those never reach the program.
    let (delivered, refused) = veth_delivery(&st.a.netns, &st.a.dev, N, || {
        assert_eq!(gen::run(&g).expect("generator").sent, N);
    });
    assert!(
        delivered >= N / 2,
        "the sender's veth refused {refused} of {N}: too little traffic to test with"
    );
    wait_for(Duration::from_secs(5), || {
        xdpool::internal::stats::control::query(sock)
            .map(|s| s["total"]["rx_packets"].as_u64().unwrap_or(0) >= delivered)
            .unwrap_or(false)
    });
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let workers = s["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    let per_queue: Vec<(u64, u64)> = workers
        .iter()
        .map(|w| (w["queue"].as_u64().unwrap(), counter(w, "rx_packets")))
        .collect();
    assert!(
        per_queue.iter().all(|(_, n)| *n > 0),
        "every queue's worker receives: {per_queue:?}"
    );
    assert_eq!(
        s["packets"].as_u64().unwrap() + named_rx_drops(&s),
        delivered,
        "{s:#}"
    );
    assert_all_frames_back(&s);
}

/// l2fwd: at a paced rate the worker sustains, every frame comes back to the
/// generator's side (counted there by an XDP counter): at least 95% of those sent,
/// each one lost named at the RX side (the kernel's fill/RX ring counters), none at
/// TX, and no frame leaks.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn l2fwd_returns_every_frame_to_the_sender() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xl"),
            ..LabConfig::default()
        },
        "l2",
    );
    let st = &rig.st;
    let rules = "[[rule]]\nproto = \"udp\"\ndst_port = \"9\"\naction = \"l2fwd\"\n";
    let cfg = rig.config("l2", &[0], rules);
    let back =
        RxCounter::attach_in(Some(&st.a.netns), &st.a.dev).expect("counter on the sender's veth");
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u64 = 20_000;
    let mut g = GenConfig::for_lab(st);
    g.count = Some(N);
    g.rate_pps = Some(100_000);
    g.chunk = 1024;
    g.dst_ports = PortRange::single(9);
    let (into_ring, refused) = veth_delivery(&st.a.netns, &st.a.dev, N, || {
        assert_eq!(gen::run(&g).expect("generator").sent, N)
    });
    let returned = back
        .settle(Duration::from_millis(500), Duration::from_secs(10))
        .expect("counts");
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let rx = s["packets"].as_u64().unwrap();
    let tx = counter(&s, "tx_packets");
    let done = counter(&s, "tx_completed");
    let lost = N - returned.packets.min(N);
    eprintln!("l2fwd at 100 kpps: sent {N}, refused by the sender's veth {refused}, rx {rx}, tx {tx}, back {}, lost {lost}; drops {}", returned.packets, s["drops"]);
    assert_eq!(s["xdp"]["steered"].as_u64().unwrap(), into_ring, "{s:#}");
    assert_eq!(
        rx + named_rx_drops(&s),
        into_ring,
        "every frame into the ring received or named at the RX side: {s:#}"
    );
    assert_eq!(
        counter(&s, "tx_ring_full_drop"),
        0,
        "a received frame was dropped at a full TX ring: {s:#}"
    );
    assert_eq!(tx, rx, "every received frame sent back: {s:#}");
    assert_eq!(done, tx, "every TX completed");
    assert_eq!(
        returned.packets, tx,
        "frames that came back to the sender = frames sent back: {returned:?} / {s:#}"
    );
    assert!(returned.packets >= N * 95 / 100, "{lost} of {N} lost at 100 kpps (refused by the sender's veth {refused}, named drops {}): {s:#}", named_rx_drops(&s));
    assert_all_frames_back(&s);
}

/// The Prometheus endpoint parses as the text format and its numbers equal
/// `xdpool stats --json`; the control socket is 0600 and refuses other users.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn stats_prometheus_equals_stats_json_and_socket_refuses_others() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xs"),
            ..LabConfig::default()
        },
        "st",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let port = 19000 + (std::process::id() % 1000) as u16;
    let cfg = rig.config("st", &[0], DROP_UDP9);
    patch_config(
        &cfg,
        "[stats]\n",
        &format!("[stats]\nprometheus = \"127.0.0.1:{port}\"\n"),
    );
    let run = XdpoolRun::start(&cfg, &[]);
    let mut g = GenConfig::for_lab(st);
    g.count = Some(5_000);
    g.rate_pps = Some(100_000);
    g.chunk = 1024;
    let (delivered, _) = veth_delivery(&st.a.netns, &st.a.dev, 5_000, || {
        gen::run(&g).expect("generator");
    });
    // Let the counters settle so both reads see the same numbers.
    assert!(wait_for(Duration::from_secs(5), || {
        xdpool::internal::stats::control::query(sock)
            .map(|s| s["total"]["rx_packets"].as_u64() == Some(delivered))
            .unwrap_or(false)
    }));
    std::thread::sleep(Duration::from_millis(300));

    let json_out = std::process::Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["stats", "--json", "--socket"])
        .arg(sock)
        .output()
        .unwrap();
    assert!(
        json_out.status.success(),
        "{}",
        String::from_utf8_lossy(&json_out.stderr)
    );
    let snap: serde_json::Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let body = http_get(&format!("127.0.0.1:{port}"), "/metrics");
    let metrics = xdpool::internal::stats::prom::parse_text(&body).expect("Prometheus text parses");
    // Every sample the catalogue takes from the JSON is on /metrics with the same value.
    // A few counters move by themselves between the two reads (clock, idle passes, the
    // kernel's TX-ring-empty count while polling, IPv6 chatter the program passes, the
    // device's re-checks): for those the later Prometheus read may only be larger.
    let volatile = [
        "xdpool_uptime_seconds",
        "xdpool_idle_passes_total",
        "xdpool_xsk_tx_ring_empty_total",
        "xdpool_xdp_frames_total",
        "xdpool_device_",
    ];
    let mut compared = 0;
    for fam in xdpool::internal::stats::metrics::collect(&snap) {
        let name = match fam.def.kind {
            xdpool::internal::stats::metrics::Kind::Counter => format!("{}_total", fam.def.name),
            xdpool::internal::stats::metrics::Kind::Gauge => fam.def.name.to_string(),
        };
        for (labels, value) in &fam.samples {
            let key = xdpool::internal::stats::prom::sample_key(&name, labels);
            let got = metrics
                .get(&key)
                .copied()
                .unwrap_or_else(|| panic!("metric {key} missing from /metrics"));
            if volatile.iter().any(|v| name.starts_with(v)) {
                assert!(got >= *value, "metric {key}: {got} < {value}");
            } else {
                assert_eq!(got, *value, "metric {key}");
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "only {compared} metrics compared");
    let rx: f64 = metrics
        .iter()
        .filter(|(k, _)| k.starts_with("xdpool_rx_packets_total{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(rx, 5_000.0, "rx packets summed over the queue labels");

    // The table a person reads: one column per queue, the total, the rate (0 now).
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["stats", "--interval", "0.2", "--socket"])
        .arg(sock)
        .output()
        .unwrap();
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let table = String::from_utf8_lossy(&table.stdout);
    let header = table.lines().nth(1).unwrap_or("");
    let columns = header
        .split_whitespace()
        .filter(|c| c.contains("/q"))
        .count();
    assert!(
        columns >= 1
            && header.contains("/q0")
            && header.contains("total")
            && header.contains("per s"),
        "{table}"
    );
    let rx_row: Vec<&str> = table
        .lines()
        .find(|l| l.trim_start().starts_with("rx_packets"))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(rx_row.len(), columns + 3, "{table}");
    let per_queue: u64 = rx_row[1..=columns]
        .iter()
        .map(|v| v.parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        (per_queue, rx_row[columns + 1], rx_row[columns + 2]),
        (5_000, "5000", "0"),
        "{table}"
    );
    assert!(table.contains("[ok]"), "{table}");
    // One figure by its path, for scripts (tests/unbind/unbind.sh polls with it).
    let get = |path: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_xdpool"))
            .args(["stats", "--get", path, "--socket"])
            .arg(sock)
            .output()
            .unwrap()
    };
    let rx = get(".total.rx_packets");
    assert!(
        rx.status.success(),
        "{}",
        String::from_utf8_lossy(&rx.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&rx.stdout).trim(), "5000");
    assert_eq!(
        String::from_utf8_lossy(&get(".queues.0.queue").stdout).trim(),
        "0"
    );
    let missing = get(".total.no_such_counter");
    assert!(
        !missing.status.success()
            && String::from_utf8_lossy(&missing.stderr)
                .contains("nothing at .total.no_such_counter")
    );

    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(sock).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    // The socket's own mode must be what refuses, not the 0700 scratch dir: let
    // others through the dir (search only).
    std::fs::set_permissions(rig.dir(), std::fs::Permissions::from_mode(0o711)).unwrap();
    use std::os::unix::process::CommandExt;
    let other = std::process::Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["stats", "--socket"])
        .arg(sock)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        !other.status.success() && err.contains("ermission denied"),
        "another user must be refused: {err}"
    );
    let (code, _, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s =
        std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.0 200"), "{body}");
    body.split("\r\n\r\n").nth(1).unwrap().to_string()
}
