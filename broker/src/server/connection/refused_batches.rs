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
//! A refusal is kept only for the requests that can have been pipelined
//! behind it: the next [`PIPELINED_MAX`] Produce requests of the
//! connection (a connection's requests place their records one at a time,
//! in order, and an idempotent client keeps at most five in flight). It is forgotten
//! sooner once the refused batch (or an earlier one of that producer,
//! epoch and partition) comes back and is answered, or once one of them
//! is appended. So a real gap (a leader that lost acknowledged data) is
//! still answered OUT_OF_ORDER, at the latest to the fifth request after
//! the refusal. Sans I/O.

use kafka_protocol::ResponseError;
use storage::producers::ProducerBatch;

use crate::kafka::Code;

/// The Produce requests after a refusal that it answers for: those an
/// idempotent client (at most five in flight) sent before it saw it.
pub const PIPELINED_MAX: u64 = 4;

/// Refusals a connection remembers at once (one per partition and
/// producer; one request may name many partitions).
pub const REFUSALS_MAX: usize = 128;

/// The first batch of a partition's records as its header names it (None
/// for plain batches, control batches or records too short to hold one).
pub fn first_batch(records: &[u8]) -> Option<ProducerBatch> {
    storage::batch::BatchHeader::parse(records, usize::MAX)
        .ok()?
        .producer()
}

/// Where a batch went: its topic (by name, or by id from Produce v13)
/// and partition.
pub type PartitionOf = (String, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    partition: PartitionOf,
    batch: ProducerBatch,
    code: Code,
    /// The connection's Produce request it was refused in.
    request: u64,
}

/// See the module's comment.
#[derive(Debug, Default)]
pub struct RefusedBatches {
    refusals: Vec<Refusal>,
    /// The connection's Produce requests so far.
    requests: u64,
}

/// Whether `code` refuses a batch before it is appended, with an error
/// clients retry.
pub fn retriable_before_append(code: Code) -> bool {
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
    /// A Produce request begins: refusals too old to have had it
    /// pipelined behind them are forgotten.
    pub fn next_request(&mut self) {
        self.requests += 1;
        let requests = self.requests;
        self.refusals
            .retain(|r| requests - r.request <= PIPELINED_MAX);
    }

    /// Whether nothing is remembered (the common case: nothing to do).
    pub fn is_empty(&self) -> bool {
        self.refusals.is_empty()
    }

    /// The answer to give for `batch` (the first batch of a partition's
    /// records, None if not idempotent) given the partition's `result`,
    /// remembering or forgetting refusals on the way.
    pub fn answer<T>(
        &mut self,
        partition: PartitionOf,
        batch: Option<ProducerBatch>,
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
        let behind_refused =
            known.is_some_and(|i| after(batch.first_seq, self.refusals[i].batch.first_seq));
        match result {
            Err(code)
                if code == ResponseError::OutOfOrderSequenceNumber.code() && behind_refused =>
            {
                Err(self.refusals[known.expect("behind a known refusal")].code)
            }
            Err(code) if retriable_before_append(code) => {
                if !behind_refused {
                    let request = self.requests;
                    self.remember(
                        known,
                        Refusal {
                            partition,
                            batch,
                            code,
                            request,
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

    fn batch(first_seq: i32) -> Option<ProducerBatch> {
        Some(ProducerBatch {
            producer_id: 7,
            epoch: 0,
            first_seq,
            offset_delta: 4,
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
        let other_epoch = Some(ProducerBatch {
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
    fn a_refusal_answers_only_for_the_requests_pipelined_behind_it() {
        let mut refused = RefusedBatches::default();
        refused.next_request();
        let _ = refused.answer::<()>(orders(), batch(10), Err(NOT_LEADER));
        for _ in 0..PIPELINED_MAX {
            refused.next_request();
            assert_eq!(
                refused.answer::<()>(orders(), batch(15), Err(OUT_OF_ORDER)),
                Err(NOT_LEADER)
            );
        }
        // The fifth request after it was sent after its answer arrived: a
        // gap there is real (here the refused batch went to another broker
        // and this one later lost what it had).
        refused.next_request();
        assert!(refused.is_empty());
        assert_eq!(
            refused.answer::<()>(orders(), batch(15), Err(OUT_OF_ORDER)),
            Err(OUT_OF_ORDER)
        );
    }

    #[test]
    fn the_first_batch_is_read_from_its_header() {
        let specs = [storage::batch::RecordSpec {
            key: None,
            value: Some(b"v".to_vec()),
            timestamp_delta: 0,
        }];
        let mut records = storage::batch::build(storage::TimestampMs(1), &specs);
        assert_eq!(first_batch(&records), None, "no producer");
        storage::batch::stamp_producer(&mut records, 42, 3, 99);
        let batch = first_batch(&records).unwrap();
        assert_eq!(
            (batch.producer_id, batch.epoch, batch.first_seq),
            (42, 3, 99)
        );
        assert_eq!(first_batch(&records[..40]), None, "too short");
    }
}
