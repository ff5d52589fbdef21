//! Record batches on the client side: encoding a producer's records into
//! one v2 batch (optionally compressed), and decoding fetched batches.

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

use crate::connection::ClientError;

/// A record as produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The key (routes the record to a partition), if any.
    pub key: Option<Bytes>,
    /// The value (None: a tombstone).
    pub value: Option<Bytes>,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    /// Headers, in order (the encoder keeps them in a map: a repeated
    /// name keeps its last value).
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// A record as consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its timestamp.
    pub timestamp: i64,
    /// Its key.
    pub key: Option<Bytes>,
    /// Its value.
    pub value: Option<Bytes>,
    /// Its headers, in order.
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Encodes records into one v2 batch (offsets from 0; the broker assigns them).
pub fn encode_batch(
    records: &[ProducerRecord],
    compression: Compression,
) -> Result<Bytes, ClientError> {
    encode_batch_as(records, compression, None)
}

/// An idempotent producer's identity on a batch: its id and epoch, and
/// the sequence of the batch's first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSequence {
    /// The producer id (InitProducerId).
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// The first record's sequence in its partition.
    pub first_sequence: i32,
}

/// `sequence + count`, wrapping past i32::MAX to 0 as Kafka's sequences do.
pub fn add_sequence(sequence: i32, count: i32) -> i32 {
    ((sequence as i64 + count as i64) % (i32::MAX as i64 + 1)) as i32
}

/// Record `i`'s sequence as kafka-protocol's encoder wants it: it keeps
/// records in one batch only while offset minus sequence stays the same,
/// and writes the first record's as the batch's base sequence. So an
/// idempotent batch numbers its records from `first` (wrapping at
/// i32::MAX, as Kafka's sequences do), and a plain one gives record i the
/// sequence i - 1: the header still says NO_SEQUENCE (-1), and the records
/// stay one batch (with NO_SEQUENCE on every record, each record became a
/// batch of its own: plain producers sent N one-record batches).
pub fn batch_sequence(idempotent: bool, first: i32, i: usize) -> i32 {
    if idempotent {
        add_sequence(first, i as i32)
    } else {
        NO_SEQUENCE.wrapping_add(i as i32)
    }
}

/// [`encode_batch`], as an idempotent producer's batch when `producer`
/// is given (record i gets sequence first + i).
pub fn encode_batch_as(
    records: &[ProducerRecord],
    compression: Compression,
    producer: Option<ProducerSequence>,
) -> Result<Bytes, ClientError> {
    encode_batch_in(records, compression, producer, false)
}

/// [`encode_batch_as`], marked as part of its producer's transaction when
/// `transactional`.
pub fn encode_batch_in(
    records: &[ProducerRecord],
    compression: Compression,
    producer: Option<ProducerSequence>,
    transactional: bool,
) -> Result<Bytes, ClientError> {
    let (producer_id, producer_epoch, first_sequence) = match producer {
        Some(p) => (p.producer_id, p.epoch, p.first_sequence),
        None => (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE),
    };
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: batch_sequence(producer.is_some(), first_sequence, i),
            timestamp: r.timestamp,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|(name, value)| (StrBytes::from_string(name.clone()), value.clone()))
                .collect(),
        })
        .collect();
    let mut out = match compression {
        Compression::None => BytesMut::with_capacity(encoded_size_about(&records)),
        _ => BytesMut::new(),
    };
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .map_err(|e| ClientError::Protocol(format!("encoding a batch: {e}")))?;
    Ok(out.freeze())
}

/// About the bytes a batch of `records` encodes to, uncompressed (a
/// little over: the buffer it is encoded in is made once).
fn encoded_size_about(records: &[Record]) -> usize {
    let bytes = |b: &Option<Bytes>| b.as_ref().map_or(0, |b| b.len());
    let records: usize = records
        .iter()
        .map(|r| {
            let headers: usize = r
                .headers
                .iter()
                .map(|(name, value)| name.len() + bytes(value) + 10)
                .sum();
            // Length, attributes, timestamp and offset deltas, key and
            // value lengths, header count: at most 5 varints of 5 and
            // 2 of 10 bytes.
            bytes(&r.key) + bytes(&r.value) + headers + 48
        })
        .sum();
    BATCH_HEADER_BYTES + records
}

/// Bytes of a batch header before its records.
const BATCH_HEADER_BYTES: usize = 61;
/// The fewest bytes an uncompressed record takes.
const RECORD_BYTES_MIN: usize = 7;
/// The most records a compressed byte is believed to hold (the decoder
/// reserves room for the count it reads, so the count is bounded first).
const RECORDS_PER_COMPRESSED_BYTE_MAX: usize = 64;

/// Records decoded from a fetch, and the offset after its last whole batch.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Records at or after the fetch offset.
    pub records: Vec<ConsumedRecord>,
    /// Where the next fetch starts (None: no whole batch came).
    pub next_offset: Option<i64>,
}

/// Decodes fetched batches, keeping records at or after `from` (a fetch
/// returns the whole batch containing the fetch offset). Batch counts
/// claiming more records than their bytes can hold are refused before the
/// decoder allocates for them.
pub fn decode_records(partition: i32, bytes: &Bytes, from: i64) -> Result<Decoded, ClientError> {
    decode_committed(partition, bytes, from, &[])
}

/// [`decode_records`] for a read_committed fetch: `aborted` lists the
/// aborted transactions the broker named, (producer id, first offset).
/// From its first offset on, a producer's transactional batches are left
/// out until its next marker (as librdkafka and the Java client filter).
pub fn decode_committed(
    partition: i32,
    bytes: &Bytes,
    from: i64,
    aborted: &[(i64, i64)],
) -> Result<Decoded, ClientError> {
    let mut aborted: Vec<(i64, i64)> = aborted.to_vec();
    aborted.sort_by_key(|(_, first)| std::cmp::Reverse(*first));
    let mut aborting = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut next_offset = None;
    let mut at = 0;
    while at + BATCH_HEADER_BYTES <= bytes.len() {
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        let total = 12 + length.max(0) as usize;
        if at + total > bytes.len() {
            break; // a partial batch at the end of a size-limited fetch
        }
        let batch = bytes.slice(at..at + total);
        let attributes = i16::from_be_bytes([batch[21], batch[22]]);
        let count = i32::from_be_bytes(batch[57..61].try_into().expect("4 bytes")).max(0) as usize;
        let body = total - BATCH_HEADER_BYTES;
        let bound = if attributes & 0x07 == 0 {
            body / RECORD_BYTES_MIN
        } else {
            body * RECORDS_PER_COMPRESSED_BYTE_MAX
        };
        if count > bound.max(1) {
            return Err(ClientError::Protocol(format!(
                "a batch claims {count} records in {body} bytes"
            )));
        }
        let control = attributes & 0x20 != 0;
        let transactional = attributes & 0x10 != 0;
        let base = i64::from_be_bytes(batch[0..8].try_into().expect("8 bytes"));
        let last_delta = i32::from_be_bytes(batch[23..27].try_into().expect("4 bytes"));
        let producer_id = i64::from_be_bytes(batch[43..51].try_into().expect("8 bytes"));
        next_offset = Some(base + last_delta as i64 + 1);
        // Aborted transactions that began at or before this batch.
        while aborted
            .last()
            .is_some_and(|(_, first)| *first <= base + last_delta as i64)
        {
            let (producer, _) = aborted.pop().expect("a last one");
            aborting.insert(producer);
        }
        let skipped = match (control, transactional) {
            // A marker ends its producer's transaction (an aborted one's
            // is an ABORT).
            (true, _) => {
                aborting.remove(&producer_id);
                true
            }
            (false, true) => aborting.contains(&producer_id),
            (false, false) => false,
        };
        if skipped {
            at += total;
            continue;
        }
        let set = RecordBatchDecoder::decode(&mut batch.clone())
            .map_err(|e| ClientError::Protocol(format!("decoding a batch: {e}")))?;
        {
            out.extend(
                set.records
                    .into_iter()
                    .filter(|r| r.offset >= from)
                    .map(|r| ConsumedRecord {
                        partition,
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: r.key,
                        value: r.value,
                        headers: (r.headers.into_iter())
                            .map(|(name, value)| (name.to_string(), value))
                            .collect(),
                    }),
            );
        }
        at += total;
    }
    Ok(Decoded {
        records: out,
        next_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: usize) -> Vec<ProducerRecord> {
        (0..n)
            .map(|i| ProducerRecord {
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(vec![b'v'; i % 50])),
                timestamp: 1_000 + i as i64,
                headers: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_plain_batch_is_one_batch_with_no_sequence() {
        let records: Vec<ProducerRecord> = (0..50)
            .map(|i| ProducerRecord {
                key: None,
                value: Some(Bytes::from(format!("v{i}"))),
                timestamp: 1,
                headers: Vec::new(),
            })
            .collect();
        for producer in [
            None,
            Some(ProducerSequence {
                producer_id: 3,
                epoch: 0,
                first_sequence: 7,
            }),
        ] {
            let bytes = encode_batch_as(&records, Compression::None, producer).unwrap();
            // One batch: its length covers everything.
            let length = i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
            assert_eq!(length + 12, bytes.len(), "{producer:?}");
            let base_sequence = i32::from_be_bytes(bytes[53..57].try_into().unwrap());
            assert_eq!(base_sequence, producer.map_or(-1, |p| p.first_sequence));
            let decoded = decode_records(0, &bytes, 0).unwrap();
            assert_eq!(decoded.records.len(), 50);
        }
    }

    #[test]
    fn read_committed_leaves_out_an_aborted_transactions_batches_only() {
        use bytes::BytesMut;
        let one = |producer: i64, sequence: i32, base: i64, transactional: bool| {
            let p = ProducerSequence {
                producer_id: producer,
                epoch: 0,
                first_sequence: sequence,
            };
            let mut batch = BytesMut::from(
                &encode_batch_in(&records(2), Compression::None, Some(p), transactional).unwrap()[..],
            );
            batch[0..8].copy_from_slice(&base.to_be_bytes());
            batch
        };
        // Producer 7 aborts at 0..2 (its marker at 4), producer 8 commits
        // at 2..4 around it, then 7 writes 5..7 in a new transaction.
        let mut log = BytesMut::new();
        log.extend_from_slice(&one(7, 0, 0, true));
        log.extend_from_slice(&one(8, 0, 2, true));
        let marker = one(7, 2, 4, true);
        let mut marker = marker;
        let attributes = i16::from_be_bytes([marker[21], marker[22]]) | 0x20;
        marker[21..23].copy_from_slice(&attributes.to_be_bytes());
        log.extend_from_slice(&marker);
        log.extend_from_slice(&one(7, 4, 5, true));
        let log = log.freeze();
        let all = decode_records(0, &log, 0).unwrap();
        assert_eq!(all.records.len(), 6, "read_uncommitted: every data record");
        let committed = decode_committed(0, &log, 0, &[(7, 0)]).unwrap();
        let offsets: Vec<i64> = committed.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [2, 3, 5, 6], "the aborted ones left out, no more");
        assert_eq!(committed.next_offset, Some(7));
    }

    #[test]
    fn batches_round_trip_with_every_compression() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = encode_batch(&records(30), compression).unwrap();
            let decoded = decode_records(2, &batch, 5).unwrap();
            assert_eq!(decoded.next_offset, Some(30));
            let decoded = decoded.records;
            assert_eq!(decoded.len(), 25, "{compression:?}");
            assert_eq!(decoded[0].offset, 5);
            assert_eq!(decoded[0].key.as_deref(), Some(&b"k5"[..]));
            assert_eq!(decoded[24].timestamp, 1_029);
        }
    }

    #[test]
    fn a_forged_record_count_is_refused_before_decoding() {
        let mut batch = encode_batch(&records(3), Compression::None)
            .unwrap()
            .to_vec();
        batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_records(0, &Bytes::from(batch), 0).is_err());
    }
}
