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
use crate::kafka::Code;

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
            Bound::LastStable => log.last_stable_offset(),
            Bound::LogEnd => log_end,
        };
        let mut read = Read {
            // For a committed read, filled in with what it returns.
            aborted: (bound == Bound::LastStable).then(Vec::new),
            bound: limit,
            high_watermark,
            last_stable: log.last_stable_offset(),
            log_start,
            ..Read::default()
        };
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
            Bound::LastStable => log.last_stable_offset(),
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
