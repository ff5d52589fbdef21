//! A keyed load with librdkafka's default settings, for the tests that
//! move leadership under it: an idempotent producer writing keyed
//! sequence numbers, a consumer reading every partition back, and the
//! check that nothing acknowledged was lost and each key kept its order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

/// (partition, offset, key, sequence number) of one message.
pub type Keyed = (i32, i64, String, u64);

/// What the broker acknowledged, and the deliveries that failed.
#[derive(Clone, Default)]
pub struct Deliveries {
    /// Acknowledged messages.
    pub acked: Arc<Mutex<Vec<Keyed>>>,
    /// Why deliveries failed.
    pub failed: Arc<Mutex<Vec<String>>>,
}

impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => {
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default());
                let seq = value.parse().expect("a sequence number");
                self.acked
                    .lock()
                    .unwrap()
                    .push((m.partition(), m.offset(), key, seq));
            }
            Err((e, _)) => self.failed.lock().unwrap().push(e.to_string()),
        }
    }
}

/// Writes keyed sequence numbers (12 keys) to `topic` with librdkafka's
/// default settings until `stop`, then flushes. Idempotent, as the Java
/// client and kafka-python are by default: without it a retried request
/// may land after a later one (Kafka keeps a key's order across retries
/// only so).
pub fn produce_until(bootstrap: String, topic: &str, stop: Arc<AtomicBool>) -> Deliveries {
    let deliveries = Deliveries::default();
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .create_with_context(deliveries.clone())
        .expect("an rdkafka producer");
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("k{}", seq % 12);
        let value = seq.to_string();
        let record = BaseRecord::to(topic).key(&key).payload(&value);
        if producer.send(record).is_ok() {
            seq += 1;
        }
        producer.poll(Duration::from_millis(if seq.is_multiple_of(50) {
            5
        } else {
            0
        }));
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
    deliveries
}

/// Reads `topic`'s `partitions` from the beginning up to each one's end
/// (at most a minute in all): its high watermark once the load stopped, or past
/// its last acknowledged offset if that is further (a new leader may
/// still be raising its high watermark). Returns the log in offset order,
/// each offset once: a consumer may fetch an offset twice, and the two
/// reads must agree.
pub fn consume_all(bootstrap: &str, topic: &str, partitions: usize, acked: &[Keyed]) -> Vec<Keyed> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "assigned-only")
        .set("enable.auto.commit", "false")
        // An offset out of range starts the partition over, not at its end.
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("an rdkafka consumer");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ends: BTreeMap<i32, i64> = (0..partitions as i32)
        .map(|p| (p, high_watermark(&consumer, topic, p, deadline)))
        .collect();
    for (p, offset, _, _) in acked {
        let end = ends.entry(*p).or_default();
        *end = (*end).max(offset + 1);
    }
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut log: BTreeMap<(i32, i64), (String, u64)> = BTreeMap::new();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let behind = |next: &BTreeMap<i32, i64>| {
        (ends.iter()).any(|(p, end)| next.get(p).copied().unwrap_or(0) < *end)
    };
    while behind(&next) && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = message.expect("consuming");
        let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
        let seq = String::from_utf8_lossy(m.payload().unwrap_or_default())
            .parse()
            .unwrap();
        let (p, offset) = (m.partition(), m.offset());
        if let Some(earlier) = log.insert((p, offset), (key.clone(), seq)) {
            assert_eq!(earlier, (key, seq), "{p}/{offset} read twice, unlike");
        }
        let position = next.entry(p).or_default();
        *position = (*position).max(offset + 1);
    }
    (log.into_iter())
        .map(|((p, offset), (key, seq))| (p, offset, key, seq))
        .collect()
}

/// `topic`'s `partition`'s high watermark, asked until a leader answers
/// (until `deadline`).
fn high_watermark(consumer: &BaseConsumer, topic: &str, partition: i32, deadline: Instant) -> i64 {
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match consumer.fetch_watermarks(topic, partition, wait.min(Duration::from_secs(5))) {
            Ok((_, high)) => return high,
            Err(e) if Instant::now() > deadline => panic!("{topic}/{partition}'s watermarks: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Every acknowledged message is where its acknowledgement said, and
/// each key's sequence numbers only grow along the log (`consumed` in
/// offset order, as `consume_all` returns it): a duplicate fails too.
pub fn assert_nothing_lost_and_keys_in_order(acked: &[Keyed], consumed: &[Keyed]) {
    let at: BTreeMap<(i32, i64), (String, u64)> = consumed
        .iter()
        .map(|(p, o, k, s)| ((*p, *o), (k.clone(), *s)))
        .collect();
    for (p, o, k, s) in acked {
        assert_eq!(
            at.get(&(*p, *o)),
            Some(&(k.clone(), *s)),
            "acknowledged at {p}/{o}"
        );
    }
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, _, key, seq) in consumed {
        if let Some(previous) = last.insert(key, *seq) {
            assert!(*seq > previous, "key {key}: {seq} after {previous}");
        }
    }
}
