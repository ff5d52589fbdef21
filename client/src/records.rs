//! Record batches on the client side: encoding a producer's records into
//! one v2 batch (optionally compressed), and decoding fetched batches.

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use crate::batch_builder::{BatchBuilder, HEADER_BYTES as BATCH_HEADER_BYTES};
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
    /// Headers, in order (a name may repeat, as Kafka allows).
    pub headers: Vec<(String, Option<Bytes>)>,
}

impl ProducerRecord {
    /// The record as a [`RecordRef`].
    pub fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            timestamp: self.timestamp,
            headers: &self.headers,
        }
    }
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

pub use crate::batch_builder::{ProducerSequence, RecordRef};

/// `sequence + count`, wrapping past i32::MAX to 0 as Kafka's sequences do.
pub fn add_sequence(sequence: i32, count: i32) -> i32 {
    ((sequence as i64 + count as i64) % (i32::MAX as i64 + 1)) as i32
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
    if records.is_empty() {
        return Ok(Bytes::new()); // no batch: a batch holds a record at least
    }
    let bytes: usize = records.iter().map(ProducerRecord::bytes_about).sum();
    let mut batch = BatchBuilder::with_capacity(bytes);
    for r in records {
        batch.push(r.borrowed())?;
    }
    batch.seal(compression, producer, transactional)
}

impl ProducerRecord {
    /// About the bytes it takes in a batch (a little over, for room).
    pub fn bytes_about(&self) -> usize {
        let bytes = |b: &Option<Bytes>| b.as_ref().map_or(0, |b| b.len());
        let headers: usize = (self.headers.iter())
            .map(|(name, value)| name.len() + bytes(value) + 10)
            .sum();
        // Length, attributes, timestamp and offset deltas, key and value
        // lengths, header count: at most 5 varints of 5 and 2 of 10 bytes.
        bytes(&self.key) + bytes(&self.value) + headers + 48
    }
}

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
