//! ShareAcknowledge (79, v1; KIP-932): a share consumer acknowledges
//! records without fetching more (librdkafka sends it when it has no
//! fetch to make, and with epoch -1 to close its session: then what the
//! member still holds is given back).

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};

use super::access::{Caller, GROUP_DENIED};
use super::share_fetch::permitted;
use super::share_sessions::{self, partition_acks, session_key, PartitionAcks};
use super::{respond, HandlerError, Outcome};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;
use crate::share::sessions::{SessionPartition, Step};
use control::model::acls::Operation;

/// ShareAcknowledge versions served (v1: Kafka 4.2's and librdkafka's).
pub const VERSIONS: (i16, i16) = (1, 1);

/// Answers ShareAcknowledge.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: ShareAcknowledgeRequest = checked(request, bounds::check_share_acknowledge)?;
    let key = session_key(decoded.group_id.as_ref(), decoded.member_id.as_ref());
    if !caller.may_group(Operation::Read, &key.0) {
        return respond(request, &refused(GROUP_DENIED));
    }
    let epoch = decoded.share_session_epoch;
    let step = match share_sessions::step(shard, caller, (&key, epoch), None).await {
        Ok(step) => step,
        Err(code) => return respond(request, &refused(code)),
    };
    let acks = asked(&decoded);
    let routes = (acks.iter())
        .map(|(p, a)| (permitted(shard, caller, *p), a.clone()))
        .collect();
    let outcomes = share_sessions::acknowledge(shard, &key, routes).await;
    if let Step::Closed(partitions) = step {
        share_sessions::release(shard, &key, &partitions).await;
    }
    let answered: BTreeMap<SessionPartition, Result<(), Code>> =
        acks.into_iter().map(|(p, _)| p).zip(outcomes).collect();
    respond(request, &answer(answered))
}

/// Each partition named with its acknowledgements.
fn asked(decoded: &ShareAcknowledgeRequest) -> Vec<PartitionAcks> {
    let partitions = decoded.topics.iter().flat_map(|topic| {
        topic.partitions.iter().map(|p| {
            let partition = (*topic.topic_id.as_bytes(), p.partition_index);
            let batches = (p.acknowledgement_batches.iter()).map(|b| {
                (
                    b.first_offset,
                    b.last_offset,
                    b.acknowledge_types.as_slice(),
                )
            });
            partition_acks(partition, batches)
        })
    });
    partitions.collect()
}

/// A request refused as a whole.
fn refused(code: Code) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse::default().with_error_code(code)
}

fn answer(answered: BTreeMap<SessionPartition, Result<(), Code>>) -> ShareAcknowledgeResponse {
    let mut topics: Vec<ShareAcknowledgeTopicResponse> = Vec::new();
    for ((topic, index), outcome) in answered {
        let leader = LeaderIdAndEpoch::default()
            .with_leader_id(-1)
            .with_leader_epoch(-1);
        let data = PartitionData::default()
            .with_partition_index(index)
            .with_current_leader(leader)
            .with_error_code(outcome.err().unwrap_or(0));
        match topics.last_mut() {
            Some(t) if t.topic_id.as_bytes() == &topic => t.partitions.push(data),
            _ => topics.push(
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(uuid::Uuid::from_bytes(topic))
                    .with_partitions(vec![data]),
            ),
        }
    }
    ShareAcknowledgeResponse::default().with_responses(topics)
}
