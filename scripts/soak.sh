#!/usr/bin/env bash
# The fault test, long: the acks=all run of broker/tests/replication_faults.rs
# with FAULTS faults (default 100) for each of SEEDS seeds (default 4, taken
# from the clock and printed, or given with --seed N to replay one). Each run
# must lose nothing acknowledged, store nothing twice, read nothing
# inconsistent or out of order, see no librdkafka delivery error, and serve
# again within the test's bound after the last fault (a failed run keeps its
# brokers' data and logs and says where). Not part of
# the test command (about 5 minutes a seed); the test command runs the
# same test with three seeds of 12 faults. Writes
# results/soak-<UTC time>.txt (one verdict line per seed; results/ is
# local, not tracked by git).
#
# Usage: scripts/soak.sh [--faults N] [--seeds N] [--seed N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

faults=100
seeds=4
seed=""
while [ $# -gt 0 ]; do
    case "$1" in
        --faults) faults="$2"; shift 2 ;;
        --seeds) seeds="$2"; shift 2 ;;
        --seed) seed="$2"; seeds=1; shift 2 ;;
        *) echo "usage: scripts/soak.sh [--faults N] [--seeds N] [--seed N]" >&2; exit 2 ;;
    esac
done

mkdir -p results
out="results/soak-$(date -u +%Y-%m-%dT%H%M%SZ).txt"
echo "soak: $seeds seed(s) x $faults faults -> $out"
# Built once, in a target directory of its own: every run and every
# restart in it uses the test and broker binaries built here and now,
# whatever is edited or rebuilt meanwhile.
export CARGO_TARGET_DIR=target/soak
echo "building into $CARGO_TARGET_DIR (the first time takes a few minutes)"
test_binary=$(cargo test -p broker --test replication_faults --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "replication_faults":
        print(m["executable"])')
[ -x "$test_binary" ] || { echo "soak: the fault test did not build" >&2; exit 1; }
failed=0
for i in $(seq 1 "$seeds"); do
    run_seed="${seed:-$(date +%s%N)}"
    echo "== seed $run_seed ($i of $seeds)"
    log="$(mktemp)"
    if SEED="$run_seed" FAULTS="$faults" "$test_binary" --exact --nocapture \
        acks_all_loses_nothing_acknowledged_through_kills_and_pauses >"$log" 2>&1; then
        verdict="PASS"
    else
        verdict="FAIL"
        failed=$((failed + 1))
        cp "$log" "$out.seed-$run_seed.log"
    fi
    line="$(grep -E '^acks=-1 seed=' "$log" | tail -n 1 || true)"
    echo "$verdict $line" | tee -a "$out"
    rm -f "$log"
done
echo "soak: $failed of $seeds seed(s) failed (full logs of failures beside $out)"
[ "$failed" -eq 0 ]
