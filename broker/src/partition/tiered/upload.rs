//! The leader's pass over a tiered partition, run by the shard's
//! maintenance: upload what is sealed and committed, then local
//! retention (only what the remote log holds), then total retention over
//! both (the oldest remote segments: the manifest without them written
//! first, their objects deleted after).
//!
//! A segment's objects are written before the manifest naming them, so a
//! crash or a store failure mid-upload leaves objects no entry points at
//! (written again under the same names on the next try), never an entry
//! without its objects. The manifest is written only while this broker
//! still leads the partition in the epoch it read the manifest in.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use storage::epochs::EpochCache;
use storage::remote::manifest::{Manifest, RemoteSegment, SealedSegment};
use storage::remote::sealed::SealedFile;
use storage::{Offset, RetentionPolicy, TimestampMs};

use super::{manifest_key, segment_key, Tiering, SEGMENT_SUFFIXES};
use crate::partition::served::ServedPartition;
use crate::partition::Partitions;
use crate::remote_store::RemoteError;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Segments uploaded.
    pub uploaded: usize,
    /// Local segments deleted (all uploaded).
    pub deleted_locally: usize,
    /// Remote segments dropped by total retention.
    pub deleted_remotely: usize,
    /// Sealed bytes left to upload.
    pub lag_bytes: u64,
}

/// One pass over a partition this broker leads.
pub async fn pass(
    partitions: &Partitions,
    tiering: &Tiering,
    served: &ServedPartition,
) -> Result<Pass, RemoteError> {
    let key = served.key();
    let remote = &served.partition.remote;
    let mut manifest = remote.load(tiering, key, served.epoch).await?;
    keep_snapshots_to_upload(served, &manifest);
    let mut done = Pass::default();
    let log = &served.partition.log;
    let sealed = log.sealed_segments();
    let offered: Vec<SealedSegment> = sealed
        .iter()
        .map(|s| SealedSegment {
            base_offset: s.base_offset,
            last_offset: s.last_offset,
        })
        .collect();
    for next in manifest.to_upload(&offered, log.high_watermark()) {
        let file = sealed
            .iter()
            .find(|s| s.base_offset == next.base_offset)
            .expect("offered");
        manifest = upload_one(partitions, tiering, served, file).await?;
        keep_snapshots_to_upload(served, &manifest);
        done.uploaded += 1;
    }
    done.lag_bytes = lag_bytes(&log.sealed_segments(), &manifest);
    done.deleted_locally = retain_locally(served, &manifest).await?;
    done.deleted_remotely = retain_in_total(partitions, tiering, served, manifest).await?;
    Ok(done)
}

/// Sealed bytes past the remote log's end.
pub fn lag_bytes(sealed: &[SealedFile], manifest: &Manifest) -> u64 {
    let end = manifest.last_offset();
    sealed
        .iter()
        .filter(|s| end.is_none_or(|end| s.last_offset > end))
        .map(|s| s.size_bytes)
        .sum()
}

/// Uploads one segment's objects, then the manifest with it.
async fn upload_one(
    partitions: &Partitions,
    tiering: &Tiering,
    served: &ServedPartition,
    file: &SealedFile,
) -> Result<Rc<Manifest>, RemoteError> {
    let (store, key) = (&tiering.store, served.key());
    let crc = store.checksum(file.path.clone(), file.size_bytes).await?;
    let segment = RemoteSegment {
        base_offset: file.base_offset,
        first_served: file.base_offset,
        last_offset: file.last_offset,
        max_timestamp: file.max_timestamp,
        size_bytes: file.size_bytes,
        crc,
        epochs: file.epochs.clone(),
        uploaded_by: served.epoch,
    };
    let object = |suffix| segment_key(key, &segment, suffix);
    store
        .put_file(&object(".log"), file.path.clone(), file.size_bytes, crc)
        .await?;
    let epochs = EpochCache::from_entries(file.epochs.clone()).encode();
    let small = [
        (".index", file.offset_index.clone()),
        (".timeindex", file.time_index.clone()),
        (".epochs", epochs),
    ];
    for (suffix, bytes) in small {
        store.put(&object(suffix), Bytes::from(bytes)).await?;
    }
    if let Some((path, len)) = &file.txn_index {
        let len = *len;
        let crc = store.checksum(path.clone(), len).await?;
        store
            .put_file(&object(".txnindex"), path.clone(), len, crc)
            .await?;
    }
    if let Some(snapshot) = producer_snapshot_after(served, file).await? {
        store
            .put(&object(".snapshot"), Bytes::from(snapshot))
            .await?;
    }
    let remote = &served.partition.remote;
    let _writing = remote.writing.lock().await;
    // DeleteRecords may have changed it since the pass read it.
    let current = remote.load(tiering, key, served.epoch).await?;
    let mut next = (*current).clone();
    next.add(segment)
        .map_err(|e| RemoteError::Store(format!("not added to the manifest: {e}")))?;
    write_manifest(partitions, tiering, served, next).await?;
    let counters = &tiering.metrics.tiered;
    counters
        .uploaded_bytes
        .fetch_add(file.size_bytes, Ordering::Relaxed);
    counters.uploaded_segments.fetch_add(1, Ordering::Relaxed);
    Ok(served
        .partition
        .remote
        .current(served.epoch)
        .expect("just written"))
}

/// The producer snapshot taken where `file` ends (at the roll that sealed
/// it), if the log has it: a follower starting over there needs it.
async fn producer_snapshot_after(
    served: &ServedPartition,
    file: &SealedFile,
) -> Result<Option<Vec<u8>>, RemoteError> {
    let log = &served.partition.log;
    log.producer_snapshot(file.last_offset.plus(1))
        .await
        .map_err(|e| RemoteError::Local(format!("a producer snapshot: {e}")))
}

/// Keeps the producer snapshots of the segments not uploaded yet (the
/// log otherwise keeps only its newest few).
fn keep_snapshots_to_upload(served: &ServedPartition, manifest: &Manifest) {
    let log = &served.partition.log;
    let from = manifest
        .last_offset()
        .map_or(log.log_start(), |end| end.plus(1));
    log.keep_producer_snapshots_from(Some(from));
}

/// Writes the manifest if this broker still leads in the epoch it read it
/// in (a deposed leader stops before overwriting its successor's). The
/// caller holds the remote log's `writing` lock.
pub(super) async fn write_manifest(
    partitions: &Partitions,
    tiering: &Tiering,
    served: &ServedPartition,
    manifest: Manifest,
) -> Result<(), RemoteError> {
    let key = served.key();
    let still_leads = || {
        partitions
            .served(key, true)
            .is_ok_and(|(_, epoch)| epoch == served.epoch)
    };
    if !still_leads() {
        return Err(RemoteError::Store(
            "no longer the leader: the manifest is the next leader's".into(),
        ));
    }
    // The manifest stored must still be the one this broker read: else
    // another leader wrote since (this one was deposed and not told yet),
    // and its entries must not be overwritten.
    let remote = &served.partition.remote;
    let stored = match tiering.store.get(&manifest_key(key), None).await {
        Ok(bytes) => Manifest::decode(&bytes),
        Err(RemoteError::NotFound(_)) => Some(Manifest::default()),
        Err(e) => return Err(e),
    };
    let read = remote.current(served.epoch);
    if !still_leads() {
        return Err(RemoteError::Store(
            "no longer the leader: the manifest is the next leader's".into(),
        ));
    }
    if stored.as_ref() != read.as_deref() {
        remote.forget();
        return Err(RemoteError::Store(
            "the manifest changed since it was read (another leader wrote it): read again next pass"
                .into(),
        ));
    }
    let bytes = Bytes::from(manifest.encode());
    tiering.store.put(&manifest_key(key), bytes).await?;
    remote.set(served.epoch, manifest);
    Ok(())
}

/// Deletes the objects of segments the manifest no longer lists (and
/// what the caches hold of them).
pub(super) async fn delete_segment_objects(
    tiering: &Tiering,
    key: crate::cluster::routing::PartitionKey,
    dropped: &[RemoteSegment],
) -> Result<(), RemoteError> {
    for segment in dropped {
        for suffix in SEGMENT_SUFFIXES {
            let object = segment_key(key, segment, suffix);
            tiering.store.delete(&object).await?;
            tiering.cache.borrow_mut().forget(&object);
        }
    }
    Ok(())
}

/// Local retention: `local.retention.*`, deleting only segments the
/// remote log holds.
async fn retain_locally(
    served: &ServedPartition,
    manifest: &Manifest,
) -> Result<usize, RemoteError> {
    let (retention_bytes, retention_ms) = served.topic.config.local_retention();
    let policy = RetentionPolicy {
        retention_ms,
        retention_bytes,
        // Nothing uploaded: nothing may go.
        deletable_through: Some(manifest.last_offset().unwrap_or(Offset(-1))),
    };
    served
        .partition
        .log
        .apply_retention(policy)
        .await
        .map_err(|e| RemoteError::Local(format!("local retention: {e}")))
}

/// Total retention (`retention.*`, local bytes above the remote log
/// counted): the manifest without the oldest remote segments first, then
/// their objects deleted.
async fn retain_in_total(
    partitions: &Partitions,
    tiering: &Tiering,
    served: &ServedPartition,
    manifest: Rc<Manifest>,
) -> Result<usize, RemoteError> {
    let config = &served.topic.config;
    let limits = (
        (config.retention_bytes >= 0).then_some(config.retention_bytes as u64),
        (config.retention_ms >= 0).then_some(config.retention_ms),
    );
    let log = &served.partition.log;
    let uploaded_end = manifest.last_offset();
    let local_bytes_above: u64 = log.size_bytes()
        - log
            .sealed_segments()
            .iter()
            .filter(|s| uploaded_end.is_some_and(|end| s.last_offset <= end))
            .map(|s| s.size_bytes)
            .sum::<u64>();
    let key = served.key();
    let remote = &served.partition.remote;
    let writing = remote.writing.lock().await;
    let current = remote.load(tiering, key, served.epoch).await?;
    let mut kept = (*current).clone();
    let now = TimestampMs(crate::runtime::clock::wall_ms());
    let dropped = kept.expire(limits, local_bytes_above, now);
    if dropped.is_empty() {
        return Ok(0);
    }
    write_manifest(partitions, tiering, served, kept).await?;
    drop(writing);
    delete_segment_objects(tiering, key, &dropped).await?;
    let counters = &tiering.metrics.tiered;
    counters
        .remote_segments_deleted
        .fetch_add(dropped.len() as u64, Ordering::Relaxed);
    Ok(dropped.len())
}
