//! Append and acknowledge: the one way records get into a partition this
//! broker leads. Produce, the HTTP API and the group coordinator all come
//! through [`ServedPartition::append`]; producers' records are first cut into whole,
//! valid batches ([`split_batches`]).
//!
//! The answer comes when the producer's `acks` asks: at once (0, 1; the
//! flush follows in the background), or for acks=all once the records are
//! durable on a single replica (fdatasync'd) or held by every in-sync
//! replica of a replicated partition (the high watermark passed them; the
//! leader's own copy counts once fdatasync'd if the topic says
//! `fsync.before.ack`).

use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::ResponseError;
use storage::batch::{BatchHeader, ValidBatch};
use storage::{BatchError, LeaderEpoch, Offset, StorageError};
use tracing::Instrument;

use super::leader::{advance_high_watermark, check_acks_all, wait_acknowledged};
use super::role::Role;
use super::served::ServedPartition;
use super::txn_verify::{self, TxnGuard};
use super::Partitions;
use crate::cluster::lease::lease_valid;
use crate::cluster::routing::PartitionKey;
use crate::cluster::topics::is_internal;
use crate::kafka::record_sets::{RecordSet, MEMORY_SHARE_MIN};
use crate::kafka::Code;

/// How long a produce waits for this broker's leader role to follow the
/// metadata that made it leader (see [`ServedPartition::wait_for_role`]).
const ROLE_LAG_MAX: Duration = Duration::from_secs(2);
/// How often it looks.
const ROLE_LAG_TICK: Duration = Duration::from_millis(2);

/// What a producer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Nothing (acks=0).
    None,
    /// The leader's append (acks=1).
    Leader,
    /// Every in-sync replica, at least min.insync.replicas (acks=all, -1).
    All,
}

impl Acks {
    /// The Kafka field's value, if valid.
    pub fn from_field(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// Records appended, not yet acknowledged: what their acknowledgement
/// waits for ([`ServedPartition::acknowledge`]).
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    /// Where they landed.
    pub appended: Appended,
    acks: Acks,
    epoch: LeaderEpoch,
    replicated: bool,
    min_insync: usize,
    /// What is left of the producer's timeout for the in-sync replicas.
    timeout: Duration,
}

impl Placed {
    /// Whether acknowledging waits for anything (acks=all).
    pub fn waits(&self) -> bool {
        self.acks == Acks::All
    }
}

/// Where appended records landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The first record's offset.
    pub base_offset: Offset,
    /// The last record's offset.
    pub last_offset: Offset,
    /// The log start after the append.
    pub log_start: Offset,
}

impl ServedPartition {
    /// Appends `batches` in this leadership and answers when `acks` asks
    /// (`timeout`: how long acks=all waits for the in-sync replicas).
    pub async fn append(
        &self,
        partitions: &Partitions,
        batches: Vec<ValidBatch>,
        acks: Acks,
        timeout: Duration,
    ) -> Result<Appended, Code> {
        self.append_guarded(partitions, batches, acks, timeout, None)
            .await
    }

    /// [`ServedPartition::append`], refused (INVALID_TXN_STATE) if `guard`
    /// no longer holds when the batches go in: a transactional batch
    /// verified with its coordinator must not open a transaction after a
    /// marker ended the one it was verified in.
    pub async fn append_guarded(
        &self,
        partitions: &Partitions,
        batches: Vec<ValidBatch>,
        acks: Acks,
        timeout: Duration,
        guard: Option<TxnGuard>,
    ) -> Result<Appended, Code> {
        let placed = self
            .place(partitions, batches, acks, timeout, guard)
            .await?;
        self.acknowledge(partitions, placed).await
    }

    /// The first half of an append: the batches get their offsets in this
    /// leadership (refused before anything is written when acks=all cannot
    /// be met). What acks asks is waited for by [`Self::acknowledge`].
    pub async fn place(
        &self,
        partitions: &Partitions,
        batches: Vec<ValidBatch>,
        acks: Acks,
        timeout: Duration,
        guard: Option<TxnGuard>,
    ) -> Result<Placed, Code> {
        let replicated = self.replicated();
        let waited = self
            .wait_for_role(partitions, replicated, timeout.min(ROLE_LAG_MAX))
            .await;
        let timeout = timeout.saturating_sub(waited);
        let epoch = self.epoch_to_stamp(replicated)?;
        let min_insync = self.topic.config.min_insync_replicas as usize;
        if acks == Acks::All {
            // Checked before appending, as Kafka does: a refusal writes nothing.
            self.check_enough_in_sync(replicated, min_insync)?;
        }
        let appended = self
            .append_batches(batches, epoch, replicated, guard)
            .await?;
        tracing::debug!(
            base = appended.base_offset.0,
            last = appended.last_offset.0,
            "appended"
        );
        if replicated {
            // Followers waiting at this leader fetch the new records now.
            self.partition.notify_arrival();
        }
        Ok(Placed {
            appended,
            acks,
            epoch,
            replicated,
            min_insync,
            timeout,
        })
    }

    /// The second half of an append: answers once the placed records are
    /// as durable as their acks ask (the flush runs either way).
    pub async fn acknowledge(
        &self,
        partitions: &Partitions,
        placed: Placed,
    ) -> Result<Appended, Code> {
        let Placed {
            appended,
            acks,
            epoch,
            replicated,
            min_insync,
            timeout,
        } = placed;
        let delay = Duration::from_millis(partitions.cluster.config.test_flush_delay_ms);
        let durable = self.durable(appended.last_offset.plus(1), replicated, delay);
        let own_copy_counts = !replicated || self.topic.config.fsync_before_ack;
        if acks == Acks::All && own_copy_counts {
            durable
                .instrument(tracing::debug_span!("fdatasync"))
                .await
                .map_err(|e| storage_error_code(&e))?;
        } else {
            glommio::spawn_local(async move {
                if let Err(e) = durable.await {
                    tracing::error!(error = %e, "flushing a partition failed");
                }
            })
            .detach();
        }
        if acks == Acks::All && replicated {
            let last = appended.last_offset;
            wait_acknowledged(&self.partition, epoch, last, min_insync, timeout)
                .instrument(tracing::debug_span!("isr_confirmation", min_insync))
                .await?;
        }
        Ok(appended)
    }

    /// Whether the partition has followers (the high watermark then
    /// follows the in-sync replicas, not the leader's flushes).
    fn replicated(&self) -> bool {
        self.topic
            .partitions
            .get(self.index as usize)
            .is_some_and(|p| p.replicas.len() > 1)
    }

    /// Waits (up to `max`) while the metadata names this broker leader in
    /// this epoch but its role is still an older one: the role follows the
    /// metadata by a moment, longer while a follower's write it waits for
    /// is flushed. Refusing in that moment (NOT_LEADER) while the client's
    /// next pipelined batch lands once the role has come reads to
    /// librdkafka as skipped sequence numbers: it bumps its epoch and
    /// resends its unacknowledged batches under the new one, those the old
    /// leader's followers already hold among them (stored twice).
    /// Returns how long it waited (taken from the request's timeout).
    async fn wait_for_role(
        &self,
        partitions: &Partitions,
        replicated: bool,
        max: Duration,
    ) -> Duration {
        let started = std::time::Instant::now();
        if !replicated {
            return Duration::ZERO;
        }
        // A role of this epoch or later (leader, or follower of a newer
        // leader) ends the wait; none yet, or an older one, does not,
        // while the metadata still names this broker leader in this epoch.
        let key = PartitionKey {
            topic: self.topic.id,
            index: self.index,
        };
        let lagging = || {
            let behind = match &*self.partition.role.borrow() {
                Role::Leader(leading) => leading.state.epoch() < self.epoch,
                Role::Follower { epoch, .. } => *epoch < self.epoch,
                Role::None => true,
            };
            behind
                && partitions
                    .served(key, true)
                    .is_ok_and(|(_, e)| e == self.epoch)
        };
        if lagging() {
            crate::runtime::wait::until(ROLE_LAG_TICK, max, || !lagging()).await;
        }
        started.elapsed()
    }

    /// The epoch to stamp: a replicated partition's leader role must be in
    /// the metadata's epoch (it may lag a metadata change by a moment).
    fn epoch_to_stamp(&self, replicated: bool) -> Result<LeaderEpoch, Code> {
        if !replicated {
            return Ok(self.epoch);
        }
        match self.partition.role.borrow().leader_epoch() {
            Some(epoch) if epoch == self.epoch => Ok(epoch),
            _ => Err(ResponseError::NotLeaderOrFollower.code()),
        }
    }

    /// acks=all needs min.insync.replicas in the ISR: the leader's own
    /// view of it when replicated, the metadata's when alone.
    fn check_enough_in_sync(&self, replicated: bool, min_insync: usize) -> Result<(), Code> {
        if replicated {
            return check_acks_all(&self.partition, min_insync);
        }
        let isr = self
            .topic
            .partitions
            .get(self.index as usize)
            .map_or(0, |p| p.isr.len());
        if isr < min_insync {
            return Err(ResponseError::NotEnoughReplicas.code());
        }
        Ok(())
    }

    /// Appends each batch in `epoch`, as long as this broker still leads
    /// in it (and its lease holds): a batch can wait for room in the log
    /// (back-pressure), and a leadership lost meanwhile (the log perhaps
    /// truncated to the new leader's, the client's retry gone there) must
    /// write nothing more. A record set of several batches fenced after
    /// its first is answered NOT_LEADER with the first ones written, as
    /// any later batch's error leaves them (clients send one batch per
    /// partition in a request).
    async fn append_batches(
        &self,
        batches: Vec<ValidBatch>,
        epoch: LeaderEpoch,
        replicated: bool,
        guard: Option<TxnGuard>,
    ) -> Result<Appended, Code> {
        let log = &self.partition.log;
        let mut span = None;
        for (i, batch) in batches.into_iter().enumerate() {
            // The guard is for the first batch: the ones after it follow it
            // into the transaction it opened or joined.
            let guard = guard.filter(|_| i == 0);
            let guard_holds = || guard.is_none_or(|g| g.holds(log));
            let still_leads =
                || lease_valid() && self.epoch_to_stamp(replicated) == Ok(epoch) && guard_holds();
            let info = log
                .append_valid_while(batch, epoch, still_leads)
                .await
                .map_err(|e| match e {
                    StorageError::Fenced if !guard_holds() => ResponseError::InvalidTxnState.code(),
                    e => storage_error_code(&e),
                })?;
            let base = span.map_or(info.base_offset, |(base, _)| base);
            span = Some((base, info.last_offset));
        }
        let (base_offset, last_offset) = span.ok_or(ResponseError::CorruptMessage.code())?;
        Ok(Appended {
            base_offset,
            last_offset,
            log_start: log.log_start(),
        })
    }

    /// Resolves once the log is durable up to `next`, having moved the
    /// high watermark (a replicated leader's own copy now counts) or woken
    /// the fetchers (a single replica's high watermark follows its flushes).
    fn durable(
        &self,
        next: Offset,
        replicated: bool,
        test_delay: Duration,
    ) -> impl std::future::Future<Output = Result<(), StorageError>> + 'static {
        let partition = self.partition.clone();
        async move {
            if !test_delay.is_zero() {
                glommio::timer::sleep(test_delay).await;
            }
            let result = partition.log.wait_flushed(next).await;
            if replicated {
                advance_high_watermark(&partition);
            } else {
                partition.notify_arrival();
            }
            result
        }
    }
}

impl Partitions {
    /// Appends a producer's records (whole v2 batches) to a partition this
    /// broker leads, as Produce and the HTTP API do: cut into batches
    /// within the topic's max.message.bytes, all or nothing. Only the
    /// coordinators write to their internal topics. A transactional batch
    /// (`transactional` names its producer) is first verified with its
    /// transaction coordinator, or added to its transaction there.
    pub async fn produce(
        &self,
        led: ServedPartition,
        records: RecordSet,
        acks: Acks,
        timeout: Duration,
        transactional: Option<txn_verify::TxnWriter<'_>>,
    ) -> Result<Appended, Code> {
        let placed = self
            .produce_placed(&led, records, acks, timeout, transactional)
            .await?;
        led.acknowledge(self, placed).await
    }

    /// [`Partitions::produce`] up to the records' placing: what their
    /// acknowledgement waits for is left to the caller.
    pub async fn produce_placed(
        &self,
        led: &ServedPartition,
        records: RecordSet,
        acks: Acks,
        timeout: Duration,
        transactional: Option<txn_verify::TxnWriter<'_>>,
    ) -> Result<Placed, Code> {
        if is_internal(&led.topic.name) {
            return Err(ResponseError::InvalidTopicException.code());
        }
        let limit = usize::try_from(led.topic.config.max_message_bytes).unwrap_or(0);
        let split = split_batches(records, limit)?;
        self.metrics
            .produced_bytes(split.in_place_bytes, split.copied_bytes);
        let verifier = self.txn_verifier.borrow().clone();
        let guard = txn_verify::verify(led, &split.batches, transactional, verifier).await?;
        led.place(self, split.batches, acks, timeout, guard).await
    }
}

/// The batches of a record set, and how their bytes got there.
#[derive(Debug)]
pub struct Split {
    /// Whole, valid batches, in order.
    pub batches: Vec<ValidBatch>,
    /// Bytes kept in the memory their request was read into.
    pub in_place_bytes: usize,
    /// Bytes copied on the way (out of a shared or small request, or out
    /// of memory far larger than the batch).
    pub copied_bytes: usize,
}

/// Cuts a partition's records into whole, valid v2 batches, each within
/// `limit` (max.message.bytes); all or nothing. The batches are cut from
/// the records' own memory (the log patches their offsets in place),
/// except one small beside that memory, which is copied.
pub fn split_batches(set: RecordSet, limit: usize) -> Result<Split, Code> {
    let RecordSet {
        mut records,
        memory,
        copied,
        frame,
    } = set;
    if records.is_empty() {
        return Err(ResponseError::CorruptMessage.code());
    }
    let mut split = Split {
        batches: Vec::new(),
        in_place_bytes: 0,
        copied_bytes: 0,
    };
    while !records.is_empty() {
        let header = BatchHeader::parse(&records, usize::MAX).map_err(|e| batch_error_code(&e))?;
        if header.total_bytes > limit {
            return Err(ResponseError::MessageTooLarge.code());
        }
        if header.total_bytes > records.len() {
            return Err(ResponseError::CorruptMessage.code());
        }
        let mut one = records.split_to(header.total_bytes);
        let mut kept_alive = frame;
        if one.len() * MEMORY_SHARE_MIN < memory {
            one = BytesMut::from(&one[..]);
            kept_alive = None;
            split.copied_bytes += one.len();
        } else if copied {
            split.copied_bytes += one.len();
        } else {
            split.in_place_bytes += one.len();
        }
        let mut batch = ValidBatch::new(one, limit).map_err(|e| batch_error_code(&e))?;
        if let Some(frame) = kept_alive {
            batch = batch.in_frame(frame);
        }
        client_may_write(batch.header())?;
        split.batches.push(batch);
    }
    Ok(split)
}

/// Only transaction coordinators write markers (control batches), with
/// WriteTxnMarkers; a producer's are refused.
fn client_may_write(header: &BatchHeader) -> Result<(), Code> {
    if header.is_control() {
        return Err(ResponseError::InvalidRecord.code());
    }
    Ok(())
}

fn batch_error_code(error: &BatchError) -> Code {
    match error {
        BatchError::TooLarge { .. } => ResponseError::MessageTooLarge.code(),
        BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat.code(),
        BatchError::InvalidProducerFields { .. } => ResponseError::InvalidRecord.code(),
        _ => ResponseError::CorruptMessage.code(),
    }
}

/// The Kafka error code for a refused append.
pub fn storage_error_code(error: &StorageError) -> Code {
    use storage::producers::SequenceError;
    use storage::transactions::TxnError;
    match error {
        StorageError::InvalidBatch(e) => batch_error_code(e),
        StorageError::Fenced => ResponseError::NotLeaderOrFollower.code(),
        StorageError::Sequence(SequenceError::InvalidEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch.code()
        }
        StorageError::Sequence(SequenceError::OutOfOrder { .. }) => {
            ResponseError::OutOfOrderSequenceNumber.code()
        }
        StorageError::Transaction(TxnError::OutsideOpenTransaction { .. }) => {
            ResponseError::InvalidTxnState.code()
        }
        StorageError::Transaction(TxnError::CoordinatorFenced { .. }) => {
            ResponseError::TransactionCoordinatorFenced.code()
        }
        StorageError::Transaction(TxnError::MarkerOfOlderEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch.code()
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

    /// Records read into memory of `memory` bytes, as Produce hands them over.
    fn set(records: &BytesMut, memory: usize) -> RecordSet {
        RecordSet {
            records: records.clone(),
            memory,
            copied: false,
            frame: Some(storage::FrameMemory::new(memory)),
        }
    }

    #[test]
    fn records_split_into_whole_valid_batches_or_are_refused() {
        let mut two = batch(3);
        two.extend_from_slice(&batch(2));
        let split = split_batches(set(&two, two.len()), 1 << 20).unwrap();
        assert_eq!(split.batches.len(), 2);
        let first_len = split.batches[0].len();
        assert_eq!(first_len + split.batches[1].len(), two.len());
        // A flipped byte in the second batch refuses both.
        let mut bad = two.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            split_batches(set(&bad, bad.len()), 1 << 20).err(),
            Some(ResponseError::CorruptMessage.code())
        );
        // A cut tail, garbage and emptiness are corrupt; size over the limit is too large.
        let cut_tail = BytesMut::from(&two[..two.len() - 3]);
        assert_eq!(
            split_batches(set(&cut_tail, cut_tail.len()), 1 << 20).err(),
            Some(ResponseError::CorruptMessage.code())
        );
        let garbage = BytesMut::from(&[1u8, 2, 3][..]);
        assert!(split_batches(set(&garbage, 3), 1 << 20).is_err());
        assert!(split_batches(RecordSet::default(), 1 << 20).is_err());
        assert_eq!(
            split_batches(set(&two, two.len()), first_len - 1).err(),
            Some(ResponseError::MessageTooLarge.code())
        );
    }

    #[test]
    fn clients_may_not_write_markers() {
        use storage::markers::{Marker, MarkerKind};
        let marker = Marker {
            kind: MarkerKind::Commit,
            coordinator_epoch: 0,
        };
        let control = storage::markers::build(5, 0, marker, TimestampMs(0));
        let mut both = batch(1);
        both.extend_from_slice(&control);
        assert_eq!(
            split_batches(set(&both, both.len()), 1 << 20).err(),
            Some(ResponseError::InvalidRecord.code()),
            "all or nothing"
        );
    }

    #[test]
    fn batches_are_cut_from_their_memory_unless_small_beside_it() {
        let mut two = batch(3);
        two.extend_from_slice(&batch(2));
        let records = set(&two, two.len());
        let start = records.records.as_ptr();
        let split = split_batches(records, 1 << 20).unwrap();
        let first_len = split.batches[0].len();
        assert_eq!(split.batches[0].bytes().as_ptr(), start, "cut, not copied");
        assert_eq!(
            split.batches[1].bytes().as_ptr(),
            start.wrapping_add(first_len)
        );
        assert_eq!((split.in_place_bytes, split.copied_bytes), (two.len(), 0));
        assert!(
            split.batches.iter().all(|batch| batch.frame().is_some()),
            "the cache is told the memory they keep alive"
        );

        // In memory more than three times a batch's size, it is copied out:
        // cached, it would keep all of that memory alive.
        let memory = 3 * first_len + 1;
        let records = set(&two, memory);
        let start = records.records.as_ptr() as usize;
        let split = split_batches(records, 1 << 20).unwrap();
        let inside = |batch: &ValidBatch| {
            (start..start + two.len()).contains(&(batch.bytes().as_ptr() as usize))
        };
        assert!(split.batches.iter().all(|batch| !inside(batch)));
        assert!(split.batches.iter().all(|batch| batch.frame().is_none()));
        assert_eq!((split.in_place_bytes, split.copied_bytes), (0, two.len()));
        let at_a_third = set(&two, 3 * first_len);
        let split = split_batches(at_a_third, 1 << 20).unwrap();
        assert_eq!(split.in_place_bytes, first_len, "the first kept at a third");

        // Records copied out of their request count as copied.
        let copied = RecordSet {
            copied: true,
            frame: None,
            ..set(&two, two.len())
        };
        let split = split_batches(copied, 1 << 20).unwrap();
        assert_eq!((split.in_place_bytes, split.copied_bytes), (0, two.len()));
    }
}
