//! The broker's client connection limits and idle timeout, on a real
//! broker: a flood of idle connections from one address is refused past
//! its limit while a client from another address, /health and the flood's
//! admitted connections carry on; an idle connection is closed after
//! connections_max_idle_ms while a busy one stays open. The HTTP port
//! likewise: a flood held to its per-address limit, an unfinished request
//! answered 408 and closed. In a cluster whose brokers talk on a
//! listener of their own, a follower reconnects to a leader whose
//! connections a flood has filled.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use client::cluster::Cluster;
use socket2::{Domain, Socket, Type};
use support::cluster::gauge;
use support::{on_glommio, start_broker_with};

/// A TCP connection to `to` from the loopback address `from` (any
/// 127.x.y.z reaches the broker, each a different client address).
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let source: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&source.into()).unwrap();
    socket.connect(&to.into()).unwrap();
    socket.into()
}

/// Whether the broker closed `stream` within `within` (the read sees the
/// end, or a reset), rather than keeping it open.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// An ApiVersions v0 request (correlation id 1, no client id) and its
/// answer read back: the connection serves.
fn api_versions(stream: &mut TcpStream) -> std::io::Result<()> {
    let body = [0u8, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    stream.write_all(&(body.len() as i32).to_be_bytes())?;
    stream.write_all(&body)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut answer)?;
    assert_eq!(
        &answer[..4],
        &1i32.to_be_bytes(),
        "the answer's correlation id"
    );
    Ok(())
}

#[test]
fn a_flood_of_idle_connections_from_one_address_is_refused_past_its_limit_while_others_are_served()
{
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[
            ("BROKER_MAX_CONNECTIONS", "60"),
            ("BROKER_MAX_CONNECTIONS_PER_IP", "20"),
        ],
    );
    assert_eq!(gauge(broker.http, "connections_max"), 60.0);
    assert_eq!(gauge(broker.http, "connections_max_per_ip"), 20.0);

    // 30 idle connections from 127.0.0.2: 20 are kept, 10 closed at once.
    let mut flood: Vec<TcpStream> = (0..30)
        .map(|_| connect_from("127.0.0.2", broker.address))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let mut kept = Vec::new();
    for mut stream in flood.drain(..) {
        if !closed_within(&mut stream, Duration::from_millis(100)) {
            kept.push(stream);
        }
    }
    assert_eq!(kept.len(), 20, "connections kept of the flood");
    let mut flood = kept;
    assert_eq!(gauge(broker.http, "connections_refused_total"), 10.0);

    // Another address is served, and so is /health and the flood's own
    // admitted connections.
    let mut other = connect_from("127.0.0.3", broker.address);
    api_versions(&mut other).expect("a client from another address is served");
    let (status, _) = support::http(broker.http, "GET", "/health", "");
    assert_eq!(status, 200);
    api_versions(&mut flood[0]).expect("an admitted connection is served");
    let topics = on_glommio(async {
        Cluster::new(broker.address, "after-the-flood")
            .list_topics()
            .await
    });
    assert!(topics.is_ok(), "the project's client is served: {topics:?}");

    // Once the flood closes, its address may connect again.
    drop(flood);
    let started = Instant::now();
    loop {
        let mut again = connect_from("127.0.0.2", broker.address);
        if api_versions(&mut again).is_ok() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the flood's address stayed refused after its connections closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_idle_connection_is_closed_after_connections_max_idle_ms_and_a_busy_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[("BROKER_CONNECTIONS_MAX_IDLE_MS", "1000")]);
    let mut idle = TcpStream::connect(broker.address).unwrap();
    let mut busy = TcpStream::connect(broker.address).unwrap();
    api_versions(&mut idle).unwrap();
    let started = Instant::now();
    // The busy connection asks every 250 ms for 2.5 s: never idle 1 s.
    while started.elapsed() < Duration::from_millis(2500) {
        api_versions(&mut busy).expect("a busy connection stays open");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        closed_within(&mut idle, Duration::from_secs(2)),
        "a connection idle for 2.5 s of a 1 s limit is still open"
    );
    api_versions(&mut busy).expect("a busy connection stays open");
}

#[test]
fn the_http_port_holds_a_flood_to_its_per_address_limit_and_times_out_unfinished_requests() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough that the 70 connections are looked at (20 ms each)
    // before it passes: a connection that sent nothing is then closed
    // silently, which would count as "closed at once".
    let broker = start_broker_with(dir.path(), &[("BROKER_CONNECTIONS_MAX_IDLE_MS", "3000")]);
    // 70 connections from 127.0.0.2 that never finish a request: 64 are
    // kept until the request deadline, 6 closed at once.
    let mut flood: Vec<TcpStream> = (0..70)
        .map(|_| connect_from("127.0.0.2", broker.http))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut closed_at_once = 0;
    for stream in flood.iter_mut() {
        if closed_within(stream, Duration::from_millis(20)) {
            closed_at_once += 1;
        }
    }
    assert_eq!(closed_at_once, 6, "HTTP connections closed at once of 70");
    let (status, _) = support::http(broker.http, "GET", "/health", "");
    assert_eq!(status, 200, "/health from another address during the flood");

    // An unfinished request is answered 408 once the deadline passes.
    let mut slow = connect_from("127.0.0.3", broker.http);
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "answered {answer:?}");
}

/// A Fetch v4 request for partition 0 of `topic` from offset 0, up to 64 MiB.
fn fetch_everything(topic: &str) -> Vec<u8> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, RequestHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
    let version = 4;
    let mut body = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .encode(&mut body, FetchRequest::header_version(version))
        .unwrap();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(64 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(64 << 20)])])
        .encode(&mut body, version)
        .unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn a_client_that_does_not_take_its_answer_is_closed_after_connections_max_idle_ms() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[("BROKER_CONNECTIONS_MAX_IDLE_MS", "1000")]);
    // 24 MiB in one partition: more than the socket buffers between the
    // broker and a client that reads nothing hold.
    let value = "v".repeat(1023);
    let input: String = (0..24 * 1024).map(|_| format!("{value}\n")).collect();
    let mut kcat = std::process::Command::new("kcat")
        .args(["-P", "-b", &broker.bootstrap(), "-t", "big", "-p", "0"])
        .args(["-X", "acks=all", "-X", "message.max.bytes=2000000"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    kcat.stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(kcat.wait().unwrap().success());

    let mut stalled = TcpStream::connect(broker.address).unwrap();
    stalled.write_all(&fetch_everything("big")).unwrap();
    let open = || gauge(broker.http, "connections");
    let started = Instant::now();
    while open() < 1.0 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open(), 1.0, "the stalled client's connection is open");
    // It reads nothing: the answer cannot be written whole, and after the
    // 1 s limit the broker gives up on it.
    while open() > 0.0 && started.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        open(),
        0.0,
        "a connection not taking its answer is still open"
    );
    assert!(
        !broker.logged("has not taken its answer").is_empty(),
        "no log line says why"
    );
    drop(stalled);
}

#[test]
fn a_follower_reconnects_to_its_leader_through_a_flood_that_fills_the_broker() {
    // Clients on EXTERNAL, brokers on INTERNAL (the inter-broker listener,
    // which max_connections does not hold back, as Kafka's KIP-402).
    let dir = tempfile::tempdir().unwrap();
    let env = [
        (
            "BROKER_LISTENER_SECURITY_PROTOCOL_MAP",
            "[INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT]",
        ),
        ("BROKER_INTER_BROKER_LISTENER_NAME", "INTERNAL"),
        ("BROKER_MAX_CONNECTIONS", "40"),
        ("BROKER_MAX_CONNECTIONS_PER_IP", "12"),
    ];
    let mut cluster = support::cluster::Cluster::with_two_listeners(dir.path(), 3, &env);
    cluster.start();
    let args = [
        "topic",
        "create",
        "flooded",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    ];
    support::cli(&cluster.node(1).kafka.to_string(), &args);
    let full_isr = |http: SocketAddr, within: Duration| -> Option<i32> {
        let started = Instant::now();
        while started.elapsed() < within {
            if let Some((leader, 3)) = support::security::leader_and_isr(http, "flooded") {
                return Some(leader);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    };
    let first = cluster.node(1).http;
    let leader = full_isr(first, Duration::from_secs(60)).expect("a full ISR at first");
    let (http, external) = (
        cluster.node(leader).http,
        cluster.node(leader).external.unwrap(),
    );

    // A follower goes down; meanwhile four addresses fill the leader's
    // connections in all (12 each, 40 in all counting the other
    // follower's): the next client is closed. Then the follower comes
    // back, and must reconnect to the full leader.
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill9(follower);
    let mut flood = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] {
        flood.extend((0..12).map(|_| connect_from(from, external)));
    }
    std::thread::sleep(Duration::from_secs(1));
    flood.retain_mut(|stream| !closed_within(stream, Duration::from_millis(50)));
    assert!(flood.len() >= 30, "only {} of the flood kept", flood.len());
    // Until one is closed at once: the broker is full (the dead
    // follower's connections may take a moment to be let go).
    let started = Instant::now();
    loop {
        let mut latecomer = connect_from("127.0.0.6", external);
        if closed_within(&mut latecomer, Duration::from_millis(500)) {
            break;
        }
        flood.push(latecomer);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "clients past max_connections were kept: {}",
            flood.len()
        );
    }

    // The follower reconnects on INTERNAL and rejoins the ISR; the
    // leader's /health still answers.
    cluster.restart(follower);
    assert_eq!(
        full_isr(http, Duration::from_secs(60)),
        Some(leader),
        "the follower did not rejoin the ISR through the flood"
    );
    let (status, _) = support::http(http, "GET", "/health", "");
    assert_eq!(status, 200);
    assert!(gauge(http, "connections_refused_total") >= 1.0);
    drop(flood);
}

#[test]
fn an_idle_http_keep_alive_connection_is_closed_without_an_answer_it_never_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[("BROKER_CONNECTIONS_MAX_IDLE_MS", "1000")]);
    let mut kept = TcpStream::connect(broker.http).unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = [0u8; 4096];
    let n = kept.read(&mut answer).unwrap();
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&answer[..n])
    );
    // Idle past the limit: closed, with nothing more sent (no 408 for a
    // request it never began).
    let mut rest = Vec::new();
    let started = Instant::now();
    kept.read_to_end(&mut rest).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "closed after the idle limit"
    );
    assert!(rest.is_empty(), "sent {:?}", String::from_utf8_lossy(&rest));
}
