//! The data plane over heap rings: every action, the port mirror, the cross-port
//! return through the origin pool's return ring, a full TX ring, a refused
//! multi-buffer chain, and a port gone mid-batch, with no root and no kernel. The
//! test plays the kernel on the other side of each ring. After each scenario every
//! descriptor that went in comes out once (on TX or back in the pool), the counters
//! say exactly what happened, and the frame accounting holds.

use super::action::{apply_act, Act, PortId, PortIx, Verdict};
use super::handoff::{Egress, Remotes};
use super::harness::{HeapIo, HeapPeers};
use super::port::{Port, PortIo, PortRings};
use crate::config::{CopyFill, MacRewrite};
use crate::neigh::MacBook;
use crate::xsk::{UmemLayout, XdpDesc, XDP_PKT_CONTD};
use pool::{PoolConfig, PoolOwner, Region, RegionConfig};
use std::collections::BTreeMap;
use std::sync::Arc;

const FRAMES: u32 = 512;
const CHUNK: u32 = 2048;
const HEADROOM: u64 = 256;
const LEN: u32 = 60;

/// The kernel's side of one heap socket, with the moves the tests make on it.
type Kernel = HeapPeers;

impl Kernel {
    /// Takes up to `n` fill entries and hands them back as received frames.
    fn deliver(&self, n: usize) -> Vec<XdpDesc> {
        let mut addrs = vec![0u64; n];
        let got = self.fill.consume(&mut addrs);
        let descs: Vec<XdpDesc> = addrs[..got]
            .iter()
            .map(|&a| XdpDesc {
                addr: a + HEADROOM,
                len: LEN,
                options: 0,
            })
            .collect();
        assert_eq!(self.rx.produce(&descs), got);
        descs
    }

    /// Sends everything on the TX ring; returns what was sent (not yet completed).
    fn send(&self) -> Vec<XdpDesc> {
        let mut out = vec![XdpDesc::default(); 1024];
        let n = self.tx.consume(&mut out);
        out.truncate(n);
        out
    }

    /// Completes `descs`.
    fn complete(&self, descs: &[XdpDesc]) {
        let addrs: Vec<u64> = descs.iter().map(|d| d.addr).collect();
        assert_eq!(self.comp.produce(&addrs), addrs.len());
    }
}

/// Rings of `fill` and `rx` entries, copy mode handing the kernel the whole fill
/// ring (the default).
fn rings(fill: u32, rx: u32) -> PortRings {
    PortRings {
        fill,
        rx,
        copy_fill: CopyFill::Full,
    }
}

/// A region of `FRAMES` chunks of `CHUNK` bytes.
fn test_region() -> Arc<Region> {
    Region::new(RegionConfig {
        frames: FRAMES,
        chunk_size: CHUNK,
        ..RegionConfig::default()
    })
    .unwrap()
}

/// The fabric of `sockets`, socket `i` the only one of port `i`.
fn test_fabric(sockets: Vec<Arc<super::shared::PortShared>>) -> Arc<super::Fabric> {
    let n = sockets.len();
    Arc::new(super::Fabric {
        sockets,
        port_sockets: (0..n).map(|i| vec![i]).collect(),
        remotes: Remotes::new(n),
        neighbours: crate::neigh::Neighbours::new(MacBook::new(n)),
        capture: Default::default(),
        file_capture: Default::default(),
        handler_failure: Default::default(),
        mailbox: Default::default(),
        stats_due: Default::default(),
    })
}

fn heap_socket(region: &Region, tx_size: u32) -> (Box<dyn PortIo>, Kernel) {
    heap_socket_napi(region, tx_size, None)
}

fn heap_socket_napi(region: &Region, tx_size: u32, napi: Option<u32>) -> (Box<dyn PortIo>, Kernel) {
    heap_socket_with(region, tx_size, napi, None, false)
}

/// A heap socket whose NAPI id, `XDP_STATISTICS` and zero-copy mode read as given.
fn heap_socket_with(
    region: &Region,
    tx_size: u32,
    napi: Option<u32>,
    stats: Option<crate::xsk::XdpStatistics>,
    zero_copy: bool,
) -> (Box<dyn PortIo>, Kernel) {
    let layout = UmemLayout::new(region.len() as u64, CHUNK, 0, false);
    let (mut io, kernel) = HeapIo::new(layout, [512, 1024, 512, tx_size]);
    io.napi = napi;
    io.stats = stats;
    io.zero_copy = zero_copy;
    (Box::new(io), kernel)
}

/// A test frame: Ethernet (dst 02:..:01, src 02:..:02), IPv4, UDP to 198.18.2.1:9,
/// the payload marked with `tag`.
fn template(tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; LEN as usize];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12] = 0x08;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((LEN - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 1, 1]);
    f[30..34].copy_from_slice(&[198, 18, 2, 1]);
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&((LEN - 34) as u16).to_be_bytes());
    f[50] = tag;
    f
}

struct Rig {
    region: Arc<Region>,
    remotes: Arc<Remotes>,
    ports: Vec<Port>,
    kernels: Vec<Kernel>,
    book: MacBook,
    scratch: Vec<u8>,
}

impl Rig {
    /// `n` ports, each with a TX ring of `tx[i]` entries; every chunk's frame area
    /// starts as the template.
    fn new(tx: &[u32]) -> Rig {
        let region = test_region();
        let remotes = Remotes::new(tx.len());
        let mut ports = Vec::new();
        let mut kernels = Vec::new();
        for (i, &t) in tx.iter().enumerate() {
            let pool = PoolOwner::new(
                &region,
                PoolConfig {
                    id: i as u32,
                    ..PoolConfig::default()
                },
            );
            remotes.set(i, pool.remote());
            let mut port = Port::new(i, pool, rings(64, 64), 64);
            stamp(&mut port, i as u8);
            let (io, k) = heap_socket(&region, t);
            port.attach(io);
            ports.push(port);
            kernels.push(k);
        }
        let mut book = MacBook::new(tx.len());
        for i in 0..tx.len() {
            book.set_device(i, [2, 0, 0, 0, 0xd0, i as u8]);
        }
        Rig {
            region,
            remotes,
            ports,
            kernels,
            book,
            scratch: vec![0; CHUNK as usize],
        }
    }

    /// Port `p` receives `n` frames; each goes through `v`; frames for other ports are
    /// routed to them as a worker routes them within itself, and every port transmits.
    /// Returns the frames the kernel sent.
    fn receive(&mut self, p: usize, n: usize, v: Verdict) -> Vec<XdpDesc> {
        let (sent, descs) = self.take(p, n);
        self.act(p, &descs, v);
        for port in &mut self.ports {
            port.transmit(&self.remotes);
        }
        sent
    }

    /// The kernel delivers `n` frames to port `p` and the port takes them: (what the
    /// kernel sent, the RX descs taken).
    fn take(&mut self, p: usize, n: usize) -> (Vec<XdpDesc>, Vec<XdpDesc>) {
        self.ports[p].refill();
        let sent = self.kernels[p].deliver(n);
        let mut descs = vec![XdpDesc::default(); n];
        let got = self.ports[p].receive(&mut descs);
        assert_eq!(got, sent.len());
        descs.truncate(got);
        (sent, descs)
    }

    /// Each of `descs` (taken by port `p`) goes through `v`; frames for other ports
    /// are offered to their queues. Returns what each queue said (taken or not).
    fn act(&mut self, p: usize, descs: &[XdpDesc], v: Verdict) -> Vec<bool> {
        let mut out: Vec<(PortId, Egress)> = Vec::new();
        let mut missed = false;
        for &d in descs {
            let frame = self.ports[p]
                .pool
                .take_rx(d.addr, d.len)
                .expect("a frame we filled");
            self.ports[p].c.rx_packets += 1;
            let mut cx =
                self.ports[p].act_ctx(&mut out, &mut self.scratch, 128, &self.book, &mut missed);
            apply_act(v.act(), v.mirror_to(), frame, d, &mut cx);
        }
        out.into_iter()
            .map(|(to, e)| self.ports[to].queue_foreign(e, &self.remotes))
            .collect()
    }

    fn bytes(&self, d: &XdpDesc) -> Vec<u8> {
        peek(&self.region, d)
    }

    fn accounting_exact(&self) {
        // The owner caches' lengths are the second source `cached` is checked against.
        self.ports.iter().for_each(|p| p.pool.publish_stats());
        let a = self.region.accounting();
        a.check().unwrap();
        assert_eq!(a.total, FRAMES as u64);
    }
}

/// Port `i` of `rig` (named `name`) taken out as a lane of its own with one `l2fwd`
/// rule, spinning: (the lane, its kernel side, its shared state).
fn l2fwd_lane(
    rig: &mut Rig,
    i: usize,
    name: &str,
) -> (super::lane::Lane, Kernel, Arc<super::shared::PortShared>) {
    use super::shared::{PortShared, Waker};
    let port = rig.ports.remove(i);
    let kernel = rig.kernels.remove(i);
    let shared = PortShared::new(i, name, "x", 0, None, 8, Waker::new().unwrap());
    let rules = vec![crate::config::ValidRule::every(
        crate::config::Action::L2fwd,
        i,
        None,
    )];
    let spec = super::LaneSpec {
        socket: i,
        port: i,
        queue_pos: 0,
        rules: super::rules::RuleSlot::new(0, super::classify::Classifier::new(rules)),
        rings: rings(64, 64),
    };
    let lane = super::lane::Lane::new(port, shared.clone(), spec, crate::config::WaitMode::Spin);
    (lane, kernel, shared)
}

/// Writes the template into every chunk this pool can hand out (allocate all,
/// write, recycle), so frames "received" carry known bytes.
/// A worker of one lane, unpinned, batch 64, the worker tests' settings.
fn one_lane_spec(lane: super::LaneSpec, mode: crate::config::WaitMode) -> super::WorkerSpec {
    super::WorkerSpec {
        core: None,
        batch: 64,
        mode,
        lanes: vec![lane],
        hold_frames: 0,
        copybreak_bytes: 128,
        busy_poll_budget: 64,
        poll_coalesce: std::time::Duration::ZERO,
        shed: false,
        stop_on_handler_panic: false,
    }
}

/// A worker of one lane (socket 0 of port `name`), every frame to `action`, waiting
/// as `mode`; its socket is the caller's to start.
fn one_rule_worker(
    name: &str,
    action: crate::config::Action,
    mode: crate::config::WaitMode,
) -> (Arc<Region>, Arc<super::Fabric>, super::Worker<()>) {
    one_rule_worker_napping(name, action, mode, std::time::Duration::ZERO)
}

/// [`one_rule_worker`] with `workers.poll_coalesce_us` = `nap`.
fn one_rule_worker_napping(
    name: &str,
    action: crate::config::Action,
    mode: crate::config::WaitMode,
    nap: std::time::Duration,
) -> (Arc<Region>, Arc<super::Fabric>, super::Worker<()>) {
    use super::shared::{PortShared, Waker};
    let region = test_region();
    let sockets = vec![PortShared::new(
        0,
        name,
        "a",
        0,
        None,
        8,
        Waker::new().unwrap(),
    )];
    let fabric = test_fabric(sockets);
    let rule = crate::config::ValidRule::every(action, 0, None);
    let lane = super::LaneSpec {
        socket: 0,
        port: 0,
        queue_pos: 0,
        rules: super::rules::RuleSlot::new(0, super::classify::Classifier::new(vec![rule])),
        rings: rings(64, 64),
    };
    let spec = super::WorkerSpec {
        poll_coalesce: nap,
        ..one_lane_spec(lane, mode)
    };
    let w = super::Worker::new(&region, spec, fabric.clone(), Arc::new(()));
    (region, fabric, w)
}

fn stamp(port: &mut Port, tag: u8) {
    let region = port.region().clone();
    let mut frames = Vec::new();
    for _ in 0..40 {
        let Some(mut f) = port.pool.alloc() else {
            break;
        };
        region
            .write_frame(&mut f, HEADROOM as u32, &template(tag))
            .unwrap();
        frames.push(f);
    }
    for f in frames {
        port.pool.recycle(f);
    }
}

/// The bytes a descriptor names (the test plays the kernel, which reads any chunk).
fn peek(region: &Arc<Region>, d: &XdpDesc) -> Vec<u8> {
    assert!(d.addr + d.len as u64 <= region.len() as u64);
    // SAFETY: the region is mapped for as long as `region` lives and the range was
    // just checked to lie inside it; this single-threaded test writes no frame while
    // the copy is taken.
    unsafe { std::slice::from_raw_parts(region.as_ptr().add(d.addr as usize), d.len as usize) }
        .to_vec()
}

fn multiset(descs: &[XdpDesc]) -> BTreeMap<(u64, u32), usize> {
    let mut m = BTreeMap::new();
    for d in descs {
        *m.entry((d.addr, d.len)).or_insert(0) += 1;
    }
    m
}

fn fwd(to: PortIx, mac: MacRewrite, mirror_to: Option<PortIx>) -> Verdict {
    Verdict::new(Act::Forward { to, mac }, mirror_to)
}

#[test]
fn forward_moves_the_descriptor_and_returns_the_frame_through_the_origin_ring() {
    let mut rig = Rig::new(&[64, 64]);
    let sent = rig.receive(0, 32, fwd(1, MacRewrite::Swap, None));
    let out = rig.kernels[1].send();
    // Descriptors out = descriptors in: the same chunks, the same lengths, once each.
    assert_eq!(multiset(&out), multiset(&sent));
    for d in &out {
        let b = rig.bytes(d);
        assert_eq!(
            &b[..12],
            &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1],
            "MACs swapped"
        );
        assert_eq!(b[50], 0, "payload of port 0's frames");
    }
    assert_eq!(
        (
            rig.ports[0].c.forwarded,
            rig.ports[1].c.tx_packets,
            rig.ports[1].c.foreign_tx
        ),
        (32, 32, 32)
    );
    assert_eq!(
        rig.ports[0].c.tx_packets, 0,
        "nothing on the ingress TX ring"
    );
    let ring_before = rig.ports[0].pool.stats().recycle_ring;
    rig.kernels[1].complete(&out);
    assert_eq!(rig.ports[1].reap(&rig.remotes), 32);
    assert_eq!(
        (
            rig.ports[1].c.tx_completed,
            rig.ports[1].c.foreign_completed,
            rig.ports[1].c.completion_rejected
        ),
        (32, 32, 0)
    );
    // Back in port 0's pool through its return ring, not port 1's cache.
    assert_eq!(rig.ports[0].pool.stats().recycle_ring - ring_before, 32);
    assert_eq!(
        rig.ports[1].pool.stats().recycle_cached,
        rig.ports[1].pool.stats().recycle_cached
    );
    assert_eq!(rig.region.accounting().ring, 32);
    rig.accounting_exact();
    // Port 0 takes them back on refill.
    rig.ports[0].refill();
    assert!(rig.ports[0].pool.stats().alloc_refill > 0);
    rig.accounting_exact();
}

#[test]
fn forward_with_neighbour_and_fixed_macs_and_a_missing_next_hop() {
    let mut rig = Rig::new(&[64, 64]);
    rig.book
        .set_next_hop(1, "198.18.2.1".parse().unwrap(), [2, 0, 0, 0, 0xbb, 1]);
    rig.receive(0, 8, fwd(1, MacRewrite::Neigh, None));
    let out = rig.kernels[1].send();
    assert_eq!(out.len(), 8);
    for d in &out {
        assert_eq!(
            &rig.bytes(d)[..12],
            &[2, 0, 0, 0, 0xbb, 1, 2, 0, 0, 0, 0xd0, 1],
            "dst: next hop, src: egress device"
        );
    }
    rig.receive(0, 4, fwd(1, MacRewrite::Fixed([2, 0, 0, 0, 0xcc, 9]), None));
    let out2 = rig.kernels[1].send();
    assert_eq!(out2.len(), 4);
    assert_eq!(
        &rig.bytes(&out2[0])[..12],
        &[2, 0, 0, 0, 0xcc, 9, 2, 0, 0, 0, 0xd0, 1]
    );
    // No next hop for the destination: dropped, counted, back in the pool.
    rig.book = MacBook::new(2);
    rig.receive(0, 5, fwd(1, MacRewrite::Neigh, None));
    assert!(rig.kernels[1].send().is_empty());
    assert_eq!(
        (rig.ports[0].c.neigh_miss_drop, rig.ports[0].c.forwarded),
        (5, 12)
    );
    // A fixed next hop, but the egress device's own MAC unknown: the same.
    rig.receive(0, 3, fwd(1, MacRewrite::Fixed([2, 0, 0, 0, 0xcc, 9]), None));
    assert!(rig.kernels[1].send().is_empty());
    assert_eq!(
        (
            rig.ports[0].c.neigh_miss_drop,
            rig.ports[0].c.forwarded,
            rig.ports[0].c.rx_rejected
        ),
        (8, 12, 0)
    );
    rig.kernels[1].complete(&out);
    rig.kernels[1].complete(&out2);
    rig.ports[1].reap(&rig.remotes);
    rig.accounting_exact();
    assert_eq!(rig.region.accounting().application, 0);
}

#[test]
fn mirror_to_sends_one_reference_on_each_port_and_the_chunk_returns_once() {
    let mut rig = Rig::new(&[64, 64, 64]);
    let sent = rig.receive(0, 16, fwd(1, MacRewrite::Swap, Some(2)));
    let (out, mon) = (rig.kernels[1].send(), rig.kernels[2].send());
    assert_eq!(multiset(&out), multiset(&sent));
    assert_eq!(
        multiset(&mon),
        multiset(&sent),
        "the mirror carries the same chunks (by reference, no copy)"
    );
    assert_eq!(
        (rig.ports[0].c.forwarded, rig.ports[0].c.mirrored),
        (16, 16)
    );
    let ring0 = rig.ports[0].pool.stats().recycle_ring;
    // The mirror completes first: the chunk stays out (one reference left).
    rig.kernels[2].complete(&mon);
    rig.ports[2].reap(&rig.remotes);
    assert_eq!(rig.ports[0].pool.stats().recycle_ring, ring0);
    assert_eq!(rig.region.accounting().application, 16);
    rig.kernels[1].complete(&out);
    rig.ports[1].reap(&rig.remotes);
    assert_eq!(
        rig.ports[0].pool.stats().recycle_ring - ring0,
        16,
        "each chunk back once"
    );
    assert_eq!(rig.region.accounting().application, 0);
    rig.accounting_exact();
}

#[test]
fn own_port_actions_l2fwd_reflect_twice_copybreak_drop_and_a_drop_mirror() {
    let mut rig = Rig::new(&[256, 64]);
    let sent = rig.receive(0, 8, Verdict::new(Act::L2fwd, None));
    let out = rig.kernels[0].send();
    assert_eq!(multiset(&out), multiset(&sent));
    rig.kernels[0].complete(&out);
    let sent = rig.receive(0, 8, Verdict::new(Act::ReflectTwice, None));
    let out = rig.kernels[0].send();
    assert_eq!(out.len(), 16);
    assert!(
        multiset(&out)
            .iter()
            .all(|(k, n)| *n == 2 && multiset(&sent).contains_key(k)),
        "each chunk queued twice"
    );
    rig.kernels[0].complete(&out);
    // Copybreak: 60 bytes <= 128 copied into frags; the copies leave, the RX chunks don't.
    let sent = rig.receive(0, 8, Verdict::new(Act::Copybreak, None));
    let out = rig.kernels[0].send();
    assert_eq!(out.len(), 8);
    let chunks: std::collections::BTreeSet<u64> =
        out.iter().map(|d| d.addr / CHUNK as u64).collect();
    assert_eq!(chunks.len(), 1, "eight 60-byte copies packed in one chunk");
    assert_eq!(sent.len(), 8);
    assert!(out.iter().all(|d| rig.bytes(d)[50] == 0), "payload copied");
    rig.kernels[0].complete(&out);
    rig.receive(0, 8, Verdict::new(Act::Drop, None));
    // Drop with a mirror: the unchanged frame leaves the mirror port only.
    let sent = rig.receive(0, 4, Verdict::new(Act::Drop, Some(1)));
    let mon = rig.kernels[1].send();
    assert_eq!(multiset(&mon), multiset(&sent));
    assert_eq!(
        &rig.bytes(&mon[0])[..12],
        &template(0)[..12],
        "a mirrored drop is not rewritten"
    );
    rig.kernels[1].complete(&mon);
    rig.ports[1].reap(&rig.remotes);
    rig.ports[0].reap(&rig.remotes);
    let c = rig.ports[0].c;
    assert_eq!(
        (
            c.reflected_twice,
            c.copybreak_copied,
            c.action_drop,
            c.mirrored
        ),
        (8, 8, 12, 4)
    );
    assert_eq!(
        (
            c.tx_packets,
            c.tx_completed,
            c.completion_rejected,
            c.rx_rejected
        ),
        (8 + 16 + 8, 32, 0, 0)
    );
    rig.accounting_exact();
    // The chunk copybreak packs into stays open (the pool's frag cursor) until drained.
    rig.ports[0].pool.frag_drain();
    assert_eq!(
        rig.region.accounting().tx + rig.region.accounting().application,
        0
    );
}

#[test]
fn a_full_tx_ring_gives_the_rest_back_to_its_pool_counted() {
    let mut rig = Rig::new(&[64, 16]);
    let sent = rig.receive(0, 40, fwd(1, MacRewrite::Swap, None));
    let out = rig.kernels[1].send();
    assert_eq!(out.len(), 16, "the ring took what fit");
    assert_eq!(rig.ports[1].c.tx_ring_full_drop, 24);
    assert_eq!(rig.ports[0].c.forwarded, 40);
    // The 24 are back in port 0's pool (return ring), the 16 out: nothing lost.
    assert_eq!(rig.region.accounting().application, 16);
    assert_eq!(sent.len(), 40);
    rig.kernels[1].complete(&out);
    rig.ports[1].reap(&rig.remotes);
    assert_eq!(rig.region.accounting().application, 0);
    rig.accounting_exact();
}

#[test]
fn a_port_gone_mid_batch_returns_everything_once() {
    let mut rig = Rig::new(&[64, 64]);
    // Port 1 has frames of port 0 in its TX ring, sent but not completed...
    rig.receive(0, 20, fwd(1, MacRewrite::Swap, None));
    let in_flight = rig.kernels[1].send();
    assert_eq!(in_flight.len(), 20);
    // ...and 10 more queued when its device goes: it drains and closes.
    let mut descs = vec![XdpDesc::default(); 10];
    rig.ports[0].refill();
    rig.kernels[0].deliver(10);
    let n = rig.ports[0].receive(&mut descs);
    let io = rig.ports[1].detach(&rig.remotes);
    assert!(io.is_some());
    drop(io);
    // The close audited port 1's pool against its rings (port 0's 20 frames in its
    // TX ring are port 0's pool's, not counted as its own).
    assert_eq!(
        (
            rig.ports[1].c.teardown_audits,
            rig.ports[1].c.teardown_audit_failures
        ),
        (1, 0)
    );
    assert!(rig
        .act(0, &descs[..n], fwd(1, MacRewrite::Swap, None))
        .iter()
        .all(|&taken| !taken));
    assert_eq!(rig.ports[1].c.egress_port_down_drop, 10);
    // The kernel can no longer touch the closed socket's rings: reclaim.
    // Its own fill frames (64) and port 0's 20 frames in its TX ring.
    assert_eq!(rig.ports[1].reclaim(&rig.remotes), 64 + 20);
    assert_eq!(rig.ports[1].c.foreign_reclaimed, 20);
    assert_eq!(
        (
            rig.ports[1].c.teardown_audits,
            rig.ports[1].c.teardown_audit_failures
        ),
        (2, 0)
    );
    assert_eq!(
        rig.region.accounting().application,
        0,
        "every frame back with port 0"
    );
    rig.accounting_exact();
    // Port 0 keeps working; port 1 comes back on a new socket.
    let (io, k) = heap_socket(&rig.region, 64);
    rig.ports[1].attach(io);
    rig.kernels[1] = k;
    let sent = rig.receive(0, 8, fwd(1, MacRewrite::Swap, None));
    assert_eq!(multiset(&rig.kernels[1].send()), multiset(&sent));
}

/// Issue 15, two lanes on one worker: a lane routes frames onto the TX queue of the
/// worker's other lane (port 1), and that lane's socket is given up in the same pass,
/// before its own step would have put them on the ring (the worker serves lane by
/// lane: hand-over requests first, then the step). What never reached the ring is
/// given back at the close, counted, so nothing of the old socket is sent on the
/// next one: no completion of the new socket is refused, and every frame comes back
/// once.
#[test]
fn frames_queued_for_a_socket_given_up_before_they_reach_its_ring_go_back_at_the_close() {
    let mut rig = Rig::new(&[64, 64]);
    // Port 1 has 20 of port 0's frames on its TX ring, sent, not completed.
    rig.receive(0, 20, fwd(1, MacRewrite::Swap, None));
    assert_eq!(rig.kernels[1].send().len(), 20);
    // Port 0's lane forwards 12 more: on port 1's TX queue, not yet on its ring.
    let (_, descs) = rig.take(0, 12);
    assert_eq!(descs.len(), 12);
    let taken = rig.act(0, &descs, fwd(1, MacRewrite::Swap, None));
    assert_eq!(taken, vec![true; 12]);
    assert_eq!(rig.ports[1].queued(), 12);
    // Port 1's device goes: its socket is given up before its next transmit.
    let io = rig.ports[1].detach(&rig.remotes);
    assert!(io.is_some());
    drop(io);
    let queued_after_close = rig.ports[1].queued();
    // The kernel can no longer touch the closed socket's rings: reclaim.
    let reclaimed = rig.ports[1].reclaim(&rig.remotes);
    let accounting_after_reclaim = rig.region.accounting();
    // A new socket, and the lane's next step: what it sends, the kernel completes.
    let (io, k) = heap_socket(&rig.region, 64);
    rig.ports[1].attach(io);
    rig.kernels[1] = k;
    rig.ports[1].transmit(&rig.remotes);
    let stale = rig.kernels[1].send();
    rig.kernels[1].complete(&stale);
    rig.ports[1].reap(&rig.remotes);
    assert_eq!(
        rig.ports[1].c.completion_rejected, 0,
        "completions of the new socket refused (frames queued for the old one, sent on it)"
    );
    assert!(
        stale.is_empty(),
        "the new socket sent {} descriptors queued for the old one",
        stale.len()
    );
    assert_eq!(
        queued_after_close, 0,
        "nothing of the closed socket stays queued"
    );
    assert_eq!(
        rig.ports[1].c.egress_port_down_drop, 12,
        "the 12 never on the ring: back at the close, counted"
    );
    assert_eq!(
        (
            rig.ports[1].c.teardown_audits,
            rig.ports[1].c.teardown_audit_failures
        ),
        (2, 0)
    );
    // The reclaim took its fill frames and the 20 on the old ring; nothing else.
    assert_eq!(reclaimed, 64 + 20);
    assert_eq!(rig.ports[1].c.foreign_reclaimed, 20);
    assert_eq!(
        accounting_after_reclaim.application, 0,
        "every frame back with port 0: {accounting_after_reclaim:?}"
    );
    rig.accounting_exact();
    // It forwards again, and every completion is one of its own sends.
    let sent = rig.receive(0, 8, fwd(1, MacRewrite::Swap, None));
    let out = rig.kernels[1].send();
    assert_eq!(multiset(&out), multiset(&sent));
    rig.kernels[1].complete(&out);
    assert_eq!(rig.ports[1].reap(&rig.remotes), 8);
    let c = rig.ports[1].c;
    assert_eq!(
        (c.completion_rejected, c.foreign_tx, c.foreign_completed),
        (0, 20 + 8, 8)
    );
    assert_eq!(rig.region.accounting().application, 0);
    rig.accounting_exact();
}

/// Issue 16's teardown audit on the Port: a socket given up (the worker's
/// `Lane::give_up`, then `Lane::reclaim`) with its own frames in its TX ring, some
/// completed, and another port's frames in it too passes both audits (at the close:
/// the owner map against the rings' own positions; after the reclaim: nothing of the
/// pool left in a fill or TX ring). A frame lost between the pool and the fill ring
/// fails the close's audit, counted, and the control thread is told.
#[test]
fn port_teardown_audits_its_pool_and_a_frame_lost_there_fails_it() {
    use std::sync::atomic::Ordering;
    let mut rig = Rig::new(&[64, 64]);
    // Port 1: 12 of its own frames sent back out (l2fwd), 4 of them completed...
    rig.receive(1, 12, Verdict::new(Act::L2fwd, None));
    let own = rig.kernels[1].send();
    assert_eq!(own.len(), 12);
    rig.kernels[1].complete(&own[..4]);
    rig.ports[1].reap(&rig.remotes);
    // ...and 8 of port 0's frames in its TX ring, not completed.
    rig.receive(0, 8, fwd(1, MacRewrite::Swap, None));
    assert_eq!(rig.kernels[1].send().len(), 8);
    let (mut lane, _kernel, shared) = l2fwd_lane(&mut rig, 1, "out");
    lane.give_up(&rig.remotes);
    assert_eq!(
        (
            lane.port.c.teardown_audits,
            lane.port.c.teardown_audit_failures
        ),
        (1, 0)
    );
    lane.reclaim(&rig.remotes);
    assert_eq!(
        (
            lane.port.c.teardown_audits,
            lane.port.c.teardown_audit_failures
        ),
        (2, 0)
    );
    // 52 fill frames (64 less the 12 received), 8 own TX frames not completed, 8 of
    // port 0's.
    assert_eq!(lane.port.c.reclaimed, 52 + 8 + 8);
    assert!(!shared.teardown_audit_failed.load(Ordering::SeqCst));

    // A new socket; one frame goes from the pool towards the fill ring and is lost
    // on the way (a bug): the map says the kernel holds it, the ring never got it.
    let (io, _kernel) = heap_socket(&rig.region, 64);
    lane.port.attach(io);
    let mut lost = [0u64; 1];
    assert_eq!(lane.port.pool.fill_bulk(&mut lost), 1);
    lane.give_up(&rig.remotes);
    assert_eq!(
        (
            lane.port.c.teardown_audits,
            lane.port.c.teardown_audit_failures
        ),
        (3, 1),
        "the close's audit sees the lost frame"
    );
    assert!(
        shared.teardown_audit_failed.load(Ordering::SeqCst),
        "the control thread is told"
    );
    // The reclaim takes it back by the owner map: nothing is left after it.
    lane.reclaim(&rig.remotes);
    assert_eq!(
        (
            lane.port.c.teardown_audits,
            lane.port.c.teardown_audit_failures
        ),
        (4, 1)
    );
    rig.ports.iter().for_each(|p| p.pool.publish_stats());
    lane.port.pool.publish_stats();
    rig.region.accounting().check().unwrap();
}

/// The kernel hands an RX descriptor naming a frame it gave us before and that is
/// now on our TX ring, not completed (igb in zero-copy did this under load in the
/// guest: docs/vm.md). The worker refuses it, counts it `rx_rejected`, and the
/// close's audit allows for the RX slot it took (the kernel still holds the fill
/// frame the ring positions count as returned): no audit failure, every frame back.
#[test]
fn an_rx_descriptor_naming_a_frame_on_our_tx_ring_is_refused_and_the_audit_holds() {
    let mut rig = Rig::new(&[64]);
    rig.receive(0, 8, Verdict::new(Act::L2fwd, None));
    let sent = rig.kernels[0].send();
    assert_eq!(sent.len(), 8);
    // The same frame again, as a received one.
    assert_eq!(rig.kernels[0].rx.produce(&[sent[3]]), 1);
    let (mut lane, _kernel, _) = l2fwd_lane(&mut rig, 0, "main");
    let mut got = [XdpDesc::default(); 4];
    assert_eq!(lane.port.receive(&mut got), 1);
    assert!(
        lane.take(got[0]).is_none(),
        "a frame on our TX ring is not taken again"
    );
    assert_eq!(lane.port.c.rx_rejected, 1);
    assert_eq!(lane.port.pool.stats().not_in_fill, 1);
    lane.give_up(&rig.remotes);
    assert_eq!(
        (
            lane.port.c.teardown_audits,
            lane.port.c.teardown_audit_failures
        ),
        (1, 0),
        "the close's audit allows for the refused descriptor's slot"
    );
    lane.reclaim(&rig.remotes);
    assert_eq!(lane.port.c.teardown_audit_failures, 0);
    // 56 fill frames (64 less the 8 received) and the 8 on the TX ring.
    assert_eq!(lane.port.c.reclaimed, 56 + 8);
    lane.port.pool.publish_stats();
    let a = rig.region.accounting();
    a.check().unwrap();
    assert_eq!((a.free, a.total), (FRAMES as u64, FRAMES as u64));
}

#[test]
fn a_chain_with_a_refused_buffer_is_dropped_whole() {
    let mut rig = Rig::new(&[64]);
    let (mut lane, kernel, _) = l2fwd_lane(&mut rig, 0, "main");
    lane.port.refill();
    let mut got = kernel.deliver(6);
    // Frame 1: three buffers, the middle one an address we never filled.
    got[0].options = XDP_PKT_CONTD;
    got[1] = XdpDesc {
        addr: 7 * CHUNK as u64 + HEADROOM + 100 * CHUNK as u64,
        len: LEN,
        options: XDP_PKT_CONTD,
    };
    // Frame 2: three good buffers.
    got[3].options = XDP_PKT_CONTD;
    got[4].options = XDP_PKT_CONTD;
    for d in &got {
        assert!(lane.in_chain(d) || d.options == 0);
        lane.chain_desc(*d, &rig.remotes);
    }
    // got[5] ends frame 2 but got[2] ended frame 1 (dropped whole).
    assert_eq!(
        (
            lane.port.c.rx_rejected,
            lane.port.c.rx_chain_dropped,
            lane.port.c.rx_multi_buffer
        ),
        (1, 1, 1)
    );
    lane.port.transmit(&rig.remotes);
    let out = kernel.send();
    assert_eq!(out.len(), 3, "the good chain leaves whole");
    assert_eq!(
        out.iter().map(|d| d.options).collect::<Vec<_>>(),
        [XDP_PKT_CONTD, XDP_PKT_CONTD, 0]
    );
    kernel.complete(&out);
    lane.port.reap(&rig.remotes);
    // The refused address was never ours; its fill entry stays with the kernel
    // sim (counted in fill), every other frame is back.
    lane.port.pool.publish_stats();
    let a = rig.region.accounting();
    a.check().unwrap();
    assert_eq!(a.tx + a.application, 0);
}

#[test]
fn a_worker_hands_frames_to_another_workers_queue_and_counts_a_full_one() {
    use super::shared::{PortShared, Waker};
    use super::{LaneSpec, Worker};
    let region = test_region();
    // Socket 0 (port 0) is ours; socket 1 (port 1) belongs to another worker whose
    // handoff queue holds 8.
    let (w0, w1) = (Waker::new().unwrap(), Waker::new().unwrap());
    let sockets = vec![
        PortShared::new(0, "in", "a", 0, None, 8, w0),
        PortShared::new(1, "out", "b", 0, None, 8, w1),
    ];
    sockets[1]
        .handover()
        .set_phase_for_test(super::handover::Phase::Running);
    let fabric = test_fabric(sockets);
    let rule = crate::config::ValidRule::every(crate::config::Action::Forward, 0, Some(1));
    let lane = LaneSpec {
        socket: 0,
        port: 0,
        queue_pos: 0,
        rules: super::rules::RuleSlot::new(0, super::classify::Classifier::new(vec![rule])),
        rings: rings(64, 64),
    };
    let spec = one_lane_spec(lane, crate::config::WaitMode::Spin);
    let mut w = Worker::new(&region, spec, fabric.clone(), Arc::new(()));
    stamp(&mut w.lanes[0].port, 0);
    let (io, kernel) = heap_socket(&region, 64);
    w.lanes[0].port.attach(io);
    // The budget sees 8 free slots in the other worker's queue: 8 taken.
    kernel.deliver(20);
    assert_eq!(w.receive(0), 8);
    assert_eq!(w.lanes[0].port.c.rx_limited_by_tx, 1);
    w.route(0, &fabric.remotes.clone());
    assert_eq!(fabric.sockets[1].inbound.len(), 8);
    // The queue fills behind the budget's back (a second producer): the next frames
    // go back to our pool, counted.
    let extra = fabric.sockets[1].inbound.pop().unwrap();
    assert_eq!(w.receive(0), 1);
    assert!(fabric.sockets[1].inbound.push(extra).is_ok());
    w.route(0, &fabric.remotes.clone());
    assert_eq!(w.lanes[0].port.c.egress_full_drop, 1);
    assert_eq!(w.lanes[0].port.c.forwarded, 9);
    // The other worker completes what it got: back to our pool through its ring.
    let before = w.lanes[0].port.pool.stats().recycle_ring;
    while let Some(e) = fabric.sockets[1].inbound.pop() {
        assert_eq!(e.origin, 0);
        assert!(fabric.remotes.release(e.origin, e.token));
    }
    assert_eq!(w.lanes[0].port.pool.stats().recycle_ring - before, 8);
    let a = region.accounting();
    a.check().unwrap();
    assert_eq!(a.application, 0, "every frame back: {a:?}");
}

/// One worker serving two lanes: socket 0 (port "in", forward to port 1) and socket
/// 1 (port "out", drop), each on a heap socket with a TX ring of 64.
fn two_lane_forward_worker() -> (
    Arc<Region>,
    Arc<super::Fabric>,
    super::Worker<()>,
    Kernel,
    Kernel,
) {
    use super::shared::{PortShared, Waker};
    use super::{LaneSpec, Worker};
    let region = test_region();
    let sockets = vec![
        PortShared::new(0, "in", "a", 0, None, 64, Waker::new().unwrap()),
        PortShared::new(1, "out", "b", 0, None, 64, Waker::new().unwrap()),
    ];
    let fabric = test_fabric(sockets);
    let rule = |action, port, to| crate::config::ValidRule::every(action, port, to);
    let lane = |socket: usize, r| LaneSpec {
        socket,
        port: socket,
        queue_pos: 0,
        rules: super::rules::RuleSlot::new(0, super::classify::Classifier::new(vec![r])),
        rings: rings(64, 64),
    };
    let mut spec = one_lane_spec(
        lane(0, rule(crate::config::Action::Forward, 0, Some(1))),
        crate::config::WaitMode::Spin,
    );
    spec.lanes
        .push(lane(1, rule(crate::config::Action::Drop, 1, None)));
    let mut w = Worker::new(&region, spec, fabric.clone(), Arc::new(()));
    stamp(&mut w.lanes[0].port, 0);
    let (io0, k0) = heap_socket(&region, 64);
    let (io1, k1) = heap_socket(&region, 64);
    w.lanes[0].port.attach(io0);
    w.lanes[1].port.attach(io1);
    assert!(!w.step(0) & !w.step(1), "nothing to do yet");
    (region, fabric, w, k0, k1)
}

/// A frame forwarded between two lanes of one worker comes back, once its egress
/// completed it, straight into its own pool's cache: not through the return ring
/// (the other pool's owner is this same thread), and into no other pool.
#[test]
fn a_frame_forwarded_within_one_worker_returns_to_its_pool_without_the_ring() {
    let (region, _fabric, mut w, k0, k1) = two_lane_forward_worker();
    let stats = |w: &super::Worker<()>, l: usize| w.lanes[l].port.pool.stats();
    let (ring0, cached0) = (stats(&w, 0).recycle_ring, stats(&w, 0).recycle_cached);
    let other = stats(&w, 1);

    assert_eq!(k0.deliver(16).len(), 16);
    assert!(w.step(0));
    assert_eq!(w.lanes[0].port.c.forwarded, 16);
    assert!(w.step(1));
    let sent = k1.send();
    assert_eq!(
        sent.len(),
        16,
        "out put every forwarded frame on its TX ring"
    );
    k1.complete(&sent);
    assert!(w.step(1));
    assert_eq!(w.lanes[1].port.c.foreign_completed, 16);

    // Back in `in`'s cache, not through its ring; `out`'s pool never saw them.
    assert_eq!(stats(&w, 0).recycle_ring, ring0);
    assert_eq!(stats(&w, 0).recycle_cached - cached0, 16);
    let after = stats(&w, 1);
    assert_eq!(
        (after.recycle_cached, after.recycle_ring, after.hold),
        (other.recycle_cached, other.recycle_ring, other.hold)
    );
    let a = region.accounting();
    a.check().unwrap();
    assert_eq!(a.application + a.tx, 0, "every frame back: {a:?}");
}

/// The origin's socket is gone (given up, its kernel frames reclaimed) while its
/// frames wait in the other lane's TX ring: their completions still go into its
/// pool, and the region's check at rest (nothing attached) finds them there,
/// counted, without anyone asking the pool for its statistics first.
#[test]
fn frames_completed_for_a_lane_whose_socket_is_gone_are_counted_in_its_cache() {
    let (region, fabric, mut w, k0, k1) = two_lane_forward_worker();
    assert_eq!(k0.deliver(16).len(), 16);
    assert!(w.step(0) & w.step(1));
    let sent = k1.send();
    assert_eq!(sent.len(), 16);
    // `in` goes away: detached, its fill ring's frames reclaimed.
    let remotes = fabric.remotes.clone();
    assert!(w.lanes[0].port.detach(&remotes).is_some());
    w.lanes[0].port.reclaim(&remotes);
    k1.complete(&sent);
    assert!(w.step(1));
    assert_eq!(w.lanes[1].port.c.foreign_completed, 16);
    // Then `out` too: every port down, the region at rest.
    assert!(w.lanes[1].port.detach(&remotes).is_some());
    w.lanes[1].port.reclaim(&remotes);
    let a = region.accounting();
    a.check().unwrap_or_else(|e| panic!("{e}: {a:?}"));
    assert_eq!(a.application + a.tx + a.fill, 0, "every frame back: {a:?}");
}

/// A shedding l2fwd worker (`tx_bottleneck = "shed"`) with `batch`, copy-mode rings
/// that let the kernel hold 128 frames (low below 64) and a TX ring of 64 that the
/// test's kernel drains only when told to.
fn shedding_l2fwd_worker(
    batch: usize,
) -> (Arc<Region>, Arc<super::Fabric>, super::Worker<()>, Kernel) {
    shedding_l2fwd_worker_mode(batch, rings(128, 128), false)
}

fn shedding_l2fwd_worker_mode(
    batch: usize,
    rings: PortRings,
    zero_copy: bool,
) -> (Arc<Region>, Arc<super::Fabric>, super::Worker<()>, Kernel) {
    use super::shared::{PortShared, Waker};
    use super::{LaneSpec, Worker, WorkerSpec};
    let region = test_region();
    let sockets = vec![PortShared::new(
        0,
        "main",
        "a",
        0,
        None,
        8,
        Waker::new().unwrap(),
    )];
    let fabric = test_fabric(sockets);
    let rule = crate::config::ValidRule::every(crate::config::Action::L2fwd, 0, None);
    let lane = LaneSpec {
        socket: 0,
        port: 0,
        queue_pos: 0,
        rules: super::rules::RuleSlot::new(0, super::classify::Classifier::new(vec![rule])),
        rings,
    };
    let spec = WorkerSpec {
        shed: true,
        stop_on_handler_panic: false,
        batch,
        ..one_lane_spec(lane, crate::config::WaitMode::Spin)
    };
    let mut w = Worker::new(&region, spec, fabric.clone(), Arc::new(()));
    stamp(&mut w.lanes[0].port, 3);
    let (io, kernel) = heap_socket_with(&region, 64, None, None, zero_copy);
    w.lanes[0].port.attach(io);
    (region, fabric, w, kernel)
}

fn fill_level(k: &Kernel) -> u32 {
    k.fill.producer().wrapping_sub(k.fill.consumer())
}

/// l2fwd with a TX ring the kernel does not drain: the worker first leaves frames in
/// the RX ring (back-pressure), and once they have drawn the fill ring below half
/// its target it takes a whole batch and drops what the TX ring cannot take, counted,
/// so the fill ring is stocked again instead of running empty in the kernel.
#[test]
fn a_tx_bottleneck_sheds_in_the_worker_once_the_fill_ring_runs_low() {
    let (region, fabric, mut w, kernel) = shedding_l2fwd_worker(64);
    let remotes = fabric.remotes.clone();
    assert_eq!(fill_level(&kernel), 128);
    // 64 frames fill the TX ring, which the kernel does not drain.
    kernel.deliver(64);
    assert_eq!(w.receive(0), 64);
    w.lanes[0].port.transmit(&remotes);
    w.lanes[0].port.refill();
    assert_eq!(fill_level(&kernel), 128);
    // 40 more: the fill ring still holds 88, so they wait in RX.
    kernel.deliver(40);
    assert_eq!(w.receive(0), 0);
    assert_eq!(
        (
            w.lanes[0].port.c.rx_limited_by_tx,
            w.lanes[0].port.c.rx_shed_passes
        ),
        (1, 0)
    );
    // 40 more: 48 left on the fill ring, below half. A whole batch is taken and
    // what TX has no room for is dropped by the worker.
    kernel.deliver(40);
    assert_eq!(w.receive(0), 64);
    assert_eq!(w.lanes[0].port.c.rx_shed_passes, 1);
    w.lanes[0].port.transmit(&remotes);
    assert_eq!(w.lanes[0].port.c.tx_ring_full_drop, 64);
    // Their chunks go straight back on the fill ring.
    w.lanes[0].port.refill();
    assert_eq!(fill_level(&kernel), 112, "48 left plus the 64 shed");
    // The kernel sends and completes; the last 16 are received and sent too.
    let sent = kernel.send();
    assert_eq!(sent.len(), 64);
    kernel.complete(&sent);
    w.lanes[0].port.reap(&remotes);
    assert_eq!(w.receive(0), 16);
    w.lanes[0].port.transmit(&remotes);
    let sent = kernel.send();
    kernel.complete(&sent);
    w.lanes[0].port.reap(&remotes);
    let c = w.lanes[0].port.c;
    assert_eq!(
        (
            c.rx_packets,
            c.tx_packets,
            c.tx_ring_full_drop,
            c.tx_completed
        ),
        (144, 80, 64, 80)
    );
    w.lanes[0].port.pool.publish_stats();
    let a = region.accounting();
    a.check().unwrap();
    assert_eq!(a.tx + a.application, 0, "every frame back: {a:?}");
}

/// With the whole fill ring handed over (`copy_fill = "full"`, fill 256 against an
/// RX ring of 64) the fill ring never runs low: frames waiting in RX make the kernel
/// drop at the full RX ring instead, so shedding starts once they fill more than
/// half of it.
#[test]
fn with_the_whole_fill_ring_a_tx_bottleneck_sheds_once_the_rx_ring_is_half_full() {
    let (_region, fabric, mut w, kernel) = shedding_l2fwd_worker_mode(64, rings(256, 64), false);
    let remotes = fabric.remotes.clone();
    assert_eq!(fill_level(&kernel), 256);
    // 64 frames fill the TX ring, which the kernel does not drain.
    kernel.deliver(64);
    assert_eq!(w.receive(0), 64);
    w.lanes[0].port.transmit(&remotes);
    w.lanes[0].port.refill();
    // 24 more wait in RX: under half of it, and the fill ring far from low.
    kernel.deliver(24);
    assert_eq!(w.receive(0), 0);
    assert_eq!(w.lanes[0].port.c.rx_shed_passes, 0);
    // 16 more: 40 waiting, over half the RX ring, while the fill ring still holds
    // 216 of 256. A whole batch is taken and what TX cannot take is dropped.
    kernel.deliver(16);
    assert_eq!(fill_level(&kernel), 216);
    assert_eq!(w.receive(0), 40);
    assert_eq!(w.lanes[0].port.c.rx_shed_passes, 1);
    w.lanes[0].port.transmit(&remotes);
    assert_eq!(w.lanes[0].port.c.tx_ring_full_drop, 40);
}

/// Zero-copy: the driver takes fill entries ahead of traffic, so frames taken from
/// the fill ring say nothing of the RX ring's backlog; with 40 frames in RX and the
/// fill ring above half, the worker holds (back-pressure) rather than sheds.
#[test]
fn in_zero_copy_only_a_low_fill_ring_starts_shedding() {
    let (_region, fabric, mut w, kernel) = shedding_l2fwd_worker_mode(64, rings(256, 64), true);
    let remotes = fabric.remotes.clone();
    kernel.deliver(64);
    assert_eq!(w.receive(0), 64);
    w.lanes[0].port.transmit(&remotes);
    w.lanes[0].port.refill();
    kernel.deliver(40);
    assert_eq!(fill_level(&kernel), 216);
    assert_eq!(w.receive(0), 0, "held in RX: the fill ring is not low");
    assert_eq!(
        (
            w.lanes[0].port.c.rx_limited_by_tx,
            w.lanes[0].port.c.rx_shed_passes
        ),
        (1, 0)
    );
}

/// One pass of a shedding worker takes batch after batch while the fill ring stays
/// low (up to SHED_BATCHES more), not one batch a pass: a `sendto()` between two
/// passes can take longer than a batch of arrivals.
#[test]
fn one_shedding_pass_takes_batches_until_the_fill_ring_is_no_longer_low() {
    let (region, fabric, mut w, kernel) = shedding_l2fwd_worker(32);
    let remotes = fabric.remotes.clone();
    // 64 frames fill the TX ring, which the kernel does not drain.
    kernel.deliver(64);
    assert_eq!(w.receive(0) + w.receive(0), 64);
    w.lanes[0].port.transmit(&remotes);
    w.lanes[0].port.refill();
    assert_eq!(fill_level(&kernel), 128);
    // 128 more: the fill ring is empty, all of them wait in RX.
    kernel.deliver(128);
    assert_eq!(fill_level(&kernel), 0);
    assert!(w.step(0));
    // Two batches of 32 shed in the one pass (the fill ring at 0, then at 32), then
    // the fill ring is back at half (64) and the rest wait.
    let c = w.lanes[0].port.c;
    assert_eq!(
        (c.rx_packets, c.rx_shed_passes, c.tx_ring_full_drop),
        (128, 2, 64)
    );
    assert_eq!(fill_level(&kernel), 64);
    // The kernel sends and completes; the worker's passes take the 64 still waiting.
    for _ in 0..8 {
        let sent = kernel.send();
        kernel.complete(&sent);
        w.step(0);
    }
    let c = w.lanes[0].port.c;
    assert_eq!(
        (
            c.rx_packets,
            c.tx_packets + c.tx_ring_full_drop,
            c.tx_completed
        ),
        (192, 192, 128)
    );
    w.lanes[0].port.pool.publish_stats();
    let a = region.accounting();
    a.check().unwrap();
    assert_eq!(a.tx + a.application, 0, "every frame back: {a:?}");
}

/// `xdpool capture` on a worker: only frames whose first match is the captured rule
/// are copied, the copy is the frame as received (before l2fwd swaps its MACs), a
/// full tap is counted, and every frame still goes on to its action.
#[test]
fn capture_copies_the_rules_frames_before_the_action_and_counts_a_full_tap() {
    use super::shared::{PortShared, Waker};
    use super::{LaneSpec, Worker};
    use crate::capture::{CaptureTap, Target};
    let region = test_region();
    let sockets = vec![PortShared::new(
        0,
        "in",
        "a",
        0,
        None,
        8,
        Waker::new().unwrap(),
    )];
    let tap = Arc::new(CaptureTap::with_capacity(8));
    let fabric = Arc::new(super::Fabric {
        sockets,
        port_sockets: vec![vec![0]],
        remotes: Remotes::new(1),
        neighbours: crate::neigh::Neighbours::new(MacBook::new(1)),
        capture: tap.clone(),
        file_capture: Default::default(),
        handler_failure: Default::default(),
        mailbox: Default::default(),
        stats_due: Default::default(),
    });
    let rule = |port: u16| crate::config::ValidRule {
        proto: Some(17),
        dst_port: Some((port, port)),
        dst: None,
        src_port: None,
        src: None,
        vlan: None,
        action: crate::config::Action::L2fwd,
        port: 0,
        to: None,
        mac: MacRewrite::Swap,
        mirror_to: None,
        call: None,
    };
    // The template goes to UDP port 9: rule 1 is its first match, rule 0 never matches.
    let lane = LaneSpec {
        socket: 0,
        port: 0,
        queue_pos: 0,
        rules: super::rules::RuleSlot::new(
            0,
            super::classify::Classifier::new(vec![rule(10), rule(9)]),
        ),
        rings: rings(64, 64),
    };
    let spec = one_lane_spec(lane, crate::config::WaitMode::Spin);
    let mut w = Worker::new(&region, spec, fabric.clone(), Arc::new(()));
    stamp(&mut w.lanes[0].port, 7);
    let (io, kernel) = heap_socket(&region, 64);
    w.lanes[0].port.attach(io);
    let remotes = fabric.remotes.clone();
    let round = |w: &mut Worker<()>, n: usize| {
        w.lanes[0].port.refill();
        kernel.deliver(n);
        assert_eq!(w.receive(0), n);
        w.lanes[0].port.transmit(&remotes);
        let sent = kernel.send();
        kernel.complete(&sent);
        w.lanes[0].port.reap(&remotes);
        sent
    };
    // Off: nothing copied.
    assert_eq!(round(&mut w, 4).len(), 4);
    // Rule 0 (port 10): no frame matches it first.
    tap.arm(
        Target {
            port: 0,
            rule_key: 0,
            snaplen: 2048,
        },
        8,
    );
    assert_eq!(round(&mut w, 4).len(), 4);
    assert!(tap.take().is_none());
    assert_eq!(
        (
            w.lanes[0].port.c.captured,
            w.lanes[0].port.c.capture_dropped
        ),
        (0, 0)
    );
    // Rule 1, snaplen 40: 8 records for 20 frames; 12 counted dropped; all 20 sent on.
    tap.arm(
        Target {
            port: 0,
            rule_key: 1,
            snaplen: 40,
        },
        8,
    );
    let sent = round(&mut w, 20);
    assert_eq!(sent.len(), 20, "every frame went on to l2fwd");
    assert_eq!(
        (
            w.lanes[0].port.c.captured,
            w.lanes[0].port.c.capture_dropped
        ),
        (8, 12)
    );
    let want = template(7);
    for d in &sent {
        let b = peek(&region, d);
        assert_eq!(
            &b[..6],
            &want[6..12],
            "l2fwd swapped the MACs of the frame sent"
        );
    }
    let recs: Vec<_> = std::iter::from_fn(|| tap.take()).collect();
    assert_eq!(recs.len(), 8);
    for r in &recs {
        assert_eq!((r.len, r.orig_len, r.socket), (40, LEN, 0));
        assert_eq!(r.bytes(), &want[..40], "the copy is the frame as received");
    }
    // Another port's capture: this worker copies nothing.
    for r in recs {
        tap.give_back(r);
    }
    tap.arm(
        Target {
            port: 1,
            rule_key: 1,
            snaplen: 40,
        },
        8,
    );
    round(&mut w, 4);
    assert_eq!(w.lanes[0].port.c.captured, 8);
    w.lanes[0].port.pool.publish_stats();
    region.accounting().check().unwrap();
}

/// A capture follows its rule's key through a reload that renumbers the list, and a
/// rule's `capture` file gets exactly that rule's frames (the frames still go on);
/// a complete file (count reached) gets no more copies.
#[test]
fn capture_follows_the_rule_key_across_a_renumbering_and_a_rule_file_gets_its_frames() {
    use super::shared::{PortShared, Waker};
    use super::{LaneSpec, Worker};
    use crate::capture::file::FileCaptures;
    use crate::capture::{CaptureTap, Target};
    use crate::worker::rules::{RuleSet, RuleSlot};
    let region = test_region();
    let sockets = vec![PortShared::new(
        0,
        "in",
        "a",
        0,
        None,
        8,
        Waker::new().unwrap(),
    )];
    let (tap, file_tap) = (
        Arc::new(CaptureTap::with_capacity(64)),
        Arc::new(CaptureTap::with_capacity(64)),
    );
    let fabric = Arc::new(super::Fabric {
        sockets,
        port_sockets: vec![vec![0]],
        remotes: Remotes::new(1),
        neighbours: crate::neigh::Neighbours::new(MacBook::new(1)),
        capture: tap.clone(),
        file_capture: file_tap.clone(),
        handler_failure: Default::default(),
        mailbox: Default::default(),
        stats_due: Default::default(),
    });
    let rule = |port: u16| crate::config::ValidRule {
        proto: Some(17),
        dst_port: Some((port, port)),
        dst: None,
        src_port: None,
        src: None,
        vlan: None,
        action: crate::config::Action::Drop,
        port: 0,
        to: None,
        mac: MacRewrite::Swap,
        mirror_to: None,
        call: None,
    };
    let classifier =
        |ports: &[u16]| super::classify::Classifier::new(ports.iter().map(|p| rule(*p)).collect());
    // The template goes to UDP port 9: the rule of key 6.
    let slot = RuleSlot::with_set(RuleSet::with_taps(
        0,
        classifier(&[10, 9]),
        vec![5, 6],
        vec![],
    ));
    let lane = LaneSpec {
        socket: 0,
        port: 0,
        queue_pos: 0,
        rules: slot.clone(),
        rings: rings(64, 64),
    };
    let spec = one_lane_spec(lane, crate::config::WaitMode::Spin);
    let mut w = Worker::new(&region, spec, fabric.clone(), Arc::new(()));
    stamp(&mut w.lanes[0].port, 7);
    let (io, kernel) = heap_socket(&region, 64);
    w.lanes[0].port.attach(io);
    let round = |w: &mut Worker<()>, n: usize| {
        w.lanes[0].refresh_rules();
        w.lanes[0].port.refill();
        kernel.deliver(n);
        assert_eq!(w.receive(0), n);
    };
    tap.arm(
        Target {
            port: 0,
            rule_key: 6,
            snaplen: 64,
        },
        64,
    );
    round(&mut w, 3);
    assert_eq!(
        w.lanes[0].port.c.captured, 3,
        "key 6 is the rule at position 1"
    );
    // Reloaded, renumbered: the port-9 rule is first now and keeps key 6; it also
    // writes to a file (count 5); the other rule (key 5) is the client's no longer.
    let dir = tempfile::tempdir().unwrap();
    let files = FileCaptures::start(
        file_tap.clone(),
        vec![crate::capture::wire::Interface {
            socket: 0,
            name: "in/a/q0".into(),
        }],
    );
    let spec5 = crate::config::CaptureSpec {
        file: dir.path().join("r.pcapng"),
        snaplen: 32,
        count: 5,
    };
    let sinks = files.prepare(&[Some(spec5), None]).unwrap();
    files.settle(&sinks.iter().flatten().cloned().collect::<Vec<_>>());
    slot.publish(Arc::new(RuleSet::with_taps(
        0,
        classifier(&[9, 10]),
        vec![6, 5],
        sinks.clone(),
    )));
    round(&mut w, 4);
    assert_eq!(
        w.lanes[0].port.c.captured, 7,
        "the capture followed key 6 to position 0"
    );
    assert_eq!(w.lanes[0].port.c.file_captured, 4);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    round(&mut w, 4);
    while !sinks[0].as_ref().unwrap().done() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(sinks[0].as_ref().unwrap().done(), "count 5 reached");
    let copied = w.lanes[0].port.c.file_captured;
    assert_eq!(copied, 5, "exactly its count copied");
    round(&mut w, 4);
    assert_eq!(
        w.lanes[0].port.c.file_captured, copied,
        "a complete file gets no more copies"
    );
    assert_eq!(
        w.lanes[0].port.c.action_drop, 15,
        "every frame went on to its action"
    );
    assert_eq!(w.lanes[0].port.c.file_capture_dropped, 0);
    files.finish();
    let mut r = pcap_file::pcapng::PcapNgReader::new(
        std::fs::File::open(dir.path().join("r.pcapng")).unwrap(),
    )
    .unwrap();
    let mut n = 0;
    while let Some(b) = r.next_block() {
        if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
            assert_eq!((p.original_len, &p.data[..]), (LEN, &template(7)[..32]));
            n += 1;
        }
    }
    assert_eq!(n, 5, "the file holds its count");
    w.lanes[0].port.pool.publish_stats();
}

/// Busy-poll: polls count as served only on a socket with a NAPI id and only when
/// the next pass finds frames; without a NAPI id the lane falls back to poll().
#[test]
fn busy_poll_counts_polls_the_napi_served_and_falls_back_without_one() {
    use crate::config::WaitMode;
    for napi in [Some(7), None] {
        let (region, _fabric, mut w) =
            one_rule_worker("in", crate::config::Action::Drop, WaitMode::BusyPoll);
        let (io, kernel) = heap_socket_napi(&region, 64, napi);
        w.lanes[0].start(io, 64, WaitMode::BusyPoll);
        // Nothing yet: a busy poll, not served (and the NAPI id is not known yet).
        assert!(!w.step(0));
        // First frames: the NAPI id is read; the poll before them is not counted.
        kernel.deliver(10);
        assert!(w.step(0));
        // Empty pass (a poll), then frames: served once. Twice more.
        for _ in 0..3 {
            assert!(!w.step(0));
            kernel.deliver(5);
            assert!(w.step(0));
        }
        // A pass with frames that followed a pass with frames (no poll between).
        kernel.deliver(5);
        assert!(w.step(0));
        let c = &w.lanes[0].port.c;
        assert_eq!(c.busy_poll_sockets, 1);
        assert_eq!(c.rx_packets, 30);
        match napi {
            Some(_) => {
                assert_eq!(
                    (
                        c.busy_poll_napi,
                        c.busy_poll_no_napi,
                        c.busy_poll_served,
                        c.busy_poll_calls
                    ),
                    (1, 0, 3, 4)
                );
                assert_eq!(w.lanes[0].wait, WaitMode::BusyPoll);
            }
            None => {
                assert_eq!(
                    (
                        c.busy_poll_napi,
                        c.busy_poll_no_napi,
                        c.busy_poll_served,
                        c.busy_poll_calls
                    ),
                    (0, 1, 0, 1)
                );
                assert_eq!(w.lanes[0].wait, WaitMode::Poll);
            }
        }
    }
}

/// The worker reads its sockets' kernel counters when the control loop moves
/// `Fabric::stats_due` on (not by a clock of its own), and at a forced publish.
#[test]
fn kernel_counters_are_read_when_the_control_loop_says_they_are_due() {
    use crate::config::WaitMode;
    use std::sync::atomic::Ordering;
    let (region, fabric, mut w) =
        one_rule_worker("in", crate::config::Action::Drop, WaitMode::Spin);
    let stats = crate::xsk::XdpStatistics {
        rx_ring_full: 7,
        ..Default::default()
    };
    let (io, _kernel) = heap_socket_with(&region, 64, None, Some(stats), false);
    w.lanes[0].start(io, 64, WaitMode::Spin);
    let read = |w: &super::Worker<()>| w.lanes[0].shared.xsk_stats.lock().unwrap().rx_ring_full;
    w.publish(false);
    assert_eq!(read(&w), 0, "not due yet");
    fabric.stats_due.fetch_add(1, Ordering::Relaxed);
    w.publish(false);
    assert_eq!(read(&w), 7, "due");
    *w.lanes[0].shared.xsk_stats.lock().unwrap() = Default::default();
    w.publish(false);
    assert_eq!(read(&w), 0, "read once for each move");
    w.publish(true);
    assert_eq!(read(&w), 7, "forced");
}

/// `wakeups` counts every wake-up system call; `tx_wakeups` the TX ring's alone, and
/// only when the kernel asks (or busy-poll forces it).
#[test]
fn tx_wakeups_count_the_tx_rings_sendto_calls_only() {
    let mut rig = Rig::new(&[64]);
    rig.receive(0, 4, Verdict::new(Act::L2fwd, None));
    let counts = |rig: &Rig| (rig.ports[0].c.wakeups, rig.ports[0].c.tx_wakeups);
    assert!(rig.ports[0].kick_tx(false));
    assert_eq!(counts(&rig), (0, 0), "the kernel does not ask");
    rig.kernels[0].tx.set_need_wakeup(true);
    assert!(rig.ports[0].kick_tx(false));
    assert!(rig.ports[0].kick_tx(true));
    assert!(rig.ports[0].kick_rx(true));
    assert_eq!(counts(&rig), (3, 2));
}

/// An idle port whose kernel keeps asking for an RX wake-up (virtio-net in zero-copy
/// sets the fill ring's flag while its RX queue is full of buffers) is kicked less
/// and less often, down to one pass in 2^6; a pass with frames kicks at once and
/// ends the back-off.
#[test]
fn rx_wakeups_back_off_on_an_idle_port_and_resume_with_frames() {
    use crate::config::WaitMode;
    let (region, _fabric, mut w) =
        one_rule_worker("out", crate::config::Action::Drop, WaitMode::Spin);
    let (io, kernel) = heap_socket(&region, 64);
    kernel.fill.set_need_wakeup(true);
    w.lanes[0].start(io, 64, WaitMode::Spin);
    let wakeups = |w: &super::Worker<()>| w.lanes[0].port.c.wakeups;
    let mut at = Vec::new();
    for pass in 1..=300u32 {
        let before = wakeups(&w);
        w.step(0);
        if wakeups(&w) != before {
            at.push(pass);
        }
    }
    // 1, 2, then doubling gaps up to 64 passes.
    assert_eq!(at, [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]);
    kernel.deliver(4);
    let before = wakeups(&w);
    w.step(0);
    assert_eq!(wakeups(&w), before + 1, "frames: kicked at once");
    w.step(0);
    assert_eq!(wakeups(&w), before + 2, "the back-off starts again");
    assert_eq!(w.lanes[0].port.c.tx_wakeups, 0);
}

/// `rings.copy_fill`: in copy mode a socket lets the kernel hold its whole fill ring
/// (`full`) or no more than its RX ring (`rx`), counting the frames received and
/// not yet read; with `rx` the kernel then finds the fill ring empty.
#[test]
fn copy_mode_lets_the_kernel_hold_the_fill_ring_or_no_more_than_the_rx_ring() {
    for (copy_fill, held) in [(CopyFill::Full, 256), (CopyFill::Rx, 64)] {
        let region = test_region();
        let pool = PoolOwner::new(&region, PoolConfig::default());
        let rings = PortRings {
            fill: 256,
            rx: 64,
            copy_fill,
        };
        let mut port = Port::new(0, pool, rings, 64);
        let (io, kernel) = heap_socket(&region, 64);
        port.attach(io);
        assert_eq!(
            fill_level(&kernel),
            held,
            "{copy_fill:?}: stocked at attach"
        );
        // 64 frames received and left unread: the refill leaves room for them.
        assert_eq!(kernel.deliver(64).len(), 64);
        port.refill();
        assert_eq!(fill_level(&kernel), held - 64, "{copy_fill:?}: after RX");
        // Read and dropped: their chunks go back and the ring is stocked again.
        let mut descs = vec![XdpDesc::default(); 64];
        assert_eq!(port.receive(&mut descs), 64);
        for d in &descs {
            let f = port.pool.take_rx(d.addr, d.len).expect("a frame of ours");
            port.pool.recycle(f);
        }
        port.refill();
        assert_eq!(fill_level(&kernel), held, "{copy_fill:?}: restocked");
    }
}

#[test]
fn a_nap_grows_while_it_gathers_little_and_shrinks_before_the_ring_fills() {
    use super::Nap;
    use std::time::Duration;
    let us = Duration::from_micros;
    // RX ring of 2048: from 256 to 682 frames a nap grows, over 1365 it shrinks.
    let mut nap = Nap::new(us(100), 2048);
    assert_eq!(nap.len(), us(100));
    // The next nap's length after one that gathered `got` frames.
    let mut after = |got| {
        nap.gathered(got);
        nap.len()
    };
    assert_eq!(after(400), us(125));
    // Under 256, a trickle: the configured length, from above and from below.
    assert_eq!(after(255), us(100));
    assert_eq!(after(10), us(100));
    assert_eq!(after(1500), us(75));
    assert_eq!(after(10), us(100));
    assert_eq!(after(256), us(125));
    // The edges: 682 grows, 683 keeps; 1365 keeps, 1366 shrinks.
    assert_eq!(after(682), us(156) + Duration::from_nanos(250));
    after(683);
    assert_eq!(after(1365), us(156) + Duration::from_nanos(250));
    assert_eq!(after(1366), us(117) + Duration::from_nanos(187));
    after(10);
    after(400);
    assert_eq!(after(1000), us(125), "a third to two thirds: kept");
    assert_eq!(after(1500), us(93) + Duration::from_nanos(750));
    // Bounded: four times the configured length, a quarter of it.
    for _ in 0..50 {
        after(300);
    }
    assert_eq!(after(300), us(400));
    for _ in 0..50 {
        after(2048);
    }
    assert_eq!(after(2048), us(25));
    // Never past the longest nap the config allows, and 0 stays off.
    let mut long = Nap::new(us(900), 2048);
    long.gathered(300);
    assert_eq!(long.len(), us(1000));
    long.gathered(300);
    assert_eq!(long.len(), us(1000));
    let mut off = Nap::new(Duration::ZERO, 2048);
    off.gathered(300);
    assert!(off.len().is_zero());
}

/// The worker sizes its naps by what each one gathered: the frames of the passes
/// between a nap and the next idle, against the lane's RX ring (64 here).
#[test]
fn the_worker_sizes_its_nap_by_what_the_last_one_gathered() {
    use crate::config::WaitMode;
    use std::time::Duration;
    let us = Duration::from_micros;
    let (region, _fabric, mut w) =
        one_rule_worker_napping("in", crate::config::Action::Drop, WaitMode::Poll, us(100));
    let (io, kernel) = heap_socket(&region, 64);
    w.lanes[0].start(io, 64, WaitMode::Poll);
    // `n` frames in, a pass, then idle: the next nap's length and the naps so far.
    let received = |w: &mut super::Worker<()>, n: usize| {
        kernel.deliver(n);
        assert!(w.step(0));
        w.idle();
        (w.nap.len(), w.lanes[0].port.c.poll_naps)
    };
    // Woken by poll(), not by a nap: what came in says nothing of the nap.
    assert_eq!(received(&mut w, 10), (us(100), 1));
    // 10 of 64 after a nap (an eighth to a third): longer. 30: kept. 50, over two
    // thirds: shorter.
    assert_eq!(received(&mut w, 10), (us(125), 2));
    assert_eq!(received(&mut w, 30), (us(125), 3));
    assert_eq!(
        received(&mut w, 50),
        (us(93) + Duration::from_nanos(750), 4)
    );
    // 5, under an eighth, after a nap shortened to 93.75 us: a trickle, back to
    // the configured 100 us. Then 10: longer again.
    assert_eq!(received(&mut w, 5), (us(100), 5));
    assert_eq!(received(&mut w, 10), (us(125), 6));
    // Nothing came in during the last nap (125 us): traffic paused, the worker
    // sleeps in poll() (woken at once here) and the next burst starts from 100 us,
    // unmeasured.
    w.lanes[0].shared.waker.wake();
    w.idle();
    assert_eq!(w.nap.len(), us(100));
    assert_eq!(received(&mut w, 60), (us(100), 7));
    assert_eq!(received(&mut w, 60), (us(75), 8));
    assert_eq!(w.lanes[0].port.c.action_drop, 235);
}

/// With two lanes, a nap is sized by the busiest lane's frames against its own RX
/// ring (64 each), not by the worker's total.
#[test]
fn a_nap_is_sized_by_the_busiest_lane() {
    use crate::config::WaitMode;
    use std::time::Duration;
    let us = Duration::from_micros;
    let (_region, _fabric, mut w, k0, k1) = two_lane_forward_worker();
    for lane in &mut w.lanes {
        lane.wait = WaitMode::Poll;
    }
    w.nap = super::Nap::new(us(100), 64);
    let mut both = |a: usize, b: usize| {
        k0.deliver(a);
        k1.deliver(b);
        w.step(0);
        w.step(1);
        w.idle();
        w.nap.len()
    };
    // Woken by poll(): unmeasured.
    assert_eq!(both(10, 10), us(100));
    // 5 on each: 10 in all, but under an eighth of either ring: a trickle.
    assert_eq!(both(5, 5), us(100));
    // 10 on one, an eighth to a third of its ring: longer.
    assert_eq!(both(10, 0), us(125));
    assert_eq!(
        w.lanes[0].port.c.rx_packets + w.lanes[1].port.c.rx_packets,
        40
    );
}
