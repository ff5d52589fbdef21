//! The transactional producer's APIs at its transaction coordinator:
//! InitProducerId with a transactional id, AddPartitionsToTxn (v0-3 from
//! clients; v4-5 between brokers, where `verify_only` asks whether a
//! partition is in a transaction and its absence adds it for a
//! transaction.version 2 write), AddOffsetsToTxn and EndTxn (v5: an epoch
//! bump per transaction, KIP-890). The rules are `crate::transactions::store`'s;
//! this module checks access, routes to the coordinator and lays out the
//! answers, with the error codes each version knows.

use std::rc::Rc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, TXN_ID_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::kafka::bounds;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::runtime::clock::wall_ms;
use crate::server::shard::Shard;
use crate::transactions::metadata::{TopicPartition, EPOCH_EXHAUSTED};
use crate::transactions::store::{Step, TxnStore};
use control::model::acls::Operation;

/// AddPartitionsToTxn versions served (v4-5: between brokers, with
/// verify_only).
pub const ADD_PARTITIONS_VERSIONS: (i16, i16) = (0, 5);
/// AddOffsetsToTxn versions served.
pub const ADD_OFFSETS_VERSIONS: (i16, i16) = (0, 4);
/// EndTxn versions served (v5 is transaction.version 2).
pub const END_TXN_VERSIONS: (i16, i16) = (0, 5);

/// PRODUCER_FENCED as a request of `version` knows it: versions before
/// `since` only know INVALID_PRODUCER_EPOCH (librdkafka and kafkajs
/// survive a fence only through that code).
pub fn fenced_for(code: Code, version: i16, since: i16) -> Code {
    match code == ResponseError::ProducerFenced.code() && version < since {
        true => ResponseError::InvalidProducerEpoch.code(),
        false => code,
    }
}

/// InitProducerId with a transactional id: the producer's id and epoch
/// from its coordinator (fencing any older instance). `expected`: the id
/// and epoch a recovering client had (v3+).
pub async fn init_transactional(
    shard: &Rc<Shard>,
    transactional_id: String,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), Code> {
    // Checked before any lookup, as Kafka does (a non-coordinator
    // answers it too).
    if timeout_ms <= 0 || timeout_ms > shard.cluster.config.transaction_max_timeout_ms {
        return Err(ResponseError::InvalidTransactionTimeout.code());
    }
    crate::txn_coordinator::ensure_state_topic(&shard.cluster).await?;
    let id = transactional_id.clone();
    shard
        .txn_coordinator
        .on_id(&id, Err, move |state| {
            Box::pin(async move {
                state.reserve_producer_id().await?;
                let step = state.store.borrow_mut().init_producer_id(
                    &transactional_id,
                    timeout_ms,
                    expected,
                    wall_ms(),
                    &mut || state.take_producer_id(),
                )?;
                let answer = (step.next.producer_id, step.next.producer_epoch);
                state.run(step).await?;
                Ok(answer)
            })
        })
        .await
}

/// Adds `partitions` to the transaction of `id` (writing the change
/// before answering); one code for all.
async fn add_to_transaction(
    shard: &Rc<Shard>,
    id: String,
    producer: (i64, i16),
    partitions: Vec<TopicPartition>,
    client_version: i16,
) -> Code {
    let (producer_id, epoch) = producer;
    decide_and_run(shard, id, move |store, id| {
        let now = wall_ms();
        store.add_partitions_as(id, producer_id, epoch, &partitions, now, client_version)
    })
    .await
}

/// Decides a change of `id` at its coordinator (`decide`: the rules'
/// step, or None when nothing is to be written) and makes it durable;
/// one code for the answer (0: done).
async fn decide_and_run<D>(shard: &Rc<Shard>, id: String, decide: D) -> Code
where
    D: FnOnce(&mut TxnStore, &str) -> Result<Option<Step>, Code> + Send + 'static,
{
    let route = id.clone();
    let outcome = shard
        .txn_coordinator
        .on_id(&route, Err, move |state| {
            Box::pin(async move {
                let step = decide(&mut state.store.borrow_mut(), &id)?;
                match step {
                    Some(step) => state.run(step).await,
                    None => Ok(()),
                }
            })
        })
        .await;
    outcome.err().unwrap_or(0)
}

/// Each partition's code of a topic list: the topic unknown or not
/// writable by the caller; None for a partition that may be added.
fn partition_refusals(
    shard: &Shard,
    caller: &Caller<'_>,
    topics: &[AddPartitionsToTxnTopic],
) -> Vec<(TopicPartition, Option<Code>)> {
    let view = shard.cluster.view.borrow();
    let mut out = Vec::new();
    for topic in topics {
        let name = topic.name.to_string();
        let refusal = if !caller.may_topic(Operation::Write, &name) {
            Some(TOPIC_DENIED)
        } else {
            None
        };
        let known = view.metadata.topic_by_name(&name).ok();
        for &index in &topic.partitions {
            let exists = known.is_some_and(|t| index >= 0 && (index as usize) < t.partitions.len());
            let code =
                refusal.or((!exists).then_some(ResponseError::UnknownTopicOrPartition.code()));
            out.push(((name.clone(), index), code));
        }
    }
    out
}

/// AddPartitionsToTxn v0-3 for one transaction: a refused partition makes
/// the others OPERATION_NOT_ATTEMPTED, and nothing is added.
async fn add_partitions_v3(
    shard: &Rc<Shard>,
    caller: &Caller<'_>,
    id: String,
    producer: (i64, i16),
    topics: &[AddPartitionsToTxnTopic],
    client_version: i16,
) -> Vec<(TopicPartition, Code)> {
    let checked = partition_refusals(shard, caller, topics);
    let id_code = match id.is_empty() {
        true => Some(ResponseError::InvalidRequest.code()),
        false => (!caller.may_transactional_id(Operation::Write, &id)).then_some(TXN_ID_DENIED),
    };
    if let Some(code) = id_code {
        return checked.into_iter().map(|(p, _)| (p, code)).collect();
    }
    if checked.iter().any(|(_, refusal)| refusal.is_some()) {
        let not_attempted = ResponseError::OperationNotAttempted.code();
        return checked
            .into_iter()
            .map(|(p, refusal)| (p, refusal.unwrap_or(not_attempted)))
            .collect();
    }
    let partitions: Vec<TopicPartition> = checked.into_iter().map(|(p, _)| p).collect();
    let code = add_to_transaction(shard, id, producer, partitions.clone(), client_version).await;
    partitions.into_iter().map(|p| (p, code)).collect()
}

/// One transaction of an AddPartitionsToTxn v4 (from another broker):
/// `verify_only` asks whether each partition is in the ongoing
/// transaction; otherwise an add as v3's.
async fn add_partitions_v4(
    shard: &Rc<Shard>,
    caller: &Caller<'_>,
    id: String,
    producer_id: i64,
    epoch: i16,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
) -> Vec<(TopicPartition, Code)> {
    if !verify_only {
        // A leader adding a partition for a transaction.version 2 write.
        let producer = (producer_id, epoch);
        return add_partitions_v3(shard, caller, id, producer, topics, 2).await;
    }
    let partitions: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.to_string(), *p)))
        .collect();
    let asked = partitions.clone();
    let route = id.clone();
    let codes = shard
        .txn_coordinator
        .on_id(
            &route,
            |code| vec![code],
            move |state| {
                Box::pin(async move {
                    let store = state.store.borrow();
                    asked
                        .iter()
                        .map(|p| store.verify(&id, producer_id, epoch, p).err().unwrap_or(0))
                        .collect::<Vec<Code>>()
                })
            },
        )
        .await;
    let code_of = |i: usize| codes.get(i).or(codes.first()).copied().unwrap_or(0);
    partitions
        .into_iter()
        .enumerate()
        .map(|(i, p)| (p, code_of(i)))
        .collect()
}

/// The per-topic layout of one transaction's partition codes.
fn topic_results(codes: Vec<(TopicPartition, Code)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, index), code) in codes {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(index)
            .with_partition_error_code(code);
        match topics.iter_mut().find(|t| t.name.as_str() == topic) {
            Some(existing) => existing.results_by_partition.push(result),
            None => topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    topics
}

/// Answers AddPartitionsToTxn.
pub async fn add_partitions(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: AddPartitionsToTxnRequest = checked(request, bounds::check_add_partitions_to_txn)?;
    if version <= 3 {
        let producer = (
            decoded.v3_and_below_producer_id.0,
            decoded.v3_and_below_producer_epoch,
        );
        let codes = add_partitions_v3(
            shard,
            caller,
            decoded.v3_and_below_transactional_id.to_string(),
            producer,
            &decoded.v3_and_below_topics,
            0,
        )
        .await;
        let codes = codes
            .into_iter()
            .map(|(p, code)| (p, fenced_for(code, version, 2)))
            .collect();
        let answer = AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(topic_results(codes));
        return respond(request, &answer);
    }
    if !caller.may_cluster(Operation::ClusterAction) {
        return respond(
            request,
            &AddPartitionsToTxnResponse::default().with_error_code(CLUSTER_DENIED),
        );
    }
    let mut results = Vec::new();
    for transaction in &decoded.transactions {
        let codes = add_partitions_v4(
            shard,
            caller,
            transaction.transactional_id.to_string(),
            transaction.producer_id.0,
            transaction.producer_epoch,
            transaction.verify_only,
            &transaction.topics,
        )
        .await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id.clone())
                .with_topic_results(topic_results(codes)),
        );
    }
    respond(
        request,
        &AddPartitionsToTxnResponse::default().with_results_by_transaction(results),
    )
}

/// Answers AddOffsetsToTxn: the group's `__consumer_offsets` partition
/// joins the transaction (its offsets are committed with it).
pub async fn add_offsets(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: AddOffsetsToTxnRequest = checked(request, bounds::check_add_offsets_to_txn)?;
    let id = decoded.transactional_id.to_string();
    let group = decoded.group_id.to_string();
    let code = if id.is_empty() {
        ResponseError::InvalidRequest.code()
    } else if !caller.may_transactional_id(Operation::Write, &id) {
        TXN_ID_DENIED
    } else if !caller.may_group(Operation::Read, &group) {
        GROUP_DENIED
    } else {
        match offsets_partition_of(shard, &group).await {
            Ok(partition) => {
                let (producer_id, epoch) = (decoded.producer_id.0, decoded.producer_epoch);
                add_to_transaction(shard, id, (producer_id, epoch), vec![partition], 0).await
            }
            Err(code) => code,
        }
    };
    let answer = AddOffsetsToTxnResponse::default().with_error_code(fenced_for(code, version, 2));
    respond(request, &answer)
}

/// The group's `__consumer_offsets` partition (creating the topic first).
async fn offsets_partition_of(shard: &Shard, group: &str) -> Result<TopicPartition, Code> {
    crate::coordinator::ensure_offsets_topic(&shard.cluster).await?;
    let view = shard.cluster.view.borrow();
    let topic = view
        .metadata
        .topic_by_name(crate::groups::OFFSETS_TOPIC)
        .map_err(|_| ResponseError::CoordinatorNotAvailable.code())?;
    let index = crate::groups::offsets_partition(group, topic.partitions.len() as u32);
    Ok((topic.name.clone(), index as i32))
}

/// Answers EndTxn: the transaction is decided (its Prepare written) before
/// the answer; its markers follow.
pub async fn end_txn(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: EndTxnRequest = checked(request, bounds::check_end_txn)?;
    let id = decoded.transactional_id.to_string();
    let code = if id.is_empty() {
        ResponseError::InvalidRequest.code()
    } else if !caller.may_transactional_id(Operation::Write, &id) {
        TXN_ID_DENIED
    } else {
        let (producer_id, epoch, commit) = (
            decoded.producer_id.0,
            decoded.producer_epoch,
            decoded.committed,
        );
        if version >= 5 {
            let producer = (producer_id, epoch);
            let answer = match end_with_epoch_bump(shard, id, producer, commit).await {
                Ok((producer_id, epoch)) => EndTxnResponse::default()
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch),
                Err(code) => EndTxnResponse::default().with_error_code(code),
            };
            return respond(request, &answer);
        }
        decide_and_run(shard, id, move |store, id| {
            store.end_txn(id, producer_id, epoch, commit, wall_ms())
        })
        .await
    };
    let answer = EndTxnResponse::default().with_error_code(fenced_for(code, version, 2));
    respond(request, &answer)
}

/// EndTxn v5+ (transaction.version 2): the end is decided with the
/// producer's epoch bumped; the producer id and epoch it goes on with.
async fn end_with_epoch_bump(
    shard: &Rc<Shard>,
    id: String,
    producer: (i64, i16),
    commit: bool,
) -> Result<(i64, i16), Code> {
    let route = id.clone();
    shard
        .txn_coordinator
        .on_id(&route, Err, move |state| {
            Box::pin(async move {
                let exhausted = state
                    .store
                    .borrow()
                    .get(&id)
                    .is_some_and(|m| m.producer_epoch >= EPOCH_EXHAUSTED);
                if exhausted {
                    state.reserve_producer_id().await?;
                }
                let (producer_id, epoch) = producer;
                let step = state.store.borrow_mut().end_txn_v2(
                    &id,
                    producer_id,
                    epoch,
                    commit,
                    wall_ms(),
                    &mut || state.take_producer_id(),
                )?;
                let Some(step) = step else {
                    // A retry of an end already complete.
                    let store = state.store.borrow();
                    let current = store
                        .get(&id)
                        .ok_or(ResponseError::InvalidProducerIdMapping.code())?;
                    return Ok(current.continued_identity());
                };
                let identity = step.next.continued_identity();
                state.run(step).await?;
                Ok(identity)
            })
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_fenced_is_invalid_producer_epoch_before_the_version_that_knows_it() {
        let fenced = ResponseError::ProducerFenced.code();
        let old = ResponseError::InvalidProducerEpoch.code();
        assert_eq!(fenced_for(fenced, 1, 2), old);
        assert_eq!(fenced_for(fenced, 2, 2), fenced);
        assert_eq!(fenced_for(fenced, 3, 4), old, "InitProducerId v3");
        assert_eq!(fenced_for(fenced, 4, 4), fenced);
        let other = ResponseError::ConcurrentTransactions.code();
        assert_eq!(fenced_for(other, 0, 2), other);
    }
}
