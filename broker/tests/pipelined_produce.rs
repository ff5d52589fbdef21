//! A producer's requests pipelined on one connection overlap in the
//! broker: the next is appended while the one before waits for its
//! flush, so one flush covers several requests, and still every answer
//! leaves in request order with its records after the earlier requests'
//! on every partition (the partitions on both shards). An idempotent
//! batch refused for a sequence gap refuses the ones behind it, and none
//! of the ones before it is refused: the sequence checks see the
//! requests in order. A request that comes while the ones before wait
//! is read and appended at once.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use storage::batch::{build, stamp_producer, RecordSpec};
use storage::TimestampMs;
use support::security::{server_files, start_tls_broker, tls_connect, Authority};
use support::{cli, produce_wire, start_broker_with};

const TOPIC: &str = "pipelined";
const PARTITIONS: i32 = 2;
const VERSION: i16 = 9;
/// Requests written at once, before any answer is read.
const PIPELINED: usize = 8;
/// How long each acks=all answer waits before its flush: one request at
/// a time would make each its own flush.
const FLUSH_DELAY_MS: &str = "300";

/// One request's batch for a partition: one record, stamped as producer
/// 7000's batch of sequence `sequence` when given.
fn batch(partition: i32, request: usize, sequence: Option<i32>) -> Bytes {
    let value = format!("{partition}:{request}").into_bytes();
    let mut batch = build(
        TimestampMs(1_000),
        &[RecordSpec {
            timestamp_delta: 0,
            key: None,
            value: Some(value),
        }],
    );
    if let Some(sequence) = sequence {
        stamp_producer(&mut batch, 7000 + partition as i64, 0, sequence);
    }
    batch.freeze()
}

/// A size-prefixed acks=all Produce request naming every partition.
fn produce_frame(request: usize, sequence: Option<i32>) -> Vec<u8> {
    produce_frame_of(request, sequence, VERSION)
}

/// [`produce_frame`] of Produce `version`.
fn produce_frame_of(request: usize, sequence: Option<i32>, version: i16) -> Vec<u8> {
    let record_sets = (0..PARTITIONS)
        .map(|p| (p, batch(p, request, sequence)))
        .collect();
    produce_wire::produce_frame_claiming(TOPIC, (VERSION, version), request as i32, record_sets)
}

/// One answer: its correlation id, and per partition (error, base offset).
fn read_answer(stream: &mut impl Read) -> (i32, BTreeMap<i32, (i16, i64)>) {
    produce_wire::read_produce_answer(stream, VERSION)
}

/// Writes one request per `sequences` entry in one write, then reads
/// their answers, checking they come in request order.
fn pipelined(stream: &mut TcpStream, sequences: &[Option<i32>]) -> Vec<BTreeMap<i32, (i16, i64)>> {
    let frames: Vec<u8> = sequences
        .iter()
        .enumerate()
        .flat_map(|(request, &sequence)| produce_frame(request, sequence))
        .collect();
    stream.write_all(&frames).unwrap();
    (0..sequences.len())
        .map(|request| {
            let (id, partitions) = read_answer(stream);
            assert_eq!(id, request as i32, "answers in request order");
            partitions
        })
        .collect()
}

fn broker_and_topic() -> (tempfile::TempDir, support::Broker, TcpStream) {
    broker_and_topic_delaying(FLUSH_DELAY_MS)
}

/// [`broker_and_topic`] whose acks=all answers wait `delay_ms` first.
fn broker_and_topic_delaying(delay_ms: &str) -> (tempfile::TempDir, support::Broker, TcpStream) {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[("BROKER_TEST_FLUSH_DELAY_MS", delay_ms)]);
    let bootstrap = broker.address.to_string();
    let partitions = PARTITIONS.to_string();
    cli(
        &bootstrap,
        &["topic", "create", TOPIC, "--partitions", &partitions],
    );
    let stream = TcpStream::connect(broker.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    (dir, broker, stream)
}

#[test]
fn pipelined_requests_share_flushes_and_keep_their_order() {
    let (_dir, broker, mut stream) = broker_and_topic();
    let flushes = || support::cluster::counter(broker.http, "log_flushes_total");
    let before = flushes();
    let answers = pipelined(&mut stream, &[None; PIPELINED]);
    for (request, partitions) in answers.iter().enumerate() {
        for p in 0..PARTITIONS {
            assert_eq!(
                partitions[&p],
                (0, request as i64),
                "request {request}, partition {p}: appended after the requests before it"
            );
        }
    }
    // One request at a time flushes each partition once per request, each
    // after the delay; overlapping, the delays run together and a flush
    // covers what was appended meanwhile.
    let flushed = flushes() - before;
    let one_at_a_time = PIPELINED as u64 * PARTITIONS as u64;
    assert!(
        flushed <= one_at_a_time / 2,
        "{flushed} flushes for {PIPELINED} pipelined requests on {PARTITIONS} partitions: one at a time would be {one_at_a_time}"
    );
}

/// How long each answer waits in the tests of reading on: ample time to
/// see what the broker reads meanwhile.
const LONG_FLUSH_DELAY_MS: &str = "3000";

#[test]
fn a_request_sent_while_the_one_before_waits_is_read_and_appended_at_once() {
    let (_dir, broker, mut stream) = broker_and_topic_delaying(LONG_FLUSH_DELAY_MS);
    reads_the_second_request_while_the_first_waits(broker.http, &mut stream);
}

#[test]
fn over_tls_too_a_request_sent_while_the_one_before_waits_is_read_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("pipelined-ca");
    let files = server_files(dir.path(), &authority);
    let delay = [("BROKER_TEST_FLUSH_DELAY_MS", LONG_FLUSH_DELAY_MS)];
    let broker = start_tls_broker(&dir.path().join("data"), &files, &delay);
    let partitions = PARTITIONS.to_string();
    let ca = files.ca.to_str().unwrap();
    cli(
        &broker.address.to_string(),
        &[
            "topic",
            "create",
            TOPIC,
            "--partitions",
            &partitions,
            "--ssl-ca-location",
            ca,
        ],
    );
    let mut stream = tls_connect(broker.address, &authority.pem(), None);
    stream
        .sock
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    reads_the_second_request_while_the_first_waits(broker.http, &mut stream);
}

/// Writes a request, and once it is appended (its answer waiting out the
/// long flush delay, the socket empty), a second one: the second must be
/// appended before the first is answered. The broker used to stop
/// reading until the oldest answer left, so a producer's next request
/// waited in the socket for a whole flush.
fn reads_the_second_request_while_the_first_waits(
    http: std::net::SocketAddr,
    stream: &mut (impl Read + Write),
) {
    let appended = || support::cluster::counter(http, "log_appended_batches_total");
    let before = appended();
    let wait_for = |batches: u64, what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_millis(1500);
        while appended() < before + batches {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not appended within 1.5 s while the answer before it waits 3 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    stream.write_all(&produce_frame(0, None)).unwrap();
    stream.flush().unwrap();
    wait_for(PARTITIONS as u64, "the first request");
    stream.write_all(&produce_frame(1, None)).unwrap();
    stream.flush().unwrap();
    wait_for(2 * PARTITIONS as u64, "the second request");
    for request in 0..2 {
        let (id, partitions) = read_answer(stream);
        assert_eq!(id, request, "answers in request order");
        for p in 0..PARTITIONS {
            assert_eq!(partitions[&p], (0, request as i64), "partition {p}");
        }
    }
}

#[test]
fn more_requests_than_the_pipeline_holds_wait_for_room_and_keep_their_order() {
    // 40 acks=all requests in one write, more than the 32 a connection
    // keeps in flight: the later ones wait for the first answers.
    let (_dir, _broker, mut stream) = broker_and_topic();
    let answers = pipelined(&mut stream, &[None; 40]);
    for (request, partitions) in answers.iter().enumerate() {
        for p in 0..PARTITIONS {
            assert_eq!(
                partitions[&p],
                (0, request as i64),
                "request {request}, partition {p}"
            );
        }
    }
}

#[test]
fn a_sequence_gap_refuses_the_batches_behind_it_and_none_before() {
    let (_dir, _broker, mut stream) = broker_and_topic();
    // Sequences 0, 1, 2, then 4 (3 is missing) and on.
    let sequences: Vec<Option<i32>> = [0, 1, 2, 4, 5, 6, 7, 8].map(Some).to_vec();
    let answers = pipelined(&mut stream, &sequences);
    let out_of_order = ResponseError::OutOfOrderSequenceNumber.code();
    for (request, partitions) in answers.iter().enumerate() {
        for p in 0..PARTITIONS {
            let (error, offset) = partitions[&p];
            if request < 3 {
                assert_eq!(
                    (error, offset),
                    (0, request as i64),
                    "request {request}, partition {p}"
                );
            } else {
                assert_eq!(error, out_of_order, "request {request}, partition {p}");
            }
        }
    }
}

/// Whether the broker closed the connection (not a read timing out).
fn closed(stream: &mut TcpStream) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => matches!(e.kind(), ConnectionReset | ConnectionAborted),
    }
}

#[test]
fn a_client_closing_its_side_still_gets_the_answers_owed() {
    let (_dir, _broker, mut stream) = broker_and_topic();
    let bytes: Vec<u8> = (0..3).flat_map(|r| produce_frame(r, None)).collect();
    stream.write_all(&bytes).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    for request in 0..3 {
        let (id, partitions) = read_answer(&mut stream);
        assert_eq!(id, request, "in order");
        assert!(partitions.values().all(|&(error, _)| error == 0));
    }
    assert!(closed(&mut stream));
}

#[test]
fn a_bad_frame_behind_requests_in_flight_closes_after_their_answers() {
    let (_dir, _broker, mut stream) = broker_and_topic();
    let mut bytes: Vec<u8> = (0..2).flat_map(|r| produce_frame(r, None)).collect();
    // A length prefix past socket_request_max_bytes: the connection closes.
    bytes.extend_from_slice(&i32::MAX.to_be_bytes());
    stream.write_all(&bytes).unwrap();
    for request in 0..2 {
        let (id, partitions) = read_answer(&mut stream);
        assert_eq!(id, request, "the answers owed leave first, in order");
        assert!(partitions.values().all(|&(error, _)| error == 0));
    }
    assert!(closed(&mut stream));
}

#[test]
fn a_request_that_closes_the_connection_lets_none_behind_it_append() {
    let (_dir, broker, mut stream) = broker_and_topic();
    // A (flushed slowly), then a Produce of a version the broker does not
    // serve (v14; it serves up to 13: the connection closes), then C.
    let mut bytes = produce_frame(0, None);
    bytes.extend(produce_frame_of(1, None, 14));
    bytes.extend(produce_frame(2, None));
    stream.write_all(&bytes).unwrap();
    let (id, partitions) = read_answer(&mut stream);
    assert_eq!(id, 0);
    assert!(partitions
        .values()
        .all(|&(error, offset)| (error, offset) == (0, 0)));
    assert!(closed(&mut stream), "closed at the unserved request");
    // C was never appended: the next record lands right after A's.
    let mut again = TcpStream::connect(broker.address).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let answers = pipelined(&mut again, &[None]);
    for p in 0..PARTITIONS {
        assert_eq!(answers[0][&p], (0, 1), "partition {p}: only A before it");
    }
}
