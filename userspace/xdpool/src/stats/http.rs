//! The HTTP endpoint: `GET /metrics` (Prometheus text, [`super::prom::render`]),
//! `GET /healthz` and `GET /readyz` (probes: no data, no auth).
//!
//! hyper's HTTP/1 server on a current-thread tokio runtime of its own thread
//! (`xdpool-http`, not pinned, so never on a worker's core). No client can blind it
//! or grow it:
//! - a request head is at most [`Limits::max_head`] bytes (431, then closed) and must
//!   be complete within [`Limits::head_deadline`] of its first byte, or of the accept
//!   (the whole head, not each read);
//! - these routes take no body: one announced is refused (413) unread;
//! - a response must be taken within [`Limits::response_deadline`]; a kept-alive
//!   connection may idle [`Limits::idle`] between requests;
//! - at most [`Limits::max_conns`] connections are open. When a new one arrives at
//!   the cap, the oldest connection that is not being answered (idle, or still
//!   sending its head) is closed to make room; only when every open connection is
//!   being answered is the new one refused. A scraper that sends its request at once
//!   is therefore always let in, however many idle or slow connections came before.
//!
//! Every refused or closed client is logged once, with its address, at most
//! [`super::RefusalLog`]'s rate.

use super::SnapshotFn;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The endpoint's bounds (see the module doc for how they are applied).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once.
    pub max_conns: usize,
    /// Bytes of one request head (hyper's read buffer; 8 KiB at least).
    pub max_head: usize,
    /// From accept, or from a head's first byte, to its last.
    pub head_deadline: Duration,
    /// From a complete head to the last byte of the response handed to the kernel.
    pub response_deadline: Duration,
    /// A kept-alive connection's wait for its next request.
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_conns: 64,
            max_head: 16 * 1024,
            head_deadline: Duration::from_secs(5),
            response_deadline: Duration::from_secs(10),
            idle: Duration::from_secs(30),
        }
    }
}

/// The listen backlog (the kernel caps it at net.core.somaxconn).
const LISTEN_BACKLOG: i32 = 4096;

/// What the probes report: a heartbeat the control loop bumps each turn
/// (`/healthz`) and whether every port is attached with carrier (`/readyz`).
#[derive(Debug)]
pub struct Health {
    origin: Instant,
    beat_ms: AtomicU64,
    ready: AtomicBool,
    stale_after: Duration,
}

/// How long the control loop may not turn before `/healthz` says 503 (systemd's
/// watchdog, `WatchdogSec=10s` in the unit, restarts it after as long).
pub const HEALTH_STALE_AFTER: Duration = Duration::from_secs(10);

impl Health {
    /// Alive now, not ready; stale once no [`Health::beat`] came for `stale_after`.
    pub fn new(stale_after: Duration) -> Arc<Health> {
        Arc::new(Health {
            origin: Instant::now(),
            beat_ms: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            stale_after,
        })
    }

    /// The control loop turned. Context: the control loop.
    pub fn beat(&self) {
        self.beat_ms
            .store(self.origin.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Every port attached with carrier (the rule of `ready`), or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// How long since the last beat, when that is longer than allowed.
    pub fn stalled_for(&self) -> Option<Duration> {
        let since = self
            .origin
            .elapsed()
            .saturating_sub(Duration::from_millis(self.beat_ms.load(Ordering::Relaxed)));
        (since > self.stale_after).then_some(since)
    }

    /// Whether `/readyz` says 200.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// What `/metrics` answers with, and who may ask.
#[derive(Clone)]
pub struct Routes {
    /// The snapshot `/metrics` renders.
    pub snapshot: SnapshotFn,
    /// The probes' state.
    pub health: Arc<Health>,
    /// TLS and basic auth (`stats.web_config`), when set.
    pub web: Option<Arc<super::web::Web>>,
}

/// A running endpoint; stops when dropped.
pub struct HttpServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The address it listens on.
    pub addr: SocketAddr,
}

impl HttpServer {
    /// Binds `addr` (in the namespace xdpool was started in) and serves from a thread.
    pub fn start(addr: SocketAddr, routes: Routes, limits: Limits) -> std::io::Result<HttpServer> {
        let std_listener = crate::netns::in_original_netns(|| std::net::TcpListener::bind(addr))?;
        // std listens with a backlog of 128: a burst of connects past it has its SYNs
        // dropped, and a scraper among them waits a second for its retry.
        nix::sys::socket::listen(
            &std_listener,
            nix::sys::socket::Backlog::new(LISTEN_BACKLOG)?,
        )?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        // One blocking thread: bcrypt checks (rate-limited) run there, off this one.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .enable_io()
            .enable_time()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("xdpool-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(listener) => serve(listener, routes, limits, stop_rx).await,
                        Err(e) => tracing::error!(error = %e, "the HTTP endpoint cannot listen"),
                    }
                });
            })?;
        Ok(HttpServer {
            stop: Some(stop_tx),
            thread: Some(thread),
            addr,
        })
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where a connection is in its request cycle.
const IDLE: u8 = 0; // accepted, or between requests: no byte of a head yet
const HEAD: u8 = 1; // some bytes of a head, not all
const ANSWERING: u8 = 2; // head complete, response not yet handed over
const FRESH: u8 = 3; // accepted, nothing read yet (the head deadline runs)

/// One connection's phase and when it entered it (ms since the server's origin).
struct Phase {
    origin: Instant,
    phase: AtomicU8,
    since_ms: AtomicU64,
}

impl Phase {
    fn set(&self, phase: u8) {
        self.since_ms
            .store(self.origin.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
    }

    fn get(&self) -> (u8, u64) {
        (
            self.phase.load(Ordering::Relaxed),
            self.since_ms.load(Ordering::Relaxed),
        )
    }

    /// When the current phase runs out, and what to say then.
    fn deadline(&self, limits: &Limits) -> (Instant, Option<&'static str>) {
        let (phase, since) = self.get();
        let (allowed, why) = match phase {
            FRESH | HEAD => (
                limits.head_deadline,
                Some("did not finish its request head in time"),
            ),
            ANSWERING => (
                limits.response_deadline,
                Some("did not take its response in time"),
            ),
            _ => (limits.idle, None),
        };
        (self.origin + Duration::from_millis(since) + allowed, why)
    }
}

/// The IO a connection is served over: marks the first byte of each head.
struct Tracked {
    stream: tokio::net::TcpStream,
    phase: Arc<Phase>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.stream).poll_read(cx, buf);
        if buf.filled().len() > before && me.phase.get().0 == IDLE {
            me.phase.set(HEAD);
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A response body that moves its connection back to IDLE once hyper is done with it.
struct Answer {
    body: Full<Bytes>,
    phase: Arc<Phase>,
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.phase.set(IDLE);
    }
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The open connections, for the cap.
struct Open {
    peer: SocketAddr,
    phase: Arc<Phase>,
    close: tokio::task::AbortHandle,
}

type Table = Arc<Mutex<HashMap<u64, Open>>>;

async fn serve(
    listener: tokio::net::TcpListener,
    routes: Routes,
    limits: Limits,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let origin = Instant::now();
    let table: Table = Arc::default();
    let refusals = Arc::new(super::RefusalLog::new("HTTP endpoint"));
    let mut next_id = 0u64;
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and the like: say it (rate-limited) and let time pass.
                    refusals.say(None, &format!("accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        if !make_room(&table, &limits, &refusals) {
            refusals.say(
                Some(&peer),
                &format!(
                    "refused: all {} connections are being answered",
                    limits.max_conns
                ),
            );
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let phase = Arc::new(Phase {
            origin,
            phase: AtomicU8::new(FRESH),
            since_ms: AtomicU64::new(origin.elapsed().as_millis() as u64),
        });
        let id = next_id;
        next_id += 1;
        let task = tokio::spawn(connection(
            Tracked {
                stream,
                phase: phase.clone(),
            },
            peer,
            routes.clone(),
            limits,
            refusals.clone(),
            Forget(id, table.clone()),
        ));
        table.lock().expect("never poisoned").insert(
            id,
            Open {
                peer,
                phase,
                close: task.abort_handle(),
            },
        );
        // Let the new connection read its head before the next accept can crowd it.
        tokio::task::yield_now().await;
    }
    for (_, open) in table.lock().expect("never poisoned").drain() {
        open.close.abort();
    }
}

/// Removes a connection from the table when its task ends, however it ends.
struct Forget(u64, Table);

impl Drop for Forget {
    fn drop(&mut self) {
        if let Ok(mut t) = self.1.lock() {
            t.remove(&self.0);
        }
    }
}

/// At the cap, closes the oldest connection not being answered; false when every
/// open connection is being answered (then the new one is refused).
fn make_room(table: &Table, limits: &Limits, refusals: &super::RefusalLog) -> bool {
    let mut t = table.lock().expect("never poisoned");
    if t.len() < limits.max_conns {
        return true;
    }
    let oldest = t
        .iter()
        .filter(|(_, o)| o.phase.get().0 != ANSWERING)
        .min_by_key(|(id, o)| (o.phase.get().1, **id))
        .map(|(id, _)| *id);
    let Some(id) = oldest else {
        return false;
    };
    let open = t.remove(&id).expect("just found");
    open.close.abort();
    let what = match open.phase.get().0 {
        IDLE => "idle",
        _ => "still sending its request head",
    };
    refusals.say(
        Some(&open.peer),
        &format!(
            "closed: {} connections open, and this one was the oldest {what}",
            limits.max_conns
        ),
    );
    true
}

async fn connection(
    io: Tracked,
    peer: SocketAddr,
    routes: Routes,
    limits: Limits,
    refusals: Arc<super::RefusalLog>,
    _forget: Forget,
) {
    let phase = io.phase.clone();
    let active = routes.web.as_ref().map(|w| w.current());
    match active.as_ref().and_then(|a| a.tls.clone()) {
        None => drive(io, peer, routes, limits, refusals, phase).await,
        Some(acceptor) => {
            // The handshake counts against the head's deadline (the phase is FRESH).
            let (deadline, _) = phase.deadline(&limits);
            match tokio::time::timeout_at(deadline.into(), acceptor.accept(io)).await {
                Ok(Ok(tls)) => drive(tls, peer, routes, limits, refusals, phase).await,
                Ok(Err(e)) => {
                    refusals.say(Some(&peer), &format!("refused: TLS handshake failed: {e}"))
                }
                Err(_) => refusals.say(
                    Some(&peer),
                    &format!("closed: no TLS handshake within {:?}", limits.head_deadline),
                ),
            }
        }
    }
}

/// Serves HTTP/1 on `io` until the client leaves or a deadline of its phase passes.
async fn drive<I>(
    io: I,
    peer: SocketAddr,
    routes: Routes,
    limits: Limits,
    refusals: Arc<super::RefusalLog>,
    phase: Arc<Phase>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_phase = phase.clone();
    let svc_refusals = refusals.clone();
    let service = hyper::service::service_fn(move |req| {
        svc_phase.set(ANSWERING);
        let (routes, phase, refusals) = (routes.clone(), svc_phase.clone(), svc_refusals.clone());
        async move {
            let resp = answer(&routes, req, peer, &refusals).await;
            Ok::<_, Infallible>(resp.map(|body| Answer { body, phase }))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .max_buf_size(limits.max_head.max(8192))
        .keep_alive(true)
        .half_close(true)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(conn);
    loop {
        let (deadline, why) = phase.deadline(&limits);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    if e.is_parse() || e.is_parse_too_large() {
                        refusals.say(Some(&peer), &format!("refused: {e}"));
                    } else if e.is_incomplete_message() {
                        refusals.say(Some(&peer), "closed: it ended its side before a whole request");
                    } else {
                        tracing::debug!(%peer, error = %e, "HTTP connection ended");
                    }
                }
                return;
            }
            _ = tokio::time::sleep_until(deadline.into()) => {
                // The phase may have moved on meanwhile: then its own deadline runs.
                if phase.deadline(&limits).0 <= Instant::now() {
                    match why {
                        Some(why) => refusals.say(Some(&peer), &format!("closed: {why} ({:?})", match phase.get().0 {
                            ANSWERING => limits.response_deadline,
                            _ => limits.head_deadline,
                        })),
                        None => tracing::debug!(%peer, "kept-alive HTTP connection idle too long: closed"),
                    }
                    return;
                }
            }
        }
    }
}

/// The answer to one request (no body is read: every route takes none).
async fn answer(
    routes: &Routes,
    req: Request<Incoming>,
    peer: SocketAddr,
    refusals: &super::RefusalLog,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &str| {
        let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    let path = req.uri().path();
    let known = matches!(path, "/metrics" | "/healthz" | "/readyz");
    let mut resp = if !known {
        text(
            StatusCode::NOT_FOUND,
            "not found: the routes are /metrics, /healthz and /readyz\n",
        )
    } else if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        r
    } else if has_body(&req) {
        let mut r = text(StatusCode::PAYLOAD_TOO_LARGE, "these routes take no body\n");
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    } else {
        match path {
            "/healthz" => match routes.health.stalled_for() {
                None => text(StatusCode::OK, "ok\n"),
                Some(d) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("the control loop has not turned for {} s\n", d.as_secs()),
                ),
            },
            "/readyz" => match routes.health.is_ready() {
                true => text(StatusCode::OK, "ready\n"),
                false => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not ready: a port is not attached with carrier\n",
                ),
            },
            _ => match authorize(routes, &req, peer, refusals).await {
                Ok(()) => metrics(routes, &req),
                Err(refused) => refused,
            },
        }
    };
    if req.version() == Version::HTTP_10 {
        *resp.version_mut() = Version::HTTP_10;
    }
    if req.method() == Method::HEAD {
        let len = resp.headers().get(header::CONTENT_LENGTH).cloned();
        let (mut parts, _) = resp.into_parts();
        if let Some(len) = len {
            parts.headers.insert(header::CONTENT_LENGTH, len);
        }
        resp = Response::from_parts(parts, Full::new(Bytes::new()));
    }
    resp
}

/// Basic auth for `/metrics`, when the web config has users; the refusal otherwise.
async fn authorize(
    routes: &Routes,
    req: &Request<Incoming>,
    peer: SocketAddr,
    refusals: &super::RefusalLog,
) -> Result<(), Response<Full<Bytes>>> {
    use super::web::Verdict;
    let Some(web) = &routes.web else {
        return Ok(());
    };
    let active = web.current();
    let verdict = web
        .check(
            &active,
            req.headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
        )
        .await;
    let (status, body) = match verdict {
        Verdict::Allowed => return Ok(()),
        Verdict::Missing => (StatusCode::UNAUTHORIZED, "basic auth required\n"),
        Verdict::Wrong(user) => {
            refusals.say(
                Some(&peer),
                &format!(
                    "refused: wrong user or password (user `{}`)",
                    user.escape_debug()
                ),
            );
            (StatusCode::UNAUTHORIZED, "wrong user or password\n")
        }
        Verdict::Limited => {
            refusals.say(Some(&peer), "refused: too many password checks just now");
            (
                StatusCode::TOO_MANY_REQUESTS,
                "too many password checks; try again in a second\n",
            )
        }
    };
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"xdpool\""),
    );
    if status == StatusCode::TOO_MANY_REQUESTS {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    Err(r)
}

fn has_body(req: &Request<Incoming>) -> bool {
    let h = req.headers();
    h.contains_key(header::TRANSFER_ENCODING)
        || h.get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// `/metrics`: the text format, gzip-compressed when the client accepts gzip.
fn metrics(routes: &Routes, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let body = super::prom::render(&(routes.snapshot)());
    let gzip = req
        .headers()
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .any(|v| accepts_gzip(v.to_str().unwrap_or("")));
    let mut builder = Response::builder()
        .header(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )
        .header(header::VARY, "Accept-Encoding");
    let bytes = if gzip {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(
            Vec::with_capacity(body.len() / 4),
            flate2::Compression::fast(),
        );
        let _ = enc.write_all(body.as_bytes());
        match enc.finish() {
            Ok(z) => {
                builder = builder.header(header::CONTENT_ENCODING, "gzip");
                Bytes::from(z)
            }
            Err(_) => Bytes::from(body),
        }
    } else {
        Bytes::from(body)
    };
    builder
        .header(header::CONTENT_LENGTH, bytes.len())
        .body(Full::new(bytes))
        .expect("static headers are valid")
}

/// Whether an `Accept-Encoding` value takes gzip (a `q=0` refuses it).
fn accepts_gzip(value: &str) -> bool {
    value.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("");
        if !coding.eq_ignore_ascii_case("gzip") && coding != "*" {
            return false;
        }
        !parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f32>().ok())
                .is_some_and(|q| q == 0.0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn server(limits: Limits) -> (HttpServer, Arc<Health>) {
        let snap: SnapshotFn =
            Arc::new(|| json!({"interface": "x", "queues": [{"queue": 0, "rx_packets": 3}]}));
        let health = Health::new(Duration::from_millis(300));
        health.beat();
        let routes = Routes {
            snapshot: snap,
            health: health.clone(),
            web: None,
        };
        (
            HttpServer::start("127.0.0.1:0".parse().unwrap(), routes, limits).unwrap(),
            health,
        )
    }

    /// One HTTP/1.0 request; the status code and the body.
    fn get(addr: SocketAddr, path: &str, extra: &str) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\n{extra}\r\n").unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let split = all
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head");
        let head = String::from_utf8_lossy(&all[..split]).to_string();
        // An HTTP/1.0 request gets an HTTP/1.0 answer (root_multiqueue reads it so).
        assert!(head.starts_with("HTTP/1.0 "), "{head}");
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, all[split + 4..].to_vec())
    }

    #[test]
    fn serves_metrics_plain_and_gzip() {
        let (srv, _) = server(Limits::default());
        let (code, body) = get(srv.addr, "/metrics", "");
        assert_eq!(code, 200);
        let text = String::from_utf8(body).unwrap();
        assert_eq!(
            super::super::prom::parse_text(&text).unwrap()
                ["xdpool_rx_packets_total{port=\"x\",queue=\"0\"}"],
            3.0
        );
        let (code, z) = get(srv.addr, "/metrics", "Accept-Encoding: gzip\r\n");
        assert_eq!(code, 200);
        let mut unzipped = String::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_string(&mut unzipped)
            .expect("a gzip body");
        assert_eq!(unzipped, text);
        let (_, plain) = get(srv.addr, "/metrics", "Accept-Encoding: gzip;q=0\r\n");
        assert_eq!(String::from_utf8(plain).unwrap(), text);
    }

    #[test]
    fn probes_follow_the_heartbeat_and_readiness() {
        let (srv, health) = server(Limits::default());
        assert_eq!(get(srv.addr, "/healthz", "").0, 200);
        assert_eq!(get(srv.addr, "/readyz", "").0, 503);
        health.set_ready(true);
        assert_eq!(get(srv.addr, "/readyz", "").0, 200);
        std::thread::sleep(Duration::from_millis(400));
        let (code, body) = get(srv.addr, "/healthz", "");
        assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
        health.beat();
        assert_eq!(get(srv.addr, "/healthz", "").0, 200);
        assert_eq!(get(srv.addr, "/nothing", "").0, 404);
    }

    #[test]
    fn keep_alive_serves_several_requests_on_one_connection() {
        let (srv, _) = server(Limits::default());
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        for _ in 0..3 {
            write!(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(&mut r, &mut line).unwrap();
            assert!(line.starts_with("HTTP/1.1 200"), "{line}");
            let mut len = 0;
            loop {
                line.clear();
                std::io::BufRead::read_line(&mut r, &mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            assert_eq!(body, b"ok\n");
        }
    }

    #[test]
    fn a_head_not_complete_within_the_deadline_is_closed() {
        let limits = Limits {
            head_deadline: Duration::from_millis(300),
            ..Limits::default()
        };
        let (srv, _) = server(limits);
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let t = Instant::now();
        // A byte every 100 ms keeps each read short; only the whole-head deadline ends it.
        let mut closed = false;
        for _ in 0..20 {
            if s.write_all(b"X").is_err() {
                closed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut buf = [0u8; 64];
        closed |= matches!(s.read(&mut buf), Ok(0) | Err(_));
        assert!(closed, "still open after {:?}", t.elapsed());
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_full_cap_of_idle_connections_still_lets_a_scrape_in() {
        let limits = Limits {
            max_conns: 8,
            ..Limits::default()
        };
        let (srv, _) = server(limits);
        let idle: Vec<TcpStream> = (0..20)
            .map(|_| TcpStream::connect(srv.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        assert_eq!(get(srv.addr, "/metrics", "").0, 200);
        assert!(t.elapsed() < Duration::from_secs(1));
        // The oldest idle ones were closed to make room.
        let mut first = &idle[0];
        first
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut b = [0u8; 1];
        assert!(matches!(first.read(&mut b), Ok(0) | Err(_)));
    }

    #[test]
    fn a_huge_head_is_refused_with_431_without_reading_it_all() {
        let (srv, _) = server(Limits::default());
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let chunk = vec![b'a'; 64 * 1024];
        let _ = s.write_all(b"GET /");
        let mut sent = 0usize;
        while sent < 64 << 20 {
            match s.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        assert!(sent < 64 << 20, "the server took {sent} bytes of one head");
        assert_eq!(get(srv.addr, "/metrics", "").0, 200);
    }

    #[test]
    fn accept_encoding_is_read_as_written() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, gzip;q=0.5"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
    }
}
