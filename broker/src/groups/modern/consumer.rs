//! One consumer group of KIP-848, sans I/O: the rules of
//! ConsumerGroupHeartbeat (docs/consumer-groups.md, "ConsumerGroupHeartbeat
//! (68)"). A heartbeat is decided against the group as it is and comes
//! out as records (Kafka's, [`super::group_records`]) and an answer; the
//! group changes only when the caller replays those records once they
//! are durable ([`ConsumerGroup::replay`]), so a failed write changes
//! nothing and loading a group is the same replay.
//!
//! Static members ([`static_members`]) leave for now (-2) and come back
//! under their instance id to the partitions they had. A member may
//! subscribe by regular expression ([`topic_regex`]): the topics it
//! matches are resolved against the topic view at each heartbeat, so a
//! new matching topic is a new group epoch like any change of the
//! subscribed topics. Session and rebalance timers are the caller's.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::assign::{self, MemberSpec, PartitionRacks};
use super::group_records::{
    ClassicMetadata, ConsumerKey, ConsumerValue, CurrentAssignment, MemberMetadata, TopicPartitions,
};
use super::reconcile::{self, Assignment, Heartbeat, MemberState};
use super::topic_regex;
use crate::kafka::Code;

/// A topic id.
pub type TopicId = [u8; 16];
/// A partition: topic id and index.
pub type Partition = (TopicId, i32);
/// A record to write: key and value (None: a tombstone).
pub type Record = (ConsumerKey, Option<ConsumerValue>);

/// The topics as the group sees them: id and partition count by name.
pub type TopicView = BTreeMap<String, (TopicId, u32)>;

/// The epoch a static member heartbeats (and is stored at) when it
/// leaves for now, to come back under its instance id.
pub const LEFT_FOR_NOW: i32 = -2;

/// The assignors served, the first the default (Kafka's
/// `group.consumer.assignors`).
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// A consumer group's state as ListGroups and ConsumerGroupDescribe name
/// it (Kafka's ConsumerGroupState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// The group epoch moved past the targets' (a member left): the next
    /// heartbeat computes new targets.
    Assigning,
    /// Some member has not reached its target yet.
    Reconciling,
    /// Every member has its target.
    Stable,
}

impl GroupState {
    /// Kafka's name for it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// One member as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// What it told the coordinator (record 5).
    pub metadata: MemberMetadata,
    /// Where its reconciliation stands (record 8).
    pub assignment: Assignment<Partition>,
}

/// One consumer group as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// The group epoch (record 3).
    pub epoch: i32,
    /// The subscribed topics' hash the epoch was last bumped for.
    pub metadata_hash: i64,
    /// The epoch the targets were computed for (record 6).
    pub assignment_epoch: i32,
    /// The members by id.
    pub members: BTreeMap<String, Member>,
    /// Each member's target (record 7).
    pub targets: BTreeMap<String, BTreeSet<Partition>>,
}

/// A ConsumerGroupHeartbeat, as the group needs it (None and -1:
/// unchanged since the last one).
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The member id (the client makes it).
    pub member_id: String,
    /// Its epoch: 0 joins, -1 leaves, -2 a static member leaves for now.
    pub member_epoch: i32,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// How long it may take to give partitions up.
    pub rebalance_timeout_ms: i32,
    /// The topics it subscribes to by name.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The topics it subscribes to by regular expression ("": none).
    pub subscribed_topic_regex: Option<String>,
    /// The assignor it asks for.
    pub server_assignor: Option<String>,
    /// The partitions it owns (None: not said).
    pub owned: Option<BTreeSet<Partition>>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's address.
    pub client_host: String,
}

/// The answer to a heartbeat that was not refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The member id (the client makes it).
    pub member_id: String,
    /// The epoch it is at now (-1 or -2 echoed to a leave).
    pub member_epoch: i32,
    /// Its assigned partitions, when they changed or it asked in full.
    pub assignment: Option<BTreeSet<Partition>>,
}

/// What a heartbeat decided: the records to write, then the answer.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The records to write, in order.
    pub records: Vec<Record>,
    /// The answer, once they are durable.
    pub answer: Answer,
}

/// INVALID_REQUEST for what a heartbeat may not carry, before the group is
/// looked at (Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`).
pub fn validate(group_id: &str, req: &Request) -> Result<(), Code> {
    let invalid = Err(ResponseError::InvalidRequest.code());
    let empty = |s: &Option<String>| s.as_deref() == Some("");
    // Keys hold ids as int16-length strings.
    let too_long = |s: &str| s.len() > i16::MAX as usize;
    let long_ids = [
        Some(group_id),
        Some(&req.member_id),
        req.instance_id.as_deref(),
    ];
    let long_regex = req.subscribed_topic_regex.as_deref().is_some_and(too_long);
    if group_id.is_empty()
        || req.member_id.is_empty()
        || empty(&req.instance_id)
        || empty(&req.rack_id)
        || long_ids.into_iter().flatten().any(too_long)
        || long_regex
    {
        return invalid;
    }
    match req.member_epoch {
        0 => {
            let subscribed =
                req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some();
            let owns_nothing = req.owned.as_ref().is_none_or(BTreeSet::is_empty);
            if req.rebalance_timeout_ms == -1 || !owns_nothing || !subscribed {
                return invalid;
            }
        }
        -2 if req.instance_id.is_none() => return invalid,
        e if e < -2 => return invalid,
        _ => {}
    }
    if let Some(assignor) = &req.server_assignor {
        if !ASSIGNORS.contains(&assignor.as_str()) {
            return Err(ResponseError::UnsupportedAssignor.code());
        }
    }
    match req.subscribed_topic_regex.as_deref() {
        Some(regex) if !regex.is_empty() => topic_regex::check(regex),
        _ => Ok(()),
    }
}

impl ConsumerGroup {
    /// Decides a validated heartbeat of group `group_id`.
    pub fn heartbeat(
        &self,
        group_id: &str,
        req: &Request,
        topics: &TopicView,
        racks: &dyn Fn() -> PartitionRacks<TopicId>,
        max_size: Option<usize>,
    ) -> Result<Decision, Code> {
        let predecessor = self.static_predecessor(req)?;
        match req.member_epoch {
            LEFT_FOR_NOW => return self.leave_for_now(group_id, &req.member_id),
            e if e < 0 => return self.leave(group_id, &req.member_id, e),
            _ => {}
        }
        let speaks_classic = |m: &Member| m.metadata.classic.is_some();
        if self.members.get(&req.member_id).is_some_and(speaks_classic) {
            // A classic member's id: it speaks JoinGroup, not this.
            return Err(ResponseError::UnknownMemberId.code());
        }
        let mut group = self.clone();
        let mut records = Vec::new();
        let current = match predecessor {
            Some(old) => {
                records.extend(group.replace_member(group_id, &old, &req.member_id));
                Some(group.members[&req.member_id].clone())
            }
            None => self.member_for(req, max_size)?,
        };
        let context = (topics, racks);
        self.step(group_id, group, (req, None), (current, records), context)
    }

    /// The records and answer of member `req.member_id`'s request once
    /// `current` (None: a new member) is resolved, in `group` (this group
    /// as `records` already changed it); `classic`: the metadata of a
    /// member speaking the classic protocol.
    fn step(
        &self,
        group_id: &str,
        mut group: ConsumerGroup,
        (req, classic): (&Request, Option<ClassicMetadata>),
        (current, mut records): (Option<Member>, Vec<Record>),
        (topics, racks): (&TopicView, &dyn Fn() -> PartitionRacks<TopicId>),
    ) -> Result<Decision, Code> {
        let mut metadata = updated_metadata(current.as_ref().map(|m| &m.metadata), req);
        if classic.is_some() {
            // Its assignor runs here: the client's names none.
            metadata.server_assignor = None;
            metadata.classic = classic;
        }
        let member_key =
            |k: fn(String, String) -> ConsumerKey| k(group_id.into(), req.member_id.clone());
        if current.as_ref().map(|m| &m.metadata) != Some(&metadata) {
            records.push((
                member_key(|group, member| ConsumerKey::Member { group, member }),
                Some(ConsumerValue::Member(metadata.clone())),
            ));
        }
        group.members.insert(
            req.member_id.clone(),
            Member {
                metadata: metadata.clone(),
                assignment: current
                    .as_ref()
                    .map_or_else(Assignment::joined, |m| m.assignment.clone()),
            },
        );
        let subscription_changed = current.as_ref().is_none_or(|m| {
            m.metadata.subscribed_topic_names != metadata.subscribed_topic_names
                || m.metadata.subscribed_topic_regex != metadata.subscribed_topic_regex
        });
        records.extend(group.maybe_bump_epoch(group_id, subscription_changed, topics));
        if group.epoch > group.assignment_epoch {
            records.extend(group.new_targets(group_id, topics, racks));
        }
        let (assignment, answer) = group.reconciled(req)?;
        // Compared with what is stored (a rejoin starts from nothing in
        // `group`, not in the records).
        let stored = self.members.get(&req.member_id).map(|m| &m.assignment);
        if stored != Some(&assignment) {
            let value = ConsumerValue::CurrentAssignment(stored_assignment(&assignment));
            records.push((
                member_key(|group, member| ConsumerKey::CurrentAssignment { group, member }),
                Some(value),
            ));
        }
        Ok(Decision { records, answer })
    }

    /// A new group epoch (its record) when a member is new or changed
    /// its subscription, or the subscribed topics moved (their hash).
    fn maybe_bump_epoch(
        &mut self,
        group_id: &str,
        subscription_changed: bool,
        topics: &TopicView,
    ) -> Option<Record> {
        let hash = self.subscribed_hash(topics);
        if !subscription_changed && hash == self.metadata_hash {
            return None;
        }
        self.epoch += 1;
        self.metadata_hash = hash;
        let value = ConsumerValue::GroupEpoch {
            epoch: self.epoch,
            metadata_hash: hash,
        };
        let key = ConsumerKey::GroupEpoch {
            group: group_id.into(),
        };
        Some((key, Some(value)))
    }

    /// Where the group stands (Kafka's `ConsumerGroup.maybeUpdateGroupState`).
    pub fn state(&self) -> GroupState {
        let settled = |m: &Member| {
            m.assignment.epoch == self.assignment_epoch && m.assignment.state == MemberState::Stable
        };
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if !self.members.values().all(settled) {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// The member a heartbeat at epoch >= 0 speaks for (None: a new one),
    /// or why it is refused.
    fn member_for(&self, req: &Request, max_size: Option<usize>) -> Result<Option<Member>, Code> {
        let known = self.members.get(&req.member_id);
        if req.member_epoch == 0 {
            if known.is_none() && max_size.is_some_and(|max| self.members.len() >= max) {
                return Err(ResponseError::GroupMaxSizeReached.code());
            }
            // A known member rejoining (Kafka 4.2+): it starts over, its
            // partitions given up (the client dropped them when fenced).
            return Ok(known.map(|m| Member {
                metadata: m.metadata.clone(),
                assignment: Assignment::joined(),
            }));
        }
        let Some(member) = known else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        let assignment = &member.assignment;
        let owned_subset = req
            .owned
            .as_ref()
            .is_none_or(|owned| owned.is_subset(&assignment.assigned));
        let lost_answer = req.member_epoch == assignment.previous_epoch && owned_subset;
        if req.member_epoch != assignment.epoch && !lost_answer {
            return Err(ResponseError::FencedMemberEpoch.code());
        }
        Ok(Some(member.clone()))
    }

    /// The member's next step and the answer to its heartbeat.
    fn reconciled(&self, req: &Request) -> Result<(Assignment<Partition>, Answer), Code> {
        let member = &self.members[&req.member_id];
        let empty = BTreeSet::new();
        let target = self.targets.get(&req.member_id).unwrap_or(&empty);
        let heartbeat = Heartbeat {
            owned: req.owned.as_ref(),
            target_epoch: self.assignment_epoch,
            target,
        };
        let owned_by_another = |p: &Partition| {
            self.members.iter().any(|(id, m)| {
                *id != req.member_id
                    && (m.assignment.assigned.contains(p)
                        || m.assignment.pending_revocation.contains(p))
            })
        };
        let next = reconcile::reconcile(&member.assignment, &heartbeat, owned_by_another)?;
        // Kafka's `isFullRequest`: what a client sends after an error or
        // a lost answer, and is answered its whole assignment.
        let subscribed =
            req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some();
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1 && subscribed && req.owned.is_some());
        let changed = next.assigned != member.assignment.assigned;
        let answer = Answer {
            member_id: req.member_id.clone(),
            member_epoch: next.epoch,
            assignment: (full || changed).then(|| next.assigned.clone()),
        };
        Ok((next, answer))
    }

    /// Records of new targets for the group epoch: the assignor most
    /// members ask for (else the default) over every member's subscribed
    /// topics; the changed targets, then the target epoch.
    fn new_targets(
        &mut self,
        group_id: &str,
        topics: &TopicView,
        racks: &dyn Fn() -> PartitionRacks<TopicId>,
    ) -> Vec<Record> {
        let specs: Vec<MemberSpec<TopicId>> = self
            .members
            .iter()
            .map(|(id, m)| MemberSpec {
                id: id.clone(),
                instance_id: m.metadata.instance_id.clone(),
                rack: m.metadata.rack_id.clone(),
                subscribed: subscribed_ids(&m.metadata, topics),
                current: self.targets.get(id).cloned().unwrap_or_default(),
            })
            .collect();
        let counts: BTreeMap<TopicId, u32> = topics.values().copied().collect();
        let targets = match self.preferred_assignor() {
            "range" => assign::range(&specs, &counts),
            _ => assign::uniform_with_racks(&specs, &counts, &racks()),
        };
        let mut records = Vec::new();
        for (member, target) in &targets {
            if self.targets.get(member) != Some(target) {
                let key = ConsumerKey::TargetMember {
                    group: group_id.into(),
                    member: member.clone(),
                };
                records.push((key, Some(ConsumerValue::TargetMember(by_topic(target)))));
            }
        }
        self.targets = targets;
        self.assignment_epoch = self.epoch;
        let value = ConsumerValue::TargetEpoch {
            assignment_epoch: self.epoch,
        };
        records.push((
            ConsumerKey::TargetEpoch {
                group: group_id.into(),
            },
            Some(value),
        ));
        records
    }

    /// The assignor most members name, ties to the default's order.
    pub fn preferred_assignor(&self) -> &'static str {
        let asked = |name: &str| {
            let named = |m: &&Member| m.metadata.server_assignor.as_deref() == Some(name);
            self.members.values().filter(named).count()
        };
        let most = ASSIGNORS.iter().map(|a| asked(a)).max().unwrap_or(0);
        ASSIGNORS
            .iter()
            .find(|a| asked(a) == most && most > 0)
            .copied()
            .unwrap_or(ASSIGNORS[0])
    }

    /// A hash of the topics the members subscribe to (ids and partition
    /// counts): a change is a new group epoch (a new topic matching a
    /// member's regular expression too).
    fn subscribed_hash(&self, topics: &TopicView) -> i64 {
        let names = (self.members.values()).flat_map(|m| subscribed_names(&m.metadata, topics));
        topics_hash(names, topics)
    }

    /// Whether `member_id` at `epoch` may commit offsets (Kafka's
    /// `ConsumerGroup.validateOffsetCommit`): anyone with no member id and
    /// a negative epoch while the group has no members (an admin, or
    /// assign()); else a member at its current epoch (STALE_MEMBER_EPOCH
    /// otherwise; UNKNOWN_MEMBER_ID for a stranger).
    pub fn may_commit(&self, member_id: &str, epoch: i32) -> Result<(), Code> {
        if epoch < 0 && member_id.is_empty() && self.members.is_empty() {
            return Ok(());
        }
        let Some(member) = self.members.get(member_id) else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        // A classic member commits with its generation: its epoch here.
        let stale = match member.metadata.classic {
            Some(_) => ResponseError::IllegalGeneration,
            None => ResponseError::StaleMemberEpoch,
        };
        match member.assignment.epoch == epoch {
            true => Ok(()),
            false => Err(stale.code()),
        }
    }

    /// The records of member `member_id` leaving for good (epoch -1, a
    /// lapsed session or rebalance timeout), or the refusal.
    pub fn leave(&self, group_id: &str, member_id: &str, epoch: i32) -> Result<Decision, Code> {
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId.code());
        }
        let key = |k: fn(String, String) -> ConsumerKey| k(group_id.into(), member_id.into());
        let mut records: Vec<Record> = vec![
            (
                key(|group, member| ConsumerKey::CurrentAssignment { group, member }),
                None,
            ),
            (
                key(|group, member| ConsumerKey::TargetMember { group, member }),
                None,
            ),
            (
                key(|group, member| ConsumerKey::Member { group, member }),
                None,
            ),
        ];
        let value = ConsumerValue::GroupEpoch {
            epoch: self.epoch + 1,
            metadata_hash: self.metadata_hash,
        };
        records.push((
            ConsumerKey::GroupEpoch {
                group: group_id.into(),
            },
            Some(value),
        ));
        let answer = Answer {
            member_id: member_id.into(),
            member_epoch: epoch,
            assignment: None,
        };
        Ok(Decision { records, answer })
    }

    /// Applies a durable record (written by a decision, or read back when
    /// the group is loaded, where compaction may have kept a member's
    /// assignment record ahead of its metadata record: either makes the
    /// member, as Kafka's replay does).
    pub fn replay(&mut self, key: &ConsumerKey, value: Option<&ConsumerValue>) {
        use ConsumerKey as K;
        use ConsumerValue as V;
        match (key, value) {
            (
                K::GroupEpoch { .. },
                Some(V::GroupEpoch {
                    epoch,
                    metadata_hash,
                }),
            ) => {
                self.epoch = *epoch;
                self.metadata_hash = *metadata_hash;
            }
            (K::TargetEpoch { .. }, Some(V::TargetEpoch { assignment_epoch })) => {
                self.assignment_epoch = *assignment_epoch;
            }
            (K::TargetEpoch { .. }, None) => self.assignment_epoch = -1,
            (K::TargetMember { member, .. }, Some(V::TargetMember(target))) => {
                self.targets.insert(member.clone(), flatten(target));
            }
            (K::TargetMember { member, .. }, None) => {
                self.targets.remove(member);
            }
            (K::Member { member, .. }, Some(V::Member(metadata))) => {
                self.member_entry(member).metadata = metadata.clone();
            }
            (K::Member { member, .. }, None) => {
                self.members.remove(member);
            }
            (K::CurrentAssignment { member, .. }, Some(V::CurrentAssignment(stored))) => {
                self.member_entry(member).assignment = Assignment {
                    epoch: stored.member_epoch,
                    previous_epoch: stored.previous_member_epoch,
                    state: MemberState::of_id(stored.state),
                    assigned: flatten(&stored.assigned),
                    pending_revocation: flatten(&stored.pending_revocation),
                };
            }
            (K::CurrentAssignment { member, .. }, None) => {
                if let Some(m) = self.members.get_mut(member) {
                    m.assignment = Assignment {
                        epoch: -1,
                        previous_epoch: -1,
                        ..Assignment::joined()
                    };
                }
            }
            // The group's own tombstone (3), partition metadata (4) and
            // regular expressions (16) change nothing here.
            _ => {}
        }
    }

    /// Member `id`, made (empty, at epoch 0) if unknown.
    fn member_entry(&mut self, id: &str) -> &mut Member {
        self.members
            .entry(id.to_string())
            .or_insert_with(|| Member {
                metadata: MemberMetadata::default(),
                assignment: Assignment::joined(),
            })
    }
}

/// The member's metadata after a heartbeat: the request's non-null
/// fields over what was stored.
fn updated_metadata(stored: Option<&MemberMetadata>, req: &Request) -> MemberMetadata {
    let mut m = stored.cloned().unwrap_or_default();
    m.client_id = req.client_id.clone();
    m.client_host = req.client_host.clone();
    if req.instance_id.is_some() {
        m.instance_id = req.instance_id.clone();
    }
    if req.rack_id.is_some() {
        m.rack_id = req.rack_id.clone();
    }
    if req.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(names) = &req.subscribed_topic_names {
        let set: BTreeSet<&String> = names.iter().collect();
        m.subscribed_topic_names = set.into_iter().cloned().collect();
    }
    if let Some(regex) = &req.subscribed_topic_regex {
        m.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
    }
    if req.server_assignor.is_some() {
        m.server_assignor = req.server_assignor.clone();
    }
    m
}

/// The names of the existing topics a member subscribes to: by name, and
/// those its regular expression matches.
fn subscribed_names<'a>(
    metadata: &'a MemberMetadata,
    topics: &'a TopicView,
) -> BTreeSet<&'a String> {
    let named = (metadata.subscribed_topic_names.iter()).filter(|name| topics.contains_key(*name));
    let matched = metadata.subscribed_topic_regex.iter().flat_map(|regex| {
        let names = topics.keys();
        names.filter(move |name| topic_regex::matches(regex, name))
    });
    named.chain(matched).collect()
}

/// A hash of the existing topics among `names` (each name, id and
/// partition count): a change of it is a new group epoch.
pub(super) fn topics_hash<'a>(names: impl Iterator<Item = &'a String>, topics: &TopicView) -> i64 {
    let names: BTreeSet<&String> = names.collect();
    let mut bytes = Vec::new();
    for name in names {
        if let Some((id, count)) = topics.get(name) {
            bytes.extend_from_slice(name.as_bytes());
            bytes.extend_from_slice(id);
            bytes.extend_from_slice(&count.to_be_bytes());
        }
    }
    i64::from(crc32c::crc32c(&bytes)) | (bytes.len() as i64) << 32
}

/// The ids of the existing topics a member subscribes to.
fn subscribed_ids(metadata: &MemberMetadata, topics: &TopicView) -> BTreeSet<TopicId> {
    let names = subscribed_names(metadata, topics).into_iter();
    names.map(|name| topics[name].0).collect()
}

/// A set of partitions as stored: by topic, in order.
pub fn by_topic(partitions: &BTreeSet<Partition>) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for (topic_id, partition) in partitions {
        match out.last_mut() {
            Some(last) if last.topic_id == *topic_id => last.partitions.push(*partition),
            _ => out.push(TopicPartitions {
                topic_id: *topic_id,
                partitions: vec![*partition],
            }),
        }
    }
    out
}

fn flatten(topics: &[TopicPartitions]) -> BTreeSet<Partition> {
    let each = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)));
    each.collect()
}

fn stored_assignment(a: &Assignment<Partition>) -> CurrentAssignment {
    CurrentAssignment {
        member_epoch: a.epoch,
        previous_member_epoch: a.previous_epoch,
        state: a.state.id(),
        assigned: by_topic(&a.assigned),
        pending_revocation: by_topic(&a.pending_revocation),
    }
}

mod classic_members;
mod conversion;
mod static_members;
#[cfg(test)]
mod tests;

pub use classic_members::{ClassicJoin, ClassicJoined};
