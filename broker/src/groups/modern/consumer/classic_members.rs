//! Members speaking the classic protocol (JoinGroup, SyncGroup,
//! Heartbeat) inside a consumer group, as Kafka 4 serves them while a
//! group migrates between the protocols: the broker's assignor decides
//! their partitions like everyone's, and the classic requests only carry
//! the reconciliation.
//!
//! - JoinGroup is a full heartbeat: its subscription (the member's first
//!   protocol's metadata) gives the topics and the partitions the member
//!   still owns, and the answer's generation is the member's epoch after
//!   the step. Every classic member is a follower (no leader, no member
//!   list): the assignment is not theirs to compute.
//! - SyncGroup hands out the partitions the member has now, encoded as
//!   its subscription's version of the consumer protocol.
//! - Heartbeat answers REBALANCE_IN_PROGRESS while the member has a step
//!   to take (the group moved past its epoch, it must give partitions up,
//!   or partitions it waited for are free): the client joins again, which
//!   takes the step. A partition is never owned by two members: one told
//!   to give some up keeps its epoch until its next join shows them gone.
//!
//! Kafka's rules (`classicGroupJoinToConsumerGroup` and the sync and
//! heartbeat beside it, 4.0-4.2).

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use super::{ClassicMetadata, ConsumerGroup, Member, Partition, Record, Request};
use super::{MemberState, PartitionRacks, TopicId, TopicView};
use crate::groups::consumer_protocol::{self, Subscription};
use crate::kafka::Code;

/// A JoinGroup, as a consumer group needs it.
#[derive(Debug, Clone, Default)]
pub struct ClassicJoin {
    /// Empty for a new member.
    pub member_id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's address.
    pub client_host: String,
    /// "consumer" for consumers.
    pub protocol_type: String,
    /// (protocol name, subscription), in the member's preference.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// JoinGroup v4+: a new dynamic member is first told its id.
    pub require_known_member_id: bool,
}

/// What a classic join comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassicJoined {
    /// A new member told its id (MEMBER_ID_REQUIRED): nothing stored, it
    /// joins again with it.
    MemberIdRequired(String),
    /// Joined: the records to write, then the answer.
    Joined {
        /// The records, in order.
        records: Vec<Record>,
        /// Its member id.
        member_id: String,
        /// Its generation: its epoch after the step.
        generation: i32,
        /// The protocol (assignor) name it is told: its own first.
        protocol: String,
    },
}

impl ConsumerGroup {
    /// Decides a JoinGroup of group `group_id`; `new_member_id` makes an
    /// id for a member that has none.
    pub fn classic_join(
        &self,
        group_id: &str,
        join: &ClassicJoin,
        new_member_id: &mut dyn FnMut() -> String,
        (topics, racks): (&TopicView, &dyn Fn() -> PartitionRacks<TopicId>),
    ) -> Result<ClassicJoined, Code> {
        let inconsistent = Err(ResponseError::InconsistentGroupProtocol.code());
        let Some((protocol, metadata)) = join.protocols.first() else {
            return inconsistent;
        };
        if join.protocol_type != "consumer" || !self.speaks_a_common_protocol(join) {
            return inconsistent;
        }
        let Some(subscription) = consumer_protocol::subscription(metadata) else {
            return inconsistent;
        };
        let mut group = self.clone();
        let mut records = Vec::new();
        let member_id = match self.joining_member_id(join, new_member_id)? {
            Joining::Told(id) => return Ok(ClassicJoined::MemberIdRequired(id)),
            Joining::As(id) => {
                let speaks = |m: &Member| m.metadata.classic.is_some();
                if self.members.get(&id).is_some_and(|m| !speaks(m)) {
                    // A consumer protocol member's id.
                    return Err(ResponseError::UnknownMemberId.code());
                }
                id
            }
            // Of either protocol (a static member rolled back to classic).
            Joining::Replacing { old, new } => {
                records.extend(group.replace_member(group_id, &old, &new));
                new
            }
        };
        let current = group.members.get(&member_id).cloned();
        let req = as_request(&member_id, join, &subscription, current.as_ref(), topics);
        let classic = ClassicMetadata {
            session_timeout_ms: join.session_timeout_ms,
            protocols: join.protocols.clone(),
        };
        let context = (topics, racks);
        let decision = self.step(
            group_id,
            group,
            (&req, Some(classic)),
            (current, records),
            context,
        )?;
        Ok(ClassicJoined::Joined {
            records: decision.records,
            member_id,
            generation: decision.answer.member_epoch,
            protocol: protocol.clone(),
        })
    }

    /// SyncGroup: the partitions member `member_id` has now, encoded for
    /// it (`protocol`: the type and name it sent, if any).
    pub fn classic_sync(
        &self,
        (member_id, instance_id, generation): (&str, Option<&str>, i32),
        protocol: (Option<&str>, Option<&str>),
        topics: &TopicView,
    ) -> Result<Vec<u8>, Code> {
        let member = self.classic_member(member_id, instance_id, generation)?;
        let classic = member.metadata.classic.as_ref().expect("a classic member");
        let first = classic.protocols.first();
        let (protocol_type, protocol_name) = protocol;
        let named_another = protocol_name.is_some_and(|n| first.is_none_or(|(f, _)| f != n));
        if protocol_type.is_some_and(|t| t != "consumer") || named_another {
            return Err(ResponseError::InconsistentGroupProtocol.code());
        }
        let revoking = member.assignment.state == MemberState::UnrevokedPartitions;
        if self.epoch > member.assignment.epoch && !revoking {
            return Err(ResponseError::RebalanceInProgress.code());
        }
        let version = first
            .and_then(|(_, metadata)| consumer_protocol::subscription(metadata))
            .map_or(0, |s| s.version.clamp(0, 3));
        let assigned = by_name(&member.assignment.assigned, topics);
        Ok(consumer_protocol::encode_assignment_at(version, &assigned))
    }

    /// Heartbeat: REBALANCE_IN_PROGRESS while the member has a step to
    /// take (it joins again to take it).
    pub fn classic_heartbeat(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), Code> {
        let member = self.classic_member(member_id, instance_id, generation)?;
        let a = &member.assignment;
        let waited_for_is_free = || {
            let empty = BTreeSet::new();
            let target = self.targets.get(member_id).unwrap_or(&empty);
            let held_elsewhere = |p: &Partition| {
                self.members.iter().any(|(id, m)| {
                    id != member_id
                        && (m.assignment.assigned.contains(p)
                            || m.assignment.pending_revocation.contains(p))
                })
            };
            !target.difference(&a.assigned).any(held_elsewhere)
        };
        let step_to_take = a.epoch < self.epoch
            || a.state == MemberState::UnrevokedPartitions
            || (a.state == MemberState::UnreleasedPartitions && waited_for_is_free());
        match step_to_take {
            true => Err(ResponseError::RebalanceInProgress.code()),
            false => Ok(()),
        }
    }

    /// Member `member_id` if it is a classic member at `generation`.
    fn classic_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<&Member, Code> {
        let unknown = Err(ResponseError::UnknownMemberId.code());
        let Some(member) = self.members.get(member_id) else {
            return unknown;
        };
        if instance_id.is_some() && member.metadata.instance_id.as_deref() != instance_id {
            return Err(ResponseError::FencedInstanceId.code());
        }
        if member.metadata.classic.is_none() {
            return unknown;
        }
        if member.assignment.epoch != generation {
            return Err(ResponseError::IllegalGeneration.code());
        }
        Ok(member)
    }

    /// Whether one of the joining member's protocols is one every other
    /// classic member supports (they must agree, as in a classic group).
    fn speaks_a_common_protocol(&self, join: &ClassicJoin) -> bool {
        let others = self.members.iter().filter(|(id, _)| **id != join.member_id);
        let classics: Vec<&ClassicMetadata> = others
            .filter_map(|(_, m)| m.metadata.classic.as_ref())
            .collect();
        join.protocols.iter().any(|(name, _)| {
            let supports = |c: &&ClassicMetadata| c.protocols.iter().any(|(n, _)| n == name);
            classics.iter().all(supports)
        })
    }

    /// The member id a join goes on with (Kafka's rules for classic
    /// members of a consumer group).
    fn joining_member_id(
        &self,
        join: &ClassicJoin,
        new_member_id: &mut dyn FnMut() -> String,
    ) -> Result<Joining, Code> {
        let holder = join.instance_id.as_ref().and_then(|instance| {
            let holds =
                |(_, m): &(&String, &Member)| m.metadata.instance_id.as_ref() == Some(instance);
            self.members.iter().find(holds).map(|(id, _)| id.clone())
        });
        match (
            join.member_id.is_empty(),
            join.instance_id.is_some(),
            holder,
        ) {
            // A static member's new process takes its place.
            (true, true, Some(old)) => Ok(Joining::Replacing {
                old,
                new: new_member_id(),
            }),
            (true, true, None) => Ok(Joining::As(new_member_id())),
            (true, false, _) if join.require_known_member_id => Ok(Joining::Told(new_member_id())),
            (true, false, _) => Ok(Joining::As(new_member_id())),
            (false, true, None) => Err(ResponseError::UnknownMemberId.code()),
            (false, true, Some(old)) if old != join.member_id => {
                Err(ResponseError::FencedInstanceId.code())
            }
            // A known id, or one told before (not stored: any id joins).
            (false, _, _) => Ok(Joining::As(join.member_id.clone())),
        }
    }
}

/// How a classic join names its member.
enum Joining {
    /// A new member is told its id first.
    Told(String),
    /// It goes on as this id.
    As(String),
    /// A static member's new process replaces `old` as `new`.
    Replacing { old: String, new: String },
}

/// The join as a full heartbeat: the member's epoch (it carries none),
/// its subscription and the partitions it says it owns (of existing
/// topics).
fn as_request(
    member_id: &str,
    join: &ClassicJoin,
    subscription: &Subscription,
    current: Option<&Member>,
    topics: &TopicView,
) -> Request {
    let owned = subscription.owned.iter().flat_map(|(topic, partitions)| {
        let id = topics.get(topic).map(|(id, _)| *id);
        id.into_iter()
            .flat_map(move |id| partitions.iter().map(move |p| (id, *p)))
    });
    Request {
        member_id: member_id.to_string(),
        member_epoch: current.map_or(0, |m| m.assignment.epoch),
        instance_id: join.instance_id.clone(),
        rack_id: subscription.rack.clone(),
        rebalance_timeout_ms: join.rebalance_timeout_ms,
        subscribed_topic_names: Some(subscription.topics.clone()),
        subscribed_topic_regex: Some(String::new()),
        server_assignor: None,
        owned: Some(owned.collect()),
        client_id: join.client_id.clone(),
        client_host: join.client_host.clone(),
    }
}

/// Partitions by topic name (those of deleted topics left out).
pub(super) fn by_name(
    partitions: &BTreeSet<Partition>,
    topics: &TopicView,
) -> Vec<(String, Vec<i32>)> {
    let name_of = |id: &TopicId| topics.iter().find(|(_, (t, _))| t == id).map(|(n, _)| n);
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic_id, partition) in partitions {
        let Some(name) = name_of(topic_id) else {
            continue;
        };
        match out.last_mut() {
            Some((last, list)) if last == name => list.push(*partition),
            _ => out.push((name.clone(), vec![*partition])),
        }
    }
    out
}

#[cfg(test)]
mod tests;
