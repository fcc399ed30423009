//! Stats export: one JSON snapshot, served three ways — the control socket behind
//! `xdpool stats` (unix socket, mode 0600), a Prometheus text endpoint on 127.0.0.1,
//! and the live one-line view. The Prometheus numbers are derived from the same
//! snapshot as the JSON, so the two always agree.

pub mod control;
pub mod prom;

use serde_json::Value;
use std::sync::Arc;

/// Produces the current snapshot (called from the export threads).
pub type SnapshotFn = Arc<dyn Fn() -> Value + Send + Sync>;

/// One flattened metric: name, labels (name, value), value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Flattens a snapshot into `(metric name, labels, value)` triples.
///
/// Objects nest with `_`; arrays of objects named `queues` become a `queue` label
/// taken from each element's `queue` field (and a `port` label from its `port`);
/// strings and booleans are skipped.
pub fn flatten(snapshot: &Value) -> Vec<Sample> {
    let mut out = Vec::new();
    walk(snapshot, "xdpool", &[], &mut out);
    out
}

fn walk(v: &Value, name: &str, labels: &[(String, String)], out: &mut Vec<Sample>) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                out.push((name.to_string(), labels.to_vec(), f));
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let key: String = k.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
                walk(v, &format!("{name}_{key}"), labels, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let id = item.get("queue").and_then(Value::as_u64).map(|q| q.to_string()).unwrap_or_else(|| i.to_string());
                let mut l = labels.to_vec();
                l.push(("queue".to_string(), id));
                // Several ports each have a queue 0: the port tells them apart.
                if let Some(port) = item.get("port").and_then(Value::as_str) {
                    l.push(("port".to_string(), port.to_string()));
                }
                if let Value::Object(map) = item {
                    for (k, v) in map {
                        if k == "queue" {
                            continue;
                        }
                        let key: String = k.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
                        walk(v, &format!("{name}_{key}"), &l, out);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The control socket and, when configured, the Prometheus endpoint, serving
/// `snapshot`; each is optional (a failure is logged). Dropping the pair stops them.
pub fn start_servers(cfg: &crate::config::Config, snapshot: &SnapshotFn) -> (Option<control::ControlServer>, Option<prom::PromServer>) {
    let control = match control::ControlServer::start(&cfg.stats.control_socket, snapshot.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no control socket: `xdpool stats` will not reach this instance");
            None
        }
    };
    let prom = match &cfg.stats.prometheus {
        Some(addr) => match prom::PromServer::start(addr.get_ref().parse().expect("validated"), snapshot.clone()) {
            Ok(s) => {
                tracing::info!(addr = %s.addr, "prometheus endpoint: GET /metrics");
                Some(s)
            }
            Err(e) => {
                tracing::warn!(error = %e, "prometheus endpoint not started");
                None
            }
        },
        None => None,
    };
    (control, prom)
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flatten_names_and_labels() {
        let s = json!({"total": {"rx_packets": 5, "pool": {"alloc_fast": 3}}, "queues": [{"queue": 1, "rx_packets": 2}], "iface": "x"});
        let mut f = flatten(&s);
        f.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(f.len(), 3);
        assert_eq!(f[0], ("xdpool_queues_rx_packets".into(), vec![("queue".into(), "1".into())], 2.0));
        assert_eq!(f[1], ("xdpool_total_pool_alloc_fast".into(), vec![], 3.0));
        assert_eq!(f[2], ("xdpool_total_rx_packets".into(), vec![], 5.0));
    }
}
