//! The storage crate's errors: one enum for the world (bad input, I/O), never panics.

use crate::types::Offset;

/// Why a record batch was refused. Nothing that fails these checks is ever stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than a RecordBatch v2 header.
    #[error("batch too short: {len} bytes, a v2 header needs {min}")]
    TooShort {
        /// Bytes present.
        len: usize,
        /// Bytes needed.
        min: usize,
    },
    /// Only magic 2 (RecordBatch v2) is stored.
    #[error("unsupported batch magic {0}, only 2 is accepted")]
    UnsupportedMagic(i8),
    /// batchLength disagrees with the bytes present.
    #[error("batchLength says {declared} bytes, {present} are present")]
    LengthMismatch {
        /// Total bytes the header declares (12 + batchLength).
        declared: i64,
        /// Bytes actually present.
        present: usize,
    },
    /// The batch is larger than the configured maximum.
    #[error("batch of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Batch size.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// CRC-32C over attributes..end does not match.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// recordsCount does not fit lastOffsetDelta.
    #[error("record count {count} does not match lastOffsetDelta {last_offset_delta}")]
    RecordCount {
        /// recordsCount field.
        count: i32,
        /// lastOffsetDelta field.
        last_offset_delta: i32,
    },
    /// A record inside the batch could not be parsed.
    #[error("malformed record: {0}")]
    MalformedRecord(&'static str),
    /// A producer id with a negative epoch or first sequence: the batch
    /// claims an idempotent producer but cannot be checked as one.
    #[error("producer {producer_id} sent epoch {epoch} and first sequence {first_seq}; neither may be negative")]
    InvalidProducerFields {
        /// The producer id.
        producer_id: i64,
        /// Its epoch.
        epoch: i16,
        /// The batch's first sequence.
        first_seq: i32,
    },
}

/// Errors of the partition log.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An invalid batch was offered for append.
    #[error("invalid batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// The requested offset lies outside [log start, log end].
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: Offset,
        /// The first offset still in the log.
        log_start: Offset,
        /// The next offset to be assigned.
        log_end: Offset,
    },
    /// A write or fdatasync failed earlier: the log acknowledges nothing more.
    #[error("log {dir} failed and acknowledges nothing more: {reason}")]
    LogFailed {
        /// The partition directory.
        dir: String,
        /// The first I/O error seen.
        reason: String,
    },
    /// An idempotent producer's batch out of sequence or from a fenced
    /// epoch: refused, nothing appended.
    #[error(transparent)]
    Sequence(#[from] crate::producers::SequenceError),
    /// A producer's batch against its transaction's state (outside its
    /// open transaction): refused, nothing appended.
    #[error(transparent)]
    Transaction(#[from] crate::transactions::TxnError),
    /// The caller's right to append (its leadership) ended while the
    /// batch waited for room: nothing appended.
    #[error("the append's leadership ended while it waited")]
    Fenced,
    /// An argument outside what the log allows (e.g. truncating below the log start).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An I/O error outside the write path (open, list, read).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl StorageError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> StorageError {
        StorageError::Io {
            context: context.into(),
            source,
        }
    }
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, StorageError>;
