//! Tiered storage's disk cache of what remote reads fetched, on the
//! store's thread (docs/tiered-storage.md): each chunk (or small object
//! read whole) a file under `remote_cache_dir`, named after its object and
//! byte range, its CRC-32C after its bytes; the least recently used
//! deleted once the files pass `remote_disk_cache_bytes`.
//!
//! Objects never change once written (their names come from their
//! contents), so a cached chunk stays valid until its object is deleted,
//! and the store's delete drops it here too. A file is written under a
//! temporary name and renamed: a crash leaves whole files or temporary
//! ones, which the next start removes while it indexes the rest (least
//! recently modified first out). A damaged or missing file is a miss.
//! Blocking file calls run on the runtime's blocking pool.

mod index;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;

pub use index::file_name;
use index::{object_of, DiskIndex};

/// A temporary file's suffix.
const TEMPORARY: &str = ".tmp";

/// The cache in one directory.
pub struct DiskCache {
    dir: PathBuf,
    index: Mutex<DiskIndex>,
    temporaries: AtomicU64,
}

impl DiskCache {
    /// Opens the cache in `dir` (made if missing): indexes the files found
    /// there, deletes temporary ones and what is over `budget`, or over
    /// half of what the file system has free for it (the cache shares
    /// the disk with the partitions: it never takes more than half of
    /// the room left at start). Blocking: called once, at start.
    pub fn open(dir: &Path, budget: u64) -> std::io::Result<DiskCache> {
        std::fs::create_dir_all(dir)?;
        let mut found = Vec::new();
        walk(dir, dir, &mut found)?;
        found.sort_by_key(|(_, _, modified)| *modified);
        let held: u64 = found.iter().map(|(_, size, _)| size).sum();
        let budget = within_free_space(dir, budget, held);
        let mut index = DiskIndex::new(budget);
        for (name, size, _) in found {
            for evicted in index.insert(name, size) {
                std::fs::remove_file(dir.join(evicted))?;
            }
        }
        Ok(DiskCache {
            dir: dir.to_path_buf(),
            index: Mutex::new(index),
            temporaries: AtomicU64::new(0),
        })
    }

    fn index(&self) -> std::sync::MutexGuard<'_, DiskIndex> {
        self.index.lock().expect("disk cache index")
    }

    /// The bytes cached as `name`, if held and whole.
    pub async fn get(&self, name: &str) -> Option<Bytes> {
        if !self.index().touch(name) {
            return None;
        }
        let path = self.dir.join(name);
        let read = tokio::task::spawn_blocking(move || std::fs::read(path)).await;
        let unsealed = match read {
            Ok(Ok(sealed)) => unseal(sealed),
            _ => None,
        };
        if unsealed.is_none() {
            tracing::warn!(
                file = name,
                "a file of the remote read cache is missing or damaged: read from the store again"
            );
            self.remove(vec![name.to_string()]).await;
        }
        unsealed
    }

    /// Keeps `bytes` as `name`, deleting the least recently used files
    /// past the budget. A failure (a full disk) only costs a later miss.
    pub async fn put(&self, name: String, bytes: &Bytes) {
        let path = self.dir.join(&name);
        let n = self.temporaries.fetch_add(1, Ordering::Relaxed);
        let temporary = PathBuf::from(format!("{}.{n}{TEMPORARY}", path.display()));
        let sealed = seal(bytes);
        let size = sealed.len() as u64;
        let write = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let written = std::fs::write(&temporary, sealed)
                .and_then(|()| std::fs::rename(&temporary, &path));
            if written.is_err() {
                let _ = std::fs::remove_file(&temporary);
            }
            written
        })
        .await;
        match write {
            Ok(Ok(())) => {
                let evicted = self.index().insert(name, size);
                self.remove(evicted).await;
            }
            Ok(Err(e)) => {
                tracing::warn!(file = name, error = %e, "cannot write to the remote read cache")
            }
            Err(e) => {
                tracing::warn!(file = name, error = %e, "cannot write to the remote read cache")
            }
        }
    }

    /// Drops every file of `object` (deleted from the store).
    pub async fn forget_object(&self, object: &str) {
        let files = self.index().files_of(object);
        self.remove(files).await;
    }

    /// Bytes held.
    pub fn held_bytes(&self) -> u64 {
        self.index().held_bytes()
    }

    /// Forgets and deletes files.
    async fn remove(&self, names: Vec<String>) {
        if names.is_empty() {
            return;
        }
        let paths: Vec<PathBuf> = {
            let mut index = self.index();
            names
                .iter()
                .inspect(|name| {
                    index.remove(name);
                })
                .map(|name| self.dir.join(name))
                .collect()
        };
        let _ = tokio::task::spawn_blocking(move || {
            for path in paths {
                let _ = std::fs::remove_file(path);
            }
        })
        .await;
    }
}

/// `budget`, or half of the room the file system has for the cache (its
/// free bytes and what it holds already) when that is less (logged).
fn within_free_space(dir: &Path, budget: u64, held: u64) -> u64 {
    let Ok(stats) = nix::sys::statvfs::statvfs(dir) else {
        return budget;
    };
    let free = stats
        .blocks_available()
        .saturating_mul(stats.fragment_size());
    let kept = budget_within(budget, free, held);
    if kept < budget {
        tracing::warn!(dir = %dir.display(), budget, kept, "the remote read cache's budget is more than half of the free disk space: it keeps to half");
    }
    kept
}

/// `budget`, at most half of `free` bytes and the `held` ones.
fn budget_within(budget: u64, free: u64, held: u64) -> u64 {
    budget.min(free.saturating_add(held) / 2)
}

/// The files under `dir` (names relative to `root`, sizes, modification
/// times); temporary ones deleted, others not named as cached files left
/// alone.
fn walk(
    root: &Path,
    dir: &Path,
    found: &mut Vec<(String, u64, SystemTime)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = entry.metadata()?;
        if meta.is_dir() {
            walk(root, &path, found)?;
            continue;
        }
        let Some(name) = path
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if name.ends_with(TEMPORARY) {
            std::fs::remove_file(&path)?;
        } else if object_of(&name).is_some() {
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((name, meta.len(), modified));
        }
    }
    Ok(())
}

/// The bytes, then their CRC-32C.
fn seal(bytes: &[u8]) -> Vec<u8> {
    let mut sealed = Vec::with_capacity(bytes.len() + 4);
    sealed.extend_from_slice(bytes);
    sealed.extend_from_slice(&crc32c::crc32c(bytes).to_be_bytes());
    sealed
}

/// The bytes of a sealed file, if its CRC-32C matches.
fn unseal(mut sealed: Vec<u8>) -> Option<Bytes> {
    let at = sealed.len().checked_sub(4)?;
    let crc = u32::from_be_bytes(sealed[at..].try_into().ok()?);
    sealed.truncate(at);
    (crc32c::crc32c(&sealed) == crc).then(|| Bytes::from(sealed))
}

#[cfg(test)]
mod tests;
