//! Lab + generator tests that need root: each builds its own lab (unique prefix,
//! removed by a guard even on failure), counts on the receiving veth with the
//! `xdpool_count` XDP program, and checks the counts exactly.
use std::time::Duration;

use xdpool::internal::netns;
use xdpool_lab::gen::count::{RxCounter, RxCounts};
use xdpool_lab::gen::{self, Engine, GenConfig, GenError};
use xdpool_lab::lab::{Lab, LabConfig, LabGuard, LabNames};

#[macro_use]
mod common;

fn prefix(tag: &str) -> String {
    format!("xdpt{}{tag}", std::process::id())
}

const SETTLE_QUIET: Duration = Duration::from_millis(100);
const SETTLE_LIMIT: Duration = Duration::from_secs(3);

/// Sends `count` frames of `size` and returns (what the generator handed over,
/// what the receiver counted in addition to `before`).
fn send_and_count(cfg: &GenConfig, counter: &RxCounter) -> (gen::GenReport, RxCounts) {
    let before = counter.counts().unwrap();
    let report = gen::run(cfg).unwrap_or_else(|e| panic!("generator failed: {e}"));
    let after = counter.settle(SETTLE_QUIET, SETTLE_LIMIT).unwrap();
    let rx = RxCounts {
        packets: after.packets - before.packets,
        bytes: after.bytes - before.bytes,
        other_packets: after.other_packets - before.other_packets,
    };
    (report, rx)
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn lab_up_is_idempotent_and_down_removes_both_namespaces() {
    require_root!();
    let cfg = LabConfig {
        queues: Some(2),
        ..LabConfig::with_prefix(prefix("l"))
    };
    let names = LabNames::from_prefix(&cfg.prefix).unwrap();
    let first = LabGuard::up(&cfg).unwrap();
    let s = first.status();
    assert!(!s.already_up);
    assert_eq!(
        (s.a.rx_queues, s.a.tx_queues, s.b.rx_queues, s.b.tx_queues),
        (2, 2, 2, 2)
    );
    assert_eq!(
        (s.a.mac, s.b.mac),
        (xdpool_lab::lab::MAC_A, xdpool_lab::lab::MAC_B)
    );
    assert_eq!(
        netns::ifindex_in(Some(&names.netns_a), &names.dev_a).unwrap(),
        s.a.ifindex
    );
    assert_eq!(
        netns::ifindex_in(Some(&names.netns_b), &names.dev_b).unwrap(),
        s.b.ifindex
    );
    // Nothing of the lab in the root namespace.
    assert!(netns::ifindex(&names.dev_a).is_err() && netns::ifindex(&names.dev_b).is_err());
    // GRO is on, so redirected frames reach b even without an XDP program there.
    assert!(netns::in_netns(&names.netns_b, || netns::gro(&names.dev_b))
        .unwrap()
        .unwrap());

    let again = Lab::up(&cfg).unwrap();
    assert!(again.already_up);
    assert_eq!(again.a, s.a);

    assert!(Lab::down(&cfg.prefix).unwrap());
    assert!(!netns::exists(&names.netns_a) && !netns::exists(&names.netns_b));
    assert!(
        !Lab::down(&cfg.prefix).unwrap(),
        "second down finds nothing"
    );
    drop(first); // downs again: harmless
    assert!(Lab::status(&cfg.prefix).unwrap().is_none());
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn half_built_lab_is_rebuilt_with_threaded_napi() {
    require_root!();
    let cfg = LabConfig {
        threaded_napi: true,
        ..LabConfig::with_prefix(prefix("h"))
    };
    let names = LabNames::from_prefix(&cfg.prefix).unwrap();
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &names.netns_a])
        .status()
        .unwrap();
    assert!(made.success());
    let guard = LabGuard::up(&cfg).unwrap();
    assert!(!guard.status().already_up);
    assert!(Lab::status(&cfg.prefix).unwrap().is_some());
    // Threaded NAPI was switched on inside the namespace.
    let path = format!("/sys/class/net/{}/threaded", names.dev_b);
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &names.netns_b, "cat", &path])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn live_generator_delivers_exact_counts() {
    require_root!();
    let lab = LabGuard::up(&LabConfig::with_prefix(prefix("g"))).unwrap();
    let st = lab.status().clone();
    let counter = RxCounter::attach_in(Some(&st.b.netns), &st.b.dev).unwrap();
    let cases: [(u64, usize, bool); 5] = [
        (100_000, 64, false),
        (100_000, 60, false),
        (20_000, 1500, false),
        (20_000, 333, false),
        (20_000, 333, true),
    ];
    for (count, size, ipv6) in cases {
        let cfg = GenConfig {
            count: Some(count),
            size,
            ipv6,
            src_ports: "1000-1063".parse().unwrap(),
            ..GenConfig::for_lab(&st)
        };
        let (report, rx) = send_and_count(&cfg, &counter);
        println!(
            "{size} B ipv6={ipv6}: {}; received {}",
            report.summary(),
            rx.packets
        );
        assert_eq!(report.sent, count, "handed to the kernel");
        assert_eq!(rx.packets, count, "received at {size} B ipv6={ipv6}");
        assert_eq!(rx.bytes, count * size as u64, "bytes at {size} B");
    }
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn live_generator_two_cores_two_queues() {
    require_root!();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        println!("skipped: needs 2 cores");
        return;
    }
    let lab = LabGuard::up(&LabConfig {
        queues: Some(2),
        ..LabConfig::with_prefix(prefix("m"))
    })
    .unwrap();
    let st = lab.status().clone();
    let counter = RxCounter::attach_in(Some(&st.b.netns), &st.b.dev).unwrap();
    let cfg = GenConfig {
        count: Some(100_001),
        cores: vec![0, 1],
        ..GenConfig::for_lab(&st)
    };
    let (report, rx) = send_and_count(&cfg, &counter);
    assert_eq!(
        report.per_thread.iter().map(|t| t.sent).collect::<Vec<_>>(),
        vec![50_001, 50_000]
    );
    assert_eq!(rx.packets, 100_001);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn live_generator_duration_and_rate_limits() {
    require_root!();
    let lab = LabGuard::up(&LabConfig::with_prefix(prefix("r"))).unwrap();
    let st = lab.status().clone();
    let counter = RxCounter::attach_in(Some(&st.b.netns), &st.b.dev).unwrap();
    let cfg = GenConfig {
        duration: Some(Duration::from_millis(500)),
        rate_pps: Some(20_000),
        ..GenConfig::for_lab(&st)
    };
    let (report, rx) = send_and_count(&cfg, &counter);
    // 500 ms at 20 kpps = 10 000 frames, paced in calls of 2 000 (100 ms).
    assert!(
        (9_000..=10_400).contains(&report.sent),
        "sent {}",
        report.sent
    );
    assert!(
        report.elapsed >= Duration::from_millis(450) && report.elapsed < Duration::from_millis(800),
        "{:?}",
        report.elapsed
    );
    assert_eq!(rx.packets, report.sent);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn generator_errors_name_the_problem() {
    require_root!();
    let lab = LabGuard::up(&LabConfig::with_prefix(prefix("e"))).unwrap();
    let st = lab.status().clone();
    let base = GenConfig {
        count: Some(10),
        ..GenConfig::for_lab(&st)
    };

    let too_big = gen::run(&GenConfig {
        size: 1515,
        ..base.clone()
    })
    .unwrap_err();
    assert!(
        matches!(
            too_big,
            GenError::TooBigForDevice {
                mtu: 1500,
                max: 1514,
                ..
            }
        ),
        "{too_big}"
    );

    let no_dev = gen::run(&GenConfig {
        dev: "nosuchdev0".into(),
        ..base.clone()
    })
    .unwrap_err();
    assert!(no_dev.to_string().contains("nosuchdev0"), "{no_dev}");

    if !std::path::Path::new("/proc/net/pktgen").exists() {
        let pk = gen::run(&GenConfig {
            engine: Engine::Pktgen,
            ..base
        })
        .unwrap_err();
        assert!(matches!(pk, GenError::PktgenUnavailable { .. }), "{pk}");
        assert!(pk.to_string().contains("--engine live"));
    }
}

/// Prints the single-core live-frames rate at 64 B for three batch sizes (the
/// receiver's XDP_DROP counter runs on the same core), and checks that nearly all
/// of what was handed over arrived. A benchmark, not a CI test: full-speed loss
/// depends on what else the machine runs (`cargo test --release --test root_gen --
/// --ignored --nocapture`).
#[test]
#[ignore = "benchmark: prints the generator's rate; loss at full speed depends on machine load"]
fn live_generator_rate_one_core() {
    require_root!();
    let lab = LabGuard::up(&LabConfig::with_prefix(prefix("p"))).unwrap();
    let st = lab.status().clone();
    let counter = RxCounter::attach_in(Some(&st.b.netns), &st.b.dev).unwrap();
    for batch in [16, 64, 256] {
        let cfg = GenConfig {
            count: Some(2_000_000),
            batch,
            ..GenConfig::for_lab(&st)
        };
        let (report, rx) = send_and_count(&cfg, &counter);
        println!(
            "one core, 64 B, batch {batch}: {}; received {}",
            report.summary(),
            rx.packets
        );
        // At full speed the peer's NAPI runs on the sending core; when its softirq
        // work is pushed to ksoftirqd (which competes with the pinned sender) or a
        // flush of 256 meets a 256-slot ring not yet drained, frames are dropped.
        // Seen here: 0 to ~0.2% per 2M. The exact-count tests use short bursts.
        assert!(rx.packets <= report.sent);
        assert!(
            rx.packets * 100 >= report.sent * 95,
            "lost more than 5% at batch {batch}: {}",
            report.sent - rx.packets
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn afxdp_generator_delivers_exact_counts_and_accounting() {
    require_root!();
    let lab = LabGuard::up(&LabConfig::with_prefix(prefix("x"))).unwrap();
    let st = lab.status().clone();
    let counter = RxCounter::attach_in(Some(&st.b.netns), &st.b.dev).unwrap();
    // 64 B: packed 32 to a chunk; 1500 B: one chunk each.
    for (count, size, slots, chunks) in [
        (20_000u64, 64usize, 2048u32, 64u32),
        (5_000, 1500, 2048, 2048),
    ] {
        let cfg = GenConfig {
            count: Some(count),
            size,
            engine: Engine::Afxdp,
            src_ports: "1000-1063".parse().unwrap(),
            ..GenConfig::for_lab(&st)
        };
        let before = counter.counts().unwrap();
        let detail = gen::afxdp::run_afxdp_detailed(&cfg)
            .unwrap_or_else(|e| panic!("afxdp generator failed: {e}"));
        let after = counter.settle(SETTLE_QUIET, SETTLE_LIMIT).unwrap();
        let (rx_packets, rx_bytes) = (after.packets - before.packets, after.bytes - before.bytes);
        println!(
            "afxdp {size} B: {}; received {rx_packets}; {} wake-ups; {} buffers in {} chunks",
            detail.gen.summary(),
            detail.wakeups,
            detail.slots,
            detail.chunks_used
        );
        assert_eq!(detail.gen.engine, Engine::Afxdp);
        assert_eq!(detail.gen.sent, count, "completed at {size} B");
        assert_eq!(detail.produced, count, "produced at {size} B");
        assert_eq!(
            (detail.slots, detail.chunks_used),
            (slots, chunks),
            "frag packing at {size} B"
        );
        assert_eq!(rx_packets, count, "received at {size} B");
        assert_eq!(rx_bytes, count * size as u64, "bytes at {size} B");
        let acc = &detail.accounting;
        acc.check().unwrap();
        assert_eq!(
            (acc.free, acc.tx, acc.application, acc.cached),
            (acc.total, 0, 0, 0),
            "{acc:?}"
        );
    }
    // Through the dispatcher too.
    let cfg = GenConfig {
        count: Some(1_000),
        engine: Engine::Afxdp,
        ..GenConfig::for_lab(&st)
    };
    let before = counter.packets().unwrap();
    let report = gen::run(&cfg).unwrap();
    let after = counter.settle(SETTLE_QUIET, SETTLE_LIMIT).unwrap();
    assert_eq!((report.sent, after.packets - before), (1_000, 1_000));
    // Duration and rate: 300 ms at 10 kpps is about 3 000 frames.
    let paced = GenConfig {
        count: None,
        duration: Some(Duration::from_millis(300)),
        rate_pps: Some(10_000),
        ..cfg.clone()
    };
    let before = counter.packets().unwrap();
    let report = gen::run(&paced).unwrap();
    let after = counter.settle(SETTLE_QUIET, SETTLE_LIMIT).unwrap();
    println!("afxdp paced: {}", report.summary());
    assert!(
        (2_700..=3_100).contains(&report.sent),
        "sent {}",
        report.sent
    );
    assert_eq!(after.packets - before, report.sent);
    let two = gen::run(&GenConfig {
        cores: vec![0, 1],
        ..cfg
    })
    .unwrap_err();
    assert!(matches!(two, GenError::Config(_)), "{two}");
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn generator_bench_measures_three_receivers_and_removes_its_lab() {
    use xdpool_lab::bench::generator::{run_gen_bench, GenBenchConfig, Receiver};
    require_root!();
    let online = xdpool::internal::config::online_cpus();
    let cfg = GenBenchConfig {
        prefix: prefix("gb"),
        size: 64,
        count: 50_000,
        reps: 1,
        batches: vec![64],
        gen_core: online[0],
        napi_core: *online.last().unwrap(),
        time_limit: Duration::from_secs(5),
        peer: None,
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut lines = Vec::new();
    let report = run_gen_bench(&cfg, &stop, &mut |l| lines.push(l.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let names = LabNames::from_prefix(&cfg.prefix).unwrap();
    assert!(
        !netns::exists(&names.netns_a) && !netns::exists(&names.netns_b),
        "the bench removes its lab"
    );
    assert_eq!(lines.len(), 3, "one progress line per run: {lines:?}");
    assert!(!report.interrupted);
    let receivers: Vec<Receiver> = report.rows.iter().map(|r| r.receiver).collect();
    assert_eq!(receivers, Receiver::ALL);
    for row in &report.rows {
        assert!(row.handed_mpps.median > 0.0, "{row:?}");
    }
    // Nothing counts on a receiver without NAPI.
    assert!(report.rows[0].arrived_mpps.is_none() && report.rows[0].arrived_fraction.is_none());
    // NAPI in softirq on the sending core drains the receiver's ring after each
    // batch: every frame arrives, as in the sweep's ceiling.
    assert_eq!(
        report.rows[1].arrived_fraction,
        Some(1.0),
        "{:?}",
        report.rows[1]
    );
    assert_eq!(report.rows[1].napi_core, Some(cfg.gen_core));
    let threaded = report.rows[2].arrived_fraction.expect("counted");
    assert!(threaded > 0.0 && threaded <= 1.0, "{:?}", report.rows[2]);
    let table = report.table();
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("| refused") || l.starts_with("| XDP_DROP"))
            .count(),
        3,
        "{table}"
    );
    println!("{table}");
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn counter_counts_jumbo_frames_on_a_9000_mtu_lab() {
    require_root!();
    let lab = LabGuard::up(&LabConfig {
        mtu: Some(9000),
        ..LabConfig::with_prefix(prefix("j"))
    })
    .expect("lab up");
    let st = lab.status().clone();
    // At MTU 9000 veth takes only XDP programs that accept multi-buffer frames.
    let counter = RxCounter::attach_in(Some(&st.b.netns), &st.b.dev)
        .expect("the xdp.frags counter attaches at MTU 9000");
    const N: u64 = 20;
    const PAYLOAD: usize = 8000;
    netns::in_netns(&st.a.netns, || {
        let s = std::net::UdpSocket::bind((st.a.ipv4, 0))?;
        for _ in 0..N {
            s.send_to(&[0x5a; PAYLOAD], (st.b.ipv4, 9))?;
        }
        Ok::<_, std::io::Error>(())
    })
    .expect("enter namespace a")
    .expect("send jumbo datagrams");
    let c = counter.settle(SETTLE_QUIET, SETTLE_LIMIT).unwrap();
    assert_eq!(c.packets, N, "{c:?}");
    // Ethernet 14 + IPv4 20 + UDP 8 + payload, all buffers counted.
    assert_eq!(c.bytes, N * (14 + 20 + 8 + PAYLOAD as u64), "{c:?}");
}
