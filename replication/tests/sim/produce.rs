//! The producer and a leader's side of its requests: accepted in an
//! epoch, appended once there is room, acknowledged at the high watermark.

use std::collections::VecDeque;

use rand::Rng;
use replication::leader::AckState;
use replication::{LeaderEpoch, ReplicaId};
use storage::producers::{Check, BATCHES_KEPT};

use super::replica::{producer_batch, Role};
use super::{Sim, MIN_INSYNC};

/// The idempotent producer: its batches not yet acknowledged, oldest
/// first (at most the five a broker remembers).
#[derive(Debug, Default)]
pub(crate) struct Producer {
    pub(crate) next_value: u64,
    pub(crate) unacknowledged: VecDeque<u64>,
}

impl Sim {
    /// A replica that believes it leads, at random (a deposed one may not
    /// have heard yet), as the producer's metadata may point at it.
    pub(crate) fn pick_leader(&mut self) -> Option<ReplicaId> {
        let leaders: Vec<ReplicaId> = self
            .replicas
            .iter()
            .filter(|r| r.reachable() && matches!(r.role, Role::Leader(_)))
            .map(|r| r.id)
            .collect();
        if leaders.is_empty() {
            return None;
        }
        Some(leaders[self.rng.gen_range(0..leaders.len())])
    }

    /// A new batch of the producer's, unacknowledged until a leader says so.
    pub(crate) fn new_batch(&mut self) -> u64 {
        let value = self.producer.next_value;
        self.producer.next_value += 1;
        self.producer.unacknowledged.push_back(value);
        value
    }

    /// A plain batch (no producer id), appended at once by the replica
    /// that believes it leads (the scripted tests).
    pub(crate) fn produce(&mut self) {
        let Some(id) = self.pick_leader() else {
            return;
        };
        let value = self.next_plain;
        self.next_plain += 1;
        if let Some(epoch) = self.accept(id) {
            self.append(id, epoch, value);
        }
    }

    /// One step of the producer: a new batch if fewer than five are
    /// unacknowledged (sometimes), then every unacknowledged one, oldest
    /// first with its sequence, to the replica it believes leads. Each
    /// accepted batch is appended now or, waiting for room, in a later
    /// step; a request that waits holds back the ones after it (one
    /// connection answers in order), and a refusal ends the round.
    pub(crate) fn producer_step(&mut self) {
        let Some(id) = self.pick_leader() else {
            return;
        };
        if self.producer.unacknowledged.len() < BATCHES_KEPT && self.rng.gen_bool(0.7) {
            self.new_batch();
        }
        let window: Vec<u64> = self.producer.unacknowledged.iter().copied().collect();
        for value in window {
            let Some(epoch) = self.accept(id) else {
                return;
            };
            if self.rng.gen_bool(0.5) {
                self.appending.push((id, epoch, value));
                return;
            }
            if !self.append(id, epoch, value) {
                return;
            }
        }
    }

    /// A request's first step at replica `id`: its leader epoch, if it
    /// leads (in its own view) and has enough in-sync replicas.
    pub(crate) fn accept(&mut self, id: ReplicaId) -> Option<LeaderEpoch> {
        let Role::Leader(state) = &self.replica(id).role else {
            return None; // NOT_LEADER
        };
        state.check_acks_all(MIN_INSYNC).ok()?; // NOT_ENOUGH_REPLICAS otherwise
        Some(state.epoch())
    }

    /// Finishes an accepted append that waited, if its replica can run.
    pub(crate) fn finish_waiting_append(&mut self) {
        let ready: Vec<usize> = (0..self.appending.len())
            .filter(|i| self.replicas[(self.appending[*i].0 - 1) as usize].reachable())
            .collect();
        if ready.is_empty() {
            return;
        }
        let (id, epoch, value) = self
            .appending
            .remove(ready[self.rng.gen_range(0..ready.len())]);
        self.append(id, epoch, value);
    }

    /// A request's second step: if replica `id` still leads in `epoch`,
    /// the producer state decides (a retry of a stored batch is answered
    /// with its offset, a gap refused), then the batch is appended. False
    /// if refused.
    pub(crate) fn append(&mut self, id: ReplicaId, epoch: LeaderEpoch, value: u64) -> bool {
        if self.replica(id).role.leads_in() != Some(epoch) {
            self.fenced_appends += 1;
            return false; // led no more when it had room: nothing appended
        }
        let r = self.replica(id);
        let check = match producer_batch(value) {
            Some(batch) => r.producers.check(&batch),
            None => Ok(Check::Append),
        };
        let offset = match check {
            Err(_) => return false, // OUT_OF_ORDER_SEQUENCE_NUMBER
            Ok(Check::Duplicate(original)) => {
                self.duplicates_recognised += 1;
                original.first_offset
            }
            Ok(Check::Append) => {
                let offset = r.push(epoch, value);
                let end = r.end();
                if let Role::Leader(state) = &mut r.role {
                    state.update_high_watermark(end);
                }
                offset
            }
        };
        self.pending.push((id, epoch, offset, value));
        if self.trace {
            println!(
                "t={} {id} appends {value} at {offset} epoch {}",
                self.now_ms, epoch.0
            );
        }
        self.complete_acks(id);
        true
    }

    /// Acknowledges the pending produces of `leader` below its high
    /// watermark; fails those it can no longer complete.
    pub(crate) fn complete_acks(&mut self, leader_id: ReplicaId) {
        let leader = self.replicas[(leader_id - 1) as usize].clone();
        let Role::Leader(state) = &leader.role else {
            return;
        };
        let mut still = Vec::new();
        for (id, epoch, offset, value) in std::mem::take(&mut self.pending) {
            if id != leader_id || epoch != state.epoch() {
                still.push((id, epoch, offset, value));
                continue;
            }
            match state.ack_state(offset, MIN_INSYNC) {
                AckState::Done => {
                    assert_eq!(
                        leader.log.get(offset.0 as usize).map(|e| e.1),
                        Some(value),
                        "leader {leader_id} acknowledges offset {offset} without the record"
                    );
                    assert!(
                        !self.acked.iter().any(|(o, v)| *o == offset && *v != value),
                        "offset {offset} acknowledged with two values"
                    );
                    // A retry answered as a duplicate acknowledges the
                    // same record again: counted once.
                    if !self.acked.contains(&(offset, value)) {
                        if self.trace {
                            println!(
                                "t={} {leader_id} acknowledges {value} at {offset} epoch {} hw {} {state:?}",
                                self.now_ms,
                                epoch.0,
                                state.high_watermark()
                            );
                        }
                        self.acked.push((offset, value));
                    }
                    self.producer.unacknowledged.retain(|v| *v != value);
                }
                AckState::Waiting => still.push((id, epoch, offset, value)),
                AckState::Failed(_) => {}
            }
        }
        self.pending = still;
    }
}
