//! The read path: whole batches from the cache, else from aligned disk
//! reads with read-ahead, never past the caller's bound.

use std::rc::Rc;

use bytes::Bytes;

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::error::{Result, StorageError};
use crate::io::{DirectFile, FileSystem};
use crate::log::{Log, ReadAhead, ReadOutcome};
use crate::types::Offset;

/// Where a disk read of one segment starts.
struct SegmentCursor<F> {
    base: Offset,
    file: Rc<F>,
    position: u64,
    durable_size: u64,
}

/// How a scan of one chunk ended.
enum ChunkEnd {
    /// The bound or max_bytes was reached: the read is complete.
    Done,
    /// The chunk ran out at this position.
    More(u64),
    /// A batch at this position does not fit the chunk; it is this long.
    Incomplete(u64, usize),
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
            let generation = self.state.borrow().generation;
            let bound = {
                let st = self.state.borrow();
                if offset < st.log_start || offset > st.log_end {
                    return Err(StorageError::OffsetOutOfRange {
                        requested: offset,
                        log_start: st.log_start,
                        log_end: st.log_end,
                    });
                }
                let bound = bound.min(st.log_end);
                if offset >= bound {
                    return Ok(ReadOutcome::default());
                }
                if st.cache.covers(offset) {
                    let chunks = st.cache.read(offset, max_bytes, bound);
                    let bytes = chunks.iter().map(Bytes::len).sum();
                    return Ok(ReadOutcome { chunks, bytes });
                }
                bound
            };
            let outcome = self.read_from_disk(offset, max_bytes, bound).await?;
            if self.state.borrow().generation == generation {
                return Ok(outcome);
            }
            // Truncation or deletion ran while we awaited the disk: read again.
        }
    }

    async fn read_from_disk(
        &self,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
    ) -> Result<ReadOutcome> {
        let mut segment_index = self.state.borrow().segment_index(offset);
        loop {
            let Some(cursor) = self.cursor(segment_index, offset) else {
                return Ok(ReadOutcome::default());
            };
            let outcome = self.read_segment(cursor, offset, max_bytes, bound).await?;
            if !outcome.chunks.is_empty() {
                return Ok(outcome);
            }
            // Nothing at or after `offset` here (a gap left by compaction):
            // go on with the next segment.
            segment_index += 1;
        }
    }

    fn cursor(&self, segment_index: usize, offset: Offset) -> Option<SegmentCursor<FS::File>> {
        let st = self.state.borrow();
        let segment = st.segments.get(segment_index)?;
        Some(SegmentCursor {
            base: segment.base,
            file: segment.file.clone()?,
            position: segment.scan_start(offset),
            durable_size: segment.durable_size,
        })
    }

    async fn read_segment(
        &self,
        cursor: SegmentCursor<FS::File>,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
    ) -> Result<ReadOutcome> {
        let mut outcome = ReadOutcome::default();
        let mut position = cursor.position;
        let want = self
            .config
            .read_ahead_bytes
            .max(max_bytes.saturating_add(HEADER_BYTES));
        let mut need = HEADER_BYTES;
        while position < cursor.durable_size {
            let chunk = self.chunk_at(&cursor, position, need, want).await?;
            match self.collect(
                &chunk,
                position,
                offset,
                max_bytes,
                bound,
                &mut outcome,
                cursor.base,
            )? {
                ChunkEnd::Done => break,
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
        Ok(outcome)
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
        outcome: &mut ReadOutcome,
        segment_base: Offset,
    ) -> Result<ChunkEnd> {
        let mut at = 0;
        let mut run_start = None;
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
            if chunk.len() - at < header.total_bytes {
                break ChunkEnd::Incomplete(position + at as u64, header.total_bytes);
            }
            let len = header.total_bytes;
            if header.next_offset() <= offset {
                at += len;
                continue;
            }
            if header.next_offset() > bound
                || (outcome.bytes > 0 && outcome.bytes + len > max_bytes)
            {
                break ChunkEnd::Done;
            }
            run_start.get_or_insert(at);
            outcome.bytes += len;
            at += len;
        };
        if let Some(start) = run_start {
            outcome.chunks.push(chunk.slice(start..at));
        }
        Ok(end)
    }

    /// At least `need` and up to `want` bytes at `position` (fewer at the
    /// durable end): the rest of the read-ahead chunk when it holds `need`
    /// bytes there, else one disk read that becomes the new read-ahead chunk.
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
        if let Some(ra) = &self.state.borrow().read_ahead {
            let ra_end = ra.position + ra.data.len() as u64;
            if ra.segment_base == cursor.base
                && ra.position <= position
                && position + need as u64 <= ra_end
            {
                return Ok(ra.data.slice((position - ra.position) as usize..));
            }
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
        self.st().read_ahead = Some(ReadAhead {
            segment_base: cursor.base,
            position,
            data: data.clone(),
        });
        Ok(data)
    }
}
