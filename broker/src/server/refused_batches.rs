//! A connection's memory of the idempotent batches it saw refused before
//! they were appended (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, ...),
//! so that the batches a client pipelined behind one are refused the same
//! way, not as OUT_OF_ORDER_SEQUENCE_NUMBER.
//!
//! Why: a client keeps up to five batches of a partition in flight on one
//! connection. If the first is refused with a retriable error and the
//! partition's state changes before the second is handled (this broker
//! takes up a leadership, its lease or ISR comes back), the second meets
//! the sequence check with its predecessor missing: a gap. librdkafka
//! reads OUT_OF_ORDER for a batch behind its first unacknowledged one as
//! "skipped sequence numbers": it bumps its epoch and resends every
//! unacknowledged batch under the new epoch from sequence 0, the first
//! among them, which an earlier attempt may already have stored on the
//! old leader's followers. A later leader holding that copy then stores
//! the batch again (issue 30). Answered with the first batch's retriable
//! error instead, the client resends both, in order, in the same epoch.
//!
//! A refusal is forgotten once the client resends the refused batch (or
//! an earlier one) and it is answered, once any batch of that producer
//! is appended, and once more partitions' refusals are kept than
//! [`REFUSALS_MAX`]; so a real gap (a leader that lost acknowledged data)
//! is still answered OUT_OF_ORDER when the refused batch itself comes
//! back. Sans I/O.

use kafka_protocol::ResponseError;

use crate::kafka::Code;

/// Refusals a connection remembers (one per partition and producer).
pub const REFUSALS_MAX: usize = 128;

/// An idempotent batch's identity, from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchIdentity {
    /// The producer.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// The sequence of the batch's first record.
    pub first_sequence: i32,
}

impl BatchIdentity {
    /// The identity of the first batch in `records` (a v2 batch header),
    /// if it has a producer id; None for plain batches or short input.
    pub fn of(records: &[u8]) -> Option<BatchIdentity> {
        let header = records.get(..61)?;
        let producer_id = i64::from_be_bytes(header[43..51].try_into().ok()?);
        (producer_id >= 0 && header[16] == 2).then(|| BatchIdentity {
            producer_id,
            epoch: i16::from_be_bytes([header[51], header[52]]),
            first_sequence: i32::from_be_bytes(header[53..57].try_into().expect("4 bytes")),
        })
    }
}

/// Where a batch went: its topic (by name, or id from Produce v13) and
/// partition.
pub type PartitionOf = (String, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    partition: PartitionOf,
    batch: BatchIdentity,
    code: Code,
}

/// See the module's comment.
#[derive(Debug, Default)]
pub struct RefusedBatches {
    refusals: Vec<Refusal>,
}

/// Refusals that leave a batch unwritten and that clients retry.
fn retriable_before_append(code: Code) -> bool {
    [
        ResponseError::NotLeaderOrFollower,
        ResponseError::NotEnoughReplicas,
        ResponseError::UnknownTopicOrPartition,
        ResponseError::LeaderNotAvailable,
        ResponseError::KafkaStorageError,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Whether sequence `a` comes after `b` (sequences wrap at i32::MAX).
fn after(a: i32, b: i32) -> bool {
    let distance = (a as i64 - b as i64).rem_euclid(i32::MAX as i64 + 1);
    distance > 0 && distance < (1 << 30)
}

impl RefusedBatches {
    /// The answer to give for `batch` (the first batch of a partition's
    /// records, None if not idempotent) given the partition's `result`,
    /// remembering or forgetting refusals on the way.
    pub fn answer<T>(
        &mut self,
        partition: PartitionOf,
        batch: Option<BatchIdentity>,
        result: Result<T, Code>,
    ) -> Result<T, Code> {
        let Some(batch) = batch else {
            return result;
        };
        let known = self.refusals.iter().position(|r| {
            r.partition == partition
                && r.batch.producer_id == batch.producer_id
                && r.batch.epoch == batch.epoch
        });
        let behind_refused = known
            .is_some_and(|i| after(batch.first_sequence, self.refusals[i].batch.first_sequence));
        match result {
            Err(code)
                if code == ResponseError::OutOfOrderSequenceNumber.code() && behind_refused =>
            {
                Err(self.refusals[known.expect("behind a known refusal")].code)
            }
            Err(code) if retriable_before_append(code) => {
                if !behind_refused {
                    self.remember(
                        known,
                        Refusal {
                            partition,
                            batch,
                            code,
                        },
                    );
                }
                Err(code)
            }
            other => {
                if let Some(i) = known.filter(|_| !behind_refused || other.is_ok()) {
                    self.refusals.remove(i);
                }
                other
            }
        }
    }

    fn remember(&mut self, known: Option<usize>, refusal: Refusal) {
        if let Some(i) = known {
            self.refusals.remove(i);
        }
        if self.refusals.len() == REFUSALS_MAX {
            self.refusals.remove(0);
        }
        self.refusals.push(refusal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOT_LEADER: Code = 6;
    const OUT_OF_ORDER: Code = 45;

    fn batch(first_sequence: i32) -> Option<BatchIdentity> {
        Some(BatchIdentity {
            producer_id: 7,
            epoch: 0,
            first_sequence,
        })
    }

    fn orders() -> PartitionOf {
        ("orders".into(), 0)
    }

    #[test]
    fn batches_behind_a_refused_one_get_its_refusal_until_it_comes_back() {
        assert_eq!(ResponseError::NotLeaderOrFollower.code(), NOT_LEADER);
        assert_eq!(ResponseError::OutOfOrderSequenceNumber.code(), OUT_OF_ORDER);
        let mut refused = RefusedBatches::default();
        // R1 (seq 10) refused; R2, R3 (15, 20) meet the gap it left.
        assert_eq!(
            refused.answer::<()>(orders(), batch(10), Err(NOT_LEADER)),
            Err(NOT_LEADER)
        );
        for seq in [15, 20] {
            assert_eq!(
                refused.answer::<()>(orders(), batch(seq), Err(OUT_OF_ORDER)),
                Err(NOT_LEADER)
            );
        }
        // Another partition, producer or epoch is not concerned.
        assert_eq!(
            refused.answer::<()>(("other".into(), 0), batch(15), Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
        let other_epoch = Some(BatchIdentity {
            epoch: 1,
            ..batch(15).unwrap()
        });
        assert_eq!(
            refused.answer::<()>(orders(), other_epoch, Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
        // R1 resent and appended: the refusal is forgotten.
        assert_eq!(refused.answer(orders(), batch(10), Ok(())), Ok(()));
        assert_eq!(
            refused.answer::<()>(orders(), batch(25), Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
    }

    #[test]
    fn a_real_gap_is_still_out_of_order_when_the_refused_batch_comes_back() {
        let mut refused = RefusedBatches::default();
        let _ = refused.answer::<()>(orders(), batch(10), Err(NOT_LEADER));
        // The refused batch itself meets a gap (the leader lost data): the
        // client must hear it, and its next batches too.
        assert_eq!(
            refused.answer::<()>(orders(), batch(10), Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
        assert_eq!(
            refused.answer::<()>(orders(), batch(15), Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
        // Plain batches are never concerned.
        assert_eq!(
            refused.answer::<()>(orders(), None, Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
    }

    #[test]
    fn the_memory_is_bounded_and_sequences_wrap() {
        let mut refused = RefusedBatches::default();
        for p in 0..(REFUSALS_MAX as i32 + 10) {
            let _ = refused.answer::<()>(("t".into(), p), batch(1), Err(NOT_LEADER));
        }
        assert_eq!(refused.refusals.len(), REFUSALS_MAX);
        assert_eq!(
            refused.refusals[0].partition,
            ("t".into(), 10),
            "the oldest went first"
        );
        let _ = refused.answer::<()>(orders(), batch(i32::MAX - 2), Err(NOT_LEADER));
        assert_eq!(
            refused.answer::<()>(orders(), batch(2), Err(OUT_OF_ORDER)),
            Err(NOT_LEADER)
        );
        assert!(after(2, i32::MAX - 2) && !after(i32::MAX - 2, 2) && !after(5, 5));
    }

    #[test]
    fn the_identity_is_read_from_a_batch_header() {
        let mut header = vec![0u8; 61];
        header[16] = 2;
        header[43..51].copy_from_slice(&42i64.to_be_bytes());
        header[51..53].copy_from_slice(&3i16.to_be_bytes());
        header[53..57].copy_from_slice(&99i32.to_be_bytes());
        let identity = BatchIdentity::of(&header).unwrap();
        assert_eq!(
            (
                identity.producer_id,
                identity.epoch,
                identity.first_sequence
            ),
            (42, 3, 99)
        );
        header[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        assert_eq!(BatchIdentity::of(&header), None, "no producer");
        assert_eq!(BatchIdentity::of(&header[..60]), None, "too short");
    }
}
