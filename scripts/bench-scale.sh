#!/usr/bin/env bash
# Cost as partitions grow: one broker, one topic of N partitions for each
# N of --counts, 4 loadgen producers with 100,000 keys (1 KiB records,
# acks=all, idempotent), each N on a fresh data directory:
#   - the topic's creation time;
#   - as fast as it goes: produce MB/s, the broker's CPU-s per GB over the
#     measured window (utime+stime sampled at its start and end), and
#     loadgen's over the same window (it shares the machine's cores: where
#     the two together use them all, that is the bound), p99;
#     the warm-up (--warmup; by default 30 s plus 1 s per 1,000
#     partitions) lets every partition get its first write (each one's
#     first creates its segment file and syncs its directory, seconds for
#     10,000 partitions on a virtual disk) and the cache finish its fill
#     and its change from the fill's batches to the row's (memory freed
#     in large requests and taken again in small batches: a slower row
#     paid it in its window after 5 s, docs/benchmarks.md run 56);
#   - at half that rate, on a topic of its own (the first one deleted
#     before: its bytes would not fit beside it on a small disk), after
#     a warm-up of 25 s plus 1 s per 1,000 partitions by default (away
#     from the flat-out run's wake): p99,
#     and the p99s of its two parts, waiting in the producer until the
#     request is built and the request's round trip, and the CPUs the
#     broker and loadgen used (a line below the row: on a small machine
#     the two share the cores);
#   - then idle: the broker's CPU over 10 s with the half-rate topic's
#     partitions open and nothing sent (5 s after the run);
#   - the broker's resident memory (its log cache is filled first, until
#     its shards trimmed it (80-90% of its budget, a quarter of the
#     machine's memory), with another topic, as bench.sh does) and open
#     files.
# Then connections, on one topic of 8 partitions:
#   - --active producers (1,000 by default; 2 loadgen threads, a 1 MiB
#     in-flight window each) against 4, both at --low-rate msgs/s in all
#     (one record per request for the many) and both as fast as they go:
#     acknowledged msgs/s, the broker's CPU per message, p99;
#   - idle connections: the broker's CPU over 20 s with none, and with
#     --idle connections that each sent one ApiVersions and went quiet
#     (scripts/idle_connections.py), and its resident memory.
# Then replication (--replication yes): one topic of one partition, 4
# producers without keys (1 KiB, acks=all, idempotent), first on one
# broker of one shard (replication factor 1), then on a cluster of three
# brokers of one shard each (scripts/cluster.sh, replication factor 3),
# each broker's cache (2 GiB) filled first:
# MB/s, CPU-s per GB summed over the brokers, and each broker's share by
# its role (the leader produces, the two followers fetch).
# A figure of 0 is a run that acknowledged nothing in its window. A run
# is stopped, and its row says so, when the data directory's disk has
# less than --disk-floor GiB free (4 by default): a full disk stops the
# whole machine, not only the broker.
# Writes results/<UTC time>-scale/scale.txt (or to --out DIR; results/ is
# local, not tracked by git).
#
# Usage: scripts/bench-scale.sh [--counts "1 10 100 1000 10000"] [--seconds N] [--warmup N|auto]
#            [--active N] [--low-rate MSGS_PER_S] [--idle N] [--replication yes|no]
#            [--data-dir DIR] [--out DIR] [--disk-floor GIB]
# (--counts "", --active 0, --idle 0 or --replication no skip that part.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

counts="1 10 100 1000 10000"
seconds=10
warmup=auto
disk_floor_gib=4
active=1000
low_rate=100000
idle=10000
replication=yes
data_root=target/bench-data
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-scale"
while [ $# -gt 0 ]; do
    case "$1" in
        --counts) counts="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --active) active="$2"; shift 2 ;;
        --low-rate) low_rate="$2"; shift 2 ;;
        --idle) idle="$2"; shift 2 ;;
        --replication) replication="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --disk-floor) disk_floor_gib="$2"; shift 2 ;;
        *) sed -n '/^# Usage/,/^# (--counts/p' "$0" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen
bin=target/release
mkdir -p "$out" "$data_root"
data_dir=""
broker_pid=""
cluster_dir=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    [ -n "$data_dir" ] && rm -rf "$data_dir"
    if [ -n "$cluster_dir" ]; then
        CLUSTER_DIR="$cluster_dir" scripts/cluster.sh stop >/dev/null 2>&1
        rm -rf "$cluster_dir"
    fi
    return 0
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }
# A client's CPU ticks (a child not yet waited for keeps its final
# total readable), or -1 if they cannot be read.
client_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo -1; }
rss_mib() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$broker_pid/status"; }
free_kib() { df --output=avail -k "$data_root" | tail -1; }
# The warm-up for a run on N partitions: --warmup, or by default 30 s
# (the cache's change from the fill's batches to the row's: run 56) and
# 1 s more per 1,000 partitions (their first writes: 10,000 partitions
# had all reserved their first MiB within 10 s on a virtual disk).
warmup_for() { [ "$warmup" = auto ] && echo $((30 + $1 / 1000)) || echo "$warmup"; }
# The half-rate run's: 25 s plus 1 s per 1,000 partitions by default
# (after the flat-out run, its cache past the change), so that it is
# measured away from the flat-out run's wake. Whether that wake moved
# its p99 was not shown: docs/benchmarks.md run 55 measured 1.85 s
# after 5 s, and 2.64 s, 107 ms and 117 ms after 25 s (on two vCPUs a
# queue either way).
half_warmup_for() { [ "$warmup" = auto ] && echo $((25 + $1 / 1000)) || echo "$warmup"; }
run_warmup=$(warmup_for 0)
topic=scale

# Many producers and idle connections need descriptors (the broker's and
# the clients'), as does each partition (its segment file), and the
# broker's per-address limit (half its total by default) must let one
# address open them all.
most_partitions=$(printf '%s\n' 0 $counts | sort -n | tail -1)
descriptors=$((idle + 3 * active + most_partitions + 4096))
ulimit -n "$descriptors" 2>/dev/null ||
    echo "warning: cannot raise the open file limit to $descriptors (now $(ulimit -n)); the largest rows may fail" >&2
export BROKER_MAX_CONNECTIONS_PER_IP=$((idle + 3 * active + 1024))

# Stops loadgen run PID (writing NAME.disk) if the disk falls under the
# floor; ends with it.
guard_disk() {  # PID NAME
    while kill -0 "$1" 2>/dev/null; do
        if [ "$(free_kib)" -lt $((disk_floor_gib << 20)) ]; then
            echo "$2: stopped, under ${disk_floor_gib} GiB free on the data directory's disk" \
                | tee "$out/$2.disk" | tee -a "$out/scale.txt" >&2
            kill "$1" 2>/dev/null
            return
        fi
        sleep 1
    done
}

# One loadgen run of $seconds after $run_warmup on $topic; prints "MB/s
# msgs/s p99_ms cpu_s client_cpu_s" (the broker's CPU seconds and
# loadgen's, -1 if its /proc entry could not be read; zeros if the disk
# guard stopped it).
produce() {  # NAME PARTITIONS PRODUCERS [loadgen flags]
    local name="$1" partitions="$2" producers="$3"; shift 3
    "$bin/loadgen" produce --bootstrap "$bootstrap" --topic "$topic" --partitions "$partitions" \
        --producers "$producers" --keys 100000 --message-bytes 1024 --acks all \
        --duration "$seconds" --warmup "$run_warmup" --out "$out" --name "$name" "$@" >"$out/$name.txt" 2>&1 &
    local loadgen=$!
    guard_disk "$loadgen" "$name" &
    sleep "$run_warmup"
    local c0 l0; c0=$(cpu_ticks); l0=$(client_ticks "$loadgen")
    sleep "$seconds"
    local c1 l1; c1=$(cpu_ticks); l1=$(client_ticks "$loadgen")
    wait "$loadgen" || true
    if [ -e "$out/$name.disk" ]; then echo "0 0 0 0 -1"; return; fi
    python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
p99 = (d.get('produce_latency_us') or {}).get('p99') or 0
c0, c1, tick, l0, l1 = (float(x) for x in sys.argv[2:])
client = (l1 - l0) / tick if min(l0, l1) >= 0 else -1
print(d.get('produce_mb_per_s') or 0, d.get('produce_msgs_per_s') or 0, p99 / 1000, (c1 - c0) / tick, client)" \
        "$out/$name.json" "$c0" "$c1" "$tick" "$l0" "$l1"
}

{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "4 producers, 100,000 keys, 1 KiB, acks=all; ${seconds}s measured after a warm-up of $([ "$warmup" = auto ] && echo "30 s + 1 s per 1,000 partitions (25 s + 1 s per 1,000 at half rate)" || echo "$warmup s")"
    printf '%-11s %9s %9s %12s %16s %10s %14s %9s %7s\n' partitions create_s MB/s cpu-s/GB client_cpu-s/GB p99_ms p99_half_ms rss_MiB files
} | tee "$out/scale.txt"
start_broker() {  # LOG: a fresh data directory; sets broker_pid, bootstrap
    local log="$1"
    data_dir="$(mktemp -d "$data_root/scale.XXXXXX")"
    "$bin/broker" --data-dir "$data_dir" --kafka-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 >"$log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do grep -q "listening kafka=" "$log" && break; sleep 0.1; done
    bootstrap=$(grep -o 'kafka=[^ ]*' "$log" | tail -1 | cut -d= -f2)
    http=$(grep -o 'http=[^ ]*' "$log" | tail -1 | cut -d= -f2)
    [ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$log"; exit 1; }
}
stop_broker() {
    kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
    rm -rf "$data_dir"; data_dir=""
}

# Deletes $topic, waits (up to 60 s) until the disk has FREE_KIB back
# but 1 GiB, and creates NAME with PARTITIONS as the next $topic: each run
# on a topic of its own, so that runs' bytes do not add up on the disk.
next_topic() {  # NAME PARTITIONS FREE_KIB
    "$bin/broker" topic delete "$topic" --brokers "$bootstrap" >/dev/null
    for _ in $(seq 60); do [ "$(free_kib)" -ge $(($3 - (1 << 20))) ] && break; sleep 1; done
    topic=$1
    "$bin/broker" topic create "$topic" --partitions "$2" --brokers "$bootstrap" >/dev/null
}

for n in $counts; do
    start_broker "$out/broker-$n.log"
    # A cache still filling costs CPU a full one does not (common.sh):
    # without this, a slower N is measured while its cache fills and a
    # faster one after.
    fill_cache "$bootstrap" scale-warm 2 >/dev/null
    run_warmup=$(warmup_for "$n") topic=scale
    free_before=$(free_kib)
    started=$(date +%s.%N)
    "$bin/broker" topic create scale --partitions "$n" --brokers "$bootstrap" >/dev/null
    created=$(echo "$(date +%s.%N) - $started" | bc)
    read -r mbps msgs p99 cpu client_cpu <<<"$(produce "full-$n" "$n" 4)"
    files=$(ls "/proc/$broker_pid/fd" | wc -l)
    half=$(python3 -c "print(int(float('$msgs') / 2))")
    p99_half=0
    if [ "$half" -gt 0 ]; then
        next_topic scale-half "$n" "$free_before"
        run_warmup=$(half_warmup_for "$n")
        read -r _ _ p99_half cpu_half client_cpu_half <<<"$(produce "half-$n" "$n" 4 --rate "$half")"
    fi
    python3 -c "import sys
n, created, mbps, p99, cpu, client, p99h, rss, files, seconds = sys.argv[1:]
gb = float(mbps) * float(seconds) / 1000
per = lambda s: f'{float(s) / gb:.2f}' if gb > 0 and float(s) >= 0 else 'n/a'
print(f'{n:<11} {float(created):9.2f} {float(mbps):9.0f} {per(cpu):>12} {per(client):>16} {float(p99):10.1f} {float(p99h):14.1f} {rss:>9} {files:>7}')" \
        "$n" "$created" "$mbps" "$p99" "$cpu" "$client_cpu" "$p99_half" "$(rss_mib)" "$files" "$seconds" | tee -a "$out/scale.txt"
    # Where the half-rate run's records waited (loadgen splits a paced
    # run's latency where building the request that carried them began).
    if [ "$half" -gt 0 ] && [ ! -e "$out/half-$n.disk" ]; then
        python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
def p99(key):
    part = d.get(key)
    return f'{part[\"p99\"] / 1000:.1f} ms' if part else 'n/a'
cores = lambda s: f'{float(s) / float(sys.argv[4]):.2f}' if float(s) >= 0 else 'n/a'
print(f'  half rate p99 split: {p99(\"produce_queued_us\")} in the producer, {p99(\"produce_request_us\")} the request;'
      f' CPUs used: broker {cores(sys.argv[2])}, loadgen {cores(sys.argv[3])}')" \
            "$out/half-$n.json" "$cpu_half" "$client_cpu_half" "$seconds" | tee -a "$out/scale.txt"
    fi
    # What the partitions cost once nothing is sent: the half-rate
    # topic's N partitions stay open, every one written.
    sleep 5
    c0=$(cpu_ticks); sleep 10; c1=$(cpu_ticks)
    echo "  idle after the runs, the $n partitions open: broker $(((c1 - c0) * 1000 / tick / 10)) ms of CPU a second" | tee -a "$out/scale.txt"
    stop_broker
done
if [ "$active" -gt 0 ]; then
    start_broker "$out/broker-active.log"
    # 10 s by default: the many producers connect first.
    run_warmup=$([ "$warmup" = auto ] && echo 10 || echo "$warmup") topic=scale
    "$bin/broker" topic create scale --partitions 8 --brokers "$bootstrap" >/dev/null
    free_before=$(free_kib) shape_number=0
    printf '%-26s %10s %9s %13s %10s\n' producers msgs/s MB/s cpu_us/msg p99_ms | tee -a "$out/scale.txt"
    for shape in "4 low" "$active low" "4 max" "$active max"; do
        read -r producers pace <<<"$shape"
        shape_number=$((shape_number + 1))
        [ "$shape_number" -gt 1 ] && next_topic "scale-$shape_number" 8 "$free_before"
        flags=()
        [ "$pace" = low ] && flags+=(--rate "$low_rate")
        # Many producers share two threads, each with a small window (the
        # default 64 MiB each would be 64 GB at 1,000).
        [ "$producers" -gt 4 ] && flags+=(--producer-threads 2 --max-in-flight-bytes 1048576)
        read -r mbps msgs p99 cpu _ <<<"$(produce "producers-$producers-$pace" 8 "$producers" "${flags[@]}")"
        python3 -c "import sys
label, msgs, mbps, cpu, p99, seconds = sys.argv[1:]
per = f'{float(cpu) * 1e6 / (float(msgs) * float(seconds)):.2f}' if float(msgs) > 0 else 'n/a'
print(f'{label:<26} {float(msgs):10.0f} {float(mbps):9.0f} {per:>13} {float(p99):10.1f}')" \
            "$producers producers, $pace" "$msgs" "$mbps" "$cpu" "$p99" "$seconds" | tee -a "$out/scale.txt"
    done
    stop_broker
fi
if [ "$idle" -gt 0 ]; then
    start_broker "$out/broker-idle.log"
    for connections in 0 "$idle"; do
        python3 scripts/idle_connections.py "$bootstrap" "$broker_pid" "$connections" 20 | tee -a "$out/scale.txt"
    done
    stop_broker
fi
if [ "$replication" = yes ]; then
    printf '%-26s %9s %12s %s\n' brokers MB/s cpu-s/GB "cpu-s/GB by broker" | tee -a "$out/scale.txt"
    replicated_row() {  # NAME LABEL PIDS...: one run on topic "scale"; prints its row
        local name="$1" label="$2"; shift 2
        local pids=("$@") before=() after=() i
        "$bin/loadgen" produce --bootstrap "$bootstrap" --topic scale --producers 4 \
            --message-bytes 1024 --acks all --duration "$seconds" --warmup "$run_warmup" \
            --out "$out" --name "$name" >"$out/$name.txt" 2>&1 &
        local loadgen=$!
        guard_disk "$loadgen" "$name" &
        sleep "$run_warmup"
        for i in "${pids[@]}"; do before+=("$(awk '{print $14 + $15}' "/proc/$i/stat")"); done
        sleep "$seconds"
        for i in "${pids[@]}"; do after+=("$(awk '{print $14 + $15}' "/proc/$i/stat")"); done
        wait "$loadgen" || true
        if [ -e "$out/$name.disk" ]; then echo "$label: stopped (disk)" | tee -a "$out/scale.txt"; return; fi
        local pairs=()
        for i in "${!pids[@]}"; do pairs+=("${before[$i]}" "${after[$i]}"); done
        python3 -c "import json, sys
label, path, tick, seconds, roles = sys.argv[1:6]
ticks = [float(b) - float(a) for a, b in zip(sys.argv[6::2], sys.argv[7::2])]
mbps = json.load(open(path)).get('produce_mb_per_s') or 0
gb = mbps * float(seconds) / 1000
per = lambda t: f'{t / float(tick) / gb:.2f}' if gb > 0 else 'n/a'
each = ', '.join(f'{r} {per(t)}' for r, t in zip(roles.split(','), ticks))
print(f'{label:<26} {mbps:9.0f} {per(sum(ticks)):>12} {each}')" \
            "$label" "$out/$name.json" "$tick" "$seconds" "$roles" "${pairs[@]}" \
            | tee -a "$out/scale.txt"
    }
    run_warmup=$(warmup_for 0)
    # Each broker's cache filled first, as the partition rows do: a fresh
    # broker's cache growth is mostly page zeroing (docs/benchmarks.md
    # run 55). 2 GiB each: three default caches (a quarter of memory
    # each) filled would take most of a small machine's memory.
    export BROKER_LOG_CACHE_BYTES=$((2 << 30))
    BROKER_SHARDS=1 start_broker "$out/broker-single.log"
    fill_cache "$bootstrap" scale-warm 1 >/dev/null
    "$bin/broker" topic create scale --partitions 1 --brokers "$bootstrap" >/dev/null
    roles=leader replicated_row rf1 "1 broker, rf 1" "$broker_pid"
    stop_broker
    cluster_dir="$(mktemp -d "$data_root/cluster.XXXXXX")"
    export CLUSTER_DIR="$cluster_dir" BROKER_SHARDS=1
    scripts/cluster.sh start 3 >/dev/null
    bootstrap=127.0.0.1:19091
    "$bin/broker" topic create scale --partitions 1 --replication-factor 3 --brokers "$bootstrap" >/dev/null
    leader=""
    for _ in $(seq 100); do  # until a leader is elected (describe says -1 before)
        leader=$("$bin/broker" topic describe scale --brokers "$bootstrap" | grep -o 'leader [1-3]\b' | cut -d' ' -f2 || true)
        [ -n "$leader" ] && break
        sleep 0.1
    done
    [ -n "$leader" ] || { echo "no leader for the replicated topic" >&2; exit 1; }
    # Filled through the leader of a replicated topic of its own: the
    # followers' caches fill as they copy it (scripts/cluster.sh: broker
    # N's HTTP listener is on port 18080+N), with acks=all and until they
    # stop copying: a fill with acks=1 left them copying a backlog of
    # gigabytes through the measured window (docs/benchmarks.md run 56).
    "$bin/broker" topic create scale-warm --partitions 1 --replication-factor 3 \
        --brokers "$bootstrap" >/dev/null
    http=127.0.0.1:$((18080 + leader))
    fill_cache "$bootstrap" scale-warm 1 all >/dev/null
    replicas_quiet 127.0.0.1:18081 127.0.0.1:18082 127.0.0.1:18083
    pids=() roles=""
    for i in 1 2 3; do
        pids+=("$(cat "$cluster_dir/$i/pid")")
        [ "$i" = "$leader" ] && roles+="${roles:+,}leader" || roles+="${roles:+,}follower"
    done
    roles="$roles" replicated_row rf3 "3 brokers, rf 3" "${pids[@]}"
    scripts/cluster.sh stop >/dev/null
    rm -rf "$cluster_dir"
    cluster_dir=""
fi
echo "results: $out/scale.txt"
