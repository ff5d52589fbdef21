//! Client quotas: a producer over its byte-rate quota is slowed to it
//! (answered with a throttle time and muted for it) while another
//! producer on the same broker carries on at its usual latency; a client
//! over its request-time quota (request_percentage) is slowed while
//! another's requests are answered as fast as before; quotas are set,
//! listed and removed with the CLI (AlterClientQuotas,
//! DescribeClientQuotas) and survive a restart.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
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
use support::{cli, start_broker_with};

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

/// One Metadata request for every topic (v9) as `client_id`, answered.
fn metadata_roundtrip(stream: &mut TcpStream, client_id: &str, correlation: i32) {
    use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestHeader};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
    let version = 9;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut body = bytes::BytesMut::new();
    header
        .encode(&mut body, MetadataRequest::header_version(version))
        .unwrap();
    MetadataRequest::default()
        .with_topics(None)
        .encode(&mut body, version)
        .unwrap();
    stream
        .write_all(&(body.len() as u32).to_be_bytes())
        .unwrap();
    stream.write_all(&body).unwrap();
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).unwrap();
    let mut answer = vec![0u8; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(answer[..4], correlation.to_be_bytes(), "answered in order");
}

/// Metadata requests as `client_id`, one at a time for `length`: how
/// many were answered, and the median time each took.
fn metadata_loop(address: SocketAddr, client_id: &str, length: Duration) -> (u32, Duration) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut latencies = Vec::new();
    while started.elapsed() < length {
        let sent = Instant::now();
        metadata_roundtrip(&mut stream, client_id, latencies.len() as i32);
        latencies.push(sent.elapsed());
    }
    let answered = latencies.len() as u32;
    latencies.sort();
    (answered, latencies[latencies.len() / 2])
}

#[test]
fn a_client_over_its_request_time_quota_is_slowed_and_the_others_are_not() {
    let dir = tempfile::tempdir().unwrap();
    // One shard: the quota is the broker's, not split between shards.
    let broker = start_broker_with(&dir.path().join("data"), &[("BROKER_SHARDS", "1")]);
    let bootstrap = broker.bootstrap();
    // Metadata for 64 partitions: a request that takes the broker some
    // real time to answer.
    cli(
        &bootstrap,
        &["topic", "create", "wide", "--partitions", "64"],
    );
    let two_seconds = Duration::from_secs(2);
    let (free, free_median) = metadata_loop(broker.address, "dashboard", two_seconds);

    // 1% of the shard: 10 ms of handling per second.
    cli(
        &bootstrap,
        &[
            "quota",
            "set",
            "--client-id",
            "dashboard",
            "--request-percentage",
            "1",
        ],
    );
    let listed = cli(&bootstrap, &["quota", "list"]);
    assert!(listed.contains("request_percentage=1"), "{listed}");
    thread::sleep(Duration::from_millis(300));
    let address = broker.address;
    let busy = thread::spawn(move || metadata_loop(address, "dashboard", Duration::from_secs(4)));
    thread::sleep(Duration::from_millis(500));
    let (_, calm_median) = metadata_loop(broker.address, "calm", two_seconds);
    let (throttled, _) = busy.join().unwrap();
    // Per second: at most a fifth of the unthrottled rate.
    let (free_rate, throttled_rate) = (free as f64 / 2.0, throttled as f64 / 4.0);
    println!(
        "metadata requests/s: {free_rate} alone, {throttled_rate} under 1%; median latency \
         {free_median:?} alone, {calm_median:?} for another client beside the throttled one"
    );
    assert!(
        throttled_rate * 5.0 < free_rate,
        "{throttled_rate}/s under a 1% quota, {free_rate}/s without"
    );
    assert!(
        calm_median < free_median * 4 + Duration::from_millis(5),
        "another client's median {calm_median:?} beside the throttled one ({free_median:?} alone)"
    );
    assert!(support::cluster::counter(broker.http, "throttled_requests_total") > 0);
}

#[test]
fn followers_are_never_held_back_by_a_request_time_quota() {
    // Two brokers of two shards; every client id without its own quota
    // (the followers' fetchers among them) gets 1% of a shard, split
    // between the shards. A producer with a quota of its own writes 64 MiB
    // with acks=all: the follower replicates it all (its fetches take more
    // than that share of the leader's shard) and nothing is throttled.
    let dir = tempfile::tempdir().unwrap();
    let env = [("BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")];
    let mut cluster = support::cluster::Cluster::new(dir.path(), 2, &env);
    cluster.shards = 2;
    cluster.start();
    let bootstrap = cluster.node(1).kafka.to_string();
    let create = [
        "topic",
        "create",
        "mirrored",
        "--partitions",
        "1",
        "--replication-factor",
        "2",
    ];
    cli(&bootstrap, &create);
    let default = [
        "quota",
        "set",
        "--client-default",
        "--request-percentage",
        "1",
    ];
    cli(&bootstrap, &default);
    let own = [
        "quota",
        "set",
        "--client-id",
        "bulk",
        "--request-percentage",
        "10000",
    ];
    cli(&bootstrap, &own);
    let (leader, _) = support::security::leader_and_isr(cluster.node(1).http, "mirrored")
        .expect("the topic's leader");
    let http = cluster.node(leader).http;
    thread::sleep(Duration::from_millis(300));

    let acks = Acks::default();
    let producer: BaseProducer<Acks> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("client.id", "bulk")
        .set("acks", "all")
        .set("linger.ms", "5")
        .create_with_context(acks.clone())
        .unwrap();
    let value = vec![b'r'; 1024];
    let messages = 64 * 1024;
    let started = Instant::now();
    for _ in 0..messages {
        let mut record = BaseRecord::<(), [u8]>::to("mirrored").payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(5));
                }
            }
        }
    }
    while acks.0.load(Ordering::SeqCst) < messages {
        producer.poll(Duration::from_millis(10));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "acks=all: {} of {messages} acknowledged",
            acks.0.load(Ordering::SeqCst)
        );
    }
    assert_eq!(
        support::security::leader_and_isr(http, "mirrored"),
        Some((leader, 2)),
        "the follower left the ISR"
    );
    let throttled = support::cluster::counter(http, "throttled_requests_total");
    println!(
        "64 MiB acknowledged in {:?}, {throttled} requests throttled",
        started.elapsed()
    );
    assert_eq!(
        throttled, 0,
        "a follower (or the producer with its own quota) was throttled"
    );
}
