//! Transaction markers: the control batches a transaction coordinator has
//! each partition leader append to end a transaction there (KIP-98). One
//! record, uncompressed; its key is `[version i16 = 0][type i16]` (ABORT
//! 0, COMMIT 1), its value `[version i16 = 0][coordinator epoch i32]`;
//! the batch is transactional and control, carries the producer's id and
//! epoch, and no sequence (-1).

use bytes::BytesMut;

use crate::batch::{self, BatchHeader, RecordSpec, CONTROL_FLAG, TRANSACTIONAL_FLAG};
use crate::error::BatchError;
use crate::types::TimestampMs;

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// Its records are discarded by read_committed consumers.
    Abort,
    /// Its records become visible to read_committed consumers.
    Commit,
}

/// A transaction marker's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// Commit or abort.
    pub kind: MarkerKind,
    /// The epoch of the coordinator that wrote it: a marker from an older
    /// coordinator than one already seen is refused.
    pub coordinator_epoch: i32,
}

const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// Builds the marker batch of `producer_id`/`epoch` (offsets from 0; the
/// log gives it its offset).
pub fn build(producer_id: i64, epoch: i16, marker: Marker, timestamp: TimestampMs) -> BytesMut {
    let kind = match marker.kind {
        MarkerKind::Abort => ABORT,
        MarkerKind::Commit => COMMIT,
    };
    let mut key = 0i16.to_be_bytes().to_vec();
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = 0i16.to_be_bytes().to_vec();
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = RecordSpec {
        timestamp_delta: 0,
        key: Some(key),
        value: Some(value),
    };
    let mut built = batch::build(timestamp, &[record]);
    batch::stamp_producer(&mut built, producer_id, epoch, -1);
    batch::set_flags(&mut built, TRANSACTIONAL_FLAG | CONTROL_FLAG);
    built
}

/// The marker a control batch holds (`bytes`: the whole, validated batch).
pub fn parse(bytes: &[u8], header: BatchHeader) -> Result<Marker, BatchError> {
    let malformed = BatchError::MalformedRecord;
    if !header.is_control() || !header.is_transactional() || header.records_count != 1 {
        return Err(malformed("not a transaction marker"));
    }
    let record = batch::records(bytes, header)?
        .next()
        .ok_or(malformed("a marker without its record"))??;
    let (Some(key), Some(value)) = (record.key, record.value) else {
        return Err(malformed("a marker without key or value"));
    };
    if key.len() < 4 || value.len() < 6 {
        return Err(malformed("a marker key or value too short"));
    }
    let version = |b: &[u8]| i16::from_be_bytes([b[0], b[1]]);
    if version(key) < 0 || version(value) < 0 {
        return Err(malformed("a marker of a negative version"));
    }
    let kind = match i16::from_be_bytes([key[2], key[3]]) {
        ABORT => MarkerKind::Abort,
        COMMIT => MarkerKind::Commit,
        _ => return Err(malformed("a control record that is not COMMIT or ABORT")),
    };
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Ok(Marker {
        kind,
        coordinator_epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{validate, CountRule};

    #[test]
    fn a_built_marker_validates_and_parses_back() {
        for kind in [MarkerKind::Abort, MarkerKind::Commit] {
            let marker = Marker {
                kind,
                coordinator_epoch: 7,
            };
            let bytes = build(42, 3, marker, TimestampMs(1_000));
            assert_eq!(bytes.len(), 78, "Kafka's marker batch size");
            let header = validate(&bytes, 1 << 20, CountRule::Exact).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!(header.base_sequence, -1);
            assert!(header.producer().is_none(), "no sequence to check");
            assert_eq!(parse(&bytes, header).unwrap(), marker);
        }
    }

    #[test]
    fn data_batches_and_damaged_markers_are_not_markers() {
        let record = RecordSpec {
            timestamp_delta: 0,
            key: Some(vec![0, 0, 0, 1]),
            value: Some(vec![0; 6]),
        };
        let data = batch::build(TimestampMs(0), &[record]);
        let header = BatchHeader::parse(&data, 1 << 20).unwrap();
        assert!(parse(&data, header).is_err(), "not control");
        let marker = Marker {
            kind: MarkerKind::Commit,
            coordinator_epoch: 0,
        };
        let mut bytes = build(1, 0, marker, TimestampMs(0));
        // The type field of the key (after the record's length, attributes,
        // timestamp and offset deltas, key length and key version).
        let at = bytes.len() - 1 - 6 - 1 - 2;
        bytes[at] = 9;
        let header = BatchHeader::parse(&bytes, 1 << 20).unwrap();
        assert!(parse(&bytes, header).is_err(), "an unknown control type");
    }
}
