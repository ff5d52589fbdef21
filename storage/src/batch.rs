//! Kafka RecordBatch v2: validation, in-place patching, record iteration.
//!
//! Layout (big-endian), from the Kafka protocol spec:
//! ```text
//! 0  baseOffset i64          | outside the CRC, patched by the broker
//! 8  batchLength i32         | bytes after this field
//! 12 partitionLeaderEpoch i32| outside the CRC, patched by the broker
//! 16 magic i8 (= 2)
//! 17 crc u32                 | CRC-32C of bytes 21..end
//! 21 attributes i16          | bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
//! 23 lastOffsetDelta i32
//! 27 baseTimestamp i64
//! 35 maxTimestamp i64
//! 43 producerId i64
//! 51 producerEpoch i16
//! 53 baseSequence i32
//! 57 recordsCount i32
//! 61 records...
//! ```

use bytes::{Bytes, BytesMut};

use crate::batch_crc;
use crate::error::BatchError;
use crate::frame_memory::FrameMemory;
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// Size of the fixed v2 header.
pub const HEADER_BYTES: usize = 61;
/// Bytes before and including batchLength: the total size is this plus batchLength.
pub const LOG_OVERHEAD_BYTES: usize = 12;
const OFFSET_AT: usize = 0;
const LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;
const COMPRESSION_MASK: i16 = 0x07;
/// Attribute bit of a transactional batch.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// Attribute bit of a control batch (a transaction marker).
pub const CONTROL_FLAG: i16 = 0x20;

/// How strictly the record count is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountRule {
    /// A producer's batch: exactly lastOffsetDelta + 1 records.
    Exact,
    /// A stored batch: compaction may have removed records, so at most lastOffsetDelta + 1.
    AtMost,
}

/// The fields of a v2 header the log needs, parsed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// First offset of the batch.
    pub base_offset: Offset,
    /// Total bytes of the batch, header included.
    pub total_bytes: usize,
    /// Epoch of the leader that appended it.
    pub leader_epoch: LeaderEpoch,
    /// Attribute bits.
    pub attributes: i16,
    /// Last offset minus base offset.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: TimestampMs,
    /// Largest timestamp in the batch.
    pub max_timestamp: TimestampMs,
    /// Number of records.
    pub records_count: i32,
    /// The idempotent producer that wrote it (-1: none).
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Sequence of the first record.
    pub base_sequence: i32,
}

impl BatchHeader {
    /// The last offset the batch covers.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(self.last_offset_delta as i64)
    }

    /// The offset after the batch.
    pub fn next_offset(&self) -> Offset {
        self.last_offset().plus(1)
    }

    /// Whether the records are compressed (then they are not iterated here).
    pub fn is_compressed(&self) -> bool {
        self.attributes & COMPRESSION_MASK != 0
    }

    /// Whether this is a transaction control batch.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }

    /// Whether a transactional producer wrote it (markers included).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    /// The idempotent producer's part, if an idempotent producer wrote it.
    pub fn producer(&self) -> Option<crate::producers::ProducerBatch> {
        (self.producer_id >= 0 && !self.is_control()).then_some(crate::producers::ProducerBatch {
            producer_id: self.producer_id,
            epoch: self.producer_epoch,
            first_seq: self.base_sequence,
            offset_delta: self.last_offset_delta,
        })
    }

    /// Parses the header at the start of `buf` without checking the CRC.
    ///
    /// Checks what can be checked without the body: magic, a sane length and
    /// delta. Used by scans to find batch boundaries.
    pub fn parse(buf: &[u8], max_batch_bytes: usize) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_BYTES {
            return Err(BatchError::TooShort {
                len: buf.len(),
                min: HEADER_BYTES,
            });
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        let declared = LOG_OVERHEAD_BYTES as i64 + read_i32(buf, LENGTH_AT) as i64;
        if declared < HEADER_BYTES as i64 {
            return Err(BatchError::LengthMismatch {
                declared,
                present: buf.len(),
            });
        }
        if declared as u64 > max_batch_bytes as u64 {
            return Err(BatchError::TooLarge {
                len: declared as usize,
                max: max_batch_bytes,
            });
        }
        let last_offset_delta = read_i32(buf, LAST_OFFSET_DELTA_AT);
        let records_count = read_i32(buf, RECORDS_COUNT_AT);
        if last_offset_delta < 0 || records_count < 0 {
            return Err(BatchError::RecordCount {
                count: records_count,
                last_offset_delta,
            });
        }
        Ok(BatchHeader {
            base_offset: Offset(read_i64(buf, OFFSET_AT)),
            total_bytes: declared as usize,
            leader_epoch: LeaderEpoch(read_i32(buf, LEADER_EPOCH_AT)),
            attributes: read_i16(buf, ATTRIBUTES_AT),
            last_offset_delta,
            base_timestamp: TimestampMs(read_i64(buf, BASE_TIMESTAMP_AT)),
            max_timestamp: TimestampMs(read_i64(buf, MAX_TIMESTAMP_AT)),
            records_count,
            producer_id: read_i64(buf, PRODUCER_ID_AT),
            producer_epoch: read_i16(buf, PRODUCER_EPOCH_AT),
            base_sequence: read_i32(buf, BASE_SEQUENCE_AT),
        })
    }
}

/// Validates one whole batch: `buf` must hold exactly one batch.
///
/// Checks magic, batchLength against the bytes present, the size bound,
/// CRC-32C over attributes..end and the record count against lastOffsetDelta.
pub fn validate(
    buf: &[u8],
    max_batch_bytes: usize,
    rule: CountRule,
) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf, max_batch_bytes)?;
    if header.total_bytes != buf.len() {
        return Err(BatchError::LengthMismatch {
            declared: header.total_bytes as i64,
            present: buf.len(),
        });
    }
    let stored = u32::from_be_bytes(buf[CRC_AT..CRC_AT + 4].try_into().expect("4 bytes"));
    let computed = batch_crc::crc32c(&buf[ATTRIBUTES_AT..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    let fits = match rule {
        CountRule::Exact => header.records_count as i64 == header.last_offset_delta as i64 + 1,
        CountRule::AtMost => header.records_count as i64 <= header.last_offset_delta as i64 + 1,
    };
    if !fits {
        return Err(BatchError::RecordCount {
            count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(header)
}

pub use crate::producers::NO_SEQUENCE;

/// A producer's batch that passed [`validate`] (`CountRule::Exact`), with
/// its parsed header: proof for [`crate::Log::append_valid`], so a caller
/// that must check every batch of a request before appending any does not
/// pay for the CRC twice.
#[derive(Debug)]
pub struct ValidBatch {
    bytes: BytesMut,
    header: BatchHeader,
    /// The allocation `bytes` is a slice of, when it keeps one alive.
    frame: Option<FrameMemory>,
}

impl ValidBatch {
    /// Validates `bytes` as exactly one producer batch of at most
    /// `max_batch_bytes`; an idempotent one must carry a usable epoch and
    /// sequence (as Kafka refuses them, INVALID_RECORD).
    pub fn new(bytes: BytesMut, max_batch_bytes: usize) -> Result<ValidBatch, BatchError> {
        let header = validate(&bytes, max_batch_bytes, CountRule::Exact)?;
        if let Some(p) = header.producer() {
            if p.epoch < 0 || p.first_seq < 0 {
                return Err(BatchError::InvalidProducerFields {
                    producer_id: p.producer_id,
                    epoch: p.epoch,
                    first_seq: p.first_seq,
                });
            }
        }
        Ok(ValidBatch {
            bytes,
            header,
            frame: None,
        })
    }

    /// The batch, as a slice of `frame` (the request it arrived in) that
    /// keeps it alive: the log's cache charges that memory
    /// (`frame_memory`).
    pub fn in_frame(self, frame: FrameMemory) -> ValidBatch {
        ValidBatch {
            frame: Some(frame),
            ..self
        }
    }

    /// Validates a batch a coordinator writes for a producer: a
    /// transactional batch with its producer's id and epoch but no
    /// sequence ([`NO_SEQUENCE`], as Kafka's TxnOffsetCommit batches),
    /// which [`ValidBatch::new`] refuses from clients. Its producer's epoch
    /// is checked on append; no sequence is.
    pub fn from_coordinator(
        bytes: BytesMut,
        max_batch_bytes: usize,
    ) -> Result<ValidBatch, BatchError> {
        let header = validate(&bytes, max_batch_bytes, CountRule::Exact)?;
        if let Some(p) = header.producer() {
            if p.epoch < 0 || p.first_seq != NO_SEQUENCE || !header.is_transactional() {
                return Err(BatchError::InvalidProducerFields {
                    producer_id: p.producer_id,
                    epoch: p.epoch,
                    first_seq: p.first_seq,
                });
            }
        }
        Ok(ValidBatch {
            bytes,
            header,
            frame: None,
        })
    }

    /// The allocation it keeps alive, if it is a slice of one.
    pub fn frame(&self) -> Option<FrameMemory> {
        self.frame
    }

    /// Its header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Its bytes, as they will be stored (before the log stamps offsets).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether it is empty (never: a valid batch has a header).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn into_parts(self) -> (BytesMut, BatchHeader, Option<FrameMemory>) {
        (self.bytes, self.header, self.frame)
    }
}

/// Writes the broker-assigned base offset and leader epoch into a batch.
///
/// Both fields lie outside the CRC, so the checksum stays valid.
pub fn patch(buf: &mut BytesMut, base_offset: Offset, epoch: LeaderEpoch) {
    assert!(buf.len() >= HEADER_BYTES, "patching a validated batch");
    buf[OFFSET_AT..OFFSET_AT + 8].copy_from_slice(&base_offset.0.to_be_bytes());
    buf[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.0.to_be_bytes());
}

/// One record of an uncompressed batch, borrowed from the batch bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Absolute offset.
    pub offset: Offset,
    /// Absolute timestamp.
    pub timestamp: TimestampMs,
    /// Key, or None for a null key.
    pub key: Option<&'a [u8]>,
    /// Value, or None for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The record's whole encoding (length prefix included), to copy it verbatim.
    pub raw: &'a [u8],
}

/// Iterates the records of an uncompressed, validated batch.
pub struct Records<'a> {
    header: BatchHeader,
    buf: &'a [u8],
    pos: usize,
    remaining: i32,
}

/// Iterates the records of `batch`; compressed batches yield an error.
pub fn records(batch: &[u8], header: BatchHeader) -> Result<Records<'_>, BatchError> {
    if header.is_compressed() {
        return Err(BatchError::MalformedRecord(
            "compressed records are not iterated",
        ));
    }
    Ok(Records {
        header,
        buf: batch,
        pos: HEADER_BYTES,
        remaining: header.records_count,
    })
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining <= 0 {
            return None;
        }
        self.remaining -= 1;
        let result = self.parse_one();
        if result.is_err() {
            self.remaining = 0;
        }
        Some(result)
    }
}

impl<'a> Records<'a> {
    fn parse_one(&mut self) -> Result<Record<'a>, BatchError> {
        let start = self.pos;
        let mut cur = Cursor {
            buf: self.buf,
            pos: start,
        };
        let length = cur.varint()?;
        if length < 0 || length as usize > cur.remaining() {
            return Err(BatchError::MalformedRecord("record length out of bounds"));
        }
        let end = cur.pos + length as usize;
        let mut body = Cursor {
            buf: &self.buf[..end],
            pos: cur.pos,
        };
        body.take(1)?; // attributes, unused in v2
        let timestamp_delta = body.varlong()?;
        let offset_delta = body.varint()?;
        let key = body.bytes_or_null()?;
        let value = body.bytes_or_null()?;
        let headers = body.varint()?;
        if headers < 0 {
            return Err(BatchError::MalformedRecord("negative header count"));
        }
        for _ in 0..headers {
            body.bytes_or_null()?;
            body.bytes_or_null()?;
        }
        if body.pos != end {
            return Err(BatchError::MalformedRecord(
                "record length disagrees with fields",
            ));
        }
        if offset_delta < 0 || offset_delta > self.header.last_offset_delta {
            return Err(BatchError::MalformedRecord(
                "offset delta outside the batch",
            ));
        }
        self.pos = end;
        Ok(Record {
            offset: self.header.base_offset.plus(offset_delta as i64),
            timestamp: TimestampMs(self.header.base_timestamp.0.wrapping_add(timestamp_delta)),
            key,
            value,
            raw: &self.buf[start..end],
        })
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        if n > self.remaining() {
            return Err(BatchError::MalformedRecord("field runs past the record"));
        }
        let slice = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let mut raw: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = self.take(1)?[0];
            raw |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(BatchError::MalformedRecord("varint longer than 10 bytes"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| BatchError::MalformedRecord("varint out of i32 range"))
    }

    fn bytes_or_null(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        self.take(len as usize).map(Some)
    }
}

/// Appends a zig-zag varint (Kafka's record encoding) to `out`.
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// A record to encode into a batch (tests, compaction, load generators).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSpec {
    /// Milliseconds after the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Key, or None.
    pub key: Option<Vec<u8>>,
    /// Value, or None for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Encodes one record with the given offset delta.
pub fn encode_record(out: &mut Vec<u8>, offset_delta: i32, record: &RecordSpec) {
    let mut body = Vec::with_capacity(16 + record.value.as_ref().map_or(0, Vec::len));
    body.push(0); // attributes
    put_varlong(&mut body, record.timestamp_delta);
    put_varlong(&mut body, offset_delta as i64);
    put_bytes_or_null(&mut body, record.key.as_deref());
    put_bytes_or_null(&mut body, record.value.as_deref());
    put_varlong(&mut body, 0); // no headers
    put_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

fn put_bytes_or_null(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Builds an uncompressed v2 batch from encoded records, with a correct CRC.
///
/// `records` is the concatenation of `records_count` encoded records.
pub fn assemble(
    base_offset: Offset,
    base_timestamp: TimestampMs,
    max_timestamp: TimestampMs,
    last_offset_delta: i32,
    records_count: i32,
    records: &[u8],
) -> BytesMut {
    let total = HEADER_BYTES + records.len();
    let mut buf = BytesMut::zeroed(total);
    buf[OFFSET_AT..OFFSET_AT + 8].copy_from_slice(&base_offset.0.to_be_bytes());
    let length = (total - LOG_OVERHEAD_BYTES) as i32;
    buf[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    buf[MAGIC_AT] = 2;
    buf[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&last_offset_delta.to_be_bytes());
    buf[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&base_timestamp.0.to_be_bytes());
    buf[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.0.to_be_bytes());
    buf[43..51].copy_from_slice(&(-1i64).to_be_bytes()); // producerId: none
    buf[51..53].copy_from_slice(&(-1i16).to_be_bytes()); // producerEpoch: none
    buf[53..57].copy_from_slice(&(-1i32).to_be_bytes()); // baseSequence: none
    buf[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&records_count.to_be_bytes());
    buf[HEADER_BYTES..].copy_from_slice(records);
    seal_crc(&mut buf);
    buf
}

/// Rebuilds a stored batch keeping only some of its records (compaction).
///
/// Every header field is kept (base offset, lastOffsetDelta, timestamps,
/// producer fields, epoch), so offsets never move; batchLength,
/// recordsCount and the CRC are recomputed.
pub fn rebuild(original: &[u8], kept_records: &[&[u8]]) -> BytesMut {
    let body: usize = kept_records.iter().map(|r| r.len()).sum();
    let mut buf = BytesMut::with_capacity(HEADER_BYTES + body);
    buf.extend_from_slice(&original[..HEADER_BYTES]);
    for record in kept_records {
        buf.extend_from_slice(record);
    }
    let length = (buf.len() - LOG_OVERHEAD_BYTES) as i32;
    buf[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    let count = kept_records.len() as i32;
    buf[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
    seal_crc(&mut buf);
    buf
}

/// Marks a batch as an idempotent producer's (producer id, epoch, first
/// sequence) and recomputes its CRC (the fields lie inside it).
pub fn stamp_producer(batch: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    assert!(batch.len() >= HEADER_BYTES, "a whole batch header");
    batch[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&epoch.to_be_bytes());
    batch[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&base_sequence.to_be_bytes());
    seal_crc(batch);
}

/// Writes the CRC of a batch's body (attributes to the end) into its header.
fn seal_crc(batch: &mut [u8]) {
    let crc = batch_crc::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Sets attribute `flags` of a batch and recomputes its CRC.
pub fn set_flags(batch: &mut [u8], flags: i16) {
    assert!(batch.len() >= HEADER_BYTES, "a whole batch header");
    let attributes = read_i16(batch, ATTRIBUTES_AT) | flags;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    seal_crc(batch);
}

/// Builds an uncompressed batch of the given records (offsets from 0, as a producer sends).
pub fn build(base_timestamp: TimestampMs, records: &[RecordSpec]) -> BytesMut {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let mut encoded = Vec::new();
    for (delta, record) in records.iter().enumerate() {
        encode_record(&mut encoded, delta as i32, record);
    }
    let max_delta = records.iter().map(|r| r.timestamp_delta).max().unwrap_or(0);
    let count = records.len() as i32;
    assemble(
        Offset(0),
        base_timestamp,
        TimestampMs(base_timestamp.0 + max_delta),
        count - 1,
        count,
        &encoded,
    )
}

/// Splits a buffer of concatenated stored batches into whole batches.
///
/// Stops (returning what came before) at the first incomplete batch; an
/// unparsable header is an error.
pub fn split_stored(
    bytes: &Bytes,
    max_batch_bytes: usize,
) -> Result<Vec<(BatchHeader, Bytes)>, BatchError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while bytes.len() - pos >= HEADER_BYTES {
        let header = BatchHeader::parse(&bytes[pos..], max_batch_bytes)?;
        if pos + header.total_bytes > bytes.len() {
            break;
        }
        out.push((header, bytes.slice(pos..pos + header.total_bytes)));
        pos += header.total_bytes;
    }
    Ok(out)
}

/// What a scan of whole stored batches for a timestamp found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampScan {
    /// The first record stamped at or after it (for a compressed batch,
    /// whose records are not decompressed, the batch's base offset and
    /// largest timestamp).
    Found(Offset, TimestampMs),
    /// None in these batches; the offset after the last one, if any.
    NotIn {
        /// Where the next batch begins.
        next: Option<Offset>,
    },
}

/// The first record stamped at or after `timestamp` in `bytes` (whole
/// stored batches): ListOffsets by timestamp, on local and remote logs.
pub fn first_stamped_at_or_after(
    bytes: &Bytes,
    timestamp: TimestampMs,
    max_batch_bytes: usize,
) -> Result<TimestampScan, BatchError> {
    let mut next = None;
    for (header, batch) in split_stored(bytes, max_batch_bytes)? {
        next = Some(header.next_offset());
        if header.max_timestamp < timestamp {
            continue;
        }
        if header.is_compressed() {
            return Ok(TimestampScan::Found(
                header.base_offset,
                header.max_timestamp,
            ));
        }
        for record in records(&batch, header)? {
            let record = record?;
            if record.timestamp >= timestamp {
                return Ok(TimestampScan::Found(record.offset, record.timestamp));
            }
        }
    }
    Ok(TimestampScan::NotIn { next })
}

/// The length of the stored batch at the start of `bytes` by its framing
/// (`[base offset i64][batchLength i32]`), if that much is there to say.
pub fn stored_batch_len(bytes: &[u8]) -> Option<usize> {
    (bytes.len() >= LOG_OVERHEAD_BYTES)
        .then(|| LOG_OVERHEAD_BYTES + read_i32(bytes, LENGTH_AT).max(0) as usize)
}

/// The length of the longest prefix of `bytes` made of whole stored
/// batches and at most `limit` long (what a response may carry).
pub fn whole_batches_within(bytes: &[u8], limit: usize) -> usize {
    let limit = limit.min(bytes.len());
    let mut at = 0;
    while let Some(len) = stored_batch_len(&bytes[at..]) {
        if len <= LOG_OVERHEAD_BYTES || at + len > limit {
            break;
        }
        at += len;
    }
    at
}

fn read_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(buf[at..at + 2].try_into().expect("2 bytes"))
}

fn read_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn read_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests;
