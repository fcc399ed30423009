#!/bin/bash
# Zero-copy side by side in the nested guest (issue 27): xdpool against xdpsock
# (rxdrop, l2fwd) and xsk_fwd (forward igb -> virtio-net), all in zero-copy on the
# guest's real PCI NIC drivers, pktgen in the guest as the one generator. The guest
# part is tests/vm/guest/peers.sh (read its header for what each trial does).
#
#   PEERS=/work/peers bash tools/bench/vs-guest.sh
#
#   PEERS=dir        where xdpsock and xsk_fwd are (built outside the tree as
#                    tools/bench/README.md says; the guest runs these binaries, with
#                    the host's libxdp, libbpf and libxdp's BPF objects copied in)
#   PAIRS=3          pairs per placement, alternating who goes first
#   FRAMES=60000     frames pktgen sends per trial (flat out, 64 B, 64 flows)
#   PLACEMENTS=rxdrop-spin,l2fwd-spin,rxdrop-poll,l2fwd-poll,fwd-spin
#   OUT=dir          where the guest's results go (default target/vm-peers)
#   NO_BUILD=1       use target/release/xdpool as it is
#   XDPOOL_B=path    an A/B instead: a second xdpool build (a copy of another
#                    target/release/xdpool) is the peer of every placement, run as
#                    xdpool is; the ratios are this tree's build / XDPOOL_B
#   GUEST_ARGS=...   more guest parameters (xdpvm.peer_debug=1: NIC counters and
#                    interrupts around each trial, and the tool's threads' CPU
#                    and ticks over it, on the guest's console;
#                    xdpvm.peer_fwd_relink=0: xsk_fwd without the igb's down/up
#                    that lets it receive, see tests/vm/guest/peers.sh)
#
# Needs root (QEMU, the guest kernel: tests/vm/setup.sh installs them, as make
# test-vm does). Under TCG every guest instruction is emulated: a rate is work per
# frame, kernel and user space together, not a hardware figure. Prints one markdown
# report: per placement and pair each tool's received rate and CPU 1's busy time per
# frame, the ratios with their medians and ranges, and which side set the rate.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS=${PEERS:-/work/peers}
PAIRS=${PAIRS:-3}
FRAMES=${FRAMES:-60000}
PLACEMENTS=${PLACEMENTS:-rxdrop-spin,l2fwd-spin,rxdrop-poll,l2fwd-poll,fwd-spin}
OUT=${OUT:-$PWD/target/vm-peers}
AB=""
if [ -n "${XDPOOL_B:-}" ]; then
    [ -x "$XDPOOL_B" ] || { echo "vs-guest: XDPOOL_B=$XDPOOL_B is not an executable" >&2; exit 2; }
    AB="xdpvm.peer_ab=1"
fi
[ -n "$AB" ] || for p in xdpsock xsk_fwd; do
    [ -x "$PEERS/$p" ] || echo "vs-guest: $PEERS/$p missing: its placements will report it (build it: tools/bench/README.md)" >&2
done
if [ -z "${NO_BUILD:-}" ]; then
    XDPOOL_CLANG=${XDPOOL_CLANG:-clang-19} cargo build --release -p xdpool-cli >&2
fi
# One trial is about 10-20 s under TCG; the guest boots in about a minute.
n_place=$(tr ',' '\n' <<<"$PLACEMENTS" | grep -c .)
timeout=$(( 300 + n_place * PAIRS * 2 * 60 ))
rc=0
XDPOOL_VM_PEERS=$PEERS XDPOOL_VM_XDPOOL_B=${XDPOOL_B:-} \
XDPOOL_VM_APPEND="xdpvm.peer_pairs=$PAIRS xdpvm.peer_frames=$FRAMES xdpvm.peer_placements=$PLACEMENTS $AB ${GUEST_ARGS:-}" \
    bash tests/vm/run.sh --checks vs_peers --out "$OUT" --timeout "$timeout" >&2 || rc=$?
[ -s "$OUT/results.jsonl" ] || { echo "vs-guest: no results (run.sh exit $rc; console: $OUT/console.log)" >&2; exit 1; }
python3 - "$OUT/results.jsonl" "$PAIRS" "$FRAMES" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"vs_peers"' in l]
boot = next((json.loads(l) for l in open(sys.argv[1]) if '"boot"' in l), {})
ab = any(r.get("tool") == "xdpool-b" for r in rows)
print("# Zero-copy in the guest: " + ("an A/B of two xdpool builds (xdpool: this tree's; xdpool-b: XDPOOL_B)\n" if ab else "xdpool against xdpsock and xsk_fwd\n"))
print("Columns: igb received = the igb's own rx_packets over the trial (the frames that reached the guest; "
      "QEMU drops what finds no RX descriptor without a counter the guest sees); counted = the tool's own count; "
      "counted over igb's = frames the tool counted beyond what the igb received (the kernel delivered a frame twice); "
      "refused = RX descriptors xdpool refused (a frame still on its TX ring, delivered again), counted rx_rejected; "
      "ring drops = the tool's named drops (kernel ring counters); CPU 1 system ticks = /proc/stat's system "
      "jiffies of CPU 1 over the generator's run (system calls; softirq apart); TX sendto per 1000 frames = "
      "xdpool's tx_wakeups (" + ("xdpool-b's likewise" if ab else "the peers do not count theirs") + ").\n")
print(f"Guest kernel {boot.get('kernel', '?')}, {boot.get('cpus', '?')} vCPUs under TCG; "
      f"pktgen on CPU 0 sends {sys.argv[3]} frames of 64 B flat out per trial; each tool on "
      f"igb queue 0 in zero-copy, pinned to CPU 1 with the NICs' interrupts. {sys.argv[2]} pairs "
      "per placement, alternating who goes first. Under TCG every instruction is emulated: "
      "these figures count work per frame, kernel and user space together, not hardware rates.\n")
bad = [r for r in rows if not r.get("ok")]
for r in bad:
    print(f"- FAILED trial: {r.get('placement')} {r.get('tool')} pair {r.get('pair')}: {r.get('why')}")
if bad:
    print()
def med(xs):
    return statistics.median(xs) if xs else float('nan')
def per_frame(r):  # CPU 1 busy jiffies (10 ms) per 1000 frames received
    c = r["cpu1"]; busy = c["user"] + c["system"] + c["softirq"] + c["irq"]
    return 1000.0 * busy / r["received"] if r["received"] else float('nan')
def kicks(r):  # xdpool's TX wake-ups (its tx_wakeups counter) per 1000 frames; peers: not counted
    w = r.get("wakeups")
    if not isinstance(w, dict) or not r["received"]:
        return "-"
    return f"{1000.0 * w.get('tx', 0) / r['received']:.0f}"
placements = []
for r in rows:
    if r.get("placement") not in placements:
        placements.append(r.get("placement"))
for p in placements:
    pr = [r for r in rows if r.get("placement") == p and r.get("ok")]
    tools = sorted({r["tool"] for r in pr}, key=lambda t: t != "xdpool")
    print(f"## {p}\n")
    print("| pair | tool | sent | igb received | counted | counted over igb's | refused | back at source | ring drops | rx pps | CPU 1 busy | CPU 1 ms per 1000 frames | CPU 1 system ticks | TX sendto per 1000 frames | CPU 0 busy |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in sorted(pr, key=lambda r: (r["pair"], r["tool"] != "xdpool")):
        over = max(0, r["received"] - r["nic_rx"])
        print(f"| {r['pair']} | {r['tool']} | {r['sent']} | {r['nic_rx']} | {r['received']} | {over or '-'} | {r.get('rx_refused', 0) or '-'} | "
              f"{r['back_at_source'] if not p.startswith('rxdrop') else '-'} | {json.dumps(r['ring_drops']) if r['ring_drops'] else '-'} | {r['rx_pps']} | "
              f"{r['cpu1']['busy_pct']}% | {10 * per_frame(r):.1f} | {r['cpu1']['system']} | {kicks(r)} | {r['cpu0']['busy_pct']}% |")
    if len(tools) == 2:
        a, b = tools
        ratios, work, counts = [], [], []
        for pair in sorted({r["pair"] for r in pr}):
            ra = [r for r in pr if r["pair"] == pair and r["tool"] == a]
            rb = [r for r in pr if r["pair"] == pair and r["tool"] == b]
            if ra and rb and rb[0]["rx_pps"] > 0:
                ratios.append(ra[0]["rx_pps"] / rb[0]["rx_pps"])
                counts.append(ra[0]["received"] / rb[0]["received"] if rb[0]["received"] else float('nan'))
                work.append(per_frame(ra[0]) / per_frame(rb[0]) if per_frame(rb[0]) > 0 else float('nan'))
        def kind(r):
            lossy = r["sent"] and (r["sent"] - r["received"]) > 0.01 * r["sent"]
            if not lossy:
                return "generator"
            return "busy" if r["cpu1"]["busy_pct"] >= 95 else "waited"
        kinds = {k: [f"{r['tool']} {r['pair']}" for r in pr if kind(r) == k] for k in ("busy", "waited", "generator")}
        print()
        if ratios:
            print(f"- rx pps {a} / {b}: median **{med(ratios):.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}), {len(ratios)} pairs")
            print(f"- frames received of the same count sent {a} / {b}: median {med(counts):.2f}x ({min(counts):.2f}-{max(counts):.2f}) "
                  "(pktgen's own speed differs between trials: it shares the host's cores with the receiver's vCPU)")
            print(f"- CPU 1 time per frame {a} / {b}: median {med(work):.2f}x ({min(work):.2f}-{max(work):.2f}) (lower is less work)")
        print(f"- what set the rate, per trial: receiver lost over 1% with CPU 1 busy (>= 95%): {', '.join(kinds['busy']) or 'none'}; "
              f"lost over 1% with CPU 1 partly idle (the receiver waited: a nap, a missing kick): {', '.join(kinds['waited']) or 'none'}; "
              f"lost at most 1% (pktgen set the rate, the rate ratio says nothing; read CPU 1's time per frame where the receiver sleeps when idle): "
              f"{', '.join(kinds['generator']) or 'none'}")
    print()
PY
