//! Newtypes for the identifiers of the metadata, so none can be swapped.

use std::fmt;

use rkyv::{Archive, Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        #[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A broker's node id.
    BrokerId(i32)
);
id_type!(
    /// A partition's index within its topic.
    PartitionId(i32)
);
id_type!(
    /// A shard (core) of a broker.
    ShardId(u16)
);
id_type!(
    /// Bumped every time a partition's leader changes; stamped on batches.
    LeaderEpoch(i32)
);
id_type!(
    /// Bumped on every change to a partition (leader or ISR); an ISR change
    /// request must name the current one, so stale requests are refused.
    PartitionEpoch(i32)
);
id_type!(
    /// A broker process's incarnation: each restart registers a larger one,
    /// so messages of a previous life are recognised and refused.
    Incarnation(u64)
);

/// A topic's UUID (Kafka's topic id), chosen by the proposer of its creation.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub struct TopicId(pub [u8; 16]);

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_uuid(f, &self.0)
    }
}

/// As a UUID in logs and debug output too (`TopicId(b96a...)`), not 16
/// bytes in decimal.
impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TopicId(")?;
        write_uuid(f, &self.0)?;
        f.write_str(")")
    }
}

/// The cluster's id: chosen at random by the first active controller of a
/// quorum and committed once; every data directory of the cluster records
/// it, and clients see it in Metadata.
#[derive(
    Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub struct ClusterId(pub [u8; 16]);

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_uuid(f, &self.0)
    }
}

/// 16 bytes as a UUID (8-4-4-4-12 hex digits).
fn write_uuid(f: &mut fmt::Formatter<'_>, bytes: &[u8; 16]) -> fmt::Result {
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            f.write_str("-")?;
        }
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}
