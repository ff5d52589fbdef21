//! Tests of the v2 batch format: building, validation, patching, records, framing.

use super::*;

const MAX: usize = 1 << 20;

fn sample() -> BytesMut {
    build(
        TimestampMs(1_000),
        &[
            RecordSpec {
                timestamp_delta: 0,
                key: Some(b"k1".to_vec()),
                value: Some(b"hello".to_vec()),
            },
            RecordSpec {
                timestamp_delta: 5,
                key: None,
                value: None,
            },
        ],
    )
}

#[test]
fn a_built_batch_validates_and_iterates() {
    let batch = sample();
    let header = validate(&batch, MAX, CountRule::Exact).unwrap();
    assert_eq!(header.records_count, 2);
    assert_eq!(header.last_offset_delta, 1);
    assert_eq!(header.max_timestamp, TimestampMs(1_005));
    let recs: Vec<_> = records(&batch, header)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(recs[0].key, Some(&b"k1"[..]));
    assert_eq!(recs[0].value, Some(&b"hello"[..]));
    assert_eq!(recs[1].offset, Offset(1));
    assert_eq!(recs[1].timestamp, TimestampMs(1_005));
    assert_eq!(recs[1].value, None);
}

#[test]
fn patching_keeps_the_crc_valid() {
    let mut batch = sample();
    patch(&mut batch, Offset(42), LeaderEpoch(7));
    let header = validate(&batch, MAX, CountRule::Exact).unwrap();
    assert_eq!(header.base_offset, Offset(42));
    assert_eq!(header.leader_epoch, LeaderEpoch(7));
    assert_eq!(header.last_offset(), Offset(43));
}

#[test]
fn every_single_byte_flip_inside_the_crc_is_caught() {
    let batch = sample();
    for at in ATTRIBUTES_AT..batch.len() {
        let mut bad = batch.clone();
        bad[at] ^= 0x01;
        assert!(
            validate(&bad, MAX, CountRule::Exact).is_err(),
            "flip at {at}"
        );
    }
}

#[test]
fn truncated_and_oversized_inputs_are_typed_errors() {
    let batch = sample();
    for len in 0..batch.len() {
        assert!(validate(&batch[..len], MAX, CountRule::Exact).is_err());
    }
    assert!(matches!(
        validate(&batch, 64, CountRule::Exact),
        Err(BatchError::TooLarge { .. })
    ));
    let mut huge = batch.clone();
    huge[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        validate(&huge, MAX, CountRule::Exact),
        Err(BatchError::TooLarge { .. })
    ));
    let mut negative = batch.clone();
    negative[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(validate(&negative, MAX, CountRule::Exact).is_err());
    let mut magic = batch.clone();
    magic[MAGIC_AT] = 1;
    assert_eq!(
        validate(&magic, MAX, CountRule::Exact),
        Err(BatchError::UnsupportedMagic(1))
    );
}

#[test]
fn an_idempotent_batch_with_a_negative_epoch_or_sequence_is_refused() {
    let mut good = sample();
    stamp_producer(&mut good, 7, 0, 0);
    assert!(ValidBatch::new(good, MAX).is_ok());
    for (epoch, first_seq) in [(-1, 0), (0, -1), (-3, -7)] {
        let mut bad = sample();
        stamp_producer(&mut bad, 7, epoch, first_seq);
        assert_eq!(
            ValidBatch::new(bad, MAX).unwrap_err(),
            BatchError::InvalidProducerFields {
                producer_id: 7,
                epoch,
                first_seq
            }
        );
    }
    // Without a producer id the fields mean nothing (-1 as clients send).
    let mut plain = sample();
    stamp_producer(&mut plain, -1, -1, -1);
    assert!(ValidBatch::new(plain, MAX).is_ok());
}

#[test]
fn only_a_coordinators_transactional_batch_goes_without_a_sequence() {
    let mut written = sample();
    stamp_producer(&mut written, 7, 2, NO_SEQUENCE);
    set_flags(&mut written, TRANSACTIONAL_FLAG);
    assert!(
        ValidBatch::new(written.clone(), MAX).is_err(),
        "not from a client"
    );
    assert!(ValidBatch::from_coordinator(written, MAX).is_ok());
    let mut plain = sample();
    stamp_producer(&mut plain, 7, 2, NO_SEQUENCE);
    assert!(
        ValidBatch::from_coordinator(plain, MAX).is_err(),
        "not transactional"
    );
    let mut sequenced = sample();
    stamp_producer(&mut sequenced, 7, 2, 0);
    set_flags(&mut sequenced, TRANSACTIONAL_FLAG);
    assert!(ValidBatch::from_coordinator(sequenced, MAX).is_err());
}

#[test]
fn whole_batches_are_found_by_their_framing() {
    let one = sample();
    let mut three = one.clone();
    three.extend_from_slice(&one);
    three.extend_from_slice(&one);
    let len = one.len();
    assert_eq!(stored_batch_len(&three), Some(len));
    assert_eq!(stored_batch_len(&three[..11]), None);
    assert_eq!(whole_batches_within(&three, usize::MAX), 3 * len);
    assert_eq!(whole_batches_within(&three, 2 * len + 5), 2 * len);
    assert_eq!(whole_batches_within(&three, len - 1), 0);
    // A cut last batch is not whole.
    assert_eq!(
        whole_batches_within(&three[..3 * len - 1], usize::MAX),
        2 * len
    );
    // A zero or negative length is no batch.
    let mut bogus = one.to_vec();
    bogus[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&(-7i32).to_be_bytes());
    assert_eq!(whole_batches_within(&bogus, usize::MAX), 0);
}

#[test]
fn a_count_that_disagrees_with_the_delta_is_refused() {
    let mut encoded = Vec::new();
    encode_record(&mut encoded, 0, &RecordSpec::default());
    let batch = assemble(Offset(0), TimestampMs(0), TimestampMs(0), 3, 1, &encoded);
    assert!(matches!(
        validate(&batch, MAX, CountRule::Exact),
        Err(BatchError::RecordCount { .. })
    ));
    assert!(validate(&batch, MAX, CountRule::AtMost).is_ok());
}

#[test]
fn garbage_records_never_panic() {
    let header = validate(&sample(), MAX, CountRule::Exact).unwrap();
    let mut seed = 0x9e37_79b9_u64;
    for _ in 0..2_000 {
        let mut batch = sample();
        for _ in 0..3 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let at = HEADER_BYTES + (seed >> 33) as usize % (batch.len() - HEADER_BYTES);
            batch[at] = (seed >> 20) as u8;
        }
        let _ = records(&batch, header).unwrap().collect::<Vec<_>>();
    }
}

#[test]
fn split_stops_at_an_incomplete_batch() {
    let mut a = sample();
    patch(&mut a, Offset(0), LeaderEpoch(0));
    let mut b = sample();
    patch(&mut b, Offset(2), LeaderEpoch(0));
    let mut all = BytesMut::new();
    all.extend_from_slice(&a);
    all.extend_from_slice(&b[..b.len() - 1]);
    let parts = split_stored(&all.freeze(), MAX).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].0.base_offset, Offset(0));
}
