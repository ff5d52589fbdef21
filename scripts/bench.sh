#!/usr/bin/env bash
# The benchmark suite. Measures this machine's physical references (raw
# O_DIRECT write bandwidth of the data disk, loopback TCP bandwidth), then
# starts a fresh broker and runs the standard workloads with loadgen:
#   A  100-byte messages, as fast as possible (acks=all)
#   B  1 KiB messages, as fast as possible (acks=all)
#   C  latency at half of A's rate (open loop, end to end)
#   D  fan-out: five readers of one topic at a quarter of A's rate
# A and B run with idempotent producers (every Kafka client's default) and
# again right after with plain ones (A0, B0): the cost of idempotence.
# Single node, acks=all (fdatasync'd before the answer), one topic per
# workload with one partition per shard. Throughput runs use one producer
# per core with 1 MiB batches (linger 5 ms); the latency run one producer
# with linger 1 ms (docs/benchmarks.md says why).
# Writes results/<UTC time>/ (interval logs, JSON summaries, references,
# dashboard.html) and prints each figure beside its physical limit.
#
# Usage: scripts/bench.sh [--seconds N] [--data-dir DIR] [--shards N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

seconds=15
settle=10
data_root=target/bench-data
shards=0
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        --shards) shards="$2"; shift 2 ;;
        *) echo "usage: scripts/bench.sh [--seconds N] [--data-dir DIR] [--shards N]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen -p perf
bin=target/release
results="results/$(date -u +%Y-%m-%dT%H%M%SZ)"
mkdir -p "$results" "$data_root"
data_dir="$(mktemp -d "$data_root/run.XXXXXX")"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$data_dir"
}
trap cleanup EXIT

echo "== machine"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
    echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "kernel: $(uname -r)"
    echo "data disk: $(df -h "$data_dir" | awk 'NR==2 {print $1, $2}')"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} | tee "$results/machine.txt"

echo "== physical references (same run)"
disk_lines=$("$bin/loadgen" disk-baseline --dir "$data_dir" --duration 5)
disk_line=$(echo "$disk_lines" | head -1)
sync_line=$(echo "$disk_lines" | tail -1)
tcp_line=$("$bin/loadgen" tcp-baseline --duration 5)
echo "$disk_lines" | tee "$results/references.txt"
echo "$tcp_line" | tee -a "$results/references.txt"
disk_mbps=$(echo "$disk_line" | grep -o '[0-9]* MB/s' | grep -o '[0-9]*')
tcp_mbps=$(echo "$tcp_line" | grep -o '[0-9]* MB/s' | head -1 | grep -o '[0-9]*')
if command -v fio >/dev/null; then
    fio --name=seqwrite --directory="$data_dir" --rw=write --bs=1m --size=2g --direct=1 \
        --ioengine=io_uring --iodepth=8 --end_fsync=1 --output-format=terse 2>/dev/null \
        | awk -F';' '{printf "fio: sequential O_DIRECT write %.0f MB/s\n", $48/1000}' | tee -a "$results/references.txt"
    rm -f "$data_dir"/seqwrite*
fi
if command -v iperf3 >/dev/null; then
    iperf3 -s -1 -p 25201 >/dev/null 2>&1 &
    sleep 0.5
    iperf3 -c 127.0.0.1 -p 25201 -t 5 -f m 2>/dev/null | awk '/receiver/ {print "iperf3: loopback " $7 " Mbit/s"}' | tee -a "$results/references.txt"
fi

echo "== broker"
"$bin/broker" --data-dir "$data_dir" --kafka-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --shards "$shards" >"$results/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do
    grep -q "listening kafka=" "$results/broker.log" && break
    sleep 0.1
done
bootstrap=$(grep -o 'kafka=[^ ]*' "$results/broker.log" | head -1 | cut -d= -f2)
partitions=$shards
[ "$partitions" -gt 0 ] || partitions=$(nproc)
cores=$(nproc)
[ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$results/broker.log"; exit 1; }
echo "broker at $bootstrap (log: $results/broker.log)"

common=(--bootstrap "$bootstrap" --duration "$seconds" --warmup 3 --acks all --out "$results"
        --partitions "$partitions")
throughput=(--producers "$cores" --batch-bytes 1048576 --linger-ms 5)
latency=(--producers 1 --linger-ms 1)
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$@"; }

echo "== A: 100 B messages, max throughput"
"$bin/loadgen" produce "${common[@]}" --name A --topic bench-a --message-bytes 100 "${throughput[@]}"
rate_a=$(json "$results/A.json" "int(produce_msgs_per_s)")
sleep "$settle"
echo "== A0: as A, producers not idempotent"
"$bin/loadgen" produce "${common[@]}" --name A0 --topic bench-a0 --message-bytes 100 --idempotence off "${throughput[@]}"


# The disk absorbs the writes before it: latency runs start from a quiet disk.
sleep "$settle"
echo "== C: produce latency at half of A's rate ($((rate_a / 2)) msg/s)"
"$bin/loadgen" produce "${common[@]}" --name C --topic bench-c --message-bytes 100 --rate $((rate_a / 2)) "${latency[@]}"

sleep "$settle"
echo "== D: fan-out, five readers at a quarter of A's rate ($((rate_a / 4)) msg/s), end to end"
"$bin/loadgen" e2e "${common[@]}" --name D --topic bench-d --message-bytes 100 \
    --rate $((rate_a / 4)) --groups 5 "${latency[@]}"

sleep "$settle"
echo "== B: 1 KiB messages, max throughput"
"$bin/loadgen" produce "${common[@]}" --name B --topic bench-b --message-bytes 1024 "${throughput[@]}"
sleep "$settle"
echo "== B0: as B, producers not idempotent"
"$bin/loadgen" produce "${common[@]}" --name B0 --topic bench-b0 --message-bytes 1024 --idempotence off "${throughput[@]}"

kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""

"$bin/perf" --title "Benchmarks $(basename "$results")" --out "$results/dashboard.html" \
    --svg "$results/latency-percentiles.svg" \
    "$results"/A-produce.hlog "$results"/B-produce.hlog "$results"/C-produce.hlog "$results"/D-produce.hlog "$results"/D-e2e.hlog

echo "== results ($results)"
python3 - "$results" "$disk_mbps" "$tcp_mbps" "$sync_line" <<'EOF' | tee "$results/table.txt"
import json, sys
results, disk, tcp, sync = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
sync = sync.split("latency: ")[-1]
load = lambda n: json.load(open(f"{results}/{n}.json"))
a, b, c, d = load("A"), load("B"), load("C"), load("D")
a0, b0 = load("A0"), load("B0")
ms = lambda us: us / 1000.0
rows = [
    ("A 100 B, acks=all", f"{a['produce_msgs_per_s']:,.0f} msg/s ({a['produce_mb_per_s']:.0f} MB/s)",
     f"disk {disk:.0f} MB/s", f"{a['produce_mb_per_s'] / disk:.0%}", "target 1,000,000 msg/s"),
    ("B 1 KiB, acks=all", f"{b['produce_mb_per_s']:.0f} MB/s ({b['produce_msgs_per_s']:,.0f} msg/s)",
     f"disk {disk:.0f} MB/s / TCP {tcp:.0f} MB/s", f"{b['produce_mb_per_s'] / disk:.0%} / {b['produce_mb_per_s'] / tcp:.0%}",
     "target 500 MB/s"),
    (f"C at {c['produce_msgs_per_s']:,.0f} msg/s", 
     f"produce p50 {ms(c['produce_latency_us']['p50']):.2f} p99 {ms(c['produce_latency_us']['p99']):.2f} p99.9 {ms(c['produce_latency_us']['p99.9']):.2f} ms",
     f"disk sync {sync}", "-", "target p99 <= 5 ms, p99.9 <= 20 ms"),
    ("A0 as A, not idempotent", f"{a0['produce_msgs_per_s']:,.0f} msg/s", "A idempotent",
     f"A/A0 {a['produce_msgs_per_s'] / a0['produce_msgs_per_s']:.0%}", "idempotence's cost"),
    ("B0 as B, not idempotent", f"{b0['produce_mb_per_s']:.0f} MB/s", "B idempotent",
     f"B/B0 {b['produce_mb_per_s'] / b0['produce_mb_per_s']:.0%}", "idempotence's cost"),
    ("D fan-out x5", f"reads {d['consume_msgs_per_s']:,.0f} msg/s = {d['consume_msgs_per_s'] / max(d['produce_msgs_per_s'], 1):.1f}x ingest ({d['consume_mb_per_s']:.0f} MB/s); e2e p99 {ms(d['e2e_latency_us']['p99']):.2f} ms",
     f"TCP {tcp:.0f} MB/s", f"{d['consume_mb_per_s'] / tcp:.0%}", "target 3x ingest"),
]
width = [max(len(r[i]) for r in rows) for i in range(5)]
for r in rows:
    print("  ".join(r[i].ljust(width[i]) for i in range(5)))
EOF
echo "dashboard: $results/dashboard.html"
