//! Changes to a log other than appends: truncation (replication), moving
//! the log start (retention, DeleteRecords) and lookup by timestamp.

use crate::batch::{self, BatchHeader, TimestampScan, HEADER_BYTES};
use crate::error::{Result, StorageError};
use crate::files::{self, LOG_START_FILE};
use crate::io::{align_down, DirectFile, FileSystem};
use crate::log::Log;
use crate::producers::ProducerState;
use crate::transactions::AbortedTxn;
use crate::types::{Offset, TimestampMs};
use crate::write_buffer::WriteBuffer;

/// Retention settings of a topic (None: unlimited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Delete sealed segments whose newest record is older than this.
    pub retention_ms: Option<i64>,
    /// Delete the oldest sealed segments while the log is larger than this.
    pub retention_bytes: Option<u64>,
    /// Delete only segments whose last offset is at or below this (tiered
    /// storage: what the remote log holds); None: no such bound.
    pub deletable_through: Option<Offset>,
}

impl<FS: FileSystem> Log<FS> {
    /// Removes every batch at or after `offset`, cutting at the start of the
    /// batch that contains it. Returns the new log end.
    pub async fn truncate_to(&self, offset: Offset) -> Result<Offset> {
        let _io = self.io_lock.lock().await;
        self.flush_for_rewrite().await?;
        let (log_start, log_end) = (self.log_start(), self.log_end());
        if offset >= log_end {
            return Ok(log_end);
        }
        if offset < log_start {
            return Err(StorageError::InvalidArgument(format!(
                "cannot truncate to {offset}, below the log start {log_start}"
            )));
        }
        let index = self.state.borrow().segment_index(offset);
        let (base, file, had_index) = {
            let st = self.state.borrow();
            let s = &st.segments[index];
            (s.base, s.file.clone(), s.aborts_indexed.is_some())
        };
        let file = file.expect("a flushed segment has a file");
        let (position, new_end) = self.find_cut(index, &file, offset).await?;
        let later: Vec<Offset> = self.state.borrow().segments[index + 1..]
            .iter()
            .map(|s| s.base)
            .collect();
        let critical = self.critical("a truncation");
        for base in later.iter().rev() {
            self.remove_segment_files(*base).await?;
        }
        // The segment becomes the active one: its aborts below the cut are
        // held in memory again (its index file, if any, goes last).
        let kept_aborts = self.aborts_kept_by_cut(base, new_end).await;
        if new_end < log_start {
            // The batch holding `offset` starts below the log start, so the
            // log becomes empty at `new_end`; the start must follow it down.
            let checkpoint = files::encode_log_start(new_end);
            files::write_atomic(&self.fs, &self.dir, LOG_START_FILE, &checkpoint)
                .await
                .map_err(|e| self.fail("writing log start offset", e))?;
            self.st().log_start = new_end;
        }
        let io = |what: &'static str| move |e| self.fail(what, e);
        file.truncate(position)
            .await
            .map_err(io("truncating segment"))?;
        file.fdatasync()
            .await
            .map_err(io("fdatasync after truncation"))?;
        let tail_start = align_down(position);
        let tail = file
            .read_at(tail_start, (position - tail_start) as usize)
            .await
            .map_err(io("reading tail block"))?;
        self.install_cut(index, position, new_end, &tail);
        let prior = self.producers();
        self.rebuild_after_cut(new_end, kept_aborts, &prior).await?;
        if had_index {
            let released = self.release_txn_index(base).await;
            released.map_err(|e| {
                self.fail(
                    "releasing an aborted-transaction index",
                    std::io::Error::other(e.to_string()),
                )
            })?;
        }
        critical.finish();
        // Those kept open need a snapshot at or above the log start to
        // survive a crash (the one that held them was past the cut).
        self.clamp_producers_to_start().await?;
        Ok(new_end)
    }

    /// Where a truncation to `offset` cuts segment `index`: the position
    /// and offset of the first batch that ends after `offset`, else the
    /// segment's end.
    async fn find_cut(
        &self,
        index: usize,
        file: &FS::File,
        offset: Offset,
    ) -> Result<(u64, Offset)> {
        let (base, from, size, next) = {
            let st = self.state.borrow();
            let s = &st.segments[index];
            (s.base, s.scan_start(offset), s.size, s.next_offset)
        };
        let mut position = from;
        while position < size {
            let head = file
                .read_at(position, HEADER_BYTES)
                .await
                .map_err(|e| self.fail("reading header", e))?;
            let header = BatchHeader::parse(&head, self.config.max_batch_bytes).map_err(|e| {
                StorageError::InvalidArgument(format!("segment {base} unreadable: {e}"))
            })?;
            if header.next_offset() > offset {
                return Ok((position, header.base_offset));
            }
            position += header.total_bytes as u64;
        }
        Ok((size, next))
    }

    /// Makes segment `index`, cut at `position` (offset `new_end`), the
    /// active one, dropping the later ones; `tail` is its last block.
    fn install_cut(&self, index: usize, position: u64, new_end: Offset, tail: &[u8]) {
        let mut st = self.st();
        st.segments.truncate(index + 1);
        let fs = &self.fs;
        let chunk = self.config.write_chunk_bytes;
        let segment = st.active_mut();
        segment.index.truncate_from_position(position as u32);
        segment
            .time_index
            .truncate_from_offset(segment.relative(new_end));
        segment.size = position;
        segment.durable_size = position;
        segment.allocated = position;
        segment.next_offset = new_end;
        segment.sealed = false;
        segment.aborts_indexed = None;
        segment.bytes_since_index = segment
            .index
            .last()
            .map_or(position, |e| position - e.position as u64);
        segment.max_timestamp = TimestampMs(segment.time_index.max_timestamp().unwrap_or(-1));
        segment.writer = Some(WriteBuffer::new(position, tail, chunk, |n| fs.alloc(n)));
        st.log_end = new_end;
        st.flushed = new_end;
        st.taken = new_end;
        let start = st.log_start;
        st.epochs.clamp(start, new_end);
        st.high_watermark = st.high_watermark.min(new_end);
        st.cache.truncate_from(new_end);
        st.rewritten();
    }

    /// The producers' state as of the new end `new_end`: from the newest
    /// snapshot at or below it (later ones go) and the batches after it,
    /// with the cut segment's aborts as they were found (`kept_aborts`)
    /// and the transactions `prior` (the state before the cut) had open
    /// from below the log start. Part of the critical sequence: a state
    /// that knew batches the cut removed would answer their retries as
    /// duplicates (acknowledging records no longer here), so a rebuild
    /// that fails or is cancelled fails the log rather than leave it
    /// serving on a wrong state.
    async fn rebuild_after_cut(
        &self,
        new_end: Offset,
        kept_aborts: Vec<AbortedTxn>,
        prior: &ProducerState,
    ) -> Result<()> {
        if let Err(e) = self.rebuild_producers(new_end).await {
            let error = std::io::Error::other(e.to_string());
            return Err(self.fail("rebuilding producer state after a truncation", error));
        }
        self.hold_aborts(kept_aborts);
        let log_start = self.log_start();
        self.st()
            .producers
            .keep_open_from_below(prior, log_start, new_end);
        Ok(())
    }

    /// Moves the log start up to `offset` (DeleteRecords), deleting the
    /// segments wholly below it. `offset` may not pass the high watermark.
    pub async fn delete_records_below(&self, offset: Offset) -> Result<Offset> {
        let _io = self.io_lock.lock().await;
        let (log_start, hw, log_end) = {
            let st = self.state.borrow();
            (st.log_start, st.high_watermark, st.log_end)
        };
        if offset > hw {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start,
                log_end,
            });
        }
        if offset > log_start {
            self.set_log_start(offset).await?;
        }
        self.drop_segments_below_start().await?;
        self.clamp_producers_to_start().await?;
        Ok(self.log_start())
    }

    /// Applies time and size retention: deletes whole sealed segments below
    /// the high watermark, oldest first. Returns how many were deleted.
    pub async fn apply_retention(&self, policy: RetentionPolicy) -> Result<usize> {
        let _io = self.io_lock.lock().await;
        let now = (self.clock)();
        let new_start = {
            let st = self.state.borrow();
            let mut total: u64 = st.segments.iter().map(|s| s.size).sum();
            let mut new_start = None;
            // Only sealed segments whose every offset is below the high watermark.
            for pair in st.segments.windows(2) {
                let (segment, next) = (&pair[0], &pair[1]);
                if next.base > st.high_watermark || segment.writer.is_some() {
                    break;
                }
                let last_offset = Offset(next.base.0 - 1);
                if policy
                    .deletable_through
                    .is_some_and(|bound| last_offset > bound)
                {
                    break;
                }
                let expired = policy
                    .retention_ms
                    .is_some_and(|ms| segment.max_timestamp.0 < now.0.saturating_sub(ms));
                let oversized = policy
                    .retention_bytes
                    .is_some_and(|limit| total.saturating_sub(segment.size) >= limit);
                if !(expired || oversized) {
                    break;
                }
                total -= segment.size;
                new_start = Some(next.base);
            }
            new_start
        };
        let Some(new_start) = new_start else {
            return Ok(0);
        };
        if new_start > self.log_start() {
            self.set_log_start(new_start).await?;
        }
        // Counted as deleted, not as the segment count's change: appends
        // may roll new segments during the file I/O.
        let deleted = self.drop_segments_below_start().await?;
        self.clamp_producers_to_start().await?;
        Ok(deleted)
    }

    /// Persists and publishes a new log start offset.
    async fn set_log_start(&self, offset: Offset) -> Result<()> {
        files::write_atomic(
            &self.fs,
            &self.dir,
            LOG_START_FILE,
            &files::encode_log_start(offset),
        )
        .await
        .map_err(|e| StorageError::io("writing log start offset", e))?;
        let mut st = self.st();
        st.log_start = offset;
        let end = st.log_end;
        st.epochs.clamp(offset, end);
        st.cache.drop_below(offset);
        st.high_watermark = st.high_watermark.max(offset);
        Ok(())
    }

    /// Deletes sealed segments whose offsets all lie below the log start;
    /// returns how many. The durable log start is written first, so a
    /// crash between the two leaves files that the next open deletes.
    pub(crate) async fn drop_segments_below_start(&self) -> Result<usize> {
        let mut deleted = 0;
        loop {
            let doomed = {
                let st = self.state.borrow();
                match st.segments.get(..2) {
                    Some([first, second])
                        if second.base <= st.log_start && first.writer.is_none() =>
                    {
                        Some(first.base)
                    }
                    _ => None,
                }
            };
            let Some(base) = doomed else {
                return Ok(deleted);
            };
            let critical = self.critical("a segment deletion");
            self.remove_segment_files(base).await?;
            critical.finish();
            let mut st = self.st();
            st.segments.remove(0);
            // Also lets go of the deleted file (a planned read holds it).
            st.bytes_moved();
            deleted += 1;
        }
    }

    /// The first record whose timestamp is at or after `timestamp`, among
    /// offsets below `bound`: its offset and timestamp (ListOffsets).
    ///
    /// Compressed batches are not decompressed: for them the batch's base
    /// offset and largest timestamp are returned.
    pub async fn offset_for_timestamp(
        &self,
        timestamp: TimestampMs,
        bound: Offset,
    ) -> Result<Option<(Offset, TimestampMs)>> {
        let mut offset = {
            let st = self.state.borrow();
            let Some(segment) = st.segments.iter().find(|s| s.max_timestamp >= timestamp) else {
                return Ok(None);
            };
            segment
                .base
                .plus(segment.time_index.scan_start(timestamp.0) as i64)
                .max(st.log_start)
        };
        let bound = bound.min(self.log_end());
        while offset < bound {
            let outcome = self.read(offset, 1 << 20, bound).await?;
            if outcome.chunks.is_empty() {
                return Ok(None);
            }
            for chunk in &outcome.chunks {
                match batch::first_stamped_at_or_after(
                    chunk,
                    timestamp,
                    self.config.max_batch_bytes,
                )
                .map_err(StorageError::from)?
                {
                    TimestampScan::Found(offset, stamped) => return Ok(Some((offset, stamped))),
                    TimestampScan::NotIn { next: Some(next) } => offset = next,
                    TimestampScan::NotIn { next: None } => {}
                }
            }
        }
        Ok(None)
    }
}
