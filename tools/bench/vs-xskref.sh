#!/bin/bash
# Side by side on the lab, one run: xdpool against xskref (a bare libxdp AF_XDP
# receiver, tools/xskref) and optionally xdpsock and other xdpool builds, with the
# same generator, rings (RX rx, FILL fill, FRAMES frames of 2048 B; xdpsock has its
# own, compiled in), cores and NAPI placement. Runs each receiver once per rep, REPS
# times per placement, and prints, per run:
#   received / sent, Mpps (frames received / generator send time),
#   for l2fwd: frames back at the sender (its veth's RX counter) and their Mpps,
#   the application's CPU: the busiest thread's run time (schedstat), ns and
#   cycles (at the TSC's nominal MHz; this VM has no PMU) per frame received,
#   and its context switches,
#   the share of the window the hypervisor took cores 0 and 1 away (steal time),
#   and the receiver's core (1) split into user, system, softirq and idle over the
#   generator's window (/proc/stat): when that core is never idle and the RX ring is
#   never empty, a receiver whose user share is u can be beaten by at most 1/(1-u)
#   by one with the same kernel work per frame.
# Needs root, a built xdpool (make build) and xskref (make -C tools/xskref).
# Bounded: each run sends COUNT frames (or for GEN_SECS seconds), each receiver
# runs DUR seconds. Needs ethtool (make setup installs it). The lab
# (prefix vsx) is removed on exit.
#   PLACEMENTS="action:mode:napi ..." (default: all five below)
#   WORKERS_EXTRA="poll_coalesce_us = 0" adds lines to xdpool's [workers] section
#   XDPSOCK=/path/to/xdpsock adds the kernel's AF_XDP sample (bpf-examples'
#     AF_XDP-example, built outside this tree; it is not ours to ship) as a third
#     receiver, pinned with taskset, -p in the poll placements; XDPSOCK_MODES="spin
#     poll" runs it in both modes in every placement.
#   TESTPMD=/path/to/dpdk-testpmd adds DPDK's testpmd (Debian's dpdk package) on
#     one net_af_xdp port in the spinning placements (it always busy-polls):
#     --forward-mode=rxonly for drop, macswap for l2fwd, both lcores on core 1,
#     --no-huge -m 512 --no-pci --total-num-mbufs=16384, RX ring RX, bpffs mounted
#     in its namespace. Its "RX ring full" column is testpmd's RX-dropped (the
#     socket's rx_dropped), and its run ends when its stdin (a sleep of DUR + 3 s) ends.
#   XDPOOL_ALL=1 adds xdpool-all: the same xdpool with a rule that matches every
#     frame (no proto, no dst_port), so that its XDP program takes every frame
#     unparsed, as the peers' programs do (the lab's rule, udp dst_port 9, has the
#     program read each frame's headers: on the receiver's core when the NAPI is
#     threaded there).
#   XDPOOL_B="NAME=/path/to/xdpool ...": other xdpool builds, each one more
#     receiver called NAME with the same config (A/B of a change).
#   HANDLER_B="NAME=/path/to/program:HANDLER ...": programs built on the xdpool
#     library (an example's --config/--duration command line, e.g. the l2fwd example,
#     userspace/xdpool-examples/src/bin/l2fwd), each one more receiver called NAME
#     with the same config but the rule's action `call` to handler HANDLER: a packet
#     function against the built-in action.
#   GEN_SECS=S: the generator sends for S seconds at full speed instead of COUNT
#     frames, so every receiver gets the same window.
#   GEN_RATE=PPS: the generator paces itself to PPS frames/s (default: flat out).
#   WARMUP=N: N rounds of every receiver before the counted reps (printed, rep 0).
#   BACK_SINK=1: in the l2fwd placements, an XDP program that counts and drops
#     (tools/xdpsink, make -C tools/xdpsink) on the sender's veth takes the frames
#     sent back, and its count is the "back" figure. Without it they go up the
#     sending namespace's IP stack (dropped there as not for its address), which veth
#     runs in softirq on the CPU that sent them: the receiver's own core, inside its
#     sendto(), the same for every receiver but much of the cost of the TX side.
#   ROWS=file: also append one tab-separated row per run for
#     tools/bench/summarize.py (compare-all.sh uses it).
# Each line also says how many frames the sender's veth refused (the receiver's
# ring was full: its NAPI fell behind) out of those offered, and how many the
# socket's RX ring had no room for (the application fell behind).
set -u
cd "$(dirname "$0")/../.."
source tools/bench/lib.sh
X=$PWD/target/release/xdpool
REF=$PWD/tools/xskref/xskref
SINK=$PWD/tools/xdpsink/xdpsink
COUNT=${COUNT:-4000000}
REPS=${REPS:-3}
DUR=${DUR:-$(( ${GEN_SECS:-2} + 4 ))}  # each receiver's lifetime: covers start-up and the send window
RX=${RX:-2048}
FILL=${FILL:-4096}
FRAMES=${FRAMES:-8192}
PLACEMENTS=${PLACEMENTS:-drop:spin:softirq drop:poll:softirq drop:poll:threaded l2fwd:spin:softirq l2fwd:poll:threaded}
MHZ=$(awk -F: '/^cpu MHz/{print $2; exit}' /proc/cpuinfo)
P=vsx
W=$(mktemp -d)
cleanup() { "$X" lab down --prefix $P >/dev/null 2>&1; rm -rf "$W"; }
trap cleanup EXIT
[ -x "$X" ] && [ -x "$REF" ] || { echo "build first: make build && make -C tools/xskref" >&2; exit 2; }
[ -z "${XDPSOCK:-}" ] || [ -x "$XDPSOCK" ] || { echo "XDPSOCK=$XDPSOCK is not an executable" >&2; exit 2; }
[ -z "${TESTPMD:-}" ] || [ -x "$TESTPMD" ] || { echo "TESTPMD=$TESTPMD is not an executable" >&2; exit 2; }
command -v ethtool >/dev/null || { echo "needs ethtool (make setup installs it)" >&2; exit 2; }

napi_pids() { # the receiving veth's NAPI threads
    local c
    for c in /proc/[0-9]*/comm; do
        if grep -q "^napi/${P}b0-" "$c" 2>/dev/null; then basename "$(dirname "$c")"; fi
    done
}

pin_napi() { # veth re-creates its NAPI when a program comes: pin after attach, then
    # say so if any thread is elsewhere
    local t cpus
    for t in $(napi_pids); do taskset -pc "$1" "$t" >/dev/null; done
    cpus=$(for t in $(napi_pids); do taskset -pc "$t" | sed 's/.*: //'; done | sort -u | tr '\n' ' ')
    [ "$cpus" = "$1 " ] || echo "# $2: NAPI thread CPUs '$cpus', not $1"
}

napi_ticks() { # the NAPI threads' CPU time (utime + stime, ticks), their involuntary
    # context switches, and the CPU each last ran on, summed / listed
    local t f u=0 n=0 on=""
    for t in $(napi_pids); do
        read -r -a f < "/proc/$t/stat" 2>/dev/null || continue
        # /proc/PID/stat after the ")" of comm: field 14 utime, 15 stime, 39 processor.
        u=$((u + f[13] + f[14]))
        on="$on${f[38]},"
        n=$((n + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "/proc/$t/status" 2>/dev/null || echo 0)))
    done
    echo "$u $n ${on%,}"
}


xmit_counts() { # "into-ring refused": the sender veth's XDP transmit counters (ethtool -S)
    ip netns exec $P-a ethtool -S ${P}a0 | awk '/tx_queue_.*_xdp_xmit:/{a+=$2; n++} /tx_queue_.*_xdp_xmit_errors:/{b+=$2} END{if (!n) exit 1; print a+0, b+0}' \
        || { echo "no XDP transmit counters in ethtool -S ${P}a0" >&2; exit 2; }
}

back_count() { # frames the sender's veth received (l2fwd returns)
    ip -n $P-a -s -j link show ${P}a0 | python3 -c "import json,sys;print(json.load(sys.stdin)[0]['stats64']['rx']['packets'])"
}

run_one() { # $1 receiver, $2 action, $3 mode, $4 napi (softirq|threaded)
    local out
    rm -f "$W/sum.json" "$W/ref.out" "$W/xs.out" "$W/tp.out"
    if [ "$1" = testpmd ]; then
        local fm=rxonly
        [ "$2" = l2fwd ] && fm=macswap
        # stdin is a sleep of DUR + 3 s (a process substitution, so that `wait` waits for
        # testpmd alone): at its end testpmd prints its totals and exits.
        # $! must be testpmd itself: the sleep that holds its stdin is opened here first.
        local tp_in
        exec {tp_in}< <(sleep $((DUR + 3)) 2>/dev/null)  # + its slower start (EAL)
        ip netns exec $P-b sh -c "mount -t bpf bpf /sys/fs/bpf && exec $TESTPMD --lcores 0@1,1@1 --main-lcore 0 \
            --no-huge -m 512 --no-pci --file-prefix=$P-tp --vdev net_af_xdp0,iface=${P}b0,start_queue=0,queue_count=1 \
            -- --forward-mode=$fm --nb-cores=1 --rxd=$RX --txd=2048 --total-num-mbufs=16384" \
            <&"$tp_in" > "$W/tp.out" 2>&1 &
        exec {tp_in}<&-
    elif [ "$1" = xdpsock ]; then
        local f=-r pf=
        [ "$2" = l2fwd ] && f=-l
        [ "$3" = poll ] && pf=-p
        # Line-buffered, so that its per-second reports reach the file even when the
        # watchdog below has to kill it.
        ip netns exec $P-b env LC_ALL=C taskset -c 1 stdbuf -oL "$XDPSOCK" -i ${P}b0 -q 0 $f $pf -c -x -d "$DUR" > "$W/xs.out" 2>&1 &
    elif [ "$1" = xskref ]; then
        ip netns exec $P-b "$REF" -i ${P}b0 -q 0 -c 1 -m "$3" -a "$2" -d "$DUR" -r "$RX" -f "$FILL" -n "$FRAMES" > "$W/ref.out" 2>/dev/null &
    else
        # The lab's rule steers UDP to port 9 (the XDP program parses each frame for
        # it); xdpool-all's matches every frame, as the peers' programs take all.
        local match='proto = "udp"
dst_port = "9"'
        [ "$1" = xdpool-all ] && match=
        cat > "$W/run.toml" <<EOT
[interface]
name = "${P}b0"
netns = "$P-b"
queues = [0]
[umem]
frames = $FRAMES
chunk_size = 2048
[rings]
fill = $FILL
completion = 2048
rx = $RX
tx = 2048
[workers]
cores = [1]
mode = "$3"
${WORKERS_EXTRA:-}
[[rule]]
$match
action = "$2"
[stats]
control_socket = "$W/ctl.sock"
live = false
EOT
        local bin=$X b handler=
        for b in ${XDPOOL_B:-}; do [ "${b%%=*}" = "$1" ] && bin=${b#*=}; done
        for b in ${HANDLER_B:-}; do
            [ "${b%%=*}" = "$1" ] || continue
            b=${b#*=}
            bin=${b%:*}
            handler=${b##*:}
        done
        if [ -n "$handler" ]; then
            sed -i "s/^action = .*/action = \"call\"\nhandler = \"$handler\"/" "$W/run.toml"
            # Its summary is the last line of its stdout (after `ready`).
            "$bin" --config "$W/run.toml" --duration "$DUR" > "$W/run.out" 2>"$W/run.err" &
        else
            "$bin" run -c "$W/run.toml" --duration "$DUR" --quiet --summary-json "$W/sum.json" > "$W/run.out" 2>&1 &
        fi
    fi
    local pid=$!
    sleep 1.5
    # The receiver's program must be on before the NAPI thread is pinned: veth makes
    # a new thread when a program comes, and one made after the pin runs anywhere
    # (on the generator's core, a different placement). Wait up to 5 s more.
    bench_wait_prog $P-b ${P}b0 50 || echo "# $1: no XDP program on ${P}b0 6.5 s after start"
    [ "$4" = threaded ] && pin_napi 1 "$1"
    local t0 t1 s0 s1 c0 c1 b0 b1 x0 x1 gen_args sink_pid=
    if [ -n "${BACK_SINK:-}" ] && [ "$2" = l2fwd ]; then
        ip netns exec $P-a "$SINK" -i ${P}a0 -d $((DUR + 30)) > "$W/sink.out" 2>&1 &
        sink_pid=$!
        bench_wait_prog $P-a ${P}a0 50 $sink_pid || echo "# xdpsink: no XDP program on ${P}a0 5 s after start"
    fi
    t0=$(bench_threads $pid)
    s0=$(bench_steal)
    c0=$(bench_cpu 1)
    local g0 g1 n0="" n1=""
    g0=$(bench_cpu 0)
    [ "$4" = threaded ] && n0=$(napi_ticks)
    b0=$(back_count)
    x0=$(xmit_counts)
    if [ -n "${GEN_SECS:-}" ]; then gen_args="--count 1000000000 --duration $GEN_SECS"; else gen_args="--count $COUNT"; fi
    [ -n "${GEN_RATE:-}" ] && gen_args="$gen_args --rate $GEN_RATE"
    out=$("$X" gen --netns $P-a --dev ${P}a0 $gen_args --cores 0 2>/dev/null | tail -1)
    sleep 0.3
    t1=$(bench_threads $pid)
    s1=$(bench_steal)
    c1=$(bench_cpu 1)
    g1=$(bench_cpu 0)
    [ "$4" = threaded ] && n1=$(napi_ticks)
    x1=$(xmit_counts)
    # A receiver still there 10 s + DUR after the generator is stuck: kill it rather
    # than wait for ever, and say so. xdpsock -p often gets stuck once the traffic
    # has stopped before its -d time is up: its loop goes back to poll() whenever
    # poll() times out, before it looks at the end of the run. Its last per-second
    # report, printed after the traffic ended, then has its count (for any killed
    # xdpsock). Any other receiver's line shows 0 received.
    local i killed=
    for ((i = 0; i < 100 + DUR * 10; i++)); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    if kill -0 $pid 2>/dev/null; then
        kill -9 $pid
        killed=1
        if [ "$1" = xdpsock ]; then
            local why=
            [ "$3" = poll ] && why=" (stuck in its poll loop)"
            echo "# xdpsock still running $((10 + DUR)) s after the generator$why; killed, counted from its last per-second report"
        else
            echo "# $1 still running $((10 + DUR)) s after the generator; killed"
        fi
        # Killed, it leaves its XDP program attached, which the next receiver would
        # find in its way.
        ip -n $P-b link set ${P}b0 xdp off 2>/dev/null
        ip -n $P-b link set ${P}b0 xdpgeneric off 2>/dev/null
    fi
    local status=0
    wait $pid 2>/dev/null || status=$?
    [ $status = 0 ] || [ -n "$killed" ] || echo "# $1 exited with status $status (its figures below are not to be trusted)"
    b1=$(back_count)
    if [ -n "$sink_pid" ]; then
        bench_stop $sink_pid 5 xdpsink
        b0=0
        b1=$(sed -n 's/^xdpsink packets \([0-9]*\).*/\1/p' "$W/sink.out" | tail -1)
        [ -n "$b1" ] || { echo "# xdpsink printed no count: $(tail -2 "$W/sink.out" | tr '\n' ' ')"; b1=0; }
    fi
    local secs got offered
    secs=$(echo "$out" | sed -n 's/.* in \([0-9.]*\) s:.*/\1/p')
    offered=$(echo "$out" | sed -n 's/^sent \([0-9]*\) frames.*/\1/p')
    [ -n "$offered" ] && [ -n "$secs" ] || { echo "# generator failed: $out"; return; }
    local full
    if [ "$1" = xdpsock ]; then
        got=$(awk '$1 == "rx" && $2 ~ /^[0-9.]+$/ {n = $3} END {print n + 0}' "$W/xs.out")
        full=$(awk '$1 == "rx" && $2 == "queue" {n = $5} END {print n + 0}' "$W/xs.out")
    elif [ "$1" = testpmd ]; then
        grep -q 'Accumulated forward statistics' "$W/tp.out" || { echo "# testpmd printed no totals; its output ends:"; grep -v 'libbpf: elf' "$W/tp.out" | tail -n 6 | sed 's/^/#   /'; }
        got=$(sed -n '/Accumulated forward statistics/,$s/.*RX-packets: *\([0-9]*\).*/\1/p' "$W/tp.out" | head -1)
        full=$(sed -n '/Accumulated forward statistics/,$s/.*RX-dropped: *\([0-9]*\).*/\1/p' "$W/tp.out" | head -1)
    elif [ "$1" = xskref ]; then
        got=$(sed -n 's/.*rx_packets \([0-9]*\).*/\1/p' "$W/ref.out")
        full=$(sed -n 's/.*rx_ring_full=\([0-9]*\).*/\1/p' "$W/ref.out")
    else
        [ -z "${handler:-}" ] || tail -n 1 "$W/run.out" > "$W/sum.json"
        { read -r got; read -r full; } < <(python3 -c "import json;s=json.load(open('$W/sum.json'));d=s['drops'];print(s['packets']);print(d['rx_ring_full'], '| TX ring full', d['tx_ring_full'])")
    fi
    got=${got:-0}  # a killed receiver left no figures
    # Where the time went outside the receiver (for the placements' modes): the
    # generator's core, and the receiving veth's NAPI threads (threaded NAPI).
    local napi_line=""
    if [ "$4" = threaded ]; then
        local nt0 nc0 nt1 nc1 non
        read -r nt0 nc0 _ <<< "$n0"
        read -r nt1 nc1 non <<< "$n1"
        napi_line=" | NAPI threads: $(awk -v d=$((nt1 - nt0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d / hz }') s CPU, $((nc1 - nc0)) preempted, last on CPU ${non:-?}"
    fi
    echo "# $1 $2 $3 $4: core 0 (generator): user system softirq idle % $(bench_cpu_pct "$g0" "$g1")$napi_line"
    python3 - "$1" "$2" "$3" "$4" "$got" "$offered" "$secs" "$t0" "$t1" "$((b1 - b0))" "$MHZ" "$(( ${x1#* } - ${x0#* } ))" "${full:-0}" "$(bench_steal_pct "$s0" "$s1")" "$(bench_cpu_pct "$c0" "$c1")" <<'PY'
import os, sys
who, act, mode, napi, got, count, secs, t0, t1, back, mhz, refused, full, steal, core = sys.argv[1:]
got, count, secs, back, mhz, refused = int(got), int(count), float(secs), int(back), float(mhz), int(refused)
parse = lambda s: {t: (int(r), int(c)) for t, r, c in (x.split(':') for x in s.split())}
a, b = parse(t0), parse(t1)
ns, cs = max([(b[t][0] - a[t][0], b[t][1] - a[t][1]) for t in b if t in a] or [(0, 0)])
per = ns / max(got, 1)
line = f'{who:7} {act:5} {mode:4} {napi:8} received {got:>8} of {count} ({got/count*100:5.1f}%) {got/secs/1e6:6.3f} Mpps'
if act == 'l2fwd':
    line += f' | back {back:>8} {back/secs/1e6:6.3f} Mpps'
line += f' | app {ns/1e6:6.1f} ms cpu, {per:6.1f} ns = {per*mhz/1e3:6.0f} cycles/frame, {cs:6d} ctx sw'
line += f' | veth refused {refused} | RX ring full {full}'
# Time the hypervisor gave neither core to this VM during the window: a window with
# much of it is slow for reasons outside the receivers.
c0, c1 = steal.split()
line += f' | steal c0 {c0} c1 {c1}'
usr, sysp, sirq, idle = core.split()
line += f' | core 1: user {usr}% system {sysp}% softirq {sirq}% idle {idle}%'
print(line)
# ROWS=file: one row for tools/bench/summarize.py (rate: received, for l2fwd back at
# the sender, Mpps; rep 0 is a warm-up).
if os.environ.get('ROWS'):
    rate = (back if act == 'l2fwd' else got) / secs / 1e6
    with open(os.environ['ROWS'], 'a') as f:
        f.write(f"{act} {mode} {napi}\t{os.environ.get('REP', '1')}\t{who}\t{rate:.4f}\tcycles_per_frame={per*mhz/1e3:.0f}\tcore_user_pct={usr}\tcore_system_pct={sysp}\tcore_softirq_pct={sirq}\tcore_idle_pct={idle}\n")
PY
}

echo "# $(date -u +%F), $(nproc) CPUs, kernel $(uname -r), TSC ${MHZ} MHz; COUNT=$COUNT REPS=$REPS rx=$RX fill=$FILL frames=$FRAMES"
for placement in $PLACEMENTS; do
    IFS=: read -r act mode napi <<< "$placement"
    "$X" lab down --prefix $P >/dev/null 2>&1
    "$X" lab up --prefix $P >/dev/null || exit 1
    xmit_counts >/dev/null || exit 2
    if [ "$napi" = threaded ]; then ip netns exec $P-b sh -c "echo 1 > /sys/class/net/${P}b0/threaded"; fi
    echo "# $act, worker core 1 ($mode), generator core 0, NAPI $napi $([ "$napi" = threaded ] && echo 'on core 1' || echo 'on the sending core')"
    for ((rep = 1 - ${WARMUP:-0}; rep <= REPS; rep++)); do
        export REP=$((rep < 0 ? 0 : rep))
        # Odd reps run the list in order, even reps reversed (the xdpool builds
        # first), so that a drift in the machine over a placement favours no one.
        runs=()
        if [ -n "${XDPSOCK:-}" ]; then
            for m in ${XDPSOCK_MODES:-$mode}; do runs+=("xdpsock $act $m $napi"); done
        fi
        [ -n "${TESTPMD:-}" ] && [ "$mode" = spin ] && runs+=("testpmd $act $mode $napi")
        runs+=("xskref $act $mode $napi" "xdpool $act $mode $napi")
        [ -n "${XDPOOL_ALL:-}" ] && runs+=("xdpool-all $act $mode $napi")
        for b in ${XDPOOL_B:-} ${HANDLER_B:-}; do runs+=("${b%%=*} $act $mode $napi"); done
        if [ $((rep % 2)) = 0 ]; then
            for ((i = ${#runs[@]} - 1; i >= 0; i--)); do run_one ${runs[$i]}; done
        else
            for r in "${runs[@]}"; do run_one $r; done
        fi
    done
done
