//! AF_XDP sockets, UMEM registration and the four rings, over `libc`.
//!
//! - [`Umem`]: registers caller-provided memory (the recycler's) with the kernel.
//! - [`XskSocket`]: a socket bound to (ifindex, queue) with its fill, completion, RX
//!   and TX rings; later sockets share the UMEM with their own fill/completion rings.
//! - [`FillRing`], [`CompletionRing`], [`RxRing`], [`TxRing`]: batched SPSC rings.
//! - [`desc`]: validation of every index and descriptor the kernel hands us; failures
//!   are counted in [`RingErrors`] and dropped, never dereferenced.

pub mod desc;
mod error;
mod ring;
mod socket;
pub(crate) mod sys;
mod umem;

pub use desc::{BadDesc, RingErrors, UmemLayout, XdpDesc, XDP_PACKET_HEADROOM, XDP_PKT_CONTD};
pub use error::XskError;
/// The kernel side of a heap ring, for the ring tests and fuzz targets only (it can
/// break the single-producer protocol on purpose, which is only sound within one
/// test).
#[cfg(any(test, fuzzing, feature = "testing"))]
pub use ring::HeapRingPeer;
pub use ring::{kernel_held, CompletionRing, FillRing, RxConsumed, RxRing, TxRing};
pub use socket::{IrqDeferral, RingsMut, SocketConfig, TxBudget, Wakeup, XdpStatistics, XskSocket};
pub use umem::{validate_ring_size, Umem, UmemConfig, MAX_RING_SIZE};
