#!/bin/bash
# Forwarding side by side (issue 15's figures): xdpool against xsk_fwd (bpf-examples'
# AF_XDP-forwarding) and DPDK's testpmd over two net_af_xdp ports (io and mac
# modes), in the `forward` topology of SPEC-forward.md (built here with ip(8), see
# fwd-topology.sh): traffic from PREFIX-src's xdps0 enters PREFIX-fwd at xdpf0 (port
# "in"), the forwarder sends it out of xdpf1 (port "out"), and an XDP program on
# PREFIX-dst's xdpd0 counts and drops it (tools/xdpsink; the count read is the veth's
# rx_queue_*_xdp_packets).
#
# Same for every forwarder: the generator on core 0 (so the receiving NAPI of xdpf0,
# and with it each forwarder's XDP program, runs there in softirq), the forwarder
# alone on core 1 (its busy thread spinning: xsk_fwd and testpmd always spin; xdpool
# gets mode = "spin"), copy mode (veth has no zero-copy), rings of 2048 (RX, TX,
# completion) and 4096 (fill): xsk_fwd's and testpmd's defaults, passed to testpmd
# and xdpool explicitly. UMEM sizes are each tool's own: xsk_fwd 65536 buffers
# (compiled in), testpmd --total-num-mbufs=16384, xdpool FRAMES (16384).
#
# Per run: the forwarder starts, its XDP program is waited for, the generator starts;
# LEAD s after the first frames arrive at xdpd0 the script reads the counters, WINDOW
# s later again, and stops the generator: the rate is frames arrived at xdpd0 in that window / its length, the
# application cycles per frame the busiest thread's schedstat run time in the window /
# those frames (at the TSC's nominal MHz: no PMU here), and the forwarder core's
# window split into user, system, softirq and idle (/proc/stat): with the same kernel
# work per frame, a forwarder can beat a peer whose user share is u by at most
# 1 / (1 - u), the rate at which its own user time would be nothing. Frames lost per million are
# over the whole run, after a 1 s drain: (offered to xdpf0 - arrived at xdpd0) /
# offered, where offered = xdps0's XDP transmit counters (accepted + refused); the
# refused ones (xdpf0's ring full: the forwarder's XDP program on core 0 fell behind)
# are also shown on their own.
#
# Each size: WARMUP rounds of every forwarder (not counted), then REPS rounds (pairs),
# odd rounds in order, even ones reversed. The summary: each tool's median rate,
# lost/M and cycles/frame, and the median and range of the per-pair ratios
# xdpool / peer. Everything is written to a dated file under docs/results/<date>/.
#
# Knobs (environment):
#   XDPOOL=path          the xdpool to measure (default target/release/xdpool); it
#                        needs the multi-port `forward` action (branch fwd)
#   XDPOOL_CONFIG=path   its config; every "xdpool-fwd" in it becomes PREFIX-fwd.
#                        Default: written here per SPEC-forward.md (ports in = xdpf0,
#                        out = xdpf1, spin, rule udp/9 forward in -> out with mac =
#                        XDPOOL_MAC), workers.cores = [1, 1]: both sockets on core
#                        1 share one worker thread, as each peer runs one thread for
#                        both ports
#   WORKERS_EXTRA='key = value' lines added to that config's [workers] (every xdpool
#                        leg)
#   XDPOOL_MAC=...       the rule's mac: default xdpd0's MAC (a fixed next hop, what
#                        testpmd's mac mode does); "swap" (what xsk_fwd does), "neigh"
#   XSK_FWD=path         xsk_fwd (built outside the tree: tools/bench/README.md)
#   TESTPMD=path         dpdk-testpmd (default: the one on PATH, if any; "" for none)
#   TESTPMD_MODES="io mac"
#   XDP_TRAFFICGEN=path  generate with xdp-trafficgen (IPv6 UDP to 2001:2:0:2::1 port
#                        9, one thread on core 0) instead of `xdpool gen`
#   GEN_XDPOOL=path      the xdpool whose `gen` generates (default target/release/xdpool)
#   GEN_RATE=PPS         xdpool gen paces itself to PPS frames/s (losses at a rate the
#                        forwarders sustain; xdp-trafficgen has no such option)
#   LEGS="xdpool xsk_fwd testpmd-io testpmd-mac"  which forwarders (default: those given)
#                        (also "xdpool-tx32": xdpool with rings.tx_budget = 0, the
#                        kernel's 32 frames per copy-mode sendto, for an A/B of the
#                        budget; never in the default legs)
#                        (also "xdpool-b": an A/B of xdpool against itself, the
#                        build XDPOOL_B (default XDPOOL) with the same config plus
#                        the lines XDPOOL_B_RINGS in its [rings] table, e.g.
#                        XDPOOL_B_RINGS='copy_fill = "rx"' (a key already there is
#                        replaced), and XDPOOL_B_WORKERS likewise in [workers]
#                        (e.g. XDPOOL_B_WORKERS='batch = 128'), XDPOOL_B_UMEM in
#                        [umem] (e.g. XDPOOL_B_UMEM='hugepages = true'); the summary's
#                        "xdpool / xdpool-b" is then the default over B; never in
#                        the default legs)
#   FWD_NAPI=softirq|threaded  where xdpf0's receiving NAPI (and with it the XDP
#                        program and the copy into the UMEM) runs: softirq on the
#                        generator's core 0 (default), or threaded, its thread pinned
#                        to the forwarder's core 1 (the forwarder shares its core with
#                        the kernel's receive work, as on a host whose NIC interrupts
#                        land on the application's core)
#   XDPOOL_MODE=spin|poll  xdpool's wait mode (default spin; the peers always spin)
#   PROFILE_DIR=dir      perf record -e cpu-clock -a over each window, to LEG-SIZE-REP.data
#                        there (read with perf report --cpu 1: the forwarder's core).
#                        The sampling runs inside the window: compare rates of profiled
#                        runs only with each other. Warm-up rounds (rep 0) overwrite
#                        each other's files
#   SUMMARY_DIR=dir      keep each xdpool run's --summary-json there, as LEG-SIZE-REP.json
#   The counter line ("around the window: ...") needs the script's own config
#   (its control socket); with XDPOOL_CONFIG it is left out.
#   SIZES="64 1500" (frame bytes without FCS)  REPS=5  WARMUP=1  WINDOW=4  LEAD=1
#   FRAMES=16384  PREFIX=vfp (namespaces PREFIX-src, -fwd, -dst)  OUT=result file
# Needs root, ethtool, tools/xdpsink built (make -C tools/xdpsink).
set -u
# Made absolute before the cd below, and created.
for d in PROFILE_DIR SUMMARY_DIR; do
    if [ -n "${!d:-}" ]; then
        mkdir -p "${!d}" && printf -v "$d" '%s' "$(cd "${!d}" && pwd)" || { echo "$d=${!d}: cannot create it" >&2; exit 2; }
    fi
done
[ -z "${PROFILE_DIR:-}" ] || command -v perf >/dev/null || { echo "PROFILE_DIR needs perf (apt-get install linux-perf)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
source tools/bench/lib.sh
source tools/bench/fwd-topology.sh
XDPOOL=${XDPOOL:-$PWD/target/release/xdpool}
GEN_XDPOOL=${GEN_XDPOOL:-$PWD/target/release/xdpool}
XDPOOL_CONFIG=${XDPOOL_CONFIG:-}
XDPOOL_MAC=${XDPOOL_MAC:-$FWD_MAC_D0}
XSK_FWD=${XSK_FWD:-}
TESTPMD=${TESTPMD-$(command -v dpdk-testpmd || true)}
TESTPMD_MODES=${TESTPMD_MODES:-io mac}
XDP_TRAFFICGEN=${XDP_TRAFFICGEN:-}
SIZES=${SIZES:-64 1500}
REPS=${REPS:-5}
WARMUP=${WARMUP:-1}
WINDOW=${WINDOW:-4}
LEAD=${LEAD:-1}
FRAMES=${FRAMES:-16384}
P=${PREFIX:-vfp}
SINK=$PWD/tools/xdpsink/xdpsink
GEN_CORE=0
FWD_CORE=1
FWD_NAPI=${FWD_NAPI:-softirq}
XDPOOL_MODE=${XDPOOL_MODE:-spin}
case $FWD_NAPI in softirq|threaded) ;; *) echo "FWD_NAPI=$FWD_NAPI: softirq or threaded" >&2; exit 2 ;; esac

die() { echo "$*" >&2; exit 2; }
[ -x "$SINK" ] || die "build the counting sink first: make -C tools/xdpsink"
[ -x "$GEN_XDPOOL" ] || [ -n "$XDP_TRAFFICGEN" ] || die "no generator: build xdpool (make build) or give XDP_TRAFFICGEN="
[ -z "$XDP_TRAFFICGEN" ] || [ -x "$XDP_TRAFFICGEN" ] || die "XDP_TRAFFICGEN=$XDP_TRAFFICGEN is not an executable"
[ -z "$XSK_FWD" ] || [ -x "$XSK_FWD" ] || die "XSK_FWD=$XSK_FWD is not an executable"
[ -z "${XDPOOL_B:-}" ] || [ -x "$XDPOOL_B" ] || die "XDPOOL_B=$XDPOOL_B is not an executable"
[ -z "$TESTPMD" ] || [ -x "$TESTPMD" ] || die "TESTPMD=$TESTPMD is not an executable"
command -v ethtool >/dev/null || die "needs ethtool (make setup installs it)"
if [ -z "${LEGS:-}" ]; then
    LEGS=
    [ -x "$XDPOOL" ] && LEGS="xdpool"
    [ -n "$XSK_FWD" ] && LEGS="$LEGS xsk_fwd"
    if [ -n "$TESTPMD" ]; then for m in $TESTPMD_MODES; do LEGS="$LEGS testpmd-$m"; done; fi
fi
[ -n "${LEGS// /}" ] || die "nothing to measure: give XDPOOL=, XSK_FWD= or TESTPMD="
OUT=${OUT:-$(bench_result_file vs-fwd-peers)}
W=$(mktemp -d)
SINK_PID=
cleanup() {
    [ -n "$SINK_PID" ] && kill -INT "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null
    fwd_topo_down "$P"
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

GEN_DST=
if [ -z "$XDP_TRAFFICGEN" ] && "$GEN_XDPOOL" gen --help 2>/dev/null | grep -q -- '--dst-ip'; then
    GEN_DST="--dst-ip 198.18.2.1 --dst-mac $FWD_MAC_F0"
fi

xdpool_config() { # -> $W/fwd.toml
    if [ -n "$XDPOOL_CONFIG" ]; then
        sed "s/xdpool-fwd/$P-fwd/g" "$XDPOOL_CONFIG" > "$W/fwd.toml"
        return
    fi
    cat > "$W/fwd.toml" <<EOT
[[port]]
name = "in"
interface = "xdpf0"
netns = "$P-fwd"
queues = [0]
xdp_mode = "native"
[[port]]
name = "out"
interface = "xdpf1"
netns = "$P-fwd"
queues = [0]
xdp_mode = "native"
[umem]
frames = $FRAMES
chunk_size = 2048
[rings]
fill = 4096
completion = 2048
rx = 2048
tx = 2048
[workers]
cores = [$FWD_CORE, $FWD_CORE]
mode = "$XDPOOL_MODE"
${WORKERS_EXTRA:-}
[[rule]]
port = "in"
proto = "udp"
dst_port = "9"
action = "forward"
to = "out"
mac = "$XDPOOL_MAC"
[stats]
control_socket = "$W/ctl.sock"
live = false
EOT
}

table_set() { # $1 table, $2: `key = value` lines, each replacing that key in $W/fwd.toml's
    # table $1 or added there
    python3 - "$W/fwd.toml" "$1" "$2" <<'PY' || die "cannot put '$2' into [$1]"
import sys
path, table, extra = sys.argv[1:]
lines = open(path).read().split('\n')
start = lines.index(f'[{table}]') + 1
end = next((i for i in range(start, len(lines)) if lines[i].startswith('[')), len(lines))
for new in (l.strip() for l in extra.split('\n') if l.strip()):
    key = new.split('=', 1)[0].strip()
    assert '=' in new and key, f'not a key = value line: {new}'
    at = [i for i in range(start, end) if lines[i].split('=', 1)[0].strip() == key]
    if at:
        lines[at[0]] = new
    else:
        lines.insert(end, new)
        end += 1
open(path, 'w').write('\n'.join(lines))
PY
}

start_fwd() { # $1 leg -> FWD_PID, output in $W/$1.out
    rm -f "$W/sum.json"
    case $1 in
    xdpool | xdpool-b | xdpool-tx32)
        xdpool_config
        local bin=$XDPOOL rings= workers= umem=
        case $1 in
        xdpool-b) bin=${XDPOOL_B:-$XDPOOL} rings=${XDPOOL_B_RINGS:-} workers=${XDPOOL_B_WORKERS:-} umem=${XDPOOL_B_UMEM:-} ;;
        # The same xdpool with the kernel's copy-mode TX budget of 32 frames per
        # sendto: an A/B of the budget in one run.
        xdpool-tx32) rings="tx_budget = 0" ;;
        esac
        if [ "$1" != xdpool ]; then
            [ -z "$XDPOOL_CONFIG" ] || die "leg $1 needs the script's own config (no XDPOOL_CONFIG)"
            [ -z "$rings" ] || table_set rings "$rings"
            [ -z "$workers" ] || table_set workers "$workers"
            [ -z "$umem" ] || table_set umem "$umem"
        fi
        "$bin" run -c "$W/fwd.toml" --duration 120 --quiet --summary-json "$W/sum.json" > "$W/$1.out" 2>&1 &
        ;;
    xsk_fwd)
        ip netns exec "$P-fwd" taskset -c $FWD_CORE stdbuf -oL "$XSK_FWD" -i xdpf0 -q 0 -i xdpf1 -q 0 -c $FWD_CORE > "$W/$1.out" 2>&1 &
        ;;
    testpmd-*)
        # Both lcores on the forwarder's core (the main one only waits on stdin, which
        # `sleep` holds open: its end also bounds the run; not a pipe, whose `wait`
        # would wait for the sleep too). bpffs is mounted in the mount namespace of
        # this `ip netns exec` only.
        # $! must be testpmd itself: the sleep that holds its stdin is opened here first.
        local tp_in
        exec {tp_in}< <(sleep 120 2>/dev/null)
        ip netns exec "$P-fwd" sh -c "mount -t bpf bpf /sys/fs/bpf && exec $TESTPMD \
            --lcores 0@$FWD_CORE,1@$FWD_CORE --main-lcore 0 --no-huge -m 512 --no-pci --file-prefix=$P-tp \
            --vdev net_af_xdp0,iface=xdpf0,start_queue=0,queue_count=1 \
            --vdev net_af_xdp1,iface=xdpf1,start_queue=0,queue_count=1 \
            -- --forward-mode=${1#testpmd-} --eth-peer=1,$FWD_MAC_D0 --eth-peer=0,$FWD_MAC_S0 \
            --nb-cores=1 --rxd=2048 --txd=2048 --total-num-mbufs=16384" <&"$tp_in" > "$W/$1.out" 2>&1 &
        exec {tp_in}<&-
        ;;
    *) die "unknown leg $1" ;;
    esac
    FWD_PID=$!
}

xdpool_counts() { # -> "rx_packets empty_passes wakeups" of the running xdpool (its
    # worker publishes them every few passes). An empty pass counts in every lane of
    # the worker (idle_loops), so the most of any queue is the worker's (one worker,
    # as the script's config has).
    "$XDPOOL" stats --socket "$W/ctl.sock" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
t = s["total"]
print(t["rx_packets"], max(q.get("idle_loops", 0) for q in s["queues"]), t["tx_wakeups"])' 2>/dev/null
}

gen_start() { # $1 size, $2 seconds -> GEN_PID
    if [ -n "$XDP_TRAFFICGEN" ]; then
        # Its -s counts the FCS; its one thread runs on core 0.
        timeout -s INT "$2" ip netns exec "$P-src" "$XDP_TRAFFICGEN" udp -m "$FWD_MAC_F0" -A 2001:2:0:1::1 -a 2001:2:0:2::1 \
            -p 9 -s $(($1 + 4)) -t 1 xdps0 > "$W/gen.out" 2>&1 &
    else
        "$GEN_XDPOOL" gen --netns "$P-src" --dev xdps0 --count 1000000000 --duration "$2" --size "$1" --cores $GEN_CORE $GEN_DST \
            ${GEN_RATE:+--rate $GEN_RATE} > "$W/gen.out" 2>&1 &
    fi
    GEN_PID=$!
}

pin_napi_f0() { # xdpf0's NAPI threaded, its threads on the forwarder's core (veth has a NAPI only
    # while a program is attached, and makes it anew each time: so after each attach)
    local c n=0
    ip netns exec "$P-fwd" sh -c 'echo 1 > /sys/class/net/xdpf0/threaded' || echo "# cannot make xdpf0's NAPI threaded"
    for c in /proc/[0-9]*/comm; do
        if grep -q '^napi/xdpf0-' "$c" 2>/dev/null; then
            taskset -pc $FWD_CORE "$(basename "$(dirname "$c")")" >/dev/null && n=$((n + 1))
        fi
    done
    ((n > 0)) || echo "# no NAPI thread of xdpf0 found to pin (FWD_NAPI=threaded)"
}

run_one() { # $1 leg, $2 size, $3 rep (0: warm-up) -> a line, and a row in $W/rows.tsv
    local leg=$1 size=$2 rep=$3
    start_fwd "$leg"
    local ok=1
    bench_wait_prog "$P-fwd" xdpf0 100 $FWD_PID || ok=
    if [ -z "$ok" ] || ! kill -0 $FWD_PID 2>/dev/null; then
        echo "# $leg: no XDP program on xdpf0 10 s after start, or it exited; its output ends:"
        tail -n 5 "$W/$leg.out" | sed 's/^/#   /'
        bench_stop $FWD_PID 5 "$leg"
        bench_xdp_off "$P-fwd" xdpf0 xdpf1
        printf 'forward %s B\t%s\t%s\t0\n' "$size" "$rep" "$leg" >> "$W/rows.tsv"
        FAILED="$FAILED $leg"
        return
    fi
    [[ $leg == testpmd-* || $leg == xsk_fwd ]] && bench_wait_prog "$P-fwd" xdpf1 50
    [ "$FWD_NAPI" = threaded ] && pin_napi_f0
    sleep 0.5
    local x0 d0 x1 d1 c1 c2 t1 t2 s1 s2 w1 w2 alive
    x0=$(bench_xmit "$P-src" xdps0) || exit 2
    d0=$(bench_rx_xdp "$P-dst" xdpd0) || die "no XDP counters on xdpd0"
    # A generous bound: the generator is stopped once the window is read. The window
    # starts LEAD s after frames first arrive at xdpd0, so no one's start-up is in it.
    gen_start "$size" $((LEAD + WINDOW + 20))
    local started=1
    bench_wait_moving 100 bench_rx_xdp "$P-dst" xdpd0 || started=
    sleep "$LEAD"
    # The worker's counters are read just before the window and just after it, so
    # that the reads (a process each) fall outside what is measured.
    local k1= k2=
    [[ $leg == xdpool* ]] && k1=$(xdpool_counts)
    c1=$(bench_rx_xdp "$P-dst" xdpd0); w1=$(date +%s.%N); t1=$(bench_threads $FWD_PID); s1=$(bench_steal); u1=$(bench_cpu "$FWD_CORE")
    local perf_pid=
    if [ -n "${PROFILE_DIR:-}" ]; then
        perf record -q -e cpu-clock -a -o "$PROFILE_DIR/$leg-$size-$rep.data" -- sleep "$WINDOW" > /dev/null 2>&1 &
        perf_pid=$!
    fi
    sleep "$WINDOW"
    [ -z "$perf_pid" ] || wait "$perf_pid"
    c2=$(bench_rx_xdp "$P-dst" xdpd0); w2=$(date +%s.%N); t2=$(bench_threads $FWD_PID); s2=$(bench_steal); u2=$(bench_cpu "$FWD_CORE")
    [[ $leg == xdpool* ]] && k2=$(xdpool_counts)
    alive=1
    kill -0 $GEN_PID 2>/dev/null || alive=
    [ -n "$started" ] || { alive=; echo "# $leg: nothing arrived at xdpd0 10 s after the generator started"; }
    # xdpool gen finishes its current call before it looks at SIGINT: killed (its
    # report is not needed); xdp-trafficgen gets SIGINT through timeout.
    if [ -n "$XDP_TRAFFICGEN" ]; then bench_stop $GEN_PID 10 generator; else bench_stop $GEN_PID 0 generator KILL; fi
    sleep 1
    x1=$(bench_xmit "$P-src" xdps0)
    d1=$(bench_rx_xdp "$P-dst" xdpd0)
    bench_stop $FWD_PID 10 "$leg"
    bench_xdp_off "$P-fwd" xdpf0 xdpf1
    [ -n "$alive" ] || echo "# $leg: the generator ended before the window closed: $(tail -n 2 "$W/gen.out" | tr '\n' ' ')"
    local busy
    busy=$(bench_busiest "$t1" "$t2")
    python3 - "$leg" "$size" "$rep" "$x0" "$x1" "$d0" "$d1" "$c1" "$c2" "$w1" "$w2" "$busy" "$BENCH_MHZ" "$(bench_steal_pct "$s1" "$s2")" "${alive:-0}" "$W/rows.tsv" "$(bench_cpu_pct "$u1" "$u2")" <<'PY'
import sys
leg, size, rep, x0, x1, d0, d1, c1, c2, w1, w2, busy, mhz, steal, alive, rows, split = sys.argv[1:]
usr, sysp, sirq, idle = map(int, split.split())
(a0, r0), (a1, r1) = (map(int, x.split()) for x in (x0, x1))
accepted, refused = a1 - a0, r1 - r0
offered = accepted + refused
arrived = int(d1) - int(d0)
win = int(c2) - int(c1)
secs = float(w2) - float(w1)
ns, cs = map(int, busy.split())
rate = win / secs / 1e6 if alive == '1' else 0.0
cyc = ns / max(win, 1) * float(mhz) / 1e3
lost = (offered - arrived) / max(offered, 1) * 1e6
refd = refused / max(offered, 1) * 1e6
import time
print(f'{time.strftime("%H:%M:%S", time.gmtime())} {leg:12} {size:>4} B rep {rep}: {rate:6.3f} Mpps arrived in the window | offered {offered} arrived {arrived}: '
      f'lost {lost:8.0f}/M (refused at xdpf0 {refd:.0f}/M) | app {ns/1e6:6.1f} ms cpu, {cyc:6.0f} cycles/frame, {cs} ctx sw | '
      f'forwarder core: user {usr}% system {sysp}% softirq {sirq}% idle {idle}% | steal {steal}')
with open(rows, 'a') as f:
    f.write(f'forward {size} B\t{rep}\t{leg}\t{rate:.4f}\tlost_per_M={lost:.0f}\tcycles_per_frame={cyc:.0f}\trefused_per_M={refd:.0f}\tcore_user_pct={usr}\tcore_system_pct={sysp}\tcore_softirq_pct={sirq}\n')
PY
    if [ -n "$k1" ] && [ -n "$k2" ]; then
        python3 - "$k1" "$k2" <<'PY'
import sys
(p0, i0, w0), (p1, i1, w1) = (map(int, a.split()) for a in sys.argv[1:])
frames, idle, calls = p1 - p0, i1 - i0, w1 - w0
print(f'#   around the window (counters read just before and after it): {frames} frames read, {calls} sendto ({frames / max(calls, 1):.1f} frames each), '
      f'{idle} empty passes ({idle / max(frames, 1) * 64:.2f} per 64 frames)')
PY
    fi
    if [[ $leg == xdpool* ]] && [ -f "$W/sum.json" ]; then
        python3 -c "import json;s=json.load(open('$W/sum.json'));print('#   $leg summary: packets', s.get('packets'), 'drops', json.dumps(s.get('drops')))" 2>/dev/null
        [ -z "${SUMMARY_DIR:-}" ] || cp "$W/sum.json" "$SUMMARY_DIR/$leg-$size-$rep.json"
    fi
}

main() {
    local gen="xdpool gen ($GEN_XDPOOL)${GEN_DST:+ $GEN_DST}"
    [ -n "$XDP_TRAFFICGEN" ] && gen="xdp-trafficgen ($XDP_TRAFFICGEN), IPv6"
    echo "# vs-fwd-peers $(date -u '+%F %H:%M') UTC, $(nproc) CPUs, kernel $(uname -r), TSC ${BENCH_MHZ} MHz, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# legs: $LEGS; sizes: $SIZES; REPS=$REPS WARMUP=$WARMUP WINDOW=$WINDOW s LEAD=$LEAD s; generator: $gen on core $GEN_CORE${GEN_RATE:+ at $GEN_RATE frames/s}; forwarders on core $FWD_CORE; xdpf0's NAPI $FWD_NAPI$([ "$FWD_NAPI" = threaded ] && echo " on core $FWD_CORE" || echo " on core $GEN_CORE"); xdpool mode $XDPOOL_MODE"
    echo "# xdpool: $XDPOOL ${XDPOOL_CONFIG:+config $XDPOOL_CONFIG}${XDPOOL_CONFIG:-mac $XDPOOL_MAC, frames $FRAMES}; xsk_fwd: ${XSK_FWD:-none}; testpmd: ${TESTPMD:-none}"
    [[ " $LEGS " == *" xdpool-b "* ]] && echo "# xdpool-b: ${XDPOOL_B:-$XDPOOL} with [rings] ${XDPOOL_B_RINGS:-(nothing added)}, [workers] ${XDPOOL_B_WORKERS:-(nothing added)}, [umem] ${XDPOOL_B_UMEM:-(nothing added)}"
    fwd_topo_up "$P" || exit 1
    ip netns exec "$P-dst" "$SINK" -i xdpd0 -d 86400 > "$W/sink.out" 2>&1 &
    SINK_PID=$!
    bench_wait_prog "$P-dst" xdpd0 50 || die "xdpsink did not attach: $(cat "$W/sink.out")"
    : > "$W/rows.tsv"
    FAILED=
    local size rep legs i
    for size in $SIZES; do
        echo "## forward, $size B frames"
        for ((rep = 1 - WARMUP; rep <= REPS; rep++)); do
            local r=$rep
            ((r < 0)) && r=0
            # shellcheck disable=SC2206
            legs=($LEGS)
            if ((rep % 2 == 0)); then
                for ((i = ${#legs[@]} - 1; i >= 0; i--)); do run_one "${legs[$i]}" "$size" $r; done
            else
                for i in "${legs[@]}"; do run_one "$i" "$size" $r; done
            fi
            # A leg that failed twice (the binary cannot do it) is dropped.
            for i in "${legs[@]}"; do
                if [ "$(echo "$FAILED" | tr ' ' '\n' | grep -cx "$i")" -ge 2 ]; then
                    echo "# $i failed twice: left out from here on"
                    LEGS=$(echo " $LEGS " | sed "s/ $i / /")
                    FAILED=$(echo "$FAILED" | tr ' ' '\n' | grep -vx "$i" | tr '\n' ' ')
                fi
            done
        done
    done
    bench_summary "rate: Mpps arrived at xdpd0 in the window; ratios xdpool / peer per pair" xdpool "$W/rows.tsv"
}

bench_main_to "$OUT"
