#!/usr/bin/env bash
# Installs what the tests need (if missing) and runs every test of the workspace.
# Usage: scripts/test.sh [extra nextest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# Locked memory for glommio, and cargo present.
source scripts/common.sh
# System packages the tests use: kcat (librdkafka's command-line client)
# in the end-to-end tests; a C toolchain, make, perl and zlib headers build
# the bundled librdkafka of the rdkafka crate.
needed=()
command -v kcat >/dev/null || needed+=(kcat)
command -v cc >/dev/null || needed+=(build-essential)
# A C++ compiler: @confluentinc/kafka-javascript's binding (clients.rs).
command -v g++ >/dev/null || needed+=(g++)
command -v make >/dev/null || needed+=(make)
command -v perl >/dev/null || needed+=(perl)
[ -e /usr/include/zlib.h ] || needed+=(zlib1g-dev)
# OpenSSL headers and pkg-config: librdkafka's TLS (the TLS tests, bench).
[ -e /usr/include/openssl/ssl.h ] || needed+=(libssl-dev)
command -v pkg-config >/dev/null || needed+=(pkg-config)
# promtool (Debian's prometheus package) checks the alert rules and a
# live broker's /metrics against Prometheus's own conventions.
command -v promtool >/dev/null || needed+=(prometheus)
# Debian's Go and Sarama: the Go client of broker/tests/clients.rs, built
# in GOPATH mode from /usr/share/gocode.
command -v go >/dev/null || needed+=(golang-go)
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || needed+=(golang-github-shopify-sarama-dev)
if [ ${#needed[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${needed[@]}"
fi

# kafka-python, the second client of the group tests, PyYAML (the HTTP
# API test reads docs/openapi.yaml with it), confluent-kafka (a recent
# librdkafka, for the SASL tests), moto (an S3 server on 127.0.0.1 for
# the tiered storage tests) and aiokafka (broker/tests/clients.rs), in a
# virtualenv of its own under target/ (no system packages touched).
venv=target/test-venv
if ! "$venv/bin/python" -c "import kafka, yaml, confluent_kafka, moto.server, aiokafka" >/dev/null 2>&1; then
    if ! python3 -m venv --help >/dev/null 2>&1; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q kafka-python pyyaml confluent-kafka "moto[server]" aiokafka
fi
export KAFKA_PYTHON="$PWD/$venv/bin/python"
export MOTO_SERVER="$PWD/$venv/bin/moto_server"

# Under target/ with the machine's Node.js (installed from the
# distribution if missing): kafkajs, the JavaScript client of the
# idempotence tests; @platformatic/kafka and @confluentinc/kafka-javascript
# (broker/tests/clients.rs), the latter building its bundled librdkafka
# against the system's libraries (CKJS_LINKING=dynamic: its static build
# downloads their sources, which a machine here cannot); TypeScript and
# Grafana's dashboard types (@grafana/schema) for the dashboard's check in
# broker/tests/metrics.rs.
node_dir=target/test-node
confluent_js="$node_dir/node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node"
if [ ! -d "$node_dir/node_modules/kafkajs" ] || [ ! -d "$node_dir/node_modules/@platformatic/kafka" ] \
    || [ ! -e "$confluent_js" ] || [ ! -d "$node_dir/node_modules/@grafana/schema" ]; then
    if ! command -v npm >/dev/null; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm
    fi
    mkdir -p "$node_dir"
    (cd "$node_dir" && CKJS_LINKING=dynamic npm install --silent --no-audit --no-fund \
        kafkajs@2 @platformatic/kafka@1 @confluentinc/kafka-javascript@1 \
        typescript@5 @grafana/schema@13 >/dev/null)
fi
export KAFKAJS_NODE_PATH="$PWD/$node_dir/node_modules"

if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install --locked cargo-nextest
fi

# The habits the code is held to before any test runs: formatted, no
# clippy warnings, no import cycles between the modules of a crate and no
# import against the layers a crate declares (broker/layers.txt).
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$component"
    fi
done
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
python3 scripts/import-cycles.py --self-test
python3 scripts/import-cycles.py .

cargo nextest run --workspace --profile ci "$@"
