//! Consumer groups end to end, with librdkafka (kcat processes and the
//! `rdkafka` crate) and kafka-python as the clients: partitions shared in
//! a group and reassigned when a member is SIGKILLed, pub/sub between
//! groups, at-least-once versus at-most-once by when a consumer commits,
//! committed offsets surviving a SIGKILL of the broker, replay through
//! `broker group reset-offsets`, and the reset policy of a consumer that
//! retention left behind.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use broker::groups::consumer_protocol::assigned_partitions;
use client::cluster::Cluster;
use client::consumer::{list_offsets, StartAt};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use support::{on_glommio, start_broker_with, Broker};

/// Short rebalance delays so the tests do not wait Kafka's 3 s.
const GROUPS: &[(&str, &str)] = &[("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "300")];

/// Session timeout the consumers ask for (the broker's minimum).
const SESSION_MS: u64 = 6000;

/// Produces `count` messages "m{i}" (keys spread over partitions) with
/// acks=all; returns each one's (partition, offset).
fn produce(bootstrap: &str, topic: &str, from: usize, count: usize) -> Vec<(i32, i64)> {
    produce_stamped(bootstrap, topic, from, count, None)
}

/// [`produce`] with record timestamps `first_ms + i * 1000`.
fn produce_stamped(
    bootstrap: &str,
    topic: &str,
    from: usize,
    count: usize,
    first_ms: Option<i64>,
) -> Vec<(i32, i64)> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .expect("a producer");
    for i in from..from + count {
        let key = format!("k{}", i % 97);
        let value = format!("m{i}");
        let mut record = BaseRecord::to(topic).key(&key).payload(&value);
        if let Some(first) = first_ms {
            record = record.timestamp(first + (i - from) as i64 * 1000);
        }
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(5));
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every message acknowledged");
    // Where each landed, read back (a BaseProducer without a context
    // keeps no delivery reports).
    let stored = read_positions(bootstrap, topic, from, count);
    assert_eq!(stored.len(), count, "every message is in the log");
    stored
}

/// Where messages "m{from}".."m{from+count}" are stored: reads every
/// partition from the start with an assign()-only consumer.
fn read_positions(bootstrap: &str, topic: &str, from: usize, count: usize) -> Vec<(i32, i64)> {
    let consumer = consumer(bootstrap, "positions-reader", &[]);
    let partitions = partition_count(bootstrap, topic);
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&list).unwrap();
    let wanted: BTreeSet<String> = (from..from + count).map(|i| format!("m{i}")).collect();
    let mut found = Vec::new();
    let started = Instant::now();
    while found.len() < count && started.elapsed() < Duration::from_secs(30) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
            if wanted.contains(&value) {
                found.push((m.partition(), m.offset()));
            }
        }
    }
    found
}

fn partition_count(bootstrap: &str, topic: &str) -> i32 {
    let consumer = consumer(bootstrap, "metadata-reader", &[]);
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    metadata.topics()[0].partitions().len() as i32
}

/// A librdkafka consumer in `group` (manual commits unless `extra` says
/// otherwise).
fn consumer(bootstrap: &str, group: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("session.timeout.ms", SESSION_MS.to_string())
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create().expect("a consumer")
}

/// Polls until a message arrives (bounded).
fn next_message(consumer: &BaseConsumer) -> (i32, i64, String) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                return (
                    m.partition(),
                    m.offset(),
                    String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string(),
                )
            }
            Some(Err(e)) => panic!("consumer error: {e}"),
            None => {}
        }
    }
    panic!("no message within 30 s");
}

fn create_topic(
    address: std::net::SocketAddr,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    let configs: Vec<(String, String)> = configs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let name = name.to_string();
    on_glommio(async move {
        let cluster = Cluster::new(address, "groups-test");
        let configs: Vec<(&str, &str)> = configs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        cluster
            .create_topic(&name, partitions, 1, &configs)
            .await
            .unwrap();
    });
}

/// The group as its coordinator describes it: state, and each member's
/// assigned (topic, partition)s.
fn describe(address: std::net::SocketAddr, group: &str) -> (String, Vec<Vec<(String, i32)>>) {
    let group = group.to_string();
    on_glommio(async move {
        let cluster = Cluster::new(address, "groups-test");
        let description = cluster.describe_group(&group).await.unwrap();
        let members = description
            .members
            .iter()
            .map(|m| {
                assigned_partitions(&m.assignment)
                    .expect("a consumer protocol assignment")
                    .into_iter()
                    .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                    .collect()
            })
            .collect();
        (description.state, members)
    })
}

/// A kcat consumer process in a group, its output collected.
struct KcatConsumer {
    child: Child,
    /// (partition, offset) of every message it printed.
    seen: Arc<Mutex<Vec<(i32, i64)>>>,
}

impl KcatConsumer {
    fn start(bootstrap: &str, group: &str, topic: &str) -> KcatConsumer {
        let mut child = Command::new("kcat")
            .args(["-b", bootstrap, "-G", group, "-q", "-u", "-f", "%p %o\\n"])
            .args(["-X", &format!("session.timeout.ms={SESSION_MS}")])
            .args(["-X", "heartbeat.interval.ms=500"])
            .args(["-X", "auto.commit.interval.ms=200"])
            .args(["-X", "auto.offset.reset=earliest"])
            .arg(topic)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kcat (the test command installs it)");
        let stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut parts = line.split_whitespace();
                if let (Some(Ok(p)), Some(Ok(o))) = (
                    parts.next().map(str::parse::<i32>),
                    parts.next().map(str::parse::<i64>),
                ) {
                    keep.lock().unwrap().push((p, o));
                }
            }
        });
        KcatConsumer { child, seen }
    }
}

impl Drop for KcatConsumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (bounded) until `done`, checking every 100 ms.
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    started.elapsed()
}

/// Asserts no partition is assigned to two members in a Stable group.
fn check_exclusive(members: &[Vec<(String, i32)>]) {
    let mut owner = BTreeMap::new();
    for (m, partitions) in members.iter().enumerate() {
        for p in partitions {
            if let Some(other) = owner.insert(p.clone(), m) {
                panic!("partition {p:?} assigned to members {other} and {m}");
            }
        }
    }
}

#[test]
fn three_consumers_share_six_partitions_and_a_killed_ones_are_reassigned() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    let address = broker.address;
    let bootstrap = broker.bootstrap();
    create_topic(address, "work", 6, &[]);
    let all: BTreeSet<(String, i32)> = (0..6).map(|p| ("work".to_string(), p)).collect();
    let mut consumers: Vec<KcatConsumer> = (0..3)
        .map(|_| KcatConsumer::start(&bootstrap, "workers", "work"))
        .collect();
    let first = produce(&bootstrap, "work", 0, 3000);
    // One generation with three members, each partition with exactly one.
    wait_until(
        "three members sharing six partitions",
        Duration::from_secs(30),
        || {
            let (state, members) = describe(address, "workers");
            if state == "Stable" {
                check_exclusive(&members);
            }
            let covered: BTreeSet<_> = members.iter().flatten().cloned().collect();
            state == "Stable"
                && members.len() == 3
                && covered == all
                && members.iter().all(|m| !m.is_empty())
        },
    );
    let seen = |consumers: &[KcatConsumer]| -> BTreeSet<(i32, i64)> {
        consumers
            .iter()
            .flat_map(|c| c.seen.lock().unwrap().clone())
            .collect()
    };
    wait_until("the first 3000 consumed", Duration::from_secs(30), || {
        let seen = seen(&consumers);
        first.iter().all(|m| seen.contains(m))
    });
    // SIGKILL one member; what it saw stays counted (it was processed).
    let killed = consumers.remove(0);
    let killed_seen = killed.seen.clone();
    let mut killed = killed;
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let killed_at = Instant::now();
    // More messages while the group notices.
    let producing = {
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || produce(&bootstrap, "work", 3000, 3000))
    };
    wait_until(
        "the killed member's partitions reassigned",
        Duration::from_millis(SESSION_MS) + Duration::from_secs(10),
        || {
            let (state, members) = describe(address, "workers");
            if state == "Stable" {
                check_exclusive(&members);
            }
            let covered: BTreeSet<_> = members.iter().flatten().cloned().collect();
            state == "Stable" && members.len() == 2 && covered == all
        },
    );
    let since_kill = killed_at.elapsed();
    let second = producing.join().unwrap();
    println!(
        "reassigned {:.1} s after the SIGKILL (session timeout {} s)",
        since_kill.as_secs_f64(),
        SESSION_MS / 1000
    );
    assert!(
        since_kill < Duration::from_millis(SESSION_MS) + Duration::from_secs(3),
        "reassignment took {since_kill:?}: the session timeout plus a rejoin"
    );
    // At least once: every message of both rounds was printed by someone.
    wait_until(
        "all 6000 consumed at least once",
        Duration::from_secs(30),
        || {
            let mut seen = seen(&consumers);
            seen.extend(killed_seen.lock().unwrap().iter().cloned());
            first.iter().chain(&second).all(|m| seen.contains(m))
        },
    );
    drop(killed);
}

#[test]
fn two_groups_each_receive_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    let bootstrap = broker.bootstrap();
    create_topic(broker.address, "news", 4, &[]);
    let produced: BTreeSet<(i32, i64)> = produce(&bootstrap, "news", 0, 2000).into_iter().collect();
    // Group "a" has two members, group "b" one.
    let groups = [
        (
            "a",
            vec![
                consumer(&bootstrap, "a", &[]),
                consumer(&bootstrap, "a", &[]),
            ],
        ),
        ("b", vec![consumer(&bootstrap, "b", &[])]),
    ];
    let mut seen: BTreeMap<&str, BTreeSet<(i32, i64)>> = BTreeMap::new();
    for (group, members) in &groups {
        for member in members {
            member.subscribe(&["news"]).unwrap();
        }
        seen.insert(group, BTreeSet::new());
    }
    let started = Instant::now();
    while seen.values().any(|s| *s != produced) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "groups saw {:?} of {}",
            seen.values().map(|s| s.len()).collect::<Vec<_>>(),
            produced.len()
        );
        for (group, members) in &groups {
            for member in members {
                while let Some(Ok(m)) = member.poll(Duration::from_millis(20)) {
                    seen.get_mut(group)
                        .unwrap()
                        .insert((m.partition(), m.offset()));
                }
            }
        }
    }
}

#[test]
fn when_the_consumer_commits_decides_at_least_once_or_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    let bootstrap = broker.bootstrap();
    create_topic(broker.address, "events", 1, &[]);
    produce(&bootstrap, "events", 0, 10);
    let commit = |consumer: &BaseConsumer, next: i64| {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset("events", 0, Offset::Offset(next))
            .unwrap();
        consumer.commit(&list, CommitMode::Sync).unwrap();
    };
    // At least once: process, then commit. The consumer processes 0..5,
    // commits after 0..3, and crashes before committing 3 and 4.
    let first = consumer(&bootstrap, "at-least-once", &[]);
    first.subscribe(&["events"]).unwrap();
    let processed: Vec<i64> = (0..5).map(|_| next_message(&first).1).collect();
    assert_eq!(processed, vec![0, 1, 2, 3, 4]);
    commit(&first, 3);
    drop(first);
    let second = consumer(&bootstrap, "at-least-once", &[]);
    second.subscribe(&["events"]).unwrap();
    let again: Vec<i64> = (0..3).map(|_| next_message(&second).1).collect();
    assert_eq!(again, vec![3, 4, 5], "3 and 4 are delivered again");
    drop(second);
    // At most once: commit, then process. The consumer commits past 0
    // and crashes before processing it: 0 is never processed.
    let first = consumer(&bootstrap, "at-most-once", &[]);
    first.subscribe(&["events"]).unwrap();
    let (_, offset, _) = next_message(&first);
    assert_eq!(offset, 0);
    commit(&first, offset + 1);
    drop(first);
    let second = consumer(&bootstrap, "at-most-once", &[]);
    second.subscribe(&["events"]).unwrap();
    assert_eq!(next_message(&second).1, 1, "0 is not delivered again");
}

/// Runs `broker group ...` against `bootstrap`; returns (success, stdout+stderr).
fn group_cli(bootstrap: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_broker"))
        .arg("group")
        .args(args)
        .args(["--brokers", bootstrap])
        .output()
        .expect("run the broker binary");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

fn committed(address: std::net::SocketAddr, group: &str) -> BTreeMap<(String, i32), i64> {
    let group = group.to_string();
    on_glommio(async move {
        Cluster::new(address, "groups-test")
            .committed_offsets(&group, None)
            .await
            .unwrap()
    })
}

/// 2026-01-01T00:00:00Z in ms: message i of the history topic is stamped
/// this plus i seconds.
const HISTORY_T0: i64 = 1_767_225_600_000;

#[test]
fn committed_offsets_survive_a_sigkill_and_resets_replay_history() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    create_topic(broker.address, "history", 1, &[]);
    produce_stamped(&broker.bootstrap(), "history", 0, 100, Some(HISTORY_T0));
    let reader = consumer(&broker.bootstrap(), "replay", &[]);
    reader.subscribe(&["history"]).unwrap();
    for expected in 0..60 {
        assert_eq!(next_message(&reader).1, expected);
    }
    let mut list = TopicPartitionList::new();
    list.add_partition_offset("history", 0, Offset::Offset(60))
        .unwrap();
    reader.commit(&list, CommitMode::Sync).unwrap();
    drop(reader);
    // The commit was acknowledged: it survives a SIGKILL.
    broker.kill9();
    let broker: Broker = start_broker_with(dir.path(), GROUPS);
    let bootstrap = broker.bootstrap();
    let address = broker.address;
    assert_eq!(
        committed(address, "replay")[&("history".to_string(), 0)],
        60
    );
    let reader = consumer(&bootstrap, "replay", &[]);
    reader.subscribe(&["history"]).unwrap();
    assert_eq!(
        next_message(&reader).1,
        60,
        "resumes at the committed offset"
    );
    // A group with a member cannot be reset.
    let (ok, text) = group_cli(
        &bootstrap,
        &[
            "reset-offsets",
            "replay",
            "--topic",
            "history",
            "--to-earliest",
        ],
    );
    assert!(!ok && text.contains("active members"), "{text}");
    drop(reader);
    wait_until("the group to empty", Duration::from_secs(20), || {
        describe(address, "replay").1.is_empty()
    });
    // Replay from the start.
    let (ok, text) = group_cli(
        &bootstrap,
        &[
            "reset-offsets",
            "replay",
            "--topic",
            "history",
            "--to-earliest",
        ],
    );
    assert!(ok, "{text}");
    let reader = consumer(&bootstrap, "replay", &[]);
    reader.subscribe(&["history"]).unwrap();
    assert_eq!(
        next_message(&reader).1,
        0,
        "a reset to earliest replays history"
    );
    drop(reader);
    // By time: message 42 is stamped 00:00:42.
    let at = |args: &[&str]| {
        let mut all = vec!["reset-offsets", "replay", "--topic", "history"];
        all.extend_from_slice(args);
        let (ok, text) = group_cli(&bootstrap, &all);
        assert!(ok, "{args:?}: {text}");
        committed(address, "replay")[&("history".to_string(), 0)]
    };
    assert_eq!(at(&["--to-datetime", "2026-01-01T00:00:42Z"]), 42);
    assert_eq!(at(&["--to-datetime", "2026-01-01T00:00:41.500Z"]), 42);
    assert_eq!(at(&["--to-datetime", "2026-01-01T01:00:42+01:00"]), 42);
    let reader = consumer(&bootstrap, "replay", &[]);
    reader.subscribe(&["history"]).unwrap();
    assert_eq!(
        next_message(&reader).1,
        42,
        "a reset by time lands on the right offset"
    );
    drop(reader);
    wait_until("the group to empty", Duration::from_secs(20), || {
        describe(address, "replay").1.is_empty()
    });
    assert_eq!(at(&["--shift-by", "-10"]), 32);
    assert_eq!(at(&["--to-offset", "7"]), 7);
    assert_eq!(at(&["--to-offset", "1000"]), 100, "clamped to the end");
    assert_eq!(at(&["--to-latest"]), 100);
    let (ok, text) = group_cli(
        &bootstrap,
        &[
            "reset-offsets",
            "replay",
            "--topic",
            "history",
            "--to-offset",
            "5",
            "--dry-run",
        ],
    );
    assert!(ok && text.contains("dry run"), "{text}");
    assert_eq!(
        committed(address, "replay")[&("history".to_string(), 0)],
        100
    );
    // describe shows the lag; list and delete.
    at(&["--to-offset", "40"]);
    let (ok, text) = group_cli(&bootstrap, &["describe", "replay"]);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("history"))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    assert!(ok);
    // TOPIC PARTITION COMMITTED LOG-START LOG-END LAG LOST RETENTION-MARGIN MEMBER
    assert_eq!(
        row,
        ["history", "0", "40", "0", "100", "60", "0", "40", "-"],
        "{text}"
    );
    let (ok, text) = group_cli(&bootstrap, &["list"]);
    assert!(ok && text.contains("replay"), "{text}");
    let (ok, text) = group_cli(&bootstrap, &["delete", "replay"]);
    assert!(ok, "{text}");
    let (_, text) = group_cli(&bootstrap, &["list"]);
    assert!(!text.contains("replay"), "{text}");
    assert!(committed(address, "replay").is_empty());
    // The deletion is stored too.
    broker.terminate();
    let broker = start_broker_with(dir.path(), GROUPS);
    assert!(committed(broker.address, "replay").is_empty());
    let (_, text) = group_cli(&broker.bootstrap(), &["list"]);
    assert!(!text.contains("replay"), "{text}");
}

#[test]
fn a_consumer_left_behind_by_retention_follows_its_reset_policy() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = GROUPS.to_vec();
    env.push(("BROKER_RETENTION_CHECK_INTERVAL_MS", "200"));
    let broker = start_broker_with(dir.path(), &env);
    let address = broker.address;
    let bootstrap = broker.bootstrap();
    create_topic(
        address,
        "short",
        1,
        &[("segment.bytes", "65536"), ("retention.bytes", "150000")],
    );
    // Three groups committed at offset 0 before anything was written.
    on_glommio(async move {
        let cluster = Cluster::new(address, "groups-test");
        let at_zero: BTreeMap<(String, i32), i64> = [(("short".to_string(), 0), 0)].into();
        for group in ["behind-earliest", "behind-latest", "behind-error"] {
            cluster.commit_offsets(group, &at_zero).await.unwrap();
        }
    });
    // About 1.2 MB of 1 KB messages: retention keeps about 150 KB.
    // Batches of 16 KB: a batch larger than a segment is refused, as in Kafka.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("batch.size", "16384")
        .create()
        .unwrap();
    let payload = "x".repeat(1000);
    for _ in 0..1200 {
        let mut record = BaseRecord::<(), _>::to("short").payload(&payload);
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(5));
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let log_start = || {
        on_glommio(async move {
            let cluster = Cluster::new(address, "groups-test");
            list_offsets(&cluster, "short", &[0], StartAt::Earliest)
                .await
                .unwrap()[&0]
        })
    };
    wait_until(
        "retention to delete old segments",
        Duration::from_secs(30),
        || log_start() > 0,
    );
    let start = log_start();
    // describe: Kafka's lag counts from the commit (0), the records
    // retention deleted shown apart (as JSON, for scripts and alerts).
    let (ok, text) = group_cli(
        &bootstrap,
        &["describe", "behind-error", "--format", "json"],
    );
    assert!(ok, "{text}");
    let described: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = &described["partitions"][0];
    let (log_start_seen, log_end) = (row["log_start"].as_i64(), row["log_end"].as_i64());
    assert!(log_start_seen >= Some(start), "{row}");
    assert_eq!(row["committed"], 0, "{row}");
    assert_eq!(row["lag"].as_i64(), log_end, "{row}");
    assert_eq!(row["lost_to_retention"].as_i64(), log_start_seen, "{row}");
    assert_eq!(
        row["retention_margin"].as_i64(),
        log_start_seen.map(|s| -s),
        "{row}"
    );
    assert_eq!(described["type"], "classic");
    // /metrics: the same lag, the lost part apart.
    let (_, metrics) = support::http(broker.http, "GET", "/metrics", "");
    let sample = |name: &str| -> Option<i64> {
        let series = format!("{name}{{group=\"behind-error\",topic=\"short\",partition=\"0\"}} ");
        let line = metrics.lines().find(|l| l.starts_with(&series))?;
        line[series.len()..].parse::<f64>().ok().map(|v| v as i64)
    };
    let lost = sample("consumer_lag_lost_messages").expect("lost is served");
    assert!(lost >= start && lost > 0, "{lost} lost, log start {start}");
    assert!(sample("consumer_lag_messages") >= Some(lost), "{metrics}");
    // earliest: starts again at the log start.
    let earliest = consumer(
        &bootstrap,
        "behind-earliest",
        &[("auto.offset.reset", "earliest")],
    );
    earliest.subscribe(&["short"]).unwrap();
    let first = next_message(&earliest).1;
    assert!(
        first >= start && first > 0,
        "restarted at {first}, log start {start}"
    );
    drop(earliest);
    // latest: skips to the end; only what comes next is delivered.
    let latest = consumer(
        &bootstrap,
        "behind-latest",
        &[("auto.offset.reset", "latest")],
    );
    latest.subscribe(&["short"]).unwrap();
    // New messages until one arrives: the first delivered is a new one.
    let started = Instant::now();
    let (offset, value) = loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing delivered"
        );
        let payload = format!("after-{}", started.elapsed().as_millis());
        producer
            .send(BaseRecord::<(), _>::to("short").payload(&payload))
            .unwrap();
        producer.flush(Duration::from_secs(30)).unwrap();
        if let Some(message) = latest.poll(Duration::from_millis(200)) {
            let m = message.expect("no error with the latest policy");
            break (
                m.offset(),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string(),
            );
        }
    };
    assert!(
        offset >= 1200 && value.starts_with("after-"),
        "the latest policy skipped to the end, got {value} at {offset}"
    );
    drop(latest);
    // error: the consumer is told its offset is out of range.
    let strict = consumer(
        &bootstrap,
        "behind-error",
        &[("auto.offset.reset", "error")],
    );
    strict.subscribe(&["short"]).unwrap();
    let started = Instant::now();
    let error = loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no out-of-range error"
        );
        match strict.poll(Duration::from_millis(100)) {
            Some(Err(e)) => break e,
            Some(Ok(m)) => panic!("a message at {} despite the error policy", m.offset()),
            None => {}
        }
    };
    assert!(
        matches!(
            error,
            KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset)
        ),
        "{error:?}"
    );
}

#[test]
fn kafka_python_joins_a_group_consumes_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    let bootstrap = broker.bootstrap();
    create_topic(broker.address, "py", 3, &[]);
    let produced = produce(&bootstrap, "py", 0, 500);
    // scripts/test.sh installs kafka-python into target/test-venv and
    // names the interpreter in KAFKA_PYTHON.
    let venv = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/test-venv/bin/python"
    );
    let python = std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| {
        if std::path::Path::new(venv).exists() {
            venv.to_string()
        } else {
            "python3".to_string()
        }
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/consume_group.py");
    let output = Command::new(&python)
        .args([script, &bootstrap, "py", "py-group", "500"])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "kafka-python consumer failed (scripts/test.sh installs kafka-python; KAFKA_PYTHON names the interpreter):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // One "partition offset" line per message, then "committed".
    let seen: BTreeSet<(i32, i64)> = stdout
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect();
    let produced: BTreeSet<(i32, i64)> = produced.into_iter().collect();
    assert_eq!(seen, produced, "kafka-python received every message");
    assert!(stdout.contains("committed"), "{stdout}");
    // Its commits are the coordinator's: each partition's end.
    let ends: BTreeMap<i32, i64> = produced.iter().fold(BTreeMap::new(), |mut m, (p, o)| {
        let e = m.entry(*p).or_insert(0);
        *e = (*e).max(o + 1);
        m
    });
    let stored = committed(broker.address, "py-group");
    for (p, end) in ends {
        assert_eq!(
            stored.get(&("py".to_string(), p)),
            Some(&end),
            "partition {p}"
        );
    }
}

#[test]
fn the_offsets_topic_is_internal() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), GROUPS);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "groups-test");
        // The first FindCoordinator creates it, compacted.
        cluster.find_coordinator("anyone").await.unwrap();
        let configs = cluster
            .describe_configs("__consumer_offsets")
            .await
            .unwrap();
        let policy = configs.iter().find(|c| c.name == "cleanup.policy").unwrap();
        assert_eq!(policy.value.as_deref(), Some("compact"));
        cluster
            .refresh(Some(&["__consumer_offsets"]), false)
            .await
            .unwrap();
        assert_eq!(
            cluster.topic("__consumer_offsets").unwrap().leaders.len(),
            50
        );
        // Clients may neither delete it nor write to it.
        match cluster.delete_topic("__consumer_offsets").await {
            Err(client::connection::ClientError::Refused(code, _)) => assert_eq!(code, 17),
            other => panic!("deleting __consumer_offsets: {other:?}"),
        }
        let producer = client::producer::Producer::new(
            cluster.clone(),
            client::producer::ProducerConfig::default(),
        );
        let sent = producer
            .send(
                "__consumer_offsets",
                None,
                Some(bytes::Bytes::from_static(b"x")),
            )
            .await
            .unwrap()
            .await;
        assert!(
            sent.is_err(),
            "a produce to __consumer_offsets was accepted"
        );
    });
}
