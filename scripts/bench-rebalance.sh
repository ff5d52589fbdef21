#!/usr/bin/env bash
# What a rebalance costs a consumer group's members, classic protocol
# (eager, librdkafka's default, and cooperative-sticky) against the
# consumer protocol of KIP-848, in one run on one broker: a 10-member
# group on 100 partitions, a member joins, then leaves; for each change
# the time to a full balanced assignment and the longest gap in the other
# members' reads (scripts/rebalance_bench.py); members that read as fast
# as they can, then members that spend 200 ms on each batch (a classic
# rebalance waits for every member's next poll). Each protocol runs
# ROUNDS times, interleaved. Needs confluent-kafka: $KAFKA_PYTHON, else the test
# venv scripts/test.sh makes (target/test-venv).
# Writes results/<UTC time>-rebalance/rebalance.txt (or to --out DIR).
#
# Usage: scripts/bench-rebalance.sh [--rounds N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-rebalance"
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-rebalance.sh [--rounds N] [--out DIR]" >&2; exit 2 ;;
    esac
done
python="${KAFKA_PYTHON:-target/test-venv/bin/python}"
if ! "$python" -c "import confluent_kafka" 2>/dev/null; then
    echo "bench-rebalance: no confluent-kafka for $python (run scripts/test.sh once, or set KAFKA_PYTHON)" >&2
    exit 1
fi

cargo build --release -q -p broker
mkdir -p "$out"
work="$(mktemp -d)"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

target/release/broker --data-dir "$work/data" --kafka-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 >"$work/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do grep -q "listening kafka=" "$work/broker.log" && break; sleep 0.1; done
bootstrap=$(grep -o 'kafka=[^ ]*' "$work/broker.log" | head -1 | cut -d= -f2)

{
    echo "# $(date -u +%FT%TZ) $(nproc) cores; 10 members, 100 partitions, 5,000 values/s"
    for work in 0 200; do
        for round in $(seq "$rounds"); do
            for protocol in eager cooperative consumer; do
                timeout 600 "$python" scripts/rebalance_bench.py "$bootstrap" "$protocol" \
                    "rebalance-$protocol-$work-$round" 10 100 "$work"
            done
        done
    done
} | tee "$out/rebalance.txt"
