//! Rust mirror of `xdp-prog/xdpool.h`: map value layouts and constants.
//!
//! Layouts are asserted at compile time; a unit test parses the header text so a
//! constant changed on one side only fails `cargo test`.

use core::mem::{offset_of, size_of};

/// Rules per bank (`XDPOOL_MAX_RULES`).
pub const MAX_RULES: usize = 64;
/// Rule banks in the `rules` map (`XDPOOL_RULE_BANKS`).
pub const RULE_BANKS: usize = 2;
/// Entries in the `xsks` XSKMAP (`XDPOOL_MAX_QUEUES`).
pub const MAX_QUEUES: u32 = 64;
/// IPv6 extension headers the program skips (`XDPOOL_MAX_IPV6_EXT`).
pub const MAX_IPV6_EXT: u32 = 6;

/// Rule flag: the rule is in use (`XDPOOL_RULE_ENABLED`).
pub const RULE_ENABLED: u32 = 1;
/// Rule flag: match the IP protocol (`XDPOOL_MATCH_PROTO`).
pub const MATCH_PROTO: u32 = 2;
/// Rule flag: match the UDP/TCP destination port range (`XDPOOL_MATCH_DST_PORT`).
pub const MATCH_DST_PORT: u32 = 4;
/// Rule flag: match the destination prefix (`XDPOOL_MATCH_DST_ADDR`).
pub const MATCH_DST_ADDR: u32 = 8;
/// Rule flag: match the UDP/TCP source port range (`XDPOOL_MATCH_SRC_PORT`).
pub const MATCH_SRC_PORT: u32 = 16;
/// Rule flag: match the source prefix (`XDPOOL_MATCH_SRC_ADDR`).
pub const MATCH_SRC_ADDR: u32 = 32;
/// Rule flag: match the outer VLAN tag's id (`XDPOOL_MATCH_VLAN`).
pub const MATCH_VLAN: u32 = 64;
/// The fields the `*_port` programs can test (`XDPOOL_FIELDS_PORT`).
pub const FIELDS_PORT: u32 = MATCH_PROTO | MATCH_DST_PORT;
/// `RuleAbi::vlan` (and the program's parsed value): this bit | the 12-bit id; an
/// untagged frame's value is 0 (`XDPOOL_VLAN_TAGGED`).
pub const VLAN_TAGGED: u16 = 4096;

/// `shape_families` bit: some rule can match IPv4 frames (`XDPOOL_SHAPE_IPV4`).
pub const SHAPE_IPV4: u32 = 1;
/// `shape_families` bit: some rule can match IPv6 frames (`XDPOOL_SHAPE_IPV6`).
pub const SHAPE_IPV6: u32 = 2;
/// `shape_families` bit: some rule can match non-IP frames (`XDPOOL_SHAPE_NON_IP`).
pub const SHAPE_NON_IP: u32 = 4;

/// Action: redirect to the AF_XDP socket of the receive queue.
pub const ACTION_STEER: u8 = 1;
/// Action: pass to the kernel stack.
pub const ACTION_PASS: u8 = 2;
/// Action: drop.
pub const ACTION_DROP: u8 = 3;

/// `dst_family` / `src_family` for IPv4.
pub const FAMILY_IPV4: u8 = 4;
/// `dst_family` / `src_family` for IPv6.
pub const FAMILY_IPV6: u8 = 6;

/// The steered frame's metadata tag: generation above this shift, rule position below.
pub const TAG_GEN_SHIFT: u32 = 8;
/// Bytes of the metadata tag before the packet data (`XDPOOL_TAG_SIZE`).
pub const TAG_SIZE: u32 = 4;
/// `xdpool_config.live`: tagging on (`XDPOOL_LIVE_TAGGING`).
pub const LIVE_TAGGING: u32 = 2;
/// `xdpool_config.live`: the generation's shift (`XDPOOL_LIVE_GEN_SHIFT`).
pub const LIVE_GEN_SHIFT: u32 = 2;

/// Counter index: redirected to an AF_XDP socket.
pub const CNT_STEERED: u32 = 0;
/// Counter index: matched a steer rule, but no socket in the queue's XSKMAP slot.
pub const CNT_NO_SOCKET: u32 = 1;
/// Counter index: passed to the kernel (pass rule or no rule matched).
pub const CNT_PASSED: u32 = 2;
/// Counter index: dropped by a drop rule.
pub const CNT_DROPPED: u32 = 3;
/// Counter index: malformed, passed to the kernel.
pub const CNT_MALFORMED: u32 = 4;
/// Number of counters.
pub const CNT_NR: u32 = 5;

/// `struct xdpool_rule`: one entry of the `rules` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleAbi {
    /// `RULE_ENABLED | MATCH_*`.
    pub flags: u32,
    /// `ACTION_*`.
    pub action: u8,
    /// IP protocol (IPv6: final next header).
    pub proto: u8,
    /// `FAMILY_IPV4` or `FAMILY_IPV6` when `MATCH_DST_ADDR` is set.
    pub dst_family: u8,
    /// `FAMILY_IPV4` or `FAMILY_IPV6` when `MATCH_SRC_ADDR` is set.
    pub src_family: u8,
    /// Lowest destination port, host order.
    pub port_min: u16,
    /// Highest destination port (inclusive), host order.
    pub port_max: u16,
    /// Lowest source port, host order.
    pub sport_min: u16,
    /// Highest source port (inclusive), host order.
    pub sport_max: u16,
    /// Destination address, network order, already masked (IPv4: word 0).
    pub dst_addr: [u32; 4],
    /// Destination mask, network order.
    pub dst_mask: [u32; 4],
    /// `VLAN_TAGGED | id` when `MATCH_VLAN` is set.
    pub vlan: u16,
    /// Padding, zero.
    pub pad0: u16,
    /// Reserved, zero.
    pub reserved: u32,
    /// Source address, network order, already masked (IPv4: word 0).
    pub src_addr: [u32; 4],
    /// Source mask, network order.
    pub src_mask: [u32; 4],
}

/// `struct xdpool_config`: the single entry of the `config` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfigAbi {
    /// `(generation << 1) | bank`: the live rule bank and its list's generation.
    pub live: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// `struct xdpool_rule_hits`: one entry of `rule_hits` (per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleHitsAbi {
    /// Frames that matched the rule.
    pub packets: u64,
    /// Their bytes (every buffer of a multi-buffer frame).
    pub bytes: u64,
}

/// `struct xdpool_bank`: one entry of the `rules` map, a whole rule list.
pub type BankAbi = [RuleAbi; MAX_RULES];

/// `XDPOOL_RULE_SIZE`.
pub const RULE_SIZE: usize = 88;
/// `XDPOOL_BANK_SIZE`.
pub const BANK_SIZE: usize = 5632;
/// `XDPOOL_CONFIG_SIZE`.
pub const CONFIG_SIZE: usize = 8;
/// `XDPOOL_RULE_HITS_SIZE`.
pub const RULE_HITS_SIZE: usize = 16;

const _: () = assert!(size_of::<RuleAbi>() == RULE_SIZE);
const _: () = assert!(size_of::<BankAbi>() == BANK_SIZE);
const _: () = assert!(offset_of!(RuleAbi, flags) == 0);
const _: () = assert!(offset_of!(RuleAbi, action) == 4);
const _: () = assert!(offset_of!(RuleAbi, proto) == 5);
const _: () = assert!(offset_of!(RuleAbi, dst_family) == 6);
const _: () = assert!(offset_of!(RuleAbi, src_family) == 7);
const _: () = assert!(offset_of!(RuleAbi, port_min) == 8);
const _: () = assert!(offset_of!(RuleAbi, port_max) == 10);
const _: () = assert!(offset_of!(RuleAbi, sport_min) == 12);
const _: () = assert!(offset_of!(RuleAbi, sport_max) == 14);
const _: () = assert!(offset_of!(RuleAbi, dst_addr) == 16);
const _: () = assert!(offset_of!(RuleAbi, dst_mask) == 32);
const _: () = assert!(offset_of!(RuleAbi, vlan) == 48);
const _: () = assert!(offset_of!(RuleAbi, pad0) == 50);
const _: () = assert!(offset_of!(RuleAbi, reserved) == 52);
const _: () = assert!(offset_of!(RuleAbi, src_addr) == 56);
const _: () = assert!(offset_of!(RuleAbi, src_mask) == 72);
const _: () = assert!(size_of::<ConfigAbi>() == CONFIG_SIZE);
const _: () = assert!(offset_of!(ConfigAbi, live) == 0);
const _: () = assert!(offset_of!(ConfigAbi, reserved) == 4);
const _: () = assert!(size_of::<RuleHitsAbi>() == RULE_HITS_SIZE);
const _: () = assert!(offset_of!(RuleHitsAbi, packets) == 0);
const _: () = assert!(offset_of!(RuleHitsAbi, bytes) == 8);

// SAFETY: both are #[repr(C)], contain only integers, and have no implicit
// padding (sizes and offsets asserted above), so every bit pattern is valid and
// no uninitialised byte is ever copied to the kernel.
unsafe impl aya::Pod for RuleAbi {}
// SAFETY: as above.
unsafe impl aya::Pod for ConfigAbi {}
// SAFETY: as above (two u64, no padding).
unsafe impl aya::Pod for RuleHitsAbi {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const HEADER: &str = include_str!("../../../../xdp-prog/xdpool.h");

    fn header_defines() -> HashMap<String, u64> {
        HEADER
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                if words.next()? != "#define" {
                    return None;
                }
                let name = words.next()?;
                let value = words.next()?.parse().ok()?;
                Some((name.to_string(), value))
            })
            .collect()
    }

    /// (name, offset) for every field of `struct name`, from its `/* offset N */` comments.
    fn header_offsets(name: &str) -> Vec<(String, usize)> {
        let start = HEADER
            .find(&format!("struct {name} {{"))
            .expect("struct in header");
        let body = &HEADER[start..];
        let body = &body[..body.find("};").expect("struct end")];
        body.lines()
            .filter_map(|line| {
                let (decl, comment) = line.split_once("/* offset ")?;
                let offset = comment
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse()
                    .ok()?;
                let field = decl
                    .trim()
                    .trim_end_matches(';')
                    .split_whitespace()
                    .last()?;
                let field = field.split('[').next()?.to_string();
                Some((field, offset))
            })
            .collect()
    }

    #[test]
    fn header_constants_match_rust() {
        let d = header_defines();
        let expect: &[(&str, u64)] = &[
            ("XDPOOL_MAX_RULES", MAX_RULES as u64),
            ("XDPOOL_RULE_BANKS", RULE_BANKS as u64),
            ("XDPOOL_MAX_QUEUES", MAX_QUEUES.into()),
            ("XDPOOL_MAX_IPV6_EXT", MAX_IPV6_EXT.into()),
            ("XDPOOL_RULE_ENABLED", RULE_ENABLED.into()),
            ("XDPOOL_MATCH_PROTO", MATCH_PROTO.into()),
            ("XDPOOL_MATCH_DST_PORT", MATCH_DST_PORT.into()),
            ("XDPOOL_MATCH_DST_ADDR", MATCH_DST_ADDR.into()),
            ("XDPOOL_MATCH_SRC_PORT", MATCH_SRC_PORT.into()),
            ("XDPOOL_MATCH_SRC_ADDR", MATCH_SRC_ADDR.into()),
            ("XDPOOL_MATCH_VLAN", MATCH_VLAN.into()),
            ("XDPOOL_FIELDS_PORT", FIELDS_PORT.into()),
            ("XDPOOL_VLAN_TAGGED", VLAN_TAGGED.into()),
            ("XDPOOL_SHAPE_IPV4", SHAPE_IPV4.into()),
            ("XDPOOL_SHAPE_IPV6", SHAPE_IPV6.into()),
            ("XDPOOL_SHAPE_NON_IP", SHAPE_NON_IP.into()),
            ("XDPOOL_ACTION_STEER", ACTION_STEER.into()),
            ("XDPOOL_ACTION_PASS", ACTION_PASS.into()),
            ("XDPOOL_ACTION_DROP", ACTION_DROP.into()),
            ("XDPOOL_FAMILY_IPV4", FAMILY_IPV4.into()),
            ("XDPOOL_FAMILY_IPV6", FAMILY_IPV6.into()),
            ("XDPOOL_CNT_STEERED", CNT_STEERED.into()),
            ("XDPOOL_CNT_NO_SOCKET", CNT_NO_SOCKET.into()),
            ("XDPOOL_CNT_PASSED", CNT_PASSED.into()),
            ("XDPOOL_CNT_DROPPED", CNT_DROPPED.into()),
            ("XDPOOL_CNT_MALFORMED", CNT_MALFORMED.into()),
            ("XDPOOL_CNT_NR", CNT_NR.into()),
            ("XDPOOL_RULE_SIZE", RULE_SIZE as u64),
            ("XDPOOL_BANK_SIZE", BANK_SIZE as u64),
            ("XDPOOL_CONFIG_SIZE", CONFIG_SIZE as u64),
            ("XDPOOL_RULE_HITS_SIZE", RULE_HITS_SIZE as u64),
            ("XDPOOL_TAG_GEN_SHIFT", TAG_GEN_SHIFT.into()),
            ("XDPOOL_TAG_SIZE", TAG_SIZE.into()),
            ("XDPOOL_LIVE_TAGGING", LIVE_TAGGING.into()),
            ("XDPOOL_LIVE_GEN_SHIFT", LIVE_GEN_SHIFT.into()),
        ];
        for (name, value) in expect {
            assert_eq!(
                d.get(*name),
                Some(value),
                "{name} differs between xdpool.h and abi.rs"
            );
        }
        // Every numeric define in the header is mirrored here.
        let mirrored: Vec<&str> = expect.iter().map(|(n, _)| *n).collect();
        for name in d.keys() {
            assert!(
                mirrored.contains(&name.as_str()),
                "{name} in xdpool.h has no Rust mirror"
            );
        }
    }

    #[test]
    fn header_struct_offsets_match_rust() {
        let rule = header_offsets("xdpool_rule");
        let expect_rule = [
            ("flags", offset_of!(RuleAbi, flags)),
            ("action", offset_of!(RuleAbi, action)),
            ("proto", offset_of!(RuleAbi, proto)),
            ("dst_family", offset_of!(RuleAbi, dst_family)),
            ("src_family", offset_of!(RuleAbi, src_family)),
            ("port_min", offset_of!(RuleAbi, port_min)),
            ("port_max", offset_of!(RuleAbi, port_max)),
            ("sport_min", offset_of!(RuleAbi, sport_min)),
            ("sport_max", offset_of!(RuleAbi, sport_max)),
            ("dst_addr", offset_of!(RuleAbi, dst_addr)),
            ("dst_mask", offset_of!(RuleAbi, dst_mask)),
            ("vlan", offset_of!(RuleAbi, vlan)),
            ("pad0", offset_of!(RuleAbi, pad0)),
            ("reserved", offset_of!(RuleAbi, reserved)),
            ("src_addr", offset_of!(RuleAbi, src_addr)),
            ("src_mask", offset_of!(RuleAbi, src_mask)),
        ];
        let expect_rule: Vec<(String, usize)> = expect_rule
            .iter()
            .map(|(n, o)| (n.to_string(), *o))
            .collect();
        assert_eq!(rule, expect_rule);

        let config = header_offsets("xdpool_config");
        assert_eq!(
            config,
            vec![
                ("live".to_string(), offset_of!(ConfigAbi, live)),
                ("reserved".to_string(), offset_of!(ConfigAbi, reserved)),
            ]
        );
        let hits = header_offsets("xdpool_rule_hits");
        assert_eq!(
            hits,
            vec![
                ("packets".to_string(), offset_of!(RuleHitsAbi, packets)),
                ("bytes".to_string(), offset_of!(RuleHitsAbi, bytes)),
            ]
        );
    }
}
