//! A Produce request's record sets as buffers the log can write into.
//!
//! The log stamps each batch's base offset and leader epoch into the
//! batch's own bytes, so a batch must arrive writable. A decoded request
//! holds its record sets as slices of the frame it came in; once nothing
//! else holds that frame (the request header owns its bytes,
//! `kafka::request`; a large frame has memory of its own, `kafka::frame`)
//! its memory is taken over and cut into one buffer per partition, without
//! a copy. A record set is copied instead when something else still
//! shares the frame (small frames share the connection's read buffer), or
//! when it is small beside its frame: in the log's cache it would keep the
//! whole frame alive.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

/// A record set keeps its frame's memory only if it is at least this
/// fraction (1/N) of the frame: a cached batch then keeps alive at most N
/// times the bytes the cache counts for it.
const FRAME_SHARE_MIN: usize = 3;

/// A request's record sets, taken over or copied.
#[derive(Debug)]
pub struct RecordSets {
    /// One per partition, in request order (an absent one empty).
    pub sets: Vec<BytesMut>,
    /// How many of their bytes were copied (the rest kept the frame's memory).
    pub copied_bytes: usize,
}

/// Takes every partition's record set out of `request`, in request order,
/// as a writable buffer. `body` is the request body it was decoded from,
/// handed over.
pub fn take_record_sets(request: &mut ProduceRequest, body: Bytes) -> RecordSets {
    let sets = take_sets(request, body);
    let copied_bytes = sets
        .iter()
        .filter(|(_, copied)| *copied)
        .map(|(set, _)| set.len())
        .sum();
    RecordSets {
        sets: sets.into_iter().map(|(set, _)| set).collect(),
        copied_bytes,
    }
}

/// The record sets, each with whether it was copied.
fn take_sets(request: &mut ProduceRequest, body: Bytes) -> Vec<(BytesMut, bool)> {
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
    if !(placed && in_order) {
        // Not slices of this body, one after the other (never so for a
        // decoded request): copies.
        return sets.iter().map(|set| copy(set)).collect();
    }
    drop(sets);
    release_frame(request);
    match body.try_into_mut() {
        Ok(frame) => cut(frame, &places),
        Err(shared) => places
            .iter()
            .map(|place| copy(place.clone().map_or(&[][..], |range| &shared[range])))
            .collect(),
    }
}

fn copy(set: &[u8]) -> (BytesMut, bool) {
    (BytesMut::from(set), true)
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

/// Cuts the frame, ours alone, into the record sets at `places` (one
/// after the other in it); small ones are copied out of it.
fn cut(mut frame: BytesMut, places: &[Option<Range<usize>>]) -> Vec<(BytesMut, bool)> {
    let frame_len = frame.len();
    let mut at = 0;
    places
        .iter()
        .map(|place| {
            let Some(range) = place else {
                return (BytesMut::new(), false);
            };
            frame.advance(range.start - at);
            let set = frame.split_to(range.len());
            at = range.end;
            if range.len() * FRAME_SHARE_MIN < frame_len {
                copy(&set)
            } else {
                (set, false)
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

    /// A request's body as a client encodes it: two large record sets and a
    /// small one (each is opaque bytes to this layer).
    fn body() -> Bytes {
        let partition = |index: i32, len: usize| {
            PartitionProduceData::default()
                .with_index(index)
                .with_records(Some(Bytes::from(vec![index as u8 + 1; len])))
        };
        let request = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
            .with_acks(-1)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("first")))
                    .with_partition_data(vec![partition(0, 60_000), partition(1, 100)]),
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("second")))
                    .with_partition_data(vec![partition(2, 60_000)]),
            ]);
        let mut out = BytesMut::new();
        request.encode(&mut out, VERSION).unwrap();
        out.freeze()
    }

    fn decode(body: &Bytes) -> ProduceRequest {
        ProduceRequest::decode(&mut body.clone(), VERSION).unwrap()
    }

    fn within(set: &BytesMut, frame: Range<usize>) -> bool {
        frame.contains(&(set.as_ptr() as usize))
    }

    fn assert_contents(sets: &[BytesMut]) {
        let lens: Vec<usize> = sets.iter().map(BytesMut::len).collect();
        assert_eq!(lens, [60_000, 100, 60_000]);
        for (set, fill) in sets.iter().zip([1u8, 2, 3]) {
            assert!(set.iter().all(|b| *b == fill));
        }
    }

    #[test]
    fn a_frame_held_by_nothing_else_becomes_the_large_record_sets_without_a_copy() {
        let body = body();
        let frame = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        let mut request = decode(&body);
        let taken = take_record_sets(&mut request, body);
        assert_eq!(taken.copied_bytes, 100);
        let sets = taken.sets;
        assert_contents(&sets);
        assert!(within(&sets[0], frame.clone()) && within(&sets[2], frame.clone()));
        assert!(
            !within(&sets[1], frame),
            "a small record set is copied, not left holding the frame"
        );
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
    fn a_frame_shared_with_anything_else_is_copied_from() {
        let body = body();
        let kept = body.clone();
        let frame = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        let mut request = decode(&body);
        let taken = take_record_sets(&mut request, body);
        assert_eq!(taken.copied_bytes, 120_100);
        let sets = taken.sets;
        assert_contents(&sets);
        assert!(sets.iter().all(|set| !within(set, frame.clone())));
        assert_eq!(
            kept.len(),
            frame.len(),
            "the other holder's bytes untouched"
        );
    }

    #[test]
    fn a_request_with_an_absent_record_set_gets_an_empty_one() {
        let body = body();
        let mut request = decode(&body);
        request.topic_data[0].partition_data[1].records = None;
        let sets = take_record_sets(&mut request, body).sets;
        assert_eq!(
            sets.iter().map(BytesMut::len).collect::<Vec<_>>(),
            [60_000, 0, 60_000]
        );
    }
}
