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

use super::access::Caller;
use super::{in_request_order, HandlerError, Outcome};
use crate::cluster::routing::Route;
use crate::kafka::bounds::{check_delete_records, check_list_offsets};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::kafka::Code;
use crate::partition::served::{check_leader_epoch, ServedPartition};
use crate::partition::tiered;
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// ListOffsets versions served: v7 adds the max-timestamp query (-3), v8
/// earliest-local (-4, KIP-405), v9 latest-tiered (-5, KIP-1005), v10 a
/// timeout for remote lookups (ours are bounded by the object store's
/// own). Earliest-pending-upload (-6, KIP-1023) is v11's, answered too.
pub const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 10);
/// DeleteRecords versions served.
pub const DELETE_RECORDS_VERSIONS: (i16, i16) = (0, 2);

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// One partition's ListOffsets answer.
#[derive(Debug, Clone, Copy)]
struct Listed {
    timestamp: i64,
    offset: i64,
    leader_epoch: i32,
}

/// Answers ListOffsets.
pub async fn list_offsets(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: ListOffsetsRequest = checked(request, check_list_offsets)?;
    // read_committed (v2+): the latest offset is the last stable one.
    let committed = version >= 2 && decoded.isolation_level == 1;
    let asked: Vec<(Route, (i64, i32))> = decoded
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                let route = shard
                    .cluster
                    .route_by_name(topic.name.as_str(), p.partition_index);
                let route = caller.topic_route(route, Operation::Describe, Some(&topic.name));
                let epoch = if version >= 4 {
                    p.current_leader_epoch
                } else {
                    -1
                };
                (route, (p.timestamp, epoch))
            })
        })
        .collect();
    let work = move |_: Rc<Partitions>,
                     led: ServedPartition,
                     (timestamp, epoch): (i64, i32)|
          -> LocalFuture<_> {
        Box::pin(async move {
            check_leader_epoch(epoch, led.epoch)?;
            list_on_owner(&led, timestamp, committed).await
        })
    };
    let results = shard.partitions.fan_out(asked, true, work).await;
    let topics = in_request_order(
        &decoded.topics,
        |topic| &topic.partitions,
        results,
        |p, result| listed_response(p.partition_index, result, version),
        |topic, partitions| {
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        },
    );
    let answer = ListOffsetsResponse::default().with_topics(topics);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

fn listed_response(
    index: i32,
    result: Result<Listed, Code>,
    version: i16,
) -> ListOffsetsPartitionResponse {
    let none = Listed {
        timestamp: -1,
        offset: -1,
        leader_epoch: -1,
    };
    let (error, listed) = match result {
        Ok(listed) => (0, listed),
        Err(code) => (code, none),
    };
    let entry = ListOffsetsPartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(error)
        .with_timestamp(listed.timestamp)
        .with_offset(listed.offset);
    if version >= 4 {
        entry.with_leader_epoch(listed.leader_epoch)
    } else {
        entry
    }
}

/// Answers DeleteRecords: each partition's log start moves up to the
/// offset given (-1: the high watermark), never past the high watermark.
pub async fn delete_records(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DeleteRecordsRequest = checked(request, check_delete_records)?;
    let asked: Vec<(Route, i64)> = decoded
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                let route = shard
                    .cluster
                    .route_by_name(topic.name.as_str(), p.partition_index);
                let route = caller.topic_route(route, Operation::Delete, Some(&topic.name));
                (route, p.offset)
            })
        })
        .collect();
    let work = |partitions: Rc<Partitions>, led: ServedPartition, offset: i64| -> LocalFuture<_> {
        Box::pin(async move { delete_on_owner(&partitions, &led, offset).await })
    };
    let results = shard.partitions.fan_out(asked, true, work).await;
    let topics = in_request_order(
        &decoded.topics,
        |topic| &topic.partitions,
        results,
        |p, result| {
            let (error, low_watermark) = match result {
                Ok(low_watermark) => (0, low_watermark),
                Err(code) => (code, -1),
            };
            DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_error_code(error)
                .with_low_watermark(low_watermark)
        },
        |topic, partitions| {
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        },
    );
    let answer = DeleteRecordsResponse::default().with_topics(topics);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// One partition's answer: offsets a reader may see, below the high
/// watermark, or below the last stable offset for a `committed` reader.
async fn list_on_owner(
    led: &ServedPartition,
    timestamp: i64,
    committed: bool,
) -> Result<Listed, Code> {
    let log = &led.partition.log;
    if committed {
        // A tiered log's last stable offset stops at the remote start: the
        // manifest must be known (a new leader may not have read it yet).
        remote_manifest(led).await?;
    }
    let visible = match committed {
        true => led.last_stable_offset(),
        false => log.high_watermark(),
    };
    let leader_epoch = led.epoch.0;
    let at = |offset: i64, timestamp: i64| Listed {
        timestamp,
        offset,
        leader_epoch,
    };
    match timestamp {
        LATEST => Ok(at(visible.0, -1)),
        EARLIEST => Ok(at(earliest(led).await?.0, -1)),
        EARLIEST_LOCAL => Ok(at(log.log_start().0, -1)),
        LATEST_TIERED => Ok(at(latest_tiered(led).await?, -1)),
        EARLIEST_PENDING_UPLOAD => Ok(at(pending_upload(led).await?, -1)),
        MAX_TIMESTAMP => Ok(match max_timestamp(led, visible).await? {
            Some((offset, found)) => at(offset.0, found.0),
            None => at(-1, -1),
        }),
        t if t < 0 => Err(ResponseError::InvalidRequest.code()),
        t => match offset_for_timestamp(led, TimestampMs(t), visible).await? {
            Some((offset, found)) => Ok(at(offset.0, found.0)),
            None => Ok(at(-1, -1)),
        },
    }
}

/// The batch with the largest timestamp below `visible` (-3): a remote
/// segment's when newer than every local one (found by its timestamp).
async fn max_timestamp(
    led: &ServedPartition,
    visible: Offset,
) -> Result<Option<(Offset, TimestampMs)>, Code> {
    let local = led.partition.log.max_timestamp_below(visible);
    let Some(manifest) = remote_manifest(led).await? else {
        return Ok(local);
    };
    let newest_remote = manifest.segments().iter().map(|s| s.max_timestamp).max();
    match newest_remote {
        Some(remote) if local.is_none_or(|(_, newest)| remote > newest) => {
            offset_for_timestamp(led, remote, visible).await
        }
        _ => Ok(local),
    }
}

/// The first record stamped at or after `t` below `visible`: in the
/// remote log first (a tiered topic's oldest records are only there),
/// else in the local log.
async fn offset_for_timestamp(
    led: &ServedPartition,
    t: TimestampMs,
    visible: Offset,
) -> Result<Option<(Offset, TimestampMs)>, Code> {
    let log = &led.partition.log;
    if let (Some(manifest), Some(tiering)) = (remote_manifest(led).await?, &led.tiering) {
        let (key, max_batch) = (led.key(), log.max_batch_bytes());
        let found = tiered::read::offset_for_timestamp(tiering, key, &manifest, t, max_batch).await;
        let found = found.map_err(|e| {
            tracing::error!(topic = %led.topic.name, partition = led.index, error = %e, "a timestamp lookup in the remote log failed");
            ResponseError::KafkaStorageError.code()
        })?;
        if let Some(found) = found.filter(|(offset, _)| *offset < visible) {
            return Ok(Some(found));
        }
    }
    log.offset_for_timestamp(t, visible).await.map_err(|e| {
        tracing::error!(error = %e, "offset for timestamp failed");
        ResponseError::KafkaStorageError.code()
    })
}

/// The earliest offset: a tiered topic's remote log start when older than
/// the local one.
async fn earliest(led: &ServedPartition) -> Result<Offset, Code> {
    let local = led.partition.log.log_start();
    let Some(manifest) = remote_manifest(led).await? else {
        return Ok(local);
    };
    Ok(manifest
        .start_offset()
        .map_or(local, |start| start.min(local)))
}

/// The last offset uploaded (-1 for a topic that is not tiered, or
/// nothing uploaded yet).
async fn latest_tiered(led: &ServedPartition) -> Result<i64, Code> {
    let manifest = remote_manifest(led).await?;
    Ok(manifest
        .and_then(|m| m.last_offset())
        .map_or(-1, |end| end.0))
}

/// The first offset not uploaded yet (-1 for a topic that is not tiered).
async fn pending_upload(led: &ServedPartition) -> Result<i64, Code> {
    let Some(manifest) = remote_manifest(led).await? else {
        return Ok(-1);
    };
    let local = led.partition.log.log_start();
    let next = manifest
        .last_offset()
        .map_or(local, |end| Offset(end.0 + 1));
    Ok(next.max(local).0)
}

/// A tiered topic's manifest (read from the store if not yet in memory).
async fn remote_manifest(
    led: &ServedPartition,
) -> Result<Option<std::rc::Rc<storage::remote::manifest::Manifest>>, Code> {
    let Some(tiering) = &led.tiering else {
        return Ok(None);
    };
    let loaded = led
        .partition
        .remote
        .load(tiering, led.key(), led.epoch)
        .await;
    loaded.map(Some).map_err(|e| {
        tracing::error!(topic = %led.topic.name, partition = led.index, error = %e, "reading the remote log's manifest failed");
        ResponseError::KafkaStorageError.code()
    })
}

/// Moves the log start; the new one (the low watermark).
async fn delete_on_owner(
    partitions: &Partitions,
    led: &ServedPartition,
    offset: i64,
) -> Result<i64, Code> {
    let log = &led.partition.log;
    let target = if offset == -1 {
        log.high_watermark()
    } else {
        Offset(offset)
    };
    if target.0 < 0 || target > log.high_watermark() {
        return Err(ResponseError::OffsetOutOfRange.code());
    }
    if let Some(tiering) = &led.tiering {
        let deleted = tiered::delete::delete_records_below(partitions, tiering, led, target).await;
        return deleted.map(|start| start.0).map_err(|e| {
            tracing::error!(topic = %led.topic.name, partition = led.index, error = %e, "deleting records of a tiered partition failed");
            ResponseError::KafkaStorageError.code()
        });
    }
    match log.delete_records_below(target).await {
        Ok(start) => Ok(start.0),
        Err(StorageError::OffsetOutOfRange { .. }) => Err(ResponseError::OffsetOutOfRange.code()),
        Err(e) => {
            tracing::error!(error = %e, "deleting records failed");
            Err(ResponseError::KafkaStorageError.code())
        }
    }
}
