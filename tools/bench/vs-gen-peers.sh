#!/bin/bash
# Generators side by side (issue 18): `xdpool gen` against xdp-trafficgen (xdp-tools,
# built outside the tree), both BPF_PROG_RUN live-frame generators with one thread on
# core 0, sending into the two-namespace lab's veth, in the two placements of the
# issue:
#   refused:  the receiver PREFIX-b0 has no XDP program and GRO off, so veth refuses
#             every frame at ndo_xdp_xmit (before any counter of its own): the rate is
#             frames handed to the kernel per second, counted as runs of the
#             generator's XDP program (each live frame runs it once) with the
#             kernel's BPF run statistics, which this placement turns on
#             (kernel.bpf_stats_enabled = 1) for its own runs only and then restores;
#             that costs every BPF program on the machine two clock reads per run
#             while on, the two generators alike. The generator's ceiling;
#   drop:     an XDP program on PREFIX-b0 counts and drops (tools/xdpsink), its NAPI
#             threaded and pinned to core 1: the rate is frames arrived per second
#             (PREFIX-b0's rx_queue_*_xdp_packets).
# Per run the script waits until the generator's frames move (its start-up, program
# load included, counts for neither generator), then LEAD s more; the rate is taken
# over the next WINDOW s, then the generator is stopped; the
# generator's cycles per frame from its busiest thread's schedstat run time in the
# window (live frames are sent inside the syscall, so this is mostly kernel time).
# WARMUP rounds (not counted), then REPS pairs, odd ones xdpool first, even ones
# xdp-trafficgen first; medians and ranges of per-pair ratios xdpool-gen /
# xdp-trafficgen, written to a dated file under docs/results/<date>/.
#
# xdp-trafficgen sends IPv6 UDP (its only mode: 2001:2::1 -> 2001:2::2 port 9, its -s
# counts the FCS, so -s SIZE+4); xdpool gen sends IPv4 unless GEN_IPV6=1. It also
# attaches an XDP_PASS program to the sending device while it runs (the driver needs
# one, it says); the placements measure the receiving side only.
#
# Knobs: XDP_TRAFFICGEN=path (required), GEN_XDPOOL=path (default
#   target/release/xdpool), PLACEMENTS="refused drop", SIZES="64", REPS=5, WARMUP=1,
#   WINDOW=4, LEAD=1, GEN_IPV6=1, GEN_BATCH=N (xdpool gen --batch), PREFIX=vgp, OUT=file
# Needs root, ethtool, bpftool (the refused placement), a built xdpool, tools/xdpsink
# (make -C tools/xdpsink).
set -u
cd "$(dirname "$0")/../.."
source tools/bench/lib.sh
GEN_XDPOOL=${GEN_XDPOOL:-$PWD/target/release/xdpool}
XDP_TRAFFICGEN=${XDP_TRAFFICGEN:-}
PLACEMENTS=${PLACEMENTS:-refused drop}
SIZES=${SIZES:-64}
REPS=${REPS:-5}
WARMUP=${WARMUP:-1}
WINDOW=${WINDOW:-4}
LEAD=${LEAD:-1}
P=${PREFIX:-vgp}
SINK=$PWD/tools/xdpsink/xdpsink
die() { echo "$*" >&2; exit 2; }
[ -x "$GEN_XDPOOL" ] || die "build xdpool first (make build) or give GEN_XDPOOL="
[ -n "$XDP_TRAFFICGEN" ] && [ -x "$XDP_TRAFFICGEN" ] || die "give XDP_TRAFFICGEN=/path/to/xdp-trafficgen (tools/bench/README.md: Peers)"
[ -x "$SINK" ] || die "build the counting sink first: make -C tools/xdpsink"
command -v ethtool >/dev/null || die "needs ethtool (make setup installs it)"
OUT=${OUT:-$(bench_result_file vs-gen-peers)}
W=$(mktemp -d)
SINK_PID=
STATS0=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
    sysctl -qw kernel.bpf_stats_enabled="$STATS0"
    [ -n "$SINK_PID" ] && kill -INT "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null
    "$GEN_XDPOOL" lab down --prefix "$P" >/dev/null 2>&1
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
A=${P}a0
B=${P}b0

napi_pin() { # pin PREFIX-b0's NAPI threads to core 1 (veth makes them when a program comes)
    local c t n=0
    for c in /proc/[0-9]*/comm; do
        if grep -q "^napi/$B-" "$c" 2>/dev/null; then
            t=$(basename "$(dirname "$c")")
            taskset -pc 1 "$t" >/dev/null && n=$((n + 1))
        fi
    done
    ((n > 0)) || echo "# no NAPI thread of $B found to pin"
}

gen_progs() { # $1 generator -> ids of the loaded XDP programs of its name
    local name=xdpool_gen
    [ "$1" = xdp-trafficgen ] && name=xdp_redirect_no  # xdp_redirect_notouch, cut to 15
    bpftool prog show 2>/dev/null | awk -v n="$name" '$2 == "xdp" && $3 == "name" && index($4, n) == 1 {sub(":", "", $1); print $1}'
}

run_cnts() { # prog ids -> "id:run_cnt ..." (kernel.bpf_stats_enabled must be on)
    local id
    for id in "$@"; do
        echo -n "$id:$(bpftool prog show id "$id" 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "run_cnt") print $(i + 1)}') "
    done
}

runs_between() { # "before" "after" (run_cnts) -> runs in between of the programs in both
    python3 - "$1" "$2" <<'PY'
import sys
parse = lambda s: {i: int(c) for i, c in (x.split(':') for x in s.split()) if c}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
print(sum(b[i] - a[i] for i in a if i in b))
PY
}

new_runs() { # $1 generator, $2 ids before it started -> total runs of its new programs
    local prog
    prog=$(comm -13 <(echo "$2" | sort) <(gen_progs "$1" | sort))
    [ -n "$prog" ] || { echo 0; return; }
    run_cnts $prog | tr ' ' '\n' | awk -F: '{s += $2} END {printf "%.0f\n", s}'
}

run_one() { # $1 generator (xdpool-gen|xdp-trafficgen), $2 placement, $3 size, $4 rep
    # The generator is started with a generous bound and stopped once the window is
    # read: on a loaded machine its start-up (program load, xdp-trafficgen's probe)
    # takes a varying time, which the window must not include.
    local gen=$1 pl=$2 size=$3 rep=$4 secs=$((LEAD + WINDOW + 20)) ids0=
    [ "$pl" = refused ] && ids0=$(gen_progs "$gen")
    if [ "$gen" = xdp-trafficgen ]; then
        timeout -s INT $secs ip netns exec "$P-a" "$XDP_TRAFFICGEN" udp -m 02:78:64:70:00:0b -A 2001:2::1 -a 2001:2::2 \
            -p 9 -s $((size + 4)) -t 1 "$A" > "$W/gen.out" 2>&1 &
    else
        "$GEN_XDPOOL" gen --netns "$P-a" --dev "$A" --count 1000000000 --duration $secs --size "$size" --cores 0 \
            ${GEN_IPV6:+--ipv6} ${GEN_BATCH:+--batch $GEN_BATCH} > "$W/gen.out" 2>&1 &
    fi
    local pid=$! spid x1 x2 r1 r2 w1 w2 t1 t2 alive=1 prog= n1= n2=
    local started=1
    if [ "$pl" = refused ]; then
        bench_wait_moving 100 new_runs "$gen" "$ids0" || started=
    else
        bench_wait_moving 100 bench_rx_xdp "$P-b" "$B" || started=
    fi
    sleep "$LEAD"
    # xdp-trafficgen runs under timeout: its threads are those of timeout's child.
    spid=$pid
    [ "$gen" = xdp-trafficgen ] && spid=$(pgrep -P $pid | head -1)
    # Refused: the programs of the generator's name that came with it (xdp-trafficgen
    # loads more than one; only the sending one runs).
    [ "$pl" = refused ] && prog=$(comm -13 <(echo "$ids0" | sort) <(gen_progs "$gen" | sort) | tr '\n' ' ')
    [ "$gen" = xdpool-gen ] && [ "$(echo $prog | wc -w)" -gt 1 ] && echo "# $gen: several new xdpool_gen programs ($prog): another xdpool gen running at the same time? its frames are counted too"
    [ -n "${prog// /}" ] && n1=$(run_cnts $prog)
    x1=$(bench_xmit "$P-a" "$A"); r1=$(bench_rx_xdp "$P-b" "$B" || echo 0); w1=$(date +%s.%N); t1=$(bench_threads "${spid:-$pid}")
    sleep "$WINDOW"
    [ -n "${prog// /}" ] && n2=$(run_cnts $prog)
    x2=$(bench_xmit "$P-a" "$A"); r2=$(bench_rx_xdp "$P-b" "$B" || echo 0); w2=$(date +%s.%N); t2=$(bench_threads "${spid:-$pid}")
    kill -0 $pid 2>/dev/null || alive=
    # Only the window counts: xdpool gen is killed (it finishes its current call
    # before it looks at SIGINT), xdp-trafficgen gets SIGINT through timeout.
    if [ "$gen" = xdpool-gen ]; then bench_stop $pid 0 "$gen" KILL; else bench_stop $pid 10 "$gen"; fi
    [ -n "$started" ] || { echo "# $gen: no traffic 10 s after start: $(tail -n 2 "$W/gen.out" | tr '\n' ' ')"; alive=; }
    [ -n "$alive" ] || echo "# $gen: ended before the window closed: $(tail -n 2 "$W/gen.out" | tr '\n' ' ')"
    local runs=0
    [ "$pl" = refused ] && runs=$(runs_between "$n1" "$n2")
    python3 - "$gen" "$pl" "$size" "$rep" "$x1" "$x2" "$r1" "$r2" "$w1" "$w2" "$(bench_busiest "$t1" "$t2")" "$BENCH_MHZ" "${alive:-0}" "$W/rows.tsv" "$runs" <<'PY'
import sys, time
gen, pl, size, rep, x1, x2, r1, r2, w1, w2, busy, mhz, alive, rows, runs = sys.argv[1:]
(a1, e1), (a2, e2) = (map(int, x.split()) for x in (x1, x2))
# Refused: veth counts nothing, the program's runs are the frames handed.
handed = int(runs) if pl == 'refused' else (a2 - a1) + (e2 - e1)
arrived = int(r2) - int(r1)
secs = float(w2) - float(w1)
ns, cs = map(int, busy.split())
figure = handed if pl == 'refused' else arrived
rate = figure / secs / 1e6 if alive == '1' else 0.0
cyc = ns / max(handed, 1) * float(mhz) / 1e3
print(f'{time.strftime("%H:%M:%S", time.gmtime())} {gen:14} {pl:7} {size:>4} B rep {rep}: handed {handed / secs / 1e6:6.3f} Mpps, '
      f'arrived {arrived / secs / 1e6:6.3f} Mpps, refused by the ring {e2 - e1} | generator {ns / 1e6:6.1f} ms cpu, {cyc:5.0f} cycles/frame handed, {cs} ctx sw')
with open(rows, 'a') as f:
    f.write(f'generator, receiver {pl}, {size} B\t{rep}\t{gen}\t{rate:.4f}\tcycles_per_frame={cyc:.0f}\n')
PY
}

main() {
    echo "# vs-gen-peers $(date -u '+%F %H:%M') UTC, $(nproc) CPUs, kernel $(uname -r), TSC ${BENCH_MHZ} MHz, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# xdpool gen: $GEN_XDPOOL${GEN_IPV6:+ --ipv6}${GEN_BATCH:+ --batch $GEN_BATCH}; xdp-trafficgen: $XDP_TRAFFICGEN; placements: $PLACEMENTS; sizes: $SIZES; REPS=$REPS WARMUP=$WARMUP WINDOW=$WINDOW s LEAD=$LEAD s"
    echo "# rates: refused = frames handed per second; drop = frames arrived per second (threaded NAPI on core 1)"
    "$GEN_XDPOOL" lab down --prefix "$P" >/dev/null 2>&1
    "$GEN_XDPOOL" lab up --prefix "$P" >/dev/null || exit 1
    ip netns exec "$P-a" ethtool -K "$A" gro off >/dev/null
    ip netns exec "$P-b" ethtool -K "$B" gro off >/dev/null
    bench_xmit "$P-a" "$A" >/dev/null || exit 2
    : > "$W/rows.tsv"
    local pl size rep r
    for pl in $PLACEMENTS; do
        case $pl in
        refused)
            command -v bpftool >/dev/null || die "the refused placement needs bpftool (apt-get install bpftool)"
            [ -n "$SINK_PID" ] && { kill -INT "$SINK_PID"; wait "$SINK_PID"; SINK_PID=; }
            sysctl -qw kernel.bpf_stats_enabled=1
            ;;
        drop)
            sysctl -qw kernel.bpf_stats_enabled="$STATS0"
            ip netns exec "$P-b" "$SINK" -i "$B" -d 86400 > "$W/sink.out" 2>&1 &
            SINK_PID=$!
            bench_wait_prog "$P-b" "$B" 50 $SINK_PID || die "xdpsink did not attach: $(cat "$W/sink.out")"
            # The program gave the veth its NAPI: now it can be threaded, then pinned.
            ip netns exec "$P-b" sh -c "echo 1 > /sys/class/net/$B/threaded" || echo "# could not make $B's NAPI threaded"
            napi_pin
            ;;
        *) die "unknown placement $pl (refused, drop)" ;;
        esac
        for size in $SIZES; do
            echo "## generator, receiver $pl, $size B"
            for ((rep = 1 - WARMUP; rep <= REPS; rep++)); do
                r=$rep
                ((r < 0)) && r=0
                if ((rep % 2 == 0)); then
                    run_one xdp-trafficgen "$pl" "$size" $r
                    run_one xdpool-gen "$pl" "$size" $r
                else
                    run_one xdpool-gen "$pl" "$size" $r
                    run_one xdp-trafficgen "$pl" "$size" $r
                fi
            done
        done
    done
    sysctl -qw kernel.bpf_stats_enabled="$STATS0"
    bench_summary "rate: Mpps handed (refused) or arrived (drop) in the window; ratios xdpool-gen / xdp-trafficgen per pair" xdpool-gen "$W/rows.tsv"
}

bench_main_to "$OUT"
