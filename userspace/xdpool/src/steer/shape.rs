//! The shape of a rule list: what `xdpool_steer` is specialized for at load time.
//!
//! The shape is what the program's code depends on (`xdpool.h`, "Shape"): how many
//! rules, which conditions any rule has, which frame kinds any rule can match, and
//! whether rule 0 takes every frame. The rule values (protocols, ports, prefixes,
//! actions) stay in the `rules` map, so a list with the same shape is swapped in
//! without a reload. Pure code, no kernel access.

use std::fmt;

use super::abi::{self, RuleAbi};

/// What the steering program is specialized for; two lists with equal shapes run
/// on the same loaded program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Rules the program walks (0 for match-all).
    rule_count: u32,
    /// `MATCH_*` bits some rule uses.
    fields: u32,
    /// `SHAPE_*` bits: the frame kinds some rule can match.
    families: u32,
    /// `ACTION_*` of rule 0 when it has no condition (then it takes every frame).
    match_all: Option<u8>,
}

const MATCH_BITS: u32 = IP_BITS | abi::MATCH_VLAN;
/// The conditions only an IP frame can meet (VLAN holds for any frame kind).
const IP_BITS: u32 = abi::MATCH_PROTO
    | abi::MATCH_DST_PORT
    | abi::MATCH_DST_ADDR
    | abi::MATCH_SRC_PORT
    | abi::MATCH_SRC_ADDR;

impl Shape {
    /// The shape of an encoded rule list (`encode_rules`' first `len` entries).
    pub(crate) fn of(rules: &[RuleAbi]) -> Shape {
        if let Some(first) = rules.first().filter(|r| r.flags & MATCH_BITS == 0) {
            // Rule 0 takes every frame; the rest are shadowed and never walked.
            return Shape {
                rule_count: 0,
                fields: 0,
                families: 0,
                match_all: Some(first.action),
            };
        }
        let (mut families, mut fields) = (0, 0);
        for r in rules {
            let bits = r.flags & MATCH_BITS;
            fields |= bits;
            if bits & IP_BITS == 0 {
                families |= abi::SHAPE_NON_IP;
            }
            // A prefix condition pins the family (a rule's two prefixes are of one
            // family, `encode_rule` checks it); protocol, port and VLAN conditions
            // hold for both.
            let only = if bits & abi::MATCH_DST_ADDR != 0 {
                Some(r.dst_family)
            } else {
                (bits & abi::MATCH_SRC_ADDR != 0).then_some(r.src_family)
            };
            if only.is_none_or(|f| f == abi::FAMILY_IPV4) {
                families |= abi::SHAPE_IPV4;
            }
            if only.is_none_or(|f| f == abi::FAMILY_IPV6) {
                families |= abi::SHAPE_IPV6;
            }
        }
        Shape {
            rule_count: rules.len() as u32,
            fields,
            families,
            match_all: None,
        }
    }

    /// Whether the rules test protocol and destination port only (or nothing):
    /// such a shape loads `xdpool_steer_port` / `xdpool_steer_1buf_port`, compiled
    /// without the other fields' parse and tests.
    pub fn port_only(&self) -> bool {
        self.fields & !abi::FIELDS_PORT == 0
    }

    /// Rules the program walks (0 for match-all: it walks none).
    pub fn rule_count(&self) -> u32 {
        self.rule_count
    }

    /// Union of every rule's `MATCH_*` bits (`shape_fields`).
    pub fn fields(&self) -> u32 {
        self.fields
    }

    /// `SHAPE_*` bits: the frame kinds the program parses (`shape_families`).
    pub fn families(&self) -> u32 {
        self.families
    }

    /// The action rule 0 applies to every frame, unparsed, when it has no condition.
    pub fn match_all(&self) -> Option<u8> {
        self.match_all
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(action) = self.match_all {
            let name = match action {
                abi::ACTION_STEER => "steer",
                abi::ACTION_DROP => "drop",
                _ => "pass",
            };
            return write!(f, "match-all {name}");
        }
        let names = |bits: u32, table: &[(u32, &'static str)]| {
            let v: Vec<&str> = table
                .iter()
                .filter(|(b, _)| bits & b != 0)
                .map(|(_, n)| *n)
                .collect();
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join("|")
            }
        };
        let fields = [
            (abi::MATCH_PROTO, "proto"),
            (abi::MATCH_DST_PORT, "port"),
            (abi::MATCH_DST_ADDR, "addr"),
            (abi::MATCH_SRC_PORT, "src_port"),
            (abi::MATCH_SRC_ADDR, "src_addr"),
            (abi::MATCH_VLAN, "vlan"),
        ];
        let kinds = [
            (abi::SHAPE_IPV4, "ipv4"),
            (abi::SHAPE_IPV6, "ipv6"),
            (abi::SHAPE_NON_IP, "non-ip"),
        ];
        write!(
            f,
            "{} rules, fields {}, parses {}",
            self.rule_count,
            names(self.fields, &fields),
            names(self.families, &kinds)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steer::rule::encode_rule;
    use crate::steer::{Rule, RuleAction, RuleMatch};
    use std::net::IpAddr;

    fn shape(rules: &[Rule]) -> Shape {
        let abi: Vec<RuleAbi> = rules.iter().map(|r| encode_rule(r).unwrap()).collect();
        Shape::of(&abi)
    }

    fn fields(proto: Option<u8>, port: Option<(u16, u16)>, prefix: Option<&str>) -> Rule {
        let dst_prefix = prefix.map(|p| {
            let (a, l) = p.split_once('/').unwrap();
            (a.parse::<IpAddr>().unwrap(), l.parse().unwrap())
        });
        Rule {
            matcher: RuleMatch::dst(proto, port, dst_prefix),
            action: RuleAction::Steer,
        }
    }

    fn source(src_port: Option<(u16, u16)>, prefix: Option<&str>, vlan: Option<u16>) -> Rule {
        let src_prefix = prefix.map(|p| {
            let (a, l) = p.split_once('/').unwrap();
            (a.parse::<IpAddr>().unwrap(), l.parse().unwrap())
        });
        let matcher = RuleMatch::Fields {
            proto: None,
            dst_port: None,
            dst_prefix: None,
            src_port,
            src_prefix,
            vlan,
        };
        Rule {
            matcher,
            action: RuleAction::Steer,
        }
    }

    #[test]
    fn source_and_vlan_fields_are_shape_bits_and_families_follow_them() {
        let v4 = shape(&[source(None, Some("198.18.0.0/15"), None)]);
        assert_eq!(
            (v4.fields(), v4.families()),
            (abi::MATCH_SRC_ADDR, abi::SHAPE_IPV4),
            "a source prefix pins the family"
        );
        let v6 = shape(&[source(None, Some("2001:2::/48"), None)]);
        assert_eq!(v6.families(), abi::SHAPE_IPV6);
        let vlan = shape(&[source(None, None, Some(5))]);
        assert_eq!(
            vlan.match_all(),
            None,
            "a VLAN condition is a condition: rule 0 is no match-all"
        );
        assert_eq!(
            (vlan.fields(), vlan.families()),
            (
                abi::MATCH_VLAN,
                abi::SHAPE_IPV4 | abi::SHAPE_IPV6 | abi::SHAPE_NON_IP
            ),
            "tagged ARP matches a VLAN-only rule"
        );
        let sport = shape(&[source(Some((1, 2)), None, None)]);
        assert_eq!(
            (sport.fields(), sport.families()),
            (abi::MATCH_SRC_PORT, abi::SHAPE_IPV4 | abi::SHAPE_IPV6)
        );
        assert_eq!(
            shape(&[source(Some((1, 2)), Some("198.18.0.0/15"), Some(7))]).to_string(),
            "1 rules, fields src_port|src_addr|vlan, parses ipv4"
        );
        assert_ne!(
            sport,
            shape(&[fields(None, Some((1, 2)), None)]),
            "source and destination ports are different programs"
        );
    }

    #[test]
    fn rule_zero_without_condition_is_match_all_whatever_follows() {
        let s = shape(&[Rule::all(RuleAction::Steer)]);
        assert_eq!(s.match_all(), Some(abi::ACTION_STEER));
        assert_eq!((s.rule_count(), s.fields(), s.families()), (0, 0, 0));
        let shadowed = shape(&[Rule::all(RuleAction::Steer), fields(Some(17), None, None)]);
        assert_eq!(shadowed, s);
        assert_ne!(
            shape(&[Rule::all(RuleAction::Drop)]),
            s,
            "the action is part of the match-all shape"
        );
        assert_eq!(s.to_string(), "match-all steer");
    }

    #[test]
    fn lab_rule_parses_both_families_not_other_frames() {
        let s = shape(&[fields(Some(17), Some((9, 9)), None)]);
        assert_eq!(s.match_all(), None);
        assert_eq!(s.rule_count(), 1);
        assert_eq!(s.fields(), abi::MATCH_PROTO | abi::MATCH_DST_PORT);
        assert_eq!(s.families(), abi::SHAPE_IPV4 | abi::SHAPE_IPV6);
        assert_eq!(
            s.to_string(),
            "1 rules, fields proto|port, parses ipv4|ipv6"
        );
    }

    #[test]
    fn prefixes_pin_the_family_and_a_later_catch_all_adds_non_ip() {
        let v4 = shape(&[
            fields(None, None, Some("198.18.0.0/15")),
            fields(Some(6), None, Some("198.19.0.0/16")),
        ]);
        assert_eq!(v4.families(), abi::SHAPE_IPV4);
        let v6 = shape(&[fields(None, None, Some("2001:2::/48"))]);
        assert_eq!(v6.families(), abi::SHAPE_IPV6);
        let both = shape(&[
            fields(None, None, Some("2001:2::/48")),
            Rule::all(RuleAction::Pass),
        ]);
        assert_eq!(
            both.families(),
            abi::SHAPE_IPV4 | abi::SHAPE_IPV6 | abi::SHAPE_NON_IP
        );
        assert_eq!(both.rule_count(), 2);
        assert_eq!(shape(&[]).families(), 0, "no rule: nothing to parse");
    }

    #[test]
    fn values_do_not_change_the_shape_conditions_do() {
        let a = shape(&[fields(Some(17), Some((9, 9)), None)]);
        let b = shape(&[Rule {
            action: RuleAction::Drop,
            ..fields(Some(6), Some((80, 443)), None)
        }]);
        assert_eq!(a, b, "other values and actions, same program");
        assert_ne!(
            a,
            shape(&[fields(Some(17), None, None)]),
            "a condition fewer"
        );
        assert_eq!(
            shape(&[
                fields(Some(17), None, None),
                fields(None, Some((1, 2)), None)
            ]),
            shape(&[
                fields(None, Some((1, 2)), None),
                fields(Some(6), None, None)
            ]),
            "the same conditions over the list, in other rules"
        );
        assert_ne!(
            a,
            shape(&[
                fields(Some(17), Some((9, 9)), None),
                fields(Some(17), Some((9, 9)), None)
            ]),
            "a rule more"
        );
        assert_ne!(
            shape(&[fields(None, None, Some("198.18.0.0/15"))]),
            shape(&[fields(None, None, Some("2001:2::/48"))])
        );
    }

    #[test]
    fn port_only_shapes_test_protocol_and_destination_port_at_most() {
        assert!(
            shape(&[fields(Some(17), Some((9, 9)), None)]).port_only(),
            "the lab's rule"
        );
        assert!(shape(&[fields(Some(17), None, None)]).port_only());
        assert!(
            shape(&[]).port_only() && shape(&[Rule::all(RuleAction::Drop)]).port_only(),
            "nothing to test"
        );
        assert!(
            !shape(&[fields(Some(17), Some((9, 9)), Some("198.18.0.0/15"))]).port_only(),
            "an address"
        );
        let src = Rule {
            matcher: RuleMatch::Fields {
                proto: None,
                dst_port: None,
                dst_prefix: None,
                src_port: Some((1, 2)),
                src_prefix: None,
                vlan: None,
            },
            action: RuleAction::Pass,
        };
        assert!(
            !shape(&[fields(Some(17), Some((9, 9)), None), src]).port_only(),
            "a source port"
        );
    }
}
