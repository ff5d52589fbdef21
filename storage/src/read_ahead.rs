//! The bytes a log keeps for sequential readers: the last chunk read from
//! disk, and the planned read of the next one (see `prefetch`).

use std::collections::VecDeque;
use std::io;
use std::rc::Rc;

use bytes::Bytes;
use futures::future::{LocalBoxFuture, Shared};

use crate::batch::whole_batches_within;
use crate::types::Offset;

/// The last chunk read from disk, kept for the next sequential read.
pub(crate) struct ReadAhead {
    pub segment_base: Offset,
    pub position: u64,
    pub data: Bytes,
    /// The log's generation when the bytes were read: a chunk read before
    /// a truncation, deletion or compaction may hold what they removed.
    pub generation: u64,
}

impl ReadAhead {
    /// Whether the chunk holds `need` bytes at `position` of that segment.
    pub fn holds(&self, segment_base: Offset, position: u64, need: usize, generation: u64) -> bool {
        let chunk = (
            self.segment_base,
            self.position,
            self.data.len(),
            self.generation,
        );
        spans(chunk, (segment_base, position, need, generation))
    }
}

/// Whether the bytes `chunk` (segment, position, length, generation) spans
/// include the `wanted` ones.
fn spans(chunk: (Offset, u64, usize, u64), wanted: (Offset, u64, usize, u64)) -> bool {
    let (base, start, len, generation) = chunk;
    let (want_base, position, need, want_generation) = wanted;
    generation == want_generation
        && base == want_base
        && start <= position
        && position + need as u64 <= start + len as u64
}

/// A disk read whose bytes every waiter gets (the error shared too).
pub(crate) type SharedRead = Shared<LocalBoxFuture<'static, Result<Bytes, Rc<io::Error>>>>;

/// A planned read of a segment's bytes at `position` (a batch's start),
/// up to `len` of them.
pub(crate) struct Prefetch {
    pub segment_base: Offset,
    pub position: u64,
    pub len: usize,
    /// The log's generation when planned: truncation, deletion and
    /// compaction make the planned bytes useless.
    pub generation: u64,
    pub read: SharedRead,
    /// Whether a prefetch task drives the read already.
    pub handed_out: bool,
}

impl Prefetch {
    /// Whether this read holds `need` bytes at `position` of that segment.
    pub fn covers(
        &self,
        segment_base: Offset,
        position: u64,
        need: usize,
        generation: u64,
    ) -> bool {
        let chunk = (self.segment_base, self.position, self.len, self.generation);
        spans(chunk, (segment_base, position, need, generation))
    }

    /// Where the read's whole batches end, once it completed: the start of
    /// the chunk after it. `None` while in flight, after a failure, or when
    /// the chunk holds no whole batch.
    pub fn whole_end(&self) -> Option<u64> {
        let data = self.read.peek()?.as_ref().ok()?;
        match whole_batches_within(data, data.len()) {
            0 => None,
            whole => Some(self.position + whole as u64),
        }
    }
}

/// What the last read that stopped inside a segment planned from: the
/// prefetch window grows from there as its reads complete.
pub(crate) struct ReaderAt<F> {
    pub file: Rc<F>,
    pub segment_base: Offset,
    /// Where the reader's next read starts.
    pub position: u64,
    pub durable_size: u64,
    /// Bytes of one disk read.
    pub chunk_bytes: usize,
    pub generation: u64,
}

/// The reads planned ahead of one sequential reader (or of readers close
/// together).
pub(crate) struct Window<F> {
    /// Where the reader's last read stopped.
    pub at: ReaderAt<F>,
    /// The chunks read or being read beyond it, in order.
    pub chunks: VecDeque<Prefetch>,
    /// When it last planned for its reader (the log's count of reads that
    /// stopped inside a segment): the least recent window is replaced.
    pub used: u64,
    /// Calls of `Log::age_read_ahead` since its reader last read: a window
    /// whose reader went away is dropped with the memory it holds.
    pub idle_ages: u32,
}
