//! One segment of a partition log: its file, its in-memory indexes and
//! the bookkeeping of what was appended, written and made durable.

use std::rc::Rc;

use crate::batch::BatchHeader;
use crate::index::{OffsetEntry, OffsetIndex, TimeEntry, TimeIndex};
use crate::io::{DirectFile, FileSystem};
use crate::types::{Offset, TimestampMs};
use crate::write_buffer::WriteBuffer;

/// The first offset a recovery scan covered, and each (epoch, first
/// offset) it found.
pub type ScannedEpochs = (Offset, Vec<(crate::types::LeaderEpoch, Offset)>);

/// A segment: a `.log` file of whole batches and its sparse indexes.
pub struct Segment<F: DirectFile> {
    /// Offset of the first batch the segment may hold (its file name).
    pub base: Offset,
    /// The data file; None until the first flush creates it.
    pub file: Option<Rc<F>>,
    /// Sparse offset -> position index.
    pub index: OffsetIndex,
    /// Sparse timestamp -> offset index.
    pub time_index: TimeIndex,
    /// Bytes appended, durable or not.
    pub size: u64,
    /// Bytes written and fdatasync'd.
    pub durable_size: u64,
    /// The offset after the segment's last batch.
    pub next_offset: Offset,
    /// Largest batch timestamp in the segment (-1 when empty).
    pub max_timestamp: TimestampMs,
    /// Offset of the batch holding `max_timestamp`.
    pub offset_of_max_timestamp: Offset,
    /// Wall clock of the first append, for rolling by age.
    pub first_append_ms: Option<TimestampMs>,
    /// Bytes appended since the last index entry.
    pub bytes_since_index: u64,
    /// Appended bytes awaiting a flush; None once sealed and flushed.
    pub writer: Option<WriteBuffer<F::Buf>>,
    /// No more appends go here; the next flush writes its indexes and trims it.
    pub sealed: bool,
    /// Bytes of disk reserved with fallocate.
    pub allocated: u64,
    /// What recovery's scan of this segment found: the offsets it covered
    /// and each (epoch, first offset) in them (empty unless scanned).
    pub scanned_epochs: Option<ScannedEpochs>,
    /// How many aborted transactions the segment's `.txnindex` holds, once
    /// written (at seal, or found at open); None while its aborts are
    /// held in memory (the producer state's `Transactions`).
    pub aborts_indexed: Option<u32>,
}

impl<F: DirectFile> Segment<F> {
    /// A new, empty active segment whose file does not exist yet.
    pub fn new_active<FS: FileSystem<File = F>>(base: Offset, fs: &FS, chunk_bytes: usize) -> Self {
        Segment {
            base,
            file: None,
            index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            size: 0,
            durable_size: 0,
            next_offset: base,
            max_timestamp: TimestampMs(-1),
            offset_of_max_timestamp: base,
            first_append_ms: None,
            bytes_since_index: 0,
            writer: Some(WriteBuffer::new(0, &[], chunk_bytes, |n| fs.alloc(n))),
            sealed: false,
            allocated: 0,
            scanned_epochs: None,
            aborts_indexed: None,
        }
    }

    /// Whether the segment holds no batch.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The offset relative to the base, as the indexes store it.
    pub fn relative(&self, offset: Offset) -> u32 {
        let rel = offset.0 - self.base.0;
        assert!(
            (0..=u32::MAX as i64).contains(&rel),
            "offset {offset} outside segment {}",
            self.base
        );
        rel as u32
    }

    /// Whether the next batch must go to a new segment: the file would
    /// exceed `segment_bytes`, the segment is older than `segment_ms`, or
    /// the batch's offsets would not fit the indexes' 32-bit relative offsets.
    pub fn should_roll(
        &self,
        header: &BatchHeader,
        start_offset: Offset,
        now: TimestampMs,
        segment_bytes: u64,
        segment_ms: i64,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        let too_big = self.size + header.total_bytes as u64 > segment_bytes;
        let too_old = self
            .first_append_ms
            .is_some_and(|first| now.0.saturating_sub(first.0) >= segment_ms);
        let last_relative = start_offset.0 + header.last_offset_delta as i64 - self.base.0;
        too_big || too_old || last_relative > u32::MAX as i64
    }

    /// Records a batch appended at the end of the segment (bookkeeping only;
    /// the bytes go to the writer separately).
    pub fn record_batch(
        &mut self,
        header: &BatchHeader,
        now: TimestampMs,
        index_interval_bytes: u64,
    ) {
        assert!(header.base_offset >= self.next_offset, "offsets must grow");
        let position = self.size;
        if self.bytes_since_index >= index_interval_bytes {
            self.index.push(OffsetEntry {
                relative_offset: self.relative(header.base_offset),
                position: u32::try_from(position).expect("segment positions fit 32 bits"),
            });
            self.time_index.push(TimeEntry {
                timestamp: self.max_timestamp.0.max(header.max_timestamp.0),
                relative_offset: self.relative(header.base_offset),
            });
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += header.total_bytes as u64;
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.base_offset;
        }
        self.first_append_ms.get_or_insert(now);
        self.size += header.total_bytes as u64;
        self.next_offset = header.next_offset();
    }

    /// The time index with the final largest timestamp recorded, as written at seal.
    pub fn final_time_index(&self) -> TimeIndex {
        let mut index = self.time_index.clone();
        if self.max_timestamp.0 >= 0 {
            index.push(TimeEntry {
                timestamp: self.max_timestamp.0,
                relative_offset: self.relative(self.offset_of_max_timestamp),
            });
        }
        index
    }

    /// The position a scan for `offset` may start at.
    pub fn scan_start(&self, offset: Offset) -> u64 {
        if offset <= self.base {
            return 0;
        }
        let rel = (offset.0 - self.base.0).min(u32::MAX as i64) as u32;
        self.index.floor(rel).map_or(0, |e| e.position as u64)
    }
}
