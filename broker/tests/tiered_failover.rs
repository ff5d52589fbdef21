//! Tiered storage across a leader failover on three brokers sharing one
//! object store (a directory all three name, as a shared file system or
//! a bucket would be): the new leader continues the manifest its
//! predecessor wrote, reads below its local start keep working, and
//! librdkafka reads every record from offset 0, once, in order.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use support::cluster::{counter, Cluster};
use support::replay::read_from_start;

const RECORDS: usize = 1200;

fn value(i: usize) -> Vec<u8> {
    let mut value = format!("record {i} ").into_bytes();
    value.resize(1000, b'a' + (i % 26) as u8);
    value
}

/// Counts librdkafka's failed deliveries.
#[derive(Clone, Default)]
struct Failures(Arc<AtomicUsize>, Arc<std::sync::Mutex<Option<String>>>);

impl ClientContext for Failures {}
impl ProducerContext for Failures {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.lock().unwrap().get_or_insert(e.to_string());
        }
    }
}

/// Produces records `range` with librdkafka (idempotent, as the Java
/// client's default; batches that fit the small segments), each
/// acknowledged.
fn produce(bootstrap: &str, range: std::ops::Range<usize>) {
    let failures = Failures::default();
    let producer: BaseProducer<Failures> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        // Batches must fit the topic's 64 KiB segments (a larger one is
        // MESSAGE_TOO_LARGE, as in Kafka).
        .set("batch.size", "32768")
        .create_with_context(failures.clone())
        .unwrap();
    for i in range {
        let (key, payload) = (format!("k{i}"), value(i));
        let mut record = BaseRecord::to("tiered")
            .partition(0)
            .key(&key)
            .payload(&payload);
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(5));
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("all delivered");
    let failed = failures.0.load(Ordering::SeqCst);
    let first = failures.1.lock().unwrap().clone();
    assert_eq!(
        failed, 0,
        "every record acknowledged; the first failure: {first:?}"
    );
}

/// Partition 0's leader and its local log start, as `via` answers.
fn leader_and_local_start(via: std::net::SocketAddr) -> Option<(i32, i64)> {
    support::on_glommio(async move {
        let client = client::cluster::Cluster::new(via, "tiered-failover");
        client.refresh(Some(&["tiered"]), false).await.ok()?;
        let leader = client.leader_of("tiered", 0).filter(|l| *l >= 0)?;
        let start = client::consumer::StartAt::Timestamp(-4);
        let listed = client::consumer::list_offsets(&client, "tiered", &[0], start).await;
        Some((leader, listed.ok()?[&0]))
    })
}

/// Three brokers sharing one store directory under `root`, started.
fn tiered_cluster(root: &std::path::Path) -> Cluster {
    let store_dir = root.join("store").to_str().unwrap().to_string();
    let env = [
        ("BROKER_RETENTION_CHECK_INTERVAL_MS", "200"),
        ("BROKER_REMOTE_STORE_DIR", store_dir.as_str()),
    ];
    let mut cluster = Cluster::new(root, 3, &env);
    cluster.start();
    cluster
}

/// The tiered topic: one partition on all three, small segments, a hot
/// window of about three of them.
fn create_tiered_topic(cluster: &Cluster) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "create", "tiered", "--partitions", "1"])
        .args(["--replication-factor", "3"])
        .args(["--config", "min.insync.replicas=2"])
        .args(["--config", "remote.storage.enable=true"])
        .args(["--config", "segment.bytes=65536"])
        .args(["--config", "local.retention.bytes=200000"])
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_new_leader_continues_the_remote_log_and_reads_below_its_local_start_keep_working() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = tiered_cluster(root.path());
    create_tiered_topic(&cluster);
    produce(&cluster.bootstrap(), 0..RECORDS / 2);
    let via = cluster.node(1).kafka;
    let (first, uploaded_start) =
        support::eventually(
            "uploads",
            Duration::from_secs(30),
            || match leader_and_local_start(via) {
                Some((leader, start)) if start > 0 => Ok((leader, start)),
                other => Err(format!("{other:?}")),
            },
        );
    cluster.kill9(first);
    let survivor = (1..=3).find(|b| *b != first).unwrap();
    let via = cluster.node(survivor).kafka;
    let second = leader_other_than(via, first);
    let bootstrap = cluster.node(survivor).kafka.to_string();
    produce(&bootstrap, RECORDS / 2..RECORDS);
    // The new leader uploads past its predecessor's manifest and deletes
    // its own local copies of what the remote log holds.
    let http = cluster.node(second).http;
    support::eventually("the new leader's uploads", Duration::from_secs(60), || {
        let uploaded = counter(http, "remote_uploaded_segments_total");
        match leader_and_local_start(via) {
            Some((leader, start)) if leader == second && start > uploaded_start && uploaded > 0 => {
                Ok(())
            }
            other => Err(format!("{other:?}, {uploaded} uploaded")),
        }
    });
    let read = read_from_start(&bootstrap, "tiered", RECORDS);
    for (i, (offset, key, payload)) in read.iter().enumerate() {
        assert_eq!(*offset, i as i64, "in order, each once");
        assert_eq!(key, format!("k{i}").as_bytes());
        assert!(payload == &value(i), "record {i} byte for byte");
    }
    assert_eq!(counter(http, "remote_read_errors_total"), 0);

    // The first leader comes back below the new leader's local start: it
    // starts its log over there and joins the ISR again.
    rejoin(&mut cluster, first, survivor);
    // With the second leader gone too, whoever leads next serves it all.
    cluster.kill9(second);
    let third = (1..=3).find(|b| *b != second).unwrap();
    let via = cluster.node(third).kafka;
    leader_other_than(via, second);
    let read = read_from_start(&via.to_string(), "tiered", RECORDS);
    assert!(read
        .iter()
        .enumerate()
        .all(|(i, (offset, _, payload))| *offset == i as i64 && payload == &value(i)));
}

/// A follower that starts its log over at the leader's local start while
/// a transaction is open from below it, then leads: it knows the
/// transaction from the leader's uploaded producer snapshot, so the last
/// stable offset stays at the transaction's first record (below the local
/// start: the remote log still serves what is below) and the abort covers
/// the records below the local start too: a read_committed reader
/// (librdkafka's default) never sees them.
#[test]
fn a_follower_started_over_keeps_a_transaction_open_across_its_start() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = tiered_cluster(root.path());
    create_tiered_topic(&cluster);
    let replicas = replicas(&cluster, 1);
    let (first, follower) = (replicas[0], replicas[1]);
    let via = cluster.node(first).kafka;
    support::eventually(
        "the first leader",
        Duration::from_secs(30),
        || match leader_and_local_start(via) {
            Some((leader, _)) if leader == first => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    cluster.kill9(follower);
    let bootstrap = via.to_string();
    let transaction = open_transaction(&bootstrap);
    produce(&bootstrap, 0..RECORDS / 2);
    support::eventually(
        "local start past the transaction",
        Duration::from_secs(60),
        || match leader_and_local_start(via) {
            Some((_, start)) if start > ABORTED as i64 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    assert_eq!(
        committed_end(via),
        0,
        "the open transaction holds the LSO below the local start"
    );
    let log = rejoin(&mut cluster, follower, first);
    assert!(
        !log.contains("without the producer state"),
        "with the leader's snapshot"
    );
    cluster.kill9(first);
    let via = cluster.node(follower).kafka;
    let leader = leader_other_than(via, first);
    assert_eq!(leader, follower, "the first live in-sync replica in order");
    assert_eq!(
        committed_end(via),
        0,
        "the new leader knows the transaction is open"
    );
    transaction
        .abort_transaction(Duration::from_secs(60))
        .unwrap();
    // A few more, so the abort marker stays in the new leader's active
    // segment: only its own index of aborts can tell readers.
    produce(&via.to_string(), RECORDS / 2..RECORDS / 2 + 10);
    let read = read_from_start(&via.to_string(), "tiered", RECORDS / 2 + 10);
    for (i, (_, key, payload)) in read.iter().enumerate() {
        assert_eq!(
            key,
            format!("k{i}").as_bytes(),
            "no aborted record, none lost, in order"
        );
        assert!(payload == &value(i), "record {i} byte for byte");
    }
}

/// The offset below which a read_committed reader may read (ListOffsets
/// latest, READ_COMMITTED), as `via` answers for partition 0.
fn committed_end(via: std::net::SocketAddr) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, TopicName};
    support::on_glommio(async move {
        let mut connection = client::connection::Connection::connect(via, "committed-end")
            .await
            .unwrap();
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_isolation_level(1)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName("tiered".into()))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]);
        let response = connection.call(&request, 7).await.unwrap();
        let answer = &response.topics[0].partitions[0];
        assert_eq!(answer.error_code, 0);
        answer.offset
    })
}

/// Records the open transaction holds.
const ABORTED: usize = 5;

/// A transactional librdkafka producer with `ABORTED` records sent and
/// acknowledged in a transaction left open.
fn open_transaction(bootstrap: &str) -> BaseProducer {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", "across-the-start")
        .set("transaction.timeout.ms", "300000")
        .create()
        .unwrap();
    producer.init_transactions(Duration::from_secs(30)).unwrap();
    producer.begin_transaction().unwrap();
    for i in 0..ABORTED {
        let payload = format!("aborted {i}");
        let record = BaseRecord::to("tiered")
            .partition(0)
            .key("aborted")
            .payload(&payload);
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    producer
}

/// Partition 0's replicas in order, as `broker topic describe` prints them.
fn replicas(cluster: &Cluster, via: i32) -> Vec<i32> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "describe", "tiered"])
        .args(["--brokers", &cluster.node(via).kafka.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("partition "))
        .unwrap_or_else(|| panic!("no partition in {text}"));
    let list = line
        .split("replicas [")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    list.split(',').map(|b| b.trim().parse().unwrap()).collect()
}

/// A leader of partition 0 other than `gone`, once `via` names one.
fn leader_other_than(via: std::net::SocketAddr, gone: i32) -> i32 {
    support::eventually(
        "a new leader",
        Duration::from_secs(30),
        || match leader_and_local_start(via) {
            Some((leader, _)) if leader != gone => Ok(leader),
            other => Err(format!("{other:?}")),
        },
    )
}

/// Restarts `returning`, waits for the ISR whole again (as `via`
/// describes it) and checks it started its log over at its leader's
/// local start; its log text.
fn rejoin(cluster: &mut Cluster, returning: i32, via: i32) -> String {
    cluster.restart(returning);
    support::eventually(
        "the ISR whole again",
        Duration::from_secs(60),
        || match isr_size(cluster, via) {
            3 => Ok(()),
            n => Err(format!("{n} in sync")),
        },
    );
    let log = std::fs::read_to_string(cluster.log_path(returning)).unwrap();
    assert!(
        log.contains("starting the log over at its local start"),
        "the returning broker started its log over"
    );
    log
}

/// The ISR size of partition 0, as `broker topic describe` prints it.
fn isr_size(cluster: &Cluster, via: i32) -> usize {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "describe", "tiered"])
        .args(["--brokers", &cluster.node(via).kafka.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find(|l| l.trim_start().starts_with("partition "))
        .map_or(0, |l| {
            l.rsplit("isr [").next().unwrap().matches(',').count() + 1
        })
}
