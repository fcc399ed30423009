//! What a run reports: the end-of-run summary (printed and written as JSON), the
//! stats snapshot the control socket, Prometheus and the live line share, and the
//! small arithmetic they need.

use crate::device::{DeviceReport, DeviceStats};
use crate::steer::Steering;
use crate::steer::XdpCounters;
use crate::worker::{PortShared, WorkerCountersSnapshot, WorkerExit};
use crate::xsk::XdpStatistics;
use pool::{Accounting, Region};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The end-of-run summary (printed, and written with `--summary-json`).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Interface (of the first port).
    pub interface: String,
    /// Every port: name, interface.
    pub ports: Vec<(String, String)>,
    /// Queues served.
    pub queues: Vec<u32>,
    /// Worker cores.
    pub cores: Vec<usize>,
    /// Frames received by the workers.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Wall time of the run, seconds.
    pub duration_s: f64,
    /// Time between the first and the last frame seen, seconds.
    pub active_s: f64,
    /// packets / active_s, in millions.
    pub mpps: f64,
    /// Highest rate over one of the run's one-second intervals, in millions. Under 2 s
    /// of traffic no interval need lie inside it, and this is diluted by the idle part
    /// of the one it fell in (the text summary then leaves it out).
    pub peak_mpps: f64,
    /// Drops and rejects by reason.
    pub drops: Drops,
    /// Worker counters, summed.
    pub counters: WorkerCountersSnapshot,
    /// The XDP program's counters.
    pub xdp: XdpCounters,
    /// Per-socket end state (port, queue, zero-copy, counters, pool).
    pub workers: Vec<WorkerExit>,
    /// Where every frame of the UMEM was at the end.
    pub accounting: Accounting,
    /// Whether `free + cached + ring + fill + tx + application == total` held.
    pub accounting_ok: bool,
    /// Whether an XDP program was still attached to the device after the run.
    pub program_left_attached: bool,
    /// Device losses, re-attaches and their times.
    pub device: DeviceReport,
}

/// Drops by reason.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Drops {
    /// By the `drop` action (rxdrop: the intended fate), including the frames the
    /// application held (`--hold-frames`) and returned: packets the drop rule matched
    /// = action_drop + held (0 at the end).
    pub action_drop: u64,
    /// Kernel: RX ring full (XDP_STATISTICS rx_ring_full).
    pub rx_ring_full: u64,
    /// Kernel: fill ring empty when a frame arrived (copy mode: the frame was
    /// dropped; zero-copy: the driver found no buffer to post).
    pub rx_fill_ring_empty: u64,
    /// Kernel: other RX drops (`rx_dropped` less the fill-ring-empty drops it also
    /// counts in copy mode; e.g. frames too long for a chunk).
    pub rx_dropped: u64,
    /// Kernel: invalid fill / TX descriptors.
    pub invalid_descs: u64,
    /// Ours: descriptors that failed validation or the recycler's owner check.
    pub rejected_descs: u64,
    /// TX descriptors (l2fwd, mirror, copybreak) dropped because the TX ring was full.
    pub tx_ring_full: u64,
    /// reflect-twice / mirror / copybreak frames dropped because the pool had no memory for a copy.
    pub frag_alloc_failed: u64,
    /// Frames for another port dropped because its handoff queue was full.
    pub egress_full: u64,
    /// Frames for another port dropped because that port's device was away.
    pub egress_port_down: u64,
    /// `forward` with mac = neigh / fixed: the MAC to write was not known.
    pub neigh_miss: u64,
    /// Frames the XDP program found malformed (passed to the kernel, not steered).
    pub xdp_malformed: u64,
    /// Frames matching a steer rule while no socket was registered (passed).
    pub xdp_no_socket: u64,
}

/// One count a packet function kept on one socket (`LaneSetup::counter`): in the
/// snapshot's and the summary's per-queue entries as `handler_events`, and in
/// Prometheus as `xdpool_handler_events_total{port, queue, handler, counter}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandlerEvent {
    /// The handler's name (as rules call it).
    pub handler: String,
    /// The counter's name.
    pub counter: String,
    /// Its count now.
    pub value: u64,
}

/// Every counter the packet functions of one socket registered, in registration order.
pub fn handler_events(counters: &crate::api::UserCounters) -> Vec<HandlerEvent> {
    counters
        .read()
        .into_iter()
        .map(|(handler, counter, value)| HandlerEvent {
            handler,
            counter,
            value,
        })
        .collect()
}

/// What the summary is made of.
pub struct Parts<'a> {
    /// The plan run.
    pub plan: &'a crate::plan::Plan,
    /// Every socket's end state.
    pub exits: Vec<WorkerExit>,
    /// The programs' counters, summed.
    pub xdp: XdpCounters,
    /// The frame memory.
    pub region: &'a Region,
    /// Device losses and re-attaches.
    pub device: DeviceReport,
    /// Wall time.
    pub duration_s: f64,
    /// When frames were first seen moving.
    pub first_seen: Option<Instant>,
    /// When frames were last seen moving.
    pub last_seen: Option<Instant>,
    /// Highest one-second rate.
    pub peak_pps: f64,
    /// Whether a program was still on a device after the run.
    pub program_left_attached: bool,
}

/// The end-of-run summary from its parts.
pub fn build(p: Parts<'_>) -> Summary {
    let accounting = p.region.accounting();
    let accounting_ok = accounting.check().is_ok();
    if let Err(e) = accounting.check() {
        tracing::error!("frame accounting failed: {e}");
    }
    let mut counters = WorkerCountersSnapshot::default();
    let mut drops = Drops {
        xdp_malformed: p.xdp.malformed,
        xdp_no_socket: p.xdp.no_socket,
        ..Drops::default()
    };
    for e in &p.exits {
        counters += e.counters;
        drops.rx_ring_full += e.xsk.rx_ring_full;
        drops.rx_fill_ring_empty += e.xsk.rx_fill_ring_empty_descs;
        drops.rx_dropped += other_rx_drops(&e.xsk, e.zero_copy);
        drops.invalid_descs += e.xsk.rx_invalid_descs + e.xsk.tx_invalid_descs;
    }
    // A teardown whose accounting or pool audit failed (a frame lost or doubled then)
    // fails the run too, even if the end adds up.
    let accounting_ok = accounting_ok
        && p.device.teardown_accounting_failures == 0
        && counters.teardown_audit_failures == 0;
    drops.action_drop = counters.action_drop;
    drops.rejected_descs = counters.rx_rejected + counters.completion_rejected;
    drops.tx_ring_full = counters.tx_ring_full_drop;
    drops.frag_alloc_failed = counters.frag_alloc_failed;
    drops.egress_full = counters.egress_full_drop;
    drops.egress_port_down = counters.egress_port_down_drop;
    drops.neigh_miss = counters.neigh_miss_drop;
    let active_s = match (p.first_seen, p.last_seen) {
        (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    Summary {
        interface: p
            .plan
            .ports
            .first()
            .map(|x| x.def.interface.clone())
            .unwrap_or_default(),
        ports: p
            .plan
            .ports
            .iter()
            .map(|x| (x.def.name.clone(), x.def.interface.clone()))
            .collect(),
        queues: p.plan.sockets.iter().map(|s| s.queue).collect(),
        cores: p.plan.workers.iter().filter_map(|w| w.core).collect(),
        packets: counters.rx_packets,
        bytes: counters.rx_bytes,
        duration_s: p.duration_s,
        active_s,
        mpps: if active_s > 0.0 {
            counters.rx_packets as f64 / active_s / 1e6
        } else {
            0.0
        },
        peak_mpps: p.peak_pps / 1e6,
        drops,
        counters,
        xdp: p.xdp,
        workers: p.exits,
        accounting,
        accounting_ok,
        program_left_attached: p.program_left_attached,
        device: p.device,
    }
}

/// Largest frame one UMEM chunk takes in copy mode: the chunk less the kernel's
/// `XDP_PACKET_HEADROOM` (the UMEM itself reserves no headroom here).
pub fn single_buffer_room(chunk_size: u32) -> u32 {
    chunk_size - crate::xsk::XDP_PACKET_HEADROOM
}

/// The kernel's RX drops that no other counter names. In copy mode a frame that
/// finds the fill ring empty is counted twice, in `rx_dropped` and in
/// `rx_fill_ring_empty_descs`; take it out of the first so that the drops add up.
/// In zero-copy the second counts the driver's failed refills, not frames.
pub fn other_rx_drops(x: &XdpStatistics, zero_copy: bool) -> u64 {
    if zero_copy {
        x.rx_dropped
    } else {
        x.rx_dropped.saturating_sub(x.rx_fill_ring_empty_descs)
    }
}

/// Builds the stats snapshot function shared by the control socket, Prometheus and
/// the live line.
pub fn make_snapshot_fn(
    iface: String,
    shared: Vec<Arc<PortShared>>,
    steerings: Vec<(String, Arc<Mutex<Steering>>)>,
    region: Arc<Region>,
    device: Arc<DeviceStats>,
    started: Instant,
) -> crate::stats::SnapshotFn {
    Arc::new(move || {
        let queues: Vec<Value> = shared
            .iter()
            .map(|w| {
                let mut q = serde_json::to_value(w.counters.snapshot()).expect("serializes");
                q["queue"] = json!(w.queue);
                q["port"] = json!(w.port);
                q["zero_copy"] = json!(w.zero_copy.load(std::sync::atomic::Ordering::Relaxed));
                q["pool"] =
                    serde_json::to_value(w.pool_stats().unwrap_or_default()).expect("serializes");
                q["xsk"] =
                    serde_json::to_value(*w.xsk_stats.lock().unwrap_or_else(|p| p.into_inner()))
                        .expect("serializes");
                q["ring_errors"] =
                    serde_json::to_value(*w.ring_errors.lock().unwrap_or_else(|p| p.into_inner()))
                        .expect("serializes");
                q["handler_events"] =
                    serde_json::to_value(handler_events(&w.user_counters)).expect("serializes");
                q
            })
            .collect();
        let mut total = json!({});
        for q in &queues {
            add_numbers(&mut total, q);
        }
        if let Some(obj) = total.as_object_mut() {
            obj.remove("queue");
        }
        let per_port: Vec<(String, XdpCounters)> = steerings
            .iter()
            .map(|(n, st)| {
                (
                    n.clone(),
                    st.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .counters()
                        .unwrap_or_default(),
                )
            })
            .collect();
        let xdp = sum_xdp(per_port.iter().map(|(_, c)| *c));
        json!({
            "interface": iface,
            "ports_xdp": per_port.iter().map(|(n, c)| json!({"port": n, "xdp": c})).collect::<Vec<_>>(),
            "uptime_s": started.elapsed().as_secs_f64(),
            "queues": queues,
            "total": total,
            "xdp": xdp,
            "accounting": region.accounting(),
            "device": device.snapshot(),
        })
    })
}

/// The XDP programs' counters summed over ports.
pub fn sum_xdp(all: impl Iterator<Item = XdpCounters>) -> XdpCounters {
    all.fold(XdpCounters::default(), |t, c| XdpCounters {
        steered: t.steered + c.steered,
        no_socket: t.no_socket + c.no_socket,
        passed: t.passed + c.passed,
        dropped: t.dropped + c.dropped,
        malformed: t.malformed + c.malformed,
    })
}

/// Adds every number in `src` into `dst` (same shape), creating fields as needed.
pub fn add_numbers(dst: &mut Value, src: &Value) {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => {
            for (k, v) in s {
                match v {
                    Value::Number(_) | Value::Object(_) => {
                        let slot = d.entry(k.clone()).or_insert_with(|| {
                            if v.is_object() {
                                json!({})
                            } else {
                                json!(0u64)
                            }
                        });
                        add_numbers(slot, v);
                    }
                    _ => {}
                }
            }
        }
        (d @ Value::Number(_), Value::Number(s)) => {
            let sum = d
                .as_u64()
                .unwrap_or(0)
                .saturating_add(s.as_u64().unwrap_or(0));
            *d = json!(sum);
        }
        _ => {}
    }
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_u64().unwrap_or(0)
}

/// The live one-line view.
pub fn live_line(snap: &Value, t: f64, pps: f64) -> String {
    let t_ = |p: &[&str]| num(&snap["total"], p);
    let acc = &snap["accounting"];
    format!(
        "[{t:6.1}s] rx {:6.3} Mpps  total {:>11}  drop {:>11}  tx {:>9}  | fill {:>5} app {:>5} free {:>5} | pool fast {} slow {} refill {} inflight {} | ring full {} fill-empty {} | xdp steered {} passed {} malformed {}",
        pps / 1e6,
        t_(&["rx_packets"]),
        t_(&["action_drop"]),
        t_(&["tx_packets"]),
        num(acc, &["fill"]),
        num(acc, &["application"]) + num(acc, &["tx"]),
        num(acc, &["free"]) + num(acc, &["cached"]) + num(acc, &["ring"]),
        t_(&["pool", "alloc_fast"]),
        t_(&["pool", "alloc_slow"]),
        t_(&["pool", "alloc_refill"]),
        t_(&["pool", "inflight"]),
        t_(&["xsk", "rx_ring_full"]),
        t_(&["xsk", "rx_fill_ring_empty_descs"]),
        num(&snap["xdp"], &["steered"]),
        num(&snap["xdp"], &["passed"]),
        num(&snap["xdp"], &["malformed"]),
    )
}

/// The human summary.
pub fn summary_text(s: &Summary) -> String {
    let unserved: Vec<String> = s
        .device
        .queues
        .iter()
        .filter(|q| !q.unserved.is_empty())
        .map(|q| format!("{}/{} {:?}", q.port, q.interface, q.unserved))
        .collect();
    let mut text = summary_body(s);
    let events: Vec<String> = s
        .workers
        .iter()
        .flat_map(|w| {
            w.handler_events.iter().map(move |e| {
                format!(
                    "{}/q{} {} {} {}",
                    w.port, w.queue, e.handler, e.counter, e.value
                )
            })
        })
        .collect();
    if !events.is_empty() {
        text.push_str(&format!("\nhandlers     {}", events.join(", ")));
    }
    if !unserved.is_empty() {
        text.push_str(&format!(
            "\nUNSERVED     RX queues without a socket (their frames went to the kernel): {}",
            unserved.join(", ")
        ));
    }
    text
}

/// Traffic that lasted at least this long filled at least one of the one-second
/// intervals the peak is taken over.
const PEAK_NEEDS_S: f64 = 2.0;

/// The summary's rate line: the average while frames moved, and the one-second peak
/// when one interval lay wholly inside the traffic. A shorter burst's interval was
/// partly idle, so its "peak" would read below the average.
fn rate_text(mpps: f64, peak_mpps: f64, active_s: f64) -> String {
    if active_s >= PEAK_NEEDS_S {
        format!("{mpps:.3} Mpps average while active, {peak_mpps:.3} Mpps peak (1 s)")
    } else {
        format!("{mpps:.3} Mpps average while active (under {PEAK_NEEDS_S} s of traffic: no one-second peak)")
    }
}

fn summary_body(s: &Summary) -> String {
    let a = &s.accounting;
    let d = &s.drops;
    format!(
        "xdpool run summary — {} queues {:?} cores {:?}\n\
         packets      {} ({} bytes) in {:.2} s, active {:.2} s\n\
         rate         {}\n\
         tx           {} queued, {} completed; reflected twice {}, copybreak {}; most in TX at once {} in {} chunk(s)\n\
         ports        forwarded {}, mirrored {}; other ports' frames sent {} and completed {} (each back to its own pool) | dropped: handoff full {}, egress port down {}, next hop unknown {}\n\
         sockets      {}\n\
         drops        action drop {} | kernel: rx ring full {}, fill ring empty {}, other {}, invalid descs {} | ours: rejected descs {}, tx ring full {}\n\
         xdp program  steered {} passed {} dropped {} malformed {} no-socket {}\n\
         frames       total {} = free {} + cached {} + ring {} + fill {} + tx {} + application {}  [{}]\n\
         program      {}",
        s.interface,
        s.queues,
        s.cores,
        s.packets,
        s.bytes,
        s.duration_s,
        s.active_s,
        rate_text(s.mpps, s.peak_mpps, s.active_s),
        s.counters.tx_packets,
        s.counters.tx_completed,
        s.counters.reflected_twice,
        s.counters.copybreak_copied,
        s.counters.tx_inflight_max,
        s.counters.tx_inflight_chunks_at_max,
        s.counters.forwarded,
        s.counters.mirrored,
        s.counters.foreign_tx,
        s.counters.foreign_completed,
        s.counters.egress_full_drop,
        s.counters.egress_port_down_drop,
        s.counters.neigh_miss_drop,
        s.workers.iter().map(|w| format!("{}/{} q{} {}", w.port, w.interface, w.queue, if w.zero_copy { "zero-copy" } else { "copy" })).collect::<Vec<_>>().join(", "),
        d.action_drop,
        d.rx_ring_full,
        d.rx_fill_ring_empty,
        d.rx_dropped,
        d.invalid_descs,
        d.rejected_descs,
        d.tx_ring_full,
        s.xdp.steered,
        s.xdp.passed,
        s.xdp.dropped,
        s.xdp.malformed,
        s.xdp.no_socket,
        a.total,
        a.free,
        a.cached,
        a.ring,
        a.fill,
        a.tx,
        a.application,
        if s.accounting_ok { "ok" } else { "MISMATCH" },
        if s.program_left_attached { "STILL ATTACHED" } else { "detached" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::{fill_target, PortRings};

    #[test]
    fn fill_target_follows_copy_fill_in_copy_mode_and_is_the_fill_ring_in_zero_copy() {
        use crate::config::CopyFill;
        let rings = |fill, rx, copy_fill| PortRings {
            fill,
            rx,
            copy_fill,
        };
        assert_eq!(fill_target(rings(4096, 2048, CopyFill::Full), false), 4096);
        assert_eq!(fill_target(rings(4096, 2048, CopyFill::Rx), false), 2048);
        assert_eq!(fill_target(rings(2048, 2048, CopyFill::Rx), false), 2048);
        assert_eq!(fill_target(rings(4096, 2048, CopyFill::Rx), true), 4096);
        assert_eq!(fill_target(rings(4096, 2048, CopyFill::Full), true), 4096);
        // fill < rx is refused by the config check; were it not, the ring bounds it.
        assert_eq!(fill_target(rings(1024, 2048, CopyFill::Rx), false), 1024);
    }

    #[test]
    fn fill_ring_empty_drops_are_not_counted_twice_in_copy_mode() {
        // As the kernel reported them in a copy-mode overload run: 716996 frames
        // found the fill ring empty, and rx_dropped counted the same frames.
        let x = XdpStatistics {
            rx_dropped: 716_996 + 3,
            rx_fill_ring_empty_descs: 716_996,
            ..Default::default()
        };
        assert_eq!(other_rx_drops(&x, false), 3);
        assert_eq!(other_rx_drops(&x, true), 716_999);
        let odd = XdpStatistics {
            rx_dropped: 1,
            rx_fill_ring_empty_descs: 5,
            ..Default::default()
        };
        assert_eq!(other_rx_drops(&odd, false), 0);
    }

    /// A packet function's counter, registered on one lane as a handler does, reaches
    /// that socket's snapshot entry, the Prometheus text with its four labels, and the
    /// `xdpool stats` table; a socket whose handlers registered none shows none.
    #[test]
    fn a_handler_counter_reaches_the_snapshot_prometheus_and_the_table() {
        let waker = crate::worker::Waker::new().unwrap();
        let shared = vec![
            PortShared::new(0, "in", "a0", 2, None, 64, waker.clone()),
            PortShared::new(1, "out", "b0", 0, None, 64, waker),
        ];
        let names = ["in".to_string(), "out".to_string()];
        let mut setup = crate::api::LaneSetup {
            port: crate::PortRef(0),
            queue: 2,
            port_names: &names,
            handler: "lb",
            declared: &[],
            counters: &shared[0].user_counters,
        };
        let blocked = setup.counter("blocked");
        let passed = setup.counter("passed");
        blocked.add(41);
        blocked.inc();
        passed.inc();
        let region = Region::new(pool::RegionConfig {
            frames: 64,
            ..pool::RegionConfig::default()
        })
        .unwrap();
        let snapshot = make_snapshot_fn(
            "a0".into(),
            shared,
            Vec::new(),
            region,
            crate::device::DeviceStats::new(1),
            Instant::now(),
        );
        let snap = snapshot();
        assert_eq!(
            snap["queues"][0]["handler_events"],
            json!([
                {"handler": "lb", "counter": "blocked", "value": 42},
                {"handler": "lb", "counter": "passed", "value": 1},
            ])
        );
        assert_eq!(snap["queues"][1]["handler_events"], json!([]));
        let text = crate::stats::prom::render(&snap);
        assert!(
            text.contains("# TYPE xdpool_handler_events_total counter"),
            "{text}"
        );
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("xdpool_handler_events_total{"))
            .collect();
        assert_eq!(
            samples,
            [
                r#"xdpool_handler_events_total{counter="blocked",handler="lb",port="in",queue="2"} 42"#,
                r#"xdpool_handler_events_total{counter="passed",handler="lb",port="in",queue="2"} 1"#,
            ],
            "{text}"
        );
        let table = crate::stats::view::render(&snap, None);
        let row = table
            .lines()
            .find(|l| l.trim_start().starts_with("handler_events lb/blocked"))
            .unwrap_or_else(|| panic!("no row for lb/blocked: {table}"));
        // The row, in/q2, out/q0 (none: `-`), total.
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["handler_events", "lb/blocked", "42", "-", "42"],
            "{table}"
        );
    }

    /// A burst shorter than two seconds gets no one-second peak (it would read below
    /// the average: `xdpool demo`'s 0.2 s burst showed 4.96 average, 0.99 peak);
    /// longer traffic gets both.
    #[test]
    fn the_rate_line_gives_a_peak_only_for_two_seconds_of_traffic() {
        let short = rate_text(4.963, 0.992, 0.2);
        assert_eq!(
            short,
            "4.963 Mpps average while active (under 2 s of traffic: no one-second peak)"
        );
        assert_eq!(
            rate_text(1.5, 1.9, 10.0),
            "1.500 Mpps average while active, 1.900 Mpps peak (1 s)"
        );
        assert!(rate_text(1.5, 1.9, 2.0).contains("peak (1 s)"));
    }

    #[test]
    fn add_numbers_sums_nested() {
        let mut t = json!({});
        add_numbers(&mut t, &json!({"a": 1, "p": {"x": 2}, "s": "no"}));
        add_numbers(&mut t, &json!({"a": 3, "p": {"x": 4, "y": 1}}));
        assert_eq!(t, json!({"a": 4, "p": {"x": 6, "y": 1}}));
    }
}
