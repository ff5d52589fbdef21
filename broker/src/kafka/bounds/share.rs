//! The share consumer's record APIs' walkers: ShareFetch and
//! ShareAcknowledge v1 (flexible), as librdkafka and Kafka 4.2 send them.

use super::{Walk, Walker};

/// An acknowledgement batch: first and last offset, the types.
fn acknowledgement_batch(w: &mut Walker<'_>) -> Walk {
    w.fixed(8 + 8)?; // first_offset, last_offset
    w.array(|w| w.fixed(1))?; // acknowledge_types
    w.tagged_fields()
}

/// A topic of ShareFetch or ShareAcknowledge: its id, and partitions
/// each with acknowledgement batches.
fn acknowledged_topic(w: &mut Walker<'_>) -> Walk {
    w.fixed(16)?; // topic_id
    w.array(|w| {
        w.fixed(4)?; // partition_index
        w.array(acknowledgement_batch)?;
        w.tagged_fields()
    })?;
    w.tagged_fields()
}

/// ShareFetch v1.
pub fn check_share_fetch(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.string()?; // member_id
                 // share_session_epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size
    w.fixed(4 * 6)?;
    w.array(acknowledged_topic)?;
    w.array(|w| {
        w.fixed(16)?; // topic_id
        w.array(|w| w.fixed(4))?; // partitions
        w.tagged_fields()
    })?; // forgotten_topics_data
    w.tagged_fields()?;
    w.end()
}

/// ShareAcknowledge v1.
pub fn check_share_acknowledge(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.string()?; // member_id
    w.fixed(4)?; // share_session_epoch
    w.array(acknowledged_topic)?;
    w.tagged_fields()?;
    w.end()
}

/// ReadShareGroupState v0.
pub fn check_read_share_group_state(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.array(|w| {
        w.fixed(16)?; // topic_id
        w.array(|w| {
            w.fixed(4 + 4)?; // partition, leader_epoch
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// WriteShareGroupState v0.
pub fn check_write_share_group_state(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.array(|w| {
        w.fixed(16)?; // topic_id
        w.array(|w| {
            // partition, state_epoch, leader_epoch, start_offset
            w.fixed(4 + 4 + 4 + 8)?;
            w.array(|w| {
                // first_offset, last_offset, delivery_state, delivery_count
                w.fixed(8 + 8 + 1 + 2)?;
                w.tagged_fields()
            })?;
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// DescribeShareGroupOffsets v0.
pub fn check_describe_share_group_offsets(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| {
        w.string()?; // group_id
        w.array(|w| {
            // (null: every topic the group initialized)
            w.string()?; // topic_name
            w.array(|w| w.fixed(4))?; // partitions
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// AlterShareGroupOffsets v0.
pub fn check_alter_share_group_offsets(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.array(|w| {
        w.string()?; // topic_name
        w.array(|w| {
            w.fixed(4 + 8)?; // partition_index, start_offset
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// DeleteShareGroupOffsets v0.
pub fn check_delete_share_group_offsets(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.array(|w| {
        w.string()?; // topic_name
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

#[cfg(test)]
mod tests {
    use super::super::tests::encoded;
    use super::*;
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
    use kafka_protocol::messages::describe_share_group_offsets_request::{
        DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
    };
    use kafka_protocol::messages::read_share_group_state_request::{
        PartitionData as ReadPartition, ReadStateData,
    };
    use kafka_protocol::messages::share_acknowledge_request::{
        AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
    };
    use kafka_protocol::messages::share_fetch_request::{
        AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
    };
    use kafka_protocol::messages::write_share_group_state_request::{
        PartitionData as WritePartition, StateBatch, WriteStateData,
    };
    use kafka_protocol::messages::{
        AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequest, GroupId, ReadShareGroupStateRequest,
        ShareAcknowledgeRequest, ShareFetchRequest, TopicName, WriteShareGroupStateRequest,
    };
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn share_fetch_and_acknowledge_pass_and_cut_or_forged_bodies_do_not() {
        let id = uuid::Uuid::from_bytes([7; 16]);
        let fetch = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
            .with_member_id(Some(StrBytes::from_static_str("m")))
            .with_max_records(500)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(2)
                    .with_acknowledgement_batches(vec![
                        AcknowledgementBatch::default()
                            .with_first_offset(3)
                            .with_last_offset(5)
                            .with_acknowledge_types(vec![1, 2, 3]),
                    ])])])
            .with_forgotten_topics_data(vec![ForgottenTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![0, 1])]);
        let ack = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
            .with_member_id(Some(StrBytes::from_static_str("m")))
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(1)
                    .with_acknowledgement_batches(vec![AckBatch::default()
                        .with_first_offset(0)
                        .with_last_offset(9)
                        .with_acknowledge_types(vec![1])])])]);
        type Check = fn(&[u8], i16) -> Walk;
        let read = ReadShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_static_str("g"))
            .with_topics(vec![ReadStateData::default()
                .with_topic_id(id)
                .with_partitions(
                    vec![ReadPartition::default().with_leader_epoch(3)],
                )]);
        let write = WriteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_static_str("g"))
            .with_topics(vec![WriteStateData::default()
                .with_topic_id(id)
                .with_partitions(vec![WritePartition::default()
                    .with_start_offset(9)
                    .with_state_batches(vec![StateBatch::default()
                        .with_first_offset(9)
                        .with_last_offset(12)
                        .with_delivery_state(2)
                        .with_delivery_count(1)])])]);
        let describe = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![0, 3])])),
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("all"))),
        ]);
        let alter = AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(1)
                        .with_start_offset(40),
                ])]);
        let delete = DeleteShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(vec![DeleteShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("t")))]);
        let cases: [(Check, i16, bytes::Bytes); 7] = [
            (check_describe_share_group_offsets, 0, encoded(&describe, 0)),
            (check_alter_share_group_offsets, 0, encoded(&alter, 0)),
            (check_delete_share_group_offsets, 0, encoded(&delete, 0)),
            (check_share_fetch, 1, encoded(&fetch, 1)),
            (check_share_acknowledge, 1, encoded(&ack, 1)),
            (check_read_share_group_state, 0, encoded(&read, 0)),
            (check_write_share_group_state, 0, encoded(&write, 0)),
        ];
        for (check, version, body) in &cases {
            check(body, *version).unwrap();
            let cut = &body[..body.len() - 1];
            assert!(check(cut, *version).is_err(), "a cut body passed");
        }
        // 2^28 topics claimed by a five-byte varint, no bytes behind them.
        let mut forged = vec![2, b'g', 2, b'm', 0, 0, 0, 0];
        forged.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(check_share_acknowledge(&forged, 1).is_err());
        let mut forged = vec![2, b'g', 2, b'm'];
        forged.extend_from_slice(&[0; 24]);
        forged.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(check_share_fetch(&forged, 1).is_err());
    }
}
