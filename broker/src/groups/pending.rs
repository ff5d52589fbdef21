//! Offsets committed inside a transaction (TxnOffsetCommit) that its
//! marker has not decided yet: kept per producer, invisible to OffsetFetch
//! (which answers UNSTABLE_OFFSET_COMMIT for a partition with one when
//! asked for stable offsets), applied when the COMMIT marker comes and
//! dropped on ABORT, as Kafka's group coordinator does. Sans-IO.

use std::collections::BTreeMap;

use super::records::CommittedOffset;

/// One pending offset: (group, topic, partition), where its record is,
/// and the offset (None: a deletion).
pub type PendingOffset = ((String, String, i32), i64, Option<CommittedOffset>);

/// The pending offsets of every producer with a transaction open here.
#[derive(Debug, Clone, Default)]
pub struct PendingOffsets {
    by_producer: BTreeMap<i64, Vec<PendingOffset>>,
}

impl PendingOffsets {
    /// Notes an offset written in `producer_id`'s open transaction.
    pub fn add(&mut self, producer_id: i64, offset: PendingOffset) {
        self.by_producer
            .entry(producer_id)
            .or_default()
            .push(offset);
    }

    /// `producer_id`'s transaction ended: its offsets, in the order
    /// written, to apply (commit) or nothing (abort).
    pub fn end(&mut self, producer_id: i64, commit: bool) -> Vec<PendingOffset> {
        let offsets = self.by_producer.remove(&producer_id).unwrap_or_default();
        match commit {
            true => offsets,
            false => Vec::new(),
        }
    }

    /// Whether a transaction not yet decided holds an offset of
    /// `group`'s `topic`/`partition`.
    pub fn is_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.by_producer
            .values()
            .flatten()
            .any(|((g, t, p), _, _)| g == group && t == topic && *p == partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> Option<CommittedOffset> {
        Some(CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        })
    }

    fn slot(group: &str) -> (String, String, i32) {
        (group.to_string(), "t".to_string(), 0)
    }

    #[test]
    fn a_commit_applies_a_producers_offsets_and_an_abort_drops_them() {
        let mut pending = PendingOffsets::default();
        pending.add(1, (slot("g"), 10, at(5)));
        pending.add(1, (slot("g"), 11, at(6)));
        pending.add(2, (slot("h"), 12, at(7)));
        assert!(pending.is_pending("g", "t", 0));
        assert!(!pending.is_pending("g", "t", 1));
        let applied = pending.end(1, true);
        assert_eq!(
            applied.iter().map(|(_, at, _)| *at).collect::<Vec<_>>(),
            [10, 11]
        );
        assert!(!pending.is_pending("g", "t", 0));
        assert!(pending.end(2, false).is_empty(), "aborted");
        assert!(!pending.is_pending("h", "t", 0));
        assert!(
            pending.end(3, true).is_empty(),
            "a marker of no transaction here"
        );
    }
}
