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

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use control::controller::AlterIsr;
use control::service::ControllerRequest;
use control::{BrokerId, Partition, PartitionId, Topic};
use replication::leader::LeaderState;

use crate::cluster::routing::{PartitionKey, Replica};
use crate::partition::epoch;
use crate::partition::leader::{advance_high_watermark, own_end};
use crate::partition::role::{Leading, Role};
use crate::partition::table::OpenPartition;
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
    let me = partitions.cluster.me;
    let table = &partitions.table;
    let mut following = Vec::new();
    for Replica {
        key,
        topic,
        partition: meta,
    } in partitions.cluster.replicas_here()
    {
        if table.is_closed() {
            return; // stopping: roles no longer matter
        }
        let partition = match table.get_or_open(key, &topic).await {
            Ok(partition) => partition,
            Err(_) if table.is_closed() => return,
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = key.index, error = %e, "cannot open a replica");
                continue;
            }
        };
        delay_new_leadership(partitions, &partition, &meta).await;
        let _no_replica_write = partition.replica_writes.lock().await;
        assign_role(partitions, &partition, &topic, &meta);
        if let (Some(leader), true) = (meta.leader, meta.leader != Some(me)) {
            following.push(Following {
                leader,
                key,
                topic: topic.name.clone(),
                epoch: epoch::from_metadata(meta.leader_epoch),
            });
        }
    }
    fetcher::follow(replication, following);
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
                take_committed_isr(partitions, partition, leading, &topic.name, isr)
            }
            (_, Some(leader)) if leader == me => {
                *role = Role::Leader(Box::new(lead(partitions, partition, topic, meta, isr)));
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
    tracing::info!(topic = %topic.name, partition = ?log.dir().file_name(), epoch = epoch.0, log_end = log.log_end().0, "leading");
    Leading {
        state,
        replicated: meta.replicas.len() > 1,
        fsync_before_ack: topic.config.fsync_before_ack,
        isr_change_in_flight: false,
    }
}

/// Asks the controller for the ISR changes the shard's leaderships propose
/// (one request in flight per partition), for as long as the shard runs.
pub async fn isr_loop(partitions: Rc<Partitions>) {
    loop {
        glommio::timer::sleep(ISR_CHECK_EVERY).await;
        let now = monotonic_ms();
        for (key, partition) in partitions.table.open_partitions() {
            if let Some(request) = isr_change_to_ask(&partitions, key, &partition, now) {
                glommio::spawn_local(ask_isr_change(partitions.clone(), key, request)).detach();
            }
        }
    }
}

/// The ISR change a leadership proposes now, marked in flight; None when
/// it proposes none, one is in flight, or the partition is not
/// replicated.
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
    let mut isr = leading.state.proposed_isr(now)?;
    let view = partitions.cluster.view.borrow();
    // The controller refuses fenced brokers into the ISR: do not ask (a
    // stopping follower still looks caught up).
    let current = leading.state.isr().clone();
    isr.retain(|b| {
        current.contains(b)
            || view
                .metadata
                .brokers
                .get(&BrokerId(*b))
                .is_some_and(|x| !x.fenced)
    });
    if isr == current {
        return None;
    }
    let meta = view
        .metadata
        .topics
        .get(&key.topic)
        .and_then(|t| t.partitions.get(key.index as usize))?;
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

/// Sends one ISR change to the controller. Committed changes arrive with
/// the metadata (and clear the in-flight flag there); a refusal clears it
/// here, to ask again later.
async fn ask_isr_change(partitions: Rc<Partitions>, key: PartitionKey, request: AlterIsr) {
    tracing::info!(topic = %request.topic, partition = key.index, isr = ?request.isr, "asking the controller to change the ISR");
    let result = partitions
        .cluster
        .call_controller(ControllerRequest::AlterIsr(request))
        .await;
    let Err(e) = result else {
        return;
    };
    tracing::info!(error = %e, "ISR change refused");
    if let Some(partition) = partitions.table.get_open(key) {
        if let Role::Leader(leading) = &mut *partition.role.borrow_mut() {
            leading.isr_change_in_flight = false;
            leading.state.isr_request_failed();
        }
    }
}
