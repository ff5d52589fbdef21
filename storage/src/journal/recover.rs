//! Opening a shard's journal as the shard starts: what a crash left in it
//! is written back into the segments, which are synced, then a new
//! incarnation begins. This runs before any log it may hold entries for
//! is opened: a log's recovery must see the replayed bytes.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use super::entry::{DecodedEntry, LogIdentity};
use super::file::{Journal, JournalImage};
use super::replay::write_back;
use super::scan::scan;
use crate::files::{segment_path, LOG_SUFFIX};
use crate::io::{DirectFile, FileSystem};

/// What opening a journal replayed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// Entries written back into their segments.
    pub entries: u64,
    /// Entries whose log or segment no longer exists (deleted since).
    pub skipped: u64,
    /// Segment files written to and synced.
    pub files: u64,
}

/// Opens the journal at `path`, replaying it first, or creates it if it is
/// missing or never finished its creation. `locate` names the directory
/// of a log, if the log still exists.
pub async fn open_journal<FS: FileSystem>(
    fs: &FS,
    path: &Path,
    journal_bytes: u64,
    round_most_bytes: usize,
    locate: impl Fn(&LogIdentity) -> Option<PathBuf>,
) -> io::Result<(Journal<FS>, Replayed)> {
    let image = match Journal::read(fs, path).await {
        Ok(image) => image,
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let Some(image) = image else {
        let journal = Journal::create(fs, path, journal_bytes, round_most_bytes).await?;
        return Ok((journal, Replayed::default()));
    };
    let scanned = scan(&image.bytes, &image.header);
    let replayed = replay(fs, &scanned.entries, locate).await?;
    let journal = Journal::resume(fs, path, &image, &scanned, round_most_bytes).await?;
    log_replay(path, &image, &replayed);
    Ok((journal, replayed))
}

/// Writes each entry back, in sequence order, then syncs every file written.
async fn replay<FS: FileSystem>(
    fs: &FS,
    entries: &[DecodedEntry<'_>],
    locate: impl Fn(&LogIdentity) -> Option<PathBuf>,
) -> io::Result<Replayed> {
    let mut replayed = Replayed::default();
    let mut listed: HashMap<PathBuf, HashSet<String>> = HashMap::new();
    let mut opened: HashMap<PathBuf, FS::File> = HashMap::new();
    for entry in entries {
        if !plausible(entry) {
            tracing::warn!(?entry.target, len = entry.data.len(), "journal entry out of bounds, skipped");
            replayed.skipped += 1;
            continue;
        }
        let Some(dir) = locate(&entry.target.log) else {
            replayed.skipped += 1;
            continue;
        };
        let path = segment_path(&dir, entry.target.segment, LOG_SUFFIX);
        // A segment is never made by replay: its file and directory entry
        // were durable before its first acknowledgement, so a missing one
        // was deleted since (retention, or its log's removal).
        let names = listed
            .entry(dir.clone())
            .or_insert_with(|| fs.list(&dir).unwrap_or_default().into_iter().collect());
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if !name.is_some_and(|n| names.contains(&n)) {
            replayed.skipped += 1;
            continue;
        }
        if !opened.contains_key(&path) {
            opened.insert(path.clone(), fs.open(&path).await?);
        }
        let file = &opened[&path];
        write_back(fs, file, entry.target.position, entry.data).await?;
        replayed.entries += 1;
    }
    for file in opened.values() {
        file.fdatasync().await?;
    }
    replayed.files = opened.len() as u64;
    Ok(replayed)
}

/// Whether an entry's target could be a segment's: a segment holds at most
/// 4 GiB (its index positions are 32-bit), and a base offset is not
/// negative. The CRC cannot tell a forged entry from a true one; bounds
/// keep either from writing far.
fn plausible(entry: &DecodedEntry<'_>) -> bool {
    let end = entry.target.position.checked_add(entry.data.len() as u64);
    entry.target.segment.0 >= 0 && end.is_some_and(|end| end <= u64::from(u32::MAX))
}

fn log_replay(path: &Path, image: &JournalImage, replayed: &Replayed) {
    if replayed.entries + replayed.skipped > 0 {
        tracing::info!(
            journal = %path.display(),
            from_sequence = image.header.sequence,
            entries = replayed.entries,
            skipped = replayed.skipped,
            files = replayed.files,
            "journal replayed"
        );
    }
}
