//! The Prometheus output follows the conventions: `promtool check metrics` (Debian's
//! `prometheus` package; `make setup` unpacks promtool without installing the server)
//! reports nothing on a full snapshot, and every family a dashboard or alert may name
//! is there with its type. Needs no root.

use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// Sets every number in `v` to a distinct non-zero value.
fn fill(v: &mut Value, next: &mut u64) {
    match v {
        Value::Number(_) => {
            *next += 1;
            *v = json!(*next);
        }
        Value::Object(m) => m.values_mut().for_each(|x| fill(x, next)),
        _ => {}
    }
}

/// A snapshot with every field the running product exports, built from the real types.
fn full_snapshot() -> Value {
    let mut q =
        serde_json::to_value(xdpool::internal::worker::WorkerCountersSnapshot::default()).unwrap();
    q["pool"] = serde_json::to_value(pool::PoolStats::default()).unwrap();
    q["xsk"] = serde_json::to_value(xdpool::internal::xsk::XdpStatistics::default()).unwrap();
    q["ring_errors"] = serde_json::to_value(xdpool::internal::xsk::RingErrors::default()).unwrap();
    // summary::handler_events's form: what one lane's handlers registered.
    q["handler_events"] = serde_json::to_value([xdpool::internal::summary::HandlerEvent {
        handler: "lb".into(),
        counter: "blocked".into(),
        value: 7,
    }])
    .unwrap();
    let mut snap = json!({
        "interface": "xdpb0",
        "uptime_s": 1.5,
        "queues": [q.clone(), q],
        "xdp": serde_json::to_value(xdpool::internal::steer::XdpCounters::default()).unwrap(),
        "accounting": serde_json::to_value(pool::Accounting::default()).unwrap(),
        "device": serde_json::to_value(xdpool::internal::device::DeviceReport::default()).unwrap(),
        // reload::Reloader::snapshot's form.
        "rules": {"generation": 1, "reloads": 1, "refused": 1, "last": null, "list": [
            {"port": "main", "index": 0, "name": "lab", "action": "drop", "match": "udp dst_port 9", "packets": 1, "bytes": 1},
            {"port": "main", "index": 1, "name": null, "action": "pass", "match": "all", "packets": 1, "bytes": 1},
        ]},
    });
    let mut n = 0;
    fill(&mut snap, &mut n);
    snap["queues"][0]["queue"] = json!(0);
    snap["queues"][1]["queue"] = json!(1);
    snap
}

fn promtool() -> Option<String> {
    if let Ok(p) = std::env::var("PROMTOOL") {
        return Some(p);
    }
    [
        "/var/cache/xdpool/prometheus/usr/bin/promtool",
        "/usr/bin/promtool",
    ]
    .iter()
    .find(|p| std::path::Path::new(p).exists())
    .map(|p| p.to_string())
}

#[test]
fn promtool_finds_nothing_to_say_about_the_metrics() {
    let text = xdpool::internal::stats::prom::render(&full_snapshot());
    let Some(tool) = promtool() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool missing in CI: `make setup` unpacks it to /var/cache/xdpool/prometheus"
        );
        println!("skipped: promtool not found (run `make setup` or set PROMTOOL)");
        return;
    };
    let mut child = Command::new(&tool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics:\n{said}\n--- the text ---\n{text}"
    );
}

#[test]
fn every_family_is_typed_and_documented_and_counters_end_in_total() {
    let text = xdpool::internal::stats::prom::render(&full_snapshot());
    let mut types = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            types.insert(name.to_string(), kind.to_string());
        }
    }
    for name in xdpool::internal::stats::metrics::exported_names() {
        let base = name.as_str();
        let kind = types
            .get(base)
            .unwrap_or_else(|| panic!("{name}: no # TYPE line"));
        assert_eq!(
            kind == "counter",
            name.ends_with("_total"),
            "{name} is a {kind}"
        );
        assert!(text.contains(&format!("# HELP {base} ")), "{name}: no HELP");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} "))),
            "{name}: no sample"
        );
    }
    // Monotonic counts must not be gauges: a gauge whose name says it counts events is a mistake.
    for (name, kind) in &types {
        if kind == "gauge" {
            assert!(
                !["_packets", "_bytes", "_drops", "_completed"]
                    .iter()
                    .any(|s| name.ends_with(s)),
                "{name} counts events but is a gauge"
            );
        }
    }
    // No empty label sets on per-queue families.
    assert!(!text.contains("{}"), "an empty label set");
}
