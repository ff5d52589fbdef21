//! The leader epoch cache: for each leader epoch, the first offset its
//! leader wrote. A log's batches carry their epoch; this is the index of
//! where each epoch begins, kept by the log (and checkpointed beside its
//! segments) and cut with it. Replication asks it where an epoch ends.

use crate::types::{LeaderEpoch, Offset};

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

    /// Every (epoch, start offset), ascending.
    pub fn entries(&self) -> &[(LeaderEpoch, Offset)] {
        &self.entries
    }

    /// A cache of these entries, normalized: ascending by offset, each
    /// epoch higher than the one before (lower or repeated ones dropped).
    pub fn from_entries(mut entries: Vec<(LeaderEpoch, Offset)>) -> EpochCache {
        entries.sort_by_key(|(epoch, start)| (*start, *epoch));
        let mut cache = EpochCache::new();
        for (epoch, start) in entries {
            cache.assign(epoch, start);
        }
        cache
    }

    /// The checkpoint file's bytes: magic, count, (epoch, start) pairs, CRC-32C.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"LEP1".to_vec();
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for (epoch, start) in &self.entries {
            out.extend_from_slice(&epoch.0.to_be_bytes());
            out.extend_from_slice(&start.0.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a checkpoint, or None if it is damaged.
    pub fn decode(bytes: &[u8]) -> Option<EpochCache> {
        if bytes.len() < 12 || &bytes[..4] != b"LEP1" {
            return None;
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let count = u32::from_be_bytes(body[4..8].try_into().ok()?) as usize;
        if body.len() != 8 + count.checked_mul(12)? {
            return None;
        }
        let entries = body[8..]
            .chunks_exact(12)
            .map(|c| {
                (
                    LeaderEpoch(i32::from_be_bytes(c[..4].try_into().expect("4 bytes"))),
                    Offset(i64::from_be_bytes(c[4..].try_into().expect("8 bytes"))),
                )
            })
            .collect();
        Some(EpochCache::from_entries(entries))
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

    /// The log now holds `[start, end)`: the epoch holding `start` begins
    /// there, and epochs beginning at or after `end` are gone (so an empty
    /// log keeps none: every entry covers at least one record).
    pub fn clamp(&mut self, start: Offset, end: Offset) {
        self.truncate_from_start(start);
        self.truncate_from_end(end);
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

    #[test]
    fn checkpoints_round_trip_and_damage_is_detected() {
        let c = cache(&[(1, 0), (3, 10), (4, 15)]);
        assert_eq!(EpochCache::decode(&c.encode()), Some(c.clone()));
        assert_eq!(
            EpochCache::decode(&EpochCache::new().encode()),
            Some(EpochCache::new())
        );
        let bytes = c.encode();
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert_eq!(EpochCache::decode(&bad), None, "flip at {at}");
        }
        assert_eq!(EpochCache::decode(&bytes[..bytes.len() - 1]), None);
        // Entries out of order, repeated or decreasing are normalized.
        let messy = vec![
            (LeaderEpoch(3), Offset(10)),
            (LeaderEpoch(1), Offset(0)),
            (LeaderEpoch(3), Offset(12)),
            (LeaderEpoch(2), Offset(11)),
            (LeaderEpoch(4), Offset(15)),
        ];
        assert_eq!(EpochCache::from_entries(messy), c);
    }
}
