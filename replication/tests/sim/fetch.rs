//! A follower's fetch: truncation to its new leader first, then copies.

use replication::follower::{high_watermark, truncation_step, Truncation};
use replication::{LeaderEpoch, ReplicaId};

use super::replica::Role;
use super::{Sim, FETCH_MAX};

impl Sim {
    /// One follower fetches (truncating first if it has a new leader).
    pub(crate) fn fetch(&mut self, id: ReplicaId) {
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
}
