//! A Fetch response frame that sends its record sets without copying them.
//!
//! The record sets are most of a Fetch response's bytes, and they arrive
//! here as the `Bytes` the log handed out (the batch cache's or a disk
//! read's). Encoding the response into one buffer copies each of them once
//! more before the socket copies it again. Here the codec encodes everything
//! but the record sets; a record set of at least [`INLINE_MAX`] bytes goes
//! out as its own part of the frame, the others are copied inline.
//!
//! A partition's record set may come as several chunks (the cached
//! batches it spans): they are never joined into a buffer of their own.
//! Chunks of at least [`INLINE_MAX`] bytes go out as they are; smaller ones
//! are copied into the frame's buffer between them, as small fields are.
//!
//! The record set is the last field of a partition before its tagged
//! fields, in every version. A piece is spliced only when it has no tagged
//! field set (checked on the structure: a tagged field's bytes can end like
//! an empty one) and its encoding ends as expected (an empty array or a
//! null record set, then no tagged fields); any other piece is encoded
//! whole. A test compares the frame with the codec's own encoding for
//! every version.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use super::response::{failed, EncodeError, Frame};

/// Record sets up to this long are copied into the frame's buffer: below
/// it a part of its own costs more than the copy.
pub const INLINE_MAX: usize = 16 * 1024;

/// The first version with compact arrays and tagged fields.
const FIRST_FLEXIBLE: i16 = 12;

/// Each partition's record set as chunks of whole batches, one entry per
/// partition in the response's order (topic by topic). A partition's
/// record set is its `records` followed by its chunks.
pub type RecordChunks = Vec<Vec<Bytes>>;

/// The Fetch response frame answering `correlation_id`, each partition's
/// record set extended by its entry of `chunks`.
pub fn encode(
    correlation_id: i32,
    version: i16,
    mut response: FetchResponse,
    chunks: RecordChunks,
) -> Result<Frame, EncodeError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = FetchResponse::header_version(version);
    let size = header.compute_size(header_version).map_err(failed)?
        + response.compute_size(version).map_err(failed)?
        + chunks_size(&response, &chunks, version);
    let partitions: usize = response.responses.iter().map(|t| t.partitions.len()).sum();
    debug_assert!(
        chunks.is_empty() || chunks.len() == partitions,
        "one chunk list per partition"
    );
    let topics = std::mem::take(&mut response.responses);
    let mut frame = Parts::new(4 + size);
    frame.buf.put_i32(size as i32);
    header
        .encode(&mut frame.buf, header_version)
        .map_err(failed)?;
    let untagged = response.node_endpoints.is_empty() && response.unknown_tagged_fields.is_empty();
    let mut chunks = chunks.into_iter();
    if !(untagged && put_without_last(&mut frame.buf, &response, version, EMPTY_ARRAY)?) {
        response.responses = topics;
        for topic in &mut response.responses {
            join_chunks(&mut topic.partitions, &mut chunks);
        }
        return super::response::encode(correlation_id, version, &response);
    }
    put_length(&mut frame.buf, version, topics.len());
    for topic in topics {
        put_topic(&mut frame, version, topic, &mut chunks)?;
    }
    put_no_tags(&mut frame.buf, version);
    let parts = frame.finish();
    let sent: usize = parts.iter().map(Bytes::len).sum();
    if sent != 4 + size {
        return Err(EncodeError(format!(
            "fetch frame of {sent} bytes, the codec sized it {}",
            4 + size
        )));
    }
    Ok(Frame::from_parts(parts))
}

/// The bytes the chunks add to the response the codec sized without them:
/// their own, and any longer length prefix of the record sets they extend.
fn chunks_size(response: &FetchResponse, chunks: &RecordChunks, version: i16) -> usize {
    let partitions = response.responses.iter().flat_map(|t| &t.partitions);
    partitions
        .zip(chunks)
        .map(|(partition, chunks)| {
            let had = partition.records.as_ref().map_or(0, Bytes::len);
            let added: usize = chunks.iter().map(Bytes::len).sum();
            records_field_size(had + added, version) - records_field_size(had, version)
        })
        .sum()
}

/// A non-null record set's encoded size (a null one's is that of an
/// empty one, in every version).
fn records_field_size(len: usize, version: i16) -> usize {
    match version >= FIRST_FLEXIBLE {
        true => varint_size(len as u32 + 1) + len,
        false => 4 + len,
    }
}

/// Bytes of `value` as an unsigned varint (7 bits a byte, at least one).
fn varint_size(value: u32) -> usize {
    (32 - value.leading_zeros() as usize).div_ceil(7).max(1)
}

/// For the codec's own encoding: each partition's chunks joined into its
/// records (a copy; only responses with tagged fields take this way).
fn join_chunks(partitions: &mut [PartitionData], chunks: &mut std::vec::IntoIter<Vec<Bytes>>) {
    for partition in partitions {
        join_into(partition, chunks.next().unwrap_or_default());
    }
}

/// The partition's records followed by `added`, in one buffer.
fn join_into(partition: &mut PartitionData, added: Vec<Bytes>) {
    if added.is_empty() {
        return;
    }
    let had = partition.records.take().unwrap_or_default();
    let len = had.len() + added.iter().map(Bytes::len).sum::<usize>();
    let mut joined = BytesMut::with_capacity(len);
    joined.extend_from_slice(&had);
    added.iter().for_each(|c| joined.extend_from_slice(c));
    partition.records = Some(joined.freeze());
}

/// One topic: its fields, then its partitions.
fn put_topic(
    frame: &mut Parts,
    version: i16,
    mut topic: FetchableTopicResponse,
    chunks: &mut std::vec::IntoIter<Vec<Bytes>>,
) -> Result<(), EncodeError> {
    let mut partitions = std::mem::take(&mut topic.partitions);
    let untagged = topic.unknown_tagged_fields.is_empty();
    if !(untagged && put_without_last(&mut frame.buf, &topic, version, EMPTY_ARRAY)?) {
        join_chunks(&mut partitions, chunks);
        topic.partitions = partitions;
        return topic.encode(&mut frame.buf, version).map_err(failed);
    }
    put_length(&mut frame.buf, version, partitions.len());
    for partition in partitions {
        let added = chunks.next().unwrap_or_default();
        put_partition(frame, version, partition, added)?;
    }
    put_no_tags(&mut frame.buf, version);
    Ok(())
}

/// One partition: its fields, then its record set (large chunks as parts
/// of their own).
fn put_partition(
    frame: &mut Parts,
    version: i16,
    mut partition: PartitionData,
    added: Vec<Bytes>,
) -> Result<(), EncodeError> {
    if partition.records.is_none() && added.is_empty() {
        return partition.encode(&mut frame.buf, version).map_err(failed);
    }
    let records = partition.records.take().unwrap_or_default();
    if !(untagged(&partition) && put_without_last(&mut frame.buf, &partition, version, NULL_BYTES)?)
    {
        partition.records = Some(records);
        join_into(&mut partition, added);
        return partition.encode(&mut frame.buf, version).map_err(failed);
    }
    let len = records.len() + added.iter().map(Bytes::len).sum::<usize>();
    put_bytes_length(&mut frame.buf, version, len);
    frame.push(records);
    added.into_iter().for_each(|chunk| frame.push(chunk));
    put_no_tags(&mut frame.buf, version);
    Ok(())
}

/// Whether a partition has no tagged field set.
fn untagged(partition: &PartitionData) -> bool {
    let none = PartitionData::default();
    partition.diverging_epoch == none.diverging_epoch
        && partition.current_leader == none.current_leader
        && partition.snapshot_id == none.snapshot_id
        && partition.unknown_tagged_fields.is_empty()
}

/// How a piece's last regular field is encoded when empty: the flexible
/// versions' form, then the older ones'.
type EmptyForm = (&'static [u8], &'static [u8]);
/// An empty array: compact length 0 (as 1), or an int32 0.
const EMPTY_ARRAY: EmptyForm = (&[1], &[0, 0, 0, 0]);
/// A null byte string: compact length null (0), or an int32 -1.
const NULL_BYTES: EmptyForm = (&[0], &[0xff, 0xff, 0xff, 0xff]);

/// Encodes the piece into `buf` without its last regular field (which
/// must be empty, in the `empty` form) and, in the flexible versions,
/// without its tagged fields (which must be none). When it does not end so,
/// `buf` is left as it was and the answer is false.
fn put_without_last<T: Encodable>(
    buf: &mut BytesMut,
    piece: &T,
    version: i16,
    empty: EmptyForm,
) -> Result<bool, EncodeError> {
    let start = buf.len();
    piece.encode(buf, version).map_err(failed)?;
    let (field, tags): (&[u8], &[u8]) = match version >= FIRST_FLEXIBLE {
        true => (empty.0, &[0]),
        false => (empty.1, &[]),
    };
    let ending = field.len() + tags.len();
    let encoded = &buf[start..];
    let ends_so = encoded.ends_with(tags) && encoded[..encoded.len() - tags.len()].ends_with(field);
    let keep = match ends_so {
        true => buf.len() - ending,
        false => start,
    };
    buf.truncate(keep);
    Ok(ends_so)
}

/// An array's length.
fn put_length(buf: &mut BytesMut, version: i16, len: usize) {
    match version >= FIRST_FLEXIBLE {
        true => put_varint(buf, len as u32 + 1),
        false => buf.put_i32(len as i32),
    }
}

/// A (non-null) byte string's length.
fn put_bytes_length(buf: &mut BytesMut, version: i16, len: usize) {
    put_length(buf, version, len);
}

/// No tagged fields (flexible versions only).
fn put_no_tags(buf: &mut BytesMut, version: i16) {
    if version >= FIRST_FLEXIBLE {
        buf.put_u8(0);
    }
}

/// An unsigned varint, as the flexible versions' lengths.
fn put_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// The frame's parts as they are built: small fields gather in `buf`, a
/// large record set closes it and goes out as a part of its own.
struct Parts {
    parts: Vec<Bytes>,
    buf: BytesMut,
}

impl Parts {
    fn new(size_hint: usize) -> Parts {
        Parts {
            parts: Vec::new(),
            buf: BytesMut::with_capacity(size_hint.min(INLINE_MAX * 4)),
        }
    }

    fn push(&mut self, records: Bytes) {
        if records.len() < INLINE_MAX {
            self.buf.extend_from_slice(&records);
            return;
        }
        if !self.buf.is_empty() {
            self.parts.push(self.buf.split().freeze());
        }
        self.parts.push(records);
    }

    fn finish(mut self) -> Vec<Bytes> {
        if !self.buf.is_empty() {
            self.parts.push(self.buf.split().freeze());
        }
        self.parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{LeaderIdAndEpoch, PartitionData};
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    /// What the codec makes of the response, framed.
    fn whole(correlation_id: i32, version: i16, response: &FetchResponse) -> Bytes {
        super::super::response::encode(correlation_id, version, response)
            .unwrap()
            .to_bytes()
    }

    fn random_response(rng: &mut SmallRng, version: i16) -> FetchResponse {
        let topics = (0..rng.gen_range(0..4))
            .map(|t| {
                let partitions = (0..rng.gen_range(0..5))
                    .map(|p| random_partition(rng, version, p))
                    .collect();
                let topic = FetchableTopicResponse::default().with_partitions(partitions);
                match version >= 13 {
                    true => topic.with_topic_id(uuid::Uuid::from_u128(rng.gen())),
                    false => topic.with_topic(TopicName(StrBytes::from_string(format!("t{t}")))),
                }
            })
            .collect();
        let mut response = FetchResponse::default()
            .with_throttle_time_ms(rng.gen_range(0..100))
            .with_responses(topics);
        if version >= FIRST_FLEXIBLE && rng.gen_bool(0.1) {
            // A tagged field on the response, or on a topic: encoded whole.
            let tag = (99, Bytes::from_static(b"t"));
            match response.responses.first_mut().filter(|_| rng.gen_bool(0.5)) {
                Some(topic) => topic.unknown_tagged_fields.extend([tag]),
                None => response.unknown_tagged_fields.extend([tag]),
            }
        }
        if version >= 7 {
            response = response.with_error_code(rng.gen_range(0..2));
        }
        response
    }

    fn random_partition(rng: &mut SmallRng, version: i16, index: i32) -> PartitionData {
        let len = *[0, 1, 100, INLINE_MAX - 1, INLINE_MAX, 200_000]
            .get(rng.gen_range(0..6))
            .unwrap();
        let records = match rng.gen_bool(0.1) {
            true => None,
            false => Some(Bytes::from((0..len).map(|i| i as u8).collect::<Vec<u8>>())),
        };
        let mut partition = PartitionData::default()
            .with_partition_index(index)
            .with_error_code(rng.gen_range(0..3))
            .with_high_watermark(rng.gen())
            .with_last_stable_offset(rng.gen())
            .with_log_start_offset(rng.gen_range(-1..1000))
            .with_aborted_transactions(rng.gen_bool(0.8).then(Vec::new))
            .with_records(records);
        if version >= 11 {
            partition = partition.with_preferred_read_replica(BrokerId(rng.gen_range(-1..3)));
        }
        if version >= 12 && rng.gen_bool(0.2) {
            // A tagged field set: the partition is encoded whole. Epoch 0
            // ends the encoding in the bytes of "no records, no tags".
            partition = partition.with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(rng.gen_range(0..3)))
                    .with_leader_epoch(*[0, 7, 256].get(rng.gen_range(0..3)).unwrap()),
            );
        }
        partition
    }

    /// The response with each record set cut at random: a prefix left in
    /// `records`, the rest as chunks (as the log hands out cached batches).
    fn in_chunks(rng: &mut SmallRng, mut response: FetchResponse) -> (FetchResponse, RecordChunks) {
        let mut chunks = RecordChunks::new();
        for partition in response
            .responses
            .iter_mut()
            .flat_map(|t| &mut t.partitions)
        {
            let mut rest = match partition.records.take() {
                None => {
                    chunks.push(vec![]);
                    continue;
                }
                Some(records) => records,
            };
            let kept = rng.gen_range(0..=rest.len());
            partition.records = match rng.gen_bool(0.5) {
                true => Some(rest.split_to(kept)),
                false => Some(Bytes::new()),
            };
            let mut mine = vec![];
            while !rest.is_empty() {
                let len = rng.gen_range(1..=rest.len().min(3 * INLINE_MAX));
                mine.push(rest.split_to(len));
            }
            chunks.push(mine);
        }
        (response, chunks)
    }

    #[test]
    fn record_sets_in_chunks_encode_as_the_codec_does_joined() {
        let seed: u64 = rand::random();
        eprintln!("seed {seed}");
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut chunked = 0;
        for version in 4..=18 {
            for round in 0..40 {
                let response = random_response(&mut rng, version);
                let expected = whole(round, version, &response);
                let (cut, chunks) = in_chunks(&mut rng, response);
                chunked += chunks.iter().filter(|c| c.len() > 1).count();
                let frame = encode(round, version, cut, chunks).unwrap();
                assert_eq!(
                    frame.to_bytes(),
                    expected,
                    "seed {seed} version {version} round {round}"
                );
            }
        }
        assert!(
            chunked > 100,
            "only {chunked} record sets in several chunks"
        );
    }

    #[test]
    fn every_version_encodes_as_the_codec_does_with_large_record_sets_as_their_own_parts() {
        let seed: u64 = rand::random();
        eprintln!("seed {seed}");
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut own_parts = 0;
        for version in 4..=18 {
            for round in 0..40 {
                let response = random_response(&mut rng, version);
                let expected = whole(round, version, &response);
                let frame = encode(round, version, response.clone(), vec![]).unwrap();
                assert_eq!(
                    frame.to_bytes(),
                    expected,
                    "seed {seed} version {version} round {round}"
                );
                let large = frame
                    .parts()
                    .iter()
                    .filter(|p| p.len() >= INLINE_MAX)
                    .count();
                own_parts += large;
            }
        }
        assert!(
            own_parts > 100,
            "only {own_parts} record sets went out uncopied"
        );
    }

    #[test]
    fn a_large_record_set_is_sent_from_the_buffer_it_came_in() {
        let records = Bytes::from(vec![7u8; 100_000]);
        let response =
            FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    PartitionData::default().with_records(Some(records.clone()))
                ])]);
        let chunks = vec![
            Bytes::from(vec![8u8; 70_000]),
            Bytes::from(vec![9u8; 50_000]),
        ];
        let frame = encode(1, 11, response, vec![chunks.clone()]).unwrap();
        for sent in std::iter::once(&records).chain(&chunks) {
            assert!(
                frame.parts().iter().any(|p| p.as_ptr() == sent.as_ptr()),
                "a record set's chunk was copied"
            );
        }
    }
}
