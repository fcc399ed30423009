#!/bin/bash
# Every comparison of issues 15 and 18 in one run, written to one dated file
# docs/results/<date>/compare-all-<HHMM>.md:
#   1. receivers (vs-xskref.sh): xdpool against xskref, xdpsock (XDPSOCK=) and DPDK's
#      testpmd rxonly/macswap (where installed) in the five rxdrop/l2fwd placements,
#      WARMUP round first, REPS pairs alternating;
#   2. generators (vs-gen-peers.sh): xdpool gen against xdp-trafficgen
#      (XDP_TRAFFICGEN=), receiver refusing and XDP_DROP receiver on core 1;
#   3. forwarding (vs-fwd-peers.sh): xdpool against xsk_fwd (XSK_FWD=) and testpmd io
#      and mac, 64 and 1500 B;
#   4. guest (vs-guest.sh): zero-copy on the nested guest's igb and virtio-net,
#      xdpool against xdpsock and xsk_fwd (GUEST_PEERS=dir holding both), pktgen in
#      the guest; GUEST_PAIRS (3), GUEST_FRAMES (30000). Under TCG: work per frame.
# Each part is skipped, with a line saying why, when what it compares is missing.
# The per-part summaries (medians and ranges of per-pair ratios, tools/bench/
# summarize.py) and the raw lines all go into the file.
#
# Run as root on a quiet machine (nothing else running: on 2 vCPUs another build
# moves every figure by 20% or more):
#   make build && make -C tools/xskref && make -C tools/xdpsink
#   XDPSOCK=/work/peers/xdpsock XSK_FWD=/work/peers/xsk_fwd \
#   XDP_TRAFFICGEN=/work/peers/xdp-trafficgen bash tools/bench/compare-all.sh
# Knobs: REPS (5), WARMUP (1), TESTPMD (default: dpdk-testpmd on PATH; "" for none),
#   PARTS="receivers generators forward guest", GEN_SECS (receivers' window, 2),
#   WINDOW (generators' and forwarding window, 4), XDPOOL_FWD=path and
#   XDPOOL_CONFIG=path for the forwarding leg (default target/release/xdpool, config
#   written per SPEC-forward.md), GEN_XDPOOL=path (the xdpool whose gen sends into
#   the forwarding topology; with fwdlab's `gen --dst-ip` it addresses 198.18.2.1),
#   FWD_GEN=xdp-trafficgen (forwarding generator; default xdpool gen), SIZES
#   (forwarding, "64 1500"), OUT=file.
# About 5 min per REPS=1 round of everything; REPS=5 WARMUP=1: about 30 min.
set -u
cd "$(dirname "$0")/../.."
source tools/bench/lib.sh
REPS=${REPS:-5}
WARMUP=${WARMUP:-1}
TESTPMD=${TESTPMD-$(command -v dpdk-testpmd || true)}
PARTS=${PARTS:-receivers generators forward guest}
OUT=${OUT:-$(bench_result_file compare-all)}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export REPS WARMUP TESTPMD

part_receivers() {
    echo "## Receivers: rxdrop and l2fwd (vs-xskref.sh)"
    echo
    echo "xdpsock: ${XDPSOCK:-not given (XDPSOCK=)}; testpmd: ${TESTPMD:-not installed}; rates: frames received (drop) or back at the sender (l2fwd) per second of the generator's window"
    echo
    : > "$W/rx.tsv"
    # shellcheck disable=SC2097,SC2098
    ROWS=$W/rx.tsv GEN_SECS=${GEN_SECS:-2} XDPSOCK=${XDPSOCK:-} XDPSOCK_MODES=${XDPSOCK_MODES:-} \
        bash tools/bench/vs-xskref.sh 2>&1 | sed 's/^/    /'
    echo
    python3 tools/bench/summarize.py xdpool "$W/rx.tsv"
}

part_generators() {
    echo "## Generators (vs-gen-peers.sh)"
    echo
    if [ -z "${XDP_TRAFFICGEN:-}" ]; then
        echo "skipped: no XDP_TRAFFICGEN= given"
        return
    fi
    OUT=$W/gen.md bash tools/bench/vs-gen-peers.sh >/dev/null 2>&1
    sed -n '/^## Summary/,$p' "$W/gen.md"
    echo
    sed -n '1,/^## Summary/p' "$W/gen.md" | grep -v '^## Summary' | sed 's/^/    /'
}

part_forward() {
    echo "## Forwarding (vs-fwd-peers.sh)"
    echo
    # The generator here is xdpool gen unless FWD_GEN=xdp-trafficgen (its IPv6 frames
    # need an xdpool rule that takes IPv6 too).
    local tg=
    [ "${FWD_GEN:-xdpool}" = xdp-trafficgen ] && tg=${XDP_TRAFFICGEN:-}
    OUT=$W/fwd.md XDPOOL=${XDPOOL_FWD:-$PWD/target/release/xdpool} XSK_FWD=${XSK_FWD:-} XDP_TRAFFICGEN=$tg \
        bash tools/bench/vs-fwd-peers.sh >/dev/null 2>&1
    sed -n '/^## Summary/,$p' "$W/fwd.md"
    echo
    sed -n '1,/^## Summary/p' "$W/fwd.md" | grep -v '^## Summary' | sed 's/^/    /'
}

part_guest() {
    echo "## Zero-copy in the nested guest (vs-guest.sh)"
    echo
    if [ -z "${GUEST_PEERS:-}" ]; then
        echo "skipped: no GUEST_PEERS= given (a directory with xdpsock and xsk_fwd)"
        return
    fi
    PEERS=$GUEST_PEERS PAIRS=${GUEST_PAIRS:-3} FRAMES=${GUEST_FRAMES:-30000} NO_BUILD=1 OUT=$W/vm \
        bash tools/bench/vs-guest.sh 2>"$W/vm.err" | sed '1d' || { echo "vs-guest.sh failed:"; tail -5 "$W/vm.err" | sed 's/^/    /'; }
}

main() {
    echo "# compare-all $(date -u '+%F %H:%M') UTC: $(nproc) CPUs, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), REPS=$REPS WARMUP=$WARMUP"
    echo
    echo "xdpsock: ${XDPSOCK:-none}; xsk_fwd: ${XSK_FWD:-none}; xdp-trafficgen: ${XDP_TRAFFICGEN:-none}; testpmd: ${TESTPMD:-none}; xdpool: $PWD/target/release/xdpool ($(git rev-parse --short HEAD 2>/dev/null))"
    echo
    local p
    for p in $PARTS; do
        case $p in
        receivers) part_receivers ;;
        generators) part_generators ;;
        forward) part_forward ;;
        guest) part_guest ;;
        *) echo "unknown part $p (receivers generators forward guest)" ;;
        esac
        echo
    done
}

mkdir -p "$(dirname "$OUT")"
main > "$OUT" 2>&1
echo "written: $OUT"
