//! The Prometheus text format of a snapshot (served by [`super::http`] on
//! `GET /metrics`), and a parser for it that the tests use.

use super::metrics::{collect, Kind, Labels};
use prometheus::{CounterVec, Encoder, GaugeVec, Opts, Registry, TextEncoder};
use std::collections::BTreeMap;

/// Encodes a snapshot in the Prometheus text format (0.0.4): the families of
/// [`super::metrics`], each with its type and HELP, per-port/queue values as labels.
pub fn render(snapshot: &serde_json::Value) -> String {
    let registry = Registry::new();
    for fam in collect(snapshot) {
        let Some((first, _)) = fam.samples.first() else {
            continue;
        };
        let names: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
        let name = match fam.def.kind {
            Kind::Counter => format!("{}_total", fam.def.name),
            Kind::Gauge => fam.def.name.to_string(),
        };
        let opts = Opts::new(name, fam.def.help);
        // Every sample of a family carries the same label names (collect() builds them so).
        fn values(labels: &Labels, n: usize) -> Option<Vec<&str>> {
            (labels.len() == n).then(|| labels.iter().map(|(_, v)| v.as_str()).collect())
        }
        let registered = match fam.def.kind {
            Kind::Counter => {
                let vec = CounterVec::new(opts, &names).expect("valid metric name and labels");
                for (labels, v) in &fam.samples {
                    if let (Some(lv), true) = (values(labels, names.len()), *v >= 0.0) {
                        vec.with_label_values(&lv).inc_by(*v);
                    }
                }
                registry.register(Box::new(vec))
            }
            Kind::Gauge => {
                let vec = GaugeVec::new(opts, &names).expect("valid metric name and labels");
                for (labels, v) in &fam.samples {
                    if let Some(lv) = values(labels, names.len()) {
                        vec.with_label_values(&lv).set(*v);
                    }
                }
                registry.register(Box::new(vec))
            }
        };
        if let Err(e) = registered {
            tracing::warn!(family = fam.def.name, error = %e, "metric family not exported");
        }
    }
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .expect("encoding to memory cannot fail");
    String::from_utf8(out).expect("the text format is UTF-8")
}

/// The key [`parse_text`] files a sample under: `name{k="v",...}` with the labels
/// sorted by name, or the bare name when there are none.
pub fn sample_key(name: &str, labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let mut l: Vec<&(String, String)> = labels.iter().collect();
    l.sort();
    format!(
        "{name}{{{}}}",
        l.iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Parses Prometheus text into `name{labels} -> value` (labels as [`sample_key`] files them).
pub fn parse_text(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (key, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| format!("line {}: no value: {line}", i + 1))?;
        let v: f64 = value
            .parse()
            .map_err(|_| format!("line {}: bad value {value}", i + 1))?;
        let (name, labels) = match key.split_once('{') {
            None => (key, Vec::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .ok_or_else(|| format!("line {}: bad labels: {line}", i + 1))?;
                let mut labels = Vec::new();
                for pair in body.split("\",").filter(|p| !p.is_empty()) {
                    let (k, v) = pair
                        .split_once("=\"")
                        .ok_or_else(|| format!("line {}: bad label {pair}", i + 1))?;
                    labels.push((
                        k.trim_start_matches(',').to_string(),
                        v.trim_end_matches('"').to_string(),
                    ));
                }
                (name, labels)
            }
        };
        out.insert(sample_key(name, &labels), v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn render_parses_and_matches_snapshot() {
        let s = json!({"interface": "xdpb0", "queues": [{"queue": 0, "rx_packets": 12000, "pool": {"alloc_fast": 7, "inflight": 3}}, {"queue": 1, "rx_packets": 345}]});
        let text = render(&s);
        assert!(
            text.contains("# TYPE xdpool_rx_packets_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE xdpool_pool_inflight gauge\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP xdpool_rx_packets_total Frames the worker took"),
            "{text}"
        );
        let m = parse_text(&text).unwrap();
        assert_eq!(
            m["xdpool_rx_packets_total{port=\"xdpb0\",queue=\"0\"}"],
            12000.0
        );
        assert_eq!(
            m["xdpool_rx_packets_total{port=\"xdpb0\",queue=\"1\"}"],
            345.0
        );
        assert_eq!(
            m["xdpool_pool_alloc_total{path=\"fast\",port=\"xdpb0\",queue=\"0\"}"],
            7.0
        );
        assert_eq!(m["xdpool_pool_inflight{port=\"xdpb0\",queue=\"0\"}"], 3.0);
    }

    #[test]
    fn queues_of_several_ports_are_told_apart_by_a_port_label() {
        let s = json!({"queues": [{"queue": 0, "port": "in", "rx_packets": 5}, {"queue": 0, "port": "out", "rx_packets": 7}]});
        let m = parse_text(&render(&s)).unwrap();
        assert_eq!(m["xdpool_rx_packets_total{port=\"in\",queue=\"0\"}"], 5.0);
        assert_eq!(m["xdpool_rx_packets_total{port=\"out\",queue=\"0\"}"], 7.0);
    }
}
