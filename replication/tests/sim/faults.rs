//! Faults: crashes, restarts, a leader paused past its session.

use rand::Rng;
use replication::LeaderEpoch;

use super::replica::{rebuilt, Role};
use super::{Sim, REPLICAS};

impl Sim {
    pub(crate) fn fault(&mut self) {
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

    pub(crate) fn resume_paused(&mut self) {
        for i in 0..self.replicas.len() {
            if self.replicas[i].paused && self.rng.gen_bool(0.3) {
                self.replicas[i].paused = false;
            }
        }
    }
}
