//! The read path: whole batches from the cache, else from aligned disk
//! reads with read-ahead, never past the caller's bound.

use std::rc::Rc;

use bytes::Bytes;

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::error::{Result, StorageError};
use crate::io::{DirectFile, FileSystem};
use crate::log::{Log, ReadOutcome};
use crate::read_ahead::{ReadAhead, ReaderAt};
use crate::types::Offset;

/// The largest disk read one chunk of a read takes (or plans ahead), so
/// that no client's max_bytes sizes the memory a read holds.
const READ_CHUNK_MAX: usize = 8 << 20;

/// A disk read of one segment's durable bytes.
struct SegmentCursor<F> {
    base: Offset,
    file: Rc<F>,
    position: u64,
    durable_size: u64,
}

/// How a scan of one chunk ended.
enum ChunkEnd {
    /// The bound or max_bytes was reached at the batch at this position:
    /// the read is complete.
    Done(u64),
    /// The chunk ran out at this position.
    More(u64),
    /// A batch at this position does not fit the chunk; it is this long.
    Incomplete(u64, usize),
}

/// Where the next part of a read comes from.
enum Source<F> {
    Cache,
    Disk(SegmentCursor<F>),
    Nothing,
}

impl<FS: FileSystem> Log<FS> {
    /// Whole batches starting with the one containing `offset`, up to
    /// `max_bytes` (but at least one batch), none reaching `bound` or beyond.
    ///
    /// `bound` is what the reader may see: the high watermark for consumers,
    /// the log end for followers. Offsets outside [log start, log end] are
    /// OffsetOutOfRange; at the log end the result is empty.
    pub async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
    ) -> Result<ReadOutcome> {
        loop {
            let (generation, bound) = {
                let st = self.state.borrow();
                if offset < st.log_start || offset > st.log_end {
                    return Err(StorageError::OffsetOutOfRange {
                        requested: offset,
                        log_start: st.log_start,
                        log_end: st.log_end,
                    });
                }
                (st.generation, bound.min(st.log_end))
            };
            let outcome = self.read_parts(offset, max_bytes, bound).await;
            if self.state.borrow().generation == generation {
                return outcome;
            }
            // Truncation, deletion or compaction ran while we awaited the
            // disk: what we read (or failed to) may be gone. Read again.
        }
    }

    /// Collects the read from disk segments and then the cache, in order.
    async fn read_parts(
        &self,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
    ) -> Result<ReadOutcome> {
        let mut out = ReadOutcome::default();
        // The next offset wanted; moves past every batch read.
        let mut next = offset;
        let mut segment_index = self.state.borrow().segment_index(offset);
        while next < bound {
            let source = self.source(next, &mut segment_index);
            let done = match source {
                Source::Nothing => true,
                Source::Cache => {
                    let mut st = self.state.borrow_mut();
                    st.stats.cache_reads += 1;
                    st.cache.read_into(next, max_bytes, bound, &mut out);
                    true
                }
                Source::Disk(cursor) => {
                    self.state.borrow_mut().stats.disk_reads += 1;
                    let durable_end = cursor.durable_size;
                    let (done, position) = self
                        .read_segment(cursor, next, max_bytes, bound, &mut out)
                        .await?;
                    segment_index += 1;
                    if let Some(reached) = out.next_offset {
                        next = next.max(reached);
                    }
                    // A segment read to its durable end continues with the
                    // next segment or, for the active one, the cache.
                    if position < durable_end {
                        segment_index -= 1;
                    }
                    done
                }
            };
            if done {
                break;
            }
        }
        Ok(out)
    }

    /// Where the batch at `next` is: the cache, or the first segment from
    /// `segment_index` on with durable bytes (compaction can empty one).
    fn source(&self, next: Offset, segment_index: &mut usize) -> Source<FS::File> {
        let st = self.state.borrow();
        if st.cache.covers(next) {
            return Source::Cache;
        }
        while let Some(segment) = st.segments.get(*segment_index) {
            match &segment.file {
                Some(file) if segment.durable_size > 0 => {
                    return Source::Disk(SegmentCursor {
                        base: segment.base,
                        file: file.clone(),
                        position: segment.scan_start(next),
                        durable_size: segment.durable_size,
                    })
                }
                _ => *segment_index += 1,
            }
        }
        Source::Nothing
    }

    /// Reads one segment's durable batches into `out`. Returns whether the
    /// read is complete and the position the scan reached.
    async fn read_segment(
        &self,
        cursor: SegmentCursor<FS::File>,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
        out: &mut ReadOutcome,
    ) -> Result<(bool, u64)> {
        let mut position = cursor.position;
        // A client's max_bytes does not size a disk read past the cap (a read
        // that wants more goes on in further chunks).
        let want = self
            .config
            .read_ahead_bytes
            .max(max_bytes.saturating_add(HEADER_BYTES).min(READ_CHUNK_MAX));
        let mut need = HEADER_BYTES;
        while position < cursor.durable_size {
            let chunk = self.chunk_at(&cursor, position, need, want).await?;
            match self.collect(&chunk, position, offset, max_bytes, bound, out, cursor.base)? {
                ChunkEnd::Done(stop) => {
                    let generation = self.state.borrow().generation;
                    self.reader_stopped(ReaderAt {
                        file: cursor.file.clone(),
                        segment_base: cursor.base,
                        position: stop,
                        durable_size: cursor.durable_size,
                        chunk_bytes: want,
                        generation,
                    });
                    return Ok((true, position));
                }
                ChunkEnd::More(next) => {
                    position = next;
                    need = HEADER_BYTES;
                }
                ChunkEnd::Incomplete(next, len) => {
                    position = next;
                    need = len;
                }
            }
        }
        Ok((false, position))
    }

    /// Whole batches of `chunk` (which starts at `position`) that the read wants.
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &self,
        chunk: &Bytes,
        position: u64,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
        out: &mut ReadOutcome,
        segment_base: Offset,
    ) -> Result<ChunkEnd> {
        let mut at = 0;
        let mut run_start = None;
        let mut run_bytes = 0;
        let mut run_next = Offset(0);
        let end = loop {
            if chunk.len() - at < HEADER_BYTES {
                break ChunkEnd::More(position + at as u64);
            }
            let header =
                BatchHeader::parse(&chunk[at..], self.config.max_batch_bytes).map_err(|e| {
                    StorageError::io(
                        format!("segment {segment_base} position {}", position + at as u64),
                        std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
                    )
                })?;
            let len = header.total_bytes;
            let wanted = header.next_offset() > offset;
            let fits = out.bytes + run_bytes == 0 || out.bytes + run_bytes + len <= max_bytes;
            // Decided from the header alone: a batch the read will not take
            // costs no disk read of its body.
            if wanted && (header.next_offset() > bound || !fits) {
                break ChunkEnd::Done(position + at as u64);
            }
            if chunk.len() - at < len {
                break ChunkEnd::Incomplete(position + at as u64, len);
            }
            if !wanted {
                at += len;
                continue;
            }
            run_start.get_or_insert(at);
            run_next = header.next_offset();
            run_bytes += len;
            at += len;
        };
        if let Some(start) = run_start {
            out.push(chunk.slice(start..at), run_next);
        }
        Ok(end)
    }

    /// At least `need` and up to `want` bytes at `position` (fewer at the
    /// durable end): the rest of the read-ahead chunk when it holds `need`
    /// bytes there, else the planned prefetch's when it does, else one disk
    /// read that becomes the new read-ahead chunk.
    async fn chunk_at(
        &self,
        cursor: &SegmentCursor<FS::File>,
        position: u64,
        need: usize,
        want: usize,
    ) -> Result<Bytes> {
        let context = || format!("reading segment {} at {position}", cursor.base);
        let available = (cursor.durable_size - position) as usize;
        if available < need {
            let err = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "segment ends inside a batch",
            );
            return Err(StorageError::io(context(), err));
        }
        let generation = self.state.borrow().generation;
        if let Some(ra) = &self.state.borrow().read_ahead {
            if ra.holds(cursor.base, position, need, generation) {
                return Ok(ra.data.slice((position - ra.position) as usize..));
            }
        }
        if let Some(data) = self.prefetched(cursor.base, position, need).await {
            return Ok(data);
        }
        let len = want.max(need).min(available);
        let data = cursor
            .file
            .read_at(position, len)
            .await
            .map_err(|e| StorageError::io(context(), e))?;
        if data.len() < need {
            let err =
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "durable data missing");
            return Err(StorageError::io(context(), err));
        }
        // Kept for the next read only if nothing moved the log's bytes
        // while this one was in flight (the caller reads again then).
        let mut st = self.st();
        if st.generation == generation {
            st.read_ahead = Some(ReadAhead {
                segment_base: cursor.base,
                position,
                data: data.clone(),
                generation,
            });
        }
        Ok(data)
    }
}
