//! Share groups (KIP-932) on the coordinator: a ShareGroupHeartbeat is
//! decided by the group's rules (`groups::modern::share_group`) under the
//! partition's append lock, its records appended with acks=all and
//! replayed once durable, then answered; members whose session lapsed
//! are removed the same way by the shard's tick. A group is of one kind:
//! a classic or consumer group is not a share group (GROUP_ID_NOT_FOUND,
//! as Kafka answers).

use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;

use super::consumer_groups::{replay, Stored};
use super::offsets_partition::OffsetsPartition;
use crate::groups::modern::consumer::TopicView;
use crate::groups::modern::share_group::{ShareAnswer, ShareGroup, ShareRecord, ShareRequest};
use crate::groups::modern::share_records::ShareKey;
use crate::groups::records::{Key, Value};
use crate::groups::store::PartitionGroups;
use crate::kafka::Code;

impl OffsetsPartition {
    /// Answers a validated heartbeat of share group `group`.
    pub async fn share_heartbeat(
        &self,
        group: &str,
        req: ShareRequest,
    ) -> Result<ShareAnswer, Code> {
        let topics = self.topic_view();
        let member = req.member_id.clone();
        let alive = req.member_epoch >= 0;
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
                    let entry = groups.get_mut(group).filter(|_| alive && accepted.get());
                    let known = |e: &&mut crate::groups::store::GroupEntry| {
                        e.share
                            .as_ref()
                            .is_some_and(|s| s.members.contains_key(&member))
                    };
                    if let Some(entry) = entry.filter(known) {
                        entry.sessions.insert(member.clone(), now);
                    }
                },
            )
            .await?;
        decided
    }

    /// Removes the share group members whose session lapsed by `now`.
    pub async fn expire_share_members(&self, now: Instant) {
        let cluster = &self.partitions.cluster;
        let lapsed = |group: &str, entry: &crate::groups::store::GroupEntry, member: &str| {
            let seen = entry.sessions.get(member);
            let timeout = Duration::from_millis(cluster.share_group_settings(group).session_ms);
            entry.share.is_some() && seen.is_some_and(|at| now.duration_since(*at) > timeout)
        };
        let overdue: Vec<(String, String)> = {
            let groups = self.groups.borrow();
            let ids = groups.ids().into_iter();
            let each = ids.filter_map(|id| groups.get(&id).map(|e| (id, e)));
            each.flat_map(|(id, entry)| {
                let members = entry.sessions.keys().filter(|m| lapsed(&id, entry, m));
                members.map(|m| (id.clone(), m.clone())).collect::<Vec<_>>()
            })
            .collect()
        };
        for (group, member) in overdue {
            let left = self
                .append_then(
                    |groups| {
                        let entry = groups.get(&group).filter(|e| lapsed(&group, e, &member));
                        let share = entry.and_then(|e| e.share.as_ref());
                        match share.map(|s| s.leave(&group, &member)) {
                            Some(Ok(records)) => (as_keys(records), true),
                            _ => (Vec::new(), false),
                        }
                    },
                    |groups, records| replay(groups, records, now),
                )
                .await;
            match left {
                Ok((_, true)) => {
                    tracing::info!(%group, %member, "share group member's session expired")
                }
                Ok(_) => {}
                Err(code) => {
                    tracing::warn!(%group, %member, code, "cannot remove an expired share group member")
                }
            }
        }
    }
}

/// The records and answer of a heartbeat, against the group as it is.
fn decide(
    groups: &mut PartitionGroups,
    group: &str,
    req: &ShareRequest,
    topics: &TopicView,
) -> Result<(Vec<Stored>, ShareAnswer), Code> {
    let entry = groups.get(group);
    // Any other group of that id (classic, consumer, or one that only
    // holds committed offsets) is not a share group (Kafka's answer).
    let not_share = entry.is_some_and(|e| e.share.is_none());
    let unknown = req.member_epoch != 0 && entry.is_none_or(|e| e.share.is_none());
    if not_share || unknown {
        return Err(ResponseError::GroupIdNotFound.code());
    }
    let share = entry.and_then(|e| e.share.clone()).unwrap_or_default();
    let decision = share.heartbeat(group, req, topics)?;
    Ok((as_keys(decision.records), decision.answer))
}

fn as_keys(records: Vec<ShareRecord>) -> Vec<Stored> {
    let each = records.into_iter();
    each.map(|(k, v)| (Key::Share(k), v.map(Value::Share)))
        .collect()
}

/// The tombstones that end share group `group` (without members): its
/// targets, its target epoch, then its epoch (whose tombstone, replayed,
/// drops the group's state).
pub(super) fn share_tombstones(group: &str, share: &ShareGroup) -> Vec<Stored> {
    let targets = share.targets.keys().map(|member| ShareKey::Target {
        group: group.into(),
        member: member.clone(),
    });
    let group_keys = [
        ShareKey::TargetEpoch {
            group: group.into(),
        },
        ShareKey::Group {
            group: group.into(),
        },
    ];
    let keys = targets.chain(group_keys);
    keys.map(|key| (Key::Share(key), None)).collect()
}
