#!/bin/bash
# Side by side on the lab, one run: xdpool rxdrop against xskref (a bare libxdp
# AF_XDP receiver, tools/xskref) with the same generator, rings (rx 2048, fill
# 4096, 8192 frames of 2048 B), cores and NAPI placement. Alternates the two
# receivers REPS times per placement and prints received / sent and Mpps (frames
# received / generator send time). Needs root, a built xdpool (make build) and
# xskref (make -C tools/xskref). Bounded: each run sends COUNT frames, each
# receiver runs DUR seconds. The lab (prefix vsx) is removed on exit.
set -u
cd "$(dirname "$0")/../.."
X=$PWD/target/release/xdpool
REF=$PWD/tools/xskref/xskref
COUNT=${COUNT:-4000000}
REPS=${REPS:-3}
DUR=${DUR:-6}
P=vsx
W=$(mktemp -d)
cleanup() { "$X" lab down --prefix $P >/dev/null 2>&1; rm -rf "$W"; }
trap cleanup EXIT
[ -x "$X" ] && [ -x "$REF" ] || { echo "build first: make build && make -C tools/xskref" >&2; exit 2; }

pin_napi() { # veth re-creates its NAPI when a program comes: pin after attach
    for c in /proc/[0-9]*/comm; do
        if grep -q "^napi/${P}b0-" "$c" 2>/dev/null; then taskset -pc "$1" "$(basename "$(dirname "$c")")" >/dev/null; fi
    done
}

run_one() { # $1 receiver, $2 mode, $3 napi (softirq|threaded)
    local out
    if [ "$1" = xskref ]; then
        ip netns exec $P-b "$REF" -i ${P}b0 -q 0 -c 1 -m "$2" -d "$DUR" > "$W/ref.out" 2>/dev/null &
    else
        cat > "$W/run.toml" <<EOT
[interface]
name = "${P}b0"
netns = "$P-b"
queues = [0]
[umem]
frames = 8192
chunk_size = 2048
[rings]
fill = 4096
completion = 2048
rx = 2048
tx = 2048
[workers]
cores = [1]
mode = "$2"
[[rule]]
proto = "udp"
dst_port = "9"
action = "drop"
[stats]
control_socket = "$W/ctl.sock"
live = false
EOT
        "$X" run -c "$W/run.toml" --duration "$DUR" --quiet --summary-json "$W/sum.json" > "$W/run.out" 2>&1 &
    fi
    local pid=$!
    sleep 1.5
    [ "$3" = threaded ] && pin_napi 1
    out=$("$X" gen --netns $P-a --dev ${P}a0 --count "$COUNT" --cores 0 2>/dev/null | tail -1)
    wait $pid
    local secs got
    secs=$(echo "$out" | sed -n 's/.* in \([0-9.]*\) s:.*/\1/p')
    if [ "$1" = xskref ]; then
        got=$(sed -n 's/.*rx_packets \([0-9]*\).*/\1/p' "$W/ref.out")
    else
        got=$(python3 -c "import json;print(json.load(open('$W/sum.json'))['packets'])")
    fi
    python3 -c "print(f'{\"$1\":7} {\"$2\":5} {\"$3\":9} received {$got:>9} of $COUNT ({$got/$COUNT*100:5.1f}%)  {$got/$secs/1e6:6.3f} Mpps')"
}

for placement in "spin softirq" "poll softirq" "poll threaded"; do
    set -- $placement
    "$X" lab down --prefix $P >/dev/null 2>&1
    "$X" lab up --prefix $P >/dev/null || exit 1
    if [ "$2" = threaded ]; then ip netns exec $P-b sh -c "echo 1 > /sys/class/net/${P}b0/threaded"; fi
    echo "# worker core 1 ($1), generator core 0, NAPI $2 $([ "$2" = threaded ] && echo 'on core 1' || echo 'on the sending core')"
    for rep in $(seq "$REPS"); do
        run_one xskref "$1" "$2"
        run_one xdpool "$1" "$2"
    done
done
