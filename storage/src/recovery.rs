//! Opening a log: find the segments, trust or rebuild their indexes, and
//! cut a torn or corrupt tail back to the last whole valid batch.

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;
use std::rc::Rc;

use crate::io_lock::IoLock;

use crate::batch::{self, BatchHeader, CountRule, HEADER_BYTES};
use crate::cache::BatchCache;
use crate::epochs::EpochCache;
use crate::error::{Result, StorageError};
use crate::files::{
    self, CLEANED_SUFFIX, CLEAN_SHUTDOWN_FILE, INDEX_SUFFIX, LEADER_EPOCHS_FILE, LOG_START_FILE,
    TIME_INDEX_SUFFIX, TMP_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::headers;
use crate::index::{OffsetIndex, TimeIndex};
use crate::io::{align_down, DirectFile, FileSystem};
use crate::log::{Log, LogConfig, State};
use crate::segment::{ScannedEpochs, Segment};
use crate::txn_index_log::is_orphan_txn_index;
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use crate::write_buffer::WriteBuffer;

/// Bytes read at a time when scanning a segment.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// What a scan of a segment found.
struct Scan {
    /// End of the last whole valid batch.
    valid_end: u64,
    /// Whether anything after `valid_end` was cut.
    torn: bool,
}

impl<FS: FileSystem> Log<FS> {
    /// Opens (or creates) the log in `dir`, recovering from a crash.
    pub async fn open(fs: FS, dir: impl Into<PathBuf>, config: LogConfig) -> Result<Rc<Log<FS>>> {
        Self::open_with_clock(fs, dir, config, Rc::new(crate::types::now_ms)).await
    }

    /// [`Log::open`] with an injected clock (tests of time-based rolling and retention).
    pub async fn open_with_clock(
        fs: FS,
        dir: impl Into<PathBuf>,
        config: LogConfig,
        clock: Rc<dyn Fn() -> TimestampMs>,
    ) -> Result<Rc<Log<FS>>> {
        config.check()?;
        // Absolute, so directory handles opened later do not depend on the
        // working directory.
        let dir: PathBuf = dir.into();
        let dir = std::path::absolute(&dir)
            .map_err(|e| StorageError::io(format!("resolving {}", dir.display()), e))?;
        fs.create_dir_all(&dir)
            .await
            .map_err(|e| StorageError::io(format!("creating {}", dir.display()), e))?;
        fs.prepare(&dir)
            .await
            .map_err(|e| StorageError::io(format!("preparing {}", dir.display()), e))?;
        let log = Rc::new(Log {
            state: RefCell::new(State {
                segments: Vec::new(),
                log_start: Offset(0),
                log_end: Offset(0),
                flushed: Offset(0),
                high_watermark: Offset(0),
                cache: BatchCache::new(config.cache_budget_bytes),
                read_ahead: None,
                windows: Vec::new(),
                stopped_reads: 0,
                failed: None,
                pending_bytes: 0,
                generation: 0,
                rewrites: 0,
                stats: Default::default(),
                taken: Offset(0),
                epochs: EpochCache::new(),
                epochs_checkpointed: EpochCache::new(),
                producers: Default::default(),
                producer_snapshot_due: Vec::new(),
                producer_snapshots_kept_from: None,
                txn_indexes: Vec::new(),
            }),
            fs,
            dir,
            config,
            clock,
            io_lock: IoLock::default(),
            journal: RefCell::new(None),
        });
        log.recover().await.map_err(|e| match e {
            StorageError::Io { context, source } => StorageError::Io {
                context: format!("recovering {}: {context}", log.dir.display()),
                source,
            },
            other => other,
        })?;
        Ok(log)
    }

    async fn recover(&self) -> Result<()> {
        let io = |what: &str| {
            let what = what.to_string();
            move |e| StorageError::io(what, e)
        };
        let names = self.fs.list(&self.dir).map_err(io("listing directory"))?;
        let clean = names.iter().any(|n| n == CLEAN_SHUTDOWN_FILE);
        let logs: HashSet<&str> = names
            .iter()
            .filter_map(|n| n.strip_suffix(files::LOG_SUFFIX))
            .collect();
        for name in &names {
            let leftover = name.ends_with(TMP_SUFFIX)
                || name.ends_with(CLEANED_SUFFIX)
                || name == CLEAN_SHUTDOWN_FILE
                || is_orphan_txn_index(name, &logs);
            if leftover {
                self.fs
                    .remove(&self.dir.join(name))
                    .await
                    .map_err(io("removing leftover"))?;
            }
        }
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(io("syncing directory"))?;
        let mut bases: Vec<Offset> = names
            .iter()
            .filter_map(|n| files::parse_log_name(n))
            .collect();
        bases.sort();
        let checkpoint = files::read_whole(
            &self.fs,
            &self.dir.join(LOG_START_FILE),
            names.iter().any(|n| n == LOG_START_FILE),
        )
        .await
        .map_err(io("reading log start"))?
        .and_then(|b| files::decode_log_start(&b));

        let mut segments = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let is_last = i + 1 == bases.len();
            let (segment, torn) = self.open_segment(base, &names, is_last, clean).await?;
            segments.push(segment);
            if torn && !is_last {
                // Corruption inside a sealed segment: what follows it cannot be trusted.
                tracing::warn!(dir = %self.dir.display(), %base, "corrupt sealed segment; dropping later segments");
                for &later in &bases[i + 1..] {
                    self.remove_segment_files(later).await?;
                }
                segments.last_mut().expect("just pushed").sealed = false;
                break;
            }
        }
        self.install(segments, checkpoint);
        self.recover_epochs(&names).await?;
        self.drop_segments_below_start().await?;
        let last = self.find_txn_indexes().await?;
        self.rebuild_producers(last.floor).await?;
        self.hold_last_txn_index(last).await
    }

    /// Rebuilds the leader epoch cache: the checkpoint, with what recovery's
    /// scans found replacing it over the offsets they covered (the
    /// checkpoint is written before the data that follows an epoch change,
    /// so it covers every segment not scanned). Without a usable checkpoint
    /// every segment's batch headers are walked instead.
    async fn recover_epochs(&self, names: &[String]) -> Result<()> {
        let exists = names.iter().any(|n| n == LEADER_EPOCHS_FILE);
        let bytes = files::read_whole(&self.fs, &self.dir.join(LEADER_EPOCHS_FILE), exists)
            .await
            .map_err(|e| StorageError::io("reading the leader epoch checkpoint", e))?;
        let checkpoint = bytes.as_deref().and_then(EpochCache::decode);
        if exists && checkpoint.is_none() {
            tracing::warn!(dir = %self.dir.display(), "damaged leader epoch checkpoint; walking every batch header");
        }
        let mut entries: Vec<(LeaderEpoch, Offset)> = Vec::new();
        let mut scanned: Vec<(Offset, Offset)> = Vec::new();
        type Found<F> = (Offset, Offset, Option<Rc<F>>, u64, Option<ScannedEpochs>);
        let segments: Vec<Found<FS::File>> = {
            let mut st = self.st();
            st.segments
                .iter_mut()
                .map(|s| {
                    (
                        s.base,
                        s.next_offset,
                        s.file.clone(),
                        s.durable_size,
                        s.scanned_epochs.take(),
                    )
                })
                .collect()
        };
        for (base, next, file, size, found) in segments {
            match (found, &checkpoint) {
                (Some((from, found)), _) => {
                    scanned.push((from, next));
                    entries.extend(found);
                }
                (None, None) => {
                    if let Some(file) = file {
                        entries.extend(self.walk_epochs(base, &file, size).await?);
                        scanned.push((base, next));
                    }
                }
                (None, Some(_)) => {}
            }
        }
        if let Some(checkpoint) = &checkpoint {
            // An entry at a scan's very first offset stays: it may be an
            // epoch that holds no records (its leader wrote nothing before
            // the next took over), which no scan can see.
            entries.extend(
                checkpoint.entries().iter().copied().filter(|(_, start)| {
                    !scanned.iter().any(|(from, to)| start > from && start < to)
                }),
            );
        }
        let mut epochs = EpochCache::from_entries(entries);
        let mut st = self.st();
        epochs.clamp(st.log_start, st.log_end);
        st.epochs = epochs;
        st.epochs_checkpointed = checkpoint.unwrap_or_default();
        Ok(())
    }

    /// Every (epoch, first offset) of a segment, from its batch headers.
    async fn walk_epochs(
        &self,
        base: Offset,
        file: &Rc<FS::File>,
        size: u64,
    ) -> Result<Vec<(LeaderEpoch, Offset)>> {
        let mut found: Vec<(LeaderEpoch, Offset)> = Vec::new();
        let note = |header: &BatchHeader, _: u64| {
            if found.last().is_none_or(|(e, _)| *e != header.leader_epoch) {
                found.push((header.leader_epoch, header.base_offset));
            }
            std::ops::ControlFlow::Continue(())
        };
        headers::walk(&**file, 0, size, self.config.max_batch_bytes, note)
            .await
            .map_err(|e| StorageError::io(format!("segment {base}: reading headers"), e))?;
        Ok(found)
    }

    /// Publishes the recovered segments and the log's positions.
    fn install(&self, mut segments: Vec<Segment<FS::File>>, checkpoint: Option<Offset>) {
        let mut st = self.st();
        let first_base = segments.first().map(|s: &Segment<FS::File>| s.base);
        if segments.is_empty() {
            let base = checkpoint.unwrap_or(Offset(0));
            segments.push(Segment::new_active(
                base,
                &self.fs,
                self.config.write_chunk_bytes,
            ));
        }
        let active = segments.last().expect("at least one segment");
        st.log_end = active.next_offset;
        st.log_start = checkpoint
            .unwrap_or(first_base.unwrap_or(st.log_end))
            .max(first_base.unwrap_or(Offset(0)));
        st.log_start = st.log_start.min(st.log_end);
        st.flushed = st.log_end;
        st.taken = st.log_end;
        st.high_watermark = if self.config.high_watermark_follows_flush {
            st.log_end
        } else {
            st.log_start
        };
        st.segments = segments;
    }

    /// Opens one segment, loading or rebuilding its indexes. Returns the
    /// segment and whether its tail was cut.
    async fn open_segment(
        &self,
        base: Offset,
        names: &[String],
        is_last: bool,
        clean: bool,
    ) -> Result<(Segment<FS::File>, bool)> {
        let io =
            |what: &'static str| move |e| StorageError::io(format!("segment {base}: {what}"), e);
        let path = files::segment_path(&self.dir, base, files::LOG_SUFFIX);
        let file = Rc::new(self.fs.open(&path).await.map_err(io("opening"))?);
        let file_size = file.size().await.map_err(io("size"))?;
        let mut segment = Segment::new_active(base, &self.fs, self.config.write_chunk_bytes);
        segment.writer = None;
        segment.sealed = !is_last;

        let index = self.load_index(base, names, file_size).await?;
        // A sealed segment with intact indexes is trusted as written (it was
        // fdatasync'd before it was sealed). The active segment is scanned
        // from its last index entry after a clean shutdown, and whole after
        // a crash, when its index on disk may be stale.
        let trusted = index.as_ref().filter(|_| !is_last || clean);
        let scan_from = match trusted {
            Some((offset_index, time_index)) => {
                segment.index = offset_index.clone();
                segment.time_index = time_index.clone();
                if let Some(last) = time_index.last() {
                    segment.max_timestamp = TimestampMs(last.timestamp);
                    segment.offset_of_max_timestamp =
                        segment.base.plus(last.relative_offset as i64);
                }
                offset_index.last().map_or(0, |e| e.position as u64)
            }
            None => 0,
        };
        let scan = if trusted.is_some() && !is_last {
            self.trust_sealed(&mut segment, &file, file_size).await?
        } else {
            self.scan_segment(&mut segment, &file, scan_from, file_size)
                .await?
        };
        if scan.valid_end < file_size {
            if scan.torn {
                tracing::warn!(dir = %self.dir.display(), %base, valid_end = scan.valid_end, file_size, "cutting torn or corrupt tail");
            }
            file.truncate(scan.valid_end)
                .await
                .map_err(io("truncating tail"))?;
            file.fdatasync()
                .await
                .map_err(io("fdatasync after truncation"))?;
        }
        segment.size = scan.valid_end;
        segment.durable_size = scan.valid_end;
        let end_relative = segment.relative(segment.next_offset);
        segment
            .time_index
            .truncate_from_offset(end_relative.saturating_add(1));
        if !segment.is_empty() {
            // Age for rolling counts from this open: the first append's wall
            // clock was not recorded.
            segment.first_append_ms = Some((self.clock)());
        }
        segment.allocated = scan.valid_end;
        if trusted.is_none() && !is_last && !scan.torn {
            let (index, time_index) = (segment.index.encode(), segment.final_time_index().encode());
            self.write_indexes(base, &index, &time_index)
                .await
                .map_err(io("rewriting indexes"))?;
        }
        if is_last || scan.torn {
            let tail_start = align_down(scan.valid_end);
            let tail = file
                .read_at(tail_start, (scan.valid_end - tail_start) as usize)
                .await
                .map_err(io("reading tail block"))?;
            let fs = &self.fs;
            segment.writer = Some(WriteBuffer::new(
                scan.valid_end,
                &tail,
                self.config.write_chunk_bytes,
                |n| fs.alloc(n),
            ));
            segment.bytes_since_index = segment
                .index
                .last()
                .map_or(scan.valid_end, |e| scan.valid_end - e.position as u64);
        }
        segment.file = Some(file);
        Ok((segment, scan.torn))
    }

    /// The segment's indexes from disk, or None if either is missing or damaged.
    async fn load_index(
        &self,
        base: Offset,
        names: &[String],
        log_bytes: u64,
    ) -> Result<Option<(OffsetIndex, TimeIndex)>> {
        let read = |suffix: &'static str| {
            let path = files::segment_path(&self.dir, base, suffix);
            let exists = path
                .file_name()
                .is_some_and(|n| names.iter().any(|m| m.as_str() == n.to_string_lossy()));
            async move { files::read_whole(&self.fs, &path, exists).await }
        };
        let io = |e| StorageError::io(format!("segment {base}: reading index"), e);
        let offsets = read(INDEX_SUFFIX).await.map_err(io)?;
        let times = read(TIME_INDEX_SUFFIX).await.map_err(io)?;
        let (Some(offsets), Some(times)) = (offsets, times) else {
            return Ok(None);
        };
        let decoded = OffsetIndex::decode(&offsets, log_bytes).zip(TimeIndex::decode(&times));
        if decoded.is_none() {
            tracing::warn!(dir = %self.dir.display(), %base, "damaged index; rebuilding");
        }
        Ok(decoded)
    }

    /// Takes a sealed segment's extent from its file and indexes. Its last
    /// batch still gets its header read, to know the segment's next offset.
    async fn trust_sealed(
        &self,
        segment: &mut Segment<FS::File>,
        file: &Rc<FS::File>,
        file_size: u64,
    ) -> Result<Scan> {
        if let Some(ts) = segment.time_index.max_timestamp() {
            segment.max_timestamp = TimestampMs(ts);
        }
        let from = segment.index.last().map_or(0, |e| e.position as u64);
        // Walk headers only (no CRC) from the last index entry to the end.
        let mut position = from;
        while position + HEADER_BYTES as u64 <= file_size {
            let head = file.read_at(position, HEADER_BYTES).await.map_err(|e| {
                StorageError::io(format!("segment {}: reading header", segment.base), e)
            })?;
            let Ok(header) = BatchHeader::parse(&head, self.config.max_batch_bytes) else {
                break;
            };
            if position + header.total_bytes as u64 > file_size {
                break;
            }
            segment.next_offset = header.next_offset();
            position += header.total_bytes as u64;
        }
        if position == file_size {
            return Ok(Scan {
                valid_end: position,
                torn: false,
            });
        }
        // The indexes disagree with the file: rebuild them by a full scan.
        segment.index = OffsetIndex::default();
        segment.time_index = TimeIndex::default();
        segment.next_offset = segment.base;
        self.scan_segment(segment, file, 0, file_size).await
    }

    /// Validates every batch from `from` on, indexing them, and finds the
    /// end of the last whole valid batch.
    async fn scan_segment(
        &self,
        segment: &mut Segment<FS::File>,
        file: &Rc<FS::File>,
        from: u64,
        file_size: u64,
    ) -> Result<Scan> {
        segment.index.truncate_from_position(from as u32 + 1);
        segment.size = from;
        segment.bytes_since_index = 0;
        let mut position = from;
        let mut expected_at_least = segment.base;
        loop {
            let remaining = file_size - position;
            if remaining < HEADER_BYTES as u64 {
                return Ok(Scan {
                    valid_end: position,
                    torn: remaining > 0 && !self.all_zero(file, position, remaining).await?,
                });
            }
            let chunk = file
                .read_at(
                    position,
                    SCAN_CHUNK_BYTES.min(remaining as usize).max(HEADER_BYTES),
                )
                .await
                .map_err(|e| StorageError::io(format!("segment {}: scanning", segment.base), e))?;
            let mut at = 0usize;
            while chunk.len() - at >= HEADER_BYTES {
                let header = match BatchHeader::parse(&chunk[at..], self.config.max_batch_bytes) {
                    Ok(h) => h,
                    Err(_) => return self.scan_end(file, position + at as u64, file_size).await,
                };
                if header.total_bytes > chunk.len() - at {
                    if position + at as u64 + header.total_bytes as u64 > file_size {
                        return self.scan_end(file, position + at as u64, file_size).await;
                    }
                    break; // read the next chunk from this batch on
                }
                let bytes = &chunk[at..at + header.total_bytes];
                let valid = batch::validate(bytes, self.config.max_batch_bytes, CountRule::AtMost)
                    .is_ok()
                    && header.base_offset >= expected_at_least
                    && header.base_offset.0 + header.last_offset_delta as i64 - segment.base.0
                        <= u32::MAX as i64;
                if !valid {
                    return self.scan_end(file, position + at as u64, file_size).await;
                }
                // The batch at `from` is the trusted index's last entry;
                // record_batch adds entries only past the index interval.
                segment.record_batch(&header, TimestampMs(0), self.config.index_interval_bytes);
                let (first, found) = segment
                    .scanned_epochs
                    .get_or_insert_with(|| (header.base_offset, Vec::new()));
                *first = (*first).min(header.base_offset);
                if found.last().is_none_or(|(e, _)| *e != header.leader_epoch) {
                    found.push((header.leader_epoch, header.base_offset));
                }
                expected_at_least = header.next_offset();
                at += header.total_bytes;
            }
            position += at as u64;
        }
    }

    /// The scan stopped at `position`: the rest is a torn write unless it is
    /// only the zero padding of the last block.
    async fn scan_end(&self, file: &Rc<FS::File>, position: u64, file_size: u64) -> Result<Scan> {
        let rest = file_size - position;
        let torn = !self.all_zero(file, position, rest).await?;
        Ok(Scan {
            valid_end: position,
            torn,
        })
    }

    async fn all_zero(&self, file: &Rc<FS::File>, position: u64, len: u64) -> Result<bool> {
        let probe = len.min(crate::io::BLOCK_BYTES as u64 * 2) as usize;
        let bytes = file
            .read_at(position, probe)
            .await
            .map_err(|e| StorageError::io("probing tail", e))?;
        Ok(bytes.iter().all(|&b| b == 0))
    }

    pub(crate) async fn remove_segment_files(&self, base: Offset) -> Result<()> {
        for suffix in [
            files::LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let path = files::segment_path(&self.dir, base, suffix);
            match self.fs.remove(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io(format!("removing {}", path.display()), e)),
            }
        }
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(|e| StorageError::io("syncing directory", e))
    }
}
