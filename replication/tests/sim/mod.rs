//! The simulation itself: its replicas, controller and producer, one
//! random step at a time, and the invariants checked after each.

mod control;
mod faults;
mod fetch;
mod produce;
mod replica;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use replication::epochs::EpochCache;
use replication::{LeaderEpoch, Offset, ReplicaId};
use storage::producers::ProducerState;

pub(crate) use control::Controller;
pub(crate) use produce::Producer;
pub(crate) use replica::{Replica, Role, PLAIN_FROM};

pub(crate) const REPLICAS: [ReplicaId; 3] = [1, 2, 3];
pub(crate) const MIN_INSYNC: usize = 2;
pub(crate) const LAG_MAX_MS: u64 = 300;
/// Records a fetch returns at most.
pub(crate) const FETCH_MAX: usize = 4;

pub(crate) struct Sim {
    pub(crate) rng: SmallRng,
    pub(crate) now_ms: u64,
    pub(crate) replicas: Vec<Replica>,
    pub(crate) controller: Controller,
    pub(crate) producer: Producer,
    /// (leader, epoch, value) accepted in that epoch, not yet appended
    /// (waiting for room in the log).
    pub(crate) appending: Vec<(ReplicaId, LeaderEpoch, u64)>,
    /// Retries answered as duplicates, and appends refused at their
    /// second step (leadership gone): a run counts both, as a check that
    /// never meets its case checks nothing.
    pub(crate) duplicates_recognised: usize,
    pub(crate) fenced_appends: usize,
    /// The next plain batch's number (the scripted tests').
    pub(crate) next_plain: u64,
    /// (leader, epoch, offset, value) awaiting the high watermark.
    pub(crate) pending: Vec<(ReplicaId, LeaderEpoch, Offset, u64)>,
    /// (offset, value) acknowledged to a producer.
    pub(crate) acked: Vec<(Offset, u64)>,
    pub(crate) faults: usize,
    pub(crate) elections: usize,
    /// Print every event (SIM_TRACE=1), to read a failing seed.
    pub(crate) trace: bool,
}

impl Sim {
    pub(crate) fn new(seed: u64) -> Sim {
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

    pub(crate) fn replica(&mut self, id: ReplicaId) -> &mut Replica {
        &mut self.replicas[(id - 1) as usize]
    }

    pub(crate) fn step(&mut self, fault_rate: f64) {
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
    pub(crate) fn check(&self) {
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
    pub(crate) fn heal_and_drain(&mut self) {
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
