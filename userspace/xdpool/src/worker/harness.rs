//! The worker over heap rings, with the test playing the kernel: what
//! `xdpool::testing` drives a program's handlers with, and what the worker's own
//! tests use. No root, no socket, no thread: one worker's passes run on the caller.

use super::port::PortIo;
use super::{counters::WorkerCountersSnapshot, Fabric, Worker, WorkerSpec};
use crate::api::HandlerSet;
use crate::xsk::{
    CompletionRing, FillRing, HeapRingPeer, RingErrors, RingsMut, RxRing, TxRing, UmemLayout,
    Wakeup, XdpDesc, XdpStatistics, XskError,
};
use pool::Region;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// A socket on heap rings.
pub(crate) struct HeapIo {
    pub(crate) fill: FillRing,
    pub(crate) comp: CompletionRing,
    pub(crate) rx: RxRing,
    pub(crate) tx: TxRing,
    /// What `SO_INCOMING_NAPI_ID` would say.
    pub(crate) napi: Option<u32>,
    /// What `XDP_STATISTICS` would say (`None`: the call fails).
    pub(crate) stats: Option<XdpStatistics>,
    /// Whether the socket says it is in zero-copy mode.
    pub(crate) zero_copy: bool,
}

impl HeapIo {
    /// A socket on heap rings of `sizes` entries (fill, completion, RX, TX) over a UMEM
    /// of `layout`, reporting no NAPI id, no statistics and copy mode (its fields
    /// say otherwise when set), and the kernel's side of each ring.
    pub(crate) fn new(layout: UmemLayout, sizes: [u32; 4]) -> (HeapIo, HeapPeers) {
        let [fill, comp, rx, tx] = sizes;
        let (fill, kfill) = FillRing::new_heap(fill);
        let (comp, kcomp) = CompletionRing::new_heap(comp, layout);
        let (rx, krx) = RxRing::new_heap(rx, layout);
        let (tx, ktx) = TxRing::new_heap(tx);
        (
            HeapIo {
                fill,
                comp,
                rx,
                tx,
                napi: None,
                stats: None,
                zero_copy: false,
            },
            HeapPeers {
                fill: kfill,
                comp: kcomp,
                rx: krx,
                tx: ktx,
            },
        )
    }
}

/// The kernel's side of a [`HeapIo`]'s four rings.
pub(crate) struct HeapPeers {
    pub(crate) fill: HeapRingPeer<u64>,
    pub(crate) comp: HeapRingPeer<u64>,
    pub(crate) rx: HeapRingPeer<XdpDesc>,
    pub(crate) tx: HeapRingPeer<XdpDesc>,
}

impl PortIo for HeapIo {
    fn rings(&mut self) -> RingsMut<'_> {
        RingsMut {
            fill: &mut self.fill,
            completion: &mut self.comp,
            rx: &mut self.rx,
            tx: &mut self.tx,
        }
    }
    fn wakeup_rx(&self) -> Result<Wakeup, XskError> {
        Ok(Wakeup::Done)
    }
    fn wakeup_tx(&self) -> Result<Wakeup, XskError> {
        Ok(Wakeup::Done)
    }
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn statistics(&self) -> Option<XdpStatistics> {
        self.stats
    }
    fn reports_device_gone(&self) -> bool {
        false
    }
    fn ring_errors(&self) -> RingErrors {
        RingErrors::default()
    }
    fn set_busy_poll(&self, _: u16) -> Result<(), XskError> {
        Ok(())
    }
    fn napi_id(&self) -> Option<u32> {
        self.napi
    }
    fn zero_copy(&self) -> bool {
        self.zero_copy
    }
}

/// The kernel's side of one heap socket: it takes fill entries, writes received
/// frames into their chunks, sends what the TX ring holds and completes it.
pub(crate) struct HeapKernel {
    fill: HeapRingPeer<u64>,
    comp: HeapRingPeer<u64>,
    rx: HeapRingPeer<XdpDesc>,
    tx: HeapRingPeer<XdpDesc>,
    rx_size: u32,
    region: Arc<Region>,
}

/// Why the kernel side could not deliver a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undelivered {
    /// No fill entry: the worker has not given the kernel a chunk.
    NoFillEntry,
    /// The RX ring is full (the worker has not taken what it holds).
    RxRingFull,
    /// Longer than a chunk's room after the headroom (multi-buffer is not played).
    TooLong,
}

impl HeapKernel {
    /// Receives `frame` as the kernel does: into the next fill entry's chunk, after
    /// the headroom, announced on the RX ring.
    pub(crate) fn deliver(&self, frame: &[u8]) -> Result<(), Undelivered> {
        let room = (self.region.chunk_size() - crate::xsk::XDP_PACKET_HEADROOM) as usize;
        if frame.len() > room {
            return Err(Undelivered::TooLong);
        }
        if self.rx.producer().wrapping_sub(self.rx.consumer()) >= self.rx_size {
            return Err(Undelivered::RxRingFull);
        }
        let mut addr = [0u64; 1];
        if self.fill.consume(&mut addr) == 0 {
            return Err(Undelivered::NoFillEntry);
        }
        let at = addr[0] + crate::xsk::XDP_PACKET_HEADROOM as u64;
        assert!(
            at + frame.len() as u64 <= self.region.len() as u64,
            "a fill entry out of the region"
        );
        // SAFETY: the range lies inside the region's mapping (checked above; the
        // mapping lives as long as `self.region`). The chunk came off the fill ring,
        // so it is the kernel's (state Fill): no token of the worker views it, and
        // this single-threaded harness runs no worker code during the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.region.as_ptr().add(at as usize),
                frame.len(),
            )
        };
        let d = XdpDesc {
            addr: at,
            len: frame.len() as u32,
            options: 0,
        };
        assert_eq!(self.rx.produce(&[d]), 1);
        Ok(())
    }

    /// Sends every descriptor on the TX ring (their bytes, copied) and completes them.
    pub(crate) fn send(&self) -> Vec<Vec<u8>> {
        let mut descs = vec![XdpDesc::default(); 256];
        let mut out = Vec::new();
        loop {
            let n = self.tx.consume(&mut descs);
            if n == 0 {
                return out;
            }
            for d in &descs[..n] {
                assert!(
                    d.addr + d.len as u64 <= self.region.len() as u64,
                    "a TX descriptor out of the region"
                );
                // SAFETY: inside the mapping (checked above). The descriptor is on the
                // TX ring, so its chunk is the kernel's until completed (state Tx):
                // the worker writes none of it, and no worker code runs meanwhile.
                let bytes = unsafe {
                    std::slice::from_raw_parts(
                        self.region.as_ptr().add(d.addr as usize),
                        d.len as usize,
                    )
                };
                out.push(bytes.to_vec());
            }
            let addrs: Vec<u64> = descs[..n].iter().map(|d| d.addr).collect();
            assert_eq!(self.comp.produce(&addrs), n, "completion ring full");
        }
    }
}

/// A socket on heap rings for `region` and the kernel side that drives it.
pub(crate) fn heap_socket(
    region: &Arc<Region>,
    fill: u32,
    rx: u32,
    tx: u32,
) -> (Box<dyn PortIo>, HeapKernel) {
    let layout = UmemLayout::new(region.len() as u64, region.chunk_size(), 0, false);
    let (io, peers) = HeapIo::new(layout, [fill, fill.max(tx) * 2, rx, tx]);
    (
        Box::new(io),
        HeapKernel {
            fill: peers.fill,
            comp: peers.comp,
            rx: peers.rx,
            tx: peers.tx,
            rx_size: rx,
            region: region.clone(),
        },
    )
}

/// One worker driven pass by pass on the caller's thread.
pub(crate) struct Driven<H: HandlerSet> {
    worker: Worker<H>,
    /// What every pass borrows, as `run_with` holds them.
    remotes: Arc<super::handoff::Remotes>,
    region: Arc<Region>,
    /// The clock the handlers' ticks see: moved only by [`advance`](Self::advance).
    clock: std::time::Instant,
}

impl<H: HandlerSet> Driven<H> {
    /// The worker of `spec`, its handler states made here.
    pub(crate) fn new(
        region: &Arc<Region>,
        spec: WorkerSpec,
        fabric: Arc<Fabric>,
        handlers: Arc<H>,
    ) -> Self {
        Driven {
            remotes: fabric.remotes.clone(),
            region: region.clone(),
            worker: Worker::new(region, spec, fabric, handlers),
            clock: std::time::Instant::now(),
        }
    }

    /// Lane `lane` runs on `io` from now on.
    pub(crate) fn attach(&mut self, lane: usize, io: Box<dyn PortIo>) {
        self.worker.lanes[lane].port.attach(io);
    }

    /// One pass over every lane; whether anything moved.
    pub(crate) fn pass(&mut self) -> bool {
        self.worker.refresh_book();
        let clock = self.clock;
        self.worker.handler_chores(|| clock);
        let mut busy = false;
        for i in 0..self.worker.lanes.len() {
            busy |= self.worker.step_with(i, &self.remotes, &self.region);
        }
        busy
    }

    /// Moves the handlers' clock on by `d` (their next pass ticks them when due).
    pub(crate) fn advance(&mut self, d: std::time::Duration) {
        self.clock += d;
    }

    /// Lane `lane`'s counters now.
    pub(crate) fn counters(&self, lane: usize) -> WorkerCountersSnapshot {
        self.worker.lanes[lane].port.c
    }

    /// The stop: sockets given up, kept frames settled, pools destroyed.
    pub(crate) fn finish(mut self) -> Vec<super::WorkerExit> {
        // What a socket's teardown and the control thread's reclaim do: frames in
        // the RX ring and the completions taken, then the kernel's rings emptied.
        let remotes = self.worker.fabric.remotes.clone();
        for lane in &mut self.worker.lanes {
            lane.port.drain_rx();
            lane.port.reap(&remotes);
            lane.port.detach(&remotes);
            lane.port.reclaim(&remotes);
        }
        self.worker.finish()
    }

    /// Gives back each pool's partly split frag chunk (held for the next frag), so
    /// that a check at rest finds no frame with the application.
    pub(crate) fn drain_frags(&mut self) {
        for l in &mut self.worker.lanes {
            l.port.pool.frag_drain();
        }
    }

    /// Publishes every lane's pool stats (the accounting's second source).
    pub(crate) fn publish(&mut self) {
        for l in &self.worker.lanes {
            l.port.pool.publish_stats();
        }
        self.worker.publish(false);
    }
}
