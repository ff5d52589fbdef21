#!/usr/bin/env bash
# The benchmark suite. Measures this machine's physical references (raw
# O_DIRECT write bandwidth of the data disk, loopback TCP bandwidth), then
# starts a fresh broker and runs the standard workloads with loadgen:
#   A  100-byte messages, as fast as possible (acks=all)
#   B  1 KiB messages, as fast as possible (acks=all)
#   C  latency at half of A's rate (open loop; A counted at 1.6 M msg/s at most)
#   D  fan-out: five readers of one topic at a quarter of A's rate (same cap)
# A and B run with idempotent producers (every Kafka client's default) and
# again right after with plain ones (A0, B0): the cost of idempotence; B
# once more with transactional producers committing every 100 ms (BT).
# A and B run again with librdkafka's rdkafka_performance as the client,
# and E consumes B's topic with both clients, so loadgen's own limits show.
# F runs the peer comparison's workloads with rdkafka_performance: one
# producer or consumer on one partition, 1000-message batches; consume
# right after producing (memory), then after a broker restart (disk).
# T (scripts/bench-tls.sh) runs A and B over TLS and plaintext, and reads B back.
# S (scripts/bench-single.sh) runs one producer and one consumer on one
# partition with loadgen and rdkafka_performance side by side (100 B and
# 1 KiB, idempotent and not).
# Q (scripts/bench-share.sh) runs queues: 1, 4 and 16 share consumers of one
# partition against a consumer group's, and the redelivery latency.
# R and P (scripts/bench-tiered.sh) run tiered storage: replays from the
# local and S3 stores, producers' latency with uploads running vs not.
# Single node, acks=all (fdatasync'd before the answer), one topic per
# workload with one partition per shard, the broker's cache filled first
# (as a long-running broker's is). Throughput runs use one producer
# per core with 1 MiB batches (linger 5 ms); the latency run one producer
# with linger 1 ms (docs/benchmarks.md says why).
# Writes results/<UTC time>/ (interval logs, JSON summaries, references,
# dashboard.html; results/ is local, not tracked by git) and prints each
# figure beside its physical limit and the broker's CPU seconds per GB
# moved (utime+stime over the measured window).
#
# Usage: scripts/bench.sh [--seconds N] [--data-dir DIR] [--shards N] [--cache-bytes N]
# (--cache-bytes: the broker's log_cache_bytes; 0, the default, is its own default)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

seconds=15
settle=10
data_root=target/bench-data
shards=0
cache_bytes=0
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        --shards) shards="$2"; shift 2 ;;
        --cache-bytes) cache_bytes="$2"; shift 2 ;;
        *) echo "usage: scripts/bench.sh [--seconds N] [--data-dir DIR] [--shards N] [--cache-bytes N]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen -p perf

# librdkafka's rdkafka_performance, the neutral second client.
source scripts/rdkafka-perf.sh
bin=target/release
results="results/$(date -u +%Y-%m-%dT%H%M%SZ)"
mkdir -p "$results" "$data_root"
data_dir="$(mktemp -d "$data_root/run.XXXXXX")"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$data_dir" "$data_dir.floor"
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
    echo "log_cache_bytes: $cache_bytes (0: the broker's default, a quarter of memory)"
} | tee "$results/machine.txt"

echo "== physical references (same run)"
disk_lines=$("$bin/loadgen" disk-baseline --dir "$data_dir" --duration 5)
disk_line=$(echo "$disk_lines" | head -1)
read_line=$(echo "$disk_lines" | grep 'sequential read')
sync_line=$(echo "$disk_lines" | tail -1)
tcp_line=$("$bin/loadgen" tcp-baseline --duration 5)
echo "$disk_lines" | tee "$results/references.txt"
echo "$tcp_line" | tee -a "$results/references.txt"
disk_mbps=$(echo "$disk_line" | grep -o '[0-9]* MB/s' | grep -o '[0-9]*')
read_mbps=$(echo "$read_line" | grep -o '[0-9]* MB/s' | grep -o '[0-9]*')
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
start_broker() {  # on $data_dir; sets broker_pid and bootstrap
    BROKER_LOG_CACHE_BYTES="$cache_bytes" "$bin/broker" --data-dir "$data_dir" \
        --kafka-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
        --shards "$shards" >>"$results/broker.log" 2>&1 &
    broker_pid=$!
    local lives=$1
    for _ in $(seq 100); do
        [ "$(grep -c "listening kafka=" "$results/broker.log")" -ge "$lives" ] && break
        sleep 0.1
    done
    bootstrap=$(grep -o 'kafka=[^ ]*' "$results/broker.log" | tail -1 | cut -d= -f2)
}
start_broker 1
partitions=$shards
[ "$partitions" -gt 0 ] || partitions=$(nproc)
cores=$(nproc)
[ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$results/broker.log"; exit 1; }
echo "broker at $bootstrap (log: $results/broker.log)"

warmup=3
common=(--bootstrap "$bootstrap" --duration "$seconds" --warmup "$warmup" --acks all --out "$results"
        --partitions "$partitions")
# The broker's CPU time (utime+stime from /proc) over a workload's measured
# window, sampled beside loadgen: $results/NAME.cpu, in seconds. Per GB
# moved it is steadier than a rate on a shared machine, and it is what a
# fleet pays for.
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }
sample_cpu() {  # NAME [WARMUP SECONDS]
    ( sleep "${2:-$warmup}"; t0=$(cpu_ticks); sleep "${3:-$seconds}"; t1=$(cpu_ticks)
      awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.3f\n", d / hz }' >"$results/$1.cpu" ) &
    sampler=$!
}
throughput=(--producers "$cores" --batch-bytes 1048576 --linger-ms 5)
latency=(--producers 1 --linger-ms 1)
# A workload's topic is deleted once no later workload reads it: the
# suite writes about 40 GB, more than a small disk holds at once.
drop_topic() { "$bin/broker" topic delete "$1" --brokers "$bootstrap" >/dev/null || true; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$@"; }

http=$(grep -o 'http=[^ ]*' "$results/broker.log" | tail -1 | cut -d= -f2)
fill_cache "$bootstrap" bench-warm "$partitions"

echo "== A: 100 B messages, max throughput"
sample_cpu A
"$bin/loadgen" produce "${common[@]}" --name A --topic bench-a --message-bytes 100 "${throughput[@]}"
wait "$sampler"
rate_a=$(json "$results/A.json" "int(produce_msgs_per_s)")
# C and D run at fractions of A's rate, A counted at 1.6 M msg/s at most:
# their one producer with linger 1 ms (small requests) kept up at 0.75-0.96
# M msg/s on this kind of machine, and past its limit a run measures the
# producer's own queue, not the broker (seen at 1.85 M: seconds of p50).
load_base=$(( rate_a < 1600000 ? rate_a : 1600000 ))
sleep "$settle"
echo "== A0: as A, producers not idempotent"
sample_cpu A0
"$bin/loadgen" produce "${common[@]}" --name A0 --topic bench-a0 --message-bytes 100 --idempotence off "${throughput[@]}"
wait "$sampler"
drop_topic bench-a0


# The disk absorbs the writes before it: latency runs start from a quiet disk.
sleep "$settle"
# The disk alone under C's load (its rate, group-committed to one file per
# partition, no broker): what any acks=all latency on this disk sits on.
# A short probe misses the stalls of a virtual disk; this runs as long as C.
echo "== C's disk floor: the disk alone at C's rate (no broker)"
mkdir -p "$data_dir.floor"
"$bin/loadgen" disk-floor --dir "$data_dir.floor" --rate $((load_base / 2)) --message-bytes 100 \
    --partitions "$partitions" --duration "$seconds" | tee "$results/C-disk-floor.txt" \
    || echo "disk floor: failed" | tee "$results/C-disk-floor.txt"
sleep "$settle"
echo "== C: produce latency at half of A's rate, capped ($((load_base / 2)) msg/s)"
# The broker's own flushes over C (write + fdatasync), from /metrics.
flushes() {  # all, and those within 25 ms (a bound of storage's FLUSH_BUCKET_BOUNDS_SECONDS)
    local all fast
    all=$(metric log_flush_latency_seconds_count); fast=$(metric 'log_flush_latency_seconds_bucket{le="0.025"}')
    echo "${all:-0} ${fast:-0}"
}
flushes_before=$(flushes)
sample_cpu C
# A 50 us pacing tick: the floor's messages arrive on their own times, and
# the default 1 ms tick would add up to 1 ms to C's (run 55).
"$bin/loadgen" produce "${common[@]}" --name C --topic bench-c --message-bytes 100 --rate $((load_base / 2)) \
    --pacing-tick-us 50 "${latency[@]}"
wait "$sampler"
read -r count_after fast_after <<<"$(flushes)"
read -r count_before fast_before <<<"$flushes_before"
echo "broker flushes during C (warm-up included): $((count_after - count_before)), over 25 ms: $(( (count_after - count_before) - (fast_after - fast_before) ))" \
    | tee "$results/C-flushes.txt"
drop_topic bench-c

sleep "$settle"
echo "== D: fan-out, five readers at a quarter of A's rate, capped ($((load_base / 4)) msg/s), end to end"
sample_cpu D
"$bin/loadgen" e2e "${common[@]}" --name D --topic bench-d --message-bytes 100 \
    --rate $((load_base / 4)) --groups 5 "${latency[@]}"
wait "$sampler"
drop_topic bench-d

sleep "$settle"
echo "== B: 1 KiB messages, max throughput"
sample_cpu B
"$bin/loadgen" produce "${common[@]}" --name B --topic bench-b --message-bytes 1024 "${throughput[@]}"
wait "$sampler"
sleep "$settle"
echo "== B0: as B, producers not idempotent"
sample_cpu B0
"$bin/loadgen" produce "${common[@]}" --name B0 --topic bench-b0 --message-bytes 1024 --idempotence off "${throughput[@]}"
wait "$sampler"
drop_topic bench-b0
sleep "$settle"
echo "== BT: as B, producers transactional, each committing every 100 ms"
sample_cpu BT
"$bin/loadgen" produce "${common[@]}" --name BT --topic bench-bt --message-bytes 1024 --transaction-ms 100 "${throughput[@]}"
wait "$sampler"
drop_topic bench-bt

# The same produce workloads through librdkafka (one rdkafka_performance
# process: its own threads, idempotent, acks=all, the same linger and batch
# size), about as long as loadgen's runs; then both clients consume B's
# topic (2 partitions, 1 KiB) from its start. Each prints its own figures.
rdkafka() {  # NAME ARGS...: runs it; its last table line in NAME.rdkafka,
             # the broker's CPU seconds over the whole run in NAME.cpu
    local name=$1 t0 t1; shift
    t0=$(cpu_ticks)
    "$rdkafka_perf" -b "$bootstrap" -u "$@" 2>&1 | grep '^|' | tail -1 | tee "$results/$name.rdkafka"
    t1=$(cpu_ticks)
    awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.3f\n", d / hz }' >"$results/$name.cpu"
}
rdkafka_produce=(-P -a -1 -X enable.idempotence=true -X linger.ms=5 -X batch.size=1048576)
sleep "$settle"
echo "== A-rdkafka: as A, with rdkafka_performance"
rdkafka A-rdkafka "${rdkafka_produce[@]}" -t bench-a -s 100 -c $((rate_a * (seconds + warmup)))
drop_topic bench-a
sleep "$settle"
echo "== B-rdkafka: as B, with rdkafka_performance"
rate_b=$(json "$results/B.json" "int(produce_msgs_per_s)")
rdkafka B-rdkafka "${rdkafka_produce[@]}" -t bench-b -s 1024 -c $((rate_b * (seconds + warmup)))
sleep "$settle"
echo "== E: consume B's topic from its start (2 partitions, 1 KiB), loadgen"
# Short, so the consumer does not run out of what B and B-rdkafka wrote.
sample_cpu E 1 5
"$bin/loadgen" consume --bootstrap "$bootstrap" --topic bench-b --partitions "$partitions" --from earliest \
    --consumers 1 --duration 5 --warmup 1 --out "$results" --name E
wait "$sampler"
echo "== E-rdkafka: the same with rdkafka_performance"
held=$(json "$results/B.json" "int(produced)")
rdkafka E-rdkafka -C -t bench-b $(seq -f '-p %g' 0 $((partitions - 1))) -o beginning -c "$held"
drop_topic bench-b

# F: the peer comparison (docs/benchmarks.md): 2.6 GB of 1 KiB.
f_count=2600000
f_produce=("${rdkafka_produce[@]}" -X batch.num.messages=1000 -p 0)
sleep "$settle"
echo "== F-produce-1k: one producer, one partition, 1 KiB"
rdkafka F-produce-1k "${f_produce[@]}" -t bench-f -s 1024 -c "$f_count"
sleep "$settle"
echo "== F-produce-100: one producer, one partition, 100 B"
rdkafka F-produce-100 "${f_produce[@]}" -t bench-f100 -s 100 -c $((f_count * 4))
drop_topic bench-f100
echo "== F-consume-memory: one consumer (librdkafka defaults), one partition, 1 KiB, just written"
rdkafka F-consume-memory -C -t bench-f -p 0 -o beginning -c "$f_count"
kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true
start_broker 2
echo "== F-consume-disk: the same after a broker restart (nothing in its memory)"
rdkafka F-consume-disk -C -t bench-f -p 0 -o beginning -c "$f_count"

kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""

"$bin/perf" --title "Benchmarks $(basename "$results")" --out "$results/dashboard.html" \
    --svg "$results/latency-percentiles.svg" \
    "$results"/A-produce.hlog "$results"/B-produce.hlog "$results"/C-produce.hlog "$results"/D-produce.hlog "$results"/D-e2e.hlog

echo "== results ($results)"
python3 - "$results" "$disk_mbps" "$tcp_mbps" "$sync_line" "$read_mbps" <<'EOF' | tee "$results/table.txt"
import json, sys
results, disk, tcp, sync = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
disk_read = float(sys.argv[5])
sync = sync.split("latency: ")[-1]
def disk_floor():
    """The message percentiles of the disk alone at C's rate: the text,
    and p99 and p99.9 in ms (None if the floor did not run)."""
    try:
        line = open(f"{results}/C-disk-floor.txt").read()
    except OSError:
        return "-", None
    if "message " not in line:
        return "-", None
    text = line.split("message ")[-1].split(";")[0]
    words = text.split()
    return text, (float(words[words.index("p99") + 1]), float(words[words.index("p99.9") + 1]))
floor, floor_ms = disk_floor()
try:
    flushes = open(f"{results}/C-flushes.txt").read().split(": ", 1)[1].strip()
except (OSError, IndexError):
    flushes = "-"
load = lambda n: json.load(open(f"{results}/{n}.json"))
a, b, c, d = load("A"), load("B"), load("C"), load("D")
a0, b0 = load("A0"), load("B0")
try:
    bt = load("BT")
except OSError:
    bt = None
ms = lambda us: us / 1000.0
def over_floor(run):
    """C's latency above the disk's own at the same rate (issue 36 part 4:
    the broker's overhead is what it adds to the disk it waits for)."""
    if floor_ms is None:
        return "-"
    p99 = ms(run["produce_latency_us"]["p99"]) - floor_ms[0]
    p999 = ms(run["produce_latency_us"]["p99.9"]) - floor_ms[1]
    met = "met" if p99 <= 1.0 and p999 <= 2.0 else "missed"
    return f"{p99:+.2f} / {p999:+.2f} ms over the floor ({met})"
def cpu(name, run, moved_mb_per_s):
    """The broker's CPU seconds per GB moved (in + out) over the window."""
    try:
        seconds = float(open(f"{results}/{name}.cpu").read())
    except (OSError, ValueError):
        return "cpu -"
    gb = moved_mb_per_s * run["measured_seconds"] / 1000.0
    return f"cpu {seconds / gb:.2f} s/GB" if gb > 0 else "cpu -"
cpus = [cpu("A", a, a["produce_mb_per_s"]), cpu("B", b, b["produce_mb_per_s"]),
        cpu("C", c, c["produce_mb_per_s"]), cpu("A0", a0, a0["produce_mb_per_s"]),
        cpu("B0", b0, b0["produce_mb_per_s"]),
        cpu("D", d, d["produce_mb_per_s"] + d["consume_mb_per_s"])]
rows = [
    ("A 100 B, acks=all", f"{a['produce_msgs_per_s']:,.0f} msg/s ({a['produce_mb_per_s']:.0f} MB/s)",
     f"disk {disk:.0f} MB/s", f"{a['produce_mb_per_s'] / disk:.0%}", "target 1,000,000 msg/s"),
    ("B 1 KiB, acks=all", f"{b['produce_mb_per_s']:.0f} MB/s ({b['produce_msgs_per_s']:,.0f} msg/s)",
     f"disk {disk:.0f} MB/s / TCP {tcp:.0f} MB/s", f"{b['produce_mb_per_s'] / disk:.0%} / {b['produce_mb_per_s'] / tcp:.0%}",
     "target 500 MB/s"),
    (f"C at {c['produce_msgs_per_s']:,.0f} msg/s",
     f"produce p50 {ms(c['produce_latency_us']['p50']):.2f} p99 {ms(c['produce_latency_us']['p99']):.2f} p99.9 {ms(c['produce_latency_us']['p99.9']):.2f} ms",
     f"disk floor {floor}; probe {sync}; broker flushes {flushes}", over_floor(c),
     "target p99 <= floor's + 1 ms, p99.9 <= floor's + 2 ms"),
    ("A0 as A, not idempotent", f"{a0['produce_msgs_per_s']:,.0f} msg/s", "A idempotent",
     f"A/A0 {a['produce_msgs_per_s'] / a0['produce_msgs_per_s']:.0%}", "idempotence's cost"),
    ("B0 as B, not idempotent", f"{b0['produce_mb_per_s']:.0f} MB/s", "B idempotent",
     f"B/B0 {b['produce_mb_per_s'] / b0['produce_mb_per_s']:.0%}", "idempotence's cost"),
    *([("BT as B, transactions of 100 ms", f"{bt['produce_mb_per_s']:.0f} MB/s, p99 {ms(bt['produce_latency_us']['p99']):.1f} ms",
         "B idempotent", f"BT/B {bt['produce_mb_per_s'] / b['produce_mb_per_s']:.0%}", "transactions' cost")] if bt else []),
    ("D fan-out x5", f"reads {d['consume_msgs_per_s']:,.0f} msg/s = {d['consume_msgs_per_s'] / max(d['produce_msgs_per_s'], 1):.1f}x ingest ({d['consume_mb_per_s']:.0f} MB/s); e2e p99 {ms(d['e2e_latency_us']['p99']):.2f} ms",
     f"TCP {tcp:.0f} MB/s", f"{d['consume_mb_per_s'] / tcp:.0%}", "target 3x ingest"),
]
def table_line(name):
    """rdkafka_performance's last table line, as columns."""
    try:
        line = open(f"{results}/{name}.rdkafka").read().strip()
    except OSError:
        return None
    return [c.strip() for c in line.strip("|").split("|")]
def cpu_per_bytes(name, nbytes):
    try:
        seconds = float(open(f"{results}/{name}.cpu").read())
    except (OSError, ValueError):
        return "cpu -"
    return f"cpu {seconds / (nbytes / 1e9):.2f} s/GB" if nbytes > 0 else "cpu -"
ra, rb, re_ = table_line("A-rdkafka"), table_line("B-rdkafka"), table_line("E-rdkafka")
e = load("E")
if ra:  # producer columns: elapsed, msgs, bytes, rtt, dr, dr_m/s, dr_MB/s, ...
    rows.append(("A rdkafka_performance", f"{float(ra[5]):,.0f} msg/s", "A loadgen",
                 f"loadgen {a['produce_msgs_per_s'] / float(ra[5]):.0%}", "1 producer, same settings"))
    cpus.append(cpu_per_bytes("A-rdkafka", float(ra[2])))
if rb:
    rows.append(("B rdkafka_performance", f"{float(rb[6]):.0f} MB/s", "B loadgen",
                 f"loadgen {b['produce_mb_per_s'] / float(rb[6]):.0%}", "1 producer, same settings"))
    cpus.append(cpu_per_bytes("B-rdkafka", float(rb[2])))
rows.append(("E consume 1 KiB, loadgen", f"{e['consume_mb_per_s']:.0f} MB/s ({e['consume_msgs_per_s']:,.0f} msg/s)",
             f"TCP {tcp:.0f} MB/s", f"{e['consume_mb_per_s'] / tcp:.0%}", f"{e['partitions']} partitions, 1 consumer"))
cpus.append(cpu("E", e, e["consume_mb_per_s"]))
if re_:  # consumer columns: elapsed, msgs, bytes, rtt, m/s, MB/s, ...
    rows.append(("E rdkafka_performance", f"{float(re_[5]):.0f} MB/s", f"TCP {tcp:.0f} MB/s",
                 f"{float(re_[5]) / tcp:.0%}; loadgen {e['consume_mb_per_s'] / float(re_[5]):.0%}",
                 "same partitions"))
    cpus.append(cpu_per_bytes("E-rdkafka", float(re_[2])))
# No peer figure here: a peer measured in another run is context, not a
# baseline (rates move 40% between runs). ../shared/tools/peerbench.sh
# runs the peer beside this broker in one run.
f = {n: table_line(f"F-{n}") for n in ("produce-1k", "produce-100", "consume-memory", "consume-disk")}
if f["produce-1k"]:
    mbps = float(f["produce-1k"][6])
    rows.append(("F produce 1 KiB, 1 partition", f"{mbps:.0f} MB/s", f"disk {disk:.0f} MB/s",
                 f"{mbps / disk:.0%}", "rdkafka_performance, 1 producer"))
    cpus.append(cpu_per_bytes("F-produce-1k", float(f["produce-1k"][2])))
if f["produce-100"]:
    rate = float(f["produce-100"][5])
    rows.append(("F produce 100 B, 1 partition", f"{rate:,.0f} msg/s", f"disk {disk:.0f} MB/s",
                 "-", "rdkafka_performance, 1 producer"))
    cpus.append(cpu_per_bytes("F-produce-100", float(f["produce-100"][2])))
for name, limit, what in (("consume-memory", tcp, "TCP"), ("consume-disk", disk_read, "disk read")):
    if f[name]:
        mbps = float(f[name][5])
        rows.append((f"F {name.replace('-', ' ')}, 1 KiB", f"{mbps:.0f} MB/s", f"{what} {limit:.0f} MB/s",
                     f"{mbps / limit:.0%}", "rdkafka_performance, 1 consumer"))
        cpus.append(cpu_per_bytes(f"F-{name}", float(f[name][2])))
rows = [r + (c,) for r, c in zip(rows, cpus)]
width = [max(len(r[i]) for r in rows) for i in range(6)]
for r in rows:
    print("  ".join(r[i].ljust(width[i]) for i in range(6)))
EOF
echo "dashboard: $results/dashboard.html"

# T: what TLS costs (its own brokers, plaintext then TLS, A and B).
echo "== T: TLS vs plaintext"
scripts/bench-tls.sh --out "$results" --data-dir "$data_root"

# S: one producer on one partition, both clients side by side.
echo "== S: one producer, one partition: loadgen beside rdkafka_performance"
scripts/bench-single.sh --out "$results" --data-dir "$data_root"

# Q: queues (share groups) against a consumer group on one partition.
echo "== Q: share groups vs a consumer group"
scripts/bench-share.sh --out "$results" --data-dir "$data_root"

# R, P: tiered storage (replays from the local and S3 stores; producers'
# latency with uploads running vs not).
echo "== R, P: tiered storage"
scripts/bench-tiered.sh --out "$results" --data-dir "$data_root"
