//! A group with members changing protocol online, as Kafka 4's
//! `group.consumer.migration.policy` allows (docs/consumer-groups.md,
//! "Moving a group").
//!
//! - Upgrade: the first consumer protocol member of a classic group turns
//!   it into a consumer group. Each classic member stays, as a classic
//!   member of the consumer group, at the classic generation as its epoch
//!   with the partitions it was assigned (also its target), so no
//!   partition changes hands until the broker's assignor says so.
//! - Downgrade: when the last consumer protocol member leaves and classic
//!   members remain, the group becomes classic again at its epoch as the
//!   generation, each member with its target, and rebalances at once.
//!
//! Refused (the group stays as it is): a classic group of another
//! protocol type, or whose members' subscriptions or assignments do not
//! parse, or whose assignor put user data in them (a custom assignor the
//! broker cannot carry on); a consumer group whose classic members share
//! no protocol.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_protocol::ResponseError;

use super::classic_members::by_name;
use super::{
    by_topic, stored_assignment, Assignment, ClassicMetadata, ConsumerGroup, ConsumerKey,
    ConsumerValue, Member, MemberMetadata, MemberState, Partition, PartitionRacks, Record,
    TopicView,
};
use crate::groups::consumer_protocol;
use crate::groups::membership::{GroupSnapshot, GroupState, MemberSnapshot};
use crate::kafka::Code;

/// A classic member's protocols (name, metadata), from its group.
pub type Protocols<'a> = &'a dyn Fn(&str) -> Vec<(String, Vec<u8>)>;

impl ConsumerGroup {
    /// The consumer group classic group `classic` becomes, and its
    /// records (GROUP_ID_NOT_FOUND, as Kafka, when it cannot be).
    pub fn from_classic(
        group_id: &str,
        classic: &GroupSnapshot,
        protocols: Protocols<'_>,
        topics: &TopicView,
    ) -> Result<(ConsumerGroup, Vec<Record>), Code> {
        let refused = ResponseError::GroupIdNotFound.code();
        if classic.protocol_type != "consumer" {
            return Err(refused);
        }
        let generation = classic.generation;
        let mut group = ConsumerGroup {
            epoch: generation,
            assignment_epoch: generation,
            ..ConsumerGroup::default()
        };
        let mut taken = BTreeSet::new();
        for m in &classic.members {
            let member = converted_member(m, generation, protocols, topics).ok_or(refused)?;
            // Stored assignments of one generation do not overlap; should
            // they, the first member keeps a partition (one owner each).
            let mut member = member;
            member.assignment.assigned.retain(|p| taken.insert(*p));
            group
                .targets
                .insert(m.member_id.clone(), member.assignment.assigned.clone());
            group.members.insert(m.member_id.clone(), member);
        }
        group.metadata_hash = group.subscribed_hash(topics);
        let records = group.all_records(group_id);
        Ok((group, records))
    }

    /// The classic group this one becomes when member `leaving` goes, if
    /// it does: only classic members stay, and they share a protocol.
    /// The records end the consumer group (the classic group's own record
    /// is the caller's, in its key space).
    pub fn downgraded(
        &self,
        group_id: &str,
        leaving: &str,
        topics: &TopicView,
    ) -> Option<(Vec<Record>, GroupSnapshot)> {
        // The targets without it, so its partitions are someone's even
        // before the rebalance that follows (a coordinator loading the
        // classic group restores it as stored).
        let mut after = self.clone();
        after.members.remove(leaving);
        after.targets.remove(leaving);
        let classic = |m: &Member| m.metadata.classic.clone();
        let all_classic: Option<Vec<ClassicMetadata>> =
            after.members.values().map(classic).collect();
        let all_classic = all_classic.filter(|c| !c.is_empty())?;
        let protocol = common_protocol(&all_classic)?;
        after.new_targets(group_id, topics, &PartitionRacks::new);
        let empty = BTreeSet::new();
        let members = after.members.iter().zip(&all_classic).map(|((id, m), c)| {
            let target = after.targets.get(id).unwrap_or(&empty);
            classic_member(id, m, c, &protocol, by_name(target, topics))
        });
        let members = members.collect();
        let snapshot = GroupSnapshot {
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            generation: self.epoch,
            protocol: Some(protocol),
            leader: after.members.keys().next().cloned(),
            members,
        };
        Some((self.tombstones(group_id), snapshot))
    }

    /// Every record of the group as it is: members, group epoch, targets,
    /// target epoch, assignments (the order Kafka writes a conversion).
    fn all_records(&self, group_id: &str) -> Vec<Record> {
        let key =
            |k: fn(String, String) -> ConsumerKey, member: &str| k(group_id.into(), member.into());
        let mut records = Vec::new();
        for (id, m) in &self.members {
            let member_key = key(|group, member| ConsumerKey::Member { group, member }, id);
            records.push((member_key, Some(ConsumerValue::Member(m.metadata.clone()))));
        }
        let epoch = ConsumerValue::GroupEpoch {
            epoch: self.epoch,
            metadata_hash: self.metadata_hash,
        };
        let group = || group_id.to_string();
        records.push((ConsumerKey::GroupEpoch { group: group() }, Some(epoch)));
        for (id, target) in &self.targets {
            let target_key = key(
                |group, member| ConsumerKey::TargetMember { group, member },
                id,
            );
            records.push((
                target_key,
                Some(ConsumerValue::TargetMember(by_topic(target))),
            ));
        }
        let target_epoch = ConsumerValue::TargetEpoch {
            assignment_epoch: self.assignment_epoch,
        };
        records.push((
            ConsumerKey::TargetEpoch { group: group() },
            Some(target_epoch),
        ));
        for (id, m) in &self.members {
            let value = ConsumerValue::CurrentAssignment(stored_assignment(&m.assignment));
            let assignment_key = key(
                |group, member| ConsumerKey::CurrentAssignment { group, member },
                id,
            );
            records.push((assignment_key, Some(value)));
        }
        records
    }

    /// The tombstones of every record of the group, its epoch's last
    /// (which, replayed, ends the group's state).
    fn tombstones(&self, group_id: &str) -> Vec<Record> {
        let key =
            |k: fn(String, String) -> ConsumerKey, member: &str| k(group_id.into(), member.into());
        let mut records = Vec::new();
        for id in self.members.keys() {
            records.push((
                key(
                    |group, member| ConsumerKey::CurrentAssignment { group, member },
                    id,
                ),
                None,
            ));
            records.push((
                key(
                    |group, member| ConsumerKey::TargetMember { group, member },
                    id,
                ),
                None,
            ));
            records.push((
                key(|group, member| ConsumerKey::Member { group, member }, id),
                None,
            ));
        }
        let group = || group_id.to_string();
        records.push((ConsumerKey::TargetEpoch { group: group() }, None));
        records.push((ConsumerKey::GroupEpoch { group: group() }, None));
        records
    }
}

/// A classic member as a member of the consumer group (None: its
/// subscription or assignment cannot be carried on).
fn converted_member(
    m: &MemberSnapshot,
    generation: i32,
    protocols: Protocols<'_>,
    topics: &TopicView,
) -> Option<Member> {
    let subscription = consumer_protocol::subscription(&m.subscription)?;
    let (assigned, user_data) = consumer_protocol::read_assignment(&m.assignment)?;
    if user_data {
        return None;
    }
    let assigned: BTreeSet<Partition> = assigned
        .iter()
        .filter_map(|(topic, partitions)| Some((topics.get(topic)?.0, partitions)))
        .flat_map(|(id, partitions)| partitions.iter().map(move |p| (id, *p)))
        .collect();
    let names: BTreeSet<String> = subscription.topics.into_iter().collect();
    let metadata = MemberMetadata {
        instance_id: m.instance_id.clone(),
        rack_id: subscription.rack,
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: names.into_iter().collect(),
        subscribed_topic_regex: None,
        rebalance_timeout_ms: millis(m.rebalance_timeout),
        server_assignor: None,
        classic: Some(ClassicMetadata {
            session_timeout_ms: millis(m.session_timeout),
            protocols: protocols(&m.member_id),
        }),
    };
    let assignment = Assignment {
        epoch: generation,
        previous_epoch: generation,
        state: MemberState::Stable,
        assigned,
        pending_revocation: BTreeSet::new(),
    };
    Some(Member {
        metadata,
        assignment,
    })
}

/// A member of the classic group a consumer group becomes.
fn classic_member(
    id: &str,
    m: &Member,
    classic: &ClassicMetadata,
    protocol: &str,
    target: Vec<(String, Vec<i32>)>,
) -> MemberSnapshot {
    let subscription = classic
        .protocols
        .iter()
        .find(|(name, _)| name == protocol)
        .map(|(_, metadata)| metadata.clone())
        .unwrap_or_default();
    let version =
        consumer_protocol::subscription(&subscription).map_or(0, |s| s.version.clamp(0, 3));
    let assignment = consumer_protocol::encode_assignment_at(version, &target);
    MemberSnapshot {
        member_id: id.to_string(),
        instance_id: m.metadata.instance_id.clone(),
        client_id: m.metadata.client_id.clone(),
        client_host: m.metadata.client_host.clone(),
        session_timeout: Duration::from_millis(classic.session_timeout_ms.max(0) as u64),
        rebalance_timeout: Duration::from_millis(m.metadata.rebalance_timeout_ms.max(0) as u64),
        subscription: subscription.into(),
        assignment: assignment.into(),
    }
}

/// The first member's most preferred protocol every member supports.
fn common_protocol(members: &[ClassicMetadata]) -> Option<String> {
    let first = members.first()?;
    let supported = |name: &str| {
        let has = |c: &ClassicMetadata| c.protocols.iter().any(|(n, _)| n == name);
        members.iter().all(has)
    };
    let mut names = first.protocols.iter().map(|(name, _)| name);
    names.find(|name| supported(name)).cloned()
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
