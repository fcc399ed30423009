#!/usr/bin/env bash
# `make test-vm`: xdpool on real PCI NIC drivers (igb, virtio-net; e1000e as the
# traffic source) inside a nested QEMU guest under TCG.
#
#   tests/vm/run.sh [--checks a,b,...] [--cycles N] [--timeout S] [--out DIR]
#
# Installs what it needs (tests/vm/setup.sh), builds the initramfs around the host's
# xdpool (XDPOOL_VM_BIN, else target/release/xdpool), boots the guest with its NICs
# only on isolated QEMU hubs (no user, tap or bridge backend), and reads the checks'
# results from its second serial port. Fails on a failed or missing check, a guest
# that did not finish, and WARN / BUG / oops / "stalled pool shutdown" in its log.
# XDPOOL_SKIP_VM=1 skips it (developers only: CI=true ignores it).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CHECKS=all CYCLES=${XDPOOL_VM_CYCLES:-3} TIMEOUT=${XDPOOL_VM_TIMEOUT:-1500} OUT=${XDPOOL_VM_OUT:-$ROOT/target/vm}
EXTRA=${XDPOOL_VM_APPEND:-}
while [ $# -gt 0 ]; do
    case "$1" in
        --checks) CHECKS=$2; shift 2 ;;
        --cycles) CYCLES=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "test-vm: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if [ -n "${XDPOOL_SKIP_VM:-}" ]; then
    if [ "${CI:-}" = true ]; then
        echo "test-vm: XDPOOL_SKIP_VM is set but CI=true: running anyway (CI never skips)"
    else
        echo "test-vm: skipped (XDPOOL_SKIP_VM is set)"; exit 0
    fi
fi
[ "$(id -u)" = 0 ] || { echo "test-vm: needs root (it installs QEMU and the guest kernel)" >&2; exit 3; }

T0=$(date +%s.%N)
# setup.sh's lines go to stderr as they come and its KERNEL_DIR= line is kept. Written
# through the inherited fd 2, never by opening /dev/stderr: that reopens the file
# `make test > log 2>&1` writes to, truncating it (and every stage before this one).
KDIR=$(bash "$HERE/setup.sh" | while IFS= read -r line || [ -n "$line" ]; do
    printf '%s\n' "$line" >&2
    if [[ $line == KERNEL_DIR=* ]]; then printf '%s\n' "${line#KERNEL_DIR=}"; fi
done)
[ -n "$KDIR" ] || { echo "test-vm: setup gave no kernel" >&2; exit 1; }
VMLINUZ=$(ls "$KDIR"/usr/lib/modules/*/vmlinuz | head -1)
# `make test-vm` passes the binary test-unit built (profile checked), so a run of
# `make test` builds one profile, not a release build as well.
XDPOOL_BIN=${XDPOOL_VM_BIN:-$ROOT/target/release/xdpool}
if [ -n "${XDPOOL_VM_BIN:-}" ] && [ ! -x "$XDPOOL_BIN" ]; then
    echo "test-vm: XDPOOL_VM_BIN=$XDPOOL_BIN is not an executable: build it first (make test-vm does)" >&2; exit 1
fi
if [ ! -x "$XDPOOL_BIN" ]; then
    (cd "$ROOT" && XDPOOL_CLANG=${XDPOOL_CLANG:-clang-19} cargo build --release -p xdpool-cli)
fi
mkdir -p "$OUT"
bash "$HERE/initramfs.sh" "$KDIR" "$XDPOOL_BIN" "$OUT/initramfs.cpio"
T_SETUP=$(date +%s.%N)

CONSOLE=$OUT/console.log RESULTS=$OUT/results.log
rm -f "$CONSOLE" "$RESULTS"
MAC_A=02:78:64:70:00:0a MAC_B=02:78:64:70:00:0b MAC_MON=02:78:64:70:00:0d MAC_SINK=02:78:64:70:00:0e
# Every NIC on an isolated QEMU hub and nothing else: no -netdev user / tap / bridge,
# -nic none. Hub 0: the source and the two NICs under test. Hub 1: the monitor port (a
# second virtio-net, for mirror_zc) and the e1000e that receives what it sends (a
# hub repeats every frame to all its other ports: on hub 0 the mirrored copies,
# byte for byte the forwarded frames, would reach the source as well).
# Two NUMA nodes, one CPU (its own socket: a cache shared across nodes is a boot
# WARN) and 1 GiB each: CPU 0 on node 0, CPU 1 on node 1 (Linux numbers nodes in
# the order it meets them, so the boot CPU's node is always 0). The igb sits behind
# a PCIe expander bridge on node 1 (pxb-pcie numa_node=1, a root port behind it):
# its numa_node in sysfs is 1. The other NICs are on the root bus (no node).
QEMU=(qemu-system-x86_64 -accel tcg,thread=multi -M q35 -cpu max -smp 2,sockets=2,cores=1,threads=1 -m 2048
    -object memory-backend-ram,id=mem0,size=1G -object memory-backend-ram,id=mem1,size=1G
    -numa node,nodeid=0,cpus=0,memdev=mem0 -numa node,nodeid=1,cpus=1,memdev=mem1
    -device pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0
    -device pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1
    -kernel "$VMLINUZ" -initrd "$OUT/initramfs.cpio"
    -append "console=ttyS0 panic=-1 loglevel=5 xdpvm.checks=$CHECKS xdpvm.cycles=$CYCLES $EXTRA"
    -display none -monitor none -no-reboot -nic none
    -serial "file:$CONSOLE" -serial "file:$RESULTS"
    -netdev hubport,id=hp0,hubid=0 -device e1000e,netdev=hp0,mac=$MAC_A,bus=pcie.0
    -netdev hubport,id=hp1,hubid=0 -device igb,netdev=hp1,mac=$MAC_B,bus=rp1
    -netdev hubport,id=hp2,hubid=0 -device virtio-net-pci,netdev=hp2,mac=$MAC_B,bus=pcie.0,disable-legacy=on,iommu_platform=on
    -netdev hubport,id=hp3,hubid=1 -device virtio-net-pci,netdev=hp3,mac=$MAC_MON,bus=pcie.0,disable-legacy=on,iommu_platform=on
    -netdev hubport,id=hp4,hubid=1 -device e1000e,netdev=hp4,mac=$MAC_SINK,bus=pcie.0)
echo "test-vm: ${QEMU[*]}" > "$OUT/qemu.cmd"

qpid=""
cleanup() { [ -z "$qpid" ] || kill -KILL "$qpid" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
echo "test-vm: booting the guest (TCG, timeout ${TIMEOUT}s; console in $CONSOLE)"
timeout -k 10 "$TIMEOUT" "${QEMU[@]}" &
qpid=$!
rc=0; wait "$qpid" || rc=$?
qpid=""
T_END=$(date +%s.%N)
[ "$rc" = 0 ] || echo "test-vm: QEMU exited $rc$( [ "$rc" = 124 ] && echo " (timed out after ${TIMEOUT}s)")"

# Results.
fail=0
grep '^XDPVM {' "$RESULTS" 2>/dev/null | sed 's/^XDPVM //' > "$OUT/results.jsonl" || true
if ! grep -q '^XDPVM-END' "$RESULTS" 2>/dev/null; then
    echo "test-vm: FAIL: the guest did not finish its checks (see $CONSOLE)"; tail -30 "$CONSOLE"; fail=1
fi
while read -r line; do
    if jq -e 'has("check")' <<<"$line" >/dev/null; then
        if jq -e '.ok == true' <<<"$line" >/dev/null; then
            echo "test-vm: ok   $(jq -r '.check' <<<"$line") ($(jq -r '.secs' <<<"$line") s) $(jq -c 'del(.check, .ok, .secs)' <<<"$line")"
        else
            echo "test-vm: FAIL $(jq -r '.check' <<<"$line"): $(jq -c 'del(.check, .ok)' <<<"$line")"; fail=1
        fi
    fi
done < "$OUT/results.jsonl"
if [ "$CHECKS" = all ]; then
    for c in setup zc_igb copy_igb zc_copy_ratio sweep_pktgen big_igb busy_igb zc_virtio copy_virtio numa_waive mirror_zc doctor_igb doctor_virtio rss_igb relink_floor unbind_zc_igb unbind_copy_igb unbind_zc_virtio unbind_copy_virtio dmesg; do
        jq -se --arg c "$c" 'any(.[]; .check == $c)' "$OUT/results.jsonl" >/dev/null 2>&1 \
            || { echo "test-vm: FAIL $c: no result"; fail=1; }
    done
fi
# The kernel log as the console printed it, whatever the guest itself concluded.
# (lines the checks print themselves start with xdpvm: / XDPVM: xdpool's own WARN log
# lines are expected there, e.g. "device lost")
bad=$(grep -vE '^(xdpvm|XDPVM)' "$CONSOLE" | grep -E 'WARNING:|\bWARN\b|BUG[: ]|Oops|general protection|Call Trace|stalled pool shutdown|Kernel panic' || true)
if [ -n "$bad" ]; then echo "test-vm: FAIL: the guest's console has:"; echo "$bad" | head -20; fail=1; fi
boot=$(jq -sr 'map(select(.boot)) | .[0].uptime_s // "?"' "$OUT/results.jsonl" 2>/dev/null)
n_ok=$(jq -s 'map(select(has("check") and .ok)) | length' "$OUT/results.jsonl" 2>/dev/null || echo 0)
n_bad=$(jq -s 'map(select(has("check") and (.ok | not))) | length' "$OUT/results.jsonl" 2>/dev/null || echo 0)
printf 'test-vm: setup %.0f s, guest %.0f s (kernel up at %s s), results in %s\n' \
    "$(awk -v a="$T0" -v b="$T_SETUP" 'BEGIN{print b-a}')" "$(awk -v a="$T_SETUP" -v b="$T_END" 'BEGIN{print b-a}')" "$boot" "$OUT/results.jsonl"
[ "$fail" = 0 ] || n_bad=$(( n_bad > 0 ? n_bad : 1 ))
echo "test-vm: $n_ok passed, $n_bad failed"
exit "$fail"
