// SPDX-License-Identifier: GPL-2.0
// Receive-side counter for tests and throughput ceilings: counts frames and bytes
// per CPU, then drops them. Slot 0 counts UDP over IPv4/IPv6 (what the generators
// send); slot 1 counts everything else (the lab's own IPv6 MLD/RS chatter, ...), so
// tests can compare exact counts. Slot layout: struct xdpool_count (two u64),
// mirrored by `[u64; 2]` in `gen::count`.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define XDPOOL_COUNT_UDP 0
#define XDPOOL_COUNT_OTHER 1

struct xdpool_count {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct xdpool_count);
} xdpool_count_map SEC(".maps");

static __always_inline int is_udp(void *data, void *data_end)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return 0;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		/* protocol is byte 9 of the IPv4 header */
		__u8 *ip = (void *)(eth + 1);
		if ((void *)(ip + 20) > data_end)
			return 0;
		return ip[9] == IPPROTO_UDP;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		/* next header is byte 6 of the IPv6 header */
		__u8 *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 40) > data_end)
			return 0;
		return ip6[6] == IPPROTO_UDP;
	}
	return 0;
}

/* "xdp.frags": loaded with BPF_F_XDP_HAS_FRAGS, so it may run on a device whose MTU
 * needs multi-buffer frames (jumbo on veth); headers are in the first buffer. */
SEC("xdp.frags")
int xdpool_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = is_udp(data, data_end) ? XDPOOL_COUNT_UDP : XDPOOL_COUNT_OTHER;
	struct xdpool_count *slot = bpf_map_lookup_elem(&xdpool_count_map, &key);

	if (slot) {
		/* Per-CPU slot: no other writer, a plain add is enough. */
		slot->packets += 1;
		slot->bytes += bpf_xdp_get_buff_len(ctx);
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
