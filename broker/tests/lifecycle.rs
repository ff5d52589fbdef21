//! A broker's life cycle, as operators and clients meet it: one process per
//! data directory and per port; a directory that knows whose it is;
//! served from the first accepted connection (librdkafka connecting the
//! instant the port accepts, over 50 starts and restarts); a panic or a
//! wedged shard never leaves a half-dead process; damaged metadata is a
//! clear error or a recovery, never a panic; clean stops under load close
//! every partition cleanly.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use support::group_round;
use support::http;

/// A broker command on fixed ports (so a test can connect before it says
/// anything), one shard more than one to exercise the shard mesh.
fn broker_command(data: &Path, kafka: SocketAddr, http: SocketAddr) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(["serve", "--shards", "2", "--data-dir"])
        .arg(data)
        .args(["--kafka-listen", &kafka.to_string()])
        .args(["--http-listen", &http.to_string()])
        .env("RUST_LOG", "info")
        .env("BROKER_PIN_SHARDS", "false");
    command
}

/// Runs a command expected to fail at once; returns (exit code, stderr).
fn refused(mut command: Command) -> (Option<i32>, String) {
    let out = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn addresses() -> (SocketAddr, SocketAddr) {
    let kafka = format!("127.0.0.1:{}", support::fixed_port())
        .parse()
        .unwrap();
    let http = format!("127.0.0.1:{}", support::fixed_port())
        .parse()
        .unwrap();
    (kafka, http)
}

/// Waits (bounded) until `child` exits; returns its status.
fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < within,
            "the broker did not exit within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(child: &Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

#[test]
fn a_second_broker_on_the_same_directory_or_ports_exits_at_once_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (kafka, http_address) = addresses();
    let first = support::start_broker(&data);
    let before = std::fs::read_dir(&data).unwrap().count();
    // Same directory, other ports: the lock.
    let (code, stderr) = refused(broker_command(&data, kafka, http_address));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&data.display().to_string())
            && stderr.contains("in use by another broker process")
            && stderr.contains(&format!("pid {}", first.pid())),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&data).unwrap().count(),
        before,
        "nothing touched"
    );
    // Other directory, the first's Kafka port, then its HTTP port.
    let other = dir.path().join("other");
    let (code, stderr) = refused(broker_command(&other, first.address, http_address));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("kafka_listen") && stderr.contains("address in use"),
        "{stderr}"
    );
    let (code, stderr) = refused(broker_command(&other, kafka, first.http));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("http_listen") && stderr.contains("address in use"),
        "{stderr}"
    );
    // The first one still serves alone.
    let (status, _) = http(first.http, "GET", "/health", "");
    assert_eq!(status, 200);
}

#[test]
fn a_directory_refuses_another_node_and_another_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = support::start_broker_with(&data, &[("BROKER_NODE_ID", "5")]);
    let props = std::fs::read_to_string(data.join("meta.properties")).unwrap();
    assert!(
        props.contains("node.id=5") && props.contains("cluster.id="),
        "{props}"
    );
    assert!(first.terminate().success());
    // Restarted without --node-id: it would be node 1 with node 5's data.
    let (kafka, http_address) = addresses();
    let (code, stderr) = refused(broker_command(&data, kafka, http_address));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("belongs to node 5, not node 1"), "{stderr}");
    // Another cluster: a directory recorded for cluster X whose metadata
    // is another quorum's, Y (two single brokers, one's identity file
    // copied over the other's).
    let other = dir.path().join("other");
    let second = support::start_broker(&other);
    assert!(second.terminate().success());
    let mine = std::fs::read_to_string(data.join("meta.properties")).unwrap();
    std::fs::write(
        other.join("meta.properties"),
        mine.replace("node.id=5", "node.id=1"),
    )
    .unwrap();
    let cluster_of = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("cluster.id="))
            .unwrap()
            .to_string()
    };
    let x = cluster_of(&mine);
    let (code, stderr) = refused(broker_command(&other, kafka, http_address));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("belongs to cluster {x}")) && stderr.contains("quorum is cluster"),
        "{stderr}"
    );
    // The metadata of a directory that was part of a cluster is gone.
    std::fs::remove_dir_all(data.join("metadata")).unwrap();
    let mut as_node_5 = broker_command(&data, kafka, http_address);
    as_node_5.env("BROKER_NODE_ID", "5");
    let (code, stderr) = refused(as_node_5);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is gone"), "{stderr}");
}

/// librdkafka, from the instant the port accepts: CreateTopics, Metadata,
/// Produce (acks=all). Returns how long the three took.
fn use_at_once(kafka: SocketAddr, topic: &str) -> Duration {
    let started = Instant::now();
    while TcpStream::connect_timeout(&kafka, Duration::from_millis(50)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the port never accepted"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let accepted = Instant::now();
    let bootstrap = kafka.to_string();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(20)));
    let new_topic = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    let created = futures::executor::block_on(admin.create_topics([&new_topic], &options))
        .expect("CreateTopics answered");
    for result in created {
        match result {
            Ok(_) => {}
            Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err(e) => panic!("CreateTopics refused {topic}: {e:?}"),
        }
    }
    let metadata = admin
        .inner()
        .fetch_metadata(Some(topic), Duration::from_secs(20))
        .expect("Metadata answered");
    assert_eq!(metadata.topics().len(), 1);
    assert_eq!(metadata.topics()[0].partitions().len(), 1, "{topic}");
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .create()
        .unwrap();
    producer
        .send(BaseRecord::<(), _>::to(topic).payload("first"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer
        .flush(Duration::from_secs(20))
        .expect("produce acknowledged");
    accepted.elapsed()
}

#[test]
fn librdkafka_is_served_from_the_first_accepted_connection_over_50_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (kafka, http_address) = addresses();
    let mut slowest = Duration::ZERO;
    let log_path = dir.path().join("broker.log");
    for start in 0..50 {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let mut child = broker_command(&data, kafka, http_address)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let _tail = TailOnPanic(&log_path, start);
        // /health is 503 until the broker serves (if asked early enough).
        let took = use_at_once(kafka, &format!("topic-{}", start % 7));
        slowest = slowest.max(took);
        let (status, body) = http(http_address, "GET", "/health", "");
        assert_eq!((status, body.as_str()), (200, "ok\n"), "start {start}");
        // Restart with data present: by SIGTERM, or SIGKILL every third.
        if start % 3 == 2 {
            child.kill().unwrap();
            child.wait().unwrap();
        } else {
            sigterm(&child);
            assert!(
                wait_exit(&mut child, Duration::from_secs(30)).success(),
                "start {start}"
            );
        }
    }
    println!("50 starts: the slowest CreateTopics+Metadata+Produce from the first accept took {slowest:?}");
}

/// Prints the broker's log if the test fails while it lives.
struct TailOnPanic<'a>(&'a Path, usize);

impl Drop for TailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.0).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(30)..];
            eprintln!(
                "--- start {}: the broker's log:\n{}",
                self.1,
                tail.join("\n")
            );
        }
    }
}

#[test]
fn health_answers_503_while_the_broker_cannot_serve() {
    let dir = tempfile::tempdir().unwrap();
    let (kafka, http_address) = addresses();
    // A voter of a quorum of two whose other voter never comes: it can
    // never be registered, so it must never say it serves.
    let voters = format!(
        "1@127.0.0.1:{},2@127.0.0.1:{}",
        support::fixed_port(),
        support::fixed_port()
    );
    let mut child = broker_command(&dir.path().join("data"), kafka, http_address)
        .env("BROKER_CONTROLLER_QUORUM_VOTERS", voters)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut answered = 0;
    while started.elapsed() < Duration::from_secs(3) {
        if let Ok(mut stream) = TcpStream::connect(http_address) {
            use std::io::{Read, Write};
            stream
                .write_all(b"GET /health HTTP/1.1\r\nconnection: close\r\n\r\n")
                .unwrap();
            let mut text = String::new();
            let _ = stream.read_to_string(&mut text);
            assert!(text.starts_with("HTTP/1.1 503"), "{text}");
            assert!(text.contains("starting"), "{text}");
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        answered > 10,
        "the HTTP port answered /health while starting"
    );
    // Its Kafka port accepts, but nothing is answered before it serves.
    let mut stream = TcpStream::connect(kafka).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    use std::io::{Read, Write};
    // ApiVersions v0, correlation id 7.
    stream
        .write_all(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0, 0])
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(
        stream.read(&mut byte).is_err(),
        "answered before it could serve"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_panicking_shard_ends_the_process_with_the_panic_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (kafka, http_address) = addresses();
    let mut child = broker_command(&dir.path().join("data"), kafka, http_address)
        .env("BROKER_TEST_PANIC_AFTER_MS", "1500")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(20));
    let mut log = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(!status.success(), "{status}");
    assert!(log.contains("a deliberate panic"), "{log}");
    assert!(log.contains("a thread panicked; exiting"), "{log}");
}

#[test]
fn sigterm_ends_the_process_within_its_deadline_even_with_a_wedged_shard() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = support::start_broker_with(
        &data,
        &[
            ("BROKER_TEST_WEDGE_ON_STOP", "true"),
            ("BROKER_SHUTDOWN_TIMEOUT_MS", "3000"),
        ],
    );
    let mut broker = broker;
    let started = Instant::now();
    let status = broker.stop();
    let took = started.elapsed();
    assert!(
        !status.success(),
        "a wedged stop is no clean exit: {status}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    std::thread::sleep(Duration::from_millis(100)); // the log's last lines
    assert!(!broker.logged("did not stop within 3s").is_empty());
}

#[test]
fn a_broker_rejoining_a_cluster_is_served_from_the_first_connection_on_both_ports() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = support::cluster::Cluster::new(
        root.path(),
        3,
        &[
            ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
            ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
        ],
    );
    cluster.start();
    for round in 0..3 {
        cluster.kill9(2);
        cluster.spawn(2);
        let node = cluster.node(2);
        // Kafka: librdkafka bootstrapped on the restarted broker alone.
        use_at_once(node.kafka, &format!("rejoin-{round}"));
        // HTTP: an API call the moment its port accepts.
        let started = Instant::now();
        while TcpStream::connect(node.http).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(1));
        }
        let (status, body) = http(
            node.http,
            "POST",
            &format!("/topics/rejoin-{round}/messages?encoding=text"),
            r#"{"value":"over http"}"#,
        );
        assert_eq!(status, 200, "round {round}: {body}");
        cluster.wait_listening(2, round + 1);
    }
}

/// Damage to a stopped broker's metadata, a dozen rounds as a user would
/// meet it: the broker exits 1 naming the damaged file, or starts and
/// serves what it recovered; it never panics or hangs half-alive.
#[test]
fn a_broker_on_damaged_metadata_exits_naming_it_or_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine");
    let broker = support::start_broker_with(
        &pristine,
        &[("BROKER_METADATA_SNAPSHOT_EVERY_ENTRIES", "12")],
    );
    support::on_glommio({
        let address = broker.address;
        async move {
            let client = client::cluster::Cluster::new(address, "damage-test");
            for i in 0..20 {
                client
                    .create_topic(&format!("kept-{i:02}"), 1, 1, &[])
                    .await
                    .unwrap();
            }
        }
    });
    assert!(broker.terminate().success());
    let mut rng_state = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };
    let (mut refused_count, mut recovered_count) = (0, 0);
    for round in 0..12 {
        let data = dir.path().join(format!("round-{round}"));
        copy_dir(&pristine, &data);
        let file = if round % 3 == 0 {
            "snapshot"
        } else {
            "raft.log"
        };
        let path = data.join("metadata").join(file);
        let mut bytes = std::fs::read(&path).unwrap();
        match round % 4 {
            0 | 1 => {
                let at = (next() as usize) % bytes.len();
                bytes[at] ^= 0x40;
            }
            2 => bytes.truncate((next() as usize) % bytes.len()),
            _ => bytes.extend((0..40).map(|_| next() as u8)),
        }
        std::fs::write(&path, &bytes).unwrap();
        let (kafka, http_address) = addresses();
        let mut child = broker_command(&data, kafka, http_address)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut log = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut log)
                    .unwrap();
                assert_eq!(status.code(), Some(1), "round {round}: {log}");
                assert!(
                    log.contains("metadata"),
                    "round {round} names the metadata: {log}"
                );
                assert!(!log.contains("panicked"), "round {round}: {log}");
                refused_count += 1;
                break;
            }
            // A broker refusing its metadata may accept a connection and
            // exit before it answers: no answer is "not serving (yet)".
            let (_, health) = support::try_http(http_address, "GET", "/health", "");
            if health.is_some_and(|(status, _)| status == 200) {
                // It recovered: it serves, and lists what it kept.
                let topics = support::on_glommio(async move {
                    let client = client::cluster::Cluster::new(kafka, "damage-test");
                    client.list_topics().await.unwrap()
                });
                assert!(
                    topics.iter().all(|t| t.name.starts_with("kept-")),
                    "round {round}: {topics:?}"
                );
                if round % 4 == 3 && file == "raft.log" {
                    // Garbage after the log's end is a torn tail: cut,
                    // nothing committed lost.
                    assert_eq!(topics.len(), 20, "round {round}: {topics:?}");
                }
                recovered_count += 1;
                sigterm(&child);
                assert!(wait_exit(&mut child, Duration::from_secs(30)).success());
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "round {round}: neither exited nor served"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    println!(
        "12 damaged metadata directories: {refused_count} refused, {recovered_count} recovered"
    );
    assert!(refused_count > 0);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_name() == ".lock" {
            continue;
        }
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every topic partition directory under `data` that is not cleanly
/// closed: no clean-shutdown marker, or a segment without its time index.
fn unclean_partitions(data: &Path) -> Vec<String> {
    let mut unclean = Vec::new();
    let Ok(topics) = std::fs::read_dir(data.join("partitions")) else {
        return unclean;
    };
    for topic in topics.flatten() {
        for partition in std::fs::read_dir(topic.path()).unwrap().flatten() {
            let dir = partition.path();
            let names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect();
            let segments = names.iter().filter(|n| n.ends_with(".log")).count();
            let time_indexes = names.iter().filter(|n| n.ends_with(".timeindex")).count();
            if !names.iter().any(|n| n == "clean-shutdown") || time_indexes < segments {
                unclean.push(format!("{}: {names:?}", dir.display()));
            }
        }
    }
    unclean
}

#[test]
fn clean_stops_under_load_close_every_partition_cleanly() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = support::cluster::Cluster::new(
        root.path(),
        3,
        &[
            ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
            ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
            ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "100"),
        ],
    );
    cluster.shards = 2;
    cluster.start();
    let bootstrap = cluster.node(1).kafka.to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args([
            "topic",
            "create",
            "busy",
            "--partitions",
            "6",
            "--replication-factor",
            "3",
        ])
        .args([
            "--config",
            "min.insync.replicas=2",
            "--config",
            "segment.bytes=65536",
        ])
        .args(["--brokers", &bootstrap])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for round in 0..5 {
        // Load: a producer writing until the brokers stop under it.
        let mut producer = Command::new("kcat")
            .args(["-P", "-b", &cluster.bootstrap()])
            .args(["-t", "busy", "-X", "acks=all", "-X", "linger.ms=2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = producer.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            for i in 0..u64::MAX {
                if writeln!(stdin, "round-{round}-value-{i:08}-{}", "x".repeat(200)).is_err() {
                    return;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(1500));
        let statuses = cluster.stop_all();
        for (i, status) in statuses.iter().enumerate() {
            assert!(
                status.is_some_and(|s| s.success()),
                "round {round}: broker {} stopped with {status:?}",
                i + 1
            );
        }
        for id in 1..=3 {
            let log = std::fs::read_to_string(cluster.log_path(id)).unwrap();
            assert!(
                !log.contains("partition log failed") && !log.contains(" ERROR "),
                "round {round}: broker {id} logged an error:\n{log}"
            );
            let data = cluster.node(id).dir.join("data");
            let unclean = unclean_partitions(&data);
            assert!(
                unclean.is_empty(),
                "round {round}: broker {id}: {unclean:#?}"
            );
        }
        let _ = producer.kill();
        let _ = producer.wait();
        let _ = writer.join();
        cluster.restart_all(&[1, 2, 3]);
    }
}

#[test]
fn a_normal_stop_logs_no_warnings() {
    // As an operator reads a stop: a broker that served a producer and a
    // consumer group, the consumer still connected, stops on SIGTERM with
    // no WARN or ERROR line.
    let dir = tempfile::tempdir().unwrap();
    let mut broker = support::start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    support::cli(
        &bootstrap,
        &["topic", "create", "calm", "--partitions", "2"],
    );
    let (producer, consumer) =
        group_round::produce_and_read_in_group(&bootstrap, "calm", "calm-readers", 100, "all");
    let status = broker.stop();
    assert!(status.success(), "{status}");
    drop(consumer);
    drop(producer);
    // The log thread has read the last lines once the pipe closed.
    std::thread::sleep(Duration::from_millis(200));
    let loud: Vec<String> = (broker.logged(" WARN ").into_iter())
        .chain(broker.logged(" ERROR "))
        .collect();
    assert!(
        loud.is_empty(),
        "a normal stop logged:\n{}",
        loud.join("\n")
    );
    assert_eq!(broker.logged("stopped").len(), 1);
}
