//! Which batches a share group reading committed (`share.isolation.level`
//! read_committed) never hands out: those of aborted transactions, found
//! as a read_committed consumer finds them. Sans I/O.
//!
//! A read below the last stable offset names the aborted transactions
//! overlapping it (producer id, first offset). From its first offset on,
//! a producer's transactional data batches belong to its aborted
//! transaction until the producer's next control batch (its ABORT
//! marker). Markers themselves are handed out (a share consumer
//! acknowledges them as gaps), as are other producers' batches.

use std::collections::BTreeSet;

use storage::batch::BatchHeader;
use storage::Offset;

use super::partition::Acquired;

/// The offset ranges (first, last) of `batches` (in offset order) that
/// belong to the `aborted` transactions.
pub fn aborted_ranges<'a>(
    batches: impl Iterator<Item = &'a BatchHeader>,
    aborted: &[(i64, Offset)],
) -> Vec<(i64, i64)> {
    let mut starting: Vec<(i64, Offset)> = aborted.to_vec();
    // Popped from the end: the earliest first.
    starting.sort_by_key(|(_, first)| std::cmp::Reverse(*first));
    let mut aborting = BTreeSet::new();
    let mut ranges = Vec::new();
    for batch in batches {
        let last = batch.last_offset();
        while starting.last().is_some_and(|(_, first)| *first <= last) {
            let (producer, _) = starting.pop().expect("a last one");
            aborting.insert(producer);
        }
        if batch.is_control() {
            aborting.remove(&batch.producer_id);
        } else if batch.is_transactional() && aborting.contains(&batch.producer_id) {
            ranges.push((batch.base_offset.0, last.0));
        }
    }
    ranges
}

/// Splits acquired runs into the parts outside `ranges` (handed out)
/// and the parts inside (archived instead), each in offset order.
pub fn split_acquired(
    runs: Vec<Acquired>,
    ranges: &[(i64, i64)],
) -> (Vec<Acquired>, Vec<(i64, i64)>) {
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for run in runs {
        let mut from = run.first;
        for &(first, last) in ranges {
            let (lo, hi) = (first.max(from), last.min(run.last));
            if lo > hi {
                continue;
            }
            if lo > from {
                kept.push(Acquired {
                    first: from,
                    last: lo - 1,
                    ..run
                });
            }
            left_out.push((lo, hi));
            from = hi + 1;
        }
        if from <= run.last {
            kept.push(Acquired { first: from, ..run });
        }
    }
    (kept, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::LeaderEpoch;

    const TRANSACTIONAL: i16 = 0x10;
    const CONTROL: i16 = 0x20;

    fn batch(base: i64, records: i32, producer_id: i64, attributes: i16) -> BatchHeader {
        BatchHeader {
            base_offset: Offset(base),
            total_bytes: 61,
            leader_epoch: LeaderEpoch(0),
            attributes,
            last_offset_delta: records - 1,
            base_timestamp: Default::default(),
            max_timestamp: Default::default(),
            records_count: records,
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
        }
    }

    #[test]
    fn an_aborted_transactions_data_batches_only_are_left_out() {
        let batches = [
            batch(0, 2, 7, TRANSACTIONAL),           // 7's aborted transaction
            batch(2, 1, 8, TRANSACTIONAL),           // 8's, committed
            batch(3, 1, -1, 0),                      // not transactional
            batch(4, 3, 7, TRANSACTIONAL),           // 7's still
            batch(7, 1, 7, TRANSACTIONAL | CONTROL), // 7's ABORT
            batch(8, 1, 8, TRANSACTIONAL | CONTROL), // 8's COMMIT
            batch(9, 2, 7, TRANSACTIONAL),           // 7's next, not aborted
            batch(11, 1, 9, TRANSACTIONAL),          // 9's, aborted from 11
            batch(12, 1, 9, TRANSACTIONAL | CONTROL),
        ];
        let aborted = [(9, Offset(11)), (7, Offset(0))];
        let ranges = aborted_ranges(batches.iter(), &aborted);
        assert_eq!(ranges, [(0, 1), (4, 6), (11, 11)]);
        assert!(aborted_ranges(batches.iter(), &[]).is_empty());
        // A transaction that began before the read: aborted from the start.
        let ranges = aborted_ranges(batches[3..].iter(), &[(7, Offset(0))]);
        assert_eq!(ranges, [(4, 6)]);
    }

    #[test]
    fn acquired_runs_are_cut_around_the_aborted_ranges() {
        let run = |first, last, delivery_count| Acquired {
            first,
            last,
            delivery_count,
        };
        let (kept, left_out) = split_acquired(
            vec![run(0, 9, 1), run(12, 14, 2)],
            &[(0, 1), (4, 6), (11, 12)],
        );
        assert_eq!(kept, [run(2, 3, 1), run(7, 9, 1), run(13, 14, 2)]);
        assert_eq!(left_out, [(0, 1), (4, 6), (12, 12)]);
        let (kept, left_out) = split_acquired(vec![run(3, 5, 1)], &[]);
        assert_eq!((kept, left_out), (vec![run(3, 5, 1)], vec![]));
    }
}
