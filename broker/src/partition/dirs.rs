//! Where partitions live on disk, and tidying it: a partition's directory
//! is `DATA_DIR/partitions/<topic name>.<topic id>/<index>` (the id keeps a
//! deleted topic's files apart from a new topic of the same name). Files
//! of deleted topics are removed; files of topics the metadata does not
//! know are kept and reported, never deleted on a guess.

use std::path::{Path, PathBuf};
use std::time::Duration;

use control::{BrokerId, Metadata, Topic, TopicId};

/// How much of a file one step of a gradual removal frees.
const REMOVAL_STEP_BYTES: u64 = 64 << 20;
/// The pause after each step.
const REMOVAL_PAUSE: Duration = Duration::from_millis(10);
/// A partition directory set aside for removal ends with this: never a
/// partition's (its name is its index), so nothing opens it again, and
/// the start-up sweep finishes what a stop interrupted.
pub const REMOVING_SUFFIX: &str = ".removing";

/// Sets a partition's directory aside (a rename: quick, on the same file
/// system) and removes it gradually on a thread of its own, so neither the
/// shard nor its blocking thread waits for it. A partition opened there
/// again meanwhile starts a new directory.
pub fn remove_in_background(dir: &Path) -> std::io::Result<()> {
    let mut aside = dir.as_os_str().to_owned();
    aside.push(REMOVING_SUFFIX);
    let aside = PathBuf::from(aside);
    std::fs::rename(dir, &aside)?;
    std::thread::Builder::new()
        .name("partition-removal".into())
        .spawn(move || remove_gradually(&aside))?;
    Ok(())
}

/// Removes a set-aside directory, each of its files shrunk a step at a
/// time before it goes. Unlinking a large file frees all its blocks in one
/// file-system transaction, and every fdatasync on the disk waited for it:
/// removing a moved replica's 870 MB stalled the producers of the brokers
/// sharing that disk for half a second (scripts/bench-reassign.sh).
/// Shrinking is best effort (a file it cannot open for writing is removed
/// whole); blocking, on a thread of its own.
fn remove_gradually(dir: &Path) {
    let files = std::fs::read_dir(dir).into_iter().flatten().flatten();
    for entry in files.filter(|e| e.file_type().is_ok_and(|t| t.is_file())) {
        let Ok(file) = std::fs::OpenOptions::new().write(true).open(entry.path()) else {
            continue;
        };
        let mut len = file.metadata().map_or(0, |m| m.len());
        while len > REMOVAL_STEP_BYTES {
            len -= REMOVAL_STEP_BYTES;
            if file.set_len(len).is_err() {
                break;
            }
            std::thread::sleep(REMOVAL_PAUSE);
        }
    }
    match std::fs::remove_dir_all(dir) {
        // Gone already: its topic was deleted meanwhile, directory and all.
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a partition directory set aside failed");
        }
        _ => {}
    }
}

/// The directory of a topic's partitions under `root`.
pub fn topic_dir(root: &Path, topic: &Topic) -> PathBuf {
    root.join(format!("{}.{}", topic.name, hex(&topic.id.0)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Removes the files of one deleted topic (its directory ends with its id).
pub fn remove_topic_dirs(root: &Path, topic: TopicId) {
    let suffix = format!(".{}", hex(&topic.0));
    remove_dirs_where(root, |name| name.ends_with(&suffix));
}

/// The topic directories under `root` that `metadata` has no topic for.
#[derive(Debug, Default)]
pub struct StrayDirs {
    /// Of topics a committed deletion removed (`deleted_topics`, which
    /// snapshots keep).
    pub deleted: Vec<TopicId>,
    /// Of topics the metadata does not know at all, by directory name.
    pub unknown: Vec<String>,
}

/// Sorts the topic directories under `root` the metadata has no topic for.
pub fn stray_topic_dirs(root: &Path, metadata: &Metadata) -> StrayDirs {
    let mut stray = StrayDirs::default();
    let Ok(entries) = std::fs::read_dir(root) else {
        return stray;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !entry.path().is_dir() {
            continue;
        }
        match topic_id_of_dir(&name) {
            Some(id) if metadata.topics.contains_key(&id) => {}
            Some(id) if metadata.deleted_topics.contains(&id) => stray.deleted.push(id),
            _ => stray.unknown.push(name),
        }
    }
    stray.unknown.sort();
    stray
}

/// Removes the directories of deleted topics under `root`; returns the
/// names of those whose topic the metadata does not know, which stay: a
/// metadata view that lacks a topic at some moment is no reason to delete
/// its data (they are reported instead: logged, counted in /metrics).
pub fn reconcile_topic_dirs(root: &Path, metadata: &Metadata) -> Vec<String> {
    let stray = stray_topic_dirs(root, metadata);
    for id in stray.deleted {
        remove_topic_dirs(root, id);
    }
    stray.unknown
}

/// Removes the partition directories of known topics that broker `me`
/// holds no replica of (a reassignment moved them away while it was
/// down); returns them. Only from metadata caught up with this broker's
/// life: a partition it holds, or is being added to, is never removed.
pub fn remove_unassigned_partition_dirs(
    root: &Path,
    metadata: &Metadata,
    me: BrokerId,
) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(topics) = std::fs::read_dir(root) else {
        return removed;
    };
    for topic_dir in topics.flatten() {
        let name = topic_dir.file_name().to_string_lossy().to_string();
        let Some(topic) = topic_id_of_dir(&name).and_then(|id| metadata.topics.get(&id)) else {
            continue;
        };
        let Ok(partitions) = std::fs::read_dir(topic_dir.path()) else {
            continue;
        };
        for partition_dir in partitions.flatten() {
            let name = partition_dir.file_name().to_string_lossy().to_string();
            if name.ends_with(REMOVING_SUFFIX) {
                // Set aside by a removal a stop interrupted.
                remove_gradually(&partition_dir.path());
                removed.push(partition_dir.path());
                continue;
            }
            let index = name.parse::<usize>();
            let held = index
                .ok()
                .and_then(|i| topic.partitions.get(i))
                .is_none_or(|p| p.replicas.contains(&me));
            if !held && std::fs::remove_dir_all(partition_dir.path()).is_ok() {
                removed.push(partition_dir.path());
            }
        }
    }
    removed
}

/// The topic id a directory's name (`<name>.<32 hex digits>`) ends with.
fn topic_id_of_dir(name: &str) -> Option<TopicId> {
    let (_, hex) = name.rsplit_once('.')?;
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(TopicId(id))
}

fn remove_dirs_where(root: &Path, doomed: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() && doomed(&name) {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::info!(dir = %path.display(), "removed a deleted topic's files"),
                // Another shard removed it first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e, "cannot remove a deleted topic's files")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_set_aside_at_once_and_removed_a_step_at_a_time() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("orders.00").join("0");
        std::fs::create_dir_all(dir.join("nested")).unwrap();
        // Sparse: 3.5 steps long.
        let big = std::fs::File::create(dir.join("00000000000000000000.log")).unwrap();
        big.set_len(REMOVAL_STEP_BYTES * 7 / 2).unwrap();
        std::fs::write(dir.join("leader-epoch-checkpoint"), b"0\n").unwrap();
        std::fs::write(dir.join("nested").join("x"), b"x").unwrap();
        remove_in_background(&dir).unwrap();
        assert!(!dir.exists(), "set aside at once");
        let aside = root
            .path()
            .join("orders.00")
            .join(format!("0{REMOVING_SUFFIX}"));
        let started = std::time::Instant::now();
        while aside.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "removed by its thread"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            root.path().join("orders.00").exists(),
            "only the partition's directory"
        );
    }

    #[test]
    fn a_directory_name_gives_back_its_topic_id() {
        let id = TopicId([0xab; 16]);
        let name = format!("orders.v2.{}", hex(&id.0));
        assert_eq!(topic_id_of_dir(&name), Some(id));
        assert_eq!(topic_id_of_dir("orders"), None);
        assert_eq!(topic_id_of_dir("orders.xyz"), None);
        assert_eq!(topic_id_of_dir(&format!("t.{}", "g".repeat(32))), None);
    }
}
