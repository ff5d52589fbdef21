//! The partition log of the broker: Kafka RecordBatch v2 stored byte for
//! byte in segment files written with O_DIRECT, with sparse indexes,
//! crash recovery, retention and compaction. No networking.
//!
//! Start at [`Log`]: [`Log::open`], [`Log::append`], [`Log::wait_flushed`],
//! [`Log::read`]. The I/O goes through [`io::FileSystem`]: glommio DMA files
//! in production ([`io::dma::DmaFs`]), memory in tests ([`io::memory::MemFs`]).

#![warn(missing_docs)]

pub mod batch;
mod batch_crc;
pub mod cache;
mod compaction;
pub mod epochs;
pub mod error;
mod files;
mod flush;
mod frame_memory;
mod headers;
pub mod index;
pub mod io;
mod io_lock;
pub mod journal;
mod log;
mod log_journal;
mod maintenance;
pub mod markers;
mod prefetch;
mod producer_log;
pub mod producers;
mod read;
mod read_ahead;
mod recovery;
pub mod remote;
mod restart;
mod segment;
mod streaming_copy;
pub mod transactions;
pub mod txn_index;
mod txn_index_log;
pub mod types;
pub mod write_buffer;

pub use cache::CacheShare;
pub use compaction::{CompactionPolicy, CompactionStats};
pub use error::{BatchError, Result, StorageError};
pub use frame_memory::FrameMemory;
pub use log::{
    flush_bucket, AppendInfo, Log, LogConfig, LogStats, ReadOutcome, FLUSH_BUCKET_BOUNDS_SECONDS,
};
pub use maintenance::RetentionPolicy;
pub use types::{LeaderEpoch, Offset, TimestampMs};

/// The seed of a randomized test: `SEED` if set (to replay a run), else
/// random; printed either way.
#[cfg(test)]
pub(crate) fn test_seed() -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("SEED={seed}");
    seed
}
