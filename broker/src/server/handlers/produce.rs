//! Produce v3-13: validate each partition's batches, append them on the
//! partition's shard, and answer once they are buffered (acks=1), durable
//! (acks=all: fdatasync'd, on a single node), or not at all (acks=0).

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use storage::batch::{BatchHeader, ValidBatch};
use storage::{BatchError, StorageError};

use tracing::Instrument;

use super::routing::{on_led_partition, route_by_id, route_by_name, Code, Led};
use super::{HandlerError, Outcome};
use crate::kafka::bounds::check_produce;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::server::replica;
use crate::server::shard::Shard;

/// Produce versions advertised: v3-13 are served; v0-2 are advertised for
/// older librdkafka's sake and answered with UNSUPPORTED_VERSION (see
/// `kafka::produce_legacy`).
pub const VERSIONS: (i16, i16) = (0, 13);

/// One partition's answer.
#[derive(Debug, Clone, Copy)]
struct Appended {
    error: Code,
    base_offset: i64,
    log_start: i64,
}

impl Appended {
    fn failed(error: Code) -> Appended {
        Appended {
            error,
            base_offset: -1,
            log_start: -1,
        }
    }
}

/// Answers a Produce request (`None` for acks=0: Kafka sends no response).
pub async fn handle(shard: &Rc<Shard>, request: &Request) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    if version < 3 {
        let answer = crate::kafka::produce_legacy::answer(
            version,
            request.header.correlation_id,
            &request.body,
        )?;
        return Ok(answer.map_or(Outcome::NoResponse, Outcome::Respond));
    }
    let started = std::time::Instant::now();
    let decoded: ProduceRequest = checked(request, check_produce)?;
    let acks = decoded.acks;
    let timeout = std::time::Duration::from_millis(decoded.timeout_ms.clamp(0, 300_000) as u64);
    let refuse_all = if !matches!(acks, -1..=1) {
        Some(ResponseError::InvalidRequiredAcks.code())
    } else if decoded.transactional_id.is_some() {
        // Transactions are not served yet (InitProducerId refuses a
        // transactional id).
        Some(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else {
        None
    };
    // One span per request (debug level: free unless enabled), with a
    // child per partition on the owning shard: append, the leader's
    // fdatasync, the wait for the ISR (docs/operations.md, "Traces").
    let acks_tag = match acks {
        0 => "0",
        1 => "1",
        _ => "all",
    };
    let span = tracing::debug_span!(
        "produce",
        acks = acks_tag,
        correlation_id = request.header.correlation_id,
        partitions = decoded
            .topic_data
            .iter()
            .map(|t| t.partition_data.len())
            .sum::<usize>(),
    );
    // Every partition's append runs at once, each on its own shard.
    let mut pending = Vec::new();
    for topic in &decoded.topic_data {
        for data in &topic.partition_data {
            let route = if version >= 13 {
                route_by_id(
                    shard,
                    control::TopicId(*topic.topic_id.as_bytes()),
                    data.index,
                )
            } else {
                route_by_name(shard, topic.name.as_str(), data.index)
            };
            let records = data.records.clone().unwrap_or_default();
            let shard = shard.clone();
            let route = match refuse_all {
                Some(code) => Err(code),
                None => route,
            };
            let parent = span.clone();
            let topic_name = topic.name.to_string();
            let index = data.index;
            pending.push(async move {
                on_led_partition(&shard, route, Appended::failed, move |owner, led| {
                    let span = tracing::debug_span!(
                        parent: &parent,
                        "partition",
                        topic = %topic_name,
                        partition = index,
                        acks = acks_tag
                    );
                    Box::pin(
                        async move { append_on_owner(&owner, led, records, acks, timeout).await }
                            .instrument(span),
                    )
                })
                .await
            });
        }
    }
    let results = futures::future::join_all(pending)
        .instrument(span.clone())
        .await;
    shard.metrics.produce(acks, started.elapsed());
    if results.iter().any(|r| r.error != 0) {
        shard.metrics.request_error(request.header.request_api_key);
    }
    let mut results = results.into_iter();
    if acks == 0 {
        return Ok(Outcome::NoResponse);
    }
    let responses = decoded
        .topic_data
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_data
                .iter()
                .map(|data| {
                    let result = results.next().expect("one result per partition");
                    let mut entry = PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_error_code(result.error)
                        .with_base_offset(result.base_offset)
                        .with_log_append_time_ms(-1);
                    if version >= 5 {
                        entry = entry.with_log_start_offset(result.log_start);
                    }
                    if version >= 8 && result.error != 0 {
                        entry = entry.with_error_message(Some(StrBytes::from_string(
                            error_text(result.error).to_string(),
                        )));
                    }
                    entry
                })
                .collect();
            let mut entry = TopicProduceResponse::default().with_partition_responses(partitions);
            if version >= 13 {
                entry = entry.with_topic_id(topic.topic_id);
            } else {
                entry = entry.with_name(topic.name.clone());
            }
            entry
        })
        .collect();
    let answer = ProduceResponse::default().with_responses(responses);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// Appends `records` (whole v2 batches) to one partition as a Produce
/// with `acks` would (the HTTP API's way in): the error code and the base
/// offset.
pub async fn produce_to(
    shard: &Rc<Shard>,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
    timeout: std::time::Duration,
) -> (Code, i64) {
    let started = std::time::Instant::now();
    let route = route_by_name(shard, topic, partition);
    let result = on_led_partition(shard, route, Appended::failed, move |owner, led| {
        Box::pin(async move { append_on_owner(&owner, led, records, acks, timeout).await })
    })
    .await;
    shard.metrics.produce(acks, started.elapsed());
    (result.error, result.base_offset)
}

/// A Kafka error code's text, for answers that carry one.
pub fn error_text(code: Code) -> &'static str {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::CorruptMessage) => {
            "a batch failed validation (magic, length, CRC or record count)"
        }
        Some(ResponseError::MessageTooLarge) => "a batch exceeds max.message.bytes",
        Some(ResponseError::KafkaStorageError) => "the partition's log failed",
        Some(ResponseError::UnknownTopicOrPartition) => "no such topic or partition",
        Some(ResponseError::NotLeaderOrFollower) => "this broker does not lead the partition",
        Some(ResponseError::NotEnoughReplicas) => "fewer in-sync replicas than min.insync.replicas",
        Some(ResponseError::NotEnoughReplicasAfterAppend) => {
            "the in-sync replicas fell below min.insync.replicas after the append"
        }
        Some(ResponseError::RequestTimedOut) => "the in-sync replicas did not confirm in time",
        Some(ResponseError::InvalidRequiredAcks) => "acks must be 0, 1 or all",
        Some(ResponseError::OutOfOrderSequenceNumber) => {
            "the batch's sequence does not follow the producer's last one"
        }
        Some(ResponseError::InvalidProducerEpoch) => {
            "the producer's epoch is older than its current one (a newer instance fenced it)"
        }
        _ => "refused",
    }
}

/// Appends on the owning shard; acks=all waits for the fdatasync (a
/// single replica) or for the high watermark to pass the records (a
/// replicated partition). Runs as a task of that shard, so a producer
/// disconnecting cannot cancel it half-way.
async fn append_on_owner(
    shard: &Shard,
    led: Led,
    records: Bytes,
    acks: i16,
    timeout: std::time::Duration,
) -> Appended {
    // Only the group coordinator writes its records there.
    if led.topic.name == crate::groups::OFFSETS_TOPIC {
        return Appended::failed(ResponseError::InvalidTopicException.code());
    }
    let replicated = led
        .topic
        .partitions
        .get(led.index as usize)
        .is_some_and(|p| p.replicas.len() > 1);
    if replicated {
        return append_replicated(led, records, acks, timeout).await;
    }
    // acks=all needs min.insync.replicas in the ISR (checked before
    // appending, as Kafka does, so nothing is written for a refusal).
    let isr = led
        .topic
        .partitions
        .get(led.index as usize)
        .map_or(0, |p| p.isr.len());
    if acks == -1 && isr < led.topic.config.min_insync_replicas as usize {
        return Appended::failed(ResponseError::NotEnoughReplicas.code());
    }
    let limit = usize::try_from(led.topic.config.max_message_bytes).unwrap_or(0);
    let batches = match split_batches(&records, limit) {
        Ok(batches) => batches,
        Err(code) => return Appended::failed(code),
    };
    let log = led.partition.log.clone();
    let mut first = None;
    let mut next = None;
    for batch in batches {
        match log
            .append_valid(batch, storage::LeaderEpoch(led.epoch.0))
            .await
        {
            Ok(info) => {
                first.get_or_insert(info.base_offset);
                next = Some(info.last_offset.plus(1));
            }
            Err(e) => return Appended::failed(storage_error_code(&e)),
        }
    }
    let (Some(first), Some(next)) = (first, next) else {
        return Appended::failed(ResponseError::CorruptMessage.code());
    };
    tracing::debug!(base = first.0, next = next.0, "appended");
    // Data becomes visible (the high watermark moves) once durable; the
    // flush wakes the fetchers waiting for it.
    let partition = led.partition.clone();
    let delay = std::time::Duration::from_millis(shard.config.test_flush_delay_ms);
    let flushed = async move {
        if !delay.is_zero() {
            glommio::timer::sleep(delay).await;
        }
        let result = partition.log.wait_flushed(next).await;
        partition.notify_arrival();
        result
    };
    if acks == -1 {
        if let Err(e) = flushed.instrument(tracing::debug_span!("fdatasync")).await {
            return Appended::failed(storage_error_code(&e));
        }
    } else {
        glommio::spawn_local(async move {
            if let Err(e) = flushed.await {
                tracing::error!(error = %e, "flushing a partition failed");
            }
        })
        .detach();
    }
    Appended {
        error: 0,
        base_offset: first.0,
        log_start: log.log_start().0,
    }
}

/// Appends to a partition with followers: in the leader epoch this broker
/// leads in; acks=all first needs min.insync.replicas in the ISR, then
/// waits for the high watermark (every ISR member holds the records).
async fn append_replicated(
    led: Led,
    records: Bytes,
    acks: i16,
    timeout: std::time::Duration,
) -> Appended {
    let partition = led.partition.clone();
    let Some(epoch) = partition.role.borrow().leader_epoch() else {
        return Appended::failed(ResponseError::NotLeaderOrFollower.code());
    };
    if epoch.0 != led.epoch.0 {
        return Appended::failed(ResponseError::NotLeaderOrFollower.code());
    }
    let min_insync = led.topic.config.min_insync_replicas as usize;
    if acks == -1 {
        if let Err(code) = replica::check_acks_all(&partition, min_insync) {
            return Appended::failed(code);
        }
    }
    let limit = usize::try_from(led.topic.config.max_message_bytes).unwrap_or(0);
    let batches = match split_batches(&records, limit) {
        Ok(batches) => batches,
        Err(code) => return Appended::failed(code),
    };
    let log = partition.log.clone();
    let (mut first, mut last) = (None, None);
    for batch in batches {
        match log.append_valid(batch, epoch).await {
            Ok(info) => {
                first.get_or_insert(info.base_offset);
                last = Some(info.last_offset);
            }
            Err(e) => return Appended::failed(storage_error_code(&e)),
        }
    }
    let (Some(first), Some(last)) = (first, last) else {
        return Appended::failed(ResponseError::CorruptMessage.code());
    };
    tracing::debug!(base = first.0, last = last.0, "appended");
    // Followers waiting at this leader fetch the new records now.
    partition.notify_arrival();
    // The leader's own copy counts once flushed (fsync.before.ack).
    let flushed = {
        let partition = partition.clone();
        async move {
            let result = partition.log.wait_flushed(last.plus(1)).await;
            replica::advance_high_watermark(&partition);
            result
        }
    };
    if acks != -1 {
        glommio::spawn_local(async move {
            if let Err(e) = flushed.await {
                tracing::error!(error = %e, "flushing a partition failed");
            }
        })
        .detach();
    } else {
        if led.topic.config.fsync_before_ack {
            if let Err(e) = flushed.instrument(tracing::debug_span!("fdatasync")).await {
                return Appended::failed(storage_error_code(&e));
            }
        } else {
            glommio::spawn_local(flushed).detach();
        }
        let acknowledged = replica::wait_acknowledged(&partition, epoch, last, min_insync, timeout)
            .instrument(tracing::debug_span!("isr_confirmation", min_insync))
            .await;
        if let Err(code) = acknowledged {
            return Appended::failed(code);
        }
    }
    Appended {
        error: 0,
        base_offset: first.0,
        log_start: log.log_start().0,
    }
}

/// Cuts a partition's records into whole, valid v2 batches, each within
/// `limit` (max.message.bytes); all or nothing. Each batch is copied once
/// into its own buffer (the log patches its offsets in place).
pub fn split_batches(records: &Bytes, limit: usize) -> Result<Vec<ValidBatch>, Code> {
    if records.is_empty() {
        return Err(ResponseError::CorruptMessage.code());
    }
    let mut batches = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let rest = &records[at..];
        let header = BatchHeader::parse(rest, usize::MAX).map_err(|e| batch_error_code(&e))?;
        if header.total_bytes > limit {
            return Err(ResponseError::MessageTooLarge.code());
        }
        if header.total_bytes > rest.len() {
            return Err(ResponseError::CorruptMessage.code());
        }
        let one = BytesMut::from(&rest[..header.total_bytes]);
        batches.push(ValidBatch::new(one, limit).map_err(|e| batch_error_code(&e))?);
        at += header.total_bytes;
    }
    Ok(batches)
}

fn batch_error_code(error: &BatchError) -> Code {
    match error {
        BatchError::TooLarge { .. } => ResponseError::MessageTooLarge.code(),
        BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat.code(),
        BatchError::InvalidProducerFields { .. } => ResponseError::InvalidRecord.code(),
        _ => ResponseError::CorruptMessage.code(),
    }
}

fn storage_error_code(error: &StorageError) -> Code {
    use storage::producers::SequenceError;
    match error {
        StorageError::InvalidBatch(e) => batch_error_code(e),
        StorageError::Sequence(SequenceError::InvalidEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch.code()
        }
        StorageError::Sequence(SequenceError::OutOfOrder { .. }) => {
            ResponseError::OutOfOrderSequenceNumber.code()
        }
        _ => ResponseError::KafkaStorageError.code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::batch::{build, RecordSpec};
    use storage::TimestampMs;

    fn batch(records: usize) -> BytesMut {
        let specs: Vec<RecordSpec> = (0..records)
            .map(|i| RecordSpec {
                key: Some(format!("k{i}").into_bytes()),
                value: Some(vec![7u8; 20]),
                timestamp_delta: 0,
            })
            .collect();
        build(TimestampMs(1_000), &specs)
    }

    #[test]
    fn records_split_into_whole_valid_batches_or_are_refused() {
        let mut two = batch(3);
        two.extend_from_slice(&batch(2));
        let two = two.freeze();
        let split = split_batches(&two, 1 << 20).unwrap();
        assert_eq!(split.len(), 2);
        assert_eq!(split[0].len() + split[1].len(), two.len());
        // A flipped byte in the second batch refuses both.
        let mut bad = two.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            split_batches(&Bytes::from(bad), 1 << 20).err(),
            Some(ResponseError::CorruptMessage.code())
        );
        // A cut tail, garbage and emptiness are corrupt; size over the limit is too large.
        assert_eq!(
            split_batches(&two.slice(..two.len() - 3), 1 << 20).err(),
            Some(ResponseError::CorruptMessage.code())
        );
        assert!(split_batches(&Bytes::from_static(&[1, 2, 3]), 1 << 20).is_err());
        assert!(split_batches(&Bytes::new(), 1 << 20).is_err());
        assert_eq!(
            split_batches(&two, split[0].len() - 1).err(),
            Some(ResponseError::MessageTooLarge.code())
        );
    }
}
