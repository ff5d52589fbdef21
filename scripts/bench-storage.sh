#!/usr/bin/env bash
# The storage benchmark: the partition log's durable appends beside the raw
# O_DIRECT bandwidth of the same disk. Usage: scripts/bench-storage.sh [--seconds N] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
exec cargo run --release -p storage --example append_bench -- "$@"
