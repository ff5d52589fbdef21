//! The cache of recent batches: O_DIRECT bypasses the page cache, so the
//! log keeps the newest batches itself, as `Bytes` shared with readers.
//!
//! The cache holds a contiguous suffix of the log. Batches not yet durable
//! are pinned (they may not be on disk yet); durable ones are evicted oldest
//! first once the byte budget is exceeded.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::types::Offset;

/// Batches returned by a read: whole batches, in order, as stored.
#[derive(Clone, Debug, Default)]
pub struct ReadOutcome {
    /// Contiguous runs of whole batches, shared with the cache or a disk read.
    pub chunks: Vec<Bytes>,
    /// Total bytes over all chunks.
    pub bytes: usize,
    /// The offset after the last batch returned, if any was.
    pub next_offset: Option<Offset>,
}

impl ReadOutcome {
    /// Whether a batch of `len` bytes still fits: always the first one.
    pub fn admits(&self, len: usize, max_bytes: usize) -> bool {
        self.bytes == 0 || self.bytes + len <= max_bytes
    }

    /// Adds a run of whole batches.
    pub fn push(&mut self, run: Bytes, next_offset: Offset) {
        self.next_offset = Some(next_offset);
        self.bytes += run.len();
        self.chunks.push(run);
    }

    /// All chunks in one buffer (copies; for tests and small responses).
    pub fn to_bytes(&self) -> Bytes {
        let mut all = bytes::BytesMut::with_capacity(self.bytes);
        for chunk in &self.chunks {
            all.extend_from_slice(chunk);
        }
        all.freeze()
    }
}

#[derive(Debug)]
struct CachedBatch {
    base: Offset,
    next: Offset,
    data: Bytes,
}

/// A contiguous run of the newest batches of one log.
#[derive(Debug)]
pub struct BatchCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
    budget_bytes: usize,
}

impl BatchCache {
    /// An empty cache that keeps up to `budget_bytes` of durable batches.
    pub fn new(budget_bytes: usize) -> BatchCache {
        BatchCache {
            batches: VecDeque::new(),
            bytes: 0,
            budget_bytes,
        }
    }

    /// Adds the batch just appended, covering `base..next`.
    pub fn push(&mut self, base: Offset, next: Offset, data: Bytes) {
        if let Some(last) = self.batches.back() {
            assert!(base >= last.next, "cache batches must follow each other");
        }
        self.bytes += data.len();
        self.batches.push_back(CachedBatch { base, next, data });
    }

    /// Evicts durable batches (those ending at or below `durable`) while over budget.
    pub fn evict(&mut self, durable: Offset) {
        while self.bytes > self.budget_bytes {
            match self.batches.front() {
                Some(front) if front.next <= durable => self.pop_front(),
                _ => break,
            }
        }
    }

    /// Drops batches at or after `offset` (truncation at a batch boundary).
    pub fn truncate_from(&mut self, offset: Offset) {
        while let Some(back) = self.batches.back() {
            if back.next <= offset {
                break;
            }
            let back = self.batches.pop_back().expect("non-empty");
            self.bytes -= back.data.len();
        }
    }

    /// Drops batches that end at or below `offset`.
    pub fn drop_below(&mut self, offset: Offset) {
        while matches!(self.batches.front(), Some(f) if f.next <= offset) {
            self.pop_front();
        }
    }

    /// Drops everything.
    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    fn pop_front(&mut self) {
        let front = self.batches.pop_front().expect("non-empty");
        self.bytes -= front.data.len();
    }

    /// Whether a read at `offset` can be answered from the cache alone.
    pub fn covers(&self, offset: Offset) -> bool {
        matches!(self.batches.front(), Some(f) if f.base <= offset)
    }

    /// Appends to `out` whole batches from the one containing `offset`,
    /// ending at or below `bound`, while `out` stays within `max_bytes`
    /// (but takes at least one batch if `out` is empty). Returns whether the
    /// read is complete (bound or size reached), not just out of batches.
    pub fn read_into(
        &self,
        offset: Offset,
        max_bytes: usize,
        bound: Offset,
        out: &mut ReadOutcome,
    ) -> bool {
        let first = self.batches.partition_point(|b| b.next <= offset);
        for batch in self.batches.range(first..) {
            if batch.next > bound || !out.admits(batch.data.len(), max_bytes) {
                return true;
            }
            out.push(batch.data.clone(), batch.next);
        }
        false
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_of(sizes: &[(i64, i64, usize)], budget: usize) -> BatchCache {
        let mut cache = BatchCache::new(budget);
        for &(base, next, len) in sizes {
            cache.push(
                Offset(base),
                Offset(next),
                Bytes::from(vec![base as u8; len]),
            );
        }
        cache
    }

    #[test]
    fn reads_start_at_the_containing_batch_and_respect_bounds() {
        let cache = cache_of(&[(0, 10, 100), (10, 20, 100), (20, 30, 100)], 1 << 20);
        let read = |offset, max, bound| {
            let mut out = ReadOutcome::default();
            cache.read_into(Offset(offset), max, Offset(bound), &mut out);
            out.chunks
        };
        let got = read(15, 1000, 30);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0][0], 10);
        assert_eq!(read(15, 1000, 25).len(), 1, "bound");
        assert_eq!(read(0, 150, 30).len(), 1, "max bytes");
        assert_eq!(read(0, 1, 30).len(), 1, "at least one");
        assert!(read(30, 1000, 30).is_empty());
    }

    #[test]
    fn only_durable_batches_are_evicted() {
        let mut cache = cache_of(&[(0, 10, 100), (10, 20, 100), (20, 30, 100)], 100);
        cache.evict(Offset(10));
        assert!(!cache.covers(Offset(5)));
        assert!(cache.covers(Offset(10)), "not durable yet, pinned");
        cache.evict(Offset(30));
        assert!(cache.covers(Offset(20)) && !cache.covers(Offset(19)));
        assert_eq!(cache.bytes(), 100);
    }

    #[test]
    fn truncation_drops_the_newest_batches() {
        let mut cache = cache_of(&[(0, 10, 100), (10, 20, 100)], 1 << 20);
        cache.truncate_from(Offset(10));
        let mut out = ReadOutcome::default();
        cache.read_into(Offset(0), 1000, Offset(100), &mut out);
        assert_eq!(out.chunks.len(), 1);
        cache.drop_below(Offset(10));
        assert!(!cache.covers(Offset(10)));
        assert_eq!(cache.bytes(), 0);
    }
}
