//! xdpool: an AF_XDP userspace packet processor whose UMEM frames are managed by
//! a page_pool-style recycler (the `pool` crate).
//!
//! The public API is what this root exports: packet functions ([`Handler`], a
//! closure or a type) over frames lent as a [`Packet`], deciding a [`Verdict`],
//! run by an [`App`] with the whole runtime; [`wire`] parses headers; the
//! `testing` feature's `testing` module drives handlers without root. Every other
//! module is private; the project's own tools, tests and fuzz targets reach them
//! through `internal`, which is not a stable interface.
#![warn(
    missing_docs,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]
// Unsafe code only in the modules (and submodules) allowed below: the AF_XDP
// syscalls, UMEM and rings, the XDP program's shared structs and link, and a few
// libc calls (sigaction, an ethtool ioctl, umask).
#![deny(unsafe_code)]
mod api;
mod capture;
mod config;
mod device;
mod doctor;
mod error;
#[allow(unsafe_code)] // registers the UMEM (Umem::register) over the pool's region
mod lifecycle;
mod neigh;
#[allow(unsafe_code)] // the SIOCETHTOOL ioctl and its socket
mod netns;
mod plan;
mod privilege;
mod reload;
mod run;
#[allow(unsafe_code)] // tests: set_var of NOTIFY_SOCKET / WATCHDOG_USEC
mod service;
#[allow(unsafe_code)] // sigaction
mod signal;
mod stats;
mod steer;
mod summary;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wire;
mod worker;
#[allow(unsafe_code)] // AF_XDP: the socket syscalls, the UMEM mapping and the rings
mod xsk;

pub use api::{
    App, Counter, Declaration, EmitError, Handler, HandlerSet, Kept, LaneSetup, Mac, Named,
    NoHeader, NoRoom, Packet, PortRef, Tick, UserCounters, Verdict,
};
pub use error::RunError as Error;
pub use run::Summary;

/// The library's modules, for the project's own binary (xdpool-cli), tools
/// (xdpool-lab), integration tests and fuzz targets. Not a stable interface: the
/// public API will be the items at the crate root.
#[doc(hidden)]
pub mod internal {
    // A private module cannot be re-exported as a whole (E0365): each one's public
    // items are, under the module's name.
    macro_rules! reexport {
        ($($m:ident),* $(,)?) => {
            $(
                #[allow(missing_docs)]
                pub mod $m {
                    pub use crate::$m::*;
                }
            )*
        };
    }
    reexport!(
        capture, config, device, doctor, error, lifecycle, neigh, netns, plan, privilege, reload,
        run, service, signal, stats, steer, summary, wire, worker, xsk,
    );
}
