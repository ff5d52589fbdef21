//! Verify mode's bookkeeping: what consumers saw of each producer's
//! sequence numbers, checked against what the producers had acknowledged.

use std::collections::HashMap;

use crate::payload::Stamp;

/// What one reader (all consumers of one group, merged) saw.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Per producer, how often each sequence number was consumed.
    seen: HashMap<u16, Vec<u8>>,
    /// Per (partition, producer), the last sequence number consumed.
    last: HashMap<(i32, u16), u64>,
    /// Messages consumed with a lower sequence number than one before them
    /// in the same partition from the same producer.
    pub out_of_order: u64,
}

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// Acknowledged but never consumed.
    pub lost: u64,
    /// Consumed more than once (at-least-once delivery allows it).
    pub duplicated: u64,
    /// Consumed out of their producer's order within a partition.
    pub out_of_order: u64,
    /// Acknowledged messages checked.
    pub checked: u64,
}

impl Tally {
    /// Notes a consumed message.
    pub fn saw(&mut self, partition: i32, stamp: Stamp) {
        let counts = self.seen.entry(stamp.producer).or_default();
        let at = stamp.sequence as usize;
        if counts.len() <= at {
            counts.resize(at + 1, 0);
        }
        counts[at] = counts[at].saturating_add(1);
        let last = self.last.entry((partition, stamp.producer)).or_insert(0);
        if stamp.sequence < *last {
            self.out_of_order += 1;
        }
        *last = (*last).max(stamp.sequence);
    }

    /// Adds another consumer's tally (consumers of one group read
    /// different partitions).
    pub fn merge(&mut self, other: Tally) {
        for (producer, counts) in other.seen {
            let mine = self.seen.entry(producer).or_default();
            if mine.len() < counts.len() {
                mine.resize(counts.len(), 0);
            }
            for (at, n) in counts.into_iter().enumerate() {
                mine[at] = mine[at].saturating_add(n);
            }
        }
        self.last.extend(other.last);
        self.out_of_order += other.out_of_order;
    }

    /// Checks the producers' acknowledged sequence numbers against it.
    pub fn verdict(&self, acked: &[(u16, Vec<u64>)]) -> Verdict {
        let mut verdict = Verdict {
            out_of_order: self.out_of_order,
            ..Verdict::default()
        };
        for (producer, sequences) in acked {
            let counts = self.seen.get(producer);
            for sequence in sequences {
                verdict.checked += 1;
                match counts.and_then(|c| c.get(*sequence as usize)).copied() {
                    None | Some(0) => verdict.lost += 1,
                    Some(1) => {}
                    Some(n) => verdict.duplicated += n as u64 - 1,
                }
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(producer: u16, sequence: u64) -> Stamp {
        Stamp {
            producer,
            sequence,
            intended_ns: 0,
        }
    }

    #[test]
    fn lost_duplicated_and_reordered_messages_are_counted() {
        let mut a = Tally::default();
        let mut b = Tally::default();
        // Producer 0's messages 0..5 over partitions 0 and 1.
        a.saw(0, stamp(0, 0));
        a.saw(0, stamp(0, 2));
        a.saw(0, stamp(0, 2)); // a duplicate
        b.saw(1, stamp(0, 3));
        b.saw(1, stamp(0, 1)); // out of order within partition 1
        a.merge(b);
        let verdict = a.verdict(&[(0, vec![0, 1, 2, 3, 4])]);
        assert_eq!(
            verdict,
            Verdict {
                lost: 1, // 4
                duplicated: 1,
                out_of_order: 1,
                checked: 5,
            }
        );
        // A producer nobody read: all lost.
        assert_eq!(a.verdict(&[(9, vec![0, 1])]).lost, 2);
    }
}
