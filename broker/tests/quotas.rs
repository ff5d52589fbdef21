//! Client quotas: a producer over its byte-rate quota is slowed to it
//! (answered with a throttle time and muted for it) while another
//! producer on the same broker carries on at its usual latency; quotas
//! are set, listed and removed with the CLI (AlterClientQuotas,
//! DescribeClientQuotas) and survive a restart.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{
    BaseProducer, BaseRecord, DefaultProducerContext, DeliveryResult, Producer, ProducerContext,
    ThreadedProducer,
};
use rdkafka::ClientContext;
use support::start_broker_with;

/// Counts acknowledged messages (and panics on a failed one).
#[derive(Clone, Default)]
struct Acks(Arc<AtomicUsize>);

impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        assert!(result.is_ok(), "a quiet message failed");
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// 512 KiB/s for the noisy client.
const QUOTA: u64 = 512 * 1024;

fn cli(bootstrap: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", bootstrap])
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn a_producer_over_its_quota_is_slowed_to_it_and_the_others_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // One shard: the quota is the broker's, not split between shards.
    let env = [
        ("BROKER_SHARDS", "1"),
        ("BROKER_METADATA_SNAPSHOT_EVERY_ENTRIES", "3"),
    ];
    let mut broker = start_broker_with(&data, &env);
    let bootstrap = broker.bootstrap();
    cli(
        &bootstrap,
        &["topic", "create", "loud", "--partitions", "1"],
    );
    cli(
        &bootstrap,
        &["topic", "create", "calm", "--partitions", "1"],
    );
    let rate = QUOTA.to_string();
    cli(
        &bootstrap,
        &[
            "quota",
            "set",
            "--client-id",
            "noisy",
            "--producer-byte-rate",
            &rate,
        ],
    );
    let listed = cli(&bootstrap, &["quota", "list"]);
    assert!(
        listed.contains("client-id=noisy") && listed.contains("producer_byte_rate=524288"),
        "{listed}"
    );

    // The noisy producer sends 3 MiB as fast as it can: at 512 KiB/s (and
    // one second's worth at once) that takes 5 s or more, where unthrottled
    // it takes well under one.
    let noisy_bootstrap = bootstrap.clone();
    let noisy = thread::spawn(move || {
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &noisy_bootstrap)
            .set("client.id", "noisy")
            .set("linger.ms", "5")
            .set("batch.size", "65536")
            .create()
            .unwrap();
        let value = vec![b'x'; 1024];
        let started = Instant::now();
        for _ in 0..3 * 1024 {
            let mut record = BaseRecord::<(), [u8]>::to("loud").payload(&value[..]);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        record = back;
                        thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
        producer.flush(Duration::from_secs(60)).unwrap();
        started.elapsed()
    });

    // Meanwhile a quiet producer (another client id, no quota) sends one
    // message at a time, each acknowledged before the next.
    thread::sleep(Duration::from_millis(500));
    let acks = Acks::default();
    let quiet: BaseProducer<Acks> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("client.id", "quiet")
        .set("linger.ms", "0")
        .create_with_context(acks.clone())
        .unwrap();
    let mut latencies = Vec::new();
    for i in 0..30 {
        let started = Instant::now();
        let payload = format!("calm-{i}");
        quiet
            .send(BaseRecord::<(), _>::to("calm").payload(&payload))
            .unwrap();
        while acks.0.load(Ordering::SeqCst) <= i {
            quiet.poll(Duration::from_millis(1));
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "not acknowledged"
            );
        }
        latencies.push(started.elapsed());
        thread::sleep(Duration::from_millis(50));
    }
    let noisy_took = noisy.join().unwrap();
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    assert!(
        noisy_took >= Duration::from_secs(4),
        "3 MiB at a 512 KiB/s quota took only {noisy_took:?}"
    );
    assert!(
        median < Duration::from_millis(500),
        "the quiet producer waited {median:?} (median) beside the throttled one: {latencies:?}"
    );
    let throttled = support::cluster::counter(broker.http, "throttled_requests_total");
    assert!(throttled > 0, "no request was throttled");

    // A consumer over its fetch quota is slowed too: 3 MiB at 1 MiB/s
    // (a fetch answers up to 1 MiB per partition) takes two seconds or
    // more, where unthrottled it takes a fraction of one.
    let mib = (1024 * 1024).to_string();
    cli(
        &bootstrap,
        &[
            "quota",
            "set",
            "--client-id",
            "reader",
            "--consumer-byte-rate",
            &mib,
        ],
    );
    let started = Instant::now();
    let read = support::security::kcat(
        &[
            "-C",
            "-b",
            &bootstrap,
            "-t",
            "loud",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-X",
            "client.id=reader",
        ],
        None,
    );
    let reading_took = started.elapsed();
    assert!(read.status.success(), "{read:?}");
    assert_eq!(
        read.stdout.len(),
        3 * 1024 * 1025,
        "every message, each with its newline"
    );
    assert!(
        reading_took >= Duration::from_millis(1500),
        "3 MiB at a 1 MiB/s fetch quota took only {reading_took:?}"
    );

    // The quota survives a restart, and goes when removed.
    broker.stop();
    let broker = start_broker_with(&data, &env);
    let bootstrap = broker.bootstrap();
    assert!(cli(&bootstrap, &["quota", "list"]).contains("client-id=noisy"));
    cli(&bootstrap, &["quota", "remove", "--client-id", "noisy"]);
    assert!(!cli(&bootstrap, &["quota", "list"]).contains("noisy"));
}
