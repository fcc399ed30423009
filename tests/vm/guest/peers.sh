# Zero-copy side by side in the guest (issue 27): xdpool against xdpsock (rxdrop,
# l2fwd) and xsk_fwd (forward igb -> virtio-net), built outside the tree and put in
# the initramfs by tools/bench/vs-guest.sh (XDPOOL_VM_PEERS). Sourced by checks.sh
# when asked for (--checks vs_peers); never in the default run.
#
# Every trial: the tool alone on the igb (eth0, queue 0, zero-copy, native XDP),
# pinned to CPU 1 (node 1's, the igb's), the NICs' interrupts on CPU 1 too, so that
# CPU 1 does all of the receiver's work, kernel and user space; pktgen in namespace
# `src` on CPU 0 sends FRAMES 64-byte frames (64 flows to UDP port 9) flat out.
# Recorded per trial: what pktgen sent and in how long, what the tool counted, what
# came back to the source (l2fwd, forward), what the NIC and the rings dropped,
# and CPU 1's and CPU 0's time split (/proc/stat jiffies) over the generator's run.
#
# Under TCG every guest instruction is emulated, so a rate here counts work per
# frame, kernel and user space together: a zero-copy comparison, the only one this
# host allows, and not a hardware figure. A ratio of rates means something only where
# the receiver is the bottleneck (frames lost at its rings while CPU 1 is busy);
# where every frame arrives, the generator set the rate, and CPU 1's busy time per
# frame received is the figure (poll modes, where an idle receiver sleeps).
#
# Placements (xdpvm.peer_placements, comma-separated):
#   rxdrop-spin, l2fwd-spin: xdpool mode "spin" / xdpsock without -p
#   rxdrop-poll, l2fwd-poll: xdpool mode "poll" / xdpsock -p
#   fwd-spin: xdpool forward in -> out (igb -> virtio-net, mac = "swap") / xsk_fwd
#             (which swaps MACs and pairs its two ports)
# Pairs (xdpvm.peer_pairs) alternate who goes first; xdpvm.peer_debug=1 prints the
# igb's link, non-zero counters and interrupts before and after each trial's traffic,
# and each thread of the tool with its CPU and its user and system ticks over the run.
# xdpvm.peer_ab=1 (tools/bench/vs-guest.sh's XDPOOL_B): the peer of every placement
# is a second xdpool build, /peers/xdpool-b, run exactly as xdpool is (an A/B of two
# builds, alternating as against a peer).
# xsk_fwd: the igb is taken down and up once it runs (xdpvm.peer_fwd_relink=0: not;
# why at the xsk_fwd case below). xdpsock -p: 64 frames more after SIGINT let it exit
# (why where it is stopped).
# One JSON line per trial:
#   {"check": "vs_peers", "placement", "tool", "pair", ...}

PEER_DIR=/peers

cpu_line() {  # CPU -> "user nice system idle iowait irq softirq" (jiffies)
    awk -v c="cpu$1" '$1 == c { print $2, $3, $4, $5, $6, $7, $8 }' /proc/stat
}
# cpu_delta BEFORE AFTER -> JSON {busy_pct, user, system, softirq, irq, idle} in jiffies
cpu_delta() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        split(a, x, " "); split(b, y, " ");
        for (i = 1; i <= 7; i++) d[i] = y[i] - x[i];
        busy = d[1] + d[2] + d[3] + d[6] + d[7]; all = busy + d[4] + d[5];
        printf "{\"busy_pct\": %.1f, \"user\": %d, \"system\": %d, \"softirq\": %d, \"irq\": %d, \"idle\": %d}",
            (all > 0 ? 100 * busy / all : 0), d[1] + d[2], d[3], d[7], d[6], d[4] + d[5] }'
}
src_rx() { ip netns exec src cat /sys/class/net/src0/statistics/rx_packets; }
nic_stat() { ethtool -S "$1" 2>/dev/null | awk -v k="$2" '$1 == k ":" { print $2; exit }'; }
# The NICs' interrupts (igb's vectors by its name, virtio-net's by its virtioN) onto CPU 1.
pin_irqs() {
    local vio; vio=$(basename "$(ls -d /sys/bus/pci/devices/"$VIO_PCI"/virtio* 2>/dev/null | head -1)")
    awk -v a="$IGB-" -v b="$vio-" 'index($0, a) || (b != "-" && index($0, b)) { sub(":", "", $1); print $1 }' /proc/interrupts \
        | while read -r irq; do echo "$NODE1_CPUS" > "/proc/irq/$irq/smp_affinity_list" 2>/dev/null; done
}
# wait_line FILE PATTERN TIMEOUT_S
wait_line() {
    local i; for i in $(seq $(( $3 * 20 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; return 1
}

# thread_ticks PID: "tid cpu utime stime" for each thread (cpu: where it last ran).
thread_ticks() {
    local t
    for t in /proc/"$1"/task/*; do
        awk -v tid="${t##*/}" '{ sub(/^.*\) /, ""); print tid, $37, $12, $13 }' "$t/stat" 2>/dev/null
    done
}

# peer_trial PLACEMENT TOOL PAIR: one run, one result line.
peer_trial() {
    local placement=$1 tool=$2 pair=$3 t0; t0=$(now)
    # xdpool-b (xdpvm.peer_ab=1): a second xdpool build, run as xdpool is.
    local kind=$tool bin=$XDPOOL
    [ "$tool" = xdpool-b ] && { kind=xdpool; bin=$PEER_DIR/xdpool-b; }
    rm -f /tmp/peer.threads /tmp/peer.threads.after
    local bench=${placement%-*} mode=${placement#*-} why="" pid="" out=/tmp/peer.out sock=/run/xdpool/peer.sock xdp_on=""
    local n; n=$(param peer_frames 60000)
    select_nut "$IGB"
    [ "$bench" = fwd ] && { ip link set "$VIO" address $MAC_OTHER; ip link set "$VIO" up; }
    rm -f "$out"
    # xdpool's rings as xdpsock's: fill 4096, completion, RX and TX 2048 (libxdp's
    # defaults, xdpsock's fill doubled), batches of 64 for both.
    local FILL_RING=4096 COMP_RING=2048 RX_RING=2048 TX_RING=2048 FRAMES=16384
    case "$kind" in
        xdpool)
            if [ "$bench" = fwd ]; then
                MODE=$mode write_fwd_cfg /tmp/peer.toml "$sock" "[$NODE1_CPUS, $NODE1_CPUS]" swap "$IGB" "$VIO"
            else
                local act=drop; [ "$bench" = l2fwd ] && act=l2fwd
                ACTION=$act write_cfg /tmp/peer.toml "$IGB" true "[0]" "[$NODE1_CPUS]" "$mode" "$sock" "$FRAMES"
            fi
            XDPOOL=$bin start_xdpool peer /tmp/peer.toml && pid=$XPID || why="$tool did not start: $(tail -3 /tmp/peer.log | tr '\n' ' ')" ;;
        xdpsock)
            local flags=(-i "$IGB" -q 0 -z -N -x -n 1); [ "$bench" = l2fwd ] && flags+=(-l) || flags+=(-r)
            [ "$mode" = poll ] && flags+=(-p)
            taskset -c "$NODE1_CPUS" "$PEER_DIR/xdpsock" "${flags[@]}" > "$out" 2>&1 &
            pid=$!
            wait_line "$out" '^rx ' 30 || why="xdpsock did not start: $(tail -3 "$out" | tr '\n' ' ')" ;;
        xsk_fwd)
            "$PEER_DIR/xsk_fwd" -i "$IGB" -q 0 -i "$VIO" -q 0 -c "$NODE1_CPUS" > "$out" 2>&1 &
            pid=$!
            wait_line "$out" 'RX packets' 30 || why="xsk_fwd did not start: $(tail -3 "$out" | tr '\n' ' ')"
            # xsk_fwd fills its fill ring only after xsk_socket__create_shared returns,
            # that is after libxdp's bind and program attach, whose igb_close/igb_open
            # posted RX descriptors from the still empty fill ring: the igb is left with
            # none (QEMU drops every frame, no guest counter, no RX interrupt), and
            # xsk_fwd kicks the driver only when the fill ring's need_wakeup flag is
            # set, which only the igb's RX NAPI sets (it never runs). Down and up
            # again now that the fill ring is full: igb_open posts 1023 descriptors
            # from it, as the attach did for xdpsock (which fills before it binds).
            # xdpvm.peer_fwd_relink=0 leaves it out (xsk_fwd then receives nothing).
            if [ -z "$why" ] && [ "$(param peer_fwd_relink 1)" = 1 ]; then
                if [ "$(param peer_debug 0)" = 1 ]; then
                    { ip -d link show "$IGB" | grep -o 'prog/xdp.*'; grep "$IGB" /proc/interrupts; } 2>&1 | sed "s/^/xdpvm: vs_peers debug $tool before relink: /"
                fi
                ip link set "$IGB" down; ip link set "$IGB" up
            fi ;;
    esac
    local carrier_ms=0 sent=0 gen_s=0 c1a c1b c0a c0b igb_a igb_b miss_a miss_b nobuf_a nobuf_b back_a back_b gen_out
    if [ -z "$why" ]; then
        carrier_ms=$(carrier_wait "$IGB" 20) || why="no carrier on $IGB"
        [ "$bench" = fwd ] && { carrier_wait "$VIO" 20 >/dev/null || why="${why:+$why; }no carrier on $VIO"; }
        pin_irqs
        sleep 0.5
        xdp_on=$(ip -d link show "$IGB" | grep -o 'xdp[a-z]* \|prog/xdp id [0-9]*' | tr '\n' ' ')
        if [ "$(param peer_debug 0)" = 1 ]; then
            { ip -d link show "$IGB"; ethtool -S "$IGB" | awk '$2 + 0 > 0'; grep "$IGB" /proc/interrupts; } 2>&1 | sed "s/^/xdpvm: vs_peers debug $tool before: /"
        fi
        igb_a=$(nic_stat "$IGB" rx_packets) miss_a=$(nic_stat "$IGB" rx_missed_errors) nobuf_a=$(nic_stat "$IGB" rx_no_buffer_count)
        back_a=$(src_rx)
        c1a=$(cpu_line "$NODE1_CPUS") c0a=$(cpu_line "$GEN_CPU")
        [ -n "$pid" ] && [ "$(param peer_debug 0)" = 1 ] && thread_ticks "$pid" > /tmp/peer.threads
        local g0; g0=$(now)
        gen_out=$(gen --engine pktgen --count "$n" --src-ports 1024-1087 --duration 60 2>&1)
        gen_s=$(since "$g0")
        c1b=$(cpu_line "$NODE1_CPUS") c0b=$(cpu_line "$GEN_CPU")
        [ -s /tmp/peer.threads ] && thread_ticks "$pid" > /tmp/peer.threads.after
        sent=$(echo "$gen_out" | sed -n 's/.*sent \([0-9]*\) frames.*/\1/p' | head -1)
        [ -n "$sent" ] || { why="${why:+$why; }generator: $(echo "$gen_out" | tail -2 | tr '\n' ' ')"; sent=0; }
        # What is in flight lands within a second (the tools print their counts each second).
        sleep 2
        igb_b=$(nic_stat "$IGB" rx_packets) miss_b=$(nic_stat "$IGB" rx_missed_errors) nobuf_b=$(nic_stat "$IGB" rx_no_buffer_count)
        back_b=$(src_rx)
        if [ "$(param peer_debug 0)" = 1 ]; then
            { ethtool -S "$IGB" | awk '$2 + 0 > 0'; grep "$IGB" /proc/interrupts; } 2>&1 | sed "s/^/xdpvm: vs_peers debug $tool after: /"
        fi
    fi
    if [ -s /tmp/peer.threads ] && [ -s /tmp/peer.threads.after ]; then
        # Each thread of the tool over the generator's run: the CPU it last ran on,
        # its user and system ticks (a thread's system ticks include the interrupts
        # and softirqs that ran while it was current).
        awk 'NR == FNR { u[$1] = $3; s[$1] = $4; next }
            { print "tid " $1 " cpu " $2 " utime " ($3 - u[$1]) " stime " ($4 - s[$1]) }' /tmp/peer.threads /tmp/peer.threads.after \
            | sed "s/^/xdpvm: vs_peers debug $tool threads over the run: /"
    fi
    # Stop the tool (our own PID) and read its count.
    local rx=0 fwd=0 ring_drops='{}' rejected=0 kicks=null stop_s=""
    if [ -n "$pid" ]; then
        if [ "$kind" = xdpool ]; then
            stop_xdpool
            [ "$XRC" = 0 ] || why="${why:+$why; }xdpool exited $XRC"
            # The summary's invariants, but refused RX descriptors are the kernel's
            # (igb in zero-copy hands back frames still on our TX ring under load):
            # recorded below, not a failure of the trial.
            jq -e '.accounting_ok == true and .accounting.free == .accounting.total and .program_left_attached == false
                and all(.workers[]; .inflight_at_destroy == 0 and .pool.double_release == 0)
                and .counters.teardown_audit_failures == 0' /tmp/peer.json >/dev/null 2>&1 \
                || why="${why:+$why; }summary: $(jq -c '{accounting, teardown_audit_failures: .counters.teardown_audit_failures}' /tmp/peer.json 2>/dev/null)"
            rejected=$(jq -r '.counters.rx_rejected // 0' /tmp/peer.json 2>/dev/null || echo 0)
            kicks=$(jq -c '{all: (.counters.wakeups // 0), tx: (.counters.tx_wakeups // 0)}' /tmp/peer.json 2>/dev/null || echo null)
            rx=$(jq -r '.packets // 0' /tmp/peer.json 2>/dev/null || echo 0)
            local key=forwarded; [ "$bench" = l2fwd ] && key=tx_packets
            fwd=$(jq -r --arg k "$key" '.counters[$k] // 0' /tmp/peer.json 2>/dev/null || echo 0)
            ring_drops=$(jq -c '.drops // {} | with_entries(select(.value != 0))' /tmp/peer.json 2>/dev/null || echo '{}')
        else
            kill -INT "$pid" 2>/dev/null
            local i s0 nudged=""; s0=$(now)
            for i in $(seq 15); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            if [ "$tool" = xdpsock ] && kill -0 "$pid" 2>/dev/null; then
                # xdpsock -p goes round its poll() again when it times out, before it
                # looks at the flag SIGINT set: it stops only after poll() returns a
                # frame. Its stdout is a file, so fully buffered: killed, it loses what
                # it printed since its last 4 KiB (the counts of the whole trial), and
                # the trial reads "counted nothing". A few frames more let it exit and
                # flush. They come after the igb's and the source's counters were read
                # and after its printer's last count (it stops within 1 s of SIGINT),
                # but its exit prints one count more, with them: that one is left out.
                [ "$(param peer_debug 0)" = 1 ] && echo "xdpvm: vs_peers debug $tool: still running 1.5 s after SIGINT; its file's last rx count so far: $(awk '$1 == "rx" && NF == 3 { v = $3 } END { print v }' "$out")"
                gen --engine pktgen --count 64 --src-ports 1024-1087 --duration 10 >/dev/null 2>&1
                nudged=1
            fi
            for i in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            stop_s=$(since "$s0")
            if kill -0 "$pid" 2>/dev/null; then
                # Its count is printed (each second) already; what must not outlive the
                # trial is its program, or the next tool cannot attach.
                kill -KILL "$pid"; wait "$pid" 2>/dev/null
                ip link set dev "$IGB" xdp off 2>/dev/null; ip link set dev "$VIO" xdp off 2>/dev/null
                rm -rf /sys/fs/bpf/xdp 2>/dev/null
                echo "xdpvm: vs_peers $placement $tool: did not stop within 30 s of SIGINT; killed, its XDP programs removed"
                stop_s=killed
            fi
            wait "$pid" 2>/dev/null
            if [ "$tool" = xdpsock ]; then
                local counted=$out cut
                if [ -n "$nudged" ] && [ "$stop_s" != killed ]; then
                    # Its counts up to the last block (" sock0@..."), the one its exit printed.
                    cut=$(grep -n '^ sock[0-9]*@' "$out" | tail -1 | cut -d: -f1)
                    [ -n "$cut" ] && head -n $(( cut - 1 )) "$out" > /tmp/peer.counted && counted=/tmp/peer.counted
                    [ "$(param peer_debug 0)" = 1 ] && echo "xdpvm: vs_peers debug $tool: stopped after 64 frames more; its last rx counts: $(awk '$1 == "rx" && NF == 3 { print $3 }' "$out" | tail -3 | tr '\n' ' ')(the last left out)"
                fi
                rx=$(awk '$1 == "rx" && NF == 3 { v = $3 } END { print v + 0 }' "$counted")
                fwd=$(awk '$1 == "tx" && NF == 3 { v = $3 } END { print v + 0 }' "$counted")
                ring_drops=$(awk '/^rx dropped|^rx queue full|^fill ring empty|^rx invalid|^tx invalid/ {
                        k = $0; sub(/ +[0-9.]+ +[0-9]+ *$/, "", k); gsub(/ /, "_", k); v[k] = $NF }
                    END { printf "{"; s = ""; for (k in v) if (v[k] > 0) { printf "%s\"%s\": %d", s, k, v[k]; s = ", " } printf "}" }' "$counted")
            else
                rx=$(awk -F'|' '$2 + 0 == 0 && $3 ~ /[0-9]/ { v = $3 } END { print v + 0 }' "$out")
                fwd=$(awk -F'|' '$2 ~ /^ *1 *$/ && $5 ~ /[0-9]/ { v = $5 } END { print v + 0 }' "$out")
            fi
        fi
    fi
    ip link set "$IGB" down; [ "$bench" = fwd ] && ip link set "$VIO" down
    local nic_rx=$(( ${igb_b:-0} - ${igb_a:-0} )) miss=$(( ${miss_b:-0} - ${miss_a:-0} )) nobuf=$(( ${nobuf_b:-0} - ${nobuf_a:-0} ))
    local back=$(( ${back_b:-0} - ${back_a:-0} ))
    [ "${rx:-0}" -gt 0 ] || why="${why:+$why; }$tool counted nothing"
    local ok=true
    if [ -n "$why" ]; then
        ok=false
        { grep -v '^libbpf: elf: skipping' "$out" | head -30; echo ...; tail -8 "$out"; tail -12 /tmp/peer.log; } 2>/dev/null | sed "s/^/xdpvm: vs_peers $placement $tool: /"
        [ "$kind" = xdpool ] && grep -m5 'refused' /tmp/peer.log | sed "s/^/xdpvm: vs_peers $placement $tool: /"
        [ "$kind" = xdpool ] && jq -c '.workers[] | {pool, xsk, counters}' /tmp/peer.json 2>/dev/null | sed "s/^/xdpvm: vs_peers $placement $tool: /"
    fi
    result vs_peers $ok "$t0" "$(jq -cn --arg p "$placement" --arg t "$tool" --argjson pair "$pair" --argjson n "$n" \
        --argjson sent "${sent:-0}" --argjson gen_s "${gen_s:-0}" --argjson rx "${rx:-0}" --argjson fwd "${fwd:-0}" \
        --argjson back "$back" --arg xdp_on "$xdp_on" --arg stop_s "$stop_s" --argjson rejected "${rejected:-0}" --argjson kicks "${kicks:-null}" --argjson nic_rx "$nic_rx" --argjson miss "$miss" --argjson nobuf "$nobuf" \
        --argjson rings "${ring_drops:-{\}}" --argjson cpu1 "$(cpu_delta "${c1a:-0 0 0 0 0 0 0}" "${c1b:-0 0 0 0 0 0 0}")" \
        --argjson cpu0 "$(cpu_delta "${c0a:-0 0 0 0 0 0 0}" "${c0b:-0 0 0 0 0 0 0}")" --argjson carrier_ms "${carrier_ms:-0}" --arg why "$why" \
        '{placement: $p, tool: $t, pair: $pair, frames: $n, sent: $sent, gen_s: $gen_s, received: $rx, sent_on: $fwd, back_at_source: $back,
          xdp_on_igb: $xdp_on, stop_s: $stop_s, rx_refused: $rejected, wakeups: $kicks, nic_rx: $nic_rx, nic_missed: $miss, nic_no_buffer: $nobuf, ring_drops: $rings, cpu1: $cpu1, cpu0: $cpu0,
          rx_pps: (if $gen_s > 0 then ($rx / $gen_s | floor) else 0 end), carrier_after_ready_ms: $carrier_ms}
          + (if $why == "" then {} else {why: $why} end)')"
}

vs_peers() {
    local pairs placements p pair tool peer
    pairs=$(param peer_pairs 3)
    placements=$(param peer_placements rxdrop-spin,l2fwd-spin,rxdrop-poll,l2fwd-poll,fwd-spin)
    ethtool -L "$IGB" combined 1 >/dev/null 2>&1
    ethtool -G "$IGB" rx 1024 >/dev/null 2>&1
    # The clock a tool's clock_gettime reads: without TSC (unstable under TCG) the
    # vDSO cannot read it, and each call is a system call.
    echo "xdpvm: vs_peers clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null) (available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource 2>/dev/null))"
    for p in ${placements//,/ }; do
        case "$p" in fwd-*) peer=xsk_fwd ;; *) peer=xdpsock ;; esac
        [ "$(param peer_ab 0)" = 1 ] && peer=xdpool-b
        if [ ! -x "$PEER_DIR/$peer" ]; then
            result vs_peers false "$(now)" "$(jq -cn --arg p "$p" --arg t "$peer" '{placement: $p, tool: $t, why: (if $t == "xdpool-b" then "not in the initramfs: give XDPOOL_VM_XDPOOL_B=PATH (vs-guest.sh: XDPOOL_B)" else "not in the initramfs: give XDPOOL_VM_PEERS=DIR with it" end)}')"
            continue
        fi
        for pair in $(seq "$pairs"); do
            if [ $(( pair % 2 )) = 1 ]; then
                peer_trial "$p" xdpool "$pair"; peer_trial "$p" "$peer" "$pair"
            else
                peer_trial "$p" "$peer" "$pair"; peer_trial "$p" xdpool "$pair"
            fi
        done
    done
}
