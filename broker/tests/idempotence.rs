//! The idempotent producer, as clients use it: kafka-python's default
//! producer (idempotence on since 3.0), librdkafka with
//! enable.idempotence, kafkajs with `idempotent: true`, and the project's
//! own client all produce everything once, in order. At the protocol
//! level: a resent batch is answered with its original offsets and not
//! written twice (also after a SIGKILL and a restart), a gap is refused
//! with OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch with
//! INVALID_PRODUCER_EPOCH; InitProducerId hands out a fresh id every time;
//! DescribeProducers and `broker topic describe-producers` show the
//! state.

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use client::cluster::Cluster as ClientCluster;
use client::connection::Connection;
use client::records::{encode_batch_as, ProducerRecord, ProducerSequence};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    DescribeProducersRequest, InitProducerIdRequest, ProduceRequest, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::{on_glommio, start_broker};

fn create_topic(bootstrap: &str, name: &str, partitions: u32) {
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args([
            "topic",
            "create",
            name,
            "--partitions",
            &partitions.to_string(),
        ])
        .args(["--brokers", bootstrap])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Every value of partition 0 of `topic`, in offset order (kcat).
fn values(bootstrap: &str, topic: &str) -> Vec<String> {
    let out = Command::new("timeout")
        .args(["60", "kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0"])
        .args(["-o", "beginning", "-e", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn expected(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("value-{i}")).collect()
}

async fn init_producer_id(address: SocketAddr, current: Option<(i64, i16)>) -> (i16, i64, i16) {
    let mut connection = Connection::connect(address, "idempotence-test")
        .await
        .unwrap();
    let (id, epoch) = current.unwrap_or((-1, -1));
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch);
    let answer = connection.call(&request, 4).await.unwrap();
    (
        answer.error_code,
        answer.producer_id.0,
        answer.producer_epoch,
    )
}

/// One idempotent batch of `count` records from `first_sequence`: the
/// partition's (error code, base offset).
async fn produce_batch(
    address: SocketAddr,
    topic: &str,
    producer: ProducerSequence,
    count: usize,
) -> (i16, i64) {
    let records: Vec<ProducerRecord> = (0..count)
        .map(|i| ProducerRecord {
            key: None,
            value: Some(Bytes::from(format!(
                "s{}",
                producer.first_sequence as usize + i
            ))),
            timestamp: 1_000,
            headers: Vec::new(),
        })
        .collect();
    let batch = encode_batch_as(&records, Compression::None, Some(producer)).unwrap();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let mut connection = Connection::connect(address, "idempotence-test")
        .await
        .unwrap();
    let answer = connection.call(&request, 9).await.unwrap();
    let partition = &answer.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

fn sequence(producer_id: i64, epoch: i16, first_sequence: i32) -> ProducerSequence {
    ProducerSequence {
        producer_id,
        epoch,
        first_sequence,
    }
}

#[test]
fn resends_gaps_and_old_epochs_get_kafkas_answers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    create_topic(&broker.bootstrap(), "exact", 1);
    let address = broker.address;
    on_glommio(async move {
        let (error, id, epoch) = init_producer_id(address, None).await;
        assert_eq!((error, epoch), (0, 0));
        assert!(id >= 0);
        let (_, other, _) = init_producer_id(address, None).await;
        assert_ne!(other, id, "every producer gets its own id");
        let p = |first| sequence(id, 0, first);
        assert_eq!(produce_batch(address, "exact", p(0), 5).await, (0, 0));
        assert_eq!(produce_batch(address, "exact", p(5), 5).await, (0, 5));
        // The same batch again: the original offsets, nothing written.
        assert_eq!(produce_batch(address, "exact", p(0), 5).await, (0, 0));
        assert_eq!(produce_batch(address, "exact", p(5), 5).await, (0, 5));
        // A gap.
        assert_eq!(produce_batch(address, "exact", p(11), 2).await.0, 45);
        // The producer re-initialises naming its id (KIP-360): a new id at
        // epoch 0, as Kafka answers without a transactional id.
        let (error, renewed, renewed_epoch) = init_producer_id(address, Some((id, 0))).await;
        assert_eq!((error, renewed_epoch), (0, 0));
        assert!(renewed != id && renewed != other, "{renewed}");
        // A batch of the id at a newer epoch (as a transactional producer's
        // after a bump) starts over at 0 and fences the older epoch.
        assert_eq!(
            produce_batch(address, "exact", sequence(id, 1, 0), 2).await,
            (0, 10)
        );
        assert_eq!(produce_batch(address, "exact", p(10), 1).await.0, 47);
        // DescribeProducers shows it.
        let mut connection = Connection::connect(address, "idempotence-test")
            .await
            .unwrap();
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(TopicName(StrBytes::from_static_str("exact")))
                .with_partition_indexes(vec![0])]);
        let answer = connection.call(&request, 0).await.unwrap();
        let partition = &answer.topics[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        let state = partition
            .active_producers
            .iter()
            .find(|p| p.producer_id.0 == id)
            .expect("the producer's state");
        assert_eq!((state.producer_epoch, state.last_sequence), (1, 1));
    });
    // Nothing was written twice: 12 records.
    let stored = values(&broker.bootstrap(), "exact");
    assert_eq!(stored.len(), 12, "{stored:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "describe-producers", "exact"])
        .args(["--brokers", &broker.bootstrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("epoch 1") && text.contains("last sequence 1"),
        "{text}"
    );
}

#[test]
fn a_batch_resent_after_a_sigkill_and_a_restart_is_not_written_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = start_broker(&data);
    create_topic(&broker.bootstrap(), "survives", 1);
    let address = broker.address;
    let id = on_glommio(async move {
        let (_, id, _) = init_producer_id(address, None).await;
        for batch in 0..20 {
            let answer = produce_batch(address, "survives", sequence(id, 0, batch * 5), 5).await;
            assert_eq!(answer, (0, batch as i64 * 5));
        }
        id
    });
    // Killed right after the acknowledgements, as if their answers were
    // lost; then a clean stop: the producer's retries must find their
    // originals both times.
    broker.kill9();
    let broker = start_broker(&data);
    resend_last_two(broker.address, id, "after a SIGKILL");
    assert_eq!(values(&broker.bootstrap(), "survives").len(), 100);
    // Ids are never handed out twice: a restarted broker takes a new block.
    let after_kill = fresh_id(broker.address);
    assert!(after_kill > id, "{after_kill} after {id}");
    assert!(broker.terminate().success());
    let broker = start_broker(&data);
    resend_last_two(broker.address, id, "after a clean stop");
    assert_eq!(values(&broker.bootstrap(), "survives").len(), 100);
    let after_stop = fresh_id(broker.address);
    assert!(after_stop > after_kill, "{after_stop} after {after_kill}");
}

fn fresh_id(address: SocketAddr) -> i64 {
    on_glommio(async move {
        let (error, id, epoch) = init_producer_id(address, None).await;
        assert_eq!((error, epoch), (0, 0));
        id
    })
}

/// The producer's last two batches again: answered with their offsets.
fn resend_last_two(address: SocketAddr, id: i64, when: &'static str) {
    on_glommio(async move {
        for batch in 18..20 {
            let answer = produce_batch(address, "survives", sequence(id, 0, batch * 5), 5).await;
            assert_eq!(answer, (0, batch as i64 * 5), "{when}");
        }
    });
}

fn python() -> String {
    let venv = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/test-venv/bin/python"
    );
    std::env::var("KAFKA_PYTHON").unwrap_or_else(|_| venv.to_string())
}

#[test]
fn kafka_pythons_default_producer_writes_everything_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    create_topic(&broker.bootstrap(), "py-default", 1);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/produce_default.py"
    );
    let out = Command::new(python())
        .args([script, &broker.bootstrap(), "py-default", "300"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kafka-python (scripts/test.sh installs it):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("idempotent True"),
        "the default is idempotent: {stdout}"
    );
    assert_eq!(values(&broker.bootstrap(), "py-default"), expected(300));
}

#[test]
fn librdkafka_with_idempotence_writes_everything_once_in_order() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    create_topic(&broker.bootstrap(), "rd-idempotent", 1);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("linger.ms", "2")
        .create()
        .unwrap();
    for i in 0..500 {
        let value = format!("value-{i}");
        let mut record = BaseRecord::<(), _>::to("rd-idempotent")
            .payload(&value)
            .partition(0);
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(5));
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("all acknowledged");
    assert_eq!(values(&broker.bootstrap(), "rd-idempotent"), expected(500));
}

#[test]
fn kafkajs_with_idempotence_writes_everything_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    create_topic(&broker.bootstrap(), "js-idempotent", 1);
    // scripts/test.sh installs kafkajs under target/test-node.
    let modules = std::env::var("KAFKAJS_NODE_PATH").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/test-node/node_modules"
        )
        .to_string()
    });
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/node/produce_idempotent.js"
    );
    let out = Command::new("node")
        .args([script, &broker.bootstrap(), "js-idempotent", "300"])
        .env("NODE_PATH", modules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kafkajs (scripts/test.sh installs it):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(values(&broker.bootstrap(), "js-idempotent"), expected(300));
}

#[test]
fn the_projects_client_is_idempotent_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    create_topic(&broker.bootstrap(), "own", 1);
    let address = broker.address;
    on_glommio(async move {
        let cluster = ClientCluster::new(address, "idempotence-test");
        let producer = client::producer::Producer::new(cluster.clone(), Default::default());
        let mut deliveries = Vec::new();
        for i in 0..400 {
            let record = ProducerRecord {
                key: None,
                value: Some(Bytes::from(format!("value-{i}"))),
                timestamp: 1_000,
                headers: Vec::new(),
            };
            deliveries.push(producer.send_record("own", record).await.unwrap());
        }
        let mut offsets = Vec::new();
        for delivery in deliveries {
            offsets.push(delivery.await.unwrap().offset);
        }
        assert_eq!(offsets, (0..400).collect::<Vec<i64>>());
        // The broker knows it as an idempotent producer.
        let mut connection = Connection::connect(address, "idempotence-test")
            .await
            .unwrap();
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(TopicName(StrBytes::from_static_str("own")))
                .with_partition_indexes(vec![0])]);
        let answer = connection.call(&request, 0).await.unwrap();
        let producers = &answer.topics[0].partitions[0].active_producers;
        assert_eq!(producers.len(), 1);
        assert_eq!(producers[0].last_sequence, 399);
    });
    assert_eq!(values(&broker.bootstrap(), "own"), expected(400));
}

#[test]
fn a_silent_producer_expires_and_is_then_accepted_at_any_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let broker = support::start_broker_with(
        dir.path(),
        &[
            ("BROKER_PRODUCER_ID_EXPIRATION_MS", "3000"),
            ("BROKER_RETENTION_CHECK_INTERVAL_MS", "100"),
        ],
    );
    create_topic(&broker.bootstrap(), "expiring", 1);
    let address = broker.address;
    on_glommio(async move {
        let (_, id, _) = init_producer_id(address, None).await;
        // produce_batch stamps its records at 1 s past the epoch, decades
        // behind the broker's clock: expiration counts on the broker's.
        assert_eq!(
            produce_batch(address, "expiring", sequence(id, 0, 0), 3).await,
            (0, 0)
        );
        let describe = || async {
            let mut connection = Connection::connect(address, "idempotence-test")
                .await
                .unwrap();
            let request =
                DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                    .with_name(TopicName(StrBytes::from_static_str("expiring")))
                    .with_partition_indexes(vec![0])]);
            let answer = connection.call(&request, 0).await.unwrap();
            answer.topics[0].partitions[0].active_producers.len()
        };
        let started = std::time::Instant::now();
        glommio::timer::sleep(Duration::from_millis(300)).await;
        assert_eq!(describe().await, 1, "kept while the broker saw it recently");
        while describe().await > 0 {
            assert!(started.elapsed() < Duration::from_secs(15), "never expired");
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        // Forgotten: a batch far past its last sequence is accepted.
        assert_eq!(
            produce_batch(address, "expiring", sequence(id, 0, 50), 1).await,
            (0, 3)
        );
    });
}

#[test]
fn an_http_producer_resending_a_request_writes_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    create_topic(&broker.bootstrap(), "over-http", 1);
    let (status, body) = support::http(broker.http, "POST", "/producers", "");
    assert_eq!(status, 200, "{body}");
    let producer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let id = producer["producer_id"].as_i64().unwrap();
    let send = |sequence: i32, values: &[&str]| {
        let records: Vec<String> = values
            .iter()
            .map(|v| format!(r#"{{"value":"{v}","partition":0}}"#))
            .collect();
        let path = format!(
            "/topics/over-http/messages?encoding=text&producer_id={id}&producer_epoch=0&sequence={sequence}"
        );
        support::http(
            broker.http,
            "POST",
            &path,
            &format!(r#"{{"records":[{}]}}"#, records.join(",")),
        )
    };
    let offsets = |(status, body): (u16, String)| -> Vec<i64> {
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        answer["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["offset"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(offsets(send(0, &["value-0", "value-1"])), vec![0, 1]);
    // The same request again (its answer was lost): the same offsets.
    assert_eq!(offsets(send(0, &["value-0", "value-1"])), vec![0, 1]);
    assert_eq!(send(2, &["value-2"]).0, 200);
    // A gap, and two partitions in one idempotent request.
    let (status, body) = send(9, &["value-9"]);
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("\"error_code\":45"), "{body}");
    let path =
        format!("/topics/over-http/messages?producer_id={id}&producer_epoch=0&sequence=3&acks=1");
    assert_eq!(
        support::http(broker.http, "POST", &path, r#"{"value":"eA=="}"#).0,
        400
    );
    assert_eq!(values(&broker.bootstrap(), "over-http"), expected(3));
}

/// A broker behind a frame-counting proxy, the proxy's address given to
/// clients (so every connection goes through it), and a topic `topic`.
fn broker_behind_a_counter(
    dir: &std::path::Path,
    topic: &str,
) -> (support::Broker, support::frame_counter::FrameCounter) {
    broker_with_behind_a_counter(dir, topic, &[])
}

/// [`broker_behind_a_counter`], with more settings.
fn broker_with_behind_a_counter(
    dir: &std::path::Path,
    topic: &str,
    settings: &[(&str, &str)],
) -> (support::Broker, support::frame_counter::FrameCounter) {
    let counter = support::frame_counter::FrameCounter::bind();
    let advertised = counter.address.to_string();
    let mut settings = settings.to_vec();
    settings.push(("BROKER_ADVERTISED_LISTENER", advertised.as_str()));
    let broker = support::start_broker_with(dir, &settings);
    counter.forward_to(broker.address);
    create_topic(&counter.address.to_string(), topic, 1);
    (broker, counter)
}

/// The records [`produce_3000`] sends, in order.
fn pipelined_value(i: usize) -> String {
    format!("{i:0>1000}")
}

/// 3000 records of 1000 bytes through the project's producer (16 KiB
/// batches, so many are ready at once), all sent before the first is
/// awaited: their offsets, in the order sent.
fn produce_3000(via: SocketAddr, topic: &'static str) -> Vec<i64> {
    on_glommio(async move {
        let cluster = ClientCluster::new(via, "pipelining");
        let config = client::producer::ProducerConfig {
            batch_bytes: 16 << 10,
            retry_backoff: Duration::from_millis(20),
            ..Default::default()
        };
        let producer = client::producer::Producer::new(cluster, config);
        let mut sent = Vec::new();
        for i in 0..3000 {
            let value = Bytes::from(pipelined_value(i));
            sent.push(producer.send(topic, None, Some(value)).await.unwrap());
        }
        let mut offsets = Vec::new();
        for delivery in sent {
            offsets.push(delivery.await.unwrap().offset);
        }
        offsets
    })
}

/// The project's producer keeps several Produce requests in flight on
/// its connection (as librdkafka's 5 with idempotence), seen by a proxy
/// counting the frames; every record lands once, in the order sent.
#[test]
fn the_producer_pipelines_its_requests_and_keeps_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, counter) = broker_behind_a_counter(dir.path(), "piped");
    let offsets = produce_3000(counter.address, "piped");
    assert_eq!(
        offsets,
        (0..3000).collect::<Vec<i64>>(),
        "once each, in order"
    );
    let most = counter.most_unanswered();
    assert!(
        most >= 2,
        "at most {most} request(s) unanswered on a connection"
    );
    assert!(
        most <= 5,
        "{most} unanswered: more than the idempotent limit"
    );
}

/// The producer's window does not drain: with its answers coming 20 ms
/// apart (the proxy paces them), it sends its next request as each answer
/// comes, while the requests after the answered one are still out (a
/// producer that read every answer of a group of requests before sending
/// more would never do so), and every record still lands once, in order.
#[test]
fn the_producer_sends_its_next_request_as_each_answer_comes() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, counter) = broker_with_behind_a_counter(dir.path(), "window", &[]);
    counter.pace_answers(Duration::from_millis(20));
    let offsets = produce_3000(counter.address, "window");
    assert_eq!(
        offsets,
        (0..3000).collect::<Vec<i64>>(),
        "once each, in order"
    );
    let (refills, requests) = (counter.refills(), counter.requests());
    assert!(
        refills * 2 > requests,
        "only {refills} of {requests} requests were sent while others were out after an answer"
    );
}

/// A batch started alone while the producer waits for a slow answer
/// (the broker holds each acks=all answer a second before its flush) goes
/// when its linger ends, not after that answer: with no other batch
/// lingering to time its wake, the waiting pipeline is poked by the new
/// batch. Two requests are then out at once on the Produce connection; a
/// pipeline left asleep until the answer would never have more than one.
#[test]
fn a_batch_started_while_an_answer_is_slow_goes_when_its_linger_ends() {
    let dir = tempfile::tempdir().unwrap();
    let held = [("BROKER_TEST_FLUSH_DELAY_MS", "1000")];
    let (_broker, counter) = broker_with_behind_a_counter(dir.path(), "slow", &held);
    let via = counter.address;
    let (first, second, second_queued) = on_glommio(async move {
        let config = client::producer::ProducerConfig {
            linger: Duration::from_millis(20),
            ..Default::default()
        };
        let producer = client::producer::Producer::new(ClientCluster::new(via, "slow"), config);
        let first = producer.send("slow", None, Some(Bytes::from_static(b"first")));
        let first = first.await.unwrap();
        // The first batch's request is out by now, and its answer held.
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let second_queued = std::time::Instant::now();
        let second = producer.send("slow", None, Some(Bytes::from_static(b"second")));
        let second = second.await.unwrap();
        (first.await.unwrap(), second.await.unwrap(), second_queued)
    });
    assert_eq!((first.offset, second.offset), (0, 1));
    assert!(
        first.acknowledged_at > second_queued,
        "the first answer came before the second record was queued: the test proves nothing"
    );
    assert!(
        first.acknowledged_at != second.acknowledged_at,
        "both records went in one request: the test proves nothing"
    );
    let most = counter.most_unanswered();
    assert!(
        most >= 2,
        "the second batch waited for the first's answer ({most} request(s) out at most)"
    );
}

/// A connection lost in the middle of the producer's pipeline (cut just
/// before one of its requests reaches the broker, the ones before it
/// maybe written, their answers lost): the producer reconnects and
/// resends in order, and every record lands once, in the order sent.
#[test]
fn a_connection_lost_mid_pipeline_loses_nothing_and_writes_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, counter) = broker_behind_a_counter(dir.path(), "cut");
    let before = counter.requests();
    counter.cut_at_request(25);
    let offsets = produce_3000(counter.address, "cut");
    assert!(counter.requests() - before > 25, "the cut was crossed");
    assert_eq!(
        offsets,
        (0..3000).collect::<Vec<i64>>(),
        "once each, in order"
    );
    let read = values(&counter.address.to_string(), "cut");
    let sent: Vec<String> = (0..3000).map(pipelined_value).collect();
    assert!(
        read == sent,
        "the log holds each record once, in order ({} read)",
        read.len()
    );
}
