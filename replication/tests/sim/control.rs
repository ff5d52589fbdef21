//! The controller: leadership it elects and the ISR it commits, and how
//! replicas hear of them.

use std::collections::BTreeSet;

use rand::Rng;
use replication::leader::LeaderState;
use replication::{LeaderEpoch, ReplicaId};

use super::replica::Role;
use super::{Sim, LAG_MAX_MS, REPLICAS};

#[derive(Debug)]
pub(crate) struct Controller {
    pub(crate) leader: Option<ReplicaId>,
    pub(crate) epoch: LeaderEpoch,
    pub(crate) isr: BTreeSet<ReplicaId>,
}

impl Sim {
    /// A replica learns the controller's current leadership.
    pub(crate) fn refresh(&mut self, id: ReplicaId) {
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
    pub(crate) fn elect(&mut self) {
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
    pub(crate) fn fence(&mut self, id: ReplicaId) {
        if self.controller.isr.len() > 1 {
            self.controller.isr.remove(&id);
        }
        if self.controller.leader == Some(id) || self.controller.leader.is_none() {
            self.elect();
        }
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
    pub(crate) fn isr_maintenance(&mut self, id: ReplicaId) {
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
}
