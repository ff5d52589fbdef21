# Sourced by the scripts: what every one of them needs first.

# glommio pins memory for its io_uring buffers: raise the locked-memory
# soft limit as far as the hard limit allows.
ulimit -l "$(ulimit -H -l)" 2>/dev/null || true

if ! command -v cargo >/dev/null; then
    echo "cargo not found: install the Rust toolchain (rustup) first" >&2
    exit 1
fi
