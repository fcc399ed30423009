//! Frames a handler keeps past its call: owned handles that give the frame back
//! when dropped.

use crate::xsk::XdpDesc;
use pool::Frame;
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

/// A frame a handler keeps past its call ([`Packet::keep`](super::Packet::keep)): in
/// a queue, a reorder buffer, a delay line. The frame stays in the UMEM, counted as
/// the application's (`kept` in the stats), through device losses as well. Send it
/// later with [`Packet::send_kept`](super::Packet::send_kept) during another
/// frame's call; dropping the handle gives the frame back to its pool. Not `Send`: it
/// stays on the lane's worker.
///
/// A handle leaked on purpose (`std::mem::forget`) keeps its frame out of the pool
/// until the end, where it is named ("kept frames never returned") and the run ends
/// as a stalled shutdown; the frame accounting stays exact.
///
/// A handle cannot leave its lane's worker:
///
/// ```compile_fail
/// fn to_another_thread<T: Send>(_: T) {}
/// fn give_away(k: xdpool::Kept) {
///     to_another_thread(k);
/// }
/// ```
#[must_use = "dropping a Kept gives its frame back to the pool at once"]
pub struct Kept {
    slot: u32,
    /// `None` once sent (the send request answers for the frame then).
    store: Option<Rc<KeptStore>>,
}

impl Kept {
    /// The frame's length in bytes.
    pub fn len(&self) -> usize {
        self.store.as_ref().map_or(0, |s| s.len_of(self.slot))
    }

    /// Whether the frame has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Kept {
    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            store.returned.borrow_mut().push(self.slot);
        }
    }
}

impl fmt::Debug for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kept(slot {}, {} bytes)", self.slot, self.len())
    }
}

/// One lane's kept frames: a slab of (frame, descriptor) by slot, and the slots
/// whose handle was dropped or sent, for the worker to act on between frames.
#[derive(Default)]
pub(crate) struct KeptStore {
    slab: RefCell<Vec<Option<(Frame, XdpDesc)>>>,
    free: RefCell<Vec<u32>>,
    /// Handles dropped: their frames go back to the pool.
    pub(crate) returned: RefCell<Vec<u32>>,
    /// Handles sent: (slot, where to).
    pub(crate) sent: RefCell<Vec<(u32, super::Verdict)>>,
}

impl KeptStore {
    /// A slot for the frame of the call in progress (filled after the call).
    pub(crate) fn reserve(self: &Rc<Self>) -> Kept {
        let slot = match self.free.borrow_mut().pop() {
            Some(s) => s,
            None => {
                let mut slab = self.slab.borrow_mut();
                slab.push(None);
                (slab.len() - 1) as u32
            }
        };
        Kept {
            slot,
            store: Some(self.clone()),
        }
    }

    /// Puts the frame of a reserved slot in it.
    pub(crate) fn fill(&self, slot: u32, frame: Frame, d: XdpDesc) {
        self.slab.borrow_mut()[slot as usize] = Some((frame, d));
    }

    /// Takes the frame out of `slot` (the slot is free again).
    pub(crate) fn take(&self, slot: u32) -> Option<(Frame, XdpDesc)> {
        let got = self.slab.borrow_mut().get_mut(slot as usize)?.take();
        if got.is_some() {
            self.free.borrow_mut().push(slot);
        }
        got
    }

    fn len_of(&self, slot: u32) -> usize {
        self.slab
            .borrow()
            .get(slot as usize)
            .and_then(|s| s.as_ref().map(|(_, d)| d.len as usize))
            .unwrap_or(0)
    }

    /// Every frame still kept (at the end, after the handlers' states are gone:
    /// their handles were leaked).
    pub(crate) fn drain_all(&self) -> Vec<(Frame, XdpDesc)> {
        self.slab.borrow_mut().iter_mut().filter_map(Option::take).collect()
    }
}

/// Asks for the kept frame of `k` to leave as `to` says (`Packet::send_kept`): the
/// request answers for the frame from here, the handle's Drop does nothing.
pub(crate) fn send(mut k: Kept, to: super::Verdict) {
    if let Some(store) = k.store.take() {
        store.sent.borrow_mut().push((k.slot, to));
    }
}
