//! EndTxn under transaction.version 2 (KIP-890 part 2), sans I/O: every
//! end bumps the producer's epoch, so the markers carry an epoch newer
//! than any batch of the transaction and a late batch of it is refused
//! at the partition (its epoch is now old) instead of opening the next
//! transaction. The client goes on with the epoch the answer gives; a
//! retried end (sent with the epoch before the bump) is recognised and
//! answered with the current one. When the epoch runs out the
//! transaction completes at the last epoch and the producer moves to a
//! new producer id at epoch 0. A TV2 client may end a transaction the
//! coordinator never saw a partition of (its partitions are added by
//! the leaders): an abort then fences with a bump and no markers.
//!
//! Kafka's rules (TransactionCoordinator.endTransaction, 4.0.1 on: one
//! bump, also for timeouts) in the order it checks them.

use kafka_protocol::ResponseError;

use super::{code, Step, Then, TxnStore};
use crate::kafka::Code;
use crate::transactions::metadata::{TxnMetadata, TxnState, EPOCH_EXHAUSTED};

impl TxnStore {
    /// EndTxn v5+: commit or abort with an epoch bump. `None`: a retry of
    /// an end already complete (answer the id's continued identity).
    /// `new_producer_id` is called only when the epoch runs out.
    pub fn end_txn_v2(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
        new_producer_id: &mut dyn FnMut() -> i64,
    ) -> Result<Option<Step>, Code> {
        let current = self
            .begin(id)?
            .ok_or(code(ResponseError::InvalidProducerIdMapping))?;
        let retry_on_bump = i32::from(current.producer_epoch) == i32::from(epoch) + 1
            && current.producer_id == producer_id;
        let retry_on_overflow = current.previous_producer_id == producer_id
            && epoch == EPOCH_EXHAUSTED
            && current.producer_epoch == 0;
        if current.producer_id != producer_id && !retry_on_overflow {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        let retry = retry_on_bump || retry_on_overflow;
        let same = current.producer_id == producer_id && current.producer_epoch == epoch;
        let valid = match current.state {
            TxnState::Ongoing | TxnState::Empty => same,
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => retry || same,
            TxnState::Dead => false,
        };
        if !valid {
            return Err(code(ResponseError::ProducerFenced));
        }
        let invalid = Err(code(ResponseError::InvalidTxnState));
        let prepare = match (current.state, commit) {
            (TxnState::Ongoing, true) => TxnState::PrepareCommit,
            (TxnState::Ongoing, false) => TxnState::PrepareAbort,
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(code(ResponseError::ConcurrentTransactions))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                return Ok(None)
            }
            // An abort with nothing open here: the leaders may have added
            // nothing, or the coordinator does not know it yet; the bump
            // fences whatever of it is still in flight.
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false)
                if !retry =>
            {
                TxnState::PrepareAbort
            }
            _ => return invalid,
        };
        let next = bumped(current, prepare, now_ms, new_producer_id)?;
        Ok(Some(self.step(id, next, Then::AnswerThenMarkers)))
    }
}

/// `current` decided as `prepare` at the next epoch; a new producer id
/// taken for the completion if that is the last epoch there is.
fn bumped(
    current: TxnMetadata,
    prepare: TxnState,
    now_ms: i64,
    new_producer_id: &mut dyn FnMut() -> i64,
) -> Result<TxnMetadata, Code> {
    // An epoch already at the last value (a fence or timeout abort took
    // it there) stays: the move to a new producer id fences what is left.
    let epoch = current.producer_epoch.saturating_add(1);
    let next_producer_id = match current.producer_epoch >= EPOCH_EXHAUSTED {
        true => new_producer_id(),
        false => -1,
    };
    if current.producer_epoch >= EPOCH_EXHAUSTED && next_producer_id < 0 {
        // The caller reserves an id before; none at hand: try again.
        return Err(code(ResponseError::CoordinatorNotAvailable));
    }
    let was_open = current.state == TxnState::Ongoing;
    Ok(TxnMetadata {
        producer_epoch: epoch,
        last_producer_epoch: current.producer_epoch,
        next_producer_id,
        state: prepare,
        partitions: match was_open {
            true => current.partitions.clone(),
            false => Default::default(),
        },
        start_ms: match was_open {
            true => current.start_ms,
            false => now_ms,
        },
        update_ms: now_ms,
        client_version: 2,
        ..current
    })
}
