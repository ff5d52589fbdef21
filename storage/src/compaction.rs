//! Compaction (cleanup.policy=compact): keep the newest record of each key
//! in the sealed segments, drop old tombstones, never move an offset.

use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;

use crate::batch::{self, BatchHeader};
use crate::error::{Result, StorageError};
use crate::files::{self, CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use crate::io::{DirectFile, FileSystem};
use crate::log::Log;
use crate::segment::Segment;
use crate::transactions::AbortedTxn;
use crate::types::{Offset, TimestampMs};

/// Settings of a compacted topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Tombstones (null values) older than this, by record timestamp, are removed.
    pub delete_retention_ms: i64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        // Kafka's delete.retention.ms default: one day.
        CompactionPolicy {
            delete_retention_ms: 24 * 3600 * 1000,
        }
    }
}

/// What a compaction pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Sealed segments rewritten.
    pub segments_rewritten: usize,
    /// Records removed.
    pub records_removed: u64,
    /// Bytes of the rewritten segments before and after.
    pub bytes_before: u64,
    /// Bytes after.
    pub bytes_after: u64,
}

/// The newest offset of every key in the log.
type KeyMap = HashMap<Bytes, Offset>;

/// What one read of the whole log tells a compaction pass.
#[derive(Default)]
struct Survey {
    /// Where the survey stopped (the last stable offset when it began):
    /// only segments wholly below it are cleaned, even if the high
    /// watermark moved on meanwhile, since it knows no newer key.
    end: Offset,
    /// Each key's newest offset.
    keys: KeyMap,
    /// The aborted transactions: their records supersede nothing (a
    /// read_committed reader never sees them) and are removed.
    aborted: Vec<AbortedTxn>,
    /// Each idempotent producer's last batch (its base offset): kept even
    /// when compaction empties it, as Kafka's cleaner keeps it, so the
    /// producer state rebuilt from the log still knows the producer's last
    /// sequence (else its next batch would be refused as a gap).
    last_batches: HashMap<i64, Offset>,
}

impl<FS: FileSystem> Log<FS> {
    /// Compacts the sealed segments below the last stable offset (so no
    /// transaction is undecided there). Records without a key, compressed
    /// batches and control batches (transaction markers) are kept as they
    /// are (compressed batches are not recompressed here); records of
    /// aborted transactions are removed and supersede nothing.
    pub async fn compact(&self, policy: CompactionPolicy) -> Result<CompactionStats> {
        let _io = self.io_lock.lock().await;
        self.flush_for_rewrite().await?;
        let survey = self.survey().await?;
        let now = (self.clock)();
        let stable = survey.end;
        let sealed: Vec<(Offset, Rc<FS::File>, u64)> = {
            let st = self.state.borrow();
            let n = st.segments.len() - 1;
            st.segments[..n]
                .iter()
                .filter(|s| s.next_offset <= stable)
                .filter_map(|s| Some((s.base, s.file.clone()?, s.size)))
                .collect()
        };
        let mut stats = CompactionStats::default();
        for (base, file, size) in sealed {
            let content = file
                .read_at(0, size as usize)
                .await
                .map_err(|e| StorageError::io(format!("compaction reading segment {base}"), e))?;
            let (cleaned, removed) = self.clean(&content, &survey, policy, now)?;
            if removed == 0 {
                continue;
            }
            let critical = self.critical("a compacted segment swap");
            self.swap_in(base, &cleaned).await?;
            critical.finish();
            stats.segments_rewritten += 1;
            stats.records_removed += removed;
            stats.bytes_before += size;
            stats.bytes_after += cleaned.len() as u64;
        }
        if stats.segments_rewritten > 0 {
            let mut st = self.st();
            let active_base = st.active().base;
            st.cache.drop_below(active_base);
            st.rewritten();
        }
        Ok(stats)
    }

    /// Reads the log below its last stable offset once: each key's newest offset, each
    /// producer's last batch.
    async fn survey(&self) -> Result<Survey> {
        let mut survey = Survey::default();
        let mut offset = self.log_start();
        // Only what is stable may supersede: a key written in a
        // transaction not yet decided must not remove the committed value
        // below it (the transaction may abort).
        let end = self.last_stable_offset();
        survey.end = end;
        survey.aborted = self.aborted_transactions(offset, end).await?;
        while offset < end {
            let outcome = self.read(offset, 4 << 20, end).await?;
            if outcome.chunks.is_empty() {
                break;
            }
            for chunk in &outcome.chunks {
                for (header, bytes) in split(chunk, self.config.max_batch_bytes)? {
                    offset = header.next_offset();
                    if let Some(producer) = header.producer() {
                        survey
                            .last_batches
                            .insert(producer.producer_id, header.base_offset);
                    }
                    if header.is_compressed() || header.is_control() || survey.aborts(&header) {
                        continue;
                    }
                    for record in batch::records(&bytes, header)? {
                        let record = record?;
                        if let Some(key) = record.key {
                            survey
                                .keys
                                .insert(Bytes::copy_from_slice(key), record.offset);
                        }
                    }
                }
            }
        }
        Ok(survey)
    }

    /// The segment's content with superseded records and old tombstones
    /// removed, and how many records went. A producer's last batch stays
    /// (empty, if none of its records did).
    fn clean(
        &self,
        content: &Bytes,
        survey: &Survey,
        policy: CompactionPolicy,
        now: TimestampMs,
    ) -> Result<(Vec<u8>, u64)> {
        let tombstone_horizon = now.0.saturating_sub(policy.delete_retention_ms);
        let mut out = Vec::with_capacity(content.len());
        let mut removed = 0u64;
        for (header, bytes) in split(content, self.config.max_batch_bytes)? {
            if header.is_compressed() || header.is_control() {
                out.extend_from_slice(&bytes);
                continue;
            }
            let mut kept = Vec::new();
            let aborted = survey.aborts(&header);
            for record in batch::records(&bytes, header)? {
                let record = record?;
                let newest = !aborted
                    && match record.key {
                        None => true,
                        Some(key) => survey.keys.get(key) == Some(&record.offset),
                    };
                let expired_tombstone =
                    record.value.is_none() && record.timestamp.0 < tombstone_horizon;
                if newest && !expired_tombstone {
                    kept.push(record.raw);
                } else {
                    removed += 1;
                }
            }
            if kept.len() == header.records_count as usize {
                out.extend_from_slice(&bytes);
            } else if !kept.is_empty() || survey.is_last_batch(&header) {
                out.extend_from_slice(&batch::rebuild(&bytes, &kept));
            }
        }
        Ok((out, removed))
    }

    /// Replaces a sealed segment's file with `cleaned`: write it beside the
    /// original, fdatasync, drop the old indexes, rename over the original,
    /// fsync the directory, then write the new indexes. A crash at any step
    /// leaves either segment whole; missing indexes are rebuilt on open.
    async fn swap_in(&self, base: Offset, cleaned: &[u8]) -> Result<()> {
        let log_path = files::segment_path(&self.dir, base, LOG_SUFFIX);
        let cleaned_path = self.dir.join(format!(
            "{}{CLEANED_SUFFIX}",
            log_path.file_name().expect("file name").to_string_lossy()
        ));
        let io = |what: &'static str| {
            move |e| StorageError::io(format!("compacting segment {base}: {what}"), e)
        };
        let file = self.fs.open(&cleaned_path).await.map_err(io("creating"))?;
        file.truncate(0).await.map_err(io("truncating"))?;
        let fs = &self.fs;
        let mut writer =
            crate::write_buffer::WriteBuffer::new(0, &[], self.config.write_chunk_bytes, |n| {
                fs.alloc(n)
            });
        writer.push(cleaned, |n| fs.alloc(n));
        if let Some(pending) = writer.take(|n| fs.alloc(n)) {
            for w in pending.chunks {
                file.write_at(w.buf, w.position)
                    .await
                    .map_err(io("writing"))?;
            }
        }
        file.truncate(cleaned.len() as u64)
            .await
            .map_err(io("trimming"))?;
        file.fdatasync().await.map_err(io("fdatasync"))?;
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            match self
                .fs
                .remove(&files::segment_path(&self.dir, base, suffix))
                .await
            {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io("removing index")(e))
                }
                _ => {}
            }
        }
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(io("syncing directory"))?;
        self.fs
            .rename(&cleaned_path, &log_path)
            .await
            .map_err(io("renaming"))?;
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(io("syncing directory"))?;

        let mut segment = Segment::new_active(base, &self.fs, self.config.write_chunk_bytes);
        segment.writer = None;
        segment.sealed = true;
        for (header, _) in split(
            &Bytes::copy_from_slice(cleaned),
            self.config.max_batch_bytes,
        )? {
            segment.record_batch(&header, TimestampMs(0), self.config.index_interval_bytes);
        }
        segment.durable_size = segment.size;
        segment.allocated = segment.size;
        segment.file = Some(Rc::new(file));
        let (index, time_index) = (segment.index.encode(), segment.final_time_index().encode());
        self.write_indexes(base, &index, &time_index)
            .await
            .map_err(io("writing indexes"))?;
        let mut st = self.st();
        if let Some(slot) = st.segment_by_base(base) {
            // The segment keeps its extent of offsets even if its last batch went.
            segment.next_offset = segment.next_offset.max(slot.next_offset);
            // Markers are kept, so its aborted-transaction index stands.
            segment.aborts_indexed = slot.aborts_indexed;
            *slot = segment;
        }
        // Chunks read from the old file have the new one's base but not its
        // positions.
        st.rewritten();
        Ok(())
    }
}

impl Survey {
    /// Whether `header`'s batch belongs to an aborted transaction.
    fn aborts(&self, header: &BatchHeader) -> bool {
        header.is_transactional()
            && !header.is_control()
            && self.aborted.iter().any(|txn| {
                txn.producer_id == header.producer_id
                    && txn.first_offset <= header.base_offset
                    && header.base_offset < txn.marker_offset
            })
    }

    fn is_last_batch(&self, header: &BatchHeader) -> bool {
        header
            .producer()
            .is_some_and(|p| self.last_batches.get(&p.producer_id) == Some(&header.base_offset))
    }
}

fn split(bytes: &Bytes, max_batch_bytes: usize) -> Result<Vec<(BatchHeader, Bytes)>> {
    Ok(batch::split_stored(bytes, max_batch_bytes)?)
}
