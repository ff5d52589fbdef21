#!/usr/bin/env bash
# Installs what the tests need (if missing) and runs every test of the workspace.
# Usage: scripts/test.sh [extra nextest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# glommio pins memory for its io_uring buffers: raise the locked-memory
# soft limit as far as the hard limit allows.
ulimit -l "$(ulimit -H -l)" 2>/dev/null || true

if ! command -v cargo >/dev/null; then
    echo "cargo not found: install the Rust toolchain (rustup) first" >&2
    exit 1
fi
if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install --locked cargo-nextest
fi

cargo nextest run --workspace --profile ci "$@"
