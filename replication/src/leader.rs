//! The leader's view of one partition's replicas: each follower's log end
//! offset (learned from its fetches), the in-sync replicas, the high
//! watermark, when an acks=all produce may complete, and which ISR change
//! to ask the controller for.
//!
//! The ISR here changes only when the controller says so ([`LeaderState::isr_committed`]);
//! the leader only proposes. That is what keeps a deposed leader that has
//! not heard of its successor from committing anything: its proposals
//! carry a stale epoch and are refused, and its ISR still names replicas
//! that no longer fetch from it.

use std::collections::{BTreeMap, BTreeSet};

use crate::{LeaderEpoch, Offset, ReplicaId};

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Its log end offset (its last fetch offset); None until it fetches.
    pub log_end: Option<Offset>,
    /// The last time it had everything the leader had at its previous fetch.
    pub last_caught_up_ms: u64,
    /// When it last fetched.
    pub last_fetch_ms: u64,
    /// The leader's log end at that fetch.
    leader_end_at_last_fetch: Offset,
}

/// Why an acks=all produce cannot be taken, or failed after its append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckError {
    /// Fewer in-sync replicas than min.insync.replicas: nothing appended.
    NotEnoughReplicas,
    /// The ISR shrank below min.insync.replicas after the append.
    NotEnoughReplicasAfterAppend,
}

/// Where an acks=all produce stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckState {
    /// The high watermark passed it: answer success.
    Done,
    /// Still waiting for the followers.
    Waiting,
    /// Answer with this error.
    Failed(AckError),
}

/// The leader's state for one partition.
#[derive(Debug, Clone)]
pub struct LeaderState {
    me: ReplicaId,
    epoch: LeaderEpoch,
    /// The leader's log end when it took over: a follower rejoins the ISR
    /// only once it holds everything before it.
    epoch_start: Offset,
    isr: BTreeSet<ReplicaId>,
    /// The members of every ISR asked of the controller since the last
    /// one this leader saw committed, while the outcome is unknown. Until
    /// it is known, the high watermark counts them too (Kafka's "maximal
    /// ISR"): a follower being added may already be in the controller's
    /// ISR, and so electable, before this leader hears of the commit (an
    /// answer lost in a controller's failover says nothing of whether it
    /// committed); the high watermark must not pass what it holds.
    pending_isr: Option<BTreeSet<ReplicaId>>,
    followers: BTreeMap<ReplicaId, Progress>,
    high_watermark: Offset,
    lag_max_ms: u64,
}

impl LeaderState {
    /// Leadership of `epoch` taken now with the log ending at `log_end`,
    /// the high watermark known so far, the controller's ISR and every
    /// replica. Followers get `lag_max_ms` from now to fetch.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        me: ReplicaId,
        epoch: LeaderEpoch,
        replicas: &[ReplicaId],
        isr: &BTreeSet<ReplicaId>,
        log_end: Offset,
        high_watermark: Offset,
        now_ms: u64,
        lag_max_ms: u64,
    ) -> LeaderState {
        let followers = replicas
            .iter()
            .filter(|r| **r != me)
            .map(|r| {
                (
                    *r,
                    Progress {
                        log_end: None,
                        last_caught_up_ms: now_ms,
                        last_fetch_ms: now_ms,
                        leader_end_at_last_fetch: log_end,
                    },
                )
            })
            .collect();
        LeaderState {
            me,
            epoch,
            epoch_start: log_end,
            isr: isr.clone(),
            pending_isr: None,
            followers,
            high_watermark: high_watermark.min(log_end),
            lag_max_ms,
        }
    }

    /// The leader epoch.
    pub fn epoch(&self) -> LeaderEpoch {
        self.epoch
    }

    /// The in-sync replicas, as the controller last committed them.
    pub fn isr(&self) -> &BTreeSet<ReplicaId> {
        &self.isr
    }

    /// The high watermark: consumers read below it.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// A follower's progress.
    pub fn progress(&self, follower: ReplicaId) -> Option<&Progress> {
        self.followers.get(&follower)
    }

    /// A follower fetched from `fetch_offset` (its log end) while the
    /// leader's log ended at `leader_end`. Returns the high watermark to
    /// send back (after moving it, if this fetch lets it move).
    pub fn on_fetch(
        &mut self,
        follower: ReplicaId,
        fetch_offset: Offset,
        leader_end: Offset,
        now_ms: u64,
    ) -> Offset {
        self.record_fetch(follower, fetch_offset, leader_end, now_ms);
        self.update_high_watermark(leader_end)
    }

    /// [`LeaderState::on_fetch`] without moving the high watermark: for a
    /// leader whose own share of it is not its log end (it counts only
    /// what it has fdatasync'd; it then calls
    /// [`LeaderState::update_high_watermark`] with that).
    pub fn record_fetch(
        &mut self,
        follower: ReplicaId,
        fetch_offset: Offset,
        leader_end: Offset,
        now_ms: u64,
    ) {
        if let Some(p) = self.followers.get_mut(&follower) {
            if fetch_offset >= leader_end {
                p.last_caught_up_ms = now_ms;
            } else if fetch_offset >= p.leader_end_at_last_fetch {
                p.last_caught_up_ms = p.last_caught_up_ms.max(p.last_fetch_ms);
            }
            p.log_end = Some(fetch_offset);
            p.last_fetch_ms = now_ms;
            p.leader_end_at_last_fetch = leader_end;
        }
    }

    /// Moves the high watermark to the smallest log end over the ISR (the
    /// leader's own included), never back. A member that has not fetched
    /// since this leadership began holds it where it is.
    pub fn update_high_watermark(&mut self, leader_end: Offset) -> Offset {
        let mut low = leader_end;
        let pending = self.pending_isr.iter().flatten();
        for member in self.isr.iter().chain(pending) {
            if *member == self.me {
                continue;
            }
            match self.followers.get(member).and_then(|p| p.log_end) {
                Some(end) => low = low.min(end),
                None => return self.high_watermark,
            }
        }
        self.high_watermark = self.high_watermark.max(low);
        self.high_watermark
    }

    /// Whether an acks=all produce may be appended now.
    pub fn check_acks_all(&self, min_insync: usize) -> Result<(), AckError> {
        if self.isr.len() < min_insync {
            Err(AckError::NotEnoughReplicas)
        } else {
            Ok(())
        }
    }

    /// Where an acks=all produce whose last record is at `last_offset`
    /// stands.
    /// (Checked when the answer is due, as Kafka does: a produce whose
    /// records reached the high watermark while the ISR had shrunk below
    /// min.insync.replicas is not promised to the client.)
    pub fn ack_state(&self, last_offset: Offset, min_insync: usize) -> AckState {
        if self.isr.len() < min_insync {
            AckState::Failed(AckError::NotEnoughReplicasAfterAppend)
        } else if self.high_watermark > last_offset {
            AckState::Done
        } else {
            AckState::Waiting
        }
    }

    /// The ISR to ask the controller for, if it should change: members
    /// that have not caught up for longer than replica.lag.time.max.ms
    /// leave; followers that hold everything up to the high watermark and
    /// this epoch's start rejoin.
    pub fn proposed_isr(&self, now_ms: u64) -> Option<BTreeSet<ReplicaId>> {
        let mut isr = self.isr.clone();
        for (id, p) in &self.followers {
            let lagging = now_ms.saturating_sub(p.last_caught_up_ms) > self.lag_max_ms;
            let caught_up = p
                .log_end
                .is_some_and(|end| end >= self.high_watermark && end >= self.epoch_start);
            if isr.contains(id) && lagging {
                isr.remove(id);
            } else if !isr.contains(id) && caught_up && !lagging {
                isr.insert(*id);
            }
        }
        isr.insert(self.me);
        (isr != self.isr).then_some(isr)
    }

    /// The leader asked the controller for `isr`: until the outcome is
    /// known, the high watermark waits for its members as well, and for
    /// those of earlier requests whose outcome is still unknown.
    pub fn isr_requested(&mut self, isr: BTreeSet<ReplicaId>) {
        match &mut self.pending_isr {
            Some(pending) => pending.extend(isr),
            None => self.pending_isr = Some(isr),
        }
    }

    /// The ISRs asked for whose outcome is unknown (their members'
    /// union), if any: to ask for again, so the controller's answer
    /// settles it.
    pub fn pending_isr(&self) -> Option<&BTreeSet<ReplicaId>> {
        self.pending_isr.as_ref()
    }

    /// The controller refused the ISR change and changed nothing (the
    /// request named the partition's current epoch): the high watermark
    /// follows the committed ISR alone again. Not for an answer that was
    /// lost, nor for a refusal because the partition had changed since:
    /// those leave the outcome unknown until the metadata tells.
    pub fn isr_request_refused(&mut self) {
        self.pending_isr = None;
    }

    /// The partition's replicas changed while this leadership goes on (a
    /// reassignment began or finished): replicas joining are followed from
    /// now, as at the start of a leadership; those leaving are forgotten,
    /// and so are they in the ISRs asked for (a reassignment finishes with
    /// a committed ISR within its target, at a new partition epoch that
    /// refuses any request still out). Whether they changed.
    pub fn set_replicas(
        &mut self,
        replicas: &[ReplicaId],
        leader_end: Offset,
        now_ms: u64,
    ) -> bool {
        let me = self.me;
        let before = self.followers.len();
        self.followers.retain(|id, _| replicas.contains(id));
        let mut changed = self.followers.len() != before;
        for id in replicas.iter().filter(|r| **r != me) {
            if !self.followers.contains_key(id) {
                changed = true;
                self.followers.insert(
                    *id,
                    Progress {
                        log_end: None,
                        last_caught_up_ms: now_ms,
                        last_fetch_ms: now_ms,
                        leader_end_at_last_fetch: leader_end,
                    },
                );
            }
        }
        if let Some(pending) = &mut self.pending_isr {
            pending.retain(|id| *id == me || replicas.contains(id));
        }
        changed
    }

    /// The controller committed a new ISR for this epoch.
    pub fn isr_committed(&mut self, isr: BTreeSet<ReplicaId>, leader_end: Offset) {
        self.isr = isr;
        self.pending_isr = None;
        self.update_high_watermark(leader_end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[ReplicaId]) -> BTreeSet<ReplicaId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn replicas_joining_are_followed_and_those_leaving_forgotten_in_the_same_epoch() {
        let mut leader = LeaderState::new(
            1,
            LeaderEpoch(3),
            &[1, 2, 3],
            &set(&[1, 2, 3]),
            Offset(10),
            Offset(10),
            0,
            1_000,
        );
        // A move to 1, 2, 4: its replicas meanwhile are the union.
        assert!(leader.set_replicas(&[1, 2, 4, 3], Offset(10), 100));
        assert!(
            !leader.set_replicas(&[1, 2, 4, 3], Offset(10), 100),
            "nothing new"
        );
        assert!(leader.progress(4).is_some(), "the new replica is followed");
        leader.record_fetch(2, Offset(10), Offset(10), 200);
        leader.record_fetch(3, Offset(10), Offset(10), 200);
        leader.record_fetch(4, Offset(10), Offset(10), 200);
        assert_eq!(
            leader.proposed_isr(200),
            Some(set(&[1, 2, 3, 4])),
            "caught up: it joins"
        );
        leader.isr_requested(set(&[1, 2, 3, 4]));
        // Finished: 3 leaves the replicas and the committed ISR.
        leader.set_replicas(&[1, 2, 4], Offset(12), 300);
        assert!(
            leader.progress(3).is_none(),
            "the replica left is forgotten"
        );
        assert_eq!(leader.pending_isr(), Some(&set(&[1, 2, 4])));
        leader.isr_committed(set(&[1, 2, 4]), Offset(12));
        assert_eq!(leader.epoch(), LeaderEpoch(3), "the same leadership");
        leader.record_fetch(2, Offset(12), Offset(12), 400);
        leader.record_fetch(4, Offset(12), Offset(12), 400);
        assert_eq!(
            leader.update_high_watermark(Offset(12)),
            Offset(12),
            "not held by 3"
        );
    }

    #[test]
    fn the_high_watermark_is_the_lowest_isr_log_end_and_acks_wait_for_it() {
        let mut leader = LeaderState::new(
            1,
            LeaderEpoch(5),
            &[1, 2, 3],
            &set(&[1, 2, 3]),
            Offset(10),
            Offset(8),
            0,
            1000,
        );
        assert_eq!(leader.high_watermark(), Offset(8));
        // Until every ISR member fetched in this epoch, it stays.
        assert_eq!(leader.on_fetch(2, Offset(12), Offset(12), 10), Offset(8));
        assert_eq!(leader.ack_state(Offset(11), 2), AckState::Waiting);
        assert_eq!(leader.on_fetch(3, Offset(11), Offset(12), 10), Offset(11));
        assert_eq!(leader.ack_state(Offset(10), 2), AckState::Done);
        assert_eq!(leader.ack_state(Offset(11), 2), AckState::Waiting);
        // It never moves back.
        leader.isr_committed(set(&[1, 2, 3]), Offset(12));
        assert_eq!(leader.on_fetch(3, Offset(9), Offset(12), 20), Offset(11));
    }

    #[test]
    fn while_an_expansion_is_in_flight_the_high_watermark_waits_for_the_newcomer() {
        let mut leader = LeaderState::new(
            1,
            LeaderEpoch(1),
            &[1, 2, 3],
            &set(&[1, 2]),
            Offset(10),
            Offset(10),
            0,
            1000,
        );
        leader.on_fetch(2, Offset(10), Offset(10), 1);
        leader.on_fetch(3, Offset(10), Offset(10), 1);
        let expanded = leader.proposed_isr(2).expect("3 caught up");
        leader.isr_requested(expanded.clone());
        // New records; 2 has them, 3 (maybe already in the controller's
        // ISR, so electable) has not: the high watermark stays.
        assert_eq!(leader.on_fetch(2, Offset(15), Offset(15), 3), Offset(10));
        assert_eq!(leader.on_fetch(3, Offset(12), Offset(15), 4), Offset(12));
        // A later request (a shrink, say) while the expansion's outcome is
        // unknown (its answer lost): 3 still counts.
        leader.isr_requested(set(&[1, 2]));
        assert_eq!(leader.pending_isr(), Some(&set(&[1, 2, 3])));
        assert_eq!(leader.update_high_watermark(Offset(15)), Offset(12));
        // Refused with nothing changed: back to the committed ISR.
        leader.isr_request_refused();
        assert_eq!(leader.pending_isr(), None);
        assert_eq!(leader.update_high_watermark(Offset(15)), Offset(15));
        leader.isr_requested(expanded.clone());
        leader.isr_committed(expanded, Offset(15));
        assert_eq!(leader.isr(), &set(&[1, 2, 3]));
    }

    #[test]
    fn lagging_followers_leave_the_isr_and_caught_up_ones_return_through_the_controller() {
        let mut leader = LeaderState::new(
            1,
            LeaderEpoch(1),
            &[1, 2, 3],
            &set(&[1, 2, 3]),
            Offset(0),
            Offset(0),
            0,
            1000,
        );
        leader.on_fetch(2, Offset(0), Offset(0), 100);
        leader.on_fetch(3, Offset(0), Offset(0), 100);
        // 2 keeps up; 3 stops fetching.
        for t in (200..=1500).step_by(100) {
            leader.on_fetch(2, Offset(t as i64 / 100), Offset(t as i64 / 100), t);
        }
        let proposed = leader.proposed_isr(1500).expect("3 lags");
        assert_eq!(proposed, set(&[1, 2]));
        // Not applied until the controller commits it.
        assert_eq!(leader.isr(), &set(&[1, 2, 3]));
        leader.isr_committed(proposed, Offset(15));
        assert_eq!(leader.check_acks_all(2), Ok(()));
        assert_eq!(leader.check_acks_all(3), Err(AckError::NotEnoughReplicas));
        // 3 catches up to the high watermark: proposed back.
        leader.on_fetch(3, Offset(15), Offset(15), 1600);
        assert_eq!(leader.proposed_isr(1600), Some(set(&[1, 2, 3])));
        // An ISR below min.insync fails a waiting produce.
        leader.isr_committed(set(&[1]), Offset(16));
        assert_eq!(
            leader.ack_state(Offset(20), 2),
            AckState::Failed(AckError::NotEnoughReplicasAfterAppend)
        );
    }
}
