//! Consumer lag of one group on one partition: how far its committed
//! offset is behind the log end, and how far ahead of the log start
//! (how close retention is to deleting what the group has not read yet).

/// One partition's positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLag {
    /// The group's committed offset, if it committed one.
    pub committed: Option<i64>,
    /// The partition's earliest offset.
    pub log_start: i64,
    /// The partition's end (high watermark).
    pub log_end: i64,
}

impl PartitionLag {
    /// Kafka's lag: the log end minus the committed offset, records
    /// retention deleted included (the whole log if it never committed:
    /// what a group starting from the earliest offset would read).
    pub fn lag(&self) -> i64 {
        (self.log_end - self.committed.unwrap_or(self.log_start)).max(0)
    }

    /// The part of the lag retention deleted before the group read it:
    /// from the committed offset to the log start.
    pub fn lost_to_retention(&self) -> i64 {
        self.committed
            .map_or(0, |c| (self.log_start.min(self.log_end) - c).max(0))
    }

    /// Records between the log start and the committed offset: what
    /// retention may still delete before it reaches unread data. Negative
    /// when it already has (the group's next fetch is out of range and
    /// follows its auto.offset.reset policy).
    pub fn retention_margin(&self) -> Option<i64> {
        self.committed.map(|c| c - self.log_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_and_retention_margin() {
        let at = |committed, log_start, log_end| PartitionLag {
            committed,
            log_start,
            log_end,
        };
        assert_eq!(at(Some(40), 0, 100).lag(), 60);
        assert_eq!(at(Some(40), 0, 100).retention_margin(), Some(40));
        assert_eq!(at(Some(100), 0, 100).lag(), 0);
        assert_eq!(at(Some(40), 0, 100).lost_to_retention(), 0);
        // Behind retention: Kafka's lag counts the deleted records too,
        // shown apart as lost; the margin is negative.
        assert_eq!(at(Some(10), 50, 100).lag(), 90);
        assert_eq!(at(Some(10), 50, 100).lost_to_retention(), 40);
        assert_eq!(at(Some(10), 50, 100).retention_margin(), Some(-40));
        // Never committed: the whole log, nothing lost, no margin.
        assert_eq!(at(None, 20, 100).lag(), 80);
        assert_eq!(at(None, 20, 100).lost_to_retention(), 0);
        assert_eq!(at(None, 20, 100).retention_margin(), None);
        // A commit past the end (the log was truncated): no negative lag.
        assert_eq!(at(Some(120), 0, 100).lag(), 0);
    }
}
