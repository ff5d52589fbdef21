//! Consumer groups over the HTTP API on a real broker: two HTTP members
//! share a topic through a rebalance (server-side range assignment),
//! stale generations are fenced, polls long-poll and read everything,
//! commits land in the same coordinator Kafka clients read from, a leave
//! hands the partitions back.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use client::cluster::Cluster;
use serde_json::{json, Value};
use support::{on_glommio, start_broker_with};

fn call(http: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, text) = support::http(http, method, path, &body);
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    (status, value)
}

/// A member as the join answered.
#[derive(Debug, Clone)]
struct Member {
    consumer: String,
    member_id: String,
    generation: i64,
    partitions: BTreeSet<i64>,
}

fn join(http: SocketAddr, consumer: &str) -> Member {
    let (status, joined) = call(
        http,
        "POST",
        "/consumer-groups/workers/join",
        Some(&json!({"consumer_id": consumer, "topics": ["work"], "session_timeout_ms": 10000})),
    );
    assert_eq!(status, 200, "{joined}");
    let partitions = joined["assigned_partitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["topic"] == "work")
        .flat_map(|t| t["partitions"].as_array().unwrap().clone())
        .map(|p| p.as_i64().unwrap())
        .collect();
    Member {
        consumer: consumer.to_string(),
        member_id: joined["member_id"].as_str().unwrap().to_string(),
        generation: joined["generation_id"].as_i64().unwrap(),
        partitions,
    }
}

fn member_body(m: &Member, generation: i64) -> Value {
    json!({"consumer_id": m.consumer, "member_id": m.member_id, "generation_id": generation})
}

/// Everything in one partition from `from`, polling without waiting.
fn drain(http: SocketAddr, partition: i64, from: i64) -> (Vec<String>, i64) {
    let mut values = Vec::new();
    let mut offset = from;
    loop {
        let (status, polled) = call(
            http,
            "GET",
            &format!("/consumer-groups/workers/poll?topic=work&partition={partition}&offset={offset}&max_wait_ms=0&encoding=text"),
            None,
        );
        assert_eq!(status, 200, "{polled}");
        // Dense offsets, in order, from where the poll started.
        for (n, record) in polled["records"].as_array().unwrap().iter().enumerate() {
            assert_eq!(record["offset"].as_i64().unwrap(), offset + n as i64);
            values.push(record["value"].as_str().unwrap().to_string());
        }
        offset = polled["next_offset"].as_i64().unwrap();
        if offset >= polled["high_watermark"].as_i64().unwrap() {
            return (values, offset);
        }
    }
}

#[test]
fn http_members_share_a_topic_rebalance_commit_and_leave() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")],
    );
    let http = broker.http;
    let (status, _) = call(
        http,
        "POST",
        "/topics",
        Some(&json!({"name": "work", "partitions": 4})),
    );
    assert_eq!(status, 201);
    let records: Vec<Value> = (0..100)
        .map(|i| json!({"key": format!("job-{i}"), "value": format!("payload-{i}")}))
        .collect();
    let (status, _) = call(
        http,
        "POST",
        "/topics/work/messages?encoding=text",
        Some(&json!({ "records": records })),
    );
    assert_eq!(status, 200);

    // A alone: every partition, as its own leader.
    let a1 = join(http, "a");
    assert_eq!(a1.partitions, BTreeSet::from([0, 1, 2, 3]));
    // B joins; A learns of the rebalance from its heartbeat and rejoins.
    let b_joining = std::thread::spawn(move || join(http, "b"));
    let started = std::time::Instant::now();
    loop {
        let (status, beat) = call(
            http,
            "POST",
            "/consumer-groups/workers/heartbeat",
            Some(&member_body(&a1, a1.generation)),
        );
        if status == 409 {
            assert_eq!(beat["error_code"], 27, "REBALANCE_IN_PROGRESS: {beat}");
            break;
        }
        assert_eq!(status, 200, "{beat}");
        assert!(started.elapsed().as_secs() < 20, "no rebalance seen");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let a2 = join(http, "a");
    let b2 = b_joining.join().unwrap();
    assert_eq!(a2.generation, b2.generation);
    assert!(a2.generation > a1.generation);
    assert_eq!(a2.partitions.len(), 2, "{a2:?} {b2:?}");
    assert!(a2.partitions.is_disjoint(&b2.partitions));
    assert_eq!(a2.partitions.union(&b2.partitions).count(), 4);
    // The old generation is fenced.
    let (status, stale) = call(
        http,
        "POST",
        "/consumer-groups/workers/heartbeat",
        Some(&member_body(&a2, a1.generation)),
    );
    assert_eq!((status, stale["error_code"].clone()), (409, json!(22)));

    // Each reads its partitions and commits where it got to.
    let mut seen = Vec::new();
    let mut ends = BTreeMap::new();
    for member in [&a2, &b2] {
        let mut offsets = Vec::new();
        for partition in &member.partitions {
            let (values, end) = drain(http, *partition, 0);
            seen.extend(values);
            ends.insert(*partition, end);
            offsets.push(json!({"topic": "work", "partition": partition, "offset": end}));
        }
        let mut body = member_body(member, member.generation);
        body["offsets"] = Value::Array(offsets);
        let (status, answer) = call(http, "POST", "/consumer-groups/workers/commit", Some(&body));
        assert_eq!(status, 200, "{answer}");
    }
    // The offsets topic exists now; it takes no records from clients,
    // and the refusal says so in words.
    let record = json!({"records": [{"value": "eA=="}]});
    let path = "/topics/__consumer_offsets/messages";
    let (status, refused) = call(http, "POST", path, Some(&record));
    let answer = &refused["offsets"][0];
    assert_eq!(
        (status, answer["error_code"].clone()),
        (400, json!(17)),
        "{refused}"
    );
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("the topic takes no records from clients"),
        "{refused}"
    );
    seen.sort();
    let mut produced: Vec<String> = (0..100).map(|i| format!("payload-{i}")).collect();
    produced.sort();
    assert_eq!(seen, produced, "every record read once");
    // A stale generation's commit is refused.
    let mut stale = member_body(&a2, a1.generation);
    stale["offsets"] = json!([{"topic": "work", "partition": 0, "offset": 1}]);
    assert_eq!(
        call(
            http,
            "POST",
            "/consumer-groups/workers/commit",
            Some(&stale)
        )
        .0,
        409
    );
    // Kafka's view of the group's commits is the same.
    let committed = on_glommio({
        let address = broker.address;
        async move {
            Cluster::new(address, "http-groups-test")
                .committed_offsets("workers", None)
                .await
                .unwrap()
        }
    });
    for (partition, end) in &ends {
        assert_eq!(
            committed.get(&("work".to_string(), *partition as i32)),
            Some(end)
        );
    }

    // B leaves: A rejoins and gets everything back.
    assert_eq!(
        call(
            http,
            "POST",
            "/consumer-groups/workers/leave",
            Some(&member_body(&b2, b2.generation))
        )
        .0,
        200
    );
    let (status, _) = call(
        http,
        "POST",
        "/consumer-groups/workers/heartbeat",
        Some(&member_body(&a2, a2.generation)),
    );
    assert_eq!(status, 409);
    let a3 = join(http, "a");
    assert_eq!(a3.partitions, BTreeSet::from([0, 1, 2, 3]));

    // A poll at the end waits for the next record and returns it.
    let partition = *ends.keys().next().unwrap();
    let end = ends[&partition];
    let waiting = std::thread::spawn(move || {
        call(
            http,
            "GET",
            &format!("/consumer-groups/workers/poll?topic=work&partition={partition}&offset={end}&max_wait_ms=20000&encoding=text"),
            None,
        )
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, _) = call(
        http,
        "POST",
        "/topics/work/messages?encoding=text",
        Some(&json!({"value": "late", "partition": partition})),
    );
    assert_eq!(status, 200);
    let (status, polled) = waiting.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(polled["records"][0]["value"], "late", "{polled}");

    // Bad polls and bodies.
    for (path, want) in [
        ("/consumer-groups/workers/poll?topic=work&partition=0", 400),
        (
            "/consumer-groups/workers/poll?topic=work&partition=x&offset=0",
            400,
        ),
        (
            "/consumer-groups/workers/poll?topic=nope&partition=0&offset=0",
            404,
        ),
        (
            "/consumer-groups/workers/poll?topic=work&partition=0&offset=999999",
            416,
        ),
    ] {
        assert_eq!(call(http, "GET", path, None).0, want, "{path}");
    }
    for body in [json!({}), json!({"consumer_id": "c", "topics": []})] {
        assert_eq!(
            call(http, "POST", "/consumer-groups/workers/join", Some(&body)).0,
            400
        );
    }
    let (status, unknown) = call(
        http,
        "POST",
        "/consumer-groups/workers/heartbeat",
        Some(&json!({"consumer_id": "ghost", "member_id": "ghost-1", "generation_id": 1})),
    );
    assert!(matches!(status, 404 | 409), "{status} {unknown}");
}
