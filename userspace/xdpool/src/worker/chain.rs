//! Multi-buffer frames (`XDP_USE_SG`): buffers flagged `XDP_PKT_CONTD` are kept
//! until the last one arrives; then the frame is acted on whole. `l2fwd` sends the
//! same chain back (MACs swapped in the first buffer); every other verdict drops it
//! (the config refuses the single-buffer actions with multi-buffer).

use super::handoff::Remotes;
use super::lane::Lane;
use super::MAX_CHAIN;
use crate::xsk::{XdpDesc, XDP_PKT_CONTD};
use pool::Frame;

impl Lane {
    /// Whether `d` is a buffer of a multi-buffer frame: it has more to come, or it
    /// ends a frame whose earlier buffers were taken (or refused).
    #[inline]
    pub(super) fn in_chain(&self, d: &XdpDesc) -> bool {
        d.options & XDP_PKT_CONTD != 0 || !self.chain.is_empty() || self.chain_broken
    }

    /// A buffer of a multi-buffer frame: taken into the chain, or, when the pool
    /// refuses it, counted and the whole frame dropped once its last buffer is seen.
    #[cold]
    pub(super) fn chain_desc(&mut self, d: XdpDesc, remotes: &Remotes) {
        match self.port.pool.take_rx(d.addr, d.len) {
            Ok(frame) => self.chain_part(frame, d, remotes),
            Err(e) => {
                self.port.refuse_rx(&e);
                self.chain_broken = true;
                if d.options & XDP_PKT_CONTD == 0 {
                    self.drop_chain();
                }
            }
        }
    }

    #[cold]
    fn chain_part(&mut self, frame: Frame, d: XdpDesc, remotes: &Remotes) {
        if self.chain.len() == MAX_CHAIN {
            self.chain_broken = true;
        }
        if self.chain_broken {
            self.port.pool.recycle(frame);
        } else {
            self.chain.push((frame, d));
        }
        if d.options & XDP_PKT_CONTD != 0 {
            return;
        }
        if self.chain_broken {
            self.drop_chain();
            return;
        }
        let c = &mut self.port.c;
        c.rx_packets += 1;
        c.rx_multi_buffer += 1;
        c.rx_bytes += self
            .chain
            .iter()
            .map(|(_, d)| u64::from(d.len))
            .sum::<u64>();
        let verdict = {
            let (first, fd) = &mut self.chain[0];
            let offset = (fd.addr - first.addr()) as u32;
            let (v, unknown) = self
                .rules
                .verdict(self.port.region(), first, offset, fd.len);
            self.port.c.rule_untagged += u64::from(unknown);
            // No handler sees a chain (a `call` verdict drops it).
            crate::api::forget_parse();
            v
        };
        if verdict.is_l2fwd() {
            self.send_chain_back(remotes);
        } else {
            self.port.c.action_drop += 1;
            for (frame, _) in std::mem::take(&mut self.chain) {
                self.port.pool.recycle(frame);
            }
        }
    }

    /// `l2fwd` of a whole chain: never a chain with a hole or without its end on TX.
    #[cold]
    fn send_chain_back(&mut self, remotes: &Remotes) {
        let mut chain = std::mem::take(&mut self.chain);
        let last = chain.len() - 1;
        let start = self.port.queued();
        for (i, (mut frame, d)) in chain.drain(..).enumerate() {
            if self.chain_broken {
                self.port.pool.recycle(frame);
                continue;
            }
            if i == 0 && !self.swap_first(&mut frame, d) {
                self.port.pool.recycle(frame);
                self.chain_broken = true;
                continue;
            }
            let offset = (d.addr - frame.addr()) as u32;
            match self.port.pool.give_tx(frame, offset) {
                Ok(addr) => self.port.queue_own(XdpDesc {
                    addr,
                    len: d.len,
                    options: if i < last { XDP_PKT_CONTD } else { 0 },
                }),
                Err(_) => {
                    self.port.c.rx_rejected += 1;
                    self.chain_broken = true;
                }
            }
        }
        if self.chain_broken {
            self.port.unqueue_from(start, remotes);
            self.port.c.rx_chain_dropped += 1;
        }
        self.chain_broken = false;
        self.chain = chain;
    }

    /// Swaps the MACs in a chain's first buffer; false when it is too short or
    /// cannot be written (counted).
    fn swap_first(&mut self, frame: &mut Frame, d: XdpDesc) -> bool {
        let offset = (d.addr - frame.addr()) as u32;
        let region = self.port.region().clone();
        let Some(bytes) = region.frame_bytes(frame, offset, d.len) else {
            self.port.c.rx_rejected += 1;
            return false;
        };
        if bytes.len() < 12 {
            self.port.c.rx_too_short += 1;
            return false;
        }
        let mut macs = [0u8; 12];
        macs[..6].copy_from_slice(&bytes[6..12]);
        macs[6..].copy_from_slice(&bytes[..6]);
        if region.write_frame(frame, offset, &macs).is_err() {
            self.port.c.rx_rejected += 1;
            return false;
        }
        true
    }

    /// Drops the multi-buffer frame being received (a buffer was refused, the chain
    /// was too long, or the socket is going away).
    #[cold]
    pub(super) fn drop_chain(&mut self) {
        if !self.chain.is_empty() || self.chain_broken {
            self.port.c.rx_chain_dropped += 1;
        }
        for (frame, _) in self.chain.drain(..) {
            self.port.pool.recycle(frame);
        }
        self.chain_broken = false;
    }
}
