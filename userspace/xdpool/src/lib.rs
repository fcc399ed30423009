//! xdpool: an AF_XDP userspace packet processor whose UMEM frames are managed by
//! a page_pool-style recycler (the `pool` crate).
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
pub mod wire;
pub mod steer;
pub mod config;
pub mod exit;
pub mod lab;
pub mod netns;
pub mod gen;
pub mod stats;
pub mod capture;
pub mod cli;
pub mod xsk;
pub mod worker;
pub mod plan;
pub mod lifecycle;
pub mod neigh;
pub mod signal;
pub mod summary;
pub mod run;
pub mod reload;
pub mod device;
pub mod bench;
pub mod service;
