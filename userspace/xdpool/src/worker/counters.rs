//! Per-socket counters: written by the owning worker only, as plain locals, and
//! published with plain stores once per batch (no atomic read-modify-write).

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($(#[$m:meta])* $name:ident, $snap:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Default)]
        pub struct $name { $($(#[$fm])* pub $f: AtomicU64,)* }
        /// A plain copy of the counters.
        #[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
        pub struct $snap { $($(#[$fm])* pub $f: u64,)* }
        impl $name {
            /// Reads every counter.
            pub fn snapshot(&self) -> $snap { $snap { $($f: self.$f.load(Ordering::Relaxed),)* } }
            /// Stores every counter (the owning worker only).
            pub fn publish(&self, s: &$snap) { $(self.$f.store(s.$f, Ordering::Relaxed);)* }
        }
        impl std::ops::AddAssign for $snap {
            fn add_assign(&mut self, o: $snap) { $(self.$f += o.$f;)* }
        }
    };
}

counters!(
    /// One socket's counters (one (port, queue)), written by its worker only.
    WorkerCounters, WorkerCountersSnapshot {
    /// Frames received.
    rx_packets,
    /// Bytes received.
    rx_bytes,
    /// Frames dropped by the `drop` action (rxdrop).
    action_drop,
    /// Descriptors queued for TX on this socket (own frames and other ports' frames).
    tx_packets,
    /// Bytes queued for TX.
    tx_bytes,
    /// TX completions reaped (own and other ports' frames).
    tx_completed,
    /// TX descriptors dropped because this socket's TX ring was full.
    tx_ring_full_drop,
    /// Passes that took fewer RX descriptors than a batch because the TX ring (or an
    /// egress port's handoff queue) had room for no more (back-pressure, not a drop).
    rx_limited_by_tx,
    /// Passes that took a whole batch although the TX side had no room for all of it,
    /// because the kernel ran short (the fill ring below half its target, or in copy
    /// mode the RX ring over half full): the frames that do not fit are dropped by the
    /// worker (`tx_ring_full_drop`, `egress_full_drop`) so that the kernel does not
    /// drop them.
    rx_shed_passes,
    /// RX descriptors the recycler rejected (not a frame we gave the kernel).
    rx_rejected,
    /// Frames too short to rewrite MACs, dropped.
    rx_too_short,
    /// Completion addresses the recycler rejected (not in TX).
    completion_rejected,
    /// Descriptors put on the fill ring.
    fill_produced,
    /// Times the fill ring could not be topped up because the pool was empty.
    fill_pool_empty,
    /// Wake-up syscalls made.
    wakeups,
    /// Of `wakeups`, those for the TX ring (`sendto`).
    tx_wakeups,
    /// Loop iterations that found nothing to do.
    idle_loops,
    /// Frames received during a rule reload whose tag named no rule list the worker
    /// knew (acted on under the current list).
    rule_untagged,
    /// Rule lists this socket's worker took (hot reloads).
    rules_taken,
    /// Frames drained from RX rings when a socket was given up.
    drained_rx,
    /// Descriptors reclaimed from the kernel's rings when a socket was given up.
    reclaimed,
    /// Sockets this worker has run on.
    socket_attaches,
    /// Sockets this worker has given up (device loss, stop).
    socket_releases,
    /// Frames the application holds now (`--hold-frames`).
    held,
    /// Frames the application has taken to hold, in total.
    held_taken,
    /// Held frames returned to the pool after a re-attach (or at the stop).
    held_returned,
    /// Held frames re-read after a socket was given up, bytes unchanged.
    held_verified,
    /// Held frames whose bytes changed or could not be read (must stay 0).
    held_corrupt,
    /// `copybreak`: frames copied into a frag (their RX chunk went straight back).
    copybreak_copied,
    /// `reflect-twice`: frames queued twice (two descriptors on the RX chunk).
    reflected_twice,
    /// Frames dropped because the pool had no memory for a frag copy.
    frag_alloc_failed,
    /// Most TX descriptors queued and not yet completed at once.
    tx_inflight_max,
    /// Distinct UMEM chunks those descriptors occupied at that moment.
    tx_inflight_chunks_at_max,
    /// Sockets on which busy-poll was turned on.
    busy_poll_sockets,
    /// Sockets on which the kernel refused busy-poll (the worker spun instead).
    busy_poll_refused,
    /// `recvfrom` calls made to busy-poll RX.
    busy_poll_calls,
    /// Multi-buffer frames received (more than one descriptor, `XDP_PKT_CONTD`).
    rx_multi_buffer,
    /// Multi-buffer frames dropped whole (a buffer refused, or too long a chain).
    rx_chain_dropped,
    /// Busy-poll sockets without a NAPI id (veth): the worker waited in poll().
    busy_poll_no_napi,
    /// Busy-poll sockets that got a NAPI id (`SO_INCOMING_NAPI_ID`): recvfrom drives
    /// that NAPI.
    busy_poll_napi,
    /// Busy-poll `recvfrom` calls on a socket with a NAPI id after which the next RX
    /// pass found frames: polls the NAPI served.
    busy_poll_served,
    /// `poll` mode: naps taken while traffic flowed.
    poll_naps,
    /// Frames dropped unread straight from RX back to the fill ring.
    rx_drop_to_fill,
    /// `forward`: frames handed to another port (by descriptor, no copy).
    forwarded,
    /// `mirror_to`: frames also handed, by reference, to the mirror port.
    mirrored,
    /// Frames for another port dropped because its handoff queue was full.
    egress_full_drop,
    /// Frames to leave by this socket dropped because it had none (device away), or
    /// given back when it closed before they reached its TX ring.
    egress_port_down_drop,
    /// `mac = "neigh"`: frames dropped because the next hop's MAC was not known
    /// (the control thread is asked to look again).
    neigh_miss_drop,
    /// Other ports' frames this socket put on its TX ring.
    foreign_tx,
    /// Other ports' frames completed here and returned to their pool's return ring.
    foreign_completed,
    /// Other ports' frames taken back from this socket's rings after a device loss
    /// and returned to their pool.
    foreign_reclaimed,
    /// `xdpool capture`: frames copied into the capture queue.
    captured,
    /// `xdpool capture`: frames the capture queue had no room for (not captured; the
    /// frame itself went on to its action).
    capture_dropped,
    /// A rule's `capture` file: frames copied into the file capture queue.
    file_captured,
    /// A rule's `capture` file: frames the file capture queue had no room for (not
    /// written; the frame itself went on to its action).
    file_capture_dropped,
    /// Per-pool audits run at socket teardown (at the close: the owner map against
    /// the rings' own positions; after the reclaim: nothing left in fill or TX).
    teardown_audits,
    /// Of those, audits that failed: a frame lost or doubled (must stay 0; the run
    /// ends with an accounting mismatch).
    teardown_audit_failures,
    /// Frames handed to a packet function (`action = "call"`).
    handler_calls,
    /// Frames whose handler panicked: each was dropped (`handlers.on_panic = "drop"`)
    /// and is counted here, not in `action_drop`.
    handler_panics,
    /// Handler verdicts naming a port this lane cannot send to (a `PortRef` of another
    /// program), or a frame left shorter than its MACs: dropped.
    handler_refused,
    /// New frames packet functions sent (`Packet::emit`).
    handler_emitted,
    /// Frames packet functions kept past their call (`Packet::keep`).
    kept_taken,
    /// Kept frames given back (their handle dropped, or sent with a drop verdict).
    kept_returned,
    /// Kept frames sent later (`Packet::send_kept`).
    kept_sent,
    /// Frames packet functions keep now.
    kept,
    /// Kept frames whose handle was never dropped nor sent (leaked, e.g. with
    /// `mem::forget`): named at the end, left out of the pool (a stalled shutdown).
    kept_leaked,
});
