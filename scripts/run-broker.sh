#!/usr/bin/env bash
# Runs the broker with its embedded defaults: data in ./data, Kafka on
# 0.0.0.0:9092, HTTP on 0.0.0.0:8080, one shard per core. Starts the built
# binary at once when it is up to date; builds it first (saying so) when a
# source is newer. Any flag of `broker serve` may follow (see
# docs/configuration.md), e.g.
#   scripts/run-broker.sh --data-dir /var/lib/broker --shards 4
# A second copy on the same data directory or ports exits at once, saying
# which process holds them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Locked memory for glommio, and cargo present.
source scripts/common.sh
bin=target/release/broker
stale() {
    [ ! -x "$bin" ] && return 0
    [ -n "$(find Cargo.toml Cargo.lock storage control replication client broker \
        \( -name '*.rs' -o -name Cargo.toml \) -newer "$bin" -print -quit)" ]
}
if stale; then
    echo "building the broker (release; the first build takes several minutes) ..." >&2
    cargo build --release -p broker
fi
exec "$bin" serve "$@"
