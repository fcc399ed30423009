//! Per-frame action lookup in userspace, mirroring the XDP program's first-match rules.
//!
//! When every rule that steers to userspace has the same action (the common case),
//! no frame is parsed; otherwise the first matching rule's action is taken, as the
//! XDP program did. The common frame (untagged IPv4 without options, not a
//! fragment, UDP or TCP: `wire::PlainV4`) is matched on the few fields a rule
//! tests, read in one go (by its protocol alone, from a table of two verdicts,
//! when no rule tests more than protocol and VLAN); any other is parsed by
//! `crate::wire`'s general walk, and
//! when a `call` rule matches it keeps that parse for its handler (`Packet::parse`
//! returns it while the frame is unchanged), so its headers are walked once.

use super::action::{Act, PortId, PortIx, Verdict};
use crate::config::{Action, ValidRule};
use crate::wire;
use std::net::IpAddr;

/// Finds the verdict for a frame that the XDP program steered to us.
#[derive(Debug, Clone)]
pub struct Classifier {
    rules: Vec<Rule>,
    uniform: Option<Verdict>,
    /// The verdict of a plain frame (`wire::PlainV4`: UDP or TCP, untagged) by its
    /// protocol, `[UDP, TCP]`, when no rule tests more than the protocol and the
    /// VLAN (which a plain frame never has): such a frame is classified by one
    /// load, not a walk of the rules.
    by_proto: Option<[Verdict; 2]>,
}

/// One rule and what a match means to the worker. (`repr(C)`: the rule first, so
/// the lookup walks the list with one pointer.)
#[derive(Debug, Clone)]
#[repr(C)]
struct Rule {
    rule: ValidRule,
    /// The verdict on a match: `verdict`, or drop.
    on_match: Verdict,
    /// A `call` rule: a matching frame's parse goes to its handler.
    call: bool,
    /// `None` for a rule the XDP program settles (pass, xdpdrop).
    verdict: Option<Verdict>,
}

impl Classifier {
    /// Builds the lookup from one port's rules (in the XDP program's order).
    pub fn new(rules: Vec<ValidRule>) -> Classifier {
        let rules: Vec<Rule> = rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let v = verdict(&r, i);
                Rule {
                    rule: r,
                    verdict: v,
                    on_match: v.unwrap_or(Verdict::DROP),
                    call: v.is_some_and(|v| matches!(v.act(), Act::Call { .. })),
                }
            })
            .collect();
        let mut userspace = rules.iter().filter_map(|r| r.verdict);
        let first = userspace.next();
        let uniform = match first {
            Some(a) if userspace.all(|b| b == a) => Some(a),
            None => Some(Verdict::DROP),
            _ => None,
        };
        let by_proto = rules
            .iter()
            .all(|r| tests_at_most_proto_and_vlan(&r.rule))
            .then(|| {
                // The walk's verdict for a plain frame of each protocol: the rules
                // test nothing else, so any ports and addresses stand for all.
                [wire::proto::UDP, wire::proto::TCP].map(|proto| {
                    let plain = Fields {
                        vlan: None,
                        proto: Some(proto),
                        ports: Some((0, 0)),
                        l3: wire::L3::V4 {
                            src: std::net::Ipv4Addr::UNSPECIFIED,
                            dst: std::net::Ipv4Addr::UNSPECIFIED,
                        },
                    };
                    rules
                        .iter()
                        .find(|r| matches_fields(&r.rule, &plain))
                        .map_or(Verdict::DROP, |r| r.on_match)
                })
            });
        Classifier {
            rules,
            uniform,
            by_proto,
        }
    }

    /// Most descriptors one frame puts on the receiving port's TX ring, and every
    /// port frames may be handed to, under these rules.
    pub fn needs(&self) -> (usize, Vec<PortId>) {
        let mut own = 0;
        let mut egress = Vec::new();
        for (r, v) in self
            .rules
            .iter()
            .filter_map(|r| Some((&r.rule, r.verdict?)))
        {
            let n = v.needs();
            own = own.max(n.own_tx);
            let call = r.call.as_ref();
            own = own.max(call.map_or(0, |c| c.own_tx));
            let declared = call.into_iter().flat_map(|c| c.egress.iter().copied());
            for p in n.egress.into_iter().flatten().chain(declared) {
                if !egress.contains(&p) {
                    egress.push(p);
                }
            }
        }
        (own, egress)
    }

    /// Whether every steered frame gets the same verdict.
    #[inline]
    pub fn is_uniform(&self) -> bool {
        self.uniform.is_some()
    }

    /// The verdict when uniform (drop otherwise).
    #[inline]
    pub fn uniform(&self) -> Verdict {
        self.uniform.unwrap_or(Verdict::DROP)
    }

    /// The verdict of the first rule matching `frame`; drop when none matches or the
    /// frame does not parse (the XDP program may steer a few the parser rejects, e.g.
    /// IPv4 options it skips by IHL: they are dropped here, so no handler ever sees
    /// a frame the parser refused).
    ///
    /// When the frame took the general walk and the verdict is a `call`, the parse
    /// is kept for the handler's `Packet::parse` (`api::keep_parse`); the caller
    /// clears it once the handler is done (`api::forget_parse`). Nothing is kept
    /// otherwise.
    pub fn classify(&self, frame: &[u8]) -> Verdict {
        if let Some(a) = self.uniform {
            return a;
        }
        // The common frame: its few fields are all a rule tests, and they stay in
        // registers. Its handler's `Packet::parse` reads it again on the same short
        // path: building and keeping a whole `Parsed` here cost more (the copies of
        // it through memory stalled; 2% of the forwarding core in the lb example,
        // perf, where the whole handler took 2%).
        if let Some(f) = wire::PlainV4::read(frame) {
            if let Some(by_proto) = &self.by_proto {
                return by_proto[usize::from(f.proto == wire::proto::TCP)];
            }
            return self
                .first(&Fields::plain(&f))
                .map_or(Verdict::DROP, |r| r.on_match);
        }
        self.classify_parsed(frame)
    }

    /// [`classify`](Self::classify) for any other frame: the general walk, whose
    /// parse a `call` rule keeps for its handler.
    #[inline(never)]
    fn classify_parsed(&self, frame: &[u8]) -> Verdict {
        // Not the short path again: it just said no.
        let Ok(p) = wire::parse_any(frame) else {
            return Verdict::DROP;
        };
        match self.first(&Fields::of(&p)) {
            Some(r) => {
                if r.call {
                    crate::api::keep_parse(p);
                }
                r.on_match
            }
            None => Verdict::DROP,
        }
    }

    #[inline]
    fn first(&self, f: &Fields) -> Option<&Rule> {
        self.rules.iter().find(|r| matches_fields(&r.rule, f))
    }
}

/// Whether `r` tests nothing of a frame but its protocol and outer VLAN id. Every
/// field is named: a match field added to `ValidRule` does not compile here until
/// it is placed on one side (`by_proto` would otherwise ignore it).
fn tests_at_most_proto_and_vlan(r: &ValidRule) -> bool {
    let ValidRule {
        proto: _,
        vlan: _,
        dst_port,
        dst,
        src_port,
        src,
        action: _,
        port: _,
        to: _,
        mac: _,
        mirror_to: _,
        call: _,
    } = r;
    dst_port.is_none() && src_port.is_none() && dst.is_none() && src.is_none()
}

impl Classifier {
    /// The rule at `index` (a `call` verdict names its rule so).
    #[inline]
    pub fn rule(&self, index: usize) -> Option<&ValidRule> {
        self.rules.get(index).map(|r| &r.rule)
    }

    /// Position (among this port's rules) of the first rule matching `frame`, parsed
    /// even when the verdict is uniform: what `xdpool capture` selects frames by.
    pub fn first_match(&self, frame: &[u8]) -> Option<usize> {
        let p = wire::parse(frame).ok()?;
        self.rules.iter().position(|r| matches(&r.rule, &p))
    }
}

/// What a worker does under rule `r`, at `position` in its port's list (a `call`
/// names its rule so: its name and `arg` reach the handler); `None` for rules the
/// XDP program settles (the frame never reaches a worker).
pub fn verdict(r: &ValidRule, position: usize) -> Option<Verdict> {
    let act = match r.action {
        Action::Drop => Act::Drop,
        Action::L2fwd => Act::L2fwd,
        Action::ReflectTwice => Act::ReflectTwice,
        Action::Copybreak => Act::Copybreak,
        Action::Forward => Act::Forward {
            to: port_ix(r.to?),
            mac: r.mac,
        },
        Action::Call => Act::Call {
            handler: r.call.as_ref()?.handler,
            rule: position as u16,
        },
        Action::Pass | Action::Xdpdrop => return None,
    };
    Some(Verdict::new(act, r.mirror_to.map(port_ix)))
}

/// A port index of a valid config as a verdict holds it.
fn port_ix(p: PortId) -> PortIx {
    // The config refuses more than `MAX_PORTS` ports.
    debug_assert!(p < crate::config::MAX_PORTS);
    p as PortIx
}

impl Action {
    /// Whether frames under this action are steered to a worker.
    pub fn reaches_userspace(self) -> bool {
        match self {
            Action::Drop
            | Action::L2fwd
            | Action::Forward
            | Action::ReflectTwice
            | Action::Copybreak
            | Action::Call => true,
            Action::Pass | Action::Xdpdrop => false,
        }
    }
}

/// What a rule can test in a frame (the addresses as the parse holds them, made
/// `IpAddr`s only for a rule with a prefix: `L3::src`, `L3::dst`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fields {
    /// The outer VLAN tag's id.
    vlan: Option<u16>,
    proto: Option<u8>,
    /// (source, destination).
    ports: Option<(u16, u16)>,
    l3: wire::L3,
}

impl Fields {
    #[inline]
    fn of(p: &wire::Parsed) -> Fields {
        Fields {
            vlan: p.outer_vlan_id(),
            proto: p.ip_proto(),
            ports: p.ports(),
            l3: p.l3(),
        }
    }

    /// The same as `Fields::of(&f.parsed())`, without building the parse.
    #[inline]
    fn plain(f: &wire::PlainV4) -> Fields {
        Fields {
            vlan: None,
            proto: Some(f.proto),
            ports: Some(f.ports),
            l3: wire::L3::V4 {
                src: f.src,
                dst: f.dst,
            },
        }
    }
}

/// Whether every condition of `r` holds for `p` (the XDP program's rule_matches,
/// xdpool.h "Semantics"): VLAN is the outer tag's id (an untagged frame never
/// matches), ports need a UDP/TCP header, prefixes the frame's family.
pub(crate) fn matches(r: &ValidRule, p: &wire::Parsed) -> bool {
    matches_fields(r, &Fields::of(p))
}

#[inline]
fn matches_fields(r: &ValidRule, p: &Fields) -> bool {
    if let Some(id) = r.vlan {
        if p.vlan != Some(id) {
            return false;
        }
    }
    if let Some(proto) = r.proto {
        if p.proto != Some(proto) {
            return false;
        }
    }
    if let Some((lo, hi)) = r.dst_port {
        match p.ports {
            Some((_, port)) if (lo..=hi).contains(&port) => {}
            _ => return false,
        }
    }
    if let Some((lo, hi)) = r.src_port {
        match p.ports {
            Some((port, _)) if (lo..=hi).contains(&port) => {}
            _ => return false,
        }
    }
    if let Some((net, len)) = r.dst {
        match p.l3.dst() {
            Some(addr) if in_prefix(addr, net, len) => {}
            _ => return false,
        }
    }
    if let Some((net, len)) = r.src {
        match p.l3.src() {
            Some(addr) if in_prefix(addr, net, len) => {}
            _ => return false,
        }
    }
    true
}

fn in_prefix(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - len as u32)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len as u32)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp_frame(dport: u16, dst: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 18];
        f[12] = 0x08;
        f[14] = 0x45;
        let ip_len = (20 + 8 + 18) as u16;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&1024u16.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[38..40].copy_from_slice(&(8u16 + 18).to_be_bytes());
        f
    }

    fn rule(
        proto: Option<u8>,
        port: Option<(u16, u16)>,
        dst: Option<(&str, u8)>,
        action: Action,
    ) -> ValidRule {
        ValidRule {
            proto,
            dst_port: port,
            dst: dst.map(|(a, l)| (a.parse().unwrap(), l)),
            src_port: None,
            src: None,
            vlan: None,
            action,
            port: 0,
            to: (action == Action::Forward).then_some(1),
            mac: crate::config::MacRewrite::Swap,
            mirror_to: None,
            call: None,
        }
    }

    /// A UDP frame from `src`:`sport` to 198.18.0.2:9, with `tags` VLAN ids (outer first).
    fn tagged_udp(tags: &[u16], src: [u8; 4], sport: u16) -> Vec<u8> {
        let plain = udp_frame(9, [198, 18, 0, 2]);
        let mut f = plain[..12].to_vec();
        for (i, id) in tags.iter().enumerate() {
            f.extend_from_slice(
                &(if i == 0 && tags.len() > 1 {
                    0x88a8u16
                } else {
                    0x8100u16
                })
                .to_be_bytes(),
            );
            f.extend_from_slice(&(0x2000 | id).to_be_bytes()); // PCP 1: the id is the low 12 bits only
        }
        f.extend_from_slice(&plain[12..]);
        let l3 = 14 + 4 * tags.len();
        f[l3 + 12..l3 + 16].copy_from_slice(&src);
        f[l3 + 20..l3 + 22].copy_from_slice(&sport.to_be_bytes());
        f
    }

    fn source_rule(
        vlan: Option<u16>,
        src: Option<(&str, u8)>,
        src_port: Option<(u16, u16)>,
        action: Action,
    ) -> ValidRule {
        let proto = src_port.map(|_| 17);
        ValidRule {
            vlan,
            src: src.map(|(a, l)| (a.parse().unwrap(), l)),
            src_port,
            ..rule(proto, None, None, action)
        }
    }

    /// `udp_frame` as TCP (a 20-byte header with no options in the same bytes).
    fn tcp_frame() -> Vec<u8> {
        let mut f = udp_frame(80, [198, 18, 0, 2]);
        f[23] = 6;
        f[34 + 12] = 0x50;
        f
    }

    #[test]
    fn protocol_only_rules_classify_a_plain_frame_by_table_as_the_walk_does() {
        let mut call = rule(Some(6), None, None, Action::Call);
        call.call = Some(crate::config::CallSpec {
            handler: 0,
            arg: None,
            rule_name: None,
            own_tx: 1,
            egress: Vec::new(),
        });
        let lists = [
            // The lb example's shape: a UDP and a TCP rule of different verdicts.
            vec![
                rule(Some(17), None, None, Action::L2fwd),
                rule(Some(6), None, None, Action::Copybreak),
            ],
            // A VLAN rule never matches a plain frame; no TCP rule: TCP is dropped.
            vec![
                source_rule(Some(5), None, None, Action::ReflectTwice),
                rule(Some(17), None, None, Action::L2fwd),
            ],
            // A rule the XDP program settles comes first for UDP; any protocol after.
            vec![
                rule(Some(17), None, None, Action::Pass),
                call,
                rule(None, None, None, Action::ReflectTwice),
            ],
        ];
        let (udp, tcp) = (udp_frame(9, [198, 18, 0, 2]), tcp_frame());
        let mut acts = Vec::new();
        for rules in lists {
            let c = Classifier::new(rules);
            assert!(c.by_proto.is_some() && !c.is_uniform());
            for f in [&udp, &tcp] {
                let p = wire::PlainV4::read(f).expect("a plain frame");
                let walk = c
                    .first(&Fields::plain(&p))
                    .map_or(Verdict::DROP, |r| r.on_match);
                assert_eq!(c.classify(f), walk);
                acts.push(walk.act());
            }
        }
        assert!(matches!(
            acts[..],
            [
                Act::L2fwd,
                Act::Copybreak,
                Act::L2fwd,
                Act::Drop,
                Act::Drop,
                Act::Call { rule: 1, .. }
            ]
        ));
        // A port or a prefix to test: no table.
        let ports = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::L2fwd),
            rule(None, None, None, Action::Drop),
        ]);
        assert!(ports.by_proto.is_none());
        assert_eq!(ports.classify(&udp).act(), Act::L2fwd);
        let prefix = Classifier::new(vec![
            rule(None, None, Some(("198.18.0.0", 24)), Action::L2fwd),
            rule(None, None, None, Action::Drop),
        ]);
        assert!(prefix.by_proto.is_none());
    }

    #[test]
    fn vlan_matches_the_outer_tag_only_and_never_an_untagged_frame() {
        let c = Classifier::new(vec![
            source_rule(Some(5), None, None, Action::L2fwd),
            rule(None, None, None, Action::Drop),
            rule(Some(6), None, None, Action::Copybreak),
        ]);
        let src = [198, 18, 0, 1];
        assert_eq!(c.first_match(&tagged_udp(&[5], src, 1)), Some(0));
        assert_eq!(
            c.first_match(&tagged_udp(&[5, 7], src, 1)),
            Some(0),
            "QinQ: the outer id"
        );
        assert_eq!(
            c.first_match(&tagged_udp(&[7, 5], src, 1)),
            Some(1),
            "the inner id is not looked at"
        );
        assert_eq!(c.first_match(&tagged_udp(&[6], src, 1)), Some(1));
        assert_eq!(
            c.first_match(&tagged_udp(&[], src, 1)),
            Some(1),
            "untagged: no VLAN match"
        );
        assert_eq!(c.classify(&tagged_udp(&[5], src, 1)).act(), Act::L2fwd);
        assert_eq!(c.classify(&tagged_udp(&[], src, 1)).act(), Act::Drop);
        let zero = Classifier::new(vec![source_rule(Some(0), None, None, Action::L2fwd)]);
        assert_eq!(
            zero.first_match(&tagged_udp(&[0], src, 1)),
            Some(0),
            "vlan 0 matches a priority tag"
        );
        assert_eq!(
            zero.first_match(&tagged_udp(&[], src, 1)),
            None,
            "and not an untagged frame"
        );
    }

    #[test]
    fn source_prefix_and_port_ranges() {
        let c = Classifier::new(vec![
            source_rule(
                None,
                Some(("198.18.0.0", 24)),
                Some((1000, 1999)),
                Action::L2fwd,
            ),
            source_rule(None, Some(("198.18.0.0", 15)), None, Action::Copybreak),
            source_rule(None, None, Some((7, 7)), Action::ReflectTwice),
            rule(None, None, None, Action::Drop),
        ]);
        let act = |src: [u8; 4], sport: u16| c.classify(&tagged_udp(&[], src, sport)).act();
        assert_eq!(act([198, 18, 0, 9], 1000), Act::L2fwd);
        assert_eq!(act([198, 18, 0, 9], 1999), Act::L2fwd);
        assert_eq!(
            act([198, 18, 0, 9], 2000),
            Act::Copybreak,
            "port past the range: the next rule"
        );
        assert_eq!(
            act([198, 18, 1, 9], 1500),
            Act::Copybreak,
            "outside the /24, inside the /15"
        );
        assert_eq!(act([198, 20, 0, 9], 7), Act::ReflectTwice);
        assert_eq!(act([198, 20, 0, 9], 8), Act::Drop);
        // The destination port never stands in for the source port (the frame's is 9).
        let dst9 = Classifier::new(vec![
            source_rule(None, None, Some((9, 9)), Action::L2fwd),
            rule(None, None, None, Action::Drop),
        ]);
        assert_eq!(
            dst9.first_match(&tagged_udp(&[], [198, 18, 0, 1], 1024)),
            Some(1)
        );
        // An IPv6 source prefix never matches an IPv4 frame.
        let v6 = Classifier::new(vec![source_rule(
            None,
            Some(("::", 0)),
            None,
            Action::L2fwd,
        )]);
        assert_eq!(v6.first_match(&tagged_udp(&[3], [198, 18, 0, 1], 1)), None);
    }

    #[test]
    fn uniform_skips_parsing() {
        let c = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::L2fwd),
            rule(None, None, None, Action::Pass),
        ]);
        assert!(c.is_uniform());
        assert_eq!(c.classify(&[]).act(), Act::L2fwd);
    }

    #[test]
    fn first_match_wins() {
        let c = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::L2fwd),
            rule(Some(17), None, Some(("198.18.0.0", 15)), Action::Drop),
        ]);
        assert!(!c.is_uniform());
        assert_eq!(c.classify(&udp_frame(9, [198, 18, 0, 2])).act(), Act::L2fwd);
        assert_eq!(c.classify(&udp_frame(10, [198, 18, 0, 2])).act(), Act::Drop);
        assert_eq!(
            c.classify(&udp_frame(10, [198, 20, 0, 2])).act(),
            Act::Drop,
            "no match: drop"
        );
        assert_eq!(c.classify(&[1, 2, 3]).act(), Act::Drop, "unparsable: drop");
    }

    #[test]
    fn reflect_twice_forward_and_copybreak_reach_userspace() {
        assert!(
            Action::ReflectTwice.reaches_userspace()
                && Action::Copybreak.reaches_userspace()
                && Action::Forward.reaches_userspace()
        );
        assert!(!Action::Pass.reaches_userspace() && !Action::Xdpdrop.reaches_userspace());
        let c = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::ReflectTwice),
            rule(Some(17), Some((10, 10)), None, Action::Copybreak),
            rule(Some(17), Some((11, 11)), None, Action::Forward),
        ]);
        assert!(!c.is_uniform());
        assert_eq!(
            c.classify(&udp_frame(9, [198, 18, 0, 2])).act(),
            Act::ReflectTwice
        );
        assert_eq!(
            c.classify(&udp_frame(10, [198, 18, 0, 2])).act(),
            Act::Copybreak
        );
        assert_eq!(
            c.classify(&udp_frame(11, [198, 18, 0, 2])).act(),
            Act::Forward {
                to: 1,
                mac: crate::config::MacRewrite::Swap
            }
        );
        assert_eq!(c.needs(), (2, vec![1]));
    }

    #[test]
    fn first_match_names_the_rule_even_when_uniform() {
        let c = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::L2fwd),
            rule(Some(17), Some((10, 10)), None, Action::L2fwd),
            rule(None, None, None, Action::Pass),
        ]);
        assert!(c.is_uniform());
        assert_eq!(c.first_match(&udp_frame(9, [198, 18, 0, 2])), Some(0));
        assert_eq!(c.first_match(&udp_frame(10, [198, 18, 0, 2])), Some(1));
        assert_eq!(c.first_match(&udp_frame(11, [198, 18, 0, 2])), Some(2));
        assert_eq!(c.first_match(&[1, 2, 3]), None);
    }

    /// What the rule lookup leaves for a handler: the parse of a frame a `call` rule
    /// matched after the general walk (here a VLAN-tagged one), and nothing for a
    /// frame read on the short path (plain IPv4 UDP: its handler reads it again
    /// there), a built-in action, a uniform list (no parse) or a frame that does
    /// not parse (dropped).
    #[test]
    fn a_call_match_keeps_its_parse_and_nothing_else_does() {
        let call = |proto: u8, handler: u16| ValidRule {
            call: Some(crate::config::CallSpec {
                handler,
                arg: None,
                rule_name: None,
                own_tx: 0,
                egress: vec![],
            }),
            ..rule(Some(proto), None, None, Action::Call)
        };
        let kept = || {
            let p = crate::api::kept_parse();
            crate::api::forget_parse();
            p
        };
        let udp = tagged_udp(&[5], [198, 18, 0, 1], 1024);
        let plain = udp_frame(9, [198, 18, 0, 2]);
        crate::api::forget_parse();
        let calls = Classifier::new(vec![call(17, 0), call(6, 0)]);
        assert!(!calls.is_uniform());
        assert_eq!(
            calls.classify(&udp).act(),
            Act::Call {
                handler: 0,
                rule: 0
            }
        );
        assert_eq!(kept(), Some(wire::parse(&udp).unwrap()));
        assert_eq!(
            calls.classify(&plain).act(),
            Act::Call {
                handler: 0,
                rule: 0
            }
        );
        assert_eq!(kept(), None, "read on the short path: nothing kept");
        assert_eq!(
            calls.classify(&[1, 2, 3]).act(),
            Act::Drop,
            "unparsable: drop"
        );
        assert_eq!(kept(), None);
        let mixed = Classifier::new(vec![rule(Some(17), None, None, Action::L2fwd), call(6, 0)]);
        assert_eq!(mixed.classify(&udp).act(), Act::L2fwd);
        assert_eq!(kept(), None, "a built-in action's frame");
        let uniform = Classifier::new(vec![call(17, 0)]);
        assert!(uniform.is_uniform());
        assert_eq!(
            uniform.classify(&udp).act(),
            Act::Call {
                handler: 0,
                rule: 0
            }
        );
        assert_eq!(kept(), None, "uniform: not parsed");
    }

    proptest::proptest! {
        /// The fields the short path gives the lookup are the general walk's, on
        /// plain frames with one header byte set to any value (the short path
        /// then reads the frame or leaves it to the walk).
        #[test]
        fn short_path_fields_are_the_general_walks(
            src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, tcp: bool,
            at in 12usize..54, value: u8,
        ) {
            let b = wire::build::FrameBuilder::new()
                .ipv4(src.into(), dst.into())
                .payload(&[7; 9]);
            let mut frame = if tcp { b.tcp(sport, dport, 0x10) } else { b.udp(sport, dport) }
                .build()
                .bytes;
            let plain = wire::PlainV4::read(&frame).expect("a plain IPv4 frame");
            proptest::prop_assert_eq!(
                Fields::plain(&plain),
                Fields::of(&wire::parse_any(&frame).unwrap())
            );
            if at < frame.len() {
                frame[at] = value;
            }
            if let Some(f) = wire::PlainV4::read(&frame) {
                let walked = wire::parse_any(&frame);
                proptest::prop_assert!(walked.is_ok(), "the walk refuses what the short path read");
                proptest::prop_assert_eq!(Fields::plain(&f), Fields::of(&walked.unwrap()));
            }
        }

        /// Random lists of rules that test only protocol and VLAN (any action, the
        /// ones the XDP program settles included): the table gives every plain UDP
        /// and TCP frame the verdict of the walk.
        #[test]
        fn the_protocol_table_is_the_walk(
            specs in proptest::collection::vec((0u8..4, 0u8..3, 0u8..6), 1..6),
        ) {
            let actions = [
                Action::Drop, Action::L2fwd, Action::Pass, Action::Xdpdrop,
                Action::Copybreak, Action::ReflectTwice,
            ];
            let rules: Vec<ValidRule> = specs
                .iter()
                .map(|&(proto, vlan, action)| ValidRule {
                    vlan: (vlan == 2).then_some(5),
                    ..rule([None, Some(17), Some(6), Some(1)][usize::from(proto)], None, None,
                        actions[usize::from(action)])
                })
                .collect();
            let c = Classifier::new(rules);
            proptest::prop_assert!(c.by_proto.is_some());
            for f in [udp_frame(9, [198, 18, 0, 2]), tcp_frame()] {
                let p = wire::PlainV4::read(&f).expect("a plain frame");
                let walk = c.first(&Fields::plain(&p)).map_or(Verdict::DROP, |r| r.on_match);
                let want = if c.is_uniform() { c.uniform() } else { walk };
                proptest::prop_assert_eq!(c.classify(&f), want);
            }
        }
    }

    #[test]
    fn prefixes() {
        assert!(in_prefix(
            "198.19.3.4".parse().unwrap(),
            "198.18.0.0".parse().unwrap(),
            15
        ));
        assert!(!in_prefix(
            "198.20.0.1".parse().unwrap(),
            "198.18.0.0".parse().unwrap(),
            15
        ));
        assert!(in_prefix(
            "2001:2::5".parse().unwrap(),
            "2001:2::".parse().unwrap(),
            48
        ));
        assert!(in_prefix(
            "198.19.255.1".parse().unwrap(),
            "0.0.0.0".parse().unwrap(),
            0
        ));
        assert!(!in_prefix(
            "198.19.255.1".parse().unwrap(),
            "::".parse().unwrap(),
            0
        ));
    }
}
