//! What loadgen puts in each message: who sent it, its sequence number
//! and when it was meant to be sent, then padding up to the message size.
//!
//! ```text
//! magic u16 = 0x4c47 ("LG") | producer u16 | sequence u64 | intended send time u64 (ns since the epoch) | padding
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

/// Bytes of the header; messages are at least this long.
pub const HEADER_BYTES: usize = 20;

const MAGIC: u16 = 0x4c47;

/// A decoded payload header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The producer (worker index).
    pub producer: u16,
    /// Its sequence number within that producer.
    pub sequence: u64,
    /// When it was meant to be sent (ns since the Unix epoch).
    pub intended_ns: u64,
}

/// Nanoseconds since the Unix epoch now.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos() as u64
}

/// A payload of `size` bytes (at least [`HEADER_BYTES`]) carrying `stamp`.
pub fn encode(stamp: Stamp, size: usize) -> Bytes {
    let mut payload = padded(size);
    write_stamp(&mut payload, stamp);
    Bytes::from(payload)
}

/// A payload's buffer: `size` bytes (at least [`HEADER_BYTES`]), padded,
/// to be stamped with [`write_stamp`] for each message (only its header
/// changes from one message to the next).
pub fn padded(size: usize) -> Vec<u8> {
    vec![b'.'; size.max(HEADER_BYTES)]
}

/// Writes `stamp` as the header of `payload` (at least [`HEADER_BYTES`]).
pub fn write_stamp(payload: &mut [u8], stamp: Stamp) {
    payload[..2].copy_from_slice(&MAGIC.to_be_bytes());
    payload[2..4].copy_from_slice(&stamp.producer.to_be_bytes());
    payload[4..12].copy_from_slice(&stamp.sequence.to_be_bytes());
    payload[12..HEADER_BYTES].copy_from_slice(&stamp.intended_ns.to_be_bytes());
}

/// The stamp of a loadgen payload (None for anything else).
pub fn decode(bytes: &[u8]) -> Option<Stamp> {
    if bytes.len() < HEADER_BYTES || u16::from_be_bytes([bytes[0], bytes[1]]) != MAGIC {
        return None;
    }
    Some(Stamp {
        producer: u16::from_be_bytes([bytes[2], bytes[3]]),
        sequence: u64::from_be_bytes(bytes[4..12].try_into().ok()?),
        intended_ns: u64::from_be_bytes(bytes[12..20].try_into().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_foreign_bytes_are_not_stamps() {
        let stamp = Stamp {
            producer: 3,
            sequence: 1 << 40,
            intended_ns: now_ns(),
        };
        let bytes = encode(stamp, 100);
        assert_eq!(bytes.len(), 100);
        assert_eq!(decode(&bytes), Some(stamp));
        assert_eq!(encode(stamp, 5).len(), HEADER_BYTES);
        // One buffer stamped again for each message.
        let mut payload = padded(100);
        for i in [0, 1, u64::MAX] {
            write_stamp(
                &mut payload,
                Stamp {
                    sequence: i,
                    ..stamp
                },
            );
            assert_eq!(decode(&payload).map(|s| s.sequence), Some(i));
            assert!(payload[HEADER_BYTES..].iter().all(|&b| b == b'.'));
        }
        assert_eq!(decode(b"hello"), None);
        assert_eq!(decode(&[0u8; 40]), None);
    }
}
