//! Tiered storage in the partition layer (docs/tiered-storage.md): a
//! tiered topic's leader uploads its sealed, committed segments to the
//! object store and lists them in the partition's manifest
//! ([`upload`]); local retention then deletes only what the remote log
//! holds and total retention drops the oldest remote segments; reads
//! below the local log start come from the object store through the
//! shard's chunk cache ([`read`], [`chunks`]).
//!
//! Objects of a partition live under `<topic id>/<partition>/`: the
//! `manifest`, and per segment `<base offset>-<crc>.log`, `.index`,
//! `.timeindex`, `.epochs`, when it indexes aborted transactions
//! `.txnindex`, and the producer snapshot at its end, `.snapshot` (names
//! from contents: see `storage::remote::manifest`). A follower that starts
//! its log over at its leader's local start takes its producer state from
//! that snapshot (`replica::fetcher`).

pub mod chunks;
pub mod delete;
pub mod read;
pub mod upload;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use storage::remote::manifest::{Manifest, RemoteSegment};
use storage::LeaderEpoch;

use crate::cluster::routing::PartitionKey;
use crate::counters::ShardMetrics;
use crate::remote_store::{RemoteError, RemoteStore};
use chunks::ChunkCache;

/// A shard's way to the object store.
pub struct Tiering {
    /// The store's thread.
    pub store: RemoteStore,
    /// The chunks read lately.
    pub cache: RefCell<ChunkCache>,
    /// The shard's counters.
    pub metrics: Arc<ShardMetrics>,
}

/// A partition's remote log as this broker last read or wrote its
/// manifest, and the leader epoch it did so in: a new epoch reads it
/// again (a new leader continues from the stored manifest).
#[derive(Debug, Default)]
pub struct RemoteLog {
    loaded: RefCell<Option<(LeaderEpoch, Rc<Manifest>)>>,
    /// Bumped by every [`RemoteLog::set`]: a load whose read of the store
    /// began before one does not replace what it set (it read an older
    /// manifest).
    generation: std::cell::Cell<u64>,
    /// Held by whoever reads, changes and writes the manifest (the
    /// leader's pass, DeleteRecords): one change at a time, each on the
    /// manifest the one before wrote.
    pub writing: futures::lock::Mutex<()>,
}

impl RemoteLog {
    /// The manifest as last seen in `epoch`, if any.
    pub fn current(&self, epoch: LeaderEpoch) -> Option<Rc<Manifest>> {
        let loaded = self.loaded.borrow();
        loaded
            .as_ref()
            .filter(|(seen, _)| *seen == epoch)
            .map(|(_, manifest)| manifest.clone())
    }

    /// Remembers the manifest stored in `epoch`.
    pub fn set(&self, epoch: LeaderEpoch, manifest: Manifest) -> Rc<Manifest> {
        let manifest = Rc::new(manifest);
        self.loaded.replace(Some((epoch, manifest.clone())));
        self.generation.set(self.generation.get() + 1);
        manifest
    }

    /// Forgets the manifest (the stored one changed): the next load reads
    /// it again.
    pub fn forget(&self) {
        self.loaded.replace(None);
        self.generation.set(self.generation.get() + 1);
    }

    /// The manifest of the partition in `epoch`: the one seen in it, else
    /// the stored one (none stored: an empty remote log).
    pub async fn load(
        &self,
        tiering: &Tiering,
        key: PartitionKey,
        epoch: LeaderEpoch,
    ) -> Result<Rc<Manifest>, RemoteError> {
        if let Some(manifest) = self.current(epoch) {
            return Ok(manifest);
        }
        let generation = self.generation.get();
        let manifest = match tiering.store.get(&manifest_key(key), None).await {
            Ok(bytes) => Manifest::decode(&bytes).ok_or_else(|| {
                RemoteError::Store(format!(
                    "the manifest {} is damaged: refused",
                    manifest_key(key)
                ))
            })?,
            Err(RemoteError::NotFound(_)) => Manifest::default(),
            Err(e) => return Err(e),
        };
        if self.generation.get() != generation {
            // Written or loaded meanwhile: that one is at least as new;
            // forgotten meanwhile (the stored one changed): read again.
            return match self.current(epoch) {
                Some(newer) => Ok(newer),
                None => Box::pin(self.load(tiering, key, epoch)).await,
            };
        }
        Ok(self.set(epoch, manifest))
    }
}

/// Where a partition's objects live.
pub fn prefix(key: PartitionKey) -> String {
    format!("{}/{}", key.topic, key.index)
}

/// The partition's manifest object.
pub fn manifest_key(key: PartitionKey) -> String {
    format!("{}/manifest", prefix(key))
}

/// A segment's object with `suffix` (`.log`, `.index`, ...).
pub fn segment_key(key: PartitionKey, segment: &RemoteSegment, suffix: &str) -> String {
    format!("{}/{}{suffix}", prefix(key), segment.object_stem())
}

/// The suffixes of a segment's objects (`.txnindex` only when it has one;
/// `.snapshot`, the producer state at the segment's end, when the leader
/// had it).
pub const SEGMENT_SUFFIXES: [&str; 6] = [
    ".log",
    ".index",
    ".timeindex",
    ".epochs",
    ".txnindex",
    ".snapshot",
];

/// A replica's producer snapshots kept when no upload says otherwise: a
/// tiered topic's every one (each goes up with the segment it ends; the
/// leader's pass then keeps only those not uploaded), else the log's
/// newest few.
pub fn keep_snapshots_by_default(
    log: &storage::Log<storage::io::dma::DmaFs>,
    topic: &control::Topic,
) {
    let tiered = topic.config.remote_storage_enable;
    log.keep_producer_snapshots_from(tiered.then_some(storage::Offset(0)));
}

/// The producer snapshot at `offset` in the remote log: the one uploaded
/// with the segment ending just below it. None when no remote segment
/// ends there or it went up without one.
pub async fn producer_snapshot_at(
    tiering: &Tiering,
    key: PartitionKey,
    offset: storage::Offset,
) -> Result<Option<bytes::Bytes>, RemoteError> {
    let manifest = match tiering.store.get(&manifest_key(key), None).await {
        Ok(bytes) => Manifest::decode(&bytes).ok_or_else(|| {
            RemoteError::Store(format!("the manifest {} is damaged", manifest_key(key)))
        })?,
        Err(RemoteError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let segments = manifest.segments();
    let Some(segment) = segments.iter().find(|s| s.last_offset.plus(1) == offset) else {
        return Ok(None);
    };
    match tiering
        .store
        .get(&segment_key(key, segment, ".snapshot"), None)
        .await
    {
        Ok(bytes) => Ok(Some(bytes)),
        Err(RemoteError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes every object of a deleted topic (all its partitions' segments
/// and manifests); how many. Run by one broker (the live one with the
/// lowest id), in the background.
pub async fn delete_topic_objects(
    tiering: &Tiering,
    topic: control::TopicId,
) -> Result<usize, RemoteError> {
    let prefix = format!("{topic}/");
    let objects = tiering.store.list(&prefix).await?;
    for (name, _) in &objects {
        tiering.store.delete(name).await?;
        tiering.cache.borrow_mut().forget(name);
    }
    Ok(objects.len())
}
