//! xdpool: an AF_XDP userspace packet processor whose UMEM frames are managed by
//! a page_pool-style recycler (the `pool` crate).
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
