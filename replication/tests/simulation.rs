//! A simulated partition: three replicas with in-memory logs, a controller
//! that elects leaders from the ISR and commits ISR changes only from the
//! current leader and epoch, acks=all producers (min.insync.replicas = 2),
//! followers fetching, and faults at random: crashes, restarts, a leader
//! paused past its session (deposed while it still believes it leads),
//! rapid double failovers, followers learning of a new leader late, and a
//! leader learning late that the controller committed its ISR change (and
//! of fences that shrank its ISR).
//!
//! Checked after every step: every acknowledged record is in every live
//! in-sync replica at its offset; no two replicas differ below both their
//! high watermarks. At the end, healed and drained, every log is the same
//! and holds every acknowledged record. Seeds are printed; `SEED=n` replays.

use std::collections::BTreeSet;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use replication::epochs::EpochCache;
use replication::follower::{high_watermark, truncation_step, Truncation};
use replication::leader::{AckState, LeaderState};
use replication::{LeaderEpoch, Offset, ReplicaId};

const REPLICAS: [ReplicaId; 3] = [1, 2, 3];
const MIN_INSYNC: usize = 2;
const LAG_MAX_MS: u64 = 300;
/// Records a fetch returns at most.
const FETCH_MAX: usize = 4;

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
}

impl Replica {
    fn end(&self) -> Offset {
        Offset(self.log.len() as i64)
    }

    fn truncate(&mut self, to: Offset) {
        self.log.truncate(to.0.max(0) as usize);
        self.epochs.truncate_from_end(to);
        self.hw = self.hw.min(to);
    }

    fn reachable(&self) -> bool {
        self.alive && !self.paused
    }
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
    next_value: u64,
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
            next_value: 0,
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

    fn produce(&mut self) {
        let leaders: Vec<ReplicaId> = self
            .replicas
            .iter()
            .filter(|r| r.reachable() && matches!(r.role, Role::Leader(_)))
            .map(|r| r.id)
            .collect();
        if leaders.is_empty() {
            return;
        }
        // Possibly a deposed leader that has not heard yet.
        let id = leaders[self.rng.gen_range(0..leaders.len())];
        let value = self.next_value;
        self.next_value += 1;
        let r = self.replica(id);
        let Role::Leader(state) = &r.role else {
            unreachable!()
        };
        if state.check_acks_all(MIN_INSYNC).is_err() {
            return; // NOT_ENOUGH_REPLICAS: nothing appended
        }
        let epoch = state.epoch();
        let offset = r.end();
        r.epochs.assign(epoch, offset);
        r.log.push((epoch, value));
        let end = r.end();
        if let Role::Leader(state) = &mut r.role {
            state.update_high_watermark(end);
        }
        self.pending.push((id, epoch, offset, value));
        if self.trace {
            println!(
                "t={} {id} appends {value} at {offset} epoch {}",
                self.now_ms, epoch.0
            );
        }
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
            let at = r.end();
            r.epochs.assign(epoch, at);
            r.log.push((epoch, value));
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
                    self.acked.push((offset, value));
                }
                AckState::Waiting => still.push((id, epoch, offset, value)),
                AckState::Failed(_) => {}
            }
        }
        self.pending = still;
    }

    /// The leader proposes an ISR change; the controller commits it only
    /// from the current leader at the current epoch.
    fn isr_maintenance(&mut self, id: ReplicaId) {
        let now = self.now_ms;
        let Role::Leader(state) = &self.replicas[(id - 1) as usize].role else {
            return;
        };
        let Some(proposed) = state.proposed_isr(now) else {
            return;
        };
        let current = self.controller.leader == Some(id) && self.controller.epoch == state.epoch();
        if !current {
            return; // refused: a deposed leader
        }
        if self.trace {
            println!("t={} {id} commits isr {proposed:?}", self.now_ms);
        }
        self.controller.isr = proposed.clone();
        // The leader hears of the commit later (its next refresh); until
        // then its high watermark counts the requested members too.
        let r = self.replica(id);
        if let Role::Leader(state) = &mut r.role {
            state.isr_requested(proposed);
        }
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
            0..=34 => self.produce(),
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

#[test]
fn no_acknowledged_record_is_lost_and_logs_never_diverge_under_random_faults() {
    let base = seed();
    println!("SEED={base}");
    let mut acked = 0;
    let mut faults = 0;
    let mut elections = 0;
    let runs = std::env::var("SIM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300u64);
    for run in 0..runs {
        let seed = base.wrapping_add(run);
        let mut sim = Sim::new(seed);
        // Some runs fail over rapidly, some calmly.
        let fault_rate = [0.002, 0.01, 0.05][(seed % 3) as usize];
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for _ in 0..1500 {
                sim.step(fault_rate);
            }
            sim.heal_and_drain();
        }));
        if let Err(e) = result {
            eprintln!("failed with SEED={seed} (run {run})");
            std::panic::resume_unwind(e);
        }
        acked += sim.acked.len();
        faults += sim.faults;
        elections += sim.elections;
    }
    println!("{runs} runs: {acked} records acknowledged, {faults} faults, {elections} elections; none lost, none diverged");
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
