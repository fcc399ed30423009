//! xdpool's tools, kept out of the product: the veth lab ([`lab`]), the traffic
//! generator ([`gen`]) and the benchmarks ([`bench`](mod@bench), and the recycler's
//! micro-benchmark [`pool_bench`]). The `xdpool` binary (xdpool-cli) and the
//! integration tests use them; the `xdpool` library never does, and the compiler
//! holds it to that (it does not depend on this crate).
#![warn(
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]
// Unsafe code only where allowed: the AF_XDP generator and the benchmark's CPU calls.
#![deny(unsafe_code)]

pub mod bench;
pub mod gen;
pub mod lab;
pub mod pool_bench;

// The library's modules the tools are written against, under their names in the
// library, so that the tools' `crate::netns`, `crate::steer`... read as they did
// when the tools lived in it. Internal API: see `xdpool::internal`.
use xdpool::internal::{capture, config, netns, stats, steer, xsk};
