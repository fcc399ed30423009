//! `docs/reference/metrics.md`, generated from the catalogue in [`super::metrics`].
//!
//! The labels are not written twice: a snapshot with every field the catalogue reads
//! goes through [`super::metrics::collect`], the function the Prometheus endpoint
//! uses, and each family's label names (and the values of its enumerated labels) are
//! read off its samples.

use serde_json::{json, Map, Value};

use super::metrics::{self, collect, FamilyOut, Kind};

/// Labels whose values are names of the user's things or numbers, not a fixed set.
const FREE_LABELS: &[&str] = &["port", "queue", "pool", "rule", "rule_name"];

fn set(obj: &mut Map<String, Value>, path: &[&str]) {
    match path {
        [] => {}
        [last] => {
            obj.insert(last.to_string(), json!(1));
        }
        [first, rest @ ..] => {
            let inner = obj
                .entry(first.to_string())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("an object");
            set(inner, rest);
        }
    }
}

/// A snapshot in which every field the catalogue reads is present (all 1).
pub fn full_snapshot() -> Value {
    let mut q = Map::new();
    q.insert("queue".into(), json!(0));
    for (f, _) in metrics::QUEUE_COUNTERS.iter().chain(metrics::QUEUE_GAUGES) {
        set(&mut q, &[f]);
    }
    for (path, _) in metrics::DROP_REASONS {
        set(&mut q, path);
    }
    q.insert(
        "handler_events".into(),
        json!([{"handler": "h", "counter": "c", "value": 1}]),
    );
    set(&mut q, &["xsk", "rx_dropped"]);
    set(&mut q, &["xsk", "tx_ring_empty_descs"]);
    for (f, _) in metrics::RING_ERRORS {
        set(&mut q, &["ring_errors", f]);
    }
    let mut pool = Map::new();
    pool.insert("pool_id".into(), json!(0));
    for (f, _) in metrics::POOL_ALLOC_PATHS
        .iter()
        .chain(metrics::POOL_RECYCLE_PATHS)
        .chain(metrics::POOL_MISUSE_KINDS)
    {
        set(&mut pool, &[f]);
    }
    for (f, _) in metrics::POOL_OTHER {
        set(&mut pool, &[f]);
    }
    q.insert("pool".into(), Value::Object(pool));
    let mut xdp = Map::new();
    for (f, _) in metrics::XDP_VERDICTS {
        set(&mut xdp, &[f]);
    }
    let mut device = Map::new();
    for (f, _) in metrics::DEVICE_LOSS_KINDS {
        set(&mut device, &[f]);
    }
    for (f, _) in metrics::DEVICE_OTHER {
        set(&mut device, &[f]);
    }
    let mut accounting = Map::new();
    for loc in metrics::FRAME_LOCATIONS {
        set(&mut accounting, &[loc]);
    }
    set(&mut accounting, &["total"]);
    json!({
        "interface": "main",
        "uptime_s": 1,
        "queues": [Value::Object(q)],
        "xdp": Value::Object(xdp),
        "device": Value::Object(device),
        "accounting": Value::Object(accounting),
        "rules": {
            "list": [{"port": "main", "index": 0, "name": "r", "packets": 1, "bytes": 1}],
            "reloads": 1,
            "refused": 1,
        },
    })
}

/// Every family with its samples from [`full_snapshot`].
pub fn families() -> Vec<FamilyOut> {
    collect(&full_snapshot())
}

fn labels_of(f: &FamilyOut) -> String {
    let mut names: Vec<String> = Vec::new();
    for (labels, _) in &f.samples {
        for (k, _) in labels {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    if names.is_empty() {
        return "none".into();
    }
    names
        .iter()
        .map(|n| {
            if FREE_LABELS.contains(&n.as_str()) {
                return format!("`{n}`");
            }
            let mut values: Vec<&str> = Vec::new();
            for (labels, _) in &f.samples {
                for (k, v) in labels {
                    if k == n && !values.contains(&v.as_str()) {
                        values.push(v);
                    }
                }
            }
            format!("`{n}` ({})", values.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `docs/reference/metrics.md`.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         <!-- Generated from userspace/xdpool/src/stats/metrics.rs by `make reference`; \
         do not edit: a test fails when this file and the code differ. -->\n\n\
         `xdpool run` serves these in the Prometheus text format where `stats.prometheus` \
         is set (e.g. `127.0.0.1:9717`, path `/metrics`); `xdpool stats` shows the same \
         snapshot as a table or JSON. Counters carry `_total`. `port` is the port's name, \
         `queue` its RX queue, `pool` the recycler's id, `rule` a rule's index in its \
         port's list and `rule_name` its name.\n\n\
         | Name | Type | Labels | Help |\n|---|---|---|---|\n",
    );
    for f in families() {
        let (name, kind) = match f.def.kind {
            Kind::Counter => (format!("{}_total", f.def.name), "counter"),
            Kind::Gauge => (f.def.name.to_string(), "gauge"),
        };
        out.push_str(&format!(
            "| `{name}` | {kind} | {} | {} |\n",
            labels_of(&f),
            f.def.help.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_snapshot_yields_every_exported_family() {
        let got: Vec<String> = families()
            .iter()
            .map(|f| match f.def.kind {
                Kind::Counter => format!("{}_total", f.def.name),
                Kind::Gauge => f.def.name.to_string(),
            })
            .collect();
        let mut want = metrics::exported_names();
        let mut have = got.clone();
        want.sort();
        have.sort();
        assert_eq!(have, want, "a family the reference would miss");
    }

    #[test]
    fn labels_come_from_the_samples() {
        let md = reference_markdown();
        let row = |name: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| `{name}` |")))
                .unwrap_or_else(|| panic!("no row {name}"))
                .to_string()
        };
        assert!(row("xdpool_rx_packets_total").contains("| counter | `port`, `queue` |"));
        assert!(
            row("xdpool_drops_total").contains("`reason` (action_drop, tx_ring_full,"),
            "{}",
            row("xdpool_drops_total")
        );
        assert!(row("xdpool_rule_packets_total").contains("`port`, `rule`, `rule_name` |"));
        assert!(row("xdpool_umem_frames").contains("| gauge | none |"));
        assert!(
            row("xdpool_frames").contains("`location` (free, cached, ring, fill, tx, application)")
        );
    }
}
