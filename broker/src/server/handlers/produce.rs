//! Produce v3-13: decode, take the record sets over as writable buffers
//! (`kafka::record_sets`), append each partition's batches on its shard
//! (the partition layer's [`Partitions::produce`]), encode. The answer
//! comes once the records are buffered (acks=1), held as acks=all asks, or
//! never (acks=0).

use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tracing::Instrument;

use super::access::{Caller, TXN_ID_DENIED};
use super::{in_request_order, HandlerError, Outcome};
use crate::cluster::routing::Route;
use crate::kafka::bounds::check_produce;
use crate::kafka::decode::checked;
use crate::kafka::record_sets::{keep_frame_on_one_shard, take_record_sets, RecordSet};
use crate::kafka::request::Request;
use crate::kafka::response::Frame;
use crate::kafka::{error_text, response, Code};
use crate::partition::append::{Acks, Appended, Placed};
use crate::partition::served::ServedPartition;
use crate::partition::txn_verify::TxnWriter;
use crate::partition::Partitions;
use crate::runtime::sharded::ShardId;
use crate::security::quotas::Metered;
use crate::server::connection::refused_batches::{first_batch, retriable_before_append};
use crate::server::shard::Shard;
use control::model::acls::Operation;
use storage::producers::ProducerBatch;

/// Produce versions advertised: v3-13 are served; v0-2 are advertised for
/// older librdkafka's sake and answered with UNSUPPORTED_VERSION (see
/// `kafka::produce_legacy`).
pub const VERSIONS: (i16, i16) = (0, 13);

/// The longest a producer may ask to wait for its acknowledgements.
const TIMEOUT_MAX: Duration = Duration::from_secs(300);

/// Answers a Produce request (`None` for acks=0: Kafka sends no response).
pub async fn handle(
    shard: &Rc<Shard>,
    mut request: Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    if version < 3 {
        let answer = crate::kafka::produce_legacy::answer(
            version,
            request.header.correlation_id,
            &request.body,
        )?;
        return Ok(answer.map_or(Outcome::NoResponse, |body| {
            Outcome::Respond(Frame::of_body(&body))
        }));
    }
    let started = Instant::now();
    let mut decoded: ProduceRequest = checked(&request, check_produce)?;
    let request_bytes = request.body.len();
    let body = std::mem::take(&mut request.body);
    let record_sets = take_record_sets(&mut decoded, body, request.frame_bytes);
    let batches: Vec<Option<ProducerBatch>> = record_sets
        .iter()
        .map(|set| first_batch(&set.records))
        .collect();
    let span = produce_span(&decoded, request.header.correlation_id);
    let placed = append_all(shard, &decoded, record_sets, version, caller)
        .instrument(span.clone())
        .await;
    let (results, acknowledgements) = placed.into_iter().map(split_placed).unzip();
    let results = consistent_with_refusals(&decoded, version, (batches, results), caller);
    // Every partition's records have their offsets (or were refused), and
    // the refusals are remembered: the connection's next request may
    // append while these wait for their acknowledgements.
    caller.placed();
    let results = acknowledged(results, acknowledgements)
        .instrument(span)
        .await;
    shard.metrics.produce(decoded.acks, started.elapsed());
    if results.iter().any(Result::is_err) {
        shard.metrics.request_error(request.header.request_api_key);
    }
    // Metered after the append, as Kafka does: the answer carries the
    // throttle time and the connection is muted for it.
    let throttle = caller.meter(shard, Metered::Produce, request_bytes);
    if decoded.acks == 0 {
        return Ok(Outcome::NoResponse);
    }
    let answer = encode(&decoded.topic_data, results, version).with_throttle_time_ms(throttle);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// What a partition waits for after its records are placed: the
/// outcome of its acknowledgement (acks=all), told by its shard.
type Acknowledgement = oneshot::Receiver<Result<(), Code>>;

/// Every partition's append at once, each on its own shard, in the order
/// the request names them (`record_sets` in that order too); each answers
/// once its records are placed, with what it still waits for.
async fn append_all(
    shard: &Shard,
    decoded: &ProduceRequest,
    record_sets: Vec<RecordSet>,
    version: i16,
    caller: &Caller<'_>,
) -> Vec<Result<(Appended, Option<Acknowledgement>), Code>> {
    let acks = Acks::from_field(decoded.acks);
    let transactional_id = decoded
        .transactional_id
        .as_ref()
        .map(|t| t.to_string())
        .filter(|t| !t.is_empty());
    let refusal = match acks {
        None => Some(ResponseError::InvalidRequiredAcks.code()),
        Some(_) => transactional_id
            .as_ref()
            .filter(|id| !caller.may_transactional_id(Operation::Write, id))
            .map(|_| TXN_ID_DENIED),
    };
    let timeout = Duration::from_millis(decoded.timeout_ms.max(0) as u64).min(TIMEOUT_MAX);
    let partitions = decoded.topic_data.iter().flat_map(|topic| {
        topic
            .partition_data
            .iter()
            .map(move |data| (topic, data.index))
    });
    debug_assert_eq!(partitions.clone().count(), record_sets.len());
    let routes: Vec<Route> = partitions
        .clone()
        .map(|(topic, index)| {
            match refusal {
                Some(code) => Err(code),
                None => {
                    // Looked up only for the ACLs: a name per partition
                    // on the hot path otherwise.
                    let name = caller
                        .checks_acls()
                        .then(|| topic_name(shard, topic, version))
                        .flatten();
                    let route = route(shard, topic, index, version);
                    caller.topic_route(route, Operation::Write, name.as_deref())
                }
            }
        })
        .collect();
    let record_sets = frame_kept_by_one_shard(record_sets, &routes);
    let asked: Vec<(Route, (String, i32, RecordSet))> = routes
        .into_iter()
        .zip(partitions.zip(record_sets))
        .map(|(route, ((topic, index), records))| (route, (topic.name.to_string(), index, records)))
        .collect();
    caller.note_routes(asked.iter().map(|(route, _)| route));
    let acks = acks.unwrap_or(Acks::All);
    let parent = tracing::Span::current();
    let work = move |owner: Rc<Partitions>,
                     led,
                     (topic, index, records): (String, i32, RecordSet)| {
        // A child span per partition on the owning shard: the append, the
        // leader's fdatasync, the wait for the ISR (docs/operations.md).
        let span = tracing::debug_span!(parent: &parent, "partition", topic = %topic, partition = index, acks = acks_tag(acks));
        let transactional_id = transactional_id.clone();
        let produced = async move {
            // Produce v12+ is transaction.version 2: the leader adds the
            // partition to the transaction (KIP-890).
            let writer = transactional_id.as_deref().map(|id| TxnWriter {
                transactional_id: id,
                adds_partition: version >= 12,
            });
            let placed = owner
                .produce_placed(&led, records, acks, timeout, writer)
                .await
                .map_err(|code| abortable_for(code, version))?;
            Ok(acknowledge(owner, led, placed, version).await)
        };
        Box::pin(produced.instrument(span)) as crate::runtime::sharded::LocalFuture<_>
    };
    shard.partitions.fan_out(asked, true, work).await
}

/// The record sets, those that would make their frame's memory shared by
/// several shards copied out of it (`keep_frame_on_one_shard`).
fn frame_kept_by_one_shard(mut record_sets: Vec<RecordSet>, routes: &[Route]) -> Vec<RecordSet> {
    let owners: Vec<Option<ShardId>> = routes
        .iter()
        .map(|route| route.as_ref().ok().map(|(_, shard)| *shard))
        .collect();
    keep_frame_on_one_shard(&mut record_sets, &owners);
    record_sets
}

/// Starts the acknowledgement of placed records on their partition's
/// shard: acks=all's wait is polled once here, then finished by a task of
/// its own, whose outcome comes back over a channel (the request's shard
/// may be another); otherwise the flush starts in the background and
/// nothing is left to wait for.
async fn acknowledge(
    owner: Rc<Partitions>,
    led: ServedPartition,
    placed: Placed,
    version: i16,
) -> (Appended, Option<Acknowledgement>) {
    let appended = placed.appended;
    if !placed.waits() {
        // Resolves at once (the flush is spawned); cannot fail.
        let _ = led.acknowledge(&owner, placed).await;
        return (appended, None);
    }
    let (tell, told) = oneshot::channel();
    let outcome = async move {
        let outcome = led.acknowledge(&owner, placed).await;
        outcome.map(drop).map_err(|c| abortable_for(c, version))
    };
    let mut outcome = Box::pin(outcome.in_current_span());
    // Polled once here, so the flush starts now (its writes submitted),
    // not when the shard gets to a new task: a producer with one request
    // out waits for exactly this.
    match futures::poll!(outcome.as_mut()) {
        Poll::Ready(outcome) => {
            let _ = tell.send(outcome);
        }
        Poll::Pending => {
            let waiting = async move {
                let _ = tell.send(outcome.await);
            };
            glommio::spawn_local(waiting).detach();
        }
    }
    (appended, Some(told))
}

/// A partition's placing as its result so far and what it waits for.
fn split_placed(
    placed: Result<(Appended, Option<Acknowledgement>), Code>,
) -> (Result<Appended, Code>, Option<Acknowledgement>) {
    match placed {
        Ok((appended, waiting)) => (Ok(appended), waiting),
        Err(code) => (Err(code), None),
    }
}

/// Each partition's result once its acknowledgement came (a partition
/// whose shard went away meanwhile answers KAFKA_STORAGE_ERROR).
async fn acknowledged(
    results: Vec<Result<Appended, Code>>,
    acknowledgements: Vec<Option<Acknowledgement>>,
) -> Vec<Result<Appended, Code>> {
    let waits = acknowledgements.into_iter().map(|waiting| async move {
        match waiting {
            None => Ok(()),
            Some(told) => told
                .await
                .unwrap_or(Err(ResponseError::KafkaStorageError.code())),
        }
    });
    let outcomes = futures::future::join_all(waits).await;
    results
        .into_iter()
        .zip(outcomes)
        .map(|(result, outcome)| result.and_then(|appended| outcome.map(|()| appended)))
        .collect()
}

/// TRANSACTION_ABORTABLE (a batch outside its transaction) as a Produce
/// of `version` knows it: INVALID_TXN_STATE before v11.
fn abortable_for(code: Code, version: i16) -> Code {
    match code == ResponseError::TransactionAbortable.code() && version < 11 {
        true => ResponseError::InvalidTxnState.code(),
        false => code,
    }
}

/// Each partition's answer as its connection's earlier refusals make it:
/// a batch meeting the gap a refused batch left before it is refused the
/// same way, not as out of order ([`crate::server::connection::refused_batches`]).
fn consistent_with_refusals(
    decoded: &ProduceRequest,
    version: i16,
    (batches, results): (Vec<Option<ProducerBatch>>, Vec<Result<Appended, Code>>),
    caller: &Caller<'_>,
) -> Vec<Result<Appended, Code>> {
    let Some(refused) = caller.refused else {
        return results;
    };
    let mut refused = refused.borrow_mut();
    refused.next_request();
    let refusing = results
        .iter()
        .any(|r| r.as_ref().is_err_and(|code| retriable_before_append(*code)));
    if refused.is_empty() && !refusing {
        return results;
    }
    let partitions = decoded.topic_data.iter().flat_map(|topic| {
        let name = match version {
            13.. => topic.topic_id.to_string(),
            _ => topic.name.to_string(),
        };
        topic
            .partition_data
            .iter()
            .map(move |data| (name.clone(), data.index))
    });
    partitions
        .zip(batches)
        .zip(results)
        .map(|((partition, batch), result)| refused.answer(partition, batch, result))
        .collect()
}

/// The topic's name (from its id in v13+; None for an unknown id).
fn topic_name(shard: &Shard, topic: &TopicProduceData, version: i16) -> Option<String> {
    if version < 13 {
        return Some(topic.name.to_string());
    }
    let id = control::TopicId(*topic.topic_id.as_bytes());
    shard.cluster.topic_name(id)
}

/// Where a topic's partition is, by id (v13+) or by name.
fn route(shard: &Shard, topic: &TopicProduceData, index: i32, version: i16) -> Route {
    let cluster = &shard.cluster;
    if version >= 13 {
        cluster.route_by_id(control::TopicId(*topic.topic_id.as_bytes()), index)
    } else {
        cluster.route_by_name(topic.name.as_str(), index)
    }
}

/// One span per request (debug level: free unless enabled).
fn produce_span(decoded: &ProduceRequest, correlation_id: i32) -> tracing::Span {
    let acks = acks_tag(Acks::from_field(decoded.acks).unwrap_or(Acks::All));
    let partitions: usize = decoded
        .topic_data
        .iter()
        .map(|t| t.partition_data.len())
        .sum();
    tracing::debug_span!("produce", acks, correlation_id, partitions)
}

fn acks_tag(acks: Acks) -> &'static str {
    match acks {
        Acks::None => "0",
        Acks::Leader => "1",
        Acks::All => "all",
    }
}

/// The response, in the request's order.
fn encode(
    topics: &[TopicProduceData],
    results: Vec<Result<Appended, Code>>,
    version: i16,
) -> ProduceResponse {
    let responses = in_request_order(
        topics,
        |topic| &topic.partition_data,
        results,
        |data, result| partition_response(data.index, result, version),
        |topic, partitions| {
            let entry = TopicProduceResponse::default().with_partition_responses(partitions);
            if version >= 13 {
                entry.with_topic_id(topic.topic_id)
            } else {
                entry.with_name(topic.name.clone())
            }
        },
    );
    ProduceResponse::default().with_responses(responses)
}

fn partition_response(
    index: i32,
    result: Result<Appended, Code>,
    version: i16,
) -> PartitionProduceResponse {
    let (error, base_offset, log_start) = match result {
        Ok(appended) => (0, appended.base_offset.0, appended.log_start.0),
        Err(code) => (code, -1, -1),
    };
    let mut entry = PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error)
        .with_base_offset(base_offset)
        .with_log_append_time_ms(-1);
    if version >= 5 {
        entry = entry.with_log_start_offset(log_start);
    }
    if version >= 8 && error != 0 {
        entry = entry.with_error_message(Some(StrBytes::from_string(error_text(error))));
    }
    entry
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use kafka_protocol::messages::produce_request::PartitionProduceData;
    use kafka_protocol::messages::TopicName;

    use super::*;
    use crate::server::connection::refused_batches::RefusedBatches;

    fn request(version: i16, partitions: &[i32]) -> ProduceRequest {
        let mut topic = TopicProduceData::default().with_partition_data(
            partitions
                .iter()
                .map(|i| PartitionProduceData::default().with_index(*i))
                .collect(),
        );
        topic = match version {
            13.. => topic.with_topic_id(uuid::Uuid::from_bytes([7; 16])),
            _ => topic.with_name(TopicName(StrBytes::from_static_str("orders"))),
        };
        ProduceRequest::default().with_topic_data(vec![topic])
    }

    fn batch(first_seq: i32) -> Option<ProducerBatch> {
        Some(ProducerBatch {
            producer_id: 7,
            epoch: 0,
            first_seq,
            offset_delta: 4,
        })
    }

    #[test]
    fn transaction_abortable_is_invalid_txn_state_before_v11() {
        let abortable = ResponseError::TransactionAbortable.code();
        assert_eq!(
            abortable_for(abortable, 10),
            ResponseError::InvalidTxnState.code()
        );
        assert_eq!(abortable_for(abortable, 11), abortable);
        assert_eq!(abortable_for(0, 9), 0);
    }

    #[test]
    fn pipelined_batches_behind_a_refused_one_share_its_refusal_by_name_and_by_id() {
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        let out_of_order = ResponseError::OutOfOrderSequenceNumber.code();
        for version in [12, 13] {
            let refused = RefCell::new(RefusedBatches::default());
            let caller = Caller::new((None, false), String::new, (None, ""), ("", "L".into()))
                .remembering(&refused);
            let first = request(version, &[0, 1]);
            let answers = consistent_with_refusals(
                &first,
                version,
                (
                    vec![batch(10), batch(10)],
                    vec![Err(not_leader), Err(out_of_order)],
                ),
                &caller,
            );
            assert_eq!(
                answers,
                vec![Err(not_leader), Err(out_of_order)],
                "v{version}"
            );
            // The next request's batches: partition 0's meets the gap its
            // refused batch left; partition 1 refused nothing.
            let answers = consistent_with_refusals(
                &first,
                version,
                (
                    vec![batch(15), batch(15)],
                    vec![Err(out_of_order), Err(out_of_order)],
                ),
                &caller,
            );
            assert_eq!(
                answers,
                vec![Err(not_leader), Err(out_of_order)],
                "v{version}"
            );
        }
    }
}
