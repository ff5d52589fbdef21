//! The log's aborted-transaction indexes (`txn_index`): each sealed
//! segment's `.txnindex` written at seal, read back for a read_committed
//! Fetch of older data (a few decoded files kept), found at open, and
//! written for sealed segments that lack one once the producer state is
//! rebuilt.
//!
//! Where each segment's aborts are: in its file once `aborts_indexed` is
//! Some, else in memory (the producer state's `Transactions`): the active
//! segment's, and a sealed one's until its seal is flushed. A producer
//! snapshot carries what memory held when it was taken. A rebuild starts
//! from a snapshot no later than any sealed segment whose file is missing
//! ([`Log::unindexed_floor`]), so its replay finds their aborts. When a
//! file's aborts move back to memory (a truncation into its segment, or a
//! last segment found with one at open), a snapshot at the log end is
//! written before the file is removed: an older snapshot may have been
//! taken after the file was written, without them.

use std::collections::HashSet;
use std::rc::Rc;

use crate::batch::HEADER_BYTES;
use crate::error::{Result, StorageError};
use crate::files::{self, TXN_INDEX_SUFFIX};
use crate::io::{DirectFile, FileSystem};
use crate::log::Log;
use crate::transactions::AbortedTxn;
use crate::txn_index;
use crate::types::Offset;

/// Decoded index files kept for read_committed readers of older data.
const CACHED_TXN_INDEXES: usize = 8;

/// A lookup retries when truncation, deletion or compaction moved the log
/// meanwhile (or moves a file it wanted), this many times at most.
const LOOKUP_ATTEMPTS: usize = 8;

/// Where a lookup finds one segment's aborts.
enum Source {
    /// Its `.txnindex`: (base, next offset).
    File(Offset, Offset),
    /// Memory, already looked up: what overlaps, and whether complete.
    Held(Vec<AbortedTxn>, bool),
}

/// A segment's index file as read.
enum IndexFile {
    Missing,
    Damaged,
    Valid(Vec<AbortedTxn>),
}

impl IndexFile {
    fn valid(self) -> Option<Vec<AbortedTxn>> {
        match self {
            IndexFile::Valid(entries) => Some(entries),
            _ => None,
        }
    }
}

/// What open found of the last segment's index file.
pub(crate) struct LastIndex {
    /// Whether it has one.
    present: bool,
    /// Its aborts below the segment's end, if the file is valid.
    held: Vec<AbortedTxn>,
    /// The rebuild's floor: the segment's base if the file is damaged.
    pub floor: Offset,
}

impl<FS: FileSystem> Log<FS> {
    /// The aborted transactions overlapping `[from, upper)` (marker at or
    /// after `from`, first record below `upper`), by marker offset: what a
    /// read_committed Fetch of that range is told.
    pub async fn aborted_transactions(
        &self,
        from: Offset,
        upper: Offset,
    ) -> Result<Vec<AbortedTxn>> {
        'attempt: for _ in 0..LOOKUP_ATTEMPTS {
            let (generation, sources) = self.abort_sources(from, upper);
            let mut found = Vec::new();
            for source in sources {
                let complete = match source {
                    Source::Held(held, complete) => {
                        found.extend(held);
                        complete
                    }
                    Source::File(base, next) => {
                        let Some(entries) = self.txn_index_of(base, next, generation).await? else {
                            // Being moved (truncation, deletion): wait for
                            // that to finish, then look again.
                            drop(self.io_lock.lock().await);
                            continue 'attempt;
                        };
                        txn_index::collect_overlapping(entries.iter(), from, upper, &mut found)
                    }
                };
                if complete {
                    break;
                }
            }
            if self.state.borrow().generation == generation {
                return Ok(found);
            }
        }
        tracing::warn!(dir = %self.dir.display(), %from, "an aborted-transaction index stays missing or damaged");
        Err(StorageError::io(
            "looking up aborted transactions",
            std::io::Error::other("an index file stays missing or damaged"),
        ))
    }

    /// The segments a lookup from `from` walks, in order, with the log
    /// generation: memory's part looked up now (a flush may move it to a
    /// file meanwhile, without a new generation), files' part later.
    fn abort_sources(&self, from: Offset, upper: Offset) -> (u64, Vec<Source>) {
        let st = self.state.borrow();
        let transactions = st.producers.transactions();
        let sources = st
            .segments
            .iter()
            .filter(|s| s.next_offset > from)
            .filter_map(|s| match s.aborts_indexed {
                Some(0) => None,
                Some(_) => Some(Source::File(s.base, s.next_offset)),
                None => {
                    let held = transactions.aborted_in(s.base.max(from), s.next_offset);
                    let mut found = Vec::new();
                    let complete =
                        txn_index::collect_overlapping(held.iter(), from, upper, &mut found);
                    Some(Source::Held(found, complete))
                }
            })
            .collect();
        (st.generation, sources)
    }

    /// Sealed segment `[base, next)`'s index file, decoded (kept for the
    /// next lookup while the log's generation stays `generation`); None if
    /// it is missing or not valid for the segment.
    async fn txn_index_of(
        &self,
        base: Offset,
        next: Offset,
        generation: u64,
    ) -> Result<Option<Rc<[AbortedTxn]>>> {
        let cached = {
            let st = self.state.borrow();
            let hit = st
                .txn_indexes
                .iter()
                .find(|(b, g, _)| *b == base && *g == generation);
            hit.map(|(_, _, entries)| entries.clone())
        };
        if cached.is_some() {
            return Ok(cached);
        }
        let Some(entries) = self.read_sealed_txn_index(base, next).await? else {
            return Ok(None);
        };
        let entries: Rc<[AbortedTxn]> = entries.into();
        let mut st = self.st();
        st.txn_indexes
            .retain(|(b, g, _)| *b != base && *g == generation);
        if st.txn_indexes.len() >= CACHED_TXN_INDEXES {
            st.txn_indexes.remove(0);
        }
        st.txn_indexes.push((base, generation, entries.clone()));
        Ok(Some(entries))
    }

    /// Sealed segment `[base, next)`'s index file, or None if it is
    /// missing, damaged, or names a marker outside the segment.
    async fn read_sealed_txn_index(
        &self,
        base: Offset,
        next: Offset,
    ) -> Result<Option<Vec<AbortedTxn>>> {
        let most = (next.0 - base.0).max(0) as u64;
        let entries = self.read_txn_index(base, most).await?.valid();
        let inside = |t: &AbortedTxn| t.marker_offset >= base && t.marker_offset < next;
        Ok(entries.filter(|entries| entries.iter().all(inside)))
    }

    /// Segment `base`'s index file; damaged if longer than `most_entries`
    /// allow (checked before it is read) or if it does not decode.
    async fn read_txn_index(&self, base: Offset, most_entries: u64) -> Result<IndexFile> {
        let path = files::segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
        let io = |e| {
            StorageError::io(
                format!("segment {base}: reading the aborted-transaction index"),
                e,
            )
        };
        let file = match self.fs.open_existing(&path).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(IndexFile::Missing),
            opened => opened.map_err(io)?,
        };
        let size = file.size().await.map_err(io)?;
        if size > txn_index::encoded_len(most_entries) {
            return Ok(IndexFile::Damaged);
        }
        let bytes = file.read_at(0, size as usize).await.map_err(io)?;
        Ok(txn_index::decode(&bytes).map_or(IndexFile::Damaged, IndexFile::Valid))
    }

    /// Writes segment `base`'s index file atomically.
    pub(crate) async fn write_txn_index(
        &self,
        base: Offset,
        aborts: &[AbortedTxn],
    ) -> std::io::Result<()> {
        let path = files::segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
        let name = path
            .file_name()
            .expect("segment file name")
            .to_string_lossy();
        files::write_atomic(&self.fs, &self.dir, &name, &txn_index::encode(aborts)).await
    }

    /// Moves segment `base`'s aborts from its index file to memory for
    /// good (they are held already): a snapshot at the log end records
    /// them, then the file goes.
    pub(crate) async fn release_txn_index(&self, base: Offset) -> Result<()> {
        self.snapshot_producers_at_end_durably().await?;
        let path = files::segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
        let io = |e| StorageError::io(format!("removing {}", path.display()), e);
        match self.fs.remove(&path).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            removed => removed.map_err(io)?,
        }
        self.fs.sync_dir(&self.dir).await.map_err(io)
    }

    /// At open, before the producer state is rebuilt: each sealed
    /// segment's index file gives its count if valid, else none (the
    /// rebuild then replays from below it and writes it); and what the
    /// last segment's file holds (see [`LastIndex`]).
    pub(crate) async fn find_txn_indexes(&self) -> Result<LastIndex> {
        let segments: Vec<(Offset, Offset)> = {
            let st = self.state.borrow();
            st.segments
                .iter()
                .map(|s| (s.base, s.next_offset))
                .collect()
        };
        let Some((&(last_base, last_next), sealed)) = segments.split_last() else {
            unreachable!("a log always has an active segment");
        };
        for &(base, next) in sealed {
            let found = self.read_sealed_txn_index(base, next).await?;
            if found.is_none() {
                tracing::warn!(dir = %self.dir.display(), %base, "missing or damaged aborted-transaction index; rebuilding it");
            }
            if let Some(segment) = self.st().segment_by_base(base) {
                segment.aborts_indexed = found.map(|f| f.len() as u32);
            }
        }
        self.read_last_txn_index(last_base, last_next).await
    }

    /// The last segment's index file at open. It has one if it was sealed
    /// and nothing followed (a crash before the next segment's file was
    /// made) or a truncation into it was cut short: its aborts below the
    /// segment's end are facts to hold in memory, as the active segment's
    /// are; damaged, the rebuild starts from below the segment.
    async fn read_last_txn_index(&self, base: Offset, next: Offset) -> Result<LastIndex> {
        // Every abort needs a marker batch of its own.
        let most = self.config.segment_bytes / HEADER_BYTES as u64 + 1;
        let file = self.read_txn_index(base, most).await?;
        let floor = match file {
            IndexFile::Damaged => base,
            _ => self.log_end(),
        };
        let present = !matches!(file, IndexFile::Missing);
        let held = file.valid().unwrap_or_default().into_iter();
        Ok(LastIndex {
            present,
            held: held.filter(|t| t.marker_offset < next).collect(),
            floor,
        })
    }

    /// After the rebuild at open: holds the last segment's aborts its file
    /// had and releases the file (it is the active segment).
    pub(crate) async fn hold_last_txn_index(&self, last: LastIndex) -> Result<()> {
        if !last.present {
            return Ok(());
        }
        self.hold_aborts(last.held);
        let base = self.state.borrow().active().base;
        self.release_txn_index(base).await
    }

    /// Holds aborts read from an index file in memory (those not below
    /// the log start), over what a replay found for the same markers: the
    /// file was written with everything known, while a replay from the log
    /// start cannot see the first batch of a transaction begun below it.
    pub(crate) fn hold_aborts(&self, held: Vec<AbortedTxn>) {
        let mut st = self.st();
        let log_start = st.log_start;
        let transactions = st.producers.transactions_mut();
        for txn in held.into_iter().filter(|t| t.marker_offset >= log_start) {
            transactions.restore_aborted(txn);
        }
    }

    /// Before a truncation to `end` makes segment `base` the active one:
    /// its aborts below `end`, from its index file or from memory.
    pub(crate) async fn aborts_kept_by_cut(&self, base: Offset, end: Offset) -> Vec<AbortedTxn> {
        let (next, held) = {
            let st = self.state.borrow();
            let segment = st.segments.iter().find(|s| s.base == base);
            let next = segment
                .filter(|s| s.aborts_indexed.is_some())
                .map(|s| s.next_offset);
            (next, st.producers.transactions().aborted_in(base, end))
        };
        let Some(next) = next else {
            return held;
        };
        let found = match self.read_sealed_txn_index(base, next).await {
            Ok(Some(found)) => found,
            unreadable => {
                let error = unreadable.err().map(|e| e.to_string());
                tracing::warn!(dir = %self.dir.display(), %base, ?error, "truncating into a segment whose aborted-transaction index is unreadable; its aborts come from a replay");
                Vec::new()
            }
        };
        found
            .into_iter()
            .filter(|t| t.marker_offset < end)
            .collect()
    }

    /// The latest offset a producer state rebuild may start from: the log
    /// end, or the base of the first segment other than the active one
    /// whose aborts are in no file (missing or damaged at open), so the
    /// replay finds them.
    pub(crate) fn unindexed_floor(&self) -> Offset {
        let st = self.state.borrow();
        let sealed = &st.segments[..st.segments.len().saturating_sub(1)];
        let unindexed = sealed.iter().find(|s| s.aborts_indexed.is_none());
        unindexed.map_or(st.log_end, |s| s.base.min(st.log_end))
    }

    /// After a rebuild: writes the index file of each segment other than
    /// the active one that has none, from the aborts the rebuild found,
    /// and lets go of the aborts memory holds for segments with a file (a
    /// snapshot restores those too).
    pub(crate) async fn settle_txn_indexes(&self) -> Result<()> {
        let missing: Vec<(Offset, Vec<AbortedTxn>)> = {
            let st = self.state.borrow();
            let sealed = &st.segments[..st.segments.len().saturating_sub(1)];
            let transactions = st.producers.transactions();
            sealed
                .iter()
                .filter(|s| s.aborts_indexed.is_none() && s.writer.is_none())
                .map(|s| (s.base, transactions.aborted_in(s.base, s.next_offset)))
                .collect()
        };
        for (base, aborts) in missing {
            self.write_txn_index(base, &aborts).await.map_err(|e| {
                StorageError::io(
                    format!("segment {base}: writing the aborted-transaction index"),
                    e,
                )
            })?;
            if let Some(segment) = self.st().segment_by_base(base) {
                segment.aborts_indexed = Some(aborts.len() as u32);
            }
        }
        let mut st = self.st();
        let st = &mut *st;
        for segment in st.segments.iter().filter(|s| s.aborts_indexed.is_some()) {
            let transactions = st.producers.transactions_mut();
            transactions.forget_aborted_in(segment.base, segment.next_offset);
        }
        Ok(())
    }
}

/// Whether `name` is an aborted-transaction index whose segment is gone
/// (`logs`: the names of the segment files).
pub(crate) fn is_orphan_txn_index(name: &str, logs: &HashSet<&str>) -> bool {
    name.strip_suffix(TXN_INDEX_SUFFIX)
        .is_some_and(|stem| !logs.contains(stem))
}
