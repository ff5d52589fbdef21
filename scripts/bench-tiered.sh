#!/usr/bin/env bash
# Tiered storage (docs/tiered-storage.md), measured in one run:
#   R  replaying old data: a topic produced (--mbytes of 16 KiB records)
#      and tiered down to an 8 MiB local window, the broker restarted (a
#      cold chunk cache), then read from offset 0 to the local start with
#      confluent-kafka: the first record's latency and the read's rate,
#      from the local-directory store and from an S3 server (moto, the
#      test command's, on 127.0.0.1); beside the same read of an untiered
#      copy from local disk (same client, same run: what the client and
#      the broker's disk path reach), the disk's sequential read rate and
#      moto's own rate serving one object to curl. In front of S3, the
#      broker is restarted once more and the read repeated: from the disk
#      cache of remote reads (memory caches cold).
#   P  producers' latency with uploads running vs not: one producer at
#      --rate 100-byte records (acks=all, linger 1 ms, as bench.sh's C) to
#      a plain topic and to a tiered one, both with 4 MiB segments and a
#      16 MiB local window (the tiered one's segments uploaded as they
#      seal), alternated twice, on one broker.
# Writes results/<UTC time>-tiered/tiered.txt (or to --out DIR; results/ is
# local, not tracked by git).
#
# Usage: scripts/bench-tiered.sh [--mbytes N] [--rate MSGS_PER_S] [--seconds N] [--data-dir DIR] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

mbytes=512
record_bytes=16384
rate=100000
seconds=20
data_root=target/bench-data
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-tiered"
while [ $# -gt 0 ]; do
    case "$1" in
        --mbytes) mbytes="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-tiered.sh [--mbytes N] [--rate MSGS_PER_S] [--seconds N] [--data-dir DIR] [--out DIR]" >&2; exit 2 ;;
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
    local lives
    lives=$(grep -c "listening kafka=" "$log" 2>/dev/null || true)
    env BROKER_RETENTION_CHECK_INTERVAL_MS=500 "$@" "$bin/broker" --data-dir "$data_dir" \
        --kafka-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 >>"$log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do
        [ "$(grep -c "listening kafka=" "$log")" -gt "${lives:-0}" ] && break
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
# The first offset of a topic's local log: the base of its first segment file.
local_start() {
    python3 - "$data_dir" "$1" <<'PY'
import glob, os, sys
logs = sorted(glob.glob(os.path.join(sys.argv[1], "partitions", sys.argv[2] + ".*", "0", "*.log")))
print(int(os.path.basename(logs[0])[:-4]) if logs else 0)
PY
}

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
    "$bin/broker" topic create untiered --partitions 1 --brokers "$bootstrap" \
        --config segment.bytes=8388608 >/dev/null
    local messages=$((mbytes * 1024 * 1024 / record_bytes))
    for topic in replay untiered; do
        "$bin/loadgen" produce --bootstrap "$bootstrap" --topic "$topic" --partitions 1 --producers 1 \
            --message-bytes "$record_bytes" --batch-bytes 1048576 --linger-ms 5 --messages "$messages" \
            --warmup 0 --duration 600 >/dev/null
    done
    for _ in $(seq 600); do
        [ "$(metric remote_upload_lag_bytes)" -eq 0 ] && [ "$(local_start replay)" -gt $((messages * 8 / 10)) ] && break
        sleep 0.5
    done
    local uploaded stop
    uploaded=$(metric remote_uploaded_bytes_total)
    stop_broker
    start_broker "$out/broker-$label.log" "$@"
    stop=$(local_start replay)
    echo "$label: $((uploaded >> 20)) MiB uploaded; reading offsets 0..$stop from the store (cold cache)" | tee -a "$out/tiered.txt"
    "$python" scripts/tiered_bench.py "$bootstrap" replay "$stop" "$label" | tee -a "$out/tiered.txt"
    "$python" scripts/tiered_bench.py "$bootstrap" untiered "$stop" "$label-untiered-from-disk" | tee -a "$out/tiered.txt"
    echo "$label: cache hits $(metric remote_cache_hits_total), misses $(metric remote_cache_misses_total), read errors $(metric remote_read_errors_total)" | tee -a "$out/tiered.txt"
    # The broker's side: its remote reads' bytes over the time they took
    # (what the store path delivers, whatever the client does with it).
    python3 -c "import sys, urllib.request
m = {}
for line in urllib.request.urlopen('http://$http/metrics').read().decode().splitlines():
    if line.startswith('#'): continue
    name, _, value = line.rpartition(' ')
    m[name] = float(value)
reads, spent, read_bytes = m['remote_read_latency_seconds_count'], m['remote_read_latency_seconds_sum'], m['remote_read_bytes_total']
print(f'$label broker side: {int(reads)} remote reads, {spent / max(reads, 1) * 1000:.2f} ms each on average, {read_bytes / max(spent, 1e-9) / 1e6:.0f} MB/s while reading')" | tee -a "$out/tiered.txt"
    stop_broker
    if [ "$label" = s3 ]; then
        start_broker "$out/broker-$label.log" "$@"
        echo "$label-disk-cache: restarted; the same read, from the disk cache" | tee -a "$out/tiered.txt"
        "$python" scripts/tiered_bench.py "$bootstrap" replay "$stop" "$label-disk-cache" | tee -a "$out/tiered.txt"
        echo "$label-disk-cache: disk cache hits $(metric remote_disk_cache_hits_total), misses $(metric remote_disk_cache_misses_total)" | tee -a "$out/tiered.txt"
        stop_broker
    fi
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
# moto's own rate: every segment object read whole by boto3 (moto's own
# client library), one at a time, as fast as it serves them.
"$python" - "$moto" <<'PY' | tee -a "$out/tiered.txt"
import sys, time
import boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="bench",
                  aws_secret_access_key="bench", region_name="us-east-1")
keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="tiered-bench")
        for o in page.get("Contents", []) if o["Key"].endswith(".log")]
started, first, total = time.monotonic(), None, 0
for key in keys:
    body = s3.get_object(Bucket="tiered-bench", Key=key)["Body"]
    chunk = body.read(1)
    first = first if first is not None else time.monotonic() - started
    total += len(chunk) + len(body.read())
seconds = time.monotonic() - started
print(f"moto alone (boto3, {len(keys)} segment objects): first byte {first * 1000:.1f} ms, {total / seconds / 1e6:.1f} MB/s read whole")
# As the broker reads them: 1 MiB ranges.
started, total = time.monotonic(), 0
for key in keys[:8]:
    size = s3.head_object(Bucket="tiered-bench", Key=key)["ContentLength"]
    for at in range(0, size, 1 << 20):
        end = min(at + (1 << 20), size) - 1
        total += len(s3.get_object(Bucket="tiered-bench", Key=key, Range=f"bytes={at}-{end}")["Body"].read())
seconds = time.monotonic() - started
print(f"moto alone (boto3, 1 MiB ranges of 8 objects, one at a time): {total / seconds / 1e6:.1f} MB/s")
PY

echo "== P: producer latency, uploads running vs not ($rate msg/s of 100 B, acks=all)" | tee -a "$out/tiered.txt"
rm -rf "$data_dir"; mkdir -p "$data_dir"
start_broker "$out/broker-P.log"
# The same segments and local window for both: only the uploads differ.
"$bin/broker" topic create plain --partitions 1 --brokers "$bootstrap" \
    --config segment.bytes=4194304 --config retention.bytes=16777216 >/dev/null
"$bin/broker" topic create tiered --partitions 1 --brokers "$bootstrap" \
    --config remote.storage.enable=true --config segment.bytes=4194304 \
    --config local.retention.bytes=16777216 >/dev/null
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
