//! The shards' journals (docs/storage.md, "Many partitions"): one file per
//! shard in `journal/` of the data directory, replayed into the
//! partitions' segments before any shard starts, then opened by each
//! shard at its first partition open.
//!
//! Replay runs for every journal file found, whatever the shard count now:
//! a restart with fewer shards must not leave a former shard's entries
//! unreplayed, and one with more must not open a partition before its
//! entries, in some other shard's journal, are back in its segments.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use storage::io::dma::DmaFs;
use storage::journal::entry::LogIdentity;
use storage::journal::file::Journal;
use storage::journal::recover::{open_journal, Replayed};

use super::dirs::topic_id_of_dir;
use crate::config::BrokerConfig;

/// The journals' directory, in the data directory.
pub const JOURNAL_DIR: &str = "journal";

/// How a shard's journal is sized and used.
#[derive(Debug, Clone)]
pub struct JournalSettings {
    /// The shard's journal file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// The largest round (one write).
    pub round_most_bytes: usize,
    /// The largest flush that goes to it.
    pub flush_max_bytes: usize,
}

impl JournalSettings {
    /// Whether a log in `dir` may use this journal: only on the journal's
    /// file system, as a checkpoint's sync covers that one alone.
    pub fn serves(&self, dir: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let device = |path: &Path| std::fs::metadata(path).map(|m| m.dev()).ok();
        let journal_dir = self.path.parent().expect("a journal's directory");
        // Before the journal is made, its directory may not exist yet.
        let journal_device = device(journal_dir).or_else(|| device(journal_dir.parent()?));
        device(dir).is_some_and(|dev| Some(dev) == journal_device)
    }

    /// Shard `shard`'s journal, or None when `journal_bytes` is 0.
    pub fn of_config(config: &BrokerConfig, shard: usize) -> Option<JournalSettings> {
        (config.journal_bytes > 0).then(|| JournalSettings {
            path: journal_path(&config.data_dir, shard),
            bytes: config.journal_bytes,
            // A quarter of the file at most, so a round always finds room
            // once a checkpoint has freed the half the live entries held.
            round_most_bytes: (config.journal_bytes / 4).min(1 << 20) as usize,
            flush_max_bytes: config.journal_flush_max_bytes as usize,
        })
    }

    /// Opens the journal (replayed before the shards started: nothing is
    /// left to write back), or creates it, at most a sixteenth of the free
    /// disk space. A journal this call created and could not finish is
    /// removed (a failed reservation may keep part of its space).
    pub async fn open(&self) -> io::Result<Journal<DmaFs>> {
        let dir = self.path.parent().expect("a journal's directory");
        std::fs::create_dir_all(dir)?;
        let bytes = within_free_space(dir, self.bytes)?;
        let creating = !self.path.exists();
        // Every journal was replayed before the shards started; one that
        // still holds entries is left as it is (for the next start to
        // replay), not resumed past them.
        let unreplayed = |_: &LogIdentity| -> io::Result<Option<PathBuf>> {
            Err(io::Error::other(
                "the journal holds entries not replayed at the start",
            ))
        };
        let opened =
            open_journal(&DmaFs, &self.path, bytes, self.round_most_bytes, unreplayed).await;
        let (journal, _) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                if creating {
                    let _ = std::fs::remove_file(&self.path);
                }
                return Err(e);
            }
        };
        Ok(journal)
    }
}

/// The smallest journal made.
const JOURNAL_MIN_BYTES: u64 = 1 << 20;

/// `wanted`, or a sixteenth of the file system's free space when that is
/// less (logged); an error when that is below a megabyte.
fn within_free_space(dir: &Path, wanted: u64) -> io::Result<u64> {
    let stats = nix::sys::statvfs::statvfs(dir).map_err(io::Error::from)?;
    let free = stats
        .blocks_available()
        .saturating_mul(stats.fragment_size());
    let bytes = wanted.min(free / 16 / 4096 * 4096);
    if bytes < JOURNAL_MIN_BYTES {
        return Err(io::Error::other(format!(
            "{free} bytes free: too little for a journal"
        )));
    }
    if bytes < wanted {
        tracing::warn!(dir = %dir.display(), wanted, bytes, "journal_bytes is more than a sixteenth of the free disk space: the journal keeps to that");
    }
    Ok(bytes)
}

/// Shard `shard`'s journal file.
pub fn journal_path(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join(JOURNAL_DIR).join(format!("shard-{shard}"))
}

/// Replays every journal in `data_dir` into the partitions under
/// `partitions_root`, on an executor of its own, before the shards start.
pub fn replay_all(data_dir: &Path, partitions_root: &Path) -> io::Result<Replayed> {
    let entries = match std::fs::read_dir(data_dir.join(JOURNAL_DIR)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Replayed::default()),
        Err(e) => return Err(e),
    };
    let mut journals = Vec::new();
    for entry in entries {
        journals.push(entry?.path());
    }
    journals.sort();
    if journals.is_empty() {
        return Ok(Replayed::default());
    }
    let topics = topic_dirs(partitions_root)?;
    let locate = move |log: &LogIdentity| -> io::Result<Option<PathBuf>> {
        let Some(topic) = topics.get(&log.topic_id) else {
            return Ok(None);
        };
        let dir = topic.join(log.partition.to_string());
        match std::fs::metadata(&dir) {
            Ok(meta) => Ok(meta.is_dir().then_some(dir)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    let replay = move || -> io::Result<Replayed> {
        let executor = glommio::LocalExecutorBuilder::default()
            .io_memory(2 << 20)
            .make()
            .map_err(|e| io::Error::other(format!("an executor to replay the journals: {e}")))?;
        executor.run(async move {
            let mut total = Replayed::default();
            for path in &journals {
                let bytes = std::fs::metadata(path)?.len();
                if bytes < 1 << 20 || !bytes.is_multiple_of(4096) {
                    // Cut short while it was made: it never held an entry.
                    tracing::warn!(journal = %path.display(), bytes, "not a whole journal: skipped (it is made again)");
                    continue;
                }
                let (journal, replayed) = open_journal(&DmaFs, path, bytes, 1 << 20, &locate).await?;
                drop(journal);
                total.entries += replayed.entries;
                total.skipped += replayed.skipped;
                total.files += replayed.files;
            }
            Ok(total)
        })
    };
    std::thread::Builder::new()
        .name("journal-replay".into())
        .spawn(replay)?
        .join()
        .map_err(|_| io::Error::other("replaying the journals panicked"))?
}

/// Each topic's directory under `root`, by topic id (directories set aside
/// for removal are not topics'). A listing that fails for another reason
/// than a missing directory fails the replay: skipping its entries would
/// drop acknowledged data for good.
fn topic_dirs(root: &Path) -> io::Result<HashMap<[u8; 16], PathBuf>> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e),
    };
    let mut topics = HashMap::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = topic_id_of_dir(&name) {
            topics.insert(id.0, entry.path());
        }
    }
    Ok(topics)
}
