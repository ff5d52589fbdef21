//! The broker driven by librdkafka (the reference client, the `rdkafka`
//! crate) and by the project's own client, end to end: keyed messages
//! keep per-key order on one partition, both clients place a key on the
//! same partition, acknowledged messages survive restarts and SIGKILL.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::cluster::Cluster;
use client::consumer::{Consumer as OurConsumer, ConsumerConfig, StartAt};
use client::partitioner::partition_for_key;
use client::producer::{Producer as OurProducer, ProducerConfig};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use support::{on_glommio, start_broker};

/// (partition, offset, key, value) of each acknowledged message.
type Acked = Arc<Mutex<Vec<(i32, i64, String, String)>>>;

#[derive(Clone, Default)]
struct Deliveries {
    acked: Acked,
    failed: Arc<Mutex<Vec<String>>>,
}

impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => {
                let text =
                    |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).to_string();
                self.acked.lock().unwrap().push((
                    m.partition(),
                    m.offset(),
                    text(m.key()),
                    text(m.payload()),
                ));
            }
            Err((e, _)) => self.failed.lock().unwrap().push(e.to_string()),
        }
    }
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> (BaseProducer<Deliveries>, Deliveries) {
    let deliveries = Deliveries::default();
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    let producer = config
        .create_with_context(deliveries.clone())
        .expect("an rdkafka producer");
    (producer, deliveries)
}

fn send(producer: &BaseProducer<Deliveries>, topic: &str, key: &str, value: &str) {
    let mut record = BaseRecord::to(topic).key(key).payload(value);
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((_, back)) => {
                record = back;
                producer.poll(Duration::from_millis(5));
            }
        }
    }
}

/// Reads partitions 0..partitions of `topic` from the beginning with
/// librdkafka until `expected` messages came (or a minute passed).
fn consume_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
) -> Vec<(i32, i64, String, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "assigned-only")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .expect("an rdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    while out.len() < expected && started.elapsed() < Duration::from_secs(60) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let text =
                    |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).to_string();
                out.push((m.partition(), m.offset(), text(m.key()), text(m.payload())));
            }
            Some(Err(e)) => panic!("consuming: {e}"),
            None => {}
        }
    }
    out
}

#[test]
fn keyed_messages_with_acks_all_stay_in_key_order_on_one_partition() {
    const KEYS: usize = 1000;
    const PER_KEY: usize = 100;
    const PARTITIONS: i32 = 8;
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "test-admin");
        cluster
            .create_topic("keyed", PARTITIONS, 1, &[])
            .await
            .unwrap();
    });
    let (producer, deliveries) = producer(&broker.bootstrap(), &[("compression.type", "snappy")]);
    for seq in 0..PER_KEY {
        for key in 0..KEYS {
            send(
                &producer,
                "keyed",
                &format!("key-{key}"),
                &format!("{key}:{seq}"),
            );
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    assert!(
        deliveries.failed.lock().unwrap().is_empty(),
        "{:?}",
        deliveries.failed.lock().unwrap().first()
    );
    let acked = deliveries.acked.lock().unwrap().clone();
    assert_eq!(acked.len(), KEYS * PER_KEY, "every message acknowledged");

    // Then the project's producer sends as many again, each key's
    // sequence continuing: it must pick the same partition as librdkafka's
    // murmur2 partitioner and keep each key's order.
    on_glommio(async move {
        let cluster = Cluster::new(address, "test-producer");
        let producer = OurProducer::new(cluster, ProducerConfig::default());
        let mut pending = Vec::new();
        for seq in PER_KEY..2 * PER_KEY {
            for key in 0..KEYS {
                let sent = producer
                    .send(
                        "keyed",
                        Some(Bytes::from(format!("key-{key}"))),
                        Some(Bytes::from(format!("{key}:{seq}"))),
                    )
                    .await
                    .unwrap();
                pending.push(sent);
            }
            // A bounded window of unacknowledged records.
            if pending.len() >= 20 * KEYS {
                for sent in pending.drain(..) {
                    sent.await.unwrap();
                }
            }
        }
        for sent in pending {
            sent.await.unwrap();
        }
    });

    let total = KEYS * PER_KEY * 2;
    let consumed = consume_all(&broker.bootstrap(), "keyed", PARTITIONS, total);
    assert_eq!(consumed.len(), total, "every message consumed");
    let mut next_offset: BTreeMap<i32, i64> = BTreeMap::new();
    let mut next_seq: HashMap<String, usize> = HashMap::new();
    let mut partition_of: HashMap<String, i32> = HashMap::new();
    for (partition, offset, key, value) in &consumed {
        let expected_offset = next_offset.entry(*partition).or_insert(0);
        assert_eq!(
            offset, expected_offset,
            "offsets are dense and in order on partition {partition}"
        );
        *expected_offset += 1;
        assert_eq!(
            *partition,
            partition_for_key(key.as_bytes(), PARTITIONS as u32) as i32,
            "{key} on the Java client's partition"
        );
        assert_eq!(
            *partition_of.entry(key.clone()).or_insert(*partition),
            *partition,
            "{key} on one partition"
        );
        let seq: usize = value.split(':').nth(1).unwrap().parse().unwrap();
        let expected_seq = next_seq.entry(key.clone()).or_insert(0);
        assert_eq!(seq, *expected_seq, "{key}'s messages in order");
        *expected_seq += 1;
    }
    // What librdkafka was told is exactly what is there.
    let stored: HashMap<(i32, i64), (String, String)> = consumed
        .into_iter()
        .map(|(p, o, k, v)| ((p, o), (k, v)))
        .collect();
    for (p, o, k, v) in acked {
        assert_eq!(stored.get(&(p, o)), Some(&(k, v)), "acknowledged {p}/{o}");
    }
}

#[test]
fn a_restart_keeps_every_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let (producer, deliveries) = producer(&broker.bootstrap(), &[("compression.type", "zstd")]);
    for i in 0..5_000 {
        send(
            &producer,
            "restart",
            &format!("k{}", i % 37),
            &format!("v{i}"),
        );
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    drop(producer);
    let acked = deliveries.acked.lock().unwrap().clone();
    assert_eq!(acked.len(), 5_000);
    let status = broker.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status:?}");
    let broker = start_broker(dir.path());
    let consumed = consume_all(&broker.bootstrap(), "restart", 1, acked.len());
    assert_eq!(
        consumed, acked,
        "the same messages at the same offsets after a restart"
    );
}

#[test]
fn fetch_long_poll_wakes_when_data_arrives_and_list_offsets_finds_times() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "test-poll");
        cluster.create_topic("poll", 1, 1, &[]).await.unwrap();
        let config = ConsumerConfig {
            max_wait: Duration::from_secs(20),
            ..ConsumerConfig::default()
        };
        let mut consumer =
            OurConsumer::assign(cluster.clone(), "poll", &[0], StartAt::Latest, config)
                .await
                .unwrap();
        // Its own connection: the consumer's is busy with the long poll.
        let producer = OurProducer::new(
            Cluster::new(address, "test-poll-producer"),
            ProducerConfig::default(),
        );
        let late = glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(300)).await;
            producer
                .send("poll", None, Some(Bytes::from_static(b"wake up")))
                .await
                .unwrap()
                .await
                .unwrap()
        });
        let started = Instant::now();
        let records = consumer.poll().await.unwrap();
        let waited = started.elapsed();
        late.await;
        assert_eq!(
            records.len(),
            1,
            "the poll returned the record produced while it waited"
        );
        assert_eq!(records[0].value.as_deref(), Some(&b"wake up"[..]));
        // Woken by the data, not by max_wait (20 s).
        assert!(waited < Duration::from_secs(10), "waited {waited:?}");
        assert!(
            waited >= Duration::from_millis(250),
            "it did wait for the data: {waited:?}"
        );

        // An empty poll waits out max_wait and returns nothing.
        let mut idle = OurConsumer::assign(
            cluster.clone(),
            "poll",
            &[0],
            StartAt::Latest,
            ConsumerConfig {
                max_wait: Duration::from_millis(200),
                ..ConsumerConfig::default()
            },
        )
        .await
        .unwrap();
        let started = Instant::now();
        assert!(idle.poll().await.unwrap().is_empty());
        assert!(started.elapsed() >= Duration::from_millis(150));

        // ListOffsets by time: records stamped 1000, 2000, ... in separate batches.
        cluster.create_topic("times", 1, 1, &[]).await.unwrap();
        let producer = OurProducer::new(
            cluster.clone(),
            ProducerConfig {
                linger: Duration::ZERO,
                ..ProducerConfig::default()
            },
        );
        for i in 1..=5i64 {
            let record = client::records::ProducerRecord {
                key: None,
                value: Some(Bytes::from(format!("at {i}"))),
                timestamp: i * 1000,
                headers: Vec::new(),
            };
            producer
                .send_record("times", record)
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let at = |t| client::consumer::list_offsets(&cluster, "times", &[0], StartAt::Timestamp(t));
        assert_eq!(at(1000).await.unwrap()[&0], 0);
        assert_eq!(at(2500).await.unwrap()[&0], 2);
        assert_eq!(at(5000).await.unwrap()[&0], 4);
        assert_eq!(at(6000).await.unwrap()[&0], -1, "nothing that late");
        let earliest = client::consumer::list_offsets(&cluster, "times", &[0], StartAt::Earliest);
        assert_eq!(earliest.await.unwrap()[&0], 0);
        let latest = client::consumer::list_offsets(&cluster, "times", &[0], StartAt::Latest);
        assert_eq!(latest.await.unwrap()[&0], 5);
    });
}

#[test]
fn compressed_batches_are_stored_as_sent_and_read_back_by_librdkafka() {
    use kafka_protocol::records::Compression;
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let codecs = [
        ("gzip", Compression::Gzip, 1),
        ("snappy", Compression::Snappy, 2),
        ("lz4", Compression::Lz4, 3),
        ("zstd", Compression::Zstd, 4),
    ];
    for (name, compression, _) in codecs {
        on_glommio(async move {
            let cluster = Cluster::new(address, "test-codecs");
            let config = ProducerConfig {
                compression,
                linger: Duration::from_millis(20),
                ..ProducerConfig::default()
            };
            let producer = OurProducer::new(cluster, config);
            let mut pending = Vec::new();
            for i in 0..200 {
                let value = format!("{name} value {i} {}", "x".repeat(100));
                pending.push(
                    producer
                        .send(name, None, Some(Bytes::from(value)))
                        .await
                        .unwrap(),
                );
            }
            for sent in pending {
                sent.await.unwrap();
            }
        });
    }
    for (name, _, attribute) in codecs {
        // The first stored batch carries the producer's codec bits.
        let topic_dir = std::fs::read_dir(dir.path().join("partitions"))
            .unwrap()
            .flatten()
            .find(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{name}."))
            })
            .unwrap()
            .path();
        let log = std::fs::read(topic_dir.join("0").join("00000000000000000000.log")).unwrap();
        assert_eq!(
            i16::from_be_bytes([log[21], log[22]]) & 7,
            attribute,
            "{name} stored as sent"
        );
        let consumed = consume_all(&broker.bootstrap(), name, 1, 200);
        assert_eq!(consumed.len(), 200, "{name}");
        for (i, (_, offset, _, value)) in consumed.iter().enumerate() {
            assert_eq!(*offset, i as i64);
            assert!(
                value.starts_with(&format!("{name} value {i} ")),
                "{name}: {value}"
            );
        }
    }
}

#[test]
fn a_keyed_producer_learns_of_added_partitions_and_each_key_keeps_its_order_per_partition() {
    const KEYS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "test-admin");
        cluster.create_topic("growing", 2, 1, &[]).await.unwrap();
    });
    // librdkafka refreshes its metadata every 5 minutes by default; a
    // second here, so the test need not wait that long.
    let (producer, deliveries) = producer(
        &broker.bootstrap(),
        &[("topic.metadata.refresh.interval.ms", "1000")],
    );
    let mut seq = 0;
    let mut write_for = |how_long: Duration| {
        let started = Instant::now();
        while started.elapsed() < how_long {
            for key in 0..KEYS {
                send(
                    &producer,
                    "growing",
                    &format!("key-{key}"),
                    &seq.to_string(),
                );
            }
            seq += 1;
            producer.poll(Duration::from_millis(10));
        }
        producer.flush(Duration::from_secs(30)).unwrap();
    };
    write_for(Duration::from_millis(500));
    let before = deliveries.acked.lock().unwrap().len();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "add-partitions", "growing", "--num", "2"])
        .args(["--brokers", &broker.bootstrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("has 4 partitions (was 2)"));
    write_for(Duration::from_secs(3));
    let acked = deliveries.acked.lock().unwrap().clone();
    assert!(deliveries.failed.lock().unwrap().is_empty());
    // Told of the new partitions, the producer hashes each key over four:
    // its records before went to murmur2 % 2, the last ones to % 4.
    for (partition, _, key, _) in &acked[..before] {
        assert_eq!(
            *partition as u32,
            partition_for_key(key.as_bytes(), 2),
            "{key}"
        );
    }
    let last_round = &acked[acked.len() - KEYS..];
    for (partition, _, key, _) in last_round {
        assert_eq!(
            *partition as u32,
            partition_for_key(key.as_bytes(), 4),
            "{key}"
        );
    }
    let moved = (0..KEYS)
        .map(|k| format!("key-{k}"))
        .filter(|k| partition_for_key(k.as_bytes(), 2) != partition_for_key(k.as_bytes(), 4))
        .count();
    assert!(
        moved > 0,
        "some keys change partition (the point of the docs' warning)"
    );
    // Within each partition, each key's records are in the order sent.
    let consumed = consume_all(&broker.bootstrap(), "growing", 4, acked.len());
    assert_eq!(consumed.len(), acked.len());
    let mut last: HashMap<(i32, String), u64> = HashMap::new();
    for (partition, _, key, value) in &consumed {
        let seq: u64 = value.parse().unwrap();
        if let Some(previous) = last.insert((*partition, key.clone()), seq) {
            assert!(
                seq > previous,
                "{key} on {partition}: {seq} after {previous}"
            );
        }
    }
}
