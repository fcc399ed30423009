// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xskref: a bare AF_XDP receiver, the baseline xdpool's benchmarks put
 * beside their own numbers. One socket, one queue, one core.
 *   -a drop (default): every RX descriptor goes straight back to the fill
 *      ring, packet data is never read.
 *   -a l2fwd: MAC addresses swapped in place, the same chunk goes out on the
 *      socket's TX ring; completions go back to the fill ring.
 *
 * Setup is libxdp's xsk API with its defaults: libxdp loads and attaches its
 * own redirect program in native (DRV) mode and removes it when the socket
 * goes. The socket binds in copy mode with need_wakeup.
 *
 * Exit codes: 0 done, 1 setup or runtime failure, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define CHUNK_SIZE 2048u
#define RX_BATCH 64u
#define MAX_FRAMES (1u << 20) /* 2 GiB of UMEM at 2 KiB chunks */
#define MAX_RING (1u << 16)
#define MAX_SECONDS 86400.0

enum wait_mode { WAIT_POLL, WAIT_SPIN };
enum action { ACT_DROP, ACT_L2FWD };

struct options {
	const char *ifname;
	unsigned int ifindex;
	uint32_t queue;
	int core;
	enum wait_mode mode;
	enum action action;
	double seconds;
	uint32_t rx_size;
	uint32_t fill_size;
	uint32_t frames;
};

struct receiver {
	struct xsk_ring_cons rx;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_ring_prod tx;
	uint32_t in_tx; /* l2fwd: descriptors on TX not yet completed */
	uint64_t tx_completed;
	uint64_t *spare; /* l2fwd: chunks beyond the fill ring's first load */
	uint32_t nspare;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	void *area;
	size_t area_len;
	int fd;
};

static volatile sig_atomic_t stop;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: xskref -i IFNAME -q QUEUE -c CORE -m poll|spin -d SECONDS\n"
		"              [-a drop|l2fwd] [-r RXSIZE] [-f FILLSIZE] [-n FRAMES]\n"
		"  -i IFNAME    interface in the current network namespace\n"
		"  -q QUEUE     RX queue to bind (default 0)\n"
		"  -c CORE      CPU to pin this process to\n"
		"  -m MODE      poll: poll() when RX is empty; spin: busy loop\n"
		"  -d SECONDS   run time (> 0, fractions allowed)\n"
		"  -a ACTION    drop (default): RX straight back to fill; l2fwd: swap\n"
		"               MACs and send the frame back out on the same socket\n"
		"  -r RXSIZE    RX ring entries, power of two (default 2048)\n"
		"  -f FILLSIZE  fill ring entries, power of two (default 4096)\n"
		"  -n FRAMES    UMEM frames of %u bytes (default 8192)\n",
		CHUNK_SIZE);
}

static int parse_u32(const char *flag, const char *s, uint32_t min, uint32_t max,
		     uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "xskref: %s wants an integer in %u..%u, got '%s'\n",
			flag, min, max, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_ring(const char *flag, const char *s, uint32_t *out)
{
	if (parse_u32(flag, s, 1, MAX_RING, out))
		return -1;
	if (*out & (*out - 1)) {
		fprintf(stderr, "xskref: %s must be a power of two (the kernel "
			"rejects other ring sizes), got %u\n", flag, *out);
		return -1;
	}
	return 0;
}

/* Returns 0, or 2 for a usage error (message already printed). */
static int parse_args(int argc, char **argv, struct options *o)
{
	int have_c = 0, have_m = 0, have_d = 0;
	uint32_t core;
	char *end;
	int opt;

	*o = (struct options){
		.queue = 0,
		.rx_size = 2048,
		.fill_size = 4096,
		.frames = 8192,
	};

	while ((opt = getopt(argc, argv, "i:q:c:m:d:a:r:f:n:h")) != -1) {
		switch (opt) {
		case 'i':
			o->ifname = optarg;
			break;
		case 'q':
			if (parse_u32("-q", optarg, 0, 65535, &o->queue))
				return 2;
			break;
		case 'c':
			if (parse_u32("-c", optarg, 0, CPU_SETSIZE - 1, &core))
				return 2;
			o->core = (int)core;
			have_c = 1;
			break;
		case 'm':
			if (!strcmp(optarg, "poll"))
				o->mode = WAIT_POLL;
			else if (!strcmp(optarg, "spin"))
				o->mode = WAIT_SPIN;
			else {
				fprintf(stderr, "xskref: -m wants 'poll' or 'spin', "
					"got '%s'\n", optarg);
				return 2;
			}
			have_m = 1;
			break;
		case 'd':
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->seconds > 0) ||
			    o->seconds > MAX_SECONDS) {
				fprintf(stderr, "xskref: -d wants seconds in "
					"(0, %.0f], got '%s'\n", MAX_SECONDS, optarg);
				return 2;
			}
			have_d = 1;
			break;
		case 'a':
			if (!strcmp(optarg, "drop"))
				o->action = ACT_DROP;
			else if (!strcmp(optarg, "l2fwd"))
				o->action = ACT_L2FWD;
			else {
				fprintf(stderr, "xskref: -a wants 'drop' or 'l2fwd', "
					"got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'r':
			if (parse_ring("-r", optarg, &o->rx_size))
				return 2;
			break;
		case 'f':
			if (parse_ring("-f", optarg, &o->fill_size))
				return 2;
			break;
		case 'n':
			if (parse_u32("-n", optarg, 1, MAX_FRAMES, &o->frames))
				return 2;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xskref: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!o->ifname || !have_c || !have_m || !have_d) {
		fprintf(stderr, "xskref: -i, -c, -m and -d are required\n");
		usage(stderr);
		return 2;
	}
	if (strlen(o->ifname) >= IF_NAMESIZE) {
		fprintf(stderr, "xskref: interface name '%s' is longer than %d "
			"characters\n", o->ifname, IF_NAMESIZE - 1);
		return 2;
	}
	return 0;
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int pin_to_core(int core)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(core, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "xskref: cannot pin to CPU %d: %s (is it online "
			"and in this process's cpuset? see nproc / taskset -p $$)\n",
			core, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Installed before setup, so a SIGINT while libxdp attaches its program
 * still ends in cleanup rather than leaving the program on the interface.
 */
static int catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	/* No SA_RESTART: a blocked poll() must return to see `stop`. */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ||
	    sigaction(SIGALRM, &sa, NULL)) {
		fprintf(stderr, "xskref: sigaction: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int arm_timer(double seconds)
{
	struct itimerval it = { 0 };

	it.it_value.tv_sec = (time_t)seconds;
	it.it_value.tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6);
	if (!it.it_value.tv_sec && !it.it_value.tv_usec)
		it.it_value.tv_usec = 1;
	if (setitimer(ITIMER_REAL, &it, NULL)) {
		fprintf(stderr, "xskref: setitimer: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static void receiver_close(struct receiver *r)
{
	if (r->xsk)
		xsk_socket__delete(r->xsk);
	if (r->umem)
		xsk_umem__delete(r->umem);
	if (r->area && r->area != MAP_FAILED)
		munmap(r->area, r->area_len);
	free(r->spare);
	*r = (struct receiver){ .fd = -1 };
}

static int receiver_open(struct receiver *r, const struct options *o)
{
	struct xsk_umem_config ucfg = {
		.fill_size = o->fill_size,
		.comp_size = XSK_RING_CONS__DEFAULT_NUM_DESCS,
		.frame_size = CHUNK_SIZE,
		.frame_headroom = 0,
		.flags = 0,
	};
	struct xsk_socket_config scfg = {
		.rx_size = o->rx_size,
		.tx_size = o->action == ACT_L2FWD ? XSK_RING_PROD__DEFAULT_NUM_DESCS : 0,
		.libxdp_flags = 0, /* let libxdp load its default program */
		.xdp_flags = XDP_FLAGS_DRV_MODE,
		.bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP,
	};
	uint32_t initial, idx, i;
	int err;

	*r = (struct receiver){ .fd = -1 };
	r->area_len = (size_t)o->frames * CHUNK_SIZE;
	r->area = mmap(NULL, r->area_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (r->area == MAP_FAILED) {
		fprintf(stderr, "xskref: mmap of %zu bytes of UMEM: %s (lower -n)\n",
			r->area_len, strerror(errno));
		r->area = NULL;
		return -1;
	}

	err = xsk_umem__create(&r->umem, r->area, r->area_len, &r->fill,
			       &r->comp, &ucfg);
	if (err) {
		r->umem = NULL;
		fprintf(stderr, "xskref: xsk_umem__create: %s%s\n", strerror(-err),
			err == -ENOBUFS || err == -ENOMEM || err == -EPERM ?
			" (run as root, or raise ulimit -l)" : "");
		receiver_close(r);
		return -1;
	}

	err = xsk_socket__create(&r->xsk, o->ifname, o->queue, r->umem, &r->rx,
				 o->action == ACT_L2FWD ? &r->tx : NULL, &scfg);
	if (err) {
		r->xsk = NULL;
		fprintf(stderr, "xskref: xsk_socket__create on %s queue %u "
			"(native XDP, copy mode): %s\n", o->ifname, o->queue,
			strerror(-err));
		if (err == -EINVAL)
			fprintf(stderr, "xskref: check that queue %u exists "
				"(ethtool -l %s) and the sizes are powers of two\n",
				o->queue, o->ifname);
		else if (err == -EBUSY || err == -EEXIST)
			fprintf(stderr, "xskref: another XDP program or AF_XDP "
				"socket holds %s; detach it first "
				"(xdp-loader status %s)\n", o->ifname, o->ifname);
		else if (err == -EOPNOTSUPP)
			fprintf(stderr, "xskref: the driver of %s has no native "
				"XDP\n", o->ifname);
		receiver_close(r);
		return -1;
	}
	r->fd = xsk_socket__fd(r->xsk);

	/* Frames beyond the fill ring's size would never find a slot: unused. */
	initial = o->frames < o->fill_size ? o->frames : o->fill_size;
	if (xsk_ring_prod__reserve(&r->fill, initial, &idx) != initial) {
		fprintf(stderr, "xskref: could not reserve %u fill entries\n",
			initial);
		receiver_close(r);
		return -1;
	}
	for (i = 0; i < initial; i++)
		*xsk_ring_prod__fill_addr(&r->fill, idx + i) =
			(uint64_t)i * CHUNK_SIZE;
	xsk_ring_prod__submit(&r->fill, initial);
	/* l2fwd keeps chunks on TX: the rest of the UMEM tops the fill ring up. */
	if (o->action == ACT_L2FWD) {
		/* Room for every chunk: completions land here when fill is full. */
		r->spare = malloc((size_t)o->frames * sizeof(*r->spare));
		if (!r->spare) {
			fprintf(stderr, "xskref: out of memory\n");
			receiver_close(r);
			return -1;
		}
		for (i = initial; i < o->frames; i++)
			r->spare[r->nspare++] = (uint64_t)i * CHUNK_SIZE;
	}
	return 0;
}

static void kick_fill(const struct receiver *r)
{
	recvfrom(r->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/* One RX batch back onto the fill ring; returns the frames received. */
static inline uint32_t rx_drop(struct receiver *r)
{
	uint32_t rx_idx = 0, fill_idx = 0, n, i;

	n = xsk_ring_cons__peek(&r->rx, RX_BATCH, &rx_idx);
	if (!n)
		return 0;
	/* Always room: frames in flight never exceed the fill ring's size. */
	while (xsk_ring_prod__reserve(&r->fill, n, &fill_idx) != n) {
		if (stop) {
			xsk_ring_cons__cancel(&r->rx, n);
			return 0;
		}
	}
	for (i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&r->fill, fill_idx + i) =
			xsk_ring_cons__rx_desc(&r->rx, rx_idx + i)->addr;
	xsk_ring_prod__submit(&r->fill, n);
	xsk_ring_cons__release(&r->rx, n);
	return n;
}

static void kick_tx(const struct receiver *r)
{
	sendto(r->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
}

/* Completions back onto the fill ring (the spare stack when it is full);
 * returns how many. */
static inline uint32_t reap(struct receiver *r)
{
	uint32_t comp_idx = 0, fill_idx = 0, n, room, i;

	n = xsk_ring_cons__peek(&r->comp, RX_BATCH, &comp_idx);
	if (!n)
		return 0;
	room = xsk_prod_nb_free(&r->fill, n);
	if (room > n)
		room = n;
	if (room && xsk_ring_prod__reserve(&r->fill, room, &fill_idx) != room)
		room = 0;
	for (i = 0; i < room; i++)
		*xsk_ring_prod__fill_addr(&r->fill, fill_idx + i) =
			*xsk_ring_cons__comp_addr(&r->comp, comp_idx + i);
	for (; i < n; i++)
		r->spare[r->nspare++] = *xsk_ring_cons__comp_addr(&r->comp, comp_idx + i);
	if (room)
		xsk_ring_prod__submit(&r->fill, room);
	xsk_ring_cons__release(&r->comp, n);
	r->in_tx -= n;
	r->tx_completed += n;
	return n;
}

/* One RX batch, MACs swapped, out on TX; returns the frames received. */
static inline uint32_t rx_l2fwd(struct receiver *r)
{
	uint32_t rx_idx = 0, tx_idx = 0, n, i;

	reap(r);
	if (r->nspare) {
		uint32_t room = xsk_prod_nb_free(&r->fill, r->nspare), fill_idx = 0;

		if (room > r->nspare)
			room = r->nspare;
		if (room && xsk_ring_prod__reserve(&r->fill, room, &fill_idx) == room) {
			for (i = 0; i < room; i++)
				*xsk_ring_prod__fill_addr(&r->fill, fill_idx + i) =
					r->spare[--r->nspare];
			xsk_ring_prod__submit(&r->fill, room);
		}
	}
	n = xsk_ring_cons__peek(&r->rx, RX_BATCH, &rx_idx);
	if (!n) {
		if (r->in_tx && xsk_ring_prod__needs_wakeup(&r->tx))
			kick_tx(r);
		return 0;
	}
	while (xsk_ring_prod__reserve(&r->tx, n, &tx_idx) != n) {
		/* TX full: let the kernel send, take completions back. */
		kick_tx(r);
		reap(r);
		if (stop) {
			xsk_ring_cons__cancel(&r->rx, n);
			return 0;
		}
	}
	for (i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&r->rx, rx_idx + i);
		struct xdp_desc *t = xsk_ring_prod__tx_desc(&r->tx, tx_idx + i);
		uint8_t *eth = xsk_umem__get_data(r->area, d->addr);
		uint8_t mac[6];

		if (d->len >= 12) {
			memcpy(mac, eth, 6);
			memcpy(eth, eth + 6, 6);
			memcpy(eth + 6, mac, 6);
		}
		t->addr = d->addr;
		t->len = d->len;
		t->options = 0;
	}
	xsk_ring_prod__submit(&r->tx, n);
	xsk_ring_cons__release(&r->rx, n);
	r->in_tx += n;
	if (xsk_ring_prod__needs_wakeup(&r->tx))
		kick_tx(r);
	return n;
}

struct run_result {
	uint64_t packets;
	double seconds;
};

static struct run_result run(struct receiver *r, enum wait_mode mode, enum action act)
{
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	struct run_result res = { 0 };
	double start = now_seconds();
	uint32_t n;

	while (!stop) {
		n = act == ACT_L2FWD ? rx_l2fwd(r) : rx_drop(r);
		if (n) {
			res.packets += n;
			continue;
		}
		/* Frames still on TX: keep sending and reaping (poll() reports RX). */
		if (r->in_tx)
			continue;
		if (xsk_ring_prod__needs_wakeup(&r->fill))
			kick_fill(r);
		if (mode == WAIT_POLL)
			poll(&pfd, 1, 1000); /* EINTR on the stop signals is fine */
	}
	res.seconds = now_seconds() - start;
	return res;
}

static int read_xdp_stats(int fd, struct xdp_statistics *st)
{
	socklen_t len = sizeof(*st);

	memset(st, 0, sizeof(*st));
	if (getsockopt(fd, SOL_XDP, XDP_STATISTICS, st, &len)) {
		fprintf(stderr, "xskref: getsockopt(XDP_STATISTICS): %s\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct xdp_statistics st;
	struct run_result res;
	struct options o;
	struct receiver r;
	uint64_t tx_completed;
	int rc, stats_ok;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;

	o.ifindex = if_nametoindex(o.ifname);
	if (!o.ifindex) {
		fprintf(stderr, "xskref: no interface '%s' in this network "
			"namespace (run it under ip netns exec NS)\n", o.ifname);
		return 1;
	}
	if (pin_to_core(o.core) || catch_stop_signals())
		return 1;
	/* Only matters without CAP_IPC_LOCK; the kernel then charges UMEM here. */
	setrlimit(RLIMIT_MEMLOCK, &unlimited);

	if (receiver_open(&r, &o))
		return 1;
	if (arm_timer(o.seconds)) {
		receiver_close(&r);
		return 1;
	}

	res = run(&r, o.mode, o.action);
	stats_ok = !read_xdp_stats(r.fd, &st);
	tx_completed = r.tx_completed;
	receiver_close(&r);

	printf("xskref rx_packets %llu seconds %.3f mpps %.3f",
	       (unsigned long long)res.packets, res.seconds,
	       res.seconds > 0 ? (double)res.packets / res.seconds / 1e6 : 0.0);
	if (stats_ok)
		printf(" rx_dropped=%llu rx_invalid_descs=%llu rx_ring_full=%llu"
		       " rx_fill_ring_empty_descs=%llu",
		       (unsigned long long)st.rx_dropped,
		       (unsigned long long)st.rx_invalid_descs,
		       (unsigned long long)st.rx_ring_full,
		       (unsigned long long)st.rx_fill_ring_empty_descs);
	if (o.action == ACT_L2FWD)
		printf(" tx_completed=%llu", (unsigned long long)tx_completed);
	printf("\n");
	return stats_ok ? 0 : 1;
}
