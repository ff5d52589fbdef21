//! The group calls the HTTP API makes, on whichever broker coordinates
//! the group: this one (straight into its coordinator), or another (over
//! the Kafka protocol, as a Kafka consumer would: JoinGroup v5, SyncGroup
//! v3, Heartbeat v3, OffsetCommit v7, LeaveGroup v3, all with the static
//! member's instance id).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::cluster::Cluster;
use bytes::Bytes;
use futures::future::{select, Either};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::groups::membership::Join;
use crate::groups::records::CommittedOffset;

use crate::kafka::Code;
use crate::server::shard::Shard;

/// Where a group's coordinator runs.
#[derive(Debug, Clone, Copy)]
pub enum At {
    /// On this broker.
    Here,
    /// On the broker with this Kafka listener.
    There(SocketAddr),
}

/// Where `group`'s coordinator runs, or why it is not known.
pub fn coordinator(shard: &Shard, group: &str) -> Result<At, Code> {
    let (broker, listener) = shard.cluster.group_coordinator(group)?;
    if broker == shard.cluster.me {
        return Ok(At::Here);
    }
    listener
        .parse()
        .map(At::There)
        .map_err(|_| ResponseError::CoordinatorNotAvailable.code())
}

/// A join's outcome.
pub struct Joined {
    /// This member's id.
    pub member_id: String,
    /// The generation.
    pub generation: i32,
    /// Whether this member leads (and must assign).
    pub leader: bool,
    /// For the leader: every member's id and subscription metadata.
    pub members: Vec<(String, Bytes)>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

async fn remote<R: kafka_protocol::protocol::Request>(
    cluster: &Cluster,
    address: SocketAddr,
    request: &R,
    version: i16,
    wait: Duration,
) -> Result<R::Response, Code> {
    let call = async {
        let mut connection = cluster.connect_to(address, "http-api").await.map_err(|e| {
            tracing::warn!(%address, error = %e, "cannot forward to the group's coordinator");
            ResponseError::CoordinatorNotAvailable.code()
        })?;
        connection
            .call(request, version)
            .await
            .map_err(|_| ResponseError::CoordinatorNotAvailable.code())
    };
    let timer = glommio::timer::sleep(wait + Duration::from_secs(5));
    match select(Box::pin(call), Box::pin(timer)).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(ResponseError::RequestTimedOut.code()),
    }
}

/// Joins (blocking through the rebalance).
pub async fn join(shard: &Rc<Shard>, at: At, group: &str, join: Join) -> Result<Joined, Code> {
    match at {
        At::Here => {
            let name = group.to_string();
            let joined = shard
                .coordinator
                .on_group(group, Err, move |partition| {
                    Box::pin(async move { Ok(partition.join(&name, join).await) })
                })
                .await?;
            if joined.error != 0 {
                return Err(joined.error);
            }
            Ok(Joined {
                leader: joined.leader == joined.member_id,
                member_id: joined.member_id,
                generation: joined.generation,
                members: joined
                    .members
                    .into_iter()
                    .map(|(id, _, metadata)| (id, metadata))
                    .collect(),
            })
        }
        At::There(address) => {
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_session_timeout_ms(join.session_timeout.as_millis() as i32)
                .with_rebalance_timeout_ms(join.rebalance_timeout.as_millis() as i32)
                .with_member_id(text(&join.member_id))
                .with_group_instance_id(join.instance_id.as_deref().map(text))
                .with_protocol_type(text(&join.protocol_type))
                .with_protocols(
                    join.protocols
                        .iter()
                        .map(|(name, metadata)| {
                            JoinGroupRequestProtocol::default()
                                .with_name(text(name))
                                .with_metadata(metadata.clone())
                        })
                        .collect(),
                );
            let response =
                remote(&shard.cluster, address, &request, 5, join.rebalance_timeout).await?;
            if response.error_code != 0 {
                return Err(response.error_code);
            }
            Ok(Joined {
                leader: response.leader == response.member_id,
                member_id: response.member_id.to_string(),
                generation: response.generation_id,
                members: response
                    .members
                    .into_iter()
                    .map(|m| (m.member_id.to_string(), m.metadata))
                    .collect(),
            })
        }
    }
}

/// A member's sync: its assignment (the leader hands in everyone's).
pub async fn sync(
    shard: &Rc<Shard>,
    at: At,
    group: &str,
    member: (&str, &str, i32),
    assignments: Vec<(String, Bytes)>,
) -> Result<Bytes, Code> {
    let (member_id, instance, generation) = member;
    match at {
        At::Here => {
            let (name, member_id, instance) = (
                group.to_string(),
                member_id.to_string(),
                instance.to_string(),
            );
            let (code, assignment) = shard
                .coordinator
                .on_group(
                    group,
                    |code| (code, Bytes::new()),
                    move |partition| {
                        Box::pin(async move {
                            partition
                                .sync(
                                    &name,
                                    &member_id,
                                    Some(&instance),
                                    generation,
                                    (assignments, (None, None)),
                                )
                                .await
                        })
                    },
                )
                .await;
            if code != 0 {
                return Err(code);
            }
            Ok(assignment)
        }
        At::There(address) => {
            let request = SyncGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_generation_id(generation)
                .with_member_id(text(member_id))
                .with_group_instance_id(Some(text(instance)))
                .with_assignments(
                    assignments
                        .into_iter()
                        .map(|(member, assignment)| {
                            SyncGroupRequestAssignment::default()
                                .with_member_id(text(&member))
                                .with_assignment(assignment)
                        })
                        .collect(),
                );
            let response = remote(
                &shard.cluster,
                address,
                &request,
                3,
                Duration::from_secs(60),
            )
            .await?;
            if response.error_code != 0 {
                return Err(response.error_code);
            }
            Ok(response.assignment)
        }
    }
}

/// A heartbeat: 0, or why the member must join again.
pub async fn heartbeat(shard: &Rc<Shard>, at: At, group: &str, member: (&str, &str, i32)) -> Code {
    let (member_id, instance, generation) = member;
    match at {
        At::Here => {
            let (name, member_id, instance) = (
                group.to_string(),
                member_id.to_string(),
                instance.to_string(),
            );
            shard
                .coordinator
                .on_group(
                    group,
                    |code| code,
                    move |partition| {
                        Box::pin(async move {
                            partition.heartbeat(&name, &member_id, Some(&instance), generation)
                        })
                    },
                )
                .await
        }
        At::There(address) => {
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_generation_id(generation)
                .with_member_id(text(member_id))
                .with_group_instance_id(Some(text(instance)));
            match remote(&shard.cluster, address, &request, 3, Duration::ZERO).await {
                Ok(response) => response.error_code,
                Err(code) => code,
            }
        }
    }
}

/// Commits offsets (topic, partition, committed) for a member.
pub async fn commit(
    shard: &Rc<Shard>,
    at: At,
    group: &str,
    member: (&str, &str, i32),
    offsets: Vec<(String, i32, CommittedOffset)>,
) -> Code {
    let (member_id, instance, generation) = member;
    match at {
        At::Here => {
            let (name, member_id, instance) = (
                group.to_string(),
                member_id.to_string(),
                instance.to_string(),
            );
            shard
                .coordinator
                .on_group(
                    group,
                    |code| code,
                    move |partition| {
                        Box::pin(async move {
                            partition
                                .commit(&name, (&member_id, Some(&instance), generation), offsets)
                                .await
                        })
                    },
                )
                .await
        }
        At::There(address) => {
            let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
            for (topic, partition, committed) in offsets {
                let entry = OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(committed.offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(text("")));
                match topics.iter_mut().find(|t| t.name.as_str() == topic) {
                    Some(t) => t.partitions.push(entry),
                    None => topics.push(
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(&topic)))
                            .with_partitions(vec![entry]),
                    ),
                }
            }
            let request = OffsetCommitRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(text(member_id))
                .with_group_instance_id(Some(text(instance)))
                .with_topics(topics);
            match remote(&shard.cluster, address, &request, 7, Duration::ZERO).await {
                Ok(response) => response
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0),
                Err(code) => code,
            }
        }
    }
}

/// A member leaves.
pub async fn leave(
    shard: &Rc<Shard>,
    at: At,
    group: &str,
    member_id: &str,
    instance: &str,
) -> Code {
    match at {
        At::Here => {
            let (name, member_id, instance) = (
                group.to_string(),
                member_id.to_string(),
                instance.to_string(),
            );
            let codes = shard
                .coordinator
                .on_group(
                    group,
                    |code| vec![code],
                    move |partition| {
                        Box::pin(async move {
                            partition
                                .leave(&name, vec![(member_id, Some(instance))])
                                .await
                        })
                    },
                )
                .await;
            codes.into_iter().find(|c| *c != 0).unwrap_or(0)
        }
        At::There(address) => {
            let request = LeaveGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_members(vec![MemberIdentity::default()
                    .with_member_id(text(member_id))
                    .with_group_instance_id(Some(text(instance)))]);
            match remote(&shard.cluster, address, &request, 3, Duration::ZERO).await {
                Ok(response) if response.error_code != 0 => response.error_code,
                Ok(response) => response
                    .members
                    .iter()
                    .map(|m| m.error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0),
                Err(code) => code,
            }
        }
    }
}
