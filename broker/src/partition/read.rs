//! Reading a partition this broker serves: whole batches from an offset,
//! bounded by what the reader may see (a consumer below the high
//! watermark, a follower below the log end), and waiting, bounded, for
//! that bound to move. Fetch, the HTTP poll and followers all read here.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::select;
use kafka_protocol::ResponseError;
use storage::{Offset, StorageError};

use super::served::ServedPartition;
use super::tiered;
use crate::kafka::Code;
use crate::remote_store::RemoteError;

/// Up to where a reader may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bound {
    /// A consumer reading uncommitted: below the high watermark.
    #[default]
    HighWatermark,
    /// A consumer reading committed (isolation_level 1): below the last
    /// stable offset, told which aborted transactions it may meet.
    LastStable,
    /// A follower copying the log: below the log end.
    LogEnd,
}

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// Whole stored batches, in order (the log's chunks, not joined).
    pub chunks: Vec<Bytes>,
    /// Their bytes in all.
    pub bytes: usize,
    /// The bound when read: what a long poll waits to see move.
    pub bound: Offset,
    /// The high watermark when read.
    pub high_watermark: Offset,
    /// The last stable offset when read (below it, every transaction is
    /// decided; the high watermark while none is open).
    pub last_stable: Offset,
    /// The log start when read.
    pub log_start: Offset,
    /// For a read below the last stable offset: the aborted transactions
    /// overlapping what it could return (producer id, first offset).
    pub aborted: Option<Vec<(i64, Offset)>>,
}

impl Read {
    /// The chunks as one buffer.
    pub fn joined(&self) -> Bytes {
        match self.chunks.len() {
            0 => Bytes::new(),
            1 => self.chunks[0].clone(),
            _ => {
                let mut joined = BytesMut::with_capacity(self.bytes);
                self.chunks.iter().for_each(|c| joined.extend_from_slice(c));
                joined.freeze()
            }
        }
    }
}

impl ServedPartition {
    /// Reads up to `max_bytes` (at least one batch) from `offset`, below
    /// `bound`; nothing when nothing is visible there yet (the caller may
    /// wait). OFFSET_OUT_OF_RANGE outside [log start, log end].
    pub async fn read(&self, offset: i64, max_bytes: usize, bound: Bound) -> Result<Read, Code> {
        let log = &self.partition.log;
        let (log_start, log_end) = (log.log_start(), log.log_end());
        let high_watermark = log.high_watermark();
        let limit = match bound {
            Bound::HighWatermark => high_watermark,
            Bound::LastStable => self.last_stable_offset(),
            Bound::LogEnd => log_end,
        };
        let mut read = Read {
            // For a committed read, filled in with what it returns.
            aborted: (bound == Bound::LastStable).then(Vec::new),
            bound: limit,
            high_watermark,
            last_stable: self.last_stable_offset(),
            log_start: self.log_start_seen(bound),
            ..Read::default()
        };
        if offset < log_start.0 && offset >= 0 && self.tiering.is_some() {
            return self
                .read_below_local_start(read, (offset, max_bytes), bound)
                .await;
        }
        if offset < log_start.0 || offset > log_end.0 {
            return Err(ResponseError::OffsetOutOfRange.code());
        }
        if offset >= limit.0 {
            return Ok(read);
        }
        let outcome = log.read(Offset(offset), max_bytes.max(1), limit).await;
        if let Some(prefetch) = log.prefetch_task() {
            // The next sequential read's disk read runs while this answer
            // is sent, instead of after the reader asks.
            glommio::spawn_local(prefetch).detach();
        }
        match outcome {
            Ok(outcome) => {
                if let (Some(aborted), Some(end)) = (&mut read.aborted, outcome.next_offset) {
                    // The aborted transactions overlapping what is returned
                    // (Kafka bounds its list the same way), not all below
                    // the LSO.
                    let overlapping = log.aborted_transactions(Offset(offset), end).await;
                    let overlapping = overlapping.map_err(|e| self.storage_failure(e))?;
                    aborted.extend(overlapping.iter().map(|t| (t.producer_id, t.first_offset)));
                }
                read.bytes = outcome.bytes;
                read.chunks = outcome.chunks;
                Ok(read)
            }
            Err(StorageError::OffsetOutOfRange { .. }) => {
                Err(ResponseError::OffsetOutOfRange.code())
            }
            Err(e) => Err(self.storage_failure(e)),
        }
    }

    /// The log start a reader is told: for a tiered topic's consumers, the
    /// remote log's when it is older (followers keep to the local one).
    pub(crate) fn log_start_seen(&self, bound: Bound) -> Offset {
        let local = self.partition.log.log_start();
        if bound == Bound::LogEnd {
            return local;
        }
        let remote = self.partition.remote.current(self.epoch);
        let remote_start = remote.and_then(|m| m.start_offset());
        remote_start.map_or(local, |start| start.min(local))
    }

    /// A read below the local log start of a tiered topic: from the
    /// object store for consumers (only what the remote log holds);
    /// OFFSET_MOVED_TO_TIERED_STORAGE for followers, as KIP-405.
    async fn read_below_local_start(
        &self,
        mut read: Read,
        (offset, max_bytes): (i64, usize),
        bound: Bound,
    ) -> Result<Read, Code> {
        let tiering = self.tiering.as_ref().expect("a tiered topic");
        if bound == Bound::LogEnd {
            return Err(ResponseError::OffsetMovedToTieredStorage.code());
        }
        if offset >= read.bound.0 {
            // A committed reader at the last stable offset, held below
            // the local start by an open transaction: nothing to read yet.
            return Ok(read);
        }
        let key = self.key();
        let manifest = (self.partition.remote)
            .load(tiering, key, self.epoch)
            .await
            .map_err(|e| self.remote_failure(e))?;
        read.log_start = self.log_start_seen(Bound::HighWatermark);
        if manifest.locate(Offset(offset)).is_none() {
            return Err(ResponseError::OffsetOutOfRange.code());
        }
        let max_batch = self.partition.log.max_batch_bytes();
        let asked = (Offset(offset), max_bytes.max(1));
        let remote = tiered::read::read(tiering, key, &manifest, asked, max_batch)
            .await
            .map_err(|e| self.remote_failure(e))?;
        let batches = below(&remote.batches, read.bound);
        let Some(upper) = storage::batch::split_stored(&batches, usize::MAX)
            .ok()
            .and_then(|b| b.last().map(|(header, _)| header.next_offset()))
        else {
            return Ok(read);
        };
        if let Some(aborted) = &mut read.aborted {
            let range = (Offset(offset), upper);
            let mut found = Vec::new();
            let complete =
                tiered::read::aborted_transactions(tiering, key, &manifest, range, &mut found)
                    .await
                    .map_err(|e| self.remote_failure(e))?;
            if !complete {
                let local = self
                    .partition
                    .log
                    .aborted_transactions(range.0, upper)
                    .await;
                found.extend(local.map_err(|e| self.storage_failure(e))?);
                found.sort_by_key(|t| t.marker_offset);
                found.dedup();
            }
            aborted.extend(found.iter().map(|t| (t.producer_id, t.first_offset)));
        }
        read.bytes = batches.len();
        read.chunks = vec![batches];
        Ok(read)
    }

    /// Logs a remote read's failure; the code the reader is answered.
    fn remote_failure(&self, e: RemoteError) -> Code {
        tracing::error!(topic = %self.topic.name, partition = self.index, error = %e, "reading the remote log failed");
        ResponseError::KafkaStorageError.code()
    }

    /// Logs a read's storage failure; the code the reader is answered.
    fn storage_failure(&self, e: StorageError) -> Code {
        tracing::error!(topic = %self.topic.name, error = %e, "reading a partition failed");
        ResponseError::KafkaStorageError.code()
    }

    /// Waits until `bound` moves from `seen` (data arrived, or the role or
    /// partition changed), or `timeout` passes.
    pub async fn wait_past(&self, seen: Offset, bound: Bound, timeout: Duration) {
        let log = &self.partition.log;
        let now = match bound {
            Bound::HighWatermark => log.high_watermark(),
            Bound::LastStable => self.last_stable_offset(),
            Bound::LogEnd => log.log_end(),
        };
        if now != seen {
            return;
        }
        // Dropped with the timeout: a partition deleted meanwhile wakes it too.
        let arrival = self.partition.next_arrival();
        let _ = select(arrival, Box::pin(glommio::timer::sleep(timeout))).await;
    }

    /// [`ServedPartition::read`], waiting up to `timeout` for something to read (a
    /// long poll on one partition).
    pub async fn read_waiting(
        &self,
        offset: i64,
        max_bytes: usize,
        bound: Bound,
        timeout: Duration,
    ) -> Result<Read, Code> {
        let deadline = Instant::now() + timeout;
        loop {
            let read = self.read(offset, max_bytes, bound).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if read.bytes > 0 || left.is_zero() {
                return Ok(read);
            }
            self.wait_past(read.bound, bound, left).await;
        }
    }
}

/// The whole batches of `batches` that begin below `bound` (a remote
/// segment may hold offsets past a committed reader's last stable offset).
fn below(batches: &Bytes, bound: Offset) -> Bytes {
    let Ok(split) = storage::batch::split_stored(batches, usize::MAX) else {
        return Bytes::new();
    };
    let end: usize = split
        .iter()
        .take_while(|(header, _)| header.base_offset < bound)
        .map(|(_, batch)| batch.len())
        .sum();
    batches.slice(..end)
}
