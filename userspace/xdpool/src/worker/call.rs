//! A `call` rule's frame through its packet function: the frame lent to the handler
//! as a [`Packet`], the handler's [`Verdict`](crate::api::Verdict) turned into the
//! worker's action and mirror, and a panic caught so that the frame is dropped and
//! counted.

use super::action::{rewrite_macs, Act, PortId, PortIx};
use super::counters::WorkerCountersSnapshot;
use super::handoff::Egress;
use crate::api::{
    Emit, EmitError, HandlerSet, Kept, KeptStore, Kind, Meta, Packet, PortRef, RuleOf,
};
use crate::config::MacRewrite;
use crate::neigh::MacBook;
use crate::xsk::XdpDesc;
use pool::{Frame, PoolOwner, Region};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

/// Why a handler's frame is not acted on: each is dropped and counted.
pub(super) enum Refused {
    /// The handler panicked: what it panicked with ([`panic_message`] reads it).
    Panic(Box<dyn std::any::Any + Send>),
    /// The verdict named a port this lane cannot send to, or the frame cannot be
    /// viewed (a recycler refusal; counted `rx_rejected` by the caller's drop).
    Verdict,
    /// The verdict's MAC rewrite needs a next hop nobody knows yet.
    NeighMiss,
}

/// Where a lane's handler call comes from: its rule's metadata and the ports a
/// verdict may name.
pub(super) struct CallSite<'a> {
    pub queue: u32,
    /// The rule that sent the frame here (for its name and `arg`).
    pub rule: Option<RuleOf<'a>>,
    /// The arrival port and the ports a verdict may name.
    pub declared: &'a Declared<'a>,
}

/// The ports a frame of one lane may leave by: its arrival port and the ports its
/// rules send to. Built once per batch; the ports below 64 are a bit set, so the
/// check of a verdict's port is a shift and a test.
pub(super) struct Declared<'a> {
    pub arrival: PortId,
    low: u64,
    /// Every port, for those of 64 and up.
    egress: &'a [PortId],
}

impl<'a> Declared<'a> {
    pub(super) fn new(arrival: PortId, egress: &'a [PortId]) -> Self {
        let low = std::iter::once(arrival)
            .chain(egress.iter().copied())
            .filter(|&p| p < 64)
            .fold(0u64, |m, p| m | 1 << p);
        Declared {
            arrival,
            low,
            egress,
        }
    }

    /// Port `p`, if the lane's frames may leave by it.
    #[inline(always)]
    pub(super) fn get(&self, p: PortRef) -> Option<PortIx> {
        let ok = if p.0 < 64 {
            self.low >> p.0 & 1 != 0
        } else {
            let p = PortId::from(p.0);
            p == self.arrival || self.egress.contains(&p)
        };
        ok.then_some(p.0)
    }
}

thread_local! {
    /// Set while a handler runs on this thread: the panic hook keeps quiet then and
    /// leaves the message here, for the worker to log once per lane.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that stays silent for panics inside a
/// handler (the worker counts them and logs the first of each lane) and leaves every
/// other panic to the previous hook.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_HANDLER.with(Cell::get) {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

/// What stays the same for every frame of a lane's batch that `Packet::emit` and
/// `keep` work with.
pub(super) struct EmitSite<'a> {
    pub region: &'a Region,
    /// The MACs a verdict's rewrite may need.
    pub book: &'a MacBook,
    pub origin: u16,
    pub declared: &'a Declared<'a>,
    /// The lane's kept frames.
    pub store: &'a Rc<KeptStore>,
}

/// What `Packet::emit` works with: the lane's pool, its TX queue, the batch's frames
/// for other ports.
pub(super) struct Emitter<'a> {
    pub pool: &'a mut PoolOwner,
    pub c: &'a mut WorkerCountersSnapshot,
    pub tx: &'a mut Vec<XdpDesc>,
    pub out: &'a mut Vec<(PortId, Egress)>,
    pub site: &'a EmitSite<'a>,
    /// The slot `Packet::keep` reserved for the frame of this call.
    pub kept: Option<u32>,
}

impl Emit for Emitter<'_> {
    fn keep(&mut self) -> Option<Kept> {
        if self.kept.is_some() {
            return None;
        }
        let k = self.site.store.reserve();
        self.kept = Some(k.slot());
        Some(k)
    }

    fn send_kept(&mut self, kept: Kept, v: crate::api::Verdict) -> Result<(), EmitError> {
        let ok = [
            v.mirror_port(),
            match v.kind() {
                Kind::Forward(p) => Some(p),
                _ => None,
            },
        ]
        .into_iter()
        .flatten()
        .all(|p| self.site.declared.get(p).is_some());
        if !ok {
            drop(kept);
            return Err(EmitError::UndeclaredPort);
        }
        crate::api::kept_send(kept, v);
        Ok(())
    }

    fn emit(&mut self, to: PortRef, frame: &[u8]) -> Result<(), EmitError> {
        let p = PortId::from(
            self.site
                .declared
                .get(to)
                .ok_or(EmitError::UndeclaredPort)?,
        );
        let len = frame.len();
        if len < 14 || len > self.site.region.chunk_size() as usize {
            return Err(EmitError::Length(len));
        }
        let Some(frag) = self.pool.alloc_frag(len as u32) else {
            self.c.frag_alloc_failed += 1;
            return Err(EmitError::NoMemory);
        };
        if self.site.region.write_frag(&frag, frame).is_err() {
            self.pool.release_frag(frag);
            self.c.rx_rejected += 1;
            return Err(EmitError::NoMemory);
        }
        let len = len as u32;
        if p == self.site.declared.arrival {
            match self.pool.give_tx_frag(frag) {
                Ok(addr) => self.tx.push(XdpDesc {
                    addr,
                    len,
                    options: 0,
                }),
                Err(_) => {
                    self.c.rx_rejected += 1;
                    return Err(EmitError::NoMemory);
                }
            }
        } else {
            let desc = XdpDesc {
                addr: frag.addr(),
                len,
                options: 0,
            };
            self.out.push((
                p,
                Egress {
                    desc,
                    token: frag,
                    origin: self.site.origin,
                },
            ));
        }
        self.c.handler_emitted += 1;
        Ok(())
    }
}

/// Calls handler `id` on `frame` (`d` its descriptor). On success: the frame's new
/// descriptor (the handler may have moved its head or tail), the action to apply
/// (MACs already rewritten: `action::send_rewritten` for a `back` or `forward` left
/// with `Keep`, else `action::apply_act`) and the mirror port. The frame
/// stays the caller's either way. The caller clears the
/// frame's kept parse after the call (`api::forget_parse`).
#[inline(always)]
pub(super) fn call<H: HandlerSet>(
    handlers: &H,
    lanes: &mut H::Lanes,
    id: u16,
    frame: &mut Frame,
    d: XdpDesc,
    site: &CallSite<'_>,
    emitter: &mut Emitter<'_>,
) -> Result<(XdpDesc, Act, Option<PortIx>), Refused> {
    let base = frame.addr();
    let head = (d.addr - base) as usize;
    let Some(chunk) = emitter.site.region.chunk_mut(frame) else {
        return Err(Refused::Verdict);
    };
    let meta = Meta {
        port: PortRef(site.declared.arrival as u16),
        queue: site.queue,
        rule: site.rule,
    };
    let book = emitter.site.book;
    let mut pkt = Packet::new(chunk, head, head + d.len as usize, meta, Some(emitter));
    let r = guarded(|| handlers.call(id, lanes, &mut pkt));
    let v = r.map_err(Refused::Panic)?;
    let (mut act, mirror) = verdict(v, site).ok_or(Refused::Verdict)?;
    // The MACs are rewritten here, on the view already checked for the handler,
    // rather than by the action through a second view of the chunk.
    // A `back` leaves by the arrival port: its device's MAC is the source.
    let egress = match act {
        Act::Forward { to, .. } => Some(PortId::from(to)),
        _ => Some(site.declared.arrival),
    };
    if let Act::Back { mac } | Act::Forward { mac, .. } = &mut act {
        let kept = pkt.is_kept();
        let bytes = pkt.bytes_mut();
        // Shorter than two MACs: left to the action, which drops it, counted.
        if !matches!(mac, MacRewrite::Keep) && bytes.len() >= 12 && !kept {
            rewrite_macs(bytes, *mac, egress, book).ok_or(Refused::NeighMiss)?;
            *mac = MacRewrite::Keep;
        }
    }
    let (off, len) = pkt.span();
    let d = XdpDesc {
        addr: base + off as u64,
        len: len as u32,
        options: 0,
    };
    Ok((d, act, mirror))
}

/// Runs handler code `f`, its panic caught (and kept quiet by the hook: the
/// caller counts it and logs the first).
#[inline(always)]
pub(super) fn guarded<R>(f: impl FnOnce() -> R) -> Result<R, Box<dyn std::any::Any + Send>> {
    IN_HANDLER.with(|f| f.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    IN_HANDLER.with(|f| f.set(false));
    r
}

/// What a handler panicked with: the message the panic hook kept, else the payload's.
#[cold]
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    LAST_PANIC
        .with(|p| p.borrow_mut().take())
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a handler panicked".to_string())
}

/// The worker's action and mirror for a handler's verdict: `None` for a port the
/// lane cannot send to.
#[inline(always)]
pub(super) fn verdict(
    v: crate::api::Verdict,
    site: &CallSite<'_>,
) -> Option<(Act, Option<PortIx>)> {
    let port = |p: PortRef| site.declared.get(p);
    let mac: MacRewrite = v.mac().rewrite();
    let act = match v.kind() {
        Kind::Drop => Act::Drop,
        Kind::Back => Act::Back { mac },
        Kind::Forward(to) => match port(to)? {
            p if PortId::from(p) == site.declared.arrival => Act::Back { mac },
            to => Act::Forward { to, mac },
        },
    };
    let mirror_to = match v.mirror_port() {
        None => None,
        Some(m) => Some(port(m)?),
    };
    Some((act, mirror_to))
}

#[cfg(test)]
mod tests {
    use super::Declared;
    use crate::api::PortRef;

    /// The bit set (ports below 64) and the list (64 and up) agree with the plain
    /// rule: the arrival port and the declared egress ports, nothing else.
    #[test]
    fn declared_ports_are_the_arrival_and_egress_ports_on_both_sides_of_64() {
        for (arrival, egress) in [
            (0, vec![1, 63]),
            (63, vec![64]),
            (64, vec![0, 63, 65, 4095]),
            (5, vec![]),
        ] {
            let d = Declared::new(arrival, &egress);
            for p in [0u16, 1, 2, 5, 62, 63, 64, 65, 66, 4094, 4095, u16::MAX] {
                let want = usize::from(p) == arrival || egress.contains(&usize::from(p));
                assert_eq!(
                    d.get(PortRef(p)),
                    want.then_some(p),
                    "port {p}, arrival {arrival}, egress {egress:?}"
                );
            }
        }
    }
}
