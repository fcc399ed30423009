//! Answers ARP requests and ICMP echo requests for the IPv4 addresses of its rule's
//! `arg`: each reply is a new frame (`Packet::emit`, a small frag of a shared
//! chunk) sent out of the port the request came in on, and the request is dropped;
//! everything else is dropped too (counted `ignored`).
//!
//! The `arg`: `mac=MAC,ip=IPv4[,ip=IPv4...]`, the MAC the ARP replies give for the
//! addresses (the handler cannot read the port's own MAC in this version).
//! Counters: `arp_replies`, `echo_replies`, `ignored`, `bad_arg`, `emit_failed`.
use std::net::Ipv4Addr;
use xdpool::wire::checksum::Change;
use xdpool::{Counter, Handler, LaneSetup, Packet, Verdict};

/// The responder.
pub struct Responder;

/// What the arg says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answers {
    /// The MAC ARP replies give.
    pub mac: [u8; 6],
    /// The addresses answered for.
    pub ips: Vec<Ipv4Addr>,
}

impl Answers {
    /// Parses `mac=MAC,ip=IPv4[,ip=IPv4...]`.
    pub fn parse(arg: &str) -> Result<Answers, String> {
        let (mut mac, mut ips) = (None, Vec::new());
        for kv in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match kv.split_once('=') {
                Some(("mac", v)) => {
                    mac =
                        Some(parse_mac(v).ok_or_else(|| format!("arg: mac = `{v}` is not a MAC"))?)
                }
                Some(("ip", v)) => ips.push(
                    v.parse()
                        .map_err(|_| format!("arg: ip = `{v}` is not an IPv4 address"))?,
                ),
                _ => {
                    return Err(format!(
                        "arg: `{kv}`: write mac=02:00:00:00:00:01,ip=198.18.0.2"
                    ))
                }
            }
        }
        let mac = mac.ok_or("arg: mac=MAC is required (the MAC ARP replies give)")?;
        if ips.is_empty() {
            return Err("arg: no ip=IPv4 to answer for".into());
        }
        Ok(Answers { mac, ips })
    }
}

/// One lane's state.
pub struct Lane {
    /// The reply being built (kept, so a frame costs no allocation).
    reply: Vec<u8>,
    arg: String,
    answers: Result<Answers, String>,
    arp_replies: Counter,
    echo_replies: Counter,
    ignored: Counter,
    bad_arg: Counter,
    emit_failed: Counter,
}

impl Handler for Responder {
    type Lane = Lane;

    fn lane(&self, setup: &mut LaneSetup<'_>) -> Lane {
        Lane {
            reply: Vec::with_capacity(2048),
            arg: String::new(),
            answers: Err("no arg yet".into()),
            arp_replies: setup.counter("arp_replies"),
            echo_replies: setup.counter("echo_replies"),
            ignored: setup.counter("ignored"),
            bad_arg: setup.counter("bad_arg"),
            emit_failed: setup.counter("emit_failed"),
        }
    }

    fn handle(&self, lane: &mut Lane, pkt: &mut Packet<'_>) -> Verdict {
        let arg = pkt.arg().unwrap_or("");
        if arg != lane.arg {
            lane.arg = arg.to_string();
            lane.answers = Answers::parse(arg);
            if let Err(e) = &lane.answers {
                tracing::warn!(rule = ?pkt.rule_name(), "responder: {e}; dropping this rule's frames");
            }
        }
        let Ok(answers) = &lane.answers else {
            lane.bad_arg.inc();
            return Verdict::drop();
        };
        let Ok(p) = pkt.parse() else {
            lane.ignored.inc();
            return Verdict::drop();
        };
        let l3 = p.l3_offset();
        // The reply starts as a copy of the request and is rewritten field by field.
        lane.reply.clear();
        lane.reply.extend_from_slice(pkt.bytes());
        let reply = &mut lane.reply[..];
        let answered = match p.ethertype() {
            ETHERTYPE_ARP => arp_reply(reply, l3, answers).then_some(&lane.arp_replies),
            // The parser reads no ICMP header: its payload starts after the IP's.
            ETHERTYPE_IPV4 if p.ip_proto() == Some(1) && !p.is_fragment() => {
                echo_reply(reply, l3, p.payload().start, answers).then_some(&lane.echo_replies)
            }
            _ => None,
        };
        match answered {
            Some(counter) => match pkt.emit(pkt.port(), &lane.reply) {
                Ok(()) => counter.inc(),
                Err(e) => {
                    lane.emit_failed.inc();
                    tracing::debug!("responder: reply not sent: {e:?}");
                }
            },
            None => lane.ignored.inc(),
        }
        // The request itself goes back to the pool.
        Verdict::drop()
    }
}

const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV4: u16 = 0x0800;

/// An ARP request (Ethernet, IPv4) for one of our addresses becomes its reply:
/// `false` (the bytes untouched) for anything else.
fn arp_reply(f: &mut [u8], l3: usize, answers: &Answers) -> bool {
    // htype 1, ptype IPv4, hlen 6, plen 4, oper 1 (request); then sha, spa, tha, tpa.
    let Some(arp) = f.get(l3..l3 + 28) else {
        return false;
    };
    if arp[..8] != [0, 1, 8, 0, 6, 4, 0, 1] {
        return false;
    }
    let tpa: [u8; 4] = arp[24..28].try_into().expect("28 bytes");
    if !answers.ips.contains(&Ipv4Addr::from(tpa)) {
        return false;
    }
    let sha: [u8; 6] = arp[8..14].try_into().expect("28 bytes");
    let spa: [u8; 4] = arp[14..18].try_into().expect("28 bytes");
    let arp = &mut f[l3..l3 + 28];
    arp[7] = 2; // reply
    arp[8..14].copy_from_slice(&answers.mac);
    arp[14..18].copy_from_slice(&tpa);
    arp[18..24].copy_from_slice(&sha);
    arp[24..28].copy_from_slice(&spa);
    f[..6].copy_from_slice(&sha);
    f[6..12].copy_from_slice(&answers.mac);
    true
}

/// An ICMP echo request to one of our addresses becomes its echo reply: addresses
/// and MACs exchanged, type 0, a fresh TTL, both checksums updated (RFC 1624).
fn echo_reply(f: &mut [u8], l3: usize, l4: usize, answers: &Answers) -> bool {
    if f.len() < l4 + 8 || f[l4] != 8 || f[l4 + 1] != 0 {
        return false;
    }
    let dst: [u8; 4] = f[l3 + 16..l3 + 20].try_into().expect("parsed IPv4 header");
    if !answers.ips.contains(&Ipv4Addr::from(dst)) {
        return false;
    }
    // Exchanging the addresses leaves the header's sum; the TTL word changes.
    let old_ttl = [f[l3 + 8], f[l3 + 9]];
    f[l3 + 8] = 64;
    update_checksum(f, l3 + 10, old_ttl, [f[l3 + 8], f[l3 + 9]]);
    let (src, dst) = f[l3 + 12..l3 + 20].split_at_mut(4);
    src.swap_with_slice(dst);
    // Type 8 -> 0 in the ICMP header's first word.
    let old_type = [f[l4], f[l4 + 1]];
    f[l4] = 0;
    update_checksum(f, l4 + 2, old_type, [f[l4], f[l4 + 1]]);
    let (dst_mac, src_mac) = f[..12].split_at_mut(6);
    dst_mac.swap_with_slice(src_mac);
    true
}

/// The checksum at `f[at..]` updated for one 16-bit word under it changed from `old`
/// to `new` (RFC 1624, `xdpool::wire::checksum`).
fn update_checksum(f: &mut [u8], at: usize, old: [u8; 2], new: [u8; 2]) {
    Change::of16(u16::from_be_bytes(old), u16::from_be_bytes(new)).apply(f, at);
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next().filter(|p| p.len() == 2)?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn main() {
    let args = xdpool_examples::Args::parse();
    xdpool_examples::finish(args.app().handler("responder", Responder).run());
}

#[cfg(test)]
mod tests;
