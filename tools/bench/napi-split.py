#!/usr/bin/env python3
"""Where a threaded-NAPI placement's core goes, per receiver, from a vs-xskref.sh log.

    python3 tools/bench/napi-split.py LOG

For each receiver and placement whose runs name the NAPI thread's CPU (the line
"# TOOL ACTION MODE NAPI: ... NAPI threads: S s CPU, P preempted", then the run's
line), prints the medians over its counted runs (the first run of each receiver in
each placement, the warm-up, is left out; run with WARMUP=1):
  napi_ns/frame  the NAPI thread's CPU over the frames it put on the socket's RX
                 ring or dropped there for want of room (received + RX ring full)
  napi_ns/rx     the same over the frames received only
  napi_s         the NAPI thread's CPU in the run, seconds
  app_ms         the receiver's busiest thread's CPU, ms
  full_pct       frames dropped at the full RX ring, % of those received
  mpps           the run's rate
The NAPI thread and the receiver share core 1: what one takes the other cannot.
Read it for rxdrop (drop:poll:threaded); in l2fwd the RX ring full count and the
NAPI thread's work differ by receiver in ways these columns do not separate.
"""
import re
import statistics
import sys

HEAD = re.compile(r"# (\S+) (\S+ \S+ \S+): .*NAPI threads: ([\d.]+) s CPU, (\d+) preempted")
RUN = re.compile(
    r"received\s+(\d+) of\s+\d+.*?([\d.]+) Mpps \|.*?app\s+([\d.]+) ms cpu.*?RX ring full (\d+)"
)


def main(path):
    lines = open(path).read().split("\n")
    seen, rows = set(), {}
    for i, line in enumerate(lines[:-1]):
        head = HEAD.match(line)
        run = RUN.search(lines[i + 1]) if head else None
        if not run:
            continue
        key = (head.group(1), head.group(2))
        if key not in seen:
            seen.add(key)
            continue
        got, mpps, app, full = int(run.group(1)), float(run.group(2)), float(run.group(3)), int(run.group(4))
        napi = float(head.group(3))
        if got == 0:
            continue
        rows.setdefault(key, []).append(
            (napi * 1e9 / (got + full), napi * 1e9 / got, napi, app, full * 100 / got, mpps)
        )
    print("| receiver | placement | runs | napi_ns/frame | napi_ns/rx | napi_s | app_ms | full_pct | mpps |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (tool, placement), v in rows.items():
        med = [statistics.median(r[j] for r in v) for j in range(6)]
        print(
            f"| {tool} | {placement} | {len(v)} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.2f} "
            f"| {med[3]:.0f} | {med[4]:.1f} | {med[5]:.3f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
