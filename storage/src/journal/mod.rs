//! A shard-wide journal (docs/storage.md, "Many partitions"): small
//! flushes of many logs made durable by one sequential write and one
//! fdatasync per round, replayed into their segments after a crash.
//!
//! The format and its rules are sans-IO: the entry ([`entry`]), the
//! two-copy header with the checkpoint ([`header`]), a round's write
//! ([`round`]), where rounds go and when their space is free again
//! ([`ring`]), which rounds may be acknowledged ([`writer`]) and the
//! recovery scan ([`scan`]); the crash model in this module's tests tears
//! writes at sector granularity and completes them out of order against
//! those rules. Over the [`crate::io::FileSystem`] trait: the journal file
//! with group commit and checkpoints ([`file`]), writing an entry back
//! into its segment ([`replay`]) and opening a journal at start, replay
//! included ([`recover`]). A log uses one through [`crate::Log::use_journal`].
//!
//! The rules the scan relies on:
//! - rounds are placed only right after the previous round (at its
//!   aligned end) or at the data region's start;
//! - a round is acknowledged only after an fdatasync returned that began
//!   once the round's write and every earlier round's write had completed,
//!   and nothing is acknowledged after any write or sync failed;
//! - a header's write is durable before the space it releases is placed
//!   again ([`ring::JournalRing::release_before`]);
//! - after a crash, replay writes every entry found and syncs the segments,
//!   then a header of a new, random incarnation is made durable before the
//!   first new round, so entries left from the crashed run never count.

pub(crate) mod attachment;
pub use crate::files::JOURNAL_ID_FILE;
pub mod entry;
pub mod file;
pub mod header;
pub mod recover;
pub mod replay;
pub mod ring;
pub mod round;
pub mod scan;
pub mod writer;

/// A random 64-bit id other than `previous` (an incarnation, a log
/// directory's id): no entry written under another is taken for one of
/// this one's.
pub(crate) fn random_id(previous: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    loop {
        // RandomState's keys come from the OS's random source.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
        let id = hasher.finish();
        if id != previous {
            return id;
        }
    }
}

#[cfg(test)]
mod crash_model;
#[cfg(test)]
mod file_tests;
