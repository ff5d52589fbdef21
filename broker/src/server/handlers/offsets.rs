//! ListOffsets v1-6 (earliest, latest, by timestamp) and DeleteRecords
//! v0-2 (move a partition's log start up), each run on the partition's shard.

use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, ListOffsetsRequest, ListOffsetsResponse,
};
use kafka_protocol::ResponseError;
use storage::{Offset, StorageError, TimestampMs};

use super::routing::{check_leader_epoch, on_led_partition, route_by_name, Code, Led};
use super::{HandlerError, Outcome};
use crate::kafka::bounds::{check_delete_records, check_list_offsets};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::server::shard::Shard;

/// ListOffsets versions served. v7+ adds the max-timestamp query (-3),
/// not served; clients negotiate down.
pub const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 6);
/// DeleteRecords versions served.
pub const DELETE_RECORDS_VERSIONS: (i16, i16) = (0, 2);

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

/// One partition's ListOffsets answer: (error, timestamp, offset, leader epoch).
type Listed = (Code, i64, i64, i32);

/// Answers ListOffsets.
pub async fn list_offsets(shard: &Rc<Shard>, request: &Request) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: ListOffsetsRequest = checked(request, check_list_offsets)?;
    let mut pending = Vec::new();
    for topic in &decoded.topics {
        for p in &topic.partitions {
            let route = route_by_name(shard, topic.name.as_str(), p.partition_index);
            let (shard, timestamp) = (shard.clone(), p.timestamp);
            let current_leader_epoch = if version >= 4 {
                p.current_leader_epoch
            } else {
                -1
            };
            pending.push(async move {
                on_led_partition(
                    &shard,
                    route,
                    |code| (code, -1, -1, -1),
                    move |_, led| {
                        Box::pin(async move {
                            if let Err(code) = check_leader_epoch(current_leader_epoch, led.epoch) {
                                return (code, -1, -1, -1);
                            }
                            list_on_owner(led, timestamp).await
                        })
                    },
                )
                .await
            });
        }
    }
    let mut results = futures::future::join_all(pending).await.into_iter();
    let topics = decoded
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let (error, timestamp, offset, epoch): Listed =
                        results.next().expect("one result per partition");
                    let mut entry = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                        .with_timestamp(timestamp)
                        .with_offset(offset);
                    if version >= 4 {
                        entry = entry.with_leader_epoch(epoch);
                    }
                    entry
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    let answer = ListOffsetsResponse::default().with_topics(topics);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// Answers DeleteRecords: each partition's log start moves up to the
/// offset given (-1: the high watermark), never past the high watermark.
pub async fn delete_records(shard: &Rc<Shard>, request: &Request) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DeleteRecordsRequest = checked(request, check_delete_records)?;
    let mut pending = Vec::new();
    for topic in &decoded.topics {
        for p in &topic.partitions {
            let route = route_by_name(shard, topic.name.as_str(), p.partition_index);
            let (shard, offset) = (shard.clone(), p.offset);
            pending.push(async move {
                on_led_partition(
                    &shard,
                    route,
                    |code| (code, -1),
                    move |_, led| Box::pin(async move { delete_on_owner(led, offset).await }),
                )
                .await
            });
        }
    }
    let mut results = futures::future::join_all(pending).await.into_iter();
    let topics = decoded
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let (error, low_watermark) = results.next().expect("one result per partition");
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                        .with_low_watermark(low_watermark)
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    let answer = DeleteRecordsResponse::default().with_topics(topics);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

async fn list_on_owner(led: Led, timestamp: i64) -> Listed {
    let log = &led.partition.log;
    let epoch = led.epoch.0;
    match timestamp {
        LATEST => (0, -1, log.high_watermark().0, epoch),
        EARLIEST => (0, -1, log.log_start().0, epoch),
        t if t < 0 => (ResponseError::InvalidRequest.code(), -1, -1, -1),
        t => match log
            .offset_for_timestamp(TimestampMs(t), log.high_watermark())
            .await
        {
            Ok(Some((offset, at))) => (0, at.0, offset.0, epoch),
            Ok(None) => (0, -1, -1, epoch),
            Err(e) => {
                tracing::error!(error = %e, "offset for timestamp failed");
                (ResponseError::KafkaStorageError.code(), -1, -1, -1)
            }
        },
    }
}

async fn delete_on_owner(led: Led, offset: i64) -> (Code, i64) {
    let log = &led.partition.log;
    let target = if offset == -1 {
        log.high_watermark()
    } else {
        Offset(offset)
    };
    if target.0 < 0 {
        return (ResponseError::OffsetOutOfRange.code(), log.log_start().0);
    }
    match log.delete_records_below(target).await {
        Ok(start) => (0, start.0),
        Err(StorageError::OffsetOutOfRange { .. }) => {
            (ResponseError::OffsetOutOfRange.code(), log.log_start().0)
        }
        Err(e) => {
            tracing::error!(error = %e, "deleting records failed");
            (ResponseError::KafkaStorageError.code(), -1)
        }
    }
}
