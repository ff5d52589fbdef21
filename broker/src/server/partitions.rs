//! The partitions a shard owns: their logs, opened on first use, and the
//! fetchers waiting for data to arrive in them.
//!
//! Which shard owns a partition is a pure function of the metadata (the
//! shard the controller placed this broker's replica on), so every shard
//! routes without asking. A partition's directory is
//! `DATA_DIR/partitions/<topic name>.<topic id>/<index>`: the id keeps a
//! deleted topic's files apart from a new topic of the same name.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use control::{BrokerId, Metadata, Partition as PartitionMeta, Topic, TopicConfig, TopicId};
use futures::channel::oneshot;
use storage::io::dma::DmaFs;
use storage::{Log, LogConfig, StorageError};

/// The directory under the data directory holding the partitions.
pub const PARTITIONS_DIR: &str = "partitions";

/// The largest batch any log accepts, whatever its topic's
/// max.message.bytes says (the topic's limit is checked before appending).
pub const BATCH_BYTES_CAP: usize = 8 << 20;

/// A partition: topic and index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    /// The topic's id.
    pub topic: TopicId,
    /// The partition index.
    pub index: u32,
}

/// One open partition on its owning shard.
pub struct OpenPartition {
    /// Its log.
    pub log: Rc<Log<DmaFs>>,
    /// This broker's role for it (leader, follower), from the metadata.
    /// Changed only with `replica_writes` held.
    pub role: RefCell<super::replica::Role>,
    /// Held by a follower's truncation or append (from checking its role
    /// to the end of the write) and by a role change: an append fetched
    /// from a deposed leader can then never land after the truncation
    /// for the next one, nor after this broker starts leading.
    pub replica_writes: futures::lock::Mutex<()>,
    /// Fetchers and produces waiting for the log or high watermark to move.
    arrivals: RefCell<Vec<oneshot::Sender<()>>>,
}

impl OpenPartition {
    /// Resolves once data arrives (the high watermark moves), or never if
    /// the partition is dropped.
    pub fn next_arrival(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.arrivals.borrow_mut();
        // Fetchers that gave up (timed out, disconnected) leave closed senders.
        waiting.retain(|w| !w.is_canceled());
        waiting.push(tx);
        rx
    }

    /// Wakes every fetcher waiting for data.
    pub fn notify_arrival(&self) {
        for waiter in self.arrivals.borrow_mut().drain(..) {
            let _ = waiter.send(());
        }
    }
}

/// The partitions of one shard.
pub struct Partitions {
    root: PathBuf,
    open: RefCell<HashMap<PartitionKey, Rc<OpenPartition>>>,
    /// Opening is rare and slow (recovery): one at a time per shard, so a
    /// partition is never opened twice.
    opening: futures::lock::Mutex<()>,
    /// Set once the shard closes its logs: nothing opens again. (A role
    /// change arriving during the stop reopened a log being closed, and
    /// the second open's recovery removed the first's temporary index file
    /// mid-close: "closing active segment: No such file or directory", the
    /// partition left without its clean-shutdown marker.)
    closed: std::cell::Cell<bool>,
}

/// The shard of `broker` that owns replica `partition`, if `broker` holds one.
pub fn owner_shard(partition: &PartitionMeta, broker: BrokerId, shards: usize) -> Option<usize> {
    let at = partition.replicas.iter().position(|r| *r == broker)?;
    let shard = partition.shards.get(at).map_or(0, |s| s.0 as usize);
    // The placement used the shard count the broker registered with; a
    // restart with fewer shards folds the rest onto the ones it has.
    Some(shard % shards.max(1))
}

/// The directory of a topic's partitions under `root`.
pub fn topic_dir(root: &Path, topic: &Topic) -> PathBuf {
    root.join(format!("{}.{}", topic.name, hex(&topic.id.0)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The log settings for a topic's partitions. A replicated partition's
/// high watermark is the replication layer's to move; a single replica's
/// follows its flushes.
pub fn log_config(config: &TopicConfig, replicated: bool) -> LogConfig {
    let defaults = LogConfig::default();
    let segment_bytes = (config.segment_bytes.max(64 << 10) as u64).min(u32::MAX as u64);
    let max_batch_bytes = (config.max_message_bytes.max(0) as usize)
        .max(defaults.max_batch_bytes)
        .min(BATCH_BYTES_CAP)
        .min(segment_bytes as usize);
    LogConfig {
        segment_bytes,
        segment_ms: config.segment_ms.max(1),
        max_batch_bytes,
        max_pending_bytes: defaults.max_pending_bytes.max(max_batch_bytes),
        preallocate_bytes: defaults.preallocate_bytes.min(segment_bytes),
        high_watermark_follows_flush: !replicated,
        ..defaults
    }
}

impl Partitions {
    /// No partitions open yet; their files live under `root`.
    pub fn new(root: PathBuf) -> Partitions {
        Partitions {
            root,
            open: RefCell::new(HashMap::new()),
            opening: futures::lock::Mutex::new(()),
            closed: std::cell::Cell::new(false),
        }
    }

    /// The open partition, opening (and recovering) its log if needed.
    pub async fn get_or_open(
        &self,
        key: PartitionKey,
        topic: &Topic,
    ) -> Result<Rc<OpenPartition>, StorageError> {
        if let Some(open) = self.open.borrow().get(&key) {
            return Ok(open.clone());
        }
        let _one_at_a_time = self.opening.lock().await;
        if let Some(open) = self.open.borrow().get(&key) {
            return Ok(open.clone());
        }
        if self.closed.get() {
            return Err(StorageError::InvalidArgument(
                "the broker is stopping: no partition opens".into(),
            ));
        }
        let dir = topic_dir(&self.root, topic).join(key.index.to_string());
        let replicated = topic
            .partitions
            .get(key.index as usize)
            .is_some_and(|p| p.replicas.len() > 1);
        let log = Log::open(DmaFs, dir, log_config(&topic.config, replicated)).await?;
        let partition = Rc::new(OpenPartition {
            log,
            role: RefCell::default(),
            replica_writes: futures::lock::Mutex::new(()),
            arrivals: RefCell::new(Vec::new()),
        });
        self.open.borrow_mut().insert(key, partition.clone());
        Ok(partition)
    }

    /// Whether the shard closed its logs (it is stopping).
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// The partition if it is open.
    pub fn get_open(&self, key: PartitionKey) -> Option<Rc<OpenPartition>> {
        self.open.borrow().get(&key).cloned()
    }

    /// Every open partition.
    pub fn open_partitions(&self) -> Vec<(PartitionKey, Rc<OpenPartition>)> {
        self.open
            .borrow()
            .iter()
            .map(|(k, p)| (*k, p.clone()))
            .collect()
    }

    /// Drops the partitions of topics that no longer exist (their waiting
    /// fetchers see the topic gone on their next look).
    pub fn forget_deleted(&self, metadata: &Metadata) {
        let gone: Vec<PartitionKey> = self
            .open
            .borrow()
            .keys()
            .filter(|k| !metadata.topics.contains_key(&k.topic))
            .copied()
            .collect();
        for key in gone {
            if let Some(partition) = self.open.borrow_mut().remove(&key) {
                partition.notify_arrival();
            }
        }
    }

    /// Flushes and closes every open log (shutdown); none opens after.
    pub async fn close_all(&self) {
        // After an open in progress finishes (it is then closed below).
        let _no_open_in_progress = self.opening.lock().await;
        self.closed.set(true);
        let open: Vec<_> = self.open.borrow_mut().drain().collect();
        for (key, partition) in open {
            if let Err(e) = partition.log.close().await {
                tracing::error!(topic = ?key.topic, partition = key.index, error = %e, "closing a partition log failed");
            }
        }
    }
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
    fn a_directory_name_gives_back_its_topic_id() {
        let id = TopicId([0xab; 16]);
        let name = format!("orders.v2.{}", hex(&id.0));
        assert_eq!(topic_id_of_dir(&name), Some(id));
        assert_eq!(topic_id_of_dir("orders"), None);
        assert_eq!(topic_id_of_dir("orders.xyz"), None);
        assert_eq!(topic_id_of_dir(&format!("t.{}", "g".repeat(32))), None);
    }
}
