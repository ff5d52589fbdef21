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
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use storage::batch::ValidBatch;

use super::served::ServedPartition;
use crate::kafka::Code;
use crate::runtime::sharded::LocalFuture;

/// What a transactional write was verified against: its producer and
/// epoch, and the producer's last marker on the partition before its
/// coordinator was asked. A marker since (the transaction ended), or a
/// newer epoch (a newer instance), makes the answer stale. A first batch
/// of the same epoch appended meanwhile (pipelined requests) does not.
/// Under transaction.version 2 every marker carries a bumped epoch, so a
/// marker at the guard's own epoch ended the previous transaction (the
/// client's next one starts the moment EndTxn answers, often before that
/// marker lands here), not this one: only a newer epoch makes it stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnGuard {
    /// The producer.
    pub producer_id: i64,
    /// The epoch verified.
    pub epoch: i16,
    /// Its last marker's offset here before the coordinator was asked.
    pub last_marker: storage::Offset,
    /// The write is of transaction.version 2 (its markers bump the epoch).
    pub markers_bump_epoch: bool,
}

impl TxnGuard {
    pub(super) fn holds(&self, log: &storage::Log<storage::io::dma::DmaFs>) -> bool {
        self.holds_for(log.txn_status(self.producer_id))
    }

    /// Whether it holds for the producer's status `now`.
    pub fn holds_for(&self, now: storage::producers::TxnStatus) -> bool {
        let no_newer_epoch = now.epoch.is_none_or(|e| e <= self.epoch);
        let no_marker_since = now.last_marker == self.last_marker;
        no_newer_epoch && (no_marker_since || self.markers_bump_epoch)
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

/// A transactional write's producer, as its request names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnWriter<'a> {
    /// Its transactional id.
    pub transactional_id: &'a str,
    /// A request of transaction.version 2 (Produce v12+, TxnOffsetCommit
    /// v5+): the coordinator adds the partition to the transaction
    /// (KIP-890's implicit add) rather than only confirming it is there.
    pub adds_partition: bool,
}

/// One partition to verify (or add).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// The producer's transactional id (from the Produce request).
    pub transactional_id: String,
    /// Add the partition to the transaction if it is not in it
    /// ([`TxnWriter::adds_partition`]).
    pub adds_partition: bool,
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
    writer: Option<TxnWriter<'_>>,
    verifier: Option<Rc<dyn TxnVerifier>>,
) -> Result<Option<TxnGuard>, Code> {
    let Some(header) = batches
        .iter()
        .map(|b| b.header())
        .find(|h| h.is_transactional())
    else {
        return Ok(None);
    };
    let (Some(writer), Some(verifier)) = (writer, verifier) else {
        return Err(ResponseError::InvalidTxnState.code());
    };
    // One producer at one epoch: a second epoch in the same request would
    // open the transaction at an epoch its marker cannot end.
    if batches.iter().any(|b| {
        let h = b.header();
        h.producer_id != header.producer_id || h.producer_epoch != header.producer_epoch
    }) {
        return Err(ResponseError::InvalidProducerIdMapping.code());
    }
    verify_producer(
        led,
        writer,
        header.producer_id,
        header.producer_epoch,
        verifier,
    )
    .await
}

/// The guard for a write of `producer_id` at `epoch` in its transaction
/// (a produce's batches, or a TxnOffsetCommit's offsets). When its
/// transaction is already open here in that epoch the coordinator is not
/// asked again (it was when the transaction opened); else it is asked
/// first. Either way the write is guarded: a marker that ends the
/// transaction before the write goes in refuses it, or it would open a
/// transaction no coordinator knows.
pub async fn verify_producer(
    led: &ServedPartition,
    writer: TxnWriter<'_>,
    producer_id: i64,
    epoch: i16,
    verifier: Rc<dyn TxnVerifier>,
) -> Result<Option<TxnGuard>, Code> {
    let before = led.partition.log.txn_status(producer_id);
    let guard = TxnGuard {
        producer_id,
        epoch,
        last_marker: before.last_marker,
        markers_bump_epoch: writer.adds_partition,
    };
    if before.open && before.epoch == Some(epoch) {
        return Ok(Some(guard));
    }
    let asked = Verification {
        transactional_id: writer.transactional_id.to_string(),
        adds_partition: writer.adds_partition,
        producer_id,
        epoch,
        topic: led.topic.name.clone(),
        partition: led.index as i32,
    };
    ask(verifier.as_ref(), asked)
        .await
        .map_err(as_produce_error)?;
    Ok(Some(guard))
}

/// A pause between adds of one producer's partitions while another is
/// being written, and how long to keep trying before the producer is
/// told to retry (Kafka's leaders: 20 ms, up to 100 ms; longer here, as
/// every partition of a request adds on its own).
const ADD_RETRY_PAUSE: Duration = Duration::from_millis(5);
const ADD_RETRY_FOR: Duration = Duration::from_secs(1);

/// Asks the coordinator. An add refused for a change of the same id in
/// flight (the request's other partitions adding themselves, or the
/// previous transaction's markers being written) is asked again for a
/// while: the client's first request of a transaction names several
/// partitions at once, each of which adds itself.
async fn ask(verifier: &dyn TxnVerifier, asked: Verification) -> Result<(), Code> {
    let started = Instant::now();
    loop {
        let answer = verifier.verify(asked.clone()).await;
        let busy = answer == Err(ResponseError::ConcurrentTransactions.code());
        if !(busy && asked.adds_partition && started.elapsed() < ADD_RETRY_FOR) {
            return answer;
        }
        glommio::timer::sleep(ADD_RETRY_PAUSE).await;
    }
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
    } else if code == ResponseError::ClusterAuthorizationFailed.code() {
        // The brokers may not ask each other: not the producer's fault,
        // and no reason for a fatal error on its side.
        ResponseError::InvalidTxnState.code()
    } else if retriable.contains(&code) {
        ResponseError::NotEnoughReplicas.code()
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::producers::TxnStatus;
    use storage::Offset;

    fn status(epoch: Option<i16>, open: bool, last_marker: i64) -> TxnStatus {
        TxnStatus {
            epoch,
            open,
            last_marker: Offset(last_marker),
        }
    }

    #[test]
    fn a_guard_fails_after_a_marker_or_a_newer_epoch_only() {
        let guard = TxnGuard {
            producer_id: 7,
            epoch: 3,
            last_marker: Offset(10),
            markers_bump_epoch: false,
        };
        assert!(guard.holds_for(status(Some(3), false, 10)));
        assert!(
            guard.holds_for(status(Some(3), true, 10)),
            "a pipelined first batch of the same epoch opened it meanwhile"
        );
        assert!(guard.holds_for(status(None, false, 10)), "a new producer");
        assert!(
            guard.holds_for(status(Some(2), false, 10)),
            "its first batch at a new epoch"
        );
        assert!(
            !guard.holds_for(status(Some(3), false, 14)),
            "a marker ended it"
        );
        assert!(
            !guard.holds_for(status(Some(4), true, 10)),
            "a newer instance"
        );
    }

    #[test]
    fn a_transaction_version_2_guard_outlives_the_previous_transactions_marker() {
        let guard = TxnGuard {
            producer_id: 7,
            epoch: 3,
            last_marker: Offset(10),
            markers_bump_epoch: true,
        };
        assert!(
            guard.holds_for(status(Some(3), false, 14)),
            "the previous transaction's marker, at the bumped epoch 3"
        );
        assert!(
            !guard.holds_for(status(Some(4), false, 18)),
            "this transaction's end (epoch 4)"
        );
    }

    #[test]
    fn coordinator_answers_become_codes_a_producer_knows() {
        let code = |e: ResponseError| e.code();
        let cases = [
            (
                ResponseError::ProducerFenced,
                ResponseError::InvalidProducerEpoch,
            ),
            (
                ResponseError::ClusterAuthorizationFailed,
                ResponseError::InvalidTxnState,
            ),
            (
                ResponseError::NotCoordinator,
                ResponseError::NotEnoughReplicas,
            ),
            (
                ResponseError::CoordinatorNotAvailable,
                ResponseError::NotEnoughReplicas,
            ),
            (
                ResponseError::CoordinatorLoadInProgress,
                ResponseError::NotEnoughReplicas,
            ),
            (
                ResponseError::ConcurrentTransactions,
                ResponseError::NotEnoughReplicas,
            ),
            (
                ResponseError::NetworkException,
                ResponseError::NotEnoughReplicas,
            ),
            (
                ResponseError::TransactionAbortable,
                ResponseError::TransactionAbortable,
            ),
            (
                ResponseError::InvalidProducerIdMapping,
                ResponseError::InvalidProducerIdMapping,
            ),
        ];
        for (given, shown) in cases {
            assert_eq!(as_produce_error(code(given)), code(shown), "{given:?}");
        }
    }
}
