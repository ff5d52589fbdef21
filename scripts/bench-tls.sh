#!/usr/bin/env bash
# TLS's cost: workloads A (100 B) and B (1 KiB) of scripts/bench.sh, acks=all,
# idempotent, with loadgen (one producer per core, as bench.sh) and with one
# rdkafka_performance producer, against a fresh plaintext broker and then a
# fresh TLS broker
# (kafka_security_protocol = SSL, an ECDSA P-256 certificate made here for
# the run and removed with its data), back to back on the same disk: each
# as fast as it goes, then at a fixed rate (A 1 M msg/s, B 100 MB/s), where
# the broker's CPU seconds per GB show TLS's cost apart from how fast the
# shared cores let the client go; B's topic is then read back whole by one
# rdkafka_performance consumer (E). Prints each figure, the broker's CPU
# seconds per GB over the run, and TLS as a share of plaintext. Writes
# results/<UTC time>-tls/tls.txt (or to --out DIR; results/ is local, not
# tracked by git).
#
# Usage: scripts/bench-tls.sh [--messages-a N] [--messages-b N] [--out DIR] [--data-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

messages_a=20000000
messages_b=3000000
out="results/$(date -u +%Y-%m-%dT%H%M%SZ)-tls"
data_root=target/bench-data
while [ $# -gt 0 ]; do
    case "$1" in
        --messages-a) messages_a="$2"; shift 2 ;;
        --messages-b) messages_b="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --data-dir) data_root="$2"; shift 2 ;;
        *) echo "usage: scripts/bench-tls.sh [--messages-a N] [--messages-b N] [--out DIR] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done

cargo build --release -q -p broker -p loadgen
source scripts/rdkafka-perf.sh
mkdir -p "$out" "$data_root"
work="$(mktemp -d "$data_root/tls.XXXXXX")"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# The run's own certificate authority and server certificate.
tls="$work/tls"
mkdir -p "$tls"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$tls/ca.key" -out "$tls/ca.pem" -subj /CN=bench-ca -days 2 2>/dev/null
openssl req "${ec[@]}" -keyout "$tls/server.key" -out "$tls/server.csr" -subj /CN=127.0.0.1 2>/dev/null
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -out "$tls/server.pem" -days 2 -extfile <(printf "subjectAltName=IP:127.0.0.1") 2>/dev/null

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }
start_broker() {  # PROTOCOL: a fresh broker on its own data directory
    local log="$work/$1.log"
    BROKER_KAFKA_SECURITY_PROTOCOL=$1 BROKER_SSL_CERTIFICATE_LOCATION="$tls/server.pem" \
        BROKER_SSL_KEY_LOCATION="$tls/server.key" BROKER_DEFAULT_PARTITIONS=2 \
        target/release/broker --data-dir "$work/data-$1" --kafka-listen 127.0.0.1:0 \
        --http-listen 127.0.0.1:0 >"$log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do grep -q "listening kafka=" "$log" && break; sleep 0.1; done
    bootstrap=$(grep -o 'kafka=[^ ]*' "$log" | head -1 | cut -d= -f2)
    [ -n "$bootstrap" ] || { echo "the broker did not start:"; cat "$log"; exit 1; }
}
stop_broker() { kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; broker_pid=""; }
produce() {  # NAME SIZE COUNT CLIENT-SETTINGS...: "msg/s MB/s cpu-s/GB"
    local name=$1 size=$2 count=$3 t0 t1 line; shift 3
    t0=$(cpu_ticks)
    line=$("$rdkafka_perf" -b "$bootstrap" -u -P -a -1 -X enable.idempotence=true -X linger.ms=5 \
        -X batch.size=1048576 -t "$name" -s "$size" -c "$count" "$@" 2>&1 | grep '^|' | tail -1)
    t1=$(cpu_ticks)
    # producer columns: elapsed, msgs, bytes, rtt, dr, dr_m/s, dr_MB/s, ...
    echo "$line" | awk -F'|' -v d=$((t1 - t0)) -v hz="$hz" \
        '{ printf "%d %.1f %.2f\n", $7, $8, (d / hz) / ($4 / 1e9) }'
}

consume() {  # NAME COUNT CLIENT-SETTINGS...: "msg/s MB/s cpu-s/GB", both partitions from the start
    local name=$1 count=$2 t0 t1 line; shift 2
    t0=$(cpu_ticks)
    line=$("$rdkafka_perf" -b "$bootstrap" -u -C -t "$name" -p 0 -p 1 -o beginning -c "$count" "$@" 2>&1 \
        | grep '^|' | tail -1)
    t1=$(cpu_ticks)
    # consumer columns: elapsed, msgs, bytes, rtt, m/s, MB/s, ...
    echo "$line" | awk -F'|' -v d=$((t1 - t0)) -v hz="$hz" \
        '{ printf "%d %.1f %.2f\n", $6, $7, (d / hz) / ($4 / 1e9) }'
}

loadgen_produce() {  # NAME SIZE LOADGEN-SETTINGS...: "msg/s MB/s cpu-s/GB"
    local name=$1 size=$2 t0 t1 line; shift 2
    t0=$(cpu_ticks)
    line=$(target/release/loadgen produce --bootstrap "$bootstrap" --topic "$name" --partitions 2 \
        --message-bytes "$size" --producers "$(nproc)" --batch-bytes 1048576 --linger-ms 5 \
        --acks all --duration 10 --warmup 3 "$@" 2>&1 | grep '^summary')
    t1=$(cpu_ticks)
    # "summary over 10.0s: produced 123 msg/s (4.5 MB/s), ..." (13 s run in all)
    echo "$line" | awk -v d=$((t1 - t0)) -v hz="$hz" '{
        rate = $5; mb = substr($7, 2); printf "%d %.1f %.2f\n", rate, mb, (d / hz) / (mb * 13 / 1000) }'
}

declare -A figures
for protocol in PLAINTEXT SSL; do
    start_broker "$protocol"
    settings=()
    [ "$protocol" = SSL ] && settings=(-X security.protocol=ssl -X "ssl.ca.location=$tls/ca.pem")
    own=()
    [ "$protocol" = SSL ] && own=(--ssl-ca-location "$tls/ca.pem")
    figures[A-loadgen-$protocol]=$(loadgen_produce tls-la 100 "${own[@]}")
    figures[B-loadgen-$protocol]=$(loadgen_produce tls-lb 1024 "${own[@]}")
    figures[A-$protocol]=$(produce tls-a 100 "$messages_a" "${settings[@]}")
    figures[B-$protocol]=$(produce tls-b 1024 "$messages_b" "${settings[@]}")
    # Read back at once, while it is the newest in the broker's memory.
    figures[E-$protocol]=$(consume tls-b "$messages_b" "${settings[@]}")
    figures[A-rate-$protocol]=$(produce tls-a-rate 100 $((messages_a / 2)) -r 1000000 "${settings[@]}")
    figures[B-rate-$protocol]=$(produce tls-b-rate 1024 $((messages_b / 2)) -r 100000 "${settings[@]}")
    stop_broker
    rm -rf "$work/data-$protocol"
done

{
    echo "TLS vs plaintext, acks=all, idempotent, 2 partitions; A-loadgen, B-loadgen: loadgen, one producer per core;"
    echo "A, B: rdkafka_performance, 1 producer, as fast as it goes; A-rate, B-rate: the same at a fixed rate;"
    echo "E: B's topic read back from its start by one rdkafka_performance consumer (both partitions, from memory)"
    for w in A-loadgen B-loadgen A B A-rate B-rate E; do
        read -r pr pm pc <<<"${figures[$w-PLAINTEXT]}"
        read -r sr sm sc <<<"${figures[$w-SSL]}"
        printf "%s plaintext %s msg/s %s MB/s cpu %s s/GB | TLS %s msg/s %s MB/s cpu %s s/GB | TLS/plaintext %s\n" \
            "$w" "$pr" "$pm" "$pc" "$sr" "$sm" "$sc" "$(awk -v a="$sr" -v b="$pr" 'BEGIN { printf "%.0f%%", 100 * a / b }')"
    done
} | tee "$out/tls.txt"
