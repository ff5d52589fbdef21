//! Where partitions live on disk, and tidying it: a partition's directory
//! is `DATA_DIR/partitions/<topic name>.<topic id>/<index>` (the id keeps a
//! deleted topic's files apart from a new topic of the same name). Files
//! of deleted topics are removed; files of topics the metadata does not
//! know are kept and reported, never deleted on a guess. A directory
//! being removed is first renamed to end with [`REMOVING_SUFFIX`], which
//! no live directory does: the start-up sweep removes those without
//! asking the metadata.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use control::{BrokerId, Metadata, Topic, TopicId};

/// How much of a file one step of a gradual removal frees.
const REMOVAL_STEP_BYTES: u64 = 64 << 20;
/// The pause after each step.
const REMOVAL_PAUSE: Duration = Duration::from_millis(10);
/// A directory set aside for removal (a partition's or a deleted
/// topic's) ends with this: never a live one's (a partition's name is its
/// index, a topic's ends with its id), so nothing opens it again, and the
/// start-up sweep finishes what a stop interrupted.
pub const REMOVING_SUFFIX: &str = ".removing";

/// The directories this process's threads are removing: the start-up
/// sweep must not start a second removal of one that a deletion, replayed
/// as the broker starts, set aside already.
static REMOVING: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Sets a partition's directory aside (a rename: quick, on the same file
/// system) and removes it gradually on a thread of its own, so neither the
/// shard nor its blocking thread waits for it. A partition opened there
/// again meanwhile starts a new directory.
pub fn remove_in_background(dir: &Path) -> std::io::Result<()> {
    let aside = set_aside(dir)?;
    finish_in_background(aside, "partition-removal").map(drop)
}

/// Renames `dir` to a name of its own ending with [`REMOVING_SUFFIX`];
/// returns the new path. Of its own: a directory made again and removed
/// again while an earlier removal of the same name runs goes beside it (a
/// rename onto the earlier one, once emptied, would replace it under that
/// removal).
fn set_aside(dir: &Path) -> std::io::Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let mut aside = dir.as_os_str().to_owned();
    aside.push(format!(".{nanos}{REMOVING_SUFFIX}"));
    let aside = PathBuf::from(aside);
    std::fs::rename(dir, &aside)?;
    Ok(aside)
}

/// Removes a directory on a thread of its own, unless one of this
/// process's threads removes it already; whether it started one.
fn finish_in_background(dir: PathBuf, thread: &str) -> std::io::Result<bool> {
    let removing = || REMOVING.lock().unwrap_or_else(|e| e.into_inner());
    if !removing().insert(dir.clone()) {
        return Ok(false);
    }
    let mine = dir.clone();
    let spawned = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            remove_gradually(&mine);
            removing().remove(&mine);
        });
    if let Err(e) = spawned {
        removing().remove(&dir);
        return Err(e);
    }
    Ok(true)
}

/// Removes a set-aside directory, each of its files (in it or in its
/// directories) shrunk a step at a time before it goes. Unlinking a large
/// file frees all its blocks at once, and every fdatasync on the disk
/// waited for it: removing a moved replica's 870 MB stalled the producers
/// of the brokers sharing that disk for half a second
/// (scripts/bench-reassign.sh). Shrinking is best effort (a file it cannot
/// open for writing is removed whole); blocking, on a thread of its own.
fn remove_gradually(dir: &Path) {
    let started = std::time::Instant::now();
    // A link to a directory elsewhere: only the link goes, as before.
    let linked = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
    let removed = if linked {
        std::fs::remove_file(dir)
    } else {
        shrink_files(dir, 0);
        std::fs::remove_dir_all(dir)
    };
    match removed {
        Ok(()) => {
            let seconds = started.elapsed().as_secs_f64();
            tracing::info!(dir = %dir.display(), seconds, "removed a directory set aside");
        }
        // Gone already (a partition's, with its deleted topic's directory).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a directory set aside failed");
        }
    }
}

/// Shrinks the files in `dir`, and in its directories (a topic's holds
/// its partitions'; theirs hold none), a step at a time.
fn shrink_files(dir: &Path, depth: usize) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth < 1 => shrink_files(&entry.path(), depth + 1),
            Ok(t) if t.is_file() => shrink_file(&entry.path()),
            _ => {}
        }
    }
}

fn shrink_file(path: &Path) {
    let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) else {
        return;
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

/// The directory of a topic's partitions under `root`.
pub fn topic_dir(root: &Path, topic: &Topic) -> PathBuf {
    root.join(format!("{}.{}", topic.name, hex(&topic.id.0)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Removes the files of one deleted topic (its directory ends with its
/// id): set aside at once, removed gradually on a thread of its own (a
/// topic's gigabytes unlinked on the shard's executor thread stopped the
/// shard, and the disk's discards stalled every producer on it:
/// docs/benchmarks.md run 51).
pub fn remove_topic_dirs(root: &Path, topic: TopicId) {
    let suffix = format!(".{}", hex(&topic.0));
    for dir in dirs_where(root, |name| name.ends_with(&suffix)) {
        let target = match set_aside(&dir) {
            Ok(aside) => aside,
            // Another shard set it aside first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot set a deleted topic's files aside: removing them where they are");
                dir
            }
        };
        match finish_in_background(target.clone(), "topic-removal") {
            Ok(_) => tracing::info!(dir = %target.display(), "removing a deleted topic's files"),
            Err(e) => {
                tracing::warn!(dir = %target.display(), error = %e, "cannot start removing a deleted topic's files: the next start will")
            }
        }
    }
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
        if !entry.path().is_dir() || name.ends_with(REMOVING_SUFFIX) {
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

/// Removes, in the background, the topic directories a deletion set aside
/// and a stop interrupted; returns them.
pub fn finish_topic_removals(root: &Path) -> Vec<PathBuf> {
    let mut started = Vec::new();
    for dir in dirs_where(root, |name| name.ends_with(REMOVING_SUFFIX)) {
        match finish_in_background(dir.clone(), "topic-removal") {
            Ok(true) => started.push(dir),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot start removing a deleted topic's files")
            }
        }
    }
    started
}

/// Removes the partition directories of known topics that broker `me`
/// holds no replica of (a reassignment moved them away while it was
/// down), set aside at once and removed in the background; returns them.
/// Only from metadata caught up with this broker's life: a partition it
/// holds, or is being added to, is never removed. Nor is one a shard
/// opened meanwhile from the metadata it was still replaying
/// ([`super::in_use`]): that shard removes it once its view catches up.
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
            let path = partition_dir.path();
            let name = partition_dir.file_name().to_string_lossy().to_string();
            if name.ends_with(REMOVING_SUFFIX) {
                // Set aside by a removal a stop interrupted.
                if finish_in_background(path.clone(), "partition-removal").is_ok() {
                    removed.push(path);
                }
                continue;
            }
            let Ok(index) = name.parse::<u32>() else {
                continue;
            };
            let held = topic
                .partitions
                .get(index as usize)
                .is_none_or(|p| p.replicas.contains(&me));
            if held {
                continue;
            }
            match super::in_use::unless_claimed(topic.id, index, || set_aside(&path)) {
                Some(Ok(aside)) => {
                    if finish_in_background(aside, "partition-removal").is_ok() {
                        removed.push(path);
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(dir = %path.display(), error = %e, "cannot set aside a replica moved away")
                }
                None => {
                    tracing::info!(dir = %path.display(), "a replica moved away is open on a shard: the shard removes it")
                }
            }
        }
    }
    removed
}

/// The topic id a directory's name (`<name>.<32 hex digits>`) ends with.
pub(crate) fn topic_id_of_dir(name: &str) -> Option<TopicId> {
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

/// The directories under `root` whose names `chosen` picks.
fn dirs_where(root: &Path, chosen: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| chosen(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directories under `dir` set aside for removal.
    fn set_aside_under(dir: &Path) -> Vec<PathBuf> {
        dirs_where(dir, |name| name.ends_with(REMOVING_SUFFIX))
    }

    /// A sparse file `steps` removal steps long.
    fn sparse_file(path: &Path, steps: f64) {
        let file = std::fs::File::create(path).unwrap();
        file.set_len((REMOVAL_STEP_BYTES as f64 * steps) as u64)
            .unwrap();
    }

    /// Waits (up to 10 s) until `path` is gone.
    fn until_gone(path: &Path, what: &str) {
        let started = std::time::Instant::now();
        while path.exists() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_directory_is_set_aside_at_once_and_removed_a_step_at_a_time() {
        let root = tempfile::tempdir().unwrap();
        let topic = root.path().join("orders.00");
        let dir = topic.join("0");
        std::fs::create_dir_all(dir.join("nested")).unwrap();
        sparse_file(&dir.join("00000000000000000000.log"), 3.5);
        std::fs::write(dir.join("leader-epoch-checkpoint"), b"0\n").unwrap();
        std::fs::write(dir.join("nested").join("x"), b"x").unwrap();
        remove_in_background(&dir).unwrap();
        assert!(!dir.exists(), "set aside at once");
        let aside = set_aside_under(&topic);
        assert_eq!(aside.len(), 1, "{aside:?}");
        until_gone(&aside[0], "removed by its thread");
        assert!(topic.exists(), "only the partition's directory");
    }

    #[test]
    fn files_are_shrunk_a_step_at_a_time_in_a_topic_and_its_partitions() {
        let root = tempfile::tempdir().unwrap();
        let topic = root.path().join("orders.00");
        std::fs::create_dir_all(topic.join("0")).unwrap();
        sparse_file(&topic.join("stray"), 2.5);
        sparse_file(&topic.join("0").join("0.log"), 3.5);
        shrink_files(&topic, 0);
        for file in [topic.join("stray"), topic.join("0").join("0.log")] {
            let len = std::fs::metadata(&file).unwrap().len();
            assert!(len <= REMOVAL_STEP_BYTES, "{}: {len}", file.display());
        }
    }

    #[test]
    fn a_deleted_topic_is_set_aside_at_once_and_removed_in_the_background() {
        let root = tempfile::tempdir().unwrap();
        let id = TopicId([0x0d; 16]);
        let dir = root.path().join(format!("orders.{}", hex(&id.0)));
        let kept = root.path().join(format!("payments.{}", hex(&[0x0e; 16])));
        for partition in ["0", "1"] {
            std::fs::create_dir_all(dir.join(partition)).unwrap();
            // Its removal pauses 50 times: about half a second a file.
            sparse_file(&dir.join(partition).join("0.log"), 50.5);
        }
        std::fs::create_dir_all(kept.join("0")).unwrap();
        remove_topic_dirs(root.path(), id);
        assert!(!dir.exists(), "set aside at once");
        let aside = set_aside_under(root.path());
        assert_eq!(aside.len(), 1, "not removed before the call returns");
        until_gone(&aside[0], "removed by its thread");
        assert!(kept.join("0").exists(), "another topic's files stay");
    }

    #[test]
    fn a_topic_made_again_while_its_removal_runs_is_set_aside_beside_it() {
        let root = tempfile::tempdir().unwrap();
        let id = TopicId([0x0d; 16]);
        let dir = root.path().join(format!("orders.{}", hex(&id.0)));
        // An earlier removal's directory, emptied: a rename onto it would
        // replace it.
        let earlier = root
            .path()
            .join(format!("orders.{}.1{REMOVING_SUFFIX}", hex(&id.0)));
        std::fs::create_dir_all(&earlier).unwrap();
        std::fs::create_dir_all(dir.join("0")).unwrap();
        remove_topic_dirs(root.path(), id);
        assert!(!dir.exists(), "set aside at once");
        assert!(
            earlier.exists(),
            "the earlier removal's directory stays its own"
        );
        for aside in set_aside_under(root.path()) {
            if aside != earlier {
                until_gone(&aside, "removed by its thread");
            }
        }
    }

    #[test]
    fn a_removal_a_stop_interrupted_is_finished_once_and_not_reported_as_unknown() {
        let root = tempfile::tempdir().unwrap();
        let aside = root
            .path()
            .join(format!("orders.{}.1{REMOVING_SUFFIX}", hex(&[0x0d; 16])));
        std::fs::create_dir_all(aside.join("0")).unwrap();
        sparse_file(&aside.join("0").join("0.log"), 50.5);
        let stray = stray_topic_dirs(root.path(), &Metadata::default());
        assert!(stray.unknown.is_empty(), "{:?}", stray.unknown);
        assert_eq!(finish_topic_removals(root.path()), vec![aside.clone()]);
        assert!(
            finish_topic_removals(root.path()).is_empty(),
            "one removal a directory"
        );
        until_gone(&aside, "finished by its thread");
    }

    /// Metadata with one topic of `partitions` partitions, each on broker 2 only.
    fn topic_on_broker_2(id: TopicId, partitions: usize) -> (Metadata, String) {
        let partition = control::Partition {
            replicas: vec![BrokerId(2)],
            shards: vec![control::ShardId(0)],
            isr: vec![BrokerId(2)],
            leader: Some(BrokerId(2)),
            leader_epoch: control::LeaderEpoch(0),
            partition_epoch: control::PartitionEpoch(0),
        };
        let topic = Topic {
            id,
            name: "orders".into(),
            config: control::TopicConfig::default(),
            partitions: vec![partition; partitions],
        };
        let dir_name = format!("orders.{}", hex(&id.0));
        let mut metadata = Metadata::default();
        metadata.topics.insert(id, topic);
        (metadata, dir_name)
    }

    #[test]
    fn replicas_moved_away_are_removed_unless_a_shard_has_them_open() {
        let root = tempfile::tempdir().unwrap();
        let id = TopicId([0x3c; 16]);
        let (metadata, dir_name) = topic_on_broker_2(id, 2);
        let topic = root.path().join(dir_name);
        for partition in ["0", "1"] {
            std::fs::create_dir_all(topic.join(partition)).unwrap();
            std::fs::write(topic.join(partition).join("0.log"), b"x").unwrap();
        }
        // A shard opening partition 1 from the metadata it still replays.
        let opening = crate::partition::in_use::claim(id, 1);
        let removed = remove_unassigned_partition_dirs(root.path(), &metadata, BrokerId(1));
        assert_eq!(removed, vec![topic.join("0")]);
        assert!(!topic.join("0").exists(), "set aside at once");
        assert!(topic.join("1").join("0.log").exists(), "the open one stays");
        for aside in set_aside_under(&topic) {
            until_gone(&aside, "removed by its thread");
        }
        drop(opening);
        let held = remove_unassigned_partition_dirs(root.path(), &metadata, BrokerId(2));
        assert!(held.is_empty(), "broker 2 holds them: {held:?}");
        let removed = remove_unassigned_partition_dirs(root.path(), &metadata, BrokerId(1));
        assert_eq!(removed, vec![topic.join("1")], "once closed");
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
