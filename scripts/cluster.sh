#!/usr/bin/env bash
# Runs a cluster of brokers on 127.0.0.1, each its own process with its own
# ports and data directory: the first V are the metadata quorum's voters,
# the others observers that follow its log without a vote.
#
#   scripts/cluster.sh start [N] [--voters V]
#                                  build (release) and start N brokers (3),
#                                  V of them voters (all, up to 5; else 3)
#   scripts/cluster.sh stop        SIGTERM every broker (controlled shutdown)
#   scripts/cluster.sh kill N      SIGKILL broker N (a machine failure)
#   scripts/cluster.sh restart N   start broker N again with its data
#   scripts/cluster.sh status      which brokers run, and the cluster view
#
# Broker N listens on Kafka 19090+N, HTTP 18080+N, metadata 19190+N; its
# data and log are in $CLUSTER_DIR/N (default target/cluster/N); its rack is
# rack-N.
# Extra settings go through the environment (BROKER_*), e.g.
#   BROKER_SHARDS=1 scripts/cluster.sh start
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

CLUSTER_DIR=${CLUSTER_DIR:-target/cluster}
BIN=${BROKER_BIN:-target/release/broker}
# Every other BROKER_* variable is a broker setting: this one is not.
unset BROKER_BIN

kafka_port() { echo $((19090 + $1)); }
http_port() { echo $((18080 + $1)); }
metadata_port() { echo $((19190 + $1)); }
size() { cat "$CLUSTER_DIR/size" 2>/dev/null || echo 3; }
voter_count() { cat "$CLUSTER_DIR/voters" 2>/dev/null || size; }

voters() {
    local n=$1 out="" i
    for i in $(seq 1 "$n"); do
        out+="${out:+,}$i@127.0.0.1:$(metadata_port "$i")"
    done
    echo "$out"
}

pid_of() { cat "$CLUSTER_DIR/$1/pid" 2>/dev/null || true; }
running() { local pid; pid=$(pid_of "$1"); [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; }

start_one() {
    local i=$1
    if running "$i"; then
        echo "broker $i already runs (pid $(pid_of "$i"))"
        return
    fi
    mkdir -p "$CLUSTER_DIR/$i"
    if ((i > $(voter_count))); then
        # An observer: the voters reach its metadata listener here.
        export BROKER_CONTROLLER_LISTEN="127.0.0.1:$(metadata_port "$i")"
    else
        unset BROKER_CONTROLLER_LISTEN
    fi
    BROKER_CONTROLLER_QUORUM_VOTERS=$(voters "$(voter_count)") BROKER_RACK=${BROKER_RACK:-rack-$i} \
        "$BIN" serve --node-id "$i" --data-dir "$CLUSTER_DIR/$i/data" \
        --kafka-listen "127.0.0.1:$(kafka_port "$i")" \
        --http-listen "127.0.0.1:$(http_port "$i")" \
        >>"$CLUSTER_DIR/$i/broker.log" 2>&1 &
    echo $! >"$CLUSTER_DIR/$i/pid"
    echo "broker $i: pid $!, kafka 127.0.0.1:$(kafka_port "$i"), log $CLUSTER_DIR/$i/broker.log"
}

wait_ready() {
    local i=$1 tries=0
    # A broker prints its listening line once registered with the quorum.
    until grep -q "listening kafka=" "$CLUSTER_DIR/$i/broker.log" 2>/dev/null; do
        tries=$((tries + 1))
        if ((tries > 300)) || ! running "$i"; then
            echo "broker $i did not become ready; see $CLUSTER_DIR/$i/broker.log" >&2
            return 1
        fi
        sleep 0.1
    done
}

case "${1:-}" in
start)
    n=3
    v=""
    shift
    while (($#)); do
        case "$1" in
        --voters) v=${2:?voter count}; shift 2 ;;
        *) n=$1; shift ;;
        esac
    done
    if [[ -z $v ]]; then v=$((n <= 5 ? n : 3)); fi
    if ((v < 1 || v > n)); then
        echo "--voters must be between 1 and $n" >&2
        exit 2
    fi
    cargo build --release --quiet -p broker
    mkdir -p "$CLUSTER_DIR"
    echo "$n" >"$CLUSTER_DIR/size"
    echo "$v" >"$CLUSTER_DIR/voters"
    for i in $(seq 1 "$n"); do start_one "$i"; done
    for i in $(seq 1 "$n"); do wait_ready "$i"; done
    echo "cluster of $n up ($v voters); bootstrap 127.0.0.1:$(kafka_port 1)"
    ;;
restart)
    i=${2:?broker number}
    # Count only the new life's listening line.
    mv "$CLUSTER_DIR/$i/broker.log" "$CLUSTER_DIR/$i/broker.log.$(date +%s)" 2>/dev/null || true
    start_one "$i"
    wait_ready "$i"
    ;;
kill)
    i=${2:?broker number}
    pid=$(pid_of "$i")
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null && echo "broker $i (pid $pid) killed"
    ;;
stop)
    for i in $(seq 1 "$(size)"); do
        if running "$i"; then kill -TERM "$(pid_of "$i")"; fi
    done
    for i in $(seq 1 "$(size)"); do
        for _ in $(seq 1 100); do running "$i" || break; sleep 0.1; done
        if running "$i"; then
            echo "broker $i still running after 10 s; killing it" >&2
            kill -9 "$(pid_of "$i")" || true
        fi
    done
    echo "cluster stopped"
    ;;
status)
    for i in $(seq 1 "$(size)"); do
        if running "$i"; then
            echo "broker $i: running (pid $(pid_of "$i")), kafka 127.0.0.1:$(kafka_port "$i")"
        else
            echo "broker $i: stopped"
        fi
    done
    for i in $(seq 1 "$(size)"); do
        if running "$i"; then
            "$BIN" cluster status --brokers "127.0.0.1:$(kafka_port "$i")" && break
        fi
    done
    ;;
*)
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
