//! Steering rules: the user-facing form (serde, TOML) and its encoding into the
//! `rules` map entries of `xdp-prog/xdpool.h`. Pure code, no kernel access.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::abi::{self, RuleAbi};
use super::error::SteerError;

/// What a rule does with a frame it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// Redirect to the AF_XDP socket of the receive queue (kernel fallback: pass).
    Steer,
    /// Pass to the kernel stack.
    Pass,
    /// Drop in XDP.
    Drop,
}

/// Which frames a rule matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleMatch {
    /// Every well-formed frame, IP or not.
    All,
    /// Every given field must match ("None" = any).
    Fields {
        /// IP protocol number (IPv6: the next header after extension headers).
        proto: Option<u8>,
        /// Inclusive UDP/TCP destination port range.
        dst_port: Option<(u16, u16)>,
        /// Destination address and prefix length.
        dst_prefix: Option<(IpAddr, u8)>,
    },
}

/// One steering rule; rules are tried in order and the first match wins.
///
/// In TOML every match field is optional and a rule without any matches all:
/// `{ action = "steer", proto = 17, dst_port = [9000, 9099], dst_prefix = "198.18.0.0/15" }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RuleSpec", into = "RuleSpec")]
pub struct Rule {
    /// Which frames match.
    pub matcher: RuleMatch,
    /// What happens to them.
    pub action: RuleAction,
}

impl Rule {
    /// A rule matching every well-formed frame.
    pub fn all(action: RuleAction) -> Self {
        Rule { matcher: RuleMatch::All, action }
    }
}

/// The flat serde form of [`Rule`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    action: RuleAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    proto: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dst_port: Option<(u16, u16)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dst_prefix: Option<Prefix>,
}

/// `addr/len` (a bare address means a host prefix).
#[derive(Clone, Copy)]
struct Prefix(IpAddr, u8);

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0, self.1)
    }
}

impl FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("dst_prefix {s:?}: not an IP address; write e.g. \"198.18.0.0/15\""))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .trim()
                .parse::<u8>()
                .map_err(|_| format!("dst_prefix {s:?}: prefix length must be 0..={max}"))?,
            None => max,
        };
        Ok(Prefix(addr, len))
    }
}

impl Serialize for Prefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Prefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl TryFrom<RuleSpec> for Rule {
    type Error = String;
    fn try_from(spec: RuleSpec) -> Result<Self, String> {
        let matcher = if spec.proto.is_none() && spec.dst_port.is_none() && spec.dst_prefix.is_none() {
            RuleMatch::All
        } else {
            RuleMatch::Fields {
                proto: spec.proto,
                dst_port: spec.dst_port,
                dst_prefix: spec.dst_prefix.map(|p| (p.0, p.1)),
            }
        };
        let rule = Rule { matcher, action: spec.action };
        encode_rule(&rule).map_err(|reason| reason.to_string())?;
        Ok(rule)
    }
}

impl From<Rule> for RuleSpec {
    fn from(rule: Rule) -> Self {
        match rule.matcher {
            RuleMatch::All => RuleSpec { action: rule.action, proto: None, dst_port: None, dst_prefix: None },
            RuleMatch::Fields { proto, dst_port, dst_prefix } => RuleSpec {
                action: rule.action,
                proto,
                dst_port,
                dst_prefix: dst_prefix.map(|(a, l)| Prefix(a, l)),
            },
        }
    }
}

/// Network-order words of the first `len` bits set, as the BPF program reads them.
fn mask_words(len: u8, bytes: usize) -> [u32; 4] {
    let mut mask = [0u8; 16];
    for (i, byte) in mask.iter_mut().enumerate().take(bytes) {
        let bits = (len as usize).saturating_sub(i * 8).min(8);
        *byte = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
    }
    to_words(&mask)
}

fn to_words(b: &[u8; 16]) -> [u32; 4] {
    std::array::from_fn(|i| u32::from_ne_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]))
}

/// Encodes one rule into its map entry, or says why it can never match.
pub(crate) fn encode_rule(rule: &Rule) -> Result<RuleAbi, &'static str> {
    let mut abi = RuleAbi {
        flags: abi::RULE_ENABLED,
        action: match rule.action {
            RuleAction::Steer => abi::ACTION_STEER,
            RuleAction::Pass => abi::ACTION_PASS,
            RuleAction::Drop => abi::ACTION_DROP,
        },
        ..RuleAbi::default()
    };
    let RuleMatch::Fields { proto, dst_port, dst_prefix } = &rule.matcher else {
        return Ok(abi);
    };
    if let Some(p) = proto {
        abi.flags |= abi::MATCH_PROTO;
        abi.proto = *p;
    }
    if let Some((lo, hi)) = dst_port {
        if lo > hi {
            return Err("dst_port range is empty: write [low, high] with low <= high");
        }
        if matches!(proto, Some(p) if *p != libc::IPPROTO_UDP as u8 && *p != libc::IPPROTO_TCP as u8) {
            return Err("dst_port only matches UDP (17) and TCP (6): drop dst_port or set proto to 6 or 17");
        }
        abi.flags |= abi::MATCH_DST_PORT;
        abi.port_min = *lo;
        abi.port_max = *hi;
    }
    if let Some((addr, len)) = dst_prefix {
        let (family, bytes, max, raw): (u8, usize, u8, [u8; 16]) = match addr {
            IpAddr::V4(a) => {
                let mut raw = [0u8; 16];
                raw[..4].copy_from_slice(&a.octets());
                (abi::FAMILY_IPV4, 4, 32, raw)
            }
            IpAddr::V6(a) => (abi::FAMILY_IPV6, 16, 128, a.octets()),
        };
        if *len > max {
            return Err("dst_prefix length too long: at most 32 for IPv4, 128 for IPv6");
        }
        abi.flags |= abi::MATCH_DST_ADDR;
        abi.dst_family = family;
        abi.dst_mask = mask_words(*len, bytes);
        let words = to_words(&raw);
        abi.dst_addr = std::array::from_fn(|i| words[i] & abi.dst_mask[i]);
    }
    Ok(abi)
}

/// Encodes a rule list for one bank: `MAX_RULES` entries, unused ones disabled.
pub(crate) fn encode_rules(rules: &[Rule]) -> Result<Vec<RuleAbi>, SteerError> {
    if rules.len() > abi::MAX_RULES {
        return Err(SteerError::TooManyRules { given: rules.len(), max: abi::MAX_RULES });
    }
    let mut out = vec![RuleAbi::default(); abi::MAX_RULES];
    for (index, rule) in rules.iter().enumerate() {
        out[index] = encode_rule(rule).map_err(|reason| SteerError::InvalidRule { index, reason })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn fields(proto: Option<u8>, dst_port: Option<(u16, u16)>, dst_prefix: Option<(IpAddr, u8)>) -> RuleMatch {
        RuleMatch::Fields { proto, dst_port, dst_prefix }
    }

    #[test]
    fn encodes_ipv4_prefix_masked_in_network_order() {
        let rule = Rule {
            matcher: fields(Some(17), Some((9000, 9099)), Some((IpAddr::V4(Ipv4Addr::new(198, 19, 7, 9)), 15))),
            action: RuleAction::Steer,
        };
        let abi = encode_rule(&rule).unwrap();
        assert_eq!(abi.flags, abi::RULE_ENABLED | abi::MATCH_PROTO | abi::MATCH_DST_PORT | abi::MATCH_DST_ADDR);
        assert_eq!((abi.action, abi.proto, abi.port_min, abi.port_max), (abi::ACTION_STEER, 17, 9000, 9099));
        assert_eq!(abi.dst_family, abi::FAMILY_IPV4);
        assert_eq!(abi.dst_mask[0].to_ne_bytes(), [255, 254, 0, 0]);
        assert_eq!(abi.dst_addr[0].to_ne_bytes(), [198, 18, 0, 0]);
        assert_eq!(&abi.dst_mask[1..], &[0, 0, 0]);
    }

    #[test]
    fn encodes_ipv6_prefix() {
        let addr: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
        let rule = Rule { matcher: fields(None, None, Some((IpAddr::V6(addr), 36))), action: RuleAction::Drop };
        let abi = encode_rule(&rule).unwrap();
        let mask: Vec<u8> = abi.dst_mask.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let a: Vec<u8> = abi.dst_addr.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(&mask[..5], &[255, 255, 255, 255, 0xf0]);
        assert!(mask[5..].iter().all(|b| *b == 0));
        assert_eq!(&a[..6], &[0x20, 0x01, 0x0d, 0xb8, 0xf0, 0]);
        assert_eq!(abi.action, abi::ACTION_DROP);
    }

    #[test]
    fn rejects_rules_that_cannot_match() {
        let bad_range = Rule { matcher: fields(None, Some((10, 9)), None), action: RuleAction::Pass };
        assert!(encode_rule(&bad_range).is_err());
        let icmp_port = Rule { matcher: fields(Some(1), Some((1, 2)), None), action: RuleAction::Pass };
        assert!(encode_rule(&icmp_port).is_err());
        let long_prefix =
            Rule { matcher: fields(None, None, Some((IpAddr::V4(Ipv4Addr::LOCALHOST), 33))), action: RuleAction::Pass };
        assert!(encode_rule(&long_prefix).is_err());
        let err = encode_rules(&[Rule::all(RuleAction::Pass), icmp_port]).unwrap_err();
        assert!(matches!(err, SteerError::InvalidRule { index: 1, .. }), "{err}");
    }

    #[test]
    fn bank_is_padded_with_disabled_rules_and_bounded() {
        let bank = encode_rules(&[Rule::all(RuleAction::Steer)]).unwrap();
        assert_eq!(bank.len(), abi::MAX_RULES);
        assert_eq!(bank[0].flags, abi::RULE_ENABLED);
        assert!(bank[1..].iter().all(|r| r.flags & abi::RULE_ENABLED == 0));
        let too_many = vec![Rule::all(RuleAction::Pass); abi::MAX_RULES + 1];
        assert!(matches!(encode_rules(&too_many), Err(SteerError::TooManyRules { given: 65, max: 64 })));
    }

    #[test]
    fn toml_round_trip() {
        #[derive(Debug, Deserialize, Serialize)]
        struct Cfg {
            rules: Vec<Rule>,
        }
        let text = r#"
            rules = [
                { action = "steer", proto = 17, dst_port = [9000, 9099], dst_prefix = "198.18.0.0/15" },
                { action = "drop", dst_prefix = "2001:db8::1" },
                { action = "pass" },
            ]
        "#;
        let cfg: Cfg = toml::from_str(text).unwrap();
        assert_eq!(
            cfg.rules[0].matcher,
            fields(Some(17), Some((9000, 9099)), Some((IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)), 15)))
        );
        assert_eq!(cfg.rules[1].matcher, fields(None, None, Some(("2001:db8::1".parse().unwrap(), 128))));
        assert_eq!(cfg.rules[2], Rule::all(RuleAction::Pass));
        let again: Cfg = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(again.rules, cfg.rules);
        let bad = toml::from_str::<Cfg>(r#"rules = [{ action = "steer", dst_port = [9, 1] }]"#);
        assert!(bad.unwrap_err().to_string().contains("low <= high"));
    }
}
