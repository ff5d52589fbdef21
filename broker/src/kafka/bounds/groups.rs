//! Bounds walkers of the consumer group APIs (see the parent module).

use super::{Walk, Walker};

/// FindCoordinator v0-6 (flexible from v3; batched keys from v4).
pub fn check_find_coordinator(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 3);
    if version <= 3 {
        w.string()?; // key
    }
    if version >= 1 {
        w.fixed(1)?; // key_type
    }
    if version >= 4 {
        w.array(|w| w.string())?; // coordinator_keys
    }
    w.tagged_fields()?;
    w.end()
}

/// JoinGroup v0-9 (flexible from v6).
pub fn check_join_group(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 6);
    w.string()?; // group_id
    w.fixed(4)?; // session_timeout_ms
    if version >= 1 {
        w.fixed(4)?; // rebalance_timeout_ms
    }
    w.string()?; // member_id
    if version >= 5 {
        w.string()?; // group_instance_id
    }
    w.string()?; // protocol_type
    w.array(|w| {
        w.string()?; // name
        w.bytes()?; // metadata
        w.tagged_fields()
    })?;
    if version >= 8 {
        w.string()?; // reason
    }
    w.tagged_fields()?;
    w.end()
}

/// SyncGroup v0-5 (flexible from v4).
pub fn check_sync_group(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 4);
    w.string()?; // group_id
    w.fixed(4)?; // generation_id
    w.string()?; // member_id
    if version >= 3 {
        w.string()?; // group_instance_id
    }
    if version >= 5 {
        w.string()?; // protocol_type
        w.string()?; // protocol_name
    }
    w.array(|w| {
        w.string()?; // member_id
        w.bytes()?; // assignment
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// Heartbeat v0-4 (flexible from v4).
pub fn check_heartbeat(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 4);
    w.string()?; // group_id
    w.fixed(4)?; // generation_id
    w.string()?; // member_id
    if version >= 3 {
        w.string()?; // group_instance_id
    }
    w.tagged_fields()?;
    w.end()
}

/// LeaveGroup v0-5 (flexible from v4; a list of members from v3).
pub fn check_leave_group(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 4);
    w.string()?; // group_id
    if version <= 2 {
        w.string()?; // member_id
    } else {
        w.array(|w| {
            w.string()?; // member_id
            w.string()?; // group_instance_id
            if version >= 5 {
                w.string()?; // reason
            }
            w.tagged_fields()
        })?;
    }
    w.tagged_fields()?;
    w.end()
}

/// OffsetCommit v2-9 (flexible from v8).
pub fn check_offset_commit(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 8);
    w.string()?; // group_id
    w.fixed(4)?; // generation_id_or_member_epoch
    w.string()?; // member_id
    if version >= 7 {
        w.string()?; // group_instance_id
    }
    if version <= 4 {
        w.fixed(8)?; // retention_time_ms
    }
    w.array(|w| {
        w.string()?; // name
        w.array(|w| {
            w.fixed(4 + 8)?; // partition_index, committed_offset
            if version >= 6 {
                w.fixed(4)?; // committed_leader_epoch
            }
            w.string()?; // committed_metadata
            w.tagged_fields()
        })?;
        w.tagged_fields()
    })?;
    w.tagged_fields()?;
    w.end()
}

/// OffsetFetch v1-9 (flexible from v6; several groups from v8).
pub fn check_offset_fetch(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 6);
    let topics = |w: &mut Walker| {
        w.array(|w| {
            w.string()?; // name
            w.array(|w| w.fixed(4))?; // partition_indexes
            w.tagged_fields()
        })
    };
    if version <= 7 {
        w.string()?; // group_id
        topics(&mut w)?;
    } else {
        w.array(|w| {
            w.string()?; // group_id
            if version >= 9 {
                w.string()?; // member_id
                w.fixed(4)?; // member_epoch
            }
            topics(w)?;
            w.tagged_fields()
        })?;
    }
    if version >= 7 {
        w.fixed(1)?; // require_stable
    }
    w.tagged_fields()?;
    w.end()
}

/// ListGroups v0-5 (flexible from v3).
pub fn check_list_groups(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 3);
    if version >= 4 {
        w.array(|w| w.string())?; // states_filter
    }
    if version >= 5 {
        w.array(|w| w.string())?; // types_filter
    }
    w.tagged_fields()?;
    w.end()
}

/// DescribeGroups v0-6 (flexible from v5).
pub fn check_describe_groups(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 5);
    w.array(|w| w.string())?; // groups
    if version >= 3 {
        w.fixed(1)?; // include_authorized_operations
    }
    w.tagged_fields()?;
    w.end()
}

/// DeleteGroups v0-2 (flexible from v2).
pub fn check_delete_groups(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, version >= 2);
    w.array(|w| w.string())?; // groups_names
    w.tagged_fields()?;
    w.end()
}

/// OffsetDelete v0.
pub fn check_offset_delete(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, false);
    w.string()?; // group_id
    w.array(|w| {
        w.string()?; // name
        w.array(|w| w.fixed(4)) // partition_index
    })?;
    w.end()
}

/// ConsumerGroupHeartbeat v0-1 (flexible; the regex from v1).
pub fn check_consumer_group_heartbeat(body: &[u8], version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.string()?; // member_id
    w.fixed(4)?; // member_epoch
    w.string()?; // instance_id
    w.string()?; // rack_id
    w.fixed(4)?; // rebalance_timeout_ms
    w.array(|w| w.string())?; // subscribed_topic_names
    if version >= 1 {
        w.string()?; // subscribed_topic_regex
    }
    w.string()?; // server_assignor
    w.array(|w| {
        w.fixed(16)?; // topic_id
        w.array(|w| w.fixed(4))?; // partitions
        w.tagged_fields()
    })?; // topic_partitions
    w.tagged_fields()?;
    w.end()
}

/// ShareGroupHeartbeat v1 (flexible).
pub fn check_share_group_heartbeat(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.string()?; // group_id
    w.string()?; // member_id
    w.fixed(4)?; // member_epoch
    w.string()?; // rack_id
    w.array(|w| w.string())?; // subscribed_topic_names
    w.tagged_fields()?;
    w.end()
}

/// ShareGroupDescribe v1 (flexible; ConsumerGroupDescribe's layout).
pub fn check_share_group_describe(body: &[u8], version: i16) -> Walk {
    check_consumer_group_describe(body, version)
}

/// ConsumerGroupDescribe v0-1 (flexible).
pub fn check_consumer_group_describe(body: &[u8], _version: i16) -> Walk {
    let mut w = Walker::new(body, true);
    w.array(|w| w.string())?; // group_ids
    w.fixed(1)?; // include_authorized_operations
    w.tagged_fields()?;
    w.end()
}

#[cfg(test)]
mod tests {
    use super::super::tests::encoded;
    use super::super::*;
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn group_requests_of_every_version_pass_and_forged_counts_do_not() {
        use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
        use kafka_protocol::messages::leave_group_request::MemberIdentity;
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::offset_delete_request::{
            OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
        };
        use kafka_protocol::messages::offset_fetch_request::{
            OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
        };
        use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
        use kafka_protocol::messages::*;
        let text = |s: &'static str| StrBytes::from_static_str(s);
        let group = || GroupId(text("g"));
        type Check = fn(&[u8], i16) -> Walk;
        let mut cases: Vec<(&str, Check, i16, Bytes)> = Vec::new();
        for v in 0..=6 {
            let mut r = FindCoordinatorRequest::default();
            if v <= 3 {
                r = r.with_key(text("g"));
            } else {
                r = r.with_coordinator_keys(vec![text("a"), text("b")]);
            }
            cases.push((
                "find coordinator",
                check_find_coordinator,
                v,
                encoded(&r, v),
            ));
        }
        for v in 0..=9 {
            let mut r = JoinGroupRequest::default()
                .with_group_id(group())
                .with_session_timeout_ms(10_000)
                .with_member_id(text("m"))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(Bytes::from_static(b"meta"))]);
            if v >= 5 {
                r = r.with_group_instance_id(Some(text("i")));
            }
            if v >= 8 {
                r = r.with_reason(Some(text("why")));
            }
            cases.push(("join", check_join_group, v, encoded(&r, v)));
        }
        for v in 0..=5 {
            let mut r = SyncGroupRequest::default()
                .with_group_id(group())
                .with_generation_id(3)
                .with_member_id(text("m"))
                .with_assignments(vec![SyncGroupRequestAssignment::default()
                    .with_member_id(text("m"))
                    .with_assignment(Bytes::from_static(b"a"))]);
            if v >= 3 {
                r = r.with_group_instance_id(Some(text("i")));
            }
            if v >= 5 {
                r = r
                    .with_protocol_type(Some(text("consumer")))
                    .with_protocol_name(Some(text("range")));
            }
            cases.push(("sync", check_sync_group, v, encoded(&r, v)));
        }
        for v in 0..=4 {
            let r = HeartbeatRequest::default()
                .with_group_id(group())
                .with_generation_id(3)
                .with_member_id(text("m"));
            cases.push(("heartbeat", check_heartbeat, v, encoded(&r, v)));
        }
        for v in 0..=5 {
            let mut r = LeaveGroupRequest::default().with_group_id(group());
            if v <= 2 {
                r = r.with_member_id(text("m"));
            } else {
                r = r.with_members(vec![MemberIdentity::default()
                    .with_member_id(text("m"))
                    .with_group_instance_id(Some(text("i")))]);
            }
            cases.push(("leave", check_leave_group, v, encoded(&r, v)));
        }
        for v in 2..=9 {
            let mut partition = OffsetCommitRequestPartition::default()
                .with_partition_index(1)
                .with_committed_offset(42)
                .with_committed_metadata(Some(text("meta")));
            if v >= 6 {
                partition = partition.with_committed_leader_epoch(2);
            }
            let r = OffsetCommitRequest::default()
                .with_group_id(group())
                .with_generation_id_or_member_epoch(3)
                .with_member_id(text("m"))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(text("t")))
                    .with_partitions(vec![partition.clone(), partition])]);
            cases.push(("commit", check_offset_commit, v, encoded(&r, v)));
        }
        for v in 1..=9 {
            let r = if v <= 7 {
                OffsetFetchRequest::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(TopicName(text("t")))
                        .with_partition_indexes(vec![0, 1, 2])]))
            } else {
                let mut g = OffsetFetchRequestGroup::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                        .with_name(TopicName(text("t")))
                        .with_partition_indexes(vec![0, 1])]));
                if v >= 9 {
                    g = g.with_member_id(Some(text("m"))).with_member_epoch(3);
                }
                OffsetFetchRequest::default().with_groups(vec![g.clone(), g])
            };
            cases.push(("fetch", check_offset_fetch, v, encoded(&r, v)));
        }
        for v in 0..=5 {
            let mut r = ListGroupsRequest::default();
            if v >= 4 {
                r = r.with_states_filter(vec![text("Stable")]);
            }
            if v >= 5 {
                r = r.with_types_filter(vec![text("classic")]);
            }
            cases.push(("list", check_list_groups, v, encoded(&r, v)));
        }
        for v in 0..=6 {
            let r = DescribeGroupsRequest::default().with_groups(vec![group(), group()]);
            cases.push(("describe", check_describe_groups, v, encoded(&r, v)));
        }
        for v in 0..=2 {
            let r = DeleteGroupsRequest::default().with_groups_names(vec![group()]);
            cases.push(("delete", check_delete_groups, v, encoded(&r, v)));
        }
        let r = OffsetDeleteRequest::default()
            .with_group_id(group())
            .with_topics(vec![OffsetDeleteRequestTopic::default()
                .with_name(TopicName(text("t")))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(4)
                ])]);
        cases.push(("offset delete", check_offset_delete, 0, encoded(&r, 0)));
        for v in 2..=4 {
            use kafka_protocol::messages::offset_for_leader_epoch_request::{
                OffsetForLeaderPartition, OffsetForLeaderTopic,
            };
            let mut r = OffsetForLeaderEpochRequest::default().with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(text("t")))
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_partition(1)
                        .with_current_leader_epoch(3)
                        .with_leader_epoch(2)]),
            ]);
            if v >= 3 {
                r = r.with_replica_id(BrokerId(-1));
            }
            cases.push((
                "offset for leader epoch",
                check_offset_for_leader_epoch,
                v,
                encoded(&r, v),
            ));
        }
        for v in 0..=1 {
            use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
            let owned = TopicPartitions::default()
                .with_topic_id(uuid::Uuid::from_bytes([3; 16]))
                .with_partitions(vec![0, 2]);
            let mut r = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group())
                .with_member_id(text("m"))
                .with_instance_id(Some(text("i")))
                .with_subscribed_topic_names(Some(vec![TopicName(text("t"))]))
                .with_topic_partitions(Some(vec![owned]));
            if v >= 1 {
                r = r.with_subscribed_topic_regex(Some(text("")));
            }
            cases.push((
                "consumer group heartbeat",
                check_consumer_group_heartbeat,
                v,
                encoded(&r, v),
            ));
        }
        let share = ShareGroupHeartbeatRequest::default()
            .with_group_id(group())
            .with_member_id(text("m"))
            .with_rack_id(Some(text("r")))
            .with_subscribed_topic_names(Some(vec![TopicName(text("t"))]));
        cases.push((
            "share group heartbeat",
            check_share_group_heartbeat,
            1,
            encoded(&share, 1),
        ));
        for v in 0..=1 {
            let r = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group(), group()]);
            cases.push((
                "consumer group describe",
                check_consumer_group_describe,
                v,
                encoded(&r, v),
            ));
        }
        let r = ShareGroupDescribeRequest::default().with_group_ids(vec![group(), group()]);
        cases.push((
            "share group describe",
            check_share_group_describe,
            1,
            encoded(&r, 1),
        ));
        for (name, check, version, body) in &cases {
            check(body, *version).unwrap_or_else(|e| panic!("{name} v{version}: {e}"));
            // The walk reads exactly what the codec wrote: one byte less
            // is refused.
            assert!(
                body.is_empty() || check(&body[..body.len() - 1], *version).is_err(),
                "{name} v{version} accepted a cut body"
            );
        }
        // A count of 2^31 - 1 that no bytes back, where each API's first
        // array is.
        let forged = [0x7f, 0xff, 0xff, 0xff, 0, 0];
        assert!(check_describe_groups(&forged, 0).is_err());
        assert!(check_delete_groups(&forged, 0).is_err());
        assert!(check_list_groups(&forged, 4).is_err());
        let mut join = vec![0, 1, b'g', 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        join.extend_from_slice(&forged);
        assert!(check_join_group(&join, 1).is_err());
    }
}
