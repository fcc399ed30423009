#!/bin/bash
# Helpers shared by the comparison scripts (vs-fwd-peers.sh, vs-gen-peers.sh,
# compare-all.sh). Source it.

# The TSC's nominal MHz: this VM has no PMU, so cycles are run time at this clock.
BENCH_MHZ=$(awk -F: '/^cpu MHz/{print $2; exit}' /proc/cpuinfo)

bench_threads() { # pid -> "tid:run_ns:ctx_switches ..." for each of its threads
    local t r c
    for t in /proc/$1/task/*; do
        # A thread that ends while we read is left out.
        r=$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null) && c=$(awk '/ctxt_switches/{s+=$2}END{printf "%.0f\n", s}' "$t/status" 2>/dev/null) || continue
        [ -n "$r" ] && [ -n "$c" ] && echo -n "$(basename "$t"):$r:$c "
    done
}

bench_busiest() { # "before" "after" (bench_threads) -> "run_ns ctx_switches" of the
    # thread that ran most in between
    python3 - "$1" "$2" <<'PY'
import sys
parse = lambda s: {t: (int(r), int(c)) for t, r, c in (x.split(':') for x in s.split())}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
d = [(b[t][0] - a[t][0], b[t][1] - a[t][1]) for t in b if t in a]
print(*max(d) if d else (0, 0))
PY
}

bench_eth() { # netns dev awk-regex -> sum of the matching `ethtool -S` counters
    # (%.0f: mawk prints a sum of 2^31 or more as 2.16028e+09 with plain print)
    ip netns exec "$1" ethtool -S "$2" 2>/dev/null | awk -v re="$3" '$1 ~ re {s += $2; n++} END {if (!n) exit 1; printf "%.0f\n", s}'
}

bench_xmit() { # netns dev -> "accepted refused": the device's XDP transmit counters
    # (frames handed to it by ndo_xdp_xmit: into the peer's ring / refused)
    local a r
    a=$(bench_eth "$1" "$2" '^tx_queue_.*_xdp_xmit:$') && r=$(bench_eth "$1" "$2" '^tx_queue_.*_xdp_xmit_errors:$') || {
        echo "no XDP transmit counters in ethtool -S $2" >&2
        return 1
    }
    echo "$a $r"
}

bench_rx_xdp() { # netns dev -> frames its XDP program saw (veth: rx_queue_N_xdp_packets)
    bench_eth "$1" "$2" '^rx_queue_.*_xdp_packets:$'
}

bench_wait_prog() { # netns dev tenths [pid] -> 0 once an XDP program is on dev; 1 after
    # `tenths` tenths of a second, or as soon as pid (the tool that should attach) is gone
    local i
    for ((i = 0; i < $3; i++)); do
        ip -n "$1" link show "$2" | grep -q ' prog/xdp' && return 0
        [ -z "${4:-}" ] || kill -0 "$4" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

bench_xdp_off() { # netns dev...: remove whatever XDP program a killed tool left
    local ns=$1 d
    shift
    for d in "$@"; do
        ip -n "$ns" link set "$d" xdp off 2>/dev/null
        ip -n "$ns" link set "$d" xdpgeneric off 2>/dev/null
    done
}

bench_stop() { # pid seconds name [signal]: SIGINT (or signal), then after `seconds`
    # SIGKILL, and say so unless `seconds` is 0 (a tool whose report is not needed)
    local i
    kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
    kill -"${4:-INT}" "$1" 2>/dev/null
    for ((i = 0; i < $2 * 10; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then
        kill -9 "$1" 2>/dev/null
        [ "$2" = 0 ] || echo "# $3 still running $2 s after SIG${4:-INT}; killed"
    fi
    wait "$1" 2>/dev/null
    return 0
}

bench_steal() { # "c0 c1 t": steal ticks of cores 0 and 1 (/proc/stat, USER_HZ), and when
    awk '$1 == "cpu0" {a = $9} $1 == "cpu1" {b = $9} END {printf "%s %s ", a, b}' /proc/stat
    date +%s.%N
}

bench_ticks_pct() { # "before" "after" [suffix]: tick counters then a time (bench_steal,
    # bench_cpu) -> each counter's share of the window, in %, space-separated
    python3 - "$1" "$2" "${3:-}" <<'PY'
import os, sys
b, a = (list(map(float, s.split())) for s in sys.argv[1:3])
hz, wall = os.sysconf('SC_CLK_TCK'), max(a[-1] - b[-1], 1e-3)
print(' '.join(f'{(a[i] - b[i]) / hz / wall * 100:.0f}{sys.argv[3]}' for i in range(len(a) - 1)))
PY
}

bench_steal_pct() { bench_ticks_pct "$1" "$2" %; } # "before" "after" -> "c0% c1%"

bench_cpu() { # CORE -> "user system softirq idle t": the core's ticks (/proc/stat, USER_HZ;
    # user with nice, softirq with irq), and when
    awk -v c="cpu$1" '$1 == c {printf "%d %d %d %d ", $2 + $3, $4, $7 + $8, $5 + $6}' /proc/stat
    date +%s.%N
}

bench_cpu_pct() { bench_ticks_pct "$1" "$2"; } # "before" "after" -> "user system softirq idle" (%)

bench_result_file() { # name -> a new dated path under docs/results/<date>/ (not overwriting)
    local d f
    d=docs/results/$(date -u +%F)
    mkdir -p "$d"
    f=$d/$1-$(date -u +%H%M).md
    [ -e "$f" ] && f=$d/$1-$(date -u +%H%M%S).md
    echo "$f"
}

bench_wait_moving() { # tenths command...: 0 once the number the command prints grows
    # (traffic has started), 1 after `tenths` tenths of a second
    local n=$1 i a b
    shift
    a=$("$@" 2>/dev/null)
    for ((i = 0; i < n; i++)); do
        sleep 0.1
        b=$("$@" 2>/dev/null)
        [ -n "$a" ] && [ -n "$b" ] && ((b > a)) && return 0
        [ -n "$a" ] || a=$b
    done
    return 1
}

bench_summary() { # title subject rows.tsv: the summary (summarize.py) and the raw rows
    echo
    echo "## Summary ($1)"
    echo
    python3 tools/bench/summarize.py "$2" "$3"
    echo "## Rows"
    echo
    sed 's/^/    /' "$3"
}

bench_main_to() { # out-file: runs `main` with its output on the terminal and in the file
    mkdir -p "$(dirname "$1")"
    exec 3>&1
    exec > >(tee "$1") 2>&1
    main
    echo "written: $1" >&3
}
