//! xdpool: an AF_XDP userspace packet processor whose UMEM frames are managed by
//! a page_pool-style recycler (the `pool` crate).
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
mod api;
pub use api::{
    App, Counter, Declaration, EmitError, Error, Handler, HandlerSet, Kept, LaneSetup, Mac, Named, NoRoom,
    Packet, PortRef, UserCounters, Verdict,
};
pub mod bench;
pub mod capture;
pub mod cli;
pub mod config;
pub mod device;
pub mod exit;
pub mod gen;
pub mod lab;
pub mod lifecycle;
pub mod neigh;
pub mod netns;
pub mod plan;
pub mod reload;
pub mod run;
pub mod service;
pub mod signal;
pub mod stats;
pub mod steer;
pub mod summary;
pub mod wire;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod worker;
pub mod xsk;
