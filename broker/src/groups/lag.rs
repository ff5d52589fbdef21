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
    /// Records the group has yet to consume: the log end minus the
    /// committed offset (the whole log if it never committed).
    pub fn lag(&self) -> i64 {
        let from = self.committed.unwrap_or(self.log_start).max(self.log_start);
        (self.log_end - from).max(0)
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
        // Behind retention: what remains is all lag; the margin is negative.
        assert_eq!(at(Some(10), 50, 100).lag(), 50);
        assert_eq!(at(Some(10), 50, 100).retention_margin(), Some(-40));
        // Never committed: the whole log, no margin.
        assert_eq!(at(None, 20, 100).lag(), 80);
        assert_eq!(at(None, 20, 100).retention_margin(), None);
    }
}
