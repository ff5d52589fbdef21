//! Replication glue on the broker: between a shard's partitions, the
//! sans-IO state machines of the `replication` crate, the metadata, and
//! the network. The rules (high watermark, ISR proposals, acks=all,
//! truncation) live in the replication crate, where the simulation tests
//! them; a leader's bookkeeping is the partition layer's
//! ([`crate::partition::leader`]); this layer gives partitions their roles
//! and talks to the controller and the leaders.
//!
//! - [`reconcile`]: after each metadata change, every partition this shard
//!   holds a replica of is opened and given its role: leader (with a
//!   `LeaderState`) or follower of some broker (handed to that broker's
//!   fetcher, [`fetcher`]).
//! - [`isr_loop`] asks the controller for the ISR changes the leader
//!   states propose.

pub mod fetcher;
pub mod throttle;
pub mod tiered_start;

use std::collections::{BTreeSet, HashSet};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use control::controller::AlterIsr;
use control::service::{ControllerError, ControllerRequest};
use control::{BrokerId, MetadataError, Partition, PartitionId, Topic};
use futures::StreamExt;
use replication::leader::LeaderState;

use crate::cluster::routing::{PartitionKey, Replica};
use crate::partition::epoch;
use crate::partition::leader::{advance_high_watermark, own_end};
use crate::partition::role::{Leading, Role};
use crate::partition::table::{OpenPartition, PartitionTable, OPENS_AT_ONCE};
use crate::partition::Partitions;
use crate::runtime::clock::monotonic_ms;
use fetcher::{Fetchers, Following};

/// How often each shard looks for ISR changes to ask for.
const ISR_CHECK_EVERY: Duration = Duration::from_millis(100);

/// One shard's replication: its partitions and its fetchers.
pub struct Replication {
    /// The shard's partitions.
    pub partitions: Rc<Partitions>,
    /// The follower fetchers of this shard, one per leader broker.
    fetchers: Fetchers,
}

impl Replication {
    /// Replication for a shard's partitions (no fetcher running yet).
    pub fn new(partitions: Rc<Partitions>) -> Rc<Replication> {
        Rc::new(Replication {
            partitions,
            fetchers: Fetchers::default(),
        })
    }
}

/// Gives every partition this shard holds a replica of its role as the
/// metadata now says, opening its log if needed, and points the fetchers
/// at the leaders this shard follows.
pub async fn reconcile(replication: &Replication) {
    let partitions = &replication.partitions;
    let table = &partitions.table;
    // The open ones first: a leadership change waits for no new
    // partition's open.
    let (open, new): (Vec<Replica>, Vec<Replica>) = (partitions.cluster.replicas_here())
        .into_iter()
        .partition(|r| table.get_open(r.key).is_some());
    let mut following = Vec::new();
    if !give_roles(partitions, open, &mut following).await {
        return;
    }
    open_new_replicas(table, &new).await;
    if !give_roles(partitions, new, &mut following).await {
        return;
    }
    fetcher::follow(replication, following);
    remove_unassigned(partitions).await;
}

/// Gives `replicas` their roles, opening any not open, and adds the
/// leaders they follow to `following`; false if the shard is stopping.
async fn give_roles(
    partitions: &Partitions,
    replicas: Vec<Replica>,
    following: &mut Vec<Following>,
) -> bool {
    let me = partitions.cluster.me;
    let table = &partitions.table;
    for Replica {
        key,
        topic,
        partition: meta,
    } in replicas
    {
        if table.is_closed() {
            return false; // stopping: roles no longer matter
        }
        let partition = match table.get_or_open(key, &topic).await {
            Ok(partition) => partition,
            Err(_) if table.is_closed() => return false,
            Err(e) if !partitions.cluster.holds_here(key) => {
                // Moved away since this pass read the metadata.
                tracing::debug!(topic = %topic.name, partition = key.index, error = %e, "a replica moved away before it opened");
                continue;
            }
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = key.index, error = %e, "cannot open a replica");
                continue;
            }
        };
        delay_new_leadership(partitions, &partition, &meta).await;
        let _no_replica_write = partition.replica_writes.lock().await;
        assign_role(partitions, &partition, &topic, &meta);
        if leads_with_followers(&partition) {
            partitions.led_with_followers.borrow_mut().insert(key);
        }
        if let (Some(leader), true) = (meta.leader, meta.leader != Some(me)) {
            following.push(Following {
                leader,
                key,
                topic: topic.name.clone(),
                epoch: epoch::from_metadata(meta.leader_epoch),
            });
        }
    }
    true
}

/// Opens (and recovers) the replicas' logs not open yet, several at a
/// time: each new partition makes its files durable, and a new topic's
/// thousands of partitions opened one at a time took seconds, each one
/// waiting for the disk. An open that fails here is tried again, and
/// reported, when its role is given.
async fn open_new_replicas(table: &PartitionTable, replicas: &[Replica]) {
    let new = replicas.iter().filter(|r| table.get_open(r.key).is_none());
    futures::stream::iter(new)
        .for_each_concurrent(OPENS_AT_ONCE as usize, |replica| async move {
            if !table.is_closed() {
                let _ = table.get_or_open(replica.key, &replica.topic).await;
            }
        })
        .await;
}

/// Closes the replicas a finished reassignment moved off this shard, and
/// removes their files: the partition lives on its new replicas. Opens
/// wait meanwhile (a move bringing the partition back must not open the
/// directory being removed), and what is left is decided from one view
/// of the metadata, taken once they wait.
async fn remove_unassigned(partitions: &Partitions) {
    let table = &partitions.table;
    let _no_open = table.hold_opens().await;
    let leaving: Vec<(PartitionKey, Rc<OpenPartition>, Option<Topic>)> = {
        let here: HashSet<PartitionKey> = partitions
            .cluster
            .replicas_here()
            .iter()
            .map(|r| r.key)
            .collect();
        let view = partitions.cluster.view.borrow();
        let taken = table.take_unassigned(&view.metadata, &here);
        let topic = |key: &PartitionKey| view.metadata.topics.get(&key.topic).cloned();
        taken
            .into_iter()
            .map(|(key, p)| {
                let t = topic(&key);
                (key, p, t)
            })
            .collect()
    };
    for (key, partition, topic) in leaving {
        let _no_replica_write = partition.replica_writes.lock().await;
        *partition.role.borrow_mut() = Role::None;
        partition.notify_arrival();
        if let Err(e) = partition.log.close().await {
            tracing::warn!(partition = key.index, error = %e, "closing a replica moved away failed");
        }
        let Some(topic) = topic else { continue };
        let dir = table.partition_dir(&topic, key.index);
        let removing = dir.clone();
        let removed = glommio::executor()
            .spawn_blocking(move || crate::partition::dirs::remove_in_background(&removing))
            .await;
        match removed {
            Ok(()) => {
                tracing::info!(topic = %topic.name, partition = key.index, "replica moved away: its files are set aside and removed in the background")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "removing a replica moved away failed")
            }
        }
    }
}

/// `test_role_delay_ms`: waits before taking up a leadership the
/// metadata has just given this broker.
async fn delay_new_leadership(
    partitions: &Partitions,
    partition: &OpenPartition,
    meta: &Partition,
) {
    let delay = partitions.cluster.config.test_role_delay_ms;
    if delay == 0 {
        return;
    }
    let epoch = epoch::from_metadata(meta.leader_epoch);
    let new = meta.leader == Some(partitions.cluster.me)
        && partition.role.borrow().leader_epoch() != Some(epoch);
    if new {
        glommio::timer::sleep(Duration::from_millis(delay)).await;
    }
}

fn assign_role(
    partitions: &Partitions,
    partition: &OpenPartition,
    topic: &Topic,
    meta: &Partition,
) {
    let me = partitions.cluster.me;
    let epoch = epoch::from_metadata(meta.leader_epoch);
    let isr: BTreeSet<i32> = meta.isr.iter().map(|b| b.0).collect();
    let changed = {
        let mut role = partition.role.borrow_mut();
        match (&mut *role, meta.leader) {
            (Role::Leader(leading), Some(leader))
                if leader == me && leading.state.epoch() == epoch =>
            {
                leading.fsync_before_ack = topic.config.fsync_before_ack;
                // A reassignment changes the replicas within a leadership.
                let replicas: Vec<i32> = meta.replicas.iter().map(|b| b.0).collect();
                let end = partition.log.log_end();
                let moved = leading.state.set_replicas(&replicas, end, monotonic_ms());
                take_committed_isr(partitions, partition, leading, &topic.name, isr) || moved
            }
            (_, Some(leader)) if leader == me => {
                let led_since = match &*role {
                    Role::Leader(going_on) => going_on.led_since,
                    _ => epoch,
                };
                let leading = lead(partitions, partition, topic, meta, isr);
                *role = Role::Leader(Box::new(Leading {
                    led_since,
                    ..leading
                }));
                true
            }
            (Role::Follower { leader, epoch: e }, Some(new)) if *leader == new && *e == epoch => {
                false
            }
            (_, Some(leader)) => {
                *role = Role::Follower { leader, epoch };
                true
            }
            (Role::None, None) => false,
            (_, None) => {
                *role = Role::None;
                true
            }
        }
    };
    if changed {
        // Waiting produces and fetches look again (deposed, or new ISR).
        partition.notify_arrival();
        advance_high_watermark(partition);
    }
}

/// A leadership that goes on in the same epoch learns the committed ISR
/// (counted as an expansion or shrink); whether it changed.
fn take_committed_isr(
    partitions: &Partitions,
    partition: &OpenPartition,
    leading: &mut Leading,
    topic: &str,
    isr: BTreeSet<i32>,
) -> bool {
    let before = leading.state.isr();
    if before == &isr {
        return false;
    }
    let metrics = &partitions.metrics;
    if isr.iter().any(|r| !before.contains(r)) {
        metrics.isr_expands.fetch_add(1, Ordering::Relaxed);
    }
    if before.iter().any(|r| !isr.contains(r)) {
        metrics.isr_shrinks.fetch_add(1, Ordering::Relaxed);
    }
    tracing::info!(topic = %topic, from = ?before, to = ?isr, "ISR changed");
    let end = own_end(partition, leading.fsync_before_ack);
    leading.state.isr_committed(isr, end);
    leading.isr_change_in_flight = false;
    true
}

/// A new leadership of `partition` in the metadata's epoch, starting from
/// its log's end and high watermark.
fn lead(
    partitions: &Partitions,
    partition: &OpenPartition,
    topic: &Topic,
    meta: &Partition,
    isr: BTreeSet<i32>,
) -> Leading {
    let epoch = epoch::from_metadata(meta.leader_epoch);
    let replicas: Vec<i32> = meta.replicas.iter().map(|b| b.0).collect();
    let log = &partition.log;
    let state = LeaderState::new(
        partitions.cluster.me.0,
        epoch,
        &replicas,
        &isr,
        log.log_end(),
        log.high_watermark(),
        monotonic_ms(),
        partitions.cluster.config.replica_lag_time_max_ms,
    );
    // The directory's name is the partition's index (-1: not a number).
    let name = log
        .dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let partition: i64 = name.and_then(|n| n.parse().ok()).unwrap_or(-1);
    tracing::info!(topic = %topic.name, partition, epoch = epoch.0, log_end = log.log_end().0, "leading");
    Leading {
        state,
        replicated: meta.replicas.len() > 1,
        fsync_before_ack: topic.config.fsync_before_ack,
        isr_change_in_flight: false,
        led_since: epoch,
    }
}

/// Asks the controller for the ISR changes the shard's leaderships propose
/// (one request in flight per partition), for as long as the shard runs.
pub async fn isr_loop(partitions: Rc<Partitions>) {
    loop {
        glommio::timer::sleep(ISR_CHECK_EVERY).await;
        let now = monotonic_ms();
        let keys: Vec<PartitionKey> = partitions
            .led_with_followers
            .borrow()
            .iter()
            .copied()
            .collect();
        for key in keys {
            let led = partitions
                .table
                .get_open(key)
                .filter(|p| leads_with_followers(p));
            let Some(partition) = led else {
                // Closed, moved, following or led alone now: a leadership
                // given later adds it again.
                partitions.led_with_followers.borrow_mut().remove(&key);
                continue;
            };
            if let Some(request) = isr_change_to_ask(&partitions, key, &partition, now) {
                glommio::spawn_local(ask_isr_change(partitions.clone(), key, request)).detach();
            }
        }
    }
}

/// Whether this broker leads `partition` with followers.
fn leads_with_followers(partition: &OpenPartition) -> bool {
    matches!(&*partition.role.borrow(), Role::Leader(leading) if leading.replicated)
}

/// The ISR change a leadership asks for now, marked in flight; None when
/// it asks for none, one is in flight, or the partition is not
/// replicated. It is computed against the ISR this shard's metadata
/// committed (taken here if reconcile has not yet).
fn isr_change_to_ask(
    partitions: &Partitions,
    key: PartitionKey,
    partition: &OpenPartition,
    now: u64,
) -> Option<AlterIsr> {
    let mut role = partition.role.borrow_mut();
    let Role::Leader(leading) = &mut *role else {
        return None;
    };
    if leading.isr_change_in_flight || !leading.replicated {
        return None;
    }
    let view = partitions.cluster.view.borrow();
    let topic = view.metadata.topics.get(&key.topic)?;
    let meta = topic.partitions.get(key.index as usize)?;
    if epoch::from_metadata(meta.leader_epoch) == leading.state.epoch() {
        let committed = meta.isr.iter().map(|b| b.0).collect();
        take_committed_isr(partitions, partition, leading, &topic.name, committed);
    }
    let end = own_end(partition, leading.fsync_before_ack);
    let isr = isr_to_ask(leading, &view.metadata, end, now)?;
    leading.isr_change_in_flight = true;
    leading.state.isr_requested(isr.clone());
    Some(AlterIsr {
        topic: key.topic,
        partition: PartitionId(key.index as i32),
        leader: partitions.cluster.me,
        leader_epoch: epoch::to_metadata(leading.state.epoch()),
        partition_epoch: meta.partition_epoch,
        isr: isr.into_iter().map(BrokerId).collect(),
    })
}

/// The ISR to ask for: an earlier request whose outcome is unknown (its
/// answer lost, or the partition changed since), again, until the
/// controller's answer or the metadata settles it (its members count for
/// the high watermark meanwhile); else the change the leadership
/// proposes, without brokers the controller would refuse as fenced (a
/// stopping follower still looks caught up). None when nothing is to be
/// asked; an unsettled request for the committed ISR is settled.
fn isr_to_ask(
    leading: &mut Leading,
    metadata: &control::Metadata,
    end: storage::Offset,
    now: u64,
) -> Option<BTreeSet<i32>> {
    let current = leading.state.isr().clone();
    if let Some(unsettled) = leading.state.pending_isr() {
        if *unsettled != current {
            return Some(unsettled.clone());
        }
        leading.state.isr_committed(current, end);
        return None;
    }
    let mut isr = leading.state.proposed_isr(now)?;
    isr.retain(|b| {
        current.contains(b)
            || metadata
                .brokers
                .get(&BrokerId(*b))
                .is_some_and(|x| !x.fenced)
    });
    (isr != current).then_some(isr)
}

/// Sends one ISR change to the controller. Committed changes arrive with
/// the metadata (and clear the in-flight flag there). Any other answer
/// clears it here, to ask again later; only a refusal that changed nothing
/// (the request named the partition's current epoch) ends the wait for
/// the requested members: an answer lost in a controller's failover, or
/// "the partition changed since", leaves unknown whether a new member is
/// already in the controller's ISR, and so electable.
async fn ask_isr_change(partitions: Rc<Partitions>, key: PartitionKey, request: AlterIsr) {
    tracing::info!(topic = %request.topic, partition = key.index, isr = ?request.isr, "asking the controller to change the ISR");
    let result = partitions
        .cluster
        .call_controller(ControllerRequest::AlterIsr(request))
        .await;
    let Err(e) = result else {
        return;
    };
    let nothing_changed = matches!(
        &e,
        ControllerError::Refused(refusal) if !matches!(refusal, MetadataError::StalePartitionEpoch { .. })
    );
    tracing::info!(error = %e, nothing_changed, "ISR change not committed");
    if let Some(partition) = partitions.table.get_open(key) {
        if let Role::Leader(leading) = &mut *partition.role.borrow_mut() {
            leading.isr_change_in_flight = false;
            if nothing_changed {
                leading.state.isr_request_refused();
            }
        }
    }
}
