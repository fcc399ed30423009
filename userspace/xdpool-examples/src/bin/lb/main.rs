//! An L4 load balancer: frames arriving on port `in` are spread over backends behind
//! port `out` by rendezvous (highest-random-weight) hashing of the 5-tuple, so a flow
//! keeps its backend and removing a backend moves only the flows it had.
//!
//! The rule's `arg` lists the backends: `MAC` or `MAC=IPv4`, comma-separated. The
//! destination MAC becomes the backend's; with an IP, the IPv4 destination too, with
//! the IPv4 header checksum and the UDP/TCP checksum updated incrementally
//! (RFC 1624). Each arg's list is parsed once per lane, at its first frame (two
//! rules with their own args, two VIPs, keep one parse each); a reload that changes
//! an arg takes effect with the next frame. `xdpool control lb LIST` replaces every
//! rule's backends until a frame of a newer rule list brings an arg text the lane
//! had not parsed before that reload (see [`Lane::find_arg`]).
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::sync::Arc;
use xdpool::wire::checksum::Change;
use xdpool::wire::{proto, IPV4_MIN_HLEN, L3};
use xdpool::{Counter, Declaration, Handler, LaneSetup, Mac, Packet, PortRef, Verdict};

mod backends;
use backends::Backends;

/// The load balancer.
pub struct Lb;

/// One lane's state: the port `out`, the backends of each arg seen, counters.
pub struct Lane {
    out: PortRef,
    /// The backends of each arg the frames brought since the last reload (two VIPs,
    /// two entries), `last` the last frame's: the next frame's is told the same by
    /// one pointer compare (`Packet::shared_arg`).
    args: Vec<ArgBackends>,
    last: usize,
    /// The newest rule list a frame came under (`Packet::rules_generation`; 0: no
    /// frame yet), and the one before it.
    generation: u32,
    previous: u32,
    /// `args` as they were when a frame of a newer list came: an arg with the same
    /// text keeps its parse.
    before: Vec<ArgBackends>,
    /// Backends given by `xdpool control lb LIST`: they replace every rule's until
    /// a reload brings an arg text not parsed before it (`find_arg`).
    controlled: Option<Backends>,
    balanced: Counter,
    bad_arg: Counter,
    unsupported: Counter,
}

/// One rule arg and its backends.
struct ArgBackends {
    /// As the rule list shares it: equal texts, one `Arc`.
    arg: Option<Arc<str>>,
    /// Shared by the entries of one text (one per rule list that had it).
    backends: Rc<Result<Backends, String>>,
}

impl ArgBackends {
    fn is(&self, arg: Option<&Arc<str>>) -> bool {
        self.arg.as_ref().map(Arc::as_ptr) == arg.map(Arc::as_ptr)
    }

    fn text(&self) -> &str {
        self.arg.as_deref().unwrap_or("")
    }
}

impl Handler for Lb {
    type Lane = Lane;

    fn declare(&self) -> Declaration {
        // Everything leaves `out`; nothing goes back out of `in`.
        Declaration::new().sends_to("out").tx_per_frame(0)
    }

    fn lane(&self, setup: &mut LaneSetup<'_>) -> Lane {
        Lane {
            out: setup.port("out").expect("declared, so the config has it"),
            args: Vec::new(),
            last: 0,
            generation: 0,
            previous: 0,
            before: Vec::new(),
            controlled: None,
            balanced: setup.counter("balanced"),
            bad_arg: setup.counter("bad_arg"),
            unsupported: setup.counter("unsupported"),
        }
    }

    fn handle(&self, lane: &mut Lane, pkt: &mut Packet<'_>) -> Verdict {
        let arg = pkt.shared_arg();
        let i = match lane.args.get(lane.last) {
            Some(a) if a.is(arg) => lane.last,
            // Another rule's arg already parsed (two VIPs), or one to look up.
            _ => match lane.args.iter().position(|a| a.is(arg)) {
                Some(i) => i,
                None => lane.find_arg(arg, pkt.rules_generation(), pkt.rule_name()),
            },
        };
        lane.last = i;
        let parsed = lane.args[i].backends.as_ref().as_ref().ok();
        let Some(backends) = lane.controlled.as_ref().or(parsed) else {
            lane.bad_arg.inc();
            return Verdict::drop();
        };
        let Some((flow, v4)) = flow_of(pkt) else {
            lane.unsupported.inc();
            return Verdict::drop();
        };
        let backend = backends.pick(flow);
        if let Some(ip) = backend.ip {
            // A plain frame (IPv4 without options, UDP or TCP) at the offsets the one
            // parse found; any other to `Packet::set_ipv4_dst`, which reads it again
            // and refuses (the frame as it was) an IPv6 frame and one whose checksums
            // it cannot keep right (UDP-Lite, DCCP, a source route under way).
            match v4 {
                Some(at) if at.plain => rewrite_dst_ipv4(pkt.bytes_mut(), at, ip),
                _ => {
                    if pkt.set_ipv4_dst(ip).is_err() {
                        lane.unsupported.inc();
                        return Verdict::drop();
                    }
                }
            }
        }
        lane.balanced.inc();
        Verdict::forward(lane.out).with_mac(Mac::To(backend.mac))
    }

    /// `xdpool control lb "MAC=IP,MAC=IP,..."`: the backends from now on, in the
    /// arg's syntax (a backend keeps its flows by identity, so removing one moves
    /// only its flows). A list that does not parse is refused and changes nothing.
    fn control(&self, lane: &mut Lane, msg: &str) -> Result<(), String> {
        lane.controlled = Some(Backends::parse(msg.trim())?);
        Ok(())
    }
}

impl Lane {
    /// An arg not parsed for its `Arc` yet: a rule's first frame, or a frame of a
    /// new rule list (a reload brings new `Arc`s). Its text keeps the parse it had in
    /// the last list. A frame of a list newer than any before (not one of the list
    /// a hand-over is leaving, which may still come) with a text the lane had not
    /// parsed before ends a controlled list: a reload changed an arg (or brought a
    /// rule that had no frame here before it). Returns the arg's index in `args`.
    #[cold]
    fn find_arg(&mut self, arg: Option<&Arc<str>>, generation: u32, rule: Option<&str>) -> usize {
        if generation != self.generation && generation != self.previous {
            self.previous = std::mem::replace(&mut self.generation, generation);
            self.before = std::mem::take(&mut self.args);
        }
        let text = arg.map_or("", |a| a);
        let known = self
            .args
            .iter()
            .chain(&self.before)
            .find(|a| a.text() == text)
            .map(|a| a.backends.clone());
        let backends = known.unwrap_or_else(|| {
            if generation == self.generation && !self.before.is_empty() {
                self.controlled = None;
            }
            let parsed = Backends::parse(text);
            if let Err(e) = &parsed {
                tracing::warn!(rule = ?rule, "lb: {e}; dropping this rule's frames");
            }
            Rc::new(parsed)
        });
        self.args.push(ArgBackends {
            arg: arg.cloned(),
            backends,
        });
        self.args.len() - 1
    }
}

/// Where an IPv4 frame's headers are, for the destination rewrite.
#[derive(Clone, Copy)]
struct V4At {
    l3: usize,
    /// The L4 header and its protocol, when the frame carries one (not for a
    /// non-first fragment).
    l4: Option<(usize, u8)>,
    /// No IPv4 options (so no source route) and a UDP or TCP header: the only
    /// frames `rewrite_dst_ipv4` takes.
    plain: bool,
}

/// The flow's hash over (source, destination, protocol, ports), and where its IPv4
/// headers are. Fragments hash without ports, so all of one datagram's fragments
/// go to one backend.
fn flow_of(pkt: &Packet<'_>) -> Option<(u64, Option<V4At>)> {
    let p = pkt.parse().ok()?;
    let proto = p.ip_proto()?;
    let (sport, dport) = match p.ports() {
        Some(ports) if !p.is_fragment() => ports,
        _ => (0, 0),
    };
    let tail = u64::from(proto) << 32 | u64::from(sport) << 16 | u64::from(dport);
    let mut h = backends::FlowHash::new();
    let v4 = match p.l3() {
        L3::V4 { src, dst } => {
            h.word(u64::from(src.to_bits()) << 32 | u64::from(dst.to_bits()));
            true
        }
        L3::V6 { src, dst } => {
            for a in [src.to_bits(), dst.to_bits()] {
                h.word((a >> 64) as u64);
                h.word(a as u64);
            }
            false
        }
        L3::None => return None,
    };
    h.word(tail);
    let v4 = v4.then(|| {
        let (l3, l4) = (p.l3_offset(), p.l4_offset());
        V4At {
            l3,
            // A non-first fragment has no L4 header (the parser gives it no offset).
            l4: l4.map(|o| (o, proto)),
            plain: l4 == Some(l3 + IPV4_MIN_HLEN) && matches!(proto, proto::TCP | proto::UDP),
        }
    });
    Some((h.finish(), v4))
}

/// Sets the IPv4 destination of a plain frame (`V4At::plain`) to `ip`, updating the
/// header checksum and the UDP or TCP checksum (whose pseudo-header holds the
/// address) without summing the frame, as `Packet::set_ipv4_dst` does, without its
/// second parse and checks (about 180 worker instructions a frame here).
fn rewrite_dst_ipv4(frame: &mut [u8], at: V4At, ip: Ipv4Addr) {
    let dst = at.l3 + 16;
    let old: [u8; 4] = frame[dst..dst + 4].try_into().expect("parsed IPv4 header");
    let new = ip.octets();
    if old == new {
        return;
    }
    frame[dst..dst + 4].copy_from_slice(&new);
    let change = Change::of32(old, new);
    change.apply(frame, at.l3 + 10);
    // (A parsed frame holds its whole UDP or TCP header: both fit.)
    match at.l4 {
        Some((l4, 6)) => change.apply(frame, l4 + 16),
        // A UDP checksum of 0 (none computed) stays 0.
        Some((l4, 17)) => change.apply_udp(frame, l4 + 6),
        _ => true,
    };
}

fn main() {
    let args = xdpool_examples::Args::parse();
    xdpool_examples::finish(args.app().handler("lb", Lb).run());
}

#[cfg(test)]
mod tests;
