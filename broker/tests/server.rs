//! The real broker binary on an ephemeral port: ApiVersions is answered,
//! pipelined requests are answered in order, and bad input closes only the
//! connection that sent it.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::{on_glommio, start_broker, Broker};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, HeaderVersion};

fn connect(broker: &Broker) -> TcpStream {
    let stream = TcpStream::connect(broker.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

fn api_versions_request(version: i16, correlation_id: i32) -> Vec<u8> {
    support::api_versions_request(version, correlation_id, "server-test")
}

fn read_response(stream: &mut TcpStream, version: i16) -> (i32, ApiVersionsResponse) {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let header =
        ResponseHeader::decode(&mut body, ApiVersionsResponse::header_version(version)).unwrap();
    (
        header.correlation_id,
        ApiVersionsResponse::decode(&mut body, version).unwrap(),
    )
}

fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0) | Err(_))
}

#[test]
fn api_versions_pipelining_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());

    let mut client = connect(&broker);
    client.write_all(&api_versions_request(3, 1)).unwrap();
    let (correlation, response) = read_response(&mut client, 3);
    assert_eq!((correlation, response.error_code), (1, 0));
    assert!(response
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::ApiVersions as i16 && k.max_version == 4));

    // A version newer than served (a client newer than the broker) gets
    // the v0 answer with UNSUPPORTED_VERSION and the supported ranges.
    let mut newer = api_versions_request(4, 2);
    newer[6..8].copy_from_slice(&5i16.to_be_bytes());
    client.write_all(&newer).unwrap();
    let (correlation, fallback) = read_response(&mut client, 0);
    assert_eq!((correlation, fallback.error_code), (2, 35));
    assert!(!fallback.api_keys.is_empty());

    // Pipelined: three requests in one write, answered in order.
    let mut burst = Vec::new();
    for id in [10, 11, 12] {
        burst.extend_from_slice(&api_versions_request(2, id));
    }
    client.write_all(&burst).unwrap();
    for id in [10, 11, 12] {
        assert_eq!(read_response(&mut client, 2).0, id);
    }

    // A huge length prefix, a negative one, an unknown API key, garbage:
    // each connection is closed, nothing large is allocated.
    let bad: Vec<Vec<u8>> = vec![
        i32::MAX.to_be_bytes().to_vec(),
        (-5i32).to_be_bytes().to_vec(),
        [
            8i32.to_be_bytes().to_vec(),
            vec![0x7f, 0x7f, 0, 0, 0, 0, 0, 1],
        ]
        .concat(),
        [3i32.to_be_bytes().to_vec(), vec![1, 2, 3]].concat(),
    ];
    for input in bad {
        let mut stream = connect(&broker);
        stream.write_all(&input).unwrap();
        assert!(closed_by_server(&mut stream), "closed after {input:?}");
    }

    // The broker still serves, on a new connection and the old one.
    let mut fresh = connect(&broker);
    fresh.write_all(&api_versions_request(0, 99)).unwrap();
    assert_eq!(read_response(&mut fresh, 0).0, 99);
    client.write_all(&api_versions_request(3, 100)).unwrap();
    assert_eq!(read_response(&mut client, 3).0, 100);
}

#[test]
fn sigterm_stops_accepting_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    // An idle open connection must not hold the broker up past its drain.
    let _idle = connect(&broker);
    let address = broker.address;
    let log = broker.log.clone();
    let status = broker.terminate();
    assert!(status.success(), "exit status {status:?}");
    // Refused; or, on a busy machine, a connection to itself (Linux's
    // simultaneous open when the source port it picks is the very port
    // just freed), which no listener answers either.
    let accepting =
        TcpStream::connect(address).is_ok_and(|s| s.local_addr().ok() != s.peer_addr().ok());
    assert!(!accepting, "no longer accepting");
    // Leaderships were handed back to the controller before the drain
    // (the log reader thread may still be catching up: wait, bounded).
    let logged = || {
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("controlled shutdown: leaderships moved"))
    };
    let started = std::time::Instant::now();
    while !logged() && started.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(logged(), "no controlled shutdown logged");
}

#[test]
fn the_projects_client_negotiates_versions_with_the_broker() {
    use client::connection::{ClientError, Connection};
    use kafka_protocol::messages::{EnvelopeRequest, ProduceRequest};
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let connection = Connection::connect(address, "negotiation-test")
            .await
            .unwrap();
        assert_eq!(connection.version_for::<ApiVersionsRequest>().unwrap(), 4);
        assert_eq!(
            connection.transaction_version(),
            2,
            "finalized, at an epoch"
        );
        assert_eq!(connection.version_for::<ProduceRequest>().unwrap(), 13);
        assert!(matches!(
            // Forwarding between controllers: never a client's.
            connection.version_for::<EnvelopeRequest>(),
            Err(ClientError::Unsupported(_))
        ));
    });
}

#[test]
fn metadata_comes_from_the_one_voter_quorum_and_survives_a_restart() {
    use client::connection::Connection;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    let dir = tempfile::tempdir().unwrap();
    let created_id = std::rc::Rc::new(std::cell::Cell::new(uuid::Uuid::nil()));
    for life in 0..2 {
        let created_id = created_id.clone();
        let broker = start_broker(dir.path());
        let address = broker.address;
        on_glommio(async move {
            let mut connection = Connection::connect(address, "metadata-test").await.unwrap();
            let version = connection.version_for::<MetadataRequest>().unwrap();
            assert_eq!(version, 12);
            // The broker registers itself through the quorum shortly after start.
            let started = std::time::Instant::now();
            let response = loop {
                let response = connection
                    .call(&MetadataRequest::default(), version)
                    .await
                    .unwrap();
                // Every shard follows the quorum: one may lag the
                // shard that announced readiness by a moment.
                if response
                    .brokers
                    .iter()
                    .any(|b| b.port == address.port() as i32)
                {
                    break response;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "life {life}: the broker never registered"
                );
                glommio::timer::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(response.brokers.len(), 1);
            let me = &response.brokers[0];
            assert_eq!(
                (me.node_id.0, me.port),
                (1, address.port() as i32),
                "life {life}"
            );
            assert_eq!(response.controller_id.0, 1);
            let asking = |name: &'static str, create: bool| {
                MetadataRequest::default()
                    .with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(TopicName(name.into())))
                    ]))
                    .with_allow_auto_topic_creation(create)
            };
            let response = connection
                .call(&asking("nope", false), version)
                .await
                .unwrap();
            assert_eq!(
                response.topics[0].error_code, 3,
                "UNKNOWN_TOPIC_OR_PARTITION"
            );
            // Auto-creation (on by default) creates it, and it survives the restart.
            let response = connection
                .call(&asking("auto", true), version)
                .await
                .unwrap();
            let topic = &response.topics[0];
            assert_eq!(topic.error_code, 0, "life {life}");
            assert_eq!(topic.partitions.len(), 1);
            assert_eq!(topic.partitions[0].leader_id.0, 1);
            if life == 0 {
                created_id.set(topic.topic_id);
            } else {
                assert_eq!(
                    topic.topic_id,
                    created_id.get(),
                    "the same topic after a restart"
                );
            }
        });
        drop(broker);
        assert!(
            dir.path().join("metadata").join("raft.log").exists(),
            "the metadata log is on disk"
        );
    }
}
