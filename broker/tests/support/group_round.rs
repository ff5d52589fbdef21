//! A producer's values read back by a consumer group and committed
//! (librdkafka clients; the consumer reads from the earliest offset and
//! commits by hand, the producer's acks as given): the traffic a broker
//! has served before a test stops it and reads what it logged.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// Produces `count` values (`v0`, `v1`, ...) to `topic` with `acks`,
/// reads `count` messages back in group `group` from the earliest offset
/// and commits them. Returns both clients, still connected (the consumer
/// still a member of its group): a test may stop the broker under them.
pub fn produce_and_read_in_group(
    bootstrap: &str,
    topic: &str,
    group: &str,
    count: usize,
    acks: &str,
) -> (BaseProducer, BaseConsumer) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .create()
        .unwrap();
    for i in 0..count {
        let value = format!("v{i}");
        let mut record = BaseRecord::<(), str>::to(topic).payload(value.as_str());
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(5));
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let (started, mut read) = (Instant::now(), 0);
    while read < count {
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(30), "read {read} of {count}");
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            message.unwrap();
            read += 1;
        }
    }
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();
    (producer, consumer)
}
