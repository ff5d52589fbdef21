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

#[test]
fn a_new_leader_continues_the_remote_log_and_reads_below_its_local_start_keep_working() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("store");
    let store_dir = store.to_str().unwrap().to_string();
    let env = [
        ("BROKER_RETENTION_CHECK_INTERVAL_MS", "200"),
        ("BROKER_REMOTE_STORE_DIR", store_dir.as_str()),
    ];
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
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
    let second =
        support::eventually(
            "a new leader",
            Duration::from_secs(30),
            || match leader_and_local_start(via) {
                Some((leader, _)) if leader != first => Ok(leader),
                other => Err(format!("{other:?}")),
            },
        );
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
    cluster.restart(first);
    support::eventually(
        "the ISR whole again",
        Duration::from_secs(60),
        || match isr_size(&cluster, survivor) {
            3 => Ok(()),
            n => Err(format!("{n} in sync")),
        },
    );
    let restarted = std::fs::read_to_string(cluster.log_path(first)).unwrap();
    assert!(
        restarted.contains("starting the log over at its local start"),
        "the returning broker started its log over"
    );
    // With the second leader gone too, whoever leads next serves it all.
    cluster.kill9(second);
    let third = (1..=3).find(|b| *b != second).unwrap();
    let via = cluster.node(third).kafka;
    support::eventually(
        "another leader",
        Duration::from_secs(30),
        || match leader_and_local_start(via) {
            Some((leader, _)) if leader != second => Ok(leader),
            other => Err(format!("{other:?}")),
        },
    );
    let read = read_from_start(&via.to_string(), "tiered", RECORDS);
    assert!(read
        .iter()
        .enumerate()
        .all(|(i, (offset, _, payload))| *offset == i as i64 && payload == &value(i)));
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
