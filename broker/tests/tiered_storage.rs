//! Tiered storage (docs/tiered-storage.md) on a broker with the embedded
//! default store (a directory in its data directory): a tiered topic's
//! old segments leave the local disk once uploaded, and librdkafka reads
//! every record from offset 0, byte for byte, in order, before and after
//! a restart; ListOffsets tells the remote and local starts apart; the
//! settings Kafka refuses are refused.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::cluster::Cluster;
use client::connection::ClientError;
use client::consumer::{list_offsets, StartAt};
use client::producer::{Producer, ProducerConfig};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::{Message, Offset, TopicPartitionList};
use support::{on_glommio, start_broker_with};

/// Passes every 200 ms.
const FAST: &[(&str, &str)] = &[("BROKER_RETENTION_CHECK_INTERVAL_MS", "200")];

/// Records of 1000 bytes: about 1.5 MB, 23 segments of 64 KiB.
const RECORDS: usize = 1500;

fn value(i: usize) -> Vec<u8> {
    let mut value = format!("record {i} ").into_bytes();
    value.resize(1000, b'a' + (i % 26) as u8);
    value
}

/// The `.log` files of partition 0 of the only topic, and the `.log`
/// objects of the store.
fn segment_files(data_dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let logs_under = |dir: PathBuf| -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![dir];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "log") {
                    found.push(path);
                }
            }
        }
        found.sort();
        found
    };
    (
        logs_under(data_dir.join("partitions")),
        logs_under(data_dir.join("remote-store")),
    )
}

/// Every record of partition 0 from offset 0, with librdkafka (its
/// default settings, assigned at the beginning): (offset, key, value).
fn read_with_librdkafka(
    bootstrap: &str,
    topic: &str,
    count: usize,
) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "tiered-readers")
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
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message.unwrap();
            read.push((
                message.offset(),
                message.key().unwrap_or_default().to_vec(),
                message.payload().unwrap_or_default().to_vec(),
            ));
        }
    }
    read
}

fn check_everything(read: &[(i64, Vec<u8>, Vec<u8>)]) {
    assert_eq!(read.len(), RECORDS);
    for (i, (offset, key, payload)) in read.iter().enumerate() {
        assert_eq!(*offset, i as i64, "in order, none missing");
        assert_eq!(key, format!("k{i}").as_bytes());
        assert!(payload == &value(i), "record {i} byte for byte");
    }
}

/// A sample without labels from the broker's /metrics.
fn metric(http: std::net::SocketAddr, name: &str) -> f64 {
    let (status, page) = support::http(http, "GET", "/metrics", "");
    assert_eq!(status, 200);
    page.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} not served"))
        .parse()
        .unwrap()
}

async fn list(cluster: &Cluster, topic: &str, at: StartAt) -> i64 {
    list_offsets(cluster, topic, &[0], at).await.unwrap()[&0]
}

#[test]
fn old_segments_move_to_the_store_and_librdkafka_reads_everything_from_offset_zero() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), FAST);
    let address = broker.address;
    let local_start = on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-test");
        cluster
            .create_topic(
                "tiered",
                1,
                1,
                &[
                    ("remote.storage.enable", "true"),
                    ("segment.bytes", "65536"),
                    ("local.retention.bytes", "200000"),
                ],
            )
            .await
            .unwrap();
        let producer = Producer::new(cluster.clone(), ProducerConfig::default());
        let mut pending = Vec::new();
        for i in 0..RECORDS {
            let key = Some(Bytes::from(format!("k{i}")));
            pending.push(
                producer
                    .send("tiered", key, Some(Bytes::from(value(i))))
                    .await
                    .unwrap(),
            );
        }
        for sent in pending {
            sent.await.unwrap();
        }
        // Wait for a pass after the last segment sealed: the local log
        // keeps about 200 KB, the rest is only in the store.
        let started = Instant::now();
        let local_start = loop {
            let local_start = list(&cluster, "tiered", StartAt::Timestamp(-4)).await;
            if (RECORDS as i64 - local_start) * 1000 <= 200_000 + 2 * 65_536 {
                break local_start;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "local start {local_start}"
            );
            glommio::timer::sleep(Duration::from_millis(100)).await;
        };
        assert!(local_start > 0);
        assert_eq!(
            list(&cluster, "tiered", StartAt::Earliest).await,
            0,
            "the remote log starts at 0"
        );
        assert_eq!(
            list(&cluster, "tiered", StartAt::Latest).await,
            RECORDS as i64
        );
        let pending_upload = list(&cluster, "tiered", StartAt::Timestamp(-5)).await;
        assert!(
            (local_start..RECORDS as i64).contains(&pending_upload),
            "the first offset not uploaded ({pending_upload}) is local, below the end"
        );
        local_start
    });
    let (local, remote) = segment_files(dir.path());
    assert!(local.len() <= 7, "{} local segments left", local.len());
    assert!(remote.len() >= 15, "{} segments in the store", remote.len());
    let first_local: i64 = local[0]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        first_local, local_start,
        "the local log starts where the listing says"
    );

    check_everything(&read_with_librdkafka(
        &broker.bootstrap(),
        "tiered",
        RECORDS,
    ));
    let uploaded = metric(broker.http, "remote_uploaded_segments_total");
    assert!(
        uploaded >= remote.len() as f64,
        "{uploaded} uploads counted"
    );
    let read_remotely = metric(broker.http, "remote_read_bytes_total");
    assert!(
        read_remotely >= (local_start * 1000) as f64,
        "{read_remotely} bytes read from the store, the {local_start} records below the local start at least"
    );
    assert_eq!(metric(broker.http, "remote_read_errors_total"), 0.0);

    // After a restart the manifest is read back from the store.
    drop(broker);
    let broker = start_broker_with(dir.path(), FAST);
    check_everything(&read_with_librdkafka(
        &broker.bootstrap(),
        "tiered",
        RECORDS,
    ));
}

#[test]
fn kafkas_refusals_compacted_topics_turning_it_off_and_a_hot_window_past_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[]);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-refusals");
        let refused = |result: Result<(), ClientError>, needle: &str| match result {
            Err(ClientError::Refused(40, message)) => {
                assert!(message.contains(needle), "{message}")
            }
            other => panic!("expected INVALID_CONFIG naming {needle}, got {other:?}"),
        };
        let compacted = [
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact"),
        ];
        refused(
            cluster.create_topic("compacted", 1, 1, &compacted).await,
            "compacted",
        );
        let too_long = [
            ("remote.storage.enable", "true"),
            ("retention.ms", "60000"),
            ("local.retention.ms", "120000"),
        ];
        refused(
            cluster.create_topic("window", 1, 1, &too_long).await,
            "local.retention.ms",
        );
        cluster
            .create_topic("on", 1, 1, &[("remote.storage.enable", "true")])
            .await
            .unwrap();
        refused(
            cluster
                .alter_configs("on", &[("remote.storage.enable", Some("false"))])
                .await,
            "cannot be turned off",
        );
        refused(
            cluster
                .alter_configs("on", &[("cleanup.policy", Some("compact"))])
                .await,
            "compacted",
        );
        let described = cluster.describe_configs("on").await.unwrap();
        let setting = |name: &str| {
            described
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.value.clone())
        };
        assert_eq!(setting("remote.storage.enable").as_deref(), Some("true"));
        assert_eq!(setting("local.retention.ms").as_deref(), Some("-2"));
    });
    drop(broker);
    // A broker without a store refuses to tier.
    let other = tempfile::tempdir().unwrap();
    let broker = start_broker_with(other.path(), &[("BROKER_REMOTE_STORE", "none")]);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-refusals");
        let result = cluster
            .create_topic("on", 1, 1, &[("remote.storage.enable", "true")])
            .await;
        assert!(
            matches!(&result, Err(ClientError::Refused(40, m)) if m.contains("remote_store = none")),
            "{result:?}"
        );
    });
}
