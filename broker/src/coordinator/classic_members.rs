//! Classic protocol requests (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup) of members inside a consumer group, on the coordinator:
//! decided by the group's rules (`groups::modern::consumer`, classic
//! members), a join's records appended with acks=all and replayed before
//! it is answered; SyncGroup and Heartbeat write nothing, they only keep
//! the member's session.

use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::consumer_groups::{as_keys, downgraded, replay, Stored};
use super::offsets_partition::OffsetsPartition;
use crate::groups::membership::{fresh_member_id, Join, Joined};
use crate::groups::modern::consumer::{ClassicJoin, ClassicJoined, ConsumerGroup, Member};
use crate::groups::records::Key;
use crate::kafka::Code;

impl OffsetsPartition {
    /// Whether `group` is a consumer group with members: its classic
    /// requests are served here.
    pub(super) fn serves_classic_as_consumer(&self, group: &str) -> bool {
        let groups = self.groups.borrow();
        groups.get(group).is_some_and(|e| e.has_consumer_members())
    }

    /// JoinGroup of a classic member of consumer group `group`.
    pub(super) async fn classic_join_consumer(&self, group: &str, join: &Join) -> Joined {
        let failed = |code: Code| Joined::failed(code, &join.member_id);
        let policy = self.partitions.cluster.config.migration_policy();
        if !policy.classic_members_join() {
            return failed(ResponseError::InconsistentGroupProtocol.code());
        }
        let request = classic_join(join);
        let topics = self.topic_view();
        let joined_as = std::cell::RefCell::new(None);
        let decided = self
            .append_then(
                |groups| {
                    let Some(consumer) = groups.get(group).and_then(consumer_with_members) else {
                        // Converted meanwhile: the member joins again.
                        return (vec![], failed(ResponseError::RebalanceInProgress.code()));
                    };
                    let mut new_id = || fresh_member_id(&join.client_id);
                    let racks = || self.partition_racks();
                    let context = (&topics, &racks as &dyn Fn() -> _);
                    match consumer.classic_join(group, &request, &mut new_id, context) {
                        Ok(ClassicJoined::Joined {
                            records,
                            member_id,
                            generation,
                            protocol,
                        }) => {
                            *joined_as.borrow_mut() = Some(member_id.clone());
                            let answer = Joined {
                                error: 0,
                                generation,
                                protocol: Some(protocol),
                                // A follower: the broker assigns.
                                leader: String::new(),
                                member_id,
                                members: vec![],
                                skip_assignment: false,
                            };
                            (as_keys(records), answer)
                        }
                        Ok(ClassicJoined::MemberIdRequired(id)) => {
                            let code = ResponseError::MemberIdRequired.code();
                            (vec![], Joined::failed(code, &id))
                        }
                        Err(code) => (vec![], failed(code)),
                    }
                },
                |groups, records| {
                    let now = Instant::now();
                    replay(groups, records, now);
                    if let Some(member) = joined_as.borrow().as_ref() {
                        // It syncs within its rebalance timeout.
                        let entry = groups.entry(group);
                        entry.sessions.insert(member.clone(), now);
                        let deadline = now + join.rebalance_timeout;
                        entry.classic_deadlines.insert(member.clone(), deadline);
                    }
                },
            )
            .await;
        decided.map_or_else(failed, |(_, joined)| joined)
    }

    /// SyncGroup of a classic member of consumer group `group`: its
    /// partitions now.
    pub(super) fn classic_sync_consumer(
        &self,
        group: &str,
        member: (&str, Option<&str>, i32),
        protocol: (Option<&str>, Option<&str>),
    ) -> (Code, Bytes) {
        let topics = self.topic_view();
        let answer = self.with_classic_member(group, (member.0, true), |consumer| {
            consumer.classic_sync(member, protocol, &topics)
        });
        match answer {
            Ok(assignment) => (0, assignment.into()),
            Err(code) => (code, Bytes::new()),
        }
    }

    /// Heartbeat of a classic member of consumer group `group`.
    pub(super) fn classic_heartbeat_consumer(
        &self,
        group: &str,
        (member_id, instance_id, generation): (&str, Option<&str>, i32),
    ) -> Code {
        let answer = self.with_classic_member(group, (member_id, false), |consumer| {
            consumer.classic_heartbeat(member_id, instance_id, generation)
        });
        answer.err().unwrap_or(0)
    }

    /// `decide` on consumer group `group`; the member's session is kept
    /// alive unless it was refused as a stranger or a stale member.
    /// (`synced`: a SyncGroup, whose success ends its sync deadline.)
    fn with_classic_member<T>(
        &self,
        group: &str,
        (member_id, synced): (&str, bool),
        decide: impl FnOnce(&ConsumerGroup) -> Result<T, Code>,
    ) -> Result<T, Code> {
        let mut groups = self.groups.borrow_mut();
        let entry = groups.get_mut(group);
        let Some(entry) = entry.filter(|e| e.has_consumer_members()) else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        let consumer = entry.consumer.as_ref().expect("a consumer group");
        let answer = decide(consumer);
        let fenced = [
            ResponseError::UnknownMemberId.code(),
            ResponseError::FencedInstanceId.code(),
            ResponseError::IllegalGeneration.code(),
        ];
        let code = answer.as_ref().err().copied();
        if code.is_some_and(|c| fenced.contains(&c)) {
            return answer;
        }
        let now = Instant::now();
        entry.sessions.insert(member_id.to_string(), now);
        // Told to join again, it must within its rebalance timeout (the
        // first telling starts the clock, as Kafka's join timer).
        let rebalance_timeout = consumer.members.get(member_id).map(|m| {
            let ms = m.metadata.rebalance_timeout_ms.max(0) as u64;
            std::time::Duration::from_millis(ms)
        });
        let deadlines = &mut entry.classic_deadlines;
        match (code, rebalance_timeout) {
            (Some(c), Some(timeout)) if c == ResponseError::RebalanceInProgress.code() => {
                deadlines
                    .entry(member_id.to_string())
                    .or_insert(now + timeout);
            }
            (None, _) if synced => {
                deadlines.remove(member_id);
            }
            _ => {}
        }
        answer
    }

    /// LeaveGroup in consumer group `group`, for each (member id,
    /// instance id): the member leaves as with epoch -1 (the last consumer
    /// protocol member's leaving may convert the group back to classic).
    pub(super) async fn classic_leave_consumer(
        &self,
        group: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Vec<Code> {
        let mut codes = Vec::with_capacity(members.len());
        let mut members = members.into_iter();
        while let Some((member_id, instance_id)) = members.next() {
            if !self.serves_classic_as_consumer(group) {
                // Converted back by the last leave: the rest leave the
                // classic group.
                let rest = std::iter::once((member_id, instance_id)).chain(members);
                codes.extend(self.classic_leave(group, rest.collect()).await);
                break;
            }
            let instance = instance_id.as_deref();
            codes.push(self.remove_member(group, &member_id, instance).await);
        }
        codes
    }

    /// Removes one member named by id, or by instance id with no member id.
    async fn remove_member(&self, group: &str, member_id: &str, instance_id: Option<&str>) -> Code {
        let policy = self.partitions.cluster.config.migration_policy();
        let topics = self.topic_view();
        let decided = self
            .append_then(
                |groups| {
                    let consumer = groups.get(group).and_then(|e| e.consumer.as_ref());
                    let Some(consumer) = consumer else {
                        return (vec![], ResponseError::UnknownMemberId.code());
                    };
                    let id = match leaving_member(consumer, member_id, instance_id) {
                        Ok(id) => id,
                        Err(code) => return (vec![], code),
                    };
                    let back = policy
                        .downgrade
                        .then(|| downgraded(group, consumer, &id, &topics));
                    match (back.flatten(), consumer.leave(group, &id, -1)) {
                        (Some(records), _) => (records, 0),
                        (None, Ok(decision)) => (as_keys(decision.records), 0),
                        (None, Err(code)) => (vec![], code),
                    }
                },
                |groups, records| replay(groups, records, Instant::now()),
            )
            .await;
        decided.map_or_else(|code| code, |(_, code)| code)
    }

    /// Drops the classic joins and syncs waiting in `group` when
    /// `records` converted it to a consumer group: they are answered
    /// REBALANCE_IN_PROGRESS and join again.
    pub(super) fn drop_classic_waiters(&self, group: &str, records: &[Stored]) {
        let upgraded = records
            .iter()
            .any(|(key, value)| matches!(key, Key::Group(g) if g == group) && value.is_none());
        if upgraded {
            let of_group = |(g, _): &(String, String)| g != group;
            self.joins.borrow_mut().retain(|key, _| of_group(key));
            self.syncs.borrow_mut().retain(|key, _| of_group(key));
        }
    }
}

/// The consumer group of `entry`, if it has members.
fn consumer_with_members(entry: &crate::groups::store::GroupEntry) -> Option<&ConsumerGroup> {
    entry.consumer.as_ref().filter(|c| !c.members.is_empty())
}

/// The member a LeaveGroup names, as Kafka's
/// `classicGroupLeaveToConsumerGroup`: a classic member by its id (and
/// instance id, if static), or any static member by its instance id
/// alone (an operator removing it); a consumer protocol member's id is
/// a stranger to LeaveGroup.
fn leaving_member(
    consumer: &ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<String, Code> {
    let unknown = Err(ResponseError::UnknownMemberId.code());
    let speaks_classic = |id: &str| {
        let member = consumer.members.get(id);
        member.is_some_and(|m| m.metadata.classic.is_some())
    };
    let Some(instance) = instance_id else {
        return match speaks_classic(member_id) {
            true => Ok(member_id.to_string()),
            false => unknown,
        };
    };
    let holds = |m: &Member| m.metadata.instance_id.as_deref() == Some(instance);
    let Some((holder, _)) = consumer.members.iter().find(|(_, m)| holds(m)) else {
        return unknown;
    };
    match member_id {
        "" => Ok(holder.clone()),
        id if id != holder => Err(ResponseError::FencedInstanceId.code()),
        id if !speaks_classic(id) => unknown,
        id => Ok(id.to_string()),
    }
}

/// A JoinGroup as the consumer group's rules take it.
fn classic_join(join: &Join) -> ClassicJoin {
    ClassicJoin {
        member_id: join.member_id.clone(),
        instance_id: join.instance_id.clone(),
        client_id: join.client_id.clone(),
        client_host: join.client_host.clone(),
        protocol_type: join.protocol_type.clone(),
        protocols: (join.protocols.iter())
            .map(|(name, metadata)| (name.clone(), metadata.to_vec()))
            .collect(),
        session_timeout_ms: i32::try_from(join.session_timeout.as_millis()).unwrap_or(i32::MAX),
        rebalance_timeout_ms: i32::try_from(join.rebalance_timeout.as_millis()).unwrap_or(i32::MAX),
        require_known_member_id: join.require_known_member_id,
    }
}
