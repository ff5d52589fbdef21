//! An administrator's view and changes of a share group's share-partition
//! states on its coordinator (DescribeShareGroupOffsets,
//! AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups): the
//! start offsets stored, and resets or deletions of them. A change needs
//! the group to be a share group without members (GROUP_ID_NOT_FOUND,
//! NON_EMPTY_GROUP, as Kafka), is appended under the partition's append
//! lock like a leader's write, and moves each state's state epoch, so a
//! leader still holding the old state is fenced from writing it back
//! (`crate::groups::share_state`).

use std::time::Instant;

use kafka_protocol::ResponseError;

use super::consumer_groups::replay;
use super::offsets_partition::OffsetsPartition;
use crate::groups::records::{Key, Value};
use crate::groups::share_state::ShareStateKey;
use crate::groups::store::PartitionGroups;
use crate::kafka::Code;

/// A stored start offset and the epoch of the leader that wrote it (-1,
/// -1: not initialized).
pub type StartOffset = (i64, i32);

impl OffsetsPartition {
    /// The start offsets of `group`'s share-partitions `keys`, or (None)
    /// of every one it initialized. No check that the group exists: one
    /// that does not has none (as Kafka answers).
    pub fn share_start_offsets(
        &self,
        group: &str,
        keys: Option<Vec<ShareStateKey>>,
    ) -> Vec<(ShareStateKey, StartOffset)> {
        let groups = self.groups.borrow();
        let states = &groups.share_states;
        let keys = keys.unwrap_or_else(|| states.keys_of(group));
        let start_of = |key: &ShareStateKey| {
            let stored = states.get(key);
            let initialized = stored.and_then(|v| Some((v.state.as_ref()?.start, v.leader_epoch)));
            initialized.unwrap_or((-1, -1))
        };
        keys.into_iter()
            .map(|key| {
                let start = start_of(&key);
                (key, start)
            })
            .collect()
    }

    /// Resets `group`'s share-partitions: each to start at its offset, or
    /// (None) to be initialized again by its leader as
    /// `share.auto.offset.reset` says. Answered once durable.
    pub async fn reset_share_states(
        &self,
        group: &str,
        resets: Vec<(ShareStateKey, Option<i64>)>,
    ) -> Result<(), Code> {
        self.change_share_states(group, |_| resets)
            .await
            .map(|_| ())
    }

    /// Deletes `group`'s states of the topics `topics` (ids): for each,
    /// whether it had any (UNKNOWN_TOPIC_OR_PARTITION else, as Kafka).
    pub async fn delete_share_states(
        &self,
        group: &str,
        topics: Vec<[u8; 16]>,
    ) -> Result<Vec<bool>, Code> {
        let mut had = vec![false; topics.len()];
        let deleted = self
            .change_share_states(group, |groups| {
                let states = &groups.share_states;
                for key in states.keys_of(group) {
                    let index = topics.iter().position(|t| *t == key.topic);
                    index.into_iter().for_each(|i| had[i] = true);
                }
                let marked = states.keys_to_delete(group).into_iter();
                let of_topics = marked.filter(|key| topics.contains(&key.topic));
                of_topics.map(|key| (key, None)).collect()
            })
            .await;
        deleted.map(|_| had)
    }

    /// Appends the changes `choose` picks, if `group` is a share group
    /// without members.
    async fn change_share_states(
        &self,
        group: &str,
        choose: impl FnOnce(&PartitionGroups) -> Vec<(ShareStateKey, Option<i64>)>,
    ) -> Result<(), Code> {
        let (_, outcome) = self
            .append_then(
                |groups| match empty_share_group(groups, group) {
                    Ok(()) => {
                        let changes = choose(groups);
                        (share_state_resets(groups, changes), Ok(()))
                    }
                    Err(code) => (Vec::new(), Err(code)),
                },
                |groups, records| replay(groups, records, Instant::now()),
            )
            .await?;
        outcome
    }
}

/// Whether `group` is a share group without members.
fn empty_share_group(groups: &PartitionGroups, group: &str) -> Result<(), Code> {
    let share = groups.get(group).and_then(|entry| entry.share.as_ref());
    match share {
        None => Err(ResponseError::GroupIdNotFound.code()),
        Some(share) if !share.members.is_empty() => Err(ResponseError::NonEmptyGroup.code()),
        Some(_) => Ok(()),
    }
}

/// The records of an administrator's resets (a start offset) and
/// deletions (None) of share-partition states.
pub(super) fn share_state_resets(
    groups: &PartitionGroups,
    changes: Vec<(ShareStateKey, Option<i64>)>,
) -> Vec<(Key, Option<Value>)> {
    let records = changes.into_iter().map(|(key, start)| {
        let value = groups.share_states.reset(&key, start);
        (Key::ShareState(key), Some(Value::ShareState(value)))
    });
    records.collect()
}
