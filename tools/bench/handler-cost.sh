#!/bin/bash
# A packet function's cost against the built-in action doing the same work, in
# user-space instructions per frame, counted by callgrind (Debian's valgrind): no
# root, no NIC, no timing noise. The bench binary (userspace/xdpool/benches/
# handler_cost.rs) drives the real worker over heap rings (xdpool::testing); each
# variant runs in its own process, FRAMES frames and then 0 frames, and callgrind
# counts only inside the worker's passes (--toggle-collect=TOGGLE), so
#   instructions per frame = (Ir(FRAMES) - Ir(0)) / FRAMES
# (the 0-frame run takes out the fixed cost of the passes that start the worker
# and find nothing). WHOLE=1 also counts the whole process the same way (the
# harness playing the kernel included: its copies into and out of the UMEM).
# The -2rules variants have a UDP and a TCP rule with different verdicts (as
# configs/examples/lb.toml has), so the worker reads every frame to classify it
# (these plain UDP frames on the parser's short path, matched on their fields);
# call-parse-2rules's handler reads the headers again with Packet::parse. The last row
# is the lb example (its own bench binary) against the built-in forward: what a
# real handler adds, not a like-for-like ratio.
#   FRAMES=100000 (default)   TOGGLE='*Driven*pass*' (default)
#   OUT=dir to keep the callgrind files (default: a temporary dir, removed)
#   BIN=path of a bench binary already built (default: built here)
# Needs valgrind (apt-get install -y valgrind). Prints one markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
FRAMES=${FRAMES:-100000}
TOGGLE=${TOGGLE:-'*Driven*pass*'}
WHOLE=${WHOLE:-0}
command -v valgrind >/dev/null || { echo "valgrind missing: apt-get install -y valgrind" >&2; exit 2; }
export XDPOOL_CLANG=${XDPOOL_CLANG:-clang-19}
# Builds bench $1 with `cargo bench ARGS... --no-run` (the rest of the arguments)
# and prints its executable, from cargo's JSON; exits naming the command if none.
bench_exe() {
    local name=$1 exe
    shift
    exe=$(cargo bench "$@" --bench "$name" --no-run --message-format=json 2>/dev/null |
      python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$name")
    [ -x "$exe" ] || { echo "the bench binary did not build: cargo bench $* --bench $name --no-run" >&2; exit 1; }
    echo "$exe"
}
bin=${BIN:-$(bench_exe handler_cost -p xdpool --features testing)} || exit 1
[ -x "$bin" ] || { echo "BIN=$bin is not an executable" >&2; exit 1; }
# The lb example (userspace/xdpool-examples/benches/lb_cost.rs): its config's two
# `call` rules, 64 UDP flows, three backends with IPv4 rewrites; shown beside the
# built-in forward it builds on. LB_BIN=path of that bench binary already built.
lb_bin=${LB_BIN:-$(bench_exe lb_cost -p xdpool-examples)} || exit 1
[ -x "$lb_bin" ] || { echo "LB_BIN=$lb_bin is not an executable" >&2; exit 1; }
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; dir=$OUT; else dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT; fi

# Ir counted in one run: $1 variant, $2 frames, $3 "worker" or "whole".
count() {
    local f="$dir/callgrind.$1.$2.$3"
    local sel=(--toggle-collect="$TOGGLE")
    [ "$3" = whole ] && sel=()
    local b=$bin
    [ "$1" = lb ] && b=$lb_bin
    valgrind --tool=callgrind --callgrind-out-file="$f" "${sel[@]}" "$b" "$1" "$2" \
        >"$f.log" 2>&1 || { cat "$f.log" >&2; exit 1; }
    grep -E '^(summary|totals):' "$f" | head -1 | awk '{print $2}'
}

per_frame() { # $1 variant, $2 worker|whole
    local n z
    n=$(count "$1" "$FRAMES" "$2")
    z=$(count "$1" 0 "$2")
    python3 -c "print(f'{($n - $z) / $FRAMES:.1f}')"
}

declare -A base
scopes=(worker)
[ "$WHOLE" = 1 ] && scopes+=(whole)
header="| variant | compared with |"
rule="|---|---|"
for s in "${scopes[@]}"; do header+=" Ir/frame ($s) | ratio ($s) |"; rule+="---:|---:|"; done
rows=()
for pair in drop:drop l2fwd:l2fwd call-swap-bytes:l2fwd call-swap-macs:l2fwd call-mac-swap:l2fwd forward:forward call-forward:forward \
        l2fwd-2rules:l2fwd-2rules call-parse-2rules:l2fwd-2rules lb:forward; do
    v=${pair%%:*}; b=${pair##*:}
    row="| $v | $b |"
    for s in "${scopes[@]}"; do
        ir=$(per_frame "$v" "$s")
        [ "$v" = "$b" ] && base[$b.$s]=$ir
        ratio=$(python3 -c "print(f'{$ir / ${base[$b.$s]}:.3f}')")
        row+=" $ir | ${ratio}x |"
    done
    rows+=("$row")
done
echo "handler cost: $FRAMES UDP frames of 60 B, callgrind Ir, worker = inside $TOGGLE"
echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
