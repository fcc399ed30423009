//! The packet-function trait, what a handler declares, its per-lane state and
//! counters, and the set of handlers a program registers.

use super::{Packet, PortRef, Tick, Verdict};
use crate::config::HandlerDecl;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A packet function: the code a rule with `action = "call"` and
/// `handler = "NAME"` hands its frames to.
///
/// One value of the handler is shared by every worker (`Send + Sync`); each lane (one
/// RX queue of one port, served by one pinned worker) makes its own
/// [`Lane`](Self::Lane) state on that worker's thread, so the state needs no lock and
/// may be `!Send`. [`handle`](Self::handle) is called for each frame with that
/// state; the worker is generic over the handler, so the call is inlined, as a
/// built-in action is.
///
/// A closure `Fn(&mut Packet<'_>) -> Verdict` is a handler with no state:
///
/// ```
/// use xdpool::{Mac, Packet, Verdict};
/// let reflect = |pkt: &mut Packet<'_>| Verdict::back().with_mac(Mac::Swap);
/// # fn is_handler<H: xdpool::Handler>(_: &H) {}
/// # is_handler(&reflect);
/// ```
///
/// A handler with per-lane state and a counter:
///
/// ```
/// use xdpool::{Counter, Handler, LaneSetup, Packet, Verdict};
///
/// struct CountUdp;
/// struct Lane { udp: Counter, seen: u64 }
///
/// impl Handler for CountUdp {
///     type Lane = Lane;
///     fn lane(&self, setup: &mut LaneSetup<'_>) -> Lane {
///         Lane { udp: setup.counter("udp"), seen: 0 }
///     }
///     fn handle(&self, lane: &mut Lane, pkt: &mut Packet<'_>) -> Verdict {
///         lane.seen += 1;
///         if pkt.parse().is_ok_and(|p| p.ip_proto() == Some(17)) {
///             lane.udp.inc();
///         }
///         Verdict::drop()
///     }
/// }
/// ```
pub trait Handler: Send + Sync + 'static {
    /// What one lane keeps between frames (made on the lane's worker thread).
    type Lane: 'static;

    /// What the handler needs from the config: the ports it may send frames to and
    /// how many descriptors one frame may put on the arrival port's TX ring.
    /// Checked when the config is loaded; the worker sizes its RX batches from it.
    fn declare(&self) -> Declaration {
        Declaration::new()
    }

    /// Makes one lane's state, on the worker thread that serves the lane. Resolve
    /// port names and register counters here.
    fn lane(&self, setup: &mut LaneSetup<'_>) -> Self::Lane;

    /// Decides what becomes of one frame. The frame's bytes may be changed in
    /// place; whatever is returned, the frame is accounted for (a panic drops it,
    /// counted as `handler_panic`).
    fn handle(&self, lane: &mut Self::Lane, pkt: &mut Packet<'_>) -> Verdict;

    /// Takes a control message for one lane: how a running program changes the
    /// handler's own data (a load balancer's backends, a firewall's blocklist).
    /// Called on the lane's worker between batches, once per lane, with the text
    /// given to `xdpool control HANDLER MESSAGE` (or `Harness::control` in tests).
    /// An `Err` is the lane's answer to the sender and changes nothing else; a
    /// panic is caught and answered as an error. The default takes no messages.
    ///
    /// ```
    /// use xdpool::{Handler, LaneSetup, Packet, Verdict};
    ///
    /// struct Block;
    /// impl Handler for Block {
    ///     type Lane = Vec<[u8; 4]>;
    ///     fn lane(&self, _: &mut LaneSetup<'_>) -> Self::Lane {
    ///         Vec::new()
    ///     }
    ///     fn handle(&self, blocked: &mut Self::Lane, pkt: &mut Packet<'_>) -> Verdict {
    ///         match pkt.parse().ok().and_then(|p| p.src_ip()) {
    ///             Some(std::net::IpAddr::V4(ip)) if blocked.contains(&ip.octets()) => {
    ///                 Verdict::drop()
    ///             }
    ///             _ => Verdict::back(),
    ///         }
    ///     }
    ///     // `xdpool control block "198.18.0.9"`
    ///     fn control(&self, blocked: &mut Self::Lane, msg: &str) -> Result<(), String> {
    ///         let ip: std::net::Ipv4Addr = msg.trim().parse().map_err(|e| format!("{e}"))?;
    ///         blocked.push(ip.octets());
    ///         Ok(())
    ///     }
    /// }
    /// ```
    fn control(&self, lane: &mut Self::Lane, msg: &str) -> Result<(), String> {
        let _ = (lane, msg);
        Err("this handler takes no control messages".to_string())
    }

    /// Called on each lane's worker between batches, about every
    /// [`Declaration::tick_every`] (never without it), while the lane is attached
    /// to its device: what releases frames kept for later (a delay line, a reorder
    /// buffer's timeout) when no new frame arrives to do it. [`Tick`] sends kept
    /// frames and emits new ones as a [`Packet`] does.
    fn tick(&self, lane: &mut Self::Lane, tick: &mut Tick<'_>) {
        let _ = (lane, tick);
    }
}

impl<F> Handler for F
where
    F: Fn(&mut Packet<'_>) -> Verdict + Send + Sync + 'static,
{
    type Lane = ();

    fn lane(&self, _: &mut LaneSetup<'_>) {}

    #[inline(always)]
    fn handle(&self, _: &mut (), pkt: &mut Packet<'_>) -> Verdict {
        self(pkt)
    }
}

/// What a handler declares it may do.
///
/// ```
/// use xdpool::Declaration;
/// let d = Declaration::new().sends_to("out").sends_to("mon");
/// # let _ = d;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    pub(crate) ports: Vec<String>,
    pub(crate) tx_per_frame: usize,
    pub(crate) tick: Option<std::time::Duration>,
}

impl Declaration {
    /// Sends back out of the arrival port at most once per frame, to no other port.
    pub fn new() -> Declaration {
        Declaration {
            ports: Vec::new(),
            tx_per_frame: 1,
            tick: None,
        }
    }

    /// The handler may send frames (or mirror them) to the port named `port` in the
    /// config. A config without that port is refused when loaded.
    pub fn sends_to(mut self, port: &str) -> Declaration {
        self.ports.push(port.to_string());
        self
    }

    /// Most descriptors one frame puts on the arrival port's TX ring (0 for a
    /// handler that never sends back; 1 by default).
    pub fn tx_per_frame(mut self, n: usize) -> Declaration {
        self.tx_per_frame = n;
        self
    }

    /// Calls [`Handler::tick`] on each lane about every `every` (at least 1 ms;
    /// the worker looks at the clock only when some handler asks for ticks).
    pub fn tick_every(mut self, every: std::time::Duration) -> Declaration {
        self.tick = Some(every.max(std::time::Duration::from_millis(1)));
        self
    }
}

impl Default for Declaration {
    fn default() -> Self {
        Declaration::new()
    }
}

/// What a lane's state is made with: its port and queue, the ports its handler
/// declared, and its counters.
pub struct LaneSetup<'a> {
    pub(crate) port: PortRef,
    pub(crate) queue: u32,
    pub(crate) port_names: &'a [String],
    pub(crate) handler: &'a str,
    pub(crate) declared: &'a [String],
    pub(crate) counters: &'a UserCounters,
}

impl LaneSetup<'_> {
    /// The port this lane receives on.
    pub fn arrival(&self) -> PortRef {
        self.port
    }

    /// The name of the port this lane receives on.
    pub fn arrival_name(&self) -> &str {
        self.port_names
            .get(self.port.0 as usize)
            .map_or("", String::as_str)
    }

    /// The RX queue this lane serves.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// The port named `name`, if the handler declared it (or it is the arrival
    /// port): the only ports a verdict may name.
    pub fn port(&self, name: &str) -> Option<PortRef> {
        if name == self.arrival_name() {
            return Some(self.port);
        }
        if !self.declared.iter().any(|d| d == name) {
            return None;
        }
        let i = self.port_names.iter().position(|p| p == name)?;
        Some(PortRef(i as u16))
    }

    /// A counter of this lane, exported as `xdpool_handler_events_total` with the
    /// labels `handler`, `counter`, `port` and `queue` (and in `xdpool stats --json`
    /// and the summary). Registering a name twice returns the same counter.
    pub fn counter(&mut self, name: &str) -> Counter {
        Counter {
            cell: self.counters.register(self.handler, name),
            _one_thread: PhantomData,
        }
    }
}

/// A count one lane keeps (one writer: the lane's worker; no atomic
/// read-modify-write). Not `Send`: it stays on the worker that made it.
pub struct Counter {
    cell: Arc<AtomicU64>,
    _one_thread: PhantomData<Rc<()>>,
}

impl Counter {
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.add(1)
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        // One writer (the lane's worker): a plain load and store.
        let v = self.cell.load(Ordering::Relaxed);
        self.cell.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    /// The count now.
    pub fn get(&self) -> u64 {
        self.cell.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counter({})", self.get())
    }
}

/// One socket's user counters: (handler, counter name, value), read by the control
/// thread for the snapshot.
#[derive(Debug, Default)]
pub struct UserCounters {
    cells: Mutex<Vec<(String, String, Arc<AtomicU64>)>>,
}

impl UserCounters {
    fn register(&self, handler: &str, name: &str) -> Arc<AtomicU64> {
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, c)) = cells.iter().find(|(h, n, _)| h == handler && n == name) {
            return c.clone();
        }
        let c = Arc::new(AtomicU64::new(0));
        cells.push((handler.to_string(), name.to_string(), c.clone()));
        c
    }

    /// Every counter: (handler, name, value), in registration order.
    pub fn read(&self) -> Vec<(String, String, u64)> {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells
            .iter()
            .map(|(h, n, c)| (h.clone(), n.clone(), c.load(Ordering::Relaxed)))
            .collect()
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl<R: super::HandlerSet, H: super::Handler> Sealed for (R, super::Named<H>) {}
}

/// A handler and the name rules call it by (what [`App::handler`](super::App::handler)
/// registers).
pub struct Named<H> {
    name: String,
    handler: H,
}

/// The handlers a program registered, as one type: `()` for none, `(R, Named<H>)`
/// for `R` and one more. The worker is generic over it, so picking a rule's handler
/// is a chain of compares on its id, and each handler's call is inlined. Sealed:
/// [`App::handler`](super::App::handler) builds it.
pub trait HandlerSet: sealed::Sealed + Send + Sync + 'static {
    /// Every handler's lane state.
    type Lanes: 'static;
    /// How many handlers.
    const COUNT: u16;
    /// Each handler's name and declaration, in id order.
    #[doc(hidden)]
    fn decls(&self, out: &mut Vec<HandlerDecl>);
    /// Makes every handler's state for one lane.
    #[doc(hidden)]
    fn lanes(&self, setup: &mut LaneSetup<'_>, decls: &[HandlerDecl]) -> Self::Lanes;
    /// Calls handler `id`.
    #[doc(hidden)]
    fn call(&self, id: u16, lanes: &mut Self::Lanes, pkt: &mut Packet<'_>) -> Verdict;
    /// Hands handler `id` a control message for one lane.
    #[doc(hidden)]
    fn control(&self, id: u16, lanes: &mut Self::Lanes, msg: &str) -> Result<(), String>;
    /// Ticks every handler that asked for ticks.
    #[doc(hidden)]
    fn tick(&self, lanes: &mut Self::Lanes, tick: &mut Tick<'_>);
}

impl HandlerSet for () {
    type Lanes = ();
    const COUNT: u16 = 0;
    fn decls(&self, _: &mut Vec<HandlerDecl>) {}
    fn lanes(&self, _: &mut LaneSetup<'_>, _: &[HandlerDecl]) {}
    #[inline(always)]
    fn call(&self, _: u16, _: &mut (), _: &mut Packet<'_>) -> Verdict {
        // No rule can name a handler of a program that registered none (the config
        // is refused at load).
        Verdict::drop()
    }
    fn control(&self, _: u16, _: &mut (), _: &str) -> Result<(), String> {
        Err("no such handler".to_string())
    }
    fn tick(&self, _: &mut (), _: &mut Tick<'_>) {}
}

impl<R: HandlerSet, H: Handler> HandlerSet for (R, Named<H>) {
    type Lanes = (R::Lanes, H::Lane);
    const COUNT: u16 = R::COUNT + 1;

    fn decls(&self, out: &mut Vec<HandlerDecl>) {
        self.0.decls(out);
        let d = self.1.handler.declare();
        out.push(HandlerDecl {
            name: self.1.name.clone(),
            ports: d.ports,
            tx_per_frame: d.tx_per_frame,
            tick: d.tick,
        });
    }

    fn lanes(&self, setup: &mut LaneSetup<'_>, decls: &[HandlerDecl]) -> Self::Lanes {
        let rest = self.0.lanes(setup, decls);
        let decl = &decls[R::COUNT as usize];
        let mut mine = LaneSetup {
            port: setup.port,
            queue: setup.queue,
            port_names: setup.port_names,
            handler: &decl.name,
            declared: &decl.ports,
            counters: setup.counters,
        };
        (rest, self.1.handler.lane(&mut mine))
    }

    #[inline(always)]
    fn call(&self, id: u16, lanes: &mut Self::Lanes, pkt: &mut Packet<'_>) -> Verdict {
        if id == R::COUNT {
            self.1.handler.handle(&mut lanes.1, pkt)
        } else {
            self.0.call(id, &mut lanes.0, pkt)
        }
    }

    fn control(&self, id: u16, lanes: &mut Self::Lanes, msg: &str) -> Result<(), String> {
        if id == R::COUNT {
            self.1.handler.control(&mut lanes.1, msg)
        } else {
            self.0.control(id, &mut lanes.0, msg)
        }
    }

    fn tick(&self, lanes: &mut Self::Lanes, tick: &mut Tick<'_>) {
        self.0.tick(&mut lanes.0, tick);
        self.1.handler.tick(&mut lanes.1, tick);
    }
}

impl<H> Named<H> {
    pub(crate) fn new(name: &str, handler: H) -> Named<H> {
        Named {
            name: name.to_string(),
            handler,
        }
    }
}
