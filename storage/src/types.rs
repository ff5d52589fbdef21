//! Newtypes for the quantities of a log, so two adjacent integers can never be swapped.

use std::fmt;

/// A position in a partition's sequence of records (Kafka's "offset").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    /// The offset `n` records after this one.
    pub fn plus(self, n: i64) -> Offset {
        Offset(self.0 + n)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The epoch of the leader that wrote a batch (Kafka's partitionLeaderEpoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LeaderEpoch(pub i32);

/// Milliseconds since the Unix epoch, as Kafka timestamps are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimestampMs(pub i64);

/// The wall clock in milliseconds since the Unix epoch.
pub fn now_ms() -> TimestampMs {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    TimestampMs(since.as_millis() as i64)
}
