//! The assignors on Kafka's documented range example, then on random
//! groups: every subscribed partition to exactly one subscriber, uniform
//! sizes within one for one subscription, and stickiness (the same input
//! again moves nothing; a member joining or leaving moves only what
//! balance needs).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

fn member(id: &str, topics: &[&'static str]) -> MemberSpec<&'static str> {
    MemberSpec {
        id: id.into(),
        instance_id: None,
        rack: None,
        subscribed: topics.iter().copied().collect(),
        current: BTreeSet::new(),
    }
}

fn parts(list: &[(&'static str, i32)]) -> BTreeSet<(&'static str, i32)> {
    list.iter().copied().collect()
}

#[test]
fn range_gives_contiguous_ranges_the_first_members_one_more() {
    // Kafka's example: two members, t0 and t1 of three partitions each.
    let members = [member("c1", &["t0", "t1"]), member("c0", &["t0", "t1"])];
    let topics = BTreeMap::from([("t0", 3), ("t1", 3)]);
    let targets = range(&members, &topics);
    assert_eq!(
        targets["c0"],
        parts(&[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)])
    );
    assert_eq!(targets["c1"], parts(&[("t0", 2), ("t1", 2)]));
}

#[test]
fn range_serves_static_members_first_and_only_subscribers() {
    let mut fixed = member("z", &["t0"]);
    fixed.instance_id = Some("instance-a".into());
    let members = [member("a", &["t0", "t1"]), fixed];
    let topics = BTreeMap::from([("t0", 3), ("t1", 2)]);
    let targets = range(&members, &topics);
    assert_eq!(targets["z"], parts(&[("t0", 0), ("t0", 1)]));
    assert_eq!(targets["a"], parts(&[("t0", 2), ("t1", 0), ("t1", 1)]));
}

/// Each subscribed partition in exactly one target, of a subscriber.
fn check_complete(
    members: &[MemberSpec<&'static str>],
    topics: &BTreeMap<&'static str, u32>,
    targets: &Targets<&'static str>,
    seed: u64,
) {
    let mut seen = BTreeSet::new();
    for m in members {
        for (topic, partition) in &targets[&m.id] {
            assert!(m.subscribed.contains(topic), "SEED={seed}: not subscribed");
            assert!(seen.insert((*topic, *partition)), "SEED={seed}: twice");
        }
    }
    for (topic, count) in topics {
        if members.iter().any(|m| m.subscribed.contains(topic)) {
            for partition in 0..*count as i32 {
                assert!(seen.contains(&(*topic, partition)), "SEED={seed}: missing");
            }
        }
    }
}

fn sizes(targets: &Targets<&'static str>) -> (usize, usize) {
    let lens = targets.values().map(BTreeSet::len);
    (lens.clone().min().unwrap_or(0), lens.max().unwrap_or(0))
}

/// How many partitions changed hands between two assignments.
fn moved(before: &Targets<&'static str>, after: &Targets<&'static str>) -> usize {
    after
        .iter()
        .map(|(id, target)| match before.get(id) {
            Some(had) => target.difference(had).count(),
            None => target.len(),
        })
        .sum()
}

const TOPICS: [&str; 4] = ["a", "b", "c", "d"];

#[test]
fn random_groups_are_covered_balanced_and_sticky() {
    let seed = crate::groups::modern::test_seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..300 {
        let topics: BTreeMap<&str, u32> =
            TOPICS.iter().map(|t| (*t, rng.gen_range(0..9))).collect();
        let same: Vec<&'static str> = TOPICS
            .iter()
            .copied()
            .filter(|_| rng.gen_bool(0.6))
            .collect();
        let homogeneous = rng.gen_bool(0.5);
        let mut members: Vec<MemberSpec<&'static str>> = (0..rng.gen_range(1..7))
            .map(|i| {
                let topics: Vec<&'static str> = match homogeneous {
                    true => same.clone(),
                    false => TOPICS
                        .iter()
                        .copied()
                        .filter(|_| rng.gen_bool(0.5))
                        .collect(),
                };
                member(&format!("m{i}"), &topics)
            })
            .collect();
        for assignor in [range, uniform] {
            let targets = assignor(&members, &topics);
            check_complete(&members, &topics, &targets, seed);
            // The members' order does not matter.
            let mut shuffled = members.clone();
            shuffled.reverse();
            shuffled.rotate_left(rng.gen_range(0..members.len()));
            assert_eq!(assignor(&shuffled, &topics), targets, "SEED={seed}");
        }
        let targets = uniform(&members, &topics);
        let (min, max) = sizes(&targets);
        if homogeneous {
            assert!(max - min <= 1, "SEED={seed}: sizes {min}..{max}");
        }
        // The same group again, each member's target as its current one:
        // nothing moves.
        for m in &mut members {
            m.current = targets[&m.id].clone();
        }
        assert_eq!(uniform(&members, &topics), targets, "SEED={seed}");
        if !homogeneous {
            continue;
        }
        // A member joins: it takes what balance needs, nothing else moves.
        let total: usize = targets.values().map(BTreeSet::len).sum();
        members.push(member("joined", &same));
        let grown = uniform(&members, &topics);
        check_complete(&members, &topics, &grown, seed);
        let (min, max) = sizes(&grown);
        assert!(max - min <= 1, "SEED={seed}: after a join, {min}..{max}");
        let quota = total / members.len();
        assert_eq!(
            moved(&targets, &grown),
            grown["joined"].len(),
            "SEED={seed}: only the joiner's partitions move"
        );
        assert!(grown["joined"].len() <= quota + 1, "SEED={seed}");
        // The first member leaves: only its partitions move.
        let gone = members.remove(0);
        for m in &mut members {
            m.current = grown[&m.id].clone();
        }
        let shrunk = uniform(&members, &topics);
        check_complete(&members, &topics, &shrunk, seed);
        let (min, max) = sizes(&shrunk);
        assert!(max - min <= 1, "SEED={seed}: after a leave, {min}..{max}");
        assert_eq!(
            moved(&grown, &shrunk),
            grown[&gone.id].len(),
            "SEED={seed}: more moved than the leaver's"
        );
    }
}

#[test]
fn one_subscription_at_scale_is_balanced_and_a_joiner_takes_only_its_quota() {
    // 1,000 members, 10 topics of 1,000 partitions: the quota path
    // (the balancing moves of mixed subscriptions would take minutes).
    let names: Vec<&'static str> = (0..10)
        .map(|i| &*Box::leak(format!("t{i}").into_boxed_str()))
        .collect();
    let topics: BTreeMap<&'static str, u32> = names.iter().map(|t| (*t, 1_000)).collect();
    let mut members: Vec<MemberSpec<&'static str>> = (0..1_000)
        .map(|i| member(&format!("m{i:04}"), &names))
        .collect();
    let first = uniform(&members, &topics);
    assert_eq!(sizes(&first), (10, 10));
    check_complete(&members, &topics, &first, 0);
    for m in &mut members {
        m.current = first[&m.id].clone();
    }
    members.push(member("joiner", &names));
    let second = uniform(&members, &topics);
    check_complete(&members, &topics, &second, 0);
    assert_eq!(sizes(&second), (9, 10));
    let joined = second["joiner"].len();
    assert_eq!(
        moved(&first, &second),
        joined,
        "only the joiner's partitions moved"
    );
}

#[test]
fn with_racks_members_take_partitions_near_them_at_the_same_sizes() {
    // Six partitions, each with its replicas in one rack: even ones in
    // "a", odd ones in "b"; two members, one per rack.
    let racks: PartitionRacks<&'static str> = (0..6)
        .map(|p| {
            (
                ("t", p),
                BTreeSet::from([["a", "b"][p as usize % 2].to_string()]),
            )
        })
        .collect();
    let topics = BTreeMap::from([("t", 6)]);
    let mut in_a = member("m1", &["t"]);
    in_a.rack = Some("a".into());
    let mut in_b = member("m2", &["t"]);
    in_b.rack = Some("b".into());
    let members = [in_a.clone(), in_b.clone()];
    let targets = uniform_with_racks(&members, &topics, &racks);
    assert_eq!(targets["m1"], parts(&[("t", 0), ("t", 2), ("t", 4)]));
    assert_eq!(targets["m2"], parts(&[("t", 1), ("t", 3), ("t", 5)]));
    // Without racks: the lowest partitions in order (what racks changed).
    assert_eq!(
        uniform(&members, &topics)["m1"],
        parts(&[("t", 0), ("t", 1), ("t", 2)])
    );
    // Sizes come first: three members, two in rack "a", take two each.
    let mut also_a = member("m3", &["t"]);
    also_a.rack = Some("a".into());
    let three = [in_a.clone(), in_b.clone(), also_a];
    let targets = uniform_with_racks(&three, &topics, &racks);
    assert!(targets.values().all(|t| t.len() == 2), "{targets:?}");
    assert!(targets["m2"].iter().all(|(_, p)| p % 2 == 1), "{targets:?}");
    // What a member keeps stays, racks or not.
    let mut keeper = in_b.clone();
    keeper.current = parts(&[("t", 0), ("t", 2), ("t", 4)]);
    let kept = uniform_with_racks(&[in_a.clone(), keeper], &topics, &racks);
    assert_eq!(kept["m2"], parts(&[("t", 0), ("t", 2), ("t", 4)]));
    // Mixed subscriptions: the least loaded subscriber, near ones first.
    let mut other = member("m4", &["u"]);
    other.rack = Some("b".into());
    let mixed = [in_a, in_b, other];
    let topics = BTreeMap::from([("t", 6), ("u", 1)]);
    let targets = uniform_with_racks(&mixed, &topics, &racks);
    assert_eq!(targets["m1"], parts(&[("t", 0), ("t", 2), ("t", 4)]));
    assert_eq!(targets["m2"], parts(&[("t", 1), ("t", 3), ("t", 5)]));
}
