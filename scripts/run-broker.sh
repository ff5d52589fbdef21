#!/usr/bin/env bash
# Builds and runs the broker with its embedded defaults: data in ./data,
# Kafka on 0.0.0.0:9092, HTTP on 0.0.0.0:8080, one shard per core.
# Any flag of `broker serve` may follow (see docs/configuration.md), e.g.
#   scripts/run-broker.sh --data-dir /var/lib/broker --shards 4
set -euo pipefail
cd "$(dirname "$0")/.."

# glommio pins memory for its io_uring buffers: raise the locked-memory
# soft limit as far as the hard limit allows.
ulimit -l "$(ulimit -H -l)" 2>/dev/null || true

if ! command -v cargo >/dev/null; then
    echo "cargo not found: install the Rust toolchain (rustup) first" >&2
    exit 1
fi
exec cargo run --release --quiet -p broker -- serve "$@"
