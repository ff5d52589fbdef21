#!/usr/bin/env bash
# Tiered storage (docs/tiered-storage.md), measured in one run:
#   R  replaying old data: a topic produced (--mbytes of 1 KiB records)
#      and tiered down to an 8 MiB local window, the broker restarted (a
#      cold chunk cache), then read from offset 0 to the local start with
#      confluent-kafka: the first record's latency and the read's rate,
#      from the local-directory store and from an S3 server (moto, the
#      test command's, on 127.0.0.1); beside the disk's sequential read
#      rate and moto's own rate serving one object to curl.
#   P  producers' latency with uploads running vs not: one producer at
#      --rate 100-byte records (acks=all, linger 1 ms, as bench.sh's C) to
#      a plain topic and to a tiered one whose 1 MiB segments are uploaded
#      as they seal, alternated twice, on one broker.
# Writes results/<UTC time>-tiered/ (results/ is local, not tracked by git).
#
# Usage: scripts/bench-tiered.sh [--mbytes N] [--rate MSGS_PER_S] [--seconds N] [--data-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

mbytes=512
rate=100000
seconds=20
data_root=target/bench-data
while [ $# -gt 0 ]; do
    case "$1" in
        --mbytes) mbytes="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-tiered.sh [--mbytes N] [--rate MSGS_PER_S] [--seconds N] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen
venv=target/test-venv
if ! "$venv/bin/python" -c "import confluent_kafka, moto.server" >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q confluent-kafka "moto[server]"
fi
python="$venv/bin/python"
bin=target/release
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-tiered"
mkdir -p "$out" "$data_root"
data_dir=""
broker_pid=""
moto_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null && wait "$moto_pid" 2>/dev/null
    [ -n "$data_dir" ] && rm -rf "$data_dir"
    return 0
}
trap cleanup EXIT

start_broker() {  # LOG [ENV=VALUE...]: on $data_dir; sets broker_pid, bootstrap, http
    local log="$1"; shift
    env BROKER_RETENTION_CHECK_INTERVAL_MS=500 "$@" "$bin/broker" --data-dir "$data_dir" \
        --kafka-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 >>"$log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do
        grep -q "listening kafka=" "$log" && break
        sleep 0.1
    done
    bootstrap=$(grep -o 'kafka=[^ ]*' "$log" | tail -1 | cut -d= -f2)
    http=$(grep -o 'http=[^ ]*' "$log" | tail -1 | cut -d= -f2)
    [ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$log"; exit 1; }
}
stop_broker() {
    kill "$broker_pid" && wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
}
metric() {
    python3 -c "import sys, urllib.request
for line in urllib.request.urlopen('http://$http/metrics').read().decode().splitlines():
    name, _, value = line.partition(' ')
    if name == sys.argv[1]: print(int(float(value)))" "$1"
}
# The first offset of the local log: the base of its first segment file.
local_start() { ls "$data_dir"/partitions/*/0/*.log | head -1 | xargs basename | sed 's/\.log$//; s/^0*//; s/^$/0/'; }

echo "== machine" | tee "$out/tiered.txt"
{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} | tee -a "$out/tiered.txt"
data_dir="$(mktemp -d "$data_root/tiered.XXXXXX")"
echo "== physical reference: the data disk" | tee -a "$out/tiered.txt"
"$bin/loadgen" disk-baseline --dir "$data_dir" --duration 5 | grep 'sequential read' | tee -a "$out/tiered.txt"

replay() {  # LABEL [ENV=VALUE...]: R against one store
    local label="$1"; shift
    rm -rf "$data_dir"; mkdir -p "$data_dir"
    start_broker "$out/broker-$label.log" "$@"
    "$bin/broker" topic create replay --partitions 1 --brokers "$bootstrap" \
        --config remote.storage.enable=true --config segment.bytes=8388608 \
        --config local.retention.bytes=8388608 >/dev/null
    local messages=$((mbytes * 1024))
    "$bin/loadgen" produce --bootstrap "$bootstrap" --topic replay --partitions 1 --producers 1 \
        --message-bytes 1024 --batch-bytes 1048576 --linger-ms 5 --messages "$messages" \
        --warmup 0 --duration 600 >/dev/null
    for _ in $(seq 600); do
        [ "$(metric remote_upload_lag_bytes)" -eq 0 ] && [ "$(local_start)" -gt $((messages * 8 / 10)) ] && break
        sleep 0.5
    done
    local uploaded stop
    uploaded=$(metric remote_uploaded_bytes_total)
    stop_broker
    start_broker "$out/broker-$label.log" "$@"
    stop=$(local_start)
    echo "$label: $((uploaded >> 20)) MiB uploaded; reading offsets 0..$stop from the store (cold cache)" | tee -a "$out/tiered.txt"
    "$python" scripts/tiered_bench.py "$bootstrap" replay "$stop" "$label" | tee -a "$out/tiered.txt"
    echo "$label: cache hits $(metric remote_cache_hits_total), misses $(metric remote_cache_misses_total), read errors $(metric remote_read_errors_total)" | tee -a "$out/tiered.txt"
    stop_broker
}

echo "== R: replaying old data from the store" | tee -a "$out/tiered.txt"
replay local
"$venv/bin/moto_server" -H 127.0.0.1 -p 0 >"$out/moto.log" 2>&1 &
moto_pid=$!
for _ in $(seq 100); do grep -q "Running on" "$out/moto.log" && break; sleep 0.1; done
moto=$(grep -o 'Running on http://[^ ]*' "$out/moto.log" | head -1 | sed 's/Running on //')
curl -s -X PUT "$moto/tiered-bench" >/dev/null
replay s3 BROKER_REMOTE_STORE=s3 BROKER_REMOTE_S3_BUCKET=tiered-bench \
    BROKER_REMOTE_S3_ENDPOINT="$moto" AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
# moto's own rate: one 8 MiB segment object to curl (its listing names one).
object=$(curl -s "$moto/tiered-bench?list-type=2" | grep -o '<Key>[^<]*\.log</Key>' | head -1 | sed 's/<[^>]*>//g')
if [ -n "$object" ]; then
    curl -s -o /dev/null -w "moto alone: one 8 MiB object to curl at %{speed_download} B/s, first byte %{time_starttransfer} s\n" \
        "$moto/tiered-bench/$object" | tee -a "$out/tiered.txt"
fi

echo "== P: producer latency, uploads running vs not ($rate msg/s of 100 B, acks=all)" | tee -a "$out/tiered.txt"
rm -rf "$data_dir"; mkdir -p "$data_dir"
start_broker "$out/broker-P.log"
"$bin/broker" topic create plain --partitions 1 --brokers "$bootstrap" >/dev/null
"$bin/broker" topic create tiered --partitions 1 --brokers "$bootstrap" \
    --config remote.storage.enable=true --config segment.bytes=1048576 \
    --config local.retention.bytes=4194304 >/dev/null
for round in 1 2; do
    for topic in plain tiered; do
        before=$(metric remote_uploaded_segments_total)
        "$bin/loadgen" produce --bootstrap "$bootstrap" --topic "$topic" --partitions 1 --producers 1 \
            --message-bytes 100 --linger-ms 1 --rate "$rate" --duration "$seconds" --warmup 3 \
            --acks all --out "$out" --name "P-$topic-$round" >/dev/null
        after=$(metric remote_uploaded_segments_total)
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['produce_latency_us']
print(f\"P-{sys.argv[2]}-{sys.argv[3]}: {d['produce_msgs_per_s']:.0f} msg/s, p50 {l['p50']/1000:.2f} p99 {l['p99']/1000:.2f} p99.9 {l['p99.9']/1000:.2f} ms, segments uploaded meanwhile: {sys.argv[4]}\")" \
            "$out/P-$topic-$round.json" "$topic" "$round" "$((after - before))" | tee -a "$out/tiered.txt"
    done
done
stop_broker
echo "results: $out/tiered.txt"
