#!/bin/bash
# The lb example (userspace/xdpool-examples/src/bin/lb, xdpool's crate-root API only)
# against the same load balancer written on xsk-rs (tools/lb-peer), issue 25.
#
# The forward lab (`xdpool lab up --topology forward --prefix PREFIX`): the generator
# (`xdpool gen`, live frames, core 0) sends from xdps0 in PREFIX-src into xdpf0
# (port "in") in PREFIX-fwd; the load balancer sends each flow to a backend behind
# xdpf1 (port "out"), and tools/xdpsink on PREFIX-dst's xdpd0 counts and drops what
# arrives (the veth's rx_queue_*_xdp_packets). Both tools: copy mode, spinning on
# core 1, UMEM 8192 frames of 2048 B, rings 1024, batch 64, the backends of
# configs/examples/lb.toml (xdpool reads that file, with [workers] cores = [1, 1],
# mode = "spin", batch = 64 added; the peer gets the same arg).
#
# 0. Same behaviour: each tool gets 64 flows of 10 frames (one generator run per
#    source port 1024-1087); tcpdump at xdpd0 shows each flow's backend and every
#    IPv4/UDP checksum, and the backends' stack (their addresses added to xdpd0)
#    counts NoPorts / InCsumErrors. Prints whether every flow reached the same
#    backend under both.
# 1. Rate: WARMUP rounds of both (not counted), then PAIRS rounds, ours first in odd
#    rounds, the peer first in even ones. Each run: the tool starts, its XDP
#    program is waited for, the generator sends COUNT frames of 64 B, source ports
#    1024-1087, flat out, bounded by GEN_SECS (its live engine sends 2^22 frames of
#    one flow before the next: about 3 flows in 10 million frames); 1 s later the frames
#    that arrived at xdpd0 are counted. Mpps = frames arrived / the generator's send
#    time. Prints one line per run (with the tool's busiest thread's run time and
#    core 1's user/system/softirq/idle split over the send, as vs-fwd-peers.sh) and a
#    markdown table: per pair each tool's Mpps and the ratio ours / peer, then the
#    medians and ranges.
# 2. Device loss (LOSS=1): for each tool, traffic at LOSS_RATE frames/s in short
#    generator runs (retried while the device is away; bounded by LOSS_SECS), then
#    xdpf0 is deleted (`ip link del`, which takes xdps0 with it) and re-created as the
#    lab made it (names, MACs, addresses, neighbours, routes), traffic goes on for
#    LOSS_AFTER s, stops, and the tool is stopped with SIGINT. Reported: frames sent,
#    frames that arrived at xdpd0 before and after the re-create, whether the tool
#    re-attached, and its own accounting of its UMEM's frames.
#
# Knobs (environment): PAIRS=9 WARMUP=1 COUNT=10000000 GEN_SECS=10 LOSS=1
#   RULES=example (the config's UDP and TCP rules) or one (a single rule without
#   proto for every frame, the handler dropping what is not UDP/TCP, as the peer)
#   B_LB=path and/or B_RULES=example|one: an A/B of the lb example against itself,
#   not against the peer: the second leg ("B") runs B_LB (default: the lb built
#   here) with the config B_RULES makes (default example), waits for its `ready`
#   as ours does and reports its own summary; LOSS=0 is required.
#   LOSS_RATE=20000 LOSS_BATCH=16 LOSS_SECS=30 LOSS_AFTER=3 PREFIX=vlb<pid> NO_BUILD=1 (use the
#   binaries as built) OUT=file (default: a dated file under docs/results/)
#   KEEP=dir (copy the run's scratch files there: summaries, pcaps, traffic logs).
#   PERF=dir (perf record -e cpu-clock -g of core 1 for 1 s of each counted run, from
#   0.2 s into the send: dir/ours-N.data, dir/peer-N.data; read with perf report -i).
# Builds (unless NO_BUILD=1): `cargo build --release -p xdpool-examples -p xdpool-cli
# --bin lb --bin xdpool` (both named: `--bin lb` alone builds no xdpool) and `cargo build --release` in tools/lb-peer (the same release
# profile in both: opt-level 3, codegen-units 4, debug 1). The peer's libxdp-sys
# compiles libxdp with clang: CLANG=clang-19 LLC=llc-19 by default, and needs m4
# (apt-get install m4). Needs root, ethtool, tcpdump, tools/xdpsink (make -C tools/xdpsink).
# Not part of `make test`.
set -u
cd "$(dirname "$0")/../.."
source tools/bench/lib.sh
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
XDPOOL=$TARGET/release/xdpool
LB=$TARGET/release/lb
PEER=$ROOT/tools/lb-peer/target/release/lb-peer
SINK=$ROOT/tools/xdpsink/xdpsink
PAIRS=${PAIRS:-9}
WARMUP=${WARMUP:-1}
COUNT=${COUNT:-10000000}
GEN_SECS=${GEN_SECS:-10}
LOSS=${LOSS:-1}
LOSS_RATE=${LOSS_RATE:-20000}
LOSS_SECS=${LOSS_SECS:-30}
LOSS_AFTER=${LOSS_AFTER:-3}
LOSS_BATCH=${LOSS_BATCH:-16}
RULES=${RULES:-example}
case $RULES in example | one) ;; *) echo "vs-lb: RULES=$RULES: example or one" >&2; exit 2 ;; esac
SELF_AB=
if [ -n "${B_LB:-}${B_RULES:-}" ]; then
    SELF_AB=1
    B_RULES=${B_RULES:-example}
    case $B_RULES in example | one) ;; *) echo "vs-lb: B_RULES=$B_RULES: example or one" >&2; exit 2 ;; esac
    [ "$LOSS" = 0 ] || { echo "vs-lb: B_LB/B_RULES (an A/B of ours against ours): set LOSS=0" >&2; exit 2; }
fi
export SELF_AB
P=${PREFIX:-vlb$$}
GEN_CORE=0
FWD_CORE=1
FRAMES=8192
RING=1024
BATCH=64

die() { echo "vs-lb: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"

if [ -z "${NO_BUILD:-}" ]; then
    XDPOOL_CLANG=${XDPOOL_CLANG:-clang-19} cargo build --release -p xdpool-examples -p xdpool-cli --bin lb --bin xdpool || die "build of lb/xdpool failed"
    (cd tools/lb-peer && CLANG=${CLANG:-clang-19} LLC=${LLC:-llc-19} CARGO_TARGET_DIR=$ROOT/tools/lb-peer/target \
        cargo build --release) || die "build of tools/lb-peer failed (libxdp-sys needs clang and m4)"
    make -s -C tools/xdpsink || die "build of tools/xdpsink failed"
fi
[ -n "$SELF_AB" ] && PEER=${B_LB:-$LB}
for b in "$XDPOOL" "$LB" "$PEER" "$SINK"; do [ -x "$b" ] || die "$b missing: run without NO_BUILD"; done
OUT=${OUT:-$(bench_result_file vs-lb)}

W=$(mktemp -d)
SINK_PID= TOOL_PID= TRAFFIC_PID=
cleanup() {
    local p
    for p in $TRAFFIC_PID $TOOL_PID; do bench_stop "$p" 5 "pid $p"; done
    [ -n "$SINK_PID" ] && bench_stop "$SINK_PID" 5 xdpsink
    "$XDPOOL" lab down --prefix "$P" > /dev/null 2>&1
    for n in src fwd dst; do ip netns del "$P-$n" 2> /dev/null; done
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp -r "$W"/. "$KEEP"/
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The lb example's config for this lab, and the backends of its first rule.
sed "s/xdpool-fwd/$P-fwd/" configs/examples/lb.toml > "$W/lb.toml"
cat >> "$W/lb.toml" << EOT

[workers]
cores = [$FWD_CORE, $FWD_CORE]
mode = "spin"
batch = $BATCH
EOT
one_rule() { # rewrites config $1 to one rule without proto
    # One rule for every frame, as the peer's XDP program sends every frame to its
    # socket; the handler drops what is not UDP or TCP, as the peer does. (With the
    # example's UDP and TCP rules the worker classifies each frame, and the rest
    # passes to the kernel.)
    python3 - "$1" << 'EOP' || die "RULES=one: cannot rewrite $1"
import re, sys
p = sys.argv[1]
s = open(p).read()
rules = s.split("[[rule]]")
if len(rules) < 2:
    sys.exit("no [[rule]] in lb.toml")
first = re.sub(r'(?m)^proto = .*\n', "", rules[1])
tail = s[s.index("[workers]"):] if "[workers]" in rules[-1] else ""
between = first.split("[workers]")[0]
if re.search(r'(?m)^\s*(proto\s*=|\[)', between):
    sys.exit("the first rule has a proto or another section follows it: update RULES=one")
out = rules[0] + "[[rule]]" + between.rstrip() + "\n\n" + tail
if out.count("[[rule]]") != 1 or re.search(r'(?m)^\s*proto\s*=', out):
    sys.exit("RULES=one did not leave one rule without proto")
open(p, "w").write(out)
EOP
}
cp "$W/lb.toml" "$W/lb-b.toml"
[ "$RULES" = one ] && one_rule "$W/lb.toml"
[ -n "$SELF_AB" ] && [ "$B_RULES" = one ] && one_rule "$W/lb-b.toml"
ARG=$(sed -n 's/^arg = "\(.*\)"$/\1/p' configs/examples/lb.toml | head -n 1)
grep -q "^frames = $FRAMES\$" "$W/lb.toml" && grep -q "^rx = $RING\$" "$W/lb.toml" ||
    die "configs/examples/lb.toml no longer has frames = $FRAMES and rings of $RING: update FRAMES/RING here"

start_tool() { # $1 ours|peer, $2 seconds bound -> TOOL_PID; output in $W/$1.out
    : > "$W/$1.out"
    case $1 in
    ours) "$LB" --config "$W/lb.toml" --duration "$2" > "$W/ours.out" 2> "$W/ours.err" & ;;
    peer) if [ -n "$SELF_AB" ]; then
            "$PEER" --config "$W/lb-b.toml" --duration "$2" > "$W/peer.out" 2> "$W/peer.err" &
        else
            ip netns exec "$P-fwd" taskset -c $FWD_CORE "$PEER" xdpf0 xdpf1 "$ARG" "$2" $FRAMES $RING $BATCH \
                > "$W/peer.out" 2> "$W/peer.err" &
        fi ;;
    esac
    TOOL_PID=$!
    bench_wait_prog "$P-fwd" xdpf0 100 "$TOOL_PID" && bench_wait_prog "$P-fwd" xdpf1 50 "$TOOL_PID" || {
        echo "# $1: no XDP program on xdpf0/xdpf1 10 s after start, or it exited:"
        tail -n 5 "$W/$1.err" | sed 's/^/#   /'
        return 1
    }
    if [ "$1" = ours ] || [ -n "$SELF_AB" ]; then # attached; wait for `ready` (every port's carrier up)
        local i
        for ((i = 0; i < 100; i++)); do grep -q '^ready$' "$W/$1.out" && break; sleep 0.1; done
    fi
    sleep 0.3
}

stop_tool() { # $1 name -> the tool's last stdout line (its summary) in $W/$1.json
    bench_stop "$TOOL_PID" 10 "$1"
    TOOL_PID=
    bench_xdp_off "$P-fwd" xdpf0 xdpf1
    grep '^{' "$W/$1.out" | tail -n 1 > "$W/$1.json"
}

arrived() { bench_rx_xdp "$P-dst" xdpd0; }

run_one() { # $1 ours|peer, $2 round (0: warm-up) -> a line, a row in $W/rows.tsv
    local leg=$1 round=$2 d0 d1
    start_tool "$leg" $((GEN_SECS + 30)) || { stop_tool "$leg"; printf '%s\t%s\t0\t0\t0\n' "$round" "$leg" >> "$W/rows.tsv"; return; }
    d0=$(arrived) || die "no XDP counters on xdpd0"
    local t1 t2 u1 u2
    t1=$(bench_threads "$TOOL_PID"); u1=$(bench_cpu $FWD_CORE)
    local perf_pid=
    if [ -n "${PERF:-}" ] && [ "$round" != 0 ]; then # core 1 for 1 s, from 0.2 s into the send
        mkdir -p "$PERF"
        (sleep 0.2; exec perf record -q -e cpu-clock -g -C $FWD_CORE -o "$PERF/$leg-$round.data" -- sleep 1) > /dev/null 2>&1 &
        perf_pid=$!
    fi
    timeout $((GEN_SECS + 10)) "$XDPOOL" gen $GEN_TO --engine live --count "$COUNT" \
        --duration "$GEN_SECS" --size 64 --src-ports 1024-1087 --cores $GEN_CORE --json "$W/gen.json" > "$W/gen.out" 2>&1 ||
        echo "# $leg: the generator failed: $(tail -n 2 "$W/gen.out" | tr '\n' ' ')"
    t2=$(bench_threads "$TOOL_PID"); u2=$(bench_cpu $FWD_CORE)
    [ -n "$perf_pid" ] && wait "$perf_pid"
    sleep 1
    d1=$(arrived)
    stop_tool "$leg"
    python3 - "$leg" "$round" "$d0" "$d1" "$W/gen.json" "$W/$leg.json" "$W/rows.tsv" "$(bench_busiest "$t1" "$t2")" "$(bench_cpu_pct "$u1" "$u2")" << 'PY'
import json, os, sys, time
leg, rnd, d0, d1, genf, toolf, rows, busy, split = sys.argv[1:]
ns, cs = map(int, busy.split())
usr, sysp, sirq, idle = map(int, split.split())
g = json.load(open(genf))
secs = g['elapsed']['secs'] + g['elapsed']['nanos'] / 1e9
arrived = int(d1) - int(d0)
mpps = arrived / secs / 1e6
try:
    s = json.load(open(toolf))
except Exception:
    s = {}
if leg == 'ours' or os.environ.get('SELF_AB'):
    c = s.get('counters', {})
    own = f"rx {c.get('rx_packets')} forwarded {c.get('tx_completed')} accounting_ok {s.get('accounting_ok')}"
else:
    own = f"rx {s.get('received')} forwarded {s.get('completed')} dropped {s.get('dropped')}"
print(f"{time.strftime('%H:%M:%S', time.gmtime())} round {rnd} {leg:4}: {mpps:6.3f} Mpps | offered {g['sent']} in {secs:.3f} s, "
      f"arrived at xdpd0 {arrived} | its own count: {own} | busiest thread {ns / 1e6:.0f} ms ({ns / max(arrived, 1):.0f} ns/frame, {cs} ctx sw) | "
      f"core 1: user {usr}% system {sysp}% softirq {sirq}% idle {idle}%")
with open(rows, 'a') as f:
    f.write(f"{rnd}\t{leg}\t{mpps:.4f}\t{g['sent']}\t{arrived}\t{usr}\t{sysp}\t{sirq}\t{idle}\n")
PY
}

# Device loss: xdpf0 deleted and re-created under traffic.
recreate_in_link() { # as xdpool-lab's plan_link(Link::In) does
    local f=$P-fwd s=$P-src
    ip -n "$f" link add xdpf0 type veth peer name xdps0 netns "$s"
    ip -n "$f" link set xdpf0 address "$MAC_F0"
    ip -n "$f" addr add 198.18.1.2/24 dev xdpf0
    ip -n "$f" addr add 2001:2:0:1::2/64 dev xdpf0 nodad
    ip -n "$f" neigh replace 198.18.1.1 lladdr "$MAC_S0" dev xdpf0 nud permanent
    ip -n "$f" neigh replace 2001:2:0:1::1 lladdr "$MAC_S0" dev xdpf0 nud permanent
    ip -n "$f" link set xdpf0 up
    ip netns exec "$f" ethtool -K xdpf0 rx off > /dev/null
    ip -n "$s" link set xdps0 address "$MAC_S0"
    ip -n "$s" addr add 198.18.1.1/24 dev xdps0
    ip -n "$s" addr add 2001:2:0:1::1/64 dev xdps0 nodad
    ip -n "$s" neigh replace 198.18.1.2 lladdr "$MAC_F0" dev xdps0 nud permanent
    ip -n "$s" neigh replace 2001:2:0:1::2 lladdr "$MAC_F0" dev xdps0 nud permanent
    ip -n "$s" link set xdps0 up
    ip netns exec "$s" ethtool -K xdps0 rx off > /dev/null
    for v in 2 3; do
        ip -n "$s" route replace 198.18.$v.0/24 via 198.18.1.2
        ip -n "$s" -6 route replace 2001:2:0:$v::/64 via 2001:2:0:1::2
    done
}

traffic() { # runs until $W/stop exists or LOSS_SECS pass; frames sent -> $W/sent
    local end=$((SECONDS + LOSS_SECS)) n
    echo 0 > "$W/sent"
    : > "$W/traffic.log"
    while [ ! -e "$W/stop" ] && ((SECONDS < end)); do
        if timeout 5 "$XDPOOL" gen $GEN_TO --engine live --count $((LOSS_RATE / 5)) \
            --rate "$LOSS_RATE" --batch "$LOSS_BATCH" --duration 1 --size 64 --src-ports 1024-1087 --cores $GEN_CORE --json "$W/lg.json" > /dev/null 2>&1; then
            n=$(python3 -c "import json; print(json.load(open('$W/lg.json'))['sent'])")
            echo $(($(cat "$W/sent") + n)) > "$W/sent"
            echo "$(date +%T.%N | cut -c1-12) sent $n arrived $(arrived)" >> "$W/traffic.log"
        else
            echo "$(date +%T.%N | cut -c1-12) failed" >> "$W/traffic.log"
            sleep 0.05 # the device is away
        fi
    done
}

loss_one() { # $1 ours|peer
    local leg=$1 a0 a1 a2 a3 alive
    rm -f "$W/stop"
    start_tool "$leg" $((LOSS_SECS + 20)) || { stop_tool "$leg"; echo "# $leg: did not start"; return; }
    a0=$(arrived)
    traffic &
    TRAFFIC_PID=$!
    sleep 2
    a1=$(arrived)
    echo "$(date +%T.%N | cut -c1-12) delete" >> "$W/traffic.log"
    ip -n "$P-fwd" link del xdpf0
    sleep 1
    recreate_in_link
    echo "$(date +%T.%N | cut -c1-12) re-created" >> "$W/traffic.log"
    sleep 1 # the tool's re-attach, if it has one
    a2=$(arrived)
    sleep "$LOSS_AFTER"
    touch "$W/stop"
    wait "$TRAFFIC_PID"
    TRAFFIC_PID=
    sleep 1
    a3=$(arrived)
    alive=yes
    kill -0 "$TOOL_PID" 2> /dev/null || alive="no ($(tail -n 1 "$W/$leg.err"))"
    stop_tool "$leg"
    cp "$W/traffic.log" "$W/$leg.traffic.log"
    python3 - "$leg" "$(cat "$W/sent")" "$a0" "$a1" "$a2" "$a3" "$alive" "$W/$leg.json" "$LOSS_AFTER" << 'PY'
import json, sys
leg, sent, a0, a1, a2, a3, alive, toolf, after = sys.argv[1:]
sent, a0, a1, a2, a3 = map(int, (sent, a0, a1, a2, a3))
print(f"### {leg}")
print()
print(f"- generator: {sent} frames sent (at most one run's worth while the device was away);")
print(f"  arrived at xdpd0: {a1 - a0} before the delete, {a3 - a2} in the {after} s after the re-create (+1 s), {a3 - a0} in all;")
print(f"  still running when the traffic stopped: {alive}")
try:
    s = json.load(open(toolf))
except Exception:
    print("- no summary line from the tool")
    sys.exit()
if leg == 'ours':
    c, d, a = s['counters'], s['device'], s['accounting']
    drops = {k: v for k, v in c.items() if k.endswith('_drop') and v} | {k: c[k] for k in ('action_drop', 'handler_refused', 'handler_panics') if c.get(k)}
    dropped = sum(c.get(k, 0) for k in ('action_drop', 'tx_ring_full_drop', 'egress_full_drop', 'egress_port_down_drop', 'neigh_miss_drop', 'handler_panics'))
    held = c.get('kept', 0) + c.get('held', 0)
    rx, out, sent_tx = c['rx_packets'], c['tx_completed'], c['tx_packets']
    print(f"- device: deleted {d['deleted']}, losses {d['losses']}, reattaches {d['reattaches']}, reattach_failures {d['reattach_failures']}, last re-attach {d['last_reattach_ms']:.1f} ms")
    print(f"- frames in {rx} = out (put on the TX ring) {sent_tx} + dropped {dropped} + held {held}: {'exact' if rx == sent_tx + dropped + held else 'NOT EXACT'} (drops: {drops or 'none'});"
          f" of those out, {out} completed and {sent_tx - out} taken back from the TX ring at teardown")
    x, dr = s['xdp'], s['drops']
    kern = dr['rx_fill_ring_empty'] + dr['rx_ring_full'] + dr['rx_dropped']
    print(f"- on the wire side: its XDP program steered {x['steered']} = frames in {rx} + dropped by the kernel before the copy (fill ring empty {dr['rx_fill_ring_empty']}, RX ring full {dr['rx_ring_full']}, other {dr['rx_dropped']}): "
          f"{'exact' if x['steered'] == rx + kern else 'differs by ' + str(x['steered'] - rx - kern)}; passed to the stack {x['passed']}")
    print(f"- kernel ring frames reclaimed: {c.get('reclaimed')}; teardown audits {c.get('teardown_audits')}, failures {c.get('teardown_audit_failures')}; teardown_accounting_failures {d['teardown_accounting_failures']}")
    tot = sum(a[k] for k in ('free', 'cached', 'ring', 'fill', 'tx', 'application'))
    print(f"- UMEM at exit: {json.dumps({k: a[k] for k in ('free', 'cached', 'ring', 'fill', 'tx', 'application', 'total')})}: "
          f"{tot} of {a['total']} accounted, leaked {a['total'] - tot}; accounting_ok {s['accounting_ok']}")
else:
    tot = s['free'] + s['in_fill_or_rx'] + s['out_tx_or_completion']
    print(f"- its socket's statistics (the socket of the deleted device): rx_dropped {s['rx_dropped']}, of them fill ring empty {s['rx_fill_ring_empty']}")
    print(f"- its count: received {s['received']}, forwarded (sent, completed) {s['forwarded']}, {s['completed']}, dropped {s['dropped']}")
    print(f"- frames in {s['received']} = out {s['completed']} + dropped {s['dropped']} + in its TX ring {s['forwarded'] - s['completed']}: "
          f"{'exact' if s['received'] == s['completed'] + s['dropped'] + s['forwarded'] - s['completed'] else 'NOT EXACT'}")
    print(f"- UMEM at exit ({s['umem_frames']} frames): free {s['free']}, given to in's fill ring and never returned {s['in_fill_or_rx']}, "
          f"in out's TX/completion rings {s['out_tx_or_completion']}: {s['umem_frames'] - s['free']} frames not back in its hands "
          f"(its own bookkeeping; xsk-rs has no way to take frames back from a socket whose device is gone)")
    lost = s['umem_frames'] - tot
    print(f"- its bookkeeping: free + fill/RX + TX/completion = {tot} of {s['umem_frames']}: "
          + ("consistent" if lost == 0 else f"{lost} frames lost even from its own bookkeeping"))
print()
PY
}

code_counts() { # lines and `unsafe` blocks of each load balancer's own source
    local l=userspace/xdpool-examples/src/bin/lb
    echo "# user code (every line; code = not blank, not a comment; #[cfg(test)] items cut; unsafe = \`unsafe {\` blocks):"
    python3 - "ours, $l/{main,backends,checksum}.rs=$l/main.rs,$l/backends.rs,$l/checksum.rs" \
        "ours with the examples' shared main helpers (src/lib.rs)=$l/main.rs,$l/backends.rs,$l/checksum.rs,userspace/xdpool-examples/src/lib.rs" \
        "peer, tools/lb-peer/src/{main,lb}.rs=tools/lb-peer/src/main.rs,tools/lb-peer/src/lb.rs" << 'PY'
import re, sys
for arg in sys.argv[1:]:
    name, paths = arg.split('=')
    total = code = unsafe = 0
    for p in paths.split(','):
        src = re.split(r'\n#\[cfg\(test\)\]', open(p).read())[0]
        lines = src.splitlines()
        total += len(lines)
        code += sum(1 for l in lines if l.strip() and not l.strip().startswith('//'))
        unsafe += len(re.findall(r'\bunsafe\s*\{', src))
    print(f'#   {name}: {total} lines, {code} code, {unsafe} unsafe blocks')
PY
}

same_check() { # both tools on the same 640 frames of 64 flows (10 each): the backend of each flow, and
    # every checksum, as the backends' stack sees them (their addresses on xdpd0, rx
    # checksum offload off: a valid UDP datagram to a closed port counts NoPorts, a
    # bad one InCsumErrors)
    local leg cap u0 u1 sp
    for i in 11 12 13; do ip -n "$P-dst" addr add 198.18.2.$i/32 dev xdpd0 2> /dev/null; done
    udp() { ip netns exec "$P-dst" awk '/^Udp:/ {if (!h) {for (i = 1; i <= NF; i++) n[$i] = i; h = 1} else print $n["NoPorts"], $n["InCsumErrors"]}' /proc/net/snmp; }
    for leg in ours peer; do
        start_tool "$leg" 30 || { stop_tool "$leg"; echo "# same-check: $leg did not start"; return; }
        ip netns exec "$P-dst" tcpdump -i xdpd0 -U -w "$W/$leg.pcap" udp > /dev/null 2>&1 &
        cap=$!
        sleep 1
        u0=$(udp)
        # One run per flow: the live engine sends 2^22 frames of one template before it
        # moves to the next (GenConfig::chunk, not on the command line).
        for ((sp = 1024; sp < 1088; sp++)); do
            timeout 10 "$XDPOOL" gen $GEN_TO --engine live --count 10 --batch 10 \
                --size 64 --src-ports $sp --cores $GEN_CORE > /dev/null 2>&1 || echo "# same-check: the generator failed"
        done
        sleep 1
        u1=$(udp)
        bench_stop "$cap" 5 tcpdump
        stop_tool "$leg"
        echo "$u0 $u1" > "$W/$leg.udp"
    done
    python3 - "$W" << 'PY'
import struct, sys
w = sys.argv[1]
def frames(path):
    data = open(path, 'rb').read()
    off = 24
    while off + 16 <= len(data):
        n = struct.unpack_from('<I', data, off + 8)[0]
        yield data[off + 16:off + 16 + n]
        off += 16 + n
def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack(f'!{len(b) // 2}H', b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return s
res = {}
for leg in ('ours', 'peer'):
    flows, bad = {}, 0
    for f in frames(f'{w}/{leg}.pcap'):
        ip = f[14:34]
        ihl = (ip[0] & 15) * 4
        udp = f[14 + ihl:]
        ulen = struct.unpack('!H', udp[4:6])[0]
        pseudo = ip[12:20] + b'\0\x11' + udp[4:6]
        if csum(f[14:14 + ihl]) != 0xffff or csum(pseudo + udp[:ulen]) != 0xffff:
            bad += 1
        flows.setdefault(struct.unpack('!H', udp[0:2])[0], set()).add('.'.join(map(str, ip[16:20])) + ' ' + f[0:6].hex(':'))
    n0, e0, n1, e1 = map(int, open(f'{w}/{leg}.udp').read().split())
    res[leg] = flows
    per = {}
    for v in flows.values():
        for b in v: per[b] = per.get(b, 0) + 1
    print(f'- {leg}: {sum(1 for _ in frames(f"{w}/{leg}.pcap"))} frames captured at xdpd0 of 640 sent (10 per flow), {len(flows)} flows, '
          f'flows per backend {dict(sorted(per.items()))}, {bad} with a bad IPv4 or UDP checksum; '
          f'backends\' stack: NoPorts +{n1 - n0}, InCsumErrors +{e1 - e0}')
o, p = res['ours'], res['peer']
split = [k for k in o if len(o[k]) != 1] + [k for k in p if len(p[k]) != 1]
same = o == p and not split
print(f'- every flow went to the same backend under both: {"yes" if same else "NO"}'
      + ('' if same else f' (flows differing: {sorted(k for k in set(o) | set(p) if o.get(k) != p.get(k))[:10]}, split: {split[:10]})'))
PY
}

main() {
    echo "# vs-lb $(date -u '+%F %H:%M') UTC, $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# ours: $LB (release), config configs/examples/lb.toml (RULES=$RULES) + [workers] cores = [$FWD_CORE, $FWD_CORE], spin, batch $BATCH"
    [ -n "$SELF_AB" ] && echo "# A/B of the lb example against itself: the 'peer' leg below is B: $PEER, config B_RULES=$B_RULES (not the xsk-rs peer)"
    [ -z "$SELF_AB" ] && echo "# peer: $PEER (xsk-rs $(sed -n '/^name = "xsk-rs"/{n;s/version = //p}' tools/lb-peer/Cargo.lock | tr -d '"'), release), taskset core $FWD_CORE, spin, $FRAMES frames, rings $RING, batch $BATCH"
    echo "# generator: xdpool gen --engine live, 64 B, 64 flows, core $GEN_CORE, $COUNT frames or $GEN_SECS s; PAIRS=$PAIRS WARMUP=$WARMUP"
    code_counts
    "$XDPOOL" lab up --topology forward --prefix "$P" > "$W/lab.out" 2>&1 || die "lab up failed: $(tail -n 3 "$W/lab.out")"
    MAC_F0=$(ip -n "$P-fwd" -j link show xdpf0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')
    MAC_S0=$(ip -n "$P-src" -j link show xdps0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')
    # Not `--lab-topology forward`: that sends one flow whatever --src-ports says (the
    # CLI keeps GenConfig::for_forward_lab's flows = 1). The pair lab's defaults give
    # 64 flows (one per source port of the range); sent from xdps0 to xdpf0's MAC.
    GEN_TO="--netns $P-src --dev xdps0 --dst-ip 198.18.2.1 --dst-mac $MAC_F0"
    echo
    echo "## Same behaviour: 64 flows of 10 frames (source ports 1024-1087), through each"
    echo
    same_check
    echo
    ip netns exec "$P-dst" "$SINK" -i xdpd0 -d 86400 > "$W/sink.out" 2>&1 &
    SINK_PID=$!
    bench_wait_prog "$P-dst" xdpd0 50 || die "xdpsink did not attach: $(cat "$W/sink.out")"
    : > "$W/rows.tsv"
    local r
    for ((r = 1 - WARMUP; r <= PAIRS; r++)); do
        if ((r % 2)); then run_one ours $r; run_one peer $r; else run_one peer $r; run_one ours $r; fi
    done
    echo
    python3 - "$W/rows.tsv" << 'PY'
import sys, statistics as st
rows = [l.split('\t') for l in open(sys.argv[1]) if l.strip()]
by = {}
for rnd, leg, mpps, *_ in rows:
    if int(rnd) > 0:
        by.setdefault(int(rnd), {})[leg] = float(mpps)
import os
second = 'B, the lb example' if os.environ.get('SELF_AB') else 'peer, xsk-rs'
print(f'| pair | ours (Mpps) | {second} (Mpps) | ours / {second.split(",")[0]} |')
print('|---:|---:|---:|---:|')
ratios, ours, peer = [], [], []
for rnd in sorted(by):
    o, p = by[rnd].get('ours', 0), by[rnd].get('peer', 0)
    ours.append(o); peer.append(p)
    r = o / p if p else float('nan')
    if p and o:
        ratios.append(r)
    print(f'| {rnd} | {o:.3f} | {p:.3f} | {r:.2f} |')
f = lambda v, d: f'{st.median(v):.{d}f} ({min(v):.{d}f}-{max(v):.{d}f})' if v else '-'
print(f'| median (range) | {f(ours, 3)} | {f(peer, 3)} | {f(ratios, 2)} |')
print()
for leg in ('ours', 'peer'):
    sp = [list(map(int, r[5:9])) for r in rows if int(r[0]) > 0 and r[1] == leg and len(r) >= 9]
    if sp:
        m = [st.median(c) for c in zip(*sp)]
        name = 'B' if leg == 'peer' and os.environ.get('SELF_AB') else leg
        print(f'{name}: core 1 during the sends, median user {m[0]:.0f}% system {m[1]:.0f}% softirq {m[2]:.0f}% idle {m[3]:.0f}% (the whole core, other jobs included)')
PY
    if [ "$LOSS" = 1 ]; then
        echo
        echo "## Device loss: xdpf0 deleted and re-created under $LOSS_RATE frames/s"
        echo
        loss_one ours
        loss_one peer
    fi
}

bench_main_to "$OUT"
