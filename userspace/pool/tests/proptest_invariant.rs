//! Random sequences of alloc / alloc_frag / ref_frag / release / cross-thread release
//! / kernel hand-off / destroy keep the accounting invariant, never hand out a frame
//! twice and never lose one.
#![cfg(not(feature = "loom"))]

use pool::*;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

const FRAMES: u32 = 48;
const CHUNK: u32 = 2048;

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    AllocFrag(usize, u32),
    AllocSized(usize, u32),
    AllocHighOrder(usize, u32),
    RefFrag(usize, usize),
    IntoFrag(usize, usize),
    Recycle(usize, usize),
    ReleaseFrag(usize, usize),
    CrossRecycle(usize, usize),
    CrossReleaseFrag(usize, usize),
    Fill(usize, usize),
    Rx(#[allow(dead_code)] usize, usize),
    RxDrop(#[allow(dead_code)] usize, usize),
    GiveTx(usize, usize),
    GiveTxFrag(usize, usize),
    Complete(#[allow(dead_code)] usize, usize),
    Drain(usize),
    Reclaim(usize),
    Destroy(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..2usize;
    let w = 0..16usize;
    prop_oneof![
        4 => p.clone().prop_map(Op::Alloc),
        3 => (p.clone(), 1..=CHUNK).prop_map(|(p, s)| Op::AllocFrag(p, s)),
        1 => (p.clone(), 1..=CHUNK).prop_map(|(p, s)| Op::AllocSized(p, s)),
        1 => (p.clone(), 1..4u32).prop_map(|(p, n)| Op::AllocHighOrder(p, n)),
        2 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::RefFrag(p, w)),
        2 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::IntoFrag(p, w)),
        3 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::Recycle(p, w)),
        3 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::ReleaseFrag(p, w)),
        2 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::CrossRecycle(p, w)),
        2 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::CrossReleaseFrag(p, w)),
        1 => (p.clone(), 1..8usize).prop_map(|(p, n)| Op::Fill(p, n)),
        2 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::Rx(p, w)),
        1 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::RxDrop(p, w)),
        1 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::GiveTx(p, w)),
        1 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::GiveTxFrag(p, w)),
        2 => (p.clone(), w.clone()).prop_map(|(p, w)| Op::Complete(p, w)),
        1 => p.clone().prop_map(Op::Drain),
        1 => p.clone().prop_map(Op::Reclaim),
        1 => p.prop_map(Op::Destroy),
    ]
}

struct Model {
    region: Arc<Region>,
    pools: Vec<PoolOwner>,
    /// Remotes of every pool ever made (destroyed ones get late returns).
    remotes: Vec<PoolRemote>,
    next_id: u32,
    frames: Vec<Frame>,
    frags: Vec<Frag>,
    /// (pool slot, address) in a fill ring / a TX ring.
    fill: Vec<(usize, u64)>,
    tx: Vec<(usize, u64)>,
}

impl Model {
    fn new() -> Model {
        let region = Region::new(RegionConfig {
            frames: FRAMES,
            chunk_size: CHUNK,
            hugepages: false,
            topology: Topology::fake(2),
        })
        .unwrap();
        let mut m = Model {
            region,
            pools: vec![],
            remotes: vec![],
            next_id: 0,
            frames: vec![],
            frags: vec![],
            fill: vec![],
            tx: vec![],
        };
        for node in 0..2 {
            let p = m.make_pool(node);
            m.pools.push(p);
        }
        m
    }

    fn make_pool(&mut self, node: u32) -> PoolOwner {
        let p = PoolOwner::new(
            &self.region,
            PoolConfig {
                id: self.next_id,
                preferred_node: node,
                ring_size: 8,
                bulk: 16,
            },
        );
        self.next_id += 1;
        self.remotes.push(p.remote());
        p
    }

    fn take<T>(v: &mut Vec<T>, w: usize) -> Option<T> {
        if v.is_empty() {
            None
        } else {
            let i = w % v.len();
            Some(v.swap_remove(i))
        }
    }

    fn new_frame(&mut self, f: Frame) {
        assert!(
            !self.frames.iter().any(|g| g.index() == f.index()),
            "frame {} handed out twice",
            f.index()
        );
        assert!(
            !self.frags.iter().any(|g| g.frame_index() == f.index()),
            "frame {} is also a frag chunk",
            f.index()
        );
        self.frames.push(f);
    }

    fn new_frag(&mut self, f: Frag) {
        assert!(
            !self.frames.iter().any(|g| g.index() == f.frame_index()),
            "frag inside a held frame"
        );
        for g in &self.frags {
            let overlap =
                g.addr() < f.addr() + f.len() as u64 && f.addr() < g.addr() + g.len() as u64;
            assert!(!overlap, "new frag {f:?} overlaps live {g:?}");
        }
        assert!(f.offset() + f.len() <= CHUNK);
        self.frags.push(f);
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Alloc(p) => {
                if let Some(f) = self.pools[p].alloc() {
                    self.new_frame(f)
                }
            }
            Op::AllocFrag(p, s) => {
                if let Some(f) = self.pools[p].alloc_frag(s) {
                    self.new_frag(f)
                }
            }
            Op::AllocSized(p, s) => match self.pools[p].alloc_sized(s) {
                Some(Buf::Whole(f)) => self.new_frame(f),
                Some(Buf::Frag(f)) => self.new_frag(f),
                None => {}
            },
            Op::AllocHighOrder(p, n) => {
                if let Some(v) = self.pools[p].alloc_high_order(n) {
                    assert_eq!(v.len(), n as usize);
                    for f in v {
                        self.new_frame(f);
                    }
                }
            }
            Op::RefFrag(p, w) => {
                if !self.frags.is_empty() {
                    let i = w % self.frags.len();
                    let r = self.pools[p].ref_frag(&self.frags[i]);
                    self.frags.push(r);
                }
            }
            Op::IntoFrag(p, w) => {
                if let Some(f) = Self::take(&mut self.frames, w) {
                    let idx = f.index();
                    let g = self.pools[p]
                        .frame_into_frag(f, 64, 100)
                        .expect("a held frame converts");
                    assert_eq!((g.frame_index(), g.offset(), g.len()), (idx, 64, 100));
                    self.new_frag(g);
                }
            }
            Op::Recycle(p, w) => {
                if let Some(f) = Self::take(&mut self.frames, w) {
                    self.pools[p].recycle(f)
                }
            }
            Op::ReleaseFrag(p, w) => {
                if let Some(f) = Self::take(&mut self.frags, w) {
                    self.pools[p].release_frag(f)
                }
            }
            Op::CrossRecycle(p, w) => {
                if let Some(f) = Self::take(&mut self.frames, w) {
                    let remote = self.remotes[(p + w) % self.remotes.len()].clone();
                    std::thread::spawn(move || remote.recycle(f))
                        .join()
                        .unwrap();
                }
            }
            Op::CrossReleaseFrag(p, w) => {
                if let Some(f) = Self::take(&mut self.frags, w) {
                    let remote = self.remotes[(p + w) % self.remotes.len()].clone();
                    std::thread::spawn(move || remote.release_frag(f))
                        .join()
                        .unwrap();
                }
            }
            Op::Fill(p, n) => {
                let mut out = vec![0u64; n];
                let got = self.pools[p].fill_bulk(&mut out);
                for a in &out[..got] {
                    assert!(
                        !self.fill.iter().any(|(_, b)| b == a),
                        "address {a:#x} in the fill ring twice"
                    );
                    self.fill.push((p, *a));
                }
            }
            Op::Rx(_, w) => {
                if let Some((p, a)) = Self::take(&mut self.fill, w) {
                    let f = self.pools[p]
                        .take_rx(a + 64, 100)
                        .expect("frame from our fill ring");
                    self.new_frame(f);
                    // The same descriptor again is refused and counted.
                    let before = self.pools[p].stats().not_in_fill;
                    assert!(self.pools[p].take_rx(a, 1).is_err());
                    assert_eq!(self.pools[p].stats().not_in_fill, before + 1);
                }
            }
            Op::RxDrop(_, w) => {
                if let Some((p, a)) = Self::take(&mut self.fill, w) {
                    // Straight back to the same fill ring: the chunk's address again.
                    let back = self.pools[p]
                        .rx_drop(a + 64, 100)
                        .expect("frame from our fill ring");
                    assert_eq!(back, a);
                    self.fill.push((p, back));
                }
            }
            Op::GiveTx(p, w) => {
                if let Some(f) = Self::take(&mut self.frames, w) {
                    let a = self.pools[p].give_tx(f, 32).unwrap();
                    self.tx.push((p, a));
                }
            }
            Op::GiveTxFrag(p, w) => {
                if let Some(f) = Self::take(&mut self.frags, w) {
                    let a = self.pools[p].give_tx_frag(f).unwrap();
                    self.tx.push((p, a));
                }
            }
            Op::Complete(_, w) => {
                if let Some((p, a)) = Self::take(&mut self.tx, w) {
                    self.pools[p]
                        .take_completion(a)
                        .expect("completion of a TX descriptor");
                }
            }
            Op::Drain(p) => self.pools[p].frag_drain(),
            Op::Reclaim(p) => {
                let n_fill = self.fill.iter().filter(|(q, _)| *q == p).count();
                let n_tx = self.tx.iter().filter(|(q, _)| *q == p).count();
                let got = self.pools[p].reclaim_kernel() as usize;
                assert_eq!(got, n_fill + n_tx, "reclaim count");
                self.fill.retain(|(q, _)| *q != p);
                self.tx.retain(|(q, _)| *q != p);
            }
            Op::Destroy(p) => {
                self.apply(Op::Reclaim(p));
                let fresh = self.make_pool(p as u32);
                let old = std::mem::replace(&mut self.pools[p], fresh);
                let rep = old.destroy();
                assert_eq!(rep.inflight, rep.inflight_now());
            }
        }
    }

    fn check(&self) {
        // Second sources per pool: the cache's entries, and the model's own fill and
        // TX lists standing for the rings' positions.
        for (i, p) in self.pools.iter().enumerate() {
            p.publish_stats();
            let kernel = KernelHeld {
                fill: self.fill.iter().filter(|(q, _)| *q == i).count() as u64,
                tx: self.tx.iter().filter(|(q, _)| *q == i).count() as u64,
            };
            p.audit(kernel).check().unwrap();
        }
        let a = self.region.accounting();
        a.check().unwrap();
        for f in &self.frames {
            assert_eq!(self.region.location(f.index()), Some(Location::Application));
        }
        for f in &self.frags {
            assert_eq!(
                self.region.location(f.frame_index()),
                Some(Location::Application)
            );
        }
        // Every pool's inflight sums to the frames out of the global lists.
        let inflight: u64 = self.remotes.iter().map(|r| r.stats().inflight).sum();
        assert_eq!(
            inflight,
            a.total - a.free,
            "hold/release disagree with the owner map: {a:?}"
        );
        let mut chunks: HashMap<u32, ()> = HashMap::new();
        for f in &self.frames {
            assert!(chunks.insert(f.index(), ()).is_none());
        }
    }

    fn finish(mut self) {
        while let Some((p, a)) = self.tx.pop() {
            self.pools[p].take_completion(a).unwrap();
        }
        while let Some((p, a)) = self.fill.pop() {
            let f = self.pools[p].take_rx(a, 0).unwrap();
            self.pools[p].recycle(f);
        }
        for f in std::mem::take(&mut self.frames) {
            self.pools[0].recycle(f);
        }
        for f in std::mem::take(&mut self.frags) {
            self.pools[1].release_frag(f);
        }
        self.check();
        for p in std::mem::take(&mut self.pools) {
            let rep = p.destroy();
            assert_eq!(
                rep.inflight_now(),
                0,
                "pool {} still has frames after everything came back",
                rep.pool_id
            );
        }
        let a = self.region.accounting();
        a.check().unwrap();
        assert_eq!(a.free, a.total, "frames lost: {a:?}");
        for r in &self.remotes {
            let s = r.stats();
            assert_eq!(s.inflight, 0, "pool {}: {s:?}", s.pool_id);
            assert_eq!(
                s.misuse(),
                s.not_in_fill,
                "only the deliberate repeated RX is misuse: {s:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariant(ops in proptest::collection::vec(op(), 1..120)) {
        let mut m = Model::new();
        for op in ops {
            m.apply(op);
            m.check();
        }
        m.finish();
    }
}
