//! A Produce request's record sets as buffers the log can write into.
//!
//! The log stamps each batch's base offset and leader epoch into the
//! batch's own bytes, so a batch must arrive writable. A decoded request
//! holds its record sets as slices of the frame it came in; once nothing
//! else holds that frame (the request header owns its bytes,
//! `kafka::request`; a large frame has memory of its own, `kafka::frame`)
//! its memory is taken over and cut into one buffer per partition, without
//! a copy. When something else still shares the frame (small frames share
//! the connection's read buffer) each record set is copied instead.
//!
//! Either way a record set says how much memory it keeps alive: the
//! partition layer copies out a batch that is small beside it
//! (`partition::append::split_batches`), as in the log's cache it would
//! keep all of that memory alive.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use storage::FrameMemory;

use super::frame::OWN_MEMORY_MIN_BYTES;

/// One partition's records, writable.
#[derive(Debug, Default)]
pub struct RecordSet {
    /// The records (empty when the request had none).
    pub records: BytesMut,
    /// The bytes of the allocation they keep alive: the frame's when they
    /// were cut from it, their own when copied.
    pub memory: usize,
    /// Whether they were copied out of the frame.
    pub copied: bool,
    /// The frame they are a slice of (the cache charges its memory).
    pub frame: Option<FrameMemory>,
}

impl RecordSet {
    /// Records the broker built itself for one append (the HTTP API).
    pub fn built(records: BytesMut) -> RecordSet {
        RecordSet {
            memory: records.capacity(),
            records,
            copied: false,
            frame: None,
        }
    }

    fn copy_of(records: &[u8]) -> RecordSet {
        RecordSet {
            records: BytesMut::from(records),
            memory: records.len(),
            copied: true,
            frame: None,
        }
    }
}

/// Takes every partition's record set out of `request`, in request order.
/// `body` is the request body it was decoded from, handed over, and
/// `frame_bytes` the length of the whole frame around it.
pub fn take_record_sets(
    request: &mut ProduceRequest,
    body: Bytes,
    frame_bytes: usize,
) -> Vec<RecordSet> {
    let sets: Vec<Bytes> = request
        .topic_data
        .iter_mut()
        .flat_map(|topic| topic.partition_data.iter_mut())
        .map(|partition| partition.records.take().unwrap_or_default())
        .collect();
    let places: Vec<Option<Range<usize>>> = sets.iter().map(|set| place_in(&body, set)).collect();
    let placed = sets
        .iter()
        .zip(&places)
        .all(|(set, place)| set.is_empty() || place.is_some());
    let ranges: Vec<&Range<usize>> = places.iter().flatten().collect();
    let in_order = ranges.windows(2).all(|pair| pair[0].end <= pair[1].start);
    if frame_bytes < 4 + OWN_MEMORY_MIN_BYTES || !(placed && in_order) {
        // A small frame shares the read buffer; record sets that are not
        // slices of this body in order never come from a decoded request.
        return sets.iter().map(|set| RecordSet::copy_of(set)).collect();
    }
    drop(sets);
    release_frame(request);
    // What the frame holds before its body: its size prefix and header.
    let before_body = frame_bytes.saturating_sub(body.len());
    match body.try_into_mut() {
        Ok(frame) => cut(frame, before_body, &places),
        Err(shared) => places
            .iter()
            .map(|place| RecordSet::copy_of(place.clone().map_or(&[][..], |range| &shared[range])))
            .collect(),
    }
}

/// A batch stays in the memory it arrived in only if it is at least
/// this fraction (1/N) of it: in the log's cache it keeps all of that
/// memory alive, so the cache then holds at most N times the bytes it
/// counts (`partition::append::split_batches` copies the others out).
pub const MEMORY_SHARE_MIN: usize = 3;

/// Copies out every record set still in its frame but bound for another
/// shard than the one taking most of the frame's bytes in sets large
/// enough to stay in it, so that only one shard keeps the frame's memory
/// alive (sets small beside the frame are copied out batch by batch on
/// their own shard anyway, so they do not choose it). Each shard trims
/// its own cache (`partition::cache_trim`): a frame whose batches sat in
/// two shards' caches would be freed only when both had evicted theirs,
/// and the memory held would exceed the bytes either counts. `owners`
/// names each set's shard, in the same order; a set with none (refused)
/// is dropped by the caller and left alone. Returns the bytes copied.
pub fn keep_frame_on_one_shard<S: PartialEq + Copy>(
    sets: &mut [RecordSet],
    owners: &[Option<S>],
) -> usize {
    debug_assert_eq!(sets.len(), owners.len());
    // All sets not copied are cuts of one frame (`take_record_sets`).
    let mut bytes_by_shard: Vec<(S, usize)> = Vec::new();
    for (set, owner) in sets.iter().zip(owners) {
        let stays = |set: &RecordSet| set.records.len() * MEMORY_SHARE_MIN >= set.memory;
        let Some(owner) = owner.filter(|_| !set.copied && !set.records.is_empty() && stays(set))
        else {
            continue;
        };
        match bytes_by_shard.iter_mut().find(|(shard, _)| *shard == owner) {
            Some((_, bytes)) => *bytes += set.records.len(),
            None => bytes_by_shard.push((owner, set.records.len())),
        }
    }
    let Some(&(keeper, _)) = bytes_by_shard.iter().max_by_key(|(_, bytes)| *bytes) else {
        return 0;
    };
    let mut copied = 0;
    for (set, owner) in sets.iter_mut().zip(owners) {
        if !set.copied && owner.is_some_and(|shard| shard != keeper) {
            copied += set.records.len();
            *set = RecordSet::copy_of(&set.records);
        }
    }
    copied
}

/// Where `set` lies in `body`, if it is a slice of it (and not empty).
fn place_in(body: &Bytes, set: &Bytes) -> Option<Range<usize>> {
    if set.is_empty() {
        return None;
    }
    let start = (set.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let end = start.checked_add(set.len())?;
    (end <= body.len()).then_some(start..end)
}

/// Makes the rest of the request own its bytes: the topic names and the
/// transactional id are copied, tagged fields (unknown to this broker,
/// never echoed) dropped. Nothing of it holds the frame after this.
fn release_frame(request: &mut ProduceRequest) {
    request.transactional_id = request
        .transactional_id
        .take()
        .map(|id| TransactionalId(StrBytes::from_string(id.to_string())));
    request.unknown_tagged_fields.clear();
    for topic in &mut request.topic_data {
        if !topic.name.is_empty() {
            topic.name = TopicName(StrBytes::from_string(topic.name.to_string()));
        }
        topic.unknown_tagged_fields.clear();
        for partition in &mut topic.partition_data {
            partition.unknown_tagged_fields.clear();
        }
    }
}

/// Cuts the frame's body, ours alone, into the record sets at `places`
/// (one after the other in it).
fn cut(mut frame: BytesMut, before_body: usize, places: &[Option<Range<usize>>]) -> Vec<RecordSet> {
    // The whole allocation: what lies before the body (a header may be
    // most of a frame), the body and any room after it.
    let memory = before_body + frame.capacity();
    let kept_alive = FrameMemory::new(memory);
    let mut at = 0;
    places
        .iter()
        .map(|place| {
            let Some(range) = place else {
                return RecordSet::default();
            };
            frame.advance(range.start - at);
            at = range.end;
            RecordSet {
                records: frame.split_to(range.len()),
                memory,
                copied: false,
                frame: Some(kept_alive),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::protocol::{Decodable, Encodable};

    const VERSION: i16 = 9;

    /// The encoded body in memory of its own size, as a frame is read
    /// (the encoder's buffer grows past it).
    fn exact(out: BytesMut) -> Bytes {
        Bytes::from(out.to_vec())
    }

    /// A request's body with one topic whose partitions carry record sets
    /// of these sizes.
    fn encoded_sets(sizes: &[usize]) -> Bytes {
        let partitions = sizes
            .iter()
            .enumerate()
            .map(|(index, size)| {
                PartitionProduceData::default()
                    .with_index(index as i32)
                    .with_records(Some(Bytes::from(vec![1; *size])))
            })
            .collect();
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("wide")))
                .with_partition_data(partitions)]);
        let mut out = BytesMut::new();
        request.encode(&mut out, VERSION).unwrap();
        exact(out)
    }

    /// A request's body as a client encodes it: record sets of these sizes
    /// (opaque bytes to this layer), filled with their index + 1.
    fn encoded(sizes: [usize; 3]) -> Bytes {
        let partition = |index: usize| {
            PartitionProduceData::default()
                .with_index(index as i32)
                .with_records(Some(Bytes::from(vec![index as u8 + 1; sizes[index]])))
        };
        let request = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
            .with_acks(-1)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("first")))
                    .with_partition_data(vec![partition(0), partition(1)]),
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("second")))
                    .with_partition_data(vec![partition(2)]),
            ]);
        let mut out = BytesMut::new();
        request.encode(&mut out, VERSION).unwrap();
        exact(out)
    }

    const LARGE: [usize; 3] = [60_000, 100, 60_000];

    /// A size prefix and a request header of a usual size.
    const BEFORE_BODY: usize = 40;

    fn take(request: &mut ProduceRequest, body: Bytes) -> Vec<RecordSet> {
        let frame_bytes = BEFORE_BODY + body.len();
        take_record_sets(request, body, frame_bytes)
    }

    fn decode(body: &Bytes) -> ProduceRequest {
        ProduceRequest::decode(&mut body.clone(), VERSION).unwrap()
    }

    fn span(body: &Bytes) -> Range<usize> {
        body.as_ptr() as usize..body.as_ptr() as usize + body.len()
    }

    fn within(set: &RecordSet, frame: &Range<usize>) -> bool {
        frame.contains(&(set.records.as_ptr() as usize))
    }

    fn assert_contents(sets: &[RecordSet], sizes: [usize; 3]) {
        let lens: Vec<usize> = sets.iter().map(|set| set.records.len()).collect();
        assert_eq!(lens, sizes);
        for (set, fill) in sets.iter().zip([1u8, 2, 3]) {
            assert!(set.records.iter().all(|b| *b == fill));
        }
    }

    #[test]
    fn a_large_frame_held_by_nothing_else_becomes_the_record_sets_without_a_copy() {
        let body = encoded(LARGE);
        let (frame, frame_len) = (span(&body), body.len());
        let mut request = decode(&body);
        let sets = take(&mut request, body);
        assert_contents(&sets, LARGE);
        for set in &sets {
            assert!(within(set, &frame) && !set.copied);
            assert!(
                set.memory >= BEFORE_BODY + frame_len,
                "each keeps the whole frame alive"
            );
        }
        // The rest of the request is intact, and no longer refers to the frame.
        assert_eq!(request.topic_data[1].name.as_str(), "second");
        assert_eq!(
            request.transactional_id.as_deref().map(|id| id.as_str()),
            Some("tx")
        );
        assert!(request
            .topic_data
            .iter()
            .flat_map(|t| &t.partition_data)
            .all(|p| p.records.is_none()));
    }

    #[test]
    fn a_frame_whose_record_sets_go_to_several_shards_is_kept_by_one() {
        let sizes = [60_000, 100, 50_000];
        let body = encoded(sizes);
        let frame = span(&body);
        let mut sets = take(&mut decode(&body), body);
        // Shard 1 takes the most bytes of the frame (60,000 + 100);
        // shard 0's set is copied out, so shard 1 alone holds the frame.
        let copied = keep_frame_on_one_shard(&mut sets, &[Some(1), Some(1), Some(0)]);
        assert_eq!(copied, 50_000);
        assert_contents(&sets, sizes);
        assert!(within(&sets[0], &frame) && within(&sets[1], &frame));
        assert!(!within(&sets[2], &frame) && sets[2].copied);
        assert_eq!(sets[2].memory, 50_000);
        assert!(!sets[0].copied && !sets[1].copied);
        assert!(sets[0].frame.is_some() && sets[0].frame == sets[1].frame);
        assert_eq!(sets[2].frame, None, "a copy keeps no frame alive");
    }

    #[test]
    fn the_frame_stays_with_the_shard_of_its_large_sets_not_of_its_many_small_ones() {
        // Shard 1's ten small sets outweigh shard 0's one large set; they
        // would be copied out batch by batch whichever shard kept the
        // frame, so shard 0 keeps it and its large set is not copied.
        let mut sizes = vec![40_000];
        sizes.extend([5_000; 10]);
        let body = encoded_sets(&sizes);
        let frame = span(&body);
        let mut sets = take(&mut decode(&body), body);
        let owners: Vec<Option<u8>> = (0..sizes.len())
            .map(|index| Some(u8::from(index > 0)))
            .collect();
        assert_eq!(keep_frame_on_one_shard(&mut sets, &owners), 50_000);
        assert!(within(&sets[0], &frame) && !sets[0].copied);
        assert!(sets[1..]
            .iter()
            .all(|set| !within(set, &frame) && set.copied));
    }

    #[test]
    fn a_frame_for_one_shard_or_refused_sets_is_left_as_it_is() {
        let body = encoded(LARGE);
        let frame = span(&body);
        let mut sets = take(&mut decode(&body), body);
        // The second set is refused (no shard): dropped by the caller, so
        // it holds the frame no longer than the request.
        assert_eq!(
            keep_frame_on_one_shard(&mut sets, &[Some(3), None, Some(3)]),
            0
        );
        assert!(sets.iter().all(|set| within(set, &frame) && !set.copied));

        let mut copies = take(&mut decode(&encoded(LARGE)), encoded(LARGE));
        assert!(
            copies.iter().all(|set| set.copied),
            "not slices of this body"
        );
        assert_eq!(
            keep_frame_on_one_shard(&mut copies, &[Some(0), Some(1), Some(2)]),
            0
        );
    }

    #[test]
    fn a_frame_shared_with_anything_else_or_small_is_copied_from() {
        let body = encoded(LARGE);
        let _kept = body.clone();
        let frame = span(&body);
        let sets = take(&mut decode(&body), body);
        assert_contents(&sets, LARGE);
        assert!(sets.iter().all(|set| !within(set, &frame) && set.copied));
        assert!(sets.iter().all(|set| set.memory == set.records.len()));

        let small = [1_000, 100, 1_000];
        let body = encoded(small);
        let frame = span(&body);
        let sets = take(&mut decode(&body), body);
        assert_contents(&sets, small);
        assert!(sets.iter().all(|set| !within(set, &frame) && set.copied));
    }

    #[test]
    fn record_sets_that_are_not_slices_of_the_body_are_copied() {
        let body = encoded(LARGE);
        let frame = span(&body);
        let mut request = decode(&body);
        let foreign = Bytes::from(vec![2u8; 100]);
        request.topic_data[0].partition_data[1].records = Some(foreign);
        let sets = take(&mut request, body);
        assert_contents(&sets, LARGE);
        assert!(sets.iter().all(|set| !within(set, &frame) && set.copied));
    }

    #[test]
    fn a_header_that_is_most_of_the_frame_counts_in_the_memory_kept_alive() {
        let body = encoded(LARGE);
        let frame_bytes = 10 << 20;
        let sets = take_record_sets(&mut decode(&body), body, frame_bytes);
        assert!(sets
            .iter()
            .all(|set| !set.copied && set.memory >= frame_bytes));
    }

    #[test]
    fn record_sets_out_of_their_order_in_the_body_are_copied() {
        let body = encoded(LARGE);
        let frame = span(&body);
        let mut request = decode(&body);
        let first = request.topic_data[0].partition_data[0].records.take();
        let last = request.topic_data[1].partition_data[0].records.take();
        request.topic_data[0].partition_data[0].records = last;
        request.topic_data[1].partition_data[0].records = first;
        let sets = take(&mut request, body);
        let fills: Vec<u8> = sets.iter().map(|set| set.records[0]).collect();
        assert_eq!(fills, [3, 2, 1], "each partition keeps its own records");
        assert!(sets.iter().all(|set| !within(set, &frame) && set.copied));
    }

    #[test]
    fn a_request_with_an_absent_record_set_gets_an_empty_one() {
        let body = encoded(LARGE);
        let mut request = decode(&body);
        request.topic_data[0].partition_data[1].records = None;
        let sets = take(&mut request, body);
        let lens: Vec<usize> = sets.iter().map(|set| set.records.len()).collect();
        assert_eq!(lens, [60_000, 0, 60_000]);
    }
}
