//! One member's reconciliation (Kafka's CurrentAssignmentBuilder): from
//! the partitions it has to the target the assignor computed for it, one
//! heartbeat at a time, never owning a partition another member still
//! holds. A partition to give up is revoked first: the member keeps its
//! epoch and is told its smaller assignment until a heartbeat shows it
//! no longer owns what it must give up (UNREVOKED_PARTITIONS). Then it
//! moves to the target's epoch and gets the new partitions, except those
//! another member has not released yet (UNRELEASED_PARTITIONS, given as
//! they are released). Pure: the group supplies who owns what.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use crate::kafka::Code;

/// Where a member's reconciliation stands (stored as Kafka's int8 ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It has its assignment for its epoch.
    Stable,
    /// It must give up `pending_revocation` before it moves on.
    UnrevokedPartitions,
    /// It waits for partitions other members still own.
    UnreleasedPartitions,
    /// A state this build does not know (a newer one's record).
    Unknown(i8),
}

impl MemberState {
    /// The id Kafka stores.
    pub fn id(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown(id) => id,
        }
    }

    /// The state of a stored id.
    pub fn of_id(id: i8) -> MemberState {
        match id {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            other => MemberState::Unknown(other),
        }
    }
}

/// A member's assignment as the coordinator tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment<P> {
    /// The target epoch it has reached.
    pub epoch: i32,
    /// Its epoch before the last step (a heartbeat whose answer was lost
    /// comes back with it and is answered, not fenced).
    pub previous_epoch: i32,
    /// Its state.
    pub state: MemberState,
    /// The partitions it is given (and told of in heartbeats).
    pub assigned: BTreeSet<P>,
    /// Partitions it must give up before it moves on.
    pub pending_revocation: BTreeSet<P>,
}

impl<P> Assignment<P> {
    /// A member that just joined: epoch 0, nothing assigned.
    pub fn joined() -> Assignment<P> {
        Assignment {
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: BTreeSet::new(),
            pending_revocation: BTreeSet::new(),
        }
    }

    /// Whether it has its target of `epoch` (nothing to do).
    pub fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.epoch == epoch
    }
}

/// What the member reports in its heartbeat and the group knows.
pub struct Heartbeat<'a, P> {
    /// The partitions the member says it owns (None: not said in this
    /// heartbeat, taken as still owning everything).
    pub owned: Option<&'a BTreeSet<P>>,
    /// The epoch of the group's target assignment.
    pub target_epoch: i32,
    /// The member's partitions in that target.
    pub target: &'a BTreeSet<P>,
}

/// The member's next assignment. `owned_by_another(p)`: another member
/// has `p` assigned or pending revocation. FENCED_MEMBER_EPOCH for a
/// state this build cannot reconcile from while the member owns
/// partitions (it must rejoin).
pub fn reconcile<P: Ord + Clone>(
    current: &Assignment<P>,
    heartbeat: &Heartbeat<'_, P>,
    owned_by_another: impl Fn(&P) -> bool,
) -> Result<Assignment<P>, Code> {
    if current.is_reconciled_to(heartbeat.target_epoch) {
        return Ok(current.clone());
    }
    match current.state {
        MemberState::Stable | MemberState::UnreleasedPartitions => Ok(next(
            current.epoch,
            &current.assigned,
            heartbeat,
            owned_by_another,
        )),
        MemberState::UnrevokedPartitions => {
            if owns_any(heartbeat.owned, &current.pending_revocation) {
                return Ok(current.clone());
            }
            // All given up: the next step from its own epoch (Kafka 4.2+,
            // KAFKA-19974: no bump of its own, so a partition has one
            // owner at any epoch).
            Ok(next(
                current.epoch,
                &current.assigned,
                heartbeat,
                owned_by_another,
            ))
        }
        // A state this build does not know: the member starts over from
        // nothing if it owns nothing (what it had is counted as no one's
        // else, so the same target follows), else it must rejoin.
        MemberState::Unknown(_) => match heartbeat.owned {
            Some(owned) if owned.is_empty() => Ok(next(
                current.epoch,
                &BTreeSet::new(),
                heartbeat,
                owned_by_another,
            )),
            _ => Err(ResponseError::FencedMemberEpoch.code()),
        },
    }
}

/// Whether the member still owns any of `partitions` (not saying counts
/// as owning).
fn owns_any<P: Ord>(owned: Option<&BTreeSet<P>>, partitions: &BTreeSet<P>) -> bool {
    match owned {
        None => !partitions.is_empty(),
        Some(owned) => partitions.iter().any(|p| owned.contains(p)),
    }
}

/// The next step from `assigned` at `epoch` towards the target: revoke
/// what is no longer the member's first (keeping its epoch), else take
/// the target's epoch with every new partition no one else holds.
fn next<P: Ord + Clone>(
    epoch: i32,
    assigned: &BTreeSet<P>,
    heartbeat: &Heartbeat<'_, P>,
    owned_by_another: impl Fn(&P) -> bool,
) -> Assignment<P> {
    let target = heartbeat.target;
    let kept: BTreeSet<P> = assigned.intersection(target).cloned().collect();
    let to_revoke: BTreeSet<P> = assigned.difference(target).cloned().collect();
    let (unreleased, to_add): (BTreeSet<P>, BTreeSet<P>) = target
        .difference(assigned)
        .cloned()
        .partition(|p| owned_by_another(p));
    if !to_revoke.is_empty() && owns_any(heartbeat.owned, &to_revoke) {
        return Assignment {
            epoch,
            previous_epoch: epoch,
            state: MemberState::UnrevokedPartitions,
            assigned: kept,
            pending_revocation: to_revoke,
        };
    }
    let state = if unreleased.is_empty() {
        MemberState::Stable
    } else {
        MemberState::UnreleasedPartitions
    };
    Assignment {
        epoch: heartbeat.target_epoch,
        previous_epoch: epoch,
        state,
        assigned: kept.into_iter().chain(to_add).collect(),
        pending_revocation: BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests;
