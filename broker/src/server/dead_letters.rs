//! Share groups' dead-letter topics (`share.dlq.topic`, beyond Kafka):
//! records a group archived (rejected by a member, or back after their
//! last allowed delivery) are appended there, key, value, timestamp and
//! headers as they were, with headers saying where from and why:
//! `dlq.source.topic`, `dlq.source.partition`, `dlq.source.offset`,
//! `dlq.delivery.count`, `dlq.reason` (`rejected` or `delivery_limit`).
//!
//! The share-partition sends them before it writes the archiving (see
//! `partition::share_states`): a failure leaves them to be archived, and
//! sent, again (at least once). The topic is made on first use if it does
//! not exist (the broker's default partitions and replication); a key
//! keeps its partition as a producer's would put it, a record without a
//! key goes to the source partition's number modulo the partitions.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use client::records::{ConsumedRecord, ProducerRecord};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use storage::batch::ValidBatch;
use storage::Offset;

use crate::cluster::peers::{PeerConnections, Purpose};
use crate::cluster::topics::{is_internal, NewTopic};
use crate::cluster::Cluster;
use crate::kafka::Code;
use crate::partition::append::Acks;
use crate::partition::served::ServedPartition;
use crate::partition::share_states::{DeadLetterSink, DeadLetters};
use crate::partition::table::BATCH_BYTES_CAP;
use crate::partition::Partitions;
use crate::runtime::sharded::LocalFuture;
use crate::share::partition::{Archived, ArchivedRecord};

/// How long an append waits for the dead-letter partition's replicas.
const APPEND_WAIT: Duration = Duration::from_secs(10);
/// Bytes read from the source log at a time.
const READ_BYTES: usize = 1 << 20;

/// Appends dead letters from one shard.
pub struct DeadLetterWriter {
    partitions: Weak<Partitions>,
    peers: Rc<PeerConnections>,
}

impl DeadLetterWriter {
    /// The writer of the shard of `partitions`.
    pub fn new(partitions: &Rc<Partitions>) -> DeadLetterWriter {
        DeadLetterWriter {
            partitions: Rc::downgrade(partitions),
            peers: Rc::default(),
        }
    }
}

impl DeadLetterSink for DeadLetterWriter {
    fn send(&self, letters: DeadLetters) -> LocalFuture<Result<u64, Code>> {
        let partitions = self.partitions.upgrade();
        let peers = self.peers.clone();
        Box::pin(async move {
            let unavailable = ResponseError::CoordinatorNotAvailable.code();
            send(&partitions.ok_or(unavailable)?, &peers, letters).await
        })
    }
}

async fn send(
    partitions: &Rc<Partitions>,
    peers: &PeerConnections,
    letters: DeadLetters,
) -> Result<u64, Code> {
    let cluster = &partitions.cluster;
    let source = cluster.topic_name(letters.source.topic).unwrap_or_default();
    if source == letters.topic || is_internal(&letters.topic) {
        tracing::warn!(group = %letters.group, topic = %letters.topic, "a share group's dead-letter topic is its own topic or an internal one: nothing appended");
        return Ok(0);
    }
    let read = read_records(&letters).await?;
    let (count, max_bytes) = match ensure_topic(cluster, &letters.topic).await {
        Ok(topic) => topic,
        Err(code) if permanent(code) => return Ok(left_out(&letters, read.len(), code)),
        Err(code) => return Err(code),
    };
    let mut by_partition: BTreeMap<i32, Vec<ProducerRecord>> = BTreeMap::new();
    for (archived, record) in read {
        let partition = match &record.key {
            Some(key) => client::partitioner::partition_for_key(key, count) as i32,
            None => letters.source.index as i32 % count as i32,
        };
        let letter = letter(&source, letters.source.index, archived, record);
        by_partition.entry(partition).or_default().push(letter);
    }
    let mut sent = 0;
    for (partition, records) in by_partition {
        for batch in batches(&records, max_bytes) {
            let Some((batch, records)) = batch else {
                left_out(&letters, 1, ResponseError::MessageTooLarge.code());
                continue;
            };
            match append(partitions, peers, (&letters.topic, partition), batch).await {
                Ok(()) => sent += records,
                Err(code) if permanent(code) => {
                    left_out(&letters, records as usize, code);
                }
                Err(code) => return Err(code),
            }
        }
    }
    Ok(sent)
}

/// Whether a failure to append a dead letter would fail again however
/// often tried (then the letter is left out, not retried for ever).
fn permanent(code: Code) -> bool {
    [
        ResponseError::MessageTooLarge,
        ResponseError::RecordListTooLarge,
        ResponseError::InvalidTopicException,
        ResponseError::TopicAuthorizationFailed,
        ResponseError::PolicyViolation,
        ResponseError::InvalidReplicationFactor,
        ResponseError::InvalidRecord,
        ResponseError::CorruptMessage,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Logs dead letters that cannot be appended; none counted as sent.
fn left_out(letters: &DeadLetters, records: usize, code: Code) -> u64 {
    tracing::error!(group = %letters.group, topic = %letters.topic, records, code, "dead letters that can never be appended are left out");
    0
}

/// The letters as batches within `max_bytes` each (encoded), with their
/// record counts; None for a letter too large alone.
fn batches(records: &[ProducerRecord], max_bytes: usize) -> Vec<Option<(Bytes, u64)>> {
    let encoded = client::records::encode_batch(records, Compression::None).ok();
    match encoded {
        Some(batch) if batch.len() <= max_bytes => vec![Some((batch, records.len() as u64))],
        _ if records.len() > 1 => {
            let (first, second) = records.split_at(records.len() / 2);
            let mut out = batches(first, max_bytes);
            out.extend(batches(second, max_bytes));
            out
        }
        _ => vec![None],
    }
}

/// A dead letter: the record as it was, and where from and why.
fn letter(
    source: &str,
    partition: u32,
    archived: ArchivedRecord,
    record: ConsumedRecord,
) -> ProducerRecord {
    let reason = match archived.why {
        Archived::Rejected => "rejected",
        Archived::DeliveryLimit => "delivery_limit",
    };
    let mut headers = record.headers;
    for (name, value) in [
        ("dlq.source.topic", source.to_string()),
        ("dlq.source.partition", partition.to_string()),
        ("dlq.source.offset", archived.offset.to_string()),
        ("dlq.delivery.count", archived.delivery_count.to_string()),
        ("dlq.reason", reason.to_string()),
    ] {
        headers.push((name.to_string(), Some(Bytes::from(value))));
    }
    ProducerRecord {
        key: record.key,
        value: record.value,
        timestamp: record.timestamp,
        headers,
    }
}

/// The archived records as the source log holds them (one gone to
/// retention meanwhile is left out).
async fn read_records(
    letters: &DeadLetters,
) -> Result<Vec<(ArchivedRecord, ConsumedRecord)>, Code> {
    let log = &letters.partition.log;
    let wanted: BTreeMap<i64, ArchivedRecord> =
        (letters.records.iter()).map(|a| (a.offset, *a)).collect();
    let mut left: BTreeSet<i64> = wanted.keys().copied().collect();
    let mut found = Vec::new();
    while let Some(&first) = left.first() {
        let bound = log.high_watermark();
        let read = match log.read(Offset(first), READ_BYTES, bound).await {
            Ok(read) => read,
            Err(storage::StorageError::OffsetOutOfRange { .. }) => {
                left.remove(&first);
                continue;
            }
            Err(_) => return Err(ResponseError::KafkaStorageError.code()),
        };
        let mut bytes = BytesMut::with_capacity(read.bytes);
        read.chunks.iter().for_each(|c| bytes.extend_from_slice(c));
        let index = letters.source.index as i32;
        let decoded = match client::records::decode_records(index, &bytes.freeze(), first) {
            Ok(decoded) => decoded,
            Err(e) => {
                // Nothing to send of a batch that does not decode: left
                // out (archived all the same), not retried for ever.
                tracing::error!(group = %letters.group, offset = first, error = %e, "a dead letter's batch does not decode");
                left.remove(&first);
                continue;
            }
        };
        let end = decoded.next_offset.unwrap_or(first + 1);
        for record in decoded.records {
            if left.remove(&record.offset) {
                found.push((wanted[&record.offset], record));
            }
        }
        // Offsets the read covered without a record (none to send).
        left.retain(|o| *o >= end);
    }
    Ok(found)
}

/// The dead-letter topic's partition count and largest batch, made
/// first if it does not exist.
async fn ensure_topic(cluster: &Cluster, topic: &str) -> Result<(u32, usize), Code> {
    let count = |cluster: &Cluster| {
        let view = cluster.view.borrow();
        let found = view.metadata.topic_by_name(topic).ok();
        let limit = |t: &control::Topic| t.config.max_message_bytes.max(1) as usize;
        found.map(|t| (t.partitions.len() as u32, limit(t).min(BATCH_BYTES_CAP)))
    };
    if let Some(count) = count(cluster) {
        return Ok(count);
    }
    let new = NewTopic {
        name: topic.to_string(),
        partitions: -1,
        replication_factor: -1,
        configs: Vec::new(),
    };
    match cluster.create_topic(new, false).await {
        Ok(_) => tracing::info!(%topic, "created a share group's dead-letter topic"),
        Err((code, _)) if code == ResponseError::TopicAlreadyExists.code() => {}
        Err((code, why)) => {
            tracing::warn!(%topic, code, %why, "cannot create a dead-letter topic");
            return Err(code);
        }
    }
    cluster.catch_up(|m| m.topic_by_name(topic).is_ok()).await;
    count(cluster).ok_or(ResponseError::UnknownTopicOrPartition.code())
}

/// Appends `batch` to `topic`'s `partition` at its leader, acks=all.
async fn append(
    partitions: &Rc<Partitions>,
    peers: &PeerConnections,
    (topic, partition): (&str, i32),
    batch: Bytes,
) -> Result<(), Code> {
    let cluster = &partitions.cluster;
    let leader = {
        let view = cluster.view.borrow();
        let found = view.metadata.topic_by_name(topic).ok();
        let found = found.and_then(|t| t.partitions.get(partition as usize));
        found.and_then(|p| p.leader)
    };
    let leader = leader.ok_or(ResponseError::LeaderNotAvailable.code())?;
    if leader == cluster.me {
        let valid = ValidBatch::new(BytesMut::from(&batch[..]), BATCH_BYTES_CAP)
            .map_err(|_| ResponseError::CorruptMessage.code())?;
        let route = cluster.route_by_name(topic, partition);
        let work = move |owner: Rc<Partitions>, led: ServedPartition| -> LocalFuture<_> {
            Box::pin(async move {
                let appended = led
                    .append(&owner, vec![valid], Acks::All, APPEND_WAIT)
                    .await;
                appended.map(drop)
            })
        };
        return partitions.on_led_partition(route, work).await;
    }
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(APPEND_WAIT.as_millis() as i32)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let answer = peers
        .call(cluster, (leader, Purpose::DeadLetters), &request, 9)
        .await?;
    let code = (answer.responses.first())
        .and_then(|t| t.partition_responses.first())
        .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
    match code {
        0 => Ok(()),
        code => Err(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(bytes: usize) -> ProducerRecord {
        ProducerRecord {
            key: None,
            value: Some(Bytes::from(vec![b'x'; bytes])),
            timestamp: 0,
            headers: Vec::new(),
        }
    }

    #[test]
    fn letters_are_cut_into_batches_within_the_limit_and_one_too_large_is_left_out() {
        let records = vec![record(400), record(400), record(400), record(400)];
        let one = batches(&records, 1 << 20);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].as_ref().unwrap().1, 4);
        let cut = batches(&records, 1_000);
        let counts: Vec<u64> = cut.iter().map(|b| b.as_ref().unwrap().1).collect();
        assert_eq!(counts.iter().sum::<u64>(), 4);
        assert!(
            cut.iter().flatten().all(|(b, _)| b.len() <= 1_000),
            "{counts:?}"
        );
        let too_large = batches(&[record(400), record(5_000)], 1_000);
        assert_eq!(too_large.iter().filter(|b| b.is_none()).count(), 1);
        assert!(permanent(ResponseError::MessageTooLarge.code()));
        assert!(
            !permanent(ResponseError::NotLeaderOrFollower.code()),
            "retried"
        );
    }
}
