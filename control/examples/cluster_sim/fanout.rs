//! How fast a metadata change reaches every broker: the metadata quorum
//! itself (raft-rs, `MetadataNode`) in simulated time, a few voters and
//! every other broker an observer (a Raft learner), over a network that
//! delays each message 0.2-2 ms and disks that take 1-3 ms to make a
//! ready durable. The observers join one at a time (JoinQuorum's change),
//! then the leader proposes records at random moments; for each, the time
//! from its proposal until every node applied it. Then the leader is
//! lost, and the time until a record proposed by the next leader is
//! applied everywhere is measured from the loss.
//!
//! What it leaves out: the service's thread and the brokers' own copy of
//! the metadata on their other shards (a local channel, well under a
//! millisecond), CPU time (every node is as fast as the simulation).

use std::collections::BTreeMap;

use ::raft::eraftpb::{Message, MessageType};
use control::raft::node::{MemberChange, MetadataNode, NodeConfig, NodeId};
use control::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A Raft tick (the broker's METADATA_TICK), µs.
const TICK_US: u64 = 10_000;
/// The simulation's step, µs.
const STEP_US: u64 = 100;

/// What the fan-out measured, in simulated ms.
#[derive(Debug, Clone)]
pub struct FanoutReport {
    /// Voters and observers.
    pub voters: usize,
    /// Observers.
    pub observers: usize,
    /// Time for all observers to join, one after another.
    pub join_ms: f64,
    /// Proposal to applied on every node: p50, p99, max over the records.
    pub applied_everywhere_ms: (f64, f64, f64),
    /// Records measured.
    pub records: usize,
    /// From the leader's loss to a record of the next leader applied on
    /// every node still running.
    pub failover_applied_everywhere_ms: f64,
}

struct Fanout {
    rng: SmallRng,
    now_us: u64,
    nodes: BTreeMap<NodeId, MetadataNode>,
    /// (deliver at, message).
    in_flight: Vec<(u64, Message)>,
    /// Readies whose persistence is under way: (done at, node).
    persisting: Vec<(u64, NodeId)>,
}

impl Fanout {
    fn new(voters: u64, observers: u64, seed: u64) -> Fanout {
        let ids: Vec<NodeId> = (1..=voters).collect();
        let mut nodes = BTreeMap::new();
        for id in 1..=voters + observers {
            // Staggered, fixed election timeouts keep runs reproducible.
            let min = 30 + 6 * (id as usize % 8);
            let config = NodeConfig {
                election_ticks: 30,
                election_timeout_ticks: (min, min + 1),
                ..NodeConfig::new(id, ids.clone())
            };
            let node = MetadataNode::start(&config, Default::default()).expect("a node");
            nodes.insert(id, node);
        }
        Fanout {
            rng: SmallRng::seed_from_u64(seed),
            now_us: 0,
            nodes,
            in_flight: Vec::new(),
            persisting: Vec::new(),
        }
    }

    fn send(&mut self, messages: Vec<Message>) {
        for message in messages {
            let delay = self.rng.gen_range(200..2_000);
            self.in_flight.push((self.now_us + delay, message));
        }
    }

    fn busy(&self, id: NodeId) -> bool {
        self.persisting.iter().any(|(_, n)| *n == id)
    }

    /// One step: ticks, deliveries, finished persistence, new readies. A
    /// node persisting a ready takes nothing else until it is done (the
    /// service persists before it looks at its next event), so its ticks
    /// and messages wait.
    fn step(&mut self) {
        self.now_us += STEP_US;
        let now = self.now_us;
        if now.is_multiple_of(TICK_US) {
            let idle: Vec<NodeId> = self
                .nodes
                .keys()
                .copied()
                .filter(|id| !self.busy(*id))
                .collect();
            for id in idle {
                self.nodes.get_mut(&id).expect("a node").tick();
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|(at, m)| *at <= now && !self.busy(m.to));
        self.in_flight = later;
        for (_, message) in due {
            let snapshot = message.get_msg_type() == MessageType::MsgSnapshot;
            let (from, to) = (message.from, message.to);
            let delivered = self
                .nodes
                .get_mut(&to)
                .is_some_and(|n| n.step(message).is_ok());
            if snapshot {
                if let Some(sender) = self.nodes.get_mut(&from) {
                    sender.report_snapshot(to, delivered);
                }
            }
        }
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.persisting)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.persisting = waiting;
        for (_, id) in done {
            let Some(node) = self.nodes.get_mut(&id) else {
                continue;
            };
            let persisted = node.persisted();
            let _ = node.take_applied();
            self.send(persisted.send);
        }
        let busy: Vec<NodeId> = self.persisting.iter().map(|(_, id)| *id).collect();
        let ids: Vec<NodeId> = self
            .nodes
            .keys()
            .copied()
            .filter(|id| !busy.contains(id))
            .collect();
        for id in ids {
            let node = self.nodes.get_mut(&id).expect("a node");
            let Some(output) = node.ready() else { continue };
            let after = output.after_persist;
            self.send(output.send);
            // Persisting takes 1-3 ms; what waits for it leaves after.
            let done = self.now_us + self.rng.gen_range(1_000..3_000);
            self.persisting.push((done, id));
            for message in after {
                self.in_flight
                    .push((done + self.rng.gen_range(200..2_000), message));
            }
        }
    }

    /// Steps until the leader is not persisting (it proposes then).
    fn leader_idle(&mut self) -> Option<NodeId> {
        self.until(10_000, |s| s.leader().is_some_and(|l| !s.busy(l)))?;
        self.leader()
    }

    fn leader(&self) -> Option<NodeId> {
        self.nodes
            .iter()
            .find(|(_, n)| n.is_leader())
            .map(|(id, _)| *id)
    }

    /// Steps until `done` holds (at most `limit_ms` of simulated time);
    /// the time it took, ms.
    fn until(&mut self, limit_ms: u64, done: impl Fn(&Fanout) -> bool) -> Option<f64> {
        let start = self.now_us;
        while !done(self) {
            if self.now_us - start > limit_ms * 1_000 {
                return None;
            }
            self.step();
        }
        Some((self.now_us - start) as f64 / 1_000.0)
    }

    /// Proposes a record at the leader; its index.
    fn propose(&mut self, broker: i32) -> Option<u64> {
        let leader = self.leader_idle()?;
        let node = self.nodes.get_mut(&leader).expect("the leader");
        let record = MetadataRecord::RegisterBroker(BrokerRegistration {
            id: BrokerId(broker),
            incarnation: Incarnation(1),
            listener: format!("10.0.0.1:{}", 9000 + broker),
            rack: None,
            shards: 1,
        });
        node.propose(&record).ok()?;
        Some(node.last_index())
    }

    fn applied_everywhere(&self, index: u64) -> bool {
        self.nodes.values().all(|n| n.applied_index() >= index)
    }
}

/// Runs the fan-out with `voters` voters and `observers` observers.
pub fn run(voters: u64, observers: u64, records: usize, seed: u64) -> FanoutReport {
    let mut sim = Fanout::new(voters, observers, seed);
    sim.until(10_000, |s| s.leader().is_some())
        .expect("a leader");
    let joining = sim.now_us;
    for id in voters + 1..=voters + observers {
        loop {
            let leader = sim.leader_idle().expect("a leader while joining");
            let node = sim.nodes.get_mut(&leader).expect("the leader");
            if node.members().learners.contains(&id) {
                break;
            }
            let _ = node.propose_member_change(MemberChange::AddLearner(id));
            let settled = sim.until(1_000, |s| {
                s.leader()
                    .is_some_and(|l| s.nodes[&l].members().learners.contains(&id))
            });
            assert!(settled.is_some(), "observer {id} did not join");
        }
    }
    let join_ms = (sim.now_us - joining) as f64 / 1_000.0;
    let mut times = Vec::new();
    for k in 0..records {
        let pause = sim.rng.gen_range(0..200);
        sim.until(pause, |_| false);
        let index = sim.propose(k as i32 + 1).expect("a leader to propose");
        let took = sim.until(10_000, |s| s.applied_everywhere(index));
        times.push(took.expect("applied everywhere within 10 s"));
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let leader = sim.leader().expect("a leader");
    sim.nodes.remove(&leader);
    let lost = sim.now_us;
    sim.until(30_000, |s| s.leader().is_some())
        .expect("a new leader");
    let index = sim.propose(10_000).expect("the new leader proposes");
    sim.until(30_000, |s| s.applied_everywhere(index))
        .expect("applied everywhere after the failover");
    FanoutReport {
        voters: voters as usize,
        observers: observers as usize,
        join_ms,
        applied_everywhere_ms: (at(0.5), at(0.99), at(1.0)),
        records,
        failover_applied_everywhere_ms: (sim.now_us - lost) as f64 / 1_000.0,
    }
}

impl FanoutReport {
    /// Prints the figures, one per line.
    pub fn print(&self) {
        let (p50, p99, max) = self.applied_everywhere_ms;
        println!(
            "{:<58} {} voters + {} observers",
            "metadata quorum (raft-rs, simulated network and disks)", self.voters, self.observers
        );
        println!(
            "{:<58} {:.0} ms",
            "all observers joined, one at a time", self.join_ms
        );
        println!(
            "{:<58} p50 {p50:.1} p99 {p99:.1} max {max:.1} ms ({} records)",
            "a change applied on every broker, from its proposal", self.records
        );
        println!(
            "{:<58} {:.0} ms",
            "leader lost: a next change applied everywhere, from the loss",
            self.failover_applied_everywhere_ms
        );
    }
}
