//! Kafka-style replication of one partition, as sans-IO state machines
//! the broker drives (and tests drive without it):
//!
//! - [`epochs::EpochCache`] (kept by the storage log): which leader epoch
//!   wrote which offsets, and the end offset of an epoch (what
//!   OffsetForLeaderEpoch answers).
//! - [`leader::LeaderState`]: the leader's view of its followers: their log
//!   end offsets, the in-sync replicas, the high watermark (the minimum log
//!   end offset over the ISR), which acks=all produces may complete, and
//!   which ISR changes to ask the controller for.
//! - [`follower::truncation_step`] and [`follower::high_watermark`]: where a
//!   follower of a new leader cuts its log before fetching (in rounds of
//!   OffsetForLeaderEpoch), so logs never diverge, and what high watermark
//!   it may expose.
//!
//! Time comes in as milliseconds; nothing here does I/O.

/// The leader epoch cache lives with the log (storage keeps and checkpoints it).
pub mod epochs {
    pub use storage::epochs::{EpochCache, EpochEnd};
}
pub mod follower;
pub mod leader;

/// A broker id, as a replica of a partition.
pub type ReplicaId = i32;

pub use storage::{LeaderEpoch, Offset};
