//! The disk cache's bookkeeping, sans I/O: which cached files exist, their
//! sizes and how recently each was used, and which to evict, least
//! recently used first, to stay within the byte budget.

use std::collections::BTreeMap;

/// Cached files by name, within a byte budget.
#[derive(Debug, Default)]
pub struct DiskIndex {
    budget: u64,
    held: u64,
    tick: u64,
    /// Name → (size, tick of its last use), by name (an object's files
    /// are neighbours).
    files: BTreeMap<String, (u64, u64)>,
    /// Tick of last use → name: the eviction order.
    by_use: BTreeMap<u64, String>,
}

impl DiskIndex {
    /// An empty index of at most `budget` bytes.
    pub fn new(budget: u64) -> DiskIndex {
        DiskIndex {
            budget,
            ..DiskIndex::default()
        }
    }

    /// Whether `name` is held; if so it is now the most recently used.
    pub fn touch(&mut self, name: &str) -> bool {
        let Some((_, used)) = self.files.get_mut(name) else {
            return false;
        };
        self.tick += 1;
        self.by_use.remove(used);
        *used = self.tick;
        self.by_use.insert(self.tick, name.to_string());
        true
    }

    /// Records a file of `size` bytes as the most recently used; returns
    /// the files to delete to stay within the budget, least recently used
    /// first (the new one itself when it alone is over the budget).
    pub fn insert(&mut self, name: String, size: u64) -> Vec<String> {
        self.remove(&name);
        if size > self.budget {
            return vec![name];
        }
        self.tick += 1;
        self.held += size;
        self.files.insert(name.clone(), (size, self.tick));
        self.by_use.insert(self.tick, name);
        let mut evicted = Vec::new();
        while self.held > self.budget {
            let (_, oldest) = self
                .by_use
                .pop_first()
                .expect("over budget: something held");
            let (size, _) = self.files.remove(&oldest).expect("indexed both ways");
            self.held -= size;
            evicted.push(oldest);
        }
        evicted
    }

    /// Forgets a file (deleted, or found missing or damaged).
    pub fn remove(&mut self, name: &str) -> bool {
        let Some((size, used)) = self.files.remove(name) else {
            return false;
        };
        self.by_use.remove(&used);
        self.held -= size;
        true
    }

    /// The files held of `object` (its chunks, or the whole of it).
    pub fn files_of(&self, object: &str) -> Vec<String> {
        let prefix = format!("{object}.");
        self.files
            .range(prefix.clone()..)
            .map(|(name, _)| name)
            .take_while(|name| name.starts_with(&prefix))
            .filter(|name| object_of(name) == Some(object))
            .cloned()
            .collect()
    }

    /// Bytes held.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }
}

/// A cached file's name: the object's name, then the chunk's byte range
/// (`.<start>-<end>`) or `.whole`.
pub fn file_name(object: &str, range: Option<&std::ops::Range<u64>>) -> String {
    match range {
        Some(range) => format!("{object}.{}-{}", range.start, range.end),
        None => format!("{object}.whole"),
    }
}

/// The object a cached file's name belongs to (None: not such a name).
pub fn object_of(name: &str) -> Option<&str> {
    let (object, part) = name.rsplit_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let range = part
        .split_once('-')
        .is_some_and(|(a, b)| digits(a) && digits(b));
    (part == "whole" || range).then_some(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_files_go_first_and_the_budget_holds() {
        let mut index = DiskIndex::new(30);
        assert!(index.insert("a.0-10".into(), 10).is_empty());
        assert!(index.insert("a.10-20".into(), 10).is_empty());
        assert!(index.insert("b.whole".into(), 10).is_empty());
        assert!(index.touch("a.0-10"), "now the newest");
        assert_eq!(index.insert("c.0-15".into(), 15), ["a.10-20", "b.whole"]);
        assert_eq!(index.held_bytes(), 25);
        assert!(!index.touch("a.10-20"));
        assert_eq!(
            index.insert("huge.0-31".into(), 31),
            ["huge.0-31"],
            "over the budget alone"
        );
        assert_eq!(index.held_bytes(), 25);
        // Inserted again: replaced, not counted twice.
        assert!(index.insert("c.0-15".into(), 5).is_empty());
        assert_eq!(index.held_bytes(), 15);
        assert!(index.remove("a.0-10"));
        assert!(!index.remove("a.0-10"));
        assert_eq!(index.held_bytes(), 5);
        let mut none = DiskIndex::new(0);
        assert_eq!(none.insert("a.0-1".into(), 1), ["a.0-1"]);
    }

    #[test]
    fn an_objects_files_are_found_by_name_and_nothing_else() {
        let mut index = DiskIndex::new(100);
        let names = [
            "t/0/5-ab.log.0-1048576",
            "t/0/5-ab.log.1048576-1048999",
            "t/0/5-ab.index.whole",
            "t/0/5-ab.logx.0-9",
        ];
        for name in names {
            index.insert(name.into(), 1);
        }
        let mut files = index.files_of("t/0/5-ab.log");
        files.sort();
        assert_eq!(
            files,
            ["t/0/5-ab.log.0-1048576", "t/0/5-ab.log.1048576-1048999"]
        );
        assert_eq!(object_of("t/0/5-ab.index.whole"), Some("t/0/5-ab.index"));
        assert_eq!(object_of("t/0/5-ab.log.0-9.3.tmp"), None);
        assert_eq!(object_of("t/0/5-ab.log.0-"), None);
        assert_eq!(object_of("t/0/5-ab.log"), None);
        assert_eq!(file_name("o", Some(&(7..9))), "o.7-9");
        assert_eq!(file_name("o", None), "o.whole");
    }
}
