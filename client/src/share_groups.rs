//! Share groups (KIP-932) as ShareGroupDescribe shows them: the group's
//! epochs and each member's partitions (any number of members may share
//! one partition).

use kafka_protocol::messages::{GroupId, ShareGroupDescribeRequest};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::ClientError;
use crate::consumer_groups::TopicPartitions;

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
        let described = (response.groups.into_iter().next())
            .ok_or_else(|| ClientError::Protocol("ShareGroupDescribe answered nothing".into()))?;
        if described.error_code != 0 {
            return Err(ClientError::Broker(described.error_code));
        }
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
