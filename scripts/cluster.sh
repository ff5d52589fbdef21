#!/usr/bin/env bash
# Runs a cluster of brokers on 127.0.0.1, each its own process with its own
# ports and data directory: the first V are the metadata quorum's voters,
# the others observers that follow its log without a vote; or, with
# --controllers C, C controller-only nodes (numbered after the brokers) are
# the voters and every broker is an observer.
#
#   scripts/cluster.sh start [N] [--voters V | --controllers C]
#                                  build (release) and start N brokers (3),
#                                  V of them voters (all, up to 5; else 3),
#                                  or C controllers beside them
#   scripts/cluster.sh stop        SIGTERM every broker (controlled shutdown),
#                                  then every controller
#   scripts/cluster.sh kill N      SIGKILL node N (a machine failure)
#   scripts/cluster.sh restart N   start node N again with its data
#   scripts/cluster.sh add-controller
#                                  start one more controller-only node, outside
#                                  the voters (it joins as an observer: then
#                                  `broker cluster add-voter` it)
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
controller_count() { cat "$CLUSTER_DIR/controllers" 2>/dev/null || echo 0; }
voter_count() { cat "$CLUSTER_DIR/voters" 2>/dev/null || size; }
broker_count() { echo $(($(size) - $(controller_count))); }

# The voters' node numbers as the quorum began: the controllers, else the
# first brokers (controllers added later are not among them).
voter_ids() {
    if [[ -f $CLUSTER_DIR/voter_ids ]]; then
        cat "$CLUSTER_DIR/voter_ids"
    elif (($(controller_count) > 0)); then
        seq $(($(broker_count) + 1)) "$(size)"
    else
        seq 1 "$(voter_count)"
    fi
}
is_voter() { voter_ids | grep -qx "$1"; }
is_controller() { (($1 > $(broker_count))); }

voters() {
    local out="" i
    for i in $(voter_ids); do
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
    if is_voter "$i"; then
        unset BROKER_CONTROLLER_LISTEN
    else
        # An observer: the voters reach its metadata listener here.
        export BROKER_CONTROLLER_LISTEN="127.0.0.1:$(metadata_port "$i")"
    fi
    if (($(controller_count) == 0)); then
        unset BROKER_PROCESS_ROLES
    elif is_controller "$i"; then
        export BROKER_PROCESS_ROLES=controller
    else
        export BROKER_PROCESS_ROLES=broker
    fi
    BROKER_CONTROLLER_QUORUM_VOTERS=$(voters) BROKER_RACK=${BROKER_RACK:-rack-$i} \
        "$BIN" serve --node-id "$i" --data-dir "$CLUSTER_DIR/$i/data" \
        --kafka-listen "127.0.0.1:$(kafka_port "$i")" \
        --http-listen "127.0.0.1:$(http_port "$i")" \
        >>"$CLUSTER_DIR/$i/broker.log" 2>&1 &
    echo $! >"$CLUSTER_DIR/$i/pid"
    if is_controller "$i"; then
        echo "controller $i: pid $!, metadata 127.0.0.1:$(metadata_port "$i"), log $CLUSTER_DIR/$i/broker.log"
    else
        echo "broker $i: pid $!, kafka 127.0.0.1:$(kafka_port "$i"), log $CLUSTER_DIR/$i/broker.log"
    fi
}

wait_ready() {
    local i=$1 tries=0
    # A broker prints its listening line once registered with the quorum,
    # a controller once its ports are bound.
    local line="listening kafka="
    if is_controller "$i"; then line="listening as a controller only"; fi
    until grep -q "$line" "$CLUSTER_DIR/$i/broker.log" 2>/dev/null; do
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
    c=0
    shift
    while (($#)); do
        case "$1" in
        --voters) v=${2:?voter count}; shift 2 ;;
        --controllers) c=${2:?controller count}; shift 2 ;;
        *) n=$1; shift ;;
        esac
    done
    if ((c > 0)); then
        if [[ -n $v ]]; then
            echo "--voters and --controllers exclude each other (the controllers vote)" >&2
            exit 2
        fi
        v=$c
    fi
    if [[ -z $v ]]; then v=$((n <= 5 ? n : 3)); fi
    if ((n < 1)); then
        echo "a cluster needs at least one broker" >&2
        exit 2
    fi
    if ((c == 0 && (v < 1 || v > n))); then
        echo "--voters must be between 1 and $n" >&2
        exit 2
    fi
    cargo build --release --quiet -p broker
    mkdir -p "$CLUSTER_DIR"
    echo "$((n + c))" >"$CLUSTER_DIR/size"
    echo "$v" >"$CLUSTER_DIR/voters"
    echo "$c" >"$CLUSTER_DIR/controllers"
    rm -f "$CLUSTER_DIR/voter_ids"
    voter_ids >"$CLUSTER_DIR/voter_ids.new"
    mv "$CLUSTER_DIR/voter_ids.new" "$CLUSTER_DIR/voter_ids"
    for i in $(seq 1 "$((n + c))"); do start_one "$i"; done
    for i in $(seq 1 "$((n + c))"); do wait_ready "$i"; done
    if ((c > 0)); then
        echo "cluster of $n brokers and $c controllers up; bootstrap 127.0.0.1:$(kafka_port 1)"
    else
        echo "cluster of $n up ($v voters); bootstrap 127.0.0.1:$(kafka_port 1)"
    fi
    ;;
restart)
    i=${2:?node number}
    if ((i < 1 || i > $(size))); then
        echo "no node $i in this cluster of $(size) (add-controller adds one)" >&2
        exit 2
    fi
    # Count only the new life's listening line.
    mv "$CLUSTER_DIR/$i/broker.log" "$CLUSTER_DIR/$i/broker.log.$(date +%s)" 2>/dev/null || true
    start_one "$i"
    wait_ready "$i"
    ;;
add-controller)
    if (($(controller_count) == 0)); then
        echo "this cluster has no controllers apart (start it with --controllers)" >&2
        exit 2
    fi
    i=$(($(size) + 1))
    echo "$i" >"$CLUSTER_DIR/size"
    echo "$(($(controller_count) + 1))" >"$CLUSTER_DIR/controllers"
    start_one "$i"
    wait_ready "$i"
    echo "controller $i joined as an observer: broker cluster add-voter $i --brokers 127.0.0.1:$(kafka_port 1)"
    ;;
kill)
    i=${2:?node number}
    pid=$(pid_of "$i")
    what="broker"
    if is_controller "$i"; then what="controller"; fi
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null && echo "$what $i (pid $pid) killed"
    ;;
stop)
    # Brokers first: each one's controlled shutdown needs the controllers.
    stop_nodes() {
        for i in "$@"; do
            if running "$i"; then kill -TERM "$(pid_of "$i")"; fi
        done
        for i in "$@"; do
            for _ in $(seq 1 100); do running "$i" || break; sleep 0.1; done
            if running "$i"; then
                echo "node $i still running after 10 s; killing it" >&2
                kill -9 "$(pid_of "$i")" || true
            fi
        done
    }
    stop_nodes $(seq 1 "$(broker_count)")
    if (($(controller_count) > 0)); then
        stop_nodes $(seq $(($(broker_count) + 1)) "$(size)")
    fi
    echo "cluster stopped"
    ;;
status)
    for i in $(seq 1 "$(size)"); do
        if is_controller "$i"; then
            what="controller $i" where="metadata 127.0.0.1:$(metadata_port "$i")"
        else
            what="broker $i" where="kafka 127.0.0.1:$(kafka_port "$i")"
        fi
        if running "$i"; then
            echo "$what: running (pid $(pid_of "$i")), $where"
        else
            echo "$what: stopped"
        fi
    done
    for i in $(seq 1 "$(broker_count)"); do
        if running "$i"; then
            "$BIN" cluster status --brokers "127.0.0.1:$(kafka_port "$i")" && break
        fi
    done
    ;;
*)
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
