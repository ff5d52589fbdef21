//! Consumer group administration: find a group's coordinator, list,
//! describe and delete groups, read and set committed offsets (what
//! `kafka-consumer-groups.sh` does). Setting offsets is for groups without
//! members: the coordinator refuses commits from outside a live group.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;

use crate::cluster::Cluster;
use crate::connection::ClientError;

/// A group as ListGroups names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Its id.
    pub group: String,
    /// "consumer", or empty for a group that only stores offsets.
    pub protocol_type: String,
    /// Its state (classic: Empty, Stable, PreparingRebalance,
    /// CompletingRebalance; consumer: Empty, Assigning, Reconciling,
    /// Stable).
    pub state: String,
    /// "classic", or "consumer" for a group of the KIP-848 protocol.
    pub group_type: String,
}

/// One member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Its member id.
    pub member_id: String,
    /// group.instance.id, for static members.
    pub instance_id: Option<String>,
    /// The client's id.
    pub client_id: String,
    /// Where the client connects from.
    pub client_host: String,
    /// Its subscription (the protocol's metadata).
    pub metadata: Bytes,
    /// Its assignment (the protocol's assignment bytes).
    pub assignment: Bytes,
}

/// A group's membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Its state ("Dead" if it does not exist).
    pub state: String,
    /// "consumer" for consumer groups.
    pub protocol_type: String,
    /// The assignor chosen.
    pub protocol: String,
    /// The members.
    pub members: Vec<MemberDescription>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Coordinator errors worth asking again for (it moved, or is loading).
fn retriable(code: i16) -> bool {
    [
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::CoordinatorLoadInProgress,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// How many times a coordinator call is tried.
const ATTEMPTS: usize = 10;

impl Cluster {
    /// The broker coordinating `group`.
    pub async fn find_coordinator(&self, group: &str) -> Result<i32, ClientError> {
        self.find_coordinator_of(0, group).await
    }

    /// The broker coordinating transactional id `id`.
    pub async fn find_transaction_coordinator(&self, id: &str) -> Result<i32, ClientError> {
        self.find_coordinator_of(1, id).await
    }

    /// The broker coordinating `key` of `key_type` (0: a group, 1: a
    /// transactional id), retried while it is being chosen or loaded.
    async fn find_coordinator_of(&self, key_type: i8, key: &str) -> Result<i32, ClientError> {
        let mut last = 0;
        for _ in 0..ATTEMPTS {
            // One key before v4, a list of keys from v4.
            let build = |version: i16| {
                let request = FindCoordinatorRequest::default().with_key_type(key_type);
                if version >= 4 {
                    request.with_coordinator_keys(vec![text(key)])
                } else {
                    request.with_key(text(key))
                }
            };
            let connection = self.any().await?;
            let response = self.call_built(&connection, build).await?;
            let (code, node) = match response.coordinators.first() {
                Some(c) => (c.error_code, c.node_id.0),
                None => (response.error_code, response.node_id.0),
            };
            if code == 0 {
                // The coordinator may be a broker not known yet.
                if self.brokers().iter().all(|b| b.id != node) {
                    self.refresh(Some(&[]), false).await?;
                }
                return Ok(node);
            }
            if !retriable(code) {
                return Err(ClientError::Broker(code));
            }
            last = code;
            glommio::timer::sleep(Duration::from_millis(200)).await;
        }
        Err(ClientError::Broker(last))
    }

    /// Calls `request` on the coordinator of `group`; `code_of` picks the
    /// response's group error, and a retriable one sends it again.
    pub(crate) async fn on_coordinator<R: Request>(
        &self,
        group: &str,
        build: impl Fn(i16) -> R,
        code_of: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response, ClientError> {
        let mut last = 0;
        for _ in 0..ATTEMPTS {
            let node = self.find_coordinator(group).await?;
            let connection = self.broker(node).await?;
            let response = self.call_built(&connection, &build).await?;
            let code = code_of(&response);
            if !retriable(code) {
                return Ok(response);
            }
            last = code;
            glommio::timer::sleep(Duration::from_millis(200)).await;
        }
        Err(ClientError::Broker(last))
    }

    /// Every group of every broker, sorted by id.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>, ClientError> {
        self.refresh(Some(&[]), false).await?;
        let mut groups = Vec::new();
        for broker in self.brokers() {
            let connection = self.broker(broker.id).await?;
            let response = self
                .call_on(&connection, &ListGroupsRequest::default())
                .await?;
            if response.error_code != 0 {
                return Err(ClientError::Broker(response.error_code));
            }
            groups.extend(response.groups.into_iter().map(|g| GroupListing {
                group: g.group_id.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                group_type: g.group_type.to_string(),
            }));
        }
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(groups)
    }

    /// A group's membership.
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription, ClientError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let response = self
            .on_coordinator(
                group,
                |_| request.clone(),
                |r| r.groups.first().map_or(0, |g| g.error_code),
            )
            .await?;
        let described = the_group(response.groups, "DescribeGroups", |g| g.error_code)?;
        Ok(GroupDescription {
            state: described.group_state.to_string(),
            protocol_type: described.protocol_type.to_string(),
            protocol: described.protocol_data.to_string(),
            members: described
                .members
                .into_iter()
                .map(|m| MemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    metadata: m.member_metadata,
                    assignment: m.member_assignment,
                })
                .collect(),
        })
    }

    /// A group's committed offsets, by (topic, partition): all of them, or
    /// those of `topics` (partitions without a commit are left out).
    pub async fn committed_offsets(
        &self,
        group: &str,
        topics: Option<&[(&str, Vec<i32>)]>,
    ) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
        // One group before v8, a list of groups from v8.
        let build = |version: i16| {
            if version >= 8 {
                let wanted = topics.map(|topics| {
                    topics
                        .iter()
                        .map(|(t, partitions)| {
                            OffsetFetchRequestTopics::default()
                                .with_name(TopicName(text(t)))
                                .with_partition_indexes(partitions.clone())
                        })
                        .collect()
                });
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(text(group)))
                    .with_topics(wanted)])
            } else {
                let wanted = topics.map(|topics| {
                    topics
                        .iter()
                        .map(|(t, partitions)| {
                            OffsetFetchRequestTopic::default()
                                .with_name(TopicName(text(t)))
                                .with_partition_indexes(partitions.clone())
                        })
                        .collect()
                });
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(text(group)))
                    .with_topics(wanted)
            }
        };
        let group_code = |r: &OffsetFetchResponse| match r.groups.first() {
            Some(g) => g.error_code,
            None => r.error_code,
        };
        let response = self.on_coordinator(group, build, group_code).await?;
        match group_code(&response) {
            0 => {}
            code => return Err(ClientError::Broker(code)),
        }
        // (topic, partition, offset, error) in either layout.
        let rows: Vec<(String, i32, i64, i16)> = match response.groups.into_iter().next() {
            Some(g) => g
                .topics
                .into_iter()
                .flat_map(|t| {
                    let name = t.name.to_string();
                    t.partitions.into_iter().map(move |p| {
                        (
                            name.clone(),
                            p.partition_index,
                            p.committed_offset,
                            p.error_code,
                        )
                    })
                })
                .collect(),
            None => response
                .topics
                .into_iter()
                .flat_map(|t| {
                    let name = t.name.to_string();
                    t.partitions.into_iter().map(move |p| {
                        (
                            name.clone(),
                            p.partition_index,
                            p.committed_offset,
                            p.error_code,
                        )
                    })
                })
                .collect(),
        };
        let mut out = BTreeMap::new();
        for (topic, partition, offset, code) in rows {
            if code != 0 {
                return Err(ClientError::Broker(code));
            }
            if offset >= 0 {
                out.insert((topic, partition), offset);
            }
        }
        Ok(out)
    }

    /// Commits offsets for a group without members (as an operator's
    /// reset does: generation -1, no member id).
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), ClientError> {
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), offset) in offsets {
            topics.entry(topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(t)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let first_code = |r: &kafka_protocol::messages::OffsetCommitResponse| {
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .find(|c| *c != 0)
                .unwrap_or(0)
        };
        let response = self
            .on_coordinator(group, |_| request.clone(), first_code)
            .await?;
        match first_code(&response) {
            0 => Ok(()),
            code => Err(ClientError::Broker(code)),
        }
    }

    /// Deletes a group without members, with its committed offsets.
    pub async fn delete_group(&self, group: &str) -> Result<(), ClientError> {
        let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]);
        let response = self
            .on_coordinator(
                group,
                |_| request.clone(),
                |r| r.results.first().map_or(0, |g| g.error_code),
            )
            .await?;
        match response.results.first().map_or(0, |g| g.error_code) {
            0 => Ok(()),
            code => Err(ClientError::Broker(code)),
        }
    }
}

/// The one group an answer about one group describes, or its error (an
/// answer without it: a protocol error naming `api`).
pub(crate) fn the_group<G>(
    groups: Vec<G>,
    api: &str,
    code: impl Fn(&G) -> i16,
) -> Result<G, ClientError> {
    let group = (groups.into_iter().next())
        .ok_or_else(|| ClientError::Protocol(format!("{api} answered nothing")))?;
    match code(&group) {
        0 => Ok(group),
        code => Err(ClientError::Broker(code)),
    }
}
