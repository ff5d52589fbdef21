//! The producer's APIs: InitProducerId (a producer id and epoch; with a
//! transactional id, from its transaction coordinator) and
//! DescribeProducers (each partition's producer state, from its leader).

use std::rc::Rc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState as ProducerStateEntry, TopicResponse,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId,
};
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED, TXN_ID_DENIED};
use super::transactions::{fenced_for, init_transactional};
use super::{in_request_order, respond, HandlerError, Outcome};
use crate::cluster::routing::Route;
use crate::kafka::bounds::{check_describe_producers, check_init_producer_id};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::partition::served::ServedPartition;
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// InitProducerId versions served.
pub const INIT_PRODUCER_ID_VERSIONS: (i16, i16) = (0, 5);
/// DescribeProducers versions served.
pub const DESCRIBE_PRODUCERS_VERSIONS: (i16, i16) = (0, 0);

/// Answers InitProducerId. Without a transactional id: a new producer id
/// at epoch 0, every time, as Kafka answers an idempotent producer. A
/// producer that names its current id and epoch (KIP-360's reset) gets a
/// new id too: one epoch on would be unsafe, since nothing records that
/// epoch as taken (two such requests would get the same identity, and
/// each producer's batches would be taken for the other's retries). With
/// a transactional id: its coordinator's id and next epoch, fencing any
/// older instance of the producer.
pub async fn init_producer_id(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: InitProducerIdRequest = checked(request, check_init_producer_id)?;
    let outcome = match transactional_id(&decoded) {
        Some(id) => transactional(shard, &decoded, id, caller).await,
        None => idempotent(shard, caller).await,
    };
    let answer = match outcome {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(code) => InitProducerIdResponse::default()
            .with_error_code(fenced_for(code, version, 4))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    };
    respond(request, &answer)
}

/// The request's transactional id. (An empty one is taken as none: some
/// encoders default the nullable string to "".)
fn transactional_id(request: &InitProducerIdRequest) -> Option<String> {
    request
        .transactional_id
        .as_ref()
        .map(|t| t.to_string())
        .filter(|t| !t.is_empty())
}

async fn idempotent(shard: &Rc<Shard>, caller: &Caller<'_>) -> Result<(i64, i16), Code> {
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE
    // on some topic (Kafka's rule since 3.0); each write is checked again.
    let allowed =
        caller.may_cluster(Operation::IdempotentWrite) || caller.may_on_any_topic(Operation::Write);
    if !allowed {
        return Err(CLUSTER_DENIED);
    }
    let id = shard.cluster.next_producer_id().await?;
    Ok((id, 0))
}

async fn transactional(
    shard: &Rc<Shard>,
    request: &InitProducerIdRequest,
    id: String,
    caller: &Caller<'_>,
) -> Result<(i64, i16), Code> {
    if !caller.may_transactional_id(Operation::Write, &id) {
        return Err(TXN_ID_DENIED);
    }
    let expected = match (request.producer_id.0, request.producer_epoch) {
        (-1, -1) => None,
        (id, epoch) if id >= 0 && epoch >= 0 => Some((id, epoch)),
        _ => return Err(ResponseError::InvalidRequest.code()),
    };
    init_transactional(shard, id, request.transaction_timeout_ms, expected).await
}

/// Answers DescribeProducers from each partition's leader.
pub async fn describe_producers(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DescribeProducersRequest = checked(request, check_describe_producers)?;
    let asked: Vec<(Route, ())> = decoded
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partition_indexes.iter().map(move |&index| {
                let route = shard.cluster.route_by_name(topic.name.as_str(), index);
                // Kafka asks READ on the topic.
                (
                    caller.topic_route(route, Operation::Read, Some(&topic.name)),
                    (),
                )
            })
        })
        .collect();
    let work = |_: Rc<Partitions>, led: ServedPartition, (): ()| -> LocalFuture<_> {
        Box::pin(async move { Ok(producers_of(&led.partition.log.producers())) })
    };
    let described = shard.partitions.fan_out(asked, true, work).await;
    let topics = in_request_order(
        &decoded.topics,
        |topic| &topic.partition_indexes,
        described,
        |&index, answer| {
            let entry = PartitionResponse::default().with_partition_index(index);
            match answer {
                Ok(active) => entry.with_active_producers(active),
                Err(code) => entry.with_error_code(code),
            }
        },
        |topic, partitions| {
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        },
    );
    respond(
        request,
        &DescribeProducersResponse::default().with_topics(topics),
    )
}

fn producers_of(state: &storage::producers::ProducerState) -> Vec<ProducerStateEntry> {
    let open = state.transactions().open();
    state
        .entries()
        .iter()
        .map(|(id, entry)| {
            ProducerStateEntry::default()
                .with_producer_id(ProducerId(*id))
                .with_producer_epoch(entry.epoch as i32)
                .with_last_sequence(entry.last_seq().unwrap_or(-1))
                .with_last_timestamp(entry.last_timestamp.0)
                .with_coordinator_epoch(entry.coordinator_epoch)
                .with_current_txn_start_offset(open.get(id).map_or(-1, |first| first.0))
        })
        .collect()
}
