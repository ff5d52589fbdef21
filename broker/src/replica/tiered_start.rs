//! A follower below its leader's local log start (tiered storage): the
//! leader answers its fetch OFFSET_MOVED_TO_TIERED_STORAGE, since what
//! it would copy next is only in the remote log. As KIP-405, the
//! follower asks the leader's earliest local offset (ListOffsets -4) and
//! starts its log over there, empty; the offsets below are the remote
//! log's, served by whichever broker leads.

use client::connection::{ClientError, Connection};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use storage::Offset;

use crate::cluster::routing::PartitionKey;

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
