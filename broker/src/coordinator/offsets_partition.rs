//! The groups of one `__consumer_offsets` partition, loaded on the shard
//! owning it: every change that must survive a restart (a committed
//! offset, a settled membership, a deletion) is appended to the partition
//! like any produce with acks=all, and answered once it is durable. Joins
//! and syncs that must wait are parked as oneshot senders and answered
//! when the group's state machine says so ([`OffsetsPartition::settle`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::ResponseError;
use storage::batch::{self, RecordSpec, ValidBatch};
use storage::{LeaderEpoch, TimestampMs};

use crate::cluster::routing::PartitionKey;
use crate::groups::consumer_protocol::assigned_partitions;
use crate::groups::membership::{Joined, MemberId};
use crate::groups::records::{encode_key, encode_value, Key, Value};
use crate::groups::store::PartitionGroups;
use crate::kafka::Code;
use crate::partition::append::Acks;
use crate::partition::served::ServedPartition;
use crate::partition::table::BATCH_BYTES_CAP;
use crate::partition::Partitions;
use crate::runtime::clock::wall_ms;

/// A parked JoinGroup or SyncGroup, by (group, member).
type Parked<T> = RefCell<HashMap<(String, MemberId), oneshot::Sender<T>>>;

/// The groups of one `__consumer_offsets` partition.
pub struct OffsetsPartition {
    /// The shard's partitions (this one is among them).
    pub(super) partitions: Rc<Partitions>,
    key: PartitionKey,
    /// The leader epoch its groups were loaded in: leadership that moved
    /// away and back means another leader appended meanwhile.
    epoch: LeaderEpoch,
    pub(super) groups: RefCell<PartitionGroups>,
    pub(super) joins: Parked<Joined>,
    pub(super) syncs: Parked<(Code, Bytes)>,
    /// Held while choosing what to append and appending it, so records
    /// reach the log in the order their contents were decided.
    pub(super) append: futures::lock::Mutex<()>,
    /// An append failed: it may still become durable (a timed-out
    /// acks=all write), so these groups may miss a record; the next
    /// request loads them again from the log.
    stale: std::cell::Cell<bool>,
}

impl OffsetsPartition {
    /// The groups of partition `key`, loaded in leader epoch `epoch`.
    pub fn new(
        partitions: Rc<Partitions>,
        key: PartitionKey,
        epoch: LeaderEpoch,
        groups: PartitionGroups,
    ) -> OffsetsPartition {
        OffsetsPartition {
            partitions,
            key,
            epoch,
            groups: RefCell::new(groups),
            joins: RefCell::new(HashMap::new()),
            syncs: RefCell::new(HashMap::new()),
            append: futures::lock::Mutex::new(()),
            stale: std::cell::Cell::new(false),
        }
    }

    /// Whether an append failed since the groups were loaded (they must be
    /// loaded again).
    pub fn is_stale(&self) -> bool {
        self.stale.get()
    }

    /// The leader epoch its groups were loaded in.
    pub fn epoch(&self) -> LeaderEpoch {
        self.epoch
    }
}

/// A group as /metrics sees it.
pub struct GroupPositions {
    /// Its id.
    pub id: String,
    /// Its type and size.
    pub gauges: GroupGauges,
    /// Its committed offset by (topic, partition).
    pub committed: Vec<((String, i32), i64)>,
    /// The partitions its members are assigned (a consumer group's
    /// targets), committed or not.
    pub assigned: Vec<(String, i32)>,
}

/// A group's gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupGauges {
    /// "classic" or "consumer".
    pub group_type: &'static str,
    /// Its rebalances: a classic group's generation, a consumer group's
    /// epoch (bumped by each change of members or subscribed topics).
    pub rebalances: i32,
    /// Its members.
    pub members: usize,
}

impl OffsetsPartition {
    /// Each group's id, gauges, committed offsets and assigned partitions
    /// (for /metrics; `names`: topic names by id).
    pub fn groups_for_metrics(
        &self,
        names: &BTreeMap<control::TopicId, String>,
    ) -> Vec<GroupPositions> {
        let groups = self.groups.borrow();
        groups
            .ids()
            .into_iter()
            .filter_map(|id| {
                let entry = groups.get(&id)?;
                let committed = entry
                    .offsets
                    .iter()
                    .map(|(k, stored)| (k.clone(), stored.committed.offset))
                    .collect();
                let (gauges, assigned) = match entry.consumer_group() {
                    _ if entry.share.is_some() => {
                        let share = entry.share.as_ref().expect("a share group");
                        let gauges = GroupGauges {
                            group_type: "share",
                            rebalances: share.epoch,
                            members: share.members.len(),
                        };
                        (gauges, Vec::new())
                    }
                    Some(consumer) => {
                        let gauges = GroupGauges {
                            group_type: "consumer",
                            rebalances: consumer.epoch,
                            members: consumer.members.len(),
                        };
                        let targets = consumer.targets.values().flatten();
                        let named = targets.filter_map(|(topic, index)| {
                            Some((names.get(&control::TopicId(*topic))?.clone(), *index))
                        });
                        (gauges, named.collect())
                    }
                    None => {
                        let gauges = GroupGauges {
                            group_type: "classic",
                            rebalances: entry.membership.generation(),
                            members: entry.membership.member_ids().len(),
                        };
                        // Only a consumer group's assignments name
                        // partitions (Connect's, say, do not).
                        let consumers = entry.membership.protocol_type() == Some("consumer");
                        let assignments = entry.membership.assignments().filter(|_| consumers);
                        let assigned = assignments
                            .filter_map(|bytes| assigned_partitions(bytes))
                            .flat_map(|topics| {
                                (topics.into_iter())
                                    .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                            });
                        (gauges, assigned.collect())
                    }
                };
                Some(GroupPositions {
                    id,
                    gauges,
                    committed,
                    assigned,
                })
            })
            .collect()
    }
}

/// How long a group write waits for the in-sync replicas.
pub(super) const REPLICATION_WAIT_MAX: Duration = Duration::from_secs(10);

impl OffsetsPartition {
    /// Appends the records `choose` picks (given the groups as they are at
    /// that moment) and waits until they are durable (acks=all). Returns
    /// the offset of the first record (None if there was nothing to write).
    pub(super) async fn append<R>(
        &self,
        choose: impl FnOnce(&mut PartitionGroups) -> (Vec<(Key, Option<Value>)>, R),
    ) -> Result<(Option<i64>, R), Code> {
        self.append_then(choose, |_, _| {}).await
    }

    /// [`OffsetsPartition::append`], then `apply` to the groups with the
    /// records once they are durable, before the next append is chosen.
    /// A write that fails applies nothing, but may still become durable:
    /// the groups are then marked stale and loaded again.
    pub(super) async fn append_then<R>(
        &self,
        choose: impl FnOnce(&mut PartitionGroups) -> (Vec<(Key, Option<Value>)>, R),
        apply: impl FnOnce(&mut PartitionGroups, &[(Key, Option<Value>)]),
    ) -> Result<(Option<i64>, R), Code> {
        let _in_order = self.append.lock().await;
        let led = self.led_now().await?;
        let (records, chosen) = choose(&mut self.groups.borrow_mut());
        if records.is_empty() {
            apply(&mut self.groups.borrow_mut(), &records);
            return Ok((None, chosen));
        }
        let batch = group_batch(&records)?;
        let appended = led
            .append(
                &self.partitions,
                vec![batch],
                Acks::All,
                REPLICATION_WAIT_MAX,
            )
            .await
            .map_err(|code| {
                tracing::warn!(
                    code,
                    "a __consumer_offsets append failed; the groups will be loaded again"
                );
                self.stale.set(true);
                coordinator_code(code)
            })?;
        apply(&mut self.groups.borrow_mut(), &records);
        Ok((Some(appended.base_offset.0), chosen))
    }

    /// The partition, still led in the epoch its groups were loaded in.
    pub(super) async fn led_now(&self) -> Result<ServedPartition, Code> {
        let led = self
            .partitions
            .open_led(self.key)
            .await
            .map_err(coordinator_code)?;
        if led.epoch != self.epoch {
            // Leadership moved away and back: these groups are stale.
            return Err(ResponseError::NotCoordinator.code());
        }
        Ok(led)
    }

    /// Writes the group's membership if it settled into a state not yet
    /// stored.
    pub(super) async fn persist_membership(&self, group: &str) -> Result<(), Code> {
        let group = group.to_string();
        let (_, written) = self
            .append(|groups| match groups.get(&group) {
                Some(entry) => match entry.membership_to_write() {
                    Some(value) => (
                        vec![(Key::Group(group.clone()), Some(value.clone()))],
                        Some(value),
                    ),
                    None => (vec![], None),
                },
                None => (vec![], None),
            })
            .await?;
        if let Some(value) = written {
            let mut groups = self.groups.borrow_mut();
            if let Some(entry) = groups.get_mut(&group) {
                entry.written(&value);
            }
        }
        Ok(())
    }

    /// Settles every group (timeouts) and stores the memberships that
    /// changed.
    pub(super) async fn settle_all(&self) {
        let groups = self.groups.borrow().ids();
        for group in groups {
            self.settle(&group);
            let changed = self
                .groups
                .borrow()
                .get(&group)
                .is_some_and(|e| e.membership_to_write().is_some());
            if !changed {
                continue;
            }
            if let Err(code) = self.persist_membership(&group).await {
                tracing::warn!(group, code, "cannot store a group's membership");
            }
        }
    }

    /// Lets the group's state machine act on time and on what just
    /// happened, and answers the parked requests it released or ended.
    pub(super) fn settle(&self, group: &str) {
        let now = Instant::now();
        let mut groups = self.groups.borrow_mut();
        let Some(entry) = groups.get_mut(group) else {
            return;
        };
        let membership = &mut entry.membership;
        let (answers, failed_syncs) = membership.poll(now);
        let mut joins = self.joins.borrow_mut();
        let mut syncs = self.syncs.borrow_mut();
        for answer in answers {
            if let Some(parked) = joins.remove(&(group.to_string(), answer.member_id.clone())) {
                let _ = parked.send(answer);
            }
        }
        for member in failed_syncs {
            if let Some(parked) = syncs.remove(&(group.to_string(), member)) {
                let _ = parked.send((ResponseError::RebalanceInProgress.code(), Bytes::new()));
            }
        }
        // Parked requests of members that left, were replaced or whose
        // sync a new rebalance ended.
        let gone: Vec<_> = joins
            .keys()
            .filter(|(g, m)| g == group && !membership.has_member(m))
            .cloned()
            .collect();
        for key in gone {
            if let Some(parked) = joins.remove(&key) {
                let _ = parked.send(Joined::failed(
                    ResponseError::UnknownMemberId.code(),
                    &key.1,
                ));
            }
        }
        let ended: Vec<_> = syncs
            .keys()
            .filter(|(g, m)| g == group && !membership.is_syncing(m))
            .cloned()
            .collect();
        for key in ended {
            if let Some(parked) = syncs.remove(&key) {
                let _ = parked.send((ResponseError::RebalanceInProgress.code(), Bytes::new()));
            }
        }
        drop((joins, syncs));
        groups.forget_if_unused(group);
    }
}

/// One batch of group records, timestamped now.
pub(super) fn group_batch(records: &[(Key, Option<Value>)]) -> Result<ValidBatch, Code> {
    ValidBatch::new(group_records(records), BATCH_BYTES_CAP)
        .map_err(|_| ResponseError::RecordListTooLarge.code())
}

/// The bytes of one batch of group records, timestamped now.
pub(super) fn group_records(records: &[(Key, Option<Value>)]) -> bytes::BytesMut {
    let specs: Vec<RecordSpec> = records
        .iter()
        .map(|(key, value)| RecordSpec {
            timestamp_delta: 0,
            key: Some(encode_key(key)),
            value: value.as_ref().map(encode_value),
        })
        .collect();
    batch::build(TimestampMs(wall_ms()), &specs)
}

/// A partition-level refusal as a coordinator answers it.
pub fn coordinator_code(code: Code) -> Code {
    if code == ResponseError::NotLeaderOrFollower.code() {
        ResponseError::NotCoordinator.code()
    } else {
        ResponseError::CoordinatorNotAvailable.code()
    }
}
