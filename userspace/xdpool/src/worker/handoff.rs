//! Frames crossing from one port to another: a descriptor plus the frag token that
//! keeps its chunk alive, and the socket whose pool it returns to.
//!
//! A frame the sending port completes (or cannot send) goes back through the origin
//! pool's `PoolRemote`, into that pool's return ring; the one exception is a
//! completion whose origin pool is served by the same worker, which that worker
//! releases into the pool's cache itself (`Port::reap_to`). [`Remotes`] is the table
//! of those handles.

use crate::xsk::XdpDesc;
use pool::{Frag, PoolRemote};
use std::sync::{Arc, OnceLock};

/// One frame for another port's TX ring.
#[derive(Debug)]
pub struct Egress {
    /// The descriptor to put on the TX ring (address, length; no continuation).
    pub desc: XdpDesc,
    /// The reference that keeps the chunk; released through the origin pool when the
    /// TX completes, or at once if the frame cannot be sent.
    pub token: Frag,
    /// The socket (pool) the frame came from.
    pub origin: u16,
}

/// Every pool's remote handle, by socket index; each worker sets its own sockets'
/// entries when it builds their pools, before any frame can exist.
#[derive(Debug)]
pub struct Remotes(Box<[OnceLock<PoolRemote>]>);

impl Remotes {
    /// A table for `sockets` pools.
    pub fn new(sockets: usize) -> Arc<Remotes> {
        Arc::new(Remotes((0..sockets).map(|_| OnceLock::new()).collect()))
    }

    /// Publishes socket `i`'s pool handle.
    pub fn set(&self, i: usize, r: PoolRemote) {
        let _ = self.0[i].set(r);
    }

    /// Returns a frame reference to its origin pool (return ring; the global list if
    /// that pool is destroyed). False (and nothing done) for an origin never set,
    /// which a frame cannot have: the caller counts it.
    #[inline]
    pub fn release(&self, origin: u16, token: Frag) -> bool {
        match self.0.get(origin as usize).and_then(|c| c.get()) {
            Some(r) => {
                r.release_frag(token);
                true
            }
            None => false,
        }
    }
}
