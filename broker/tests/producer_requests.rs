//! The project's producer keeps each Produce request within
//! `max_request_bytes` (Kafka's max.request.size; which partitions a
//! request cut short leaves to the next is `producer::queues`'s test): a
//! producer writing to many partitions once sent every ready
//! batch in one request (tens of MiB at a thousand partitions), which the
//! broker read into fresh memory each time (a quarter of its CPU in page
//! faults, docs/benchmarks.md run 31).

mod support;

use std::time::Duration;

use bytes::Bytes;
use client::cluster::Cluster as ClientCluster;
use client::partitioner::partition_for_key;
use client::producer::{Producer, ProducerConfig};
use support::frame_counter::FrameCounter;
use support::{cli, on_glommio, start_broker_with};

const PARTITIONS: i32 = 40;
/// One record per partition, each its own batch: 8 MB ready at once.
const VALUE_BYTES: usize = 200_000;
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A key the producer's partitioner sends to `partition`.
fn key_for(partition: i32) -> Bytes {
    (0..)
        .map(|i| Bytes::from(format!("key-{i}")))
        .find(|key| partition_for_key(key, PARTITIONS as u32) == partition as u32)
        .unwrap()
}

#[test]
fn requests_stay_within_the_request_size_and_every_record_is_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let counter = FrameCounter::bind();
    let advertised = counter.address.to_string();
    let broker = start_broker_with(dir.path(), &[("BROKER_ADVERTISED_LISTENER", &advertised)]);
    counter.forward_to(broker.address);
    let via = counter.address;
    let partitions = PARTITIONS.to_string();
    cli(
        &advertised,
        &["topic", "create", "wide", "--partitions", &partitions],
    );
    let delivered = on_glommio(async move {
        let config = ProducerConfig {
            batch_bytes: 256 << 10,
            // Every batch is ready before the first request goes.
            linger: Duration::from_millis(200),
            max_request_bytes: MAX_REQUEST_BYTES,
            ..ProducerConfig::default()
        };
        let producer = Producer::new(ClientCluster::new(via, "wide"), config);
        let mut sent = Vec::new();
        for partition in 0..PARTITIONS {
            let value = Bytes::from(vec![partition as u8; VALUE_BYTES]);
            let key = Some(key_for(partition));
            sent.push(producer.send("wide", key, Some(value)).await.unwrap());
        }
        let mut delivered = Vec::new();
        for delivery in sent {
            delivered.push(delivery.await.unwrap());
        }
        delivered
    });
    let mut partitions: Vec<i32> = delivered.iter().map(|d| d.partition).collect();
    partitions.sort();
    assert_eq!(
        partitions,
        (0..PARTITIONS).collect::<Vec<_>>(),
        "one record each, all acknowledged"
    );
    let largest = counter.largest_request() as usize;
    assert!(
        largest <= MAX_REQUEST_BYTES + 64 * 1024,
        "a request of {largest} bytes: over {MAX_REQUEST_BYTES} and its headers"
    );
}
