#!/usr/bin/env bash
# Driver unbind/rebind under traffic against a running xdpool, on real hardware.
#
#   tests/unbind/unbind.sh --pci 0000:xx:yy.z --driver NAME --iface IFNAME \
#       --socket /run/xdpool/xdpool.sock [--pid XDPOOL_PID] [--cycles N] [--target-ms 1000] \
#       [--expect-kind deleted] [--up-after-attach]
#
# xdpool must already run on IFNAME (`xdpool run --config ...`), with traffic
# arriving from a generator the user runs. Each cycle unbinds the PCI function from
# its driver, checks that xdpool is alive and saw the loss with exact accounting,
# binds it back, and checks that xdpool re-attached and receives again within the
# target. --expect-kind: each loss must be counted as that kind (.device.KIND).
# --up-after-attach: the interface is set up only once xdpool has put its program on
# the returned (still down) device (.device.early_attaches, at most 3 s), as a
# system that brings links up after xdpool would. Without --pci it prints why it
# skipped and exits 0.
set -euo pipefail

PCI="" DRIVER="" IFACE="" xdpool_pid="" SOCKET="/run/xdpool/xdpool.sock" CYCLES=20 TARGET_MS=1000 KIND="" UP_AFTER_ATTACH=0
XDPOOL="${XDPOOL:-xdpool}"
while [ $# -gt 0 ]; do
    case "$1" in
        --pci) PCI="$2"; shift 2 ;;
        --driver) DRIVER="$2"; shift 2 ;;
        --iface) IFACE="$2"; shift 2 ;;
        --socket) SOCKET="$2"; shift 2 ;;
        --pid) xdpool_pid="$2"; shift 2 ;;
        --cycles) CYCLES="$2"; shift 2 ;;
        --target-ms) TARGET_MS="$2"; shift 2 ;;
        --expect-kind) KIND="$2"; shift 2 ;;
        --up-after-attach) UP_AFTER_ATTACH=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if [ -z "$PCI" ]; then
    echo "skipped: no --pci given (this test needs a real NIC: --pci 0000:xx:yy.z --driver NAME --iface IFNAME)"
    exit 0
fi
[ -n "$DRIVER" ] && [ -n "$IFACE" ] || { echo "--driver and --iface are required with --pci" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 3; }
DRV=/sys/bus/pci/drivers/$DRIVER
[ -e "$DRV/$PCI" ] || { echo "$PCI is not bound to $DRIVER (ls $DRV)" >&2; exit 4; }
command -v jq >/dev/null || { echo "needs jq (apt-get install jq)" >&2; exit 2; }

stats() { "$XDPOOL" stats --socket "$SOCKET" --json; }
field() { stats | jq -r "$1"; }
# A number by its JSON path (.device.losses) with `xdpool stats --get`: one process
# and no jq, so the polls below stay short where every process start is slow (a TCG
# guest, tests/vm).
num() { "$XDPOOL" stats --socket "$SOCKET" --get "$1" 2>/dev/null || echo -1; }
now_ms() { date +%s%3N; }
# UNBIND_TRACE=1: stamps of each step in kernel time (to match dmesg).
mark() { [ "${UNBIND_TRACE:-0}" != 1 ] || echo "trace [$(cut -d' ' -f1 /proc/uptime)] $*"; }

fail() { echo "FAIL cycle $1: $2" >&2; exit 1; }
check_rest() {  # accounting exact and nothing rejected
    local s; s=$(stats)
    jq -e '.accounting | (.free+.cached+.ring+.fill+.tx+.application) == .total and .free == .free_listed and .ring == .ring_listed and (.free_list_bad // 0) == 0' <<<"$s" >/dev/null \
        || fail "$1" "accounting: $(jq -c .accounting <<<"$s")"
    jq -e '.total.rx_rejected == 0 and .total.pool.double_release == 0 and .total.held_corrupt == 0 and .device.teardown_accounting_failures == 0' <<<"$s" >/dev/null \
        || fail "$1" "rejected or double-released frames: $(jq -c '.total' <<<"$s")"
}

# Whatever ends this script (a failed check, set -e, Ctrl-C), the device gets its
# driver back.
trap '[ -e "$DRV/$PCI" ] || echo "$PCI" > "$DRV/bind" 2>/dev/null || true' EXIT

times=()
for i in $(seq 1 "$CYCLES"); do
    losses=$(num .device.losses); reattaches=$(num .device.reattaches); teardowns=$(num .device.teardowns_checked)
    early=$(num .device.early_attaches); kind0=0; [ -z "$KIND" ] || kind0=$(num ".device.$KIND")
    mark "cycle $i: unbind"
    echo "$PCI" > "$DRV/unbind"
    for _ in $(seq 100); do [ "$(num .device.losses)" -gt "$losses" ] && break; sleep 0.02; done
    [ "$(num .device.losses)" -gt "$losses" ] || fail "$i" "xdpool did not see the unbind"
    # The teardown is done once it has checked the accounting at rest.
    for _ in $(seq 250); do [ "$(num .device.teardowns_checked)" -gt "$teardowns" ] && break; sleep 0.02; done
    [ "$(num .device.teardowns_checked)" -gt "$teardowns" ] || fail "$i" "no teardown after the unbind"
    [ -z "$xdpool_pid" ] || kill -0 "$xdpool_pid" || fail "$i" "xdpool died"
    check_rest "$i"
    # Device away: every frame the driver and the rings held is back with xdpool.
    jq -e '.accounting.fill == 0 and .accounting.tx == 0' <<<"$(stats)" >/dev/null \
        || fail "$i" "frames still in the kernel's rings after the unbind: $(stats | jq -c .accounting)"
    rx=$(num .total.rx_packets)
    mark "cycle $i: bind"
    echo "$PCI" > "$DRV/bind"
    # The interface name may take a moment to return (udev); bring it up.
    for _ in $(seq 200); do ip link show "$IFACE" >/dev/null 2>&1 && break; sleep 0.01; done
    mark "cycle $i: $IFACE is back"
    early_note=""
    if [ "$UP_AFTER_ATTACH" = 1 ]; then
        te=$(now_ms)
        for _ in $(seq 150); do [ "$(num .device.early_attaches)" -gt "$early" ] && break; sleep 0.02; done
        if [ "$(num .device.early_attaches)" -gt "$early" ]; then early_note=", program on the down device $(( $(now_ms) - te )) ms after it was back"
        else early_note=", program NOT on the down device after $(( $(now_ms) - te )) ms"; fi
        mark "cycle $i: early attach${early_note}"
    fi
    ip link set "$IFACE" up
    t0=$(now_ms)
    mark "cycle $i: set up"
    carrier_seen=""
    while [ "$(num .total.rx_packets)" -le "$rx" ] && [ $(( $(now_ms) - t0 )) -lt $(( TARGET_MS * 3 + 5000 )) ]; do
        if [ "${UNBIND_TRACE:-0}" = 1 ] && [ -z "$carrier_seen" ] && read -r c < "/sys/class/net/$IFACE/carrier" 2>/dev/null && [ "$c" = 1 ]; then
            carrier_seen=1; mark "cycle $i: carrier"
        fi
        sleep 0.01
    done
    took=$(( $(now_ms) - t0 ))
    mark "cycle $i: traffic"
    [ "$(num .device.reattaches)" -gt "$reattaches" ] || fail "$i" "no re-attach"
    [ "$(num .total.rx_packets)" -gt "$rx" ] || fail "$i" "no traffic after the rebind (is the generator running?)"
    [ "$took" -le "$TARGET_MS" ] || fail "$i" "traffic back after ${took} ms, target ${TARGET_MS} ms"
    if [ -n "$KIND" ] && [ "$(num ".device.$KIND")" -le "$kind0" ]; then
        fail "$i" "the loss was not counted as $KIND: $(stats | jq -c '.device | {losses, deleted, moved_away, down, socket_error}')"
    fi
    check_rest "$i"
    times+=("$took")
    echo "cycle $i: ok, traffic back ${took} ms after up, xdpool re-attached in $(num .device.last_reattach_ms | cut -d. -f1) ms${early_note}"
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
n=${#times[@]}
p() { echo "$sorted" | sed -n "$(( ($1 * n + 99) / 100 ))p"; }
# Computed from the last stats, not a literal: frames the owner map and the lists
# disagree about (each check_rest above already failed the run on any).
lost=$(stats | jq '.accounting | ((.free - .free_listed) | fabs) + ((.ring - .ring_listed) | fabs) + (.free_list_bad // 0) + (.total - .free - .cached - .ring - .fill - .tx - .application | fabs)')
echo "unbind $PCI ($DRIVER): $n cycles, frames lost $lost, up->traffic p50 $(p 50) ms p99 $(p 99) ms max $(p 100) ms"
