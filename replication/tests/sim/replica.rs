//! One replica: its log of (epoch, value), its leader epochs, high
//! watermark, role and the idempotent producer's state it keeps.

use replication::epochs::EpochCache;
use replication::leader::LeaderState;
use replication::{LeaderEpoch, Offset, ReplicaId};
use storage::producers::{ProducerBatch, ProducerState};
use storage::TimestampMs;

/// The producer's id; its epoch is 0 throughout.
pub(crate) const PRODUCER_ID: i64 = 1;

/// Values from here on are plain batches (no producer id: never checked,
/// as the broker treats them), which the scripted tests send.
pub(crate) const PLAIN_FROM: u64 = 1 << 40;

/// The idempotent batch whose single record is `value` (its sequence),
/// or None for a plain one.
pub(crate) fn producer_batch(value: u64) -> Option<ProducerBatch> {
    (value < PLAIN_FROM).then_some(ProducerBatch {
        producer_id: PRODUCER_ID,
        epoch: 0,
        first_seq: value as i32,
        offset_delta: 0,
    })
}

/// The producer state a log implies: what the broker rebuilds after a
/// truncation or at open.
pub(crate) fn rebuilt(log: &[(LeaderEpoch, u64)]) -> ProducerState {
    let mut state = ProducerState::default();
    for (offset, (_, value)) in log.iter().enumerate() {
        if let Some(batch) = producer_batch(*value) {
            let at = Offset(offset as i64);
            state.record_batch(&batch, at, TimestampMs(0), TimestampMs(0));
        }
    }
    state
}

#[derive(Debug, Clone)]
pub(crate) enum Role {
    Leader(LeaderState),
    Follower {
        leader: ReplicaId,
        epoch: LeaderEpoch,
        /// Cut its log at the divergence point for this leader yet.
        truncated: bool,
    },
    /// Knows of no leader (offline partition).
    Idle,
}

impl Role {
    /// The epoch it leads in, if it leads.
    pub(crate) fn leads_in(&self) -> Option<LeaderEpoch> {
        match self {
            Role::Leader(state) => Some(state.epoch()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Replica {
    pub(crate) id: ReplicaId,
    /// (epoch, value) at each offset; every append is durable.
    pub(crate) log: Vec<(LeaderEpoch, u64)>,
    pub(crate) epochs: EpochCache,
    pub(crate) hw: Offset,
    pub(crate) alive: bool,
    /// Paused past its session: takes no steps, unreachable.
    pub(crate) paused: bool,
    pub(crate) role: Role,
    /// The controller's epoch this replica last heard.
    pub(crate) known_epoch: LeaderEpoch,
    /// The idempotent producer's state as of the log end.
    pub(crate) producers: ProducerState,
}

impl Replica {
    pub(crate) fn end(&self) -> Offset {
        Offset(self.log.len() as i64)
    }

    pub(crate) fn truncate(&mut self, to: Offset) {
        self.log.truncate(to.0.max(0) as usize);
        self.epochs.truncate_from_end(to);
        self.hw = self.hw.min(to);
        self.producers = rebuilt(&self.log);
    }

    /// Appends `value` in `epoch` (a leader's append or a follower's copy)
    /// and records its batch.
    pub(crate) fn push(&mut self, epoch: LeaderEpoch, value: u64) -> Offset {
        let at = self.end();
        // At most once: no log ever holds a batch twice.
        if let Some(before) = self.log.iter().position(|e| e.1 == value) {
            panic!(
                "replica {} stores batch {value} twice: at {before} and {at}",
                self.id
            );
        }
        self.epochs.assign(epoch, at);
        self.log.push((epoch, value));
        if let Some(batch) = producer_batch(value) {
            self.producers
                .record_batch(&batch, at, TimestampMs(0), TimestampMs(0));
        }
        at
    }

    pub(crate) fn reachable(&self) -> bool {
        self.alive && !self.paused
    }
}
