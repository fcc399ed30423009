//! Prometheus text endpoint (`GET /metrics`), encoded with `prometheus-client`.
//!
//! Listens where the config says; anything but a loopback address gets a warning,
//! since the stats describe traffic.

use super::{flatten, SnapshotFn};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Labels = Vec<(String, String)>;

/// Encodes a snapshot as Prometheus text.
pub fn render(snapshot: &serde_json::Value) -> String {
    let mut families: BTreeMap<String, Family<Labels, Gauge<f64, AtomicU64>>> = BTreeMap::new();
    for (name, labels, value) in flatten(snapshot) {
        families.entry(name).or_default().get_or_create(&labels).set(value);
    }
    let mut registry = Registry::default();
    for (name, fam) in families {
        registry.register(name.clone(), name.replace('_', " "), fam);
    }
    let mut out = String::new();
    encode(&mut out, &registry).expect("encoding to a String cannot fail");
    out
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
        let thread = std::thread::Builder::new().name("xdpool-prom".into()).spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = serve_one(stream, &snapshot);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
                    Err(e) => {
                        tracing::warn!(error = %e, "prometheus accept failed");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            }
        })?;
        Ok(PromServer { stop, thread: Some(thread), addr })
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
        write!(stream, "HTTP/1.0 404 Not Found\r\nContent-Length: 24\r\n\r\nonly GET /metrics exists")?;
        return Ok(());
    }
    let body = render(&snapshot());
    write!(
        stream,
        "HTTP/1.0 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\n\r\n{}",
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

/// Parses Prometheus text into `name{labels} -> value` (for tests and `xdpool stats`).
pub fn parse_text(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (key, value) = line.rsplit_once(' ').ok_or_else(|| format!("line {}: no value: {line}", i + 1))?;
        let v: f64 = value.parse().map_err(|_| format!("line {}: bad value {value}", i + 1))?;
        if key.contains('{') && !key.ends_with('}') {
            return Err(format!("line {}: bad labels: {line}", i + 1));
        }
        out.insert(key.trim_end_matches("{}").to_string(), v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn render_parses_and_matches_snapshot() {
        let s = json!({"total": {"rx_packets": 12345, "pool": {"alloc_fast": 7}}, "queues": [{"queue": 0, "rx_packets": 12000}, {"queue": 1, "rx_packets": 345}]});
        let text = render(&s);
        assert!(text.ends_with("# EOF\n"), "{text}");
        let m = parse_text(&text).unwrap();
        assert_eq!(m["xdpool_total_rx_packets"], 12345.0);
        assert_eq!(m["xdpool_total_pool_alloc_fast"], 7.0);
        assert_eq!(m["xdpool_queues_rx_packets{queue=\"0\"}"], 12000.0);
        assert_eq!(m["xdpool_queues_rx_packets{queue=\"1\"}"], 345.0);
    }

    #[test]
    fn queues_of_several_ports_are_told_apart_by_a_port_label() {
        let s = json!({"queues": [{"queue": 0, "port": "in", "rx_packets": 5}, {"queue": 0, "port": "out", "rx_packets": 7}]});
        let m = parse_text(&render(&s)).unwrap();
        assert_eq!(m["xdpool_queues_rx_packets{queue=\"0\",port=\"in\"}"], 5.0);
        assert_eq!(m["xdpool_queues_rx_packets{queue=\"0\",port=\"out\"}"], 7.0);
    }

    #[test]
    fn serves_over_loopback() {
        let snap: SnapshotFn = Arc::new(|| json!({"total": {"rx_packets": 3}}));
        let server = PromServer::start("127.0.0.1:0".parse().unwrap(), snap).unwrap();
        let mut s = std::net::TcpStream::connect(server.addr).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut s, &mut body).unwrap();
        assert!(body.starts_with("HTTP/1.0 200"));
        let text = body.split("\r\n\r\n").nth(1).unwrap();
        assert_eq!(parse_text(text).unwrap()["xdpool_total_rx_packets"], 3.0);
    }
}
