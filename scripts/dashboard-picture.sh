#!/usr/bin/env bash
# Draws docs/dashboard.png: the Grafana dashboard's panels from a real
# scrape. A release broker on 127.0.0.1 runs loadgen (producers and a
# consumer group) for a while; Debian's Prometheus scrapes its /metrics
# every second; each panel's queries are then asked of Prometheus and
# drawn (scripts/dashboard_picture.py, matplotlib in a virtualenv under
# target/). Run by hand when the dashboard or the metrics change.
#
# Usage: scripts/dashboard-picture.sh [SECONDS]   (default 120, at least 30)
# Its fixed ports (19392, 18392, 19393 on 127.0.0.1) are free when no other
# broker of the scripts runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
seconds=${1:-120}

for tool in prometheus kcat curl; do
    command -v "$tool" >/dev/null || {
        echo "dashboard-picture.sh: needs $tool (Debian's prometheus, kcat and curl packages)" >&2
        exit 1
    }
done
if ((seconds < 30)); then
    echo "dashboard-picture.sh: at least 30 seconds (the panels' rates look back 1 minute)" >&2
    exit 2
fi
venv=target/picture-venv
if ! "$venv/bin/python" -c "import matplotlib" >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q matplotlib
fi
cargo build --release -p broker
cargo build --release -p loadgen

work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

target/release/broker serve --data-dir "$work/broker" --kafka-listen 127.0.0.1:19392 \
    --http-listen 127.0.0.1:18392 > "$work/broker.log" 2>&1 &
pids+=($!)
cat > "$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: broker
    static_configs:
      - targets: ["127.0.0.1:18392"]
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address=127.0.0.1:19393 > "$work/prometheus.log" 2>&1 &
pids+=($!)
ready=""
for _ in $(seq 150); do
    if curl -sf 127.0.0.1:18392/health >/dev/null && curl -sf 127.0.0.1:19393/-/ready >/dev/null; then
        ready=yes
        break
    fi
    sleep 0.2
done
if [ -z "$ready" ]; then
    echo "dashboard-picture.sh: the broker or Prometheus did not start:" >&2
    tail -5 "$work/broker.log" "$work/prometheus.log" >&2
    exit 1
fi

start=$(date +%s)
# Producers at a steady rate, and a consumer group reading behind them.
target/release/loadgen e2e --bootstrap 127.0.0.1:19392 --topic orders --partitions 4 \
    --producers 2 --consumers 1 --rate 20000 --message-bytes 1024 --duration "$seconds" \
    --warmup 1 > "$work/loadgen.log" 2>&1 &
load=$!
pids+=($load)
sleep 5
timeout "$((seconds - 5))" kcat -b 127.0.0.1:19392 -G billing orders -q > /dev/null 2> "$work/kcat.log" &
pids+=($!)
wait "$load"
sleep 5
end=$(date +%s)
"$venv/bin/python" scripts/dashboard_picture.py http://127.0.0.1:19393 "$start" "$end" docs/dashboard.png
echo "docs/dashboard.png: $((end - start)) s of a broker under load"
