//! The partition log: appends with group commit, the three positions
//! (log end, flushed, high watermark) and the failed state.

use std::cell::{RefCell, RefMut};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::BytesMut;

use crate::batch::{self, BatchHeader, CountRule};
pub use crate::cache::ReadOutcome;
use crate::cache::{BatchCache, CacheShare};
use crate::epochs::{EpochCache, EpochEnd};
use crate::error::{BatchError, Result, StorageError};
use crate::files;
use crate::frame_memory::FrameMemory;
use crate::io::{DirectFile, FileSystem};
use crate::io_lock::IoLock;
use crate::markers::{self, Marker, MarkerKind};
use crate::producers::{Check, ProducerState};
use crate::read_ahead::{ReadAhead, Window};
use crate::segment::Segment;
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// Tunables of one partition log. Every field has a bound; see [`LogConfig::check`].
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Roll to a new segment beyond this many bytes (at most 4 GiB: positions are 32-bit).
    pub segment_bytes: u64,
    /// Roll to a new segment once the active one is this old.
    pub segment_ms: i64,
    /// Add a sparse index entry every this many bytes.
    pub index_interval_bytes: u64,
    /// The largest batch accepted.
    pub max_batch_bytes: usize,
    /// The largest single direct write.
    pub write_chunk_bytes: usize,
    /// Appends wait for a flush once this many bytes await one.
    pub max_pending_bytes: usize,
    /// Disk space is reserved ahead of the writes in steps of as much as
    /// the segment holds already, at least 1 MiB and at most this
    /// (`flush`): a partition written slowly reserves about its own
    /// size, not this much per partition.
    pub preallocate_bytes: u64,
    /// Durable batches kept in memory for readers.
    pub cache_budget_bytes: usize,
    /// Disk reads fetch at least this much, for the next sequential read.
    pub read_ahead_bytes: usize,
    /// On one node the high watermark follows the flushed offset; with
    /// replication the owner sets it.
    pub high_watermark_follows_flush: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            max_batch_bytes: 1_048_588, // Kafka's message.max.bytes default
            write_chunk_bytes: 1 << 20,
            max_pending_bytes: 16 << 20,
            preallocate_bytes: 32 << 20,
            cache_budget_bytes: 32 << 20,
            read_ahead_bytes: 256 << 10,
            high_watermark_follows_flush: true,
        }
    }
}

impl LogConfig {
    /// Checks the limits against each other.
    pub fn check(&self) -> Result<()> {
        let fail = |why: &str| Err(StorageError::InvalidArgument(why.to_string()));
        if self.segment_bytes > u32::MAX as u64 {
            return fail("segment_bytes must fit 32-bit index positions");
        }
        if (self.segment_bytes as usize) < self.max_batch_bytes {
            return fail("segment_bytes must hold the largest batch");
        }
        if self.write_chunk_bytes < 16 * 1024
            || !self
                .write_chunk_bytes
                .is_multiple_of(crate::io::BLOCK_BYTES)
        {
            return fail("write_chunk_bytes must be whole blocks, at least 16 KiB");
        }
        if self.max_pending_bytes < self.max_batch_bytes {
            return fail("max_pending_bytes must hold the largest batch");
        }
        if self.index_interval_bytes == 0 || self.segment_ms <= 0 {
            return fail("index_interval_bytes and segment_ms must be positive");
        }
        Ok(())
    }
}

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// First offset assigned.
    pub base_offset: Offset,
    /// Last offset assigned.
    pub last_offset: Offset,
    /// The batch's largest timestamp.
    pub max_timestamp: TimestampMs,
    /// The batch was an idempotent producer's retry of one already in the
    /// log: nothing was appended, and the offsets are the original's.
    pub duplicate: bool,
}

/// The mutable state of a log, borrowed briefly and never across an await.
pub(crate) struct State<F: DirectFile> {
    pub segments: Vec<Segment<F>>,
    pub log_start: Offset,
    pub log_end: Offset,
    pub flushed: Offset,
    pub high_watermark: Offset,
    pub cache: BatchCache,
    pub read_ahead: Option<ReadAhead>,
    /// The reads planned ahead of sequential readers, one window each.
    pub windows: Vec<Window<F>>,
    /// Reads that stopped inside a segment, counted (windows' ages).
    pub stopped_reads: u64,
    pub failed: Option<String>,
    pub pending_bytes: usize,
    /// Bumped by truncation, deletion and compaction, so a read that awaited
    /// I/O meanwhile starts over.
    pub generation: u64,
    /// Bumped by the changes that flush everything themselves first and
    /// may reset the flushed offset (truncation, restart, compaction): a
    /// flush whose fdatasync overlapped one publishes nothing. Deletions
    /// of whole segments below the start leave it: they flush nothing, so
    /// a flush they overlapped must still publish what it synced.
    pub rewrites: u64,
    pub stats: LogStats,
    /// Every offset below this was handed to a flush's writes.
    pub taken: Offset,
    /// Where each leader epoch begins.
    pub epochs: EpochCache,
    /// The epochs as last checkpointed: a flush whose data follows a
    /// change writes the checkpoint first, so every durable batch's epoch
    /// is in it.
    pub epochs_checkpointed: EpochCache,
    /// Idempotent producers' state as of the log end.
    pub producers: ProducerState,
    /// Snapshots of `producers` taken when segments rolled (offset and
    /// bytes, oldest first), written by the next flush once the data below
    /// them is durable: every roll gets one (tiered storage uploads each
    /// sealed segment with the snapshot at its end).
    pub producer_snapshot_due: Vec<(Offset, Vec<u8>)>,
    /// Snapshots at or above this offset are not pruned (tiered storage
    /// uploads each sealed segment with the snapshot at its end: they are
    /// kept until uploaded). Not persisted: the uploader sets it each pass.
    pub producer_snapshots_kept_from: Option<Offset>,
    /// Sealed segments' aborted-transaction indexes, decoded for readers.
    pub txn_indexes: crate::txn_index::TxnIndexCache,
}

/// The upper bounds, in seconds, of [`LogStats::flush_buckets`]; the
/// last bucket counts the flushes above them all.
pub const FLUSH_BUCKET_BOUNDS_SECONDS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];

/// The bucket of [`LogStats::flush_buckets`] a flush of `elapsed` counts in.
pub fn flush_bucket(elapsed: std::time::Duration) -> usize {
    let seconds = elapsed.as_secs_f64();
    FLUSH_BUCKET_BOUNDS_SECONDS
        .iter()
        .position(|&bound| seconds <= bound)
        .unwrap_or(FLUSH_BUCKET_BOUNDS_SECONDS.len())
}

/// Counters of a log's write path, for metrics and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Flushes that wrote data (each one write burst and one fdatasync).
    pub flushes: u64,
    /// Those flushes by the time from their first write (a new segment's
    /// creation and preallocation included) to being durable (a sealed
    /// segment's indexes too), within each of
    /// [`FLUSH_BUCKET_BOUNDS_SECONDS`] (not cumulative), then above the
    /// last: what every acks=all answer waits for, write stalls included
    /// (fdatasync's own time hides them).
    pub flush_buckets: [u64; FLUSH_BUCKET_BOUNDS_SECONDS.len() + 1],
    /// Total nanoseconds of those flushes' writes and fdatasync.
    pub flush_nanos: u64,
    /// Bytes of batches those flushes made durable.
    pub flushed_bytes: u64,
    /// Direct writes issued (a flush issues one per chunk).
    pub direct_writes: u64,
    /// Batches appended (a flush's group-commit size is these per flush).
    pub appended_batches: u64,
    /// Flushes made durable by the shard's journal instead of an fdatasync.
    pub journaled_flushes: u64,
    /// Total nanoseconds those flushes spent writing their segment.
    pub journaled_write_nanos: u64,
    /// Total nanoseconds they then waited for the journal.
    pub journaled_wait_nanos: u64,
    /// fdatasync calls of flushes, and the time they took.
    pub fdatasyncs: u64,
    /// Total nanoseconds in those fdatasync calls.
    pub fdatasync_nanos: u64,
    /// Reads served from the in-memory tail, and from the files.
    pub cache_reads: u64,
    /// See `cache_reads`.
    pub disk_reads: u64,
    /// Disk reads planned ahead of a sequential reader, and the reads
    /// that found their bytes in one.
    pub prefetch_reads: u64,
    /// See `prefetch_reads`.
    pub prefetch_hits: u64,
}

impl<F: DirectFile> State<F> {
    pub fn active(&self) -> &Segment<F> {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    pub fn active_mut(&mut self) -> &mut Segment<F> {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }

    /// The log's bytes moved (truncation, deletion, compaction): reads in
    /// flight start over, and what was read or planned ahead is dropped
    /// (with it the files it holds open).
    pub fn bytes_moved(&mut self) {
        self.generation += 1;
        self.read_ahead = None;
        self.windows.clear();
    }

    /// The log was rewritten after a flush of everything (truncation,
    /// restart, compaction): as [`State::bytes_moved`], and flushes
    /// whose fdatasync overlapped it publish nothing.
    pub fn rewritten(&mut self) {
        self.rewrites += 1;
        self.bytes_moved();
    }

    /// Index of the segment holding `offset` (the last with base <= offset).
    pub fn segment_index(&self, offset: Offset) -> usize {
        self.segments
            .partition_point(|s| s.base <= offset)
            .saturating_sub(1)
    }

    pub fn segment_by_base(&mut self, base: Offset) -> Option<&mut Segment<F>> {
        let i = self.segments.partition_point(|s| s.base < base);
        self.segments.get_mut(i).filter(|s| s.base == base)
    }
}

/// A partition log: a directory of segments on one shard.
///
/// Shared as `Rc<Log>` by the tasks of its shard. Appends are synchronous
/// once admitted; all file I/O happens in flushes and maintenance, which
/// take `io_lock` so at most one runs at a time.
pub struct Log<FS: FileSystem> {
    pub(crate) fs: FS,
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) clock: Rc<dyn Fn() -> TimestampMs>,
    pub(crate) state: RefCell<State<FS::File>>,
    pub(crate) io_lock: IoLock,
    /// The shard's journal, if small flushes go there (`log_journal`).
    pub(crate) journal: RefCell<Option<Rc<crate::journal::attachment::LogJournal<FS>>>>,
}

impl<FS: FileSystem> Log<FS> {
    pub(crate) fn st(&self) -> RefMut<'_, State<FS::File>> {
        self.state.borrow_mut()
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The batch with the largest timestamp among those below `bound`,
    /// as its segments' bookkeeping knows it (ListOffsets' -3): its base
    /// offset and that timestamp. A segment whose newest-timestamp batch
    /// is at or past `bound` is passed over.
    pub fn max_timestamp_below(&self, bound: Offset) -> Option<(Offset, TimestampMs)> {
        let st = self.state.borrow();
        st.segments
            .iter()
            .filter(|s| !s.is_empty() && s.offset_of_max_timestamp < bound)
            .map(|s| (s.offset_of_max_timestamp, s.max_timestamp))
            // The first of equal timestamps, as Kafka answers.
            .max_by_key(|(offset, ts)| (*ts, std::cmp::Reverse(*offset)))
    }

    /// The largest batch it takes (and a reader may meet).
    pub fn max_batch_bytes(&self) -> usize {
        self.config.max_batch_bytes
    }

    /// The first offset still in the log.
    pub fn log_start(&self) -> Offset {
        self.state.borrow().log_start
    }

    /// The offset the next append gets.
    pub fn log_end(&self) -> Offset {
        self.state.borrow().log_end
    }

    /// Every offset below this is on disk and fdatasync'd.
    pub fn flushed(&self) -> Offset {
        self.state.borrow().flushed
    }

    /// Readers see only offsets below this.
    pub fn high_watermark(&self) -> Offset {
        self.state.borrow().high_watermark
    }

    /// Where each leader epoch begins in this log.
    pub fn epochs(&self) -> EpochCache {
        self.state.borrow().epochs.clone()
    }

    /// The end offset of `epoch` here (OffsetForLeaderEpoch's answer):
    /// the largest epoch at or below it and where the next one starts, or
    /// the log end for the latest; None if the log holds no epoch that old.
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> EpochEnd {
        let st = self.state.borrow();
        st.epochs.end_offset_for(epoch, st.log_end)
    }

    /// Sets the high watermark (the replication layer owns it).
    pub fn set_high_watermark(&self, offset: Offset) {
        let mut st = self.st();
        assert!(
            offset <= st.log_end,
            "high watermark {offset} above log end {}",
            st.log_end
        );
        st.high_watermark = offset.max(st.log_start);
        let hw = st.high_watermark;
        st.producers.transactions_mut().on_high_watermark(hw);
    }

    /// The last stable offset: below it every record belongs to a decided
    /// transaction or to none (what read_committed consumers read up to).
    pub fn last_stable_offset(&self) -> Offset {
        self.last_stable_offset_from(self.log_start())
    }

    /// The last stable offset where records from `readable_start` on can
    /// still be read: tiered storage's remote log holds those below the
    /// log start, so a transaction open from there holds it below.
    pub fn last_stable_offset_from(&self, readable_start: Offset) -> Offset {
        let st = self.state.borrow();
        // Retention stops at the high watermark, not at an open
        // transaction: what it deleted is not unstable any more.
        let lso = st.producers.transactions().last_stable(st.high_watermark);
        lso.max(readable_start.min(st.log_start))
    }

    /// Number of segments, the active one included.
    pub fn segment_count(&self) -> usize {
        self.state.borrow().segments.len()
    }

    /// Bytes appended over all segments.
    pub fn size_bytes(&self) -> u64 {
        self.state.borrow().segments.iter().map(|s| s.size).sum()
    }

    /// Shares the batch cache's budget with the other logs of `share`
    /// (see [`CacheShare`]).
    pub fn share_cache(&self, share: Rc<CacheShare>) {
        self.st().cache.set_share(share);
    }

    /// The share's place of this log's oldest cached batch that could be
    /// evicted, if any (see [`CacheShare`]).
    pub fn oldest_cached(&self) -> Option<u64> {
        let st = self.state.borrow();
        st.cache.oldest_evictable(st.flushed)
    }

    /// Evicts the cached durable batches older than `seq` in the share's
    /// order, down to the log's own budget and while the share holds more
    /// than `share_down_to`; returns the bytes evicted.
    pub fn evict_cached_before(&self, seq: u64, share_down_to: usize) -> usize {
        let mut st = self.st();
        let flushed = st.flushed;
        st.cache.evict_before(flushed, seq, share_down_to)
    }

    /// Bytes of batches the cache holds.
    pub fn cache_bytes(&self) -> usize {
        self.state.borrow().cache.bytes()
    }

    /// Write-path counters.
    pub fn stats(&self) -> LogStats {
        self.state.borrow().stats
    }

    /// The failure that stopped this log, if any.
    pub fn failure(&self) -> Option<String> {
        self.state.borrow().failed.clone()
    }

    pub(crate) fn failed_error(&self, reason: &str) -> StorageError {
        StorageError::LogFailed {
            dir: self.dir.display().to_string(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn check_not_failed(&self, st: &State<FS::File>) -> Result<()> {
        match &st.failed {
            Some(reason) => Err(self.failed_error(reason)),
            None => Ok(()),
        }
    }

    /// Puts the log in the failed state after a write-path error: after an
    /// fdatasync error the page and device state are unknown, so retrying
    /// would prove nothing. The log acknowledges nothing more.
    pub(crate) fn fail(&self, context: &str, err: std::io::Error) -> StorageError {
        let reason = format!("{context}: {err}");
        tracing::error!(dir = %self.dir.display(), %reason, "partition log failed");
        let mut st = self.st();
        st.failed.get_or_insert(reason.clone());
        self.failed_error(&reason)
    }

    /// Marks a sequence of file operations that must run to its end: if the
    /// future running it is dropped half-way, memory and disk are out of
    /// step, so the log fails rather than guess. Callers that may be
    /// cancelled (a client hanging up) must run flushes in their own task.
    pub(crate) fn critical(&self, what: &'static str) -> Critical<'_, FS> {
        Critical {
            log: self,
            what,
            finished: false,
        }
    }

    /// Validates a producer's batch, assigns its offsets from the log end,
    /// stamps `epoch`, and buffers it for the next flush.
    ///
    /// Returns once the batch is in memory and readable up to the high
    /// watermark; await [`Log::wait_flushed`] for durability. Waits for a
    /// flush first if too many bytes already await one.
    pub async fn append(&self, batch: BytesMut, epoch: LeaderEpoch) -> Result<AppendInfo> {
        let valid = batch::ValidBatch::new(batch, self.config.max_batch_bytes)?;
        self.append_valid(valid, epoch).await
    }

    /// [`Log::append`] of a batch already validated; only its size is
    /// checked again, against this log's limit.
    pub async fn append_valid(
        &self,
        batch: batch::ValidBatch,
        epoch: LeaderEpoch,
    ) -> Result<AppendInfo> {
        self.append_valid_while(batch, epoch, || true).await
    }

    /// [`Log::append_valid`] for a caller whose right to append can end
    /// while the batch waits for room (back-pressure): a leader deposed
    /// meanwhile must not append in its old epoch, after its log may have
    /// been truncated to the new leader's and the client's retry gone
    /// there. `may_append` is asked after the last wait, with nothing
    /// able to run between it and the append; false refuses the batch
    /// ([`StorageError::Fenced`]) and appends nothing.
    pub async fn append_valid_while(
        &self,
        batch: batch::ValidBatch,
        epoch: LeaderEpoch,
        may_append: impl Fn() -> bool,
    ) -> Result<AppendInfo> {
        if batch.len() > self.config.max_batch_bytes {
            return Err(BatchError::TooLarge {
                len: batch.len(),
                max: self.config.max_batch_bytes,
            }
            .into());
        }
        let (bytes, header, frame) = batch.into_parts();
        self.admit().await?;
        if !may_append() {
            return Err(StorageError::Fenced);
        }
        self.append_validated((bytes, frame), header, Some(epoch))
    }

    /// Appends a batch that already carries its offsets (a follower copying
    /// its leader). Its base offset must be at or past the log end.
    pub async fn append_replica(&self, batch: BytesMut) -> Result<AppendInfo> {
        let header = batch::validate(&batch, self.config.max_batch_bytes, CountRule::AtMost)?;
        let log_end = self.log_end();
        if header.base_offset < log_end {
            return Err(StorageError::InvalidArgument(format!(
                "replica batch at {} below log end {log_end}",
                header.base_offset
            )));
        }
        self.admit().await?;
        self.append_validated((batch, None), header, None)
    }

    /// Applies back-pressure: waits while too many bytes await a flush.
    async fn admit(&self) -> Result<()> {
        loop {
            let (pending, log_end) = {
                let st = self.state.borrow();
                self.check_not_failed(&st)?;
                (st.pending_bytes, st.log_end)
            };
            if pending <= self.config.max_pending_bytes {
                return Ok(());
            }
            self.wait_flushed(log_end).await?;
        }
    }

    /// Appends `batch` (with the frame it keeps alive, if any).
    fn append_validated(
        &self,
        (mut batch, frame): (BytesMut, Option<FrameMemory>),
        header: BatchHeader,
        epoch: Option<LeaderEpoch>,
    ) -> Result<AppendInfo> {
        let now = (self.clock)();
        let mut st = self.st();
        self.check_not_failed(&st)?;
        let producer = header.producer();
        if let (Some(producer), Some(_)) = (&producer, epoch) {
            // A leader checks an idempotent producer's batch before it gets
            // offsets (no await since: nothing can interleave).
            if let Check::Duplicate(original) = st.producers.check(producer)? {
                return Ok(AppendInfo {
                    base_offset: original.first_offset,
                    last_offset: original.last_offset,
                    max_timestamp: header.max_timestamp,
                    duplicate: true,
                });
            }
            let transactions = st.producers.transactions();
            transactions.check(producer.producer_id, header.is_transactional())?;
        }
        let marker = transaction_marker(&batch, &header)?;
        if let (Some(marker), Some(_)) = (marker, epoch) {
            // A leader checks a coordinator's marker as Kafka does: an
            // older producer epoch or an older coordinator is refused.
            let (producer_id, producer_epoch) = (header.producer_id, header.producer_epoch);
            st.producers
                .check_marker(producer_id, producer_epoch, marker.coordinator_epoch)?;
        }
        let base = match epoch {
            Some(epoch) => {
                let base = st.log_end;
                batch::patch(&mut batch, base, epoch);
                base
            }
            None => header.base_offset,
        };
        let header = BatchHeader {
            base_offset: base,
            ..header
        };
        // A leader's append stamps its epoch; a replica's keeps the batch's.
        st.epochs.assign(epoch.unwrap_or(header.leader_epoch), base);
        if st.active().should_roll(
            &header,
            base,
            now,
            self.config.segment_bytes,
            self.config.segment_ms,
        ) {
            self.roll_locked(&mut st, base);
        }
        let data = batch.freeze();
        let fs = &self.fs;
        let segment = st.active_mut();
        segment.record_batch(&header, now, self.config.index_interval_bytes);
        segment
            .writer
            .as_mut()
            .expect("the active segment has a writer")
            .push(&data, |n| fs.alloc(n));
        st.pending_bytes += data.len();
        st.stats.appended_batches += 1;
        st.cache.push(base, header.next_offset(), data, frame);
        st.log_end = header.next_offset();
        if let Some(producer) = &producer {
            st.producers
                .record_batch(producer, base, header.max_timestamp, now);
        }
        record_transactional(&mut st.producers, &header, base, marker, now);
        Ok(AppendInfo {
            base_offset: base,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
            duplicate: false,
        })
    }

    /// Seals the active segment and starts a new one at `base`. The next
    /// flush writes the sealed segment's tail, indexes and trims it.
    pub(crate) fn roll_locked(&self, st: &mut State<FS::File>, base: Offset) {
        // The producer state as of the new segment's base: restarts and
        // truncations replay from the newest such snapshot, not the start.
        let snapshot = st.producers.encode(base);
        st.producer_snapshot_due.push((base, snapshot));
        st.active_mut().sealed = true;
        let fresh = Segment::new_active(base, &self.fs, self.config.write_chunk_bytes);
        st.segments.push(fresh);
    }

    /// Seals the active segment now if it holds anything (tests, admin).
    pub fn roll(&self) {
        let mut st = self.st();
        if !st.active().is_empty() {
            let base = st.log_end;
            self.roll_locked(&mut st, base);
        }
    }

    /// Flushes everything, writes the active segment's indexes, trims its
    /// file and marks the shutdown clean, so the next open skips the full
    /// scan of the active segment.
    pub async fn close(&self) -> Result<()> {
        let _io = self.io_lock.lock().await;
        self.flush_for_rewrite().await?;
        let (base, file, size, index, time_index) = {
            let st = self.state.borrow();
            let active = st.active();
            (
                active.base,
                active.file.clone(),
                active.size,
                active.index.encode(),
                active.final_time_index().encode(),
            )
        };
        if let Some(file) = file {
            let result = async {
                self.write_indexes(base, &index, &time_index).await?;
                file.truncate(size).await?;
                file.fdatasync().await
            }
            .await;
            result.map_err(|e| self.fail("closing active segment", e))?;
        }
        self.snapshot_producers_at_end().await;
        files::write_atomic(&self.fs, &self.dir, files::CLEAN_SHUTDOWN_FILE, b"")
            .await
            .map_err(|e| StorageError::io("writing clean shutdown marker", e))
    }
}

/// See [`Log::critical`].
pub(crate) struct Critical<'a, FS: FileSystem> {
    log: &'a Log<FS>,
    what: &'static str,
    finished: bool,
}

impl<FS: FileSystem> Critical<'_, FS> {
    /// The sequence ran to its end (successfully or with its error handled).
    pub fn finish(mut self) {
        self.finished = true;
    }
}

impl<FS: FileSystem> Drop for Critical<'_, FS> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // try_borrow: this may run while unwinding from a panic.
        if let Ok(mut st) = self.log.state.try_borrow_mut() {
            if st.failed.is_none() {
                let reason = format!("{} was cancelled before it completed", self.what);
                tracing::error!(dir = %self.log.dir.display(), %reason, "partition log failed");
                st.failed = Some(reason);
            }
        }
        self.log.io_lock.notify();
    }
}

/// The marker a transaction's control batch holds (None for any other
/// batch); a malformed one is refused before it gets an offset.
fn transaction_marker(batch: &[u8], header: &BatchHeader) -> Result<Option<Marker>> {
    match header.is_control() && header.is_transactional() && header.producer_id >= 0 {
        true => Ok(Some(markers::parse(batch, *header)?)),
        false => Ok(None),
    }
}

/// Records an appended batch at `base` in the partition's transactions: a
/// transactional batch opens its producer's transaction, a marker ends it
/// (and sets the producer's epoch and its coordinator's).
pub(crate) fn record_transactional(
    producers: &mut ProducerState,
    header: &BatchHeader,
    base: Offset,
    marker: Option<Marker>,
    now: TimestampMs,
) {
    let (producer_id, epoch) = (header.producer_id, header.producer_epoch);
    match marker {
        Some(marker) => {
            producers.record_marker(producer_id, epoch, marker.coordinator_epoch, base, now);
            let commit = marker.kind == MarkerKind::Commit;
            producers
                .transactions_mut()
                .record_marker(producer_id, base, commit);
        }
        None if producer_id >= 0 && !header.is_control() => {
            let transactions = producers.transactions_mut();
            transactions.record_batch(producer_id, base, header.is_transactional());
        }
        None => {}
    }
}
