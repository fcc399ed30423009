//! The recycler: the kernel's page_pool, for AF_XDP UMEM frames.
//!
//! A [`Region`] is the UMEM and the per-frame metadata; each worker owns a
//! [`PoolOwner`] (not `Send`) with a 128-entry cache, and other threads return frames
//! through its [`PoolRemote`]. See `shared/DESIGN.md`, "The recycler".
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]

mod accounting;
pub mod bench;
mod error;
mod frame;
mod pool;
mod region;
mod ring;
mod stats;
mod sync;
mod topology;

pub use accounting::Accounting;
pub use error::{FrameError, PoolError};
pub use frame::{Buf, Frag, Frame, Location};
pub use pool::{DestroyReport, PoolConfig, PoolOwner, PoolRemote, CACHE_SIZE, FRAG_ALIGN};
pub use region::{Region, RegionConfig, RegionMisuse};
pub use stats::PoolStats;
pub use topology::Topology;

const _: () = assert!(CACHE_SIZE.is_power_of_two());
