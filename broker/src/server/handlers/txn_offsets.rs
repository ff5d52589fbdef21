//! TxnOffsetCommit: a transactional producer commits a consumer group's
//! offsets inside its transaction (confluent-kafka's
//! `send_offsets_to_transaction`), at the group's coordinator. The offsets
//! count only once the transaction commits (see
//! `coordinator::txn_offsets`).

use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::access::{Caller, GROUP_DENIED, TXN_ID_DENIED};
use super::group_offsets::{sort_one, AskedOffset, ToCommit};
use super::{respond, HandlerError, Outcome};
use crate::coordinator::txn_offsets::TxnProducer;
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::runtime::clock::wall_ms;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// TxnOffsetCommit versions served (v5 is transaction.version 2's).
pub const VERSIONS: (i16, i16) = (0, 5);

/// Answers TxnOffsetCommit.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: TxnOffsetCommitRequest = checked(request, bounds::check_txn_offset_commit)?;
    let id = decoded.transactional_id.to_string();
    let group = decoded.group_id.to_string();
    let (codes, offsets) = sort(shard, version, &decoded, caller);
    let group_code = if id.is_empty() {
        ResponseError::InvalidRequest.code()
    } else if !caller.may_transactional_id(Operation::Write, &id) {
        TXN_ID_DENIED
    } else if !caller.may_group(Operation::Read, &group) {
        GROUP_DENIED
    } else if group.is_empty() {
        ResponseError::InvalidGroupId.code()
    } else if offsets.is_empty() {
        0
    } else {
        commit_on_coordinator(shard, version, &decoded, offsets).await
    };
    let group_code = as_version_knows(group_code, version);
    respond(request, &answer(&decoded, codes, group_code))
}

/// Per partition the code it is refused with up front (0: to store), and
/// the offsets to store (as OffsetCommit's).
fn sort(
    shard: &Shard,
    version: i16,
    decoded: &TxnOffsetCommitRequest,
    caller: &Caller<'_>,
) -> (Vec<Vec<Code>>, Vec<ToCommit>) {
    let now = wall_ms();
    let mut codes = Vec::new();
    let mut offsets = Vec::new();
    for topic in &decoded.topics {
        let mut topic_codes = Vec::new();
        for p in &topic.partitions {
            let asked = AskedOffset {
                topic: topic.name.as_str(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if version >= 2 {
                    p.committed_leader_epoch
                } else {
                    -1
                },
                metadata: p.committed_metadata.as_deref(),
            };
            topic_codes.push(sort_one(shard, caller, asked, now, &mut offsets));
        }
        codes.push(topic_codes);
    }
    (codes, offsets)
}

async fn commit_on_coordinator(
    shard: &Shard,
    version: i16,
    decoded: &TxnOffsetCommitRequest,
    offsets: Vec<ToCommit>,
) -> Code {
    let group = decoded.group_id.to_string();
    let member = decoded.member_id.to_string();
    let instance = decoded.group_instance_id.as_ref().map(|i| i.to_string());
    let generation = decoded.generation_id;
    let producer = TxnProducer {
        transactional_id: decoded.transactional_id.to_string(),
        producer_id: decoded.producer_id.0,
        epoch: decoded.producer_epoch,
        adds_partition: version >= 5,
    };
    let key = group.clone();
    shard
        .coordinator
        .on_group(
            &key,
            |code| code,
            move |partition| {
                Box::pin(async move {
                    let member = (member.as_str(), instance.as_deref(), generation);
                    partition
                        .commit_transactional(&group, member, producer, offsets)
                        .await
                })
            },
        )
        .await
}

/// A code as TxnOffsetCommit of `version` knows it: a partition that
/// cannot take the write now is a coordinator not available (retried),
/// as Kafka's coordinator answers; TRANSACTION_ABORTABLE is
/// INVALID_TXN_STATE before v4; COORDINATOR_LOAD_IN_PROGRESS is
/// COORDINATOR_NOT_AVAILABLE before v2.
fn as_version_knows(code: Code, version: i16) -> Code {
    let unavailable = [
        ResponseError::NotEnoughReplicas.code(),
        ResponseError::NotEnoughReplicasAfterAppend.code(),
        ResponseError::RequestTimedOut.code(),
    ];
    if unavailable.contains(&code)
        || (code == ResponseError::CoordinatorLoadInProgress.code() && version < 2)
    {
        ResponseError::CoordinatorNotAvailable.code()
    } else if code == ResponseError::TransactionAbortable.code() && version < 4 {
        ResponseError::InvalidTxnState.code()
    } else if code == ResponseError::NotLeaderOrFollower.code() {
        ResponseError::NotCoordinator.code()
    } else {
        code
    }
}

fn answer(
    decoded: &TxnOffsetCommitRequest,
    codes: Vec<Vec<Code>>,
    group_code: Code,
) -> TxnOffsetCommitResponse {
    let topics = decoded
        .topics
        .iter()
        .zip(codes)
        .map(|(topic, topic_codes)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(topic_codes)
                .map(|(p, code)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(if code == 0 { group_code } else { code })
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
