//! A partition's producer state (idempotent producers, KIP-98): for each
//! producer id, its epoch, its last five batches' sequences and offsets,
//! and its last timestamp. A leader checks every idempotent batch against
//! it before the batch gets offsets: a retried batch (one of the five) is
//! not appended again but answered with its original offsets; a batch out
//! of sequence, or from an older epoch, is refused. Followers record the
//! batches they copy without checking, so a new leader knows what the old
//! one had accepted.
//!
//! Sans I/O: the log feeds it batches and persists its snapshots
//! (`<offset>.snapshot` beside the segments: the state as of that offset).

use std::collections::{BTreeMap, VecDeque};

use crate::transactions::{Transactions, TxnError};
use crate::types::{Offset, TimestampMs};

/// Batches remembered per producer (Kafka's, and the most a client keeps
/// in flight per partition with idempotence on).
pub const BATCHES_KEPT: usize = 5;
/// Producer snapshots a log keeps (writing one removes the oldest).
pub const PRODUCER_SNAPSHOTS_KEPT: usize = 3;
/// "No producer" in a batch header.
pub const NO_PRODUCER_ID: i64 = -1;

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    /// Sequence of its first record.
    pub first_seq: i32,
    /// Sequence of its last record.
    pub last_seq: i32,
    /// Offset of its first record.
    pub first_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
}

/// What is known of one producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// Its current epoch.
    pub epoch: i16,
    /// Its last batches, oldest first (at most [`BATCHES_KEPT`]).
    pub batches: VecDeque<BatchMeta>,
    /// The largest timestamp of its last batch (the client's clock, as
    /// DescribeProducers reports it).
    pub last_timestamp: TimestampMs,
    /// When this broker last appended one of its batches (or rebuilt its
    /// state at open), on the broker's clock: what expiration counts from,
    /// so a client's clock running fast or slow neither keeps its state
    /// forever nor drops it while it still retries.
    pub last_seen: TimestampMs,
    /// The epoch of the transaction coordinator that wrote its last marker
    /// (-1: none): a marker from an older coordinator is refused.
    pub coordinator_epoch: i32,
    /// The offset of its last marker (-1: none), which keeps it known
    /// while the marker is in the log.
    pub last_marker: Offset,
}

/// The sequence of a batch that has none: a coordinator's write for a
/// producer (its epoch is checked, its sequence is not).
pub const NO_SEQUENCE: i32 = -1;

/// Where one producer's transactions on a partition stand: what a
/// leader compares before and after asking the transaction coordinator
/// whether a transactional batch may open a transaction here (a marker or
/// a new epoch in between means the answer is stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnStatus {
    /// Its epoch, if known here.
    pub epoch: Option<i16>,
    /// Whether a transaction of its is open here.
    pub open: bool,
    /// Its last marker's offset (-1: none).
    pub last_marker: Offset,
}

impl ProducerEntry {
    fn new(epoch: i16, timestamp: TimestampMs, now: TimestampMs) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_timestamp: timestamp,
            last_seen: now,
            coordinator_epoch: -1,
            last_marker: Offset(-1),
        }
    }

    /// Whether a batch or marker of it is at or past `offset`.
    fn in_log_from(&self, offset: Offset) -> bool {
        let last_batch = self.batches.back().map_or(Offset(-1), |b| b.last_offset);
        last_batch.max(self.last_marker) >= offset
    }

    /// The sequence of its last record.
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }
}

/// An idempotent batch, as its header describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    /// The producer.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// Sequence of the first record.
    pub first_seq: i32,
    /// Last offset minus first offset: the last record's sequence is the
    /// first's plus this (as Kafka's lastSequence).
    pub offset_delta: i32,
}

impl ProducerBatch {
    /// Sequence of its last record (sequences wrap at i32::MAX to 0).
    pub fn last_seq(&self) -> i32 {
        add_seq(self.first_seq, self.offset_delta)
    }
}

/// `seq + delta`, wrapping at i32::MAX to 0 as Kafka's sequences do.
pub fn add_seq(seq: i32, delta: i32) -> i32 {
    ((seq as i64 + delta as i64) % (i32::MAX as i64 + 1)) as i32
}

/// What to do with an idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Append it.
    Append,
    /// A retry of a batch already in the log: answer with its offsets.
    Duplicate(BatchMeta),
}

/// Why an idempotent batch is refused (Kafka's error codes in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// From an epoch older than the producer's current one
    /// (INVALID_PRODUCER_EPOCH, 47): a newer instance fenced it.
    #[error("producer {producer_id} epoch {given} is older than its current epoch {current}")]
    InvalidEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        given: i16,
        /// The state's.
        current: i16,
    },
    /// Not the next sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, 45).
    #[error("producer {producer_id} sent sequence {given}, expected {expected}")]
    OutOfOrder {
        /// The producer.
        producer_id: i64,
        /// The batch's first sequence.
        given: i32,
        /// What the state expects.
        expected: i32,
    },
}

/// Every producer of a partition, and their transactions there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: BTreeMap<i64, ProducerEntry>,
    transactions: Transactions,
}

impl ProducerState {
    /// Checks a batch a leader is about to append.
    pub fn check(&self, batch: &ProducerBatch) -> Result<Check, SequenceError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // Never seen, or its state expired (retention, expiration):
            // accepted from any sequence, as Kafka does.
            return Ok(Check::Append);
        };
        if batch.epoch < entry.epoch {
            return Err(SequenceError::InvalidEpoch {
                producer_id: batch.producer_id,
                given: batch.epoch,
                current: entry.epoch,
            });
        }
        if batch.first_seq == NO_SEQUENCE {
            // A coordinator's write (only those pass validation without
            // a sequence): its epoch is checked, no sequence.
            return Ok(Check::Append);
        }
        if batch.epoch > entry.epoch {
            // A new epoch (a re-initialised producer) starts over at 0.
            if batch.first_seq != 0 {
                return Err(SequenceError::OutOfOrder {
                    producer_id: batch.producer_id,
                    given: batch.first_seq,
                    expected: 0,
                });
            }
            return Ok(Check::Append);
        }
        let last_seq = batch.last_seq();
        if let Some(original) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == batch.first_seq && b.last_seq == last_seq)
        {
            return Ok(Check::Duplicate(*original));
        }
        let expected = entry.last_seq().map_or(0, |last| add_seq(last, 1));
        if batch.first_seq != expected {
            return Err(SequenceError::OutOfOrder {
                producer_id: batch.producer_id,
                given: batch.first_seq,
                expected,
            });
        }
        Ok(Check::Append)
    }

    /// Records an appended batch (a leader's, after its check; a
    /// follower's, as copied; a replayed one) that starts at
    /// `first_offset`, with its largest timestamp, at `now` on the
    /// broker's clock.
    pub fn record_batch(
        &mut self,
        batch: &ProducerBatch,
        first_offset: Offset,
        timestamp: TimestampMs,
        now: TimestampMs,
    ) {
        let meta = BatchMeta {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq(),
            first_offset,
            last_offset: Offset(first_offset.0 + batch.offset_delta as i64),
        };
        self.record(batch, meta, timestamp, now);
    }

    fn record(
        &mut self,
        batch: &ProducerBatch,
        meta: BatchMeta,
        timestamp: TimestampMs,
        now: TimestampMs,
    ) {
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.epoch, timestamp, now));
        if batch.epoch != entry.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        if batch.first_seq == NO_SEQUENCE {
            // No sequence to remember: only its epoch and time count.
            entry.last_timestamp = timestamp;
            entry.last_seen = entry.last_seen.max(now);
            return;
        }
        entry.batches.push_back(meta);
        while entry.batches.len() > BATCHES_KEPT {
            entry.batches.pop_front();
        }
        entry.last_timestamp = timestamp;
        entry.last_seen = entry.last_seen.max(now);
    }

    /// Checks a transaction marker a leader is about to append for
    /// `producer_id` at `epoch`, from a coordinator of
    /// `coordinator_epoch`: a marker of an older epoch is
    /// INVALID_PRODUCER_EPOCH, one from an older coordinator than the last
    /// is TRANSACTION_COORDINATOR_FENCED (Kafka's checks).
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), TxnError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if epoch < entry.epoch {
            return Err(TxnError::MarkerOfOlderEpoch {
                producer_id,
                given: epoch,
                current: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(TxnError::CoordinatorFenced {
                producer_id,
                given: coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records an appended marker of `producer_id` at `offset`: a newer
    /// epoch becomes the producer's (forgetting the older batches, as a
    /// new epoch does), and its coordinator's epoch is remembered.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        offset: Offset,
        now: TimestampMs,
    ) {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(epoch, TimestampMs(-1), now));
        // Never lowered: replay applies a segment's markers after its
        // batches, so a newer epoch's batches may already be recorded.
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = entry.coordinator_epoch.max(coordinator_epoch);
        entry.last_marker = offset;
        entry.last_seen = entry.last_seen.max(now);
    }

    /// Forgets producers whose last batch lies below the log start (their
    /// batches were deleted): their state would no longer be rebuilt; and
    /// the aborted transactions whose marker went with them. An open
    /// transaction stays open, as Kafka's, until its marker comes.
    pub fn clamp_start(&mut self, log_start: Offset) {
        let transactions = &self.transactions;
        self.producers
            .retain(|id, e| e.in_log_from(log_start) || transactions.is_open(*id));
        self.transactions.clamp_start(log_start);
    }

    /// After a truncation to `end` rebuilt this state: keeps open the
    /// transactions `prior` had open from below `log_start`. A cut at or
    /// above the log start removes none of their first batches and they
    /// have no marker, so they stay open; but a rebuild without a snapshot
    /// below the cut (the one kept for them was past it) replays from the
    /// log start only. Their producers come along when the rebuild found
    /// none, with only their batches below `end` (nothing the cut removed
    /// may be answered as a duplicate).
    pub fn keep_open_from_below(&mut self, prior: &ProducerState, log_start: Offset, end: Offset) {
        for (&producer_id, &first) in prior.transactions.open() {
            if first >= log_start {
                continue;
            }
            self.transactions.keep_open(producer_id, first);
            if let Some(entry) = prior.producers.get(&producer_id) {
                let mut entry = entry.clone();
                entry.batches.retain(|b| b.last_offset < end);
                self.producers.entry(producer_id).or_insert(entry);
            }
        }
    }

    /// The partition's transactions.
    pub fn transactions(&self) -> &Transactions {
        &self.transactions
    }

    /// The partition's transactions, to record a batch or marker in.
    pub fn transactions_mut(&mut self) -> &mut Transactions {
        &mut self.transactions
    }

    /// Forgets producers this broker has not seen since
    /// `now - expiration_ms` (Kafka's producer.id.expiration.ms, counted on
    /// the broker's clock rather than the batches' timestamps), except
    /// those with a transaction open here (as Kafka's); returns how many.
    pub fn expire(&mut self, now: TimestampMs, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        let transactions = &self.transactions;
        self.producers.retain(|id, e| {
            e.last_seen.0 >= now.0.saturating_sub(expiration_ms) || transactions.is_open(*id)
        });
        before - self.producers.len()
    }

    /// Counts every producer as seen at `now` (a rebuilt state: how long
    /// the broker was down says nothing of its producers).
    pub fn seen_at(&mut self, now: TimestampMs) {
        for entry in self.producers.values_mut() {
            entry.last_seen = entry.last_seen.max(now);
        }
    }

    /// Where `producer_id`'s transactions on this partition stand.
    pub fn txn_status(&self, producer_id: i64) -> TxnStatus {
        let entry = self.producers.get(&producer_id);
        TxnStatus {
            epoch: entry.map(|e| e.epoch),
            open: self.transactions.is_open(producer_id),
            last_marker: entry.map_or(Offset(-1), |e| e.last_marker),
        }
    }

    /// Every producer, by id.
    pub fn entries(&self) -> &BTreeMap<i64, ProducerEntry> {
        &self.producers
    }

    /// The snapshot bytes of this state as of `offset`: `[crc32c u32][body]`,
    /// body `[version u8][offset i64][count u32]` then per producer
    /// `[id i64][epoch i16][last timestamp i64][last seen i64]
    /// [coordinator epoch i32][last marker i64][batches u8]` and per batch
    /// `[first seq i32][last seq i32][first offset i64][last offset i64]`,
    /// then the transactions ([`Transactions::encode`]).
    pub fn encode(&self, offset: Offset) -> Vec<u8> {
        let mut body = vec![SNAPSHOT_VERSION];
        body.extend_from_slice(&offset.0.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for (id, entry) in &self.producers {
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&entry.epoch.to_be_bytes());
            body.extend_from_slice(&entry.last_timestamp.0.to_be_bytes());
            body.extend_from_slice(&entry.last_seen.0.to_be_bytes());
            body.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&entry.last_marker.0.to_be_bytes());
            body.push(entry.batches.len() as u8);
            for b in &entry.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.0.to_be_bytes());
                body.extend_from_slice(&b.last_offset.0.to_be_bytes());
            }
        }
        self.transactions.encode(&mut body);
        let mut out = crc32c::crc32c(&body).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a snapshot: (the offset it is as of, the state), or None if
    /// it is damaged (every count is bounded by the bytes left).
    pub fn decode(bytes: &[u8]) -> Option<(Offset, ProducerState)> {
        let (crc, body) = bytes.split_at_checked(4)?;
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut r = Reader(body);
        if r.u8()? != SNAPSHOT_VERSION {
            return None;
        }
        let offset = Offset(r.i64()?);
        let count = r.u32()? as usize;
        // Each producer takes at least 39 bytes.
        if count > r.0.len() / 39 {
            return None;
        }
        let mut state = ProducerState::default();
        for _ in 0..count {
            let id = r.i64()?;
            let epoch = r.i16()?;
            let last_timestamp = TimestampMs(r.i64()?);
            let last_seen = TimestampMs(r.i64()?);
            let coordinator_epoch = r.i32()?;
            let last_marker = Offset(r.i64()?);
            let n = r.u8()? as usize;
            if n > BATCHES_KEPT {
                return None;
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMeta {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    first_offset: Offset(r.i64()?),
                    last_offset: Offset(r.i64()?),
                });
            }
            state.producers.insert(
                id,
                ProducerEntry {
                    epoch,
                    batches,
                    last_timestamp,
                    last_seen,
                    coordinator_epoch,
                    last_marker,
                },
            );
        }
        let (transactions, rest) = Transactions::decode(r.0)?;
        state.transactions = transactions;
        rest.is_empty().then_some((offset, state))
    }
}

/// 2 added `last seen`, 3 the transactions; an older snapshot is not
/// read (the log is replayed instead, as for a damaged one).
const SNAPSHOT_VERSION: u8 = 3;

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn i16(&mut self) -> Option<i16> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: 7,
            epoch,
            first_seq,
            offset_delta: records - 1,
        }
    }

    fn meta(b: &ProducerBatch, first_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq: b.first_seq,
            last_seq: b.last_seq(),
            first_offset: Offset(first_offset),
            last_offset: Offset(first_offset + b.offset_delta as i64),
        }
    }

    #[test]
    fn sequences_continue_duplicates_are_found_and_gaps_refused() {
        let mut state = ProducerState::default();
        let first = batch(0, 0, 10);
        assert_eq!(state.check(&first), Ok(Check::Append));
        state.record(&first, meta(&first, 100), TimestampMs(1), TimestampMs(1));
        // The retry of the same batch: its original offsets.
        assert_eq!(state.check(&first), Ok(Check::Duplicate(meta(&first, 100))));
        let next = batch(0, 10, 5);
        assert_eq!(state.check(&next), Ok(Check::Append));
        state.record(&next, meta(&next, 110), TimestampMs(2), TimestampMs(2));
        // A gap, and a sequence from the past that is no cached batch.
        assert!(matches!(
            state.check(&batch(0, 16, 1)),
            Err(SequenceError::OutOfOrder { expected: 15, .. })
        ));
        assert!(matches!(
            state.check(&batch(0, 3, 2)),
            Err(SequenceError::OutOfOrder { .. })
        ));
        // An older epoch is fenced; a newer one must start at 0.
        state.record(
            &batch(2, 0, 1),
            meta(&batch(2, 0, 1), 115),
            TimestampMs(3),
            TimestampMs(3),
        );
        assert!(matches!(
            state.check(&batch(1, 1, 1)),
            Err(SequenceError::InvalidEpoch { current: 2, .. })
        ));
        assert!(matches!(
            state.check(&batch(3, 5, 1)),
            Err(SequenceError::OutOfOrder { expected: 0, .. })
        ));
        assert_eq!(state.check(&batch(3, 0, 1)), Ok(Check::Append));
    }

    #[test]
    fn only_the_last_five_batches_are_remembered_and_sequences_wrap() {
        let mut state = ProducerState::default();
        let mut seq = i32::MAX - 3;
        // Unknown producer: accepted at any sequence.
        for i in 0..7 {
            let b = batch(0, seq, 2);
            assert_eq!(state.check(&b), Ok(Check::Append), "batch {i}");
            state.record(&b, meta(&b, i * 2), TimestampMs(i), TimestampMs(i));
            seq = add_seq(b.last_seq(), 1);
        }
        assert_eq!(state.entries()[&7].batches.len(), BATCHES_KEPT);
        assert_eq!(
            state.entries()[&7].batches[0].first_seq,
            0,
            "wrapped past i32::MAX"
        );
        assert!(matches!(
            state.check(&batch(0, i32::MAX - 3, 2)),
            Err(SequenceError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn snapshots_round_trip_and_damage_is_refused() {
        let mut state = ProducerState::default();
        for (id, seq) in [(1i64, 0), (2, 40), (3, 7)] {
            let b = ProducerBatch {
                producer_id: id,
                epoch: 1,
                first_seq: seq,
                offset_delta: 2,
            };
            // The clients' clocks run far ahead: expiration counts on the
            // broker's.
            state.record(&b, meta(&b, id * 10), TimestampMs(1 << 40), TimestampMs(id));
        }
        let bytes = state.encode(Offset(99));
        assert_eq!(
            ProducerState::decode(&bytes),
            Some((Offset(99), state.clone()))
        );
        for at in [0, 5, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert_eq!(ProducerState::decode(&damaged), None, "flip at {at}");
        }
        assert_eq!(ProducerState::decode(&bytes[..bytes.len() - 1]), None);
        // Another version, its checksum right, is not read.
        let mut other = bytes[4..].to_vec();
        other[0] = 1;
        let mut resealed = crc32c::crc32c(&other).to_be_bytes().to_vec();
        resealed.extend_from_slice(&other);
        assert_eq!(ProducerState::decode(&resealed), None);
        // Expiration and the log start.
        assert_eq!(state.expire(TimestampMs(10), 8), 1);
        state.clamp_start(Offset(30));
        assert_eq!(state.entries().keys().copied().collect::<Vec<_>>(), vec![3]);
    }
}
