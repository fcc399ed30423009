// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xdpsink: the counting end of xdpool's forwarding and generator benchmarks.
 * Attaches to one device an XDP program that counts every frame (packets and
 * bytes, per CPU) and returns XDP_DROP (or XDP_PASS with -p), so that the
 * receiving side of a benchmark costs only its NAPI, the same for every tool
 * being measured. It stays until -d seconds have passed or SIGINT/SIGTERM, then
 * detaches and prints one line:
 *     xdpsink packets N bytes B seconds S
 * With -I MS it also prints "xdpsink at T packets N bytes B" every MS
 * milliseconds (T: seconds since attach), so a script can take a rate over a
 * window in the middle of a run.
 *
 * The program is nineteen instructions built here (no clang, no object file):
 * look up slot 0 of a per-CPU array, add 1 and the frame's length, drop.
 *
 * Exit codes: 0 done, 1 setup or runtime failure, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>

#define MAX_SECONDS 86400.0

/* Instruction builders: the uapi has the encoding but not the kernel's macros. */
#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOV64_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD64_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define ADD64_REG(d, s) INSN(BPF_ALU64 | BPF_ADD | BPF_X, d, s, 0, 0)
#define SUB64_REG(d, s) INSN(BPF_ALU64 | BPF_SUB | BPF_X, d, s, 0, 0)
#define LDX(sz, d, s, o) INSN(BPF_LDX | BPF_MEM | (sz), d, s, o, 0)
#define STX(sz, d, s, o) INSN(BPF_STX | BPF_MEM | (sz), d, s, o, 0)
#define ST_IMM(sz, d, o, i) INSN(BPF_ST | BPF_MEM | (sz), d, 0, o, i)
#define JEQ_IMM(d, i, o) INSN(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LD_MAP_FD(d, fd) INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), INSN(0, 0, 0, 0, 0)

struct slot {
	uint64_t packets;
	uint64_t bytes;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(const char *me)
{
	fprintf(stderr,
		"usage: %s -i IFNAME [-d SECONDS] [-I MS] [-p] [-s]\n"
		"  -d  detach and print after SECONDS (default 10; SIGINT/SIGTERM end it sooner)\n"
		"  -I  also print the running count every MS milliseconds\n"
		"  -p  count and pass the frames to the stack instead of dropping them\n"
		"  -s  attach in skb (generic) mode instead of native\n",
		me);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int read_total(int map_fd, int ncpus, struct slot *per_cpu, struct slot *total)
{
	uint32_t key = 0;
	int c;

	if (bpf_map_lookup_elem(map_fd, &key, per_cpu))
		return -errno;
	total->packets = total->bytes = 0;
	for (c = 0; c < ncpus; c++) {
		total->packets += per_cpu[c].packets;
		total->bytes += per_cpu[c].bytes;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *ifname = NULL;
	double seconds = 10.0;
	long interval_ms = 0;
	int pass = 0, flags = XDP_FLAGS_DRV_MODE, opt;

	while ((opt = getopt(argc, argv, "i:d:I:psh")) != -1) {
		switch (opt) {
		case 'i': ifname = optarg; break;
		case 'd': seconds = strtod(optarg, NULL); break;
		case 'I': interval_ms = strtol(optarg, NULL, 10); break;
		case 'p': pass = 1; break;
		case 's': flags = XDP_FLAGS_SKB_MODE; break;
		default: usage(argv[0]); return 2;
		}
	}
	if (!ifname || optind != argc || !(seconds > 0 && seconds <= MAX_SECONDS) || interval_ms < 0) {
		usage(argv[0]);
		return 2;
	}
	unsigned int ifindex = if_nametoindex(ifname);
	if (!ifindex) {
		fprintf(stderr, "xdpsink: no device %s in this namespace (run it under ip netns exec)\n", ifname);
		return 1;
	}
	int ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0) {
		fprintf(stderr, "xdpsink: cannot count the possible CPUs: %s\n", strerror(-ncpus));
		return 1;
	}
	struct slot *per_cpu = calloc(ncpus, sizeof(*per_cpu));
	if (!per_cpu)
		return 1;

	int map_fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "xdpsink_count", sizeof(uint32_t), sizeof(struct slot), 1, NULL);
	if (map_fd < 0) {
		fprintf(stderr, "xdpsink: cannot create the counter map: %s (needs root)\n", strerror(errno));
		return 1;
	}
	struct bpf_insn prog[] = {
		MOV64_REG(BPF_REG_6, BPF_REG_1),            /* r6 = ctx */
		ST_IMM(BPF_W, BPF_REG_10, -4, 0),           /* key = 0 on the stack */
		MOV64_REG(BPF_REG_2, BPF_REG_10),
		ADD64_IMM(BPF_REG_2, -4),
		LD_MAP_FD(BPF_REG_1, map_fd),
		CALL(BPF_FUNC_map_lookup_elem),
		JEQ_IMM(BPF_REG_0, 0, 9),                   /* no slot: skip to the verdict */
		LDX(BPF_DW, BPF_REG_1, BPF_REG_0, 0),       /* packets += 1 (per CPU: no atomics needed) */
		ADD64_IMM(BPF_REG_1, 1),
		STX(BPF_DW, BPF_REG_0, BPF_REG_1, 0),
		LDX(BPF_W, BPF_REG_2, BPF_REG_6, 4),        /* bytes += data_end - data */
		LDX(BPF_W, BPF_REG_3, BPF_REG_6, 0),
		SUB64_REG(BPF_REG_2, BPF_REG_3),
		LDX(BPF_DW, BPF_REG_1, BPF_REG_0, 8),
		ADD64_REG(BPF_REG_1, BPF_REG_2),
		STX(BPF_DW, BPF_REG_0, BPF_REG_1, 8),
		MOV64_IMM(BPF_REG_0, 0),                    /* placeholder, set below */
		EXIT(),
	};
	prog[sizeof(prog) / sizeof(prog[0]) - 2].imm = pass ? XDP_PASS : XDP_DROP;
	static char log[65536];
	LIBBPF_OPTS(bpf_prog_load_opts, lopts, .log_buf = log, .log_size = sizeof(log), .log_level = 0);
	int prog_fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "xdpsink", "Dual MIT/GPL", prog, sizeof(prog) / sizeof(prog[0]), &lopts);
	if (prog_fd < 0) {
		fprintf(stderr, "xdpsink: the verifier refused the program: %s\n%s\n", strerror(errno), log);
		return 1;
	}
	if (bpf_xdp_attach(ifindex, prog_fd, flags | XDP_FLAGS_UPDATE_IF_NOEXIST, NULL)) {
		fprintf(stderr, "xdpsink: cannot attach to %s: %s (another XDP program there? ip link set dev %s xdp off)\n",
			ifname, strerror(errno), ifname);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);

	double t0 = now(), next = t0 + interval_ms / 1e3;
	struct slot total = {0};
	int rc = 0;
	while (!stop) {
		double t = now();
		if (t - t0 >= seconds)
			break;
		if (interval_ms && t >= next) {
			if (read_total(map_fd, ncpus, per_cpu, &total) == 0)
				printf("xdpsink at %.3f packets %llu bytes %llu\n", t - t0,
				       (unsigned long long)total.packets, (unsigned long long)total.bytes);
			next += interval_ms / 1e3;
		}
		usleep(interval_ms && interval_ms < 100 ? interval_ms * 1000 : 100000);
	}
	/* Detach first, then read: nothing counted after the line is printed. */
	if (bpf_xdp_detach(ifindex, flags, NULL))
		fprintf(stderr, "xdpsink: detach from %s failed: %s\n", ifname, strerror(errno)), rc = 1;
	if (read_total(map_fd, ncpus, per_cpu, &total)) {
		fprintf(stderr, "xdpsink: cannot read the counter\n");
		return 1;
	}
	printf("xdpsink packets %llu bytes %llu seconds %.3f\n", (unsigned long long)total.packets,
	       (unsigned long long)total.bytes, now() - t0);
	return rc;
}
