//! Leader epochs cross here, and only here: the metadata (control) and
//! the log (storage) each have a `LeaderEpoch` for the same number, and
//! neither crate depends on the other.

/// The log's epoch for the metadata's.
pub fn from_metadata(epoch: control::LeaderEpoch) -> storage::LeaderEpoch {
    storage::LeaderEpoch(epoch.0)
}

/// The metadata's epoch for the log's.
pub fn to_metadata(epoch: storage::LeaderEpoch) -> control::LeaderEpoch {
    control::LeaderEpoch(epoch.0)
}
