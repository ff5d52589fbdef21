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

# A long-running broker's cache is full and recycles its memory; a fresh
# one faults in every page of it as it fills (0.6-3 s of CPU per GB on the
# VMs these figures come from: mostly the kernel zeroing fresh pages),
# which the first workloads would pay and the later ones not. So
# benchmarks fill it first (not measured) to three quarters of its budget
# with 1 KiB messages to TOPIC, which they keep, so its memory is recycled
# rather than given back: fill_cache BOOTSTRAP TOPIC PARTITIONS, with
# $http set. (The first workload after it still pays about 0.4 CPU-s per
# GB more than the next, as the partitions it writes take their shard's
# cache over: docs/benchmarks.md run 30.)
fill_cache() {
    local limit; limit=$(metric log_cache_limit_bytes)
    echo "== warm-up: filling the broker's cache ($((limit >> 20)) MiB; not measured)"
    for _ in $(seq 40); do
        [ "$(metric log_cache_bytes)" -ge $((limit * 3 / 4)) ] && break
        target/release/loadgen produce --bootstrap "$1" --topic "$2" --partitions "$3" --producers "$3" \
            --message-bytes 1024 --batch-bytes 1048576 --linger-ms 5 --acks 1 --duration 5 --warmup 0 >/dev/null
    done
    echo "cache: $(( $(metric log_cache_bytes) >> 20 )) MiB of $((limit >> 20)) MiB"
}
