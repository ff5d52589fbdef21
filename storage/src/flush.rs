//! Making appended data durable: group commit, with the next flush's
//! writes overlapping the previous flush's fdatasync.
//!
//! A flush takes every segment's buffered chunks under the I/O lock and
//! writes them. If it seals no segment it then releases the lock and
//! fdatasyncs outside it, so the next flush can already write while the
//! device syncs. Publication is safe in any order: a flush's fdatasync is
//! issued after all of its writes and all earlier flushes' writes have
//! completed, so it covers every offset below its target; the flushed
//! offset only grows (`max`), and a publication made stale by truncation,
//! restart or compaction (`rewrites` changed) is dropped: those ran a full
//! flush of their own under the lock. A deletion of segments below the
//! start flushes nothing: a flush it overlapped still publishes (its
//! deleted segments are skipped).

use std::rc::Rc;

use bytes::Bytes;

use crate::error::{Result, StorageError};
use crate::files::{self, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use crate::io::{align_up, DirectFile, FileSystem};
use crate::io_lock::IoGuard;
use crate::journal::entry::EntryTarget;
use crate::log::Log;
use crate::transactions::AbortedTxn;
use crate::types::Offset;
use crate::write_buffer::PendingWrite;

/// What one flush does to one segment, taken under the state borrow.
struct FlushWork<F: DirectFile> {
    base: Offset,
    file: Option<Rc<F>>,
    pending: Option<PendingWrite<F::Buf>>,
    allocated: u64,
    /// Set when the segment is sealed: finish it after the sync.
    seal: Option<Seal>,
}

/// What finishing a sealed segment writes: its indexes, and the size to trim to.
struct Seal {
    size: u64,
    index: Vec<u8>,
    time_index: Vec<u8>,
    /// Its aborted transactions (moved from memory to its `.txnindex`).
    aborts: Vec<AbortedTxn>,
}

/// A segment written by a flush, awaiting (or past) its fdatasync.
struct Written<F> {
    base: Offset,
    file: Rc<F>,
    /// The durable end of its data once synced (None: nothing was written).
    end: Option<u64>,
    /// Sealed: how many aborted transactions its `.txnindex` now holds.
    indexed_aborts: Option<u32>,
}

/// Everything a flush took, with the log end and rewrite count it saw.
struct Taken<F: DirectFile> {
    target: Offset,
    rewrites: u64,
    work: Vec<FlushWork<F>>,
    /// An earlier flush's writes await their fdatasync: this flush must
    /// not publish without one of its own (which covers them, as they
    /// completed before this flush took the lock).
    earlier_unsynced: bool,
}

type IoFailure = (&'static str, std::io::Error);

fn nanos_between(from: std::time::Instant, to: std::time::Instant) -> u64 {
    to.duration_since(from).as_nanos() as u64
}

impl<FS: FileSystem> Log<FS> {
    /// Returns once every offset below `offset` is durable.
    ///
    /// Group commit: the first waiter flushes; waiters that arrive while a
    /// flush is in flight sleep until it makes progress, then find their
    /// data durable, or being synced, or one of them flushes everything
    /// appended meanwhile in one burst of writes and one fdatasync.
    pub async fn wait_flushed(&self, offset: Offset) -> Result<()> {
        loop {
            let being_synced = {
                let st = self.state.borrow();
                if st.flushed >= offset {
                    return Ok(());
                }
                self.check_not_failed(&st)?;
                if offset > st.log_end {
                    return Err(StorageError::InvalidArgument(format!(
                        "waiting for {offset} beyond log end {}",
                        st.log_end
                    )));
                }
                st.taken >= offset
            };
            if being_synced {
                // Written by a flush whose fdatasync is in flight.
                self.io_lock.progress().await;
                continue;
            }
            match self.io_lock.try_lock() {
                Some(io) => self.flush_pipelined(io).await?,
                None => self.io_lock.progress().await,
            }
        }
    }

    /// Makes everything appended so far durable, and finishes a sealed
    /// segment (its indexes, the producer snapshot at its end) even when
    /// no data followed its roll.
    pub async fn flush(&self) -> Result<()> {
        let end = self.log_end();
        self.wait_flushed(end).await?;
        let seal_pending = {
            let st = self.state.borrow();
            let sealing = st.segments.iter().any(|s| s.sealed && s.writer.is_some());
            sealing || !st.producer_snapshot_due.is_empty()
        };
        if seal_pending {
            let _io = self.io_lock.lock().await;
            self.flush_locked().await?;
        }
        Ok(())
    }

    /// A flush that releases the I/O lock before its fdatasync, unless it
    /// seals a segment (then the lock is held throughout).
    async fn flush_pipelined(&self, io: IoGuard<'_>) -> Result<()> {
        self.checkpoint_epochs().await?;
        let taken = self.take_work()?;
        if taken.work.iter().any(|w| w.seal.is_some()) {
            let result = self.finish_locked(taken).await;
            drop(io);
            return result;
        }
        let critical = self.critical("a flush");
        let Taken {
            target,
            rewrites,
            work,
            earlier_unsynced,
        } = taken;
        // A journal entry covers only its own bytes: with an earlier
        // flush's fdatasync still running, publishing this one would
        // acknowledge that flush's bytes before they are durable.
        let journal_entry = (!earlier_unsynced)
            .then(|| self.journal_entry_of(&work))
            .flatten();
        let flush_started = std::time::Instant::now();
        let mut written = Vec::with_capacity(work.len());
        for item in work {
            let segment = self
                .write_segment(item)
                .await
                .map_err(|(what, e)| self.fail(what, e))?;
            written.push(segment);
        }
        if let Some((entry_target, data)) = journal_entry {
            // The writes completed; the journal makes them durable, or
            // refuses and the fdatasync below does.
            let wait_started = std::time::Instant::now();
            if self.journal_flush(entry_target, data).await {
                drop(io);
                {
                    let stats = &mut self.st().stats;
                    stats.journaled_flushes += 1;
                    stats.journaled_write_nanos += nanos_between(flush_started, wait_started);
                    stats.journaled_wait_nanos += wait_started.elapsed().as_nanos() as u64;
                }
                self.count_flush(flush_started, &written);
                self.publish(target, rewrites, &written);
                critical.finish();
                self.io_lock.notify();
                self.checkpoint_journal_if_due().await;
                return Ok(());
            }
        }
        drop(io);
        for segment in &written {
            let started = std::time::Instant::now();
            let synced = segment.file.fdatasync().await;
            synced.map_err(|e| self.fail("fdatasync", e))?;
            self.count_fdatasync(started);
        }
        self.count_flush(flush_started, &written);
        self.publish(target, rewrites, &written);
        critical.finish();
        self.io_lock.notify();
        Ok(())
    }

    /// One whole flush under the I/O lock, which the caller holds: takes
    /// every segment's pending bytes, writes them, syncs, finishes sealed
    /// segments, then publishes the new flushed offset.
    pub(crate) async fn flush_locked(&self) -> Result<()> {
        self.checkpoint_epochs().await?;
        let taken = self.take_work()?;
        self.finish_locked(taken).await
    }

    async fn finish_locked(&self, taken: Taken<FS::File>) -> Result<()> {
        let Taken {
            target,
            rewrites,
            work,
            earlier_unsynced: _,
        } = taken;
        let critical = self.critical("a flush");
        let flush_started = std::time::Instant::now();
        let mut written = Vec::with_capacity(work.len());
        for mut item in work {
            let seal = item.seal.take();
            let mut segment = self
                .write_segment(item)
                .await
                .map_err(|(what, e)| self.fail(what, e))?;
            segment.indexed_aborts = seal.as_ref().map(|s| s.aborts.len() as u32);
            let synced = self.sync_segment(&segment, seal).await;
            synced.map_err(|(what, e)| self.fail(what, e))?;
            written.push(segment);
        }
        // A roll left a producer snapshot due; the data below it is now durable.
        self.write_due_producer_snapshot(target).await;
        self.count_flush(flush_started, &written);
        self.publish(target, rewrites, &written);
        critical.finish();
        self.io_lock.notify();
        Ok(())
    }

    /// Writes the leader epoch checkpoint (atomically, durably) if the
    /// epochs changed, before a flush takes any data: every durable batch's
    /// epoch is then in the checkpoint. Appends arriving during the write
    /// may change them again, hence the loop; nothing is taken until the
    /// checkpoint is current, so a flush cancelled here loses nothing.
    async fn checkpoint_epochs(&self) -> Result<()> {
        loop {
            let changed = {
                let st = self.state.borrow();
                (st.epochs != st.epochs_checkpointed).then(|| st.epochs.clone())
            };
            let Some(epochs) = changed else {
                return Ok(());
            };
            files::write_atomic(
                &self.fs,
                &self.dir,
                files::LEADER_EPOCHS_FILE,
                &epochs.encode(),
            )
            .await
            .map_err(|e| self.fail("writing the leader epoch checkpoint", e))?;
            self.st().epochs_checkpointed = epochs;
        }
    }

    /// The journal entry of a flush that writes new bytes to one segment
    /// only, whose file exists (a new segment's first flush creates it and
    /// syncs it directly), if the log uses a journal.
    fn journal_entry_of(&self, work: &[FlushWork<FS::File>]) -> Option<(EntryTarget, Bytes)> {
        let mut with_data = work.iter().filter(|w| w.pending.is_some());
        let item = with_data.next()?;
        if with_data.next().is_some() || item.file.is_none() {
            return None;
        }
        self.journal_entry(item.base, item.pending.as_ref()?)
    }

    /// Takes every segment's buffered bytes for one flush.
    fn take_work(&self) -> Result<Taken<FS::File>> {
        let mut st = self.st();
        self.check_not_failed(&st)?;
        let fs = &self.fs;
        let st = &mut *st;
        let transactions = st.producers.transactions();
        let work: Vec<FlushWork<FS::File>> = st
            .segments
            .iter_mut()
            .filter(|s| s.writer.is_some())
            .map(|s| FlushWork {
                base: s.base,
                file: s.file.clone(),
                pending: s.writer.as_mut().and_then(|w| w.take(|n| fs.alloc(n))),
                allocated: s.allocated,
                seal: s.sealed.then(|| Seal {
                    size: s.size,
                    index: s.index.encode(),
                    time_index: s.final_time_index().encode(),
                    aborts: transactions.aborted_in(s.base, s.next_offset),
                }),
            })
            .collect();
        let pending = || work.iter().filter_map(|w| w.pending.as_ref());
        let new_bytes: u64 = pending().map(|p| p.new_bytes as u64).sum();
        if new_bytes > 0 {
            st.stats.flushes += 1;
            st.stats.flushed_bytes += new_bytes;
            st.stats.direct_writes += pending().map(|p| p.chunks.len() as u64).sum::<u64>();
        }
        st.pending_bytes = 0;
        let earlier_unsynced = st.flushed < st.taken;
        st.taken = st.log_end;
        Ok(Taken {
            target: st.log_end,
            rewrites: st.rewrites,
            work,
            earlier_unsynced,
        })
    }

    /// Creates the segment's file if needed, reserves space, and issues its
    /// writes concurrently. Records the file and reservation in the state.
    async fn write_segment(
        &self,
        item: FlushWork<FS::File>,
    ) -> std::result::Result<Written<FS::File>, IoFailure> {
        let file = match &item.file {
            Some(file) => file.clone(),
            None => {
                let path = files::segment_path(&self.dir, item.base, LOG_SUFFIX);
                let file = self
                    .fs
                    .open(&path)
                    .await
                    .map_err(|e| ("creating segment", e))?;
                self.fs
                    .sync_dir(&self.dir)
                    .await
                    .map_err(|e| ("syncing directory", e))?;
                Rc::new(file)
            }
        };
        let mut allocated = item.allocated;
        let end = item.pending.as_ref().map(|p| p.end);
        if let Some(end) = end.filter(|&end| end > allocated) {
            let step_end = end + preallocation_step(end, self.config.preallocate_bytes);
            allocated = align_up(step_end.min(self.config.segment_bytes.max(end)));
            file.pre_allocate(allocated)
                .await
                .map_err(|e| ("preallocating", e))?;
        }
        if let Some(pending) = item.pending {
            let writes = pending
                .chunks
                .into_iter()
                .map(|w| file.write_at(w.buf, w.position));
            for result in futures::future::join_all(writes).await {
                result.map_err(|e| ("direct write", e))?;
            }
        }
        if let Some(segment) = self.st().segment_by_base(item.base) {
            segment.file = Some(file.clone());
            segment.allocated = segment.allocated.max(allocated);
        }
        Ok(Written {
            base: item.base,
            file,
            end,
            indexed_aborts: None,
        })
    }

    /// fdatasyncs a written segment; a sealed one then gets its indexes
    /// and is trimmed to its data.
    async fn sync_segment(
        &self,
        segment: &Written<FS::File>,
        seal: Option<Seal>,
    ) -> std::result::Result<(), IoFailure> {
        let started = std::time::Instant::now();
        segment
            .file
            .fdatasync()
            .await
            .map_err(|e| ("fdatasync", e))?;
        self.count_fdatasync(started);
        if let Some(seal) = seal {
            self.write_indexes(segment.base, &seal.index, &seal.time_index)
                .await
                .map_err(|e| ("writing indexes", e))?;
            self.write_txn_index(segment.base, &seal.aborts)
                .await
                .map_err(|e| ("writing the aborted-transaction index", e))?;
            segment
                .file
                .truncate(seal.size)
                .await
                .map_err(|e| ("trimming sealed segment", e))?;
            segment
                .file
                .fdatasync()
                .await
                .map_err(|e| ("fdatasync", e))?;
        }
        Ok(())
    }

    /// Counts a flush that wrote data, by its duration since `started`
    /// (when it began writing) until now, just before it is published.
    fn count_flush(&self, started: std::time::Instant, written: &[Written<FS::File>]) {
        if written.iter().all(|w| w.end.is_none()) {
            return;
        }
        let elapsed = started.elapsed();
        let mut st = self.state.borrow_mut();
        st.stats.flush_buckets[crate::log::flush_bucket(elapsed)] += 1;
        st.stats.flush_nanos += elapsed.as_nanos() as u64;
    }

    fn count_fdatasync(&self, started: std::time::Instant) {
        let mut st = self.state.borrow_mut();
        st.stats.fdatasyncs += 1;
        st.stats.fdatasync_nanos += started.elapsed().as_nanos() as u64;
    }

    /// Publishes a finished flush: everything below `target` is durable.
    fn publish(&self, target: Offset, rewrites: u64, written: &[Written<FS::File>]) {
        let mut st = self.st();
        if st.rewrites != rewrites {
            // Truncation, restart or compaction ran meanwhile and flushed
            // everything itself; this flush's view of the segments is stale.
            return;
        }
        for segment in written {
            let Some(state) = st.segment_by_base(segment.base) else {
                continue;
            };
            if let Some(end) = segment.end {
                state.durable_size = state.durable_size.max(end);
            }
            if let Some(aborts) = segment.indexed_aborts {
                state.writer = None;
                state.aborts_indexed = Some(aborts);
                let (base, next) = (state.base, state.next_offset);
                let transactions = st.producers.transactions_mut();
                transactions.forget_aborted_in(base, next);
            }
        }
        st.flushed = st.flushed.max(target);
        let flushed = st.flushed;
        st.cache.evict(flushed);
        if self.config.high_watermark_follows_flush {
            st.high_watermark = st.high_watermark.max(flushed);
            let hw = st.high_watermark;
            st.producers.transactions_mut().on_high_watermark(hw);
        }
    }

    /// Writes a segment's `.index` and `.timeindex` atomically.
    pub(crate) async fn write_indexes(
        &self,
        base: Offset,
        index: &[u8],
        time_index: &[u8],
    ) -> std::io::Result<()> {
        let name = |suffix| {
            files::segment_path(&self.dir, base, suffix)
                .file_name()
                .expect("segment file name")
                .to_string_lossy()
                .into_owned()
        };
        files::write_atomic(&self.fs, &self.dir, &name(INDEX_SUFFIX), index).await?;
        files::write_atomic(&self.fs, &self.dir, &name(TIME_INDEX_SUFFIX), time_index).await
    }
}

/// The least disk reserved ahead of a segment's writes.
const PREALLOCATION_STEP_MIN: u64 = 1 << 20;

/// How far ahead of a segment's end (`end` bytes written) disk is
/// reserved: as much as it holds already, between 1 MiB and `most`. A
/// busy segment reserves `most` at a time (few extent changes for its
/// fdatasyncs to write); a quiet one about its own size, so that
/// 10,000 partitions written a little each do not reserve 10,000 x
/// `most` (320 GB with the default 32 MiB).
fn preallocation_step(end: u64, most: u64) -> u64 {
    end.max(PREALLOCATION_STEP_MIN).min(most)
}

#[cfg(test)]
mod tests {
    use super::preallocation_step;

    #[test]
    fn a_segment_reserves_ahead_as_much_as_it_holds_within_bounds() {
        let mib = 1 << 20;
        assert_eq!(preallocation_step(0, 32 * mib), mib);
        assert_eq!(preallocation_step(100_000, 32 * mib), mib);
        assert_eq!(preallocation_step(5 * mib, 32 * mib), 5 * mib);
        assert_eq!(preallocation_step(100 * mib, 32 * mib), 32 * mib);
        assert_eq!(
            preallocation_step(0, 64 * 1024),
            64 * 1024,
            "a smaller most wins"
        );
    }
}
