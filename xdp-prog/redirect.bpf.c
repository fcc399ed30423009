// SPDX-License-Identifier: GPL-2.0
/*
 * xdpool_redirect_ref: the reference for `xdpool bench steer`. It redirects
 * every frame to the AF_XDP socket of its queue and does nothing else (what
 * libxdp's default program does for one socket per queue), so its cost under
 * BPF_PROG_TEST_RUN is the floor xdpool_steer is measured against. Never
 * attached by xdpool.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xdpool.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XDPOOL_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} ref_xsks SEC(".maps");

/* Same section (and so the same load flags) as xdpool_steer. */
SEC("xdp.frags")
int xdpool_redirect_ref(struct xdp_md *ctx)
{
	return bpf_redirect_map(&ref_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
