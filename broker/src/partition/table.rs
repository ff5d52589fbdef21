//! The table of a shard's open partitions: their logs, opened (and
//! recovered) on first use, each with this broker's role for it and the
//! tasks waiting for data to arrive in it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;

use control::{Metadata, Topic, TopicConfig, TopicId};
use futures::channel::oneshot;
use storage::io::dma::DmaFs;
use storage::journal::file::Journal;
use storage::{CacheShare, Log, LogConfig, StorageError};

use super::dirs::{remove_topic_dirs, topic_dir};
use super::in_use::{claim, InUse};
use super::journals::JournalSettings;
use super::role::Role;
use super::tiered::RemoteLog;
use crate::cluster::routing::PartitionKey;

/// The largest batch any log accepts, whatever its topic's
/// max.message.bytes says (the topic's limit is checked before appending).
pub const BATCH_BYTES_CAP: usize = 8 << 20;

/// The newest batches each partition keeps cached whatever the others of
/// its shard hold: the tail a caught-up consumer reads.
pub const CACHE_FLOOR_BYTES: usize = 4 << 20;

/// One open partition on its owning shard.
pub struct OpenPartition {
    /// Its log.
    pub log: Rc<Log<DmaFs>>,
    /// This broker's role for it (leader, follower), from the metadata.
    /// Changed only with `replica_writes` held.
    pub role: RefCell<Role>,
    /// Held by a follower's truncation or append (from checking its role
    /// to the end of the write) and by a role change: an append fetched
    /// from a deposed leader can then never land after the truncation
    /// for the next one, nor after this broker starts leading.
    pub replica_writes: futures::lock::Mutex<()>,
    /// Fetchers and produces waiting for the log or high watermark to move.
    arrivals: RefCell<Vec<oneshot::Sender<()>>>,
    /// Its remote log, for a tiered topic (docs/tiered-storage.md).
    pub remote: RemoteLog,
    /// Keeps the start-up sweep off its directory while it is open.
    _in_use: InUse,
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

/// How many partitions of a shard open at once, at most: each makes files
/// durable, so several overlap their waits for the disk, and a burst of
/// produce requests to a new topic's thousands of partitions does not
/// start thousands of opens at once.
pub const OPENS_AT_ONCE: u64 = 16;

/// The partitions of one shard.
pub struct PartitionTable {
    root: PathBuf,
    open: RefCell<HashMap<PartitionKey, Rc<OpenPartition>>>,
    /// Each open under way holds one of [`OPENS_AT_ONCE`] units; holding
    /// opens off (a removal, the stop) takes them all, so it waits for the
    /// opens under way and none starts meanwhile. Opens of different
    /// partitions run together: one at a time, a new topic's 10,000
    /// partitions opened at about 450 a second.
    opening: glommio::sync::Semaphore,
    /// The partitions being opened, one lock each: a partition is never
    /// opened twice at once.
    opening_keys: RefCell<HashMap<PartitionKey, Rc<futures::lock::Mutex<()>>>>,
    /// Whether the shard still holds a replica of a partition: an open
    /// that waited behind a removal must not make its directory again.
    holds: Box<dyn Fn(PartitionKey) -> bool>,
    /// Held while the shard's journal opens (with the first partition).
    journal_opening: futures::lock::Mutex<()>,
    /// Set once the shard closes its logs: nothing opens again. (A role
    /// change arriving during the stop reopened a log being closed, and
    /// the second open's recovery removed the first's temporary index file
    /// mid-close: "closing active segment: No such file or directory", the
    /// partition left without its clean-shutdown marker.)
    closed: std::cell::Cell<bool>,
    /// The memory the partitions' batch caches share.
    cache_share: Rc<CacheShare>,
    /// Topics deleted while this shard ran: none of their partitions opens
    /// again, and one whose open was under way when the deletion came has
    /// its files (which the open recreated) removed once more.
    deleted: RefCell<HashSet<TopicId>>,
    /// The shard's journal, opened with its first partition (None: the
    /// broker runs without one, or it could not be opened).
    journal: RefCell<Option<Rc<Journal<DmaFs>>>>,
    journal_settings: Option<JournalSettings>,
}

/// A partition's opening lock, shared by its openers; the last one to let
/// go (done or cancelled) takes it out of the table's map.
struct OnlyOpener<'a> {
    table: &'a PartitionTable,
    key: PartitionKey,
    lock: Rc<futures::lock::Mutex<()>>,
}

impl<'a> OnlyOpener<'a> {
    fn of(table: &'a PartitionTable, key: PartitionKey) -> OnlyOpener<'a> {
        let lock = table
            .opening_keys
            .borrow_mut()
            .entry(key)
            .or_default()
            .clone();
        OnlyOpener { table, key, lock }
    }
}

impl Drop for OnlyOpener<'_> {
    fn drop(&mut self) {
        // The map's reference and this one: no other opener holds it.
        if Rc::strong_count(&self.lock) == 2 {
            self.table.opening_keys.borrow_mut().remove(&self.key);
        }
    }
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
        // The floor each partition keeps; the shard's share holds more.
        cache_budget_bytes: CACHE_FLOOR_BYTES,
        ..defaults
    }
}

impl PartitionTable {
    /// No partitions open yet; their files live under `root`, their
    /// batch caches share `cache_share`.
    /// The shard's journal is opened with the first partition, if
    /// `journal_settings` asks for one. Only partitions `holds` says the
    /// shard holds a replica of open.
    pub fn new(
        root: PathBuf,
        cache_share: Rc<CacheShare>,
        journal_settings: Option<JournalSettings>,
        holds: Box<dyn Fn(PartitionKey) -> bool>,
    ) -> PartitionTable {
        PartitionTable {
            root,
            cache_share,
            journal: RefCell::new(None),
            journal_settings,
            deleted: RefCell::default(),
            open: RefCell::new(HashMap::new()),
            opening: glommio::sync::Semaphore::new(OPENS_AT_ONCE),
            opening_keys: RefCell::default(),
            holds,
            journal_opening: futures::lock::Mutex::new(()),
            closed: std::cell::Cell::new(false),
        }
    }

    /// The open partition, opening (and recovering) its log if needed.
    pub async fn get_or_open(
        &self,
        key: PartitionKey,
        topic: &Topic,
    ) -> Result<Rc<OpenPartition>, StorageError> {
        if let Some(open) = self.get_open(key) {
            return Ok(open);
        }
        // The partition's own lock first: the openers of one partition
        // wait for each other without taking units the opens of other
        // partitions could use.
        let only_opener = OnlyOpener::of(self, key);
        let _only_opener = only_opener.lock.lock().await;
        if let Some(open) = self.get_open(key) {
            return Ok(open);
        }
        let stopping = || StorageError::InvalidArgument("the broker is stopping".into());
        let _opening = self
            .opening
            .acquire_permit(1)
            .await
            .map_err(|_| stopping())?;
        self.open_alone(key, topic).await
    }

    /// Opens a partition not open, the only opener of it, unless it may
    /// not open.
    async fn open_alone(
        &self,
        key: PartitionKey,
        topic: &Topic,
    ) -> Result<Rc<OpenPartition>, StorageError> {
        if self.closed.get() {
            return Err(StorageError::InvalidArgument(
                "the broker is stopping: no partition opens".into(),
            ));
        }
        let deleted = || StorageError::InvalidArgument(format!("topic {} was deleted", topic.name));
        if self.deleted.borrow().contains(&key.topic) {
            return Err(deleted());
        }
        if !(self.holds)(key) {
            // Moved away while this open waited (perhaps behind the hold
            // of the removal of its files).
            return Err(StorageError::InvalidArgument(format!(
                "partition {} of topic {} is no longer held by this shard",
                key.index, topic.name
            )));
        }
        let dir = topic_dir(&self.root, topic).join(key.index.to_string());
        let replicated = topic
            .partitions
            .get(key.index as usize)
            .is_some_and(|p| p.replicas.len() > 1);
        let in_use = claim(key.topic, key.index);
        let log = Log::open(DmaFs, dir, log_config(&topic.config, replicated)).await?;
        log.share_cache(self.cache_share.clone());
        if let Some((journal, flush_max_bytes)) = self.journal_for(log.dir()).await {
            let attached = log.use_journal(journal, key.topic.0, key.index, flush_max_bytes);
            if let Err(e) = attached.await {
                tracing::warn!(dir = %log.dir().display(), error = %e, "cannot attach the partition to its shard's journal: it syncs its own segments");
            }
        }
        super::tiered::keep_snapshots_by_default(&log, topic);
        if self.deleted.borrow().contains(&key.topic) {
            // Deleted while the log opened: its directory was removed
            // under the open, which made it again.
            remove_topic_dirs(&self.root, key.topic);
            return Err(deleted());
        }
        let partition = Rc::new(OpenPartition {
            log,
            role: RefCell::default(),
            replica_writes: futures::lock::Mutex::new(()),
            arrivals: RefCell::new(Vec::new()),
            remote: RemoteLog::default(),
            _in_use: in_use,
        });
        self.open.borrow_mut().insert(key, partition.clone());
        Ok(partition)
    }

    /// The shard's journal and the largest flush that goes to it, for a
    /// log in `dir` on the journal's file system, opened at the first call
    /// (one opener at a time). A journal that
    /// cannot be opened (a full disk) is reported, and the shard's logs
    /// sync their segments as without one; the next open tries again.
    async fn journal_for(&self, dir: &std::path::Path) -> Option<(Rc<Journal<DmaFs>>, usize)> {
        let settings = self.journal_settings.as_ref()?;
        if !settings.serves(dir) {
            return None;
        }
        let _one_opener = self.journal_opening.lock().await;
        if self.journal.borrow().is_none() {
            match settings.open().await {
                Ok(journal) => *self.journal.borrow_mut() = Some(Rc::new(journal)),
                Err(e) => {
                    tracing::warn!(journal = %settings.path.display(), error = %e, "cannot open the shard's journal: its partitions sync their own segments");
                    return None;
                }
            }
        }
        let journal = self.journal.borrow().clone()?;
        Some((journal, settings.flush_max_bytes))
    }

    /// Whether the shard closed its logs (it is stopping).
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// The memory the open partitions' caches share.
    pub fn cache_share(&self) -> &CacheShare {
        &self.cache_share
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

    /// Calls `visit` with each open partition, without collecting them
    /// first (`visit` must not open or close partitions).
    pub fn for_each_open(&self, mut visit: impl FnMut(PartitionKey, &OpenPartition)) {
        for (key, partition) in self.open.borrow().iter() {
            visit(*key, partition);
        }
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
        self.deleted
            .borrow_mut()
            .extend(metadata.deleted_topics.iter().copied());
        for key in gone {
            if let Some(partition) = self.open.borrow_mut().remove(&key) {
                partition.notify_arrival();
            }
            // An open that finished before this shard saw the deletion may
            // have made the directory again after shard 0 removed it.
            if metadata.deleted_topics.contains(&key.topic) {
                remove_topic_dirs(&self.root, key.topic);
            }
        }
    }

    /// Holds off every open until dropped, once the opens under way
    /// finished: a partition being closed and removed must not open again
    /// meanwhile.
    pub async fn hold_opens(&self) -> glommio::sync::Permit<'_> {
        let permit = self.opening.acquire_permit(OPENS_AT_ONCE).await;
        permit.expect("the opening semaphore is never closed")
    }

    /// Takes out of the table the open partitions of live topics that this
    /// shard no longer holds a replica of (a reassignment moved them away):
    /// the caller closes them and removes their files, holding off opens.
    pub fn take_unassigned(
        &self,
        metadata: &Metadata,
        assigned: &HashSet<PartitionKey>,
    ) -> Vec<(PartitionKey, Rc<OpenPartition>)> {
        let gone: Vec<PartitionKey> = (self.open.borrow().keys())
            .filter(|k| metadata.topics.contains_key(&k.topic) && !assigned.contains(k))
            .copied()
            .collect();
        let mut open = self.open.borrow_mut();
        gone.into_iter()
            .filter_map(|key| Some((key, open.remove(&key)?)))
            .collect()
    }

    /// The directory of a partition's log.
    pub fn partition_dir(&self, topic: &Topic, index: u32) -> PathBuf {
        topic_dir(&self.root, topic).join(index.to_string())
    }

    /// Flushes and closes every open log (shutdown); none opens after.
    pub async fn close_all(&self) {
        // Opens not yet under way fail from now on, so the hold below is
        // not kept waiting behind them (the semaphore lets an open of one
        // unit past a waiting hold of all); one under way finishes first,
        // and is closed below.
        self.closed.set(true);
        let _no_open_in_progress = self.hold_opens().await;
        let open: Vec<_> = self.open.borrow_mut().drain().collect();
        for (key, partition) in open {
            if let Err(e) = partition.log.close().await {
                tracing::error!(topic = %key.topic, partition = key.index, error = %e, "closing a partition log failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::{BrokerId, LeaderEpoch, Partition, PartitionEpoch, ShardId};

    fn topic(partitions: usize) -> Topic {
        let partition = Partition {
            replicas: vec![BrokerId(1)],
            shards: vec![ShardId(0)],
            isr: vec![BrokerId(1)],
            leader: Some(BrokerId(1)),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        };
        Topic {
            id: TopicId([0x7a; 16]),
            name: "opened".into(),
            config: TopicConfig::default(),
            partitions: vec![partition; partitions],
        }
    }

    /// Runs `test` on a glommio executor with a table whose partitions
    /// are held by the shard while the cell given says so.
    fn on_glommio(
        test: impl FnOnce(
                PartitionTable,
                Topic,
                Rc<std::cell::Cell<bool>>,
            ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
            + Send
            + 'static,
    ) {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().to_path_buf();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let held = Rc::new(std::cell::Cell::new(true));
                let holds = held.clone();
                let table = PartitionTable::new(
                    path,
                    CacheShare::new(16 << 20),
                    None,
                    Box::new(move |_| holds.get()),
                );
                test(table, topic(8), held).await;
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn partitions_open_together_each_once_and_a_hold_waits_for_the_opens_under_way() {
        on_glommio(|table, topic, _held| {
            Box::pin(async move {
                let key = |index| PartitionKey {
                    topic: topic.id,
                    index,
                };
                // Twice each, all at once: one log per partition.
                let opens = (0..16).map(|i| table.get_or_open(key(i % 8), &topic));
                let most_at_once = async {
                    let mut most = 0;
                    for _ in 0..10_000 {
                        most = most.max(table.opening_keys.borrow().len());
                        if table.open_partitions().len() == 8 {
                            break;
                        }
                        // (Not a busy loop: glommio counts a task's wakers
                        // in 15 bits, and each poll of the opens adds some.)
                        glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
                    }
                    most
                };
                let (opened, most_at_once) =
                    futures::join!(futures::future::join_all(opens), most_at_once);
                assert!(most_at_once > 1, "one partition opened at a time");
                let opened: Vec<_> = opened.into_iter().map(Result::unwrap).collect();
                for i in 0..8 {
                    assert!(
                        Rc::ptr_eq(&opened[i], &opened[i + 8]),
                        "partition {i} opened twice"
                    );
                }
                assert_eq!(table.open_partitions().len(), 8);

                // Twenty openers of one new partition wait on its lock, not
                // on the shard's open slots.
                let lone = Topic {
                    id: TopicId([0x7c; 16]),
                    ..topic.clone()
                };
                let lone_key = PartitionKey {
                    topic: lone.id,
                    index: 0,
                };
                let openers = (0..20).map(|_| table.get_or_open(lone_key, &lone));
                let fewest_free = async {
                    let mut fewest = OPENS_AT_ONCE;
                    for _ in 0..10_000 {
                        fewest = fewest.min(table.opening.available());
                        if table.get_open(lone_key).is_some() {
                            break;
                        }
                        glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
                    }
                    fewest
                };
                let (lone_opens, fewest_free) =
                    futures::join!(futures::future::join_all(openers), fewest_free);
                assert!(lone_opens.iter().all(Result::is_ok));
                assert_eq!(fewest_free, OPENS_AT_ONCE - 1, "one slot for one partition");
                let claimed = crate::partition::in_use::unless_claimed(topic.id, 3, || ());
                assert_eq!(claimed, None, "an open partition keeps the sweep off");
                assert!(
                    table.opening_keys.borrow().is_empty(),
                    "none left being opened"
                );

                // A hold taken while opens run waits for them; an open asked
                // for while it is held waits for its end.
                let more = topic.clone();
                let more = Topic {
                    id: TopicId([0x7b; 16]),
                    ..more
                };
                let second = |index| PartitionKey {
                    topic: more.id,
                    index,
                };
                let opens =
                    futures::future::join_all((0..4).map(|i| table.get_or_open(second(i), &more)));
                let hold_then_open = async {
                    storage::io::memory::yield_once().await;
                    let held = table.hold_opens().await;
                    let open_now = (0..4)
                        .filter(|i| table.get_open(second(*i)).is_some())
                        .count();
                    let late = table.get_or_open(second(4), &more);
                    let (late, ()) = futures::join!(late, async {
                        // Long enough for an open (a few ms) not held off.
                        glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
                        assert!(table.get_open(second(4)).is_none(), "opened while held");
                        drop(held);
                    });
                    late.unwrap();
                    open_now
                };
                let (opens, open_when_held) = futures::join!(opens, hold_then_open);
                assert!(opens.iter().all(Result::is_ok));
                assert_eq!(open_when_held, 4, "the hold waited for the opens under way");
            })
        });
    }

    #[test]
    fn an_open_that_waited_behind_a_removal_does_not_make_the_moved_partition_again() {
        on_glommio(|table, topic, held| {
            Box::pin(async move {
                let key = PartitionKey {
                    topic: topic.id,
                    index: 2,
                };
                let dir = table.partition_dir(&topic, 2);
                let removal = table.hold_opens().await;
                let open = table.get_or_open(key, &topic);
                let (opened, ()) = futures::join!(open, async {
                    // The open now waits behind the hold; the removal
                    // decides the partition moved away, and ends.
                    glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
                    held.set(false);
                    drop(removal);
                });
                assert!(opened.is_err(), "a partition moved away opened");
                assert!(table.get_open(key).is_none());
                assert!(!dir.exists(), "its directory was made again");
            })
        });
    }
}
