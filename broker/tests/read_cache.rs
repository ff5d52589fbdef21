//! The batch caches' shared memory and the read-ahead of disk reads, on a
//! real broker: a producer writes several times the shard's cache limit,
//! the caches stay within it, and a consumer catching up from the start
//! (the oldest batches evicted to disk, read through the prefetch window)
//! gets every message once and in order. The producer's large requests
//! are stored in the memory they arrived in, and read back intact; a
//! request whose batches go to both shards leaves its memory to one.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use storage::batch::{build, RecordSpec};
use storage::TimestampMs;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use support::cluster::gauge;
use support::produce_wire::{produce_frame, read_produce_answer};
use support::{cli, start_broker_with};

/// The caches' limit over both shards of the test broker.
const CACHE_LIMIT: u64 = 16 << 20;
/// What each partition keeps whatever the others hold (the broker's floor).
const PARTITION_FLOOR: u64 = 4 << 20;
const PARTITIONS: i32 = 2;
/// 1 KiB messages per partition: 24 MiB each, 48 MiB in all, three times
/// the limit.
const PER_PARTITION: usize = 24 * 1024;

/// The message `seq` of `partition`: its place in the value, padded to 1 KiB.
fn value(partition: i32, seq: usize) -> String {
    format!("{partition}:{seq:08}:{}", "x".repeat(1013))
}

fn produce(bootstrap: &str, topic: &str) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("an rdkafka producer");
    for seq in 0..PER_PARTITION {
        for partition in 0..PARTITIONS {
            let payload = value(partition, seq);
            let mut record = BaseRecord::<(), str>::to(topic)
                .partition(partition)
                .payload(&payload);
            while let Err((_, back)) = producer.send(record) {
                record = back;
                producer.poll(Duration::from_millis(5));
            }
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("every message acknowledged");
}

/// Every partition read from the start: partition -> values in offset order.
fn consume_all(bootstrap: &str, topic: &str) -> BTreeMap<i32, Vec<(i64, String)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "catching-up")
        .set("enable.auto.commit", "false")
        .create()
        .expect("an rdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut read: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    let expected = PER_PARTITION * PARTITIONS as usize;
    let started = Instant::now();
    let mut count = 0;
    while count < expected && started.elapsed() < Duration::from_secs(90) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let text = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
                read.entry(m.partition())
                    .or_default()
                    .push((m.offset(), text));
                count += 1;
            }
            Some(Err(e)) => panic!("consuming: {e}"),
            None => {}
        }
    }
    read
}

#[test]
fn a_consumer_catching_up_past_the_cache_limit_reads_every_message_in_order_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[
            ("BROKER_LOG_CACHE_BYTES", &CACHE_LIMIT.to_string()),
            ("BROKER_DEFAULT_PARTITIONS", &PARTITIONS.to_string()),
        ],
    );
    let bootstrap = broker.bootstrap();
    produce(&bootstrap, "catch-up");
    // At least half the records reached the log in the memory their
    // (large) requests arrived in, not copied (kafka::record_sets: the
    // partitions are on both shards, and the shard taking less of a
    // request copies its batch out); the reads below check every byte and
    // offset of them, from the cache and from disk.
    let in_place = gauge(broker.http, "produce_record_bytes_in_place_total");
    let copied = gauge(broker.http, "produce_record_bytes_copied_total");
    assert!(
        in_place > 0.0 && in_place >= copied,
        "{in_place} record bytes kept in place, {copied} copied"
    );

    // The trimming pass runs every 100 ms.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        gauge(broker.http, "log_cache_limit_bytes"),
        CACHE_LIMIT as f64
    );
    let cached = gauge(broker.http, "log_cache_bytes") as u64;
    assert!(
        cached <= CACHE_LIMIT,
        "the caches hold {cached} bytes over a limit of {CACHE_LIMIT}"
    );
    assert!(
        cached >= PARTITIONS as u64 * PARTITION_FLOOR / 2,
        "each partition keeps its newest batches (up to {PARTITION_FLOOR} bytes), yet the caches hold {cached}"
    );

    let read = consume_all(&bootstrap, "catch-up");
    for partition in 0..PARTITIONS {
        let values = read.get(&partition).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(
            values.len(),
            PER_PARTITION,
            "partition {partition}: {} of {PER_PARTITION} read",
            values.len()
        );
        for (seq, (offset, text)) in values.iter().enumerate() {
            assert_eq!(
                *offset, seq as i64,
                "partition {partition}: a gap or a repeat"
            );
            assert!(
                *text == value(partition, seq),
                "partition {partition} offset {offset} holds {:?}",
                &text[..text.len().min(20)]
            );
        }
    }
    // The start was read from the files, through the read-ahead window.
    let hits = gauge(broker.http, "log_prefetch_hits_total");
    assert!(hits > 0.0, "no read found its bytes read ahead");
    let cache_ratio = gauge(broker.http, "log_read_cache_hit_ratio");
    assert!(
        cache_ratio < 1.0,
        "every read came from memory: nothing crossed the limit"
    );
}

/// One batch of `records` 1,000-byte values.
fn batch_of(records: usize) -> Bytes {
    let specs: Vec<RecordSpec> = (0..records)
        .map(|_| RecordSpec {
            timestamp_delta: 0,
            key: None,
            value: Some(vec![b'v'; 1_000]),
        })
        .collect();
    build(TimestampMs(1_000), &specs).freeze()
}

/// A request large enough to be read into memory of its own, whose two
/// batches go to partitions on different shards: each shard trims its
/// own cache, so were both batches kept in that memory, one shard
/// evicting its batch would free nothing while the other kept its own
/// (seen: 7.6 GiB resident for 4.7 GiB counted in the caches). The batch
/// of the shard taking less of the request is copied out of it instead.
#[test]
fn a_request_for_both_shards_leaves_its_memory_to_one_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[]);
    let bootstrap = broker.address.to_string();
    cli(
        &bootstrap,
        &["topic", "create", "halves", "--partitions", "2"],
    );
    // Each batch is over a third of the request, so neither would be
    // copied for being small beside it (partition::append).
    let (larger, smaller) = (batch_of(150), batch_of(120));
    let (kept_bytes, copied_bytes) = (larger.len() as f64, smaller.len() as f64);
    let frame = produce_frame("halves", 9, 1, vec![(0, larger), (1, smaller)]);
    let mut stream = TcpStream::connect(broker.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(&frame).unwrap();
    let (id, partitions) = read_produce_answer(&mut stream, 9);
    assert_eq!(id, 1);
    assert_eq!(partitions[&0], (0, 0), "partition 0 appended");
    assert_eq!(partitions[&1], (0, 0), "partition 1 appended");
    let in_place = gauge(broker.http, "produce_record_bytes_in_place_total");
    let copied = gauge(broker.http, "produce_record_bytes_copied_total");
    assert_eq!(
        (in_place, copied),
        (kept_bytes, copied_bytes),
        "the larger batch kept in the request's memory, the smaller copied \
         (both kept means two shards hold one allocation; none copied also \
         when both partitions are on one shard)"
    );
}
