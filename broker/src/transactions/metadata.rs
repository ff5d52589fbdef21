//! One transactional id as the transaction coordinator keeps it (Kafka's
//! TransactionMetadata): its producer id and epoch, its timeout, the
//! state of its current transaction and the partitions in it. A value of
//! this type is what one `__transaction_state` record holds.

use std::collections::BTreeSet;

/// A topic's partition in a transaction.
pub type TopicPartition = (String, i32);

/// An epoch past which a producer id is not bumped further: the next
/// initialisation takes a new producer id (Kafka keeps the last value for
/// its own fencing bump).
pub const EPOCH_EXHAUSTED: i16 = i16::MAX - 1;

/// Where a transactional id's transaction stands (Kafka's ids, which
/// `__transaction_state` stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction since the producer was initialised.
    Empty,
    /// Partitions added, not yet ended.
    Ongoing,
    /// Commit decided, markers being written.
    PrepareCommit,
    /// Abort decided, markers being written.
    PrepareAbort,
    /// Committed: every marker written.
    CompleteCommit,
    /// Aborted: every marker written.
    CompleteAbort,
    /// Expired and removed.
    Dead,
}

impl TxnState {
    /// The id `__transaction_state` stores.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
        }
    }

    /// The state of a stored id.
    pub fn of_id(id: i8) -> Option<TxnState> {
        [
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::PrepareAbort,
            TxnState::CompleteCommit,
            TxnState::CompleteAbort,
            TxnState::Dead,
        ]
        .into_iter()
        .find(|state| state.id() == id)
    }

    /// The name DescribeTransactions and ListTransactions use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
        }
    }

    /// Whether markers are being written (no request may change the
    /// transaction meanwhile).
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Whether no transaction is open (a new one may begin).
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// A transactional id's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// Its producer id.
    pub producer_id: i64,
    /// The producer id before the last change (-1: none), so a retried
    /// initialisation or end after a change is recognised.
    pub previous_producer_id: i64,
    /// The producer id the transaction being decided moves to once
    /// complete (-1: none): a transaction.version 2 end that exhausted the
    /// epoch. Stored, so a new coordinator completes the move.
    pub next_producer_id: i64,
    /// Its producer epoch (-1 until first initialised).
    pub producer_epoch: i16,
    /// The epoch before the last bump (-1: unknown), so a retried
    /// initialisation is answered rather than fenced. Not stored.
    pub last_producer_epoch: i16,
    /// The transaction timeout the producer asked for.
    pub timeout_ms: i32,
    /// Its transaction's state.
    pub state: TxnState,
    /// The partitions its transaction wrote to (or will).
    pub partitions: BTreeSet<TopicPartition>,
    /// When its transaction began (-1: none open).
    pub start_ms: i64,
    /// When this metadata last changed.
    pub update_ms: i64,
    /// The transaction version of the request that made the last change
    /// (0: the classic protocol; 2: KIP-890's, an epoch per transaction).
    pub client_version: i16,
}

impl TxnMetadata {
    /// A transactional id seen for the first time, given producer id
    /// `producer_id`.
    pub fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnMetadata {
        TxnMetadata {
            producer_id,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            update_ms: now_ms,
            client_version: 0,
        }
    }

    /// The producer id and epoch its producer goes on with once the
    /// current change completes: after a transaction.version 2 end, the
    /// bumped epoch, or epoch 0 of the next producer id when the epoch ran
    /// out (what EndTxn v5 answers).
    pub fn continued_identity(&self) -> (i64, i16) {
        match self.next_producer_id {
            -1 => (self.producer_id, self.producer_epoch),
            next => (next, 0),
        }
    }

    /// Whether its open transaction has outlived its timeout at `now_ms`.
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing && now_ms - self.start_ms > self.timeout_ms as i64
    }
}
