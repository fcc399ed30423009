//! The metric catalogue: every Prometheus family xdpool exports, with its type, its
//! HELP text and where in the stats snapshot its samples come from.
//!
//! Conventions (prometheus.io/docs/practices/naming): monotonic counts are `counter`s
//! (the encoder adds `_total`), levels are `gauge`s, one family per quantity, and what
//! differs between samples is a label (`port`, `queue`, `reason`, `path`, `location`,
//! `verdict`, `kind`), never part of the name.
//!
//! To export a new worker counter: add it to [`QUEUE_COUNTERS`] (or to a labelled group
//! such as [`DROP_REASONS`]), or to [`NOT_EXPORTED`] with the reason. The test
//! `every_worker_counter_is_exported_or_named_as_skipped` fails until you do.

use serde_json::Value;

/// Counter or gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up while the process lives.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// One family: name without `_total`, type, HELP.
#[derive(Debug, Clone, Copy)]
pub struct Def {
    /// Name (the encoder appends `_total` to counters).
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// What is counted and where.
    pub help: &'static str,
}

/// Label pairs of one sample.
pub type Labels = Vec<(String, String)>;

/// A family and its samples, ready to encode.
#[derive(Debug, Clone)]
pub struct FamilyOut {
    /// The family.
    pub def: Def,
    /// Samples.
    pub samples: Vec<(Labels, f64)>,
}

const fn c(name: &'static str, help: &'static str) -> Def {
    Def {
        name,
        kind: Kind::Counter,
        help,
    }
}
const fn g(name: &'static str, help: &'static str) -> Def {
    Def {
        name,
        kind: Kind::Gauge,
        help,
    }
}

/// Worker counters exported one family each, labelled `port` and `queue`:
/// (snapshot field, family).
pub const QUEUE_COUNTERS: &[(&str, Def)] = &[
    ("rx_packets", c("xdpool_rx_packets", "Frames the worker took from its socket's RX ring (a multi-buffer frame counts once).")),
    ("rx_bytes", c("xdpool_rx_bytes", "Bytes of the frames counted in xdpool_rx_packets_total.")),
    ("tx_packets", c("xdpool_tx_packets", "Descriptors the worker queued on its socket's TX ring (l2fwd, forward, mirror copies, copybreak).")),
    ("tx_bytes", c("xdpool_tx_bytes", "Bytes of the descriptors counted in xdpool_tx_packets_total.")),
    ("tx_completed", c("xdpool_tx_completed", "TX descriptors the kernel reported sent on the completion ring.")),
    ("fill_produced", c("xdpool_fill_produced", "Frames the worker put on its socket's fill ring for the kernel to receive into.")),
    ("fill_pool_empty", c("xdpool_fill_pool_empty", "Times the worker could not top the fill ring up because its pool had no free frame.")),
    ("rx_limited_by_tx", c("xdpool_rx_limited_by_tx", "Passes that took fewer RX descriptors than a batch because the TX ring had no room for what they send (back-pressure instead of a drop).")),
    ("rx_shed_passes", c("xdpool_rx_shed_passes", "Passes that took a whole batch although the TX side had no room for it, because the kernel ran short (fill ring below half its target, or in copy mode RX ring over half full): the excess is dropped by the worker (drops tx_ring_full, egress_queue_full) instead of by the kernel.")),
    ("wakeups", c("xdpool_wakeups", "Wake-up system calls made for the kernel (need_wakeup set on the fill or TX ring).")),
    ("tx_wakeups", c("xdpool_tx_wakeups", "Of the wake-up system calls, those for the TX ring (sendto).")),
    ("idle_loops", c("xdpool_idle_passes", "Worker loop passes that found nothing to do.")),
    ("rule_untagged", c("xdpool_rule_untagged", "Frames received during a rule reload's hand-over without a tag of it (steered before the XDP program began tagging), acted on under the list before the reload.")),
    ("rules_taken", c("xdpool_rules_taken", "Rule lists the socket's worker took at a batch boundary (one per hot reload of its port).")),
    ("drained_rx", c("xdpool_drained_rx", "Frames drained from an RX ring when its socket was given up (device loss or stop).")),
    ("reclaimed", c("xdpool_reclaimed", "Frames taken back from the kernel's fill, TX and completion rings when a socket was given up.")),
    ("socket_attaches", c("xdpool_socket_attaches", "Sockets this worker started on (1 + re-attaches).")),
    ("socket_releases", c("xdpool_socket_releases", "Sockets this worker gave up (device loss, stop).")),
    ("held_taken", c("xdpool_held_taken", "Frames the application took to hold (--hold-frames).")),
    ("held_returned", c("xdpool_held_returned", "Held frames given back to the pool.")),
    ("held_verified", c("xdpool_held_verified", "Held frames re-read after a device loss with their bytes unchanged.")),
    ("teardown_audits", c("xdpool_teardown_audits", "Per-pool frame audits run at socket teardown (owner map against the rings at the close, nothing left after the reclaim).")),
    ("teardown_audit_failures", c("xdpool_teardown_audit_failures", "Of those, audits that found a frame lost or doubled (must stay 0).")),
    ("held_corrupt", c("xdpool_held_corrupt", "Held frames whose bytes changed or could not be read after a device loss (must stay 0).")),
    ("copybreak_copied", c("xdpool_copybreak_copied", "copybreak: frames copied into a packed frag, their RX chunk returned to the fill ring at once.")),
    ("rx_multi_buffer", c("xdpool_rx_multi_buffer", "Multi-buffer frames received (more than one descriptor, XDP_PKT_CONTD).")),
    ("rx_drop_to_fill", c("xdpool_rx_drop_to_fill", "Frames dropped unread straight from the RX ring back to the fill ring.")),
    ("completion_rejected", c("xdpool_completion_rejected", "Completion-ring addresses the recycler refused (not a frame this socket had in TX; must stay 0).")),
    ("busy_poll_sockets", c("xdpool_busy_poll_sockets", "Sockets on which busy-poll was turned on.")),
    ("busy_poll_refused", c("xdpool_busy_poll_refused", "Sockets on which the kernel refused busy-poll (the worker spun instead).")),
    ("busy_poll_calls", c("xdpool_busy_poll_calls", "recvfrom calls made to busy-poll RX.")),
    ("busy_poll_no_napi", c("xdpool_busy_poll_no_napi", "busy-poll sockets that received frames without a NAPI id (veth), so the worker waited in poll() instead.")),
    ("busy_poll_napi", c("xdpool_busy_poll_napi", "busy-poll sockets that got a NAPI id (SO_INCOMING_NAPI_ID): recvfrom drives that NAPI.")),
    ("busy_poll_served", c("xdpool_busy_poll_served", "busy-poll recvfrom calls on a socket with a NAPI id after which the next RX pass found frames.")),
    ("forwarded", c("xdpool_forwarded", "forward: frames this socket received and handed to another port (or queued on its own TX ring when the egress is itself).")),
    ("mirrored", c("xdpool_mirrored", "mirror_to: copies (second references to the chunk) queued on the monitor port.")),
    ("reflected_twice", c("xdpool_reflected_twice", "reflect-twice: frames sent back twice on their own socket by reference.")),
    ("foreign_tx", c("xdpool_foreign_tx", "Frames of other ports' pools this socket queued for TX (cross-port forwarding and mirroring).")),
    ("foreign_completed", c("xdpool_foreign_completed", "Of those, completed and returned to their origin pool (through its return ring, or into its cache when the same worker serves it).")),
    ("foreign_reclaimed", c("xdpool_foreign_reclaimed", "Of those, taken back from a closed socket's TX side and returned to their origin pool.")),
    ("captured", c("xdpool_captured", "xdpool capture: frames the worker copied (at most snaplen bytes) into the capture queue for the client.")),
    ("capture_dropped", c("xdpool_capture_dropped", "xdpool capture: matching frames not captured because the capture queue was full (the client read too slowly); the frames themselves went on to their action.")),
    ("file_captured", c("xdpool_file_captured", "A rule's capture file: frames the worker copied (at most the rule's snaplen bytes) into the queue of the daemon's pcapng writer.")),
    ("file_capture_dropped", c("xdpool_file_capture_dropped", "A rule's capture file: matching frames not written because the file capture queue was full (the writer fell behind); the frames themselves went on to their action.")),
    ("handler_calls", c("xdpool_handler_calls", "action = \"call\": frames handed to a packet function of the program.")),
    ("kept_taken", c("xdpool_kept_taken", "Frames packet functions kept past their call (Packet::keep).")),
    ("kept_returned", c("xdpool_kept_returned", "Kept frames given back to the pool (handle dropped).")),
    ("kept_sent", c("xdpool_kept_sent", "Kept frames sent later (Packet::send_kept).")),
    ("kept_leaked", c("xdpool_kept_leaked", "Kept frames whose handle was leaked: left out of the pool at the end (must stay 0).")),
    ("handler_emitted", c("xdpool_handler_emitted", "New frames packet functions sent (replies built in frags).")),
    ("poll_naps", c("xdpool_poll_naps", "poll mode: naps taken while traffic flowed (workers.poll_coalesce_us) instead of waiting in poll().")),
];

/// Worker gauges, labelled `port` and `queue`.
pub const QUEUE_GAUGES: &[(&str, Def)] = &[
    ("held", g("xdpool_held_frames", "Frames the application holds now (--hold-frames).")),
    ("kept", g("xdpool_kept_frames", "Frames packet functions keep now (Packet::keep).")),
    ("tx_inflight_max", g("xdpool_tx_inflight_max", "Most TX descriptors queued and not yet completed at once, since start.")),
    ("tx_inflight_chunks_at_max", g("xdpool_tx_inflight_chunks_at_max", "UMEM chunks those descriptors occupied at that moment (fewer when small frames share chunks).")),
];

/// Frames dropped, one family with a `reason` label: (where in the queue entry, reason).
pub const DROP_REASONS: &[(&[&str], &str)] = &[
    (&["action_drop"], "action_drop"),
    (&["tx_ring_full_drop"], "tx_ring_full"),
    (&["rx_too_short"], "too_short"),
    (&["frag_alloc_failed"], "no_frag_memory"),
    (&["rx_chain_dropped"], "chain_refused"),
    (&["rx_rejected"], "rx_desc_rejected"),
    (&["egress_full_drop"], "egress_queue_full"),
    (&["egress_port_down_drop"], "egress_port_down"),
    (&["neigh_miss_drop"], "next_hop_unknown"),
    (&["handler_panics"], "handler_panic"),
    (&["handler_refused"], "handler_refused"),
    (&["xsk", "rx_ring_full"], "kernel_rx_ring_full"),
    (
        &["xsk", "rx_fill_ring_empty_descs"],
        "kernel_fill_ring_empty",
    ),
    (&["xsk", "rx_invalid_descs"], "kernel_rx_invalid_desc"),
    (&["xsk", "tx_invalid_descs"], "kernel_tx_invalid_desc"),
];
/// The drop family.
pub const DROPS: Def = c(
    "xdpool_drops",
    "Frames dropped, by reason: action_drop (a rule's drop action), tx_ring_full, too_short (l2fwd/forward on a frame shorter than Ethernet), no_frag_memory, chain_refused (a multi-buffer frame refused whole), rx_desc_rejected (the recycler refused an RX descriptor), egress_queue_full (forward: the egress worker's handoff queue was full), egress_port_down (the egress port had no socket, or closed it before the frame reached its TX ring), next_hop_unknown (forward with mac = neigh: no neighbour entry yet), and the kernel's XDP_STATISTICS for the socket: kernel_rx_ring_full, kernel_fill_ring_empty (nothing to receive into), kernel_rx_invalid_desc, kernel_tx_invalid_desc.",
);

/// The kernel's `rx_dropped` overlaps `kernel_fill_ring_empty` in copy mode, so it is
/// its own family instead of a drop reason.
pub const XSK_RX_DROPPED: Def = c("xdpool_xsk_rx_dropped", "The kernel's XDP_STATISTICS rx_dropped for the socket; in copy mode it also counts the fill-ring-empty drops, so it is not one of xdpool_drops_total's reasons.");
/// The kernel's TX-ring-empty count.
pub const XSK_TX_RING_EMPTY: Def = c("xdpool_xsk_tx_ring_empty", "The kernel's XDP_STATISTICS tx_ring_empty_descs: times the kernel found the TX ring empty when asked to send.");

/// Ring validation errors: (field, kind).
pub const RING_ERRORS: &[(&str, &str)] = &[
    ("ring_index_jump", "ring_index_jump"),
    ("rx_bad_desc", "rx_bad_desc"),
    ("comp_bad_addr", "completion_bad_addr"),
];
/// The ring-error family.
pub const RING_ERROR: Def = c("xdpool_ring_errors", "Values the kernel's side of a ring held that failed validation and were not used, by kind: ring_index_jump (a producer index moved by more than the ring holds), rx_bad_desc (an RX descriptor outside the UMEM or a chunk), completion_bad_addr.");

/// Pool allocations by path (page_pool's alloc stats).
pub const POOL_ALLOC: Def = c("xdpool_pool_alloc", "Frames the pool handed out, by path: fast (the owner's cache), slow (bulk from the global free list), slow_high_order (multi-chunk), refill (a bulk refill of the cache from the return ring), waive (frames of another NUMA node sent back to their node's list during refill).");
/// (field, path)
pub const POOL_ALLOC_PATHS: &[(&str, &str)] = &[
    ("alloc_fast", "fast"),
    ("alloc_slow", "slow"),
    ("alloc_slow_high_order", "slow_high_order"),
    ("alloc_refill", "refill"),
    ("alloc_waive", "waive"),
];
/// Pool recycles by destination (page_pool's recycle stats).
pub const POOL_RECYCLE: Def = c("xdpool_pool_recycle", "Frames returned to the pool, by where they went: cached (the owner's cache), cache_full (the cache was full, to the return ring), ring (another thread's return through the return ring), ring_full (the ring was full, to the global list), released_refcnt (not the last reference).");
/// (field, path)
pub const POOL_RECYCLE_PATHS: &[(&str, &str)] = &[
    ("recycle_cached", "cached"),
    ("recycle_cache_full", "cache_full"),
    ("recycle_ring", "ring"),
    ("recycle_ring_full", "ring_full"),
    ("recycle_released_refcnt", "released_refcnt"),
];
/// Pool misuse the recycler refused.
pub const POOL_MISUSE: Def = c("xdpool_pool_misuse", "Returns the recycler did not take as normal, by kind: double_release, foreign_addr, not_in_fill, not_in_tx (refused; must stay 0), after_destroy (a late return after the pool was destroyed, routed to the global free list).");
/// (field, kind)
pub const POOL_MISUSE_KINDS: &[(&str, &str)] = &[
    ("double_release", "double_release"),
    ("foreign_addr", "foreign_addr"),
    ("after_destroy", "after_destroy"),
    ("not_in_fill", "not_in_fill"),
    ("not_in_tx", "not_in_tx"),
];
/// Other pool counters: (field, family).
pub const POOL_OTHER: &[(&str, Def)] = &[
    (
        "alloc_empty",
        c(
            "xdpool_pool_alloc_empty",
            "Refills that found the return ring empty and went to the global free list.",
        ),
    ),
    (
        "alloc_failed",
        c(
            "xdpool_pool_alloc_failed",
            "Allocations that found no free frame anywhere (back-pressure).",
        ),
    ),
    (
        "hold",
        c(
            "xdpool_pool_hold",
            "Frames the pool handed out in total (page_pool's hold count).",
        ),
    ),
    (
        "release",
        c(
            "xdpool_pool_release",
            "Frames that came back to the pool in total (page_pool's release count).",
        ),
    ),
    (
        "inflight",
        g(
            "xdpool_pool_inflight",
            "Frames handed out and not back: hold - release.",
        ),
    ),
];

/// Frame accounting: where every UMEM frame is now.
pub const FRAMES: Def = g("xdpool_frames", "UMEM frames by location now: free (global lists), cached (owner caches), ring (return rings), fill (fill rings and the kernel's RX side), tx (TX rings and in flight to completion), application (held by workers between rings).");
/// Accounting locations.
pub const FRAME_LOCATIONS: &[&str] = &["free", "cached", "ring", "fill", "tx", "application"];
/// UMEM size.
pub const UMEM_FRAMES: Def = g("xdpool_umem_frames", "Frames (chunks) in the UMEM.");

/// XDP program verdicts.
pub const XDP_FRAMES: Def = c("xdpool_xdp_frames", "Frames the steering XDP program saw, by verdict: steered (redirected to a socket), passed (to the kernel stack), dropped (a rule's xdpdrop), malformed (headers that did not parse; passed), no_socket (matched but no socket on that queue; passed).");
/// (field, verdict)
pub const XDP_VERDICTS: &[(&str, &str)] = &[
    ("steered", "steered"),
    ("passed", "passed"),
    ("dropped", "dropped"),
    ("malformed", "malformed"),
    ("no_socket", "no_socket"),
];

/// Device losses by kind.
pub const DEVICE_LOSSES: Def = c("xdpool_device_losses", "Times the device went away, by kind: deleted (unregistered: ip link del, driver unbind), moved_away (to another namespace), down (set down, still there), socket_error, program_detached (from outside), netns_replaced (the configured namespace was replaced).");
/// (field, kind)
pub const DEVICE_LOSS_KINDS: &[(&str, &str)] = &[
    ("deleted", "deleted"),
    ("moved_away", "moved_away"),
    ("down", "down"),
    ("socket_error", "socket_error"),
    ("program_detached", "program_detached"),
    ("netns_replaced", "netns_replaced"),
];
/// Other device counters.
pub const DEVICE_OTHER: &[(&str, Def)] = &[
    ("reattaches", c("xdpool_device_reattaches", "Times xdpool attached again after the device came back.")),
    ("reattach_failures", c("xdpool_device_reattach_failures", "Re-attach attempts that failed (retried with back-off).")),
    ("early_attaches", c("xdpool_device_early_attaches", "Times the XDP program was attached to a returning device while it was still down, so that bringing it up reset its link once.")),
    ("bind_busy_retries", c("xdpool_device_bind_busy_retries", "Socket binds retried because the kernel still held the previous socket's queue.")),
    ("teardowns_checked", c("xdpool_device_teardowns_checked", "Teardowns after a device loss whose frame accounting was checked.")),
    ("teardown_accounting_failures", c("xdpool_device_teardown_accounting_failures", "Of those, teardowns whose accounting did not add up (must stay 0).")),
    ("unserved_rx_queues", g("xdpool_device_unserved_rx_queues", "RX queues of the devices that no xdpool socket serves (their frames go to the kernel; see the WARN at start or re-attach).")),
];

/// Per-rule counters (the XDP program's, summed over CPUs).
pub const RULE_PACKETS: Def = c("xdpool_rule_packets", "Frames that matched a rule (first match) in its port's XDP program, by port, rule (its index in the port's list) and rule_name (its name, empty when unnamed). A reload restarts an unnamed rule's count; a named rule continues the count of the running rule of that name.");
/// Per-rule bytes.
pub const RULE_BYTES: Def = c(
    "xdpool_rule_bytes",
    "Bytes (every buffer) of the frames counted in xdpool_rule_packets_total, same labels.",
);
/// Rule reloads by result.
pub const RULE_RELOADS: Def = c("xdpool_rule_reloads", "Rule reloads (xdpool rules apply, SIGHUP) by result: applied, or refused (invalid, not runnable or failed; the running rules stayed).");

/// Packet functions' own counters (`LaneSetup::counter`), from a queue entry's
/// `handler_events` list.
pub const HANDLER_EVENTS: Def = c("xdpool_handler_events", "Events a packet function counted (LaneSetup::counter), by port and queue of the lane that counted them, handler (its name in the rules) and counter (the name it registered).");

/// Process uptime.
pub const UPTIME: Def = g("xdpool_uptime_seconds", "Seconds since xdpool attached.");

/// Snapshot fields of a queue entry that are not exported, and why.
pub const NOT_EXPORTED: &[(&str, &str)] = &[
    ("queue", "a label, not a value"),
    ("port", "a label, not a value"),
    ("interface", "a label, not a value"),
    (
        "losses",
        "the sum of the device loss kinds (exported by kind)",
    ),
    (
        "zero_copy",
        "a mode, not a count (in the JSON and the table)",
    ),
];

/// Pool snapshot fields that are not exported, and why.
pub const POOL_NOT_EXPORTED: &[(&str, &str)] = &[
    ("pool_id", "the `pool` label"),
    ("destroyed", "a state, true only after the run"),
];

fn field<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, p| cur.get(*p))
}

fn number(v: &Value, path: &[&str]) -> Option<f64> {
    field(v, path).and_then(Value::as_f64)
}

fn labels(base: &Labels, extra: &[(&str, &str)]) -> Labels {
    let mut l = base.clone();
    l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    l
}

/// Collects every family's samples from one stats snapshot.
///
/// Queue entries are read from `queues` (labels `port`: the entry's `port`, else the
/// snapshot's `interface`; `queue`), or from `ports[].queues` when the snapshot has
/// ports, whose `xdp` and `device` blocks then get the port label too.
pub fn collect(snapshot: &Value) -> Vec<FamilyOut> {
    let mut out: Vec<FamilyOut> = Vec::new();
    let mut push =
        |def: Def, l: Labels, v: f64| match out.iter_mut().find(|f| f.def.name == def.name) {
            Some(f) => f.samples.push((l, v)),
            None => out.push(FamilyOut {
                def,
                samples: vec![(l, v)],
            }),
        };
    let default_port = snapshot
        .get("interface")
        .and_then(Value::as_str)
        .unwrap_or("main")
        .to_string();
    // (port label, the object holding queues/xdp/device)
    let mut scopes: Vec<(String, &Value)> = Vec::new();
    match snapshot.get("ports").and_then(Value::as_array) {
        Some(ports) => {
            for p in ports {
                let name = p
                    .get("name")
                    .or_else(|| p.get("port"))
                    .and_then(Value::as_str)
                    .unwrap_or(&default_port)
                    .to_string();
                scopes.push((name, p));
            }
        }
        None => scopes.push((default_port.clone(), snapshot)),
    }
    for (port, scope) in &scopes {
        for q in scope
            .get("queues")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let qport = q.get("port").and_then(Value::as_str).unwrap_or(port);
            let queue = q
                .get("queue")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .to_string();
            let ql: Labels = vec![("port".into(), qport.to_string()), ("queue".into(), queue)];
            for (f, def) in QUEUE_COUNTERS.iter().chain(QUEUE_GAUGES) {
                if let Some(v) = number(q, &[f]) {
                    push(*def, ql.clone(), v);
                }
            }
            for (path, reason) in DROP_REASONS {
                if let Some(v) = number(q, path) {
                    push(DROPS, labels(&ql, &[("reason", reason)]), v);
                }
            }
            if let Some(v) = number(q, &["xsk", "rx_dropped"]) {
                push(XSK_RX_DROPPED, ql.clone(), v);
            }
            if let Some(v) = number(q, &["xsk", "tx_ring_empty_descs"]) {
                push(XSK_TX_RING_EMPTY, ql.clone(), v);
            }
            for (f, kind) in RING_ERRORS {
                if let Some(v) = number(q, &["ring_errors", f]) {
                    push(RING_ERROR, labels(&ql, &[("kind", kind)]), v);
                }
            }
            for e in q
                .get("handler_events")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(handler), Some(counter), Some(v)) = (
                    e.get("handler").and_then(Value::as_str),
                    e.get("counter").and_then(Value::as_str),
                    number(e, &["value"]),
                ) else {
                    continue;
                };
                push(
                    HANDLER_EVENTS,
                    labels(&ql, &[("handler", handler), ("counter", counter)]),
                    v,
                );
            }
            if let Some(pool) = q.get("pool") {
                let ql = match pool.get("pool_id").and_then(Value::as_u64) {
                    Some(id) => labels(&ql, &[("pool", &id.to_string())]),
                    None => ql.clone(),
                };
                for (fam, table) in [
                    (POOL_ALLOC, POOL_ALLOC_PATHS),
                    (POOL_RECYCLE, POOL_RECYCLE_PATHS),
                ] {
                    for (f, path) in table {
                        if let Some(v) = number(pool, &[f]) {
                            push(fam, labels(&ql, &[("path", path)]), v);
                        }
                    }
                }
                for (f, kind) in POOL_MISUSE_KINDS {
                    if let Some(v) = number(pool, &[f]) {
                        push(POOL_MISUSE, labels(&ql, &[("kind", kind)]), v);
                    }
                }
                for (f, def) in POOL_OTHER {
                    if let Some(v) = number(pool, &[f]) {
                        push(*def, ql.clone(), v);
                    }
                }
            }
        }
        // Per-port program counters when the snapshot has them (`ports_xdp`), else the
        // one program's.
        let per_port: Vec<(String, &Value)> = match scope.get("ports_xdp").and_then(Value::as_array)
        {
            Some(list) => list
                .iter()
                .filter_map(|e| Some((e.get("port")?.as_str()?.to_string(), e.get("xdp")?)))
                .collect(),
            None => scope
                .get("xdp")
                .map(|x| vec![(port.clone(), x)])
                .unwrap_or_default(),
        };
        for (xport, xdp) in per_port {
            let port_l: Labels = vec![("port".into(), xport)];
            for (f, verdict) in XDP_VERDICTS {
                if let Some(v) = number(xdp, &[f]) {
                    push(XDP_FRAMES, labels(&port_l, &[("verdict", verdict)]), v);
                }
            }
        }
        let port_l: Labels = vec![("port".into(), port.clone())];
        if let Some(dev) = scope.get("device") {
            for (f, kind) in DEVICE_LOSS_KINDS {
                if let Some(v) = number(dev, &[f]) {
                    push(DEVICE_LOSSES, labels(&port_l, &[("kind", kind)]), v);
                }
            }
            for (f, def) in DEVICE_OTHER {
                if let Some(v) = number(dev, &[f]) {
                    push(*def, port_l.clone(), v);
                }
            }
        }
    }
    if let Some(acc) = snapshot.get("accounting") {
        for loc in FRAME_LOCATIONS {
            if let Some(v) = number(acc, &[loc]) {
                push(FRAMES, vec![("location".into(), loc.to_string())], v);
            }
        }
        if let Some(v) = number(acc, &["total"]) {
            push(UMEM_FRAMES, Vec::new(), v);
        }
    }
    if let Some(rules) = snapshot.get("rules") {
        for r in rules
            .get("list")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let l: Labels = vec![
                (
                    "port".into(),
                    r.get("port")
                        .and_then(Value::as_str)
                        .unwrap_or(&default_port)
                        .to_string(),
                ),
                (
                    "rule".into(),
                    r.get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                        .to_string(),
                ),
                (
                    "rule_name".into(),
                    r.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                ),
            ];
            for (f, def) in [("packets", RULE_PACKETS), ("bytes", RULE_BYTES)] {
                if let Some(v) = number(r, &[f]) {
                    push(def, l.clone(), v);
                }
            }
        }
        for (f, result) in [("reloads", "applied"), ("refused", "refused")] {
            if let Some(v) = number(rules, &[f]) {
                push(RULE_RELOADS, vec![("result".into(), result.into())], v);
            }
        }
    }
    if let Some(v) = number(snapshot, &["uptime_s"]) {
        push(UPTIME, Vec::new(), v);
    }
    out
}

/// Every family name as scraped (counters with `_total`), for dashboards and tests.
pub fn exported_names() -> Vec<String> {
    let mut defs: Vec<Def> = QUEUE_COUNTERS
        .iter()
        .chain(QUEUE_GAUGES)
        .chain(POOL_OTHER)
        .chain(DEVICE_OTHER)
        .map(|(_, d)| *d)
        .collect();
    defs.extend([
        DROPS,
        XSK_RX_DROPPED,
        XSK_TX_RING_EMPTY,
        RING_ERROR,
        POOL_ALLOC,
        POOL_RECYCLE,
        POOL_MISUSE,
        FRAMES,
        UMEM_FRAMES,
        XDP_FRAMES,
        DEVICE_LOSSES,
        RULE_PACKETS,
        RULE_BYTES,
        RULE_RELOADS,
        HANDLER_EVENTS,
        UPTIME,
    ]);
    defs.iter()
        .map(|d| {
            if d.kind == Kind::Counter {
                format!("{}_total", d.name)
            } else {
                d.name.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn covered_queue_fields() -> Vec<String> {
        let mut f: Vec<String> = QUEUE_COUNTERS
            .iter()
            .chain(QUEUE_GAUGES)
            .map(|(f, _)| f.to_string())
            .collect();
        f.extend(
            DROP_REASONS
                .iter()
                .filter(|(p, _)| p.len() == 1)
                .map(|(p, _)| p[0].to_string()),
        );
        f.extend(NOT_EXPORTED.iter().map(|(f, _)| f.to_string()));
        f
    }

    #[test]
    fn every_worker_counter_is_exported_or_named_as_skipped() {
        let snap = serde_json::to_value(crate::worker::WorkerCountersSnapshot::default()).unwrap();
        let covered = covered_queue_fields();
        let missing: Vec<&String> = snap
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !covered.contains(k))
            .collect();
        assert!(
            missing.is_empty(),
            "worker counters with no metric (add them to metrics.rs): {missing:?}"
        );
        let pool = serde_json::to_value(pool::PoolStats::default()).unwrap();
        let mut pool_covered: Vec<&str> = POOL_ALLOC_PATHS
            .iter()
            .chain(POOL_RECYCLE_PATHS)
            .chain(POOL_MISUSE_KINDS)
            .map(|(f, _)| *f)
            .collect();
        pool_covered.extend(POOL_OTHER.iter().map(|(f, _)| *f));
        pool_covered.extend(POOL_NOT_EXPORTED.iter().map(|(f, _)| *f));
        let missing: Vec<&String> = pool
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !pool_covered.contains(&k.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "pool counters with no metric: {missing:?}"
        );
        let xsk = serde_json::to_value(crate::xsk::XdpStatistics::default()).unwrap();
        let mut xsk_covered: Vec<&str> = DROP_REASONS
            .iter()
            .filter(|(p, _)| p.len() == 2)
            .map(|(p, _)| p[1])
            .collect();
        xsk_covered.extend(["rx_dropped", "tx_ring_empty_descs"]);
        let missing: Vec<&String> = xsk
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !xsk_covered.contains(&k.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "socket statistics with no metric: {missing:?}"
        );
    }

    #[test]
    fn names_follow_the_conventions() {
        let names = exported_names();
        let mut seen = std::collections::BTreeSet::new();
        for n in &names {
            assert!(seen.insert(n.clone()), "{n} defined twice");
            assert!(n.starts_with("xdpool_"), "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{n}"
            );
            // A name must not carry a label's value (queue numbers, reasons).
            assert!(
                !n.chars().any(|c| c.is_ascii_digit()),
                "{n} has a number in its name: make it a label"
            );
        }
    }

    #[test]
    fn samples_carry_port_queue_and_reason_labels() {
        let snap = json!({
            "interface": "xdpb0", "uptime_s": 2.5,
            "queues": [
                {"queue": 0, "rx_packets": 10, "action_drop": 7, "xsk": {"rx_ring_full": 3, "rx_dropped": 4}, "pool": {"pool_id": 3, "recycle_ring": 5, "inflight": 64}},
                {"queue": 1, "rx_packets": 20, "action_drop": 1}
            ],
            "xdp": {"steered": 30, "passed": 2},
            "accounting": {"free": 100, "fill": 28, "total": 128},
        });
        let fams = collect(&snap);
        let get = |name: &str| {
            fams.iter()
                .find(|f| f.def.name == name)
                .unwrap_or_else(|| panic!("{name} missing"))
        };
        let l = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Labels>()
        };
        let rx = get("xdpool_rx_packets");
        assert_eq!(rx.def.kind, Kind::Counter);
        assert_eq!(
            rx.samples,
            vec![
                (l(&[("port", "xdpb0"), ("queue", "0")]), 10.0),
                (l(&[("port", "xdpb0"), ("queue", "1")]), 20.0)
            ]
        );
        let drops = get("xdpool_drops");
        assert!(drops.samples.contains(&(
            l(&[
                ("port", "xdpb0"),
                ("queue", "0"),
                ("reason", "kernel_rx_ring_full")
            ]),
            3.0
        )));
        assert!(drops.samples.contains(&(
            l(&[("port", "xdpb0"), ("queue", "1"), ("reason", "action_drop")]),
            1.0
        )));
        assert_eq!(
            get("xdpool_pool_recycle").samples,
            vec![(
                l(&[
                    ("port", "xdpb0"),
                    ("queue", "0"),
                    ("pool", "3"),
                    ("path", "ring")
                ]),
                5.0
            )]
        );
        assert_eq!(get("xdpool_pool_inflight").def.kind, Kind::Gauge);
        assert!(get("xdpool_xdp_frames")
            .samples
            .contains(&(l(&[("port", "xdpb0"), ("verdict", "steered")]), 30.0)));
        assert_eq!(get("xdpool_frames").samples.len(), 2);
        assert_eq!(get("xdpool_umem_frames").samples, vec![(vec![], 128.0)]);
        assert_eq!(get("xdpool_xsk_rx_dropped").samples[0].1, 4.0);
    }

    #[test]
    fn ports_give_their_name_as_the_port_label() {
        let snap = json!({"ports": [
            {"name": "in", "queues": [{"queue": 0, "rx_packets": 5}], "xdp": {"steered": 5}},
            {"name": "out", "queues": [{"queue": 0, "tx_packets": 5}]}
        ]});
        let fams = collect(&snap);
        let rx = fams
            .iter()
            .find(|f| f.def.name == "xdpool_rx_packets")
            .unwrap();
        assert_eq!(rx.samples[0].0[0], ("port".to_string(), "in".to_string()));
        let tx = fams
            .iter()
            .find(|f| f.def.name == "xdpool_tx_packets")
            .unwrap();
        assert_eq!(tx.samples[0].0[0], ("port".to_string(), "out".to_string()));
    }
}
