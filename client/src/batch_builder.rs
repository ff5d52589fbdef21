//! A v2 record batch built as its records come: each record is encoded
//! into the batch's one buffer when it is added, behind room left for
//! the batch header, which is written when the batch is sealed for
//! sending. So a producer holds one buffer per batch rather than every
//! record with its key and value buffers, and a batch is encoded once,
//! not again at each send.
//!
//! The format is Kafka's (message format v2): a 61-byte header, then per
//! record its length, attributes, timestamp and offset deltas, key,
//! value and headers, lengths and deltas as zigzag varints.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
use kafka_protocol::records::{
    Compression, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

use crate::connection::ClientError;

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

/// A record's headers, in order (a name may repeat, as Kafka allows).
pub type Headers = [(String, Option<Bytes>)];

/// A record to produce, borrowed: its bytes are copied into its batch
/// when it is queued, so the caller's buffers are free again at once.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    /// The key (routes the record to a partition), if any.
    pub key: Option<&'a [u8]>,
    /// The value (None: a tombstone).
    pub value: Option<&'a [u8]>,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    /// Headers, in order.
    pub headers: &'a Headers,
}

/// Bytes of a batch header before its records.
pub const HEADER_BYTES: usize = 61;

// Where the header's fields sit (Kafka's DefaultRecordBatch).
const LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// The CRC covers the batch from its attributes on.
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const COUNT_AT: usize = 57;

/// The attributes bit of a transactional batch.
const TRANSACTIONAL: i16 = 1 << 4;

/// A batch's records, encoded as they are added.
#[derive(Debug)]
pub struct BatchBuilder {
    /// The header's room, then the records.
    buf: BytesMut,
    count: i32,
    /// The first record's timestamp: the others' are deltas from it.
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// An empty batch with room for `bytes` of records before it grows.
    pub fn with_capacity(bytes: usize) -> BatchBuilder {
        let mut buf = BytesMut::with_capacity(HEADER_BYTES + bytes);
        buf.resize(HEADER_BYTES, 0);
        BatchBuilder {
            buf,
            count: 0,
            base_timestamp: 0,
            max_timestamp: i64::MIN,
        }
    }

    /// Records added so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The batch's bytes so far, header included (uncompressed).
    pub fn encoded_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Encodes a record at the batch's end; its offset delta is the
    /// number of records before it.
    pub fn push(&mut self, record: RecordRef<'_>) -> Result<(), ClientError> {
        let RecordRef {
            key,
            value,
            timestamp,
            headers,
        } = record;
        if self.count == i32::MAX {
            return Err(ClientError::Protocol(
                "more than i32::MAX records in a batch".into(),
            ));
        }
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        let timestamp_delta = timestamp.wrapping_sub(self.base_timestamp);
        let offset_delta = self.count;
        let fields = (key, value, headers);
        let body = record_body_bytes(fields, timestamp_delta, offset_delta)?;
        let buf = &mut self.buf;
        buf.reserve(body + 5);
        put_varint(buf, body as i64);
        buf.put_i8(0); // record attributes: none are defined
        put_varint(buf, timestamp_delta);
        put_varint(buf, offset_delta as i64);
        put_optional_bytes(buf, key);
        put_optional_bytes(buf, value);
        put_varint(buf, headers.len() as i64);
        for (name, value) in headers {
            put_optional_bytes(buf, Some(name.as_bytes()));
            put_optional_bytes(buf, value.as_deref());
        }
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        Ok(())
    }

    /// The batch as sent: its header written (offsets from 0: the broker
    /// assigns them), its records compressed if asked, its CRC computed.
    pub fn seal(
        self,
        compression: Compression,
        producer: Option<ProducerSequence>,
        transactional: bool,
    ) -> Result<Bytes, ClientError> {
        if self.count == 0 {
            return Err(ClientError::Protocol(
                "a batch holds a record at least".into(),
            ));
        }
        let mut batch = match compression {
            Compression::None => self.buf,
            _ => compressed(&self.buf[HEADER_BYTES..], compression)?,
        };
        let length = i32::try_from(batch.len() - 12)
            .map_err(|_| ClientError::Protocol("a batch over 2 GiB".into()))?;
        let mut attributes = compression as i16;
        if transactional {
            attributes |= TRANSACTIONAL;
        }
        let header = &mut batch[..HEADER_BYTES];
        header[..LENGTH_AT].copy_from_slice(&0i64.to_be_bytes());
        header[LENGTH_AT..LEADER_EPOCH_AT].copy_from_slice(&length.to_be_bytes());
        header[LEADER_EPOCH_AT..MAGIC_AT].copy_from_slice(&NO_PARTITION_LEADER_EPOCH.to_be_bytes());
        header[MAGIC_AT] = 2;
        header[ATTRIBUTES_AT..LAST_OFFSET_DELTA_AT].copy_from_slice(&attributes.to_be_bytes());
        header[LAST_OFFSET_DELTA_AT..BASE_TIMESTAMP_AT]
            .copy_from_slice(&(self.count - 1).to_be_bytes());
        header[BASE_TIMESTAMP_AT..MAX_TIMESTAMP_AT]
            .copy_from_slice(&self.base_timestamp.to_be_bytes());
        header[MAX_TIMESTAMP_AT..PRODUCER_ID_AT].copy_from_slice(&self.max_timestamp.to_be_bytes());
        header[COUNT_AT..HEADER_BYTES].copy_from_slice(&self.count.to_be_bytes());
        put_producer(&mut batch, producer);
        Ok(batch.freeze())
    }
}

/// A sealed batch under another producer identity (a retry after the
/// producer's numbering started over): a copy with the producer's fields
/// and the CRC written again. `sealed` is what [`BatchBuilder::seal`] made.
pub(crate) fn renumbered(sealed: &Bytes, producer: Option<ProducerSequence>) -> Bytes {
    let mut batch = BytesMut::from(&sealed[..]);
    put_producer(&mut batch, producer);
    batch.freeze()
}

/// The producer identity a sealed batch carries (None: not idempotent,
/// or too short to be a batch).
pub(crate) fn producer_of(sealed: &[u8]) -> Option<ProducerSequence> {
    if sealed.len() < HEADER_BYTES {
        return None;
    }
    let field = |at: usize, n: usize| &sealed[at..at + n];
    let producer_id = i64::from_be_bytes(field(PRODUCER_ID_AT, 8).try_into().ok()?);
    let epoch = i16::from_be_bytes(field(PRODUCER_EPOCH_AT, 2).try_into().ok()?);
    let first_sequence = i32::from_be_bytes(field(BASE_SEQUENCE_AT, 4).try_into().ok()?);
    (producer_id != NO_PRODUCER_ID).then_some(ProducerSequence {
        producer_id,
        epoch,
        first_sequence,
    })
}

/// Writes the producer's fields (or "none") and then the CRC, which
/// covers them.
fn put_producer(batch: &mut [u8], producer: Option<ProducerSequence>) {
    let (producer_id, epoch, sequence) = match producer {
        Some(p) => (p.producer_id, p.epoch, p.first_sequence),
        None => (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE),
    };
    batch[PRODUCER_ID_AT..PRODUCER_EPOCH_AT].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH_AT..BASE_SEQUENCE_AT].copy_from_slice(&epoch.to_be_bytes());
    batch[BASE_SEQUENCE_AT..COUNT_AT].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
}

/// A header's room, then `records` compressed.
fn compressed(records: &[u8], compression: Compression) -> Result<BytesMut, ClientError> {
    let mut out = BytesMut::with_capacity(HEADER_BYTES + records.len() / 2);
    out.resize(HEADER_BYTES, 0);
    let write = |tmp: &mut BytesMut| {
        tmp.extend_from_slice(records);
        Ok(())
    };
    match compression {
        Compression::Gzip => Gzip::compress(&mut out, write),
        Compression::Snappy => Snappy::compress(&mut out, write),
        Compression::Lz4 => Lz4::compress(&mut out, write),
        Compression::Zstd => Zstd::compress(&mut out, write),
        Compression::None => {
            out.extend_from_slice(records);
            Ok(())
        }
    }
    .map_err(|e| ClientError::Protocol(format!("compressing a batch: {e}")))?;
    Ok(out)
}

/// A record's bytes after its length prefix.
fn record_body_bytes(
    (key, value, headers): (Option<&[u8]>, Option<&[u8]>, &Headers),
    timestamp_delta: i64,
    offset_delta: i32,
) -> Result<usize, ClientError> {
    let mut bytes = 1 + varint_bytes(timestamp_delta) + varint_bytes(offset_delta as i64);
    bytes += optional_bytes_bytes(key)?;
    bytes += optional_bytes_bytes(value)?;
    bytes += varint_bytes(headers.len() as i64);
    for (name, value) in headers {
        bytes += optional_bytes_bytes(Some(name.as_bytes()))?;
        bytes += optional_bytes_bytes(value.as_deref())?;
    }
    if bytes > i32::MAX as usize {
        return Err(ClientError::Protocol("a record over 2 GiB".into()));
    }
    Ok(bytes)
}

/// Bytes of a length-prefixed field (length -1: null).
fn optional_bytes_bytes(field: Option<&[u8]>) -> Result<usize, ClientError> {
    match field {
        None => Ok(varint_bytes(-1)),
        Some(b) if b.len() > i32::MAX as usize => {
            Err(ClientError::Protocol("a record field over 2 GiB".into()))
        }
        Some(b) => Ok(varint_bytes(b.len() as i64) + b.len()),
    }
}

fn put_optional_bytes(buf: &mut BytesMut, field: Option<&[u8]>) {
    match field {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i64);
            buf.extend_from_slice(b);
        }
    }
}

/// Zigzag: small magnitudes, positive or negative, take few bytes.
fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn varint_bytes(n: i64) -> usize {
    let bits = 64 - (zigzag(n) | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

fn put_varint(buf: &mut BytesMut, n: i64) {
    let mut v = zigzag(n);
    while v >= 0x80 {
        buf.put_u8(v as u8 | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    struct Record {
        key: Option<Bytes>,
        value: Option<Bytes>,
        timestamp: i64,
        headers: Vec<(String, Option<Bytes>)>,
    }

    fn record(key: Option<&str>, value: Option<&str>, timestamp: i64) -> Record {
        Record {
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            timestamp,
            headers: Vec::new(),
        }
    }

    #[test]
    fn varints_take_the_bytes_their_encoding_takes() {
        for n in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            8191,
            8192,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut buf = BytesMut::new();
            put_varint(&mut buf, n);
            assert_eq!(buf.len(), varint_bytes(n), "{n}");
        }
    }

    #[test]
    fn a_built_batch_decodes_to_its_records_with_its_numbers() {
        let mut records = vec![
            record(Some("k1"), Some("v1"), 1_000),
            record(None, Some(&"x".repeat(300)), 999), // earlier: a negative delta
            record(Some("k3"), None, 5_000_000),       // a tombstone
        ];
        records[0].headers = vec![
            ("h".into(), Some(Bytes::from_static(b"a"))),
            ("n".into(), None),
            ("h".into(), Some(Bytes::from_static(b"b"))), // repeated: both kept
        ];
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Lz4,
            Compression::Snappy,
            Compression::Zstd,
        ] {
            let mut builder = BatchBuilder::with_capacity(0);
            for r in &records {
                builder
                    .push(RecordRef {
                        key: r.key.as_deref(),
                        value: r.value.as_deref(),
                        timestamp: r.timestamp,
                        headers: &r.headers,
                    })
                    .unwrap();
            }
            assert_eq!(builder.len(), 3);
            let producer = ProducerSequence {
                producer_id: 7,
                epoch: 2,
                first_sequence: 40,
            };
            let sealed = builder.seal(compression, Some(producer), true).unwrap();
            assert_eq!(producer_of(&sealed), Some(producer));
            let decoded = RecordBatchDecoder::decode(&mut sealed.clone()).unwrap();
            assert_eq!(decoded.records.len(), 3, "{compression:?}");
            for (i, (got, sent)) in decoded.records.iter().zip(&records).enumerate() {
                assert_eq!(got.offset, i as i64);
                assert_eq!(got.sequence, 40 + i as i32);
                assert_eq!((got.producer_id, got.producer_epoch), (7, 2));
                assert!(got.transactional);
                assert_eq!(got.timestamp, sent.timestamp);
                assert_eq!(got.key, sent.key);
                assert_eq!(got.value, sent.value);
                let headers: Vec<_> = got
                    .headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.clone()))
                    .collect();
                if sent.headers.is_empty() {
                    assert!(headers.is_empty());
                } else {
                    // The decoder keeps headers in a map: a repeated name
                    // shows its last value (the bytes hold both).
                    assert_eq!(
                        headers,
                        [
                            ("h".into(), Some(Bytes::from_static(b"b"))),
                            ("n".into(), None)
                        ]
                    );
                }
            }
            let renumbered = renumbered(&sealed, None);
            assert_eq!(producer_of(&renumbered), None);
            let decoded = RecordBatchDecoder::decode(&mut renumbered.clone()).unwrap();
            assert_eq!(decoded.records[2].value, None);
            assert_eq!(decoded.records[0].producer_id, NO_PRODUCER_ID);
        }
    }

    #[test]
    fn an_empty_batch_is_not_sealed() {
        let empty = BatchBuilder::with_capacity(0);
        assert!(empty.is_empty());
        assert!(empty.seal(Compression::None, None, false).is_err());
        assert_eq!(producer_of(b"short"), None);
    }

    /// Random batches against kafka-protocol's decoder (the model): every
    /// record's key, value, headers, timestamp, offset and sequence, and
    /// the header's counts and timestamps. `SEED` replays a run.
    #[test]
    fn random_batches_decode_to_what_was_pushed() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let seed = std::env::var("SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(0, |d| d.as_nanos() as u64)
            });
        eprintln!("random_batches_decode_to_what_was_pushed: SEED={seed} (set SEED to replay)");
        let mut rng = SmallRng::seed_from_u64(seed);
        let compressions = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ];
        for round in 0..200 {
            let field = |rng: &mut SmallRng, most: usize| {
                (rng.gen_range(0..5) > 0).then(|| {
                    let n = rng.gen_range(0..=most);
                    Bytes::from((0..n).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>())
                })
            };
            let base: i64 = rng.gen_range(-(1 << 40)..(1 << 40));
            let records: Vec<Record> = (0..rng.gen_range(1..60))
                .map(|_| Record {
                    key: field(&mut rng, 40),
                    value: field(&mut rng, 400),
                    timestamp: base + rng.gen_range(-(1 << 30)..(1 << 30)),
                    headers: (0..rng.gen_range(0..3))
                        .map(|h| (format!("h{h}"), field(&mut rng, 20)))
                        .collect(),
                })
                .collect();
            let compression = compressions[rng.gen_range(0..compressions.len())];
            let producer = (rng.gen_range(0..2) == 1).then(|| ProducerSequence {
                producer_id: rng.gen_range(0..i64::MAX),
                epoch: rng.gen_range(0..i16::MAX),
                first_sequence: rng.gen_range(0..i32::MAX - 100),
            });
            let ctx = format!("seed {seed} round {round}: {compression:?}, {producer:?}");
            let mut builder = BatchBuilder::with_capacity(rng.gen_range(0..4096));
            for r in &records {
                let record = RecordRef {
                    key: r.key.as_deref(),
                    value: r.value.as_deref(),
                    timestamp: r.timestamp,
                    headers: &r.headers,
                };
                builder.push(record).unwrap();
            }
            let transactional = producer.is_some() && rng.gen_range(0..2) == 1;
            let sealed = builder.seal(compression, producer, transactional).unwrap();
            let field_at = |at: usize, n: usize| sealed[at..at + n].to_vec();
            let i64_at = |at| i64::from_be_bytes(field_at(at, 8).try_into().unwrap());
            assert_eq!(i64_at(BASE_TIMESTAMP_AT), records[0].timestamp, "{ctx}");
            let max = records.iter().map(|r| r.timestamp).max().unwrap();
            assert_eq!(i64_at(MAX_TIMESTAMP_AT), max, "{ctx}");
            let decoded = RecordBatchDecoder::decode(&mut sealed.clone())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(decoded.records.len(), records.len(), "{ctx}");
            for (i, (got, sent)) in decoded.records.iter().zip(&records).enumerate() {
                let ctx = format!("{ctx}, record {i}");
                assert_eq!(got.offset, i as i64, "{ctx}");
                assert_eq!(got.timestamp, sent.timestamp, "{ctx}");
                assert_eq!((&got.key, &got.value), (&sent.key, &sent.value), "{ctx}");
                assert_eq!(got.transactional, transactional, "{ctx}");
                let headers: Vec<_> = (got.headers.iter())
                    .map(|(n, v)| (n.to_string(), v.clone()))
                    .collect();
                assert_eq!(headers, sent.headers, "{ctx}");
                match producer {
                    Some(p) => assert_eq!(
                        (got.producer_id, got.producer_epoch, got.sequence),
                        (p.producer_id, p.epoch, p.first_sequence + i as i32),
                        "{ctx}"
                    ),
                    None => assert_eq!(got.producer_id, NO_PRODUCER_ID, "{ctx}"),
                }
            }
        }
    }
}
