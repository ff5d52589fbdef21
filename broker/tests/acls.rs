//! ACLs (authorizer = "acl"): a user allowed to write one topic, read a
//! prefix of topics and one group is refused everything else with Kafka's
//! codes (librdkafka's kcat, kafka-python with its default idempotent
//! producer, the admin CLI, the HTTP API); a deny wins over an allow;
//! topics the user may not describe are left out of Metadata; ACLs
//! survive a restart (through a metadata snapshot).

mod support;

use std::path::Path;
use std::process::Command;

use support::security::kcat;
use support::{start_broker_with, Broker};

const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "admin-secret-1";
const ALICE_PASSWORD: &str = "alice-pw";

fn start(data: &Path) -> Broker {
    let broker_user = format!("{ADMIN}:{ADMIN_PASSWORD}");
    let env = [
        ("BROKER_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT"),
        ("BROKER_SASL_BROKER_USER", broker_user.as_str()),
        ("BROKER_AUTHORIZER", "acl"),
        ("BROKER_AUTO_CREATE_TOPICS", "false"),
        ("BROKER_METADATA_SNAPSHOT_EVERY_ENTRIES", "4"),
    ];
    start_broker_with(data, &env)
}

/// The admin CLI as `user`.
fn cli(bootstrap: &str, (user, password): (&str, &str), args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", bootstrap])
        .args(["--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user])
        .env("BROKER_SASL_PASSWORD", password)
        .output()
        .unwrap()
}

/// kcat as `user`.
fn kcat_as(
    bootstrap: &str,
    (user, password): (&str, &str),
    args: &[&str],
    input: Option<&str>,
) -> std::process::Output {
    let settings = [
        "security.protocol=sasl_plaintext".to_string(),
        "sasl.mechanisms=SCRAM-SHA-512".to_string(),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ];
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["-b".to_string(), bootstrap.to_string()]);
    for setting in settings {
        all.extend(["-X".to_string(), setting]);
    }
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    kcat(&all, input)
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{out:?}");
    text(&out)
}

const TOPIC_DENIED: i16 = 29;

/// The codes of a consumer group heartbeat and of a share group heartbeat
/// of alice in group billing, subscribed to `topic`.
fn subscribed_as_alice(address: std::net::SocketAddr, topic: &str) -> (i16, i16) {
    use kafka_protocol::messages::{
        ConsumerGroupHeartbeatRequest, GroupId, ShareGroupHeartbeatRequest, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let topic = TopicName(StrBytes::from_string(topic.to_string()));
    let group = GroupId(StrBytes::from_static_str("billing"));
    support::on_glommio(async move {
        let security = client::security::Security {
            tls: None,
            sasl: Some(client::security::SaslLogin {
                mechanism: client::security::SaslMechanism::Scram(client::scram::Mechanism::Sha256),
                user: "alice".into(),
                password: ALICE_PASSWORD.into(),
            }),
        };
        let connect = client::connection::Connection::connect_with(address, "alice", &security);
        let mut connection = connect.await.unwrap();
        let member = StrBytes::from_static_str("alice-member-0000000000");
        let consumer = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group.clone())
            .with_member_id(member.clone())
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![topic.clone()]))
            .with_topic_partitions(Some(vec![]));
        let consumer = connection.call(&consumer, 1).await.unwrap();
        // (billing is a consumer group now if that one joined: the share
        // heartbeat goes to a group of its own.)
        let share = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("billing-queue")))
            .with_member_id(member)
            .with_subscribed_topic_names(Some(vec![topic]));
        let share = connection.call(&share, 1).await.unwrap();
        (consumer.error_code, share.error_code)
    })
}

#[test]
fn a_user_gets_what_its_acls_allow_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = start(&data);
    let bootstrap = broker.bootstrap();
    let admin = (ADMIN, ADMIN_PASSWORD);
    let alice = ("alice", ALICE_PASSWORD);
    let as_admin = |args: &[&str]| ok(cli(&bootstrap, admin, args));
    as_admin(&["user", "create", "alice", "--password", ALICE_PASSWORD]);
    for topic in ["orders", "payments", "logs-app", "logs-secret"] {
        as_admin(&["topic", "create", topic, "--partitions", "1"]);
    }
    let acl = |args: &[&str]| {
        let mut all = vec!["acl", "create", "--allow", "User:alice"];
        all.extend_from_slice(args);
        as_admin(&all)
    };
    acl(&["--operation", "Write", "--topic", "orders"]);
    acl(&["--operation", "Read", "--topic", "logs-", "--prefixed"]);
    acl(&["--operation", "Read", "--group", "billing"]);
    as_admin(&[
        "acl",
        "create",
        "--deny",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "logs-secret",
    ]);
    let listed = as_admin(&["acl", "list", "--principal", "User:alice"]);
    assert_eq!(
        listed.lines().count(),
        5,
        "a header and four ACLs:\n{listed}"
    );
    assert!(
        listed.contains("DENY") && listed.contains("prefixed"),
        "{listed}"
    );

    // The admin (the broker's own user, a super user) writes the logs.
    let out = kcat_as(&bootstrap, admin, &["-P", "-t", "logs-app"], Some("a\nb\n"));
    ok(out);
    let out = kcat_as(&bootstrap, admin, &["-P", "-t", "logs-secret"], Some("s\n"));
    ok(out);

    // Allowed: write orders, read logs-app in group billing.
    ok(kcat_as(
        &bootstrap,
        alice,
        &["-P", "-t", "orders"],
        Some("o1\no2\n"),
    ));
    let group_read = [
        "-G",
        "billing",
        "-X",
        "auto.offset.reset=earliest",
        "-e",
        "logs-app",
    ];
    let out = kcat_as(&bootstrap, alice, &group_read, None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\nb\n", "{out:?}");

    // Refused: writing payments, reading orders (WRITE only), reading
    // logs-secret (the deny wins over the prefixed allow).
    let out = kcat_as(&bootstrap, alice, &["-P", "-t", "payments"], Some("x\n"));
    assert!(text(&out).contains("authorization failed"), "{out:?}");
    for topic in ["orders", "logs-secret"] {
        let out = kcat_as(
            &bootstrap,
            alice,
            &["-C", "-t", topic, "-o", "beginning", "-e"],
            None,
        );
        assert!(
            text(&out).to_lowercase().contains("authorization failed"),
            "{topic}: {out:?}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains('s'),
            "{out:?}"
        );
    }

    // Metadata: only what alice may describe.
    let listing = ok(kcat_as(&bootstrap, alice, &["-L"], None));
    assert!(
        listing.contains("\"orders\"") && listing.contains("\"logs-app\""),
        "{listing}"
    );
    assert!(!listing.contains("\"payments\""), "{listing}");

    // A group alice may not read; admin calls.
    let out = kcat_as(&bootstrap, alice, &["-G", "ops", "logs-app", "-e"], None);
    assert!(
        text(&out).contains("not authorized to describe this group"),
        "{out:?}"
    );
    // A group member's subscription: a heartbeat naming a topic alice may
    // not describe is refused (as Kafka), of both group protocols.
    acl(&["--operation", "Read", "--group", "billing-queue"]);
    assert_eq!(
        subscribed_as_alice(broker.address, "payments"),
        (TOPIC_DENIED, TOPIC_DENIED)
    );
    assert_eq!(subscribed_as_alice(broker.address, "logs-app"), (0, 0));
    // The HTTP API checks the same ACLs, as the logged-in user: the
    // status of a call as alice.
    let http_status = |method: &str, path: &str, body: &str| {
        let out = Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
            ])
            .args(["-X", method, "-u", &format!("alice:{ALICE_PASSWORD}")])
            .args(["-d", body])
            .arg(format!("http://{}{path}", broker.http))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let http_produce = |topic: &str| {
        let path = format!("/topics/{topic}/messages?encoding=text");
        http_status("POST", &path, r#"{"value":"over http"}"#)
    };
    assert_eq!(http_produce("orders"), "200");
    assert_eq!(http_produce("payments"), "403");
    let listed = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-u",
            &format!("alice:{ALICE_PASSWORD}"),
        ])
        .arg(format!("http://{}/topics", broker.http))
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    // A group alice may read does not open a topic she may not: polling
    // or committing payments through the HTTP group calls is refused.
    let poll = "/consumer-groups/billing/poll?topic=payments&partition=0&offset=0&max_wait_ms=0";
    assert_eq!(http_status("GET", poll, ""), "403");
    let commit = r#"{"consumer_id":"c","member_id":"m","generation_id":1,
        "offsets":[{"topic":"payments","partition":0,"offset":1}]}"#;
    assert_eq!(
        http_status("POST", "/consumer-groups/billing/commit", commit),
        "403"
    );
    assert!(
        listed.contains("\"orders\"") && !listed.contains("payments"),
        "{listed}"
    );

    // Admin calls: TOPIC_AUTHORIZATION_FAILED (29) for topics,
    // CLUSTER_AUTHORIZATION_FAILED (31) for users and ACLs.
    for (args, code) in [
        (
            &["topic", "create", "mine"][..],
            "(TOPIC_AUTHORIZATION_FAILED)",
        ),
        (
            &["topic", "delete", "orders"],
            "(TOPIC_AUTHORIZATION_FAILED)",
        ),
        (&["user", "list"], "(CLUSTER_AUTHORIZATION_FAILED)"),
        (&["acl", "list"], "(CLUSTER_AUTHORIZATION_FAILED)"),
        (
            &["user", "create", "eve", "--password", "x"],
            "(CLUSTER_AUTHORIZATION_FAILED)",
        ),
        (
            &["topic", "alter", "orders", "--config", "retention.ms=1000"],
            "(TOPIC_AUTHORIZATION_FAILED)",
        ),
        (
            &["group", "delete", "billing"],
            "(GROUP_AUTHORIZATION_FAILED)",
        ),
    ] {
        let out = cli(&bootstrap, alice, args);
        assert!(!out.status.success(), "alice ran {args:?}: {out:?}");
        assert!(text(&out).contains(code), "{args:?}: {out:?}");
    }

    // Groups alice may describe (READ implies DESCRIBE) are listed.
    let groups = ok(cli(&bootstrap, alice, &["group", "list"]));
    assert!(groups.contains("billing"), "{groups}");

    // kafka-python's default producer (idempotent: InitProducerId needs
    // WRITE on some topic) writes orders.
    let settings = format!(
        r#"{{"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice", "sasl_plain_password": "{ALICE_PASSWORD}"}}"#
    );
    let out = support::security::kafka_python_roundtrip(
        &bootstrap,
        "orders",
        &settings,
        &["--produce-only"],
        60,
    );
    assert!(out.status.success(), "{out:?}");

    // After a restart (the ACLs come back from the metadata snapshot).
    broker.stop();
    let broker = start(&data);
    let bootstrap = broker.bootstrap();
    ok(kcat_as(
        &bootstrap,
        alice,
        &["-P", "-t", "orders"],
        Some("o3\n"),
    ));
    let out = kcat_as(&bootstrap, alice, &["-P", "-t", "payments"], Some("x\n"));
    assert!(text(&out).contains("authorization failed"), "{out:?}");
    // Deleting the allow takes the write away.
    ok(cli(
        &bootstrap,
        admin,
        &[
            "acl",
            "delete",
            "--allow",
            "User:alice",
            "--operation",
            "Write",
            "--topic",
            "orders",
        ],
    ));
    let out = kcat_as(&bootstrap, alice, &["-P", "-t", "orders"], Some("o4\n"));
    assert!(text(&out).contains("authorization failed"), "{out:?}");
}
