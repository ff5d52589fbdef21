//! ReadShareGroupState (84) and WriteShareGroupState (85), v0: a
//! partition leader reading and writing its share-partitions' durable
//! state with the group's coordinator (Kafka's share coordinator calls;
//! here the group coordinator keeps the state: `coordinator::share_state`).
//! Brokers only (CLUSTER_ACTION on the cluster, as Kafka).

use std::rc::Rc;

use kafka_protocol::messages::read_share_group_state_response::{
    PartitionResult as ReadResult, ReadStateResult, StateBatch,
};
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult as WriteResult, WriteStateResult,
};
use kafka_protocol::messages::{
    ReadShareGroupStateRequest, ReadShareGroupStateResponse, WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
};
use kafka_protocol::ResponseError;

use super::access::Caller;
use super::{respond, HandlerError, Outcome};
use crate::coordinator::offsets_partition::OffsetsPartition;
use crate::groups::share_state::{ShareStateKey, ShareStateValue, StoredState};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;
use crate::share::partition::PersistedState;
use control::model::acls::Operation;

/// The versions served (Kafka 4.2's brokers send v0 and v1; this broker's
/// send v0).
pub const VERSIONS: (i16, i16) = (0, 0);

/// Answers ReadShareGroupState.
pub async fn read(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ReadShareGroupStateRequest =
        checked(request, bounds::check_read_share_group_state)?;
    let allowed = caller.may_cluster(Operation::ClusterAction);
    let group = decoded.group_id.to_string();
    let mut results = Vec::new();
    for topic in &decoded.topics {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let key = key_of(&group, topic.topic_id, p.partition);
            let epoch = p.leader_epoch;
            let read = at_coordinator(shard, allowed, &group, move |partition| {
                Box::pin(async move { partition.read_share_state(&key, epoch).await })
            })
            .await;
            partitions.push(read_result(p.partition, read));
        }
        let result = ReadStateResult::default()
            .with_topic_id(topic.topic_id)
            .with_partitions(partitions);
        results.push(result);
    }
    respond(
        request,
        &ReadShareGroupStateResponse::default().with_results(results),
    )
}

fn read_result(partition: i32, read: Result<StoredState, Code>) -> ReadResult {
    let base = ReadResult::default()
        .with_partition(partition)
        .with_start_offset(-1);
    let read = read.map(|stored| (stored.state_epoch, stored.state));
    match read {
        Err(code) => base.with_error_code(code),
        Ok((state_epoch, None)) => base.with_state_epoch(state_epoch),
        Ok((state_epoch, Some(state))) => {
            let batches = (state.batches.iter())
                .map(|&(first, last, delivery_state, count)| {
                    StateBatch::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_delivery_state(delivery_state)
                        .with_delivery_count(count.min(i16::MAX as u16) as i16)
                })
                .collect();
            base.with_state_epoch(state_epoch)
                .with_start_offset(state.start)
                .with_state_batches(batches)
        }
    }
}

/// Answers WriteShareGroupState.
pub async fn write(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: WriteShareGroupStateRequest =
        checked(request, bounds::check_write_share_group_state)?;
    let allowed = caller.may_cluster(Operation::ClusterAction);
    let group = decoded.group_id.to_string();
    let mut results = Vec::new();
    for topic in &decoded.topics {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let key = key_of(&group, topic.topic_id, p.partition);
            let batches = (p.state_batches.iter())
                .map(|b| {
                    let count = b.delivery_count.max(0) as u16;
                    (b.first_offset, b.last_offset, b.delivery_state, count)
                })
                .collect();
            let value = ShareStateValue {
                leader_epoch: p.leader_epoch,
                state_epoch: p.state_epoch,
                state: Some(PersistedState {
                    start: p.start_offset,
                    batches,
                }),
            };
            // (The coordinator refuses a state no leader could write: a
            // negative start among them.)
            let written = at_coordinator(shard, allowed, &group, move |partition| {
                Box::pin(async move { partition.write_share_state(key, value).await })
            })
            .await;
            let code = written.err().unwrap_or(0);
            partitions.push(
                WriteResult::default()
                    .with_partition(p.partition)
                    .with_error_code(code),
            );
        }
        let result = WriteStateResult::default()
            .with_topic_id(topic.topic_id)
            .with_partitions(partitions);
        results.push(result);
    }
    respond(
        request,
        &WriteShareGroupStateResponse::default().with_results(results),
    )
}

/// The state's key of a request's partition.
fn key_of(group: &str, topic: uuid::Uuid, partition: i32) -> ShareStateKey {
    ShareStateKey {
        group: group.to_string(),
        topic: *topic.as_bytes(),
        partition,
    }
}

/// Runs `work` on `group`'s coordinator, if the caller is `allowed`
/// (CLUSTER_ACTION) at all.
async fn at_coordinator<T: Send + 'static>(
    shard: &Shard,
    allowed: bool,
    group: &str,
    work: impl FnOnce(Rc<OffsetsPartition>) -> LocalFuture<Result<T, Code>> + Send + 'static,
) -> Result<T, Code> {
    if !allowed {
        return Err(ResponseError::ClusterAuthorizationFailed.code());
    }
    shard.coordinator.on_group(group, Err, work).await
}
