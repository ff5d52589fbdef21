//! Fetch v4-18: decode, read each partition on its shard (below the high
//! watermark; a follower below the log end), long-poll (min_bytes /
//! max_wait_ms) until data arrives, encode.
//!
//! A response holds whole batches, starting with the one containing the
//! fetch offset, within each partition's limit and the response's
//! max_bytes (the first partition with data always returns at least one
//! batch, as Kafka does, so a consumer is never stuck behind a big batch).
//! Fetch sessions (KIP-227) are not created: every fetch is a full one.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use control::BrokerId;
use futures::future::{select, select_all};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::ResponseError;
use storage::batch::{stored_batch_len, whole_batches_within};
use storage::Offset;
use tracing::Instrument;

use super::access::{Caller, TOPIC_DENIED};
use super::{in_request_order, HandlerError, Outcome};
use crate::cluster::routing::Route;
use crate::kafka::bounds::check_fetch;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::{fetch_frame, response, Code};
use crate::partition::leader::on_replica_fetch;
use crate::partition::read::{Bound, Read};
use crate::partition::role::Role;
use crate::partition::served::{check_leader_epoch, ServedPartition};
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::security::quotas::Metered;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// Fetch versions served.
pub const VERSIONS: (i16, i16) = (4, 18);

/// The longest a fetch may wait, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

/// One partition's read: what was read, or where to read instead.
#[derive(Debug, Clone, Default)]
struct PartitionRead {
    read: Read,
    /// The high watermark to send (a follower's is the leader's).
    high_watermark: Offset,
    /// A follower in the consumer's rack to read from instead (-1: none).
    preferred_read_replica: i32,
}

/// A partition asked for, and from where to read it.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    offset: i64,
    max_bytes: usize,
    /// The leader epoch the client believes in (v9+; -1: unchecked).
    current_leader_epoch: i32,
    /// A consumer reading committed records only (isolation_level 1, v4+).
    committed: bool,
}

impl Wanted {
    /// Up to where a consumer may read this partition.
    fn consumer_bound(&self) -> Bound {
        match self.committed {
            true => Bound::LastStable,
            false => Bound::HighWatermark,
        }
    }
}

/// Who is fetching.
#[derive(Debug, Clone)]
enum Reader {
    /// A consumer, served by leaders only.
    Consumer,
    /// A consumer on a rack-aware broker, in this rack if it said so:
    /// followers serve it, leaders may send it to a follower in its rack.
    RackAware(Option<String>),
    /// A follower broker copying the leader's log.
    Follower(BrokerId),
}

impl Reader {
    fn leader_only(&self) -> bool {
        !matches!(self, Reader::RackAware(_))
    }

    fn bound(&self, wanted: &Wanted) -> Bound {
        match self {
            Reader::Follower(_) => Bound::LogEnd,
            _ => wanted.consumer_bound(),
        }
    }
}

/// Answers a Fetch request, waiting up to max_wait_ms for min_bytes.
pub async fn handle(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let started = Instant::now();
    let version = request.header.request_api_version;
    let decoded: FetchRequest = checked(request, check_fetch)?;
    if version >= 7 && (decoded.session_id != 0 || decoded.session_epoch > 0) {
        // No sessions are ever created, so none can be found.
        let answer =
            FetchResponse::default().with_error_code(ResponseError::FetchSessionIdNotFound.code());
        return Ok(Outcome::Respond(response::encode(
            request.header.correlation_id,
            version,
            &answer,
        )?));
    }
    let reader = reader(shard, &decoded, version);
    let asked = wanted(shard, &decoded, version, &Permit::of(caller, &reader));
    caller.note_routes(asked.iter().map(|(route, _)| route));
    let span = fetch_span(
        &reader,
        &decoded,
        asked.len(),
        request.header.correlation_id,
    );
    let reads = long_poll(shard, &decoded, &asked, &reader)
        .instrument(span.clone())
        .await;
    if !matches!(reader, Reader::Follower(_)) {
        shard.metrics.fetch_latency.observe(started.elapsed());
    }
    if reads.iter().any(Result::is_err) {
        shard.metrics.request_error(request.header.request_api_key);
    }
    // Consumers are metered on what they are sent; replication is not
    // (a client quota must never throttle a follower).
    let throttle = match reader {
        Reader::Follower(_) => {
            caller.mark_replication();
            0
        }
        _ => {
            let bytes: usize = reads.iter().flatten().map(|r| r.read.bytes).sum();
            span.record("bytes", bytes);
            caller.meter(shard, Metered::Fetch, bytes)
        }
    };
    let (answer, chunks) = encode(&decoded, reads, version);
    let answer = answer.with_throttle_time_ms(throttle);
    let frame = fetch_frame::encode(request.header.correlation_id, version, answer, chunks)?;
    Ok(Outcome::Respond(frame))
}

/// A consumer's fetch as a debug span (exported as a trace: docs/operations.md,
/// "Traces"): the partitions asked, the wait allowed and the bytes sent.
/// A follower's fetches are replication, not traced.
fn fetch_span(
    reader: &Reader,
    decoded: &FetchRequest,
    partitions: usize,
    correlation_id: i32,
) -> tracing::Span {
    if matches!(reader, Reader::Follower(_)) {
        return tracing::Span::none();
    }
    let max_wait_ms = decoded.max_wait_ms;
    let bytes = tracing::field::Empty;
    tracing::debug_span!("fetch", correlation_id, partitions, max_wait_ms, bytes)
}

/// What the ACLs let a fetcher read: a follower needs CLUSTER_ACTION on
/// the cluster, a consumer READ on each topic (Kafka's checks; a refusal
/// is TOPIC_AUTHORIZATION_FAILED for the partitions either way).
struct Permit<'a, 'c> {
    caller: &'a Caller<'c>,
    follower_allowed: Option<bool>,
}

impl<'a, 'c> Permit<'a, 'c> {
    fn of(caller: &'a Caller<'c>, reader: &Reader) -> Permit<'a, 'c> {
        let follower_allowed = matches!(reader, Reader::Follower(_))
            .then(|| caller.may_cluster(Operation::ClusterAction));
        Permit {
            caller,
            follower_allowed,
        }
    }

    fn route(&self, route: Route, topic: Option<&str>) -> Route {
        match self.follower_allowed {
            Some(true) => route,
            Some(false) => Err(TOPIC_DENIED),
            None => self.caller.topic_route(route, Operation::Read, topic),
        }
    }
}

/// Every partition asked for, in the request's order, with its route.
fn wanted(
    shard: &Shard,
    decoded: &FetchRequest,
    version: i16,
    permit: &Permit<'_, '_>,
) -> Vec<(Route, Wanted)> {
    let cluster = &shard.cluster;
    decoded
        .topics
        .iter()
        .flat_map(|topic| {
            // Looked up only for the ACLs (a consumer's READ).
            let name = match (permit.caller.checks_acls(), version >= 13) {
                (false, _) => None,
                (true, true) => cluster.topic_name(control::TopicId(*topic.topic_id.as_bytes())),
                (true, false) => Some(topic.topic.to_string()),
            };
            topic.partitions.iter().map(move |p| {
                let route = if version >= 13 {
                    cluster.route_by_id(control::TopicId(*topic.topic_id.as_bytes()), p.partition)
                } else {
                    cluster.route_by_name(topic.topic.as_str(), p.partition)
                };
                let route = permit.route(route, name.as_deref());
                let wanted = Wanted {
                    offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as usize,
                    current_leader_epoch: if version >= 9 {
                        p.current_leader_epoch
                    } else {
                        -1
                    },
                    committed: version >= 4 && decoded.isolation_level == 1,
                };
                (route, wanted)
            })
        })
        .collect()
}

/// Who fetches: a follower names its broker (v15+ in the replica state);
/// a consumer naming its rack (v11+) may be sent to a follower there.
fn reader(shard: &Shard, decoded: &FetchRequest, version: i16) -> Reader {
    let replica = if version <= 14 {
        decoded.replica_id.0
    } else {
        decoded.replica_state.replica_id.0
    };
    if replica >= 0 {
        return Reader::Follower(BrokerId(replica));
    }
    if !shard.cluster.config.rack_aware_reads() {
        return Reader::Consumer;
    }
    let rack = decoded.rack_id.as_str();
    Reader::RackAware((version >= 11 && !rack.is_empty()).then(|| rack.to_string()))
}

/// Reads until min_bytes are there, an error or a redirection comes, or
/// max_wait_ms passes; the reads trimmed to max_bytes.
async fn long_poll(
    shard: &Shard,
    decoded: &FetchRequest,
    asked: &[(Route, Wanted)],
    reader: &Reader,
) -> Vec<Result<PartitionRead, Code>> {
    let max_bytes = decoded.max_bytes.max(0) as usize;
    let min_bytes = decoded.min_bytes.max(0) as usize;
    let wait = Duration::from_millis(decoded.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    loop {
        let reads = fit_response(read_all(shard, asked, reader).await, max_bytes);
        let total: usize = reads.iter().flatten().map(|r| r.read.bytes).sum();
        let stop = reads
            .iter()
            .any(|r| r.as_ref().map_or(true, |r| r.preferred_read_replica >= 0));
        let now = Instant::now();
        if total >= min_bytes.max(1) || stop || now >= deadline || asked.is_empty() {
            return reads;
        }
        // Read again once data arrives anywhere, or at the deadline.
        wait_for_any(shard, asked, &reads, reader, deadline - now).await;
    }
}

/// Reads every partition at once, each on its own shard.
async fn read_all(
    shard: &Shard,
    asked: &[(Route, Wanted)],
    reader: &Reader,
) -> Vec<Result<PartitionRead, Code>> {
    let work = {
        let reader = reader.clone();
        move |owner: Rc<Partitions>, led: ServedPartition, wanted: Wanted| -> LocalFuture<_> {
            let reader = reader.clone();
            Box::pin(async move { read_one(&owner, led, wanted, reader).await })
        }
    };
    let asked = asked.iter().copied();
    shard
        .partitions
        .fan_out(asked, reader.leader_only(), work)
        .await
}

/// One partition's read on its shard.
async fn read_one(
    owner: &Partitions,
    led: ServedPartition,
    wanted: Wanted,
    reader: Reader,
) -> Result<PartitionRead, Code> {
    check_leader_epoch(wanted.current_leader_epoch, led.epoch)?;
    let follower = match reader {
        Reader::Consumer => return consumer_read(&led, wanted).await,
        Reader::RackAware(rack) => return read_rack_aware(owner, &led, rack, wanted).await,
        Reader::Follower(follower) => follower,
    };
    if wanted.offset > led.partition.log.log_end().0 {
        // Its log is longer: it must truncate first.
        return Err(ResponseError::OffsetOutOfRange.code());
    }
    let high_watermark = on_replica_fetch(
        &led.partition,
        follower,
        Offset(wanted.offset),
        wanted.current_leader_epoch,
    )?;
    let read = led
        .read(wanted.offset, wanted.max_bytes, Bound::LogEnd)
        .await?;
    Ok(PartitionRead {
        read,
        high_watermark,
        preferred_read_replica: -1,
    })
}

async fn consumer_read(led: &ServedPartition, wanted: Wanted) -> Result<PartitionRead, Code> {
    let read = led
        .read(wanted.offset, wanted.max_bytes, wanted.consumer_bound())
        .await?;
    Ok(PartitionRead {
        high_watermark: read.high_watermark,
        read,
        preferred_read_replica: -1,
    })
}

/// A consumer's read on a rack-aware broker: a follower serves it below
/// its own high watermark; a leader points a consumer from another rack
/// at an in-sync follower in that rack, or serves it itself.
async fn read_rack_aware(
    owner: &Partitions,
    led: &ServedPartition,
    rack: Option<String>,
    wanted: Wanted,
) -> Result<PartitionRead, Code> {
    let leads = match &*led.partition.role.borrow() {
        Role::Leader(_) => true,
        Role::Follower { .. } => false,
        Role::None => return Err(ResponseError::NotLeaderOrFollower.code()),
    };
    if !leads {
        owner
            .metrics
            .follower_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return consumer_read(led, wanted).await;
    }
    let Some(preferred) = rack.and_then(|rack| replica_in_rack(owner, led, &rack)) else {
        return consumer_read(led, wanted).await;
    };
    let log = &led.partition.log;
    Ok(PartitionRead {
        read: Read {
            bound: log.high_watermark(),
            high_watermark: log.high_watermark(),
            log_start: log.log_start(),
            ..Read::default()
        },
        high_watermark: log.high_watermark(),
        preferred_read_replica: preferred,
    })
}

/// An in-sync, live follower in `rack`, unless this broker is there.
fn replica_in_rack(owner: &Partitions, led: &ServedPartition, rack: &str) -> Option<i32> {
    let cluster = &owner.cluster;
    if cluster.config.rack.as_deref() == Some(rack) {
        return None;
    }
    let view = cluster.view.borrow();
    let partition = led.topic.partitions.get(led.index as usize)?;
    partition
        .isr
        .iter()
        .filter(|r| **r != cluster.me)
        .find(|r| {
            view.metadata
                .brokers
                .get(r)
                .is_some_and(|b| !b.fenced && b.registration.rack.as_deref() == Some(rack))
        })
        .map(|r| r.0)
}

/// Trims reads to whole batches within the response's `max_bytes`; the
/// first partition with data keeps at least its first batch.
fn fit_response(
    mut reads: Vec<Result<PartitionRead, Code>>,
    max_bytes: usize,
) -> Vec<Result<PartitionRead, Code>> {
    let mut budget = max_bytes;
    let mut first = true;
    for read in reads.iter_mut().flatten().map(|r| &mut r.read) {
        if read.bytes == 0 {
            continue;
        }
        let floor = match first {
            true => read
                .chunks
                .first()
                .and_then(|c| stored_batch_len(c))
                .unwrap_or(0),
            false => 0,
        };
        first = false;
        let limit = budget.max(floor);
        if read.bytes > limit {
            read.chunks = whole_chunks_within(std::mem::take(&mut read.chunks), limit);
            read.bytes = read.chunks.iter().map(Bytes::len).sum();
        }
        budget = budget.saturating_sub(read.bytes);
    }
    reads
}

/// The leading whole batches of `chunks` (each of whole batches) within
/// `limit` bytes, without joining them.
fn whole_chunks_within(chunks: Vec<Bytes>, limit: usize) -> Vec<Bytes> {
    let mut left = limit;
    let mut kept = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        if chunk.len() <= left {
            left -= chunk.len();
            kept.push(chunk);
            continue;
        }
        let whole = whole_batches_within(&chunk, left);
        if whole > 0 {
            kept.push(chunk.slice(..whole));
        }
        break;
    }
    kept
}

/// Waits until any partition's bound moves past what the reads saw, or
/// `left` passes.
async fn wait_for_any(
    shard: &Shard,
    asked: &[(Route, Wanted)],
    reads: &[Result<PartitionRead, Code>],
    reader: &Reader,
    left: Duration,
) {
    let waits: Vec<_> = asked
        .iter()
        .zip(reads)
        .filter_map(|((route, wanted), read)| {
            Some((*route, read.as_ref().ok()?.read.bound, reader.bound(wanted)))
        })
        .map(|(route, seen, bound)| {
            let wait =
                move |_: Rc<Partitions>, led: ServedPartition| -> LocalFuture<Result<(), Code>> {
                    Box::pin(async move {
                        led.wait_past(seen, bound, left).await;
                        Ok(())
                    })
                };
            Box::pin(
                shard
                    .partitions
                    .on_partition(route, reader.leader_only(), wait),
            )
        })
        .collect();
    if waits.is_empty() {
        glommio::timer::sleep(left).await;
        return;
    }
    let _ = select(select_all(waits), Box::pin(glommio::timer::sleep(left))).await;
}

/// The answer, its record sets left empty, and their chunks (as the log
/// handed them out) in the answer's partition order.
fn encode(
    decoded: &FetchRequest,
    reads: Vec<Result<PartitionRead, Code>>,
    version: i16,
) -> (FetchResponse, fetch_frame::RecordChunks) {
    let mut chunks = Vec::with_capacity(reads.len());
    let topics = in_request_order(
        &decoded.topics,
        |topic| &topic.partitions,
        reads,
        |p, read| {
            let (data, records) = partition_data(p.partition, read, version);
            chunks.push(records);
            data
        },
        |topic, partitions| {
            let entry = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                entry.with_topic_id(topic.topic_id)
            } else {
                entry.with_topic(topic.topic.clone())
            }
        },
    );
    (FetchResponse::default().with_responses(topics), chunks)
}

/// A partition's answer with an empty record set, and the chunks of it.
fn partition_data(
    index: i32,
    read: Result<PartitionRead, Code>,
    version: i16,
) -> (PartitionData, Vec<Bytes>) {
    let (error, read) = match read {
        Ok(read) => (0, read),
        Err(code) => {
            let none = PartitionRead {
                high_watermark: Offset(-1),
                read: Read {
                    log_start: Offset(-1),
                    last_stable: Offset(-1),
                    ..Read::default()
                },
                preferred_read_replica: -1,
            };
            (code, none)
        }
    };
    let high_watermark = read.high_watermark.0;
    let mut entry = PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error)
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(read.read.last_stable.0)
        .with_aborted_transactions(read.read.aborted.map(|aborted| {
            aborted
                .into_iter()
                .map(|(producer_id, first_offset)| {
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(producer_id))
                        .with_first_offset(first_offset.0)
                })
                .collect()
        }))
        .with_records(Some(Bytes::new()));
    if version >= 5 {
        entry = entry.with_log_start_offset(read.read.log_start.0);
    }
    if version >= 11 {
        entry = entry.with_preferred_read_replica(kafka_protocol::messages::BrokerId(
            read.preferred_read_replica,
        ));
    }
    (entry, read.read.chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[8..12].copy_from_slice(&((len - 12) as i32).to_be_bytes());
        b
    }

    fn read(batches: &[usize]) -> Result<PartitionRead, Code> {
        let bytes: Vec<u8> = batches.iter().flat_map(|&l| batch(l)).collect();
        Ok(PartitionRead {
            read: Read {
                bytes: bytes.len(),
                chunks: vec![Bytes::from(bytes)],
                ..Read::default()
            },
            ..PartitionRead::default()
        })
    }

    /// A read of several chunks, each of whole batches.
    fn read_in_chunks(chunks: &[&[usize]]) -> Result<PartitionRead, Code> {
        let chunks: Vec<Bytes> = chunks
            .iter()
            .map(|batches| Bytes::from(batches.iter().flat_map(|&l| batch(l)).collect::<Vec<u8>>()))
            .collect();
        Ok(PartitionRead {
            read: Read {
                bytes: chunks.iter().map(Bytes::len).sum(),
                chunks,
                ..Read::default()
            },
            ..PartitionRead::default()
        })
    }

    fn bytes(read: &Result<PartitionRead, Code>) -> usize {
        read.as_ref().unwrap().read.bytes
    }

    #[test]
    fn the_response_budget_keeps_whole_batches_and_the_first_batch_always() {
        // The first partition's first batch (100) exceeds the budget (60): kept alone.
        let fitted = fit_response(vec![read(&[100, 50]), read(&[30])], 60);
        assert_eq!(bytes(&fitted[0]), 100);
        assert_eq!(bytes(&fitted[1]), 0);
        // Whole batches up to the budget, across partitions.
        let fitted = fit_response(vec![read(&[40, 40, 40]), read(&[30, 30])], 110);
        assert_eq!(bytes(&fitted[0]), 80);
        assert_eq!(bytes(&fitted[1]), 30);
        assert_eq!(fitted[1].as_ref().unwrap().read.chunks[0].len(), 30);
        // Partitions without data, or failed, do not count as the first.
        let nothing = Ok(PartitionRead::default());
        let failed = Err(ResponseError::NotLeaderOrFollower.code());
        let fitted = fit_response(vec![nothing, failed, read(&[70])], 10);
        assert_eq!(bytes(&fitted[2]), 70);
    }

    #[test]
    fn the_response_budget_cuts_chunks_without_joining_them() {
        let reads = vec![read_in_chunks(&[&[40], &[40, 40], &[40]])];
        let first = reads[0].as_ref().unwrap().read.chunks[0].clone();
        let fitted = fit_response(reads, 100);
        let chunks = &fitted[0].as_ref().unwrap().read.chunks;
        assert_eq!(bytes(&fitted[0]), 80);
        assert_eq!(chunks.iter().map(Bytes::len).collect::<Vec<_>>(), [40, 40]);
        assert_eq!(
            chunks[0].as_ptr(),
            first.as_ptr(),
            "the first chunk was copied"
        );
        // A chunk that fits whole is kept whole; one that does not, cut
        // at a batch; nothing after it.
        let fitted = fit_response(vec![read_in_chunks(&[&[40, 40], &[30]]), read(&[20])], 85);
        assert_eq!(bytes(&fitted[0]), 80);
        assert_eq!(bytes(&fitted[1]), 0);
        // The first batch is kept even when it alone exceeds the budget.
        let fitted = fit_response(vec![read_in_chunks(&[&[100], &[50]])], 60);
        assert_eq!(bytes(&fitted[0]), 100);
    }
}
