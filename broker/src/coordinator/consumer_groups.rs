//! Consumer groups (KIP-848) on the coordinator: a ConsumerGroupHeartbeat
//! is decided by the group's rules (`groups::modern::consumer`) under the
//! partition's append lock, its records appended with acks=all and
//! replayed into the group once durable, then answered; members whose
//! session lapsed (`group_consumer_session_timeout_ms`), or that kept
//! partitions past their rebalance timeout, are removed the same way by
//! the shard's tick.

use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;

use super::offsets_partition::OffsetsPartition;
use crate::cluster::topics::is_internal;
use crate::config::migration_policy::MigrationPolicy;
use crate::counters::ShardMetrics;
use crate::groups::modern::assign::PartitionRacks;
use crate::groups::modern::consumer::{Answer, ConsumerGroup, Record, Request, TopicId, TopicView};
use crate::groups::modern::group_records::ConsumerKey;
use crate::groups::records::{Key, Value};
use crate::groups::store::{GroupEntry, PartitionGroups};
use crate::kafka::Code;

impl OffsetsPartition {
    /// Answers a validated heartbeat of consumer group `group`, against
    /// the topics as this shard (the group's) sees them.
    pub async fn consumer_heartbeat(&self, group: &str, req: Request) -> Result<Answer, Code> {
        let member = req.member_id.clone();
        // Leaving for now is no sign of life: the session runs on from the
        // member's last heartbeat, as Kafka's.
        let alive = req.member_epoch >= 0;
        let topics = self.topic_view();
        let policy = self.partitions.cluster.config.migration_policy();
        // A refused heartbeat keeps no session alive.
        let accepted = std::cell::Cell::new(false);
        let metrics = &self.partitions.metrics;
        let (_, decided) = self
            .append_then(
                |groups| match timed(metrics, || {
                    let racks = || self.partition_racks();
                    decide(groups, group, &req, (&topics, &racks), policy)
                }) {
                    Ok((records, answer)) => {
                        accepted.set(true);
                        (records, Ok(answer))
                    }
                    Err(code) => (Vec::new(), Err(code)),
                },
                |groups, records| {
                    let now = Instant::now();
                    replay(groups, records, now);
                    self.drop_classic_waiters(group, records);
                    let entry = groups.get_mut(group).filter(|_| accepted.get() && alive);
                    if let Some(entry) = entry {
                        let known = (entry.consumer.as_ref())
                            .is_some_and(|c| c.members.contains_key(&member));
                        if known {
                            entry.sessions.insert(member.clone(), now);
                        }
                    }
                },
            )
            .await?;
        decided
    }

    /// How long a member of `group` may stay silent (the group's
    /// `consumer.session.timeout.ms`, else `group_consumer_session_timeout_ms`).
    fn session_timeout(&self, group: &str) -> Duration {
        let timeouts = self.partitions.cluster.consumer_group_timeouts(group);
        Duration::from_millis(timeouts.session_ms)
    }

    /// Every topic by name: id and partition count; not the coordinators'
    /// own (`is_internal`), which Kafka's regular expressions never
    /// match and no consumer group reads.
    pub(super) fn topic_view(&self) -> TopicView {
        let view = self.partitions.cluster.view.borrow();
        let topics = view.metadata.topics.values();
        topics
            .filter(|t| !is_internal(&t.name))
            .map(|t| (t.name.clone(), (t.id.0, t.partitions.len() as u32)))
            .collect()
    }

    /// The racks of each partition's replicas, for rack-aware assignment
    /// (empty when no broker has a rack: nothing to compute). Asked only
    /// when a heartbeat computes new targets, not at every heartbeat.
    pub(super) fn partition_racks(&self) -> PartitionRacks<TopicId> {
        let view = self.partitions.cluster.view.borrow();
        let metadata = &view.metadata;
        let rack_of = |b: &control::BrokerId| {
            let broker = metadata.brokers.get(b)?;
            broker.registration.rack.clone()
        };
        if metadata
            .brokers
            .values()
            .all(|b| b.registration.rack.is_none())
        {
            return PartitionRacks::new();
        }
        let topics = metadata.topics.values().filter(|t| !is_internal(&t.name));
        let partitions = topics.flat_map(|t| {
            let each = t.partitions.iter().enumerate();
            each.map(move |(i, p)| ((t.id.0, i as i32), p))
        });
        let racks =
            partitions.map(|(key, p)| (key, p.replicas.iter().filter_map(rack_of).collect()));
        racks.collect()
    }

    /// Removes the consumer group members whose session lapsed by `now`,
    /// and those that kept partitions they were told to give up past
    /// their rebalance timeout (Kafka fences both alike: the member
    /// rejoins).
    pub async fn expire_consumer_members(&self, now: Instant) {
        let overdue: Vec<(String, String, &'static str, Duration)> = {
            let groups = self.groups.borrow();
            let mut overdue = Vec::new();
            for id in groups.ids() {
                let Some(entry) = groups.get(&id) else {
                    continue;
                };
                let session = self.session_timeout(&id);
                let members = entry.sessions.keys().chain(entry.revoking.keys());
                let members = members.chain(entry.classic_deadlines.keys());
                for member in members.collect::<std::collections::BTreeSet<_>>() {
                    if let Some(why) = why_overdue(entry, member, now, session) {
                        overdue.push((id.clone(), member.clone(), why, session));
                    }
                }
            }
            overdue
        };
        let policy = self.partitions.cluster.config.migration_policy();
        let topics = self.topic_view();
        for (group, member, why, session) in overdue {
            let left = self
                .append_then(
                    |groups| {
                        // A heartbeat may have come meanwhile.
                        let entry = groups.get(&group);
                        let still =
                            entry.filter(|e| why_overdue(e, &member, now, session).is_some());
                        let Some(consumer) = still.and_then(|e| e.consumer.as_ref()) else {
                            return (Vec::new(), false);
                        };
                        let back = (policy.downgrade)
                            .then(|| downgraded(&group, consumer, &member, &topics));
                        match (back.flatten(), consumer.leave(&group, &member, -1)) {
                            (Some(records), _) => (records, true),
                            (None, Ok(decision)) => (as_keys(decision.records), true),
                            (None, Err(_)) => (Vec::new(), false),
                        }
                    },
                    |groups, records| replay(groups, records, now),
                )
                .await;
            match left {
                Ok((_, true)) => {
                    tracing::info!(%group, %member, why, "consumer group member removed")
                }
                Ok(_) => {}
                Err(code) => {
                    tracing::warn!(%group, %member, code, "cannot remove an overdue member")
                }
            }
        }
    }
}

/// Why consumer group member `member` must go at `now` (None: it may
/// stay): its session lapsed, or it still holds partitions it was told to
/// give up longer than its rebalance timeout.
fn why_overdue(
    entry: &GroupEntry,
    member: &str,
    now: Instant,
    session: Duration,
) -> Option<&'static str> {
    let metadata = entry
        .consumer
        .as_ref()?
        .members
        .get(member)
        .map(|m| &m.metadata);
    // A classic member keeps the session timeout of its JoinGroup.
    let classic = metadata.and_then(|m| m.classic.as_ref());
    let session = classic.map_or(session, |c| {
        Duration::from_millis(c.session_timeout_ms.max(0) as u64)
    });
    let seen = entry.sessions.get(member);
    if seen.is_some_and(|at| now.duration_since(*at) > session) {
        return Some("its session expired");
    }
    if entry
        .classic_deadlines
        .get(member)
        .is_some_and(|d| now > *d)
    {
        return Some("it did not join again or sync within its rebalance timeout");
    }
    let (_, since) = entry.revoking.get(member)?;
    let metadata = metadata?;
    let timeout = Duration::from_millis(metadata.rebalance_timeout_ms.max(0) as u64);
    (now.duration_since(*since) > timeout)
        .then_some("it kept revoked partitions past its rebalance timeout")
}

impl OffsetsPartition {
    /// Ends the state of consumer group `group` once it has no members
    /// (a classic member joins it: the group becomes classic again, as
    /// Kafka converts an empty group): its records' tombstones, written and
    /// replayed. Nothing to do for a group without that state.
    pub async fn end_empty_consumer_group(&self, group: &str) -> Result<(), Code> {
        self.append_then(
            |groups| {
                let entry = groups.get(group);
                let ended = entry.filter(|e| !e.has_consumer_members());
                let consumer = ended.and_then(|e| e.consumer.as_ref());
                let records = consumer.map(|c| consumer_tombstones(group, c));
                (records.unwrap_or_default(), ())
            },
            |groups, records| replay(groups, records, Instant::now()),
        )
        .await
        .map(drop)
    }
}

/// The tombstones that end consumer group `group` (without members): its
/// members' targets if any are left, its target epoch, then its group
/// epoch (whose tombstone, replayed, drops the group's state).
pub(super) fn consumer_tombstones(group: &str, consumer: &ConsumerGroup) -> Vec<Stored> {
    let targets = consumer
        .targets
        .keys()
        .map(|member| ConsumerKey::TargetMember {
            group: group.into(),
            member: member.clone(),
        });
    let group_keys = [
        ConsumerKey::TargetEpoch {
            group: group.into(),
        },
        ConsumerKey::GroupEpoch {
            group: group.into(),
        },
    ];
    let keys = targets.chain(group_keys);
    keys.map(|key| (Key::Consumer(key), None)).collect()
}

/// Runs a heartbeat's `decide`, counting its time as an assignment's when
/// it computed new targets (its records carry a new target epoch).
fn timed(
    metrics: &ShardMetrics,
    decide: impl FnOnce() -> Result<(Vec<Stored>, Answer), Code>,
) -> Result<(Vec<Stored>, Answer), Code> {
    let started = Instant::now();
    let decided = decide();
    let assigned = decided.as_ref().is_ok_and(|(records, _)| {
        let target_epoch =
            |(key, _): &Stored| matches!(key, Key::Consumer(ConsumerKey::TargetEpoch { .. }));
        records.iter().any(target_epoch)
    });
    if assigned {
        metrics.consumer_group_assignment.observe(started.elapsed());
    }
    decided
}

/// A record of `__consumer_offsets`: key and value (None: a tombstone).
pub(super) type Stored = (Key, Option<Value>);

/// The records and answer of a heartbeat, against the group as it is: a
/// classic group with members is converted first when the policy allows
/// (the heartbeat of its first consumer protocol member), and the last
/// consumer protocol member leaving converts the group back.
fn decide(
    groups: &mut PartitionGroups,
    group: &str,
    req: &Request,
    (topics, racks): (&TopicView, &dyn Fn() -> PartitionRacks<TopicId>),
    policy: MigrationPolicy,
) -> Result<(Vec<Stored>, Answer), Code> {
    let entry = groups.get(group);
    if entry.is_some_and(|e| e.share.is_some()) {
        // A share group is not a consumer group (Kafka's answer).
        return Err(ResponseError::GroupIdNotFound.code());
    }
    let mut records = Vec::new();
    let consumer = match entry {
        // (A group holding both kinds of state is not made: a classic join
        // that waited while its group was converted goes to the consumer
        // group; should one exist, its consumer state is the one served.)
        Some(classic) if classic.has_classic_members() && classic.consumer.is_none() => {
            if req.member_epoch != 0 || !policy.upgrade {
                return Err(ResponseError::GroupIdNotFound.code());
            }
            let (converted, conversion) = upgraded(group, classic, topics)?;
            records.push((Key::Group(group.into()), None));
            records.extend(as_keys(conversion));
            converted
        }
        _ => {
            if req.member_epoch != 0 && entry.is_none_or(|e| e.consumer.is_none()) {
                return Err(ResponseError::GroupIdNotFound.code());
            }
            entry.and_then(|e| e.consumer.clone()).unwrap_or_default()
        }
    };
    let decision = consumer.heartbeat(group, req, topics, racks, None)?;
    let downgrade = (req.member_epoch == -1 && policy.downgrade)
        .then(|| downgraded(group, &consumer, &req.member_id, topics))
        .flatten();
    records.extend(downgrade.unwrap_or_else(|| as_keys(decision.records)));
    Ok((records, decision.answer))
}

/// Classic group `group` (with members) as a consumer group, and the
/// records that make it one.
fn upgraded(
    group: &str,
    classic: &GroupEntry,
    topics: &TopicView,
) -> Result<(ConsumerGroup, Vec<Record>), Code> {
    let snapshot = classic.membership.snapshot();
    let protocols = |member: &str| {
        let listed = classic.membership.protocols_of(member).unwrap_or_default();
        listed
            .iter()
            .map(|(n, m)| (n.clone(), m.to_vec()))
            .collect()
    };
    ConsumerGroup::from_classic(group, &snapshot, &protocols, topics)
}

/// The records converting consumer group `group` back to a classic group
/// as consumer protocol member `leaving` goes, if only classic members
/// stay (and share a protocol): the consumer group's tombstones, then
/// the classic group's record.
pub(super) fn downgraded(
    group: &str,
    consumer: &ConsumerGroup,
    leaving: &str,
    topics: &TopicView,
) -> Option<Vec<Stored>> {
    let member = consumer.members.get(leaving)?;
    if member.metadata.classic.is_some() {
        return None;
    }
    let (tombstones, snapshot) = consumer.downgraded(group, leaving, topics)?;
    let mut records = as_keys(tombstones);
    records.push((Key::Group(group.into()), Some(Value::Group(snapshot))));
    Some(records)
}

/// Consumer group records in `__consumer_offsets`' key space.
pub(super) fn as_keys(records: Vec<Record>) -> Vec<Stored> {
    records
        .into_iter()
        .map(|(k, v)| (Key::Consumer(k), v.map(Value::Consumer)))
        .collect()
}

/// Replays durable consumer and share group records into the groups,
/// and those of a conversion: a classic group's tombstone (upgraded) ends its
/// membership; its record (downgraded) restores it, and the members join
/// again under the classic protocol at once.
pub(super) fn replay(groups: &mut PartitionGroups, records: &[Stored], now: Instant) {
    for (key, value) in records {
        match (key, value) {
            (Key::Consumer(key), value) => {
                let value = match value {
                    Some(Value::Consumer(v)) => Some(v),
                    _ => None,
                };
                groups.replay_consumer(key, value, now);
            }
            (Key::Group(group), Some(Value::Group(snapshot))) => {
                groups.restore_membership(group, snapshot.clone(), now);
                groups.entry(group).membership.rebalance(now);
            }
            (Key::Group(group), None) => groups.clear_membership(group),
            (Key::Share(key), value) => {
                let value = match value {
                    Some(Value::Share(v)) => Some(v),
                    _ => None,
                };
                groups.replay_share(key, value, now);
            }
            (Key::ShareState(key), value) => {
                let value = match value {
                    Some(Value::ShareState(v)) => Some(v),
                    _ => None,
                };
                groups.share_states.replay(key, value);
            }
            _ => {}
        }
    }
}
