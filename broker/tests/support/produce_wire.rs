//! Produce requests written and answers read by hand, for tests that
//! need a request's exact layout on the wire (how many requests in one
//! write, which partitions share a frame, batches of a chosen size).

use std::collections::BTreeMap;
use std::io::Read;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// A size-prefixed acks=all Produce request of `version` with one topic's
/// record sets: (partition, batches).
pub fn produce_frame(
    topic: &str,
    version: i16,
    correlation_id: i32,
    record_sets: Vec<(i32, Bytes)>,
) -> Vec<u8> {
    produce_frame_claiming(topic, (version, version), correlation_id, record_sets)
}

/// [`produce_frame`] encoded as one version, its header claiming another:
/// (encoded, claimed). A version the codec cannot encode (one the broker
/// does not serve) can still be claimed.
pub fn produce_frame_claiming(
    topic: &str,
    versions: (i16, i16),
    correlation_id: i32,
    record_sets: Vec<(i32, Bytes)>,
) -> Vec<u8> {
    produce_frame_with_acks(topic, versions, -1, correlation_id, record_sets)
}

/// [`produce_frame_claiming`] with the request's `acks`.
pub fn produce_frame_with_acks(
    topic: &str,
    (version, claimed): (i16, i16),
    acks: i16,
    correlation_id: i32,
    record_sets: Vec<(i32, Bytes)>,
) -> Vec<u8> {
    let partitions = record_sets
        .into_iter()
        .map(|(index, records)| {
            PartitionProduceData::default()
                .with_index(index)
                .with_records(Some(records))
        })
        .collect();
    let produce = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(partitions)]);
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(claimed)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("produce-wire")))
        .encode(&mut body, ProduceRequest::header_version(version))
        .unwrap();
    produce.encode(&mut body, version).unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// One Produce answer of `version`: its correlation id, and per partition
/// (error, base offset).
pub fn read_produce_answer(
    stream: &mut impl Read,
    version: i16,
) -> (i32, BTreeMap<i32, (i16, i64)>) {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).expect("an answer's size");
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).expect("an answer");
    let mut body = Bytes::from(body);
    let header =
        ResponseHeader::decode(&mut body, ProduceResponse::header_version(version)).unwrap();
    let answer = ProduceResponse::decode(&mut body, version).unwrap();
    let partitions = answer
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .map(|p| (p.index, (p.error_code, p.base_offset)))
        .collect();
    (header.correlation_id, partitions)
}
