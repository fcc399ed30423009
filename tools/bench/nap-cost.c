// What a timer sleep costs the thread that takes it: loops nanosleep(US) N times on
// core 1 and prints the wall time and the thread's CPU time per sleep. The CPU time
// is the cost of arming the timer, sleeping and being woken (a poll-mode worker's
// nap, workers.poll_coalesce_us), whatever the length.
//   gcc -O2 -o /tmp/nap-cost tools/bench/nap-cost.c && /tmp/nap-cost 100 5000
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double secs(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s US N (sleep US microseconds N times on core 1)\n", argv[0]);
		return 2;
	}
	long us = atol(argv[1]), n = atol(argv[2]);
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
	cpu_set_t set;

	if (us < 0 || n <= 0) {
		fprintf(stderr, "US must be >= 0 and N > 0\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("core 1 (running unpinned)");
	double w0 = secs(CLOCK_MONOTONIC), c0 = secs(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < n; i++)
		nanosleep(&ts, NULL);
	double w = secs(CLOCK_MONOTONIC) - w0, c = secs(CLOCK_THREAD_CPUTIME_ID) - c0;
	printf("nanosleep(%ld us) x %ld: %.1f us wall, %.2f us CPU a sleep\n", us, n,
	       w / n * 1e6, c / n * 1e6);
	return 0;
}
