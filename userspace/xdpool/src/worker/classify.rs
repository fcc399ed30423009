//! Per-frame action lookup in userspace, mirroring the XDP program's first-match rules.
//!
//! When every rule that steers to userspace has the same action (the common case),
//! no frame is parsed; otherwise the frame is parsed with [`crate::wire`] and the
//! first matching rule's action is taken, as the XDP program did.

use super::action::{Act, PortId, Verdict};
use crate::config::{Action, ValidRule};
use crate::wire;
use std::net::IpAddr;

/// Finds the verdict for a frame that the XDP program steered to us.
#[derive(Debug, Clone)]
pub struct Classifier {
    rules: Vec<(ValidRule, Option<Verdict>)>,
    uniform: Option<Verdict>,
}

impl Classifier {
    /// Builds the lookup from one port's rules (in the XDP program's order).
    pub fn new(rules: Vec<ValidRule>) -> Classifier {
        let rules: Vec<(ValidRule, Option<Verdict>)> = rules.into_iter().map(|r| {
            let v = verdict(&r);
            (r, v)
        }).collect();
        let mut userspace = rules.iter().filter_map(|(_, v)| *v);
        let first = userspace.next();
        let uniform = match first {
            Some(a) if userspace.all(|b| b == a) => Some(a),
            None => Some(Verdict::DROP),
            _ => None,
        };
        Classifier { rules, uniform }
    }

    /// Most descriptors one frame puts on the receiving port's TX ring, and every
    /// port frames may be handed to, under these rules.
    pub fn needs(&self) -> (usize, Vec<PortId>) {
        let mut own = 0;
        let mut egress = Vec::new();
        for v in self.rules.iter().filter_map(|(_, v)| *v) {
            let n = v.needs();
            own = own.max(n.own_tx);
            for p in n.egress.into_iter().flatten() {
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
    /// IPv4 options it skips by IHL: they are dropped here).
    pub fn classify(&self, frame: &[u8]) -> Verdict {
        if let Some(a) = self.uniform {
            return a;
        }
        let Ok(p) = wire::parse(frame) else { return Verdict::DROP };
        for (r, v) in &self.rules {
            if matches(r, &p) {
                return v.unwrap_or(Verdict::DROP);
            }
        }
        Verdict::DROP
    }
}

impl Classifier {
    /// Position (among this port's rules) of the first rule matching `frame`, parsed
    /// even when the verdict is uniform: what `xdpool capture` selects frames by.
    pub fn first_match(&self, frame: &[u8]) -> Option<usize> {
        let p = wire::parse(frame).ok()?;
        self.rules.iter().position(|(r, _)| matches(r, &p))
    }
}

/// What a worker does under rule `r`; `None` for rules the XDP program settles
/// (the frame never reaches a worker).
pub fn verdict(r: &ValidRule) -> Option<Verdict> {
    let act = match r.action {
        Action::Drop => Act::Drop,
        Action::L2fwd => Act::L2fwd,
        Action::ReflectTwice => Act::ReflectTwice,
        Action::Copybreak => Act::Copybreak,
        Action::Forward => Act::Forward { to: r.to?, mac: r.mac },
        Action::Pass | Action::Xdpdrop => return None,
    };
    Some(Verdict { act, mirror_to: r.mirror_to })
}

impl Action {
    /// Whether frames under this action are steered to a worker.
    pub fn reaches_userspace(self) -> bool {
        match self {
            Action::Drop | Action::L2fwd | Action::Forward | Action::ReflectTwice | Action::Copybreak => true,
            Action::Pass | Action::Xdpdrop => false,
        }
    }
}

fn matches(r: &ValidRule, p: &wire::Parsed) -> bool {
    if let Some(proto) = r.proto {
        if p.ip_proto() != Some(proto) {
            return false;
        }
    }
    if let Some((lo, hi)) = r.dst_port {
        match p.dst_port() {
            Some(port) if (lo..=hi).contains(&port) => {}
            _ => return false,
        }
    }
    if let Some((net, len)) = r.dst {
        match p.dst_ip() {
            Some(addr) if in_prefix(addr, net, len) => {}
            _ => return false,
        }
    }
    true
}

fn in_prefix(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len as u32) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - len as u32) };
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

    fn rule(proto: Option<u8>, port: Option<(u16, u16)>, dst: Option<(&str, u8)>, action: Action) -> ValidRule {
        ValidRule { proto, dst_port: port, dst: dst.map(|(a, l)| (a.parse().unwrap(), l)), action, port: 0, to: (action == Action::Forward).then_some(1), mac: crate::config::MacRewrite::Swap, mirror_to: None }
    }

    #[test]
    fn uniform_skips_parsing() {
        let c = Classifier::new(vec![rule(Some(17), Some((9, 9)), None, Action::L2fwd), rule(None, None, None, Action::Pass)]);
        assert!(c.is_uniform());
        assert_eq!(c.classify(&[]).act, Act::L2fwd);
    }

    #[test]
    fn first_match_wins() {
        let c = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::L2fwd),
            rule(Some(17), None, Some(("198.18.0.0", 15)), Action::Drop),
        ]);
        assert!(!c.is_uniform());
        assert_eq!(c.classify(&udp_frame(9, [198, 18, 0, 2])).act, Act::L2fwd);
        assert_eq!(c.classify(&udp_frame(10, [198, 18, 0, 2])).act, Act::Drop);
        assert_eq!(c.classify(&udp_frame(10, [198, 20, 0, 2])).act, Act::Drop, "no match: drop");
        assert_eq!(c.classify(&[1, 2, 3]).act, Act::Drop, "unparsable: drop");
    }

    #[test]
    fn reflect_twice_forward_and_copybreak_reach_userspace() {
        assert!(Action::ReflectTwice.reaches_userspace() && Action::Copybreak.reaches_userspace() && Action::Forward.reaches_userspace());
        assert!(!Action::Pass.reaches_userspace() && !Action::Xdpdrop.reaches_userspace());
        let c = Classifier::new(vec![
            rule(Some(17), Some((9, 9)), None, Action::ReflectTwice),
            rule(Some(17), Some((10, 10)), None, Action::Copybreak),
            rule(Some(17), Some((11, 11)), None, Action::Forward),
        ]);
        assert!(!c.is_uniform());
        assert_eq!(c.classify(&udp_frame(9, [198, 18, 0, 2])).act, Act::ReflectTwice);
        assert_eq!(c.classify(&udp_frame(10, [198, 18, 0, 2])).act, Act::Copybreak);
        assert_eq!(c.classify(&udp_frame(11, [198, 18, 0, 2])).act, Act::Forward { to: 1, mac: crate::config::MacRewrite::Swap });
        assert_eq!(c.needs(), (2, vec![1]));
    }

    #[test]
    fn first_match_names_the_rule_even_when_uniform() {
        let c = Classifier::new(vec![rule(Some(17), Some((9, 9)), None, Action::L2fwd), rule(Some(17), Some((10, 10)), None, Action::L2fwd), rule(None, None, None, Action::Pass)]);
        assert!(c.is_uniform());
        assert_eq!(c.first_match(&udp_frame(9, [198, 18, 0, 2])), Some(0));
        assert_eq!(c.first_match(&udp_frame(10, [198, 18, 0, 2])), Some(1));
        assert_eq!(c.first_match(&udp_frame(11, [198, 18, 0, 2])), Some(2));
        assert_eq!(c.first_match(&[1, 2, 3]), None);
    }

    #[test]
    fn prefixes() {
        assert!(in_prefix("198.19.3.4".parse().unwrap(), "198.18.0.0".parse().unwrap(), 15));
        assert!(!in_prefix("198.20.0.1".parse().unwrap(), "198.18.0.0".parse().unwrap(), 15));
        assert!(in_prefix("2001:2::5".parse().unwrap(), "2001:2::".parse().unwrap(), 48));
        assert!(in_prefix("198.19.255.1".parse().unwrap(), "0.0.0.0".parse().unwrap(), 0));
        assert!(!in_prefix("198.19.255.1".parse().unwrap(), "::".parse().unwrap(), 0));
    }
}
