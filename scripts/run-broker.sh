#!/usr/bin/env bash
# Builds and runs the broker with its embedded defaults: data in ./data,
# Kafka on 0.0.0.0:9092, HTTP on 0.0.0.0:8080, one shard per core.
# Any flag of `broker serve` may follow (see docs/configuration.md), e.g.
#   scripts/run-broker.sh --data-dir /var/lib/broker --shards 4
set -euo pipefail
cd "$(dirname "$0")/.."

# Locked memory for glommio, and cargo present.
source scripts/common.sh
exec cargo run --release --quiet -p broker -- serve "$@"
