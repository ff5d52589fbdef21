//! A connection whose requests name one other shard's partitions moves to
//! that shard between two requests: requests the client had already sent
//! (pipelined) are answered there, in order, and nothing is lost,
//! duplicated or reordered; a TLS session and a SASL login move with
//! their connection; the broker counts the moves and stops cleanly with
//! moved connections open.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use storage::batch::{build, RecordSpec};
use storage::TimestampMs;
use support::produce_wire::{produce_frame_with_acks, read_produce_answer};
use support::security::{server_files, start_tls_broker, tls_connect, Authority};
use support::{cli, on_glommio, start_broker, start_broker_with};

const TOPIC: &str = "moves";
const VERSION: i16 = 9;
/// Requests written at once, before any answer is read.
const PIPELINED: usize = 12;

fn value(partition: i32, seq: usize) -> String {
    format!("{partition}:{seq:06}")
}

/// A size-prefixed acks=1 Produce request of one record for
/// `partition`, its value padded to `padded_to` bytes.
fn produce_frame(partition: i32, seq: usize, correlation_id: i32, padded_to: usize) -> Vec<u8> {
    let mut value = value(partition, seq).into_bytes();
    value.resize(value.len().max(padded_to), b'.');
    let records = build(
        TimestampMs(1_000),
        &[RecordSpec {
            timestamp_delta: 0,
            key: None,
            value: Some(value),
        }],
    )
    .freeze();
    produce_frame_with_acks(
        TOPIC,
        (VERSION, VERSION),
        1,
        correlation_id,
        vec![(partition, records)],
    )
}

/// One answer to a request for `partition`: (correlation id, error code,
/// base offset).
fn read_answer(stream: &mut impl Read, partition: i32) -> (i32, i16, i64) {
    let (id, partitions) = read_produce_answer(stream, VERSION);
    let (error, offset) = partitions[&partition];
    (id, error, offset)
}

/// Writes PIPELINED requests for `partition` (values of `padded_to`
/// bytes) in one write, then reads their answers: each in request order,
/// each at the next offset.
fn pipelined_run(
    stream: &mut (impl Read + Write),
    (partition, padded_to): (i32, usize),
    next: &mut [usize; 2],
    correlation: &mut i32,
) {
    let first = *correlation;
    let start = next[partition as usize];
    let frames: Vec<u8> = (0..PIPELINED)
        .flat_map(|i| produce_frame(partition, start + i, first + i as i32, padded_to))
        .collect();
    stream.write_all(&frames).unwrap();
    for i in 0..PIPELINED {
        let (id, error, offset) = read_answer(stream, partition);
        assert_eq!(id, first + i as i32, "answers in request order");
        assert_eq!(error, 0, "request {id} refused");
        assert_eq!(
            offset,
            (start + i) as i64,
            "partition {partition}: offsets in order"
        );
    }
    next[partition as usize] += PIPELINED;
    *correlation += PIPELINED as i32;
}

/// Each partition read from its start by its own librdkafka consumer (so
/// each fetching connection names one shard's partition).
fn consume(
    bootstrap: &str,
    settings: &[(&str, &str)],
    partition: i32,
    expected: usize,
) -> Vec<(i64, String)> {
    let consumer: BaseConsumer = config(bootstrap, settings)
        .set("group.id", format!("moves-{partition}"))
        .set("enable.auto.commit", "false")
        // Small fetches: many of them, so a move happens mid-read.
        .set("message.max.bytes", "4096")
        .set("fetch.max.bytes", "4096")
        .set("max.partition.fetch.bytes", "4096")
        .create()
        .expect("an rdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, partition, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut read = Vec::new();
    let started = Instant::now();
    while read.len() < expected && started.elapsed() < Duration::from_secs(60) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let text = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
                read.push((m.offset(), text));
            }
            Some(Err(e)) => panic!("consuming partition {partition}: {e}"),
            None => {}
        }
    }
    read
}

fn config(bootstrap: &str, settings: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in settings {
        config.set(*key, *value);
    }
    config
}

/// librdkafka's idempotent producer (5 requests in flight per connection)
/// writes 2,000 messages to partition 0, then 2,000 to partition 1; a
/// consumer per partition then reads each partition whole: each message
/// once, in order, at its offset (`next`: what each partition holds).
fn roundtrip_with_librdkafka(bootstrap: &str, settings: &[(&str, &str)], next: &mut [usize; 2]) {
    let producer: BaseProducer = config(bootstrap, settings)
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .set("batch.num.messages", "20")
        .create()
        .expect("an rdkafka producer");
    const PER_PARTITION: usize = 2_000;
    for partition in [0, 1] {
        for _ in 0..PER_PARTITION {
            let seq = next[partition as usize];
            let payload = value(partition, seq);
            let mut record = BaseRecord::<(), str>::to(TOPIC)
                .partition(partition)
                .payload(&payload);
            while let Err((_, back)) = producer.send(record) {
                record = back;
                producer.poll(Duration::from_millis(5));
            }
            next[partition as usize] += 1;
        }
        producer
            .flush(Duration::from_secs(60))
            .expect("every message acknowledged");
    }
    for partition in [0, 1] {
        let expected = next[partition as usize];
        let read = consume(bootstrap, settings, partition, expected);
        let wanted: Vec<(i64, String)> = (0..expected)
            .map(|seq| (seq as i64, value(partition, seq)))
            .collect();
        assert_eq!(
            read.len(),
            expected,
            "partition {partition}: every message read"
        );
        assert!(
            read == wanted,
            "partition {partition}: each message once, in order, at its offset"
        );
    }
}

fn moved_so_far(http_address: SocketAddr) -> u64 {
    support::cluster::counter(http_address, "connections_moved_total")
}

#[test]
fn a_connection_moves_to_its_partitions_shard_answering_pipelined_requests_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "moves-admin");
        cluster.create_topic(TOPIC, 2, 1, &[]).await.unwrap();
    });
    assert_eq!(moved_so_far(broker.http), 0);

    // One connection: runs of pipelined requests for partition 0, then 1,
    // then 0, then 1. The two partitions are on the two shards (one each,
    // the least loaded first), so whichever shard accepted the connection,
    // at least two runs name the other shard's partition alone: the
    // connection moves during them (after 3 requests, then 6, then 12,
    // once none is in flight) with the rest of the run, if any, already
    // read into its buffer.
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut next = [0usize; 2];
    let mut correlation = 1;
    for partition in [0, 1, 0, 1] {
        pipelined_run(&mut stream, (partition, 0), &mut next, &mut correlation);
    }
    let moved = moved_so_far(broker.http);
    assert!(
        moved >= 2,
        "the connection moved {moved} times; expected at least 2"
    );

    // librdkafka's idempotent producer (5 requests in flight per
    // connection), one partition after the other, then its consumers.
    roundtrip_with_librdkafka(&broker.bootstrap(), &[], &mut next);
    let moved_in_all = moved_so_far(broker.http);
    println!("connections moved: {moved} by the raw client, {moved_in_all} in all");
    assert!(
        moved_in_all > moved,
        "librdkafka's connections moved too ({moved_in_all} in all)"
    );

    // A stop with moved connections still open drains and exits cleanly.
    let _still_open = stream;
    let status = broker.stop();
    assert!(status.success(), "the broker stopped with {status:?}");
}

#[test]
fn a_tls_connection_moves_with_its_session_answering_pipelined_requests_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("moves-ca");
    let files = server_files(dir.path(), &authority);
    let mut broker = start_tls_broker(
        &dir.path().join("data"),
        &files,
        &[("BROKER_DEFAULT_PARTITIONS", "2")],
    );
    let ca = files.ca.to_str().unwrap();
    let tls = [("security.protocol", "ssl"), ("ssl.ca.location", ca)];
    // librdkafka makes the topic (2 partitions, one per shard) and moves
    // its producer's and consumers' connections while writing and reading.
    let mut next = [0usize; 2];
    roundtrip_with_librdkafka(&broker.bootstrap(), &tls, &mut next);
    let moved_by_librdkafka = moved_so_far(broker.http);
    assert!(moved_by_librdkafka >= 1, "no TLS connection moved");

    // One raw TLS connection: runs of pipelined requests of 12 KiB values
    // (a run of 12 is 9 TLS records, the broker reads 64 KiB at a time),
    // so that when it moves the rest of the run is in its frame buffer,
    // in its TLS session (read, not yet decrypted or handed out) or still
    // in the socket.
    let mut stream = tls_connect(broker.address, &authority.pem(), None);
    let mut correlation = 1;
    for partition in [0, 1, 0, 1] {
        pipelined_run(
            &mut stream,
            (partition, 12 * 1024),
            &mut next,
            &mut correlation,
        );
    }
    let moved = moved_so_far(broker.http) - moved_by_librdkafka;
    assert!(
        moved >= 2,
        "the TLS connection moved {moved} times; expected at least 2"
    );
    let lost = broker.logged("could not be put back together");
    assert!(lost.is_empty(), "a moved TLS stream was lost: {lost:?}");
    assert_eq!(
        support::cluster::counter(broker.http, "tls_handshake_failures_total"),
        0
    );

    // A stop with a moved TLS connection open drains and exits cleanly.
    let _still_open = stream;
    let status = broker.stop();
    assert!(status.success(), "the broker stopped with {status:?}");
}

#[test]
fn a_sasl_login_moves_with_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[
            ("BROKER_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT"),
            ("BROKER_SASL_BROKER_USER", "admin:admin-secret-1"),
            ("BROKER_DEFAULT_PARTITIONS", "2"),
        ],
    );
    let login = [
        ("security.protocol", "sasl_plaintext"),
        ("sasl.mechanisms", "SCRAM-SHA-512"),
        ("sasl.username", "admin"),
        ("sasl.password", "admin-secret-1"),
    ];
    // The topic is made by the producer's first Metadata (2 partitions,
    // one per shard): whichever shard took the producer's connection, one
    // partition is the other's, and the connection moves while writing it
    // (and a consumer's, reading it), logged in.
    let mut next = [0usize; 2];
    roundtrip_with_librdkafka(&broker.bootstrap(), &login, &mut next);
    let moved = moved_so_far(broker.http);
    assert!(moved >= 1, "no SASL connection moved");
    let refused = broker.logged("not authenticated");
    assert!(
        refused.is_empty(),
        "a moved connection lost its login: {refused:?}"
    );
}

#[test]
fn no_connection_moves_while_a_client_quota_is_set() {
    // Quotas are metered per shard, as a share: a client's connections
    // gathered on one shard would get one share of its quota.
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "moves-admin");
        cluster.create_topic(TOPIC, 2, 1, &[]).await.unwrap();
    });
    let quota = [
        "quota",
        "set",
        "--client-id",
        "someone-else",
        "--producer-byte-rate",
        "1048576",
    ];
    cli(&broker.bootstrap(), &quota);
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (mut next, mut correlation) = ([0usize; 2], 1);
    for partition in [0, 1, 0, 1] {
        pipelined_run(&mut stream, (partition, 0), &mut next, &mut correlation);
    }
    assert_eq!(moved_so_far(broker.http), 0, "a connection moved");
}
