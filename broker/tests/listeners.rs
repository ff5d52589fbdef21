//! Several Kafka listeners per broker (Kafka's `listeners`,
//! `advertised_listeners`, `listener_security_protocol_map`,
//! `inter_broker_listener_name`): each listener speaks its own protocol,
//! and a client is told the brokers' addresses on the listener it came in
//! on, so a client of a SASL_SSL listener never lands on a plaintext one
//! (its TLS handshake there would fail). Checked with kcat (librdkafka),
//! kafka-python's default idempotent producer and the project's CLI, on
//! one broker and on a 3-broker cluster replicating over its internal
//! listener while clients use the external one.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::security::{kcat, leader_and_isr, server_files, wait_logged, Authority, Files};
use support::{cli, start_broker_on, Broker};

const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "admin-secret-1";

/// INTERNAL in the clear, EXTERNAL with SASL over TLS (SCRAM).
fn two_listener_env(files: &Files) -> Vec<(&'static str, String)> {
    vec![
        (
            "BROKER_LISTENER_SECURITY_PROTOCOL_MAP",
            "[INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL]".into(),
        ),
        ("BROKER_INTER_BROKER_LISTENER_NAME", "INTERNAL".into()),
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
            "[SCRAM-SHA-512,SCRAM-SHA-256]".into(),
        ),
        // Basic over plain HTTP would be refused by nobody here; the
        // tests read the HTTP API without a user.
        ("BROKER_HTTP_AUTHENTICATION", "none".into()),
    ]
}

/// Where `broker` bound listener `name`, from its "listening" line.
fn listener_of(broker: &Broker, name: &str) -> SocketAddr {
    // The start returns as the line is read, maybe before it is kept.
    assert!(wait_logged(broker, "listeners="), "no listening line");
    let lines = broker.logged("listeners=");
    let line = lines.last().expect("a listening line");
    let named = line.split("listeners=").nth(1).unwrap();
    named
        .split_whitespace()
        .next()
        .unwrap()
        .split(',')
        .find_map(|entry| entry.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no listener {name} in {line}"))
        .parse()
        .unwrap()
}

/// kcat's metadata listing of `bootstrap`, with extra `-X` settings.
fn kcat_list(bootstrap: &str, settings: &[String]) -> std::process::Output {
    let mut args = vec!["-L", "-m", "5", "-b", bootstrap];
    for setting in settings {
        args.extend(["-X", setting]);
    }
    kcat(&args, None)
}

/// librdkafka's SASL_SSL settings as `user`.
fn sasl_ssl(ca: &str, user: &str, password: &str) -> Vec<String> {
    vec![
        "security.protocol=sasl_ssl".into(),
        format!("ssl.ca.location={ca}"),
        "sasl.mechanisms=SCRAM-SHA-512".into(),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ]
}

/// kafka-python's default producer (idempotent, acks=all) and a consumer
/// over SASL_SSL with SCRAM-SHA-512 as alice: 100 values in order.
fn python_roundtrip(bootstrap: &str, ca: &str, topic: &str) {
    let settings = format!(
        r#"{{"security_protocol": "SASL_SSL", "ssl_cafile": "{ca}",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-pw"}}"#
    );
    let out = support::security::kafka_python_roundtrip(bootstrap, topic, &settings, &[], 90);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "consumed 100 in order"
    );
}

#[test]
fn each_listener_speaks_its_protocol_and_tells_clients_its_own_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let files = server_files(dir.path(), &Authority::new("listeners-ca"));
    let ca = files.ca.display().to_string();
    // EXTERNAL is told as localhost (the certificate names it), on a port
    // known before the start.
    let external_port = support::fixed_port();
    let mut env = two_listener_env(&files);
    env.push((
        "BROKER_LISTENERS",
        format!("[INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:{external_port}]"),
    ));
    env.push((
        "BROKER_ADVERTISED_LISTENERS",
        format!("[EXTERNAL://localhost:{external_port}]"),
    ));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let broker = start_broker_on(&dir.path().join("data"), &[], &env);
    let internal = listener_of(&broker, "INTERNAL");
    assert_eq!(broker.address, internal, "kafka= names the first listener");
    let external = format!("127.0.0.1:{external_port}");

    // INTERNAL: plaintext, no login; brokers told at INTERNAL's address.
    let listed = kcat_list(&internal.to_string(), &[]);
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(listed.status.success(), "{listed:?}");
    assert!(text.contains(&format!("broker 1 at {internal}")), "{text}");
    cli(
        &internal.to_string(),
        &["user", "create", "alice", "--password", "alice-pw"],
    );
    cli(
        &internal.to_string(),
        &["topic", "create", "outside", "--partitions", "1"],
    );

    // EXTERNAL: only a SASL login over TLS is served; brokers are told
    // at EXTERNAL's advertised address.
    let listed = kcat_list(&external, &sasl_ssl(&ca, "alice", "alice-pw"));
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        text.contains(&format!("broker 1 at localhost:{external_port}")),
        "{text}"
    );
    assert!(!text.contains(&internal.to_string()), "{text}");
    let plain = kcat_list(&external, &[]);
    assert!(!plain.status.success(), "plaintext served on EXTERNAL");
    let wrong = kcat_list(&external, &sasl_ssl(&ca, "alice", "wrong"));
    assert!(!wrong.status.success(), "a wrong password served");

    // A client bootstrapped at 127.0.0.1 is sent on to localhost: on
    // INTERNAL's port its TLS handshake would fail.
    python_roundtrip(&external, &ca, "outside");
    // What it wrote is read on INTERNAL too.
    let consume = [
        "-C",
        "-t",
        "outside",
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
        "-q",
        "-b",
    ];
    let mut args = consume.to_vec();
    let internal_text = internal.to_string();
    args.push(&internal_text);
    let out = kcat(&args, None);
    let values = String::from_utf8_lossy(&out.stdout);
    assert_eq!(values.lines().count(), 100, "{out:?}");
    assert_eq!(values.lines().next(), Some("value-0"));
}

#[test]
fn a_cluster_replicates_on_its_internal_listener_and_serves_clients_on_the_external_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = server_files(dir.path(), &Authority::new("listeners-ca"));
    let ca = files.ca.display().to_string();
    let env = two_listener_env(&files);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut cluster = support::cluster::Cluster::with_two_listeners(dir.path(), 3, &env);
    cluster.start();
    let internal = cluster.node(1).kafka.to_string();
    cli(
        &internal,
        &["user", "create", "alice", "--password", "alice-pw"],
    );
    cli(
        &internal,
        &[
            "topic",
            "create",
            "replicated",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        ],
    );
    // Replication runs on INTERNAL: every replica joins the ISR.
    let http = cluster.node(1).http;
    let started = Instant::now();
    let leader = loop {
        match leader_and_isr(http, "replicated") {
            Some((leader, 3)) => break leader,
            _ => assert!(
                started.elapsed() < Duration::from_secs(60),
                "no full ISR: {:?}",
                leader_and_isr(http, "replicated")
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Each listener lists every broker at its own address.
    let external = |id: i32| cluster.node(id).external.unwrap().to_string();
    let listed = kcat_list(&internal, &[]);
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    let listed_external = kcat_list(&external(1), &sasl_ssl(&ca, "alice", "alice-pw"));
    let text_external = String::from_utf8_lossy(&listed_external.stdout).to_string();
    for id in 1..=3 {
        let node = cluster.node(id);
        assert!(
            text.contains(&format!("broker {id} at {}", node.kafka)),
            "{text}"
        );
        assert!(
            text_external.contains(&format!("broker {id} at {}", external(id))),
            "{text_external}"
        );
    }
    // A client of EXTERNAL on a broker that does not lead is sent to the
    // leader's EXTERNAL port, and writes and reads there.
    let elsewhere = (1..=3).find(|id| *id != leader).unwrap();
    python_roundtrip(&external(elsewhere), &ca, "replicated");
    let started = Instant::now();
    while leader_and_isr(http, "replicated") != Some((leader, 3)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the ISR did not stay full"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
