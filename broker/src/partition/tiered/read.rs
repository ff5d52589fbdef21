//! Reads below the local log start, from the object store: the segment
//! holding the offset (the manifest says which), its offset index to find
//! where to start, then the segment's bytes from there, chunk by chunk
//! through the shard's cache, until one fetch's worth of whole batches
//! is at hand. Every batch's CRC is checked before it is returned
//! (`storage::remote::read`): a damaged object is refused, never served.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use storage::batch::{first_stamped_at_or_after, TimestampScan};
use storage::index::OffsetIndex;
use storage::remote::manifest::{Manifest, RemoteSegment};
use storage::remote::read::{take_batches, Taken};
use storage::transactions::AbortedTxn;
use storage::{txn_index, Offset, TimestampMs};

use super::chunks::chunks_of;
use super::{segment_key, Tiering};
use crate::cluster::routing::PartitionKey;
use crate::remote_store::RemoteError;

/// The least a remote read asks the store for at once.
const FIRST_READ_BYTES: u64 = 64 << 10;
/// The most one remote read returns (a client may ask for more).
const READ_BYTES_MAX: usize = 8 << 20;

/// Batches read from a remote segment.
#[derive(Debug, Default)]
pub struct RemoteRead {
    /// Whole batches, from the one holding the offset asked.
    pub batches: Bytes,
    /// The offset after the last of them (None: nothing read).
    pub next_offset: Option<Offset>,
}

/// Whole batches from `offset` (at least one, up to `max_bytes`), from
/// the remote segment holding it.
pub async fn read(
    tiering: &Tiering,
    key: PartitionKey,
    manifest: &Manifest,
    (offset, max_bytes): (Offset, usize),
    max_batch_bytes: usize,
) -> Result<RemoteRead, RemoteError> {
    let started = Instant::now();
    let Some(segment) = manifest.locate(offset) else {
        return Ok(RemoteRead::default());
    };
    let read = read_segment(tiering, key, segment, (offset, max_bytes), max_batch_bytes).await;
    let counters = &tiering.metrics.tiered;
    counters.remote_read_latency.observe(started.elapsed());
    match &read {
        Ok(read) => counters
            .remote_read_bytes
            .fetch_add(read.batches.len() as u64, Ordering::Relaxed),
        Err(_) => counters.remote_read_errors.fetch_add(1, Ordering::Relaxed),
    };
    read
}

async fn read_segment(
    tiering: &Tiering,
    key: PartitionKey,
    segment: &RemoteSegment,
    (offset, max_bytes): (Offset, usize),
    max_batch_bytes: usize,
) -> Result<RemoteRead, RemoteError> {
    let damaged = |what: String| {
        tracing::error!(partition = key.index, topic = %key.topic, segment = %segment.object_stem(), "{what}");
        RemoteError::Store(what)
    };
    let index_key = segment_key(key, segment, ".index");
    let index_bytes = whole_object(tiering, &index_key).await?;
    let Some(index) = OffsetIndex::decode(&index_bytes, segment.size_bytes) else {
        forget_cached(tiering, &index_key).await?;
        return Err(damaged(
            "a remote segment's offset index is damaged: refused".into(),
        ));
    };
    let relative = (offset.0 - segment.base_offset.0).clamp(0, u32::MAX as i64) as u32;
    let start = index.floor(relative).map_or(0, |e| e.position as u64);
    let log = segment_key(key, segment, ".log");
    let size = segment.size_bytes;
    // What one read holds is bounded whatever the client asked for.
    let max_bytes = max_bytes.min(READ_BYTES_MAX);
    let mut end = (start + (max_bytes as u64).max(FIRST_READ_BYTES)).min(size);
    loop {
        let bytes = object_range(tiering, &log, start..end, size).await?;
        let at_end = end == size;
        let asked = (offset, max_bytes);
        let taken = match take_batches(
            &bytes,
            at_end,
            asked,
            (segment.last_offset, max_batch_bytes),
        ) {
            Ok(taken) => taken,
            Err(e) => {
                forget_cached(tiering, &log).await?;
                return Err(damaged(format!(
                    "a remote segment is damaged, refused: {e}"
                )));
            }
        };
        match taken {
            Taken::Batches { start, end } => {
                let batches = bytes.slice(start..end);
                let next_offset = last_batch_next_offset(&batches);
                return Ok(RemoteRead {
                    batches,
                    next_offset,
                });
            }
            // At least double what was read: a sparse index entry far
            // below the offset costs a few reads, not one per batch.
            Taken::NeedBytes(n) if !at_end => {
                end = (start + (n as u64).max(2 * (end - start))).min(size)
            }
            Taken::NeedBytes(_) | Taken::Nothing => return Ok(RemoteRead::default()),
        }
    }
}

/// Drops an object found damaged from both caches: damaged in the store
/// or on the way, the next read fetches it again rather than trusting
/// them.
async fn forget_cached(tiering: &Tiering, object: &str) -> Result<(), RemoteError> {
    tiering.cache.borrow_mut().forget(object);
    tiering.store.forget_cached(object).await
}

/// The offset after the last of whole `batches`.
fn last_batch_next_offset(batches: &Bytes) -> Option<Offset> {
    let split = storage::batch::split_stored(batches, usize::MAX).ok()?;
    split.last().map(|(header, _)| header.next_offset())
}

/// An object read whole (small ones: indexes), through the cache.
async fn whole_object(tiering: &Tiering, name: &str) -> Result<Bytes, RemoteError> {
    let key = (name.to_string(), u64::MAX);
    if let Some(bytes) = tiering.cache.borrow_mut().get(&key) {
        tiering
            .metrics
            .tiered
            .cache_hits
            .fetch_add(1, Ordering::Relaxed);
        return Ok(bytes);
    }
    tiering
        .metrics
        .tiered
        .cache_misses
        .fetch_add(1, Ordering::Relaxed);
    let bytes = read_through_disk(tiering, name, None).await?;
    tiering.cache.borrow_mut().put(key, bytes.clone());
    Ok(bytes)
}

/// `name` (or its `range`) through the store's disk cache, counted.
async fn read_through_disk(
    tiering: &Tiering,
    name: &str,
    range: Option<Range<u64>>,
) -> Result<Bytes, RemoteError> {
    let (bytes, from_disk) = tiering.store.get_cached(name, range).await?;
    let counters = &tiering.metrics.tiered;
    let counter = match from_disk {
        true => &counters.disk_cache_hits,
        false => &counters.disk_cache_misses,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    Ok(bytes)
}

/// `range` of an object of `size` bytes, from the chunks covering it:
/// those not cached are read from the store at once (the store thread
/// runs up to `remote_concurrency` of them together).
async fn object_range(
    tiering: &Tiering,
    name: &str,
    range: Range<u64>,
    size: u64,
) -> Result<Bytes, RemoteError> {
    let counters = &tiering.metrics.tiered;
    let covering = chunks_of(range.clone(), size);
    let reads = covering.iter().map(|(index, chunk_range)| async move {
        let key = (name.to_string(), *index);
        let cached = tiering.cache.borrow_mut().get(&key);
        if let Some(chunk) = cached {
            counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(chunk);
        }
        counters.cache_misses.fetch_add(1, Ordering::Relaxed);
        let chunk = read_through_disk(tiering, name, Some(chunk_range.clone())).await?;
        let expected = chunk_range.end - chunk_range.start;
        if chunk.len() as u64 != expected {
            return Err(RemoteError::Store(format!(
                "{name}: {} bytes where the manifest says {expected}",
                chunk.len()
            )));
        }
        tiering.cache.borrow_mut().put(key, chunk.clone());
        Ok(chunk)
    });
    let chunks = futures::future::try_join_all(reads).await?;
    let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
    for ((_, chunk_range), chunk) in covering.iter().zip(&chunks) {
        let from = range.start.max(chunk_range.start) - chunk_range.start;
        let to = range.end.min(chunk_range.end) - chunk_range.start;
        out.extend_from_slice(&chunk[from as usize..to as usize]);
    }
    Ok(out.freeze())
}

/// The aborted transactions overlapping `[from, upper)` that remote
/// segments index, from the one holding `from` on; true once complete
/// (no later segment, remote or local, can add one).
pub async fn aborted_transactions(
    tiering: &Tiering,
    key: PartitionKey,
    manifest: &Manifest,
    (from, upper): (Offset, Offset),
    found: &mut Vec<AbortedTxn>,
) -> Result<bool, RemoteError> {
    let segments = manifest.segments();
    let first = segments.partition_point(|s| s.last_offset < from);
    for segment in &segments[first..] {
        let name = segment_key(key, segment, ".txnindex");
        let bytes = match whole_object(tiering, &name).await {
            Ok(bytes) => bytes,
            Err(RemoteError::NotFound(_)) => {
                // Most segments have none: remembered as empty.
                tiering
                    .cache
                    .borrow_mut()
                    .put((name, u64::MAX), Bytes::new());
                continue;
            }
            Err(e) => return Err(e),
        };
        if bytes.is_empty() {
            continue;
        }
        let entries = txn_index::decode(&bytes)
            .ok_or_else(|| RemoteError::Store(format!("{name} is damaged: refused")))?;
        if txn_index::collect_overlapping(entries.iter(), from, upper, found) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The first record stamped at or after `timestamp` in the remote log
/// (ListOffsets by timestamp below the local start): the remote segments
/// whose newest record is that recent, oldest first, read through.
pub async fn offset_for_timestamp(
    tiering: &Tiering,
    key: PartitionKey,
    manifest: &Manifest,
    timestamp: TimestampMs,
    max_batch_bytes: usize,
) -> Result<Option<(Offset, TimestampMs)>, RemoteError> {
    let recent = manifest
        .segments()
        .iter()
        .filter(|s| s.max_timestamp >= timestamp);
    for segment in recent {
        let mut offset = segment.first_served;
        while offset <= segment.last_offset {
            let asked = (offset, READ_BYTES_MAX);
            let read = read_segment(tiering, key, segment, asked, max_batch_bytes).await?;
            let scan = first_stamped_at_or_after(&read.batches, timestamp, max_batch_bytes)
                .map_err(|e| RemoteError::Store(format!("a remote segment is damaged: {e}")))?;
            match scan {
                TimestampScan::Found(at, stamped) if at >= segment.first_served => {
                    return Ok(Some((at, stamped)))
                }
                TimestampScan::Found(..) => offset = read.next_offset.unwrap_or(Offset(i64::MAX)),
                TimestampScan::NotIn { next: Some(next) } => offset = next,
                TimestampScan::NotIn { next: None } => break,
            }
        }
    }
    Ok(None)
}
