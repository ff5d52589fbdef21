//! ShareFetch, ShareAcknowledge and ShareGroupHeartbeat requests as the
//! share group tests send them over the wire: one group ("workers"),
//! partition 0 of one topic.

use client::connection::Connection;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, ShareAcknowledgeRequest, ShareFetchRequest,
    ShareFetchResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

/// The share group the requests name.
pub const GROUP: &str = "workers";

pub fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A ShareFetch of `member` at `epoch` naming partition 0 of `topic`
/// with `acks` (first, last, types).
pub fn fetch(
    topic: uuid::Uuid,
    (member, epoch): (&str, i32),
    max_records: i32,
    acks: &[(i64, i64, &[i8])],
) -> ShareFetchRequest {
    let batches = acks
        .iter()
        .map(|(first, last, types)| {
            AcknowledgementBatch::default()
                .with_first_offset(*first)
                .with_last_offset(*last)
                .with_acknowledge_types(types.to_vec())
        })
        .collect();
    let partition = FetchPartition::default()
        .with_partition_index(0)
        .with_acknowledgement_batches(batches);
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(text(GROUP))))
        .with_member_id(Some(text(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(2_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(max_records)
        .with_batch_size(max_records)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![partition])])
}

/// A ShareAcknowledge of `member` at `epoch` on partition 0.
pub fn acknowledge(
    topic: uuid::Uuid,
    (member, epoch): (&str, i32),
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeRequest {
    let batches = acks
        .iter()
        .map(|(first, last, ack)| {
            AckBatch::default()
                .with_first_offset(*first)
                .with_last_offset(*last)
                .with_acknowledge_types(vec![*ack])
        })
        .collect();
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(text(GROUP))))
        .with_member_id(Some(text(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])])
}

/// What an answer acquired on partition 0: (first, last, deliveries),
/// and whether it carried records.
pub fn acquired(answer: &ShareFetchResponse) -> (Vec<(i64, i64, i16)>, bool) {
    assert_eq!(answer.error_code, 0, "{answer:?}");
    let Some(partition) = answer.responses.first().map(|t| &t.partitions[0]) else {
        return (Vec::new(), false);
    };
    assert_eq!(partition.error_code, 0, "{answer:?}");
    let ranges = (partition.acquired_records.iter())
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect();
    let records = partition.records.as_ref().is_some_and(|r| !r.is_empty());
    (ranges, records)
}

/// A ShareGroupHeartbeat of `member` at `epoch` (0: joins, subscribed
/// to `topic`; -1: leaves).
pub fn beat(topic: &str, member: &str, epoch: i32) -> ShareGroupHeartbeatRequest {
    let mut request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member))
        .with_member_epoch(epoch);
    if epoch == 0 {
        request = request.with_subscribed_topic_names(Some(vec![TopicName(text(topic))]));
    }
    request
}

/// `request`'s answer once the group's coordinator is up.
pub async fn heartbeat(
    c: &mut Connection,
    request: &ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let waiting = [
        ResponseError::CoordinatorNotAvailable.code(),
        ResponseError::CoordinatorLoadInProgress.code(),
        ResponseError::NotCoordinator.code(),
    ];
    let find = FindCoordinatorRequest::default().with_key(text(GROUP));
    for _ in 0..100 {
        let _ = c.call(&find, 3).await.unwrap();
        let answer = c.call(request, 1).await.unwrap();
        if !waiting.contains(&answer.error_code) {
            return answer;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the share group's coordinator never came up")
}

/// Produces `count` records ("job-0", ...) to partition 0 of "jobs".
pub async fn produce_jobs(address: std::net::SocketAddr, count: usize) {
    let cluster = client::cluster::Cluster::new(address, "share-test-producer");
    let producer = client::producer::Producer::new(cluster, Default::default());
    let mut sent = Vec::new();
    for i in 0..count {
        let value = bytes::Bytes::from(format!("job-{i}"));
        sent.push(producer.send("jobs", None, Some(value)).await.unwrap());
    }
    for delivery in sent {
        delivery.await.unwrap();
    }
}
