//! The recycler: the kernel's page_pool, for AF_XDP UMEM frames.
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
