//! Helpers shared by the recycler's integration tests.
#![allow(dead_code)]

use pool::*;
use std::sync::Arc;

/// A region of `frames` chunks of `chunk` bytes on a fake `nodes`-node layout.
pub fn region(frames: u32, chunk: u32, nodes: u32) -> Arc<Region> {
    Region::new(RegionConfig {
        frames,
        chunk_size: chunk,
        hugepages: false,
        topology: Topology::fake(nodes),
    })
    .unwrap()
}

/// A pool with default settings and this id.
pub fn pool(r: &Arc<Region>, id: u32) -> PoolOwner {
    PoolOwner::new(
        r,
        PoolConfig {
            id,
            ..Default::default()
        },
    )
}

/// The region's accounting, after checking the invariant.
pub fn ok(r: &Region) -> Accounting {
    let a = r.accounting();
    a.check().unwrap();
    a
}

/// As `ok`, after each live owner published its cache length (the second source the
/// `cached` count is checked against).
pub fn ok_with(r: &Region, owners: &[&PoolOwner]) -> Accounting {
    for p in owners {
        p.publish_stats();
    }
    ok(r)
}
