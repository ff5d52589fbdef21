//! A group's offsets and its life as an entity (OffsetCommit,
//! OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups) on
//! the partition coordinating it.

use std::time::Instant;

use kafka_protocol::ResponseError;

use super::consumer_groups::{consumer_tombstones, replay};
use super::offsets_partition::OffsetsPartition;
use super::share_groups::share_tombstones;
use super::share_offsets::share_state_resets;
use super::Listed;
use crate::groups::consumer_protocol;
use crate::groups::membership::GroupSnapshot;
use crate::groups::modern::consumer::ConsumerGroup;
use crate::groups::modern::share_group::ShareGroup;
use crate::groups::records::{CommittedOffset, Key, Value};
use crate::kafka::Code;

impl OffsetsPartition {
    /// OffsetCommit of already validated partitions: one code for all
    /// (the member may not commit, or the write failed), or success.
    pub async fn commit(
        &self,
        group: &str,
        member: (&str, Option<&str>, i32),
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Code {
        let (member_id, instance_id, generation) = member;
        let allowed = match self.groups.borrow().get(group) {
            // A share group keeps no offsets (Kafka's answer).
            Some(entry) if entry.share.is_some() => Err(ResponseError::GroupIdNotFound.code()),
            Some(entry) => match entry.consumer_group() {
                Some(consumer) => consumer.may_commit(member_id, generation),
                None => entry
                    .membership
                    .may_commit(member_id, instance_id, generation),
            },
            // A group nobody joined: simple consumers commit with
            // generation -1 and no member id.
            None if generation < 0 && member_id.is_empty() => Ok(()),
            None => Err(ResponseError::IllegalGeneration.code()),
        };
        if let Err(code) = allowed {
            return code;
        }
        let records: Vec<(Key, Option<Value>)> = offsets
            .iter()
            .map(|(topic, partition, committed)| {
                (
                    Key::Offset {
                        group: group.to_string(),
                        topic: topic.clone(),
                        partition: *partition,
                    },
                    Some(Value::Offset(committed.clone())),
                )
            })
            .collect();
        match self.append(move |_| (records, ())).await {
            Ok((Some(base), ())) => {
                let mut groups = self.groups.borrow_mut();
                for (i, (topic, partition, committed)) in offsets.into_iter().enumerate() {
                    groups.apply_offset(group, topic, partition, base + i as i64, Some(committed));
                }
                0
            }
            Ok((None, ())) => 0,
            Err(code) => code,
        }
    }

    /// The committed offsets of a group: of the given partitions, or all.
    pub fn fetch(
        &self,
        group: &str,
        wanted: Option<Vec<(String, Vec<i32>)>>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        let groups = self.groups.borrow();
        let entry = groups.get(group);
        match wanted {
            Some(wanted) => wanted
                .into_iter()
                .flat_map(|(topic, partitions)| {
                    partitions.into_iter().map(move |p| (topic.clone(), p))
                })
                .map(|(topic, p)| {
                    let committed = entry
                        .and_then(|e| e.offsets.get(&(topic.clone(), p)))
                        .map(|s| s.committed.clone());
                    (topic, p, committed)
                })
                .collect(),
            None => entry
                .map(|e| {
                    e.offsets
                        .iter()
                        .map(|((t, p), s)| (t.clone(), *p, Some(s.committed.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Whether a transaction not yet decided holds an offset of `group`'s
    /// `topic`/`partition`.
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.groups
            .borrow()
            .has_pending_offset(group, topic, partition)
    }

    /// The group's membership (None: no such classic group; a consumer
    /// or share group is described by ConsumerGroupDescribe or
    /// ShareGroupDescribe, as Kafka's).
    pub fn describe(&self, group: &str) -> Option<GroupSnapshot> {
        let groups = self.groups.borrow();
        let entry = groups.get(group)?;
        match entry.consumer_group().is_some() || entry.share.is_some() {
            true => None,
            false => Some(entry.membership.snapshot()),
        }
    }

    /// Consumer group `group` as it stands (GROUP_ID_NOT_FOUND: none, or
    /// a classic group).
    pub fn describe_consumer(&self, group: &str) -> Result<ConsumerGroup, Code> {
        let groups = self.groups.borrow();
        let consumer = groups.get(group).and_then(|e| e.consumer_group());
        consumer
            .cloned()
            .ok_or_else(|| ResponseError::GroupIdNotFound.code())
    }

    /// Share group `group` as it stands (GROUP_ID_NOT_FOUND: none, or a
    /// group of another kind).
    pub fn describe_share(&self, group: &str) -> Result<ShareGroup, Code> {
        let groups = self.groups.borrow();
        let share = groups.get(group).and_then(|e| e.share.as_ref());
        share
            .cloned()
            .ok_or_else(|| ResponseError::GroupIdNotFound.code())
    }

    /// Every group of this partition.
    pub fn list(&self) -> Vec<Listed> {
        let groups = self.groups.borrow();
        groups
            .ids()
            .into_iter()
            .filter_map(|id| {
                let entry = groups.get(&id)?;
                if let Some(share) = &entry.share {
                    let state = if share.members.is_empty() {
                        "Empty"
                    } else {
                        "Stable"
                    };
                    return Some(Listed {
                        protocol_type: "share".to_string(),
                        state,
                        group_type: "share",
                        group: id,
                    });
                }
                let listed = match entry.consumer_group() {
                    Some(consumer) => Listed {
                        protocol_type: "consumer".to_string(),
                        state: consumer.state().name(),
                        group_type: "consumer",
                        group: id,
                    },
                    None => Listed {
                        protocol_type: (entry.membership.protocol_type())
                            .unwrap_or_default()
                            .to_string(),
                        state: entry.membership.state().name(),
                        group_type: "classic",
                        group: id,
                    },
                };
                Some(listed)
            })
            .collect()
    }

    /// DeleteGroups of one group: only without members; its offsets,
    /// membership and consumer group state are deleted (tombstones), then
    /// forgotten.
    pub async fn delete_group(&self, group: &str) -> Code {
        let group = group.to_string();
        let result = self
            .append(|groups| match groups.get(&group) {
                None => (vec![], Err(ResponseError::GroupIdNotFound.code())),
                Some(entry) if entry.has_members() => {
                    (vec![], Err(ResponseError::NonEmptyGroup.code()))
                }
                Some(entry) => {
                    let deleted: Vec<(String, i32)> = entry.offsets.keys().cloned().collect();
                    let mut records: Vec<(Key, Option<Value>)> = deleted
                        .iter()
                        .map(|(topic, partition)| {
                            (
                                Key::Offset {
                                    group: group.clone(),
                                    topic: topic.clone(),
                                    partition: *partition,
                                },
                                None,
                            )
                        })
                        .collect();
                    records.push((Key::Group(group.clone()), None));
                    let consumer = entry.consumer.as_ref();
                    let ended = consumer.map(|c| consumer_tombstones(&group, c));
                    let mut ended = ended.unwrap_or_default();
                    let share = entry.share.as_ref();
                    ended.extend(
                        share
                            .map(|s| share_tombstones(&group, s))
                            .unwrap_or_default(),
                    );
                    // Its share-partitions' states, deleted as an
                    // administrator deletes them (kept as markers of
                    // their state epochs, fencing leaders holding them).
                    let states = groups.share_states.keys_to_delete(&group);
                    let states = states.into_iter().map(|key| (key, None)).collect();
                    ended.extend(share_state_resets(groups, states));
                    records.extend(ended.iter().cloned());
                    (records, Ok((deleted, ended)))
                }
            })
            .await;
        match result {
            Ok((base, Ok((deleted, ended)))) => {
                // As a replay would apply the tombstones.
                let mut groups = self.groups.borrow_mut();
                replay(&mut groups, &ended, Instant::now());
                let base = base.unwrap_or_default();
                for (i, (topic, partition)) in deleted.into_iter().enumerate() {
                    groups.apply_offset(&group, topic, partition, base + i as i64, None);
                }
                groups.clear_membership(&group);
                0
            }
            Ok((_, Err(code))) | Err(code) => code,
        }
    }

    /// OffsetDelete: the group's offsets of the given partitions, unless
    /// a live member subscribes to the topic. Returns the group's code and
    /// one per partition.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> (Code, Vec<Code>) {
        let wanted = partitions.clone();
        let result = self
            .append(move |groups| {
                let Some(entry) = groups.get(group).filter(|e| e.share.is_none()) else {
                    return (vec![], Err(ResponseError::GroupIdNotFound.code()));
                };
                let snapshot = entry.membership.snapshot();
                let subscribed: Vec<String> = if snapshot.protocol_type == "consumer" {
                    snapshot
                        .members
                        .iter()
                        .filter_map(|m| consumer_protocol::subscribed_topics(&m.subscription))
                        .flatten()
                        .collect()
                } else {
                    vec![]
                };
                let mut records = Vec::new();
                let mut deleted = Vec::new();
                let codes = wanted
                    .iter()
                    .map(|(topic, partition)| {
                        if subscribed.contains(topic) {
                            return ResponseError::GroupSubscribedToTopic.code();
                        }
                        if entry.offsets.contains_key(&(topic.clone(), *partition)) {
                            deleted.push((topic.clone(), *partition));
                            records.push((
                                Key::Offset {
                                    group: group.to_string(),
                                    topic: topic.clone(),
                                    partition: *partition,
                                },
                                None,
                            ));
                        }
                        0
                    })
                    .collect::<Vec<Code>>();
                (records, Ok((codes, deleted)))
            })
            .await;
        match result {
            Ok((base, Ok((codes, deleted)))) => {
                if let Some(base) = base {
                    let mut groups = self.groups.borrow_mut();
                    for (i, (topic, partition)) in deleted.into_iter().enumerate() {
                        groups.apply_offset(group, topic, partition, base + i as i64, None);
                    }
                }
                (0, codes)
            }
            Ok((_, Err(code))) | Err(code) => (code, vec![code; partitions.len()]),
        }
    }
}
