//! A full disk, as an operator meets it: the broker refuses writes it
//! cannot make durable, keeps every message it acknowledged, and says so.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use support::http;

/// A small ext4 file system on a loop device, unmounted when dropped.
struct SmallFs {
    mount: std::path::PathBuf,
}

impl SmallFs {
    /// Needs root (mount); the test command runs as root here and in CI.
    fn new(root: &Path, megabytes: u64) -> SmallFs {
        let image = root.join("fs.img");
        let mount = root.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        let file = std::fs::File::create(&image).unwrap();
        file.set_len(megabytes << 20).unwrap();
        let run = |program: &str, args: &[&std::ffi::OsStr]| {
            let out = Command::new(program).args(args).output().unwrap();
            assert!(out.status.success(), "{program} {args:?}: {out:?}");
        };
        run("mkfs.ext4", &["-q".as_ref(), image.as_os_str()]);
        run(
            "mount",
            &[
                "-o".as_ref(),
                "loop".as_ref(),
                image.as_os_str(),
                mount.as_os_str(),
            ],
        );
        SmallFs { mount }
    }

    fn available_bytes(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.mount)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

/// Collects librdkafka's delivery reports: acknowledged values, and the
/// error codes of failed ones.
#[derive(Default)]
struct Deliveries {
    acked: std::sync::Mutex<Vec<String>>,
    failed: std::sync::Mutex<Vec<rdkafka::types::RDKafkaErrorCode>>,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        use rdkafka::Message;
        match result {
            Ok(message) => {
                let value = String::from_utf8_lossy(message.payload().unwrap_or_default());
                self.acked.lock().unwrap().push(value.to_string());
            }
            Err((error, _)) => {
                if let Some(code) = error.rdkafka_error_code() {
                    self.failed.lock().unwrap().push(code);
                }
            }
        }
    }
}

fn consume_all(bootstrap: &str, topic: &str) -> std::collections::BTreeSet<String> {
    let out = Command::new("timeout")
        .args([
            "60",
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Sends one record through a producer with librdkafka's defaults
/// (retries on) and acks=all, and waits for its acknowledgement.
fn produce_one(bootstrap: &str, topic: &str, payload: &str, what: &str) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .create()
        .unwrap();
    producer
        .send(BaseRecord::<(), _>::to(topic).payload(payload))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(20)).expect(what);
}

#[test]
fn a_full_disk_refuses_writes_keeps_every_acknowledged_message_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let fs = SmallFs::new(root.path(), 96);
    let data = fs.mount.join("data");
    let broker = support::start_broker(&data);
    let bootstrap = broker.bootstrap();
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "create", "filling", "--partitions", "1"])
        .args(["--config", "segment.bytes=1048576", "--brokers", &bootstrap])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The topic is served moments after its creation answers (every shard
    // sees it, its leadership is taken up): one record through a producer
    // that retries, before this test's producer, which does not.
    produce_one(&bootstrap, "filling", "probe", "the new topic served");
    // Leave about 3 MiB free.
    let filler = fs.mount.join("filler");
    let keep = 3 << 20;
    let fill = fs.available_bytes().saturating_sub(keep);
    let status = Command::new("fallocate")
        .args(["-l", &fill.to_string()])
        .arg(&filler)
        .status()
        .unwrap();
    assert!(status.success());
    let deliveries = std::sync::Arc::new(Deliveries::default());
    let producer: rdkafka::producer::BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("retries", "0")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "10000")
        .create_with_context(std::sync::Arc::try_unwrap(deliveries).ok().unwrap())
        .unwrap();
    let value = |i: u64| format!("value-{i:07}-{}", "y".repeat(300));
    let mut sent = 0u64;
    while producer.context().failed.lock().unwrap().is_empty() && sent < 60_000 {
        let v = value(sent);
        if producer
            .send(BaseRecord::<(), _>::to("filling").payload(&v))
            .is_ok()
        {
            sent += 1;
        }
        producer.poll(Duration::ZERO);
    }
    let _ = producer.flush(Duration::from_secs(15));
    let acked: Vec<String> = producer.context().acked.lock().unwrap().clone();
    let failed = producer.context().failed.lock().unwrap().clone();
    println!(
        "full disk: {sent} sent, {} acknowledged, {} refused",
        acked.len(),
        failed.len()
    );
    let kinds: std::collections::BTreeSet<String> =
        failed.iter().map(|code| format!("{code:?}")).collect();
    assert!(
        acked.len() > 100,
        "some were acknowledged before the disk filled (refused with {kinds:?})"
    );
    assert!(
        failed.contains(&rdkafka::types::RDKafkaErrorCode::KafkaStorageError),
        "producers are told KAFKA_STORAGE_ERROR: {failed:?}"
    );
    // Consumers still read everything acknowledged.
    let read = consume_all(&bootstrap, "filling");
    assert!(
        acked.iter().all(|v| read.contains(v)),
        "an acknowledged message is missing"
    );
    // /health and /metrics say so.
    let (status, body) = http(broker.http, "GET", "/health", "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("partition logs failed"), "{body}");
    let metrics = http(broker.http, "GET", "/metrics", "").1;
    let gauge = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
    };
    assert!(gauge("log_failed_partitions") >= 1.0);
    assert!(
        gauge("broker_disk_used_pct") > 95.0,
        "{}",
        gauge("broker_disk_used_pct")
    );
    // Space freed, broker restarted: everything acknowledged is there, and
    // it takes writes again.
    std::fs::remove_file(&filler).unwrap();
    drop(producer);
    let _ = broker.terminate();
    let broker = support::start_broker(&data);
    let read = consume_all(&broker.bootstrap(), "filling");
    assert!(
        acked.iter().all(|v| read.contains(v)),
        "lost after the restart"
    );
    produce_one(&broker.bootstrap(), "filling", "after", "writes again");
    assert_eq!(http(broker.http, "GET", "/health", "").0, 200);
    drop(broker);
    drop(fs);
}
