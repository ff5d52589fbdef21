//! The server-side assignors of KIP-848 (Kafka's `group.consumer.assignors`):
//! from the members' subscriptions and the topics' partition counts to
//! each member's target. Pure, and deterministic for one input whatever
//! the members' order (targets are stored, as Kafka's; a deterministic
//! answer keeps tests and failovers unsurprising).
//!
//! - [`uniform`] (the default): for one subscription, sizes within one;
//!   for mixed ones, until no single move improves the balance; a member
//!   keeps what it had as far as balance allows (a member joining or
//!   leaving moves only what it must); rack-aware where racks are known
//!   ([`uniform_with_racks`]: this project's addition, Kafka 4.1-4.3's
//!   uniform assignor does not use racks).
//! - [`range`] (not sticky, as Kafka's): per topic, contiguous ranges
//!   over the members subscribed to it, in member order, the first ones
//!   one partition more; when every member subscribes to the same topics
//!   of equal partition counts, each gets the same partition numbers of
//!   each (co-partitioning).

use std::collections::{BTreeMap, BTreeSet};

mod share;
pub use share::simple;

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct MemberSpec<T> {
    /// Its member id.
    pub id: String,
    /// Its static instance id, if any.
    pub instance_id: Option<String>,
    /// Its rack (`client.rack`), if it said.
    pub rack: Option<String>,
    /// The topics it subscribes to (resolved from names or a regex).
    pub subscribed: BTreeSet<T>,
    /// Its current target (what it keeps if it may).
    pub current: BTreeSet<(T, i32)>,
}

/// A set of partitions: (topic, partition).
type Owned<T> = BTreeSet<(T, i32)>;

/// Each member's target, by member id.
pub type Targets<T> = BTreeMap<String, BTreeSet<(T, i32)>>;

/// Whether the member at an index has a replica of a partition in its
/// rack.
type Near<'a, T> = dyn Fn(usize, &(T, i32)) -> bool + 'a;

/// The racks of each partition's replicas (empty: racks unknown).
pub type PartitionRacks<T> = BTreeMap<(T, i32), BTreeSet<String>>;

/// The order members are served in: static members first by instance
/// id, then the others by member id (Kafka's range assignor's order;
/// also the tie-break of [`uniform`]).
fn ordered<T>(members: &[MemberSpec<T>]) -> Vec<&MemberSpec<T>> {
    let mut ordered: Vec<&MemberSpec<T>> = members.iter().collect();
    ordered.sort_by_key(|m| {
        (
            m.instance_id.is_none(),
            m.instance_id.as_deref(),
            m.id.as_str(),
        )
    });
    debug_assert!(
        ordered.windows(2).all(|w| w[0].id != w[1].id),
        "member ids are unique"
    );
    ordered
}

/// The range assignor. `topics`: partition count by topic.
pub fn range<T: Ord + Clone>(members: &[MemberSpec<T>], topics: &BTreeMap<T, u32>) -> Targets<T> {
    let members = ordered(members);
    let mut targets: Targets<T> = members
        .iter()
        .map(|m| (m.id.clone(), BTreeSet::new()))
        .collect();
    for (topic, &count) in topics {
        let subscribers: Vec<&&MemberSpec<T>> = members
            .iter()
            .filter(|m| m.subscribed.contains(topic))
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let (each, extra) = (
            count / subscribers.len() as u32,
            count % subscribers.len() as u32,
        );
        let mut next = 0u32;
        for (i, member) in subscribers.iter().enumerate() {
            let size = each + u32::from((i as u32) < extra);
            let target = targets
                .get_mut(&member.id)
                .expect("every member has a target");
            for partition in next..next + size {
                target.insert((topic.clone(), partition as i32));
            }
            next += size;
        }
    }
    targets
}

/// The uniform assignor. `topics`: partition count by topic.
pub fn uniform<T: Ord + Clone>(members: &[MemberSpec<T>], topics: &BTreeMap<T, u32>) -> Targets<T> {
    uniform_with_racks(members, topics, &PartitionRacks::new())
}

/// [`uniform`], rack-aware where racks are known: among the partitions a
/// member takes beyond what it keeps, those with a replica in its rack
/// come first (so it reads from a replica near it, and cross-rack
/// traffic falls), as far as the same sizes allow; balance and what
/// members keep are as without racks.
pub fn uniform_with_racks<T: Ord + Clone>(
    members: &[MemberSpec<T>],
    topics: &BTreeMap<T, u32>,
    racks: &PartitionRacks<T>,
) -> Targets<T> {
    let members = ordered(members);
    let near = |m: &MemberSpec<T>, p: &(T, i32)| {
        let rack = m.rack.as_ref();
        rack.is_some_and(|r| racks.get(p).is_some_and(|set| set.contains(r)))
    };
    let eligible = |m: &MemberSpec<T>, (topic, partition): &(T, i32)| {
        m.subscribed.contains(topic)
            && topics
                .get(topic)
                .is_some_and(|count| (*partition as u32) < *count && *partition >= 0)
    };
    let (mut targets, taken) = keep_current(&members, eligible);
    let one_subscription = members
        .windows(2)
        .all(|w| w[0].subscribed == w[1].subscribed);
    if one_subscription && !members.is_empty() {
        let near = |i: usize, p: &(T, i32)| near(members[i], p);
        let wanted = (&members[0].subscribed, topics);
        fill_to_quotas(
            wanted,
            &mut targets,
            &taken,
            (!racks.is_empty()).then_some(&near),
        );
    } else {
        let near = |i: usize, p: &(T, i32)| near(members[i], p);
        fill_and_balance(&members, topics, &mut targets, taken, eligible, near);
    }
    members
        .iter()
        .zip(targets)
        .map(|(m, target)| (m.id.clone(), target))
        .collect()
}

/// What each member had and may still have (a partition claimed twice
/// goes to the first member in order), and every partition so kept.
fn keep_current<T: Ord + Clone>(
    members: &[&MemberSpec<T>],
    eligible: impl Fn(&MemberSpec<T>, &(T, i32)) -> bool,
) -> (Vec<BTreeSet<(T, i32)>>, Owned<T>) {
    let mut taken: BTreeSet<(T, i32)> = BTreeSet::new();
    let targets = members
        .iter()
        .map(|m| {
            let kept: BTreeSet<(T, i32)> = m
                .current
                .iter()
                .filter(|p| eligible(m, p) && !taken.contains(*p))
                .cloned()
                .collect();
            taken.extend(kept.iter().cloned());
            kept
        })
        .collect();
    (targets, taken)
}

/// One subscription for all (Kafka's homogeneous builder): each member's
/// quota is total / members, the remainder one each to members already
/// holding more than that, then to the others in order; a member keeps
/// its lowest partitions up to its quota, the rest and the unassigned
/// ones fill the members below theirs. O(P log P), sizes within one.
fn fill_to_quotas<T: Ord + Clone>(
    (subscribed, topics): (&BTreeSet<T>, &BTreeMap<T, u32>),
    targets: &mut [BTreeSet<(T, i32)>],
    taken: &BTreeSet<(T, i32)>,
    near: Option<&Near<'_, T>>,
) {
    let all: Vec<(T, i32)> = subscribed
        .iter()
        .filter_map(|topic| topics.get(topic).map(|count| (topic, *count)))
        .flat_map(|(topic, count)| (0..count as i32).map(move |p| (topic.clone(), p)))
        .collect();
    let (base, mut extra) = (all.len() / targets.len(), all.len() % targets.len());
    let mut quotas = vec![base; targets.len()];
    for holds_more in [true, false] {
        for (i, target) in targets.iter().enumerate() {
            if extra > 0 && quotas[i] == base && (target.len() > base) == holds_more {
                quotas[i] += 1;
                extra -= 1;
            }
        }
    }
    let mut pool: Vec<(T, i32)> = all.into_iter().filter(|p| !taken.contains(p)).collect();
    for (target, &quota) in targets.iter_mut().zip(&quotas) {
        while target.len() > quota {
            pool.extend(target.pop_last());
        }
    }
    pool.sort();
    let mut pool: Vec<Option<(T, i32)>> = pool.into_iter().map(Some).collect();
    if let Some(near) = near {
        // First each member takes, up to its quota, what has a replica in
        // its rack.
        for (i, (target, &quota)) in targets.iter_mut().zip(&quotas).enumerate() {
            for slot in pool.iter_mut() {
                if target.len() >= quota {
                    break;
                }
                if slot.as_ref().is_some_and(|p| near(i, p)) {
                    target.extend(slot.take());
                }
            }
        }
    }
    let mut rest = pool.into_iter().flatten();
    for (target, &quota) in targets.iter_mut().zip(&quotas) {
        while target.len() < quota {
            target.extend(rest.next());
        }
    }
}

/// Different subscriptions: every partition not kept to the least loaded
/// subscriber, then [`balance`].
fn fill_and_balance<T: Ord + Clone>(
    members: &[&MemberSpec<T>],
    topics: &BTreeMap<T, u32>,
    targets: &mut [BTreeSet<(T, i32)>],
    mut taken: BTreeSet<(T, i32)>,
    eligible: impl Fn(&MemberSpec<T>, &(T, i32)) -> bool,
    near: impl Fn(usize, &(T, i32)) -> bool,
) {
    for (topic, &count) in topics {
        for partition in 0..count as i32 {
            let p = (topic.clone(), partition);
            if taken.contains(&p) {
                continue;
            }
            // The least loaded subscriber, one in a replica's rack first.
            let least = (0..members.len())
                .filter(|&i| eligible(members[i], &p))
                .min_by_key(|&i| (targets[i].len(), !near(i, &p)));
            if let Some(i) = least {
                targets[i].insert(p.clone());
                taken.insert(p);
            }
        }
    }
    balance(members, targets, eligible);
}

/// Moves partitions from the most to the least loaded members, one at a
/// time, while some member has two more than another who may take one of
/// them: each move lowers the sum of squared sizes, so it ends, with
/// sizes within one wherever subscriptions allow.
fn balance<T: Ord + Clone>(
    members: &[&MemberSpec<T>],
    targets: &mut [BTreeSet<(T, i32)>],
    eligible: impl Fn(&MemberSpec<T>, &(T, i32)) -> bool,
) {
    loop {
        let mut by_size: Vec<usize> = (0..targets.len()).collect();
        by_size.sort_by_key(|&i| std::cmp::Reverse(targets[i].len()));
        let mut moved = None;
        'search: for &from in &by_size {
            for &to in by_size.iter().rev() {
                if targets[from].len() < targets[to].len() + 2 {
                    break;
                }
                // The last eligible partition, so a member keeps its
                // lowest ones (a stable choice for one input).
                if let Some(p) = targets[from]
                    .iter()
                    .rev()
                    .find(|p| eligible(members[to], p))
                {
                    moved = Some((from, to, p.clone()));
                    break 'search;
                }
            }
        }
        let Some((from, to, p)) = moved else {
            return;
        };
        targets[from].remove(&p);
        targets[to].insert(p);
    }
}

#[cfg(test)]
mod tests;
