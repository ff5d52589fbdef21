//! The group coordinator on one shard: the groups of the `__consumer_offsets`
//! partitions this shard owns and this broker leads.
//!
//! A partition's groups are loaded by replaying its records the first time
//! a request needs them; from then on every change that must survive a
//! restart (a committed offset, a settled membership, a deletion) is
//! appended to the partition through the log like any produce and answered
//! once it is durable. Joins and syncs that must wait are parked as
//! oneshot senders and answered when the group's state machine says so: at
//! once after the request that completes the phase, or from the shard's
//! tick (timeouts).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::ResponseError;
use storage::batch::{self, RecordSpec, ValidBatch};
use storage::{LeaderEpoch, TimestampMs};

use super::handlers::routing::{open_led, Code, Led};
use super::partitions::{owner_shard, PartitionKey, BATCH_BYTES_CAP};
use super::replica::{wait_acknowledged, Role};
use super::shard::{LocalFuture, Shard};
use crate::groups::membership::{
    GroupSnapshot, GroupState, Join, JoinStep, Joined, MemberId, SyncStep,
};
use crate::groups::records::{encode_key, encode_value, CommittedOffset, Key, Value};
use crate::groups::store::PartitionGroups;
use crate::groups::{consumer_protocol, offsets_partition, OFFSETS_TOPIC};

/// How often each shard checks its groups' timeouts.
const TICK: Duration = Duration::from_millis(100);

/// The coordinator state of one shard.
#[derive(Default)]
pub struct Coordinator {
    loaded: RefCell<HashMap<PartitionKey, Rc<OffsetsPartition>>>,
    /// Loading is one partition at a time, so none is loaded twice.
    loading: futures::lock::Mutex<()>,
}

/// A parked JoinGroup or SyncGroup, by (group, member).
type Parked<T> = RefCell<HashMap<(String, MemberId), oneshot::Sender<T>>>;

/// The groups of one `__consumer_offsets` partition.
pub struct OffsetsPartition {
    key: PartitionKey,
    /// The leader epoch its groups were loaded in: leadership that moved
    /// away and back means another leader appended meanwhile.
    epoch: control::LeaderEpoch,
    groups: RefCell<PartitionGroups>,
    joins: Parked<Joined>,
    syncs: Parked<(Code, Bytes)>,
    /// Held while choosing what to append and appending it, so records
    /// reach the log in the order their contents were decided.
    append: futures::lock::Mutex<()>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its id.
    pub group: String,
    /// "consumer", or empty for a group that only stores offsets.
    pub protocol_type: String,
    /// Its state.
    pub state: GroupState,
}

/// The partition of a group: its key and owning shard, or the error to
/// answer with (no `__consumer_offsets` yet, or another broker leads it).
pub fn route_group(shard: &Shard, group: &str) -> Result<(PartitionKey, usize), Code> {
    let view = shard.view.borrow();
    let topic = view
        .metadata
        .topic_by_name(OFFSETS_TOPIC)
        .map_err(|_| ResponseError::CoordinatorNotAvailable.code())?;
    let index = offsets_partition(group, topic.partitions.len() as u32);
    let partition = &topic.partitions[index as usize];
    let me = control::BrokerId(shard.config.node_id);
    if partition.leader != Some(me) {
        return Err(ResponseError::NotCoordinator.code());
    }
    let owner =
        owner_shard(partition, me, shard.count).ok_or(ResponseError::NotCoordinator.code())?;
    Ok((
        PartitionKey {
            topic: topic.id,
            index,
        },
        owner,
    ))
}

/// Runs `work` on the coordinator of `group` (the shard owning its
/// partition, with the partition's groups loaded); a failure on the way
/// becomes `failed(code)`. Like produce, the work is a task of that shard:
/// a client going away does not cancel a write half-way.
pub async fn on_coordinator<T, W>(
    shard: &Rc<Shard>,
    group: &str,
    failed: fn(Code) -> T,
    work: W,
) -> T
where
    T: Send + 'static,
    W: FnOnce(Rc<Shard>, Rc<OffsetsPartition>) -> LocalFuture<T> + Send + 'static,
{
    let (key, owner) = match route_group(shard, group) {
        Ok(route) => route,
        Err(code) => return failed(code),
    };
    shard
        .run_on(owner, move |owner| {
            Box::pin(async move {
                match owner.coordinator.partition(&owner, key).await {
                    Ok(partition) => work(owner.clone(), partition).await,
                    Err(code) => failed(code),
                }
            })
        })
        .await
        .unwrap_or_else(|_| failed(ResponseError::CoordinatorNotAvailable.code()))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn coordinator_code(code: Code) -> Code {
    if code == ResponseError::NotLeaderOrFollower.code() {
        ResponseError::NotCoordinator.code()
    } else {
        ResponseError::CoordinatorNotAvailable.code()
    }
}

impl Coordinator {
    /// The loaded groups of a partition this shard owns, loading them
    /// from the log first if needed.
    pub async fn partition(
        &self,
        shard: &Shard,
        key: PartitionKey,
    ) -> Result<Rc<OffsetsPartition>, Code> {
        // Leadership is checked on every request (it can move).
        let led = open_led(shard, key).await.map_err(coordinator_code)?;
        let current = |loaded: &HashMap<PartitionKey, Rc<OffsetsPartition>>| {
            loaded.get(&key).filter(|p| p.epoch == led.epoch).cloned()
        };
        if let Some(loaded) = current(&self.loaded.borrow()) {
            return Ok(loaded);
        }
        let _one_at_a_time = self.loading.lock().await;
        if let Some(loaded) = current(&self.loaded.borrow()) {
            return Ok(loaded);
        }
        // Loaded in an older leadership (or never): its groups are stale.
        self.loaded.borrow_mut().remove(&key);
        let delay = Duration::from_millis(shard.config.group_initial_rebalance_delay_ms);
        let started = Instant::now();
        let groups = load(&led, delay).await.map_err(|e| {
            tracing::error!(partition = key.index, error = %e, "cannot load groups");
            ResponseError::CoordinatorNotAvailable.code()
        })?;
        tracing::info!(
            partition = key.index,
            groups = groups.ids().len(),
            ms = started.elapsed().as_millis() as u64,
            "loaded the groups of a __consumer_offsets partition"
        );
        let partition = Rc::new(OffsetsPartition {
            key,
            epoch: led.epoch,
            groups: RefCell::new(groups),
            joins: RefCell::new(HashMap::new()),
            syncs: RefCell::new(HashMap::new()),
            append: futures::lock::Mutex::new(()),
        });
        self.loaded.borrow_mut().insert(key, partition.clone());
        Ok(partition)
    }

    /// The partitions whose groups are loaded here in the leadership
    /// current now (what /metrics reports: a scrape loads nothing).
    pub fn loaded_current(&self, shard: &Shard) -> Vec<Rc<OffsetsPartition>> {
        let view = shard.view.borrow();
        let me = control::BrokerId(shard.config.node_id);
        self.loaded
            .borrow()
            .iter()
            .filter(|(key, loaded)| {
                view.metadata
                    .topics
                    .get(&key.topic)
                    .and_then(|t| t.partitions.get(key.index as usize))
                    .is_some_and(|p| p.leader == Some(me) && p.leader_epoch == loaded.epoch)
            })
            .map(|(_, loaded)| loaded.clone())
            .collect()
    }

    /// The `__consumer_offsets` partitions this shard owns and leads,
    /// loaded (ListGroups must see every group).
    pub async fn all_partitions(&self, shard: &Shard) -> Vec<Rc<OffsetsPartition>> {
        let keys: Vec<PartitionKey> = {
            let view = shard.view.borrow();
            let Ok(topic) = view.metadata.topic_by_name(OFFSETS_TOPIC) else {
                return vec![];
            };
            let me = control::BrokerId(shard.config.node_id);
            topic
                .partitions
                .iter()
                .enumerate()
                .filter(|(_, p)| {
                    p.leader == Some(me) && owner_shard(p, me, shard.count) == Some(shard.index)
                })
                .map(|(index, _)| PartitionKey {
                    topic: topic.id,
                    index: index as u32,
                })
                .collect()
        };
        let mut out = Vec::new();
        for key in keys {
            if let Ok(partition) = self.partition(shard, key).await {
                out.push(partition);
            }
        }
        out
    }

    /// Checks every loaded group's timeouts, for as long as the shard runs.
    pub async fn tick(shard: Rc<Shard>) {
        loop {
            glommio::timer::sleep(TICK).await;
            let loaded: Vec<Rc<OffsetsPartition>> = shard
                .coordinator
                .loaded
                .borrow()
                .values()
                .cloned()
                .collect();
            for partition in loaded {
                let groups = partition.groups.borrow().ids();
                for group in groups {
                    partition.settle(&group);
                    let changed = partition
                        .groups
                        .borrow()
                        .get(&group)
                        .is_some_and(|e| e.membership_to_write().is_some());
                    if !changed {
                        continue;
                    }
                    if let Err(code) = partition.persist_membership(&shard, &group).await {
                        tracing::warn!(group, code, "cannot store a group's membership");
                    }
                }
            }
        }
    }
}

/// Replays a partition's records into its groups.
async fn load(
    led: &Led,
    initial_delay: Duration,
) -> Result<PartitionGroups, storage::StorageError> {
    let log = &led.partition.log;
    // Everything the leader holds, as Kafka's coordinator loads: above the
    // high watermark too (a leader never cuts its own log).
    let end = log.log_end();
    let mut next = log.log_start();
    let mut groups = PartitionGroups::new(initial_delay);
    let now = Instant::now();
    while next < end {
        let read = log.read(next, 1 << 20, end).await?;
        let Some(after) = read.next_offset else {
            break;
        };
        for chunk in &read.chunks {
            for (header, stored) in batch::split_stored(chunk, BATCH_BYTES_CAP)? {
                if header.is_control() || header.next_offset() <= next {
                    continue;
                }
                let Ok(records) = batch::records(&stored, header) else {
                    tracing::warn!(
                        offset = header.base_offset.0,
                        "skipping a compressed batch in __consumer_offsets"
                    );
                    continue;
                };
                for record in records {
                    let record = record?;
                    let Some(key) = record.key else { continue };
                    if let Err(e) = groups.replay(record.offset.0, key, record.value, now) {
                        tracing::warn!(offset = record.offset.0, error = %e, "skipping an unreadable __consumer_offsets record");
                    }
                }
            }
        }
        next = after;
    }
    Ok(groups)
}

/// A group as /metrics sees it: id, generation, committed offset by
/// (topic, partition).
pub type GroupPositions = (String, i32, Vec<((String, i32), i64)>);

impl OffsetsPartition {
    /// Each group's id, generation and committed offsets (for /metrics).
    pub fn offsets_and_generations(&self) -> Vec<GroupPositions> {
        let groups = self.groups.borrow();
        groups
            .ids()
            .into_iter()
            .filter_map(|id| {
                let entry = groups.get(&id)?;
                let offsets = entry
                    .offsets
                    .iter()
                    .map(|(k, stored)| (k.clone(), stored.committed.offset))
                    .collect();
                Some((id, entry.membership.generation(), offsets))
            })
            .collect()
    }
}

/// How long a group write waits for the in-sync replicas.
const REPLICATION_WAIT_MAX: Duration = Duration::from_secs(10);

impl OffsetsPartition {
    fn epoch_storage(&self) -> LeaderEpoch {
        LeaderEpoch(self.epoch.0)
    }

    /// Appends the records `choose` picks (given the groups as they are at
    /// that moment) and waits until they are durable. Returns the offset
    /// of the first record (None if there was nothing to write).
    async fn append<R>(
        &self,
        shard: &Shard,
        choose: impl FnOnce(&mut PartitionGroups) -> (Vec<(Key, Option<Value>)>, R),
    ) -> Result<(Option<i64>, R), Code> {
        let (partition, next, base, chosen) = {
            let _in_order = self.append.lock().await;
            let led = open_led(shard, self.key).await.map_err(coordinator_code)?;
            let (records, chosen) = choose(&mut self.groups.borrow_mut());
            if records.is_empty() {
                return Ok((None, chosen));
            }
            let specs: Vec<RecordSpec> = records
                .iter()
                .map(|(key, value)| RecordSpec {
                    timestamp_delta: 0,
                    key: Some(encode_key(key)),
                    value: value.as_ref().map(encode_value),
                })
                .collect();
            let built = batch::build(TimestampMs(now_ms()), &specs);
            let valid = ValidBatch::new(built, BATCH_BYTES_CAP)
                .map_err(|_| ResponseError::RecordListTooLarge.code())?;
            let info = led
                .partition
                .log
                .append_valid(valid, LeaderEpoch(led.epoch.0))
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "cannot append to __consumer_offsets");
                    ResponseError::CoordinatorNotAvailable.code()
                })?;
            let next = info.last_offset.plus(1);
            (led.partition, next, info.base_offset.0, chosen)
        };
        partition.log.wait_flushed(next).await.map_err(|e| {
            tracing::error!(error = %e, "cannot flush __consumer_offsets");
            ResponseError::CoordinatorNotAvailable.code()
        })?;
        partition.notify_arrival();
        // Replicated: answered once every in-sync replica holds it (acks=all).
        let replicated = matches!(&*partition.role.borrow(), Role::Leader(l) if l.replicated);
        if replicated {
            let min_insync = shard
                .view
                .borrow()
                .metadata
                .topics
                .get(&self.key.topic)
                .map_or(1, |t| t.config.min_insync_replicas as usize);
            let last = storage::Offset(next.0 - 1);
            wait_acknowledged(
                &partition,
                self.epoch_storage(),
                last,
                min_insync,
                REPLICATION_WAIT_MAX,
            )
            .await
            .map_err(|code| {
                tracing::warn!(code, "a __consumer_offsets append was not replicated");
                coordinator_code(code)
            })?;
        }
        Ok((Some(base), chosen))
    }

    /// Writes the group's membership if it settled into a state not yet
    /// stored.
    async fn persist_membership(&self, shard: &Shard, group: &str) -> Result<(), Code> {
        let group = group.to_string();
        let (_, written) = self
            .append(shard, |groups| match groups.get(&group) {
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

    /// Lets the group's state machine act on time and on what just
    /// happened, and answers the parked requests it released or ended.
    fn settle(&self, group: &str) {
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

    /// JoinGroup: answered when the join phase completes (or at once).
    pub async fn join(&self, shard: &Shard, group: &str, join: Join) -> Joined {
        let step = self
            .groups
            .borrow_mut()
            .entry(group)
            .membership
            .join(join.clone(), Instant::now());
        let answer = match step {
            JoinStep::Answer(answer) => answer,
            JoinStep::Wait(member_id) => {
                let (tx, rx) = oneshot::channel();
                self.joins
                    .borrow_mut()
                    .insert((group.to_string(), member_id.clone()), tx);
                self.settle(group);
                rx.await.unwrap_or_else(|_| {
                    Joined::failed(ResponseError::RebalanceInProgress.code(), &member_id)
                })
            }
        };
        self.settle(group);
        if let Err(code) = self.persist_membership(shard, group).await {
            tracing::warn!(group, code, "cannot store a group's membership");
        }
        answer
    }

    /// SyncGroup: the leader's brings the assignment, which is stored
    /// before anyone gets theirs; the others wait for it.
    pub async fn sync(
        &self,
        shard: &Shard,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(MemberId, Bytes)>,
    ) -> (Code, Bytes) {
        let step = {
            let mut groups = self.groups.borrow_mut();
            let Some(entry) = groups.get_mut(group) else {
                return (ResponseError::UnknownMemberId.code(), Bytes::new());
            };
            entry.membership.sync(
                member_id,
                instance_id,
                generation,
                assignments,
                Instant::now(),
            )
        };
        match step {
            (SyncStep::Wait, _) => {
                let (tx, rx) = oneshot::channel();
                self.syncs
                    .borrow_mut()
                    .insert((group.to_string(), member_id.to_string()), tx);
                self.settle(group);
                rx.await
                    .unwrap_or((ResponseError::RebalanceInProgress.code(), Bytes::new()))
            }
            (SyncStep::Answer(code, mine), released) => {
                // The leader's sync settled the group: store the
                // assignment, then hand it out.
                let stored = if code == 0 {
                    self.persist_membership(shard, group).await
                } else {
                    Ok(())
                };
                let failed = stored.err();
                for (member, assignment) in released {
                    if let Some(parked) =
                        self.syncs.borrow_mut().remove(&(group.to_string(), member))
                    {
                        let _ = parked.send(match failed {
                            Some(code) => (code, Bytes::new()),
                            None => (0, assignment),
                        });
                    }
                }
                self.settle(group);
                match failed {
                    Some(code) => (code, Bytes::new()),
                    None => (code, mine),
                }
            }
        }
    }

    /// Heartbeat.
    pub fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Code {
        let code = match self.groups.borrow_mut().get_mut(group) {
            Some(entry) => {
                entry
                    .membership
                    .heartbeat(member_id, instance_id, generation, Instant::now())
            }
            None => ResponseError::UnknownMemberId.code(),
        };
        self.settle(group);
        code
    }

    /// LeaveGroup for each (member id, instance id).
    pub async fn leave(
        &self,
        shard: &Shard,
        group: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Vec<Code> {
        let codes = {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(group) {
                Some(entry) => members
                    .iter()
                    .map(|(m, i)| entry.membership.leave(m, i.as_deref(), Instant::now()))
                    .collect(),
                None => vec![ResponseError::UnknownMemberId.code(); members.len()],
            }
        };
        self.settle(group);
        if let Err(code) = self.persist_membership(shard, group).await {
            tracing::warn!(group, code, "cannot store a group's membership");
        }
        codes
    }

    /// OffsetCommit of already validated partitions: one code for all
    /// (the member may not commit, or the write failed), or success.
    pub async fn commit(
        &self,
        shard: &Shard,
        group: &str,
        member: (&str, Option<&str>, i32),
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Code {
        let (member_id, instance_id, generation) = member;
        let allowed = match self.groups.borrow().get(group) {
            Some(entry) => entry
                .membership
                .may_commit(member_id, instance_id, generation),
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
        match self.append(shard, move |_| (records, ())).await {
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

    /// The group's membership (None: no such group).
    pub fn describe(&self, group: &str) -> Option<GroupSnapshot> {
        self.groups
            .borrow()
            .get(group)
            .map(|e| e.membership.snapshot())
    }

    /// Every group of this partition.
    pub fn list(&self) -> Vec<Listed> {
        let groups = self.groups.borrow();
        groups
            .ids()
            .into_iter()
            .filter_map(|id| {
                let entry = groups.get(&id)?;
                Some(Listed {
                    protocol_type: entry
                        .membership
                        .protocol_type()
                        .unwrap_or_default()
                        .to_string(),
                    state: entry.membership.state(),
                    group: id,
                })
            })
            .collect()
    }

    /// DeleteGroups of one group: only without members; its offsets and
    /// membership are deleted (tombstones), then forgotten.
    pub async fn delete_group(&self, shard: &Shard, group: &str) -> Code {
        let group = group.to_string();
        let result = self
            .append(shard, |groups| match groups.get(&group) {
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
                    (records, Ok(deleted))
                }
            })
            .await;
        match result {
            Ok((base, Ok(deleted))) => {
                // As a replay would apply the tombstones.
                let mut groups = self.groups.borrow_mut();
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
        shard: &Shard,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> (Code, Vec<Code>) {
        let wanted = partitions.clone();
        let result = self
            .append(shard, move |groups| {
                let Some(entry) = groups.get(group) else {
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
