//! The producer's batches, per partition, and which of them are out: a
//! partition's batches sent and not yet answered went to one broker, and
//! its next ones go to no other until they are settled (so a leader
//! change cannot put two of its batches on two connections at once).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::records::Compression;

use crate::batch_builder::{producer_of, renumbered, BatchBuilder, ProducerSequence};
use crate::connection::ClientError;

use super::Waiter;

/// A partition's name: (topic, partition).
pub(super) type PartitionKey = (String, i32);

/// A batch taken for sending, with its partition.
pub(super) type Taken = (PartitionKey, Batch);

pub(super) struct Batch {
    pub records: Records,
    /// One per record, in order.
    pub waiters: Vec<Waiter>,
    pub bytes: usize,
    pub started: Instant,
    /// When building the request that carries it began (its last, if
    /// retried): a latency's split between waiting in the producer and
    /// the request.
    pub request_started_at: Instant,
    pub attempts: u32,
    /// The producer identity (id, epoch) it was numbered under and its
    /// first record's sequence: given when it is first sent, kept for
    /// every retry under that identity, renumbered if the producer
    /// started over meanwhile.
    pub sequence: Option<((i64, i16), i32)>,
}

/// A batch's records: encoded as they come, sealed when first sent (and
/// sent again as sealed, renumbered only if its producer started over).
pub(super) enum Records {
    Open(BatchBuilder),
    Sealed { bytes: Bytes, count: usize },
}

impl Batch {
    /// A batch with room for `records` records of `bytes` in all (so that
    /// a batch as big as its partition's last one is not grown by
    /// doubling, a copy each).
    pub fn with_capacity(records: usize, bytes: usize) -> Batch {
        let now = Instant::now();
        Batch {
            records: Records::Open(BatchBuilder::with_capacity(bytes)),
            waiters: Vec::with_capacity(records),
            bytes: 0,
            started: now,
            request_started_at: now,
            attempts: 0,
            sequence: None,
        }
    }

    /// Its records.
    pub fn len(&self) -> usize {
        match &self.records {
            Records::Open(builder) => builder.len(),
            Records::Sealed { count, .. } => *count,
        }
    }

    /// The batch as it goes out now: sealed the first time, under the
    /// numbers it was given (`sequence`); the same bytes again on a
    /// retry, unless its numbers changed.
    pub fn sealed_for_sending(
        &mut self,
        compression: Compression,
        transactional: bool,
    ) -> Result<Bytes, ClientError> {
        let producer =
            self.sequence
                .map(|((producer_id, epoch), first_sequence)| ProducerSequence {
                    producer_id,
                    epoch,
                    first_sequence,
                });
        let count = self.len();
        let taken = std::mem::replace(
            &mut self.records,
            Records::Sealed {
                bytes: Bytes::new(),
                count,
            },
        );
        let bytes = match taken {
            Records::Open(builder) => builder.seal(compression, producer, transactional)?,
            Records::Sealed { bytes, .. } if producer_of(&bytes) == producer => bytes,
            Records::Sealed { bytes, .. } => renumbered(&bytes, producer),
        };
        self.records = Records::Sealed {
            bytes: bytes.clone(),
            count,
        };
        Ok(bytes)
    }
}

/// One partition's batches, oldest first, and those sent.
#[derive(Default)]
pub(super) struct PartitionQueue {
    pub batches: VecDeque<Batch>,
    /// Its batches sent and not yet settled...
    pub sent: usize,
    /// ...and the broker they went to.
    pub sent_to: i32,
    /// Records and bytes in its last batch taken for sending: the room
    /// its next batch starts with.
    pub last_batch_records: usize,
    pub last_batch_bytes: usize,
}

impl PartitionQueue {
    /// Whether its next batch may go to `leader` now: none of its
    /// batches is out at another broker, and fewer than `most` at this one.
    pub fn may_send_to(&self, leader: i32, most: usize) -> bool {
        self.sent == 0 || (self.sent_to == leader && self.sent < most)
    }
}

/// Each partition's queue, by topic then partition: a record finds its
/// queue by the topic's name without making a key, then by its
/// partition's number as an index (a tree's search through a thousand
/// partitions per record was 4-5% of loadgen's samples).
#[derive(Default)]
pub(super) struct PartitionQueues(BTreeMap<String, Vec<PartitionQueue>>);

impl PartitionQueues {
    /// `(topic, partition)`'s queue, made if new (with the ones below it).
    pub fn queue(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        if !self.0.contains_key(topic) {
            self.0.insert(topic.to_string(), Vec::new());
        }
        let partitions = self.0.get_mut(topic).expect("inserted above");
        // Numbers come from the partitioner (below the topic's partition
        // count) or from the producer's own batches.
        let index = usize::try_from(partition).expect("a partition's number is not negative");
        if partitions.len() <= index {
            partitions.resize_with(index + 1, PartitionQueue::default);
        }
        &mut partitions[index]
    }

    /// Every queue with its (topic, partition).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = ((&String, i32), &mut PartitionQueue)> {
        self.0.iter_mut().flat_map(|(topic, partitions)| {
            let numbered = partitions.iter_mut().enumerate();
            numbered.map(move |(p, q)| ((topic, p as i32), q))
        })
    }

    /// Every queue with its (topic, partition), from the one after `after`
    /// round to it (all of them, in order, when `after` is None or gone).
    pub fn iter_mut_after(
        &mut self,
        after: Option<&PartitionKey>,
    ) -> impl Iterator<Item = ((&String, i32), &mut PartitionQueue)> {
        let mut all: Vec<_> = self.iter_mut().collect();
        let start = after
            .and_then(|(topic, partition)| {
                all.iter()
                    .position(|((t, p), _)| *t == topic && p == partition)
            })
            .map_or(0, |at| at + 1);
        all.rotate_left(start);
        all.into_iter()
    }

    /// Whether no batch waits and none is out.
    pub fn is_idle(&self) -> bool {
        self.0
            .values()
            .flatten()
            .all(|q| q.batches.is_empty() && q.sent == 0)
    }

    /// Whether a batch is out (sent, not yet settled).
    pub fn any_out(&self) -> bool {
        self.0.values().flatten().any(|q| q.sent > 0)
    }

    /// Every batch queued, taken out (counted as sent, to nowhere, until
    /// they are settled).
    pub fn take_all(&mut self) -> Vec<Taken> {
        let mut taken = Vec::new();
        for ((topic, partition), queue) in self.iter_mut() {
            queue.sent += queue.batches.len();
            for batch in queue.batches.drain(..) {
                taken.push(((topic.clone(), partition), batch));
            }
        }
        taken
    }

    /// A batch of `key` is settled (answered, failed or put back).
    pub fn settled(&mut self, key: &PartitionKey) {
        let queue = self.queue(&key.0, key.1);
        queue.sent = queue.sent.checked_sub(1).expect("a batch out");
    }

    /// The topics with a queue.
    pub fn topics(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitions_batches_go_to_one_broker_at_a_time() {
        let mut queues = PartitionQueues::default();
        let queue = queues.queue("t", 0);
        assert!(queue.may_send_to(1, 2));
        queue.sent = 1;
        queue.sent_to = 1;
        assert!(queue.may_send_to(1, 2));
        assert!(!queue.may_send_to(2, 2), "another broker waits");
        queue.sent = 2;
        assert!(!queue.may_send_to(1, 2), "at most `most` out");
        queues.settled(&("t".to_string(), 0));
        queues.settled(&("t".to_string(), 0));
        assert!(queues.queue("t", 0).may_send_to(2, 2));
    }

    #[test]
    fn a_partitions_queue_is_found_by_its_number_and_the_ones_below_it_stay_idle() {
        let mut queues = PartitionQueues::default();
        queues
            .queue("t", 3)
            .batches
            .push_back(Batch::with_capacity(0, 0));
        queues.queue("u", 0).sent = 1;
        let seen: Vec<_> = queues
            .iter_mut()
            .map(|((t, p), q)| (format!("{t}{p}"), q.batches.len(), q.sent))
            .collect();
        let expected = [
            ("t0", 0, 0),
            ("t1", 0, 0),
            ("t2", 0, 0),
            ("t3", 1, 0),
            ("u0", 0, 1),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(name, batches, sent)| (name.to_string(), *batches, *sent))
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(
            queues.queue("t", 3).batches.len(),
            1,
            "the same queue again"
        );
    }

    #[test]
    fn queues_are_visited_round_from_the_one_after_a_given_one() {
        let mut queues = PartitionQueues::default();
        for (topic, partition) in [("a", 0), ("a", 1), ("b", 0)] {
            queues.queue(topic, partition);
        }
        let order = |queues: &mut PartitionQueues, after: Option<&PartitionKey>| {
            queues
                .iter_mut_after(after)
                .map(|((t, p), _)| format!("{t}{p}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(order(&mut queues, None), ["a0", "a1", "b0"]);
        assert_eq!(
            order(&mut queues, Some(&("a".into(), 1))),
            ["b0", "a0", "a1"]
        );
        assert_eq!(
            order(&mut queues, Some(&("b".into(), 0))),
            ["a0", "a1", "b0"]
        );
        assert_eq!(
            order(&mut queues, Some(&("gone".into(), 0))),
            ["a0", "a1", "b0"]
        );
    }

    #[test]
    fn batches_taken_all_count_as_out_until_settled() {
        let mut queues = PartitionQueues::default();
        queues
            .queue("t", 0)
            .batches
            .push_back(Batch::with_capacity(0, 0));
        queues
            .queue("t", 1)
            .batches
            .push_back(Batch::with_capacity(0, 0));
        let taken = queues.take_all();
        assert_eq!(taken.len(), 2);
        assert!(!queues.is_idle());
        assert!(queues.any_out());
        for (key, _) in &taken {
            queues.settled(key);
        }
        assert!(queues.is_idle());
        assert!(!queues.any_out());
    }

    #[test]
    fn a_batch_is_sealed_once_and_renumbered_only_when_its_numbers_change() {
        let mut batch = Batch::with_capacity(2, 64);
        let Records::Open(records) = &mut batch.records else {
            panic!("a new batch is open")
        };
        for value in [&b"one"[..], b"two"] {
            let record = crate::records::RecordRef {
                key: None,
                value: Some(value),
                timestamp: 1_000,
                headers: &[],
            };
            records.push(record).unwrap();
        }
        batch.sequence = Some(((7, 1), 40));
        let first = batch.sealed_for_sending(Compression::None, false).unwrap();
        assert_eq!(batch.len(), 2);
        let again = batch.sealed_for_sending(Compression::None, false).unwrap();
        assert_eq!(
            again.as_ptr(),
            first.as_ptr(),
            "a retry sends the same bytes"
        );
        batch.sequence = Some(((8, 0), 0));
        let renumbered = batch.sealed_for_sending(Compression::None, false).unwrap();
        let decoded = kafka_protocol::records::RecordBatchDecoder::decode(&mut renumbered.clone())
            .expect("a valid batch, its CRC written again");
        let numbers: Vec<_> = (decoded.records.iter())
            .map(|r| (r.producer_id, r.producer_epoch, r.sequence))
            .collect();
        assert_eq!(numbers, [(8, 0, 0), (8, 0, 1)]);
        assert_eq!(decoded.records[1].value.as_deref(), Some(&b"two"[..]));
    }
}
