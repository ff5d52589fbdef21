//! Leader epochs on one broker: OffsetForLeaderEpoch answers where each
//! epoch ends in the log (across a restart, which elects a new epoch), and
//! Fetch, ListOffsets and OffsetForLeaderEpoch refuse a stale epoch
//! (FENCED_LEADER_EPOCH) and a future one (UNKNOWN_LEADER_EPOCH).

mod support;

use bytes::Bytes;
use client::cluster::Cluster;
use client::producer::{Producer, ProducerConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use support::{on_glommio, start_broker};

const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str("epochs"))
}

async fn leader_epoch(cluster: &Cluster) -> i32 {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name())),
    ]));
    let response = cluster.call_any(&request).await.unwrap();
    response.topics[0].partitions[0].leader_epoch
}

/// (error, epoch, end offset) for `wanted`, claiming `current`.
async fn end_of(cluster: &Cluster, current: i32, wanted: i32) -> (i16, i32, i64) {
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name())
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current)
                .with_leader_epoch(wanted)])]);
    let response = cluster.call_any(&request).await.unwrap();
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

async fn produce(cluster: &std::rc::Rc<Cluster>, count: usize) {
    let producer = Producer::new(cluster.clone(), ProducerConfig::default());
    let mut sent = Vec::new();
    for i in 0..count {
        sent.push(
            producer
                .send("epochs", None, Some(Bytes::from(format!("v{i}"))))
                .await
                .unwrap(),
        );
    }
    for s in sent {
        s.await.unwrap();
    }
}

async fn fetch_error(cluster: &Cluster, current: i32) -> i16 {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(10)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(current)
                .with_partition_max_bytes(1 << 20)])]);
    // Pinned to v12, which names topics (the client would pick v18, by id).
    let connection = cluster.any().await.unwrap();
    let mut connection = connection.lock().await;
    let response = connection.call(&request, 12).await.unwrap();
    response.responses[0].partitions[0].error_code
}

async fn list_error(cluster: &Cluster, current: i32) -> i16 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name())
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(current)
                .with_timestamp(-1)])]);
    let response = cluster.call_any(&request).await.unwrap();
    response.topics[0].partitions[0].error_code
}

#[test]
fn offset_for_leader_epoch_answers_from_the_log_and_stale_or_future_epochs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let address = broker.address;
    let first = on_glommio(async move {
        let cluster = Cluster::new(address, "epochs-test");
        cluster.create_topic("epochs", 1, 1, &[]).await.unwrap();
        produce(&cluster, 10).await;
        let epoch = leader_epoch(&cluster).await;
        assert_eq!(end_of(&cluster, epoch, epoch).await, (0, epoch, 10));
        assert_eq!(end_of(&cluster, -1, epoch + 5).await, (0, epoch, 10));
        assert_eq!(
            end_of(&cluster, -1, epoch - 1).await,
            (0, -1, -1),
            "older than any"
        );
        assert_eq!(
            end_of(&cluster, epoch + 1, epoch).await.0,
            UNKNOWN_LEADER_EPOCH
        );
        assert_eq!(fetch_error(&cluster, epoch + 1).await, UNKNOWN_LEADER_EPOCH);
        assert_eq!(list_error(&cluster, epoch + 1).await, UNKNOWN_LEADER_EPOCH);
        assert_eq!(fetch_error(&cluster, epoch).await, 0);
        assert_eq!(list_error(&cluster, epoch).await, 0);
        epoch
    });
    // A restart fences the old life and elects the new one in a new leader
    // epoch: the old records keep theirs, new ones carry the new one, and a
    // client still holding the old epoch is fenced.
    broker.terminate();
    let broker = start_broker(dir.path());
    let address = broker.address;
    on_glommio(async move {
        let cluster = Cluster::new(address, "epochs-test");
        cluster.refresh(Some(&["epochs"]), false).await.unwrap();
        let second = leader_epoch(&cluster).await;
        assert!(
            second > first,
            "a new leader epoch after the restart ({first} -> {second})"
        );
        produce(&cluster, 5).await;
        assert_eq!(end_of(&cluster, second, first).await, (0, first, 10));
        assert_eq!(end_of(&cluster, second, second).await, (0, second, 15));
        assert_eq!(end_of(&cluster, first, first).await.0, FENCED_LEADER_EPOCH);
        assert_eq!(fetch_error(&cluster, first).await, FENCED_LEADER_EPOCH);
        assert_eq!(list_error(&cluster, first).await, FENCED_LEADER_EPOCH);
    });
}
