#!/usr/bin/env bash
# `make test`: runs its stages in order (each is `make test-STAGE`, `setup` is
# `make setup`), stops at the first that fails, and closes with
#
#   stage unit: ok in 312 s          one line per stage run, with its wall time
#   N passed, N failed, N skipped    the last line, alone
#
# The counts add up the cargo tests of every stage (libtest's `test result:` lines:
# unit, integration, doc and loom tests; `skipped` is libtest's `ignored`) and the
# guest checks of the VM stage (tests/vm/run.sh's closing `test-vm: N passed, N
# failed`). A stage that fails without a failure counted (a build error, a fuzz
# crash, a missed benchmark target) counts as one failure, so the last line never
# reads `0 failed` after a failed run.
#
#   tests/run-stages.sh STAGE...     (MAKE names the make to call; default make)
#
# Each stage's output goes to stdout as it comes (stderr merged into it) and to
# target/test-logs/STAGE.log, which the counts are read from. Nothing here reopens
# /dev/stdout or /dev/stderr: a `make test > log 2>&1` log keeps every stage.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
LOGS=target/test-logs
mkdir -p "$LOGS"

passed=0 failed=0 skipped=0 failed_stage="" ran=()
start_all=$SECONDS

# Adds one stage's counts from its log; prints them as "P F S".
count() {
    local log=$1 stage=$2
    if [ "$stage" = vm ]; then
        # run.sh's own summary; absent when it stopped before the guest ran.
        sed -n 's/^test-vm: \([0-9]\+\) passed, \([0-9]\+\) failed$/\1 \2 0/p' "$log" | tail -1
    else
        sed -n 's/^test result: [A-Za-z]*\. \([0-9]\+\) passed; \([0-9]\+\) failed; \([0-9]\+\) ignored;.*/\1 \2 \3/p' "$log" \
            | awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}'
    fi
}

for stage in "$@"; do
    case "$stage" in
        setup) target=setup ;;
        *) target=test-$stage ;;
    esac
    log=$LOGS/$stage.log
    echo "=== stage $stage: make $target"
    t0=$SECONDS
    "$MAKE" --no-print-directory "$target" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    secs=$((SECONDS - t0))
    ran+=("$stage")
    read -r p f s <<<"$(count "$log" "$stage")"
    p=${p:-0} f=${f:-0} s=${s:-0}
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    if [ "$rc" = 0 ]; then
        echo "stage $stage: ok in $secs s"
    else
        echo "stage $stage: FAILED in $secs s (exit $rc; its output: $log)"
        failed_stage=$stage
        break
    fi
done

total=$((SECONDS - start_all))
not_run=()
for stage in "$@"; do
    [[ " ${ran[*]} " == *" $stage "* ]] || not_run+=("$stage")
done
[ ${#not_run[@]} = 0 ] || echo "stages not run: ${not_run[*]} (stopped at $failed_stage)"
echo "total: $total s ($((total / 60)) min $((total % 60)) s)"
echo "$passed passed, $failed failed, $skipped skipped"
[ -z "$failed_stage" ]
