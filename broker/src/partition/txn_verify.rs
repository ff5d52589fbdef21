//! A transactional batch may open a transaction on a partition only once
//! the producer's transaction coordinator confirms the partition is in its
//! ongoing transaction (Kafka's verification, KIP-890 part 1). Without it,
//! a batch sent after its transaction ended (a late retry, a zombie, a
//! client that skipped AddPartitionsToTxn) would open a transaction no
//! coordinator knows: no marker would ever come, and the partition's last
//! stable offset would stop there for good.
//!
//! The coordinator lives in a layer above this one; it is reached through
//! the [`TxnVerifier`] the shard installs.

use std::rc::Rc;

use kafka_protocol::ResponseError;
use storage::batch::ValidBatch;

use super::served::ServedPartition;
use crate::kafka::Code;
use crate::runtime::sharded::LocalFuture;

/// What a transactional batch was verified against: the producer's
/// transactions on the partition as they stood before its coordinator
/// was asked. A marker or a new epoch since makes the answer stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnGuard {
    /// The producer.
    pub producer_id: i64,
    /// Its transactions here before the coordinator was asked.
    pub before: storage::producers::TxnStatus,
}

impl TxnGuard {
    pub(super) fn holds(&self, log: &storage::Log<storage::io::dma::DmaFs>) -> bool {
        let now = log.txn_status(self.producer_id);
        now.epoch == self.before.epoch && now.last_marker == self.before.last_marker
    }
}

/// Asks a transaction coordinator whether a partition is in a producer's
/// ongoing transaction.
pub trait TxnVerifier {
    /// Ok if `transactional_id`'s coordinator has (`topic`, `partition`)
    /// in the ongoing transaction of `producer_id` at `epoch`; else the
    /// code to answer the produce with.
    fn verify(&self, asked: Verification) -> LocalFuture<Result<(), Code>>;
}

/// One partition to verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// The producer's transactional id (from the Produce request).
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// The partition's topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// The guard for a produce's batches: None when none is transactional
/// or its producer's transaction is already open here in the same epoch
/// (verified when it opened); else the coordinator is asked first.
pub async fn verify(
    led: &ServedPartition,
    batches: &[ValidBatch],
    transactional_id: Option<&str>,
    verifier: Option<Rc<dyn TxnVerifier>>,
) -> Result<Option<TxnGuard>, Code> {
    let Some(header) = batches
        .iter()
        .map(|b| b.header())
        .find(|h| h.is_transactional())
    else {
        return Ok(None);
    };
    let invalid = ResponseError::InvalidTxnState.code();
    let (Some(id), Some(verifier)) = (transactional_id, verifier) else {
        return Err(invalid);
    };
    if batches
        .iter()
        .any(|b| b.header().producer_id != header.producer_id)
    {
        return Err(invalid);
    }
    verify_producer(led, id, header.producer_id, header.producer_epoch, verifier).await
}

/// The guard for a write of `producer_id` at `epoch` in its transaction
/// (a produce's batches, or a TxnOffsetCommit's offsets): None when its
/// transaction is already open here in that epoch; else the coordinator
/// of `transactional_id` is asked first.
pub async fn verify_producer(
    led: &ServedPartition,
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    verifier: Rc<dyn TxnVerifier>,
) -> Result<Option<TxnGuard>, Code> {
    let before = led.partition.log.txn_status(producer_id);
    if before.open && before.epoch == Some(epoch) {
        return Ok(None);
    }
    let asked = Verification {
        transactional_id: transactional_id.to_string(),
        producer_id,
        epoch,
        topic: led.topic.name.clone(),
        partition: led.index as i32,
    };
    verifier.verify(asked).await.map_err(as_produce_error)?;
    Ok(Some(TxnGuard {
        producer_id,
        before,
    }))
}

/// A coordinator's answer as a producer understands it on Produce (as
/// Kafka's leaders map it): fenced is an old epoch; a coordinator that
/// cannot answer now is a retriable NOT_ENOUGH_REPLICAS.
fn as_produce_error(code: Code) -> Code {
    let retriable = [
        ResponseError::CoordinatorNotAvailable.code(),
        ResponseError::NotCoordinator.code(),
        ResponseError::CoordinatorLoadInProgress.code(),
        ResponseError::ConcurrentTransactions.code(),
        ResponseError::NetworkException.code(),
    ];
    if code == ResponseError::ProducerFenced.code() {
        ResponseError::InvalidProducerEpoch.code()
    } else if retriable.contains(&code) {
        ResponseError::NotEnoughReplicas.code()
    } else {
        code
    }
}
