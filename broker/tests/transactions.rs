//! Transactions as applications use them: confluent-kafka's transactional
//! producer (commit, abort, a zombie fenced by a new instance,
//! consume-transform-produce with the group's offsets in the
//! transaction) against one
//! broker and against three (where the coordinator, the partitions'
//! leaders and the verification of transactional batches sit on different
//! brokers), read back by read_committed and read_uncommitted consumers
//! (`tests/python/transactions.py` states what is checked).

mod support;

use std::process::Command;

use support::cluster::Cluster;
use support::{cli, start_broker};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/transactions.py");

/// Runs the script against `bootstrap`; panics with its output if it fails.
fn run_script(bootstrap: &str, topic: &str, partitions: u32) -> String {
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new("timeout")
        .args([
            "240",
            &python,
            SCRIPT,
            bootstrap,
            topic,
            &partitions.to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "transactions.py failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn committed_transactions_are_read_once_and_aborted_ones_never() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    cli(
        &bootstrap,
        &["topic", "create", "txn-out", "--partitions", "3"],
    );
    let out = run_script(&bootstrap, "txn-out", 3);
    println!("{out}");
}

#[test]
fn transactions_span_brokers_with_the_coordinator_on_another_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(dir.path(), 3, &[]);
    cluster.start();
    let bootstrap = cluster.node(1).kafka.to_string();
    cli(
        &bootstrap,
        &[
            "topic",
            "create",
            "txn-out",
            "--partitions",
            "6",
            "--replication-factor",
            "3",
        ],
    );
    cli(
        &bootstrap,
        &[
            "topic",
            "create",
            "txn-out-in",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        ],
    );
    let out = run_script(&bootstrap, "txn-out", 6);
    println!("{out}");
    cluster.stop();
}
