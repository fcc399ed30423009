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
        /// Inclusive UDP/TCP source port range.
        src_port: Option<(u16, u16)>,
        /// Source address and prefix length (the same family as `dst_prefix`).
        src_prefix: Option<(IpAddr, u8)>,
        /// The outer VLAN tag's id (0..=4094); untagged frames never match.
        vlan: Option<u16>,
    },
}

impl RuleMatch {
    /// `Fields` with only the destination conditions (proto, port, prefix), `All`
    /// when none is given.
    pub fn dst(
        proto: Option<u8>,
        dst_port: Option<(u16, u16)>,
        dst_prefix: Option<(IpAddr, u8)>,
    ) -> RuleMatch {
        RuleMatch::Fields {
            proto,
            dst_port,
            dst_prefix,
            src_port: None,
            src_prefix: None,
            vlan: None,
        }
        .normalized()
    }

    /// `All` for a `Fields` without any condition (the two match alike; `All` is
    /// the one form the shape and the program's match-all test look for).
    pub fn normalized(self) -> RuleMatch {
        match self {
            RuleMatch::Fields {
                proto: None,
                dst_port: None,
                dst_prefix: None,
                src_port: None,
                src_prefix: None,
                vlan: None,
            } => RuleMatch::All,
            m => m,
        }
    }
}

impl fmt::Display for RuleMatch {
    /// `proto 17 dst_port 9000-9099 src 198.18.0.0/15 vlan 5`, `all` for no condition.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RuleMatch::Fields {
            proto,
            dst_port,
            dst_prefix,
            src_port,
            src_prefix,
            vlan,
        } = self
        else {
            return f.write_str("all");
        };
        let mut parts = Vec::new();
        let range = |(lo, hi): (u16, u16)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        };
        if let Some(v) = vlan {
            parts.push(format!("vlan {v}"));
        }
        if let Some(p) = proto {
            parts.push(format!("proto {p}"));
        }
        if let Some((a, l)) = src_prefix {
            parts.push(format!("src {a}/{l}"));
        }
        if let Some(r) = src_port {
            parts.push(format!("src_port {}", range(*r)));
        }
        if let Some((a, l)) = dst_prefix {
            parts.push(format!("dst {a}/{l}"));
        }
        if let Some(r) = dst_port {
            parts.push(format!("dst_port {}", range(*r)));
        }
        f.write_str(&parts.join(" "))
    }
}

/// One steering rule; rules are tried in order and the first match wins.
///
/// In TOML every match field is optional and a rule without any matches all:
/// `{ action = "steer", proto = 17, dst_port = [9000, 9099], dst_prefix = "198.18.0.0/15" }`;
/// also `src_port = [lo, hi]`, `src_prefix = "..."`, `vlan = 5`.
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
        Rule {
            matcher: RuleMatch::All,
            action,
        }
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    src_port: Option<(u16, u16)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    src_prefix: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vlan: Option<u16>,
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
        let addr: IpAddr = addr.trim().parse().map_err(|_| {
            format!("prefix {s:?}: not an IP address; write e.g. \"198.18.0.0/15\"")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .trim()
                .parse::<u8>()
                .map_err(|_| format!("prefix {s:?}: prefix length must be 0..={max}"))?,
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
        let matcher = RuleMatch::Fields {
            proto: spec.proto,
            dst_port: spec.dst_port,
            dst_prefix: spec.dst_prefix.map(|p| (p.0, p.1)),
            src_port: spec.src_port,
            src_prefix: spec.src_prefix.map(|p| (p.0, p.1)),
            vlan: spec.vlan,
        }
        .normalized();
        let rule = Rule {
            matcher,
            action: spec.action,
        };
        encode_rule(&rule).map_err(|reason| reason.to_string())?;
        Ok(rule)
    }
}

impl From<Rule> for RuleSpec {
    fn from(rule: Rule) -> Self {
        match rule.matcher {
            RuleMatch::All => RuleSpec {
                action: rule.action,
                proto: None,
                dst_port: None,
                dst_prefix: None,
                src_port: None,
                src_prefix: None,
                vlan: None,
            },
            RuleMatch::Fields {
                proto,
                dst_port,
                dst_prefix,
                src_port,
                src_prefix,
                vlan,
            } => RuleSpec {
                action: rule.action,
                proto,
                dst_port,
                dst_prefix: dst_prefix.map(|(a, l)| Prefix(a, l)),
                src_port,
                src_prefix: src_prefix.map(|(a, l)| Prefix(a, l)),
                vlan,
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
    std::array::from_fn(|i| {
        u32::from_ne_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
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
    let RuleMatch::Fields {
        proto,
        dst_port,
        dst_prefix,
        src_port,
        src_prefix,
        vlan,
    } = &rule.matcher
    else {
        return Ok(abi);
    };
    if let Some(p) = proto {
        abi.flags |= abi::MATCH_PROTO;
        abi.proto = *p;
    }
    let not_l4 =
        matches!(proto, Some(p) if *p != libc::IPPROTO_UDP as u8 && *p != libc::IPPROTO_TCP as u8);
    if let Some((lo, hi)) = dst_port {
        if lo > hi {
            return Err("dst_port range is empty: write [low, high] with low <= high");
        }
        if not_l4 {
            return Err(
                "dst_port only matches UDP (17) and TCP (6): drop dst_port or set proto to 6 or 17",
            );
        }
        abi.flags |= abi::MATCH_DST_PORT;
        abi.port_min = *lo;
        abi.port_max = *hi;
    }
    if let Some((lo, hi)) = src_port {
        if lo > hi {
            return Err("src_port range is empty: write [low, high] with low <= high");
        }
        if not_l4 {
            return Err(
                "src_port only matches UDP (17) and TCP (6): drop src_port or set proto to 6 or 17",
            );
        }
        abi.flags |= abi::MATCH_SRC_PORT;
        abi.sport_min = *lo;
        abi.sport_max = *hi;
    }
    if let Some(prefix) = dst_prefix {
        let (family, addr, mask) = encode_prefix(prefix)
            .ok_or("dst_prefix length too long: at most 32 for IPv4, 128 for IPv6")?;
        abi.flags |= abi::MATCH_DST_ADDR;
        (abi.dst_family, abi.dst_addr, abi.dst_mask) = (family, addr, mask);
    }
    if let Some(prefix) = src_prefix {
        let (family, addr, mask) = encode_prefix(prefix)
            .ok_or("src_prefix length too long: at most 32 for IPv4, 128 for IPv6")?;
        if dst_prefix.is_some() && family != abi.dst_family {
            return Err("src_prefix and dst_prefix are of different IP families: a frame has one; write both as IPv4 or both as IPv6");
        }
        abi.flags |= abi::MATCH_SRC_ADDR;
        (abi.src_family, abi.src_addr, abi.src_mask) = (family, addr, mask);
    }
    if let Some(id) = vlan {
        if *id >= 4095 {
            return Err("vlan id out of range: 0..=4094 (4095 is reserved)");
        }
        abi.flags |= abi::MATCH_VLAN;
        abi.vlan = abi::VLAN_TAGGED | id;
    }
    Ok(abi)
}

/// (family, masked address, mask) of a prefix as the program reads them; None when
/// the length is longer than the address.
fn encode_prefix(&(addr, len): &(IpAddr, u8)) -> Option<(u8, [u32; 4], [u32; 4])> {
    let (family, bytes, max, raw): (u8, usize, u8, [u8; 16]) = match addr {
        IpAddr::V4(a) => {
            let mut raw = [0u8; 16];
            raw[..4].copy_from_slice(&a.octets());
            (abi::FAMILY_IPV4, 4, 32, raw)
        }
        IpAddr::V6(a) => (abi::FAMILY_IPV6, 16, 128, a.octets()),
    };
    if len > max {
        return None;
    }
    let mask = mask_words(len, bytes);
    let words = to_words(&raw);
    Some((family, std::array::from_fn(|i| words[i] & mask[i]), mask))
}

/// Encodes a rule list for one bank: `MAX_RULES` entries, unused ones disabled.
pub(crate) fn encode_rules(rules: &[Rule]) -> Result<Vec<RuleAbi>, SteerError> {
    if rules.len() > abi::MAX_RULES {
        return Err(SteerError::TooManyRules {
            given: rules.len(),
            max: abi::MAX_RULES,
        });
    }
    let mut out = vec![RuleAbi::default(); abi::MAX_RULES];
    for (index, rule) in rules.iter().enumerate() {
        out[index] =
            encode_rule(rule).map_err(|reason| SteerError::InvalidRule { index, reason })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn fields(
        proto: Option<u8>,
        dst_port: Option<(u16, u16)>,
        dst_prefix: Option<(IpAddr, u8)>,
    ) -> RuleMatch {
        RuleMatch::dst(proto, dst_port, dst_prefix)
    }

    fn src(src_port: Option<(u16, u16)>, src_prefix: Option<&str>, vlan: Option<u16>) -> RuleMatch {
        let src_prefix = src_prefix.map(|p| {
            let (a, l) = p.split_once('/').unwrap();
            (a.parse().unwrap(), l.parse().unwrap())
        });
        RuleMatch::Fields {
            proto: None,
            dst_port: None,
            dst_prefix: None,
            src_port,
            src_prefix,
            vlan,
        }
    }

    #[test]
    fn encodes_source_fields_and_vlan() {
        let rule = Rule {
            matcher: src(Some((1024, 2047)), Some("198.19.7.9/16"), Some(5)),
            action: RuleAction::Steer,
        };
        let abi = encode_rule(&rule).unwrap();
        assert_eq!(
            abi.flags,
            abi::RULE_ENABLED | abi::MATCH_SRC_PORT | abi::MATCH_SRC_ADDR | abi::MATCH_VLAN
        );
        assert_eq!(
            (abi.sport_min, abi.sport_max, abi.port_min, abi.port_max),
            (1024, 2047, 0, 0)
        );
        assert_eq!(abi.src_family, abi::FAMILY_IPV4);
        assert_eq!(abi.src_mask[0].to_ne_bytes(), [255, 255, 0, 0]);
        assert_eq!(abi.src_addr[0].to_ne_bytes(), [198, 19, 0, 0]);
        assert_eq!(
            (abi.dst_family, abi.dst_addr, abi.dst_mask),
            (0, [0; 4], [0; 4]),
            "no dst condition"
        );
        assert_eq!(abi.vlan, abi::VLAN_TAGGED | 5);
        let v6 = encode_rule(&Rule {
            matcher: src(None, Some("2001:2::/48"), Some(0)),
            action: RuleAction::Drop,
        })
        .unwrap();
        assert_eq!(v6.src_family, abi::FAMILY_IPV6);
        let mask: Vec<u8> = v6.src_mask.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(&mask[..7], &[255, 255, 255, 255, 255, 255, 0]);
        assert_eq!(
            v6.vlan,
            abi::VLAN_TAGGED,
            "vlan 0 (priority tag) is still a tagged-frame condition"
        );
        assert_eq!(
            rule.matcher.to_string(),
            "vlan 5 src 198.19.7.9/16 src_port 1024-2047"
        );
    }

    #[test]
    fn rejects_source_rules_that_cannot_match() {
        let err = |m: RuleMatch| {
            encode_rule(&Rule {
                matcher: m,
                action: RuleAction::Pass,
            })
            .unwrap_err()
        };
        assert!(err(src(Some((9, 1)), None, None)).contains("src_port range is empty"));
        let icmp = RuleMatch::Fields {
            proto: Some(1),
            dst_port: None,
            dst_prefix: None,
            src_port: Some((1, 1)),
            src_prefix: None,
            vlan: None,
        };
        assert!(err(icmp).contains("src_port only matches"));
        assert!(err(src(None, Some("198.18.0.0/33"), None)).contains("src_prefix length"));
        assert!(err(src(None, None, Some(4095))).contains("vlan id out of range"));
        let both = |dst: &str, src: &str| RuleMatch::Fields {
            proto: None,
            dst_port: None,
            dst_prefix: Some((dst.parse().unwrap(), 16)),
            src_port: None,
            src_prefix: Some((src.parse().unwrap(), 16)),
            vlan: None,
        };
        assert!(err(both("2001:2::", "198.18.0.0")).contains("different IP families"));
        assert!(encode_rule(&Rule {
            matcher: both("198.19.0.0", "198.18.0.0"),
            action: RuleAction::Pass
        })
        .is_ok());
    }

    #[test]
    fn encodes_ipv4_prefix_masked_in_network_order() {
        let rule = Rule {
            matcher: fields(
                Some(17),
                Some((9000, 9099)),
                Some((IpAddr::V4(Ipv4Addr::new(198, 19, 7, 9)), 15)),
            ),
            action: RuleAction::Steer,
        };
        let abi = encode_rule(&rule).unwrap();
        assert_eq!(
            abi.flags,
            abi::RULE_ENABLED | abi::MATCH_PROTO | abi::MATCH_DST_PORT | abi::MATCH_DST_ADDR
        );
        assert_eq!(
            (abi.action, abi.proto, abi.port_min, abi.port_max),
            (abi::ACTION_STEER, 17, 9000, 9099)
        );
        assert_eq!(abi.dst_family, abi::FAMILY_IPV4);
        assert_eq!(abi.dst_mask[0].to_ne_bytes(), [255, 254, 0, 0]);
        assert_eq!(abi.dst_addr[0].to_ne_bytes(), [198, 18, 0, 0]);
        assert_eq!(&abi.dst_mask[1..], &[0, 0, 0]);
    }

    #[test]
    fn encodes_ipv6_prefix() {
        let addr: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
        let rule = Rule {
            matcher: fields(None, None, Some((IpAddr::V6(addr), 36))),
            action: RuleAction::Drop,
        };
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
        let bad_range = Rule {
            matcher: fields(None, Some((10, 9)), None),
            action: RuleAction::Pass,
        };
        assert!(encode_rule(&bad_range).is_err());
        let icmp_port = Rule {
            matcher: fields(Some(1), Some((1, 2)), None),
            action: RuleAction::Pass,
        };
        assert!(encode_rule(&icmp_port).is_err());
        let long_prefix = Rule {
            matcher: fields(None, None, Some((IpAddr::V4(Ipv4Addr::LOCALHOST), 33))),
            action: RuleAction::Pass,
        };
        assert!(encode_rule(&long_prefix).is_err());
        let err = encode_rules(&[Rule::all(RuleAction::Pass), icmp_port]).unwrap_err();
        assert!(
            matches!(err, SteerError::InvalidRule { index: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn bank_is_padded_with_disabled_rules_and_bounded() {
        let bank = encode_rules(&[Rule::all(RuleAction::Steer)]).unwrap();
        assert_eq!(bank.len(), abi::MAX_RULES);
        assert_eq!(bank[0].flags, abi::RULE_ENABLED);
        assert!(bank[1..].iter().all(|r| r.flags & abi::RULE_ENABLED == 0));
        let too_many = vec![Rule::all(RuleAction::Pass); abi::MAX_RULES + 1];
        assert!(matches!(
            encode_rules(&too_many),
            Err(SteerError::TooManyRules { given: 65, max: 64 })
        ));
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
                { action = "drop", src_prefix = "198.18.0.0/15", src_port = [1, 2], vlan = 7 },
            ]
        "#;
        let cfg: Cfg = toml::from_str(text).unwrap();
        assert_eq!(
            cfg.rules[0].matcher,
            fields(
                Some(17),
                Some((9000, 9099)),
                Some((IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)), 15))
            )
        );
        assert_eq!(
            cfg.rules[1].matcher,
            fields(None, None, Some(("2001:db8::1".parse().unwrap(), 128)))
        );
        assert_eq!(cfg.rules[2], Rule::all(RuleAction::Pass));
        assert_eq!(
            cfg.rules[3].matcher,
            src(Some((1, 2)), Some("198.18.0.0/15"), Some(7))
        );
        let again: Cfg = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(again.rules, cfg.rules);
        let bad = toml::from_str::<Cfg>(r#"rules = [{ action = "steer", dst_port = [9, 1] }]"#);
        assert!(bad.unwrap_err().to_string().contains("low <= high"));
    }
}
