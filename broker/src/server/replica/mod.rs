//! Replication on the broker: the glue between a shard's partitions, the
//! sans-IO state machines of the `replication` crate, the metadata, and
//! the network. The rules (high watermark, ISR proposals, acks=all,
//! truncation) live in the replication crate, where the simulation tests
//! them; this module only feeds them facts and carries out their answers.
//!
//! - [`reconcile`]: after each metadata change, every partition this shard
//!   holds a replica of is opened and given its role: leader (with a
//!   [`LeaderState`]) or follower of some broker (handed to that broker's
//!   fetcher, [`fetcher`]).
//! - On a leader, followers' fetches move the high watermark
//!   ([`on_replica_fetch`]); acks=all produces wait for it
//!   ([`wait_acknowledged`]); [`isr_loop`] asks the controller for ISR
//!   changes the leader state proposes.

pub mod fetcher;

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use control::service::ControllerRequest;
use control::{BrokerId, Partition, PartitionId, Topic};
use futures::future::{select, Either};
use kafka_protocol::ResponseError;
use replication::leader::{AckError, AckState, LeaderState};
use storage::{LeaderEpoch, Offset};

use super::handlers::routing::{call_controller, Code};
use super::partitions::{owner_shard, OpenPartition, PartitionKey};
use super::shard::Shard;

/// How often each shard looks for ISR changes to ask for.
const ISR_CHECK_EVERY: Duration = Duration::from_millis(100);

/// Milliseconds on a clock every shard shares (the replication crate's time).
pub fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// What this broker is for one partition.
#[derive(Debug, Default)]
pub enum Role {
    /// Not (yet) given a role: no leader, or the metadata not applied yet.
    #[default]
    None,
    /// It leads.
    Leader(Box<Leading>),
    /// It copies `leader`'s log, as of `epoch`.
    Follower {
        /// The leader it fetches from.
        leader: BrokerId,
        /// The leader epoch it follows.
        epoch: LeaderEpoch,
    },
}

/// A leadership.
#[derive(Debug)]
pub struct Leading {
    /// The replication crate's view of the followers.
    pub state: LeaderState,
    /// More than one replica: the high watermark follows the ISR, not the
    /// leader's own flushes.
    pub replicated: bool,
    /// A replica counts only what it fdatasync'd (`fsync.before.ack`).
    pub fsync_before_ack: bool,
    /// An ISR change asked of the controller and not yet answered.
    pub isr_change_in_flight: bool,
}

impl Role {
    /// The leader epoch if this broker leads.
    pub fn leader_epoch(&self) -> Option<LeaderEpoch> {
        match self {
            Role::Leader(leading) => Some(leading.state.epoch()),
            _ => None,
        }
    }
}

/// Where a leader's own log counts as holding data for the high watermark.
fn own_end(partition: &OpenPartition, fsync_before_ack: bool) -> Offset {
    if fsync_before_ack {
        partition.log.flushed()
    } else {
        partition.log.log_end()
    }
}

/// Moves a replicated leader's high watermark as far as the ISR and its
/// own log allow, and wakes whoever waits for it.
pub fn advance_high_watermark(partition: &OpenPartition) {
    let moved = {
        let mut role = partition.role.borrow_mut();
        let Role::Leader(leading) = &mut *role else {
            return;
        };
        if !leading.replicated {
            return; // storage moves it with each flush
        }
        let end = own_end(partition, leading.fsync_before_ack);
        let high_watermark = leading.state.update_high_watermark(end);
        if high_watermark > partition.log.high_watermark() {
            partition.log.set_high_watermark(high_watermark);
            true
        } else {
            false
        }
    };
    if moved {
        partition.notify_arrival();
    }
}

/// A follower fetched from this leader at `fetch_offset` (its log end):
/// records its progress, moves the high watermark, and returns the high
/// watermark to send back; or the error if this broker does not lead in
/// `epoch` (-1: not checked).
pub fn on_replica_fetch(
    partition: &OpenPartition,
    follower: i32,
    fetch_offset: i64,
    epoch: i32,
) -> Result<i64, Code> {
    {
        let mut role = partition.role.borrow_mut();
        let Role::Leader(leading) = &mut *role else {
            return Err(ResponseError::NotLeaderOrFollower.code());
        };
        super::handlers::routing::check_leader_epoch(
            epoch,
            control::LeaderEpoch(leading.state.epoch().0),
        )?;
        let log_end = partition.log.log_end();
        leading
            .state
            .record_fetch(follower, Offset(fetch_offset), log_end, now_ms());
    }
    advance_high_watermark(partition);
    Ok(partition.log.high_watermark().0)
}

/// Whether an acks=all produce may be appended: this broker leads and the
/// ISR has at least `min_insync` members.
pub fn check_acks_all(partition: &OpenPartition, min_insync: usize) -> Result<(), Code> {
    match &*partition.role.borrow() {
        Role::Leader(leading) => leading
            .state
            .check_acks_all(min_insync)
            .map_err(ack_error_code),
        _ => Err(ResponseError::NotLeaderOrFollower.code()),
    }
}

fn ack_error_code(error: AckError) -> Code {
    match error {
        AckError::NotEnoughReplicas => ResponseError::NotEnoughReplicas.code(),
        AckError::NotEnoughReplicasAfterAppend => {
            ResponseError::NotEnoughReplicasAfterAppend.code()
        }
    }
}

/// Waits until the high watermark passes `last_offset` in leader epoch
/// `epoch` (acks=all on a replicated partition), at most `timeout`.
pub async fn wait_acknowledged(
    partition: &OpenPartition,
    epoch: LeaderEpoch,
    last_offset: Offset,
    min_insync: usize,
    timeout: Duration,
) -> Result<(), Code> {
    let deadline = Instant::now() + timeout;
    loop {
        advance_high_watermark(partition);
        let state = match &*partition.role.borrow() {
            Role::Leader(leading) if leading.state.epoch() == epoch => {
                leading.state.ack_state(last_offset, min_insync)
            }
            // Deposed while waiting: the client retries on the new leader.
            _ => return Err(ResponseError::NotLeaderOrFollower.code()),
        };
        match state {
            AckState::Done => return Ok(()),
            AckState::Failed(error) => return Err(ack_error_code(error)),
            AckState::Waiting => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ResponseError::RequestTimedOut.code());
        }
        // Woken by any high watermark move, role or ISR change.
        let arrival = partition.next_arrival();
        let timer = glommio::timer::sleep(left);
        if let Either::Right(_) = select(arrival, Box::pin(timer)).await {
            // Looked at once more above, then answered as timed out.
        }
    }
}

/// The partitions of the metadata this shard holds a replica of.
fn replicas_here(shard: &Shard) -> Vec<(PartitionKey, Topic, Partition)> {
    let me = BrokerId(shard.config.node_id);
    let view = shard.view.borrow();
    let mut here = Vec::new();
    for topic in view.metadata.topics.values() {
        for (index, partition) in topic.partitions.iter().enumerate() {
            if owner_shard(partition, me, shard.count) == Some(shard.index) {
                let key = PartitionKey {
                    topic: topic.id,
                    index: index as u32,
                };
                here.push((key, topic.clone(), partition.clone()));
            }
        }
    }
    here
}

/// Gives every partition this shard holds a replica of its role as the
/// metadata now says, opening its log if needed, and points the fetchers
/// at the leaders this shard follows.
pub async fn reconcile(shard: &Rc<Shard>) {
    let me = BrokerId(shard.config.node_id);
    let mut following = Vec::new();
    for (key, topic, meta) in replicas_here(shard) {
        if shard.partitions.is_closed() {
            return; // stopping: roles no longer matter
        }
        let partition = match shard.partitions.get_or_open(key, &topic).await {
            Ok(partition) => partition,
            Err(_) if shard.partitions.is_closed() => return,
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = key.index, error = %e, "cannot open a replica");
                continue;
            }
        };
        let _no_replica_write = partition.replica_writes.lock().await;
        assign_role(shard, &partition, &topic, &meta, me);
        if let (Some(leader), true) = (meta.leader, meta.leader != Some(me)) {
            following.push((leader, key, topic.name.clone(), meta.leader_epoch));
        }
    }
    fetcher::follow(shard, following);
}

fn assign_role(
    shard: &Shard,
    partition: &OpenPartition,
    topic: &Topic,
    meta: &Partition,
    me: BrokerId,
) {
    let epoch = LeaderEpoch(meta.leader_epoch.0);
    let isr: BTreeSet<i32> = meta.isr.iter().map(|b| b.0).collect();
    let changed = {
        let mut role = partition.role.borrow_mut();
        match (&mut *role, meta.leader) {
            (Role::Leader(leading), Some(leader))
                if leader == me && leading.state.epoch() == epoch =>
            {
                leading.fsync_before_ack = topic.config.fsync_before_ack;
                if leading.state.isr() != &isr {
                    let before = leading.state.isr();
                    if isr.iter().any(|r| !before.contains(r)) {
                        shard.metrics.isr_expands.fetch_add(1, Ordering::Relaxed);
                    }
                    if before.iter().any(|r| !isr.contains(r)) {
                        shard.metrics.isr_shrinks.fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::info!(topic = %topic.name, from = ?before, to = ?isr, "ISR changed");
                    let end = own_end(partition, leading.fsync_before_ack);
                    leading.state.isr_committed(isr, end);
                    leading.isr_change_in_flight = false;
                    true
                } else {
                    false
                }
            }
            (_, Some(leader)) if leader == me => {
                let replicas: Vec<i32> = meta.replicas.iter().map(|b| b.0).collect();
                let log = &partition.log;
                let state = LeaderState::new(
                    me.0,
                    epoch,
                    &replicas,
                    &isr,
                    log.log_end(),
                    log.high_watermark(),
                    now_ms(),
                    shard.config.replica_lag_time_max_ms,
                );
                tracing::info!(topic = %topic.name, partition = ?partition.log.dir().file_name(), epoch = epoch.0, log_end = log.log_end().0, "leading");
                *role = Role::Leader(Box::new(Leading {
                    state,
                    replicated: meta.replicas.len() > 1,
                    fsync_before_ack: topic.config.fsync_before_ack,
                    isr_change_in_flight: false,
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

/// Asks the controller for the ISR changes the shard's leaderships propose
/// (one request in flight per partition), for as long as the shard runs.
pub async fn isr_loop(shard: Rc<Shard>) {
    loop {
        glommio::timer::sleep(ISR_CHECK_EVERY).await;
        let now = now_ms();
        for (key, partition) in shard.partitions.open_partitions() {
            let request = {
                let mut role = partition.role.borrow_mut();
                let Role::Leader(leading) = &mut *role else {
                    continue;
                };
                if leading.isr_change_in_flight || !leading.replicated {
                    continue;
                }
                let Some(mut isr) = leading.state.proposed_isr(now) else {
                    continue;
                };
                let view = shard.view.borrow();
                // The controller refuses fenced brokers into the ISR:
                // do not ask (a stopping follower still looks caught up).
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
                    continue;
                }
                let Some(meta) = view
                    .metadata
                    .topics
                    .get(&key.topic)
                    .and_then(|t| t.partitions.get(key.index as usize))
                else {
                    continue;
                };
                leading.isr_change_in_flight = true;
                leading.state.isr_requested(isr.clone());
                control::controller::AlterIsr {
                    topic: key.topic,
                    partition: PartitionId(key.index as i32),
                    leader: BrokerId(shard.config.node_id),
                    leader_epoch: control::LeaderEpoch(leading.state.epoch().0),
                    partition_epoch: meta.partition_epoch,
                    isr: isr.into_iter().map(BrokerId).collect(),
                }
            };
            let shard = shard.clone();
            glommio::spawn_local(async move {
                tracing::info!(topic = %request.topic, partition = key.index, isr = ?request.isr, "asking the controller to change the ISR");
                let result = call_controller(&shard, ControllerRequest::AlterIsr(request)).await;
                if let Err(e) = &result {
                    tracing::info!(error = %e, "ISR change refused");
                }
                // Committed changes arrive with the metadata (and clear the
                // flag there); a refusal clears it here, to ask again later.
                if result.is_err() {
                    if let Some(partition) = shard.partitions.get_open(key) {
                        if let Role::Leader(leading) = &mut *partition.role.borrow_mut() {
                            leading.isr_change_in_flight = false;
                            leading.state.isr_request_failed();
                        }
                    }
                }
            })
            .detach();
        }
    }
}
