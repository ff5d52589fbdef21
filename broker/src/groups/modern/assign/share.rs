//! The share groups' assignor (KIP-932's "simple"): a share group's
//! members take records one by one, so a partition may go to several
//! members. Per topic, over the members subscribed to it: with no more
//! members than partitions, each partition goes to one member and the
//! members' counts differ by at most one; with more members, each member
//! gets one partition and the partitions' member counts differ by at
//! most one. What a member had it keeps as far as those sizes allow.

use std::collections::{BTreeMap, BTreeSet};

use super::{MemberSpec, Targets};

/// Each member's partitions.
pub fn simple<T: Ord + Clone>(members: &[MemberSpec<T>], topics: &BTreeMap<T, u32>) -> Targets<T> {
    let mut targets: Targets<T> = members
        .iter()
        .map(|m| (m.id.clone(), BTreeSet::new()))
        .collect();
    for (topic, count) in topics {
        let mut subscribed: Vec<&MemberSpec<T>> = (members.iter())
            .filter(|m| m.subscribed.contains(topic))
            .collect();
        if subscribed.is_empty() || *count == 0 {
            continue;
        }
        subscribed.sort_by(|a, b| a.id.cmp(&b.id));
        let ids: Vec<&str> = subscribed.iter().map(|m| m.id.as_str()).collect();
        let partitions: Vec<i32> = (0..*count as i32).collect();
        let had = |m: &MemberSpec<T>| {
            let of_topic = m.current.iter().filter(|(t, _)| t == topic);
            of_topic
                .map(|(_, p)| *p)
                .filter(|p| *p < *count as i32)
                .collect::<Vec<_>>()
        };
        let pairs = if ids.len() <= partitions.len() {
            // Partitions are the items, members the bins.
            let current = subscribed.iter().map(|m| had(m)).collect::<Vec<_>>();
            balance(&partitions, ids.len(), &current)
                .into_iter()
                .map(|(p, m)| (m, p))
                .collect::<Vec<_>>()
        } else {
            // Members are the items, partitions the bins.
            let current: Vec<Vec<usize>> = (0..partitions.len())
                .map(|p| {
                    let holds = |m: &&&MemberSpec<T>| had(m).contains(&(p as i32));
                    let holders = subscribed.iter().enumerate().filter(|(_, m)| holds(m));
                    holders.map(|(i, _)| i).collect()
                })
                .collect();
            let items: Vec<usize> = (0..ids.len()).collect();
            balance(&items, partitions.len(), &current)
                .into_iter()
                .map(|(m, p)| (m, p as i32))
                .collect()
        };
        for (member, partition) in pairs {
            let target = targets.get_mut(ids[member]).expect("a subscribed member");
            target.insert((topic.clone(), partition));
        }
    }
    targets
}

/// Each item to one of `bins` bins, the bins' sizes within one of each
/// other; `current[b]`: the items bin `b` had (kept while its size
/// allows; an item two bins had stays with the first). Returns (item,
/// bin) pairs.
fn balance<I: Ord + Copy>(items: &[I], bins: usize, current: &[Vec<I>]) -> Vec<(I, usize)> {
    let (floor, extra) = (items.len() / bins, items.len() % bins);
    let mut taken = BTreeSet::new();
    let mut kept: Vec<Vec<I>> = current
        .iter()
        .map(|had| {
            let live = had.iter().filter(|i| items.contains(i));
            let mine: Vec<I> = live.filter(|i| taken.insert(**i)).copied().collect();
            mine
        })
        .collect();
    // The `extra` bins that kept the most may hold one more than the rest.
    let mut order: Vec<usize> = (0..bins).collect();
    order.sort_by_key(|b| std::cmp::Reverse(kept[*b].len()));
    let mut quota = vec![floor; bins];
    for b in order.into_iter().take(extra) {
        quota[b] += 1;
    }
    for (b, mine) in kept.iter_mut().enumerate() {
        for dropped in mine.drain(quota[b].min(mine.len())..) {
            taken.remove(&dropped);
        }
    }
    let mut free = items.iter().filter(|i| !taken.contains(*i)).copied();
    for (b, mine) in kept.iter_mut().enumerate() {
        while mine.len() < quota[b] {
            mine.push(free.next().expect("quotas sum to the items"));
        }
    }
    let each = kept.into_iter().enumerate();
    each.flat_map(|(b, mine)| mine.into_iter().map(move |i| (i, b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, current: &[i32]) -> MemberSpec<&'static str> {
        MemberSpec {
            id: id.into(),
            instance_id: None,
            rack: None,
            subscribed: BTreeSet::from(["t"]),
            current: current.iter().map(|p| ("t", *p)).collect(),
        }
    }

    fn sizes(targets: &Targets<&'static str>) -> Vec<usize> {
        targets.values().map(BTreeSet::len).collect()
    }

    /// How many members each partition of "t" went to.
    fn sharing(targets: &Targets<&'static str>, partitions: i32) -> Vec<usize> {
        let count = |p: i32| targets.values().filter(|t| t.contains(&("t", p))).count();
        (0..partitions).map(count).collect()
    }

    #[test]
    fn partitions_spread_and_are_shared_once_members_outnumber_them() {
        let topics = BTreeMap::from([("t", 4)]);
        let two = simple(&[member("a", &[]), member("b", &[])], &topics);
        assert_eq!(sizes(&two), [2, 2]);
        assert_eq!(sharing(&two, 4), [1, 1, 1, 1]);
        let six: Vec<_> = (0..6).map(|i| member(&format!("m{i}"), &[])).collect();
        let six = simple(&six, &topics);
        assert_eq!(sizes(&six), [1; 6], "one partition each");
        let mut shared = sharing(&six, 4);
        shared.sort();
        assert_eq!(shared, [1, 1, 2, 2], "within one of each other");
        // One partition, four members (the queue): all on it.
        let one = BTreeMap::from([("t", 1)]);
        let four: Vec<_> = (0..4).map(|i| member(&format!("m{i}"), &[])).collect();
        assert_eq!(sharing(&simple(&four, &one), 1), [4]);
    }

    #[test]
    fn members_keep_what_they_had_as_far_as_the_sizes_allow() {
        let topics = BTreeMap::from([("t", 4)]);
        // c joins a and b: each keeps one of its two, c gets the rest.
        let before = [member("a", &[0, 1]), member("b", &[2, 3]), member("c", &[])];
        let after = simple(&before, &topics);
        assert!(after["a"].is_subset(&BTreeSet::from([("t", 0), ("t", 1)])));
        assert!(after["b"].is_subset(&BTreeSet::from([("t", 2), ("t", 3)])));
        let mut s = sizes(&after);
        s.sort();
        assert_eq!(s, [1, 1, 2]);
        assert_eq!(sharing(&after, 4), [1, 1, 1, 1]);
        // A partition two members claim stays with one; gone partitions
        // (the topic shrank in the view) are dropped.
        let claims = [member("a", &[0, 9]), member("b", &[0])];
        let after = simple(&claims, &topics);
        assert_eq!(sharing(&after, 4), [1, 1, 1, 1]);
        assert!(after.values().all(|t| t.iter().all(|(_, p)| *p < 4)));
    }
}
