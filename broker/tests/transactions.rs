//! Transactions as applications use them: confluent-kafka's transactional
//! producer (commit, abort, a zombie fenced by a new instance,
//! consume-transform-produce with the group's offsets in the
//! transaction) against one
//! broker and against three (where the coordinator, the partitions'
//! leaders and the verification of transactional batches sit on different
//! brokers), read back by read_committed and read_uncommitted consumers
//! (`tests/python/transactions.py` states what is checked); kafka-python's
//! and kafkajs's transactional producers; the project's producer in both
//! transaction versions; and transactions while brokers are killed. Raw
//! requests are in transaction_protocol.rs.

mod support;

use std::process::Command;
use std::time::Duration;

use support::cluster::{coordinator_of, Cluster};
use support::{cli, start_broker};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/transactions.py");

/// Runs the script against `bootstrap`; panics with its output if it fails.
fn run_script(bootstrap: &str, topic: &str, partitions: u32) -> String {
    run_script_with(bootstrap, topic, partitions, "classic")
}

/// [`run_script`], the consume-transform-produce step's consumer of
/// `group_protocol` ("classic" or "consumer").
fn run_script_with(bootstrap: &str, topic: &str, partitions: u32, group_protocol: &str) -> String {
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new("timeout")
        .env("GROUP_PROTOCOL", group_protocol)
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

/// The same with the consume-transform-produce consumer in a consumer
/// group (KIP-848): TxnOffsetCommit carries its member id and epoch, which
/// the group checks.
#[test]
fn consume_transform_produce_works_for_a_consumer_group_member() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    cli(
        &bootstrap,
        &["topic", "create", "txn-kip848", "--partitions", "3"],
    );
    let out = run_script_with(&bootstrap, "txn-kip848", 3, "consumer");
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

/// Every value of partition 0 of `topic` as kcat (librdkafka) reads it
/// with `isolation` (read_committed or read_uncommitted).
fn read_with(bootstrap: &str, topic: &str, isolation: &str) -> Vec<String> {
    let out = Command::new("timeout")
        .args(["60", "kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0"])
        .args(["-X", &format!("isolation.level={isolation}")])
        .args(["-o", "beginning", "-e", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `prefix-0` .. `prefix-(count-1)`.
fn named(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn kafka_python_and_kafkajs_transactions_commit_and_abort() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    cli(&bootstrap, &["topic", "create", "txn-clients"]);
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/transactions_kafka_python.py"
    );
    let out = Command::new("timeout")
        .args(["120", &python, script, &bootstrap, "txn-clients"])
        .output()
        .unwrap();
    assert!(out.status.success(), "kafka-python: {out:?}");
    // scripts/test.sh installs kafkajs under target/test-node.
    let modules = std::env::var("KAFKAJS_NODE_PATH").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/test-node/node_modules"
        )
        .to_string()
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/transactions.js");
    let out = Command::new("timeout")
        .args(["120", "node", script, &bootstrap, "txn-clients"])
        .env("NODE_PATH", modules)
        .output()
        .unwrap();
    assert!(out.status.success(), "kafkajs: {out:?}");
    let committed: Vec<String> = [named("kp-c", 20), named("js-c", 20)].concat();
    assert_eq!(
        read_with(&bootstrap, "txn-clients", "read_committed"),
        committed
    );
    let everything: Vec<String> = [
        named("kp-c", 20),
        named("kp-a", 10),
        named("js-c", 20),
        named("js-a", 10),
    ]
    .concat();
    assert_eq!(
        read_with(&bootstrap, "txn-clients", "read_uncommitted"),
        everything
    );
}

#[test]
fn the_projects_transactional_producer_commits_and_aborts() {
    projects_transactions(1, "2");
}

#[test]
fn the_projects_producer_with_transaction_version_2_bumps_the_epoch_per_transaction() {
    projects_transactions(2, "2");
}

#[test]
fn a_broker_finalizing_transaction_version_1_keeps_the_projects_producer_classic() {
    projects_transactions(2, "1");
}

/// Three transactions of the project's producer (commit, abort, commit)
/// asking for `transaction_version` of a broker finalizing `level`, read
/// back by the project's read_committed consumer and by librdkafka's.
fn projects_transactions(transaction_version: i16, level: &str) {
    use bytes::Bytes;
    use client::producer::{Producer, ProducerConfig};
    let dir = tempfile::tempdir().unwrap();
    let env = [("BROKER_TRANSACTION_VERSION", level)];
    let broker = support::start_broker_with(dir.path(), &env);
    let bootstrap = broker.bootstrap();
    cli(&bootstrap, &["topic", "create", "txn-own"]);
    let address = broker.address;
    support::on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "txn-test");
        let config = ProducerConfig {
            transactional_id: Some("own-tx".into()),
            transaction_version,
            ..ProducerConfig::default()
        };
        let producer = Producer::new(cluster, config);
        producer.init_transactions().await.unwrap();
        for (prefix, commit) in [("own-c", true), ("own-a", false), ("own-d", true)] {
            producer.begin_transaction().unwrap();
            let mut acks = Vec::new();
            for i in 0..20 {
                let value = Bytes::from(format!("{prefix}-{i}"));
                acks.push(producer.send("txn-own", None, Some(value)).await.unwrap());
            }
            producer.flush().await;
            for ack in acks {
                ack.await.unwrap();
            }
            match commit {
                true => producer.commit_transaction().await.unwrap(),
                false => producer.abort_transaction().await.unwrap(),
            }
        }
        assert!(
            producer
                .send("txn-own", None, Some(Bytes::from("x")))
                .await
                .is_err(),
            "outside a transaction"
        );
        // transaction.version 2 ends each transaction with an epoch bump
        // (init gave epoch 0); the classic protocol keeps the epoch.
        let admin = client::cluster::Cluster::new(address, "txn-test-admin");
        let described = admin.describe_transaction("own-tx").await.unwrap();
        let bumps = match (transaction_version, level) {
            (2, "2") => 3,
            _ => 0,
        };
        assert_eq!(described.producer_epoch, bumps);
        // The project's consumer, read_committed: the aborted records
        // are in the fetched batches, and left out.
        use client::consumer::{Consumer, ConsumerConfig, StartAt};
        let cluster = client::cluster::Cluster::new(address, "txn-test-reader");
        let config = ConsumerConfig {
            isolation_level: 1,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::assign(cluster, "txn-own", &[0], StartAt::Earliest, config)
            .await
            .unwrap();
        let mut read = Vec::new();
        for _ in 0..100 {
            for record in consumer.poll().await.unwrap() {
                read.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
            }
            if read.len() >= 40 {
                break;
            }
        }
        let committed: Vec<String> = [named("own-c", 20), named("own-d", 20)].concat();
        assert_eq!(read, committed, "the project's read_committed consumer");
    });
    let committed: Vec<String> = [named("own-c", 20), named("own-d", 20)].concat();
    let mut read = read_with(&bootstrap, "txn-own", "read_committed");
    for _ in 0..50 {
        if read == committed {
            break;
        }
        // The last commit's marker follows its answer.
        std::thread::sleep(Duration::from_millis(100));
        read = read_with(&bootstrap, "txn-own", "read_committed");
    }
    assert_eq!(read, committed);
    let all = read_with(&bootstrap, "txn-own", "read_uncommitted");
    assert_eq!(all.len(), 60, "the aborted ones are in the log");
}

#[test]
fn killed_brokers_tear_no_transaction_and_lose_no_committed_one() {
    use rand::{Rng, SeedableRng};
    let seed = support::seed();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(dir.path(), 3, &[]);
    cluster.start();
    let bootstrap = cluster.bootstrap();
    let first = cluster.node(1).kafka.to_string();
    cli(
        &first,
        &[
            "topic",
            "create",
            "txn-faults",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
    );
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/transactions_faults.py"
    );
    let seconds = 30;
    let producer = Command::new("timeout")
        .args(["300", &python, script, &bootstrap, "txn-faults", "3"])
        .arg(seconds.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Faults for most of the producing time: one broker killed (SIGKILL)
    // and restarted 1-2 s later, every 3-5 s; then every broker back.
    let started = std::time::Instant::now();
    let (mut kills, mut coordinator_kills) = (0, 0);
    while started.elapsed() < Duration::from_secs(seconds - 6) {
        std::thread::sleep(Duration::from_millis(rng.gen_range(3_000..5_000)));
        // Half the time the transaction coordinator, as FindCoordinator
        // names it now.
        let coordinator = coordinator_of(&cluster, "tx-faults");
        let victim = match coordinator {
            Some(id) if rng.gen_bool(0.5) => id,
            _ => rng.gen_range(1..=3),
        };
        coordinator_kills += usize::from(coordinator == Some(victim));
        cluster.kill9(victim);
        kills += 1;
        std::thread::sleep(Duration::from_millis(rng.gen_range(1_000..2_000)));
        cluster.restart(victim);
    }
    cluster.heal();
    let out = producer.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "SEED={seed}, {kills} kills ({coordinator_kills} of the coordinator): {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("SEED={seed}, {kills} kills ({coordinator_kills} of the coordinator): {stdout}");
    cluster.stop();
}
