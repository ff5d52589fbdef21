//! Transactions at the protocol level, in raw requests: the coordinator's
//! and the leaders' refusals, with the log end checked unchanged where a
//! write is refused; transaction.version 2's requests (EndTxn v5, Produce v12's implicit
//! add, TxnOffsetCommit v5), the timeout and expiration of ids, and
//! `broker txn` on a hung transaction. Client-level tests are in
//! transactions.rs, fixed fault points in transaction_points.rs.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use client::connection::Connection;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ListOffsetsRequest, ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use storage::batch::{build, set_flags, stamp_producer, RecordSpec, TRANSACTIONAL_FLAG};
use storage::TimestampMs;

use support::{cli, on_glommio, start_broker, Broker};

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

async fn connect(address: SocketAddr) -> Connection {
    Connection::connect(address, "transactions-test")
        .await
        .unwrap()
}

/// InitProducerId for `id` (retried while the coordinator loads).
async fn init(c: &mut Connection, id: &str, timeout_ms: i32) -> (i64, i16) {
    let find = FindCoordinatorRequest::default()
        .with_key(text(id))
        .with_key_type(1);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(text(id))))
        .with_transaction_timeout_ms(timeout_ms);
    for _ in 0..100 {
        let _ = c.call(&find, 3).await.unwrap();
        let answer = c.call(&request, 4).await.unwrap();
        if answer.error_code == 0 {
            return (answer.producer_id.0, answer.producer_epoch);
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    panic!("InitProducerId never succeeded");
}

async fn add_partition(c: &mut Connection, id: &str, producer: (i64, i16), version: i16) -> i16 {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(text(id)))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(text("txn-refusals")))
            .with_partitions(vec![0])]);
    let answer = c.call(&request, version).await.unwrap();
    answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

async fn end_txn(c: &mut Connection, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    c.call(&request, 3).await.unwrap().error_code
}

/// A transactional batch of one record to partition 0 at `sequence`.
async fn produce(c: &mut Connection, id: &str, producer: (i64, i16), sequence: i32) -> i16 {
    produce_at(c, id, producer, sequence, 9).await
}

/// [`produce`] in Produce `version` (12+: transaction.version 2).
async fn produce_at(
    c: &mut Connection,
    id: &str,
    producer: (i64, i16),
    sequence: i32,
    version: i16,
) -> i16 {
    let spec = RecordSpec {
        timestamp_delta: 0,
        key: None,
        value: Some(b"v".to_vec()),
    };
    let mut batch = build(TimestampMs(1_000), &[spec]);
    stamp_producer(&mut batch, producer.0, producer.1, sequence);
    set_flags(&mut batch, TRANSACTIONAL_FLAG);
    let request = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(text(id))))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(text("txn-refusals")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.freeze()))])]);
    let answer = c.call(&request, version).await.unwrap();
    answer.responses[0].partition_responses[0].error_code
}

/// Partition 0's (high watermark, last stable offset).
async fn ends(c: &mut Connection) -> (i64, i64) {
    let mut out = [0i64; 2];
    for (i, isolation) in [0i8, 1].into_iter().enumerate() {
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_isolation_level(isolation)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(text("txn-refusals")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]);
        let answer = c.call(&request, 5).await.unwrap();
        out[i] = answer.topics[0].partitions[0].offset;
    }
    (out[0], out[1])
}

/// EndTxn v5: its code and the producer id and epoch to go on with;
/// asked again while the previous end's markers are being written
/// (CONCURRENT_TRANSACTIONS, which clients retry).
async fn end_txn_v5(
    c: &mut Connection,
    id: &str,
    producer: (i64, i16),
    commit: bool,
) -> (i16, (i64, i16)) {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    for _ in 0..100 {
        let answer = c.call(&request, 5).await.unwrap();
        if answer.error_code != code(ResponseError::ConcurrentTransactions) {
            return (
                answer.error_code,
                (answer.producer_id.0, answer.producer_epoch),
            );
        }
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    panic!("EndTxn stayed CONCURRENT_TRANSACTIONS");
}

/// Waits (bounded) for `id`'s transaction to be complete: the last
/// stable offset at the high watermark (the markers are written after
/// EndTxn's answer) and the coordinator past its Prepare state (it
/// records the completion after the markers; until then an EndTxn at
/// the new epoch is fenced, as Kafka's coordinator does).
async fn settled(c: &mut Connection, id: &str) -> (i64, i64) {
    for _ in 0..100 {
        let (hw, lso) = ends(c).await;
        if hw == lso && coordinator_state(c, id).await.starts_with("Complete") {
            return (hw, lso);
        }
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    ends(c).await
}

#[test]
fn transaction_version_2_adds_partitions_on_produce_and_bumps_the_epoch_per_transaction() {
    let (_dir, broker) = broker_with_topic();
    let address = broker.address;
    on_glommio(async move {
        let mut c = connect(address).await;
        let (pid, epoch) = init(&mut c, "tx-v2", 60_000).await;
        // No AddPartitionsToTxn: Produce v12 adds the partition.
        assert_eq!(produce_at(&mut c, "tx-v2", (pid, epoch), 0, 12).await, 0);
        assert_eq!(produce_at(&mut c, "tx-v2", (pid, epoch), 1, 12).await, 0);
        assert_eq!(ends(&mut c).await, (2, 0), "an open transaction");
        // A classic produce (v11) may not open a transaction itself.
        let classic = init(&mut c, "tx-v2b", 60_000).await;
        assert_eq!(
            produce_at(&mut c, "tx-v2b", classic, 0, 11).await,
            code(ResponseError::TransactionAbortable)
        );
        let (ended, next) = end_txn_v5(&mut c, "tx-v2", (pid, epoch), true).await;
        assert_eq!(ended, 0);
        assert_eq!(next, (pid, epoch + 1), "the epoch is bumped");
        // Its retry (as if the answer was lost) gets the same answer
        // once the commit is complete (CONCURRENT_TRANSACTIONS while
        // its markers are written; clients retry that).
        assert_eq!(
            end_txn_v5(&mut c, "tx-v2", (pid, epoch), true).await,
            (0, next)
        );
        assert_eq!(
            settled(&mut c, "tx-v2").await,
            (3, 3),
            "committed by a marker"
        );
        // A late batch of the ended transaction: its epoch is old now,
        // so it cannot open a transaction the coordinator never sees.
        assert_eq!(
            produce_at(&mut c, "tx-v2", (pid, epoch), 2, 12).await,
            code(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(ends(&mut c).await, (3, 3), "nothing appended");
        // The next transaction at the new epoch, from sequence 0.
        assert_eq!(produce_at(&mut c, "tx-v2", next, 0, 12).await, 0);
        let (ended, after) = end_txn_v5(&mut c, "tx-v2", next, false).await;
        assert_eq!((ended, after), (0, (pid, epoch + 2)));
        assert_eq!(
            settled(&mut c, "tx-v2").await,
            (5, 5),
            "aborted by a marker"
        );
        // An abort with nothing sent still fences with a bump.
        let (ended, fenced) = end_txn_v5(&mut c, "tx-v2", after, false).await;
        assert_eq!((ended, fenced), (0, (pid, epoch + 3)));
        let (commit_nothing, _) = end_txn_v5(&mut c, "tx-v2", fenced, true).await;
        assert_eq!(commit_nothing, code(ResponseError::InvalidTxnState));
        let (zombie, _) = end_txn_v5(&mut c, "tx-v2", (pid, epoch), true).await;
        assert_eq!(zombie, code(ResponseError::ProducerFenced));
    });
}

/// TxnOffsetCommit of `group`'s offset `offset` for partition 0 at
/// `version`; the partition's code (retried while the group's
/// coordinator comes up).
async fn txn_offset_commit(
    c: &mut Connection,
    id: &str,
    producer: (i64, i16),
    group: &str,
    offset: i64,
    version: i16,
) -> i16 {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, TxnOffsetCommitRequest};
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(text(id)))
        .with_group_id(GroupId(text(group)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(text("txn-refusals")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let waiting = [
        code(ResponseError::CoordinatorNotAvailable),
        code(ResponseError::CoordinatorLoadInProgress),
        code(ResponseError::NotCoordinator),
    ];
    // As clients do: the group's coordinator first (this creates the
    // offsets topic).
    let find = FindCoordinatorRequest::default().with_key(text(group));
    for _ in 0..100 {
        let _ = c.call(&find, 3).await.unwrap();
        let answer = c.call(&request, version).await.unwrap();
        let partition = answer.topics[0].partitions[0].error_code;
        if !waiting.contains(&partition) {
            return partition;
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    panic!("the group coordinator never came up");
}

/// `group`'s committed offset of partition 0, stable ones only (-1:
/// none yet, or UNSTABLE_OFFSET_COMMIT: pending in a transaction).
async fn stable_offset(c: &mut Connection, group: &str) -> i64 {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest};
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_require_stable(true)
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(text("txn-refusals")))
            .with_partition_indexes(vec![0])]));
    let answer = c.call(&request, 7).await.unwrap();
    assert_eq!(answer.error_code, 0, "a partition's error, not the group's");
    let partition = &answer.topics[0].partitions[0];
    let unstable = code(ResponseError::UnstableOffsetCommit);
    match partition.error_code {
        0 => partition.committed_offset,
        e if e == unstable => -1,
        e => panic!("OffsetFetch: {e}"),
    }
}

#[test]
fn transaction_version_2_starts_the_next_transaction_while_the_last_ones_marker_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    // The marker comes 300 ms after EndTxn's answer.
    let env = [("BROKER_TEST_MARKER_PAUSE_MS", "300")];
    let broker = support::start_broker_with(dir.path(), &env);
    cli(&broker.bootstrap(), &["topic", "create", "txn-refusals"]);
    let address = broker.address;
    on_glommio(async move {
        let mut c = connect(address).await;
        let producer = init(&mut c, "tx-next", 60_000).await;
        assert_eq!(produce_at(&mut c, "tx-next", producer, 0, 12).await, 0);
        let (ended, next) = end_txn_v5(&mut c, "tx-next", producer, true).await;
        assert_eq!(ended, 0);
        // At once, as clients do: the leader's add waits for the
        // commit to complete, and the commit's marker (at the bumped
        // epoch) landing meanwhile does not refuse the batch.
        assert_eq!(produce_at(&mut c, "tx-next", next, 0, 12).await, 0);
        let (ended, _) = end_txn_v5(&mut c, "tx-next", next, true).await;
        assert_eq!(ended, 0);
        // data, marker, data, marker: both committed.
        assert_eq!(settled(&mut c, "tx-next").await, (4, 4));
    });
}

#[test]
fn transaction_version_2_adds_every_partition_of_a_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let partitions = 6;
    cli(
        &broker.bootstrap(),
        &[
            "topic",
            "create",
            "txn-many",
            "--partitions",
            &partitions.to_string(),
        ],
    );
    let address = broker.address;
    on_glommio(async move {
        let mut c = connect(address).await;
        let producer = init(&mut c, "tx-many", 60_000).await;
        // One request, a batch for each partition: each adds itself at
        // the coordinator, one write after another, all in this request.
        let data = (0..partitions)
            .map(|index| {
                let spec = RecordSpec {
                    timestamp_delta: 0,
                    key: None,
                    value: Some(b"v".to_vec()),
                };
                let mut batch = build(TimestampMs(1_000), &[spec]);
                stamp_producer(&mut batch, producer.0, producer.1, 0);
                set_flags(&mut batch, TRANSACTIONAL_FLAG);
                PartitionProduceData::default()
                    .with_index(index)
                    .with_records(Some(batch.freeze()))
            })
            .collect();
        let request = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(text("tx-many"))))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(text("txn-many")))
                .with_partition_data(data)]);
        let answer = c.call(&request, 12).await.unwrap();
        let codes: Vec<i16> = answer.responses[0]
            .partition_responses
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![0; partitions as usize]);
        let (ended, _) = end_txn_v5(&mut c, "tx-many", producer, true).await;
        assert_eq!(ended, 0);
    });
}

#[test]
fn transaction_version_2_commits_a_groups_offsets_without_add_offsets_to_txn() {
    let (_dir, broker) = broker_with_topic();
    let address = broker.address;
    on_glommio(async move {
        let mut c = connect(address).await;
        // The classic protocol needs AddOffsetsToTxn first.
        let classic = init(&mut c, "tx-off-v4", 60_000).await;
        let refused = txn_offset_commit(&mut c, "tx-off-v4", classic, "g-v4", 7, 4).await;
        assert_ne!(refused, 0, "v4 without AddOffsetsToTxn");
        assert_eq!(stable_offset(&mut c, "g-v4").await, -1);
        // v5 adds the group's partition to the transaction itself.
        let producer = init(&mut c, "tx-off", 60_000).await;
        assert_eq!(produce_at(&mut c, "tx-off", producer, 0, 12).await, 0);
        let pending = txn_offset_commit(&mut c, "tx-off", producer, "g-v5", 42, 5).await;
        assert_eq!(pending, 0);
        assert_eq!(
            stable_offset(&mut c, "g-v5").await,
            -1,
            "pending until the commit"
        );
        let (ended, _) = end_txn_v5(&mut c, "tx-off", producer, true).await;
        assert_eq!(ended, 0);
        let mut committed = stable_offset(&mut c, "g-v5").await;
        for _ in 0..100 {
            if committed == 42 {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
            committed = stable_offset(&mut c, "g-v5").await;
        }
        assert_eq!(committed, 42, "applied by the commit's marker");
    });
}

/// A broker with the topic these tests write to (the directory
/// lives as long as the broker is needed).
fn broker_with_topic() -> (tempfile::TempDir, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    cli(&broker.bootstrap(), &["topic", "create", "txn-refusals"]);
    (dir, broker)
}

fn code(error: ResponseError) -> i16 {
    error.code()
}

/// DescribeTransactions' code for `id` (0: found).
async fn describe_code(c: &mut Connection, id: &str) -> i16 {
    let request = kafka_protocol::messages::DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(text(id))]);
    let answer = c.call(&request, 0).await.unwrap();
    answer.transaction_states[0].error_code
}

/// The state DescribeTransactions gives `id` ("" when not found).
async fn coordinator_state(c: &mut Connection, id: &str) -> String {
    let request = kafka_protocol::messages::DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(text(id))]);
    let answer = c.call(&request, 0).await.unwrap();
    answer.transaction_states[0].transaction_state.to_string()
}

#[test]
fn an_idle_transactional_id_expires_and_stays_gone_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("BROKER_TRANSACTIONAL_ID_EXPIRATION_MS", "1500")];
    let broker = support::start_broker_with(dir.path(), &env);
    let address = broker.address;
    let gone = code(ResponseError::TransactionalIdNotFound);
    on_glommio(async move {
        let mut c = connect(address).await;
        init(&mut c, "tx-e", 60_000).await;
        assert_eq!(describe_code(&mut c, "tx-e").await, 0, "known at first");
        let mut found = 0;
        for _ in 0..100 {
            found = describe_code(&mut c, "tx-e").await;
            if found == gone {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(found, gone, "expired within its expiration and a tick");
    });
    drop(broker);
    // Back with a long expiration: only the replayed tombstone can
    // make it unknown now.
    let long = [("BROKER_TRANSACTIONAL_ID_EXPIRATION_MS", "600000")];
    let broker = support::start_broker_with(dir.path(), &long);
    let address = broker.address;
    on_glommio(async move {
        let mut c = connect(address).await;
        let mut found = 0;
        for _ in 0..100 {
            found = describe_code(&mut c, "tx-e").await;
            // Until the coordinator has loaded: NOT_COORDINATOR and kin.
            if found == gone || found == 0 {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(found, gone, "its tombstone replayed at load");
    });
}

/// `broker txn find-hanging` on the test topic, any age.
fn find_hanging(bootstrap: &str) -> String {
    let args = [
        "txn",
        "find-hanging",
        "--topic",
        "txn-refusals",
        "--max-age-ms",
        "0",
    ];
    cli(bootstrap, &args)
}

#[test]
fn an_operator_finds_a_hung_transaction_and_aborts_it_with_broker_txn() {
    let (_dir, broker) = broker_with_topic();
    let bootstrap = broker.bootstrap();
    let address = broker.address;
    // An open transaction whose producer went silent (the longest
    // timeout: the coordinator would wait 15 minutes).
    let producer = on_glommio(async move {
        let mut c = connect(address).await;
        let producer = init(&mut c, "tx-hung", 900_000).await;
        assert_eq!(add_partition(&mut c, "tx-hung", producer, 3).await, 0);
        assert_eq!(produce(&mut c, "tx-hung", producer, 0).await, 0);
        assert_eq!(ends(&mut c).await, (1, 0));
        producer
    });
    let listed = cli(&bootstrap, &["txn", "list"]);
    assert!(
        listed.contains("tx-hung") && listed.contains("Ongoing"),
        "{listed}"
    );
    let ongoing = cli(&bootstrap, &["txn", "list", "--state", "PrepareCommit"]);
    assert!(!ongoing.contains("tx-hung"), "filtered by state: {ongoing}");
    let described = cli(&bootstrap, &["txn", "describe", "tx-hung"]);
    assert!(described.contains("txn-refusals"), "{described}");
    let hanging = find_hanging(&bootstrap);
    assert!(hanging.contains(&producer.0.to_string()), "{hanging}");
    let id = producer.0.to_string();
    cli(
        &bootstrap,
        &[
            "txn",
            "abort",
            "--topic",
            "txn-refusals",
            "--partition",
            "0",
            "--producer-id",
            &id,
        ],
    );
    let settled = on_glommio(async move {
        let mut c = connect(address).await;
        ends(&mut c).await
    });
    assert_eq!(settled, (2, 2), "the ABORT marker moved the LSO to the HW");
    let hanging = find_hanging(&bootstrap);
    assert!(!hanging.contains(&id), "{hanging}");
}

#[test]
fn refused_transactional_writes_leave_the_log_as_it_was() {
    let (_dir, broker) = broker_with_topic();
    let address = broker.address;
    on_glommio(async move {
        let mut c = connect(address).await;
        let producer = init(&mut c, "tx-r", 60_000).await;
        // A batch before its partition was added: refused, nothing written.
        let refused = produce(&mut c, "tx-r", producer, 0).await;
        assert_eq!(refused, code(ResponseError::InvalidTxnState));
        assert_eq!(ends(&mut c).await, (0, 0), "the log end is unchanged");
        assert_eq!(
            end_txn(&mut c, "nosuch", producer, true).await,
            code(ResponseError::InvalidProducerIdMapping)
        );
        assert_eq!(
            end_txn(&mut c, "tx-r", producer, true).await,
            code(ResponseError::InvalidTxnState),
            "nothing open to commit"
        );
        assert_eq!(add_partition(&mut c, "tx-r", producer, 3).await, 0);
        assert_eq!(produce(&mut c, "tx-r", producer, 0).await, 0);
        let (hw, lso) = ends(&mut c).await;
        assert_eq!((hw, lso), (1, 0), "the open transaction holds the LSO");
        assert_eq!(end_txn(&mut c, "tx-r", producer, false).await, 0);
        // The abort's marker comes after the answer: the LSO passes it.
        let mut settled = ends(&mut c).await;
        for _ in 0..100 {
            if settled.0 == settled.1 {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
            settled = ends(&mut c).await;
        }
        assert_eq!(settled, (2, 2), "a marker after the record; LSO at HW");
        // A late retry of the aborted batch cannot reopen a transaction.
        let late = produce(&mut c, "tx-r", producer, 1).await;
        assert_eq!(late, code(ResponseError::InvalidTxnState));
        assert_eq!(ends(&mut c).await, (2, 2));
    });
}

/// The value of one sample of broker's /metrics.
fn sample(http: SocketAddr, line_start: &str) -> Option<f64> {
    let (_, page) = support::http(http, "GET", "/metrics", "");
    page.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let (_dir, broker) = broker_with_topic();
    let (address, http) = (broker.address, broker.http);
    let open = "partition_open_transactions{topic=\"txn-refusals\",partition=\"0\"}";
    let lso = "partition_last_stable_offset{topic=\"txn-refusals\",partition=\"0\"}";
    let aborted = "transactions_completed_total{outcome=\"abort\"}";
    on_glommio(async move {
        let mut c = connect(address).await;
        let producer = init(&mut c, "tx-t", 1_000).await;
        assert_eq!(add_partition(&mut c, "tx-t", producer, 3).await, 0);
        assert_eq!(produce(&mut c, "tx-t", producer, 0).await, 0);
        assert_eq!(sample(http, open), Some(1.0), "one open transaction");
        assert_eq!(sample(http, lso), Some(0.0));
        // The coordinator aborts it within its timeout and a tick.
        let mut settled = ends(&mut c).await;
        for _ in 0..100 {
            if settled.0 == settled.1 {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
            settled = ends(&mut c).await;
        }
        assert_eq!(settled, (2, 2), "aborted by the coordinator");
        assert_eq!(sample(http, open), Some(0.0));
        assert_eq!(sample(http, lso), Some(2.0));
        // Counted once Complete* is written, after the markers.
        let mut counted = sample(http, aborted);
        for _ in 0..50 {
            if counted == Some(1.0) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
            counted = sample(http, aborted);
        }
        assert_eq!(counted, Some(1.0), "counted as aborted");
        assert_eq!(
            add_partition(&mut c, "tx-t", producer, 3).await,
            code(ResponseError::ProducerFenced)
        );
        assert_eq!(
            add_partition(&mut c, "tx-t", producer, 1).await,
            code(ResponseError::InvalidProducerEpoch),
            "PRODUCER_FENCED as versions before 2 know it"
        );
        assert_eq!(
            produce(&mut c, "tx-t", producer, 1).await,
            code(ResponseError::InvalidProducerEpoch),
            "the zombie's late batch"
        );
        assert_eq!(ends(&mut c).await, (2, 2));
    });
}
