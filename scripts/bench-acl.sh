#!/usr/bin/env bash
# The authorizer's cost on workload A of scripts/bench.sh (100 B messages,
# acks=all, idempotent): a fresh broker with ACLs off (authorizer = none),
# then a fresh broker with authorizer = acl and 1,000 ACLs (500 literal and
# 500 prefixed, on other principals and names, so every produce's check
# hashes its literal name and scans the prefixed ones) plus the two that
# let the benchmark's anonymous client in (ALL on the cluster, ALL on the
# topic prefix "acl-"), back to back on the same disk. loadgen as fast as
# it goes (one producer per core), rdkafka_performance as fast as it goes
# and at a fixed 1 M msg/s, where the broker's CPU seconds per GB show the
# checks' cost apart from how fast the shared cores let the client go.
# Writes results/<UTC time>-acl/acl.txt (or to --out DIR; results/ is
# local, not tracked by git).
#
# --acl-first runs the broker with ACLs first (the second broker of a run
# has been seen to gain from going second; run both orders).
#
# Usage: scripts/bench-acl.sh [--messages N] [--acl-first] [--out DIR] [--data-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

messages=20000000
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-acl"
data_root=target/bench-data
order="none acl"
while [ $# -gt 0 ]; do
    case "$1" in
        --messages) messages="$2"; shift 2 ;;
        --acl-first) order="acl none"; shift ;;
        --out) out="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-acl.sh [--messages N] [--acl-first] [--out DIR] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen
source scripts/rdkafka-perf.sh
mkdir -p "$out" "$data_root"
work="$(mktemp -d "$data_root/acl.XXXXXX")"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }
start_broker() {  # AUTHORIZER: a fresh broker on its own data directory
    local log="$work/$1.log"
    # allow_everyone_if_no_acl_found lets the first CreateAcls in (no ACL is
    # about the cluster yet); the benchmark's topics have ACLs, so their
    # checks run in full.
    BROKER_AUTHORIZER=$1 BROKER_ALLOW_EVERYONE_IF_NO_ACL_FOUND=true BROKER_DEFAULT_PARTITIONS=2 \
        target/release/broker --data-dir "$work/data-$1" --kafka-listen 127.0.0.1:0 \
        --http-listen 127.0.0.1:0 >"$log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do grep -q "listening kafka=" "$log" && break; sleep 0.1; done
    bootstrap=$(grep -o 'kafka=[^ ]*' "$log" | head -1 | cut -d= -f2)
    [ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$log"; exit 1; }
}
stop_broker() { kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""; }
acl() { target/release/broker acl create --brokers "$bootstrap" "$@" >/dev/null; }
thousand_acls() {
    acl --allow User:ANONYMOUS --operation All --cluster
    acl --allow User:ANONYMOUS --operation All --topic acl- --prefixed
    local principals=() i
    for i in $(seq 50); do principals+=(--allow "User:user-$i"); done
    for i in $(seq 5); do  # 5 x 50 principals x 2 operations, literal and prefixed
        acl "${principals[@]}" --operation Read --operation Write --topic "other-$i"
        acl "${principals[@]}" --operation Read --operation Write --topic "other-prefix-$i-" --prefixed
    done
    local count
    count=$(target/release/broker acl list --brokers "$bootstrap" | tail -n +2 | wc -l)
    [ "$count" -eq 1002 ] || { echo "expected 1002 ACLs, found $count"; exit 1; }
}
produce() {  # NAME COUNT CLIENT-SETTINGS...: "msg/s MB/s cpu-s/GB"
    local name=$1 count=$2 t0 t1 line; shift 2
    t0=$(cpu_ticks)
    line=$("$rdkafka_perf" -b "$bootstrap" -u -P -a -1 -X enable.idempotence=true -X linger.ms=5 \
        -X batch.size=1048576 -t "$name" -s 100 -c "$count" "$@" 2>&1 | grep '^|' | tail -1)
    t1=$(cpu_ticks)
    echo "$line" | awk -F'|' -v d=$((t1 - t0)) -v hz="$hz" \
        '{ printf "%d %.1f %.2f\n", $7, $8, (d / hz) / ($4 / 1e9) }'
}
loadgen_produce() {  # NAME: "msg/s MB/s cpu-s/GB"
    local t0 t1 line
    t0=$(cpu_ticks)
    line=$(target/release/loadgen produce --bootstrap "$bootstrap" --topic "$1" --partitions 2 \
        --message-bytes 100 --producers "$(nproc)" --batch-bytes 1048576 --linger-ms 5 \
        --acks all --duration 10 --warmup 3 2>&1 | grep '^summary')
    t1=$(cpu_ticks)
    echo "$line" | awk -v d=$((t1 - t0)) -v hz="$hz" '{
        rate = $5; mb = substr($7, 2); printf "%d %.1f %.2f\n", rate, mb, (d / hz) / (mb * 13 / 1000) }'
}

declare -A figures
for authorizer in $order; do
    start_broker "$authorizer"
    [ "$authorizer" = acl ] && thousand_acls
    figures[loadgen-$authorizer]=$(loadgen_produce acl-la)
    figures[max-$authorizer]=$(produce acl-a "$messages")
    figures[rate-$authorizer]=$(produce acl-rate $((messages / 2)) -r 1000000)
    stop_broker
    rm -rf "$work/data-$authorizer"
done

{
    echo "Workload A (100 B, acks=all, idempotent, 2 partitions): no ACLs vs authorizer = acl with 1,002 ACLs (order: $order);"
    echo "loadgen: one producer per core; max: rdkafka_performance as fast as it goes; rate: at 1 M msg/s"
    for w in loadgen max rate; do
        read -r nr nm nc <<<"${figures[$w-none]}"
        read -r ar am ac <<<"${figures[$w-acl]}"
        printf "%s none %s msg/s %s MB/s cpu %s s/GB | acl %s msg/s %s MB/s cpu %s s/GB | acl/none %s\n" \
            "$w" "$nr" "$nm" "$nc" "$ar" "$am" "$ac" "$(awk -v a="$ar" -v b="$nr" 'BEGIN { printf "%.0f%%", 100 * a / b }')"
    done
} | tee "$out/acl.txt"
