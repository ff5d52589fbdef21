# Sourced by the scripts: what every one of them needs first.

# glommio pins memory for its io_uring buffers: raise the locked-memory
# soft limit as far as the hard limit allows.
ulimit -l "$(ulimit -H -l)" 2>/dev/null || true

if ! command -v cargo >/dev/null; then
    echo "cargo not found: install the Rust toolchain (rustup) first" >&2
    exit 1
fi

# A value from a broker's /metrics, as an integer: metric NAME, with $http
# set to the broker's HTTP address.
metric() {
    python3 -c "import sys, urllib.request
for line in urllib.request.urlopen('http://$http/metrics').read().decode().splitlines():
    name, _, value = line.partition(' ')
    if name == sys.argv[1]: print(int(float(value)))" "$1"
}

# Each shard thread's CPU time so far, as "TID:CPUS=TICKS ..." where CPUS
# is the CPU list its thread is pinned to ("0-1" on two CPUs when
# unpinned): shard_ticks PID. A shard is one of glommio's executor threads
# ("unnamed-N"; a shard's blocking-pool thread takes the same name, and
# counts as a thread of its own).
shard_ticks() {
    local t cpus ticks
    for t in /proc/"$1"/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in
            unnamed-*)
                cpus=$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null)
                ticks=$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null)
                [ -n "$cpus" ] && [ -n "$ticks" ] && echo -n "${t##*/}:$cpus=$ticks "
                ;;
        esac
    done
    return 0
}

# The CPUS of the shard thread that worked most between two shard_ticks
# (threads absent from the first are left out): busiest_shard BEFORE
# AFTER. Single-partition figures depend on it on a machine whose disk
# interrupts all arrive on one CPU (docs/benchmarks.md run 47).
busiest_shard() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "="); before[kv[1]] = kv[2] }
        n = split(b, y, " "); best = "?"; most = -1
        for (i = 1; i <= n; i++) {
            split(y[i], kv, "="); if (!(kv[1] in before)) continue
            d = kv[2] - before[kv[1]]; if (d > most) { most = d; best = kv[1] }
        }
        sub(/^[0-9]+:/, "", best); print best }'
}

# A long-running broker's cache is full and recycles its memory; a fresh
# one faults in every page of it as it fills (0.6-3 s of CPU per GB on the
# VMs these figures come from, 3-15 s on some: mostly the kernel zeroing
# pages the host must back afresh), which the first workloads would pay
# and the later ones not. So benchmarks fill it first (not measured) with
# 1 KiB messages to TOPIC until it has been trimmed: its shards evict from
# 90% of their share down to 80% (broker/src/partition/cache_trim.rs), so
# two readings at 80% or more, 5 s of filling apart, mean it most likely
# reached 90% (5 s of filling add more than 10% at the rates seen) and its
# memory is recycled from then on. A reading below the one before counts
# too: a trim, also when TOPIC's partitions cover only some of the shards
# (the total cannot reach 80% then). Three quarters was not enough:
# a later workload grew it to 90% with fresh pages, 1.7-2.6 s of stalls
# in C's first seconds on such a VM (docs/benchmarks.md run 60).
# fill_cache BOOTSTRAP TOPIC PARTITIONS [ACKS], with $http set (ACKS 1 by
# default; a replicated topic fills with all, or its followers are still
# copying the fill when the measuring starts). (The first workload after
# it still pays about 0.4 CPU-s per GB more than the next, as the
# partitions it writes take their shard's cache over: run 30.)
fill_cache() {
    local limit now before=0 trimmed=0; limit=$(metric log_cache_limit_bytes)
    echo "== warm-up: filling the broker's cache ($((limit >> 20)) MiB; not measured)"
    for _ in $(seq 40); do
        target/release/loadgen produce --bootstrap "$1" --topic "$2" --partitions "$3" --producers "$3" \
            --message-bytes 1024 --batch-bytes 1048576 --linger-ms 5 --acks "${4:-1}" --duration 5 --warmup 0 >/dev/null
        now=$(metric log_cache_bytes)
        if [ "$now" -ge $((limit * 8 / 10)) ] || [ "$now" -lt "$before" ]; then trimmed=$((trimmed + 1)); fi
        before=$now
        [ "$trimmed" -ge 2 ] && break
    done
    echo "cache: $(( $(metric log_cache_bytes) >> 20 )) MiB of $((limit >> 20)) MiB"
}

# Waits (about 60 s at most) until no follower of the brokers whose HTTP
# listeners are given copies anything for 2 s: replicas_quiet HOST:PORT...
# A broker that does not answer makes the script fail.
replicas_quiet() {
    local before="none yet" now="" h _
    for _ in $(seq 30); do
        now=""
        for h in "$@"; do now+="$(http="$h" metric replica_fetched_bytes_total) "; done
        [ "$now" = "$before" ] && return 0
        before="$now"
        sleep 2
    done
    echo "followers still copying after 60 s: $now" >&2
}
