//! The worker's side of packet capture (`crate::capture`): while a capture is on for
//! this lane's port, each received frame that the captured rule matches first is
//! copied (at most snaplen bytes) into the tap before its action runs.

use super::lane::Lane;
use crate::capture::{now_ns, CaptureTap, Offer, Target};
use crate::xsk::XdpDesc;
use pool::Frame;

impl Lane {
    /// Copies `frame` into the tap if rule `t.local_rule` is the first it matches;
    /// a full tap is counted and skipped. Context: the receiving worker, before the
    /// action (which may rewrite the bytes).
    #[inline(never)]
    pub(super) fn capture(&mut self, frame: &Frame, d: XdpDesc, t: Target, tap: &CaptureTap) {
        // take_rx checked addr..addr+len lies in the frame's chunk.
        let offset = (d.addr - frame.addr()) as u32;
        let Some(bytes) = self.port.region().frame_bytes(frame, offset, d.len) else { return };
        // The lane's current rule list: a capture names a rule by its index in the
        // list it was started against (a reload while it runs re-numbers them).
        if self.rules.current.classifier.first_match(bytes) != Some(t.local_rule) {
            return;
        }
        match tap.offer(self.port.socket as u32, bytes, t.snaplen, now_ns()) {
            Offer::Queued => self.port.c.captured += 1,
            Offer::Full => self.port.c.capture_dropped += 1,
        }
    }
}

/// The capture target for a lane of port `port`, if a capture is on for it: one
/// relaxed load per batch.
#[inline]
pub(super) fn target_for(tap: &CaptureTap, port: usize) -> Option<Target> {
    tap.target().filter(|t| t.port == port)
}
