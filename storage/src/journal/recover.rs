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
use crate::files::{decode_journal_id, read_whole, segment_path, JOURNAL_ID_FILE, LOG_SUFFIX};
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
/// of a log, if the log still exists; its errors (other than a missing
/// directory, which is None) fail the opening, as any read error does:
/// skipping entries on a passing error would drop acknowledged data.
pub async fn open_journal<FS: FileSystem>(
    fs: &FS,
    path: &Path,
    journal_bytes: u64,
    round_most_bytes: usize,
    locate: impl Fn(&LogIdentity) -> io::Result<Option<PathBuf>>,
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
    locate: impl Fn(&LogIdentity) -> io::Result<Option<PathBuf>>,
) -> io::Result<Replayed> {
    let mut replayed = Replayed::default();
    let mut listed: HashMap<PathBuf, HashSet<String>> = HashMap::new();
    let mut opened: HashMap<PathBuf, FS::File> = HashMap::new();
    let mut ids: HashMap<PathBuf, Option<u64>> = HashMap::new();
    for entry in entries {
        if !plausible(entry) {
            tracing::warn!(?entry.target, len = entry.data.len(), "journal entry out of bounds, skipped");
            replayed.skipped += 1;
            continue;
        }
        let Some(dir) = locate(&entry.target.log)? else {
            replayed.skipped += 1;
            continue;
        };
        if !ids.contains_key(&dir) {
            let id = directory_id(fs, &dir).await?;
            if id.is_none() {
                tracing::warn!(dir = %dir.display(), "journal entries for a directory without a whole journal-id file: skipped");
            }
            ids.insert(dir.clone(), id);
        }
        if ids[&dir] != Some(entry.target.log.directory) {
            // Another directory under the same name, made since.
            replayed.skipped += 1;
            continue;
        }
        let path = segment_path(&dir, entry.target.segment, LOG_SUFFIX);
        // A segment is never made by replay: its file and directory entry
        // were durable before its first acknowledgement, so a missing one
        // was deleted since (retention, or its log's removal).
        if !listed.contains_key(&dir) {
            listed.insert(dir.clone(), list_or_none(fs, &dir)?.into_iter().collect());
        }
        let names = &listed[&dir];
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

/// The journal id of a log directory, None if it has none (or a damaged
/// one). A read that fails for another reason than a missing file fails
/// the replay: skipping would drop acknowledged data for good.
async fn directory_id<FS: FileSystem>(fs: &FS, dir: &Path) -> io::Result<Option<u64>> {
    let names = list_or_none(fs, dir)?;
    let exists = names.iter().any(|n| n == JOURNAL_ID_FILE);
    let stored = read_whole(fs, &dir.join(JOURNAL_ID_FILE), exists).await?;
    Ok(stored.and_then(|bytes| decode_journal_id(&bytes)))
}

/// The names in `dir`, none if it is missing (removed since).
fn list_or_none<FS: FileSystem>(fs: &FS, dir: &Path) -> io::Result<Vec<String>> {
    match fs.list(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        listed => listed,
    }
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
