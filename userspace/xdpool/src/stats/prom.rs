//! Prometheus text endpoint (`GET /metrics`), encoded with `prometheus-client`.
//!
//! Listens where the config says; anything but a loopback address gets a warning,
//! since the stats describe traffic.

use super::metrics::{collect, Kind, Labels};
use super::SnapshotFn;
use prometheus::{CounterVec, Encoder, GaugeVec, Opts, Registry, TextEncoder};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// A running endpoint; stops when dropped.
pub struct PromServer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The address it listens on.
    pub addr: SocketAddr,
}

impl PromServer {
    /// Binds `addr` and serves `GET /metrics` from a thread.
    pub fn start(addr: SocketAddr, snapshot: SnapshotFn) -> std::io::Result<PromServer> {
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "the Prometheus endpoint listens beyond loopback: anyone who can reach it sees the traffic stats");
        }
        // In the namespace xdpool was started in, not the interface's (the lab's).
        let listener = crate::netns::in_original_netns(|| TcpListener::bind(addr))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("xdpool-prom".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let _ = serve_one(stream, &snapshot);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "prometheus accept failed");
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                }
            })?;
        Ok(PromServer {
            stop,
            thread: Some(thread),
            addr,
        })
    }
}

fn serve_one(stream: std::net::TcpStream, snapshot: &SnapshotFn) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut stream = stream;
    let path = request.split_whitespace().nth(1).unwrap_or("");
    if !request.starts_with("GET ") || (path != "/metrics" && path != "/") {
        write!(
            stream,
            "HTTP/1.0 404 Not Found\r\nContent-Length: 24\r\n\r\nonly GET /metrics exists"
        )?;
        return Ok(());
    }
    let body = render(&snapshot());
    write!(
        stream,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\n\r\n{}",
        body.len(),
        body
    )
}

impl Drop for PromServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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

    #[test]
    fn serves_over_loopback() {
        let snap: SnapshotFn =
            Arc::new(|| json!({"interface": "x", "queues": [{"queue": 0, "rx_packets": 3}]}));
        let server = PromServer::start("127.0.0.1:0".parse().unwrap(), snap).unwrap();
        let mut s = std::net::TcpStream::connect(server.addr).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut s, &mut body).unwrap();
        assert!(body.starts_with("HTTP/1.0 200"));
        let text = body.split("\r\n\r\n").nth(1).unwrap();
        assert_eq!(
            parse_text(text).unwrap()["xdpool_rx_packets_total{port=\"x\",queue=\"0\"}"],
            3.0
        );
    }
}
