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

use crate::error::{Result, StorageError};
use crate::files;
use crate::io::FileSystem;
use crate::journal::attachment::LogJournal;
use crate::journal::entry::{EntryTarget, LogIdentity};
use crate::journal::file::{Journal, Journaled};
use crate::log::Log;
use crate::types::Offset;
use crate::write_buffer::PendingWrite;

impl<FS: FileSystem> Log<FS> {
    /// Lets flushes of at most `entry_most_bytes` new bytes be made durable
    /// by `journal`. This log's entries carry its topic id, partition and
    /// the id of its directory, made (durably) the first time: a directory
    /// removed and made again under the same name gets another, so entries
    /// of the old one never replay into it.
    pub async fn use_journal(
        &self,
        journal: Rc<Journal<FS>>,
        topic_id: [u8; 16],
        partition: u32,
        entry_most_bytes: usize,
    ) -> Result<()> {
        let directory = self.journal_id().await?;
        let identity = LogIdentity {
            topic_id,
            partition,
            directory,
        };
        *self.journal.borrow_mut() = Some(Rc::new(LogJournal {
            identity,
            entry_most_bytes,
            // Entries of this directory written before this attachment (by
            // an earlier open whose close failed) are retired by its first
            // rewrite too.
            last_sequence: Cell::new(journal.acknowledged_end().checked_sub(1)),
            offered: Cell::new(true),
            journal,
        }));
        Ok(())
    }

    /// The directory's journal id, made if it has none (or a damaged one).
    async fn journal_id(&self) -> Result<u64> {
        let io = |what: &'static str| move |e| StorageError::io(what, e);
        let path = self.dir.join(files::JOURNAL_ID_FILE);
        let exists = self.fs.list(&self.dir).map_err(io("listing directory"))?;
        let exists = exists.iter().any(|n| n == files::JOURNAL_ID_FILE);
        let stored = files::read_whole(&self.fs, &path, exists).await;
        let stored = stored.map_err(io("reading the journal id"))?;
        if let Some(id) = stored.and_then(|b| files::decode_journal_id(&b)) {
            return Ok(id);
        }
        let id = crate::journal::random_id(0);
        let bytes = files::encode_journal_id(id);
        files::write_atomic(&self.fs, &self.dir, files::JOURNAL_ID_FILE, &bytes)
            .await
            .map_err(io("writing the journal id"))?;
        Ok(id)
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
        log_journal.offered.set(true);
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
    /// with the I/O lock held. After a journal failure, the journal retires
    /// everything it ever placed; only if that fails too does this log fail.
    pub(crate) async fn flush_for_rewrite(&self) -> Result<()> {
        self.flush_locked().await?;
        let Some(log_journal) = self.journal.borrow().clone() else {
            return Ok(());
        };
        if !log_journal.offered.get() {
            return Ok(());
        }
        let journal = &log_journal.journal;
        let needed = log_journal.last_sequence.get().map_or(0, |last| last + 1);
        let retired = match journal.retire_before(needed).await {
            Err(_) if journal.failed().is_some() => journal.retire_after_failure().await,
            retired => retired,
        };
        retired.map_err(|e| self.fail("retiring the log's journal entries", e))?;
        log_journal.offered.set(false);
        Ok(())
    }
}
