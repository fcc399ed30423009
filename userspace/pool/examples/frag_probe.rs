use pool::*;
use std::hint::black_box;
fn main() {
    let r = Region::new(RegionConfig { frames: 4096, chunk_size: 2048, hugepages: false, topology: Topology::single_node() }).unwrap();
    let mut p = PoolOwner::new(&r, PoolConfig::default());
    let n = 20_000_000u64;
    for round in 0..3 {
        let t = std::time::Instant::now();
        for _ in 0..n { let f = p.alloc_frag(2048).unwrap(); p.release_frag(black_box(f)); }
        let a = t.elapsed().as_nanos() as f64 / n as f64;
        let t = std::time::Instant::now();
        for _ in 0..n { let f = p.alloc().unwrap(); p.recycle(black_box(f)); }
        let b = t.elapsed().as_nanos() as f64 / n as f64;
        println!("round {round}: frag_whole {a:.2} ns fast {b:.2} ns stats {:?}", p.stats().recycle_released_refcnt);
    }
}
