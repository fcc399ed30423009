//! Drive a program's packet functions without root, sockets or a NIC: the worker
//! runs over rings on the heap and this module plays the kernel on their other side
//! (enabled by the `testing` cargo feature).
//!
//! A [`Harness`] is built from config text and the same handlers an
//! [`App`](crate::App) registers. Frames go in as bytes (or from a pcap/pcapng
//! file) on a named port; the steering rules decide, as the XDP program would,
//! whether a frame reaches a worker at all; [`Harness::run`] lets the worker act;
//! [`Harness::sent`] gives what left each port, byte for byte; the counters and the
//! frame accounting say what happened to the rest.
//!
//! ```
//! use xdpool::testing::{FrameBuilder, Harness, Steered};
//! use xdpool::{Mac, Packet, Verdict};
//!
//! let config = r#"
//! [[port]]
//! name = "in"
//! interface = "veth0"
//! queues = [0]
//!
//! [[rule]]
//! proto = "udp"
//! action = "call"
//! handler = "reflect"
//! "#;
//! let mut h = Harness::builder(config)
//!     .handler("reflect", |pkt: &mut Packet<'_>| Verdict::back().with_mac(Mac::Swap))
//!     .build()
//!     .unwrap();
//! let frame = FrameBuilder::new()
//!     .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
//!     .ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
//!     .udp(1024, 9)
//!     .build()
//!     .bytes;
//! assert_eq!(h.send("in", &frame), Steered::Worker);
//! h.run();
//! let out = h.sent("in");
//! assert_eq!(out.len(), 1);
//! assert_eq!(&out[0][..6], &frame[6..12]);
//! h.check_accounting().unwrap();
//! ```

use crate::api::{Handler, HandlerSet, Named};
use crate::config::{Action, Config, HandlerTable, ValidRule};
use crate::error::RunError as Error;
use crate::neigh::{MacBook, Neighbours};
use crate::worker::classify::Classifier;
use crate::worker::handoff::Remotes;
use crate::worker::harness::{heap_socket, Driven, HeapKernel, Undelivered};
use crate::worker::rules::RuleSlot;
use crate::worker::{Fabric, LaneSpec, PortRings, PortShared, Waker, WorkerSpec};
use pool::{Accounting, Region, RegionConfig};
use std::net::IpAddr;
use std::sync::Arc;

pub use crate::wire::build::{BuiltFrame, ExtHeader, FrameBuilder};

/// A config of two ports, `in` (interface `a0`) and `out` (`b0`), queue 0 each, 4096
/// frames and rings of 512, followed by `rules` (`[[rule]]` tables): what most
/// handler tests start from. The interfaces need not exist.
///
/// ```
/// use xdpool::testing::{two_ports, Harness};
/// use xdpool::{Packet, Verdict};
///
/// let config = two_ports(
///     r#"
/// [[rule]]
/// port = "in"
/// action = "call"
/// handler = "sink"
/// "#,
/// );
/// let h = Harness::builder(&config)
///     .handler("sink", |_: &mut Packet<'_>| Verdict::drop())
///     .build()
///     .unwrap();
/// # drop(h);
/// ```
pub fn two_ports(rules: &str) -> String {
    format!(
        r#"
[umem]
frames = 4096

[rings]
fill = 512
rx = 512
tx = 512
completion = 512

[[port]]
name = "in"
interface = "a0"
queues = [0]

[[port]]
name = "out"
interface = "b0"
queues = [0]

{rules}
"#
    )
}

/// How the steering rules took a frame sent to a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steered {
    /// Into the port's socket: a worker acts on it (its rule's action or handler).
    Worker,
    /// To the kernel's stack (no rule matched, or the rule says `pass`).
    Passed,
    /// Dropped by the XDP program (`xdpdrop`).
    XdpDropped,
}

/// What [`Harness::finish`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// Kept frames whose handle was never dropped nor sent.
    pub kept_leaked: u64,
    /// Frames still out when the pools were destroyed.
    pub inflight_at_destroy: u64,
}

/// Builds a [`Harness`]: config text, handlers, and the MACs a `forward` needs.
pub struct Builder<H: HandlerSet = ()> {
    config: String,
    handlers: H,
    macs: Vec<(String, [u8; 6])>,
    next_hops: Vec<(String, IpAddr, [u8; 6])>,
}

/// One worker serving queue `queues[0]` of every port of a config, over heap rings.
pub struct Harness<H: HandlerSet = ()> {
    driven: Driven<H>,
    kernels: Vec<HeapKernel>,
    ports: Vec<String>,
    steering: Vec<Vec<ValidRule>>,
    /// Each lane's rule list, as the control thread publishes it.
    slots: Vec<Arc<RuleSlot>>,
    /// The generation of the rule list in force.
    generation: u32,
    sent: Vec<Vec<Vec<u8>>>,
    fabric: Arc<Fabric>,
    region: Arc<Region>,
    table: Arc<HandlerTable>,
}

impl Harness<()> {
    /// A harness for `config` (the TOML an `App` reads; interfaces need not exist).
    pub fn builder(config: &str) -> Builder<()> {
        Builder {
            config: config.to_string(),
            handlers: (),
            macs: Vec::new(),
            next_hops: Vec::new(),
        }
    }
}

impl<H: HandlerSet> Builder<H> {
    /// Registers `handler` under `name`, as [`App::handler`](crate::App::handler).
    pub fn handler<F: Handler>(self, name: &str, handler: F) -> Builder<(H, Named<F>)> {
        Builder {
            config: self.config,
            handlers: (self.handlers, Named::new(name, handler)),
            macs: self.macs,
            next_hops: self.next_hops,
        }
    }

    /// Port `port`'s device MAC (what `Mac::NextHop` and `Mac::To` write as source).
    pub fn device_mac(mut self, port: &str, mac: [u8; 6]) -> Self {
        self.macs.push((port.to_string(), mac));
        self
    }

    /// A neighbour of port `port` (what `Mac::NextHop` looks up).
    pub fn next_hop(mut self, port: &str, ip: IpAddr, mac: [u8; 6]) -> Self {
        self.next_hops.push((port.to_string(), ip, mac));
        self
    }

    /// Checks the config against the handlers (the errors `App::run` gives) and
    /// starts the worker: every fill ring stocked.
    pub fn build(self) -> Result<Harness<H>, Error> {
        let mut decls = Vec::new();
        self.handlers.decls(&mut decls);
        let table = Arc::new(HandlerTable::new(decls).map_err(Error::Usage)?);
        let cfg = Config::parse_with(&self.config, table.clone())
            .map_err(|e| Error::Usage(e.to_string()))?;
        let defs = cfg.ports();
        let ports: Vec<String> = defs.iter().map(|p| p.name.clone()).collect();
        let port_of = |name: &str| {
            ports
                .iter()
                .position(|p| p == name)
                .ok_or_else(|| Error::Usage(format!("no port named `{name}` in the config")))
        };
        let mut book = MacBook::new(ports.len());
        for (i, _) in ports.iter().enumerate() {
            book.set_device(i, [2, 0, 0, 0, 0xd0, i as u8]);
        }
        for (p, mac) in &self.macs {
            book.set_device(port_of(p)?, *mac);
        }
        for (p, ip, mac) in &self.next_hops {
            book.set_next_hop(port_of(p)?, *ip, *mac);
        }
        let region = Region::new(RegionConfig {
            frames: *cfg.umem.frames.get_ref(),
            chunk_size: *cfg.umem.chunk_size.get_ref(),
            ..RegionConfig::default()
        })
        .map_err(|e| Error::Failure(format!("cannot make the UMEM: {e}")))?;
        let rules = cfg.valid_rules();
        let steering = rules_by_port(&rules, ports.len());
        let tx = *cfg.rings.tx.get_ref();
        let rings = PortRings {
            fill: *cfg.rings.fill.get_ref(),
            rx: *cfg.rings.rx.get_ref(),
            copy_fill: cfg.rings.copy_fill,
        };
        let waker =
            Waker::new().map_err(|e| Error::Failure(format!("cannot make an eventfd: {e}")))?;
        let sockets = defs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                PortShared::new(
                    i,
                    &d.name,
                    &d.interface,
                    d.queues.first().copied().unwrap_or(0),
                    None,
                    tx as usize,
                    waker.clone(),
                )
            })
            .collect();
        let fabric = Arc::new(Fabric {
            sockets,
            port_sockets: (0..ports.len()).map(|p| vec![p]).collect(),
            remotes: Remotes::new(ports.len()),
            neighbours: Neighbours::new(book),
            capture: Default::default(),
            file_capture: Default::default(),
            handler_failure: Default::default(),
            mailbox: Default::default(),
            stats_due: Default::default(),
        });
        // Generation 1, as a run's first list (0 is no list's: an untagged frame's).
        let slots: Vec<Arc<RuleSlot>> = steering
            .iter()
            .map(|s| RuleSlot::new(1, Classifier::new(s.clone())))
            .collect();
        let lanes = (0..ports.len())
            .map(|p| LaneSpec {
                socket: p,
                port: p,
                queue_pos: 0,
                rules: slots[p].clone(),
                rings,
            })
            .collect();
        // Driven pass by pass by the caller: it never waits.
        let spec = WorkerSpec {
            mode: crate::config::WaitMode::Spin,
            poll_coalesce: std::time::Duration::ZERO,
            ..WorkerSpec::from_config(&cfg, None, lanes, 0)
        };
        crate::worker::install_panic_hook();
        let mut driven = Driven::new(&region, spec, fabric.clone(), Arc::new(self.handlers));
        let mut kernels = Vec::new();
        for p in 0..ports.len() {
            let (io, kernel) = heap_socket(&region, rings.fill, rings.rx, tx);
            driven.attach(p, io);
            kernels.push(kernel);
        }
        driven.pass();
        Ok(Harness {
            driven,
            kernels,
            sent: vec![Vec::new(); ports.len()],
            ports,
            steering,
            slots,
            generation: 1,
            fabric,
            region,
            table,
        })
    }
}

/// `rules` split into each port's list, in order.
fn rules_by_port(rules: &[ValidRule], ports: usize) -> Vec<Vec<ValidRule>> {
    (0..ports)
        .map(|p| rules.iter().filter(|r| r.port == p).cloned().collect())
        .collect()
}

impl<H: HandlerSet> Harness<H> {
    fn port(&self, name: &str) -> usize {
        self.ports
            .iter()
            .position(|p| p == name)
            .unwrap_or_else(|| {
                panic!(
                    "no port named `{name}`: the config's ports are {:?}",
                    self.ports
                )
            })
    }

    /// Port `port` receives `frame`: steered by the port's rules as the XDP program
    /// steers (first match; a rule without conditions takes every frame), and, when
    /// steered to the worker, put on the socket's RX ring. Panics for an unknown
    /// port or a frame longer than a chunk's room.
    pub fn send(&mut self, port: &str, frame: &[u8]) -> Steered {
        let p = self.port(port);
        let parsed = crate::wire::parse(frame).ok();
        let rule = self.steering[p].iter().find(|r| match &parsed {
            Some(parsed) => crate::worker::classify::matches(r, parsed),
            None => r.matches_anything(),
        });
        match rule.map(|r| r.action) {
            None | Some(Action::Pass) => return Steered::Passed,
            Some(Action::Xdpdrop) => return Steered::XdpDropped,
            Some(_) => {}
        }
        for _ in 0..64 {
            match self.kernels[p].deliver(frame) {
                Ok(()) => return Steered::Worker,
                Err(Undelivered::TooLong) => panic!(
                    "a {}-byte frame does not fit a chunk's room after the headroom",
                    frame.len()
                ),
                Err(Undelivered::NoFillEntry | Undelivered::RxRingFull) => self.run(),
            }
        }
        panic!("port `{port}`: the worker takes no frames (no fill entries, RX ring full)")
    }

    /// Every frame of a pcap or pcapng file is sent to `port`; returns how many were
    /// steered to the worker.
    pub fn send_pcap(&mut self, port: &str, path: &std::path::Path) -> std::io::Result<usize> {
        let data = std::fs::read(path)?;
        let frames = read_capture(&data).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        Ok(frames
            .iter()
            .filter(|f| self.send(port, f) == Steered::Worker)
            .count())
    }

    /// Lets the worker act on everything it was sent, the kernel send what the TX
    /// rings hold and complete it, until nothing moves.
    pub fn run(&mut self) {
        for _ in 0..10_000 {
            let busy = self.driven.pass();
            let mut sent = 0;
            for (p, k) in self.kernels.iter().enumerate() {
                let out = k.send();
                sent += out.len();
                self.sent[p].extend(out);
            }
            if !busy && sent == 0 {
                self.driven.pass();
                self.driven.publish();
                return;
            }
        }
        panic!("the worker did not settle in 10 000 passes");
    }

    /// Sends `msg` to every lane of handler `handler`, as `xdpool control HANDLER
    /// MSG` does, and lets the worker take it between passes: the number of lanes
    /// that took it, or the first lane's refusal (`PORT queue Q: why`).
    pub fn control(&mut self, handler: &str, msg: &str) -> Result<usize, String> {
        let id = self.table.id_of(handler)?;
        let seq = self.fabric.mailbox.post(id, msg);
        self.run();
        let answers = self.fabric.mailbox.answers(seq);
        if answers.len() != self.ports.len() {
            return Err(format!(
                "{} of {} lanes answered",
                answers.len(),
                self.ports.len()
            ));
        }
        for a in &answers {
            if let Err(why) = &a.result {
                return Err(format!("{} queue {}: {why}", a.port, a.queue));
            }
        }
        Ok(answers.len())
    }

    /// Replaces the rule lists with `config`'s, as `xdpool rules apply` (or SIGHUP)
    /// does on a running program: each port whose list changed takes the new one
    /// under a new generation (frames sent before are acted on under the old list,
    /// this runs them first; frames sent after are steered and acted on under the
    /// new one); a port whose list is the same keeps it, its `arg`s too. The
    /// handlers' lane states stay, and
    /// [`Packet::rules_generation`](crate::Packet::rules_generation) is new on the
    /// ports that changed. The config must name the same ports in the same order (a
    /// reload changes rules, not ports); one that does not parse, or changes the
    /// ports, is refused and changes nothing. Takes some 20 ms: the worker's
    /// hand-over from one list to the next runs on the clock, as in a run (a lane
    /// that does not take or settle on the new list within 5 s is an error, after
    /// the list was published). Unlike a run's, file captures of the rules are not
    /// set up.
    ///
    /// ```
    /// use xdpool::testing::{two_ports, FrameBuilder, Harness, Steered};
    /// use xdpool::{Packet, Verdict};
    ///
    /// let rule = |proto: &str| {
    ///     two_ports(&format!(
    ///         "[[rule]]\nport = \"in\"\nproto = \"{proto}\"\naction = \"call\"\nhandler = \"back\""
    ///     ))
    /// };
    /// let mut h = Harness::builder(&rule("udp"))
    ///     .handler("back", |_: &mut Packet<'_>| Verdict::back())
    ///     .build()
    ///     .unwrap();
    /// let udp = FrameBuilder::new().udp(1024, 9).build().bytes;
    /// assert_eq!(h.send("in", &udp), Steered::Worker);
    /// h.reload(&rule("tcp")).unwrap();
    /// assert_eq!(h.send("in", &udp), Steered::Passed);
    /// ```
    pub fn reload(&mut self, config: &str) -> Result<(), Error> {
        let cfg = Config::parse_with(config, self.table.clone())
            .map_err(|e| Error::Usage(e.to_string()))?;
        let ports: Vec<String> = cfg.ports().iter().map(|p| p.name.clone()).collect();
        if ports != self.ports {
            return Err(Error::Usage(format!(
                "a reload changes rules, not ports: the ports are {:?}, the new config's {ports:?}",
                self.ports
            )));
        }
        self.run();
        let lists = rules_by_port(&cfg.valid_rules(), self.ports.len());
        let changed: Vec<(usize, Vec<ValidRule>)> = lists
            .into_iter()
            .enumerate()
            .filter(|(p, list)| *list != self.steering[*p])
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        self.generation = crate::steer::next_generation(self.generation);
        let mut versions = Vec::new();
        for (p, list) in changed {
            self.steering[p] = list.clone();
            let set = crate::worker::rules::RuleSet::new(self.generation, Classifier::new(list));
            versions.push((p, self.slots[p].publish(Arc::new(set))));
        }
        // As the control thread: the lanes take the list, the (emulated) XDP side
        // goes live with it, the lanes settle.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        for &(p, v) in &versions {
            self.drive_until(deadline, "take", false, |s| s.slots[p].taken(v))?;
            self.slots[p].mark_live(v);
        }
        for &(p, v) in &versions {
            self.drive_until(deadline, "settle on", true, |s| s.slots[p].settled(v))?;
        }
        Ok(())
    }

    /// Runs worker passes (with a short nap each when `nap`: the hand-over waits on
    /// the clock) until `done`, or fails at `deadline` naming what the lane did not
    /// do with the new rules.
    fn drive_until(
        &mut self,
        deadline: std::time::Instant,
        what: &str,
        nap: bool,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), Error> {
        while !done(self) {
            self.driven.pass();
            if nap {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::Failure(format!(
                    "a lane did not {what} the new rules in 5 s"
                )));
            }
        }
        Ok(())
    }

    /// Moves the clock the handlers' ticks see on by `d`, then runs as
    /// [`run`](Self::run) does (a lane's tick is due when `d` reaches the
    /// handler's `Declaration::tick_every`).
    pub fn advance(&mut self, d: std::time::Duration) {
        self.driven.advance(d);
        self.run();
    }

    /// The frames that left `port` since the last call, in order, byte for byte.
    pub fn sent(&mut self, port: &str) -> Vec<Vec<u8>> {
        let p = self.port(port);
        std::mem::take(&mut self.sent[p])
    }

    /// A built-in counter of `port`'s queue by its name in `xdpool stats --json`
    /// (`rx_packets`, `action_drop`, `forwarded`, `handler_calls`, `handler_panics`...).
    /// Panics for a name that is not a counter.
    pub fn counter(&self, port: &str, name: &str) -> u64 {
        let c = self.driven.counters(self.port(port));
        let v = serde_json::to_value(c).expect("counters serialize");
        v.get(name).and_then(|x| x.as_u64()).unwrap_or_else(|| {
            let names: Vec<&str> = v
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect())
                .unwrap_or_default();
            panic!(
                "no counter `{name}` on port `{port}`: the counters are {}",
                names.join(", ")
            )
        })
    }

    /// A handler's counter on `port`'s queue (0 when never registered).
    pub fn user_counter(&self, port: &str, handler: &str, name: &str) -> u64 {
        self.fabric.sockets[self.port(port)]
            .user_counters
            .read()
            .into_iter()
            .find(|(h, n, _)| h == handler && n == name)
            .map_or(0, |(_, _, v)| v)
    }

    /// Stops the worker as a run's end does (the handlers' states dropped first, so
    /// every `Kept` they hold gives its frame back) and says what was left: kept
    /// frames whose handle leaked, and frames still out when the pools were
    /// destroyed (a stalled shutdown, after a 500 ms wait).
    pub fn finish(self) -> Finished {
        let exits = self.driven.finish();
        Finished {
            kept_leaked: exits.iter().map(|e| e.counters.kept_leaked).sum(),
            inflight_at_destroy: exits.iter().map(|e| e.inflight_at_destroy).sum(),
        }
    }

    /// The UMEM's frame accounting: every frame in exactly one place, and none held
    /// by the application at rest (call after [`run`](Self::run)).
    pub fn check_accounting(&mut self) -> Result<Accounting, String> {
        self.driven.drain_frags();
        self.driven.publish();
        let a = self.region.accounting();
        a.check().map_err(|e| format!("{e}: {a:?}"))?;
        if a.application != 0 {
            return Err(format!(
                "{} frames still with the application at rest: {a:?}",
                a.application
            ));
        }
        Ok(a)
    }
}

/// The frames of a pcap or pcapng file.
fn read_capture(data: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    if data.len() >= 4 && data[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut r = pcap_file::pcapng::PcapNgReader::new(data).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some(block) = r.next_block() {
            match block.map_err(|e| e.to_string())? {
                pcap_file::pcapng::Block::EnhancedPacket(p) => out.push(p.data.to_vec()),
                pcap_file::pcapng::Block::SimplePacket(p) => out.push(p.data.to_vec()),
                _ => {}
            }
        }
        return Ok(out);
    }
    let mut r = pcap_file::pcap::PcapReader::new(data).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.map_err(|e| e.to_string())?.data.to_vec());
    }
    Ok(out)
}
