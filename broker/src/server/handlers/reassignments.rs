//! Partition reassignment as Kafka's tools drive it (KIP-455):
//! AlterPartitionReassignments moves partitions to new replicas, or
//! cancels their moves (a null replica list), each partition answered on
//! its own; ListPartitionReassignments shows the moves under way, with
//! the replicas being added and removed. The controller finishes a move
//! once every target replica is in sync (control's `controller::reassign`).
//!
//! The replication factor stays (INVALID_REPLICATION_FACTOR otherwise,
//! as Kafka answers with `allow_replication_factor_change` false).

use std::rc::Rc;

use control::model::acls::Operation;
use control::service::{ControllerError, ControllerRequest};
use control::{BrokerId, Metadata, MetadataError, PartitionId};
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED};
use super::{HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::{
    check_alter_partition_reassignments, check_list_partition_reassignments,
};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;

/// AlterPartitionReassignments v0-1 (flexible throughout).
pub const ALTER_VERSIONS: (i16, i16) = (0, 1);
/// ListPartitionReassignments v0.
pub const LIST_VERSIONS: (i16, i16) = (0, 0);

/// One partition's answer: its error code and why.
type Answer = (Code, Option<String>);

/// Answers AlterPartitionReassignments.
pub async fn alter(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: AlterPartitionReassignmentsRequest =
        checked(request, check_alter_partition_reassignments)?;
    if !caller.may_cluster(Operation::Alter) {
        let refused = AlterPartitionReassignmentsResponse::default()
            .with_error_code(CLUSTER_DENIED)
            .with_error_message(Some(StrBytes::from_static_str(
                "not authorized to alter the cluster",
            )));
        return super::respond(request, &refused);
    }
    let mut responses = Vec::new();
    for topic in &decoded.topics {
        let mut answers = Vec::new();
        for p in &topic.partitions {
            let target = p
                .replicas
                .as_ref()
                .map(|ids| ids.iter().map(|b| BrokerId(b.0)).collect());
            let (code, message) =
                move_one(shard, topic.name.as_str(), p.partition_index, target).await;
            answers.push(
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string)),
            );
        }
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(answers),
        );
    }
    let answer = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(false)
        .with_responses(responses);
    super::respond(request, &answer)
}

/// How often a move decided from a partition epoch that changed meanwhile
/// (an ISR change racing it) is asked again.
const STALE_RETRIES: usize = 3;

/// Moves one partition (or cancels its move), answered once this shard's
/// metadata shows the move under way (or the partition there already),
/// or the cancel done.
async fn move_one(shard: &Shard, topic: &str, index: i32, target: Option<Vec<BrokerId>>) -> Answer {
    let key = {
        let view = shard.cluster.view.borrow();
        let found = view.metadata.topic_by_name(topic).ok().and_then(|t| {
            let p = t.partitions.get(usize::try_from(index).ok()?)?;
            let moving = view.metadata.reassignments.get(&(t.id, PartitionId(index)));
            let factor = moving.map_or(p.replicas.len(), |m| m.target.len());
            Some((t.id, factor, p.replicas.clone(), moving.is_some()))
        });
        match found {
            Some(found) => found,
            None => {
                return (
                    ResponseError::UnknownTopicOrPartition.code(),
                    Some(format!("no partition {topic}-{index}")),
                )
            }
        }
    };
    let (id, factor, replicas, moving) = key;
    if let Some(target) = &target {
        if target.len() != factor {
            return (
                ResponseError::InvalidReplicationFactor.code(),
                Some(format!(
                    "a reassignment keeps the replication factor ({factor}): {} replicas given",
                    target.len()
                )),
            );
        }
        if !moving && *target == replicas {
            return (0, None); // there already
        }
    }
    let request = ControllerRequest::Reassign {
        topic: topic.to_string(),
        partitions: vec![(index, target.clone())],
    };
    let mut attempts = 0;
    loop {
        match shard.cluster.call_controller(request.clone()).await {
            Ok(()) => break,
            Err(ControllerError::Refused(MetadataError::StalePartitionEpoch { .. }))
                if attempts < STALE_RETRIES =>
            {
                // The partition changed under the request (an ISR change):
                // asked again once this shard's metadata has it.
                attempts += 1;
                glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => return refusal(&e),
        }
    }
    let index = PartitionId(index);
    shard
        .cluster
        .catch_up(|m| {
            let under_way = m.reassignments.contains_key(&(id, index));
            match &target {
                Some(target) => {
                    under_way || m.partition(id, index).is_ok_and(|p| p.replicas == *target)
                }
                None => !under_way,
            }
        })
        .await;
    (0, None)
}

/// A refused move as Kafka's tools read it: a replica list naming an
/// unknown or repeated broker is INVALID_REPLICA_ASSIGNMENT.
fn refusal(error: &ControllerError) -> Answer {
    let (code, message) = controller_error(error);
    let code = match error {
        ControllerError::Refused(
            MetadataError::UnknownBroker(_) | MetadataError::InvalidPartitionChange(_),
        ) => ResponseError::InvalidReplicaAssignment.code(),
        _ => code,
    };
    (code, Some(message))
}

/// Answers ListPartitionReassignments.
pub async fn list(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ListPartitionReassignmentsRequest =
        checked(request, check_list_partition_reassignments)?;
    if !caller.may_cluster(Operation::Describe) {
        let refused = ListPartitionReassignmentsResponse::default()
            .with_error_code(CLUSTER_DENIED)
            .with_error_message(Some(StrBytes::from_static_str(
                "not authorized to describe the cluster",
            )));
        return super::respond(request, &refused);
    }
    let named: Option<Vec<(String, Vec<i32>)>> = decoded.topics.map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.as_str().to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let topics = ongoing(&shard.cluster.view.borrow().metadata, named.as_deref());
    let answer = ListPartitionReassignmentsResponse::default().with_topics(topics);
    super::respond(request, &answer)
}

/// The moves under way, of the partitions named (None: all), by topic.
fn ongoing(
    metadata: &Metadata,
    named: Option<&[(String, Vec<i32>)]>,
) -> Vec<OngoingTopicReassignment> {
    let wanted = |topic: &str, index: i32| {
        named.is_none_or(|named| {
            named
                .iter()
                .any(|(t, ids)| t == topic && ids.contains(&index))
        })
    };
    let ids = |brokers: Vec<BrokerId>| {
        brokers
            .into_iter()
            .map(|b| kafka_protocol::messages::BrokerId(b.0))
            .collect()
    };
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for (&(topic_id, index), state) in &metadata.reassignments {
        let (Ok(topic), Ok(partition)) = (
            metadata.topic(topic_id),
            metadata.partition(topic_id, index),
        ) else {
            continue;
        };
        if !wanted(&topic.name, index.0) {
            continue;
        }
        let entry = OngoingPartitionReassignment::default()
            .with_partition_index(index.0)
            .with_replicas(ids(partition.replicas.clone()))
            .with_adding_replicas(ids(state.adding()))
            .with_removing_replicas(ids(state.removing()));
        match topics.iter_mut().find(|t| t.name.as_str() == topic.name) {
            Some(t) => t.partitions.push(entry),
            None => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    topics
}
