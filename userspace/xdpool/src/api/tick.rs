//! What a handler's [`tick`](super::Handler::tick) works with.

use super::packet::Emit;
use super::{EmitError, Kept, PortRef, Verdict};
use std::time::Instant;

/// A lane's tick: the time it was called at, and the ways a frame leaves outside a
/// packet's call (a kept frame sent, a new frame emitted), checked as
/// [`Packet::send_kept`](super::Packet::send_kept) and
/// [`Packet::emit`](super::Packet::emit) check them.
pub struct Tick<'a> {
    now: Instant,
    port: PortRef,
    queue: u32,
    emit: &'a mut (dyn Emit + 'a),
}

impl<'a> Tick<'a> {
    pub(crate) fn new(
        now: Instant,
        port: PortRef,
        queue: u32,
        emit: &'a mut (dyn Emit + 'a),
    ) -> Self {
        Tick {
            now,
            port,
            queue,
            emit,
        }
    }

    /// When this tick was called: compare it with the `Instant`s the handler keeps
    /// (a frame's arrival).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The port of the lane ticked.
    pub fn port(&self) -> PortRef {
        self.port
    }

    /// The RX queue of the lane ticked.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Sends a kept frame as `verdict` says (to a declared port, or back out of the
    /// lane's port); an undeclared port drops it (its frame returns to the pool).
    pub fn send_kept(&mut self, kept: Kept, verdict: Verdict) -> Result<(), EmitError> {
        self.emit.send_kept(kept, verdict)
    }

    /// Sends a new frame of `frame`'s bytes out of `to`, as
    /// [`Packet::emit`](super::Packet::emit) does.
    pub fn emit(&mut self, to: PortRef, frame: &[u8]) -> Result<(), EmitError> {
        self.emit.emit(to, frame)
    }
}

impl std::fmt::Debug for Tick<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tick")
            .field("port", &self.port)
            .field("queue", &self.queue)
            .finish()
    }
}
