//! Topics created, described, altered, grown and deleted through the
//! project's admin client and through the `broker topic|cluster` CLI,
//! against the real broker; kcat (librdkafka's CLI) produces and consumes.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use client::cluster::Cluster;
use client::connection::ClientError;
use storage::batch::{build, RecordSpec};
use storage::TimestampMs;
use support::produce_wire::{produce_frame, read_produce_answer};
use support::{on_glommio, start_broker};

fn cli(bootstrap: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", bootstrap])
        .output()
        .expect("run the CLI");
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

fn connect(address: std::net::SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

fn code(error: ClientError) -> i16 {
    match error {
        ClientError::Broker(code) | ClientError::Refused(code, _) => code,
        other => panic!("not a broker error: {other}"),
    }
}

#[test]
fn topics_are_created_described_altered_grown_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "admin-test");
        cluster
            .create_topic("orders", 3, 1, &[("retention.ms", "60000")])
            .await
            .unwrap();
        assert_eq!(cluster.topic("orders").unwrap().leaders.len(), 3);
        assert_eq!(
            code(cluster.create_topic("orders", 3, 1, &[]).await.unwrap_err()),
            36,
            "TOPIC_ALREADY_EXISTS"
        );
        assert_eq!(
            code(
                cluster
                    .create_topic("bad/name", 1, 1, &[])
                    .await
                    .unwrap_err()
            ),
            17,
            "INVALID_TOPIC_EXCEPTION"
        );
        assert_eq!(
            code(cluster.create_topic("x", 0, 1, &[]).await.unwrap_err()),
            37,
            "INVALID_PARTITIONS"
        );
        assert_eq!(
            code(cluster.create_topic("x", 1, 3, &[]).await.unwrap_err()),
            38,
            "INVALID_REPLICATION_FACTOR"
        );
        assert_eq!(
            code(
                cluster
                    .create_topic("x", 1, 1, &[("retention.ms", "soon")])
                    .await
                    .unwrap_err()
            ),
            40,
            "INVALID_CONFIG"
        );
        assert_eq!(
            code(
                cluster
                    .create_topic("x", 1, 1, &[("no.such.key", "1")])
                    .await
                    .unwrap_err()
            ),
            40
        );

        let value = |configs: &[client::admin::ConfigEntry], key: &str| {
            configs
                .iter()
                .find(|c| c.name == key)
                .and_then(|c| c.value.clone())
        };
        let configs = cluster.describe_configs("orders").await.unwrap();
        assert_eq!(value(&configs, "retention.ms").as_deref(), Some("60000"));
        assert!(
            !configs
                .iter()
                .find(|c| c.name == "retention.ms")
                .unwrap()
                .is_default
        );
        assert!(
            configs
                .iter()
                .find(|c| c.name == "segment.bytes")
                .unwrap()
                .is_default
        );

        cluster
            .alter_configs(
                "orders",
                &[("max.message.bytes", Some("5000")), ("retention.ms", None)],
            )
            .await
            .unwrap();
        let configs = cluster.describe_configs("orders").await.unwrap();
        assert_eq!(
            value(&configs, "max.message.bytes").as_deref(),
            Some("5000")
        );
        assert_eq!(
            value(&configs, "retention.ms").as_deref(),
            Some("604800000"),
            "reset to the default"
        );
        assert_eq!(
            code(
                cluster
                    .alter_configs("orders", &[("retention.ms", Some("x"))])
                    .await
                    .unwrap_err()
            ),
            40
        );
        assert_eq!(
            code(
                cluster
                    .alter_configs("nope", &[("retention.ms", Some("1"))])
                    .await
                    .unwrap_err()
            ),
            3
        );

        cluster.create_partitions("orders", 5).await.unwrap();
        assert_eq!(cluster.topic("orders").unwrap().leaders.len(), 5);
        assert_eq!(
            code(cluster.create_partitions("orders", 2).await.unwrap_err()),
            37,
            "partitions only grow"
        );

        let description = cluster.describe_cluster().await.unwrap();
        assert_eq!(description.brokers.len(), 1);
        assert_eq!(description.controller_id, 1);

        cluster.delete_topic("orders").await.unwrap();
        assert_eq!(code(cluster.delete_topic("orders").await.unwrap_err()), 3);
        assert!(cluster
            .list_topics()
            .await
            .unwrap()
            .iter()
            .all(|t| t.name != "orders"));
    });
    // Deleted topics leave no files behind (shard 0 removes them as it
    // applies the deletion, which the answering shard may see first).
    let partitions = dir.path().join("partitions");
    let orders_files = || -> Vec<std::ffi::OsString> {
        std::fs::read_dir(&partitions)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default()
    };
    let started = std::time::Instant::now();
    let mut leftovers = orders_files();
    while leftovers
        .iter()
        .any(|n| n.to_string_lossy().starts_with("orders."))
        && started.elapsed() < std::time::Duration::from_secs(10)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        leftovers = orders_files();
    }
    assert!(
        leftovers
            .iter()
            .all(|n| !n.to_string_lossy().starts_with("orders.")),
        "{leftovers:?}"
    );

    // The same through the CLI.
    let bootstrap = broker.bootstrap();
    let (ok, out) = cli(
        &bootstrap,
        &[
            "topic",
            "create",
            "cli-topic",
            "--partitions",
            "4",
            "--config",
            "segment.ms=100000",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("4 partitions"), "{out}");
    let (ok, out) = cli(&bootstrap, &["topic", "list"]);
    assert!(ok && out.contains("cli-topic"), "{out}");
    let (ok, out) = cli(
        &bootstrap,
        &[
            "topic",
            "alter",
            "cli-topic",
            "--config",
            "retention.bytes=1000000",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = cli(&bootstrap, &["topic", "describe", "cli-topic"]);
    assert!(ok, "{out}");
    assert!(out.contains("retention.bytes = 1000000 (set)"), "{out}");
    assert!(out.contains("segment.ms = 100000 (set)"), "{out}");
    assert!(out.contains("partition 3 leader 1"), "{out}");
    let (ok, out) = cli(&bootstrap, &["cluster", "status"]);
    assert!(ok && out.contains("broker 1 at"), "{out}");
    let (ok, out) = cli(&bootstrap, &["topic", "create", "cli-topic"]);
    assert!(!ok && out.contains("already exists"), "{out}");
    let (ok, out) = cli(&bootstrap, &["topic", "delete", "cli-topic"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&bootstrap, &["topic", "describe", "cli-topic"]);
    assert!(!ok, "{out}");
}

/// CreateTopics answers once every shard of the answering broker has the
/// topic: a producer that acts on the answer at once, on a connection of
/// any shard and without retrying, is served (not told
/// UNKNOWN_TOPIC_OR_PARTITION while the other shard catches up).
#[test]
fn a_new_topic_is_served_on_every_connection_as_soon_as_its_creation_answers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let record = build(
        TimestampMs(1_000),
        &[RecordSpec {
            timestamp_delta: 0,
            key: None,
            value: Some(b"first".to_vec()),
        }],
    )
    .freeze();
    // The machine kept busy, as a loaded CI machine is: a shard's view
    // lagging a millisecond behind the answering shard's is then likely.
    let busy = Busy::start(12);
    for round in 0..50 {
        let topic = format!("fresh-{round}");
        // Connected first, so the produces follow the answer closely; they
        // land on either shard (two shards).
        let mut streams: Vec<TcpStream> = (0..4).map(|_| connect(address)).collect();
        let created = topic.clone();
        on_glommio(async move {
            let cluster = Cluster::new(address, "creator");
            cluster.create_topic(&created, 2, 1, &[]).await.unwrap();
        });
        for (connection, stream) in streams.iter_mut().enumerate() {
            let sets = vec![(0, record.clone()), (1, record.clone())];
            let frame = produce_frame(&topic, 9, connection as i32, sets);
            stream.write_all(&frame).unwrap();
        }
        for (connection, stream) in streams.iter_mut().enumerate() {
            let (_, answers) = read_produce_answer(stream, 9);
            assert_eq!(answers.len(), 2, "{topic}: {answers:?}");
            for (partition, (error, _)) in answers {
                assert_eq!(error, 0, "{topic}/{partition}, connection {connection}");
            }
        }
    }
    drop(busy);
}

/// Threads that spin until stopped.
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(threads: usize) -> Busy {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = |stop: std::sync::Arc<std::sync::atomic::AtomicBool>| {
            move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        };
        let threads = (0..threads)
            .map(|_| std::thread::spawn(spin(stop.clone())))
            .collect();
        Busy { stop, threads }
    }
}

/// Stopped and joined when dropped, a failed assertion's unwinding too.
impl Drop for Busy {
    fn drop(&mut self) {
        (self.stop).store(true, std::sync::atomic::Ordering::Relaxed);
        self.threads.drain(..).for_each(|t| t.join().unwrap());
    }
}

#[test]
fn kcat_produces_and_consumes_through_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    let lines: Vec<String> = (0..2_000)
        .map(|i| format!("key-{}:value-{i}", i % 10))
        .collect();
    let mut produce = Command::new("kcat")
        .args([
            "-b", &bootstrap, "-P", "-t", "kcat", "-K:", "-z", "snappy", "-X", "acks=all",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (the test command installs it)");
    produce
        .stdin
        .take()
        .unwrap()
        .write_all((lines.join("\n") + "\n").as_bytes())
        .unwrap();
    let produced = produce.wait_with_output().unwrap();
    assert!(
        produced.status.success(),
        "{}",
        String::from_utf8_lossy(&produced.stderr)
    );
    let consumed = Command::new("kcat")
        .args([
            "-b",
            &bootstrap,
            "-C",
            "-t",
            "kcat",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k:%s@%o\n",
        ])
        .output()
        .unwrap();
    assert!(
        consumed.status.success(),
        "{}",
        String::from_utf8_lossy(&consumed.stderr)
    );
    let out = String::from_utf8(consumed.stdout).unwrap();
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), lines.len());
    for (i, line) in got.iter().enumerate() {
        assert_eq!(
            *line,
            format!("{}@{i}", lines[i]),
            "message {i} in order at its offset"
        );
    }
    // The batches were stored compressed, as kcat sent them (snappy = 2).
    let log = std::fs::read_dir(dir.path().join("partitions"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("kcat."))
        .unwrap()
        .path()
        .join("0")
        .join("00000000000000000000.log");
    // librdkafka sends a batch uncompressed when snappy would not shrink
    // it (a lone first message may go alone under load): every batch of
    // more than one record, and at least one, is snappy.
    let bytes = std::fs::read(log).unwrap();
    let (mut at, mut compressed) = (0, 0);
    while at + 61 <= bytes.len() {
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if length == 0 {
            break; // the segment's unwritten tail
        }
        let codec = i16::from_be_bytes([bytes[at + 21], bytes[at + 22]]) & 7;
        let records = i32::from_be_bytes(bytes[at + 57..at + 61].try_into().unwrap());
        if records > 1 {
            assert_eq!(
                codec, 2,
                "a batch of {records} records at byte {at} stored as snappy"
            );
        }
        compressed += usize::from(codec == 2);
        at += 12 + length;
    }
    assert!(compressed > 0, "no batch stored as snappy");
}

/// The broker's resident memory, from /proc.
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// A topic of 10,000 partitions is created and each partition's log
/// opened without the broker's memory growing with the
/// square of the partitions: every replica of a topic once carried its
/// own copy of the topic's whole partition list (4,000 partitions took
/// 5 GB, 10,000 more than the machine had).
#[test]
fn a_topic_of_ten_thousand_partitions_costs_memory_in_proportion() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let bootstrap = broker.address.to_string();
    let before = resident_bytes(broker.pid());
    let (ok, out) = cli(
        &bootstrap,
        &["topic", "create", "wide", "--partitions", "10000"],
    );
    assert!(ok, "{out}");
    // Each replica opened: its directory made.
    let opened = || -> usize {
        let partitions = broker.data_dir.join("partitions");
        std::fs::read_dir(&partitions)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|topic| topic.file_name().to_string_lossy().starts_with("wide."))
            .map(|topic| std::fs::read_dir(topic.path()).map_or(0, |d| d.count()))
            .sum()
    };
    support::eventually(
        "its replicas open",
        Duration::from_secs(60),
        || match opened() {
            10_000 => Ok(()),
            n => Err(format!("{n} partition directories")),
        },
    );
    let grown = resident_bytes(broker.pid()).saturating_sub(before);
    assert!(
        grown < 512 << 20,
        "10,000 partitions took {} MiB",
        grown >> 20
    );
}
