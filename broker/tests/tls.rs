//! TLS on the Kafka port (kafka_security_protocol = SSL): librdkafka
//! (kcat) and kafka-python produce and consume over it; a plaintext client
//! on the TLS port and a TLS client on a plaintext port are refused with
//! nothing served; client certificates (mTLS) are required when asked
//! (kcat, kafka-python, confluent-kafka and the CLI log in with one), and
//! an expired or missing one is refused; a SIGHUP reloads the
//! certificate for new connections while open ones carry on; a missing
//! file stops the start with its name. Every certificate is made here.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use support::security::{
    kcat, leader_and_isr, server_files, start_tls_broker, tls_connect, wait_logged, write,
    Authority,
};
use support::{start_broker, Broker};

fn api_versions_request(correlation_id: i32) -> Vec<u8> {
    support::api_versions_request(3, correlation_id, "tls-test")
}

/// Sends ApiVersions and reads the answer: Ok(number of APIs listed), or
/// the error that stopped it (a refused handshake surfaces here in TLS
/// 1.3, where the client finishes before the server checks its
/// certificate).
fn ask_api_versions(stream: &mut impl ReadWrite, correlation_id: i32) -> std::io::Result<usize> {
    stream.write_all(&api_versions_request(correlation_id))?;
    stream.flush()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body)?;
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, 0).unwrap();
    assert_eq!(header.correlation_id, correlation_id);
    let answer = ApiVersionsResponse::decode(&mut body, 3).unwrap();
    assert_eq!(answer.error_code, 0);
    Ok(answer.api_keys.len())
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn counter(broker: &Broker, name: &str) -> u64 {
    support::cluster::counter(broker.http, name)
}

#[test]
fn librdkafka_and_kafka_python_produce_and_consume_over_tls_and_plaintext_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("test-ca");
    let files = server_files(dir.path(), &authority);
    let broker = start_tls_broker(&dir.path().join("data"), &files, &[]);
    let bootstrap = broker.bootstrap();
    let ca = files.ca.to_str().unwrap();
    let ssl = ["-X", "security.protocol=ssl", "-X"];
    let ca_setting = format!("ssl.ca.location={ca}");

    // librdkafka: produce three messages, consume them back.
    let mut produce = vec!["-P", "-b", &bootstrap, "-t", "over-tls"];
    produce.extend(ssl);
    produce.push(&ca_setting);
    let out = kcat(&produce, Some("one\ntwo\nthree\n"));
    assert!(out.status.success(), "{out:?}");
    let mut consume = vec![
        "-C",
        "-b",
        &bootstrap,
        "-t",
        "over-tls",
        "-o",
        "beginning",
        "-e",
    ];
    consume.extend(ssl);
    consume.push(&ca_setting);
    let out = kcat(&consume, None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\nthree\n");

    // kafka-python with its default producer (idempotent), then a consumer.
    let settings = format!(r#"{{"security_protocol": "SSL", "ssl_cafile": "{ca}"}}"#);
    let out =
        support::security::kafka_python_roundtrip(&bootstrap, "python-tls", &settings, &[], 60);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "consumed 100 in order"
    );

    // The broker's own admin CLI, given the CA.
    let admin = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(args)
            .args(["--brokers", &bootstrap])
            .output()
            .unwrap()
    };
    let out = admin(&[
        "topic",
        "create",
        "made-by-cli",
        "--partitions",
        "2",
        "--ssl-ca-location",
        ca,
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = admin(&["topic", "list", "--ssl-ca-location", ca]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("made-by-cli"),
        "{out:?}"
    );
    assert!(
        !admin(&["topic", "list"]).status.success(),
        "the CLI got in without TLS"
    );

    // A plaintext client on the TLS port: no metadata, the handshake
    // failure counted, and the broker serves TLS clients on.
    let failures_before = counter(&broker, "tls_handshake_failures_total");
    let out = kcat(&["-L", "-b", &bootstrap, "-m", "5"], None);
    assert!(!out.status.success(), "plaintext got metadata: {out:?}");
    assert!(counter(&broker, "tls_handshake_failures_total") > failures_before);
    let mut stream = tls_connect(broker.address, &authority.pem(), None);
    assert!(ask_api_versions(&mut stream, 7).unwrap() > 20);
}

#[test]
fn a_tls_client_on_a_plaintext_port_is_told_apart_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let authority = Authority::new("test-ca");
    let mut stream = tls_connect(broker.address, &authority.pem(), None);
    assert!(ask_api_versions(&mut stream, 1).is_err());
    assert!(
        wait_logged(&broker, "a TLS handshake on a plaintext port"),
        "no log line names the mistake"
    );
    // The broker carries on for plaintext clients.
    let mut plain = TcpStream::connect(broker.address).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(ask_api_versions(&mut plain, 2).unwrap() > 20);
}

#[test]
fn client_certificates_when_required_refuse_missing_expired_and_foreign_ones() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("test-ca");
    let files = server_files(dir.path(), &authority);
    let ca = files.ca.to_str().unwrap().to_string();
    let broker = start_tls_broker(
        &dir.path().join("data"),
        &files,
        &[
            ("BROKER_SSL_CLIENT_AUTH", "required"),
            ("BROKER_SSL_CA_LOCATION", &ca),
        ],
    );
    let alice = authority.issue(&["alice"], "alice", false);
    let mut stream = tls_connect(broker.address, &authority.pem(), Some(&alice));
    assert!(ask_api_versions(&mut stream, 1).unwrap() > 20);

    // librdkafka with and without a client certificate.
    let certificate = write(dir.path(), "alice.pem", &alice.0);
    let key = write(dir.path(), "alice.key", &alice.1);
    let bootstrap = broker.bootstrap();
    let settings = [
        "security.protocol=ssl".to_string(),
        format!("ssl.ca.location={ca}"),
    ];
    let with_certificate = [
        format!("ssl.certificate.location={}", certificate.display()),
        format!("ssl.key.location={}", key.display()),
    ];
    let metadata = |extra: &[String]| {
        let mut args = vec!["-L", "-b", &bootstrap, "-m", "5"];
        for setting in settings.iter().chain(extra) {
            args.extend(["-X", setting.as_str()]);
        }
        kcat(&args, None)
    };
    let out = metadata(&with_certificate);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !metadata(&[]).status.success(),
        "served without a certificate"
    );
    // The admin CLI with and without its certificate.
    let cli = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args([
                "cluster",
                "status",
                "--brokers",
                &bootstrap,
                "--ssl-ca-location",
                &ca,
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let (certificate, key) = (certificate.to_str().unwrap(), key.to_str().unwrap());
    let out = cli(&[
        "--ssl-certificate-location",
        certificate,
        "--ssl-key-location",
        key,
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !cli(&[]).status.success(),
        "the CLI got in without a certificate"
    );
    assert!(!cli(&["--ssl-key-location", key]).status.success());

    // kafka-python (its default idempotent producer) and confluent-kafka
    // with alice's certificate.
    let settings = format!(
        r#"{{"security_protocol": "SSL", "ssl_cafile": "{ca}",
            "ssl_certfile": "{certificate}", "ssl_keyfile": "{key}"}}"#
    );
    let out =
        support::security::kafka_python_roundtrip(&bootstrap, "mtls-python", &settings, &[], 60);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "consumed 100 in order"
    );
    let settings = format!(
        r#"{{"security.protocol": "SSL", "ssl.ca.location": "{ca}",
            "ssl.certificate.location": "{certificate}", "ssl.key.location": "{key}"}}"#
    );
    let out = support::security::confluent_roundtrip(
        &bootstrap,
        "mtls-confluent",
        "mtls-group",
        &settings,
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "consumed 100 in order"
    );

    let expired = authority.issue(&["bob"], "bob", true);
    let stranger = Authority::new("other-ca").issue(&["eve"], "eve", false);
    let before = counter(&broker, "tls_handshake_failures_total");
    for identity in [None, Some(&expired), Some(&stranger)] {
        let mut stream = tls_connect(broker.address, &authority.pem(), identity);
        assert!(
            ask_api_versions(&mut stream, 2).is_err(),
            "served a client with {:?}",
            identity.map(|(c, _)| &c[..40])
        );
    }
    let started = Instant::now();
    while counter(&broker, "tls_handshake_failures_total") < before + 3
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(counter(&broker, "tls_handshake_failures_total"), before + 3);
    // alice's connection was not disturbed.
    assert!(ask_api_versions(&mut stream, 3).unwrap() > 20);
}

#[test]
fn sighup_reloads_the_certificate_for_new_connections_and_keeps_open_ones() {
    let dir = tempfile::tempdir().unwrap();
    let first = Authority::new("first-ca");
    let files = server_files(dir.path(), &first);
    let broker = start_tls_broker(&dir.path().join("data"), &files, &[]);
    let mut open = tls_connect(broker.address, &first.pem(), None);
    assert!(ask_api_versions(&mut open, 1).unwrap() > 20);

    // A broken file and a SIGHUP: the certificate in use stays.
    std::fs::write(&files.certificate, "not a certificate").unwrap();
    let hangup = |broker: &Broker| {
        let status = Command::new("kill")
            .args(["-HUP", &broker.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    hangup(&broker);
    assert!(wait_logged(&broker, "TLS certificates not reloaded"));
    let mut still_first = tls_connect(broker.address, &first.pem(), None);
    assert!(ask_api_versions(&mut still_first, 2).unwrap() > 20);

    // A certificate from another authority: new connections get it.
    let second = Authority::new("second-ca");
    let (certificate, key) = second.issue(&["127.0.0.1"], "broker", false);
    std::fs::write(&files.key, key).unwrap();
    std::fs::write(&files.certificate, certificate).unwrap();
    hangup(&broker);
    assert!(wait_logged(&broker, "TLS certificates reloaded"));
    let mut trusting_second = tls_connect(broker.address, &second.pem(), None);
    assert!(ask_api_versions(&mut trusting_second, 3).unwrap() > 20);
    let mut trusting_first = tls_connect(broker.address, &first.pem(), None);
    assert!(ask_api_versions(&mut trusting_first, 4).is_err());
    // The connection opened before both reloads answers on.
    assert!(ask_api_versions(&mut open, 5).unwrap() > 20);
    assert!(broker.logged("panicked").is_empty());
}

#[test]
fn a_missing_certificate_file_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let start = |env: &[(&str, PathBuf)]| {
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args([
                "--kafka-listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("BROKER_KAFKA_SECURITY_PROTOCOL", "SSL")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    };
    let out = start(&[
        (
            "BROKER_SSL_CERTIFICATE_LOCATION",
            dir.path().join("absent.pem"),
        ),
        ("BROKER_SSL_KEY_LOCATION", dir.path().join("absent.key")),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ssl_certificate_location") && stderr.contains("absent.pem"),
        "{stderr}"
    );
    // SSL without the files named at all is a configuration error.
    let out = start(&[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ssl_certificate_location"),
        "{out:?}"
    );
}

#[test]
fn the_http_port_speaks_https_with_the_same_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("test-ca");
    let files = server_files(dir.path(), &authority);
    let broker = start_tls_broker(
        &dir.path().join("data"),
        &files,
        &[("BROKER_HTTP_TLS", "true")],
    );
    let curl = |url: String| {
        Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(&files.ca)
            .arg(url)
            .output()
            .unwrap()
    };
    let out = curl(format!("https://127.0.0.1:{}/health", broker.http.port()));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    // Plain HTTP on the HTTPS port gets no answer.
    let out = curl(format!("http://127.0.0.1:{}/health", broker.http.port()));
    assert!(!out.status.success(), "answered plain HTTP: {out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ok"));
    // The API works over it (a topic made through HTTPS).
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(&files.ca)
        .args(["-X", "POST", "-H", "content-type: application/json"])
        .args(["-d", r#"{"name": "made-over-https", "partitions": 2}"#])
        .arg(format!("https://127.0.0.1:{}/topics", broker.http.port()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = curl(format!("https://127.0.0.1:{}/topics", broker.http.port()));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("made-over-https"),
        "{out:?}"
    );
}

#[test]
fn a_three_broker_cluster_replicates_and_fails_over_with_only_tls_kafka_ports() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("cluster-ca");
    let files = server_files(dir.path(), &authority);
    let ca = files.ca.to_str().unwrap().to_string();
    // Client certificates required: the brokers' fetchers present theirs.
    let env = [
        ("BROKER_KAFKA_SECURITY_PROTOCOL", "SSL"),
        (
            "BROKER_SSL_CERTIFICATE_LOCATION",
            files.certificate.to_str().unwrap(),
        ),
        ("BROKER_SSL_KEY_LOCATION", files.key.to_str().unwrap()),
        ("BROKER_SSL_CA_LOCATION", &ca),
        ("BROKER_SSL_CLIENT_AUTH", "required"),
    ];
    let mut cluster = support::cluster::Cluster::new(dir.path(), 3, &env);
    cluster.start();
    let http = cluster.node(1).http;
    let (status, body) = support::http(
        http,
        "POST",
        "/topics",
        r#"{"name": "replicated", "partitions": 1, "replication_factor": 3}"#,
    );
    assert_eq!(status, 201, "{body}");

    let alice = authority.issue(&["alice"], "alice", false);
    let certificate = write(dir.path(), "alice.pem", &alice.0);
    let key = write(dir.path(), "alice.key", &alice.1);
    let settings = [
        "security.protocol=ssl".to_string(),
        format!("ssl.ca.location={ca}"),
        format!("ssl.certificate.location={}", certificate.display()),
        format!("ssl.key.location={}", key.display()),
        "acks=all".to_string(),
    ];
    let run = |bootstrap: &str, args: &[&str], input: Option<&str>| {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend(["-b".to_string(), bootstrap.to_string()]);
        for setting in &settings {
            all.extend(["-X".to_string(), setting.clone()]);
        }
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        kcat(&all, input)
    };
    let everyone = cluster.bootstrap();
    let first: String = (0..200).map(|i| format!("m{i}\n")).collect();
    let out = run(
        &everyone,
        &["-P", "-t", "replicated", "-p", "0"],
        Some(&first),
    );
    assert!(out.status.success(), "{out:?}");

    // acks=all with all three in the ISR: the produce above was answered
    // only once both followers had fetched it over TLS (a follower that
    // could not would have held it until the ISR shrank). The ISR is
    // still whole.
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
    // No plaintext Kafka port anywhere.
    for address in cluster.addresses() {
        let out = kcat(&["-L", "-b", &address.to_string(), "-m", "3"], None);
        assert!(!out.status.success(), "plaintext served at {address}");
    }

    // The leader dies; a follower takes over with everything acknowledged.
    cluster.kill9(leader);
    let survivors: Vec<String> = (1..=3)
        .filter(|id| *id != leader)
        .map(|id| cluster.node(id).kafka.to_string())
        .collect();
    let survivors = survivors.join(",");
    let second: String = (200..400).map(|i| format!("m{i}\n")).collect();
    let out = run(
        &survivors,
        &["-P", "-t", "replicated", "-p", "0"],
        Some(&second),
    );
    assert!(out.status.success(), "{out:?}");
    let out = run(
        &survivors,
        &["-C", "-t", "replicated", "-p", "0", "-o", "beginning", "-e"],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let expected: String = (0..400).map(|i| format!("m{i}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn loadgen_verifies_every_message_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("test-ca");
    let files = server_files(dir.path(), &authority);
    let broker = start_tls_broker(&dir.path().join("data"), &files, &[]);
    let line = format!(
        "verify --bootstrap {} --ssl-ca-location {} --topic over-tls --partitions 2 --producers 1 \
         --consumers 1 --keys 50 --rate 5000 --duration 2 --warmup 1 --no-pin",
        broker.bootstrap(),
        files.ca.display()
    );
    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
    let options = loadgen::options::parse(&args).unwrap();
    let outcome = loadgen::run::run_load(options).expect("a clean verify run over TLS");
    let verdict = outcome.verdicts[0];
    assert_eq!((verdict.lost, verdict.out_of_order), (0, 0), "{verdict:?}");
    assert!(verdict.checked >= 10_000, "{} checked", verdict.checked);
    // Without the CA, loadgen cannot get in.
    let plain: Vec<String> = format!(
        "produce --bootstrap {} --topic over-tls --messages 10 --no-pin",
        broker.bootstrap()
    )
    .split_whitespace()
    .map(String::from)
    .collect();
    assert!(loadgen::run::run_load(loadgen::options::parse(&plain).unwrap()).is_err());
}

#[test]
fn a_broker_certificate_without_the_brokers_ip_is_a_logged_warning_not_a_silent_retry() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new("cluster-ca");
    // Named for "localhost" only: brokers reach each other by IP.
    let (certificate, key) = authority.issue(&["localhost"], "broker", false);
    let ca = write(dir.path(), "ca.pem", &authority.pem());
    let certificate = write(dir.path(), "server.pem", &certificate);
    let key = write(dir.path(), "server.key", &key);
    let env = [
        ("BROKER_KAFKA_SECURITY_PROTOCOL", "SSL"),
        (
            "BROKER_SSL_CERTIFICATE_LOCATION",
            certificate.to_str().unwrap(),
        ),
        ("BROKER_SSL_KEY_LOCATION", key.to_str().unwrap()),
        ("BROKER_SSL_CA_LOCATION", ca.to_str().unwrap()),
    ];
    let mut cluster = support::cluster::Cluster::new(dir.path(), 2, &env);
    cluster.start();
    let (status, body) = support::http(
        cluster.node(1).http,
        "POST",
        "/topics",
        r#"{"name": "unreachable", "partitions": 2, "replication_factor": 2}"#,
    );
    assert_eq!(status, 201, "{body}");
    // Each broker follows one partition led by the other, and says why it
    // cannot.
    let started = Instant::now();
    let warned = |id: i32| {
        std::fs::read_to_string(cluster.log_path(id))
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("cannot reach the leader: TLS refused"))
    };
    while !(warned(1) || warned(2)) && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        warned(1) || warned(2),
        "no broker warned about the refused TLS"
    );
}

#[test]
fn a_reload_whose_peer_ca_file_is_broken_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = Authority::new("first-ca");
    let files = server_files(dir.path(), &first);
    // With a CA file the broker also keeps what it connects to other
    // brokers with; a SIGHUP reads that too, all or nothing.
    let ca = files.ca.to_str().unwrap().to_string();
    let broker = start_tls_broker(
        &dir.path().join("data"),
        &files,
        &[("BROKER_SSL_CA_LOCATION", &ca)],
    );
    let second = Authority::new("second-ca");
    let (certificate, key) = second.issue(&["127.0.0.1"], "broker", false);
    std::fs::write(&files.key, key).unwrap();
    std::fs::write(&files.certificate, certificate).unwrap();
    std::fs::write(&files.ca, "not a CA").unwrap();
    let status = Command::new("kill")
        .args(["-HUP", &broker.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(wait_logged(&broker, "TLS certificates not reloaded"));
    // The new (valid) server certificate was not put in use either.
    let mut trusting_first = tls_connect(broker.address, &first.pem(), None);
    assert!(ask_api_versions(&mut trusting_first, 1).unwrap() > 20);
    let mut trusting_second = tls_connect(broker.address, &second.pem(), None);
    assert!(ask_api_versions(&mut trusting_second, 2).is_err());
}
