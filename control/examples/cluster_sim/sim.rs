//! A cluster's control plane in simulated time: brokers register,
//! heartbeat, stop, come back and catch up, against the controller and
//! the metadata the quorum would commit. The quorum's own part (Raft:
//! elections, replication of the log) is control/tests/simulation.rs's;
//! here every record commits as it is proposed, so the times measured are
//! the controller's decisions on its clock (its tick, the brokers'
//! heartbeats and sessions), not network or disk latency.
//!
//! Shared by the full-size program (`cargo run --release -p control
//! --example cluster_sim`) and the smaller test
//! (control/tests/cluster_sim.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use control::controller::{self, AlterIsr, Controller};
use control::*;

/// How often a broker heartbeats (the broker's default).
pub const HEARTBEAT_MS: u64 = 1_000;
/// The controller's tick (the broker's: a tenth of the session, at most
/// 500 ms).
pub const TICK_MS: u64 = 500;
/// A broker's session (the broker's default).
pub const SESSION_MS: u64 = 9_000;
/// How long a restarted broker takes to catch up before its leaders take
/// it back into their ISRs.
pub const CATCH_UP_MS: u64 = 2_000;
/// The leader rebalance interval (the broker's default).
pub const REBALANCE_MS: u64 = 300_000;
/// The simulation's step.
const STEP_MS: u64 = 100;

/// A cluster's size.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Brokers, ids 1..=brokers.
    pub brokers: i32,
    /// Racks, brokers spread round-robin.
    pub racks: i32,
    /// Topics.
    pub topics: usize,
    /// Partitions per topic.
    pub partitions_per_topic: usize,
    /// Replicas per partition.
    pub replication_factor: usize,
}

/// What the metadata log received.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogGrowth {
    /// Records applied.
    pub records: u64,
    /// Their encoded bytes.
    pub bytes: u64,
}

/// The simulated cluster.
pub struct Sim {
    /// The active controller.
    pub controller: Controller,
    /// The other node's controller: active before, or never yet.
    standby: Controller,
    /// The quorum's term (each failover starts one).
    term: u64,
    /// The committed metadata.
    pub metadata: Metadata,
    /// Simulated time.
    pub now_ms: u64,
    /// Broker processes running (heartbeating), by id: their incarnation.
    running: BTreeMap<BrokerId, Incarnation>,
    /// Restarted brokers, and when they will have caught up.
    catching_up: BTreeMap<BrokerId, u64>,
    /// Each broker's last heartbeat the controller answered.
    pub last_heartbeat_ms: BTreeMap<BrokerId, u64>,
    /// What the log received.
    pub log: LogGrowth,
    /// Time spent in the controller's decisions.
    pub controller_time: Duration,
    /// Records the controller decided.
    pub decided: u64,
    /// Brokers fenced while their process ran (heartbeating).
    pub live_brokers_fenced: usize,
}

impl Sim {
    /// `shape`'s brokers registered and live, its topics created.
    pub fn new(shape: Shape) -> Sim {
        let mut sim = Sim {
            controller: new_controller(),
            standby: new_controller(),
            term: 1,
            metadata: Metadata::default(),
            now_ms: 0,
            running: BTreeMap::new(),
            catching_up: BTreeMap::new(),
            last_heartbeat_ms: BTreeMap::new(),
            log: LogGrowth::default(),
            controller_time: Duration::ZERO,
            decided: 0,
            live_brokers_fenced: 0,
        };
        for id in 1..=shape.brokers {
            let rack = format!("rack-{}", (id - 1) % shape.racks);
            sim.start_as(BrokerId(id), Incarnation(1), Some(rack));
        }
        sim.advance(HEARTBEAT_MS);
        for t in 0..shape.topics {
            let mut id = [0; 16];
            id[..8].copy_from_slice(&(t as u64 + 1).to_be_bytes());
            let created = sim.controller.create_topic(
                &sim.metadata,
                TopicId(id),
                &format!("topic-{t}"),
                shape.partitions_per_topic,
                shape.replication_factor,
                TopicConfig::default(),
            );
            sim.apply(vec![created.expect("placed")]);
        }
        sim
    }

    /// Applies committed records, counting them.
    fn apply(&mut self, records: Vec<MetadataRecord>) {
        for record in records {
            if let MetadataRecord::FenceBroker { id, .. } = &record {
                self.live_brokers_fenced += usize::from(self.running.contains_key(id));
            }
            self.log.records += 1;
            self.log.bytes += record.encode().len() as u64;
            self.metadata
                .apply(&record)
                .unwrap_or_else(|e| panic!("{record:?}: {e}"));
        }
    }

    /// Runs a controller decision, timing it.
    fn decide<T>(&mut self, decision: impl FnOnce(&mut Controller, &Metadata) -> T) -> T {
        let started = Instant::now();
        self.controller.lead_in(self.term);
        let out = decision(&mut self.controller, &self.metadata);
        self.controller_time += started.elapsed();
        out
    }

    fn start_as(&mut self, id: BrokerId, incarnation: Incarnation, rack: Option<String>) {
        let registration = BrokerRegistration {
            id,
            incarnation,
            listener: format!("broker-{}:9092", id.0),
            rack,
            shards: 4,
        };
        let records = controller::register(&self.metadata, registration, Vec::new());
        self.decided += records.len() as u64;
        self.apply(records);
        self.running.insert(id, incarnation);
        self.catching_up.insert(id, self.now_ms + CATCH_UP_MS);
    }

    /// The process of `id` dies: no more heartbeats.
    pub fn kill(&mut self, id: BrokerId) {
        self.running.remove(&id);
        self.catching_up.remove(&id);
    }

    /// The process of `id` stops with a controlled shutdown.
    pub fn shut_down(&mut self, id: BrokerId) {
        let incarnation = self.running[&id];
        let records = self
            .decide(|c, m| c.controlled_shutdown(m, id, incarnation))
            .expect("a live broker shuts down");
        self.decided += records.len() as u64;
        self.kill(id);
        self.apply(records);
    }

    /// The process of `id` starts again (a new incarnation).
    pub fn restart(&mut self, id: BrokerId) {
        let broker = &self.metadata.brokers[&id].registration;
        let (incarnation, rack) = (Incarnation(broker.incarnation.0 + 1), broker.rack.clone());
        self.start_as(id, incarnation, rack);
    }

    /// The quorum's leadership moves to the other node, in a new term:
    /// its controller never led, or led before the last failover (and
    /// remembers heartbeats from then).
    pub fn fail_over(&mut self) {
        std::mem::swap(&mut self.controller, &mut self.standby);
        self.term += 1;
    }

    /// Simulated time passes: heartbeats, ticks, catch-ups.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            self.now_ms += STEP_MS;
            let now = self.now_ms;
            // Each broker heartbeats at its own phase in the second, as
            // brokers started at different moments do.
            let beating: Vec<(BrokerId, Incarnation)> = self
                .running
                .iter()
                .filter(|(b, _)| (now + heartbeat_phase(**b)).is_multiple_of(HEARTBEAT_MS))
                .map(|(b, i)| (*b, *i))
                .collect();
            for (id, incarnation) in beating {
                let records = self
                    .decide(|c, m| c.heartbeat(m, id, incarnation, now))
                    .expect("a running broker's heartbeat");
                self.last_heartbeat_ms.insert(id, now);
                self.decided += records.len() as u64;
                self.apply(records);
            }
            if now.is_multiple_of(TICK_MS) {
                let records = self.decide(|c, m| c.tick(m, now));
                self.decided += records.len() as u64;
                self.apply(records);
            }
            self.catch_up(now);
        }
    }

    /// Brokers caught up by now rejoin the ISRs of the partitions they
    /// replicate, as their leaders ask (AlterPartition).
    fn catch_up(&mut self, now: u64) {
        let due: Vec<BrokerId> = self
            .catching_up
            .iter()
            .filter(|(id, at)| **at <= now && !self.metadata.brokers[id].fenced)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.catching_up.remove(&id);
            for (topic, index, partition) in partitions(&self.metadata) {
                let Some(leader) = partition.leader else {
                    continue;
                };
                if !partition.replicas.contains(&id) || partition.isr.contains(&id) {
                    continue;
                }
                let mut isr = partition.isr.clone();
                isr.push(id);
                let request = AlterIsr {
                    topic,
                    partition: index,
                    leader,
                    leader_epoch: partition.leader_epoch,
                    partition_epoch: partition.partition_epoch,
                    isr,
                };
                let record = self
                    .decide(|c, m| c.alter_isr(m, &request))
                    .expect("a caught-up replica joins");
                self.decided += 1;
                self.apply(vec![record]);
            }
        }
    }

    /// Partitions whose leader is `id`.
    pub fn led_by(&self, id: BrokerId) -> usize {
        partitions(&self.metadata)
            .iter()
            .filter(|(_, _, p)| p.leader == Some(id))
            .count()
    }

    /// Partitions without a leader.
    pub fn leaderless(&self) -> usize {
        partitions(&self.metadata)
            .iter()
            .filter(|(_, _, p)| p.leader.is_none())
            .count()
    }

    /// Partitions not led by their first replica.
    pub fn off_preferred(&self) -> usize {
        partitions(&self.metadata)
            .iter()
            .filter(|(_, _, p)| p.leader != p.replicas.first().copied())
            .count()
    }

    /// One step of simulated time.
    pub fn step(&mut self) {
        self.advance(STEP_MS);
    }

    /// Advances until `done` (checked every step), at most `limit_ms`;
    /// how long it took (None: not within the limit).
    pub fn until(&mut self, limit_ms: u64, done: impl Fn(&Sim) -> bool) -> Option<u64> {
        let started = self.now_ms;
        while !done(self) {
            if self.now_ms - started >= limit_ms {
                return None;
            }
            self.advance(STEP_MS);
        }
        Some(self.now_ms - started)
    }
}

/// When in each second broker `id` heartbeats (a whole step).
fn heartbeat_phase(id: BrokerId) -> u64 {
    (id.0 as u64 * 300) % HEARTBEAT_MS / STEP_MS * STEP_MS
}

fn new_controller() -> Controller {
    Controller::new(SESSION_MS).rebalancing_leaders(Some(REBALANCE_MS))
}

/// Every partition: (topic, index, partition).
pub fn partitions(metadata: &Metadata) -> Vec<(TopicId, PartitionId, Partition)> {
    metadata
        .topics
        .values()
        .flat_map(|t| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(i, p)| (t.id, PartitionId(i as i32), p.clone()))
        })
        .collect()
}

/// How evenly the brokers carry replicas and preferred leaderships.
#[derive(Clone, Copy, Debug)]
pub struct Balance {
    /// The largest deviation of a broker's replica count from the mean,
    /// as a fraction of the mean.
    pub replicas: f64,
    /// The same for preferred leaderships (first replicas).
    pub leaders: f64,
    /// Partitions with two replicas in one rack.
    pub rack_violations: usize,
}

/// The placement's balance.
pub fn balance(metadata: &Metadata) -> Balance {
    let mut replicas: BTreeMap<BrokerId, usize> = BTreeMap::new();
    let mut leaders: BTreeMap<BrokerId, usize> = BTreeMap::new();
    let mut rack_violations = 0;
    for id in metadata.brokers.keys() {
        replicas.insert(*id, 0);
        leaders.insert(*id, 0);
    }
    let rack_of = |b: &BrokerId| metadata.brokers[b].registration.rack.clone();
    for (_, _, p) in partitions(metadata) {
        for b in &p.replicas {
            *replicas.get_mut(b).unwrap() += 1;
        }
        *leaders.get_mut(&p.replicas[0]).unwrap() += 1;
        let racks: BTreeSet<Option<String>> = p.replicas.iter().map(rack_of).collect();
        if racks.len() < p.replicas.len() {
            rack_violations += 1;
        }
    }
    Balance {
        replicas: deviation(&replicas),
        leaders: deviation(&leaders),
        rack_violations,
    }
}

fn deviation(counts: &BTreeMap<BrokerId, usize>) -> f64 {
    let mean = counts.values().sum::<usize>() as f64 / counts.len() as f64;
    counts
        .values()
        .map(|c| (*c as f64 - mean).abs() / mean)
        .fold(0.0, f64::max)
}
