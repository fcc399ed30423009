//! Stats export: one JSON snapshot, served three ways — the control socket behind
//! `xdpool stats` (unix socket, mode 0600; `view` draws it as a table), a Prometheus
//! text endpoint on 127.0.0.1, and the live one-line view. Prometheus families and the
//! table rows both come from the catalogue in `metrics`, read from the same snapshot
//! as the JSON, so the three always agree.

#[allow(unsafe_code)] // umask around the control socket bind
pub mod control;
pub mod metrics;
pub mod prom;
pub mod view;

use serde_json::Value;
use std::sync::Arc;

/// Produces the current snapshot (called from the export threads).
pub type SnapshotFn = Arc<dyn Fn() -> Value + Send + Sync>;

/// The control socket and, when configured, the Prometheus endpoint, serving
/// `snapshot`; each is optional (a failure is logged). Dropping the pair stops them.
pub fn start_servers(
    cfg: &crate::config::Config,
    snapshot: &SnapshotFn,
    rules: Option<control::RulesFn>,
) -> (Option<control::ControlServer>, Option<prom::PromServer>) {
    let handlers = control::Handlers {
        snapshot: snapshot.clone(),
        rules,
    };
    let control = match control::ControlServer::start_with(&cfg.stats.control_socket, handlers) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no control socket: `xdpool stats` will not reach this instance");
            None
        }
    };
    let prom = match &cfg.stats.prometheus {
        Some(addr) => match prom::PromServer::start(
            addr.get_ref().parse().expect("validated"),
            snapshot.clone(),
        ) {
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
