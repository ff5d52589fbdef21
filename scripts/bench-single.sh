#!/usr/bin/env bash
# One producer on one partition, loadgen beside librdkafka's
# rdkafka_performance (issue 36 part 1): 1 KiB and 100 B, idempotent and
# not, acks=all, 1 MiB batches, linger 5 ms, each client with its own
# defaults otherwise; then one consumer reading a 1 KiB topic from its
# start with each client. The two clients take turns shape by shape on one
# fresh broker (2 shards), each topic deleted after its run, for --rounds
# rounds: rates here move 20-50% between minutes, so only a pair run side
# by side is compared. The broker's cache is filled first (common.sh). Prints each pair with the broker's CPU seconds per
# GB (utime+stime over the client's run) and loadgen / rdkafka_performance,
# and for each client the CPU of the shard that did its run's work (the
# shard whose thread's CPU time grew most). Where a disk's interrupts all
# arrive on one CPU, one partition's rate depends on whether its shard is
# pinned there (docs/benchmarks.md run 47): compare a pair only when both
# clients were served on the same CPU.
# Before the first round and after the last, with the broker idle, the
# disk's ceiling under one partition's appends (`loadgen disk-ceiling` on
# the data directory's disk): what the produce rows are bounded by.
# Writes results/<UTC time>-single/single.txt (or to --out DIR; results/ is
# local, not tracked by git).
#
# Usage: scripts/bench-single.sh [--seconds N] [--rounds N] [--out DIR] [--data-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

seconds=12
rounds=2
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-single"
data_root=target/bench-data
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-single.sh [--seconds N] [--rounds N] [--out DIR] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen
source scripts/rdkafka-perf.sh
mkdir -p "$out" "$data_root"
work="$(mktemp -d "$data_root/single.XXXXXX")"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

target/release/broker --data-dir "$work/data" --shards 2 --kafka-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 >"$out/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do grep -q "listening kafka=" "$out/broker.log" && break; sleep 0.1; done
bootstrap=$(grep -o 'kafka=[^ ]*' "$out/broker.log" | head -1 | cut -d= -f2)
[ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$out/broker.log"; exit 1; }
http=$(grep -o 'http=[^ ]*' "$out/broker.log" | head -1 | cut -d= -f2)
fill_cache "$bootstrap" single-warm 2

hz=$(getconf CLK_TCK)
warmup=3
cpu_ticks() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }
per_gb() {  # TICKS BYTES: the broker's CPU seconds per GB
    awk -v t="$1" -v b="$2" -v hz="$hz" 'BEGIN { printf "%.2f", (b > 0 ? (t / hz) / (b / 1e9) : 0) }'
}
drop_topic() { target/release/broker topic delete "$1" --brokers "$bootstrap" >/dev/null || true; }
# Each run's own topic, from a counter kept in a file: the runs' figures
# are read through $(...), a subshell, where a variable would not count.
next_topic() { echo $(( $(cat "$work/topics" 2>/dev/null || echo 0) + 1 )) >"$work/topics"; topic="single-$(cat "$work/topics")"; }

loadgen_produce() {  # SIZE IDEMPOTENCE(on|off): "MB/s cpu-s/GB shard-CPU" (the CPU over warm-up and run)
    local t0 t1 s0; next_topic
    # Made here, as for rdkafka_performance, not by loadgen.
    target/release/broker topic create "$topic" --partitions 1 --brokers "$bootstrap" >/dev/null
    t0=$(cpu_ticks); s0=$(shard_ticks "$broker_pid")
    target/release/loadgen produce --bootstrap "$bootstrap" --topic "$topic" --partitions 1 --producers 1 \
        --message-bytes "$1" --batch-bytes 1048576 --linger-ms 5 --acks all --idempotence "$2" \
        --duration "$seconds" --warmup "$warmup" --out "$work" --name "$topic" >"$out/$topic.txt" 2>&1
    t1=$(cpu_ticks)
    local mbps; mbps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['produce_mb_per_s'])" "$work/$topic.json")
    echo "$mbps $(per_gb $((t1 - t0)) "$(awk -v m="$mbps" -v s=$((seconds + warmup)) 'BEGIN { print m * 1e6 * s }')") $(busiest_shard "$s0" "$(shard_ticks "$broker_pid")")"
    drop_topic "$topic"
}
rdkafka_produce() {  # SIZE IDEMPOTENCE(true|false): "MB/s cpu-s/GB shard-CPU", about as many bytes as loadgen's run
    local t0 t1 s0 line count; next_topic
    count=$(( $1 == 100 ? 25000000 : 5000000 ))
    target/release/broker topic create "$topic" --partitions 1 --brokers "$bootstrap" >/dev/null
    t0=$(cpu_ticks); s0=$(shard_ticks "$broker_pid")
    line=$("$rdkafka_perf" -b "$bootstrap" -u -P -t "$topic" -p 0 -s "$1" -c "$count" -a -1 \
        -X enable.idempotence="$2" -X linger.ms=5 -X batch.size=1048576 \
        -X queue.buffering.max.messages=2000000 -X queue.buffering.max.kbytes=2000000 2>&1 \
        | tee "$out/$topic.txt" | grep '^|' | tail -1)
    t1=$(cpu_ticks)
    local shard; shard=$(busiest_shard "$s0" "$(shard_ticks "$broker_pid")")
    # producer columns: elapsed, msgs, bytes, rtt, dr, dr_m/s, dr_MB/s, ...
    echo "$line" | awk -F'|' -v d=$((t1 - t0)) -v hz="$hz" -v shard="$shard" '{ printf "%.1f %.2f %s\n", $8, (d / hz) / ($4 / 1e9), shard }'
    drop_topic "$topic"
}
consume_pair() {  # "loadgen MB/s cpu shard, rdkafka MB/s cpu shard" each reading one 1 KiB topic of 3 GB whole
    local t0 t1 s0 line lg rd; next_topic
    target/release/broker topic create "$topic" --partitions 1 --brokers "$bootstrap" >/dev/null
    "$rdkafka_perf" -b "$bootstrap" -u -P -t "$topic" -p 0 -s 1024 -c 3000000 -a -1 -X linger.ms=5 \
        -X batch.size=1048576 >/dev/null 2>&1
    t0=$(cpu_ticks); s0=$(shard_ticks "$broker_pid")
    # The whole topic, counted: a time window would run out of data at
    # this rate (or measure its end).
    target/release/loadgen consume --bootstrap "$bootstrap" --topic "$topic" --partitions 1 --consumers 1 \
        --from earliest --messages 3000000 --warmup 0 --out "$work" --name "$topic-read" >"$out/$topic-read.txt" 2>&1
    t1=$(cpu_ticks)
    local mbps; mbps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['consume_mb_per_s'])" "$work/$topic-read.json")
    lg="$mbps $(per_gb $((t1 - t0)) 3072000000) $(busiest_shard "$s0" "$(shard_ticks "$broker_pid")")"
    t0=$(cpu_ticks); s0=$(shard_ticks "$broker_pid")
    line=$("$rdkafka_perf" -b "$bootstrap" -u -C -t "$topic" -p 0 -o beginning -c 3000000 2>&1 | grep '^|' | tail -1)
    t1=$(cpu_ticks)
    # consumer columns: elapsed, msgs, bytes, rtt, m/s, MB/s, ...
    local shard; shard=$(busiest_shard "$s0" "$(shard_ticks "$broker_pid")")
    rd=$(echo "$line" | awk -F'|' -v d=$((t1 - t0)) -v hz="$hz" -v shard="$shard" '{ printf "%.1f %.2f %s\n", $7, (d / hz) / ($4 / 1e9), shard }')
    echo "$lg $rd"
    drop_topic "$topic"
}
row() {  # SHAPE "LG_MBPS LG_CPU LG_SHARD RD_MBPS RD_CPU RD_SHARD"
    echo "$2" | awk -v shape="$1" '{ printf "%-34s loadgen %6.0f MB/s %5.2f cpu-s/GB   rdkafka_performance %6.0f MB/s %5.2f cpu-s/GB   loadgen/rdkafka %.2fx   shard on CPU %s/%s\n", shape, $1, $2, $4, $5, ($4 > 0 ? $1 / $4 : 0), $3, $6 }' \
        | tee -a "$out/single.txt"
}

disk_ceiling() {  # WHEN
    echo "== disk ceiling, $1" | tee -a "$out/single.txt"
    target/release/loadgen disk-ceiling --dir "$work" --duration 12 | tee -a "$out/single.txt" \
        || echo "disk ceiling: failed" | tee -a "$out/single.txt"
}

disk_ceiling "before the rounds"
for round in $(seq "$rounds"); do
    echo "== round $round" | tee -a "$out/single.txt"
    for size in 1024 100; do
        for idempotence in on off; do
            rd_idempotence=$([ "$idempotence" = on ] && echo true || echo false)
            # The client that goes first alternates between rounds.
            if [ $((round % 2)) = 1 ]; then
                lg=$(loadgen_produce "$size" "$idempotence"); rd=$(rdkafka_produce "$size" "$rd_idempotence")
            else
                rd=$(rdkafka_produce "$size" "$rd_idempotence"); lg=$(loadgen_produce "$size" "$idempotence")
            fi
            row "produce $size B, idempotence $idempotence" "$lg $rd"
        done
    done
    row "consume 1 KiB" "$(consume_pair)"
done
disk_ceiling "after the rounds"
echo "results: $out/single.txt"
