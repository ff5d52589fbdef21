//! The metadata survives its snapshots: brokers restart after many
//! metadata changes (past the snapshot interval, several times), alone and
//! in a cluster, and find every topic with its data; clusters started from
//! the metadata directories saved after two field failures (where every
//! topic had vanished) serve their topics again; partition data the
//! metadata does not know is kept and reported, never deleted, while a
//! committed deletion still removes its files, also on a broker that was
//! down and learns of it from a snapshot.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use client::cluster::Cluster as ClientCluster;
use support::cluster::{counter, Cluster, FAST};
use support::{http, on_glommio, start_broker_with};

/// A small snapshot interval, so a handful of changes crosses it.
const SNAPSHOT_EVERY: (&str, &str) = ("BROKER_METADATA_SNAPSHOT_EVERY_ENTRIES", "20");

/// Topic names a broker lists, through the project's client.
fn topics(address: std::net::SocketAddr) -> Vec<String> {
    on_glommio(async move {
        let client = ClientCluster::new(address, "snapshot-test");
        match client.list_topics().await {
            Ok(topics) => topics.into_iter().map(|t| t.name).collect(),
            Err(_) => Vec::new(),
        }
    })
}

/// Each partition's leader of `topic`, as `address` describes it.
fn leaders(address: std::net::SocketAddr, topic: &str) -> Vec<i32> {
    let topic = topic.to_string();
    on_glommio(async move {
        let client = ClientCluster::new(address, "snapshot-test");
        let _ = client.refresh(Some(&[topic.as_str()]), false).await;
        client.topic(&topic).map(|t| t.leaders).unwrap_or_default()
    })
}

/// Runs `broker topic ARGS` until it succeeds (a controller failover
/// answers "unavailable" for a moment, and clients retry), at most 30 s;
/// `done` recognises a retried call whose first try had landed.
fn topic_command(args: &[&str], bootstrap: &str, done: &str) {
    let started = Instant::now();
    let mut retried = false;
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_broker"))
            .arg("topic")
            .args(args)
            .args(["--brokers", bootstrap])
            .output()
            .unwrap();
        if out.status.success() || (retried && String::from_utf8_lossy(&out.stderr).contains(done))
        {
            return;
        }
        retried = true;
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{args:?}: {out:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn create_topic(bootstrap: &str, name: &str, partitions: u32, replicas: u32) {
    let (partitions, replicas) = (partitions.to_string(), replicas.to_string());
    let args = [
        "create",
        name,
        "--partitions",
        &partitions,
        "--replication-factor",
        &replicas,
    ];
    topic_command(&args, bootstrap, "(TOPIC_ALREADY_EXISTS)");
}

/// Produces `values` with acks=all through kcat; all must be delivered.
fn produce(bootstrap: &str, topic: &str, values: &[String]) {
    let mut producer = Command::new("kcat")
        .args(["-P", "-b", bootstrap, "-t", topic, "-X", "acks=all"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat (the test command installs it)");
    {
        let stdin = producer.stdin.as_mut().unwrap();
        for value in values {
            writeln!(stdin, "{value}").unwrap();
        }
    }
    let out = producer.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Every value of `topic`, read from the beginning through kcat, sorted.
fn consume(bootstrap: &str, topic: &str) -> Vec<String> {
    let out = Command::new("timeout")
        .args(["60", "kcat", "-C", "-b", bootstrap, "-t", topic])
        .args(["-o", "beginning", "-e", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut values: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    values.sort();
    values
}

fn values(prefix: &str, count: usize) -> Vec<String> {
    let mut values: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:05}")).collect();
    values.sort();
    values
}

/// Polls `check` every 100 ms for up to 60 s.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_broker_restarts_after_many_metadata_changes_and_finds_every_topic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = start_broker_with(&data, &[SNAPSHOT_EVERY]);
    let bootstrap = broker.bootstrap();
    // 70 topics: 70 records and more (registrations, unfences) past an
    // interval of 20, so the log is snapshotted and compacted three times.
    let names: Vec<String> = (0..70).map(|i| format!("topic-{i:02}")).collect();
    on_glommio({
        let (address, names) = (broker.address, names.clone());
        async move {
            let client = ClientCluster::new(address, "snapshot-test");
            for name in &names {
                client.create_topic(name, 1, 1, &[]).await.unwrap();
            }
        }
    });
    produce(&bootstrap, "topic-07", &values("before", 100));
    let snapshot = data.join("metadata").join("snapshot");
    assert!(snapshot.exists(), "an interval was crossed");
    // SIGTERM, then SIGKILL: each start must find every topic and record.
    assert!(broker.terminate().success());
    let broker = start_broker_with(&data, &[SNAPSHOT_EVERY]);
    let mut listed = topics(broker.address);
    listed.retain(|t| t.starts_with("topic-"));
    assert_eq!(listed, names, "every topic after a clean restart");
    assert_eq!(
        consume(&broker.bootstrap(), "topic-07"),
        values("before", 100)
    );
    broker.kill9();
    let broker = start_broker_with(&data, &[SNAPSHOT_EVERY]);
    let mut listed = topics(broker.address);
    listed.retain(|t| t.starts_with("topic-"));
    assert_eq!(listed, names, "every topic after a SIGKILL");
    produce(&broker.bootstrap(), "topic-07", &values("after", 100));
    let mut all = values("before", 100);
    all.extend(values("after", 100));
    all.sort();
    assert_eq!(consume(&broker.bootstrap(), "topic-07"), all);
    let (status, body) = http(broker.http, "GET", "/health", "");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
}

/// Starts three brokers on the metadata directories saved in
/// tests/fixtures/`case`, checks they serve the topic the quorum had
/// committed, and produce and consume through it.
fn serves_the_saved_topics(case: &str) {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &FAST);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case);
    for id in 1..=3 {
        let to = cluster.node(id).dir.join("data").join("metadata");
        std::fs::create_dir_all(&to).unwrap();
        for file in ["raft.log", "snapshot"] {
            let from = fixtures.join(format!("node{id}/metadata/{file}"));
            std::fs::copy(&from, to.join(file)).unwrap();
        }
    }
    cluster.start();
    for id in 1..=3 {
        let listed = topics(cluster.node(id).kafka);
        assert!(
            listed.contains(&"jepsen".to_string()) && listed.contains(&"__consumer_offsets".into()),
            "broker {id} lists {listed:?}"
        );
    }
    eventually("a leader for every partition of the topic", || {
        let leaders = leaders(cluster.node(1).kafka, "jepsen");
        leaders.len() == 3 && leaders.iter().all(|l| *l > 0)
    });
    let bootstrap = cluster.node(2).kafka.to_string();
    produce(&bootstrap, "jepsen", &values("again", 300));
    let read = consume(&cluster.node(3).kafka.to_string(), "jepsen");
    assert_eq!(read, values("again", 300));
    for id in 1..=3 {
        eventually("every broker healthy", || {
            http(cluster.node(id).http, "GET", "/health", "").0 == 200
        });
    }
}

#[test]
fn a_cluster_started_from_the_metadata_left_by_kills_and_pauses_serves_its_topics() {
    serves_the_saved_topics("quorum-after-faults");
}

#[test]
fn a_cluster_started_from_the_metadata_left_by_network_partitions_serves_its_topics() {
    serves_the_saved_topics("quorum-after-partitions");
}

#[test]
fn a_cluster_restarted_past_many_snapshots_serves_every_topic_with_its_data() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(SNAPSHOT_EVERY);
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    let bootstrap = cluster.node(1).kafka.to_string();
    let names: Vec<String> = (0..8).map(|i| format!("kept-{i}")).collect();
    for name in &names {
        create_topic(&bootstrap, name, 2, 3);
        produce(&bootstrap, name, &values(name, 50));
    }
    // Two brokers at once, then the third alone; each restart registers,
    // fences and unfences (more snapshots).
    cluster.kill9(2);
    cluster.kill9(3);
    cluster.restart(2);
    cluster.restart(3);
    cluster.terminate(1);
    cluster.restart(1);
    let more: Vec<String> = (0..6).map(|i| format!("later-{i}")).collect();
    for name in &more {
        create_topic(&bootstrap, name, 1, 3);
    }
    for id in 1..=3 {
        let snapshot = cluster.node(id).dir.join("data/metadata/snapshot");
        assert!(snapshot.exists(), "broker {id} crossed the interval");
        let listed = topics(cluster.node(id).kafka);
        for name in names.iter().chain(&more) {
            assert!(listed.contains(name), "broker {id} lists {listed:?}");
        }
    }
    for name in &names {
        eventually("leaders", || {
            leaders(cluster.node(1).kafka, name).iter().all(|l| *l > 0)
        });
        assert_eq!(consume(&bootstrap, name), values(name, 50), "{name}");
    }
}

#[test]
fn data_of_an_unknown_topic_is_kept_and_reported_and_a_committed_deletion_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = start_broker_with(&data, &[SNAPSHOT_EVERY]);
    create_topic(&broker.bootstrap(), "orphan", 1, 1);
    produce(&broker.bootstrap(), "orphan", &values("orphan", 10));
    assert!(broker.terminate().success());
    // The metadata forgets the topic: an operator starts a new cluster on
    // the data (the broker refuses to while meta.properties says the
    // directory belonged to a cluster whose metadata is gone).
    std::fs::remove_dir_all(data.join("metadata")).unwrap();
    std::fs::remove_file(data.join("meta.properties")).unwrap();
    let broker = start_broker_with(&data, &[SNAPSHOT_EVERY]);
    let partitions = data.join("partitions");
    let kept: Vec<String> = std::fs::read_dir(&partitions)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        kept.iter().any(|d| d.starts_with("orphan.")),
        "the unknown topic's data stays: {kept:?}"
    );
    assert_eq!(counter(broker.http, "partition_dirs_unknown_topic"), 1);
    let (status, body) = http(broker.http, "GET", "/health", "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("no partition to lead or follow"), "{body}");
    assert_eq!(counter(broker.http, "broker_healthy"), 0);
    // A topic created and deleted here: its files go with the deletion.
    create_topic(&broker.bootstrap(), "doomed", 1, 1);
    produce(&broker.bootstrap(), "doomed", &values("doomed", 10));
    let doomed_dirs = || {
        std::fs::read_dir(&partitions)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("doomed."))
            .count()
    };
    assert_eq!(doomed_dirs(), 1);
    topic_command(
        &["delete", "doomed"],
        &broker.bootstrap(),
        "(UNKNOWN_TOPIC_OR_PARTITION)",
    );
    eventually("the deleted topic's files removed", || doomed_dirs() == 0);
    assert!(partitions
        .read_dir()
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("orphan.")));
    let warned = broker.logged("partition data of topics the metadata does not know");
    assert!(!warned.is_empty(), "the unknown directory is reported");
}

#[test]
fn a_broker_down_during_a_deletion_removes_the_files_when_a_snapshot_tells_it() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(SNAPSHOT_EVERY);
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    let bootstrap = cluster.node(1).kafka.to_string();
    create_topic(&bootstrap, "gone", 1, 3);
    produce(&bootstrap, "gone", &values("gone", 20));
    let partitions_on_3 = cluster.node(3).dir.join("data/partitions");
    let dirs_on_3 = || {
        std::fs::read_dir(&partitions_on_3).map_or(0, |entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("gone."))
                .count()
        })
    };
    eventually("broker 3 holds a replica", || dirs_on_3() == 1);
    cluster.kill9(3);
    topic_command(
        &["delete", "gone"],
        &bootstrap,
        "(UNKNOWN_TOPIC_OR_PARTITION)",
    );
    // More changes than the interval: the others compact the deletion
    // away, so broker 3 can only learn of it from a snapshot.
    for i in 0..25 {
        create_topic(&bootstrap, &format!("filler-{i}"), 1, 2);
    }
    assert_eq!(
        dirs_on_3(),
        1,
        "broker 3 was down: its files are still there"
    );
    cluster.restart(3);
    eventually("broker 3 removed the deleted topic's files", || {
        dirs_on_3() == 0
    });
    let listed = topics(cluster.node(3).kafka);
    assert!(listed.contains(&"filler-24".to_string()), "{listed:?}");
}

#[test]
fn a_broker_whose_metadata_cannot_be_started_from_exits_non_zero_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = start_broker_with(&data, &[SNAPSHOT_EVERY]);
    on_glommio({
        let address = broker.address;
        async move {
            let client = ClientCluster::new(address, "snapshot-test");
            for i in 0..30 {
                client
                    .create_topic(&format!("t{i}"), 1, 1, &[])
                    .await
                    .unwrap();
            }
        }
    });
    assert!(broker.terminate().success());
    let snapshot = data.join("metadata").join("snapshot");
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&snapshot, &bytes).unwrap();
    let out = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_broker"))
        .args([
            "--kafka-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--shards", "2", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("metadata/snapshot is damaged"),
        "names the file and the damage: {stderr}"
    );
}
