//! The shard's cache of chunks read from the object store: fixed-size,
//! aligned pieces of remote objects, the least recently used dropped
//! first once their bytes pass the budget. Sans I/O: the reader fetches
//! what [`ChunkCache::get`] does not have and [`ChunkCache::put`]s it.

use std::collections::HashMap;

use bytes::Bytes;

/// The size of a chunk (the last of an object may be shorter).
pub const CHUNK_BYTES: u64 = 1 << 20;

/// A chunk: an object's name and the chunk's index in it.
pub type ChunkKey = (String, u64);

/// Chunks in memory, within a byte budget.
#[derive(Debug, Default)]
pub struct ChunkCache {
    budget: usize,
    held: usize,
    tick: u64,
    chunks: HashMap<ChunkKey, (Bytes, u64)>,
    hits: u64,
    misses: u64,
}

impl ChunkCache {
    /// An empty cache of at most `budget` bytes (0: keeps nothing).
    pub fn new(budget: usize) -> ChunkCache {
        ChunkCache {
            budget,
            ..ChunkCache::default()
        }
    }

    /// The chunk, if held (now the most recently used).
    pub fn get(&mut self, key: &ChunkKey) -> Option<Bytes> {
        self.tick += 1;
        let tick = self.tick;
        match self.chunks.get_mut(key) {
            Some((bytes, used)) => {
                *used = tick;
                self.hits += 1;
                Some(bytes.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Keeps a chunk read from the store, dropping the least recently
    /// used ones while over the budget.
    pub fn put(&mut self, key: ChunkKey, bytes: Bytes) {
        if bytes.len() > self.budget {
            return;
        }
        self.tick += 1;
        self.held += bytes.len();
        if let Some((old, _)) = self.chunks.insert(key, (bytes, self.tick)) {
            self.held -= old.len();
        }
        while self.held > self.budget {
            let oldest = self
                .chunks
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
                .expect("over budget means something is held");
            let (dropped, _) = self.chunks.remove(&oldest).expect("just found");
            self.held -= dropped.len();
        }
    }

    /// Drops every chunk of an object (deleted by retention).
    pub fn forget(&mut self, object: &str) {
        let held = &mut self.held;
        self.chunks.retain(|(name, _), (bytes, _)| {
            let keep = name != object;
            if !keep {
                *held -= bytes.len();
            }
            keep
        });
    }

    /// Bytes held.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Lookups that found their chunk, and those that did not.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// The chunks covering `range` of an object of `size` bytes: (index,
/// byte range of the chunk).
pub fn chunks_of(range: std::ops::Range<u64>, size: u64) -> Vec<(u64, std::ops::Range<u64>)> {
    let end = range.end.min(size);
    if range.start >= end {
        return Vec::new();
    }
    (range.start / CHUNK_BYTES..=(end - 1) / CHUNK_BYTES)
        .map(|i| (i, i * CHUNK_BYTES..((i + 1) * CHUNK_BYTES).min(size)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, i: u64) -> ChunkKey {
        (name.to_string(), i)
    }

    #[test]
    fn the_least_recently_used_chunks_go_first_and_the_budget_holds() {
        let mut cache = ChunkCache::new(30);
        cache.put(key("a", 0), Bytes::from(vec![0; 10]));
        cache.put(key("a", 1), Bytes::from(vec![1; 10]));
        cache.put(key("b", 0), Bytes::from(vec![2; 10]));
        assert!(cache.get(&key("a", 0)).is_some(), "now the newest");
        cache.put(key("b", 1), Bytes::from(vec![3; 10]));
        assert_eq!(cache.held_bytes(), 30);
        assert!(
            cache.get(&key("a", 1)).is_none(),
            "the least recently used went"
        );
        assert!(cache.get(&key("a", 0)).is_some());
        assert_eq!(cache.hits_and_misses(), (2, 1));
        cache.put(key("huge", 0), Bytes::from(vec![0; 31]));
        assert!(
            cache.get(&key("huge", 0)).is_none(),
            "larger than the budget"
        );
        cache.forget("b");
        assert_eq!(cache.held_bytes(), 10);
        let mut none = ChunkCache::new(0);
        none.put(key("a", 0), Bytes::from(vec![0; 1]));
        assert_eq!(none.held_bytes(), 0);
    }

    #[test]
    fn a_range_maps_to_the_chunks_covering_it_within_the_object() {
        let c = CHUNK_BYTES;
        assert_eq!(chunks_of(0..1, 10), vec![(0, 0..10)]);
        assert_eq!(
            chunks_of(c - 1..c + 1, 3 * c),
            vec![(0, 0..c), (1, c..2 * c)]
        );
        assert_eq!(
            chunks_of(2 * c..5 * c, 2 * c + 7),
            vec![(2, 2 * c..2 * c + 7)]
        );
        assert_eq!(chunks_of(20..30, 10), vec![]);
    }
}
