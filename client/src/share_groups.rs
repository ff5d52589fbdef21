//! Share groups (KIP-932) as ShareGroupDescribe shows them: the group's
//! epochs and each member's partitions (any number of members may share
//! one partition); their start offsets, read, reset and deleted
//! (Describe/Alter/DeleteShareGroupOffsets).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, GroupId, ShareGroupDescribeRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::ClientError;
use crate::consumer_groups::TopicPartitions;
use crate::groups::the_group;

/// One member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    /// Its member id.
    pub member_id: String,
    /// Its epoch.
    pub member_epoch: i32,
    /// Its client id.
    pub client_id: String,
    /// Its host, as the coordinator saw it.
    pub client_host: String,
    /// The topics it subscribed to.
    pub subscribed_topics: Vec<String>,
    /// Its partitions, by topic name.
    pub assigned: TopicPartitions,
}

/// A share group as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupDescription {
    /// Empty or Stable.
    pub state: String,
    /// The group epoch.
    pub epoch: i32,
    /// The epoch the targets were computed for.
    pub assignment_epoch: i32,
    /// The assignor ("simple").
    pub assignor: String,
    /// The members.
    pub members: Vec<ShareMember>,
}

impl Cluster {
    /// Share group `group`; GROUP_ID_NOT_FOUND for one that does not
    /// exist or is of another kind.
    pub async fn describe_share_group(
        &self,
        group: &str,
    ) -> Result<ShareGroupDescription, ClientError> {
        let id = GroupId(StrBytes::from_string(group.to_string()));
        let request = ShareGroupDescribeRequest::default().with_group_ids(vec![id]);
        let response = self
            .on_coordinator(
                group,
                |_| request.clone(),
                |r| r.groups.first().map_or(0, |g| g.error_code),
            )
            .await?;
        let described = the_group(response.groups, "ShareGroupDescribe", |g| g.error_code)?;
        let members = described.members.into_iter().map(|m| ShareMember {
            member_id: m.member_id.to_string(),
            member_epoch: m.member_epoch,
            client_id: m.client_id.to_string(),
            client_host: m.client_host.to_string(),
            subscribed_topics: (m.subscribed_topic_names.iter())
                .map(|t| t.to_string())
                .collect(),
            assigned: (m.assignment.topic_partitions.into_iter())
                .map(|t| (t.topic_name.to_string(), t.partitions))
                .collect(),
        });
        Ok(ShareGroupDescription {
            state: described.group_state.to_string(),
            epoch: described.group_epoch,
            assignment_epoch: described.assignment_epoch,
            assignor: described.assignor_name.to_string(),
            members: members.collect(),
        })
    }
}

/// A share group's start offsets by topic and partition (the first
/// offset not yet acknowledged or archived; partitions never initialized
/// are left out).
pub type ShareStartOffsets = BTreeMap<(String, i32), i64>;

impl Cluster {
    /// The start offsets `group` stores for every partition it
    /// initialized (DescribeShareGroupOffsets with no topics named).
    pub async fn share_group_offsets(&self, group: &str) -> Result<ShareStartOffsets, ClientError> {
        let asked = DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            // (null: every topic; the codec's default is an empty list)
            .with_topics(None);
        let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![asked]);
        let response = self
            .on_coordinator(
                group,
                |_| request.clone(),
                |r| r.groups.first().map_or(0, |g| g.error_code),
            )
            .await?;
        let described = the_group(response.groups, "DescribeShareGroupOffsets", |g| {
            g.error_code
        })?;
        let mut starts = BTreeMap::new();
        for topic in described.topics {
            for p in topic.partitions {
                if p.error_code != 0 {
                    return Err(ClientError::Broker(p.error_code));
                }
                if p.start_offset >= 0 {
                    starts.insert(
                        (topic.topic_name.to_string(), p.partition_index),
                        p.start_offset,
                    );
                }
            }
        }
        Ok(starts)
    }

    /// Resets `group`'s share-partitions to start at the offsets of
    /// `plan` (-1: as the group's `share.auto.offset.reset` says); the
    /// group must have no members. The first partition's refusal is the
    /// error.
    pub async fn alter_share_group_offsets(
        &self,
        group: &str,
        plan: &ShareStartOffsets,
    ) -> Result<(), ClientError> {
        let mut topics: BTreeMap<&str, Vec<AlterShareGroupOffsetsRequestPartition>> =
            BTreeMap::new();
        for ((topic, partition), start) in plan {
            topics.entry(topic).or_default().push(
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_start_offset(*start),
            );
        }
        let topics = topics.into_iter().map(|(name, partitions)| {
            AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(StrBytes::from_string(name.to_string())))
                .with_partitions(partitions)
        });
        let request = AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(topics.collect());
        let response = self
            .on_coordinator(group, |_| request.clone(), |r| r.error_code)
            .await?;
        let partitions = response.responses.iter().flat_map(|t| &t.partitions);
        first_refusal(response.error_code, partitions.map(|p| p.error_code))
    }

    /// Deletes `group`'s share-partition states of `topics` (its next
    /// members start as `share.auto.offset.reset` says); the group must
    /// have no members.
    pub async fn delete_share_group_offsets(
        &self,
        group: &str,
        topics: &[String],
    ) -> Result<(), ClientError> {
        let named = topics.iter().map(|t| {
            DeleteShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(StrBytes::from_string(t.clone())))
        });
        let request = DeleteShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(named.collect());
        let response = self
            .on_coordinator(group, |_| request.clone(), |r| r.error_code)
            .await?;
        let topic_codes = response.responses.iter().map(|t| t.error_code);
        first_refusal(response.error_code, topic_codes)
    }
}

/// The first refusal of an answer: its own code, then each part's.
fn first_refusal(code: i16, parts: impl Iterator<Item = i16>) -> Result<(), ClientError> {
    match std::iter::once(code).chain(parts).find(|c| *c != 0) {
        Some(code) => Err(ClientError::Broker(code)),
        None => Ok(()),
    }
}
