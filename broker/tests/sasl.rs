//! SASL on the Kafka port (kafka_security_protocol = SASL_SSL or
//! SASL_PLAINTEXT): users made with the CLI log in from librdkafka (kcat)
//! and kafka-python with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN; a wrong
//! password, an unknown user, a deleted user and a client without SASL
//! are refused with nothing served, each failure logged (never the
//! password) and counted; users survive a restart through a metadata
//! snapshot; a session expires (KIP-368) unless the client authenticates
//! again on its connection; a 3-broker cluster replicates and fails over
//! with brokers logging in to each other over SASL_SSL.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use support::security::{kcat, leader_and_isr, server_files, wait_logged, Authority, Files};
use support::{start_broker_with, Broker};

const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "admin-secret-1";

fn sasl_ssl_env(files: &Files) -> Vec<(&'static str, String)> {
    vec![
        ("BROKER_KAFKA_SECURITY_PROTOCOL", "SASL_SSL".into()),
        (
            "BROKER_SSL_CERTIFICATE_LOCATION",
            files.certificate.display().to_string(),
        ),
        ("BROKER_SSL_KEY_LOCATION", files.key.display().to_string()),
        ("BROKER_SSL_CA_LOCATION", files.ca.display().to_string()),
        (
            "BROKER_SASL_BROKER_USER",
            format!("{ADMIN}:{ADMIN_PASSWORD}"),
        ),
        (
            "BROKER_SASL_ENABLED_MECHANISMS",
            "[SCRAM-SHA-512,SCRAM-SHA-256,PLAIN]".into(),
        ),
    ]
}

/// A SASL_PLAINTEXT broker whose own user is the admin.
fn sasl_plaintext_env() -> Vec<(&'static str, String)> {
    vec![
        ("BROKER_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT".into()),
        (
            "BROKER_SASL_BROKER_USER",
            format!("{ADMIN}:{ADMIN_PASSWORD}"),
        ),
    ]
}

fn start(data: &Path, env: &[(&'static str, String)]) -> Broker {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start_broker_with(data, &env)
}

/// kcat over SASL_SSL as `user`/`password` with `mechanism`.
fn kcat_as(
    broker: &str,
    ca: &str,
    (mechanism, user, password): (&str, &str, &str),
    args: &[&str],
    input: Option<&str>,
) -> std::process::Output {
    let settings = [
        "security.protocol=sasl_ssl".to_string(),
        format!("ssl.ca.location={ca}"),
        format!("sasl.mechanisms={mechanism}"),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ];
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["-b".to_string(), broker.to_string()]);
    for setting in settings {
        all.extend(["-X".to_string(), setting]);
    }
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    kcat(&all, input)
}

/// The broker's admin CLI over SASL_SSL as the admin user (password from
/// the environment, as an operator keeps it out of `ps`).
fn admin(bootstrap: &str, ca: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", bootstrap, "--ssl-ca-location", ca])
        .args([
            "--sasl-mechanism",
            "SCRAM-SHA-512",
            "--sasl-username",
            ADMIN,
        ])
        .env("BROKER_SASL_PASSWORD", ADMIN_PASSWORD)
        .output()
        .unwrap()
}

fn counter(broker: &Broker, name: &str) -> u64 {
    support::cluster::counter(broker.http, name)
}

#[test]
fn users_made_with_the_cli_log_in_from_librdkafka_and_kafka_python_and_wrong_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("test-ca");
    let files = server_files(dir.path(), &authority);
    let ca = files.ca.to_str().unwrap().to_string();
    let mut env = sasl_ssl_env(&files);
    // Snapshots every few entries: the users come back from one.
    env.push(("BROKER_METADATA_SNAPSHOT_EVERY_ENTRIES", "3".into()));
    let data = dir.path().join("data");
    let mut broker = start(&data, &env);
    let bootstrap = broker.bootstrap();

    let out = admin(
        &bootstrap,
        &ca,
        &["user", "create", "alice", "--password", "alice-pw"],
    );
    assert!(out.status.success(), "{out:?}");
    let out = admin(&bootstrap, &ca, &["user", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        listed.contains("alice") && listed.contains(ADMIN),
        "{out:?}"
    );
    assert!(
        listed.contains("SCRAM-SHA-512 (4096 iterations)"),
        "{listed}"
    );

    // librdkafka: SCRAM-SHA-512 produce and consume, PLAIN metadata.
    let alice = ("SCRAM-SHA-512", "alice", "alice-pw");
    let out = kcat_as(
        &bootstrap,
        &ca,
        alice,
        &["-P", "-t", "sasl"],
        Some("one\ntwo\n"),
    );
    assert!(out.status.success(), "{out:?}");
    let consume = ["-C", "-t", "sasl", "-o", "beginning", "-e"];
    let out = kcat_as(&bootstrap, &ca, alice, &consume, None);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "one\ntwo\n",
        "{out:?}"
    );
    let plain = ("PLAIN", "alice", "alice-pw");
    let out = kcat_as(&bootstrap, &ca, plain, &["-L", "-t", "sasl"], None);
    assert!(out.status.success(), "{out:?}");

    // kafka-python with its default (idempotent) producer, SCRAM-SHA-256.
    let settings = format!(
        r#"{{"security_protocol": "SASL_SSL", "ssl_cafile": "{ca}",
            "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-pw"}}"#
    );
    let out =
        support::security::kafka_python_roundtrip(&bootstrap, "python-sasl", &settings, &[], 60);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "consumed 100 in order"
    );

    // confluent-kafka (a librdkafka of 2.6.1 or later, whose SCRAM sends
    // the nonce as RFC 5802 has it), default settings, SCRAM-SHA-512.
    let settings = format!(
        r#"{{"security.protocol": "SASL_SSL", "ssl.ca.location": "{ca}",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": "alice-pw"}}"#
    );
    let out = support::security::confluent_roundtrip(
        &bootstrap,
        "confluent-sasl",
        "confluent-group",
        &settings,
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "consumed 100 in order"
    );

    // Refused: a wrong password, an unknown user; each logged without the
    // password and counted; a client without SASL is closed.
    let failures = counter(&broker, "sasl_authentication_failures_total");
    for (who, password) in [("alice", "not-the-password"), ("mallory", "alice-pw")] {
        let login = ("SCRAM-SHA-512", who, password);
        let out = kcat_as(&bootstrap, &ca, login, &["-L", "-m", "3"], None);
        assert!(!out.status.success(), "{who} got in: {out:?}");
    }
    assert!(wait_logged(&broker, "SASL authentication failed"));
    assert!(
        broker.logged("not-the-password").is_empty(),
        "a password was logged"
    );
    // librdkafka tries each login a few times: at least one failure each.
    assert!(counter(&broker, "sasl_authentication_failures_total") >= failures + 2);
    let tls_only = [
        "-L",
        "-m",
        "5",
        "-b",
        &bootstrap,
        "-X",
        "security.protocol=ssl",
        "-X",
    ];
    let ca_setting = format!("ssl.ca.location={ca}");
    let mut args = tls_only.to_vec();
    args.push(&ca_setting);
    let out = kcat(&args, None);
    assert!(!out.status.success(), "served without SASL: {out:?}");
    assert!(wait_logged(&broker, "not authenticated"));

    // The users come back after a restart (from the snapshot and log).
    broker.stop();
    let broker = start(&data, &env);
    let bootstrap = broker.bootstrap();
    let out = kcat_as(&bootstrap, &ca, alice, &consume, None);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "one\ntwo\n",
        "{out:?}"
    );

    // A deleted user is refused from then on.
    let out = admin(&bootstrap, &ca, &["user", "delete", "alice"]);
    assert!(out.status.success(), "{out:?}");
    let out = kcat_as(&bootstrap, &ca, alice, &["-L", "-m", "3"], None);
    assert!(!out.status.success(), "a deleted user got in: {out:?}");
    let out = admin(&bootstrap, &ca, &["user", "list"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("alice"),
        "{out:?}"
    );
    // And the CLI itself needs a login.
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args([
            "topic",
            "list",
            "--brokers",
            &bootstrap,
            "--ssl-ca-location",
            &ca,
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the CLI got in without SASL: {out:?}"
    );
}

/// Waits (bounded) until the log at `path` has a line with `needle`.
fn wait_in_log(path: &Path, needle: &str) {
    let started = Instant::now();
    while !std::fs::read_to_string(path)
        .unwrap_or_default()
        .contains(needle)
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no {needle:?} in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A TLS connection to `address` trusting `ca`, presenting `identity`
/// (certificate and key PEM): what a metadata peer opens.
fn tls_peer(
    address: SocketAddr,
    ca: &str,
    (certificate, key): (&str, &str),
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let chain = CertificateDer::pem_slice_iter(certificate.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    let name = ServerName::try_from(address.ip().to_string()).unwrap();
    let connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = TcpStream::connect(address).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    rustls::StreamOwned::new(connection, socket)
}

/// A raw Kafka connection for the protocol-level checks.
struct Raw {
    stream: TcpStream,
    correlation_id: i32,
}

impl Raw {
    fn connect(address: SocketAddr) -> Raw {
        let stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            stream,
            correlation_id: 0,
        }
    }

    /// Sends `request` at `version`; its answer, or None if the broker
    /// closed the connection instead.
    fn call<R>(&mut self, key: ApiKey, request: &R, version: i16) -> Option<Bytes>
    where
        R: Encodable + HeaderVersion,
    {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("sasl-test")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .unwrap();
        request.encode(&mut body, version).unwrap();
        self.frame(&body)
    }

    /// Sends `body` in one size-prefixed frame; the frame answering it.
    fn frame(&mut self, body: &[u8]) -> Option<Bytes> {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.stream.write_all(&frame).ok()?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut answer).ok()?;
        Some(Bytes::from(answer))
    }

    fn handshake(&mut self, mechanism: &'static str) -> Option<SaslHandshakeResponse> {
        self.handshake_at(mechanism, 1)
    }

    fn handshake_at(
        &mut self,
        mechanism: &'static str,
        version: i16,
    ) -> Option<SaslHandshakeResponse> {
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let mut answer = self.call(ApiKey::SaslHandshake, &request, version)?;
        ResponseHeader::decode(&mut answer, 0).unwrap();
        Some(SaslHandshakeResponse::decode(&mut answer, version).unwrap())
    }

    fn authenticate(&mut self, message: &str) -> Option<SaslAuthenticateResponse> {
        let request = SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::copy_from_slice(message.as_bytes()));
        let mut answer = self.call(ApiKey::SaslAuthenticate, &request, 2)?;
        ResponseHeader::decode(&mut answer, 1).unwrap();
        Some(SaslAuthenticateResponse::decode(&mut answer, 2).unwrap())
    }

    /// PLAIN as the admin: the session lifetime the broker gives.
    fn log_in(&mut self) -> i64 {
        assert_eq!(self.handshake("PLAIN").unwrap().error_code, 0);
        let answer = self
            .authenticate(&format!("\0{ADMIN}\0{ADMIN_PASSWORD}"))
            .unwrap();
        assert_eq!(answer.error_code, 0, "{answer:?}");
        answer.session_lifetime_ms
    }

    /// Whether a Metadata request is answered.
    fn metadata_answered(&mut self) -> bool {
        let request = MetadataRequest::default().with_topics(None);
        match self.call(ApiKey::Metadata, &request, 9) {
            Some(mut answer) => {
                ResponseHeader::decode(&mut answer, 1).unwrap();
                MetadataResponse::decode(&mut answer, 9).is_ok()
            }
            None => false,
        }
    }
}

#[test]
fn a_session_expires_unless_the_client_authenticates_again_and_order_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = sasl_plaintext_env();
    env.push(("BROKER_SASL_ENABLED_MECHANISMS", "[PLAIN]".into()));
    env.push(("BROKER_CONNECTIONS_MAX_REAUTH_MS", "1500".into()));
    let broker = start(dir.path(), &env);

    // Nothing before authenticating; no SaslAuthenticate before a handshake;
    // an unknown mechanism refused with the ones offered.
    assert!(!Raw::connect(broker.address).metadata_answered());
    let mut raw = Raw::connect(broker.address);
    let refused = raw.authenticate("\0admin\0x").unwrap();
    assert_eq!(refused.error_code, 34, "ILLEGAL_SASL_STATE");
    assert!(!raw.metadata_answered(), "closed after it");
    let refused = Raw::connect(broker.address).handshake("GSSAPI").unwrap();
    assert_eq!(refused.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(refused.mechanisms, vec![StrBytes::from_static_str("PLAIN")]);
    let mut raw = Raw::connect(broker.address);
    raw.handshake("PLAIN").unwrap();
    let wrong = raw.authenticate("\0admin\0wrong").unwrap();
    assert_eq!(wrong.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    // A SaslHandshake v0 client (Kafka before 1.0): the exchange in bare
    // frames, then requests as usual; a wrong bare token is not answered.
    let mut old = Raw::connect(broker.address);
    assert_eq!(old.handshake_at("PLAIN", 0).unwrap().error_code, 0);
    let token = format!("\0{ADMIN}\0{ADMIN_PASSWORD}");
    assert_eq!(old.frame(token.as_bytes()), Some(Bytes::new()));
    assert!(old.metadata_answered());
    let mut old = Raw::connect(broker.address);
    old.handshake_at("PLAIN", 0).unwrap();
    assert_eq!(old.frame(b"\0admin\0wrong"), None);

    // A session lasts what the broker said, then serves nothing more.
    let mut expiring = Raw::connect(broker.address);
    let started = Instant::now();
    assert_eq!(expiring.log_in(), 1500);
    assert!(expiring.metadata_answered());
    // Meanwhile a second connection authenticates again before expiring.
    let mut renewed = Raw::connect(broker.address);
    renewed.log_in();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(renewed.log_in(), 1500, "re-authenticated on its connection");
    std::thread::sleep(
        Duration::from_millis(1500).saturating_sub(started.elapsed()) + Duration::from_millis(200),
    );
    assert!(
        !expiring.metadata_answered(),
        "served after its session expired"
    );
    assert!(renewed.metadata_answered(), "the renewed session is served");
    assert!(wait_logged(&broker, "after its session expired"));
    assert!(counter(&broker, "sasl_authentications_total") >= 3);

    // The project's own client (the brokers' fetchers, loadgen, the CLI)
    // logs in again before its session ends: one connection serves on for
    // more than twice the session's lifetime.
    let address = broker.address;
    let answered = support::on_glommio(async move {
        let security = client::security::Security {
            tls: None,
            sasl: Some(client::security::SaslLogin {
                mechanism: client::security::SaslMechanism::Plain,
                user: ADMIN.into(),
                password: ADMIN_PASSWORD.into(),
            }),
        };
        let mut connection =
            client::connection::Connection::connect_with(address, "reauth-test", &security)
                .await
                .unwrap();
        let version = connection.version_for::<MetadataRequest>().unwrap();
        let mut answered = 0;
        for _ in 0..20 {
            let request = MetadataRequest::default().with_topics(None);
            connection
                .call(&request, version)
                .await
                .expect("served on one connection");
            answered += 1;
            glommio::timer::sleep(Duration::from_millis(200)).await;
        }
        answered
    });
    assert_eq!(answered, 20);
}

#[test]
fn a_three_broker_cluster_logs_in_to_itself_over_sasl_ssl_replicates_and_fails_over() {
    // With the metadata quorum over TLS (mutual certificates) as well.
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("cluster-ca");
    let files = server_files(dir.path(), &authority);
    let ca = files.ca.to_str().unwrap().to_string();
    let mut env = sasl_ssl_env(&files);
    // ACLs on: the brokers' fetches pass as their own (super) user. The
    // test reads leaders from the HTTP API without logging in, as
    // User:ANONYMOUS, allowed to describe the topic below.
    env.push(("BROKER_HTTP_AUTHENTICATION", "none".into()));
    env.push(("BROKER_AUTHORIZER", "acl".into()));
    // The metadata quorum (Raft, forwarded controller calls) over TLS too:
    // no port of the cluster speaks plaintext.
    env.push(("BROKER_CONTROLLER_SECURITY_PROTOCOL", "SSL".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut cluster = support::cluster::Cluster::new(dir.path(), 3, &env);
    cluster.start();
    let http = cluster.node(1).http;
    let first_broker = cluster.node(1).kafka.to_string();
    let as_admin = |args: &[&str]| {
        let out = admin(&first_broker, &ca, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    as_admin(&[
        "topic",
        "create",
        "replicated",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    ]);
    as_admin(&[
        "topic",
        "create",
        "other",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    ]);
    as_admin(&["user", "create", "alice", "--password", "alice-pw"]);
    for (principal, operation) in [("User:ANONYMOUS", "Describe"), ("User:alice", "Write")] {
        as_admin(&[
            "acl",
            "create",
            "--allow",
            principal,
            "--operation",
            operation,
            "--topic",
            "replicated",
        ]);
    }
    // A plaintext peer on a metadata port is refused at the handshake.
    let mut intruder = std::net::TcpStream::connect(cluster.metadata_address(2)).unwrap();
    intruder
        .write_all(b"RAFT\0\0\0\x10garbage-frame!!!")
        .unwrap();
    let log = cluster.log_path(2);
    let started = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("closing a metadata connection: TLS handshake failed")
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no log line for the plaintext peer"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(intruder);

    // Certificates rotate to a new CA on every broker, SIGHUP: the Kafka
    // ports, the brokers' client side and the metadata quorum take the new
    // ones (a peer presenting a certificate of the new CA is let in to a
    // metadata port and gets as far as a bad frame), and everything below
    // (failover included) runs on them.
    let renewed = Authority::new("cluster-ca-2");
    let (certificate, key) = renewed.issue(&["127.0.0.1", "localhost"], "broker", false);
    std::fs::write(&files.ca, renewed.pem()).unwrap();
    std::fs::write(&files.certificate, &certificate).unwrap();
    std::fs::write(&files.key, &key).unwrap();
    for id in 1..=3 {
        cluster.signal(id, libc::SIGHUP);
    }
    for id in 1..=3 {
        wait_in_log(&cluster.log_path(id), "SIGHUP: TLS certificates reloaded");
    }
    let mut peer = tls_peer(
        cluster.metadata_address(3),
        &renewed.pem(),
        (&certificate, &key),
    );
    // A frame claiming 4 GiB: refused by its header, once past TLS.
    peer.write_all(b"RAFT\xff\xff\xff\xff\0\0\0\0").unwrap();
    let _ = peer.flush();
    wait_in_log(
        &cluster.log_path(3),
        "closing a metadata connection after a bad frame",
    );
    drop(peer);
    // The ACLs (made through broker 1) reach every broker.
    for id in 1..=3 {
        let node = cluster.node(id).kafka.to_string();
        let listed = admin(&node, &ca, &["acl", "list", "--principal", "User:alice"]);
        assert!(
            String::from_utf8_lossy(&listed.stdout).contains("replicated"),
            "broker {id}: {listed:?}"
        );
    }
    let alice = ("SCRAM-SHA-512", "alice", "alice-pw");
    let third = cluster.node(3).kafka.to_string();
    let out = kcat_as(
        &third,
        &ca,
        alice,
        &["-P", "-t", "replicated", "-p", "0"],
        Some("from-alice\n"),
    );
    assert!(out.status.success(), "{out:?}");
    let out = kcat_as(
        &third,
        &ca,
        alice,
        &["-P", "-t", "other", "-p", "0"],
        Some("no\n"),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("authorization failed"),
        "{out:?}"
    );
    let everyone = cluster.bootstrap();
    let admin_login = ("SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD);
    let produce = ["-P", "-t", "replicated", "-p", "0", "-X", "acks=all"];
    let first: String = (0..200).map(|i| format!("m{i}\n")).collect();
    let out = kcat_as(&everyone, &ca, admin_login, &produce, Some(&first));
    assert!(out.status.success(), "{out:?}");
    // acks=all answered with all three in the ISR: the followers fetched
    // over SASL_SSL (a follower that could not log in would have left the
    // ISR, or held the answer).
    let started = Instant::now();
    let leader = loop {
        match leader_and_isr(http, "replicated") {
            Some((leader, 3)) => break leader,
            _ if started.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            other => panic!("the followers did not catch up: {other:?}"),
        }
    };
    cluster.kill9(leader);
    let survivors: Vec<String> = (1..=3)
        .filter(|id| *id != leader)
        .map(|id| cluster.node(id).kafka.to_string())
        .collect();
    let survivors = survivors.join(",");
    let second: String = (200..400).map(|i| format!("m{i}\n")).collect();
    let out = kcat_as(&survivors, &ca, admin_login, &produce, Some(&second));
    assert!(out.status.success(), "{out:?}");
    let consume = ["-C", "-t", "replicated", "-p", "0", "-o", "beginning", "-e"];
    let out = kcat_as(&survivors, &ca, admin_login, &consume, None);
    assert!(out.status.success(), "{out:?}");
    let expected: String = std::iter::once("from-alice\n".to_string())
        .chain((0..400).map(|i| format!("m{i}\n")))
        .collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn the_http_api_asks_for_a_broker_user_while_health_and_metrics_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &sasl_plaintext_env());
    let curl = |login: Option<&str>, path: &str| {
        let mut command = Command::new("curl");
        command.args(["-sS", "-i", "--max-time", "10"]);
        if let Some(login) = login {
            command.args(["-u", login]);
        }
        let out = command
            .arg(format!("http://{}{path}", broker.http))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(curl(None, "/health").starts_with("HTTP/1.1 200"));
    assert!(curl(None, "/metrics").starts_with("HTTP/1.1 200"));
    let refused = curl(None, "/topics");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.contains("www-authenticate: Basic"), "{refused}");
    let wrong = curl(Some("admin:guess"), "/topics");
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let login = format!("{ADMIN}:{ADMIN_PASSWORD}");
    for _ in 0..2 {
        let answer = curl(Some(&login), "/topics");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    assert!(counter(&broker, "http_authentication_failures_total") >= 2);
    assert!(wait_logged(
        &broker,
        "refusing an HTTP API request: not logged in"
    ));
    assert!(broker.logged("guess").is_empty(), "a password was logged");
}

#[test]
fn loadgen_logs_in_and_verifies_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &sasl_plaintext_env());
    let line = format!(
        "verify --bootstrap {} --topic over-sasl --partitions 2 --producers 1 --consumers 1 \
         --keys 50 --rate 5000 --duration 2 --warmup 1 --no-pin",
        broker.bootstrap()
    );
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    let mut options = loadgen::options::parse(&args).unwrap();
    // Without a login loadgen cannot get in.
    assert!(loadgen::run::run_load(options.clone()).is_err());
    options.sasl = Some(client::security::SaslLogin {
        mechanism: client::security::SaslMechanism::from_name("SCRAM-SHA-512").unwrap(),
        user: ADMIN.into(),
        password: ADMIN_PASSWORD.into(),
    });
    let outcome = loadgen::run::run_load(options).expect("a clean verify run over SASL");
    let verdict = outcome.verdicts[0];
    assert_eq!((verdict.lost, verdict.out_of_order), (0, 0), "{verdict:?}");
    assert!(verdict.checked >= 10_000, "{} checked", verdict.checked);
}

/// The HTTP queue API across brokers whose HTTP ports speak TLS and ask
/// for a user: a receive through one broker gets every partition's
/// messages (the others asked over HTTPS as the broker's own user), and
/// their receipts are accepted through another.
#[test]
fn the_queue_api_reaches_other_leaders_over_https_as_the_brokers_user() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("queue-ca");
    let files = server_files(dir.path(), &authority);
    let ca = files.ca.to_str().unwrap().to_string();
    let mut env = sasl_ssl_env(&files);
    env.push(("BROKER_HTTP_TLS", "true".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut cluster = support::cluster::Cluster::new(dir.path(), 3, &env);
    cluster.start();
    let first_broker = cluster.node(1).kafka.to_string();
    let args = ["topic", "create", "queue", "--partitions", "3"];
    let out = admin(&first_broker, &ca, &args);
    assert!(out.status.success(), "{out:?}");
    let login = format!("{ADMIN}:{ADMIN_PASSWORD}");
    let call = |via: i32, path: &str, body: &str| -> serde_json::Value {
        let url = format!("https://127.0.0.1:{}{path}", cluster.node(via).http.port());
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert", &ca, "-u", &login])
            .args([
                "-X",
                "POST",
                "-H",
                "content-type: application/json",
                "-d",
                body,
            ])
            .arg(url)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"))
    };
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert", &ca, "-u", &login])
        .arg(format!(
            "https://127.0.0.1:{}/topics/queue",
            cluster.node(1).http.port()
        ))
        .output()
        .unwrap();
    let topic: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaders: Vec<i64> = (topic["partitions"].as_array().unwrap().iter())
        .map(|p| p["leader"].as_i64().unwrap_or(-1))
        .collect();
    assert!(
        leaders.iter().any(|l| *l != 1),
        "some led elsewhere: {leaders:?}"
    );
    let receive = "/share-groups/q/receive?topic=queue&encoding=text&max_messages=100";
    // The group starts at each partition's end: the first receive
    // reaches every leader.
    let first = call(1, &format!("{receive}&wait_ms=0"), "");
    assert_eq!(first["messages"], serde_json::json!([]), "{first}");
    let mut sent = Vec::new();
    for partition in 0..3 {
        let value = format!("p{partition}");
        let body = format!(r#"{{"value":"{value}","partition":{partition}}}"#);
        let produced = call(1, "/topics/queue/messages?encoding=text", &body);
        assert!(produced["offset"].is_i64(), "{produced}");
        sent.push(value);
    }
    let mut got: Vec<(String, String)> = Vec::new();
    let started = Instant::now();
    while got.len() < sent.len() && started.elapsed() < Duration::from_secs(20) {
        let answer = call(1, &format!("{receive}&wait_ms=1000"), "");
        for m in answer["messages"].as_array().unwrap() {
            let value = m["value"].as_str().unwrap().to_string();
            got.push((value, m["receipt"].as_str().unwrap().to_string()));
        }
    }
    let mut values: Vec<String> = got.iter().map(|(v, _)| v.clone()).collect();
    values.sort();
    assert_eq!(values, sent);
    let receipts: Vec<&str> = got.iter().map(|(_, r)| r.as_str()).collect();
    let body = serde_json::json!({"topic": "queue", "receipts": receipts}).to_string();
    let acked = call(2, "/share-groups/q/ack", &body);
    let codes: Vec<i64> = (acked["results"].as_array().unwrap().iter())
        .map(|r| r["error_code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, vec![0; receipts.len()], "{acked}");
}
