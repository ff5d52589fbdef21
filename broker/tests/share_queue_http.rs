//! The HTTP queue API over real HTTP (docs/http-api.md, "Queues"):
//! receive with a visibility timeout, acknowledge by receipt (accept,
//! reject, release, renew), a message whose visibility passed comes back
//! with its delivery count up, stale receipts and bad requests refused.

mod support;

use serde_json::Value;
use support::{http, start_broker};

/// A request's status and JSON body.
fn call(address: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let (status, text) = http(address, method, path, body);
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, json)
}

/// The (offset, delivery count, value, receipt) of a receive's messages.
fn messages(body: &Value) -> Vec<(i64, i64, String, String)> {
    let list = body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    list.iter()
        .map(|m| {
            (
                m["offset"].as_i64().unwrap(),
                m["delivery_count"].as_i64().unwrap(),
                m["value"].as_str().unwrap().to_string(),
                m["receipt"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Acknowledges `receipts` with `kind`; each receipt's error code.
fn ack(address: std::net::SocketAddr, receipts: &[&str], kind: &str) -> Vec<i64> {
    let body = serde_json::json!({"topic": "tasks", "receipts": receipts, "type": kind});
    let (status, answer) = call(
        address,
        "POST",
        "/share-groups/workers/ack",
        &body.to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().unwrap();
    results
        .iter()
        .map(|r| r["error_code"].as_i64().unwrap())
        .collect()
}

#[test]
fn messages_are_received_with_receipts_acknowledged_and_come_back_after_their_visibility() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let api = broker.http;
    let (status, _) = call(
        api,
        "POST",
        "/topics",
        r#"{"name": "tasks", "partitions": 1}"#,
    );
    assert_eq!(status, 201);
    let receive = |query: &str| {
        let path = format!("/share-groups/workers/receive?topic=tasks&encoding=text&{query}");
        let (status, body) = call(api, "POST", &path, "");
        assert_eq!(status, 200, "{body}");
        messages(&body)
    };
    // The group starts at the log end: nothing yet.
    assert!(receive("max_messages=5").is_empty());
    let records: Vec<Value> = (0..5)
        .map(|i| serde_json::json!({"value": format!("task-{i}")}))
        .collect();
    let body = serde_json::json!({ "records": records }).to_string();
    let (status, _) = call(api, "POST", "/topics/tasks/messages?encoding=text", &body);
    assert_eq!(status, 200);
    let got = receive("max_messages=3&visibility_ms=2000");
    let offsets: Vec<(i64, i64, &str)> = got
        .iter()
        .map(|(o, d, v, _)| (*o, *d, v.as_str()))
        .collect();
    assert_eq!(
        offsets,
        [(0, 1, "task-0"), (1, 1, "task-1"), (2, 1, "task-2")]
    );
    assert_eq!(
        got[0].3, "0:0:1",
        "the receipt names partition, offset and delivery"
    );
    // Accept 0, reject 1, leave 2; a receipt used twice is refused.
    assert_eq!(ack(api, &["0:0:1"], "accept"), [0]);
    assert_eq!(ack(api, &["0:1:1"], "reject"), [0]);
    let invalid_record_state = 121;
    assert_eq!(ack(api, &["0:0:1"], "accept"), [invalid_record_state]);
    assert_eq!(
        ack(api, &["0:1:1"], "release"),
        [invalid_record_state],
        "rejected already"
    );
    // The others (2 is still invisible), then all three again once their
    // visibility passed, in their second delivery; 0 and 1 never.
    let got = receive("max_messages=10&visibility_ms=2000");
    let offsets: Vec<(i64, i64)> = got.iter().map(|(o, d, _, _)| (*o, *d)).collect();
    assert_eq!(offsets, [(3, 1), (4, 1)]);
    let mut again = Vec::new();
    let started = std::time::Instant::now();
    while again.len() < 3 && started.elapsed() < std::time::Duration::from_secs(10) {
        let got = receive("max_messages=10&wait_ms=5000&visibility_ms=60000");
        again.extend(got.iter().map(|(o, d, _, _)| (*o, *d)));
    }
    again.sort();
    assert_eq!(again, [(2, 2), (3, 2), (4, 2)], "back after their 2 s");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1500),
        "not before"
    );
    // The receipt of 2's first delivery no longer counts; its second's does.
    assert_eq!(ack(api, &["0:2:1"], "accept"), [invalid_record_state]);
    assert_eq!(ack(api, &["0:2:2", "0:3:2"], "accept"), [0, 0]);
    // Release 4: handed out at once with its third delivery; reject it.
    assert_eq!(ack(api, &["0:4:2"], "release"), [0]);
    let got = receive("max_messages=10");
    assert_eq!(
        got.iter().map(|(o, d, _, _)| (*o, *d)).collect::<Vec<_>>(),
        [(4, 3)]
    );
    assert_eq!(ack(api, &["0:4:3"], "renew"), [0], "still working on it");
    assert_eq!(ack(api, &["0:4:3"], "reject"), [0]);
    assert!(
        receive("max_messages=10&wait_ms=1500").is_empty(),
        "everything done"
    );
    // Refusals.
    let refused = [
        ("/share-groups/workers/receive", 400),
        (
            "/share-groups/workers/receive?topic=tasks&max_messages=0",
            400,
        ),
        (
            "/share-groups/workers/receive?topic=tasks&visibility_ms=5",
            400,
        ),
        ("/share-groups/workers/receive?topic=nosuch", 404),
        // A consumer group is no queue.
        ("/share-groups/billing/receive?topic=tasks", 404),
    ];
    let join = r#"{"consumer_id": "worker-1", "topics": ["tasks"]}"#;
    let (status, joined) = call(api, "POST", "/consumer-groups/billing/join", join);
    assert_eq!(status, 200, "{joined}");
    for (path, expected) in refused {
        assert_eq!(call(api, "POST", path, "").0, expected, "{path}");
    }
    let bad_type = r#"{"topic": "tasks", "receipts": ["0:4:3"], "type": "maybe"}"#;
    assert_eq!(
        call(api, "POST", "/share-groups/workers/ack", bad_type).0,
        400
    );
    assert_eq!(
        ack(api, &["zero"], "accept"),
        [42],
        "not a receipt: INVALID_REQUEST"
    );
}

/// A group's dead-letter topic (`share.dlq.topic`): a rejected message,
/// and messages whose visibility passed in their last allowed delivery,
/// are appended there as they were (key, value, headers), with headers
/// naming where from and why.
#[test]
fn archived_messages_go_to_the_groups_dead_letter_topic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let (api, address) = (broker.http, broker.address);
    let (status, _) = call(
        api,
        "POST",
        "/topics",
        r#"{"name": "tasks", "partitions": 1}"#,
    );
    assert_eq!(status, 201);
    support::on_glommio(async move {
        let mut c = client::connection::Connection::connect(address, "dlq-test")
            .await
            .unwrap();
        for (key, value) in [
            ("share.dlq.topic", "tasks.dlq"),
            ("share.delivery.count.limit", "2"),
        ] {
            let code = support::alter_group_config(&mut c, "workers", key, Some(value)).await;
            assert_eq!(code, 0, "{key}");
        }
    });
    let receive = |query: &str| {
        let path = format!("/share-groups/workers/receive?topic=tasks&encoding=text&{query}");
        let (status, body) = call(api, "POST", &path, "");
        assert_eq!(status, 200, "{body}");
        messages(&body)
    };
    assert!(receive("max_messages=5").is_empty());
    let body = r#"{"records": [{"key": "k0", "value": "task-0", "headers": {"trace": "abc"}},
                              {"value": "task-1"}, {"value": "task-2"}]}"#;
    let (status, _) = call(api, "POST", "/topics/tasks/messages?encoding=text", body);
    assert_eq!(status, 200);
    assert_eq!(receive("max_messages=3&visibility_ms=1000").len(), 3);
    assert_eq!(ack(api, &["0:0:1"], "reject"), [0]);
    // 1 and 2 come back once, then their second visibility passes.
    let mut again = Vec::new();
    let started = std::time::Instant::now();
    while again.len() < 2 && started.elapsed() < std::time::Duration::from_secs(10) {
        let got = receive("max_messages=10&wait_ms=3000&visibility_ms=1000");
        again.extend(got.iter().map(|(o, d, _, _)| (*o, *d)));
    }
    assert_eq!(again, [(1, 2), (2, 2)]);
    let letters = support::on_glommio(async move {
        let cluster = client::cluster::Cluster::new(address, "dlq-test");
        let started = std::time::Instant::now();
        loop {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "no dead letters"
            );
            glommio::timer::sleep(std::time::Duration::from_millis(200)).await;
            let positions = std::collections::BTreeMap::from([(0, 0)]);
            let config = Default::default();
            let Ok(mut consumer) = client::consumer::Consumer::assign_at(
                cluster.clone(),
                "tasks.dlq",
                positions,
                config,
            )
            .await
            else {
                continue;
            };
            let mut got = Vec::new();
            for _ in 0..10 {
                got.extend(consumer.poll().await.unwrap_or_default());
            }
            if got.len() >= 3 {
                return got;
            }
        }
    });
    let header = |r: &client::records::ConsumedRecord, name: &str| {
        let value = r
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.clone());
        value
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    };
    let mut seen: Vec<(String, String, String, String, String)> = letters
        .iter()
        .map(|r| {
            let value =
                String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            (
                value,
                header(r, "dlq.reason"),
                header(r, "dlq.source.offset"),
                header(r, "dlq.delivery.count"),
                header(r, "dlq.source.topic"),
            )
        })
        .collect();
    seen.sort();
    let expected = [
        ("task-0", "rejected", "0", "1"),
        ("task-1", "delivery_limit", "1", "2"),
        ("task-2", "delivery_limit", "2", "2"),
    ];
    let expected: Vec<_> = (expected.iter())
        .map(|(v, why, o, d)| {
            (
                v.to_string(),
                why.to_string(),
                o.to_string(),
                d.to_string(),
                "tasks".to_string(),
            )
        })
        .collect();
    assert_eq!(seen, expected);
    let first = letters
        .iter()
        .find(|r| header(r, "dlq.source.offset") == "0")
        .unwrap();
    assert_eq!(header(first, "trace"), "abc", "its own headers kept");
    assert_eq!(first.key.as_deref(), Some(&b"k0"[..]), "and its key");
    assert_eq!(
        support::cluster::gauge(api, "share_records_dead_lettered_total"),
        3.0
    );
}
