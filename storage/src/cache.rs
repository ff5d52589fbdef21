//! The cache of recent batches: O_DIRECT bypasses the page cache, so the
//! log keeps the newest batches itself, as `Bytes` shared with readers.
//!
//! The cache holds a contiguous suffix of the log. Batches not yet durable
//! are pinned (they may not be on disk yet); durable ones are evicted oldest
//! first once the byte budget is exceeded.
//!
//! The logs of a shard may share a larger budget ([`CacheShare`]), the
//! part of memory a page cache would hold for a broker that reads through
//! one: each log keeps its own budget whatever the others hold, and more
//! while the shard's total stays within the share's limit. A reader that
//! catches up on what was just written then reads memory, not the disk.
//! The share counts memory, not only batch bytes: a batch that keeps the
//! request it arrived in alive is charged that request's memory, once for
//! all its batches (`frame_memory`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use bytes::Bytes;

use crate::frame_memory::{FrameCharges, FrameMemory};
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

/// The memory the batch caches of one shard's logs hold together, and
/// the most they may hold beyond each one's own budget.
#[derive(Debug)]
pub struct CacheShare {
    limit: usize,
    used: Cell<usize>,
    /// The frames the caches' batches keep alive, each charged once.
    frames: RefCell<FrameCharges>,
    /// The caches sharing it.
    members: Cell<usize>,
    /// The next batch's place in the order the sharing caches took their
    /// batches: the oldest across them is evicted first.
    next_seq: Cell<u64>,
}

impl CacheShare {
    /// A share of `limit` bytes.
    pub fn new(limit: usize) -> Rc<CacheShare> {
        Rc::new(CacheShare {
            limit,
            used: Cell::new(0),
            frames: RefCell::new(FrameCharges::default()),
            members: Cell::new(0),
            next_seq: Cell::new(0),
        })
    }

    /// Memory the sharing caches hold now: their batches' bytes, or the
    /// frames those batches keep alive.
    pub fn used(&self) -> usize {
        self.used.get()
    }

    /// The share's limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether the caches hold more than the limit.
    pub fn over(&self) -> bool {
        self.used.get() > self.limit
    }

    /// What a member cache whose own budget is `budget` keeps whatever
    /// the others hold, in batch bytes: its budget, but all members'
    /// floors together at most half the limit (the memory those batches
    /// keep alive can be more: a batch kept in its request is at least a
    /// third of it, `partition::append` in the broker). A floor of a few
    /// MiB per partition is nothing beside the limit for ten partitions;
    /// for a thousand it would be several times it (seen: 4.6 GiB
    /// resident with a 256 MiB limit).
    pub fn floor(&self, budget: usize) -> usize {
        budget.min(self.limit / 2 / self.members.get().max(1))
    }

    fn take_seq(&self) -> u64 {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        seq
    }

    fn hold(&self, batch: &CachedBatch) {
        let charged = self.frames.borrow_mut().hold(batch.frame, batch.data.len());
        self.used.set(self.used.get() + charged);
    }

    fn release(&self, batch: &CachedBatch) {
        let charged = self
            .frames
            .borrow_mut()
            .release(batch.frame, batch.data.len());
        self.used.set(self.used.get() - charged);
    }
}

#[derive(Debug)]
struct CachedBatch {
    /// When the cache took it, in its share's order (0 without a share).
    seq: u64,
    base: Offset,
    next: Offset,
    data: Bytes,
    /// The frame `data` keeps alive, if it is a slice of one.
    frame: Option<FrameMemory>,
}

/// A contiguous run of the newest batches of one log.
#[derive(Debug)]
pub struct BatchCache {
    batches: VecDeque<CachedBatch>,
    /// The batches' own bytes (what the cache's own budget is about).
    bytes: usize,
    budget_bytes: usize,
    share: Option<Rc<CacheShare>>,
}

impl Drop for BatchCache {
    fn drop(&mut self) {
        self.clear();
        if let Some(share) = &self.share {
            share.members.set(share.members.get() - 1);
        }
    }
}

impl BatchCache {
    /// An empty cache that keeps up to `budget_bytes` of durable batches.
    pub fn new(budget_bytes: usize) -> BatchCache {
        BatchCache {
            batches: VecDeque::new(),
            bytes: 0,
            budget_bytes,
            share: None,
        }
    }

    /// Adds the batch just appended, covering `base..next`; `frame` is
    /// the allocation it is a slice of, if not memory of its own.
    pub fn push(&mut self, base: Offset, next: Offset, data: Bytes, frame: Option<FrameMemory>) {
        if let Some(last) = self.batches.back() {
            assert!(base >= last.next, "cache batches must follow each other");
        }
        let seq = self.share.as_ref().map_or(0, |s| s.take_seq());
        let batch = CachedBatch {
            seq,
            base,
            next,
            data,
            frame,
        };
        self.bytes += batch.data.len();
        if let Some(share) = &self.share {
            share.hold(&batch);
        }
        self.batches.push_back(batch);
    }

    /// Shares the budget with the other caches of `share` from now on.
    pub fn set_share(&mut self, share: Rc<CacheShare>) {
        for batch in &self.batches {
            if let Some(old) = &self.share {
                old.release(batch);
            }
            share.hold(batch);
        }
        if let Some(old) = &self.share {
            old.members.set(old.members.get() - 1);
        }
        share.members.set(share.members.get() + 1);
        self.share = Some(share);
    }

    /// What the cache keeps whatever the others sharing its budget hold.
    fn floor(&self) -> usize {
        self.share
            .as_ref()
            .map_or(self.budget_bytes, |share| share.floor(self.budget_bytes))
    }

    /// Evicts durable batches (those ending at or below `durable`), oldest
    /// first, while over budget: past its own budget when the cache shares
    /// none, past its own budget and the share's limit when it does.
    /// Returns the bytes evicted.
    pub fn evict(&mut self, durable: Offset) -> usize {
        let limit = self.share.as_ref().map_or(0, |s| s.limit());
        self.evict_before(durable, u64::MAX, limit)
    }

    /// The share's place of the oldest batch that could be evicted (durable,
    /// and the cache past its own budget), if any.
    pub fn oldest_evictable(&self, durable: Offset) -> Option<u64> {
        let front = self.batches.front()?;
        (self.bytes > self.floor() && front.next <= durable).then_some(front.seq)
    }

    /// Evicts durable batches older than `seq` in the share's order, while
    /// past the cache's own budget and the share holds more than
    /// `share_down_to`. Returns the bytes evicted.
    pub fn evict_before(&mut self, durable: Offset, seq: u64, share_down_to: usize) -> usize {
        let before = self.bytes;
        let share_over = |cache: &Self| {
            cache
                .share
                .as_ref()
                .is_none_or(|s| s.used() > share_down_to)
        };
        let floor = self.floor();
        while self.bytes > floor && share_over(self) {
            match self.batches.front() {
                Some(front) if front.next <= durable && front.seq < seq => self.pop_front(),
                _ => break,
            }
        }
        before - self.bytes
    }

    /// Counts a batch gone from the cache, in the share's total too.
    fn forget(&mut self, batch: &CachedBatch) {
        self.bytes -= batch.data.len();
        if let Some(share) = &self.share {
            share.release(batch);
        }
    }

    /// Drops batches at or after `offset` (truncation at a batch boundary).
    pub fn truncate_from(&mut self, offset: Offset) {
        while let Some(back) = self.batches.back() {
            if back.next <= offset {
                break;
            }
            let back = self.batches.pop_back().expect("non-empty");
            self.forget(&back);
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
        while let Some(back) = self.batches.pop_back() {
            self.forget(&back);
        }
    }

    fn pop_front(&mut self) {
        let front = self.batches.pop_front().expect("non-empty");
        self.forget(&front);
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

    /// The batches' bytes held.
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
                None,
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

    #[test]
    fn a_shared_budget_lets_a_cache_grow_past_its_own_until_the_shard_total_reaches_the_limit() {
        let share = CacheShare::new(1000);
        let mut busy = cache_of(&[], 100);
        busy.set_share(share.clone());
        for i in 0..8 {
            busy.push(Offset(i), Offset(i + 1), Bytes::from(vec![0; 100]), None);
            busy.evict(Offset(i + 1));
        }
        assert_eq!(
            busy.bytes(),
            800,
            "under the limit nothing durable is evicted"
        );
        let mut quiet = cache_of(&[(0, 1, 150)], 200);
        quiet.set_share(share.clone());
        assert_eq!(share.used(), 950);
        for i in 8..12 {
            busy.push(Offset(i), Offset(i + 1), Bytes::from(vec![0; 100]), None);
            busy.evict(Offset(i + 1));
        }
        assert_eq!(
            busy.bytes(),
            800,
            "over the limit the growing cache sheds its oldest"
        );
        assert_eq!(share.used(), 950);
        assert!(busy.covers(Offset(4)) && !busy.covers(Offset(3)));
        // A cache within its own budget keeps it whatever the shard holds.
        assert_eq!(quiet.evict(Offset(1)), 0);
        // Batches not yet durable are never evicted.
        busy.push(Offset(12), Offset(13), Bytes::from(vec![0; 1000]), None);
        assert_eq!(busy.evict(Offset(12)), 800);
        assert_eq!(busy.bytes(), 1000, "only the pinned batch is left");
        assert!(share.over());
        drop(busy);
        assert_eq!(share.used(), 150, "a dropped cache gives its bytes back");
        quiet.truncate_from(Offset(0));
        assert_eq!(share.used(), 0);
    }

    #[test]
    fn the_share_orders_batches_across_caches_so_the_oldest_go_first() {
        let share = CacheShare::new(10_000);
        let (mut a, mut b) = (BatchCache::new(0), BatchCache::new(0));
        a.set_share(share.clone());
        b.set_share(share.clone());
        for i in 0..3 {
            a.push(Offset(i), Offset(i + 1), Bytes::from(vec![0; 10]), None);
            b.push(Offset(i), Offset(i + 1), Bytes::from(vec![0; 10]), None);
        }
        // Taken in turns: a0 b0 a1 b1 a2 b2.
        assert_eq!(a.oldest_evictable(Offset(3)), Some(0));
        assert_eq!(b.oldest_evictable(Offset(3)), Some(1));
        assert_eq!(
            a.evict_before(Offset(3), 3, 0),
            20,
            "a0 and a1 are older than b1"
        );
        assert_eq!(b.oldest_evictable(Offset(3)), Some(1));
        assert_eq!(
            b.oldest_evictable(Offset(0)),
            None,
            "b0 is not durable below 0"
        );
        assert_eq!(
            b.evict_before(Offset(3), u64::MAX, 20),
            20,
            "from 40 bytes down to the share's target of 20"
        );
        assert_eq!(b.evict_before(Offset(3), u64::MAX, 0), 10);
        assert_eq!(share.used(), 10);
    }

    #[test]
    fn a_frame_kept_alive_by_batches_is_charged_once_until_the_last_goes() {
        let share = CacheShare::new(10_000);
        let (mut a, mut b) = (BatchCache::new(0), BatchCache::new(0));
        a.set_share(share.clone());
        b.set_share(share.clone());
        // One request of 3,000 bytes: a batch of 1,000 for each log.
        let frame = FrameMemory::new(3_000);
        a.push(
            Offset(0),
            Offset(1),
            Bytes::from(vec![0; 1_000]),
            Some(frame),
        );
        b.push(
            Offset(0),
            Offset(1),
            Bytes::from(vec![0; 1_000]),
            Some(frame),
        );
        a.push(Offset(1), Offset(2), Bytes::from(vec![0; 500]), None);
        assert_eq!(
            share.used(),
            3_500,
            "the frame whole, once, and a batch of its own"
        );
        assert_eq!(
            a.bytes() + b.bytes(),
            2_500,
            "each cache counts its batches' bytes"
        );
        a.drop_below(Offset(1));
        assert_eq!(share.used(), 3_500, "b's batch still keeps the frame alive");
        b.evict_before(Offset(1), u64::MAX, 0);
        assert_eq!(share.used(), 500, "the frame is gone with its last batch");
        let mut c = BatchCache::new(0);
        c.push(Offset(0), Offset(1), Bytes::from(vec![0; 100]), Some(frame));
        c.set_share(share.clone());
        assert_eq!(
            share.used(),
            3_500,
            "a cache joining a share brings its frames"
        );
        drop(c);
        drop(a);
        assert_eq!(share.used(), 0);
    }

    #[test]
    fn many_caches_sharing_a_budget_keep_floors_within_half_of_it() {
        let share = CacheShare::new(1_000);
        let mut caches: Vec<BatchCache> = (0..5).map(|_| BatchCache::new(400)).collect();
        for cache in &mut caches {
            cache.set_share(share.clone());
        }
        assert_eq!(share.floor(400), 100, "1,000 / 2 over 5 caches");
        for cache in &mut caches {
            for i in 0..3 {
                cache.push(Offset(i), Offset(i + 1), Bytes::from(vec![0; 100]), None);
                cache.evict(Offset(i + 1));
            }
        }
        // A pass evicting everything it may (as the broker's trim does)
        // leaves each cache its floor: under its own budget of 400 each
        // would keep all 300 bytes, 1,500 in all, over the limit.
        for cache in &mut caches {
            cache.evict_before(Offset(3), u64::MAX, 0);
        }
        assert!(caches.iter().all(|cache| cache.bytes() == 100));
        assert_eq!(share.used(), 500);
        drop(caches.pop());
        assert_eq!(share.floor(400), 125, "fewer caches, larger floors");
        assert_eq!(share.floor(50), 50, "never above a cache's own budget");
    }
}
