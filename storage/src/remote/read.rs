//! Reading a remote segment, sans I/O: from bytes of the segment file
//! (starting at a batch boundary, as its offset index gives them), the
//! whole batches a fetch at an offset returns. Every batch served is
//! checked against its CRC-32C first: a damaged object is refused, never
//! handed to a consumer.

use crate::batch::{self, BatchHeader, CountRule, HEADER_BYTES};
use crate::error::BatchError;
use crate::types::Offset;

/// What the bytes at hand give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The batches to return: `bytes[start..end]`, whole batches, the
    /// first holding the offset asked (or past it).
    Batches {
        /// Where the first batch begins.
        start: usize,
        /// Where the last one ends.
        end: usize,
    },
    /// Not one whole batch to return yet: read until this many bytes from
    /// the start of what was given are at hand.
    NeedBytes(usize),
    /// The bytes hold nothing at or past the offset (the segment's end).
    Nothing,
}

/// Why remote bytes are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteReadError {
    /// A batch failed its checks (CRC, framing).
    #[error("damaged batch at position {position}: {error}")]
    Damaged {
        /// Its position in what was given.
        position: usize,
        /// What was wrong.
        error: BatchError,
    },
}

/// The batches of `bytes` (the segment's bytes from a batch boundary; at
/// the segment's end when `at_end`) to return for a fetch at `offset`: up
/// to `max_bytes`, at least one batch. Batches wholly below `offset` are
/// skipped; each returned one passes its CRC check.
pub fn take_batches(
    bytes: &[u8],
    at_end: bool,
    offset: Offset,
    max_bytes: usize,
    max_batch_bytes: usize,
) -> Result<Taken, RemoteReadError> {
    let mut position = 0;
    let mut start = None;
    while position < bytes.len() {
        let rest = &bytes[position..];
        let Some(len) = batch::stored_batch_len(rest) else {
            break;
        };
        let damaged = |error| RemoteReadError::Damaged { position, error };
        if len > max_batch_bytes || len < HEADER_BYTES {
            return Err(damaged(BatchError::TooLarge {
                len,
                max: max_batch_bytes,
            }));
        }
        if rest.len() < len {
            break;
        }
        let header: BatchHeader =
            batch::validate(&rest[..len], max_batch_bytes, CountRule::AtMost).map_err(damaged)?;
        if header.last_offset() >= offset {
            let first = *start.get_or_insert(position);
            if position > first && position + len - first > max_bytes {
                return Ok(Taken::Batches {
                    start: first,
                    end: position,
                });
            }
        }
        position += len;
    }
    match start {
        Some(start) => Ok(Taken::Batches {
            start,
            end: position,
        }),
        None if at_end && position == bytes.len() => Ok(Taken::Nothing),
        None if at_end => Err(RemoteReadError::Damaged {
            position,
            error: BatchError::TooShort {
                len: bytes.len() - position,
                min: HEADER_BYTES,
            },
        }),
        None => {
            let rest = &bytes[position..];
            let whole = batch::stored_batch_len(rest);
            Ok(Taken::NeedBytes(position + whole.unwrap_or(HEADER_BYTES)))
        }
    }
}

#[cfg(test)]
mod tests;
