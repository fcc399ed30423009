//! Errors of the recycler.

use crate::frame::Location;

/// Errors creating a region or tearing a pool down.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The configuration cannot describe a UMEM.
    #[error("invalid region config: {0}")]
    InvalidConfig(String),
    /// mmap failed.
    #[error("mmap of {len} bytes for the UMEM failed: {source}; lower `frames` or free memory")]
    Mmap {
        /// Bytes asked for.
        len: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// mbind / placement verification failed on a multi-node machine.
    #[error("NUMA placement of frames {first}..{end} on node {node} failed: {reason}; check the node has free memory or use a single-node topology")]
    NumaPlacement {
        /// Target node.
        node: u32,
        /// First frame of the range.
        first: u32,
        /// End of the range.
        end: u32,
        /// What went wrong.
        reason: String,
    },
    /// A destroyed pool still has frames out after the wait.
    #[error("stalled pool shutdown: pool {pool}: {inflight} inflight; frames are still held by the application or the kernel (reclaim_kernel after the socket is gone)")]
    StalledShutdown {
        /// Pool id.
        pool: u32,
        /// Frames still out.
        inflight: u64,
    },
}

/// A frame hand-off that was refused (and counted in the pool's stats).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The address or token is not from this region.
    #[error(
        "address {addr:#x} is not inside this UMEM; the descriptor is corrupt or from another UMEM"
    )]
    Foreign {
        /// The address.
        addr: u64,
    },
    /// addr + len crosses the end of a chunk.
    #[error("address {addr:#x} with length {len} crosses its chunk; the descriptor is corrupt")]
    OutOfChunk {
        /// The address.
        addr: u64,
        /// The length.
        len: u32,
    },
    /// RX descriptor for a frame that was not in this pool's fill ring.
    #[error("address {addr:#x} is not in this pool's fill ring (it is {location:?}); the kernel returned a frame twice or from another pool")]
    NotInFill {
        /// The address.
        addr: u64,
        /// Where the frame was.
        location: Location,
    },
    /// Completion for a frame that was not in a TX ring.
    #[error("address {addr:#x} is not in a TX ring (it is {location:?}); a completion was seen twice or is corrupt")]
    NotInTx {
        /// The address.
        addr: u64,
        /// Where the frame was.
        location: Location,
    },
    /// The frame was already released.
    #[error("frame at {addr:#x} was already released (double release)")]
    DoubleRelease {
        /// The address.
        addr: u64,
    },
}
