// SPDX-License-Identifier: GPL-2.0
/*
 * xdpool_steer: parse Ethernet / VLAN / IPv4 / IPv6 / UDP / TCP with bounds
 * checks, match the rules userspace wrote into the `rules` map (first match
 * wins) and steer, pass or drop. See xdpool.h for the map layout and the
 * exact semantics (malformed frames are counted and passed, never steered).
 *
 * The program is specialized at load time for the shape of the rule list
 * (xdpool.h, "Shape"): the shape_* globals below are frozen .rodata, so the
 * verifier treats them as constants and drops the parsing, rules and checks
 * the list cannot use.
 *
 * xdpool_steer_1buf: the same for single-buffer frames (no length helper).
 *
 * xdpool_ceiling: counts every frame and drops it; the in-kernel ceiling for
 * throughput runs.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "xdpool.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XDPOOL_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XDPOOL_RULE_BANKS);
	__type(key, __u32);
	__type(value, struct xdpool_bank);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xdpool_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDPOOL_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDPOOL_RULE_BANKS * XDPOOL_MAX_RULES);
	__type(key, __u32);
	__type(value, struct xdpool_rule_hits);
} rule_hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ceiling_frames SEC(".maps");

/* The shape (xdpool.h). The defaults are the empty list: every frame passes. */
const volatile __u32 shape_rule_count = 0;
const volatile __u32 shape_fields = 0;
const volatile __u32 shape_families = 0;
const volatile __u32 shape_match_all = 0;

/* The fields an entry point can test: all of them, or (the *_port entry points)
 * protocol and destination port only. A compile-time mask, so clang drops what
 * it rules out (the addresses, the VLAN id, the source port and their stack
 * slots) before the verifier sees the program; userspace loads a *_port entry
 * only for a shape within it (steer/shape.rs, `Shape::port_only`). */
#define FIELDS_ALL 0xffffffffu
#define FIELDS_PORT XDPOOL_FIELDS_PORT
_Static_assert(XDPOOL_FIELDS_PORT == (XDPOOL_MATCH_PROTO | XDPOOL_MATCH_DST_PORT),
	       "XDPOOL_FIELDS_PORT is protocol and destination port");

static __always_inline __u32 fields(const __u32 cap)
{
	return shape_fields & cap;
}

/* Not exported by the uapi headers. */
struct vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

struct ipv6_frag {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off;
	__be32 identification;
};

#define PARSE_OK 0
#define PARSE_MALFORMED -1
/* A frame kind no rule can match: passed unparsed. */
#define PARSE_UNMATCHABLE -2

/* What the rules can look at; plain values, no packet pointers. */
struct parsed {
	__u32 daddr[4]; /* network order; IPv4 in word 0 */
	__u32 saddr[4]; /* network order, only when some rule has SRC_ADDR */
	__u16 dport;    /* host order, valid when has_ports */
	__u16 sport;    /* host order, valid when has_ports and some rule has SRC_PORT */
	__u16 vlan;     /* XDPOOL_VLAN_TAGGED | the outer tag's id; 0 untagged */
	__u8 family;    /* 0 (not IP), XDPOOL_FAMILY_IPV4, XDPOOL_FAMILY_IPV6 */
	__u8 proto;
	__u8 has_ports;
};

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1;
}

static __always_inline void copy_ipv6(__u32 *to, const struct in6_addr *a)
{
	to[0] = a->in6_u.u6_addr32[0];
	to[1] = a->in6_u.u6_addr32[1];
	to[2] = a->in6_u.u6_addr32[2];
	to[3] = a->in6_u.u6_addr32[3];
}

/* more_fragments: this is the first fragment of a fragmented datagram, so the UDP
 * length is the datagram's and may exceed what this fragment carries. */
static __always_inline int parse_l4(void *l4, __u32 l4_len, void *data_end,
				    struct parsed *p, int more_fragments, const __u32 cap)
{
	if (p->proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		__u32 ulen;

		if (l4_len < sizeof(*uh) || (void *)(uh + 1) > data_end)
			return PARSE_MALFORMED;
		ulen = bpf_ntohs(uh->len);
		if (ulen < sizeof(*uh) || (!more_fragments && ulen > l4_len))
			return PARSE_MALFORMED;
		p->dport = bpf_ntohs(uh->dest);
		if (fields(cap) & XDPOOL_MATCH_SRC_PORT)
			p->sport = bpf_ntohs(uh->source);
		p->has_ports = 1;
	} else if (p->proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;
		__u32 doff;

		if (l4_len < sizeof(*th) || (void *)(th + 1) > data_end)
			return PARSE_MALFORMED;
		doff = th->doff;
		if (doff < 5 || doff * 4 > l4_len)
			return PARSE_MALFORMED;
		p->dport = bpf_ntohs(th->dest);
		if (fields(cap) & XDPOOL_MATCH_SRC_PORT)
			p->sport = bpf_ntohs(th->source);
		p->has_ports = 1;
	}
	return PARSE_OK;
}

/* Whether `len` bytes from l3 (at offset `off` in the frame) run past the frame's
 * end. Within the first buffer costs a compare; only a multi-buffer frame (or a
 * length that lies) pays for the helper that sums all buffers. */
static __always_inline int past_frame_end(struct xdp_md *ctx, void *l3, void *data_end,
					  __u32 off, __u32 len, const int frags)
{
	if (l3 + len <= data_end)
		return 0;
	/* A single-buffer program's frame ends at data_end. */
	if (!frags)
		return 1;
	return off + len > bpf_xdp_get_buff_len(ctx);
}

/* Only the first buffer (up to data_end) is read; lengths are checked against the
 * whole frame (all buffers of a multi-buffer frame). */
static __always_inline int parse_ipv4(struct xdp_md *ctx, void *l3, void *data_end, __u32 off,
				      struct parsed *p, const int frags, const __u32 cap)
{
	struct iphdr *iph = l3;
	__u32 hlen, tot_len;

	if ((void *)(iph + 1) > data_end)
		return PARSE_MALFORMED;
	if (iph->version != 4 || iph->ihl < 5)
		return PARSE_MALFORMED;
	hlen = iph->ihl * 4;
	tot_len = bpf_ntohs(iph->tot_len);
	/* A total length beyond the frame is a lie; shorter (padding) is fine. */
	if (tot_len < hlen || past_frame_end(ctx, l3, data_end, off, tot_len, frags))
		return PARSE_MALFORMED;
	p->family = XDPOOL_FAMILY_IPV4;
	p->proto = iph->protocol;
	if ((fields(cap) & XDPOOL_MATCH_DST_ADDR))
		p->daddr[0] = iph->daddr;
	if ((fields(cap) & XDPOOL_MATCH_SRC_ADDR))
		p->saddr[0] = iph->saddr;
	/* Non-first fragments carry no L4 header. */
	if (iph->frag_off & bpf_htons(0x1fff))
		return PARSE_OK;
	return parse_l4(l3 + hlen, tot_len - hlen, data_end, p,
			!!(iph->frag_off & bpf_htons(0x2000)), cap);
}

static __always_inline int parse_ipv6(struct xdp_md *ctx, void *l3, void *data_end, __u32 off,
				      struct parsed *p, const int frags, const __u32 cap)
{
	struct ipv6hdr *ip6 = l3;
	void *cursor = ip6 + 1;
	__u32 remaining;
	__u8 nexthdr;
	int more_fragments = 0;

	if ((void *)(ip6 + 1) > data_end)
		return PARSE_MALFORMED;
	if (ip6->version != 6)
		return PARSE_MALFORMED;
	remaining = bpf_ntohs(ip6->payload_len);
	if (past_frame_end(ctx, l3, data_end, off, sizeof(*ip6) + remaining, frags))
		return PARSE_MALFORMED;
	p->family = XDPOOL_FAMILY_IPV6;
	if ((fields(cap) & XDPOOL_MATCH_DST_ADDR))
		copy_ipv6(p->daddr, &ip6->daddr);
	if ((fields(cap) & XDPOOL_MATCH_SRC_ADDR))
		copy_ipv6(p->saddr, &ip6->saddr);
	nexthdr = ip6->nexthdr;

#pragma unroll
	for (int i = 0; i < XDPOOL_MAX_IPV6_EXT; i++) {
		if (nexthdr == IPPROTO_HOPOPTS || nexthdr == IPPROTO_ROUTING ||
		    nexthdr == IPPROTO_DSTOPTS) {
			struct ipv6_opt_hdr *oh = cursor;
			__u32 len;

			if ((void *)(oh + 1) > data_end)
				return PARSE_MALFORMED;
			len = ((__u32)oh->hdrlen + 1) * 8;
			if (len > remaining)
				return PARSE_MALFORMED;
			nexthdr = oh->nexthdr;
			cursor += len;
			remaining -= len;
		} else if (nexthdr == IPPROTO_FRAGMENT) {
			struct ipv6_frag *fh = cursor;

			if (remaining < sizeof(*fh) || (void *)(fh + 1) > data_end)
				return PARSE_MALFORMED;
			nexthdr = fh->nexthdr;
			cursor += sizeof(*fh);
			remaining -= sizeof(*fh);
			if (fh->frag_off & bpf_htons(0xfff8)) {
				/* Non-first fragment: no L4 header follows. */
				p->proto = nexthdr;
				return PARSE_OK;
			}
			more_fragments = !!(fh->frag_off & bpf_htons(1));
		} else {
			break;
		}
	}
	/* More extension headers than we skip: L4 stays unknown (no ports). */
	p->proto = nexthdr;
	return parse_l4(cursor, remaining, data_end, p, more_fragments, cap);
}

/* UDP or TCP at `l4` whose whole L3 packet lies in the first buffer, not a
 * fragment: the checks of parse_l4, in fewer steps. 0: let the full parse decide. */
static __always_inline int fast_l4(void *l4, __u32 l4_len, void *data_end, __u8 proto,
				   struct parsed *p, const __u32 cap)
{
	/* clang would drop the header bound below as implied by l4_len; the
	 * verifier needs to see it. */
	barrier_var(l4);
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		__u32 ulen;

		if (l4_len < sizeof(*uh) || (void *)(uh + 1) > data_end)
			return 0;
		ulen = bpf_ntohs(uh->len);
		if (ulen < sizeof(*uh) || ulen > l4_len)
			return 0;
		p->dport = bpf_ntohs(uh->dest);
		if (fields(cap) & XDPOOL_MATCH_SRC_PORT)
			p->sport = bpf_ntohs(uh->source);
	} else if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;
		__u32 doff;

		if (l4_len < sizeof(*th) || (void *)(th + 1) > data_end)
			return 0;
		doff = th->doff;
		if (doff < 5 || doff * 4 > l4_len)
			return 0;
		p->dport = bpf_ntohs(th->dest);
		if (fields(cap) & XDPOOL_MATCH_SRC_PORT)
			p->sport = bpf_ntohs(th->source);
	} else {
		return 0;
	}
	p->proto = proto;
	p->has_ports = 1;
	return 1;
}

/* The common frame in fewer steps: untagged, IPv4 without options or IPv6
 * without extension headers, not a fragment, UDP or TCP, all in the first
 * buffer. For such a frame it makes exactly the checks of the full parse and
 * fills `p` alike; 0 sends every other frame (and every malformed one) there. */
static __always_inline int parse_common(void *data, void *data_end, __be16 h_proto,
					struct parsed *p, const __u32 cap)
{
	void *l3 = data + sizeof(struct ethhdr);

	if (h_proto == bpf_htons(ETH_P_IP) && (shape_families & XDPOOL_SHAPE_IPV4)) {
		struct iphdr *iph = l3;
		__u32 tot_len;

		if ((void *)(iph + 1) > data_end || *(__u8 *)iph != 0x45)
			return 0;
		tot_len = bpf_ntohs(iph->tot_len);
		if (tot_len < sizeof(*iph) || l3 + tot_len > data_end ||
		    (iph->frag_off & bpf_htons(0x3fff)))
			return 0;
		if (!fast_l4(iph + 1, tot_len - sizeof(*iph), data_end, iph->protocol, p, cap))
			return 0;
		p->family = XDPOOL_FAMILY_IPV4;
		if (fields(cap) & XDPOOL_MATCH_DST_ADDR)
			p->daddr[0] = iph->daddr;
		if (fields(cap) & XDPOOL_MATCH_SRC_ADDR)
			p->saddr[0] = iph->saddr;
		return 1;
	}
	if (h_proto == bpf_htons(ETH_P_IPV6) && (shape_families & XDPOOL_SHAPE_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		__u32 payload;

		if ((void *)(ip6 + 1) > data_end || ip6->version != 6)
			return 0;
		payload = bpf_ntohs(ip6->payload_len);
		if ((void *)(ip6 + 1) + payload > data_end)
			return 0;
		if (!fast_l4(ip6 + 1, payload, data_end, ip6->nexthdr, p, cap))
			return 0;
		p->family = XDPOOL_FAMILY_IPV6;
		if (fields(cap) & XDPOOL_MATCH_DST_ADDR)
			copy_ipv6(p->daddr, &ip6->daddr);
		if (fields(cap) & XDPOOL_MATCH_SRC_ADDR)
			copy_ipv6(p->saddr, &ip6->saddr);
		return 1;
	}
	return 0;
}

static __always_inline int parse_frame(struct xdp_md *ctx, struct parsed *p, const int frags,
				       const __u32 cap)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *cursor;
	__be16 h_proto;
	__u32 off;

	if ((void *)(eth + 1) > data_end)
		return PARSE_MALFORMED;
	h_proto = eth->h_proto;
	if (parse_common(data, data_end, h_proto, p, cap))
		return PARSE_OK;
	cursor = eth + 1;
	/* Offset of the L3 header as a number: pointer minus pointer would need
	 * CAP_PERFMON to load. */
	off = sizeof(*eth);

#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct vlan_hdr *vh = cursor;

		if (h_proto != bpf_htons(ETH_P_8021Q) && h_proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(vh + 1) > data_end)
			return PARSE_MALFORMED;
		/* The outer tag's id only (xdpool.h: VLAN). */
		if ((fields(cap) & XDPOOL_MATCH_VLAN) && i == 0)
			p->vlan = XDPOOL_VLAN_TAGGED | (bpf_ntohs(vh->tci) & 0x0fff);
		h_proto = vh->encap_proto;
		cursor = vh + 1;
		off += sizeof(*vh);
	}
	/* A third tag: more than we (and the worker's parser) accept. */
	if (h_proto == bpf_htons(ETH_P_8021Q) || h_proto == bpf_htons(ETH_P_8021AD))
		return PARSE_MALFORMED;

	if (h_proto == bpf_htons(ETH_P_IP)) {
		if (!(shape_families & XDPOOL_SHAPE_IPV4))
			return PARSE_UNMATCHABLE;
		return parse_ipv4(ctx, cursor, data_end, off, p, frags, cap);
	}
	if (h_proto == bpf_htons(ETH_P_IPV6)) {
		if (!(shape_families & XDPOOL_SHAPE_IPV6))
			return PARSE_UNMATCHABLE;
		return parse_ipv6(ctx, cursor, data_end, off, p, frags, cap);
	}
	if (!(shape_families & XDPOOL_SHAPE_NON_IP))
		return PARSE_UNMATCHABLE;
	return PARSE_OK;
}

/* An address (network order, IPv4 in word 0) of a frame of `family` against a
 * rule's prefix: its family, its address (already masked) and its mask. */
static __always_inline int prefix_matches(__u8 family, const __u32 *addr, __u8 rule_family,
					  const __u32 *rule_addr, const __u32 *rule_mask)
{
	if (family != rule_family)
		return 0;
	if ((addr[0] & rule_mask[0]) != rule_addr[0])
		return 0;
	return family != XDPOOL_FAMILY_IPV6 ||
	       ((addr[1] & rule_mask[1]) == rule_addr[1] &&
		(addr[2] & rule_mask[2]) == rule_addr[2] &&
		(addr[3] & rule_mask[3]) == rule_addr[3]);
}

/* `flags`: the rule's XDPOOL_MATCH_* bits, masked by fields(cap). */
static __always_inline int rule_matches(const struct xdpool_rule *r, __u32 flags, const struct parsed *p)
{
	if (flags & XDPOOL_MATCH_PROTO) {
		if (p->family == 0 || p->proto != r->proto)
			return 0;
	}
	if (flags & XDPOOL_MATCH_VLAN) {
		if (p->vlan != r->vlan)
			return 0;
	}
	if (flags & XDPOOL_MATCH_DST_PORT) {
		if (!p->has_ports || p->dport < r->port_min || p->dport > r->port_max)
			return 0;
	}
	if (flags & XDPOOL_MATCH_SRC_PORT) {
		if (!p->has_ports || p->sport < r->sport_min || p->sport > r->sport_max)
			return 0;
	}
	if ((flags & XDPOOL_MATCH_DST_ADDR) &&
	    !prefix_matches(p->family, p->daddr, r->dst_family, r->dst_addr, r->dst_mask))
		return 0;
	if ((flags & XDPOOL_MATCH_SRC_ADDR) &&
	    !prefix_matches(p->family, p->saddr, r->src_family, r->src_addr, r->src_mask))
		return 0;
	return 1;
}

/* Counts a hit of rule `rule` of the live bank: one packet, its bytes (all
 * buffers; a single-buffer program's frame is data..data_end, no helper call). */
static __always_inline void count_hit(struct xdp_md *ctx, __u32 bank, __u32 rule, const int frags)
{
	__u32 idx = bank * XDPOOL_MAX_RULES + rule;
	struct xdpool_rule_hits *h = bpf_map_lookup_elem(&rule_hits, &idx);

	if (h) {
		h->packets += 1;
		if (frags)
			h->bytes += bpf_xdp_get_buff_len(ctx);
		else
			h->bytes += ctx->data_end - ctx->data;
	}
}

/* Writes the tag (xdpool.h) into XDP metadata before the frame; nothing where
 * the driver has no metadata room. */
static __always_inline void tag_frame(struct xdp_md *ctx, __u32 tag)
{
	void *data, *meta;

	if (bpf_xdp_adjust_meta(ctx, -(int)XDPOOL_TAG_SIZE))
		return;
	data = (void *)(long)ctx->data;
	meta = (void *)(long)ctx->data_meta;
	if (meta + XDPOOL_TAG_SIZE > data)
		return;
	*(__u32 *)meta = tag;
}

/* `live`: the config word; the tag is written only while it says tagging. */
static __always_inline int apply_action(struct xdp_md *ctx, __u8 action, __u32 live, __u32 rule)
{
	long ret;

	switch (action) {
	case XDPOOL_ACTION_STEER:
		if (live & XDPOOL_LIVE_TAGGING)
			tag_frame(ctx, ((live >> XDPOOL_LIVE_GEN_SHIFT) << XDPOOL_TAG_GEN_SHIFT) | rule);
		/* An empty XSKMAP slot makes the helper return the fallback. */
		ret = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
		count(ret == XDP_REDIRECT ? XDPOOL_CNT_STEERED : XDPOOL_CNT_NO_SOCKET);
		return ret;
	case XDPOOL_ACTION_DROP:
		count(XDPOOL_CNT_DROPPED);
		return XDP_DROP;
	default:
		count(XDPOOL_CNT_PASSED);
		return XDP_PASS;
	}
}

/* The body of every entry point; `frags`: the program takes multi-buffer frames;
 * `cap`: the fields it can test (FIELDS_ALL or FIELDS_PORT). */
static __always_inline int steer(struct xdp_md *ctx, const int frags, const __u32 cap)
{
	struct parsed p = {};
	struct xdpool_config *cfg;
	struct xdpool_bank *bank;
	__u32 zero = 0, bank_index = 0, live = 0;
	/* Read once: one load, not one per rule (the verifier knows its value). */
	__u32 rule_count = shape_rule_count;
	int parse;

	/* One load of the live word: bank and generation of the same list. */
	cfg = bpf_map_lookup_elem(&config, &zero);
	if (cfg)
		live = cfg->live;
	bank_index = live & 1;

	/* Rule 0 takes every frame: nothing to look at (xdpool.h: match-all). */
	if (shape_match_all) {
		count_hit(ctx, bank_index, 0, frags);
		return apply_action(ctx, shape_match_all, live, 0);
	}

	parse = parse_frame(ctx, &p, frags, cap);
	if (parse != PARSE_OK) {
		count(parse == PARSE_MALFORMED ? XDPOOL_CNT_MALFORMED : XDPOOL_CNT_PASSED);
		return XDP_PASS;
	}
	/* One lookup for the whole bank: the rules are then plain loads. */
	bank = bpf_map_lookup_elem(&rules, &bank_index);
	if (!bank)
		goto passed;

#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < XDPOOL_MAX_RULES; i++) {
		struct xdpool_rule *r = &bank->rule[i];

		if (i >= rule_count)
			break;
		/* Masked by the shape: the verifier knows the other bits are zero
		 * and drops the checks for conditions no rule has. */
		if (!rule_matches(r, r->flags & fields(cap), &p))
			continue;
		count_hit(ctx, bank_index, i, frags);
		return apply_action(ctx, r->action, live, i);
	}

passed:
	count(XDPOOL_CNT_PASSED);
	return XDP_PASS;
}

/* "xdp.frags" (BPF_F_XDP_HAS_FRAGS): attachable where the MTU needs multi-buffer
 * frames. Only the first buffer is parsed; the headers are there. */
SEC("xdp.frags")
int xdpool_steer(struct xdp_md *ctx)
{
	return steer(ctx, 1, FIELDS_ALL);
}

/* "xdp": single-buffer frames only (the kernel keeps the MTU within one buffer
 * while it is attached), so no helper call for lengths. */
SEC("xdp")
int xdpool_steer_1buf(struct xdp_md *ctx)
{
	return steer(ctx, 0, FIELDS_ALL);
}

/* The two above for a shape whose rules test protocol and destination port
 * only (the lab's `udp dst_port 9`): the same program, less of it. */
SEC("xdp.frags")
int xdpool_steer_port(struct xdp_md *ctx)
{
	return steer(ctx, 1, FIELDS_PORT);
}

SEC("xdp")
int xdpool_steer_1buf_port(struct xdp_md *ctx)
{
	return steer(ctx, 0, FIELDS_PORT);
}

SEC("xdp.frags")
int xdpool_ceiling(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *frames = bpf_map_lookup_elem(&ceiling_frames, &zero);

	if (frames)
		*frames += 1;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
