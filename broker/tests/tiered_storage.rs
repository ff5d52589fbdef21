//! Tiered storage (docs/tiered-storage.md) on a broker with the embedded
//! default store (a directory in its data directory): a tiered topic's
//! old segments leave the local disk once uploaded, and librdkafka reads
//! every record from offset 0, byte for byte, in order, before and after
//! a restart, through a disk cache smaller than the remote log;
//! ListOffsets tells the remote and local starts apart; DeleteRecords
//! moves the start through both; the settings Kafka refuses are refused.
//! With an S3 server (moto, on 127.0.0.1, installed by the test command)
//! behind a proxy that fails it (down, 500s, slow): uploads retry,
//! nothing not uploaded is deleted, producers go on; a restarted broker
//! reads it all back from its disk cache. A damaged remote segment is
//! refused, never served; a broker killed mid-upload resumes it under
//! the same names.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::cluster::Cluster;
use client::connection::ClientError;
use client::consumer::{list_offsets, Consumer, ConsumerConfig, StartAt};
use client::producer::{Producer, ProducerConfig};
use support::fault_proxy::{Fault, FaultProxy};
use support::replay::read_from_start;
use support::{on_glommio, start_broker_with};

/// Passes every 200 ms.
const FAST: &[(&str, &str)] = &[("BROKER_RETENTION_CHECK_INTERVAL_MS", "200")];

/// Records of 1000 bytes: about 1.5 MB, 23 segments of 64 KiB.
const RECORDS: usize = 1500;

/// Passes every 200 ms; a disk cache of remote reads of 400 kB, less than
/// the remote log, so reading it through crosses its budget.
const FAST_SMALL_DISK_CACHE: &[(&str, &str)] = &[
    ("BROKER_RETENTION_CHECK_INTERVAL_MS", "200"),
    ("BROKER_REMOTE_DISK_CACHE_BYTES", "400000"),
];

/// The files of the disk cache of remote reads under a data directory, and
/// their bytes.
fn disk_cache_files(data_dir: &Path) -> (usize, u64) {
    fn walk(dir: &Path, found: &mut (usize, u64)) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => walk(&entry.path(), found),
                Ok(meta) => {
                    found.0 += 1;
                    found.1 += meta.len();
                }
                Err(_) => {}
            }
        }
    }
    let mut found = (0, 0);
    walk(&data_dir.join("remote-cache"), &mut found);
    found
}

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

fn check_everything(read: &[(i64, Vec<u8>, Vec<u8>)]) {
    assert_eq!(read.len(), RECORDS);
    check_from(read, 0);
}

/// The records read are those from `first` on, in order, byte for byte.
fn check_from(read: &[(i64, Vec<u8>, Vec<u8>)], first: i64) {
    for (n, (offset, key, payload)) in read.iter().enumerate() {
        let i = first as usize + n;
        assert_eq!(*offset, i as i64, "in order from {first}, none missing");
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
    let broker = start_broker_with(dir.path(), FAST_SMALL_DISK_CACHE);
    let address = broker.address;
    let first_listing = on_glommio(async move {
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
        assert_eq!(
            list(&cluster, "tiered", StartAt::Timestamp(0)).await,
            0,
            "a lookup by time finds the remote records"
        );
        let pending_upload = list(&cluster, "tiered", StartAt::Timestamp(-6)).await;
        let latest_tiered = list(&cluster, "tiered", StartAt::Timestamp(-5)).await;
        assert_eq!(
            latest_tiered,
            pending_upload - 1,
            "the last offset uploaded"
        );
        assert!(
            (local_start..RECORDS as i64).contains(&pending_upload),
            "the first offset not uploaded ({pending_upload}) is local, below the end"
        );
        local_start
    });
    // The log start moves before the pass removes the files; a pass may
    // still be trimming one more segment when the listing above answered
    // (the last sealed segment's upload lets it), so wait for the listing
    // and the files to agree, then hold the files to it.
    let first_local_file = |local: &[PathBuf]| -> i64 {
        local[0]
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let started = Instant::now();
    let mut last_listed = first_listing;
    let (local_start, local, remote) = loop {
        let listed = on_glommio(async move {
            list(
                &Cluster::new(address, "tiered-test"),
                "tiered",
                StartAt::Timestamp(-4),
            )
            .await
        });
        assert!(
            listed >= last_listed,
            "the local start moved back from {last_listed} to {listed}"
        );
        last_listed = listed;
        let (local, remote) = segment_files(dir.path());
        let settled = local.len() <= 7 && first_local_file(&local) == listed;
        if settled || started.elapsed() > Duration::from_secs(20) {
            break (listed, local, remote);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(local.len() <= 7, "{} local segments left", local.len());
    assert!(remote.len() >= 15, "{} segments in the store", remote.len());
    assert_eq!(
        first_local_file(&local),
        local_start,
        "the local log starts where the listing says"
    );

    check_everything(&read_from_start(&broker.bootstrap(), "tiered", RECORDS));
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
    // The disk cache filled to its budget, not past it.
    let (files, bytes) = disk_cache_files(dir.path());
    assert!(
        files > 0 && bytes <= 400_000,
        "{files} files, {bytes} bytes cached"
    );
    assert!(
        bytes > 400_000 - 2 * 65_540,
        "{bytes} bytes: filled, then evicting"
    );
    let went_to_store = metric(broker.http, "remote_disk_cache_misses_total");
    assert!(
        went_to_store >= remote.len() as f64,
        "{went_to_store} chunks from the store"
    );

    // After a restart the manifest is read back from the store.
    drop(broker);
    let broker = start_broker_with(dir.path(), FAST_SMALL_DISK_CACHE);
    check_everything(&read_from_start(&broker.bootstrap(), "tiered", RECORDS));
    let (_, bytes) = disk_cache_files(dir.path());
    assert!(
        bytes <= 400_000,
        "{bytes} bytes cached after the restart's reads"
    );

    // DeleteRecords moves the start, first within the remote log (its
    // segments wholly below go from the store at once), then past the
    // local start; a reader from the beginning starts there, after a
    // restart too.
    let bootstrap = broker.bootstrap();
    let objects_before = segment_files(dir.path()).1.len();
    let deleted = support::python_script("delete_records.py", &[&bootstrap, "tiered", "700"], 60);
    assert_eq!(deleted.trim(), "deleted 700");
    let objects_after = segment_files(dir.path()).1.len();
    assert!(
        objects_after + 9 <= objects_before,
        "{objects_before} segments in the store, {objects_after} after deleting below 700 (about 65 records each)"
    );
    check_from(&read_from_start(&bootstrap, "tiered", RECORDS - 700), 700);
    let past_local = local_start + 50;
    let deleted = support::python_script(
        "delete_records.py",
        &[&bootstrap, "tiered", &past_local.to_string()],
        60,
    );
    assert_eq!(deleted.trim(), format!("deleted {past_local}"));
    let left = RECORDS - past_local as usize;
    check_from(&read_from_start(&bootstrap, "tiered", left), past_local);
    drop(broker);
    let broker = start_broker_with(dir.path(), FAST_SMALL_DISK_CACHE);
    check_from(
        &read_from_start(&broker.bootstrap(), "tiered", left),
        past_local,
    );

    // Deleting the topic deletes its objects too.
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-test");
        cluster.delete_topic("tiered").await.unwrap();
    });
    let started = Instant::now();
    while !segment_files(dir.path()).1.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} objects left",
            segment_files(dir.path()).1.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!broker
        .logged("objects removed from tiered storage")
        .is_empty());
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

/// moto's S3 server on 127.0.0.1 (an ephemeral port), stopped when dropped.
struct S3Server {
    child: std::process::Child,
    address: std::net::SocketAddr,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_s3_server() -> S3Server {
    use std::io::BufRead;
    let binary = std::env::var("MOTO_SERVER").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/test-venv/bin/moto_server"
        )
        .into()
    });
    let mut child = std::process::Command::new(&binary)
        .args(["-H", "127.0.0.1", "-p", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{binary} (the test command installs it): {e}"));
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(at) = line.split("Running on http://").nth(1) {
                let _ = tx.send(at.trim().to_string());
            }
        }
    });
    let address = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("moto says where it listens");
    S3Server {
        child,
        address: address.parse().unwrap(),
    }
}

/// The partition's local start, earliest offset not uploaded, and end.
async fn starts(cluster: &Cluster, topic: &str) -> (i64, i64, i64) {
    (
        list(cluster, topic, StartAt::Timestamp(-4)).await,
        list(cluster, topic, StartAt::Timestamp(-6)).await,
        list(cluster, topic, StartAt::Latest).await,
    )
}

async fn produce_range(cluster: &std::rc::Rc<Cluster>, topic: &str, range: std::ops::Range<usize>) {
    let producer = Producer::new(cluster.clone(), ProducerConfig::default());
    let mut pending = Vec::new();
    for i in range {
        let key = Some(Bytes::from(format!("k{i}")));
        let sent = producer.send(topic, key, Some(Bytes::from(value(i)))).await;
        pending.push(sent.unwrap());
    }
    for sent in pending {
        sent.await.expect("acknowledged while the store is failing");
    }
}

/// Waits until `done` holds, polling every 100 ms, up to `limit`.
async fn until(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn on_s3_uploads_go_on_through_outages_500s_and_slowness_and_nothing_unuploaded_is_deleted() {
    let s3 = start_s3_server();
    let (status, _) = support::http(s3.address, "PUT", "/tiered-logs", "");
    assert_eq!(status, 200, "bucket made");
    let proxy = FaultProxy::start(s3.address);
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://{}", proxy.address);
    let env = [
        ("BROKER_RETENTION_CHECK_INTERVAL_MS", "200"),
        ("BROKER_REMOTE_STORE", "s3"),
        ("BROKER_REMOTE_S3_BUCKET", "tiered-logs"),
        ("BROKER_REMOTE_S3_ENDPOINT", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ];
    let broker = start_broker_with(dir.path(), &env);
    let (address, http) = (broker.address, broker.http);
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-s3");
        tiered_topic_with(&cluster, 300).await;
        until(
            "uploads to S3 and local deletions",
            Duration::from_secs(30),
            async || starts(&cluster, "tiered").await.0 > 0,
        )
        .await;
        for fault in [Fault::Down, Fault::Http500] {
            proxy.set(fault);
            // Producers go on; sealed segments pile up locally.
            let errors = metric(http, "remote_upload_errors_total");
            let end = list(&cluster, "tiered", StartAt::Latest).await as usize;
            produce_range(&cluster, "tiered", end..end + 500).await;
            until("a failed pass", Duration::from_secs(60), async || {
                metric(http, "remote_upload_errors_total") > errors
            })
            .await;
            let (stuck_start, pending, _) = starts(&cluster, "tiered").await;
            let errors = metric(http, "remote_upload_errors_total");
            until(
                "two more failed passes",
                Duration::from_secs(60),
                async || metric(http, "remote_upload_errors_total") >= errors + 2.0,
            )
            .await;
            let (start, still_pending, end) = starts(&cluster, "tiered").await;
            assert_eq!(
                start, stuck_start,
                "{fault:?}: nothing more deleted locally"
            );
            assert_eq!(still_pending, pending, "{fault:?}: nothing more uploaded");
            assert!(end > pending);
            assert!(
                metric(http, "remote_upload_lag_bytes") > 0.0,
                "{fault:?}: lag seen"
            );
            proxy.set(Fault::None);
            until("uploads to resume", Duration::from_secs(60), async || {
                let (start, pending, _) = starts(&cluster, "tiered").await;
                start > stuck_start && pending > still_pending
            })
            .await;
        }
        // A slow store: uploads go on, late; producers do not wait for
        // them; nothing not uploaded is deleted.
        proxy.set(Fault::Slow);
        let slow_since = Instant::now();
        let (start, pending, end) = starts(&cluster, "tiered").await;
        produce_range(&cluster, "tiered", end as usize..end as usize + 200).await;
        until("slow uploads", Duration::from_secs(60), async || {
            let (now_start, now_pending, _) = starts(&cluster, "tiered").await;
            assert!(
                now_start <= now_pending,
                "a local deletion before its upload"
            );
            now_pending > pending && now_start >= start
        })
        .await;
        // An upload is several store calls, each at least one delay late.
        assert!(slow_since.elapsed() >= 2 * support::fault_proxy::SLOW_DELAY);
        proxy.set(Fault::None);
        assert_eq!(
            list(&cluster, "tiered", StartAt::Latest).await,
            RECORDS as i64
        );
    });
    check_everything(&read_from_start(&broker.bootstrap(), "tiered", RECORDS));
    let fetched = metric(http, "remote_disk_cache_misses_total");
    assert!(
        fetched > 0.0,
        "chunks fetched from S3 ({fetched}) and kept on disk"
    );
    assert!(disk_cache_files(dir.path()).0 as f64 >= fetched);

    // After a restart (memory caches empty), what was read comes from the
    // disk cache (20 GiB by default in front of a bucket): nothing from S3
    // but the manifest.
    drop(broker);
    let broker = start_broker_with(dir.path(), &env);
    check_everything(&read_from_start(&broker.bootstrap(), "tiered", RECORDS));
    assert_eq!(metric(broker.http, "remote_disk_cache_misses_total"), 0.0);
    assert!(metric(broker.http, "remote_disk_cache_hits_total") > 0.0);
}

/// Creates the tiered topic and produces `count` records of [`value`].
async fn tiered_topic_with(cluster: &std::rc::Rc<Cluster>, count: usize) {
    let configs = [
        ("remote.storage.enable", "true"),
        ("segment.bytes", "65536"),
        ("local.retention.bytes", "200000"),
    ];
    cluster
        .create_topic("tiered", 1, 1, &configs)
        .await
        .unwrap();
    produce_range(cluster, "tiered", 0..count).await;
}

#[test]
fn a_damaged_remote_segment_is_refused_and_reported_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), FAST);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-damage");
        tiered_topic_with(&cluster, 600).await;
        until("local deletions", Duration::from_secs(30), async || {
            list(&cluster, "tiered", StartAt::Timestamp(-4)).await > 100
        })
        .await;
    });
    let (_, remote) = segment_files(dir.path());
    let first = &remote[0];
    let mut bytes = std::fs::read(first).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(first, &bytes).unwrap();
    let second: i64 = remote[1]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-damage");
        let config = ConsumerConfig::default();
        let mut damaged = Consumer::assign(
            cluster.clone(),
            "tiered",
            &[0],
            StartAt::Offset(0),
            config.clone(),
        )
        .await
        .unwrap();
        match damaged.poll().await {
            Err(ClientError::Broker(56)) => {}
            other => panic!(
                "expected KAFKA_STORAGE_ERROR, got {:?}",
                other.map(|r| r.len())
            ),
        }
        // The next segment is whole, and served.
        let mut whole = Consumer::assign(
            cluster.clone(),
            "tiered",
            &[0],
            StartAt::Offset(second),
            config,
        )
        .await
        .unwrap();
        let records = whole.poll().await.unwrap();
        assert_eq!(records.first().map(|r| r.offset), Some(second));
        assert!(records
            .iter()
            .all(|r| r.value.as_deref() == Some(&value(r.offset as usize)[..])));
    });
    assert!(metric(broker.http, "remote_read_errors_total") >= 1.0);
    assert!(!broker.logged("damaged").is_empty(), "the damage is logged");
}

#[test]
fn a_broker_killed_mid_upload_resumes_under_the_same_names() {
    let dir = tempfile::tempdir().unwrap();
    // One 64 KiB segment a second: a kill lands mid-upload.
    let slow = [
        ("BROKER_RETENTION_CHECK_INTERVAL_MS", "200"),
        ("BROKER_REMOTE_UPLOAD_BYTES_PER_SECOND", "65536"),
    ];
    let broker = start_broker_with(dir.path(), &slow);
    let (address, http) = (broker.address, broker.http);
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-kill");
        tiered_topic_with(&cluster, RECORDS).await;
        until("an upload", Duration::from_secs(30), async || {
            metric(http, "remote_uploaded_segments_total") >= 2.0
        })
        .await;
    });
    broker.kill9();
    let (_, before) = segment_files(dir.path());
    let broker = start_broker_with(dir.path(), FAST);
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "tiered-kill");
        until(
            "every sealed segment uploaded",
            Duration::from_secs(60),
            async || {
                let (local_start, pending, _) = starts(&cluster, "tiered").await;
                local_start > 0 && (RECORDS as i64 - pending) * 1000 < 2 * 65_536
            },
        )
        .await;
    });
    let (_, after) = segment_files(dir.path());
    assert!(
        after.len() > before.len(),
        "{} objects, then {}",
        before.len(),
        after.len()
    );
    // Each segment's objects once, under one name (its base and CRC).
    let bases: Vec<String> = after
        .iter()
        .map(|p| {
            p.file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .split('-')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut unique = bases.clone();
    unique.dedup();
    assert_eq!(
        unique, bases,
        "no segment uploaded twice under different names"
    );
    assert!(
        before.iter().all(|p| after.contains(p)),
        "what was uploaded before the kill stays"
    );
    check_everything(&read_from_start(&broker.bootstrap(), "tiered", RECORDS));
}
