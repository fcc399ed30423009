//! Stats export: one JSON snapshot, served three ways — the control socket behind
//! `xdpool stats` (unix socket, mode 0600; `view` draws it as a table), a Prometheus
//! text endpoint on 127.0.0.1, and the live one-line view. Prometheus families and the
//! table rows both come from the catalogue in `metrics`, read from the same snapshot
//! as the JSON, so the three always agree.

pub mod control;
pub mod metrics;
pub mod prom;
pub mod view;

use serde_json::Value;
use std::sync::Arc;

/// Produces the current snapshot (called from the export threads).
pub type SnapshotFn = Arc<dyn Fn() -> Value + Send + Sync>;
