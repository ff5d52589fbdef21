#!/usr/bin/env bash
# Queues (share groups, docs/queues.md) against a consumer group, on one
# partition, with confluent-kafka's clients (librdkafka): N consumers
# (1, 4, 16) of one group each spending --delay-ms per message, a backlog
# produced once all joined; the messages processed (acknowledged) per
# second over --seconds, and the broker's CPU microseconds per message.
# A consumer group cannot keep more than one consumer of a partition
# busy; a share group hands the partition's records to all of them.
# Then the redelivery latency: a member holds a record without
# acknowledging it, the time until another member gets it (the lock is
# 1 s here). Prints each figure and the share group's rate as a multiple
# of the consumer group's at the same N. Writes results/<UTC time>-share/
# share.txt (or to --out DIR; results/ is local, not tracked by git).
#
# Usage: scripts/bench-share.sh [--seconds N] [--delay-ms MS] [--out DIR] [--data-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

seconds=10
delay_ms=5
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-share"
data_root=target/bench-data
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --delay-ms) delay_ms="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-share.sh [--seconds N] [--delay-ms MS] [--out DIR] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker
venv=target/test-venv
if ! "$venv/bin/python" -c "import confluent_kafka" >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q confluent-kafka
fi
python="$venv/bin/python"
mkdir -p "$out" "$data_root"
work="$(mktemp -d "$data_root/share.XXXXXX")"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

BROKER_GROUP_SHARE_RECORD_LOCK_DURATION_MS=1000 target/release/broker --data-dir "$work" \
    --kafka-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 >>"$out/broker.log" 2>&1 &
broker_pid=$!
bootstrap=""
for _ in $(seq 1 300); do
    bootstrap=$(grep -o 'kafka=[0-9.:]*' "$out/broker.log" | head -1 | cut -d= -f2 || true)
    [ -n "$bootstrap" ] && break
    sleep 0.1
done
[ -n "$bootstrap" ] || { echo "the broker did not start" >&2; exit 1; }

{
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores; ${delay_ms} ms per message; ${seconds} s each"
    echo "group consumers msgs/s broker-cpu-us/msg"
    for n in 1 4 16; do
        group=$("$python" scripts/share_bench.py "$bootstrap" rate group "bench-group-$n" "$n" "$delay_ms" "$seconds" "$broker_pid")
        share=$("$python" scripts/share_bench.py "$bootstrap" rate share "bench-share-$n" "$n" "$delay_ms" "$seconds" "$broker_pid")
        echo "$group"
        echo "$share"
        awk -v g="$(echo "$group" | cut -d' ' -f3)" -v s="$(echo "$share" | cut -d' ' -f3)" -v n="$n" \
            'BEGIN { printf "  %d consumers: the share group %.2fx the consumer group (ideal %d: %.0f msgs/s each)\n", n, s / (g > 0 ? g : 1), n, 1000 / '"$delay_ms"' }'
    done
    echo "redelivery rounds p50-ms max-ms (lock 1000 ms)"
    "$python" scripts/share_bench.py "$bootstrap" redelivery bench-redelivery 20
} 2>&1 | grep -v 'SHARECONSUMER' | tee "$out/share.txt"
