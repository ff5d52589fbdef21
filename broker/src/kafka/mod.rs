//! The Kafka wire protocol on the broker side: framing, request headers,
//! bounds checks before decoding, response encoding, and the handlers that
//! need no broker state (ApiVersions). The bottom layer of the broker:
//! it imports nothing of the broker above it.

pub mod api_versions;
pub mod bounds;
pub mod decode;
pub mod fetch_frame;
pub mod frame;
mod legacy_cursor;
pub mod offset_commit_v1;
pub mod produce_legacy;
pub mod record_sets;
pub mod request;
pub mod response;

/// A Kafka error code (0: none), as every response carries them.
pub type Code = i16;

/// A Kafka error code in words, for answers that carry a message (the
/// produce response's, the HTTP API's): a sentence, with Kafka's name for
/// the error where no sentence is written yet.
pub fn error_text(code: Code) -> String {
    use kafka_protocol::ResponseError as E;
    let sentence = match E::try_from_code(code) {
        None => "no error",
        Some(E::CorruptMessage) => "a batch failed validation (magic, length, CRC or record count)",
        Some(E::MessageTooLarge) => "a batch exceeds max.message.bytes",
        Some(E::KafkaStorageError) => "the partition's log failed",
        Some(E::UnknownTopicOrPartition) => "no such topic or partition",
        Some(E::NotLeaderOrFollower) => "this broker does not lead the partition",
        Some(E::NotEnoughReplicas) => "fewer in-sync replicas than min.insync.replicas",
        Some(E::NotEnoughReplicasAfterAppend) => {
            "the in-sync replicas fell below min.insync.replicas after the append"
        }
        Some(E::RequestTimedOut) => {
            "no answer in time (a produce: the in-sync replicas did not confirm in time)"
        }
        Some(E::InvalidRequiredAcks) => "acks must be 0, 1 or all",
        Some(E::OutOfOrderSequenceNumber) => {
            "the batch's sequence does not follow the producer's last one"
        }
        Some(E::InvalidProducerEpoch) => {
            "the producer's epoch is older than its current one (a newer instance fenced it)"
        }
        Some(E::InvalidTopicException) => {
            "the topic takes no records from clients (an internal topic) or its name is invalid"
        }
        Some(E::InvalidSessionTimeout) => {
            "the session timeout is outside the broker's group.min.session.timeout.ms to \
             group.max.session.timeout.ms"
        }
        Some(E::InvalidGroupId) => "the group id is empty or invalid",
        Some(E::NotCoordinator) | Some(E::CoordinatorNotAvailable) => {
            "this broker is not the group's coordinator right now: ask again"
        }
        Some(E::CoordinatorLoadInProgress) => "the group's coordinator is loading: ask again",
        Some(E::TopicAuthorizationFailed) => "not allowed on this topic by the ACLs",
        Some(E::GroupAuthorizationFailed) => "not allowed on this group by the ACLs",
        Some(E::ClusterAuthorizationFailed) => "not allowed on the cluster by the ACLs",
        Some(E::TopicAlreadyExists) => "the topic exists already",
        Some(E::InvalidPartitions) => "invalid number of partitions",
        Some(E::InvalidReplicationFactor) => {
            "invalid replication factor (more than the live brokers?)"
        }
        Some(E::InvalidConfig) => "a setting the broker refuses",
        Some(E::OffsetOutOfRange) => "the offset is outside the partition's log",
        Some(E::GroupIdNotFound) => "no such group",
        Some(E::NonEmptyGroup) => "the group still has members",
        Some(E::InvalidRecordState) => "the record is not held in that state",
        _ => "",
    };
    let name = client::connection::error_name(code);
    match sentence {
        "" => format!("refused ({name})"),
        sentence => sentence.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_code_reads_as_words() {
        assert_eq!(
            super::error_text(26),
            "the session timeout is outside the broker's group.min.session.timeout.ms to \
             group.max.session.timeout.ms"
        );
        assert!(super::error_text(17).starts_with("the topic takes no records"));
        // No sentence yet: Kafka's name, never a bare "refused".
        assert_eq!(super::error_text(57), "refused (LOG_DIR_NOT_FOUND)");
    }
}
