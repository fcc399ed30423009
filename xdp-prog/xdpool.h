/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared between xdpool.bpf.c and userspace (userspace/xdpool/src/steer/abi.rs
 * mirrors every struct and constant here; a unit test parses this file so the
 * two cannot drift). Keep every constant a plain `#define NAME <decimal>`.
 *
 * Maps (BTF-defined in xdpool.bpf.c):
 *   xsks            XSKMAP, XDPOOL_MAX_QUEUES entries, key = rx queue index
 *   rules           ARRAY of struct xdpool_bank, XDPOOL_RULE_BANKS entries (one
 *                   lookup per frame; the rules are then plain loads)
 *   config          ARRAY, 1 entry, struct xdpool_config (which bank is live,
 *                   and the rule list's generation)
 *   counters        PERCPU_ARRAY of __u64, XDPOOL_CNT_NR entries (XDPOOL_CNT_*)
 *   rule_hits       PERCPU_ARRAY of struct xdpool_rule_hits, XDPOOL_RULE_BANKS *
 *                   XDPOOL_MAX_RULES entries: bank * XDPOOL_MAX_RULES + rule
 *                   position (each bank counts apart, so the bank a swap retires
 *                   keeps its final counts while the new one starts from zero)
 *   ceiling_frames  PERCPU_ARRAY of __u64, 1 entry (xdpool_ceiling only)
 *
 * Shape (const volatile globals in xdpool.bpf.c's .rodata, set by userspace
 * before load and frozen, so the verifier removes what they rule out):
 *   shape_rule_count   rules in the list (0..XDPOOL_MAX_RULES); the program
 *                      walks exactly these entries of the live bank
 *   shape_fields       XDPOOL_MATCH_* bits some rule uses (the others are
 *                      never tested)
 *   shape_families     XDPOOL_SHAPE_* bits: frame kinds some rule can match;
 *                      frames of the other kinds are passed unparsed
 *   shape_match_all    0, or the XDPOOL_ACTION_* of rule 0 when it matches
 *                      every frame: no parse, no rule walk, that action
 * A rule list can only be written into a program loaded for its shape; another
 * shape means another program (userspace swaps it with a bpf_link update).
 *
 * Semantics of xdpool_steer:
 *   - Rules in the live bank are tried in order; the first that matches wins.
 *   - A rule with no XDPOOL_MATCH_* bit matches every well-formed frame (also
 *     non-IP). Each set bit adds a condition (logical AND): PROTO (IP frames
 *     only), DST_PORT / SRC_PORT (UDP and TCP with their header, so never a
 *     non-first fragment), DST_ADDR / SRC_ADDR (the prefix's family only),
 *     VLAN (the outer tag's 12-bit id, the first tag after the MACs, 802.1Q
 *     or 802.1ad; an untagged frame never matches a VLAN condition, a
 *     double-tagged frame matches by its outer tag, the inner is not looked
 *     at). A VLAN condition alone also matches tagged non-IP frames.
 *   - Frames that match no rule are passed to the kernel (counted `passed`).
 *   - Malformed frames (truncated Ethernet/VLAN/IP/extension/L4 headers, IPv4
 *     IHL < 5, IPv4 total length or IPv6 payload length larger than the frame,
 *     UDP length outside [8, IP payload], TCP data offset < 5 or beyond the IP
 *     payload) are counted `malformed` and PASSED to the kernel, never steered,
 *     never counted as a rule hit: the kernel stack decides what to do with them.
 *   - IPv4 non-first fragments and IPv6 non-first fragments carry no L4 header:
 *     they can match protocol and address conditions, never a port condition.
 *   - Every frame increments exactly one of steered, no_socket, passed, dropped,
 *     malformed, so their sum is the number of frames seen.
 *   - A rule hit adds 1 packet and the frame's length (all buffers) in bytes.
 *   - While xdpool_config.live has XDPOOL_LIVE_TAGGING set (only during a hot
 *     reload's hand-over), a frame redirected to a socket carries XDP metadata:
 *     one __u32 tag just before the packet data, (generation <<
 *     XDPOOL_TAG_GEN_SHIFT) | rule position, generation from xdpool_config.live.
 *     Workers act on a tagged frame under the rule list of that generation, and
 *     on one without a tag of the hand-over under the list before it (it was
 *     steered before tagging began), so a frame steered under one list is never
 *     acted on under the next. Outside a hand-over nothing is written (the tag
 *     costs a helper call and a write per frame). Where the driver gives no
 *     metadata room, no tag is written (worker/rules.rs bounds the hand-over).
 *   - Two entry points, one body: xdpool_steer ("xdp.frags", multi-buffer
 *     frames; a frame's bytes come from bpf_xdp_get_buff_len) and
 *     xdpool_steer_1buf ("xdp": the kernel guarantees the whole frame lies in
 *     data..data_end, so lengths are checked and counted without a helper).
 *     Userspace loads the second where the device's MTU fits one buffer and
 *     the sockets are not multi-buffer. Each also as xdpool_steer_port and
 *     xdpool_steer_1buf_port: the same body compiled for rules that test
 *     protocol and destination port only (a compile-time field mask, so the
 *     other fields' parse and stack slots are gone before the verifier runs);
 *     userspace loads them for a shape whose shape_fields are within it.
 *   - Shapes that parse less count differently, never act differently on a
 *     well-formed frame:
 *     * match-all (rule 0 has no condition): every frame gets rule 0's action
 *       unparsed, malformed ones included (steered, no_socket, passed or
 *       dropped; never malformed), and counts as a hit of rule 0.
 *     * a frame kind (IPv4, IPv6, non-IP) no rule can match is passed unparsed:
 *       counted passed, also when malformed (it is passed either way).
 */
#ifndef XDPOOL_H
#define XDPOOL_H

#include <linux/types.h>

#define XDPOOL_MAX_RULES 64
#define XDPOOL_RULE_BANKS 2
#define XDPOOL_MAX_QUEUES 64
/* IPv6 extension headers skipped before giving up on finding L4. */
#define XDPOOL_MAX_IPV6_EXT 6

/* xdpool_rule.flags */
#define XDPOOL_RULE_ENABLED 1
#define XDPOOL_MATCH_PROTO 2
#define XDPOOL_MATCH_DST_PORT 4
#define XDPOOL_MATCH_DST_ADDR 8
#define XDPOOL_MATCH_SRC_PORT 16
#define XDPOOL_MATCH_SRC_ADDR 32
#define XDPOOL_MATCH_VLAN 64
/* The fields the *_port entry points can test: XDPOOL_MATCH_PROTO |
 * XDPOOL_MATCH_DST_PORT (xdpool.bpf.c asserts it; userspace loads them for a
 * shape whose fields are within it). */
#define XDPOOL_FIELDS_PORT 6

/* xdpool_rule.vlan and parsed vlan: this bit | the outer tag's 12-bit id; an
 * untagged frame's parsed value is 0, so it never equals a rule's. */
#define XDPOOL_VLAN_TAGGED 4096

/* shape_families: frame kinds some rule can match. */
#define XDPOOL_SHAPE_IPV4 1
#define XDPOOL_SHAPE_IPV6 2
#define XDPOOL_SHAPE_NON_IP 4

/* xdpool_rule.action */
#define XDPOOL_ACTION_STEER 1
#define XDPOOL_ACTION_PASS 2
#define XDPOOL_ACTION_DROP 3

/* xdpool_rule.dst_family, src_family */
#define XDPOOL_FAMILY_IPV4 4
#define XDPOOL_FAMILY_IPV6 6

/* The steered frame's metadata tag: generation above, rule position below. */
#define XDPOOL_TAG_GEN_SHIFT 8
#define XDPOOL_TAG_SIZE 4

/* xdpool_config.live: bit 0 the bank, bit 1 tagging on, the generation above. */
#define XDPOOL_LIVE_TAGGING 2
#define XDPOOL_LIVE_GEN_SHIFT 2

/* Indices into the counters map. */
#define XDPOOL_CNT_STEERED 0
#define XDPOOL_CNT_NO_SOCKET 1
#define XDPOOL_CNT_PASSED 2
#define XDPOOL_CNT_DROPPED 3
#define XDPOOL_CNT_MALFORMED 4
#define XDPOOL_CNT_NR 5

/*
 * One steering rule. Ports are in host byte order (inclusive ranges);
 * addresses and masks are in network byte order, the addresses already masked.
 * An IPv4 address uses word 0 only. Each field is read only when its
 * XDPOOL_MATCH_* bit is set in flags (and in shape_fields).
 */
struct xdpool_rule {
	__u32 flags;       /* offset 0 */
	__u8 action;       /* offset 4 */
	__u8 proto;        /* offset 5: IP protocol / IPv6 final next header */
	__u8 dst_family;   /* offset 6 */
	__u8 src_family;   /* offset 7 */
	__u16 port_min;    /* offset 8: destination port range */
	__u16 port_max;    /* offset 10 */
	__u16 sport_min;   /* offset 12: source port range */
	__u16 sport_max;   /* offset 14 */
	__u32 dst_addr[4]; /* offset 16 */
	__u32 dst_mask[4]; /* offset 32 */
	__u16 vlan;        /* offset 48: XDPOOL_VLAN_TAGGED | outer tag's id */
	__u16 pad0;        /* offset 50 */
	__u32 reserved;    /* offset 52 */
	__u32 src_addr[4]; /* offset 56 */
	__u32 src_mask[4]; /* offset 72 */
};
#define XDPOOL_RULE_SIZE 88

/* One bank of the rules map: the list from entry 0, XDPOOL_MAX_RULES entries. */
struct xdpool_bank {
	struct xdpool_rule rule[XDPOOL_MAX_RULES]; /* offset 0 */
};
#define XDPOOL_BANK_SIZE 5632

/*
 * Live configuration; userspace writes rules into the idle bank, then flips.
 * live = (generation << XDPOOL_LIVE_GEN_SHIFT) | tagging | bank, one word so
 * that a frame never reads the bank of one list with the generation of
 * another. Generation 0 is never used.
 */
struct xdpool_config {
	__u32 live;     /* offset 0 */
	__u32 reserved; /* offset 4 */
};
#define XDPOOL_CONFIG_SIZE 8

/* One entry of rule_hits (per CPU). */
struct xdpool_rule_hits {
	__u64 packets; /* offset 0 */
	__u64 bytes;   /* offset 8 */
};
#define XDPOOL_RULE_HITS_SIZE 16

#endif /* XDPOOL_H */
