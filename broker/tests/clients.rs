//! Clients of other stacks against a real broker, each as its users write
//! it (broker/tests/clients/): its admin API creates a topic of three
//! partitions and lists it, a producer with the client's default settings
//! sends COUNT keyed values, a consumer in a group reads them all and
//! commits. Each prints what it did; the checks here are the same for all:
//! every value read exactly once, each key on one partition in the order
//! sent, and the group's committed offsets at each partition's end.
//! librdkafka (the rdkafka crate, confluent-kafka, kcat), kafka-python and
//! kafkajs are covered by the other tests; docs/protocol.md has the table.
//!
//! The test command installs every client: aiokafka in its virtualenv
//! (KAFKA_PYTHON), the npm packages under target/test-node (NODE_PATH in
//! KAFKAJS_NODE_PATH), Debian's Go and Sarama.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use client::cluster::Cluster;
use support::{on_glommio, start_broker, Broker};

const COUNT: usize = 300;

/// What a client printed: its record lines as (partition, offset, key,
/// index of value-N), in the order it read them.
struct Run {
    stdout: String,
    records: Vec<(i32, i64, String, usize)>,
}

fn run(mut command: Command, client: &str) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().unwrap_or_else(|e| panic!("{client}: {e}"));
    let stdout = String::from_utf8_lossy(&stdout).to_string();
    assert!(
        status.success(),
        "{client} failed (the test command installs it):\n{stdout}\n{}",
        String::from_utf8_lossy(&stderr)
    );
    let records = (stdout.lines())
        .filter_map(|line| line.strip_prefix("record "))
        .map(|rest| {
            let fields: Vec<&str> = rest.split(' ').collect();
            let index = fields[3].strip_prefix("value-").expect("value-N");
            (
                fields[0].parse().unwrap(),
                fields[1].parse().unwrap(),
                fields[2].to_string(),
                index.parse().unwrap(),
            )
        })
        .collect();
    Run { stdout, records }
}

/// The checks every client's run must pass.
fn check(broker: &Broker, run: &Run, client: &str, topic: &str, group: &str) {
    for line in [
        format!("listed {topic}"),
        format!("acked {COUNT}"),
        "committed".to_string(),
    ] {
        assert!(
            run.stdout.lines().any(|l| l == line),
            "{client} did not print {line:?}:\n{}",
            run.stdout
        );
    }
    let mut read: Vec<usize> = run.records.iter().map(|r| r.3).collect();
    read.sort_unstable();
    assert_eq!(read, (0..COUNT).collect::<Vec<_>>(), "{client}: each once");
    // Per key: one partition, values in the order sent; per partition:
    // offsets in order. The partition's end is its last offset read + 1.
    let mut by_key: BTreeMap<&str, (i32, usize)> = BTreeMap::new();
    let mut ends: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset, key, index) in &run.records {
        assert_eq!(*key, format!("key-{}", index % 7), "{client}");
        if let Some((first_partition, last)) = by_key.get(key.as_str()) {
            assert_eq!(partition, first_partition, "{client}: {key} moved");
            assert!(index > last, "{client}: {key} out of order");
        }
        by_key.insert(key, (*partition, *index));
        let end = ends.entry(*partition).or_insert(0);
        assert_eq!(*offset, *end, "{client}: partition {partition} skipped");
        *end = offset + 1;
    }
    let address = broker.address;
    let (topic, group) = (topic.to_string(), group.to_string());
    let (partitions, committed) = on_glommio(async move {
        let cluster = Cluster::new(address, "clients-test");
        let topics = cluster.list_topics().await.unwrap();
        let created = topics.iter().find(|t| t.name == topic).expect("created");
        let committed = cluster.committed_offsets(&group, None).await.unwrap();
        (created.partitions.len(), committed)
    });
    assert_eq!(partitions, 3, "{client} asked for 3 partitions");
    let committed: BTreeMap<i32, i64> = (committed.into_iter())
        .map(|((_, partition), offset)| (partition, offset))
        .collect();
    assert_eq!(committed, ends, "{client}: commits at each partition's end");
}

fn args(command: &mut Command, broker: &Broker, topic: &str, group: &str) {
    command.args([&broker.bootstrap(), topic, group, &COUNT.to_string()]);
}

fn script(name: &str) -> String {
    format!("{}/tests/clients/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn node_modules() -> String {
    std::env::var("KAFKAJS_NODE_PATH").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/test-node/node_modules"
        )
        .to_string()
    })
}

#[test]
fn aiokafka_creates_produces_consumes_in_a_group_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/test-venv/bin/python"
        )
        .to_string()
    });
    let mut command = Command::new(python);
    command.arg(script("aiokafka_client.py"));
    args(&mut command, &broker, "aio", "aio-group");
    let run = run(command, "aiokafka");
    check(&broker, &run, "aiokafka", "aio", "aio-group");
}

#[test]
fn platformatic_kafka_creates_produces_consumes_in_a_group_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let mut command = Command::new("node");
    command
        .arg(script("platformatic_client.mjs"))
        .env("NODE_PATH", node_modules());
    args(&mut command, &broker, "plat", "plat-group");
    let run = run(command, "@platformatic/kafka");
    check(&broker, &run, "@platformatic/kafka", "plat", "plat-group");
}

#[test]
fn confluent_kafka_javascript_creates_produces_consumes_in_a_group_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let mut command = Command::new("node");
    command
        .arg(script("confluent_js_client.js"))
        .env("NODE_PATH", node_modules());
    args(&mut command, &broker, "cjs", "cjs-group");
    let client = "@confluentinc/kafka-javascript";
    let run = run(command, client);
    check(&broker, &run, client, "cjs", "cjs-group");
}

/// Builds the Sarama program with Debian's Go in GOPATH mode (Debian's
/// golang-github-shopify-sarama-dev under /usr/share/gocode), its build
/// cache under target/ so later runs take seconds.
fn build_sarama_client(out: &Path) -> std::path::PathBuf {
    let program = out.join("sarama_client");
    let cache = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/go-cache");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&program)
        .arg(script("sarama_client.go"))
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", cache)
        .env("GOFLAGS", "")
        .output()
        .expect("go (the test command installs Debian's golang-go)");
    assert!(
        built.status.success(),
        "go build (the test command installs golang-github-shopify-sarama-dev):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    program
}

#[test]
fn sarama_creates_produces_consumes_in_a_group_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let program = build_sarama_client(dir.path());
    let broker = start_broker(&dir.path().join("broker"));
    let mut command = Command::new(program);
    args(&mut command, &broker, "sarama", "sarama-group");
    let run = run(command, "Sarama");
    check(&broker, &run, "Sarama", "sarama", "sarama-group");
}
