//! The Kafka wire protocol on the broker side: framing, request headers,
//! bounds checks before decoding, response encoding, and the handlers that
//! need no broker state (ApiVersions). The bottom layer of the broker:
//! it imports nothing of the broker above it.

pub mod api_versions;
pub mod bounds;
pub mod decode;
pub mod fetch_frame;
pub mod frame;
pub mod produce_legacy;
pub mod record_sets;
pub mod request;
pub mod response;

/// A Kafka error code (0: none), as every response carries them.
pub type Code = i16;

/// A Kafka error code's text, for answers that carry one.
pub fn error_text(code: Code) -> &'static str {
    use kafka_protocol::ResponseError;
    match ResponseError::try_from_code(code) {
        Some(ResponseError::CorruptMessage) => {
            "a batch failed validation (magic, length, CRC or record count)"
        }
        Some(ResponseError::MessageTooLarge) => "a batch exceeds max.message.bytes",
        Some(ResponseError::KafkaStorageError) => "the partition's log failed",
        Some(ResponseError::UnknownTopicOrPartition) => "no such topic or partition",
        Some(ResponseError::NotLeaderOrFollower) => "this broker does not lead the partition",
        Some(ResponseError::NotEnoughReplicas) => "fewer in-sync replicas than min.insync.replicas",
        Some(ResponseError::NotEnoughReplicasAfterAppend) => {
            "the in-sync replicas fell below min.insync.replicas after the append"
        }
        Some(ResponseError::RequestTimedOut) => "the in-sync replicas did not confirm in time",
        Some(ResponseError::InvalidRequiredAcks) => "acks must be 0, 1 or all",
        Some(ResponseError::OutOfOrderSequenceNumber) => {
            "the batch's sequence does not follow the producer's last one"
        }
        Some(ResponseError::InvalidProducerEpoch) => {
            "the producer's epoch is older than its current one (a newer instance fenced it)"
        }
        _ => "refused",
    }
}
