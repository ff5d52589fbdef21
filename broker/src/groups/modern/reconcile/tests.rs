//! Reconciliation one transition at a time, then many members under
//! random target changes against the one rule that matters: no partition
//! is ever held by two members, and everyone reaches the target once it
//! stops changing.

use std::collections::BTreeSet;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

fn set(partitions: &[u32]) -> BTreeSet<u32> {
    partitions.iter().copied().collect()
}

fn at(epoch: i32, state: MemberState, assigned: &[u32], pending: &[u32]) -> Assignment<u32> {
    Assignment {
        epoch,
        previous_epoch: epoch,
        state,
        assigned: set(assigned),
        pending_revocation: set(pending),
    }
}

fn beat<'a>(
    owned: Option<&'a BTreeSet<u32>>,
    epoch: i32,
    target: &'a BTreeSet<u32>,
) -> Heartbeat<'a, u32> {
    Heartbeat {
        owned,
        target_epoch: epoch,
        target,
    }
}

const NOBODY: fn(&u32) -> bool = |_| false;

#[test]
fn a_new_member_gets_its_target_at_the_targets_epoch() {
    let target = set(&[0, 1]);
    let none = set(&[]);
    let next = reconcile(
        &Assignment::joined(),
        &beat(Some(&none), 1, &target),
        NOBODY,
    )
    .unwrap();
    assert_eq!(next, moved_to(0, at(1, MemberState::Stable, &[0, 1], &[])));
    let stable = next;
    let again = reconcile(&stable, &beat(Some(&target), 1, &target), NOBODY);
    assert_eq!(again, Ok(stable), "reconciled: unchanged");
}

#[test]
fn a_partition_is_revoked_before_anything_new_is_assigned() {
    let member = at(1, MemberState::Stable, &[0, 1], &[]);
    let target = set(&[0, 2]);
    let owns_both = set(&[0, 1]);
    let revoking = reconcile(&member, &beat(Some(&owns_both), 2, &target), NOBODY).unwrap();
    // Its epoch stays; it is told to keep 0 only, 2 not given yet.
    assert_eq!(
        revoking,
        at(1, MemberState::UnrevokedPartitions, &[0], &[1])
    );
    // Still owning 1 (or not saying): nothing moves.
    let still = reconcile(&revoking, &beat(Some(&owns_both), 2, &target), NOBODY);
    assert_eq!(still.as_ref(), Ok(&revoking));
    let silent = reconcile(&revoking, &beat(None, 2, &target), NOBODY);
    assert_eq!(silent.as_ref(), Ok(&revoking), "no list counts as owning");
    // 1 given up: the next epoch, with 2.
    let owns_0 = set(&[0]);
    let done = reconcile(&revoking, &beat(Some(&owns_0), 2, &target), NOBODY);
    assert_eq!(
        done,
        Ok(moved_to(1, at(2, MemberState::Stable, &[0, 2], &[])))
    );
}

/// `assignment` reached from epoch `previous`.
fn moved_to(previous: i32, assignment: Assignment<u32>) -> Assignment<u32> {
    Assignment {
        previous_epoch: previous,
        ..assignment
    }
}

#[test]
fn a_member_that_already_let_go_moves_on_at_once() {
    let member = at(1, MemberState::Stable, &[0, 1], &[]);
    let target = set(&[0, 2]);
    let owns_0 = set(&[0]);
    let next = reconcile(&member, &beat(Some(&owns_0), 2, &target), NOBODY);
    assert_eq!(
        next,
        Ok(moved_to(1, at(2, MemberState::Stable, &[0, 2], &[])))
    );
}

#[test]
fn a_partition_another_member_holds_is_given_once_released() {
    let member = at(1, MemberState::Stable, &[0], &[]);
    let target = set(&[0, 1]);
    let owned = set(&[0]);
    let held = |p: &u32| *p == 1;
    let waiting = reconcile(&member, &beat(Some(&owned), 2, &target), held).unwrap();
    let unreleased = at(2, MemberState::UnreleasedPartitions, &[0], &[]);
    assert_eq!(waiting, moved_to(1, unreleased.clone()));
    // Recomputed at each heartbeat (its previous epoch becomes 2, as
    // Kafka's: every step records the epoch it started from).
    let still = reconcile(&waiting, &beat(Some(&owned), 2, &target), held);
    assert_eq!(still, Ok(unreleased));
    let released = reconcile(&waiting, &beat(Some(&owned), 2, &target), NOBODY);
    assert_eq!(released, Ok(at(2, MemberState::Stable, &[0, 1], &[])));
}

#[test]
fn after_a_revocation_the_next_step_starts_from_the_members_own_epoch() {
    // Revoked at epoch 10 while the target moved on to 12 and now takes
    // 0 as well: another revocation, still at 10 (Kafka 4.2+), not 11.
    let member = at(10, MemberState::UnrevokedPartitions, &[0], &[1]);
    let target = set(&[]);
    let owns_0 = set(&[0]);
    let next = reconcile(&member, &beat(Some(&owns_0), 12, &target), NOBODY).unwrap();
    assert_eq!(next, at(10, MemberState::UnrevokedPartitions, &[], &[0]));
    // Nothing more to give up: straight to the target's epoch.
    let none = set(&[]);
    let next = reconcile(&next, &beat(Some(&none), 12, &target), NOBODY).unwrap();
    assert_eq!(next, moved_to(10, at(12, MemberState::Stable, &[], &[])));
}

#[test]
fn an_unknown_state_is_fenced_unless_the_member_owns_nothing() {
    let member = at(2, MemberState::of_id(9), &[0], &[]);
    let target = set(&[0]);
    let owned = set(&[0]);
    let fenced = reconcile(&member, &beat(Some(&owned), 2, &target), NOBODY);
    assert_eq!(fenced, Err(ResponseError::FencedMemberEpoch.code()));
    let none = set(&[]);
    let fresh = reconcile(&member, &beat(Some(&none), 2, &target), NOBODY);
    assert_eq!(fresh, Ok(at(2, MemberState::Stable, &[0], &[])));
    let silent = reconcile(&member, &beat(None, 2, &target), NOBODY);
    assert_eq!(silent, Err(ResponseError::FencedMemberEpoch.code()));
    for id in 0..3 {
        assert_eq!(MemberState::of_id(id).id(), id);
    }
}

/// A member as the coordinator and its client see it.
struct Model {
    coordinator: Assignment<u32>,
    /// What the client owns: what it was last told, once it acts on it.
    client: BTreeSet<u32>,
}

/// Each partition of 0..partitions to one of `members`, at random.
fn random_targets(rng: &mut SmallRng, members: usize, partitions: u32) -> Vec<BTreeSet<u32>> {
    let mut targets = vec![BTreeSet::new(); members];
    for p in 0..partitions {
        targets[rng.gen_range(0..members)].insert(p);
    }
    targets
}

/// Whether a member other than `me` holds `p` (assigned or pending).
fn held_by_others(group: &[Model], me: usize, p: &u32) -> bool {
    group.iter().enumerate().any(|(i, m)| {
        let held = &m.coordinator;
        i != me && (held.assigned.contains(p) || held.pending_revocation.contains(p))
    })
}

/// One step's rules: the epoch never goes down nor past the target's;
/// a member revoking keeps its epoch, below the target's, and gives
/// nothing new; otherwise it is at the target's epoch, inside the target.
fn check_step(
    before: &Assignment<u32>,
    after: &Assignment<u32>,
    target: (i32, &BTreeSet<u32>),
    seed: u64,
) {
    let (target_epoch, target) = target;
    assert!(
        after.epoch >= before.epoch && after.epoch <= target_epoch,
        "SEED={seed}: epoch {} -> {}",
        before.epoch,
        after.epoch
    );
    assert!(
        after.assigned.is_disjoint(&after.pending_revocation),
        "SEED={seed}"
    );
    let revoking = after.state == MemberState::UnrevokedPartitions;
    assert_eq!(
        revoking,
        !after.pending_revocation.is_empty(),
        "SEED={seed}: {after:?}"
    );
    if revoking {
        assert!(
            after.epoch < target_epoch,
            "SEED={seed}: revoking at the target's epoch"
        );
        let had: BTreeSet<u32> = before
            .assigned
            .union(&before.pending_revocation)
            .copied()
            .collect();
        assert!(
            after.assigned.is_subset(&had),
            "SEED={seed}: given while revoking"
        );
    } else {
        assert_eq!(after.epoch, target_epoch, "SEED={seed}: {after:?}");
        assert!(
            after.assigned.is_subset(target),
            "SEED={seed}: outside the target"
        );
        let waiting = after.state == MemberState::UnreleasedPartitions;
        assert_eq!(waiting, after.assigned != *target, "SEED={seed}: {after:?}");
    }
}

/// No partition in two members' assigned-or-pending sets, nor in two
/// clients' owned sets; a client owns only what the coordinator counts
/// as its.
fn check(group: &[Model], seed: u64) {
    let mut held = BTreeSet::new();
    let mut owned = BTreeSet::new();
    for m in group {
        let counted = &m.coordinator;
        for p in counted.assigned.iter().chain(&counted.pending_revocation) {
            assert!(held.insert(*p), "SEED={seed}: {p} held by two members");
        }
        for p in &m.client {
            assert!(owned.insert(*p), "SEED={seed}: {p} owned by two clients");
            assert!(
                counted.assigned.contains(p) || counted.pending_revocation.contains(p),
                "SEED={seed}: a client owns {p}, not counted as its"
            );
        }
    }
}

#[test]
fn random_target_changes_never_give_a_partition_to_two_members() {
    let seed = crate::groups::modern::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..200 {
        let (members, partitions) = (rng.gen_range(1..6), rng.gen_range(1..12));
        let mut group: Vec<Model> = (0..members)
            .map(|_| Model {
                coordinator: Assignment::joined(),
                client: BTreeSet::new(),
            })
            .collect();
        let mut epoch = 1;
        let mut targets = random_targets(&mut rng, members, partitions);
        // A while of changing targets and slow, quiet clients, then a
        // calm of round-robin passes in which every client acts on what
        // it is told at once.
        for round in 0..200 + 4 * members {
            let calm = round >= 200;
            if !calm && rng.gen_bool(0.05) {
                epoch += 1;
                targets = random_targets(&mut rng, members, partitions);
            }
            let me = match calm {
                true => round % members,
                false => rng.gen_range(0..members),
            };
            let owned = group[me].client.clone();
            let said = (calm || rng.gen_bool(0.8)).then_some(&owned);
            let heartbeat = beat(said, epoch, &targets[me]);
            let next = reconcile(&group[me].coordinator, &heartbeat, |p| {
                held_by_others(&group, me, p)
            })
            .unwrap();
            check_step(&group[me].coordinator, &next, (epoch, &targets[me]), seed);
            group[me].coordinator = next;
            // The client acts on the answer now or (before the calm)
            // later: it gives up what it lost and takes what it got.
            if calm || rng.gen_bool(0.7) {
                group[me].client = group[me].coordinator.assigned.clone();
            }
            check(&group, seed);
        }
        for (m, target) in group.iter().zip(&targets) {
            assert!(
                m.coordinator.is_reconciled_to(epoch),
                "SEED={seed}: not reconciled after the calm: {:?}",
                m.coordinator
            );
            assert_eq!(&m.coordinator.assigned, target, "SEED={seed}");
        }
    }
}
