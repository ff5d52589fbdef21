//! The leader epoch cache: for each leader epoch, the first offset its
//! leader wrote. A log's batches carry their epoch; this is the index of
//! where each epoch begins, kept beside the log and cut with it.

use crate::{LeaderEpoch, Offset};

/// Epoch start offsets, ascending in both epoch and offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<(LeaderEpoch, Offset)>,
}

/// An epoch and its end offset, as OffsetForLeaderEpoch answers; `None`
/// when the requested epoch is older than anything the log holds.
pub type EpochEnd = Option<(LeaderEpoch, Offset)>;

impl EpochCache {
    /// An empty cache.
    pub fn new() -> EpochCache {
        EpochCache::default()
    }

    /// Notes that `epoch` begins at `start` (a batch of that epoch was
    /// appended there). Later batches of the same epoch change nothing; an
    /// epoch older than the latest is a bug in the caller and is ignored.
    pub fn assign(&mut self, epoch: LeaderEpoch, start: Offset) {
        match self.entries.last() {
            Some((latest, _)) if *latest >= epoch => {}
            _ => self.entries.push((epoch, start)),
        }
    }

    /// Where the earliest epoch held begins, if any.
    pub fn earliest_start(&self) -> Option<Offset> {
        self.entries.first().map(|(_, s)| *s)
    }

    /// The latest epoch, if any.
    pub fn latest(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|(e, _)| *e)
    }

    /// The end offset of `requested` in a log ending at `log_end`: the
    /// largest epoch at or below it, and where the next epoch starts (or
    /// the log end for the latest). Kafka's OffsetForLeaderEpoch.
    pub fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> EpochEnd {
        let at = self.entries.partition_point(|(e, _)| *e <= requested);
        if at == 0 {
            return None;
        }
        let (epoch, _) = self.entries[at - 1];
        let end = self
            .entries
            .get(at)
            .map_or(log_end, |(_, next_start)| *next_start);
        Some((epoch, end))
    }

    /// After the log was truncated to `end`: epochs starting at or after
    /// it are gone.
    pub fn truncate_from_end(&mut self, end: Offset) {
        self.entries.retain(|(_, start)| *start < end);
    }

    /// After the log start moved to `start` (retention): the epoch holding
    /// it now begins there.
    pub fn truncate_from_start(&mut self, start: Offset) {
        let keep_from = self
            .entries
            .partition_point(|(_, s)| *s <= start)
            .saturating_sub(1);
        self.entries.drain(..keep_from);
        if let Some(first) = self.entries.first_mut() {
            first.1 = first.1.max(start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::new();
        for (e, s) in entries {
            c.assign(LeaderEpoch(*e), Offset(*s));
        }
        c
    }

    #[test]
    fn end_offsets_follow_kafkas_answer() {
        // Epoch 1 at 0, epoch 3 at 10, epoch 4 at 15; the log ends at 20.
        let c = cache(&[(1, 0), (3, 10), (3, 12), (4, 15)]);
        let end = |e| c.end_offset_for(LeaderEpoch(e), Offset(20));
        assert_eq!(end(0), None, "older than anything held");
        assert_eq!(end(1), Some((LeaderEpoch(1), Offset(10))));
        assert_eq!(
            end(2),
            Some((LeaderEpoch(1), Offset(10))),
            "the largest epoch below"
        );
        assert_eq!(end(3), Some((LeaderEpoch(3), Offset(15))));
        assert_eq!(
            end(4),
            Some((LeaderEpoch(4), Offset(20))),
            "the latest ends at the log end"
        );
        assert_eq!(end(9), Some((LeaderEpoch(4), Offset(20))));
        assert_eq!(c.latest(), Some(LeaderEpoch(4)));
    }

    #[test]
    fn truncation_cuts_the_cache_with_the_log() {
        let mut c = cache(&[(1, 0), (3, 10), (4, 15)]);
        c.truncate_from_end(Offset(15));
        assert_eq!(c, cache(&[(1, 0), (3, 10)]));
        c.truncate_from_end(Offset(11));
        assert_eq!(c, cache(&[(1, 0), (3, 10)]));
        c.truncate_from_start(Offset(12));
        assert_eq!(c, cache(&[(3, 12)]));
        c.truncate_from_end(Offset(12));
        assert_eq!(c, EpochCache::new());
    }
}
