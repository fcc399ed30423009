//! `xdpool stats`: the snapshot as a person reads it — per-queue columns side by side,
//! the total and its rate per second, grouped (traffic, drops by reason, the pool, the
//! kernel's socket counters, the XDP program, the device, where every frame is). Rows
//! come from the metric catalogue ([`super::metrics`]), so the view, the JSON and
//! Prometheus never disagree; rows that are zero everywhere are left out unless they
//! are core traffic figures.

use super::metrics::{collect, FamilyOut, Kind};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Families shown whatever their value, in this order, in the "traffic" group.
const TRAFFIC: &[&str] = &[
    "xdpool_rx_packets",
    "xdpool_rx_bytes",
    "xdpool_tx_packets",
    "xdpool_tx_bytes",
    "xdpool_tx_completed",
    "xdpool_fill_produced",
];
/// (group title, families) shown when non-zero, after traffic.
const GROUPS: &[(&str, &[&str])] = &[
    ("drops", &["xdpool_drops"]),
    (
        "pool",
        &[
            "xdpool_pool_alloc",
            "xdpool_pool_recycle",
            "xdpool_pool_alloc_empty",
            "xdpool_pool_alloc_failed",
            "xdpool_pool_inflight",
            "xdpool_pool_misuse",
        ],
    ),
    (
        "socket (kernel)",
        &[
            "xdpool_xsk_rx_dropped",
            "xdpool_xsk_tx_ring_empty",
            "xdpool_ring_errors",
        ],
    ),
];

type Column = (String, String);

fn label<'a>(labels: &'a [(String, String)], name: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The row name of a sample: the family without `xdpool_`, plus the values of its
/// labels that are neither port, queue nor pool (a reason, a path, a kind; a
/// handler and its counter, joined by `/`).
fn row_name(fam: &FamilyOut, labels: &[(String, String)]) -> String {
    let base = fam.def.name.trim_start_matches("xdpool_");
    let rest: Vec<&str> = labels
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "port" | "queue" | "pool"))
        .map(|(_, v)| v.as_str())
        .collect();
    if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base} {}", rest.join("/"))
    }
}

struct Table {
    columns: Vec<Column>,
    rows: Vec<(String, BTreeMap<Column, f64>, Kind)>,
}

fn queue_table(fams: &[FamilyOut], names: &[&str], always: bool) -> Table {
    let mut columns: Vec<Column> = Vec::new();
    let mut rows: Vec<(String, BTreeMap<Column, f64>, Kind)> = Vec::new();
    for name in names {
        let Some(fam) = fams.iter().find(|f| f.def.name == *name) else {
            continue;
        };
        for (labels, v) in &fam.samples {
            let (Some(port), Some(queue)) = (label(labels, "port"), label(labels, "queue")) else {
                continue;
            };
            let col = (port.to_string(), queue.to_string());
            if !columns.contains(&col) {
                columns.push(col.clone());
            }
            let rn = row_name(fam, labels);
            match rows.iter_mut().find(|(n, _, _)| *n == rn) {
                Some((_, m, _)) => {
                    *m.entry(col).or_default() += v;
                }
                None => rows.push((rn, BTreeMap::from([(col, *v)]), fam.def.kind)),
            }
        }
    }
    if !always {
        rows.retain(|(_, m, _)| m.values().any(|v| *v != 0.0));
    }
    Table { columns, rows }
}

fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Renders `snap`; with `prev` (an earlier snapshot and the seconds between them) each
/// counter row also gets its rate per second.
pub fn render(snap: &Value, prev: Option<(&Value, f64)>) -> String {
    let fams = collect(snap);
    let prev_fams = prev.map(|(p, dt)| (collect(p), dt));
    let mut out = String::new();
    let iface = snap.get("interface").and_then(Value::as_str).unwrap_or("?");
    let up = snap.get("uptime_s").and_then(Value::as_f64).unwrap_or(0.0);
    let _ = writeln!(out, "xdpool on {iface}, attached {up:.1} s");
    let mut all_columns: Vec<Column> = Vec::new();
    let rest: Vec<&str> = super::metrics::QUEUE_COUNTERS
        .iter()
        .chain(super::metrics::QUEUE_GAUGES)
        .map(|(_, d)| d.name)
        .filter(|n| !TRAFFIC.contains(n))
        .collect();
    let mut specs: Vec<(&str, &[&str], bool)> = vec![("traffic", TRAFFIC, true)];
    specs.extend(GROUPS.iter().map(|(t, n)| (*t, *n, false)));
    // Every registered counter, zero or not; no section when none is registered.
    specs.push(("handlers", &["xdpool_handler_events"], true));
    specs.push(("worker", &rest, false));
    // (title, now, before)
    let sections: Vec<(&str, Table, Option<Table>)> = specs
        .iter()
        .map(|(title, names, always)| {
            (
                *title,
                queue_table(&fams, names, *always),
                prev_fams
                    .as_ref()
                    .map(|(pf, _)| queue_table(pf, names, true)),
            )
        })
        .collect();
    let dt = prev.map(|(_, dt)| dt).unwrap_or(0.0);
    for (_, t, _) in &sections {
        for c in &t.columns {
            if !all_columns.contains(c) {
                all_columns.push(c.clone());
            }
        }
    }
    let w = 30usize;
    let cw = 12usize;
    let mut header = format!("{:<w$}", "");
    for (port, queue) in &all_columns {
        let _ = write!(header, "{:>cw$}", format!("{port}/q{queue}"));
    }
    let _ = write!(
        header,
        "{:>cw$}{:>cw$}",
        "total",
        if prev.is_some() { "per s" } else { "" }
    );
    let _ = writeln!(out, "{}", header.trim_end());
    for (title, t, before) in &sections {
        if t.rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title}");
        for (name, values, kind) in &t.rows {
            let mut line = format!("  {:<width$}", name, width = w - 2);
            let mut total = 0.0;
            for c in &all_columns {
                let v = values.get(c).copied();
                total += v.unwrap_or(0.0);
                let _ = write!(line, "{:>cw$}", v.map(human).unwrap_or_else(|| "-".into()));
            }
            let _ = write!(line, "{:>cw$}", human(total));
            if let (Some(before), Kind::Counter, true) = (before, kind, dt > 0.0) {
                let then: f64 = before
                    .rows
                    .iter()
                    .filter(|(n, _, _)| n == name)
                    .flat_map(|(_, m, _)| m.values())
                    .sum();
                let _ = write!(line, "{:>cw$}", human(((total - then) / dt).max(0.0)));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    write_port_lines(&mut out, &fams);
    write_frames_line(&mut out, snap);
    write_rules(&mut out, snap, prev);
    out
}

/// Each rule's packets and bytes (the XDP program's counts), with its packet rate.
fn write_rules(out: &mut String, snap: &Value, prev: Option<(&Value, f64)>) {
    let list = |s: &Value| {
        s.get("rules")
            .and_then(|r| r.get("list"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let now = list(snap);
    if now.is_empty() {
        return;
    }
    let before = prev.map(|(p, dt)| (list(p), dt));
    let rules = snap.get("rules").expect("has a list");
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let _ = writeln!(
        out,
        "rules (generation {}, {} reloads, {} refused)",
        n(rules, "generation"),
        n(rules, "reloads"),
        n(rules, "refused")
    );
    for r in &now {
        let (port, index) = (
            r.get("port").and_then(Value::as_str).unwrap_or("?"),
            n(r, "index"),
        );
        let name = r
            .get("name")
            .and_then(Value::as_str)
            .map(|s| format!(" {s}"))
            .unwrap_or_default();
        let what = format!(
            "{port}#{index}{name}: {} -> {}",
            r.get("match").and_then(Value::as_str).unwrap_or("?"),
            r.get("action").and_then(Value::as_str).unwrap_or("?")
        );
        let mut line = format!(
            "  {what:<44} {:>10} pkts {:>10} B",
            human(n(r, "packets") as f64),
            human(n(r, "bytes") as f64)
        );
        if let Some((b, dt)) = &before {
            let same = b.iter().find(|x| {
                x.get("port") == r.get("port")
                    && x.get("index") == r.get("index")
                    && x.get("name") == r.get("name")
            });
            if let (Some(then), true) = (same, *dt > 0.0) {
                let _ = write!(
                    line,
                    " {:>10}/s",
                    human((n(r, "packets").saturating_sub(n(then, "packets"))) as f64 / dt)
                );
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn write_port_lines(out: &mut String, fams: &[FamilyOut]) {
    for (title, fam_name) in [
        ("xdp program", "xdpool_xdp_frames"),
        ("device losses", "xdpool_device_losses"),
    ] {
        let Some(fam) = fams.iter().find(|f| f.def.name == fam_name) else {
            continue;
        };
        let mut per_port: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (labels, v) in &fam.samples {
            let port = label(labels, "port").unwrap_or("?");
            let what = labels
                .iter()
                .find(|(k, _)| k != "port")
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            if *v != 0.0 || fam_name == "xdpool_xdp_frames" {
                per_port
                    .entry(port)
                    .or_default()
                    .push(format!("{what} {}", human(*v)));
            }
        }
        for (port, parts) in per_port {
            if !parts.is_empty() {
                let _ = writeln!(out, "{title:<14} {port}: {}", parts.join(", "));
            }
        }
    }
}

fn write_frames_line(out: &mut String, snap: &Value) {
    let Some(acc) = snap.get("accounting") else {
        return;
    };
    let n = |k: &str| acc.get(k).and_then(Value::as_u64).unwrap_or(0);
    let parts = ["free", "cached", "ring", "fill", "tx", "application"];
    let sum: u64 = parts.iter().map(|p| n(p)).sum();
    let _ = writeln!(
        out,
        "frames         total {} = {}  [{}]",
        n("total"),
        parts
            .iter()
            .map(|p| format!("{p} {}", n(p)))
            .collect::<Vec<_>>()
            .join(" + "),
        if sum == n("total") { "ok" } else { "MISMATCH" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(rx0: u64, rx1: u64) -> Value {
        json!({
            "interface": "xdpb0", "uptime_s": 3.0,
            "queues": [
                {"queue": 0, "rx_packets": rx0, "rx_bytes": rx0 * 64, "action_drop": rx0, "pool": {"pool_id": 0, "alloc_fast": 9, "inflight": 4096}},
                {"queue": 1, "rx_packets": rx1, "rx_bytes": rx1 * 64, "action_drop": 0, "xsk": {"rx_ring_full": 5}}
            ],
            "xdp": {"steered": rx0 + rx1, "passed": 2},
            "accounting": {"total": 100, "free": 60, "fill": 40},
        })
    }

    #[test]
    fn queues_side_by_side_with_total_and_rate() {
        let before = snap(1000, 500);
        let now = snap(3000, 1500);
        let text = render(&now, Some((&before, 2.0)));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("xdpb0/q0")
                && lines[1].contains("xdpb0/q1")
                && lines[1].contains("per s"),
            "{text}"
        );
        let rx = lines
            .iter()
            .find(|l| l.trim_start().starts_with("rx_packets"))
            .unwrap();
        let cols: Vec<&str> = rx.split_whitespace().collect();
        // rx_packets, q0, q1, total, rate: (4500 - 1500) / 2 s
        assert_eq!(
            cols,
            ["rx_packets", "3000", "1500", "4500", "1500"],
            "{text}"
        );
        let drops: Vec<&&str> = lines
            .iter()
            .filter(|l| l.trim_start().starts_with("drops "))
            .collect();
        assert_eq!(
            drops.len(),
            2,
            "drops by reason, zero rows left out: {text}"
        );
        assert!(
            drops
                .iter()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == ["drops", "action_drop", "3000", "0", "3000", "1000"]),
            "{text}"
        );
        assert!(
            drops.iter().any(|l| l.contains("kernel_rx_ring_full")),
            "{text}"
        );
        assert!(text.contains("frames         total 100 = free 60 + cached 0 + ring 0 + fill 40 + tx 0 + application 0  [ok]"), "{text}");
        assert!(
            text.contains("xdp program    xdpb0: steered 4500"),
            "{text}"
        );
        // A gauge gets no rate.
        let inflight = lines.iter().find(|l| l.contains("pool_inflight")).unwrap();
        assert_eq!(inflight.split_whitespace().count(), 4, "{inflight}");
    }

    #[test]
    fn rules_with_counts_and_rates() {
        let with = |p: u64| {
            let mut s = snap(1, 1);
            s["rules"] = json!({"generation": 3, "reloads": 2, "refused": 1, "list": [
                {"port": "main", "index": 0, "name": "lab", "action": "drop", "match": "udp dst_port 9", "packets": p, "bytes": p * 60},
                {"port": "main", "index": 1, "name": null, "action": "pass", "match": "all", "packets": 7, "bytes": 420},
            ]});
            s
        };
        let text = render(&with(5000), Some((&with(1000), 2.0)));
        assert!(
            text.contains("rules (generation 3, 2 reloads, 1 refused)"),
            "{text}"
        );
        let lab = text.lines().find(|l| l.contains("main#0 lab")).unwrap();
        assert_eq!(
            lab.split_whitespace().collect::<Vec<_>>(),
            [
                "main#0", "lab:", "udp", "dst_port", "9", "->", "drop", "5000", "pkts", "300.0k",
                "B", "2000/s"
            ],
            "{text}"
        );
        assert!(text.contains("main#1: all -> pass"), "{text}");
        let m = collect(&with(5000));
        let fam = m
            .iter()
            .find(|f| f.def.name == "xdpool_rule_packets")
            .unwrap();
        assert_eq!(
            fam.samples[0].0,
            vec![
                ("port".to_string(), "main".to_string()),
                ("rule".into(), "0".into()),
                ("rule_name".into(), "lab".into())
            ]
        );
        assert_eq!(fam.samples[0].1, 5000.0);
        assert_eq!(fam.samples[1].0[2].1, "", "unnamed: empty rule_name");
    }

    #[test]
    fn a_mismatch_is_named() {
        let mut s = snap(1, 1);
        s["accounting"]["free"] = json!(59);
        assert!(render(&s, None).contains("[MISMATCH]"));
    }
}
