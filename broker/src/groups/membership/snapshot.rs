//! A group's membership as `__consumer_offsets` stores it and
//! DescribeGroups shows it, and a group restored from it by a new
//! coordinator.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Group, GroupState, Member, MemberId};

/// One member as stored and described: what `__consumer_offsets` keeps of
/// a group, and what DescribeGroups shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// Its member id.
    pub member_id: MemberId,
    /// group.instance.id, for static members.
    pub instance_id: Option<String>,
    /// The client's id.
    pub client_id: String,
    /// Where the client connected from.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout: Duration,
    /// Rebalance timeout.
    pub rebalance_timeout: Duration,
    /// The member's metadata for the group's protocol (its subscription).
    pub subscription: Bytes,
    /// Its assignment from the leader.
    pub assignment: Bytes,
}

/// A group's membership as stored and described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The state.
    pub state: GroupState,
    /// "consumer" for consumer groups (empty while never joined).
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The chosen protocol (the assignor).
    pub protocol: Option<String>,
    /// The leader.
    pub leader: Option<MemberId>,
    /// The members.
    pub members: Vec<MemberSnapshot>,
}

impl Group {
    /// A group as stored: Stable with its members (each session starting
    /// `now`), or Empty. Members that do not come back within their
    /// session are removed and the rest rebalance, as after any expiry.
    pub fn restore(
        id: &str,
        stored: GroupSnapshot,
        initial_delay: Duration,
        now: Instant,
    ) -> Group {
        let mut group = Group::new(id, initial_delay);
        group.generation = stored.generation;
        group.protocol_type = (!stored.protocol_type.is_empty()).then_some(stored.protocol_type);
        if stored.members.is_empty() {
            return group;
        }
        group.protocol = stored.protocol.clone();
        group.leader = stored.leader;
        for m in stored.members {
            if let Some(instance) = &m.instance_id {
                group.statics.insert(instance.clone(), m.member_id.clone());
            }
            let protocols = stored
                .protocol
                .iter()
                .map(|p| (p.clone(), m.subscription.clone()))
                .collect();
            group.members.insert(
                m.member_id,
                Member {
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    protocols,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    last_heard: now,
                    assignment: m.assignment,
                },
            );
        }
        group.state = GroupState::Stable;
        group
    }

    /// The group as stored and described.
    pub fn snapshot(&self) -> GroupSnapshot {
        let members = self
            .members
            .iter()
            .map(|(id, m)| MemberSnapshot {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout: m.session_timeout,
                rebalance_timeout: m.rebalance_timeout,
                subscription: m
                    .protocols
                    .iter()
                    .find(|(n, _)| Some(n) == self.protocol.as_ref())
                    .or(m.protocols.first())
                    .map(|(_, meta)| meta.clone())
                    .unwrap_or_default(),
                assignment: m.assignment.clone(),
            })
            .collect();
        GroupSnapshot {
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members,
        }
    }
}
