// SPDX-License-Identifier: GPL-2.0
// Traffic generator program for BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES:
// every frame the kernel injects is transmitted out of the ingress device.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdpool_gen_tx(struct xdp_md *ctx)
{
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
