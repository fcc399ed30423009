//! The throughput sweep end to end (needs root): a short sweep on its own lab
//! produces a table, JSON that matches it, and a valid SVG plot, and removes the lab.
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use xdpool_lab::bench::{self, Subject, SweepConfig};
use xdpool_lab::lab::LabNames;

#[macro_use]
mod common;

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn short_sweep_gives_table_json_and_plot() {
    require_root!();
    let prefix = format!("xdptp{}", std::process::id());
    let online = xdpool::internal::config::online_cpus();
    let cfg = SweepConfig {
        prefix: prefix.clone(),
        sizes: vec![64, 1500],
        reps: 1,
        count: 50_000,
        time_limit: Duration::from_secs(5),
        gen_core: online[0],
        worker_core: *online.last().unwrap(),
        ..SweepConfig::new(env!("CARGO_BIN_EXE_xdpool").into())
    };
    let stop = AtomicBool::new(false);
    let mut progress = Vec::new();
    let started = Instant::now();
    let report = bench::run_sweep(&cfg, &stop, &mut |p| progress.push(p.clone()))
        .unwrap_or_else(|e| panic!("{e}"));
    println!("sweep took {:.1} s", started.elapsed().as_secs_f64());

    // The lab is gone.
    let names = LabNames::from_prefix(&prefix).unwrap();
    assert!(
        !xdpool::internal::netns::exists(&names.netns_a)
            && !xdpool::internal::netns::exists(&names.netns_b)
    );

    // Progress: one report per measurement, in order.
    assert_eq!(progress.len(), 6);
    assert_eq!(
        progress.iter().map(|p| p.done).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4, 5]
    );
    assert_eq!(
        (progress[3].size, progress[3].subject),
        (1500, Subject::Ceiling)
    );
    assert!(progress[5].eta.is_some());

    assert!(!report.interrupted);
    assert_eq!(report.rows.len(), 2);
    for row in &report.rows {
        // The ceiling drops in the kernel: every frame sent arrives.
        let c = &row.ceiling.samples[0];
        assert_eq!(c.sent, 50_000, "generator sent the count at {} B", row.size);
        assert_eq!(
            c.received, 50_000,
            "ceiling counted every frame at {} B",
            row.size
        );
        assert!(row.ceiling.mpps.median > 0.0);
        for point in [&row.rxdrop, &row.l2fwd] {
            let s = &point.samples[0];
            assert_eq!(s.sent, 50_000);
            // Flat out (not paced), so some loss is the measurement; but a receive
            // path that keeps one frame in ten has collapsed (it used to pass on one).
            assert!(
                s.received * 10 >= s.sent && s.received <= s.sent,
                "{} B: received {} of {}: {s:?}",
                row.size,
                s.received,
                s.sent
            );
            assert_eq!(s.accounting_ok, Some(true), "{s:?}");
        }
    }

    // Table and JSON agree.
    let table = report.table();
    println!("{table}");
    let tmp = common::scratch_dir("tput-test");
    let (json_path, svg_path) = (tmp.path().join("out/t.json"), tmp.path().join("out/t.svg"));
    bench::write_json(&report, &json_path).unwrap();
    bench::plot::write_svg(&report, &svg_path).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(
        bench::report::table_matches_json(&table, &json),
        Ok(rows.len()),
        "table:\n{table}"
    );
    assert_eq!(
        json["placement"]["generator_core"].as_u64(),
        Some(cfg.gen_core as u64)
    );
    assert_eq!(json["frames_per_run"].as_u64(), Some(50_000));

    // The plot is an SVG document.
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let head = svg.trim_start();
    assert!(
        head.starts_with("<svg") || head.starts_with("<?xml"),
        "{}",
        &head[..head.len().min(80)]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<svg").count(), svg.matches("</svg>").count());
    assert!(svg.contains("xdpool rxdrop") && svg.contains("ceiling (XDP_DROP)"));
}
