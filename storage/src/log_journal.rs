//! A log's small flushes made durable by its shard's journal instead of an
//! fdatasync of the segment (docs/storage.md, "Many partitions").
//!
//! A flush qualifies when it writes at most `entry_most_bytes` new bytes
//! into one segment whose file exists, and seals nothing. Its segment
//! writes complete first (a checkpoint's sync of the file system covers
//! only completed writes), then the same bytes go to the journal, all
//! under the log's I/O lock: so a truncation, restart or compaction, which
//! takes that lock, finds every entry of this log acknowledged and retires
//! them (moves the checkpoint past them) before it changes any file, and
//! no entry is ever replayed over changed files. Closing a log retires
//! them too: its directory may be removed and made again under the same
//! topic id and partition.

use std::cell::Cell;
use std::rc::Rc;

use bytes::Bytes;

use crate::error::Result;
use crate::io::FileSystem;
use crate::journal::attachment::LogJournal;
use crate::journal::entry::{EntryTarget, LogIdentity};
use crate::journal::file::{Journal, Journaled};
use crate::log::Log;
use crate::types::Offset;
use crate::write_buffer::PendingWrite;

impl<FS: FileSystem> Log<FS> {
    /// Lets flushes of at most `entry_most_bytes` new bytes be made durable
    /// by `journal` (this log's entries there carry `identity`).
    pub fn use_journal(
        &self,
        journal: Rc<Journal<FS>>,
        identity: LogIdentity,
        entry_most_bytes: usize,
    ) {
        *self.journal.borrow_mut() = Some(Rc::new(LogJournal {
            journal,
            identity,
            entry_most_bytes,
            last_sequence: Cell::new(None),
        }));
    }

    /// The entry a flush writing `pending` to segment `base` would put in
    /// the journal, if the log uses one and the flush qualifies.
    pub(crate) fn journal_entry<B: crate::io::AlignedBuf>(
        &self,
        base: Offset,
        pending: &PendingWrite<B>,
    ) -> Option<(EntryTarget, Bytes)> {
        let log_journal = self.journal.borrow().clone()?;
        let new_bytes = pending.new_bytes;
        if new_bytes == 0 || new_bytes > log_journal.entry_most_bytes {
            return None;
        }
        let target = EntryTarget {
            log: log_journal.identity,
            segment: base,
            position: pending.end - new_bytes as u64,
        };
        Some((target, Bytes::from(pending.new_data())))
    }

    /// Appends a flush's entry (its segment writes completed); whether the
    /// journal made it durable. Called with the I/O lock held.
    pub(crate) async fn journal_flush(&self, target: EntryTarget, data: Bytes) -> bool {
        let Some(log_journal) = self.journal.borrow().clone() else {
            return false;
        };
        match log_journal.journal.append(target, data).await {
            Journaled::Durable(sequence) => {
                log_journal.last_sequence.set(Some(sequence));
                true
            }
            Journaled::Refused => false,
        }
    }

    /// Checkpoints the journal if it is filling up, so that appends are
    /// not refused for lack of room. Its errors fail the journal (which
    /// then refuses every entry: logs flush directly), not this log.
    pub(crate) async fn checkpoint_journal_if_due(&self) {
        let Some(log_journal) = self.journal.borrow().clone() else {
            return;
        };
        let journal = &log_journal.journal;
        if journal.wants_checkpoint() {
            let _ = journal.retire_before(journal.acknowledged_end()).await;
        }
    }

    /// A full flush, then this log's journal entries retired: what must
    /// precede any change to the log's files other than an append. Called
    /// with the I/O lock held.
    pub(crate) async fn flush_for_rewrite(&self) -> Result<()> {
        self.flush_locked().await?;
        let Some(log_journal) = self.journal.borrow().clone() else {
            return Ok(());
        };
        let Some(last) = log_journal.last_sequence.get() else {
            return Ok(());
        };
        log_journal
            .journal
            .retire_before(last + 1)
            .await
            .map_err(|e| self.fail("retiring the log's journal entries", e))
    }
}
