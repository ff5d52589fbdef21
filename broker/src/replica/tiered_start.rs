//! A follower below its leader's local log start (tiered storage): the
//! leader answers its fetch OFFSET_MOVED_TO_TIERED_STORAGE, since what
//! it would copy next is only in the remote log. As KIP-405, the
//! follower asks the leader's earliest local offset (ListOffsets -4) and
//! starts its log over there, empty, with the producer state the leader
//! uploaded for that offset (transactions open across it stay open, so
//! their aborts are indexed and the LSO holds); the offsets below are the
//! remote log's, served by whichever broker leads.

use client::connection::{ClientError, Connection};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use storage::Offset;

use crate::cluster::routing::PartitionKey;
use crate::partition::{tiered, Partitions};
use crate::remote_store::RemoteError;

/// ListOffsets' earliest-local timestamp (KIP-1005), and the first
/// version that has it.
const EARLIEST_LOCAL: i64 = -4;
const LIST_OFFSETS_VERSION: i16 = 8;

/// The leader's local log start of the partition, as it answers.
pub async fn leaders_local_start(
    connection: &mut Connection,
    me: i32,
    topic: &str,
    key: PartitionKey,
) -> Result<Offset, ClientError> {
    let partition = ListOffsetsPartition::default()
        .with_partition_index(key.index as i32)
        .with_timestamp(EARLIEST_LOCAL);
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(me))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![partition])]);
    let response = connection.call(&request, LIST_OFFSETS_VERSION).await?;
    let answer = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or(ClientError::Broker(
            ResponseError::UnknownServerError.code(),
        ))?;
    if answer.error_code != 0 {
        return Err(ClientError::Broker(answer.error_code));
    }
    Ok(Offset(answer.offset))
}

/// The leader's producer snapshot at `start`, from the remote log (None:
/// there is none, or this broker has no object store: then the log
/// starts over without the producer state below `start`, and says so).
pub async fn producer_snapshot(
    shard: &Partitions,
    key: PartitionKey,
    start: Offset,
) -> Result<Option<bytes::Bytes>, RemoteError> {
    let Some(tiering) = &shard.tiering else {
        tracing::warn!(partition = key.index, topic = %key.topic, "no object store here (remote_store = none): starting over without the producer state below the leader's local start");
        return Ok(None);
    };
    let snapshot = tiered::producer_snapshot_at(tiering, key, start).await?;
    if snapshot.is_none() {
        tracing::warn!(partition = key.index, topic = %key.topic, %start, "no producer snapshot in the remote log at the leader's local start: starting over without the producer state below it");
    }
    Ok(snapshot)
}
