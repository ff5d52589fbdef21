//! Records from a shell, as rpk and kcat users work: `broker topic
//! produce` reads standard input (keys from a separator, headers from
//! flags), `broker topic consume` prints from a start to the end, a count
//! or, following, as records arrive; `--format json` prints what scripts
//! parse (JSON lines for records, documents for list and describe), and a
//! command without a JSON form refuses the flag (exit 2).

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{start_broker, Broker};

fn broker(target: &Broker, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .args(["--brokers", &target.bootstrap()])
        .output()
        .expect("the broker binary runs")
}

fn ok(target: &Broker, args: &[&str]) -> String {
    let out = broker(target, args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `topic produce` with `input` on standard input.
fn produce(target: &Broker, args: &[&str], input: &str) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(["topic", "produce"])
        .args(args)
        .args(["--brokers", &target.bootstrap()]);
    let out = support::output_with_input(&mut command, input);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    (text.lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn lines_produced_from_a_shell_are_consumed_with_keys_headers_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let target = start_broker(dir.path());
    ok(&target, &["topic", "create", "shell", "--partitions", "1"]);
    let landed = produce(
        &target,
        &[
            "shell",
            "--key-separator",
            ":",
            "--header",
            "source=test",
            "--format",
            "json",
        ],
        "k1:first\nk2:second:with colon\nno key here\n",
    );
    let landed = json_lines(&landed);
    let offsets: Vec<i64> = landed
        .iter()
        .map(|l| l["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 1, 2]);
    assert!(landed
        .iter()
        .all(|l| l["topic"] == "shell" && l["partition"] == 0));
    let table = produce(&target, &["shell", "--key", "fixed"], "fourth\n");
    assert!(
        table.contains("produced to partition 0 at offset 3"),
        "{table}"
    );
    assert!(table.contains("produced 1 records to shell"), "{table}");

    let records = json_lines(&ok(
        &target,
        &["topic", "consume", "shell", "--format", "json"],
    ));
    let seen: Vec<(Value, Value)> = (records.iter())
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("k1".into(), "first".into()),
            ("k2".into(), "second:with colon".into()),
            (Value::Null, "no key here".into()),
            ("fixed".into(), "fourth".into()),
        ]
    );
    assert_eq!(records[0]["headers"][0]["key"], "source");
    assert_eq!(records[0]["headers"][0]["value"], "test");
    assert_eq!(records[3]["headers"], serde_json::json!([]));
    assert!(records[0]["timestamp"].as_i64().unwrap() > 1_700_000_000_000);

    // A count, an offset, the end, a time after every record.
    let two = ok(&target, &["topic", "consume", "shell", "--num", "2"]);
    assert_eq!(two.lines().count(), 1 + 2, "a header and two rows:\n{two}");
    assert!(
        two.lines().nth(2).unwrap().contains("second:with colon"),
        "{two}"
    );
    let from = json_lines(&ok(
        &target,
        &[
            "topic", "consume", "shell", "--offset", "2", "--format", "json",
        ],
    ));
    assert_eq!(
        from.iter()
            .map(|r| r["offset"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [2, 3]
    );
    let end = ok(
        &target,
        &[
            "topic", "consume", "shell", "--offset", "end", "--format", "json",
        ],
    );
    assert_eq!(end, "");
    let later = ok(
        &target,
        &[
            "topic",
            "consume",
            "shell",
            "--from-time",
            "2100-01-01T00:00:00Z",
            "--format",
            "json",
        ],
    );
    assert_eq!(later, "");
}

#[test]
fn a_following_consumer_prints_records_produced_after_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let target = start_broker(dir.path());
    ok(&target, &["topic", "create", "live", "--partitions", "2"]);
    let follower = Command::new("timeout")
        .args([
            "60",
            env!("CARGO_BIN_EXE_broker"),
            "topic",
            "consume",
            "live",
        ])
        .args(["--follow", "--num", "3", "--format", "json"])
        .args(["--brokers", &target.bootstrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The topic is empty: without --follow it would stop at once. The
    // records come a while after it started waiting (from the start:
    // whenever it connects, it sees all three).
    std::thread::sleep(Duration::from_secs(1));
    produce(
        &target,
        &["live", "--key-separator", "="],
        "a=1\nb=2\nc=3\n",
    );
    let out = follower.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let records = json_lines(&String::from_utf8(out.stdout).unwrap());
    let mut values: Vec<&str> = records
        .iter()
        .map(|r| r["value"].as_str().unwrap())
        .collect();
    values.sort_unstable();
    assert_eq!(values, ["1", "2", "3"]);
}

#[test]
fn list_and_describe_print_json_and_other_commands_refuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let target = start_broker(dir.path());
    ok(
        &target,
        &[
            "topic",
            "create",
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=60000",
        ],
    );
    let listed: Value =
        serde_json::from_str(&ok(&target, &["topic", "list", "--format", "json"])).unwrap();
    let orders = (listed.as_array().unwrap().iter())
        .find(|t| t["name"] == "orders")
        .expect("listed");
    assert_eq!(orders["partitions"], 3);
    assert_eq!(orders["id"].as_str().unwrap().len(), 36, "a UUID");
    let described: Value = serde_json::from_str(&ok(
        &target,
        &["topic", "describe", "orders", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(described["partitions"][1]["partition"], 1);
    assert_eq!(
        described["partitions"][1]["replicas"],
        serde_json::json!([1])
    );
    let retention = (described["configs"].as_array().unwrap().iter())
        .find(|c| c["name"] == "retention.ms")
        .expect("described");
    assert_eq!(
        (&retention["value"], &retention["default"]),
        (&"60000".into(), &false.into())
    );

    let refused = broker(&target, &["topic", "create", "more", "--format", "json"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--format json"));
    let missing = broker(&target, &["topic", "consume", "orders", "--partition", "7"]);
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    let words = String::from_utf8_lossy(&missing.stderr);
    assert!(
        words.contains("topic 'orders' partition 7 does not exist (UNKNOWN_TOPIC_OR_PARTITION): it has 3 partitions"),
        "{words}"
    );
}

/// Every list and describe of the other command families prints a JSON
/// document a script can read (the fields docs/operations.md names).
#[test]
fn every_family_lists_and_describes_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let target = start_broker(dir.path());
    let json = |args: &[&str]| -> Value {
        let mut args = args.to_vec();
        args.extend(["--format", "json"]);
        let text = ok(&target, &args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}\n{text}"))
    };
    ok(&target, &["topic", "create", "paid", "--partitions", "2"]);
    produce(
        &target,
        &["paid", "--key-separator", ":"],
        "a:1\nb:2\nc:3\n",
    );
    // A group with commits on both partitions (the project's client).
    let address = target.address;
    support::on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "shell-test");
        let offsets = std::collections::BTreeMap::from([
            (("paid".to_string(), 0), 0),
            (("paid".to_string(), 1), 0),
        ]);
        cluster.commit_offsets("billing", &offsets).await.unwrap();
    });
    let groups = json(&["group", "list"]);
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["group"] == "billing"),
        "{groups}"
    );
    let billing = json(&["group", "describe", "billing"]);
    assert_eq!(
        (&billing["group"], &billing["type"]),
        (&"billing".into(), &"classic".into())
    );
    // Committed at 0 on both partitions: each one's lag is its end, and
    // the ends hold the three records.
    let rows = billing["partitions"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{billing}");
    for row in rows {
        assert_eq!(row["committed"], 0, "{billing}");
        assert_eq!(row["lag"], row["log_end"], "{billing}");
    }
    let ends: i64 = rows.iter().map(|r| r["log_end"].as_i64().unwrap()).sum();
    assert_eq!(ends, 3, "{billing}");
    assert_eq!(json(&["share-group", "list"]), serde_json::json!([]));

    let status = json(&["cluster", "status"]);
    assert_eq!(status["brokers"][0]["id"], 1, "{status}");
    assert_eq!(
        status["quorum"]["voters"],
        serde_json::json!([1]),
        "{status}"
    );
    let producers = json(&["topic", "describe-producers", "paid"]);
    let ids: Vec<&Value> = (producers.as_array().unwrap().iter())
        .flat_map(|p| p["producers"].as_array().unwrap())
        .map(|p| &p["producer_id"])
        .collect();
    assert!(
        !ids.is_empty(),
        "the CLI's producer is idempotent: {producers}"
    );
    assert_eq!(json(&["topic", "reassignments"]), serde_json::json!([]));

    let created = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["user", "create", "alice", "--brokers", &target.bootstrap()])
        .env("BROKER_USER_PASSWORD", "s3cret")
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let users = json(&["user", "list"]);
    assert_eq!(users[0]["user"], "alice", "{users}");
    assert!(
        users[0]["mechanisms"][0]["iterations"].as_i64() > Some(0),
        "{users}"
    );
    ok(
        &target,
        &[
            "acl",
            "create",
            "--allow",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "paid",
        ],
    );
    let acls = json(&["acl", "list"]);
    let acl = &acls[0];
    assert_eq!(
        (&acl["permission"], &acl["operation"]),
        (&"ALLOW".into(), &"Read".into()),
        "{acls}"
    );
    assert_eq!(
        (&acl["resource_name"], &acl["principal"]),
        (&"paid".into(), &"User:alice".into())
    );
    ok(
        &target,
        &[
            "quota",
            "set",
            "--user",
            "alice",
            "--producer-byte-rate",
            "1048576",
        ],
    );
    let quotas = json(&["quota", "list"]);
    assert_eq!(quotas[0]["entity"]["user"], "alice", "{quotas}");
    assert_eq!(
        quotas[0]["quotas"]["producer_byte_rate"], 1048576.0,
        "{quotas}"
    );
    assert_eq!(json(&["txn", "list"]), serde_json::json!([]));
    let unknown = json(&["txn", "describe", "nosuch"]);
    assert_eq!(unknown[0]["transactional_id"], "nosuch");
    assert!(
        unknown[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("TRANSACTIONAL_ID_NOT_FOUND"),
        "{unknown}"
    );
}

/// A line typed into `topic produce` (standard input still open) is sent
/// and acknowledged at once, not when input ends; a `topic consume
/// --follow` whose reader went away (`| head -1`) ends.
#[test]
fn a_typed_line_is_produced_at_once_and_a_closed_reader_ends_consume() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let target = start_broker(dir.path());
    ok(&target, &["topic", "create", "typed", "--partitions", "1"]);
    let mut producer = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args([
            "topic",
            "produce",
            "typed",
            "--brokers",
            &target.bootstrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = producer.stdin.take().unwrap();
    let mut answers = BufReader::new(producer.stdout.take().unwrap());
    for (i, line) in ["first", "second"].iter().enumerate() {
        writeln!(input, "{line}").unwrap();
        input.flush().unwrap();
        // Read while input stays open (the test's own timeout bounds it).
        let mut answer = String::new();
        answers.read_line(&mut answer).unwrap();
        assert_eq!(
            answer.trim(),
            format!("produced to partition 0 at offset {i}")
        );
    }
    drop(input);
    assert!(producer.wait().unwrap().success());

    let mut follower = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "consume", "typed", "--follow", "--format", "json"])
        .args(["--brokers", &target.bootstrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut records = BufReader::new(follower.stdout.take().unwrap());
    let mut first = String::new();
    records.read_line(&mut first).unwrap();
    assert!(first.contains("\"value\":\"first\""), "{first}");
    drop(records);
    // More records, so it writes into the closed pipe and ends.
    produce(&target, &["typed"], "third\nfourth\n");
    let started = std::time::Instant::now();
    while follower.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "consume --follow kept running with no reader"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
