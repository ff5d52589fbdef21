//! Bad input sent raw over TCP to the real broker: each gets its Kafka
//! error code or a closed connection (with a log line), and the broker
//! then still serves a normal client.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use storage::batch::{build, RecordSpec};
use storage::TimestampMs;
use support::{on_glommio, start_broker_with};

fn connect(address: std::net::SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Sends a frame; returns the response body after the correlation id, or
/// None if the broker closed the connection.
fn exchange(stream: &mut TcpStream, frame: &[u8]) -> Option<Bytes> {
    if stream.write_all(frame).is_err() {
        return None;
    }
    let mut size = [0u8; 4];
    if stream.read_exact(&mut size).is_err() {
        return None;
    }
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(Bytes::from(body))
}

fn frame(key: ApiKey, version: i16, header_version: i16, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(77)
        .with_client_id(Some(StrBytes::from_static_str("bad-input")))
        .encode(&mut out, header_version)
        .unwrap();
    out.extend_from_slice(body);
    let mut framed = (out.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&out);
    framed
}

fn encoded<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).unwrap();
    out.to_vec()
}

fn batch(value_bytes: usize) -> Bytes {
    build(
        TimestampMs(1_000),
        &[RecordSpec {
            timestamp_delta: 0,
            key: Some(b"k".to_vec()),
            value: Some(vec![b'v'; value_bytes]),
        }],
    )
    .freeze()
}

/// `batch` with its last byte flipped: its CRC no longer matches.
fn corrupted(batch: Bytes) -> Bytes {
    let mut bytes = batch.to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    Bytes::from(bytes)
}

fn produce(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Produces at v9 and returns the one partition's error code.
fn produce_error(address: std::net::SocketAddr, request: &ProduceRequest) -> i16 {
    let mut stream = connect(address);
    let request = frame(
        ApiKey::Produce,
        9,
        ProduceRequest::header_version(9),
        &encoded(request, 9),
    );
    let mut response = exchange(&mut stream, &request).expect("an answer");
    kafka_protocol::messages::ResponseHeader::decode(
        &mut response,
        ProduceResponse::header_version(9),
    )
    .unwrap();
    let response = ProduceResponse::decode(&mut response, 9).unwrap();
    response.responses[0].partition_responses[0].error_code
}

/// The error code of the first answer to `request` once its new topic is
/// served, as Kafka's clients retry UNKNOWN_TOPIC_OR_PARTITION (3) and
/// NOT_LEADER_OR_FOLLOWER (6) while a new topic's metadata spreads.
/// (CreateTopics here answers once every shard has the topic: admin.rs's
/// `a_new_topic_is_served_on_every_connection...` checks that.)
fn error_once_served(address: std::net::SocketAddr, request: &ProduceRequest) -> i16 {
    support::eventually(
        "the new topic served",
        Duration::from_secs(10),
        || match produce_error(address, request) {
            code @ (3 | 6) => Err(code),
            code => Ok(code),
        },
    )
}

/// Whether the broker closes the connection on `frame` (and answers
/// nothing).
fn closes_on(address: std::net::SocketAddr, frame: &[u8]) -> bool {
    let mut stream = connect(address);
    exchange(&mut stream, frame).is_none()
}

#[test]
fn each_bad_input_gets_its_error_or_a_closed_connection_and_the_broker_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start_broker_with(
        dir.path(),
        &[("BROKER_SOCKET_REQUEST_MAX_BYTES", "1048576")],
    );
    let address = broker.address;
    on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "bad-input-admin");
        cluster
            .create_topic("small", 2, 1, &[("max.message.bytes", "2000")])
            .await
            .unwrap();
    });

    // Per-partition errors, answered.
    let corrupt = corrupted(batch(100));
    assert_eq!(
        error_once_served(address, &produce("small", 0, corrupt, -1)),
        2,
        "CORRUPT_MESSAGE"
    );
    assert_eq!(
        produce_error(
            address,
            &produce("small", 0, Bytes::from_static(b"garbage"), -1)
        ),
        2
    );
    assert_eq!(
        produce_error(address, &produce("small", 0, batch(5_000), -1)),
        10,
        "MESSAGE_TOO_LARGE"
    );
    assert_eq!(
        produce_error(address, &produce("nope", 0, batch(10), -1)),
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        produce_error(address, &produce("small", 99, batch(10), -1)),
        3
    );
    assert_eq!(
        produce_error(address, &produce("small", 0, batch(10), 5)),
        21,
        "INVALID_REQUIRED_ACKS"
    );
    assert_eq!(
        produce_error(address, &produce("small", 0, batch(10), 1)),
        0,
        "a good batch still lands"
    );

    // The same past 64 KiB, where a request's records take over the
    // memory the frame was read into (broker/src/kafka/record_sets.rs).
    on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "bad-input-large");
        cluster.create_topic("large", 1, 1, &[]).await.unwrap();
    });
    // Served once its leadership is taken up (moments after the create).
    let started = std::time::Instant::now();
    while produce_error(address, &produce("large", 0, batch(10), -1)) != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "topic large not served"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let corrupt = corrupted(batch(100_000));
    assert_eq!(
        produce_error(address, &produce("large", 0, corrupt, -1)),
        2,
        "CORRUPT_MESSAGE, large"
    );
    assert_eq!(
        produce_error(
            address,
            &produce("large", 0, Bytes::from(vec![7u8; 100_000]), -1)
        ),
        43,
        "UNSUPPORTED_FOR_MESSAGE_FORMAT: 100 KB of garbage read as a batch of magic 7"
    );
    assert_eq!(
        produce_error(address, &produce("large", 0, batch(100_000), -1)),
        0,
        "a good large batch lands"
    );
    // A large frame cut short by its client: the connection closes, the
    // broker serves on.
    let cut = frame(
        ApiKey::Produce,
        9,
        ProduceRequest::header_version(9),
        &encoded(&produce("large", 0, batch(100_000), -1), 9),
    );
    let mut stream = connect(address);
    stream.write_all(&cut[..cut.len() / 2]).unwrap();
    drop(stream);
    assert_eq!(
        produce_error(address, &produce("large", 0, batch(100_000), -1)),
        0,
        "served after a cut-short frame"
    );

    // acks=all below min.insync.replicas: refused, nothing written; acks=1 lands.
    on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "bad-input-isr");
        cluster
            .create_topic("strict", 1, 1, &[("min.insync.replicas", "2")])
            .await
            .unwrap();
    });
    assert_eq!(
        error_once_served(address, &produce("strict", 0, batch(10), -1)),
        19,
        "NOT_ENOUGH_REPLICAS"
    );
    assert_eq!(
        produce_error(address, &produce("strict", 0, batch(10), 1)),
        0
    );

    // acks=0 gets no response: the next request's answer comes first.
    let mut stream = connect(address);
    let quiet = frame(
        ApiKey::Produce,
        9,
        ProduceRequest::header_version(9),
        &encoded(&produce("small", 1, batch(10), 0), 9),
    );
    stream.write_all(&quiet).unwrap();
    let versions = frame(ApiKey::ApiVersions, 0, 1, &[]);
    let mut answer = exchange(&mut stream, &versions).expect("answered");
    kafka_protocol::messages::ResponseHeader::decode(&mut answer, 0).unwrap();
    let versions = kafka_protocol::messages::ApiVersionsResponse::decode(&mut answer, 0).unwrap();
    assert_eq!(
        versions.error_code, 0,
        "the ApiVersions answer, not a Produce one"
    );

    // Produce v0-2 is advertised (for older clients' compression checks)
    // and answered with UNSUPPORTED_VERSION per partition.
    let mut v2 = Vec::new();
    v2.extend_from_slice(&1i16.to_be_bytes()); // acks
    v2.extend_from_slice(&1000i32.to_be_bytes());
    v2.extend_from_slice(&1i32.to_be_bytes());
    v2.extend_from_slice(&5i16.to_be_bytes());
    v2.extend_from_slice(b"small");
    v2.extend_from_slice(&1i32.to_be_bytes());
    v2.extend_from_slice(&0i32.to_be_bytes());
    v2.extend_from_slice(&0i32.to_be_bytes()); // empty message set
    let mut stream = connect(address);
    let answer = exchange(&mut stream, &frame(ApiKey::Produce, 2, 1, &v2)).expect("answered");
    assert_eq!(
        &answer[4 + 4 + 2 + 5 + 4 + 4..][..2],
        &35i16.to_be_bytes(),
        "UNSUPPORTED_VERSION"
    );

    // Fetch: unknown topic, offset out of range.
    let fetch = |topic: &str, offset: i64| {
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let mut stream = connect(address);
        let mut response = exchange(
            &mut stream,
            &frame(ApiKey::Fetch, 11, 1, &encoded(&request, 11)),
        )
        .expect("answered");
        kafka_protocol::messages::ResponseHeader::decode(&mut response, 0).unwrap();
        FetchResponse::decode(&mut response, 11).unwrap().responses[0].partitions[0].error_code
    };
    assert_eq!(fetch("nope", 0), 3);
    assert_eq!(fetch("small", 1_000), 1, "OFFSET_OUT_OF_RANGE");
    assert_eq!(fetch("small", 0), 0);

    // Closed connections, nothing allocated for the claims.
    let mut forged = encoded(&produce("small", 0, batch(10), -1), 9);
    // acks(2) + timeout(4) after a null compact transactional id (1 byte):
    // the topic count follows; claim 2^31 topics.
    forged.truncate(1 + 2 + 4);
    forged.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
    assert!(
        closes_on(address, &frame(ApiKey::Produce, 9, 2, &forged)),
        "a forged count"
    );
    let mut huge = (64i32 << 20).to_be_bytes().to_vec();
    huge.extend_from_slice(&[0, 18, 0, 3]);
    assert!(
        closes_on(address, &huge),
        "a frame over socket.request.max.bytes"
    );
    assert!(
        closes_on(address, &(-5i32).to_be_bytes()),
        "a negative size"
    );
    assert!(
        closes_on(address, &frame(ApiKey::Fetch, 3, 1, &[])),
        "a version not served"
    );
    let mut unknown = frame(ApiKey::Fetch, 11, 1, &[]);
    unknown[4..6].copy_from_slice(&999i16.to_be_bytes());
    assert!(closes_on(address, &unknown), "an unknown API key");
    assert!(
        closes_on(
            address,
            &frame(ApiKey::Metadata, 12, 2, &[0xff, 0xff, 0xff])
        ),
        "a malformed body"
    );
    assert!(
        closes_on(address, &frame(ApiKey::JoinGroup, 5, 1, &[])),
        "an API not served"
    );

    assert!(broker.is_running(), "the broker is still up");
    assert!(
        !broker.logged("closing connection").is_empty(),
        "closed connections are logged"
    );
    // And it still serves a normal client.
    on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "after-bad-input");
        let producer = client::producer::Producer::new(cluster.clone(), Default::default());
        let delivered = producer
            .send("small", None, Some(Bytes::from_static(b"still here")))
            .await
            .unwrap()
            .await
            .unwrap();
        let mut consumer = client::consumer::Consumer::assign(
            cluster,
            "small",
            &[delivered.partition],
            client::consumer::StartAt::Offset(delivered.offset),
            Default::default(),
        )
        .await
        .unwrap();
        let records = consumer.poll().await.unwrap();
        assert_eq!(records[0].value.as_deref(), Some(&b"still here"[..]));
    });
}
