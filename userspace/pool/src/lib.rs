//! The recycler: the kernel's page_pool, for AF_XDP UMEM frames.
//!
//! A [`Region`] is the UMEM and the per-frame metadata; each worker owns a
//! [`PoolOwner`] (not `Send`) with a 128-entry cache, and other threads return frames
//! through its [`PoolRemote`]. See `shared/DESIGN.md`, "The recycler".
//!
//! Paths, as in net/core/page_pool.c: `alloc` pops the owner cache (`alloc_fast`);
//! an empty cache refills from the return ring (`alloc_refill`, `alloc_empty`,
//! `alloc_waive` for frames of another node), then takes a bulk from the global
//! per-node list (`alloc_slow`). `recycle` pushes into the cache (`recycle_cached`),
//! then the ring (`recycle_cache_full`), then the global list (`recycle_ring_full`).
//! A worker's per-batch loop takes an [`OwnerBatch`] (`PoolOwner::batch`): the same
//! paths and counters, with the cache count in a register for the batch.
//! The owner map ([`Location`]) says where every frame is; [`Accounting::check`] is
//! the invariant tests call after every scenario.
//!
//! Tests: `cargo test -p pool`; loom:
//! `LOOM_MAX_PREEMPTIONS=2 cargo test -p pool --release --features loom --test loom_pool`;
//! benchmark (in the tools' crate, over this crate's public API):
//! `cargo run -p xdpool-lab --example bench_pool --release [-- --json]`.
#![warn(
    missing_docs,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]
// Unsafe code lives in the module allowed below and nowhere else.
#![deny(unsafe_code)]

mod accounting;
mod batch;
mod error;
mod frame;
mod pool;
#[allow(unsafe_code)] // the UMEM mapping and the per-frame metadata behind raw pointers
mod region;
mod ring;
mod stats;
mod sync;
mod topology;

pub use accounting::{Accounting, KernelHeld, PoolAudit};
pub use batch::OwnerBatch;
pub use error::{FrameError, PoolError};
pub use frame::{Buf, Frag, Frame, Location};
pub use pool::{DestroyReport, PoolConfig, PoolOwner, PoolRemote, CACHE_SIZE, FRAG_ALIGN};
pub use region::{Region, RegionConfig, RegionMisuse};
pub use stats::PoolStats;
pub use topology::Topology;

const _: () = assert!(CACHE_SIZE.is_power_of_two());
