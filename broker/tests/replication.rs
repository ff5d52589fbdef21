//! Replication features beyond the fault test, on real broker processes:
//! rack-aware reads from followers (librdkafka, through kcat), group
//! coordinators moving with their `__consumer_offsets` partition, and
//! cordoned brokers left out of placement.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use client::cluster::Cluster as ClientCluster;
use support::cluster::{counter, Cluster};
use support::group_round;
use support::on_glommio;

/// Fast failure detection, as in the fault test.
const FAST: [(&str, &str); 3] = [
    ("BROKER_BROKER_SESSION_TIMEOUT_MS", "1500"),
    ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
    ("BROKER_REPLICA_FETCH_WAIT_MAX_MS", "200"),
];

fn create_topic(cluster: &Cluster, name: &str, partitions: u32) {
    create_topic_rf(cluster, name, partitions, 3);
}

fn create_topic_rf(cluster: &Cluster, name: &str, partitions: u32, replicas: u32) {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "create", name, "--partitions"])
        .arg(partitions.to_string())
        .args(["--replication-factor", &replicas.to_string()])
        .args(["--config", "min.insync.replicas=2"])
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `topic describe` through broker 1: each partition's (leader, ISR size).
fn describe(cluster: &Cluster, name: &str) -> Vec<(i32, usize)> {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "describe", name])
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .filter(|l| l.trim_start().starts_with("partition "))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let leader = words[3].parse().unwrap();
            let isr = l.rsplit("isr [").next().unwrap().matches(',').count() + 1;
            (leader, isr)
        })
        .collect()
}

#[test]
fn a_consumer_naming_a_followers_rack_reads_from_that_follower() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("BROKER_REPLICA_SELECTOR", "rack-aware"));
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    create_topic(&cluster, "near", 1);
    let bootstrap = cluster.node(1).kafka.to_string();
    let mut producer = Command::new("kcat")
        .args(["-P", "-b", &bootstrap, "-t", "near", "-X", "acks=all"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat (the test command installs it)");
    {
        let stdin = producer.stdin.as_mut().unwrap();
        for i in 0..1000 {
            writeln!(stdin, "value-{i}").unwrap();
        }
    }
    assert!(producer.wait().unwrap().success());
    // Every replica in sync, so any of them may serve.
    let started = Instant::now();
    let leader = loop {
        let partitions = describe(&cluster, "near");
        if partitions.first().is_some_and(|(_, isr)| *isr == 3) {
            break partitions[0].0;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{partitions:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    followers_counted_their_copy(&cluster, leader);
    let follower = (1..=3).find(|b| *b != leader).unwrap();
    let before = counter(
        cluster.node(follower).http,
        "follower_consumer_fetches_total",
    );
    // Bounded: a consumer sent in circles would never reach the end.
    let consumed = Command::new("timeout")
        .args([
            "60",
            "kcat",
            "-C",
            "-b",
            &bootstrap,
            "-t",
            "near",
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .args(["-X", &format!("client.rack=rack-{follower}")])
        .output()
        .unwrap();
    assert!(consumed.status.success(), "{consumed:?}");
    let lines: Vec<String> = String::from_utf8_lossy(&consumed.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let expected: Vec<String> = (0..1000).map(|i| format!("value-{i}")).collect();
    assert_eq!(lines, expected, "every value, in order");
    let served = counter(
        cluster.node(follower).http,
        "follower_consumer_fetches_total",
    ) - before;
    let leader_served = counter(cluster.node(leader).http, "follower_consumer_fetches_total");
    println!("follower {follower} served {served} consumer fetches (leader {leader})");
    assert!(
        served > 0,
        "the follower in the consumer's rack served nothing"
    );
    assert_eq!(
        leader_served, 0,
        "the leader is no follower of its own partition"
    );
}

/// Each follower of the "near" partition counted its copy of the 1,000
/// values (8,890 bytes of them, record framing not counted) and timed its
/// fetches that brought records, its appends and its fdatasyncs (the
/// topic counts fdatasync'd copies only), but not the empty fetches that
/// follow (the leader's wait for new data, 200 ms here).
fn followers_counted_their_copy(cluster: &Cluster, leader: i32) {
    for follower in (1..=3).filter(|b| *b != leader) {
        let http = cluster.node(follower).http;
        let bytes = counter(http, "replica_fetched_bytes_total");
        let timed_fetches = counter(http, "replica_fetch_seconds_count");
        let flushes = counter(http, "replica_flush_seconds_count");
        let appends = counter(http, "replica_append_seconds_count");
        println!("follower {follower}: {timed_fetches} fetches timed, {bytes} bytes, {appends} appends, {flushes} fdatasyncs");
        assert!(bytes >= 8890, "follower {follower} counted {bytes} bytes");
        assert!(timed_fetches > 0, "no fetch that copied was timed");
        assert!(
            appends > 0 && flushes > 0,
            "{appends} appends, {flushes} fdatasyncs"
        );
        // Nothing more is produced: the fetches from now on bring nothing.
        let started = Instant::now();
        while counter(http, "replica_fetches_total") <= timed_fetches {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no empty fetch returned, or each was timed ({timed_fetches})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let timed_now = counter(http, "replica_fetch_seconds_count");
        assert_eq!(timed_now, timed_fetches, "an empty fetch was timed");
    }
}

#[test]
fn group_offsets_survive_their_coordinators_death_and_follow_it_back() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &FAST);
    cluster.start();
    create_topic(&cluster, "jobs", 2);
    let group = "movers";
    let offsets = |a: i64, b: i64| {
        BTreeMap::from([(("jobs".to_string(), 0), a), (("jobs".to_string(), 1), b)])
    };
    let addresses = cluster.addresses();
    let commit = |via: i32, a: i64, b: i64| {
        let address = addresses[(via - 1) as usize];
        on_glommio(async move {
            let client = ClientCluster::new(address, "coordinator-test");
            client.commit_offsets(group, &offsets(a, b)).await
        })
    };
    let committed = |via: i32| {
        let address = addresses[(via - 1) as usize];
        on_glommio(async move {
            let client = ClientCluster::new(address, "coordinator-test");
            client.committed_offsets(group, None).await
        })
    };
    let coordinator = |via: i32| {
        let address = addresses[(via - 1) as usize];
        on_glommio(async move {
            let client = ClientCluster::new(address, "coordinator-test");
            client.find_coordinator(group).await
        })
    };
    // Retries a call until it succeeds (the coordinator moves after a
    // kill): bounded.
    fn eventually<T, E: std::fmt::Debug>(what: &str, call: impl FnMut() -> Result<T, E>) -> T {
        support::eventually(what, Duration::from_secs(30), call)
    }

    let first = eventually("finding the coordinator", || coordinator(1));
    eventually("committing", || commit(1, 42, 7));
    // The first coordinator stalls past its session: fenced, its
    // leadership moves, while its process (and the groups it loaded) live on.
    cluster.signal(first, libc::SIGSTOP);
    let via = (1..=3).find(|b| *b != first).unwrap();
    let second = eventually("a new coordinator", || match coordinator(via) {
        Ok(c) if c != first => Ok(c),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(
        eventually("reading the offsets at the new coordinator", || committed(
            via
        )),
        offsets(42, 7),
        "the new coordinator reloaded the committed offsets"
    );
    eventually("committing at the new coordinator", || commit(via, 43, 8));
    // The first resumes as a follower; the second dies: the coordinator
    // moves again, back to the first (the preferred replica) in the runs
    // seen, whose loaded groups are from its older leadership and must be
    // read again.
    cluster.signal(first, libc::SIGCONT);
    let started = Instant::now();
    while describe(&cluster, "__consumer_offsets")
        .iter()
        .any(|(_, isr)| *isr < 3)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the ISR did not heal"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.kill9(second);
    let via = (1..=3).find(|b| *b != second).unwrap();
    let third = eventually("a third coordinator", || match coordinator(via) {
        Ok(c) if c != second => Ok(c),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(
        eventually("reading the offsets after the second move", || committed(
            via
        )),
        offsets(43, 8)
    );
    println!("coordinator moved {first} -> {second} -> {third}");
}

#[test]
fn sigterm_moves_leaderships_before_the_broker_exits() {
    // A session far longer than the test: leaderships that move before
    // the broker is gone were moved by its controlled shutdown, not by the
    // controller noticing it died.
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(
        root.path(),
        3,
        &[
            ("BROKER_BROKER_SESSION_TIMEOUT_MS", "60000"),
            ("BROKER_BROKER_HEARTBEAT_INTERVAL_MS", "250"),
        ],
    );
    cluster.start();
    create_topic(&cluster, "moving", 6);
    let via = cluster.node(2).kafka.to_string();
    let led_by_1 = || {
        let out = Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(["topic", "describe", "moving"])
            .args(["--brokers", &via])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.trim_start().starts_with("partition ") && l.contains(" leader 1 "))
            .count()
    };
    let before = led_by_1();
    assert!(before > 0, "placement gave broker 1 no leadership");
    let started = Instant::now();
    cluster.terminate(1);
    let stopped_after = started.elapsed();
    assert_eq!(led_by_1(), 0, "leaderships still on the stopped broker");
    println!("broker 1 led {before} partitions; stopped in {stopped_after:?} with none left");
    // Its replicas are out of every ISR: the leaders report it, until it
    // is back.
    let under = |cluster: &Cluster| {
        (2..=3)
            .map(|id| counter(cluster.node(id).http, "under_replicated_partitions"))
            .sum::<u64>()
    };
    // Each leader's metadata shows the shrunken ISRs soon after (bounded).
    let started = Instant::now();
    while under(&cluster) != 6 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "under-replicated partitions: {} of 6; {:?}",
            under(&cluster),
            String::from_utf8_lossy(
                &Command::new(env!("CARGO_BIN_EXE_broker"))
                    .args(["topic", "describe", "moving", "--brokers", &via])
                    .output()
                    .unwrap()
                    .stdout
            )
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.restart(1);
    let started = Instant::now();
    while under(&cluster) + counter(cluster.node(1).http, "under_replicated_partitions") > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still under-replicated"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An HTTP call: (status, JSON body).
fn http_call(
    http: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let (status, text) = support::http(http, method, path, body);
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn every_broker_serves_the_http_api_for_partitions_led_elsewhere() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &FAST);
    cluster.start();
    create_topic(&cluster, "anywhere", 3);
    let leaders: Vec<i32> = describe(&cluster, "anywhere")
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    for (partition, leader) in leaders.iter().enumerate() {
        // Through a broker that does not lead it.
        let via = (1..=3).find(|b| b != leader).unwrap();
        let http = cluster.node(via).http;
        let (status, produced) = http_call(
            http,
            "POST",
            "/topics/anywhere/messages?encoding=text",
            &format!(r#"{{"value":"via-{via}","partition":{partition}}}"#),
        );
        assert_eq!(status, 200, "{produced}");
        assert_eq!(produced["offset"], 0);
        let (status, marks) = http_call(
            http,
            "GET",
            &format!("/topics/anywhere/partitions/{partition}/watermark"),
            "",
        );
        assert_eq!(status, 200, "{marks}");
        assert_eq!(marks["latest"], 1, "acks=all: the high watermark passed it");
        let (status, polled) = http_call(
            http,
            "GET",
            &format!("/consumer-groups/any/poll?topic=anywhere&partition={partition}&offset=0&encoding=text"),
            "",
        );
        assert_eq!(status, 200, "{polled}");
        assert_eq!(polled["records"][0]["value"], format!("via-{via}"));
        // And the leader itself holds it.
        let (_, at_leader) = http_call(
            cluster.node(*leader).http,
            "GET",
            &format!("/topics/anywhere/partitions/{partition}/watermark"),
            "",
        );
        assert_eq!(at_leader["latest"], 1);
    }
}

/// The queue API (share groups) from any broker: a receive through one
/// broker hands out the messages of every partition (those led elsewhere
/// asked of their leaders), and the receipts count at any other broker,
/// once.
#[test]
fn the_queue_api_hands_out_every_partitions_messages_from_any_broker() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &FAST);
    cluster.start();
    create_topic(&cluster, "queue", 3);
    let leaders: Vec<i32> = describe(&cluster, "queue")
        .iter()
        .map(|(l, _)| *l)
        .collect();
    assert!(
        leaders.iter().any(|l| *l != 1),
        "some led elsewhere: {leaders:?}"
    );
    let kafka = cluster.node(1).kafka;
    let configured = on_glommio(async move {
        let mut c = client::connection::Connection::connect(kafka, "queue-test")
            .await
            .unwrap();
        support::alter_group_config(&mut c, "q", "share.auto.offset.reset", Some("earliest")).await
    });
    assert_eq!(configured, 0);
    let mut sent = Vec::new();
    for partition in 0..3 {
        for i in 0..5 {
            let value = format!("p{partition}-{i}");
            let body = format!(r#"{{"value":"{value}","partition":{partition}}}"#);
            let (status, produced) = http_call(
                cluster.node(1).http,
                "POST",
                "/topics/queue/messages?encoding=text",
                &body,
            );
            assert_eq!(status, 200, "{produced}");
            sent.push(value);
        }
    }
    // Through broker 1: every partition's messages.
    let mut got: Vec<(String, String)> = Vec::new();
    let started = Instant::now();
    while got.len() < sent.len() && started.elapsed() < Duration::from_secs(20) {
        let (status, answer) = http_call(
            cluster.node(1).http,
            "POST",
            "/share-groups/q/receive?topic=queue&encoding=text&max_messages=100&wait_ms=1000",
            "",
        );
        if status == 503 {
            // The group's state not readable yet (its partition's leader
            // still settling): a documented answer to retry, as a client does.
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        assert_eq!(status, 200, "{answer}");
        for m in answer["messages"].as_array().unwrap() {
            let value = m["value"].as_str().unwrap().to_string();
            got.push((value, m["receipt"].as_str().unwrap().to_string()));
        }
    }
    let mut values: Vec<String> = got.iter().map(|(v, _)| v.clone()).collect();
    values.sort();
    sent.sort();
    assert_eq!(values, sent, "every message once (leaders {leaders:?})");
    // The receipts at broker 2: each accepted at its leader; again at
    // broker 3: held no more.
    let receipts: Vec<&str> = got.iter().map(|(_, r)| r.as_str()).collect();
    let body = serde_json::json!({"topic": "queue", "receipts": receipts}).to_string();
    let codes = |via: i32| -> Vec<i64> {
        let (status, answer) =
            http_call(cluster.node(via).http, "POST", "/share-groups/q/ack", &body);
        assert_eq!(status, 200, "{answer}");
        let results = answer["results"].as_array().unwrap();
        results
            .iter()
            .map(|r| r["error_code"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(codes(2), vec![0; receipts.len()]);
    assert_eq!(codes(3), vec![121; receipts.len()], "INVALID_RECORD_STATE");
    let (_, answer) = http_call(
        cluster.node(3).http,
        "POST",
        "/share-groups/q/receive?topic=queue&max_messages=100&wait_ms=1000",
        "",
    );
    assert_eq!(answer["messages"], serde_json::json!([]), "all done");
}

#[test]
fn http_group_calls_reach_the_coordinator_from_any_broker() {
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"));
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    create_topic(&cluster, "tasks", 2);
    let address = cluster.node(1).kafka;
    let coordinator = on_glommio(async move {
        ClientCluster::new(address, "http-group-test")
            .find_coordinator("far")
            .await
            .unwrap()
    });
    let via = (1..=3).find(|b| *b != coordinator).unwrap();
    let http = cluster.node(via).http;
    let (status, joined) = http_call(
        http,
        "POST",
        "/consumer-groups/far/join",
        r#"{"consumer_id":"w1","topics":["tasks"],"session_timeout_ms":10000}"#,
    );
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["leader"], true);
    assert_eq!(
        joined["assigned_partitions"][0]["partitions"],
        serde_json::json!([0, 1])
    );
    let member = joined["member_id"].as_str().unwrap().to_string();
    let generation = joined["generation_id"].as_i64().unwrap();
    let who = format!(r#""consumer_id":"w1","member_id":"{member}","generation_id":{generation}"#);
    let (status, beat) = http_call(
        http,
        "POST",
        "/consumer-groups/far/heartbeat",
        &format!("{{{who}}}"),
    );
    assert_eq!(status, 200, "{beat}");
    let (status, committed) = http_call(
        http,
        "POST",
        "/consumer-groups/far/commit",
        &format!(r#"{{{who},"offsets":[{{"topic":"tasks","partition":1,"offset":7}}]}}"#),
    );
    assert_eq!(status, 200, "{committed}");
    let offsets = on_glommio(async move {
        ClientCluster::new(address, "http-group-test")
            .committed_offsets("far", None)
            .await
            .unwrap()
    });
    assert_eq!(offsets.get(&("tasks".to_string(), 1)), Some(&7));
    // A stale generation is fenced there too, and leaving works.
    let stale = format!(
        r#"{{"consumer_id":"w1","member_id":"{member}","generation_id":{}}}"#,
        generation - 1
    );
    assert_eq!(
        http_call(http, "POST", "/consumer-groups/far/heartbeat", &stale).0,
        409
    );
    let (status, left) = http_call(
        http,
        "POST",
        "/consumer-groups/far/leave",
        &format!("{{{who}}}"),
    );
    assert_eq!(status, 200, "{left}");
}

/// (leader, leader epoch) of partition 0 of `topic` as broker `address`
/// sees it, if it answers.
async fn partition_leader(address: std::net::SocketAddr, topic: &str) -> Option<(i32, i32)> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut connection = client::connection::Connection::connect(address, "role-lag-test")
        .await
        .ok()?;
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name)),
    ]));
    let response = connection.call(&request, 9).await.ok()?;
    let partition = response.topics.first()?.partitions.first()?;
    Some((partition.leader_id.0, partition.leader_epoch))
}

/// Idempotent produce requests (acks=all) of `count` records each, the
/// first from `first_sequence`, sent pipelined on one connection: each
/// answer's (error code, base offset).
async fn produce_pipelined(
    address: std::net::SocketAddr,
    topic: &str,
    (producer_id, epoch): (i64, i16),
    first_sequence: i32,
    count: i32,
    requests: i32,
) -> Vec<(i16, i64)> {
    use client::records::{encode_batch_as, ProducerRecord, ProducerSequence};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let requests: Vec<ProduceRequest> = (0..requests)
        .map(|r| {
            let first = first_sequence + r * count;
            let records: Vec<ProducerRecord> = (first..first + count)
                .map(|s| ProducerRecord {
                    key: None,
                    value: Some(bytes::Bytes::from(format!("s{s}"))),
                    timestamp: 1_000,
                    headers: Vec::new(),
                })
                .collect();
            let sequence = ProducerSequence {
                producer_id,
                epoch,
                first_sequence: first,
            };
            let batch = encode_batch_as(
                &records,
                kafka_protocol::records::Compression::None,
                Some(sequence),
            )
            .unwrap();
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(10_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch))])])
        })
        .collect();
    let mut connection = client::connection::Connection::connect(address, "role-lag-test")
        .await
        .unwrap();
    connection
        .call_many(&requests, 9)
        .await
        .into_iter()
        .map(|answer| {
            let answer = answer.unwrap();
            let partition = &answer.responses[0].partition_responses[0];
            (partition.error_code, partition.base_offset)
        })
        .collect()
}

#[test]
fn a_producer_reaching_a_new_leader_before_it_takes_up_the_role_is_served_in_order() {
    // The metadata makes a broker leader a moment before the broker takes
    // up the role (longer while a follower's write it waits for is
    // flushed; here widened to 1.5 s). A client reaches it in that moment
    // the instant its metadata names the new leader. Refusing the first
    // pipelined batch (NOT_LEADER) and accepting the next once the role has
    // come reads to librdkafka as skipped sequence numbers: it bumps its
    // epoch and resends its unacknowledged batches under the new one, and
    // a batch the old leader's followers held is then stored twice. The
    // batches must be served in order instead.
    let root = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("BROKER_TEST_ROLE_DELAY_MS", "1500"));
    let mut cluster = Cluster::new(root.path(), 3, &env);
    cluster.start();
    create_topic(&cluster, "role-lag", 1);
    let addresses = cluster.addresses();
    let (old_leader, old_epoch) = on_glommio(async {
        loop {
            if let Some(found) = partition_leader(addresses[0], "role-lag").await {
                if found.0 > 0 {
                    return found;
                }
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
    });
    let leader_address = cluster.node(old_leader).kafka;
    let producer = on_glommio(async move {
        let mut connection =
            client::connection::Connection::connect(leader_address, "role-lag-test")
                .await
                .unwrap();
        let request = kafka_protocol::messages::InitProducerIdRequest::default()
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1);
        let answer = connection.call(&request, 4).await.unwrap();
        (answer.producer_id.0, answer.producer_epoch)
    });
    let acked = on_glommio(produce_pipelined(
        leader_address,
        "role-lag",
        producer,
        0,
        5,
        2,
    ));
    assert!(acked.iter().all(|(code, _)| *code == 0), "{acked:?}");

    cluster.kill9(old_leader);
    let others: Vec<i32> = (1..=3).filter(|id| *id != old_leader).collect();
    let asked: Vec<_> = others
        .iter()
        .map(|id| (*id, cluster.node(*id).kafka))
        .collect();
    // The first moment a survivor's metadata names a new leader.
    let (new_leader, named_at) = on_glommio(async move {
        let started = Instant::now();
        loop {
            assert!(started.elapsed() < Duration::from_secs(30), "no new leader");
            for (id, address) in &asked {
                if let Some((leader, epoch)) = partition_leader(*address, "role-lag").await {
                    if leader == *id && epoch > old_epoch {
                        return (leader, Instant::now());
                    }
                }
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
    });
    let address = cluster.node(new_leader).kafka;
    let answers = on_glommio(produce_pipelined(address, "role-lag", producer, 10, 5, 2));
    let answered_after = named_at.elapsed();
    println!(
        "answered {answered_after:?} after the metadata named broker {new_leader}: {answers:?}"
    );
    assert!(
        answered_after >= Duration::from_millis(500),
        "the produce reached the new leader inside the 1.5 s before its role (else this tests nothing)"
    );
    assert_eq!(
        answers.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![0, 0],
        "both batches served, neither refused while the role was being taken up"
    );
    assert_eq!(answers[1].1, answers[0].1 + 5, "in order, once each");
    cluster.stop();
}

/// `broker topic describe`: each partition's replicas.
fn replica_lists(cluster: &Cluster, name: &str) -> Vec<Vec<i32>> {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "describe", name])
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("replicas [").nth(1))
        .map(|rest| {
            let list = rest.split(']').next().unwrap();
            list.split(',').map(|b| b.trim().parse().unwrap()).collect()
        })
        .collect()
}

fn cluster_cli(cluster: &Cluster, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["cluster"])
        .args(args)
        .args(["--brokers", &cluster.node(1).kafka.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn a_cordoned_broker_gets_no_new_replicas_through_its_restart_until_uncordoned() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &FAST);
    cluster.start();
    cluster_cli(&cluster, &["cordon", "3"]);
    let status = cluster_cli(&cluster, &["status"]);
    assert!(
        status.contains("broker 3 at") && status.contains("(cordoned"),
        "{status}"
    );
    create_topic_rf(&cluster, "placed-while-cordoned", 6, 2);
    let lists = replica_lists(&cluster, "placed-while-cordoned");
    assert_eq!(lists.len(), 6);
    assert!(lists.iter().all(|r| !r.contains(&3)), "{lists:?}");
    // The cordon is the cluster's, not the process's.
    cluster.terminate(3);
    cluster.restart(3);
    // Live again (unfenced: placement would skip it fenced anyway).
    let started = Instant::now();
    while !cluster_cli(&cluster, &["status"]).contains("broker 3 at") {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "broker 3 not back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cluster_cli(&cluster, &["status"]).contains("(cordoned"));
    create_topic_rf(&cluster, "after-restart", 6, 2);
    let lists = replica_lists(&cluster, "after-restart");
    assert!(lists.iter().all(|r| !r.contains(&3)), "{lists:?}");
    cluster_cli(&cluster, &["uncordon", "3"]);
    create_topic_rf(&cluster, "uncordoned", 6, 2);
    let lists = replica_lists(&cluster, "uncordoned");
    assert!(lists.iter().any(|r| r.contains(&3)), "{lists:?}");
}

/// A cluster stopped as `scripts/cluster.sh stop` stops it (SIGTERM to
/// every broker at once) after serving replicated writes and a consumer
/// group: every broker exits 0 and no broker logs a WARN or ERROR line
/// from the moment the stop began (an operator reading the logs of a
/// planned stop sees nothing to worry about).
#[test]
fn a_clusters_planned_stop_logs_no_warnings() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(root.path(), 3, &FAST);
    cluster.start();
    create_topic(&cluster, "calm", 3);
    let bootstrap = cluster.bootstrap();
    let (producer, consumer) =
        group_round::produce_and_read_in_group(&bootstrap, "calm", "calm-readers", 300, "all");
    drop(consumer);
    drop(producer);
    let lines_before: Vec<usize> = (1..=3)
        .map(|id| {
            std::fs::read_to_string(cluster.log_path(id))
                .unwrap()
                .lines()
                .count()
        })
        .collect();
    let statuses = cluster.stop_all();
    assert!(
        statuses.iter().all(|s| s.is_some_and(|s| s.success())),
        "{statuses:?}"
    );
    let mut loud = Vec::new();
    for (id, before) in (1..=3).zip(lines_before) {
        let log = std::fs::read_to_string(cluster.log_path(id)).unwrap();
        let stop: Vec<&str> = log.lines().skip(before).collect();
        assert!(
            stop.iter().any(|l| l.contains("stopped")),
            "broker {id}'s log has its stop: {stop:?}"
        );
        for line in stop {
            if line.contains(" WARN ") || line.contains(" ERROR ") {
                loud.push(format!("broker {id}: {line}"));
            }
        }
    }
    assert!(loud.is_empty(), "the stop logged:\n{}", loud.join("\n"));
}
