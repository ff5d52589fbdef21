#!/usr/bin/env bash
# What moving a partition costs the producer writing to it. A cluster of
# four brokers of one shard each (scripts/cluster.sh: three voters and an
# observer) holds one topic of one partition, replication factor 3,
# min.insync.replicas 2, filled first for --preload seconds as fast as
# loadgen goes (1 KiB records). Then one idempotent producer writes
# --rate msgs/s of 1 KiB (acks=all) for --seconds, and after --before
# seconds the partition's follower is moved to the fourth broker
# (`broker topic reassign --wait`), which copies the whole partition
# while the producer writes. Twice: unthrottled, and with the new
# replica's copy throttled (follower_replication_throttled_rate =
# --throttle bytes/s). For each: the move's time and bytes, and the
# producer's latency before, during and after it (perf --phases), with
# the dashboards beside.
# Writes results/<UTC time>-reassign/reassign.txt (or to --out DIR;
# results/ is local, not tracked by git).
#
# Usage: scripts/bench-reassign.sh [--preload S] [--rate MSGS_PER_S] [--seconds S]
#            [--before S] [--throttle BYTES_PER_S] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

preload=10
rate=5000
seconds=60
before=10
throttle=50000000
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-reassign"
while [ $# -gt 0 ]; do
    case "$1" in
        --preload) preload="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --before) before="$2"; shift 2 ;;
        --throttle) throttle="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) sed -n '/^# Usage/,/^set -e/p' "$0" | sed '$d' >&2; exit 2 ;;
    esac
done

# Built apart, as scripts/cluster.sh builds the broker: together, the
# features cargo unifies differ and each build redoes the broker's.
cargo build --release -q -p broker
cargo build --release -q -p loadgen -p perf
bin=target/release
mkdir -p "$out" target/bench-data
cluster_dir=""
cleanup() {
    if [ -n "$cluster_dir" ]; then
        CLUSTER_DIR="$cluster_dir" scripts/cluster.sh stop >/dev/null 2>&1
        rm -rf "$cluster_dir"
    fi
    return 0
}
trap cleanup EXIT
bootstrap=127.0.0.1:19091
now() { date +%s.%N; }

# One measured move: NAME, then the throttle (0: none).
move_under_load() {
    local name=$1 limit=$2
    cluster_dir="$(mktemp -d target/bench-data/reassign.XXXXXX)"
    export CLUSTER_DIR="$cluster_dir" BROKER_SHARDS=1
    BROKER_FOLLOWER_REPLICATION_THROTTLED_RATE=$limit scripts/cluster.sh start 4 --voters 3 >/dev/null
    "$bin/broker" topic create moving --partitions 1 --replication-factor 3 \
        --config min.insync.replicas=2 --brokers "$bootstrap" >/dev/null
    local replicas=""
    for _ in $(seq 100); do  # until a leader is elected (describe says -1 before)
        replicas=$("$bin/broker" topic describe moving --brokers "$bootstrap" \
            | grep -o 'leader [1-4] .*replicas \[[0-9, ]*\]' || true)
        [ -n "$replicas" ] && break
        sleep 0.1
    done
    [ -n "$replicas" ] || { echo "no leader for the topic" >&2; exit 1; }
    local leader; leader=$(echo "$replicas" | awk '{print $2}')
    local held; held=$(echo "$replicas" | sed 's/.*replicas \[\(.*\)\]/\1/' | tr -d ' ')
    local spare follower
    for i in 1 2 3 4; do
        if ! echo ",$held," | grep -q ",$i,"; then spare=$i; fi
    done
    for i in ${held//,/ }; do [ "$i" != "$leader" ] && follower=$i; done
    local target="$leader"
    for i in ${held//,/ }; do [ "$i" != "$follower" ] && [ "$i" != "$leader" ] && target+=",$i"; done
    target+=",$spare"

    "$bin/loadgen" produce --bootstrap "$bootstrap" --topic moving --producers 1 \
        --message-bytes 1024 --acks all --duration "$preload" --warmup 0 >/dev/null 2>&1
    local bytes; bytes=$(du -sb "$cluster_dir/$leader/data/partitions" | cut -f1)

    local warmup=2
    "$bin/loadgen" produce --bootstrap "$bootstrap" --topic moving --producers 1 \
        --message-bytes 1024 --acks all --rate "$rate" --duration "$seconds" \
        --warmup "$warmup" --out "$out" --name "$name" >"$out/$name.txt" 2>&1 &
    local loadgen=$!
    local measured; measured=$(python3 -c "print($(now) + $warmup)")
    sleep $((warmup + before))
    local started; started=$(now)
    "$bin/broker" topic reassign moving --partition 0 --replicas "$target" --wait \
        --brokers "$bootstrap" >"$out/$name-move.txt"
    local finished; finished=$(now)
    wait "$loadgen"
    local from to
    from=$(python3 -c "print(round($started - $measured, 1))")
    to=$(python3 -c "print(round($finished - $measured, 1))")
    {
        echo "## $name: replicas [$held] -> [$target], leader $leader; throttle ${limit} B/s (0: none)"
        python3 -c "print(f'moved {$bytes / 1e6:.0f} MB in {$to - $from:.1f} s ({$bytes / 1e6 / max($to - $from, 0.1):.0f} MB/s)')"
        if python3 -c "import sys; sys.exit(0 if $to < $seconds else 1)"; then
            "$bin/perf" --title "reassignment, $name" --out "$out/$name.html" \
                --phases "before:0-$from,move:$from-$to,after:$to-$seconds" "$out/$name-produce.hlog" \
                | grep -v '^wrote'
        else
            echo "the move outlasted the producer's run ($to s of $seconds s): raise --seconds"
        fi
        echo
    } | tee -a "$out/reassign.txt"
    scripts/cluster.sh stop >/dev/null
    rm -rf "$cluster_dir"
    cluster_dir=""
}

echo "# $(date -u +%FT%TZ) $(nproc) cores; 1 partition, rf 3, $rate msgs/s of 1 KiB, acks=all" \
    | tee "$out/reassign.txt"
move_under_load unthrottled 0
move_under_load throttled "$throttle"
echo "results: $out/reassign.txt"
