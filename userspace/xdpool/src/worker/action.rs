//! Every action a worker applies to a received frame, in one place.
//!
//! [`Act`] is what a rule does with a frame; [`Verdict`] adds the optional port
//! mirror. [`Verdict::needs`] says, by an exhaustive match, what each variant needs
//! (TX room on this port, a handoff to which port, a frag, a copy): the worker sizes
//! its RX batch from it. [`apply_act`] runs the variant's code, also by an exhaustive
//! match, over an [`ActCtx`] of plain borrows (pool, counters, TX queue, egress
//! list), so that every action runs in unit tests over heap rings.
//!
//! Adding an action: a variant here (and its `needs` and `apply_act` arms, which the
//! compiler asks for), its name in `config::Action` (and `Plan::verdict`), and its
//! counters in `counters.rs`.

use super::counters::WorkerCountersSnapshot;
use super::handoff::Egress;
use crate::api::{mac_of_word, mac_word};
use crate::config::MacRewrite;
use crate::neigh::MacBook;
use crate::xsk::XdpDesc;
use pool::{Frame, PoolOwner, Region};

/// Index of a port in the plan.
pub type PortId = usize;

/// A port as a verdict names it: two bytes, so that a [`Verdict`] is 16 bytes and
/// moves in two registers (the config allows at most [`crate::config::MAX_PORTS`]).
pub type PortIx = u16;

/// What a rule does with a frame that reached a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Count and recycle (rxdrop).
    Drop,
    /// Swap MACs; the RX chunk itself is sent back out of the same socket.
    L2fwd,
    /// Swap MACs; the RX chunk is sent back twice, by reference.
    ReflectTwice,
    /// Small frames copied into packed frags (RX chunk straight back), the rest as l2fwd.
    Copybreak,
    /// The RX chunk leaves another port, MACs rewritten; the descriptor moves.
    Forward {
        /// Egress port.
        to: PortIx,
        /// MAC rewrite.
        mac: MacRewrite,
    },
    /// The RX chunk is sent back out of the same socket, MACs rewritten as `mac`
    /// says (`l2fwd` is `Back` with a swap; a packet function's `Verdict::back`).
    Back {
        /// MAC rewrite.
        mac: MacRewrite,
    },
    /// A packet function decides (`action = "call"`): the worker calls handler
    /// `handler` and applies the verdict it returns (never `Call` again).
    Call {
        /// The handler's id (registration order).
        handler: u16,
        /// The rule's position in its port's list (its name and `arg`).
        rule: u16,
    },
}

/// An action plus the optional port mirror, held as one `u128`: it is copied
/// through the batch loop as two whole words. (As a struct of an enum with small
/// fields it was copied as pieces, and each load of the whole waited on those
/// stores: store-forwarding stalls, the worker's hottest samples under `perf`.)
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Verdict(u128);

// Bits of a `Verdict`.
const ACT: u32 = 0; // 3 bits: the `Act` variant
const PORT: u32 = 3; // 16 bits: `Forward::to`, `Call::handler`
const RULE: u32 = 19; // 16 bits: `Call::rule`
const MAC: u32 = 35; // 2 bits: the `MacRewrite` variant
const MIRRORED: u32 = 37; // 1 bit
const MIRROR: u32 = 38; // 16 bits: the mirror port
const MAC_BYTES: u32 = 64; // 48 bits: `MacRewrite::Fixed`

const fn mac_bits(m: MacRewrite) -> u128 {
    let (how, bytes) = match m {
        MacRewrite::Swap => (0, [0; 6]),
        MacRewrite::Neigh => (1, [0; 6]),
        MacRewrite::Fixed(bytes) => (2, bytes),
        MacRewrite::Keep => (3, [0; 6]),
    };
    how << MAC | (mac_word(bytes) as u128) << MAC_BYTES
}

impl Verdict {
    /// Drop, no mirror.
    pub const DROP: Verdict = Verdict::new(Act::Drop, None);

    /// `act`, and a reference to the frame to `mirror_to`.
    #[inline(always)]
    pub const fn new(act: Act, mirror_to: Option<PortIx>) -> Verdict {
        let act = match act {
            Act::Drop => 0,
            Act::L2fwd => 1,
            Act::ReflectTwice => 2,
            Act::Copybreak => 3,
            Act::Forward { to, mac } => 4 | (to as u128) << PORT | mac_bits(mac),
            Act::Back { mac } => 5 | mac_bits(mac),
            Act::Call { handler, rule } => 6 | (handler as u128) << PORT | (rule as u128) << RULE,
        };
        let mirror = match mirror_to {
            Some(m) => 1 << MIRRORED | (m as u128) << MIRROR,
            None => 0,
        };
        Verdict(act << ACT | mirror)
    }

    /// The action.
    #[inline(always)]
    pub const fn act(self) -> Act {
        let port = (self.0 >> PORT) as u16;
        match (self.0 >> ACT) & 7 {
            0 => Act::Drop,
            1 => Act::L2fwd,
            2 => Act::ReflectTwice,
            3 => Act::Copybreak,
            4 => Act::Forward {
                to: port,
                mac: self.mac(),
            },
            5 => Act::Back { mac: self.mac() },
            _ => Act::Call {
                handler: port,
                rule: (self.0 >> RULE) as u16,
            },
        }
    }

    #[inline(always)]
    const fn mac(self) -> MacRewrite {
        match (self.0 >> MAC) & 3 {
            0 => MacRewrite::Swap,
            1 => MacRewrite::Neigh,
            2 => MacRewrite::Fixed(mac_of_word((self.0 >> MAC_BYTES) as u64)),
            _ => MacRewrite::Keep,
        }
    }

    /// A reference to the frame (as it leaves, after any rewrite) also leaves this port.
    #[inline(always)]
    pub const fn mirror_to(self) -> Option<PortIx> {
        if (self.0 >> MIRRORED) & 1 == 0 {
            None
        } else {
            Some((self.0 >> MIRROR) as u16)
        }
    }

    /// The same action, mirrored to `mirror_to`.
    #[inline(always)]
    pub const fn with_act(self, act: Act) -> Verdict {
        Verdict::new(act, self.mirror_to())
    }
}

impl std::fmt::Debug for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verdict")
            .field("act", &self.act())
            .field("mirror_to", &self.mirror_to())
            .finish()
    }
}

/// What one received frame under a verdict needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// Descriptors on the receiving port's own TX ring.
    pub own_tx: usize,
    /// Ports the frame (or a reference to it) is handed to.
    pub egress: [Option<PortId>; 2],
    /// A frag reference is taken (reflect-twice, mirror).
    pub frag: bool,
    /// The bytes may be copied (copybreak).
    pub copy: bool,
}

impl Verdict {
    /// What this verdict needs per frame.
    pub fn needs(&self) -> Needs {
        let mut n = match self.act() {
            Act::Drop => Needs::default(),
            Act::L2fwd => Needs {
                own_tx: 1,
                ..Needs::default()
            },
            Act::ReflectTwice => Needs {
                own_tx: 2,
                frag: true,
                ..Needs::default()
            },
            Act::Copybreak => Needs {
                own_tx: 1,
                copy: true,
                ..Needs::default()
            },
            Act::Forward { to, .. } => Needs {
                egress: [Some(to.into()), None],
                ..Needs::default()
            },
            Act::Back { .. } => Needs {
                own_tx: 1,
                ..Needs::default()
            },
            // What the handler declared: the rule's `CallSpec` (`Classifier::needs`).
            Act::Call { .. } => Needs::default(),
        };
        if let Some(m) = self.mirror_to() {
            n.frag = true;
            n.egress[1] = Some(m.into());
        }
        n
    }
}

/// What an action works with: plain borrows, no socket.
pub struct ActCtx<'a> {
    /// The receiving port's pool.
    pub pool: &'a mut PoolOwner,
    /// The receiving port's counters.
    pub c: &'a mut WorkerCountersSnapshot,
    /// The receiving port's TX queue (this pool's frames, given to TX).
    pub tx: &'a mut Vec<XdpDesc>,
    /// Frames for other ports (routed by the worker after the batch).
    pub out: &'a mut Vec<(PortId, Egress)>,
    /// Frame memory.
    pub region: &'a Region,
    /// One chunk of scratch for copies.
    pub scratch: &'a mut [u8],
    /// `copybreak`: frames of at most this many bytes are copied.
    pub copybreak_bytes: u32,
    /// Device MACs and next hops.
    pub macs: &'a MacBook,
    /// The receiving socket (the origin of the frames it hands out).
    pub origin: u16,
    /// Set when a next hop was unknown (the control thread looks again).
    pub neigh_missed: &'a mut bool,
}

/// Applies `act` (and a mirror to `mirror_to`) to a received frame `d` (taken from
/// the pool as `frame`): a rule's [`Verdict`] unpacked, or a handler's verdict as the
/// call turned it into the worker's terms (never packed into a `Verdict` between).
#[inline(always)]
pub fn apply_act(
    act: Act,
    mirror_to: Option<PortIx>,
    frame: Frame,
    d: XdpDesc,
    cx: &mut ActCtx<'_>,
) {
    let mirror_to = mirror_to.map(PortId::from);
    match act {
        Act::Drop => drop_frame(frame, d, mirror_to, cx),
        Act::L2fwd => back(frame, d, MacRewrite::Swap, mirror_to, cx),
        Act::ReflectTwice => reflect_twice(frame, d, cx),
        Act::Copybreak if d.len <= cx.copybreak_bytes => copybreak(frame, d, cx),
        Act::Copybreak => back(frame, d, MacRewrite::Swap, None, cx),
        Act::Forward { to, mac } => forward(frame, d, to.into(), mac, mirror_to, cx),
        Act::Back { mac } => back(frame, d, mac, mirror_to, cx),
        // The worker calls the handler and applies its verdict instead (`Worker::call`);
        // a `Call` here would be a worker bug: the frame is dropped, not lost.
        Act::Call { .. } => drop_frame(frame, d, mirror_to, cx),
    }
}

/// A packet function's `back` (`to` = `None`) or `forward` left with `Keep` (its
/// MACs rewritten by `call` on the handler's own view, or none asked for): sent as
/// those actions send, with a constant `Keep` (their rewrite then tests the length
/// only: a frame shorter than two MACs is dropped, counted). `Worker::receive_with`
/// sends every other verdict by [`apply_act`] (a drop; a rewrite `call` left undone,
/// for a frame too short for it).
#[inline(always)]
pub fn send_rewritten(
    to: Option<PortIx>,
    mirror_to: Option<PortIx>,
    frame: Frame,
    d: XdpDesc,
    cx: &mut ActCtx<'_>,
) {
    let mirror_to = mirror_to.map(PortId::from);
    match to {
        None => back(frame, d, MacRewrite::Keep, mirror_to, cx),
        Some(to) => forward(frame, d, to.into(), MacRewrite::Keep, mirror_to, cx),
    }
}

/// `drop`: recycle; with a mirror, the frame leaves the mirror port unchanged.
#[inline]
fn drop_frame(frame: Frame, d: XdpDesc, mirror_to: Option<PortId>, cx: &mut ActCtx<'_>) {
    cx.c.action_drop += 1;
    match mirror_to {
        None => cx.pool.recycle(frame),
        Some(m) => {
            let Some(frag) = into_frag(frame, d, cx) else {
                return;
            };
            emit(m, d, frag, cx);
            cx.c.mirrored += 1;
        }
    }
}

/// `l2fwd` (a swap) and a handler's `back`: rewrite the MACs in place and queue the
/// RX chunk itself for TX.
#[inline(always)]
fn back(frame: Frame, d: XdpDesc, mac: MacRewrite, mirror_to: Option<PortId>, cx: &mut ActCtx<'_>) {
    let Some(frame) = rewrite(frame, d, mac, None, cx) else {
        return;
    };
    match mirror_to {
        None => {
            let offset = (d.addr - frame.addr()) as u32;
            match cx.pool.give_tx(frame, offset) {
                Ok(addr) => cx.tx.push(XdpDesc {
                    addr,
                    len: d.len,
                    options: 0,
                }),
                Err(_) => cx.c.rx_rejected += 1,
            }
        }
        Some(m) => {
            let Some(frag) = into_frag(frame, d, cx) else {
                return;
            };
            let copy = cx.pool.ref_frag(&frag);
            emit(m, d, copy, cx);
            cx.c.mirrored += 1;
            queue_frag(frag, d.len, cx);
        }
    }
}

/// `reflect-twice`: swap MACs in place, turn the frame into a frag (count 1) and
/// queue it twice by reference: two TX descriptors on the same bytes, no copy.
#[inline]
fn reflect_twice(frame: Frame, d: XdpDesc, cx: &mut ActCtx<'_>) {
    let Some(frame) = rewrite(frame, d, MacRewrite::Swap, None, cx) else {
        return;
    };
    let Some(frag) = into_frag(frame, d, cx) else {
        return;
    };
    let second = cx.pool.ref_frag(&frag);
    queue_frag(second, d.len, cx);
    queue_frag(frag, d.len, cx);
    cx.c.reflected_twice += 1;
}

/// `copybreak`: copy the frame, MACs swapped, into a frag and give the RX chunk
/// straight back; queue the frag for TX.
#[inline]
fn copybreak(frame: Frame, d: XdpDesc, cx: &mut ActCtx<'_>) {
    let Some(frame) = rewrite(frame, d, MacRewrite::Swap, None, cx) else {
        return;
    };
    let offset = (d.addr - frame.addr()) as u32;
    let Some(bytes) = cx.region.frame_bytes(&frame, offset, d.len) else {
        cx.pool.recycle(frame);
        cx.c.rx_rejected += 1;
        return;
    };
    let len = bytes.len();
    cx.scratch[..len].copy_from_slice(bytes);
    // The bytes are ours now: the RX chunk goes back (and to the fill ring next).
    cx.pool.recycle(frame);
    let Some(frag) = cx.pool.alloc_frag(d.len) else {
        cx.c.frag_alloc_failed += 1;
        return;
    };
    if cx.region.write_frag(&frag, &cx.scratch[..len]).is_err() {
        cx.pool.release_frag(frag);
        cx.c.rx_rejected += 1;
        return;
    }
    cx.c.copybreak_copied += 1;
    queue_frag(frag, d.len, cx);
}

/// `forward`: rewrite the MACs for the egress port and hand the frame (its chunk, by
/// a frag token of count 1) to that port; a mirror takes a second reference.
#[inline(always)]
fn forward(
    frame: Frame,
    d: XdpDesc,
    to: PortId,
    mac: MacRewrite,
    mirror_to: Option<PortId>,
    cx: &mut ActCtx<'_>,
) {
    let Some(frame) = rewrite(frame, d, mac, Some(to), cx) else {
        return;
    };
    let Some(frag) = into_frag(frame, d, cx) else {
        return;
    };
    if let Some(m) = mirror_to {
        let copy = cx.pool.ref_frag(&frag);
        emit(m, d, copy, cx);
        cx.c.mirrored += 1;
    }
    emit(to, d, frag, cx);
    cx.c.forwarded += 1;
}

/// The frame as a frag of count 1 over its bytes (no atomic: unified counting).
#[inline]
fn into_frag(frame: Frame, d: XdpDesc, cx: &mut ActCtx<'_>) -> Option<pool::Frag> {
    let offset = (d.addr - frame.addr()) as u32;
    // On error the pool recycled (or refused and counted) the frame.
    match cx.pool.frame_into_frag(frame, offset, d.len) {
        Ok(f) => Some(f),
        Err(_) => {
            cx.c.rx_rejected += 1;
            None
        }
    }
}

#[inline]
fn emit(port: PortId, d: XdpDesc, token: pool::Frag, cx: &mut ActCtx<'_>) {
    cx.out.push((
        port,
        Egress {
            desc: XdpDesc {
                addr: d.addr,
                len: d.len,
                options: 0,
            },
            token,
            origin: cx.origin,
        },
    ));
}

#[inline]
fn queue_frag(frag: pool::Frag, len: u32, cx: &mut ActCtx<'_>) {
    match cx.pool.give_tx_frag(frag) {
        Ok(addr) => cx.tx.push(XdpDesc {
            addr,
            len,
            options: 0,
        }),
        Err(_) => cx.c.rx_rejected += 1,
    }
}

/// Rewrites the frame's two MAC addresses. A frame that cannot be viewed, is shorter
/// than two MACs, or whose next hop is unknown is recycled and counted; `None` then.
#[inline(always)]
pub(crate) fn rewrite(
    frame: Frame,
    d: XdpDesc,
    how: MacRewrite,
    egress: Option<PortId>,
    cx: &mut ActCtx<'_>,
) -> Option<Frame> {
    if matches!(how, MacRewrite::Keep) && d.len >= 12 {
        // Nothing to view: the descriptor was checked against the chunk when the
        // frame was taken (or made by a handler's bounds-checked packet view). A
        // handler's rewrite is done on its own view (`call`), so the verdict of a
        // frame it did not keep comes here as `Keep`: this test is all it costs.
        return Some(frame);
    }
    if !matches!(how, MacRewrite::Neigh) && d.len >= 12 {
        // A swap (l2fwd) or a fixed next hop (forward), inline: one checked view of
        // the two MACs (the rest of the frame was checked against the chunk when it
        // was taken). A next hop found by the frame's IP goes out of line.
        let mut frame = frame;
        let offset = (d.addr - frame.addr()) as usize;
        // The two MACs only: the frame's length was checked against the chunk when
        // it was taken (or made by the handler's bounds-checked view).
        return match rewrite_in_view(&mut frame, offset, 12, how, egress, cx.region, cx.macs) {
            None => Some(frame),
            Some(why) => {
                unrewritten(frame, why, cx.pool, cx.c, cx.neigh_missed);
                None
            }
        };
    }
    match rewrite_viewed(frame, d, how, egress, cx.region, cx.macs) {
        Ok(frame) => Some(frame),
        Err((frame, why)) => {
            unrewritten(frame, why, cx.pool, cx.c, cx.neigh_missed);
            None
        }
    }
}

/// [`rewrite`] for a frame whose next hop is found by its IP (`neigh`: a parse and
/// a lookup), or that is too short.
#[inline(never)]
fn rewrite_viewed(
    mut frame: Frame,
    d: XdpDesc,
    how: MacRewrite,
    egress: Option<PortId>,
    region: &Region,
    macs: &MacBook,
) -> Result<Frame, (Frame, Unrewritten)> {
    // `rewrite` rewrites a frame of 12 bytes or more itself unless its next hop is
    // found by its IP; a shorter one comes here whatever `how` is, and is dropped.
    debug_assert!(matches!(how, MacRewrite::Neigh) || d.len < 12);
    let offset = (d.addr - frame.addr()) as usize;
    let refused = if d.len < 12 {
        Some(Unrewritten::TooShort)
    } else {
        // The whole frame: the next hop is looked up by its destination IP.
        rewrite_in_view(
            &mut frame,
            offset,
            d.len as usize,
            how,
            egress,
            region,
            macs,
        )
    };
    match refused {
        None => Ok(frame),
        Some(why) => Err((frame, why)),
    }
}

/// Rewrites `frame`'s MACs (`how`) in one checked view of its chunk's bytes
/// `offset..offset + len` (at least the two MACs); why not, if not.
#[inline(always)]
fn rewrite_in_view(
    frame: &mut Frame,
    offset: usize,
    len: usize,
    how: MacRewrite,
    egress: Option<PortId>,
    region: &Region,
    macs: &MacBook,
) -> Option<Unrewritten> {
    match region
        .chunk_mut(frame)
        .and_then(|c| c.get_mut(offset..offset + len))
    {
        None => Some(Unrewritten::Unviewable),
        Some(bytes) => rewrite_macs(bytes, how, egress, macs)
            .is_none()
            .then_some(Unrewritten::NeighMiss),
    }
}

/// Why a frame's MACs were not rewritten.
#[derive(Clone, Copy)]
enum Unrewritten {
    TooShort,
    Unviewable,
    NeighMiss,
}

/// A frame whose MACs could not be rewritten: recycled, counted.
#[cold]
#[inline(never)]
fn unrewritten(
    frame: Frame,
    why: Unrewritten,
    pool: &mut PoolOwner,
    c: &mut WorkerCountersSnapshot,
    neigh_missed: &mut bool,
) {
    pool.recycle(frame);
    match why {
        Unrewritten::TooShort => c.rx_too_short += 1,
        Unrewritten::Unviewable => c.rx_rejected += 1,
        Unrewritten::NeighMiss => {
            c.neigh_miss_drop += 1;
            *neigh_missed = true;
        }
    }
}

/// Rewrites the first 12 bytes of `frame` (at least 12 long) in place: `None`, and
/// the bytes unchanged, when a MAC needed is unknown.
#[inline]
pub(crate) fn rewrite_macs(
    frame: &mut [u8],
    how: MacRewrite,
    egress: Option<PortId>,
    book: &MacBook,
) -> Option<()> {
    if matches!(how, MacRewrite::Neigh) {
        // The next hop is found by the frame's destination IP: the whole frame.
        let macs = neigh_macs(frame, egress?, book)?;
        *frame.first_chunk_mut::<12>()? = macs;
        return Some(());
    }
    let b = frame.first_chunk_mut::<12>()?;
    match how {
        MacRewrite::Keep | MacRewrite::Neigh => {}
        MacRewrite::Swap => {
            let macs = *b;
            b[..6].copy_from_slice(&macs[6..]);
            b[6..].copy_from_slice(&macs[..6]);
        }
        MacRewrite::Fixed(dst) => {
            let src = book.device_mac(egress?)?;
            b[..6].copy_from_slice(&dst);
            b[6..].copy_from_slice(&src);
        }
    }
    Some(())
}

/// `mac = "neigh"`: the next hop's MAC by the frame's destination IP (a parse and
/// a hash lookup, out of line), then the egress device's.
#[inline(never)]
fn neigh_macs(frame: &[u8], port: PortId, book: &MacBook) -> Option<[u8; 12]> {
    let ip = crate::wire::parse(frame).ok()?.dst_ip()?;
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&book.next_hop(port, ip)?);
    macs[6..].copy_from_slice(&book.device_mac(port)?);
    Some(macs)
}

#[cfg(test)]
mod verdict_tests {
    use super::{Act, MacRewrite, Verdict};

    /// Every action, with every MAC rewrite and port at its extremes, and with and
    /// without a mirror, comes back out of a `Verdict` as it went in.
    #[test]
    fn a_verdict_gives_back_its_action_and_mirror() {
        let macs = [
            MacRewrite::Swap,
            MacRewrite::Neigh,
            MacRewrite::Keep,
            MacRewrite::Fixed([0xff; 6]),
            MacRewrite::Fixed([2, 0, 0, 0, 0, 1]),
        ];
        let mut acts = vec![Act::Drop, Act::L2fwd, Act::ReflectTwice, Act::Copybreak];
        for mac in macs {
            acts.push(Act::Back { mac });
            for to in [0, 1, u16::MAX] {
                acts.push(Act::Forward { to, mac });
            }
        }
        for (handler, rule) in [(0, 0), (u16::MAX, 0), (0, u16::MAX), (3, 7)] {
            acts.push(Act::Call { handler, rule });
        }
        for act in acts {
            for mirror in [None, Some(0), Some(u16::MAX)] {
                let v = Verdict::new(act, mirror);
                assert_eq!(
                    (v.act(), v.mirror_to()),
                    (act, mirror),
                    "{act:?} {mirror:?}"
                );
                assert_eq!(v.with_act(Act::Drop).mirror_to(), mirror);
            }
        }
        assert_eq!(Verdict::DROP.act(), Act::Drop);
    }
}
