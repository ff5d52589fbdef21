//! The transactional ids of one `__transaction_state` partition and the
//! rules of the transaction coordinator over them (KIP-98, KIP-360;
//! Kafka's transaction.version 1), sans I/O.
//!
//! Every change is a [`Step`]: the metadata to write to the partition,
//! and what follows once it is durable (the client's answer, markers to
//! send). Until [`TxnStore::written`] installs it, the id has a change in
//! flight and every other request for it is answered
//! CONCURRENT_TRANSACTIONS, as Kafka's pending state; a failed write
//! ([`TxnStore::write_failed`]) leaves the id as it was.
//!
//! Answers use Kafka's codes; PRODUCER_FENCED is the caller's to turn
//! into INVALID_PRODUCER_EPOCH for request versions that predate it.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use super::metadata::{TopicPartition, TxnMetadata, TxnState, EPOCH_EXHAUSTED};
use crate::kafka::Code;

/// What happens once a step's metadata is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Answer the request with no error (InitProducerId: the step's
    /// producer id and epoch).
    Answer,
    /// Answer CONCURRENT_TRANSACTIONS (the client retries) and write the
    /// abort markers: a re-initialised producer's open transaction, fenced.
    FenceThenRetry,
    /// Answer with no error and write the markers (commit or abort) to
    /// the step's partitions; then [`TxnStore::markers_written`].
    AnswerThenMarkers,
    /// Write the abort markers of a timed-out transaction (no client).
    Markers,
    /// Nothing more (the transaction is complete).
    Done,
}

/// A change of one transactional id: its new metadata to write, and what
/// follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The transactional id.
    pub id: String,
    /// Its metadata once written.
    pub next: TxnMetadata,
    /// What follows once it is durable.
    pub then: Then,
}

/// One id: its durable metadata, and whether a change is in flight.
#[derive(Debug, Clone)]
struct Entry {
    durable: Option<TxnMetadata>,
    changing: bool,
}

/// Kafka's `transaction.max.timeout.ms` default: 15 minutes.
pub const MAX_TIMEOUT_MS_DEFAULT: i32 = 900_000;

/// The transactional ids of one `__transaction_state` partition.
#[derive(Debug, Clone)]
pub struct TxnStore {
    ids: BTreeMap<String, Entry>,
    /// The longest transaction timeout a producer may ask for
    /// (`transaction.max.timeout.ms`).
    max_timeout_ms: i32,
}

impl Default for TxnStore {
    fn default() -> Self {
        TxnStore::new(MAX_TIMEOUT_MS_DEFAULT)
    }
}

fn code(error: ResponseError) -> Code {
    error.code()
}

impl TxnStore {
    /// No ids yet; producers may ask for timeouts up to `max_timeout_ms`.
    pub fn new(max_timeout_ms: i32) -> TxnStore {
        TxnStore {
            ids: BTreeMap::new(),
            max_timeout_ms,
        }
    }

    /// An id's durable metadata.
    pub fn get(&self, id: &str) -> Option<&TxnMetadata> {
        self.ids.get(id).and_then(|e| e.durable.as_ref())
    }

    /// Every id with durable metadata.
    pub fn all(&self) -> impl Iterator<Item = (&String, &TxnMetadata)> {
        self.ids
            .iter()
            .filter_map(|(id, e)| Some((id, e.durable.as_ref()?)))
    }

    /// Installs what the partition's log holds for `id` (replaying it as a
    /// new coordinator; `None`: a tombstone).
    pub fn load(&mut self, id: &str, metadata: Option<TxnMetadata>) {
        match metadata {
            Some(metadata) => {
                let entry = Entry {
                    durable: Some(metadata),
                    changing: false,
                };
                self.ids.insert(id.to_string(), entry);
            }
            None => {
                self.ids.remove(id);
            }
        }
    }

    /// The transactions a new coordinator must finish: markers decided
    /// (PrepareCommit, PrepareAbort) but not known to be written.
    pub fn preparing(&self) -> Vec<(String, TxnMetadata)> {
        self.all()
            .filter(|(_, m)| m.state.is_preparing())
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect()
    }

    /// The step's metadata is durable: installs it (an expired id's
    /// tombstone removes it).
    pub fn written(&mut self, step: &Step) {
        if step.next.state == TxnState::Dead {
            self.ids.remove(&step.id);
            return;
        }
        let entry = self.ids.entry(step.id.clone()).or_insert(Entry {
            durable: None,
            changing: false,
        });
        entry.durable = Some(step.next.clone());
        entry.changing = false;
    }

    /// The step's write failed: the id stays as it was.
    pub fn write_failed(&mut self, id: &str) {
        match self.ids.get_mut(id) {
            Some(entry) if entry.durable.is_none() => {
                self.ids.remove(id);
            }
            Some(entry) => entry.changing = false,
            None => {}
        }
    }

    /// Begins a change of `id`: its current metadata, or CONCURRENT_TRANSACTIONS
    /// while another is in flight.
    fn begin(&mut self, id: &str) -> Result<Option<TxnMetadata>, Code> {
        let Some(entry) = self.ids.get_mut(id) else {
            return Ok(None);
        };
        if entry.changing {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        Ok(entry.durable.clone())
    }

    fn step(&mut self, id: &str, next: TxnMetadata, then: Then) -> Step {
        let entry = self.ids.entry(id.to_string()).or_insert(Entry {
            durable: None,
            changing: false,
        });
        entry.changing = true;
        Step {
            id: id.to_string(),
            next,
            then,
        }
    }

    /// InitProducerId with a transactional id: the producer's id and a new
    /// epoch, fencing any older instance. `expected`: the producer id and
    /// epoch a recovering client already had (KIP-360). An open
    /// transaction of the previous instance is aborted first (the client
    /// is told to retry). `new_producer_id` allocates an id.
    pub fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        new_producer_id: &mut dyn FnMut() -> i64,
    ) -> Result<Step, Code> {
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return Err(code(ResponseError::InvalidTransactionTimeout));
        }
        let current = match self.begin(id)? {
            Some(current) => current,
            None => TxnMetadata::new(new_producer_id(), timeout_ms, now_ms),
        };
        if let Some((producer_id, epoch)) = expected {
            // The previous producer id only for a client retrying after
            // its epoch ran out and the id changed.
            let valid = current.producer_epoch == -1
                || producer_id == current.producer_id
                || (producer_id == current.previous_producer_id && epoch >= EPOCH_EXHAUSTED);
            if !valid {
                return Err(code(ResponseError::ProducerFenced));
            }
        }
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::Dead => {
                Err(code(ResponseError::ConcurrentTransactions))
            }
            TxnState::Ongoing => {
                // The last epoch is not kept: a fenced instance asking again
                // with its old epoch must not pass for a retry.
                let next = TxnMetadata {
                    producer_epoch: current.producer_epoch.saturating_add(1),
                    last_producer_epoch: -1,
                    state: TxnState::PrepareAbort,
                    update_ms: now_ms,
                    ..current
                };
                Ok(self.step(id, next, Then::FenceThenRetry))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let next = initialised(current, timeout_ms, expected, now_ms, new_producer_id)?;
                Ok(self.step(id, next, Then::Answer))
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): the
    /// partitions join the transaction, which begins if none is open.
    /// `None`: all were in it already (nothing to write; answer at once).
    pub fn add_partitions(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> Result<Option<Step>, Code> {
        self.add_partitions_as(id, producer_id, epoch, partitions, now_ms, 0)
    }

    /// [`TxnStore::add_partitions`] recording the transaction version of
    /// the request: 2 when a leader adds a partition for a Produce (or
    /// TxnOffsetCommit) of transaction.version 2, else 0, as Kafka's.
    pub fn add_partitions_as(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        now_ms: i64,
        client_version: i16,
    ) -> Result<Option<Step>, Code> {
        if self.moving_to(id, producer_id) {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        let current = self.checked(id, producer_id, epoch)?;
        if current.state.is_preparing() {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        let known = partitions.iter().all(|p| current.partitions.contains(p));
        if current.state == TxnState::Ongoing && known {
            return Ok(None);
        }
        let mut next = current;
        if next.state.is_idle() {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        next.update_ms = now_ms;
        next.client_version = client_version;
        Ok(Some(self.step(id, next, Then::Answer)))
    }

    /// Whether `partition` is in the ongoing transaction of `producer_id`
    /// at `epoch` (a leader asks before a transactional batch opens a
    /// transaction there): no error, the coordinator's errors, or
    /// TRANSACTION_ABORTABLE if it is not (the caller downgrades it for
    /// versions that predate it). Writes nothing, and answers from the
    /// durable metadata even while a change is in flight (an add of
    /// another partition must not hold up this one's first batch; a
    /// decided end is refused by the marker's guard on the partition).
    pub fn verify(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partition: &TopicPartition,
    ) -> Result<(), Code> {
        let current = self
            .get(id)
            .ok_or(code(ResponseError::InvalidProducerIdMapping))?;
        if self.moving_to(id, producer_id) {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        if current.producer_id != producer_id {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        if current.producer_epoch != epoch {
            return Err(code(ResponseError::ProducerFenced));
        }
        match current.state == TxnState::Ongoing && current.partitions.contains(partition) {
            true => Ok(()),
            false => Err(code(ResponseError::TransactionAbortable)),
        }
    }

    /// EndTxn: commit or abort the open transaction. `None`: a retry of an
    /// end already complete (answer with no error).
    pub fn end_txn(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<Option<Step>, Code> {
        let current = self.checked(id, producer_id, epoch)?;
        let invalid = Err(code(ResponseError::InvalidTxnState));
        let prepare = match (current.state, commit) {
            (TxnState::Ongoing, true) => TxnState::PrepareCommit,
            (TxnState::Ongoing, false) => TxnState::PrepareAbort,
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => return Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(code(ResponseError::ConcurrentTransactions))
            }
            _ => return invalid,
        };
        let next = TxnMetadata {
            state: prepare,
            update_ms: now_ms,
            ..current
        };
        Ok(Some(self.step(id, next, Then::AnswerThenMarkers)))
    }

    /// Every marker of `id`'s decided transaction is written: the
    /// transaction completes (None if it is not being prepared, e.g. a
    /// newer coordinator took over).
    pub fn markers_written(&mut self, id: &str, now_ms: i64) -> Option<Step> {
        let current = self.begin(id).ok()??;
        let complete = match current.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        // A transaction.version 2 end that ran out of epochs moves the
        // producer to its next id here.
        let (producer_id, producer_epoch) = current.continued_identity();
        let previous_producer_id = match producer_id == current.producer_id {
            true => current.previous_producer_id,
            false => current.producer_id,
        };
        let next = TxnMetadata {
            producer_id,
            producer_epoch,
            previous_producer_id,
            next_producer_id: -1,
            state: complete,
            partitions: Default::default(),
            start_ms: -1,
            update_ms: now_ms,
            ..current
        };
        Some(self.step(id, next, Then::Done))
    }

    /// Transactions open past their timeout at `now_ms`: each aborted with
    /// its epoch bumped, so the producer, if alive, is fenced (Kafka's
    /// timeout abort).
    pub fn timed_out(&mut self, now_ms: i64) -> Vec<Step> {
        let expired: Vec<(String, TxnMetadata)> = self
            .ids
            .iter()
            .filter(|(_, e)| !e.changing)
            .filter_map(|(id, e)| Some((id.clone(), e.durable.clone()?)))
            .filter(|(_, m)| m.timed_out(now_ms))
            .collect();
        expired
            .into_iter()
            .map(|(id, current)| {
                let next = TxnMetadata {
                    producer_epoch: current.producer_epoch.saturating_add(1),
                    last_producer_epoch: -1,
                    state: TxnState::PrepareAbort,
                    update_ms: now_ms,
                    ..current
                };
                self.step(&id, next, Then::Markers)
            })
            .collect()
    }

    /// Ids idle (no transaction open or being decided, nothing in flight)
    /// for longer than `expiration_ms` at `now_ms`: each to be removed by
    /// a tombstone (Kafka's transactional.id.expiration.ms), at most
    /// `at_most` at a time. A producer coming back later starts afresh
    /// with a new producer id.
    pub fn expired(&mut self, now_ms: i64, expiration_ms: i64, at_most: usize) -> Vec<Step> {
        let idle: Vec<(String, TxnMetadata)> = self
            .ids
            .iter()
            .filter(|(_, e)| !e.changing)
            .filter(|(_, e)| {
                e.durable
                    .as_ref()
                    .is_some_and(|m| m.state.is_idle() && now_ms - m.update_ms > expiration_ms)
            })
            .take(at_most)
            .filter_map(|(id, e)| Some((id.clone(), e.durable.clone()?)))
            .collect();
        idle.into_iter()
            .map(|(id, current)| {
                let next = TxnMetadata {
                    state: TxnState::Dead,
                    update_ms: now_ms,
                    ..current
                };
                self.step(&id, next, Then::Done)
            })
            .collect()
    }

    /// Whether `id`'s decided transaction moves its producer to
    /// `producer_id` once complete (transaction.version 2, the epoch ran
    /// out): the client has the new id from EndTxn and writes with it at
    /// once; until the markers are written that is not yet the id's, and
    /// the write is to wait (CONCURRENT_TRANSACTIONS), not to be refused
    /// as an unknown producer (fatal to the client).
    fn moving_to(&self, id: &str, producer_id: i64) -> bool {
        self.get(id).is_some_and(|m| {
            m.state.is_preparing() && m.next_producer_id >= 0 && m.next_producer_id == producer_id
        })
    }

    /// `id`'s metadata if `producer_id` and `epoch` are its current ones:
    /// INVALID_PRODUCER_ID_MAPPING for an unknown id or another producer
    /// id, PRODUCER_FENCED for another epoch, CONCURRENT_TRANSACTIONS
    /// while a change is in flight.
    fn checked(&mut self, id: &str, producer_id: i64, epoch: i16) -> Result<TxnMetadata, Code> {
        let current = self
            .begin(id)?
            .ok_or(code(ResponseError::InvalidProducerIdMapping))?;
        if current.producer_id != producer_id {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        if current.producer_epoch != epoch {
            return Err(code(ResponseError::ProducerFenced));
        }
        Ok(current)
    }
}

/// An idle id initialised again: the next epoch, or a new producer id once
/// the epoch is exhausted; a retried initialisation (the client already
/// has the current epoch, having asked with the previous one) is
/// answered the same epoch.
fn initialised(
    current: TxnMetadata,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
    now_ms: i64,
    new_producer_id: &mut dyn FnMut() -> i64,
) -> Result<TxnMetadata, Code> {
    let base = TxnMetadata {
        timeout_ms,
        state: TxnState::Empty,
        partitions: Default::default(),
        start_ms: -1,
        update_ms: now_ms,
        ..current.clone()
    };
    let (producer_id, epoch, last) = match expected {
        Some((_, e)) if e == current.last_producer_epoch && e != current.producer_epoch => (
            current.producer_id,
            current.producer_epoch,
            current.last_producer_epoch,
        ),
        Some((_, e)) if e != current.producer_epoch && current.producer_epoch != -1 => {
            return Err(code(ResponseError::ProducerFenced));
        }
        // The last epoch is kept only for a client that said which epoch
        // it had (KIP-360), so its retry is recognised; otherwise unknown.
        _ if current.producer_epoch >= EPOCH_EXHAUSTED => {
            let last = expected.map_or(-1, |_| current.producer_epoch);
            (new_producer_id(), 0, last)
        }
        _ => {
            let last = expected.map_or(-1, |_| current.producer_epoch);
            (current.producer_id, current.producer_epoch + 1, last)
        }
    };
    let previous_producer_id = match producer_id == current.producer_id {
        true => current.previous_producer_id,
        false => current.producer_id,
    };
    Ok(TxnMetadata {
        producer_id,
        previous_producer_id,
        producer_epoch: epoch,
        last_producer_epoch: last,
        ..base
    })
}

mod epoch_bump;

#[cfg(test)]
mod tests;
