//! A log's place in its shard's journal: what the log's flushes need to
//! put entries there and to retire them.

use std::cell::Cell;
use std::rc::Rc;

use super::entry::LogIdentity;
use super::file::Journal;
use crate::io::FileSystem;

/// A log attached to a journal.
pub(crate) struct LogJournal<FS: FileSystem> {
    pub(crate) journal: Rc<Journal<FS>>,
    /// What this log's entries carry.
    pub(crate) identity: LogIdentity,
    /// The largest flush (new bytes) that goes to the journal.
    pub(crate) entry_most_bytes: usize,
    /// The sequence number of this log's last acknowledged entry.
    pub(crate) last_sequence: Cell<Option<u64>>,
    /// An entry was offered since the last retirement: it may be in the
    /// journal even if refused (a round whose sync failed).
    pub(crate) offered: Cell<bool>,
}
