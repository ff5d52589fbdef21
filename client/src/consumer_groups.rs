//! Consumer groups of the KIP-848 protocol as ConsumerGroupDescribe shows
//! them: the group's epochs and each member's assignment beside its target.

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_describe_response::Assignment;
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, GroupId};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::ClientError;
use crate::groups::the_group;

/// Partitions by topic name.
pub type TopicPartitions = BTreeMap<String, Vec<i32>>;

/// One member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    /// Its member id.
    pub member_id: String,
    /// group.instance.id, for static members.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// The target epoch it has reached.
    pub member_epoch: i32,
    /// The client's id.
    pub client_id: String,
    /// Where the client connects from.
    pub client_host: String,
    /// The topics it subscribes to by name.
    pub subscribed_topics: Vec<String>,
    /// The regular expression it subscribes with.
    pub subscribed_regex: Option<String>,
    /// The partitions it owns now.
    pub assigned: TopicPartitions,
    /// The partitions the assignor gave it (what it moves towards).
    pub target: TopicPartitions,
    /// It speaks the classic protocol (JoinGroup) inside the group, as
    /// while the group migrates (ConsumerGroupDescribe v1's member type).
    pub classic: bool,
}

/// A consumer group as its coordinator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    /// Empty, Assigning, Reconciling or Stable.
    pub state: String,
    /// The group epoch (bumped by every membership or subscription change).
    pub epoch: i32,
    /// The epoch the targets were computed for.
    pub assignment_epoch: i32,
    /// The server-side assignor in use.
    pub assignor: String,
    /// The members.
    pub members: Vec<ConsumerMember>,
}

/// ConsumerGroupDescribe v1's member type of a classic member.
const CLASSIC_MEMBER: i8 = 0;

fn by_name(assignment: Assignment) -> TopicPartitions {
    let topics = assignment.topic_partitions.into_iter();
    topics
        .map(|t| (t.topic_name.to_string(), t.partitions))
        .collect()
}

impl Cluster {
    /// Consumer group `group` (KIP-848); GROUP_ID_NOT_FOUND for a group
    /// that does not exist or is a classic one.
    pub async fn describe_consumer_group(
        &self,
        group: &str,
    ) -> Result<ConsumerGroupDescription, ClientError> {
        let id = GroupId(StrBytes::from_string(group.to_string()));
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![id]);
        let response = self
            .on_coordinator(
                group,
                |_| request.clone(),
                |r| r.groups.first().map_or(0, |g| g.error_code),
            )
            .await?;
        let described = the_group(response.groups, "ConsumerGroupDescribe", |g| g.error_code)?;
        let members = described.members.into_iter().map(|m| ConsumerMember {
            member_id: m.member_id.to_string(),
            instance_id: m.instance_id.map(|i| i.to_string()),
            rack_id: m.rack_id.map(|r| r.to_string()),
            member_epoch: m.member_epoch,
            client_id: m.client_id.to_string(),
            client_host: m.client_host.to_string(),
            subscribed_topics: (m.subscribed_topic_names.iter())
                .map(|t| t.to_string())
                .collect(),
            subscribed_regex: m.subscribed_topic_regex.map(|r| r.to_string()),
            assigned: by_name(m.assignment),
            target: by_name(m.target_assignment),
            classic: m.member_type == CLASSIC_MEMBER,
        });
        Ok(ConsumerGroupDescription {
            state: described.group_state.to_string(),
            epoch: described.group_epoch,
            assignment_epoch: described.assignment_epoch,
            assignor: described.assignor_name.to_string(),
            members: members.collect(),
        })
    }
}
