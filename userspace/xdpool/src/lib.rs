//! xdpool: an AF_XDP userspace packet processor whose UMEM frames are managed by
//! a page_pool-style recycler (the `pool` crate).
//!
//! The designed public API is still to come (issue 25). Until then every module is
//! private; the project's own tools, tests and fuzz targets reach them through
//! [`internal`], which is not a stable interface.
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
mod capture;
mod config;
mod device;
mod doctor;
mod error;
mod lifecycle;
mod neigh;
mod netns;
mod plan;
mod privilege;
mod reload;
mod run;
mod service;
mod signal;
mod stats;
mod steer;
mod summary;
mod wire;
mod worker;
mod xsk;

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
