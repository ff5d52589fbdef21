//! Reading a partition back whole with librdkafka, as a consumer
//! replaying a topic from its first offset does.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Message, Offset, TopicPartitionList};

/// A record read back: offset, key, value.
pub type ReadRecord = (i64, Vec<u8>, Vec<u8>);

/// The first `count` records of partition 0 of `topic` from offset 0,
/// with librdkafka's default settings (a minute at most).
pub fn read_from_start(bootstrap: &str, topic: &str, count: usize) -> Vec<ReadRecord> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "replaying-readers")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut read = Vec::new();
    let started = Instant::now();
    while read.len() < count {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "librdkafka read {} of {count} records",
            read.len()
        );
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = match message {
            Ok(message) => message,
            // A broker of the cluster killed by the test: librdkafka
            // reports its connection's failure and goes on with the others.
            Err(e) if is_transport_failure(&e) => continue,
            Err(e) => panic!("reading {topic}: {e}"),
        };
        read.push((
            message.offset(),
            message.key().unwrap_or_default().to_vec(),
            message.payload().unwrap_or_default().to_vec(),
        ));
    }
    read
}

fn is_transport_failure(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown)
    )
}
