//! The public API: packet functions ([`Handler`]) over the runtime ([`App`]).
//!
//! A handler gets each frame of its rules as a [`Packet`] (bytes, parsed headers,
//! where it came from, room to grow or shrink it) and returns a [`Verdict`] (drop,
//! back, forward, mirror). It never owns a frame: the worker does, before and after
//! the call, so no handler can leak one, and a panicking handler's frame is dropped
//! and counted. See `docs/library.md`.

mod app;
mod handler;
mod kept;
mod packet;
#[cfg(test)]
mod tests;
mod tick;
mod verdict;

pub use app::App;
pub use handler::{Counter, Declaration, Handler, HandlerSet, LaneSetup, Named, UserCounters};
pub use kept::Kept;
pub use packet::{EmitError, NoHeader, NoRoom, Packet};
pub use tick::Tick;
pub use verdict::{Mac, PortRef, Verdict};

pub(crate) use kept::{send as kept_send, KeptStore};
#[cfg(test)]
pub(crate) use packet::kept_parse;
pub(crate) use packet::{forget_parse, keep_parse, Emit, Meta, RuleOf};
pub(crate) use verdict::{mac_of_word, mac_word, Kind};
