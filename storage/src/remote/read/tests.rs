use super::*;
use crate::batch::{build, RecordSpec};
use crate::types::TimestampMs;

/// A stored batch of `count` records at `base`, about `value_bytes` each.
fn stored(base: i64, count: usize, value_bytes: usize) -> Vec<u8> {
    let specs: Vec<RecordSpec> = (0..count)
        .map(|i| RecordSpec {
            timestamp_delta: i as i64,
            key: None,
            value: Some(vec![b'v'; value_bytes]),
        })
        .collect();
    let mut batch = build(TimestampMs(1_000), &specs);
    batch[..8].copy_from_slice(&base.to_be_bytes());
    batch.to_vec()
}

/// Batches of 10 records at 0, 10, 20, 30.
fn segment() -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for base in [0, 10, 20, 30] {
        starts.push(bytes.len());
        bytes.extend(stored(base, 10, 100));
    }
    (bytes, starts)
}

const MAX_BATCH: usize = 1 << 20;

#[test]
fn a_read_starts_at_the_batch_holding_the_offset_and_keeps_to_max_bytes() {
    let (bytes, starts) = segment();
    let batch = starts[1];
    assert_eq!(
        take_batches(
            &bytes,
            true,
            (Offset(15), batch * 2),
            (Offset(39), MAX_BATCH)
        ),
        Ok(Taken::Batches {
            start: starts[1],
            end: starts[3]
        })
    );
    // At least one batch, whatever max_bytes says.
    assert_eq!(
        take_batches(&bytes, true, (Offset(0), 1), (Offset(39), MAX_BATCH)),
        Ok(Taken::Batches {
            start: 0,
            end: starts[1]
        })
    );
    assert_eq!(
        take_batches(&bytes, true, (Offset(40), 1 << 20), (Offset(39), MAX_BATCH)),
        Ok(Taken::Nothing),
        "past the segment's last offset"
    );
}

#[test]
fn a_batch_cut_by_the_bytes_at_hand_asks_for_the_rest() {
    let (bytes, starts) = segment();
    let cut = &bytes[..starts[1] + 30];
    assert_eq!(
        take_batches(cut, false, (Offset(12), 1 << 20), (Offset(39), MAX_BATCH)),
        Ok(Taken::NeedBytes(starts[2])),
        "the batch holding 12 ends where the third begins"
    );
    assert_eq!(
        take_batches(
            &bytes[..5],
            false,
            (Offset(0), 1 << 20),
            (Offset(39), MAX_BATCH)
        ),
        Ok(Taken::NeedBytes(crate::batch::HEADER_BYTES))
    );
    // Whole batches found before the cut are returned; the rest is the
    // next fetch's.
    assert_eq!(
        take_batches(cut, false, (Offset(0), 1 << 20), (Offset(39), MAX_BATCH)),
        Ok(Taken::Batches {
            start: 0,
            end: starts[1]
        })
    );
}

#[test]
fn a_damaged_batch_is_refused_and_never_returned() {
    let (mut bytes, starts) = segment();
    let inside = starts[2] + 80;
    bytes[inside] ^= 0x40;
    let refused = take_batches(&bytes, true, (Offset(0), 1 << 20), (Offset(39), MAX_BATCH));
    assert!(
        matches!(refused, Err(RemoteReadError::Damaged { position, error: BatchError::CrcMismatch { .. } }) if position == starts[2]),
        "{refused:?}"
    );
    // A forged length is refused before anything is allocated for it.
    let mut forged = segment().0;
    forged[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(take_batches(
        &forged,
        false,
        (Offset(0), 1 << 20),
        (Offset(39), MAX_BATCH)
    )
    .is_err());
    // A segment ending in a partial batch is damaged.
    let cut = &segment().0[..starts[1] + 30];
    assert!(take_batches(cut, true, (Offset(12), 1 << 20), (Offset(39), MAX_BATCH)).is_err());
}

#[test]
fn offsets_out_of_order_or_past_the_segment_are_refused() {
    let (bytes, starts) = segment();
    // The base offset is outside the CRC: a flipped one passes it.
    let mut swapped = bytes.clone();
    swapped[starts[2]..starts[2] + 8].copy_from_slice(&5i64.to_be_bytes());
    let refused = take_batches(
        &swapped,
        true,
        (Offset(0), 1 << 20),
        (Offset(39), MAX_BATCH),
    );
    assert!(
        matches!(refused, Err(RemoteReadError::Misplaced { position, base: 5, .. }) if position == starts[2]),
        "{refused:?}"
    );
    let past = take_batches(&bytes, true, (Offset(0), 1 << 20), (Offset(35), MAX_BATCH));
    assert!(
        matches!(past, Err(RemoteReadError::Misplaced { base: 30, .. })),
        "{past:?}"
    );
}
