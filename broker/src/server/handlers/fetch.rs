//! Fetch v4-18: read each partition on its shard, below the high
//! watermark, and long-poll (min_bytes / max_wait_ms) until data arrives.
//!
//! A response holds whole batches, starting with the one containing the
//! fetch offset, within each partition's limit and the response's
//! max_bytes (the first partition with data always returns at least one
//! batch, as Kafka does, so a consumer is never stuck behind a big batch).
//! Fetch sessions (KIP-227) are not created: every fetch is a full one.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::{select, select_all};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use storage::Offset;

use super::routing::{
    check_leader_epoch, on_partition, route_by_id, route_by_name, Code, Led, Route,
};
use super::{HandlerError, Outcome};
use crate::kafka::bounds::check_fetch;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::server::replica;
use crate::server::shard::Shard;

/// Fetch versions served.
pub const VERSIONS: (i16, i16) = (4, 18);

/// The longest a fetch may wait, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

/// One partition's read.
#[derive(Debug, Clone)]
struct PartitionRead {
    error: Code,
    high_watermark: i64,
    /// What a long poll waits to see move: the high watermark for a
    /// consumer, the log end for a follower.
    seen: i64,
    log_start: i64,
    records: Vec<Bytes>,
    bytes: usize,
    /// A follower in the consumer's rack to read from instead (-1: none).
    preferred_read_replica: i32,
}

impl Default for PartitionRead {
    fn default() -> Self {
        PartitionRead {
            error: 0,
            high_watermark: -1,
            seen: -1,
            log_start: -1,
            records: Vec::new(),
            bytes: 0,
            preferred_read_replica: -1,
        }
    }
}

impl PartitionRead {
    fn failed(error: Code) -> PartitionRead {
        PartitionRead {
            error,
            ..PartitionRead::default()
        }
    }
}

/// A partition asked for, where it lives, and from where to read it.
struct Wanted {
    route: Route,
    offset: i64,
    max_bytes: usize,
    /// The leader epoch the client believes in (v9+; -1: unchecked).
    current_leader_epoch: i32,
}

/// Answers a Fetch request, waiting up to max_wait_ms for min_bytes.
pub async fn handle(shard: &Rc<Shard>, request: &Request) -> Result<Outcome, HandlerError> {
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
    let wanted: Vec<Wanted> = decoded
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| Wanted {
                route: if version >= 13 {
                    route_by_id(
                        shard,
                        control::TopicId(*topic.topic_id.as_bytes()),
                        p.partition,
                    )
                } else {
                    route_by_name(shard, topic.topic.as_str(), p.partition)
                },
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
                current_leader_epoch: if version >= 9 {
                    p.current_leader_epoch
                } else {
                    -1
                },
            })
        })
        .collect();
    // A follower's fetch names its broker (v15+ in the replica state).
    let replica = if version <= 14 {
        decoded.replica_id.0
    } else {
        decoded.replica_state.replica_id.0
    };
    let replica = (replica >= 0).then_some(replica);
    // A consumer naming its rack (v11+) may be sent to a follower there.
    let reader = match replica {
        Some(follower) => Reader::Follower(follower),
        None if shard.config.rack_aware_reads() => {
            let rack = decoded.rack_id.as_str();
            Reader::RackAware((version >= 11 && !rack.is_empty()).then(|| rack.to_string()))
        }
        None => Reader::Consumer,
    };
    let max_bytes = decoded.max_bytes.max(0) as usize;
    let min_bytes = decoded.min_bytes.max(0) as usize;
    let deadline =
        Instant::now() + Duration::from_millis(decoded.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let reads = loop {
        let reads = fit_response(read_all(shard, &wanted, &reader).await, max_bytes);
        let total: usize = reads.iter().map(|r| r.bytes).sum();
        let any_error = reads
            .iter()
            .any(|r| r.error != 0 || r.preferred_read_replica >= 0);
        let now = Instant::now();
        if total >= min_bytes.max(1) || any_error || now >= deadline || wanted.is_empty() {
            break reads;
        }
        // Read again once data arrives anywhere, or at the deadline.
        wait_for_any(shard, &wanted, &reads, &reader, deadline - now).await;
    };
    if !matches!(reader, Reader::Follower(_)) {
        shard.metrics.fetch_latency.observe(started.elapsed());
    }
    if reads.iter().any(|r| r.error != 0) {
        shard.metrics.request_error(request.header.request_api_key);
    }
    let mut reads = reads.into_iter();
    let topics = decoded
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let read = reads.next().expect("one read per partition");
                    let records = match read.records.len() {
                        0 => Bytes::new(),
                        1 => read.records[0].clone(),
                        _ => {
                            let mut joined = BytesMut::with_capacity(read.bytes);
                            read.records
                                .iter()
                                .for_each(|r| joined.extend_from_slice(r));
                            joined.freeze()
                        }
                    };
                    let mut entry = PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_error_code(read.error)
                        .with_high_watermark(read.high_watermark)
                        .with_last_stable_offset(read.high_watermark)
                        .with_aborted_transactions(Some(vec![]))
                        .with_records(Some(records));
                    if version >= 5 {
                        entry = entry.with_log_start_offset(read.log_start);
                    }
                    if version >= 11 {
                        entry = entry.with_preferred_read_replica(
                            kafka_protocol::messages::BrokerId(read.preferred_read_replica),
                        );
                    }
                    entry
                })
                .collect();
            let mut entry = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                entry = entry.with_topic_id(topic.topic_id);
            } else {
                entry = entry.with_topic(topic.topic.clone());
            }
            entry
        })
        .collect();
    let answer = FetchResponse::default().with_responses(topics);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
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
    Follower(i32),
}

/// Reads every partition at once, each on its own shard; for a follower
/// broker, up to the log end, noting its progress on the way.
async fn read_all(shard: &Rc<Shard>, wanted: &[Wanted], reader: &Reader) -> Vec<PartitionRead> {
    let reads = wanted.iter().map(|w| {
        let shard = shard.clone();
        let (route, offset, max_bytes) = (w.route, w.offset, w.max_bytes);
        let current_leader_epoch = w.current_leader_epoch;
        let reader = reader.clone();
        let leader_only = !matches!(reader, Reader::RackAware(_));
        async move {
            on_partition(
                &shard,
                route,
                leader_only,
                PartitionRead::failed,
                move |owner, led| {
                    Box::pin(async move {
                        if let Err(code) = check_leader_epoch(current_leader_epoch, led.epoch) {
                            return PartitionRead::failed(code);
                        }
                        let follower = match reader {
                            Reader::Consumer => {
                                return read_on_owner(led, offset, max_bytes, None).await
                            }
                            Reader::RackAware(rack) => {
                                return read_rack_aware(&owner, led, rack, offset, max_bytes).await
                            }
                            Reader::Follower(follower) => follower,
                        };
                        if offset > led.partition.log.log_end().0 {
                            // Its log is longer: it must truncate first.
                            return PartitionRead::failed(ResponseError::OffsetOutOfRange.code());
                        }
                        match replica::on_replica_fetch(
                            &led.partition,
                            follower,
                            offset,
                            current_leader_epoch,
                        ) {
                            Ok(high_watermark) => {
                                read_on_owner(led, offset, max_bytes, Some(high_watermark)).await
                            }
                            Err(code) => PartitionRead::failed(code),
                        }
                    })
                },
            )
            .await
        }
    });
    futures::future::join_all(reads).await
}

/// A consumer's read on a rack-aware broker: a follower serves it below
/// its own high watermark; a leader points a consumer from another rack
/// at an in-sync follower in that rack, or serves it itself.
async fn read_rack_aware(
    shard: &Shard,
    led: Led,
    rack: Option<String>,
    offset: i64,
    max_bytes: usize,
) -> PartitionRead {
    let leads = match &*led.partition.role.borrow() {
        replica::Role::Leader(_) => true,
        replica::Role::Follower { .. } => false,
        replica::Role::None => {
            return PartitionRead::failed(ResponseError::NotLeaderOrFollower.code())
        }
    };
    if !leads {
        shard
            .metrics
            .follower_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return read_on_owner(led, offset, max_bytes, None).await;
    }
    if let Some(preferred) = rack.and_then(|rack| replica_in_rack(shard, &led, &rack)) {
        let log = &led.partition.log;
        return PartitionRead {
            high_watermark: log.high_watermark().0,
            seen: log.high_watermark().0,
            log_start: log.log_start().0,
            preferred_read_replica: preferred,
            ..PartitionRead::default()
        };
    }
    read_on_owner(led, offset, max_bytes, None).await
}

/// An in-sync, live follower in `rack`, unless this broker is there.
fn replica_in_rack(shard: &Shard, led: &Led, rack: &str) -> Option<i32> {
    if shard.config.rack.as_deref() == Some(rack) {
        return None;
    }
    let view = shard.view.borrow();
    let partition = led.topic.partitions.get(led.index as usize)?;
    partition
        .isr
        .iter()
        .filter(|r| r.0 != shard.config.node_id)
        .find(|r| {
            view.metadata
                .brokers
                .get(r)
                .is_some_and(|b| !b.fenced && b.registration.rack.as_deref() == Some(rack))
        })
        .map(|r| r.0)
}

/// Reads below the high watermark, or (for a follower, which is sent the
/// high watermark `follower_high_watermark`) below the log end.
async fn read_on_owner(
    led: Led,
    offset: i64,
    max_bytes: usize,
    follower_high_watermark: Option<i64>,
) -> PartitionRead {
    let log = &led.partition.log;
    let (log_start, log_end, high_watermark) =
        (log.log_start().0, log.log_end().0, log.high_watermark());
    let bound = match follower_high_watermark {
        Some(_) => Offset(log_end),
        None => high_watermark,
    };
    let mut read = PartitionRead {
        error: 0,
        high_watermark: follower_high_watermark.unwrap_or(high_watermark.0),
        seen: bound.0,
        log_start,
        ..PartitionRead::default()
    };
    if offset < log_start || offset > log_end {
        read.error = ResponseError::OffsetOutOfRange.code();
        return read;
    }
    if offset >= bound.0 {
        return read; // nothing visible yet: the caller may wait
    }
    match log.read(Offset(offset), max_bytes.max(1), bound).await {
        Ok(outcome) => {
            read.bytes = outcome.bytes;
            read.records = outcome.chunks;
        }
        Err(storage::StorageError::OffsetOutOfRange { .. }) => {
            read.error = ResponseError::OffsetOutOfRange.code();
        }
        Err(e) => {
            tracing::error!(topic = %led.topic.name, error = %e, "reading a partition failed");
            read.error = ResponseError::KafkaStorageError.code();
        }
    }
    read
}

/// Trims reads to whole batches within the response's `max_bytes`; the
/// first partition with data keeps at least its first batch.
fn fit_response(mut reads: Vec<PartitionRead>, max_bytes: usize) -> Vec<PartitionRead> {
    let mut budget = max_bytes;
    let mut first = true;
    for read in reads.iter_mut().filter(|r| r.bytes > 0) {
        let floor = if first {
            first_batch_len(&read.records)
        } else {
            0
        };
        first = false;
        let limit = budget.max(floor);
        if read.bytes > limit {
            let joined = Bytes::from(read.records.concat());
            let whole = whole_batches_within(&joined, limit);
            read.records = if whole == 0 {
                vec![]
            } else {
                vec![joined.slice(..whole)]
            };
            read.bytes = whole;
        }
        budget = budget.saturating_sub(read.bytes);
    }
    reads
}

/// The length of the first batch of a read.
fn first_batch_len(records: &[Bytes]) -> usize {
    records.first().filter(|r| r.len() >= 12).map_or(0, |r| {
        12 + i32::from_be_bytes([r[8], r[9], r[10], r[11]]).max(0) as usize
    })
}

/// The length of the longest prefix of whole batches within `limit`.
fn whole_batches_within(bytes: &[u8], limit: usize) -> usize {
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let len = 12
            + i32::from_be_bytes([bytes[at + 8], bytes[at + 9], bytes[at + 10], bytes[at + 11]])
                .max(0) as usize;
        if at + len > limit.min(bytes.len()) {
            break;
        }
        at += len;
    }
    at
}

/// Waits until any partition's high watermark moves past what the reads
/// saw, or `left` passes.
async fn wait_for_any(
    shard: &Rc<Shard>,
    wanted: &[Wanted],
    reads: &[PartitionRead],
    reader: &Reader,
    left: Duration,
) {
    let follower = matches!(reader, Reader::Follower(_));
    let leader_only = !matches!(reader, Reader::RackAware(_));
    let waits: Vec<_> = wanted
        .iter()
        .zip(reads)
        .filter(|(w, _)| w.route.is_ok())
        .map(|(w, r)| {
            let (shard, route, seen) = (shard.clone(), w.route, r.seen);
            Box::pin(async move {
                on_partition(
                    &shard,
                    route,
                    leader_only,
                    |_| (),
                    move |_, led| {
                        Box::pin(async move { wait_on_owner(led, seen, follower, left).await })
                    },
                )
                .await
            })
        })
        .collect();
    if waits.is_empty() {
        glommio::timer::sleep(left).await;
        return;
    }
    let _ = select(select_all(waits), Box::pin(glommio::timer::sleep(left))).await;
}

async fn wait_on_owner(led: Led, seen: i64, follower: bool, left: Duration) {
    let log = &led.partition.log;
    let now = if follower {
        log.log_end().0
    } else {
        log.high_watermark().0
    };
    if now != seen {
        return;
    }
    // Dropped with the timeout: a partition deleted meanwhile wakes it too.
    let arrival = led.partition.next_arrival();
    let _ = select(arrival, Box::pin(glommio::timer::sleep(left))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[8..12].copy_from_slice(&((len - 12) as i32).to_be_bytes());
        b
    }

    fn read(batches: &[usize]) -> PartitionRead {
        let bytes: Vec<u8> = batches.iter().flat_map(|&l| batch(l)).collect();
        PartitionRead {
            bytes: bytes.len(),
            records: vec![Bytes::from(bytes)],
            ..PartitionRead::default()
        }
    }

    #[test]
    fn the_response_budget_keeps_whole_batches_and_the_first_batch_always() {
        // The first partition's first batch (100) exceeds the budget (60): kept alone.
        let fitted = fit_response(vec![read(&[100, 50]), read(&[30])], 60);
        assert_eq!(fitted[0].bytes, 100);
        assert_eq!(fitted[1].bytes, 0);
        // Whole batches up to the budget, across partitions.
        let fitted = fit_response(vec![read(&[40, 40, 40]), read(&[30, 30])], 110);
        assert_eq!(fitted[0].bytes, 80);
        assert_eq!(fitted[1].bytes, 30);
        assert_eq!(fitted[1].records[0].len(), 30);
        // Partitions without data do not count as the first.
        let fitted = fit_response(vec![PartitionRead::default(), read(&[70])], 10);
        assert_eq!(fitted[1].bytes, 70);
    }
}
