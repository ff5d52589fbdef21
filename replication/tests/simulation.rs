//! A simulated partition: three replicas with in-memory logs, a controller
//! that elects leaders from the ISR and commits ISR changes only from the
//! current leader and epoch, acks=all producers (min.insync.replicas = 2),
//! followers fetching, and faults at random: crashes, restarts, a leader
//! paused past its session (deposed while it still believes it leads),
//! rapid double failovers, followers learning of a new leader late, and a
//! leader learning late that the controller committed its ISR change (and
//! of fences that shrank its ISR).
//!
//! The records are an idempotent producer's batches (one record each, its
//! value the batch's sequence), with at most five unacknowledged; it
//! resends them in order, with their sequences, to whichever replica it
//! believes leads, at any point of a failover. Every replica keeps the
//! producer state the broker keeps (storage's `ProducerState`): a leader
//! checks each batch against it (a retry of one of the last five is
//! answered with its original offsets, a gap refused), followers record
//! what they copy, and a truncation or a restart rebuilds it from the log.
//! A leader's append happens in two steps, as the broker's does (accepted
//! in its epoch, then appended once there is room), with other events in
//! between; the second step asks again whether it still leads in that
//! epoch. (The producer never bumps its epoch: librdkafka's bump after
//! skipped sequences is kept from happening by the broker's answers, and
//! the fault test runs librdkafka itself.)
//!
//! Checked after every step: every acknowledged record is in every live
//! in-sync replica at its offset; no two replicas differ below both their
//! high watermarks; no log holds a batch twice (checked as each is
//! stored). At the end, healed and
//! drained, every log is the same, holds every acknowledged record, and
//! each batch at most once. Seeds are printed; `SEED=n` replays.

use std::collections::{BTreeSet, VecDeque};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use replication::epochs::EpochCache;
use replication::follower::{high_watermark, truncation_step, Truncation};
use replication::leader::{AckState, LeaderState};
use replication::{LeaderEpoch, Offset, ReplicaId};
use storage::producers::{Check, ProducerBatch, ProducerState, BATCHES_KEPT};
use storage::TimestampMs;

const REPLICAS: [ReplicaId; 3] = [1, 2, 3];
const MIN_INSYNC: usize = 2;
const LAG_MAX_MS: u64 = 300;
/// Records a fetch returns at most.
const FETCH_MAX: usize = 4;
/// The producer's id; its epoch is 0 throughout.
const PRODUCER_ID: i64 = 1;

/// Values from here on are plain batches (no producer id: never checked,
/// as the broker treats them), which the scripted tests send.
const PLAIN_FROM: u64 = 1 << 40;

/// The idempotent batch whose single record is `value` (its sequence),
/// or None for a plain one.
fn producer_batch(value: u64) -> Option<ProducerBatch> {
    (value < PLAIN_FROM).then_some(ProducerBatch {
        producer_id: PRODUCER_ID,
        epoch: 0,
        first_seq: value as i32,
        offset_delta: 0,
    })
}

/// The producer state a log implies: what the broker rebuilds after a
/// truncation or at open.
fn rebuilt(log: &[(LeaderEpoch, u64)]) -> ProducerState {
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
enum Role {
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
    fn leads_in(&self) -> Option<LeaderEpoch> {
        match self {
            Role::Leader(state) => Some(state.epoch()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Replica {
    id: ReplicaId,
    /// (epoch, value) at each offset; every append is durable.
    log: Vec<(LeaderEpoch, u64)>,
    epochs: EpochCache,
    hw: Offset,
    alive: bool,
    /// Paused past its session: takes no steps, unreachable.
    paused: bool,
    role: Role,
    /// The controller's epoch this replica last heard.
    known_epoch: LeaderEpoch,
    /// The idempotent producer's state as of the log end.
    producers: ProducerState,
}

impl Replica {
    fn end(&self) -> Offset {
        Offset(self.log.len() as i64)
    }

    fn truncate(&mut self, to: Offset) {
        self.log.truncate(to.0.max(0) as usize);
        self.epochs.truncate_from_end(to);
        self.hw = self.hw.min(to);
        self.producers = rebuilt(&self.log);
    }

    /// Appends `value` in `epoch` (a leader's append or a follower's copy)
    /// and records its batch.
    fn push(&mut self, epoch: LeaderEpoch, value: u64) -> Offset {
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

    fn reachable(&self) -> bool {
        self.alive && !self.paused
    }
}

/// The idempotent producer: its batches not yet acknowledged, oldest
/// first (at most the five a broker remembers).
#[derive(Debug, Default)]
struct Producer {
    next_value: u64,
    unacknowledged: VecDeque<u64>,
}

#[derive(Debug)]
struct Controller {
    leader: Option<ReplicaId>,
    epoch: LeaderEpoch,
    isr: BTreeSet<ReplicaId>,
}

struct Sim {
    rng: SmallRng,
    now_ms: u64,
    replicas: Vec<Replica>,
    controller: Controller,
    producer: Producer,
    /// (leader, epoch, value) accepted in that epoch, not yet appended
    /// (waiting for room in the log).
    appending: Vec<(ReplicaId, LeaderEpoch, u64)>,
    /// Retries answered as duplicates, and appends refused at their
    /// second step (leadership gone): a run counts both, as a check that
    /// never meets its case checks nothing.
    duplicates_recognised: usize,
    fenced_appends: usize,
    /// The next plain batch's number (the scripted tests').
    next_plain: u64,
    /// (leader, epoch, offset, value) awaiting the high watermark.
    pending: Vec<(ReplicaId, LeaderEpoch, Offset, u64)>,
    /// (offset, value) acknowledged to a producer.
    acked: Vec<(Offset, u64)>,
    faults: usize,
    elections: usize,
    /// Print every event (SIM_TRACE=1), to read a failing seed.
    trace: bool,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let replicas = REPLICAS
            .iter()
            .map(|id| Replica {
                id: *id,
                log: Vec::new(),
                epochs: EpochCache::new(),
                hw: Offset(0),
                alive: true,
                paused: false,
                role: Role::Idle,
                known_epoch: LeaderEpoch(0),
                producers: ProducerState::default(),
            })
            .collect();
        let mut sim = Sim {
            rng: SmallRng::seed_from_u64(seed),
            now_ms: 0,
            replicas,
            controller: Controller {
                leader: Some(1),
                epoch: LeaderEpoch(1),
                isr: REPLICAS.iter().copied().collect(),
            },
            producer: Producer::default(),
            appending: Vec::new(),
            duplicates_recognised: 0,
            fenced_appends: 0,
            next_plain: PLAIN_FROM,
            pending: Vec::new(),
            acked: Vec::new(),
            faults: 0,
            elections: 0,
            trace: std::env::var("SIM_TRACE").is_ok(),
        };
        for id in REPLICAS {
            sim.refresh(id);
        }
        sim
    }

    fn replica(&mut self, id: ReplicaId) -> &mut Replica {
        &mut self.replicas[(id - 1) as usize]
    }

    /// A replica learns the controller's current leadership.
    fn refresh(&mut self, id: ReplicaId) {
        let (leader, epoch, isr) = (
            self.controller.leader,
            self.controller.epoch,
            self.controller.isr.clone(),
        );
        let now = self.now_ms;
        let r = self.replica(id);
        if !r.reachable() {
            return;
        }
        if r.known_epoch == epoch && !matches!(r.role, Role::Idle) {
            // Same epoch: a leader learns the controller's ISR (its own
            // committed requests, or fences), as the broker's reconcile does.
            let end = r.end();
            if let Role::Leader(state) = &mut r.role {
                if state.isr() != &isr {
                    state.isr_committed(isr, end);
                    r.hw = state.high_watermark();
                    self.complete_acks(id);
                }
            }
            return;
        }
        r.known_epoch = epoch;
        r.role = match leader {
            Some(l) if l == id => Role::Leader(LeaderState::new(
                id,
                epoch,
                &REPLICAS,
                &isr,
                r.end(),
                r.hw,
                now,
                LAG_MAX_MS,
            )),
            Some(l) => Role::Follower {
                leader: l,
                epoch,
                truncated: false,
            },
            None => Role::Idle,
        };
    }

    /// The controller elects a leader from the in-sync replicas it can
    /// reach (never an out-of-sync one: no unclean election).
    fn elect(&mut self) {
        let candidates: Vec<ReplicaId> = self
            .controller
            .isr
            .iter()
            .copied()
            .filter(|id| self.replicas[(*id - 1) as usize].reachable())
            .collect();
        let chosen = if candidates.is_empty() {
            None
        } else {
            Some(candidates[self.rng.gen_range(0..candidates.len())])
        };
        self.controller.leader = chosen;
        self.controller.epoch = LeaderEpoch(self.controller.epoch.0 + 1);
        if self.trace {
            println!(
                "t={} elect {:?} epoch {} isr {:?}",
                self.now_ms, chosen, self.controller.epoch.0, self.controller.isr
            );
        }
        self.elections += 1;
        // Some replicas hear at once, the rest later.
        for id in REPLICAS {
            if self.rng.gen_bool(0.5) || Some(id) == chosen {
                self.refresh(id);
            }
        }
    }

    /// The controller fences replica `id` (crashed, or silent past its
    /// session): out of the ISR (unless it is the last member), and a new
    /// leader if it led.
    fn fence(&mut self, id: ReplicaId) {
        if self.controller.isr.len() > 1 {
            self.controller.isr.remove(&id);
        }
        if self.controller.leader == Some(id) || self.controller.leader.is_none() {
            self.elect();
        }
    }

    /// A replica that believes it leads, at random (a deposed one may not
    /// have heard yet), as the producer's metadata may point at it.
    fn pick_leader(&mut self) -> Option<ReplicaId> {
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
    fn new_batch(&mut self) -> u64 {
        let value = self.producer.next_value;
        self.producer.next_value += 1;
        self.producer.unacknowledged.push_back(value);
        value
    }

    /// A plain batch (no producer id), appended at once by the replica
    /// that believes it leads (the scripted tests).
    fn produce(&mut self) {
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
    fn producer_step(&mut self) {
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
    fn accept(&mut self, id: ReplicaId) -> Option<LeaderEpoch> {
        let Role::Leader(state) = &self.replica(id).role else {
            return None; // NOT_LEADER
        };
        state.check_acks_all(MIN_INSYNC).ok()?; // NOT_ENOUGH_REPLICAS otherwise
        Some(state.epoch())
    }

    /// Finishes an accepted append that waited, if its replica can run.
    fn finish_waiting_append(&mut self) {
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
    fn append(&mut self, id: ReplicaId, epoch: LeaderEpoch, value: u64) -> bool {
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

    /// One follower fetches (truncating first if it has a new leader).
    fn fetch(&mut self, id: ReplicaId) {
        let now = self.now_ms;
        let (leader_id, epoch, truncated) = match &self.replicas[(id - 1) as usize].role {
            Role::Follower {
                leader,
                epoch,
                truncated,
            } => (*leader, *epoch, *truncated),
            _ => return,
        };
        let leader = self.replicas[(leader_id - 1) as usize].clone();
        // The leader must be reachable and lead this very epoch; otherwise
        // the follower is fenced (or the leader gone) and refreshes.
        let leads = matches!(&leader.role, Role::Leader(s) if s.epoch() == epoch);
        if !leader.reachable() || !leads {
            self.refresh(id);
            return;
        }
        if !truncated {
            // OffsetForLeaderEpoch rounds, then cut.
            let mut cut;
            loop {
                let r = &self.replicas[(id - 1) as usize];
                let answer = r
                    .epochs
                    .latest()
                    .and_then(|e| leader.epochs.end_offset_for(e, leader.end()));
                let step = truncation_step(&r.epochs, r.end(), answer);
                cut = match step {
                    Truncation::Done(cut) | Truncation::Again(cut) => cut,
                };
                self.replica(id).truncate(cut);
                if matches!(step, Truncation::Done(_)) {
                    break;
                }
            }
            if self.trace {
                println!(
                    "t={} {id} truncates to {cut} following {leader_id} epoch {}",
                    self.now_ms, epoch.0
                );
            }
            if let Role::Follower { truncated, .. } = &mut self.replica(id).role {
                *truncated = true;
            }
            return;
        }
        let fetch_offset = self.replicas[(id - 1) as usize].end();
        assert!(
            fetch_offset <= leader.end(),
            "replica {id} fetches at {fetch_offset} beyond leader {leader_id}'s end {}",
            leader.end()
        );
        let from = fetch_offset.0 as usize;
        let records: Vec<(LeaderEpoch, u64)> =
            leader.log[from..].iter().take(FETCH_MAX).copied().collect();
        let leader_end = leader.end();
        let leader_hw = match &mut self.replica(leader_id).role {
            Role::Leader(state) => state.on_fetch(id, fetch_offset, leader_end, now),
            _ => unreachable!(),
        };
        if self.trace {
            println!("t={} {id} fetches {} records at {fetch_offset} from {leader_id}; leader hw {leader_hw}", self.now_ms, records.len());
        }
        let r = self.replica(id);
        for (epoch, value) in records {
            r.push(epoch, value);
        }
        r.hw = high_watermark(leader_hw, r.end()).max(r.hw);
        self.complete_acks(leader_id);
    }

    /// Acknowledges the pending produces of `leader` below its high
    /// watermark; fails those it can no longer complete.
    fn complete_acks(&mut self, leader_id: ReplicaId) {
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

    /// The leader asks for an ISR change as the broker does: an earlier
    /// request whose outcome it does not know, again, else the change it
    /// proposes; the members asked for count for its high watermark from
    /// then on. The controller commits it only from the current leader at
    /// the current epoch and the ISR the leader knows (its partition
    /// epoch), and sometimes refuses it anyway; a refusal at the current
    /// partition epoch (so nothing changed) is heard, and the leader
    /// counts its committed ISR alone again; any other (deposed, or the
    /// partition changed since) leaves it unknown. A commit's answer is never heard here (as if lost in a
    /// controller's failover): the leader learns of the commit on a later
    /// refresh, and asks again meanwhile.
    fn isr_maintenance(&mut self, id: ReplicaId) {
        let now = self.now_ms;
        let refuse_anyway = self.rng.gen_bool(0.15);
        let current_leader = self.controller.leader == Some(id);
        let controller_epoch = self.controller.epoch;
        let controller_isr = self.controller.isr.clone();
        let r = &mut self.replicas[(id - 1) as usize];
        let end = r.end();
        let Role::Leader(state) = &mut r.role else {
            return;
        };
        let asked = match state.pending_isr() {
            Some(unsettled) => unsettled.clone(),
            None => match state.proposed_isr(now) {
                Some(proposed) => proposed,
                None => return,
            },
        };
        if self.trace {
            println!("t={now} {id} asks isr {asked:?}, knows {:?}, controller leader {current_leader} epoch {} isr {controller_isr:?}", state.isr(), controller_epoch.0);
        }
        if &asked == state.isr() {
            state.isr_committed(asked, end); // settled: nothing to ask
            return;
        }
        state.isr_requested(asked.clone());
        if !current_leader || controller_epoch != state.epoch() || state.isr() != &controller_isr {
            // Refused: the partition changed since the ISR this leader
            // knows (its partition epoch is stale; a deposed leader's
            // always is, as the controller checks that first). What
            // changed it may be one of its own requests whose answer was
            // lost: unknown.
            return;
        }
        if refuse_anyway {
            state.isr_request_refused(); // refused, nothing changed
            return;
        }
        if self.trace {
            println!("t={} {id} commits isr {asked:?}", self.now_ms);
        }
        self.controller.isr = asked;
    }

    fn fault(&mut self) {
        self.faults += 1;
        if self.trace {
            println!("t={} fault", self.now_ms);
        }
        let id = REPLICAS[self.rng.gen_range(0..REPLICAS.len())];
        match self.rng.gen_range(0..4) {
            // Crash (often the leader).
            0 | 1 => {
                let target = if self.rng.gen_bool(0.6) {
                    self.controller.leader.unwrap_or(id)
                } else {
                    id
                };
                let r = self.replica(target);
                if r.alive {
                    if self.trace {
                        println!("t={} crash {target}", self.now_ms);
                    }
                    let r = self.replica(target);
                    r.alive = false;
                    r.role = Role::Idle;
                    self.pending.retain(|p| p.0 != target);
                    self.appending.retain(|a| a.0 != target);
                    self.fence(target);
                }
            }
            // Restart a crashed replica: its log survives (durable).
            2 => {
                if let Some(dead) = self.replicas.iter().find(|r| !r.alive).map(|r| r.id) {
                    let r = self.replica(dead);
                    r.alive = true;
                    r.role = Role::Idle;
                    r.known_epoch = LeaderEpoch(-1);
                    // Rebuilt from its log at open, as the broker does.
                    r.producers = rebuilt(&r.log);
                    if self.controller.leader.is_none() {
                        self.elect();
                    }
                    self.refresh(dead);
                }
            }
            // Pause the leader past its session: deposed, but it still
            // believes it leads when it wakes.
            _ => {
                if let Some(leader) = self.controller.leader {
                    if self.trace {
                        println!("t={} pause {leader}", self.now_ms);
                    }
                    self.replica(leader).paused = true;
                    self.fence(leader);
                }
            }
        }
    }

    fn resume_paused(&mut self) {
        for i in 0..self.replicas.len() {
            if self.replicas[i].paused && self.rng.gen_bool(0.3) {
                self.replicas[i].paused = false;
            }
        }
    }

    fn step(&mut self, fault_rate: f64) {
        self.now_ms += self.rng.gen_range(1..30);
        match self.rng.gen_range(0..100) {
            0..=24 => self.producer_step(),
            25..=34 => self.finish_waiting_append(),
            35..=79 => {
                let id = REPLICAS[self.rng.gen_range(0..3)];
                if self.replicas[(id - 1) as usize].reachable() {
                    self.fetch(id);
                }
            }
            80..=89 => {
                let id = REPLICAS[self.rng.gen_range(0..3)];
                if self.replicas[(id - 1) as usize].reachable() {
                    self.isr_maintenance(id);
                }
            }
            90..=94 => {
                let id = REPLICAS[self.rng.gen_range(0..3)];
                self.refresh(id);
            }
            _ => self.resume_paused(),
        }
        if self.rng.gen_bool(fault_rate) {
            self.fault();
        }
        self.check();
    }

    /// The invariants that must hold at every step.
    fn check(&self) {
        for id in &self.controller.isr {
            let r = &self.replicas[(*id - 1) as usize];
            if !r.alive {
                continue;
            }
            for (offset, value) in &self.acked {
                assert_eq!(
                    r.log.get(offset.0 as usize).map(|e| e.1),
                    Some(*value),
                    "in-sync replica {id} lost acknowledged offset {offset}"
                );
            }
        }
        for a in &self.replicas {
            for b in &self.replicas {
                let common = a.hw.min(b.hw).0 as usize;
                assert_eq!(
                    a.log[..common.min(a.log.len())],
                    b.log[..common.min(b.log.len())],
                    "replicas {} and {} diverge below their high watermarks",
                    a.id,
                    b.id
                );
            }
        }
    }

    /// Heals every fault and replicates until the logs settle.
    fn heal_and_drain(&mut self) {
        for i in 0..self.replicas.len() {
            self.replicas[i].paused = false;
            if !self.replicas[i].alive {
                self.replicas[i].alive = true;
                self.replicas[i].role = Role::Idle;
                self.replicas[i].known_epoch = LeaderEpoch(-1);
            }
        }
        if self.controller.leader.is_none() {
            self.elect();
        }
        // Appends still waiting for room finish (their clients may have
        // given up; the broker's task has not): fenced, or appended.
        for (id, epoch, value) in std::mem::take(&mut self.appending) {
            self.append(id, epoch, value);
        }
        for _ in 0..2000 {
            self.now_ms += 10;
            for id in REPLICAS {
                self.refresh(id);
                self.fetch(id);
                self.isr_maintenance(id);
            }
            self.check();
        }
        let leader = self.controller.leader.expect("a leader after healing");
        let reference = &self.replicas[(leader - 1) as usize].log;
        for r in &self.replicas {
            assert_eq!(
                &r.log, reference,
                "replica {} differs from leader {leader} after draining",
                r.id
            );
        }
        for (offset, value) in &self.acked {
            assert_eq!(reference.get(offset.0 as usize).map(|e| e.1), Some(*value));
        }
    }
}

fn seed() -> u64 {
    std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// One randomized run: 1500 steps with faults, then healed and drained.
fn run_seed(seed: u64) -> Sim {
    let mut sim = Sim::new(seed);
    // Some runs fail over rapidly, some calmly.
    let fault_rate = [0.002, 0.01, 0.05][(seed % 3) as usize];
    for _ in 0..1500 {
        sim.step(fault_rate);
    }
    sim.heal_and_drain();
    sim
}

#[test]
fn seeds_that_once_failed() {
    // A deposed leader, refused as "not the leader" when it asked again
    // for an ISR whose earlier commit it had not heard of, stopped
    // counting the member it had asked for and acknowledged records the
    // elected member lacked (in-sync replica 2 lost offset 18).
    const SEEDS: &[u64] = &[1796230640141610991];
    for seed in SEEDS {
        println!("SEED={seed}");
        run_seed(*seed);
    }
}

#[test]
fn no_acknowledged_record_is_lost_and_logs_never_diverge_under_random_faults() {
    let base = seed();
    println!("SEED={base}");
    let mut acked = 0;
    let mut faults = 0;
    let mut elections = 0;
    let mut duplicates = 0;
    let mut fenced = 0;
    let runs = std::env::var("SIM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300u64);
    for run in 0..runs {
        let seed = base.wrapping_add(run);
        let result = std::panic::catch_unwind(|| run_seed(seed));
        let sim = match result {
            Ok(sim) => sim,
            Err(e) => {
                eprintln!("failed with SEED={seed} (run {run})");
                std::panic::resume_unwind(e);
            }
        };
        acked += sim.acked.len();
        faults += sim.faults;
        elections += sim.elections;
        duplicates += sim.duplicates_recognised;
        fenced += sim.fenced_appends;
    }
    println!(
        "{runs} runs: {acked} batches acknowledged, {faults} faults, {elections} elections, \
         {duplicates} retries recognised as duplicates, {fenced} appends fenced at their second \
         step; none lost, none diverged, none stored twice"
    );
    assert!(fenced > 0, "no append ever found its leadership gone");
    assert!(
        duplicates as u64 > runs,
        "retries of stored batches were checked: {duplicates}"
    );
    assert!(
        acked as u64 > runs * 30,
        "the runs made progress: {acked} acknowledged"
    );
    assert!(elections as u64 >= runs, "leaders changed: {elections}");
}

#[test]
fn a_rapid_double_failover_truncates_without_losing_committed_records() {
    // Replica 1 leads epoch 1 and commits 0..3 (all three have them); it
    // then appends 3..6 that only replica 2 fetches. 1 dies: 3 is elected
    // (epoch 2, it lacks 3..6) and writes 3..5 of its own, uncommitted,
    // then dies too: 2 is elected (epoch 3) holding 1's records.
    let mut sim = Sim::new(1);
    for _ in 0..3 {
        sim.produce();
    }
    for _ in 0..4 {
        for id in [2, 3] {
            sim.fetch(id);
        }
    }
    assert_eq!(sim.acked.len(), 3);
    for _ in 0..3 {
        sim.produce();
    }
    sim.fetch(2);
    sim.fetch(2);
    assert_eq!(sim.replicas[1].log.len(), 6);
    assert_eq!(sim.replicas[2].log.len(), 3);
    // 1 dies; the controller picks 3.
    sim.replica(1).alive = false;
    sim.controller.isr.remove(&1);
    sim.controller.leader = Some(3);
    sim.controller.epoch = LeaderEpoch(2);
    for id in [2, 3] {
        sim.refresh(id);
    }
    sim.produce();
    sim.produce();
    assert_eq!(sim.replicas[2].log.len(), 5);
    // 3 dies before 2 fetched from it; 2 leads epoch 3.
    sim.replica(3).alive = false;
    sim.controller.isr.remove(&3);
    sim.controller.leader = Some(2);
    sim.controller.epoch = LeaderEpoch(3);
    sim.refresh(2);
    sim.produce();
    sim.check();
    // Both come back and follow 2: 3 cuts its epoch-2 records, 1 keeps all.
    sim.heal_and_drain();
    let log: Vec<LeaderEpoch> = sim.replicas[2].log.iter().map(|e| e.0).collect();
    assert_eq!(
        log[..3],
        [LeaderEpoch(1); 3],
        "the committed records stayed"
    );
    assert!(
        !log.contains(&LeaderEpoch(2)),
        "replica 3's uncommitted epoch-2 records were cut: {log:?}"
    );
}

#[test]
fn a_deposed_leader_keeps_counting_the_members_it_asked_for() {
    // Leader 1 knows the ISR {1, 2}; it asks for {1, 2, 3}, and the
    // controller commits it, but the answer is lost. 1 is then deposed
    // (3 elected from {2, 3}) before it hears of either; 2 has not heard
    // yet and still fetches from 1. 1 asks again and is refused as
    // deposed: that says nothing of its earlier request, so 1 must keep
    // counting 3 for its high watermark, and acknowledge nothing 3 lacks.
    let mut sim = Sim::new(1);
    sim.controller.isr = [1, 2].into_iter().collect();
    sim.refresh(1);
    let Role::Leader(state) = &mut sim.replica(1).role else {
        panic!("1 leads");
    };
    state.isr_requested(REPLICAS.iter().copied().collect());
    sim.controller.isr = REPLICAS.iter().copied().collect();
    // Deposed: fenced out, 3 elected in epoch 2; only 3 hears.
    sim.controller.isr.remove(&1);
    sim.controller.leader = Some(3);
    sim.controller.epoch = LeaderEpoch(2);
    sim.refresh(3);
    sim.isr_maintenance(1);
    let value = sim.next_plain;
    sim.next_plain += 1;
    let epoch = sim.accept(1).expect("1 still believes it leads");
    assert!(sim.append(1, epoch, value));
    // A truncation round, a fetch that copies the record, one that
    // tells 1 that 2 holds it.
    for _ in 0..3 {
        sim.fetch(2);
    }
    assert_eq!(sim.replicas[1].log.len(), 1, "2 copied the record");
    sim.check();
    assert!(
        sim.acked.is_empty(),
        "the deposed leader acknowledged a record its successor lacks"
    );
}
