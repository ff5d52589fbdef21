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
    /// A batch's offsets (which its CRC does not cover) are out of order
    /// or outside the segment.
    #[error("batch at position {position} holds offsets {base}..={last}, out of order or outside the segment")]
    Misplaced {
        /// Its position in what was given.
        position: usize,
        /// Its base offset.
        base: i64,
        /// Its last offset.
        last: i64,
    },
}

/// The batches of `bytes` (the segment's bytes from a batch boundary; at
/// the segment's end when `at_end`) to return for a fetch at `offset`: up
/// to `max_bytes`, at least one batch. Batches wholly below `offset` are
/// skipped; each one met passes its CRC check, and their offsets (which
/// the CRC does not cover) increase and end by the segment's last offset
/// `segment_last`.
pub fn take_batches(
    bytes: &[u8],
    at_end: bool,
    (offset, max_bytes): (Offset, usize),
    (segment_last, max_batch_bytes): (Offset, usize),
) -> Result<Taken, RemoteReadError> {
    let mut position = 0;
    let mut start = None;
    let mut next_expected: Option<Offset> = None;
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
        let in_order = next_expected.is_none_or(|next| header.base_offset >= next);
        if !in_order || header.last_offset() > segment_last {
            return Err(RemoteReadError::Misplaced {
                position,
                base: header.base_offset.0,
                last: header.last_offset().0,
            });
        }
        next_expected = Some(header.next_offset());
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
