//! A partition's transactions (KIP-98), sans I/O: which producers have a
//! transaction open here and from which offset, the transactions decided
//! (a COMMIT or ABORT marker appended) whose marker is not yet below the
//! high watermark, and the aborted ones, so that
//!
//! - the last stable offset (LSO) is the first offset of the earliest
//!   transaction not yet stable, or the high watermark when none is: a
//!   read_committed consumer reads below it only, and every record there
//!   belongs to a decided transaction (or to none);
//! - a read_committed Fetch is told which aborted transactions overlap
//!   what it returns (producer id and first offset), as Kafka's
//!   `aborted_transactions`, so the client drops their records.
//!
//! The log feeds it every transactional batch and marker it appends (a
//! leader's, a follower's, a replayed one), in offset order, and each move
//! of the high watermark. A marker of a producer with no transaction open
//! here (a retry, or a transaction that wrote nothing to this partition)
//! decides nothing.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::Offset;

/// A transaction decided by its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of its first record on this partition.
    pub first_offset: Offset,
    /// Offset of its marker.
    pub marker_offset: Offset,
    /// Aborted (else committed).
    pub aborted: bool,
}

pub use crate::txn_index::AbortedTxn;

/// Why a transactional write is refused (Kafka's error codes in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// A non-transactional batch from a producer whose transaction is
    /// open here (INVALID_TXN_STATE, 48).
    #[error("producer {producer_id} wrote outside its open transaction")]
    OutsideOpenTransaction {
        /// The producer.
        producer_id: i64,
    },
    /// A marker of an older producer epoch than the producer's
    /// (INVALID_PRODUCER_EPOCH, 47).
    #[error("producer {producer_id}: marker of epoch {given}, already {current}")]
    MarkerOfOlderEpoch {
        /// The producer.
        producer_id: i64,
        /// The marker's epoch.
        given: i16,
        /// The producer's.
        current: i16,
    },
    /// A marker from an older transaction coordinator than one whose
    /// marker this producer already has (TRANSACTION_COORDINATOR_FENCED,
    /// 52): a deposed coordinator's late marker.
    #[error("producer {producer_id}: marker of coordinator epoch {given}, already {current}")]
    CoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// The marker's coordinator epoch.
        given: i32,
        /// The last one seen.
        current: i32,
    },
}

/// Every transaction of a partition that is not yet stable, and the
/// aborted ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transactions {
    /// Open transactions: producer id to first offset.
    open: BTreeMap<i64, Offset>,
    /// The same, by first offset.
    open_by_first: BTreeSet<(Offset, i64)>,
    /// Decided transactions whose marker may not be below the high
    /// watermark yet: marker offset to (first offset, producer). Those
    /// with the marker at or above the high watermark are not stable.
    unreplicated: BTreeMap<Offset, (Offset, i64)>,
    /// Aborted transactions by marker offset, while their segment's
    /// index file (`txn_index`) is not written: the active segment's, and
    /// a sealed one's until its seal is flushed.
    aborted: BTreeMap<Offset, AbortedTxn>,
}

impl Transactions {
    /// Checks a data batch a leader is about to append.
    pub fn check(&self, producer_id: i64, transactional: bool) -> Result<(), TxnError> {
        match self.open.contains_key(&producer_id) && !transactional {
            true => Err(TxnError::OutsideOpenTransaction { producer_id }),
            false => Ok(()),
        }
    }

    /// Records an appended data batch of `producer_id` at `first_offset`:
    /// a transactional one opens the producer's transaction here unless it
    /// is open already.
    pub fn record_batch(&mut self, producer_id: i64, first_offset: Offset, transactional: bool) {
        if transactional && !self.open.contains_key(&producer_id) {
            self.open.insert(producer_id, first_offset);
            self.open_by_first.insert((first_offset, producer_id));
        }
    }

    /// Keeps `producer_id`'s transaction open from `first_offset` (or from
    /// where it is open already, if earlier).
    pub fn keep_open(&mut self, producer_id: i64, first_offset: Offset) {
        if let Some(&first) = self.open.get(&producer_id) {
            if first <= first_offset {
                return;
            }
            self.open_by_first.remove(&(first, producer_id));
        }
        self.open.insert(producer_id, first_offset);
        self.open_by_first.insert((first_offset, producer_id));
    }

    /// Records an appended marker; the transaction it decides, if one was
    /// open here.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        marker_offset: Offset,
        commit: bool,
    ) -> Option<DecidedTxn> {
        let first_offset = self.open.remove(&producer_id)?;
        self.open_by_first.remove(&(first_offset, producer_id));
        self.unreplicated
            .insert(marker_offset, (first_offset, producer_id));
        if !commit {
            let stable_after = self
                .open_by_first
                .first()
                .map_or(marker_offset.plus(1), |(first, _)| *first);
            let aborted = AbortedTxn {
                producer_id,
                first_offset,
                marker_offset,
                stable_after,
            };
            self.aborted.insert(marker_offset, aborted);
        }
        Some(DecidedTxn {
            producer_id,
            first_offset,
            marker_offset,
            aborted: !commit,
        })
    }

    /// Forgets decided transactions whose marker is below `hw`: stable
    /// for good (the high watermark only moves back by truncation, which
    /// rebuilds this state).
    pub fn on_high_watermark(&mut self, hw: Offset) {
        self.unreplicated = self.unreplicated.split_off(&hw);
    }

    /// The first offset of the earliest transaction not yet stable under
    /// high watermark `hw`: open, or decided by a marker not below `hw`.
    pub fn first_unstable(&self, hw: Offset) -> Option<Offset> {
        let open = self.open_by_first.first().map(|(first, _)| *first);
        let undecided_below = self.unreplicated.range(hw..).map(|(_, (first, _))| *first);
        open.into_iter().chain(undecided_below).min()
    }

    /// The last stable offset under high watermark `hw`.
    pub fn last_stable(&self, hw: Offset) -> Offset {
        self.first_unstable(hw).map_or(hw, |first| first.min(hw))
    }

    /// Whether `producer_id` has a transaction open here.
    pub fn is_open(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }

    /// Open transactions: producer id to first offset.
    pub fn open(&self) -> &BTreeMap<i64, Offset> {
        &self.open
    }

    /// The aborted transactions held here (see [`Transactions::aborted_in`])
    /// that overlap `[from, upper)` (their marker at or after `from`, their
    /// first record below `upper`), by marker offset, and whether the
    /// lookup is complete (see [`crate::txn_index::collect_overlapping`]).
    #[cfg(test)]
    pub fn aborted_overlapping(&self, from: Offset, upper: Offset) -> (Vec<AbortedTxn>, bool) {
        let mut found = Vec::new();
        let entries = self.aborted.range(from..).map(|(_, t)| t);
        let complete = crate::txn_index::collect_overlapping(entries, from, upper, &mut found);
        (found, complete)
    }

    /// The aborted transactions held here whose marker lies in `[from,
    /// to)`, by marker offset: those of segments whose index file is not
    /// written yet (the log moves the others to the files).
    pub fn aborted_in(&self, from: Offset, to: Offset) -> Vec<AbortedTxn> {
        self.aborted
            .range(from..to.max(from))
            .map(|(_, t)| *t)
            .collect()
    }

    /// Forgets the aborted transactions whose marker lies in `[from, to)`
    /// (now in that segment's index file).
    pub fn forget_aborted_in(&mut self, from: Offset, to: Offset) {
        let mut tail = self.aborted.split_off(&from);
        let after = tail.split_off(&to.max(from));
        self.aborted.extend(after);
    }

    /// Lowers every held abort's stable-after offset to at most `cap`.
    pub fn cap_stable_after(&mut self, cap: Offset) {
        for txn in self.aborted.values_mut() {
            txn.stable_after = txn.stable_after.min(cap);
        }
    }

    /// Whether an aborted transaction held here started below `offset`.
    pub fn holds_aborts_from_below(&self, offset: Offset) -> bool {
        self.aborted.values().any(|t| t.first_offset < offset)
    }

    /// How many aborted transactions are held here.
    pub fn aborted_held(&self) -> usize {
        self.aborted.len()
    }

    /// Forgets aborted transactions whose marker lies below the log start
    /// (deleted with their segments): no read can reach their records.
    pub fn clamp_start(&mut self, log_start: Offset) {
        self.aborted = self.aborted.split_off(&log_start);
    }

    /// Restores an aborted transaction (from a snapshot).
    pub fn restore_aborted(&mut self, txn: AbortedTxn) {
        self.aborted.insert(txn.marker_offset, txn);
    }
}

impl Transactions {
    /// Appends this state to a producer snapshot: the open transactions,
    /// the decided ones that may not be stable yet, the aborted ones.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.open.len() as u32).to_be_bytes());
        for (producer_id, first) in &self.open {
            out.extend_from_slice(&producer_id.to_be_bytes());
            out.extend_from_slice(&first.0.to_be_bytes());
        }
        out.extend_from_slice(&(self.unreplicated.len() as u32).to_be_bytes());
        for (marker, (first, producer_id)) in &self.unreplicated {
            for value in [marker.0, first.0, *producer_id] {
                out.extend_from_slice(&value.to_be_bytes());
            }
        }
        out.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for txn in self.aborted.values() {
            crate::txn_index::put_entry(out, txn);
        }
    }

    /// Reads what [`Transactions::encode`] wrote from the front of
    /// `bytes`; the state and what follows it, or None if damaged (every
    /// count bounded by the bytes left before anything is allocated).
    pub fn decode(bytes: &[u8]) -> Option<(Transactions, &[u8])> {
        let mut rest = bytes;
        let mut next = |n: usize| -> Option<Vec<i64>> {
            let count = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            rest = &rest[4..];
            if count > rest.len() / (8 * n) {
                return None;
            }
            let (items, after) = rest.split_at(count * 8 * n);
            rest = after;
            Some(
                items
                    .chunks_exact(8)
                    .map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            )
        };
        let mut txns = Transactions::default();
        for pair in next(2)?.chunks_exact(2) {
            txns.record_batch(pair[0], Offset(pair[1]), true);
        }
        for triple in next(3)?.chunks_exact(3) {
            txns.unreplicated
                .insert(Offset(triple[0]), (Offset(triple[1]), triple[2]));
        }
        for quad in next(4)?.chunks_exact(4) {
            txns.restore_aborted(AbortedTxn {
                producer_id: quad[0],
                first_offset: Offset(quad[1]),
                marker_offset: Offset(quad[2]),
                stable_after: Offset(quad[3]),
            });
        }
        Some((txns, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lso_waits_for_the_earliest_open_transaction_and_its_marker_below_the_hw() {
        let mut txns = Transactions::default();
        assert_eq!(txns.last_stable(Offset(5)), Offset(5), "none open: the HW");
        txns.record_batch(1, Offset(10), true);
        txns.record_batch(2, Offset(12), true);
        txns.record_batch(1, Offset(14), true);
        assert_eq!(txns.last_stable(Offset(20)), Offset(10));
        assert_eq!(txns.last_stable(Offset(8)), Offset(8), "never above the HW");
        let decided = txns.record_marker(1, Offset(20), true).unwrap();
        assert_eq!(decided.first_offset, Offset(10));
        assert_eq!(
            txns.last_stable(Offset(20)),
            Offset(10),
            "marker not below the HW"
        );
        txns.on_high_watermark(Offset(21));
        assert_eq!(
            txns.last_stable(Offset(21)),
            Offset(12),
            "producer 2 still open"
        );
        assert!(
            txns.record_marker(1, Offset(22), true).is_none(),
            "a retried marker"
        );
        txns.record_marker(2, Offset(23), false);
        txns.on_high_watermark(Offset(24));
        assert_eq!(txns.last_stable(Offset(24)), Offset(24));
        assert_eq!(txns.aborted_overlapping(Offset(0), Offset(24)).0.len(), 1);
    }

    #[test]
    fn the_state_round_trips_through_its_encoding_and_damage_is_refused() {
        let mut txns = Transactions::default();
        txns.record_batch(1, Offset(0), true);
        txns.record_batch(2, Offset(3), true);
        txns.record_marker(1, Offset(5), false);
        txns.record_batch(3, Offset(6), true);
        txns.record_marker(3, Offset(8), true);
        let mut bytes = Vec::new();
        txns.encode(&mut bytes);
        bytes.extend_from_slice(b"after");
        let (decoded, rest) = Transactions::decode(&bytes).unwrap();
        assert_eq!(decoded, txns);
        assert_eq!(rest, b"after");
        for cut in 0..bytes.len() - 5 {
            assert!(
                Transactions::decode(&bytes[..cut]).is_none(),
                "cut at {cut}"
            );
        }
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(
            Transactions::decode(&huge).is_none(),
            "a count past the bytes"
        );
    }

    #[test]
    fn a_producer_cannot_write_outside_its_open_transaction() {
        let mut txns = Transactions::default();
        assert!(txns.check(7, false).is_ok());
        txns.record_batch(7, Offset(0), true);
        assert!(txns.check(7, true).is_ok());
        assert_eq!(
            txns.check(7, false),
            Err(TxnError::OutsideOpenTransaction { producer_id: 7 })
        );
        assert!(txns.check(8, false).is_ok(), "other producers are not held");
        txns.record_marker(7, Offset(1), true);
        assert!(txns.check(7, false).is_ok());
    }

    /// A transaction in the model: producer, first offset, and its marker
    /// (offset, committed) once decided.
    type ModelTxn = (i64, Offset, Option<(Offset, bool)>);

    /// A naive model: every transaction, and the high watermark.
    #[derive(Default)]
    struct Model {
        txns: Vec<ModelTxn>,
        hw: Offset,
    }

    impl Model {
        fn lso(&self) -> Offset {
            self.txns
                .iter()
                .filter(|(_, _, marker)| marker.is_none_or(|(m, _)| m >= self.hw))
                .map(|(_, first, _)| *first)
                .min()
                .map_or(self.hw, |first| first.min(self.hw))
        }

        fn aborted(&self, from: Offset, upper: Offset) -> Vec<(i64, Offset)> {
            let mut found: Vec<(Offset, i64, Offset)> = self
                .txns
                .iter()
                .filter_map(|(pid, first, marker)| match marker {
                    Some((m, false)) if *m >= from && *first < upper => Some((*m, *pid, *first)),
                    _ => None,
                })
                .collect();
            found.sort();
            found
                .into_iter()
                .map(|(_, pid, first)| (pid, first))
                .collect()
        }
    }

    #[test]
    fn random_histories_agree_with_a_naive_model() {
        let seed = crate::test_seed();
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
        let mut next = |n: u64| rand::Rng::gen_range(&mut rng, 0..n);
        for _ in 0..200 {
            let (mut txns, mut model) = (Transactions::default(), Model::default());
            let mut end = 0i64;
            for _ in 0..200 {
                let pid = next(5) as i64;
                let open = model
                    .txns
                    .iter()
                    .position(|(p, _, marker)| *p == pid && marker.is_none());
                match next(10) {
                    0..=4 => {
                        let transactional = open.is_some() || next(3) > 0;
                        assert_eq!(
                            txns.check(pid, transactional).is_ok(),
                            transactional || open.is_none()
                        );
                        txns.record_batch(pid, Offset(end), transactional);
                        if transactional && open.is_none() {
                            model.txns.push((pid, Offset(end), None));
                        }
                        end += 1 + next(3) as i64;
                    }
                    5..=7 => {
                        let commit = next(2) == 0;
                        let decided = txns.record_marker(pid, Offset(end), commit);
                        assert_eq!(decided.is_some(), open.is_some(), "SEED={seed}");
                        if let Some(i) = open {
                            model.txns[i].2 = Some((Offset(end), commit));
                        }
                        end += 1;
                    }
                    _ => {
                        let hw = Offset(model.hw.0 + next((end - model.hw.0 + 1) as u64) as i64);
                        model.hw = hw;
                        // Pruning is an optimisation: the answers may not
                        // depend on it.
                        if next(2) == 0 {
                            txns.on_high_watermark(hw);
                        }
                    }
                }
                assert_eq!(txns.last_stable(model.hw), model.lso(), "SEED={seed}");
                let from = Offset(next(end as u64 + 1) as i64);
                let upper = Offset(from.0 + next(end as u64 + 2) as i64);
                let told: Vec<(i64, Offset)> = txns
                    .aborted_overlapping(from, upper)
                    .0
                    .iter()
                    .map(|t| (t.producer_id, t.first_offset))
                    .collect();
                assert_eq!(
                    told,
                    model.aborted(from, upper),
                    "SEED={seed} [{from}, {upper})"
                );
            }
        }
    }
}
