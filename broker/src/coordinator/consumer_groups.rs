//! Consumer groups (KIP-848) on the coordinator: a ConsumerGroupHeartbeat
//! is decided by the group's rules (`groups::modern::consumer`) under the
//! partition's append lock, its records appended with acks=all and
//! replayed into the group once durable, then answered; members whose
//! session lapsed (`group_consumer_session_timeout_ms`) are removed the
//! same way by the shard's tick.

use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;

use super::offsets_partition::OffsetsPartition;
use crate::groups::modern::consumer::{Answer, Record, Request, TopicView};
use crate::groups::records::{Key, Value};
use crate::groups::store::PartitionGroups;
use crate::kafka::Code;

impl OffsetsPartition {
    /// Answers a validated heartbeat of consumer group `group`, against
    /// the topics as this shard (the group's) sees them.
    pub async fn consumer_heartbeat(&self, group: &str, req: Request) -> Result<Answer, Code> {
        let member = req.member_id.clone();
        let topics = self.topic_view();
        // A refused heartbeat keeps no session alive.
        let accepted = std::cell::Cell::new(false);
        let (_, decided) = self
            .append_then(
                |groups| match decide(groups, group, &req, &topics) {
                    Ok((records, answer)) => {
                        accepted.set(true);
                        (records, Ok(answer))
                    }
                    Err(code) => (Vec::new(), Err(code)),
                },
                |groups, records| {
                    let now = Instant::now();
                    replay(groups, records, now);
                    let entry = groups.get_mut(group).filter(|_| accepted.get());
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

    /// How long a member may stay silent (`group_consumer_session_timeout_ms`).
    fn session_timeout(&self) -> Duration {
        let ms = self
            .partitions
            .cluster
            .config
            .group_consumer_session_timeout_ms;
        Duration::from_millis(ms)
    }

    /// Every topic by name: id and partition count.
    fn topic_view(&self) -> TopicView {
        let view = self.partitions.cluster.view.borrow();
        let topics = view.metadata.topics.values();
        topics
            .map(|t| (t.name.clone(), (t.id.0, t.partitions.len() as u32)))
            .collect()
    }

    /// Removes the consumer group members whose session lapsed by `now`.
    pub async fn expire_consumer_members(&self, now: Instant) {
        let session = self.session_timeout();
        let lapsed: Vec<(String, String)> = {
            let groups = self.groups.borrow();
            groups
                .ids()
                .into_iter()
                .filter_map(|id| groups.get(&id).map(|e| (id, e)))
                .flat_map(|(id, entry)| {
                    entry
                        .sessions
                        .iter()
                        .filter(|(_, seen)| now.duration_since(**seen) > session)
                        .map(|(member, _)| (id.clone(), member.clone()))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for (group, member) in lapsed {
            let left = self
                .append_then(
                    |groups| {
                        // A heartbeat may have come meanwhile.
                        let entry = groups.get(&group);
                        let seen = entry.and_then(|e| e.sessions.get(&member));
                        let lapsed = seen.is_some_and(|at| now.duration_since(*at) > session);
                        let consumer = entry.and_then(|e| e.consumer.as_ref());
                        match consumer
                            .filter(|_| lapsed)
                            .map(|c| c.leave(&group, &member, -1))
                        {
                            Some(Ok(decision)) => (as_keys(decision.records), ()),
                            _ => (Vec::new(), ()),
                        }
                    },
                    |groups, records| replay(groups, records, now),
                )
                .await;
            match left {
                Ok(_) => tracing::info!(%group, %member, "consumer group member's session expired"),
                Err(code) => {
                    tracing::warn!(%group, %member, code, "cannot remove an expired member")
                }
            }
        }
    }
}

/// A record of `__consumer_offsets`: key and value (None: a tombstone).
type Stored = (Key, Option<Value>);

/// The records and answer of a heartbeat, against the group as it is.
fn decide(
    groups: &mut PartitionGroups,
    group: &str,
    req: &Request,
    topics: &TopicView,
) -> Result<(Vec<Stored>, Answer), Code> {
    let entry = groups.get(group);
    let classic_in_use = entry.is_some_and(|e| e.has_classic_members());
    if classic_in_use {
        // A classic group with members: not converted online (yet).
        return Err(ResponseError::GroupIdNotFound.code());
    }
    let consumer = entry.and_then(|e| e.consumer.clone()).unwrap_or_default();
    if req.member_epoch != 0 && entry.is_none_or(|e| e.consumer.is_none()) {
        return Err(ResponseError::GroupIdNotFound.code());
    }
    let decision = consumer.heartbeat(group, req, topics, None)?;
    Ok((as_keys(decision.records), decision.answer))
}

fn as_keys(records: Vec<Record>) -> Vec<Stored> {
    records
        .into_iter()
        .map(|(k, v)| (Key::Consumer(k), v.map(Value::Consumer)))
        .collect()
}

/// Replays durable consumer group records into the groups.
fn replay(groups: &mut PartitionGroups, records: &[Stored], now: Instant) {
    for (key, value) in records {
        if let Key::Consumer(key) = key {
            let value = match value {
                Some(Value::Consumer(v)) => Some(v),
                _ => None,
            };
            groups.replay_consumer(key, value, now);
        }
    }
}
