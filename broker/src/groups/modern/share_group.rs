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
use super::consumer::{by_topic, topics_hash, Partition, TopicId, TopicView};
use super::group_records::TopicPartitions;
pub use super::share_records::ShareMemberMetadata;
use super::share_records::{ShareKey, ShareValue};
use crate::kafka::Code;

/// The most members a share group may have (Kafka's
/// `group.share.max.size` default).
pub const MAX_MEMBERS: usize = 200;

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

/// A record to write: key and value (None: a tombstone).
pub type ShareRecord = (ShareKey, Option<ShareValue>);

/// What a heartbeat decided: the records to write, then the answer.
#[derive(Debug, Clone)]
pub struct ShareDecision {
    /// The records, in order.
    pub records: Vec<ShareRecord>,
    /// The answer, once they are durable.
    pub answer: ShareAnswer,
    /// The group as the decision means it to be (the records, replayed,
    /// must make it).
    #[cfg(test)]
    pub intended: ShareGroup,
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
    pub fn heartbeat(
        &self,
        group_id: &str,
        req: &ShareRequest,
        topics: &TopicView,
    ) -> Result<ShareDecision, Code> {
        if req.member_epoch == -1 {
            return self
                .leave(group_id, &req.member_id)
                .map(|records| ShareDecision {
                    records,
                    answer: ShareAnswer {
                        member_epoch: -1,
                        assignment: None,
                    },
                    #[cfg(test)]
                    intended: {
                        let mut left = self.clone();
                        left.members.remove(&req.member_id);
                        left.targets.remove(&req.member_id);
                        left.epoch += 1;
                        left
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
            previous_epoch: current.map_or(0, |m| m.previous_epoch),
            assigned: current.map(|m| m.assigned.clone()).unwrap_or_default(),
        };
        group.members.insert(req.member_id.clone(), member);
        let mut records = Vec::new();
        let hash = group.subscribed_hash(topics);
        if changed_subscription || hash != group.metadata_hash {
            group.epoch += 1;
            group.metadata_hash = hash;
            records.push(group.epoch_record(group_id));
        }
        if group.epoch > group.assignment_epoch {
            records.extend(group.new_targets(group_id, topics));
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
        records.extend(member_records(group_id, &req.member_id, stored, &member));
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
            #[cfg(test)]
            intended: group,
        })
    }

    /// The records of member `member_id` leaving (or its session lapsing).
    pub fn leave(&self, group_id: &str, member_id: &str) -> Result<Vec<ShareRecord>, Code> {
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId.code());
        }
        let key = |k: fn(String, String) -> ShareKey| k(group_id.into(), member_id.into());
        let mut bumped = self.clone();
        bumped.epoch += 1;
        Ok(vec![
            (
                key(|group, member| ShareKey::Assignment { group, member }),
                None,
            ),
            (
                key(|group, member| ShareKey::Target { group, member }),
                None,
            ),
            (
                key(|group, member| ShareKey::Member { group, member }),
                None,
            ),
            bumped.epoch_record(group_id),
        ])
    }

    /// Applies a durable record (written by a decision, or read back when
    /// the group is loaded, in whatever order compaction kept them).
    pub fn replay(&mut self, key: &ShareKey, value: Option<&ShareValue>) {
        use ShareKey as K;
        use ShareValue as V;
        match (key, value) {
            (
                K::Group { .. },
                Some(V::Group {
                    epoch,
                    metadata_hash,
                }),
            ) => {
                (self.epoch, self.metadata_hash) = (*epoch, *metadata_hash);
            }
            (K::Group { .. }, None) => *self = ShareGroup::default(),
            (K::TargetEpoch { .. }, Some(V::TargetEpoch(epoch))) => self.assignment_epoch = *epoch,
            (K::Target { member, .. }, Some(V::Target(target))) => {
                self.targets.insert(member.clone(), flatten(target));
            }
            (K::Target { member, .. }, None) => {
                self.targets.remove(member);
            }
            (K::Member { member, .. }, Some(V::Member(metadata))) => {
                self.member_entry(member).metadata = metadata.clone();
            }
            (K::Member { member, .. }, None) => {
                self.members.remove(member);
            }
            (
                K::Assignment { member, .. },
                Some(V::Assignment {
                    member_epoch,
                    previous_member_epoch,
                    assigned,
                }),
            ) => {
                let m = self.member_entry(member);
                (m.epoch, m.previous_epoch) = (*member_epoch, *previous_member_epoch);
                m.assigned = flatten(assigned);
            }
            // An assignment's tombstone comes with its member's; Kafka's
            // share-partition initialization (15) is not used here.
            _ => {}
        }
    }

    /// Member `id`, made (empty, at epoch 0) if unknown.
    fn member_entry(&mut self, id: &str) -> &mut ShareMember {
        self.members
            .entry(id.to_string())
            .or_insert_with(|| ShareMember {
                metadata: ShareMemberMetadata::default(),
                epoch: 0,
                previous_epoch: 0,
                assigned: BTreeSet::new(),
            })
    }

    /// The record of the group's epoch.
    fn epoch_record(&self, group_id: &str) -> ShareRecord {
        let value = ShareValue::Group {
            epoch: self.epoch,
            metadata_hash: self.metadata_hash,
        };
        (
            ShareKey::Group {
                group: group_id.into(),
            },
            Some(value),
        )
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
    fn new_targets(&mut self, group_id: &str, topics: &TopicView) -> Vec<ShareRecord> {
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
            .map(|(id, t)| {
                let key = ShareKey::Target {
                    group: group_id.into(),
                    member: id.clone(),
                };
                (key, Some(ShareValue::Target(by_topic(t))))
            })
            .collect();
        self.targets = targets;
        self.assignment_epoch = self.epoch;
        let key = ShareKey::TargetEpoch {
            group: group_id.into(),
        };
        records.push((key, Some(ShareValue::TargetEpoch(self.epoch))));
        records
    }

    /// A hash of the subscribed topics (ids and partition counts).
    fn subscribed_hash(&self, topics: &TopicView) -> i64 {
        let names = self
            .members
            .values()
            .flat_map(|m| &m.metadata.subscribed_topic_names);
        topics_hash(names, topics)
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

/// The records of a member's metadata and assignment, where they differ
/// from what is stored.
fn member_records(
    group_id: &str,
    member_id: &str,
    stored: Option<&ShareMember>,
    member: &ShareMember,
) -> Vec<ShareRecord> {
    let (group, id) = (group_id.to_string(), member_id.to_string());
    let mut records = Vec::new();
    if stored.is_none_or(|s| s.metadata != member.metadata) {
        let key = ShareKey::Member {
            group: group.clone(),
            member: id.clone(),
        };
        records.push((key, Some(ShareValue::Member(member.metadata.clone()))));
    }
    let place = |m: &ShareMember| (m.epoch, m.previous_epoch, m.assigned.clone());
    if stored.is_none_or(|s| place(s) != place(member)) {
        let value = ShareValue::Assignment {
            member_epoch: member.epoch,
            previous_member_epoch: member.previous_epoch,
            assigned: by_topic(&member.assigned),
        };
        records.push((ShareKey::Assignment { group, member: id }, Some(value)));
    }
    records
}

fn flatten(topics: &[TopicPartitions]) -> BTreeSet<Partition> {
    let each = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)));
    each.collect()
}

fn subscribed_ids(m: &ShareMemberMetadata, topics: &TopicView) -> BTreeSet<TopicId> {
    let names = m.subscribed_topic_names.iter();
    names
        .filter_map(|n| topics.get(n).map(|(id, _)| *id))
        .collect()
}

#[cfg(test)]
mod tests;
