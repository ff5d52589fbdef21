//! One share group (KIP-932), sans I/O: the rules of ShareGroupHeartbeat.
//! Members join, heartbeat and leave as in a consumer group, but a
//! partition may go to several members (records, not partitions, are
//! what members hold, each under its own lock: [`crate::share`]), so
//! there is nothing to revoke: a member's assignment is its target at
//! once, at the group's epoch. The targets come from the share groups'
//! assignor ([`super::assign::simple`]).
//!
//! A heartbeat is decided against the group as it is and comes out as
//! records and an answer; the group changes when the caller replays the
//! records once durable ([`ShareGroup::replay`]), as consumer groups do.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::assign::{self, MemberSpec};
use super::consumer::{Partition, TopicId, TopicView};
use crate::kafka::Code;

/// The most members a share group may have (Kafka's
/// `group.share.max.size` default).
pub const MAX_MEMBERS: usize = 200;

/// What a member told the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareMemberMetadata {
    /// Its rack.
    pub rack_id: Option<String>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's address.
    pub client_host: String,
    /// The topics it subscribes to.
    pub subscribed_topic_names: Vec<String>,
}

/// One member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    /// What it told the coordinator.
    pub metadata: ShareMemberMetadata,
    /// Its epoch.
    pub epoch: i32,
    /// Its epoch before the last step (a heartbeat whose answer was lost
    /// comes back with it).
    pub previous_epoch: i32,
    /// Its partitions.
    pub assigned: BTreeSet<Partition>,
}

/// One share group as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareGroup {
    /// The group epoch.
    pub epoch: i32,
    /// The subscribed topics' hash the epoch was last bumped for.
    pub metadata_hash: i64,
    /// The epoch the targets were computed for.
    pub assignment_epoch: i32,
    /// The members by id.
    pub members: BTreeMap<String, ShareMember>,
    /// Each member's target: its partitions from its next heartbeat on.
    pub targets: BTreeMap<String, BTreeSet<Partition>>,
}

/// A ShareGroupHeartbeat (None: unchanged since the last one).
#[derive(Debug, Clone, Default)]
pub struct ShareRequest {
    /// The member id (the client makes it).
    pub member_id: String,
    /// 0 joins, -1 leaves.
    pub member_epoch: i32,
    /// Its rack.
    pub rack_id: Option<String>,
    /// The topics it subscribes to.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's address.
    pub client_host: String,
}

/// The answer to an accepted heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareAnswer {
    /// Its epoch now (-1 echoed to a leave).
    pub member_epoch: i32,
    /// Its partitions, when they changed or it joined or sent its
    /// subscription.
    pub assignment: Option<BTreeSet<Partition>>,
}

/// A record of a share group (Kafka's types 10-14 in
/// `__consumer_offsets`, carried here as values; None deletes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareRecord {
    /// 11: the group epoch and subscribed topics' hash (None: the group
    /// ends).
    Group(Option<(i32, i64)>),
    /// 12: the epoch the targets were computed for.
    TargetEpoch(i32),
    /// 13: a member's target (None: it left).
    Target(String, Option<BTreeSet<Partition>>),
    /// 10 and 14: a member's metadata and assignment (None: it left).
    Member(String, Option<ShareMember>),
}

/// What a heartbeat decided: the records to write, then the answer.
#[derive(Debug, Clone)]
pub struct ShareDecision {
    /// The records, in order.
    pub records: Vec<ShareRecord>,
    /// The answer, once they are durable.
    pub answer: ShareAnswer,
}

/// INVALID_REQUEST for what a heartbeat may not carry (Kafka's checks).
pub fn validate(group_id: &str, req: &ShareRequest) -> Result<(), Code> {
    let invalid = Err(ResponseError::InvalidRequest.code());
    let joins_with_nothing = req.member_epoch == 0
        && req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(Vec::is_empty);
    if group_id.is_empty()
        || req.member_id.is_empty()
        || req.rack_id.as_deref() == Some("")
        || req.member_epoch < -1
        || joins_with_nothing
    {
        return invalid;
    }
    Ok(())
}

impl ShareGroup {
    /// Decides a validated heartbeat against the topics as `topics`.
    pub fn heartbeat(&self, req: &ShareRequest, topics: &TopicView) -> Result<ShareDecision, Code> {
        if req.member_epoch == -1 {
            return self.leave(&req.member_id).map(|records| ShareDecision {
                records,
                answer: ShareAnswer {
                    member_epoch: -1,
                    assignment: None,
                },
            });
        }
        let current = self.member_for(req)?;
        let mut group = self.clone();
        let metadata = updated(current.map(|m| &m.metadata), req);
        let changed_subscription = current
            .is_none_or(|m| m.metadata.subscribed_topic_names != metadata.subscribed_topic_names);
        let member = ShareMember {
            metadata,
            epoch: current.map_or(0, |m| m.epoch),
            previous_epoch: current.map_or(0, |m| m.epoch),
            assigned: current.map(|m| m.assigned.clone()).unwrap_or_default(),
        };
        group.members.insert(req.member_id.clone(), member);
        let mut records = Vec::new();
        let hash = group.subscribed_hash(topics);
        if changed_subscription || hash != group.metadata_hash {
            group.epoch += 1;
            group.metadata_hash = hash;
            records.push(ShareRecord::Group(Some((group.epoch, hash))));
        }
        if group.epoch > group.assignment_epoch {
            records.extend(group.new_targets(topics));
        }
        // Nothing to revoke: the member takes its target and the target's
        // epoch at once (the others at their next heartbeat).
        let target = group
            .targets
            .get(&req.member_id)
            .cloned()
            .unwrap_or_default();
        let assignment_epoch = group.assignment_epoch;
        let member = group.members.get_mut(&req.member_id).expect("inserted");
        if member.epoch != assignment_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = assignment_epoch;
        }
        member.assigned = target;
        let member = member.clone();
        let stored = self.members.get(&req.member_id);
        if stored != Some(&member) {
            records.push(ShareRecord::Member(
                req.member_id.clone(),
                Some(member.clone()),
            ));
        }
        // A join, a full request, or a member behind what it was told
        // (its last answer lost) gets its whole assignment.
        let behind = stored.is_some_and(|s| req.member_epoch != s.epoch);
        let full = req.member_epoch == 0 || behind || req.subscribed_topic_names.is_some();
        let changed = stored.is_none_or(|s| s.assigned != member.assigned);
        Ok(ShareDecision {
            records,
            answer: ShareAnswer {
                member_epoch: member.epoch,
                assignment: (full || changed).then_some(member.assigned),
            },
        })
    }

    /// The records of member `member_id` leaving (or its session lapsing).
    pub fn leave(&self, member_id: &str) -> Result<Vec<ShareRecord>, Code> {
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId.code());
        }
        Ok(vec![
            ShareRecord::Member(member_id.to_string(), None),
            ShareRecord::Target(member_id.to_string(), None),
            ShareRecord::Group(Some((self.epoch + 1, self.metadata_hash))),
        ])
    }

    /// Applies a durable record (written by a decision, or read back).
    pub fn replay(&mut self, record: &ShareRecord) {
        match record {
            ShareRecord::Group(Some((epoch, hash))) => {
                (self.epoch, self.metadata_hash) = (*epoch, *hash);
            }
            ShareRecord::Group(None) => *self = ShareGroup::default(),
            ShareRecord::TargetEpoch(epoch) => self.assignment_epoch = *epoch,
            ShareRecord::Target(id, Some(target)) => {
                self.targets.insert(id.clone(), target.clone());
            }
            ShareRecord::Target(id, None) => {
                self.targets.remove(id);
            }
            ShareRecord::Member(id, Some(member)) => {
                self.members.insert(id.clone(), member.clone());
            }
            ShareRecord::Member(id, None) => {
                self.members.remove(id);
            }
        }
    }

    /// The member a heartbeat at epoch >= 0 speaks for (None: a new
    /// one), or why it is refused.
    fn member_for(&self, req: &ShareRequest) -> Result<Option<&ShareMember>, Code> {
        let known = self.members.get(&req.member_id);
        if req.member_epoch == 0 {
            if known.is_none() && self.members.len() >= MAX_MEMBERS {
                return Err(ResponseError::GroupMaxSizeReached.code());
            }
            return Ok(known);
        }
        let Some(member) = known else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        let epoch = req.member_epoch;
        if epoch != member.epoch && epoch != member.previous_epoch {
            return Err(ResponseError::FencedMemberEpoch.code());
        }
        Ok(Some(member))
    }

    /// Records of new targets for the group's epoch: the changed
    /// targets, then the target epoch.
    fn new_targets(&mut self, topics: &TopicView) -> Vec<ShareRecord> {
        let specs: Vec<MemberSpec<TopicId>> = self
            .members
            .iter()
            .map(|(id, m)| MemberSpec {
                id: id.clone(),
                instance_id: None,
                rack: m.metadata.rack_id.clone(),
                subscribed: subscribed_ids(&m.metadata, topics),
                current: self.targets.get(id).cloned().unwrap_or_default(),
            })
            .collect();
        let counts: BTreeMap<TopicId, u32> = topics.values().copied().collect();
        let targets = assign::simple(&specs, &counts);
        let changed = targets
            .iter()
            .filter(|(id, t)| self.targets.get(*id) != Some(*t));
        let mut records: Vec<ShareRecord> = changed
            .map(|(id, t)| ShareRecord::Target(id.clone(), Some(t.clone())))
            .collect();
        self.targets = targets;
        self.assignment_epoch = self.epoch;
        records.push(ShareRecord::TargetEpoch(self.epoch));
        records
    }

    /// A hash of the subscribed topics (ids and partition counts).
    fn subscribed_hash(&self, topics: &TopicView) -> i64 {
        let names: BTreeSet<&String> = (self.members.values())
            .flat_map(|m| &m.metadata.subscribed_topic_names)
            .filter(|name| topics.contains_key(*name))
            .collect();
        let mut bytes = Vec::new();
        for name in names {
            let (id, count) = topics[name];
            bytes.extend_from_slice(name.as_bytes());
            bytes.extend_from_slice(&id);
            bytes.extend_from_slice(&count.to_be_bytes());
        }
        i64::from(crc32c::crc32c(&bytes)) | (bytes.len() as i64) << 32
    }
}

/// The member's metadata after a heartbeat: the request's fields over
/// what was stored.
fn updated(stored: Option<&ShareMemberMetadata>, req: &ShareRequest) -> ShareMemberMetadata {
    let mut m = stored.cloned().unwrap_or_default();
    m.client_id = req.client_id.clone();
    m.client_host = req.client_host.clone();
    if req.rack_id.is_some() {
        m.rack_id = req.rack_id.clone();
    }
    if let Some(names) = &req.subscribed_topic_names {
        let set: BTreeSet<&String> = names.iter().collect();
        m.subscribed_topic_names = set.into_iter().cloned().collect();
    }
    m
}

fn subscribed_ids(m: &ShareMemberMetadata, topics: &TopicView) -> BTreeSet<TopicId> {
    let names = m.subscribed_topic_names.iter();
    names
        .filter_map(|n| topics.get(n).map(|(id, _)| *id))
        .collect()
}

#[cfg(test)]
mod tests;
