//! Retention and compaction run by the broker in the background: old
//! segments go and the earliest offset advances (a consumer behind it is
//! told OFFSET_OUT_OF_RANGE), and a compacted topic keeps the newest value
//! per key in increasing offsets.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::cluster::Cluster;
use client::connection::ClientError;
use client::consumer::{list_offsets, Consumer, ConsumerConfig, StartAt};
use client::producer::{Producer, ProducerConfig};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::Message;
use support::{on_glommio, start_broker_with};

/// Segments of 64 KiB (the smallest the broker uses), checked every 200 ms.
const FAST: &[(&str, &str)] = &[("BROKER_RETENTION_CHECK_INTERVAL_MS", "200")];

async fn produce(
    cluster: &std::rc::Rc<Cluster>,
    topic: &str,
    records: Vec<(String, Option<Vec<u8>>)>,
) {
    let producer = Producer::new(cluster.clone(), ProducerConfig::default());
    let mut pending = Vec::new();
    for (key, value) in records {
        pending.push(
            producer
                .send(topic, Some(Bytes::from(key)), value.map(Bytes::from))
                .await
                .unwrap(),
        );
    }
    for sent in pending {
        sent.await.unwrap();
    }
}

async fn read_all(
    cluster: &std::rc::Rc<Cluster>,
    topic: &str,
    from: StartAt,
) -> Vec<client::records::ConsumedRecord> {
    let end = list_offsets(cluster, topic, &[0], StartAt::Latest)
        .await
        .unwrap()[&0];
    let config = ConsumerConfig {
        max_wait: Duration::from_millis(50),
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::assign(cluster.clone(), topic, &[0], from, config)
        .await
        .unwrap();
    let mut out = Vec::new();
    while consumer.positions()[&0] < end {
        out.extend(consumer.poll().await.unwrap());
    }
    out
}

#[test]
fn retention_deletes_old_segments_and_a_consumer_behind_is_told_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), FAST);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "retention-test");
        cluster
            .create_topic(
                "old",
                1,
                1,
                &[("segment.bytes", "65536"), ("retention.bytes", "200000")],
            )
            .await
            .unwrap();
        let records = (0..1500)
            .map(|i| (format!("k{i}"), Some(vec![b'v'; 1000])))
            .collect();
        produce(&cluster, "old", records).await;
        // About 1.5 MB written; retention keeps 200 KB (whole segments: up
        // to two more). Passes may run while the producer still writes, so
        // wait for one that ran after it.
        let limit = 200_000 + 2 * 65_536;
        let started = Instant::now();
        let (earliest, latest) = loop {
            let earliest = list_offsets(&cluster, "old", &[0], StartAt::Earliest)
                .await
                .unwrap()[&0];
            let latest = list_offsets(&cluster, "old", &[0], StartAt::Latest)
                .await
                .unwrap()[&0];
            if (latest - earliest) * 1000 <= limit || started.elapsed() > Duration::from_secs(20) {
                break (earliest, latest);
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        };
        assert!(earliest > 0, "retention advanced the earliest offset");
        assert_eq!(latest, 1500, "retention never touches the end");
        let kept_bytes = (latest - earliest) * 1000;
        assert!(kept_bytes <= limit, "kept {kept_bytes} bytes");
        let mut behind = Consumer::assign(
            cluster.clone(),
            "old",
            &[0],
            StartAt::Offset(0),
            ConsumerConfig::default(),
        )
        .await
        .unwrap();
        match behind.poll().await {
            Err(ClientError::Broker(1)) => {}
            other => panic!("expected OFFSET_OUT_OF_RANGE, got {other:?}"),
        }
        // What is left reads back in order from the new earliest offset.
        let rest = read_all(&cluster, "old", StartAt::Earliest).await;
        assert_eq!(rest.first().map(|r| r.offset), Some(earliest));
        assert_eq!(rest.len() as i64, latest - earliest);
    });
    // The log start moves before a pass finishes removing the files:
    // count them once the passes have caught up.
    let count_logs = || {
        std::fs::read_dir(dir.path().join("partitions"))
            .unwrap()
            .flatten()
            .flat_map(|t| std::fs::read_dir(t.path().join("0")).unwrap().flatten())
            .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
            .count()
    };
    let started = Instant::now();
    let mut logs = count_logs();
    while logs > 6 && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        logs = count_logs();
    }
    assert!(logs <= 6, "{logs} segment files left");
}

#[test]
fn compaction_keeps_the_newest_value_per_key_in_offset_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), FAST);
    let address = broker.address;
    let offsets = on_glommio(async move {
        let cluster = Cluster::new(address, "compaction-test");
        cluster
            .create_topic(
                "latest",
                1,
                1,
                &[
                    ("cleanup.policy", "compact"),
                    ("segment.bytes", "65536"),
                    ("delete.retention.ms", "0"),
                ],
            )
            .await
            .unwrap();
        // 20 keys, 150 versions each (about 3 MB), then a tombstone for k0.
        let mut records = Vec::new();
        for version in 0..150 {
            for key in 0..20 {
                records.push((
                    format!("k{key}"),
                    Some(format!("{version}:{}", "x".repeat(1000)).into_bytes()),
                ));
            }
        }
        records.push(("k0".to_string(), None));
        // Filler after it, so the tombstone's segment gets sealed and compacted.
        for i in 0..200 {
            records.push((format!("filler{}", i % 5), Some(vec![b'f'; 1000])));
        }
        produce(&cluster, "latest", records).await;
        let total = total_records();
        let started = Instant::now();
        let kept = loop {
            let kept = read_all(&cluster, "latest", StartAt::Earliest).await;
            // A pass swaps one segment at a time: wait for one to have
            // finished (few records left, none of them a value of k0).
            let k0_values = kept
                .iter()
                .filter(|r| r.key.as_deref() == Some(&b"k0"[..]) && r.value.is_some())
                .count();
            let done = kept.len() < total / 4 && k0_values == 0;
            if done || started.elapsed() > Duration::from_secs(30) {
                break kept;
            }
            glommio::timer::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            kept.len() < total / 4,
            "compaction removed old versions: {} of {total} left",
            kept.len()
        );
        let offsets: Vec<i64> = kept.iter().map(|r| r.offset).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets increase");
        let mut newest: BTreeMap<String, Option<String>> = BTreeMap::new();
        for record in &kept {
            let key = String::from_utf8(record.key.clone().unwrap().to_vec()).unwrap();
            let value = record.value.as_ref().map(|v| {
                String::from_utf8_lossy(v)
                    .split(':')
                    .next()
                    .unwrap()
                    .to_string()
            });
            newest.insert(key, value);
        }
        for key in 1..20 {
            assert_eq!(
                newest[&format!("k{key}")].as_deref(),
                Some("149"),
                "k{key}'s newest value kept"
            );
        }
        // k0 was deleted: no value of it survives (its tombstone may or may not).
        assert!(
            newest.get("k0").is_none_or(|v| v.is_none()),
            "k0 stays deleted: {:?}",
            newest.get("k0")
        );
        offsets
    });
    // librdkafka, reading the compacted topic in a consumer group, sees
    // offsets in increasing order, gaps and all, up to the last one.
    let kept_offsets = offsets;
    let last = *kept_offsets.last().unwrap();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "compacted-readers")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["latest"]).unwrap();
    let mut read = Vec::new();
    let started = Instant::now();
    while read.last() != Some(&last) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "read {} records",
            read.len()
        );
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            read.push(message.unwrap().offset());
        }
    }
    assert!(read.windows(2).all(|w| w[0] < w[1]), "offsets increase");
    // Compaction may have gone on since: what librdkafka read is a subset.
    let kept: std::collections::BTreeSet<i64> = kept_offsets.into_iter().collect();
    assert!(read.iter().all(|o| kept.contains(o)));
    assert!(read.len() < total_records() / 4, "{} records", read.len());
}

fn total_records() -> usize {
    20 * 150 + 1 + 200
}
