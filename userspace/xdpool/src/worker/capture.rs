//! The worker's side of packet capture (`crate::capture`): while `xdpool capture` is on
//! for this lane's port, or a rule of the lane's lists has `capture = {...}`, each
//! received frame is matched (first match, under the list its action is taken under)
//! and, if its rule is captured, copied (at most snaplen bytes) into the tap before
//! its action runs.

use super::lane::Lane;
use crate::capture::{now_ns, CaptureTap, Offer, Target};
use crate::xsk::XdpDesc;
use pool::Frame;

impl Lane {
    /// Copies `frame` into the client's tap if the first rule it matches is the one
    /// `client` names (by key), and into the file tap if that rule has a `capture`
    /// file with copies left (its `count`); a full tap is counted and skipped. Context: the
    /// receiving worker, after the verdict and before the action (which may rewrite
    /// the bytes).
    #[inline(never)]
    pub(super) fn capture(
        &mut self,
        frame: &Frame,
        d: XdpDesc,
        client: Option<Target>,
        tap: &CaptureTap,
        file_tap: &CaptureTap,
    ) {
        // take_rx checked addr..addr+len lies in the frame's chunk.
        let offset = (d.addr - frame.addr()) as u32;
        let Some(bytes) = self.port.region().frame_bytes(frame, offset, d.len) else {
            return;
        };
        // The list the frame's action was taken under (during a hand-over, the one of
        // its tag): a rule's copy goes with its action, whatever a reload renumbered.
        let set = self.rules.last_set();
        let Some(pos) = set.classifier.first_match(bytes) else {
            return;
        };
        let socket = self.port.socket as u32;
        let to_client = client
            .filter(|t| t.rule_key == set.key(pos))
            .map(|t| tap.offer(socket, bytes, t.snaplen, now_ns()));
        let sink = set.sink(pos).filter(|s| s.take_one());
        let to_file =
            sink.map(|s| file_tap.offer_to(s.id, socket, bytes, s.spec.snaplen, now_ns()));
        if to_file == Some(Offer::Full) {
            if let Some(s) = sink {
                s.note_dropped();
            }
        }
        let c = &mut self.port.c;
        match to_client {
            Some(Offer::Queued) => c.captured += 1,
            Some(Offer::Full) => c.capture_dropped += 1,
            None => {}
        }
        match to_file {
            Some(Offer::Queued) => c.file_captured += 1,
            Some(Offer::Full) => c.file_capture_dropped += 1,
            None => {}
        }
    }
}

/// The capture target for a lane of port `port`, if a capture is on for it: one
/// relaxed load per batch.
#[inline]
pub(super) fn target_for(tap: &CaptureTap, port: usize) -> Option<Target> {
    tap.target().filter(|t| t.port == port)
}
