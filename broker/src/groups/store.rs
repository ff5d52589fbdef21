//! The groups of one `__consumer_offsets` partition: each group's
//! membership and committed offsets, rebuilt by replaying the partition's
//! records and kept in step as new ones are written.
//!
//! Sans-IO: the coordinator (on the partition's shard) reads and appends
//! the records; this decides what they mean and what to write next.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::membership::{Group, GroupSnapshot, GroupState};
use super::modern::consumer::ConsumerGroup;
use super::modern::group_records::{ConsumerKey, ConsumerValue};
use super::modern::reconcile::MemberState;
use super::modern::share_group::ShareGroup;
use super::modern::share_records::{ShareKey, ShareValue};
use super::pending::PendingOffsets;
use super::records::{self, CommittedOffset, Key, RecordError, Value};
use super::share_state::ShareStates;

/// A committed offset and the position of the record that stored it (a
/// later record wins, whatever order the writes completed in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The offset as committed.
    pub committed: CommittedOffset,
    /// The record's offset in `__consumer_offsets`.
    pub record_offset: i64,
}

/// One group: membership and committed offsets.
#[derive(Debug)]
pub struct GroupEntry {
    /// Its membership.
    pub membership: Group,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), Stored>,
    /// The membership as last written (None: never).
    persisted: Option<GroupSnapshot>,
    /// A consumer group's (KIP-848) state, if the group is one.
    pub consumer: Option<ConsumerGroup>,
    /// A share group's (KIP-932) state, if the group is one.
    pub share: Option<ShareGroup>,
    /// When each consumer group member last heartbeated (not stored: a
    /// new coordinator starts every session afresh, as Kafka's).
    pub sessions: BTreeMap<String, Instant>,
    /// Consumer group members told to give partitions up: the epoch they
    /// were told at and since when (not stored either: a new coordinator
    /// starts each such member's rebalance timeout afresh).
    pub revoking: BTreeMap<String, (i32, Instant)>,
    /// Classic members of a consumer group told to join again, or to
    /// sync after their join: by when (their rebalance timeout; not
    /// stored, as Kafka's join and sync timers).
    pub classic_deadlines: BTreeMap<String, Instant>,
}

impl GroupEntry {
    /// Whether the group has members, of any protocol.
    pub fn has_members(&self) -> bool {
        self.has_classic_members() || self.has_consumer_members() || self.has_share_members()
    }

    /// Whether the group is a share group (KIP-932) with members.
    pub fn has_share_members(&self) -> bool {
        self.share.as_ref().is_some_and(|s| !s.members.is_empty())
    }

    /// Whether the group has classic (JoinGroup) members.
    pub fn has_classic_members(&self) -> bool {
        !self.membership.member_ids().is_empty()
    }

    /// Whether the group is a consumer group (KIP-848) with members.
    pub fn has_consumer_members(&self) -> bool {
        self.consumer
            .as_ref()
            .is_some_and(|c| !c.members.is_empty())
    }

    /// The group as a consumer group (KIP-848), if it is one: it has that
    /// state and no classic members.
    pub fn consumer_group(&self) -> Option<&ConsumerGroup> {
        self.consumer
            .as_ref()
            .filter(|_| !self.has_classic_members())
    }

    /// The membership record to write, if it changed since the last one.
    /// Only settled states are written (Stable, Empty), as Kafka does: a
    /// rebalance in progress restarts after a restart anyway.
    pub fn membership_to_write(&self) -> Option<Value> {
        let state = self.membership.state();
        if !matches!(state, GroupState::Stable | GroupState::Empty) {
            return None;
        }
        let snapshot = self.membership.snapshot();
        let never_joined = snapshot.generation == 0 && snapshot.members.is_empty();
        if never_joined || self.persisted.as_ref() == Some(&snapshot) {
            return None;
        }
        Some(Value::Group(snapshot))
    }

    /// Notes that `value` (from [`membership_to_write`]) was written.
    pub fn written(&mut self, value: &Value) {
        if let Value::Group(snapshot) = value {
            self.persisted = Some(snapshot.clone());
        }
    }
}

/// The groups of one partition.
#[derive(Debug)]
pub struct PartitionGroups {
    groups: BTreeMap<String, GroupEntry>,
    initial_delay: Duration,
    /// Offsets written in transactions not decided yet.
    pending: PendingOffsets,
    /// The share-partitions' durable states of its share groups.
    pub share_states: ShareStates,
}

impl PartitionGroups {
    /// No groups; new groups wait `initial_delay` before their first
    /// generation completes.
    pub fn new(initial_delay: Duration) -> PartitionGroups {
        PartitionGroups {
            groups: BTreeMap::new(),
            initial_delay,
            pending: PendingOffsets::default(),
            share_states: ShareStates::default(),
        }
    }

    /// Applies one stored record (replay at load), at `record_offset`.
    pub fn replay(
        &mut self,
        record_offset: i64,
        key: &[u8],
        value: Option<&[u8]>,
        now: Instant,
    ) -> Result<(), RecordError> {
        let key = records::decode_key(key)?;
        let value = value.map(|v| records::decode_value(&key, v)).transpose()?;
        match (key, value) {
            (
                Key::Offset {
                    group,
                    topic,
                    partition,
                },
                value,
            ) => {
                let committed = match value {
                    Some(Value::Offset(c)) => Some(c),
                    _ => None,
                };
                self.apply_offset(&group, topic, partition, record_offset, committed);
            }
            (Key::Group(group), Some(Value::Group(snapshot))) => {
                self.restore_membership(&group, snapshot, now);
            }
            (Key::Group(group), _) => self.clear_membership(&group),
            (Key::Consumer(key), value) => {
                let value = match value {
                    Some(Value::Consumer(v)) => Some(v),
                    _ => None,
                };
                self.replay_consumer(&key, value.as_ref(), now);
            }
            (Key::Share(key), value) => {
                let value = match value {
                    Some(Value::Share(v)) => Some(v),
                    _ => None,
                };
                self.replay_share(&key, value.as_ref(), now);
            }
            (Key::ShareState(key), value) => {
                let value = match value {
                    Some(Value::ShareState(v)) => Some(v),
                    _ => None,
                };
                self.share_states.replay(&key, value.as_ref());
            }
        }
        Ok(())
    }

    /// Restores `group`'s classic membership from its stored record (each
    /// member's session starting `now`).
    pub fn restore_membership(&mut self, group: &str, snapshot: GroupSnapshot, now: Instant) {
        let membership = Group::restore(group, snapshot.clone(), self.initial_delay, now);
        let entry = self.entry(group);
        entry.membership = membership;
        entry.persisted = Some(snapshot);
    }

    /// Applies a consumer group's durable record (written now, or read
    /// back at load): the group's own tombstone ends it; a member's
    /// metadata starts its session at `now`, and an assignment telling it
    /// to give partitions up its rebalance timeout.
    pub fn replay_consumer(
        &mut self,
        key: &ConsumerKey,
        value: Option<&ConsumerValue>,
        now: Instant,
    ) {
        let group = key.group().to_string();
        let entry = self.entry(&group);
        if let (ConsumerKey::GroupEpoch { .. }, None) = (key, value) {
            entry.consumer = None;
            entry.sessions.clear();
            entry.revoking.clear();
            entry.classic_deadlines.clear();
            self.forget_if_unused(&group);
            return;
        }
        let consumer = entry.consumer.get_or_insert_with(ConsumerGroup::default);
        consumer.replay(key, value);
        match (key, value) {
            (ConsumerKey::Member { member, .. }, Some(_)) => {
                entry.sessions.entry(member.clone()).or_insert(now);
            }
            (ConsumerKey::Member { member, .. }, None) => {
                entry.sessions.remove(member);
                entry.revoking.remove(member);
                entry.classic_deadlines.remove(member);
            }
            (ConsumerKey::CurrentAssignment { member, .. }, _) => {
                let revoking = (consumer.members.get(member))
                    .map(|m| &m.assignment)
                    .filter(|a| a.state == MemberState::UnrevokedPartitions);
                // Each new revocation starts the clock again (as Kafka's
                // timer, scheduled whenever such a record is written): a
                // member asked again at the same epoch, for other
                // partitions, gets its whole timeout for them. A member that
                // keeps holding on writes no new record.
                match revoking {
                    Some(a) => {
                        entry.revoking.insert(member.clone(), (a.epoch, now));
                    }
                    None => {
                        entry.revoking.remove(member);
                    }
                }
            }
            _ => {}
        }
    }

    /// Applies a share group's durable record (written now, or read back
    /// at load): the group's own tombstone ends it; a member's metadata
    /// starts its session at `now`.
    pub fn replay_share(&mut self, key: &ShareKey, value: Option<&ShareValue>, now: Instant) {
        let group = key.group().to_string();
        let entry = self.entry(&group);
        if let (ShareKey::Group { .. }, None) = (key, value) {
            entry.share = None;
            entry.sessions.clear();
            self.forget_if_unused(&group);
            return;
        }
        // A tombstone, or Kafka's share-partition initialization (15),
        // of a group not (or no longer) here makes none.
        let makes_nothing = value.is_none() || matches!(key, ShareKey::StatePartitions { .. });
        if entry.share.is_none() && makes_nothing {
            self.forget_if_unused(&group);
            return;
        }
        let share = entry.share.get_or_insert_with(ShareGroup::default);
        share.replay(key, value);
        match (key, value) {
            (ShareKey::Member { member, .. }, Some(_)) => {
                entry.sessions.entry(member.clone()).or_insert(now);
            }
            (ShareKey::Member { member, .. }, None) => {
                entry.sessions.remove(member);
            }
            _ => {}
        }
    }

    /// Applies one stored record of `producer_id`'s transaction (replay at
    /// load): an offset waits for the transaction's marker; anything else
    /// a transaction could not have written is skipped.
    pub fn replay_transactional(
        &mut self,
        producer_id: i64,
        record_offset: i64,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        let key = records::decode_key(key)?;
        let value = value.map(|v| records::decode_value(&key, v)).transpose()?;
        if let Key::Offset {
            group,
            topic,
            partition,
        } = key
        {
            let committed = match value {
                Some(Value::Offset(c)) => Some(c),
                _ => None,
            };
            let slot = (group, topic, partition);
            self.pending
                .add(producer_id, (slot, record_offset, committed));
        }
        Ok(())
    }

    /// An offset written at `record_offset` in `producer_id`'s open
    /// transaction (TxnOffsetCommit, live): it waits for the marker.
    pub fn add_pending_offset(
        &mut self,
        producer_id: i64,
        slot: (String, String, i32),
        record_offset: i64,
        committed: CommittedOffset,
    ) {
        self.pending
            .add(producer_id, (slot, record_offset, Some(committed)));
    }

    /// `producer_id`'s transaction ended here (its marker): its offsets
    /// are committed, or dropped.
    pub fn end_transaction(&mut self, producer_id: i64, commit: bool) {
        for ((group, topic, partition), record_offset, committed) in
            self.pending.end(producer_id, commit)
        {
            self.apply_offset(&group, topic, partition, record_offset, committed);
        }
    }

    /// Whether a transaction not yet decided holds an offset of `group`'s
    /// `topic`/`partition` (OffsetFetch's UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending.is_pending(group, topic, partition)
    }

    /// Stores (or with None, deletes) a committed offset written at
    /// `record_offset`, unless a later record already set it.
    pub fn apply_offset(
        &mut self,
        group: &str,
        topic: String,
        partition: i32,
        record_offset: i64,
        committed: Option<CommittedOffset>,
    ) {
        let entry = self.entry(group);
        let slot = (topic, partition);
        if entry
            .offsets
            .get(&slot)
            .is_some_and(|s| s.record_offset > record_offset)
        {
            return;
        }
        match committed {
            Some(committed) => {
                entry.offsets.insert(
                    slot,
                    Stored {
                        committed,
                        record_offset,
                    },
                );
            }
            None => {
                entry.offsets.remove(&slot);
            }
        }
        self.forget_if_unused(group);
    }

    /// The group, created empty if unknown.
    pub fn entry(&mut self, group: &str) -> &mut GroupEntry {
        let delay = self.initial_delay;
        self.groups
            .entry(group.to_string())
            .or_insert_with(|| GroupEntry {
                membership: Group::new(group, delay),
                offsets: BTreeMap::new(),
                persisted: None,
                consumer: None,
                sessions: BTreeMap::new(),
                revoking: BTreeMap::new(),
                classic_deadlines: BTreeMap::new(),
                share: None,
            })
    }

    /// The group, if it exists.
    pub fn get(&self, group: &str) -> Option<&GroupEntry> {
        self.groups.get(group)
    }

    /// The group, if it exists.
    pub fn get_mut(&mut self, group: &str) -> Option<&mut GroupEntry> {
        self.groups.get_mut(group)
    }

    /// Every group's id.
    pub fn ids(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// Forgets a group's membership (a group tombstone: DeleteGroups).
    /// Its offsets have tombstones of their own; one committed after the
    /// deletion was decided stays, in memory as on replay.
    pub fn clear_membership(&mut self, group: &str) {
        if let Some(entry) = self.groups.get_mut(group) {
            entry.membership = Group::new(group, self.initial_delay);
            entry.persisted = None;
        }
        self.forget_if_unused(group);
    }

    /// Drops a group that holds nothing: no members, no offsets, nothing
    /// stored about it.
    pub fn forget_if_unused(&mut self, group: &str) {
        let unused = self.groups.get(group).is_some_and(|e| {
            e.offsets.is_empty()
                && e.membership.is_idle()
                && e.membership.state() == GroupState::Empty
                && e.persisted.as_ref().is_none_or(|p| p.members.is_empty())
                && e.membership.generation() == 0
                && e.consumer.is_none()
                && e.share.is_none()
        });
        if unused {
            self.groups.remove(group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::membership::MemberSnapshot;
    use bytes::Bytes;

    fn offset(at: i64) -> CommittedOffset {
        CommittedOffset {
            offset: at,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }
    }

    fn record(key: &Key, value: Option<&Value>) -> (Vec<u8>, Option<Vec<u8>>) {
        (records::encode_key(key), value.map(records::encode_value))
    }

    #[test]
    fn each_revocation_starts_the_members_rebalance_clock_again() {
        use crate::groups::modern::group_records::{CurrentAssignment, TopicPartitions};
        let mut groups = PartitionGroups::new(Duration::ZERO);
        let key = ConsumerKey::CurrentAssignment {
            group: "g".into(),
            member: "m".into(),
        };
        let told = |state: i8, pending: i32| {
            ConsumerValue::CurrentAssignment(CurrentAssignment {
                member_epoch: 3,
                previous_member_epoch: 3,
                state,
                assigned: vec![],
                pending_revocation: vec![TopicPartitions {
                    topic_id: [1; 16],
                    partitions: vec![pending],
                }],
            })
        };
        let start = Instant::now();
        let later = start + Duration::from_secs(5);
        groups.replay_consumer(&key, Some(&told(1, 0)), start);
        assert_eq!(groups.get("g").unwrap().revoking["m"], (3, start));
        // Asked again at the same epoch, for another partition: a new clock.
        groups.replay_consumer(&key, Some(&told(1, 1)), later);
        assert_eq!(groups.get("g").unwrap().revoking["m"], (3, later));
        // Stable: no clock.
        groups.replay_consumer(&key, Some(&told(0, 1)), later);
        assert!(groups.get("g").unwrap().revoking.is_empty());
    }

    #[test]
    fn replay_keeps_the_newest_record_per_key_and_honours_tombstones() {
        let now = Instant::now();
        let mut groups = PartitionGroups::new(Duration::ZERO);
        let key = |p| Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: p,
        };
        let log = [
            record(&key(0), Some(&Value::Offset(offset(5)))),
            record(&key(1), Some(&Value::Offset(offset(7)))),
            record(&key(0), Some(&Value::Offset(offset(9)))),
            record(&key(1), None),
        ];
        for (at, (k, v)) in log.iter().enumerate() {
            groups.replay(at as i64, k, v.as_deref(), now).unwrap();
        }
        let entry = groups.get("g").unwrap();
        assert_eq!(entry.offsets.len(), 1);
        assert_eq!(entry.offsets[&("t".into(), 0)].committed.offset, 9);
        // A write that completes late does not undo a later one.
        groups.apply_offset("g", "t".into(), 0, 1, Some(offset(6)));
        assert_eq!(
            groups.get("g").unwrap().offsets[&("t".into(), 0)]
                .committed
                .offset,
            9
        );
        // Deleting the last offset of a group without members forgets it.
        groups.apply_offset("g", "t".into(), 0, 10, None);
        assert!(groups.get("g").is_none());
    }

    #[test]
    fn transactional_offsets_count_once_their_commit_marker_is_replayed() {
        let mut groups = PartitionGroups::new(Duration::ZERO);
        let key = Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        let (k, v) = record(&key, Some(&Value::Offset(offset(7))));
        groups
            .replay_transactional(5, 10, &k, v.as_deref())
            .unwrap();
        assert!(groups.get("g").is_none(), "invisible while undecided");
        assert!(groups.has_pending_offset("g", "t", 0));
        groups.end_transaction(5, true);
        assert_eq!(
            groups.get("g").unwrap().offsets[&("t".into(), 0)]
                .committed
                .offset,
            7
        );
        let (k, v) = record(&key, Some(&Value::Offset(offset(9))));
        groups
            .replay_transactional(6, 12, &k, v.as_deref())
            .unwrap();
        groups.end_transaction(6, false);
        assert_eq!(
            groups.get("g").unwrap().offsets[&("t".into(), 0)]
                .committed
                .offset,
            7,
            "an aborted offset is dropped"
        );
        assert!(!groups.has_pending_offset("g", "t", 0));
    }

    #[test]
    fn a_stored_membership_comes_back_stable_and_is_not_rewritten() {
        let now = Instant::now();
        let snapshot = GroupSnapshot {
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            members: vec![MemberSnapshot {
                member_id: "m1".into(),
                instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/h".into(),
                session_timeout: Duration::from_secs(10),
                rebalance_timeout: Duration::from_secs(10),
                subscription: Bytes::from_static(b"s"),
                assignment: Bytes::from_static(b"a"),
            }],
        };
        let mut groups = PartitionGroups::new(Duration::ZERO);
        let (k, v) = record(
            &Key::Group("g".into()),
            Some(&Value::Group(snapshot.clone())),
        );
        groups.replay(0, &k, v.as_deref(), now).unwrap();
        let entry = groups.get_mut("g").unwrap();
        assert_eq!(entry.membership.state(), GroupState::Stable);
        assert_eq!(entry.membership.generation(), 4);
        assert_eq!(entry.membership.heartbeat("m1", Some("i1"), 4, now), 0);
        assert_eq!(entry.membership.snapshot(), snapshot);
        assert_eq!(entry.membership_to_write(), None);
        // The member leaves: the empty group is written once.
        entry.membership.leave("m1", Some("i1"), now);
        let write = entry.membership_to_write().expect("the group emptied");
        entry.written(&write);
        assert_eq!(entry.membership_to_write(), None);
        // A group tombstone removes it.
        let (k, _) = record(&Key::Group("g".into()), None);
        groups.replay(1, &k, None, now).unwrap();
        assert!(groups.get("g").is_none());
        // A group tombstone removes the membership only: an offset
        // committed after the deletion was decided (it has no tombstone)
        // stays, as it does in the coordinator's memory.
        let key = Key::Offset {
            group: "h".into(),
            topic: "t".into(),
            partition: 0,
        };
        let (ok, ov) = record(&key, Some(&Value::Offset(offset(3))));
        groups.replay(2, &ok, ov.as_deref(), now).unwrap();
        let (gk, _) = record(&Key::Group("h".into()), None);
        groups.replay(3, &gk, None, now).unwrap();
        assert_eq!(groups.get("h").unwrap().offsets.len(), 1);
    }
}
