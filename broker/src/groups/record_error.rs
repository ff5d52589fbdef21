//! Why a record of `__consumer_offsets` was not understood (shared by
//! the classic groups' records and the consumer groups').

/// Why a stored record was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// It ends before a field does.
    #[error("record truncated")]
    Truncated,
    /// A version this broker does not read.
    #[error("unknown record version {0}")]
    Version(i16),
    /// A negative length, a string that is not UTF-8, bytes left over.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}
