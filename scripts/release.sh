#!/usr/bin/env bash
# Builds a release tarball: the binaries (broker, loadgen, perf), the
# systemd unit, the alert rules, the Grafana dashboard, the host tuning
# script and the docs, under broker-VERSION-TARGET/, with its SHA-256 beside
# it.
#
# Usage: scripts/release.sh [--out DIR] [--profile release|dev] [--binaries DIR]
#   --out DIR       where the tarball goes (default target/dist)
#   --profile P     cargo's profile (default release; dev: unoptimized, for
#                   checking the layout, never for deployment)
#   --binaries DIR  package the broker, loadgen and perf already built in
#                   DIR instead of building them (the test of this script)
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
source scripts/common.sh

out=
profile=release
binaries=""
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --profile) profile="$2"; shift 2 ;;
        --binaries) binaries="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$profile" in
    release) built=release ;;
    dev) built=debug ;;
    *) echo "release.sh: --profile release or dev, not $profile" >&2; exit 2 ;;
esac

# Paths given relative to where the script was called from.
case "$out" in "") out="$PWD/target/dist" ;; /*) ;; *) out="$caller/$out" ;; esac
if [ -n "$binaries" ]; then
    case "$binaries" in /*) ;; *) binaries="$caller/$binaries" ;; esac
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
target=$(rustc -vV | sed -n 's/^host: //p')
name="broker-$version-$target"
target_dir="${CARGO_TARGET_DIR:-target}"

# One build of the three binaries (the lock file as committed).
if [ -z "$binaries" ]; then
    cargo build --locked --profile "$profile" -p broker -p loadgen -p perf
    binaries="$target_dir/$built"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/bin" "$root/ops" "$root/docs"
for binary in broker loadgen perf; do
    install -m 0755 "$binaries/$binary" "$root/bin/"
done
install -m 0644 ops/broker.service ops/alerts.yml ops/grafana-dashboard.json ops/README.md "$root/ops/"
install -m 0755 ops/tune-host.sh "$root/ops/"
install -m 0644 docs/*.md docs/*.png docs/openapi.yaml "$root/docs/"
install -m 0644 README.md "$root/"
"$root/bin/broker" --version > "$root/VERSION"

mkdir -p "$out"
tarball="$out/$name.tar.gz"
tar -C "$stage" -czf "$tarball" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "$tarball"
