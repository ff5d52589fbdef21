//! A shard-wide journal's format and bookkeeping (docs/storage.md, "Many
//! partitions"): small flushes of many logs made durable by one sequential
//! write and one fdatasync per round, replayed into their segments after a
//! crash.
//!
//! This module is sans-IO and not used by [`crate::Log`] yet: it holds the
//! entry format ([`entry`]), the two-copy header with the checkpoint
//! ([`header`]), a round's write ([`round`]), where rounds go in the file
//! and when their space is free again ([`ring`]) and the recovery scan
//! ([`scan`]). The crash model in this module's tests tears writes at
//! sector granularity and completes them out of order against those
//! rules.
//!
//! The writer's rules the scan relies on:
//! - a round is acknowledged only after an fdatasync returned that began
//!   once the round's write and every earlier round's write had completed;
//! - a header's write is durable before the space it releases is placed
//!   again ([`ring::JournalRing::release_before`]);
//! - after a crash, replay writes every entry found and syncs the segments,
//!   then a header of a new incarnation is made durable before the first
//!   new round, so entries left from the crashed run never count again.

pub mod entry;
pub mod file;
pub mod header;
pub mod replay;
pub mod ring;
pub mod round;
pub mod scan;
pub mod writer;

#[cfg(test)]
mod crash_model;
#[cfg(test)]
mod file_tests;
