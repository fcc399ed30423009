//! Stats export: one JSON snapshot, served three ways — the control socket behind
//! `xdpool stats` (unix socket, mode 0600; `view` draws it as a table), a Prometheus
//! text endpoint on 127.0.0.1, and the live one-line view. Prometheus families and the
//! table rows both come from the catalogue in `metrics`, read from the same snapshot
//! as the JSON, so the three always agree.

#[allow(unsafe_code)] // umask around the control socket bind
pub mod control;
pub mod http;
pub mod metrics;
pub mod prom;
pub mod reference;
pub mod view;
pub mod web;

use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Produces the current snapshot (called from the export threads).
pub type SnapshotFn = Arc<dyn Fn() -> Value + Send + Sync>;

/// The control socket and, when configured, the HTTP endpoint (`/metrics`,
/// `/healthz`, `/readyz`), serving `snapshot` and `health`; each is optional (a
/// failure is logged). Dropping the pair stops them.
pub fn start_servers(
    cfg: &crate::config::Config,
    snapshot: &SnapshotFn,
    rules: Option<control::RulesFn>,
    handler_control: Option<control::HandlerControlFn>,
    health: &Arc<http::Health>,
    web: Option<&Arc<web::Web>>,
    access: control::Access,
) -> (Option<control::ControlServer>, Option<http::HttpServer>) {
    let handlers = control::Handlers {
        snapshot: snapshot.clone(),
        rules,
        handler_control,
    };
    let control = match control::ControlServer::start_with_access(
        &cfg.stats.control_socket,
        handlers,
        access,
    ) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no control socket: `xdpool stats` will not reach this instance");
            None
        }
    };
    let prom = match &cfg.stats.prometheus {
        Some(addr) => {
            let addr: std::net::SocketAddr = addr.get_ref().parse().expect("validated");
            if !addr.ip().is_loopback() && web.is_none() {
                tracing::warn!(%addr, "the HTTP endpoint listens beyond loopback without TLS or auth (stats.insecure_remote): anyone who can reach it sees the traffic stats");
            }
            let routes = http::Routes {
                snapshot: snapshot.clone(),
                health: health.clone(),
                web: web.cloned(),
            };
            match http::HttpServer::start(addr, routes, http::Limits::default()) {
                Ok(s) => {
                    tracing::info!(addr = %s.addr, "HTTP endpoint: GET /metrics, /healthz, /readyz");
                    Some(s)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "HTTP endpoint not started");
                    None
                }
            }
        }
        None => None,
    };
    (control, prom)
}

/// Logs refused clients: each one named once, at most [`RefusalLog::NAMED_PER_WINDOW`]
/// lines per [`RefusalLog::WINDOW`], the rest counted in one line when the window
/// turns, so that a flood of bad clients cannot flood the log.
pub struct RefusalLog {
    server: &'static str,
    window: Mutex<(Instant, u32, u32)>,
}

impl RefusalLog {
    /// Named lines per window.
    pub const NAMED_PER_WINDOW: u32 = 20;
    /// The window.
    pub const WINDOW: Duration = Duration::from_secs(10);

    /// A log for `server` ("HTTP endpoint", "control socket").
    pub fn new(server: &'static str) -> RefusalLog {
        RefusalLog {
            server,
            window: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    /// Says `what` about `peer` (or about the server itself), or counts it.
    pub fn say(&self, peer: Option<&dyn std::fmt::Display>, what: &str) {
        let Ok(mut w) = self.window.lock() else {
            return;
        };
        if w.0.elapsed() >= Self::WINDOW {
            if w.2 > 0 {
                tracing::warn!(
                    server = self.server,
                    unnamed = w.2,
                    "{} more clients refused or closed in the last {} s",
                    w.2,
                    Self::WINDOW.as_secs()
                );
            }
            *w = (Instant::now(), 0, 0);
        }
        if w.1 >= Self::NAMED_PER_WINDOW {
            w.2 += 1;
            return;
        }
        w.1 += 1;
        match peer {
            Some(p) => {
                tracing::warn!(server = self.server, client = %p, "{}: client {p} {what}", self.server)
            }
            None => tracing::warn!(server = self.server, "{}: {what}", self.server),
        }
    }
}
