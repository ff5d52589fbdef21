//! Plans of partition moves the command line computes from what the
//! cluster reports: every replica off one broker (`broker cluster
//! decommission`), or a topic's replicas spread evenly over the brokers
//! (`broker topic reassign --balance`). Rack-aware: a move never leaves a
//! partition on fewer racks than before, and prefers a rack the partition
//! is not on yet. Pure: the commands gather the input and submit the plan.

use std::collections::{BTreeMap, BTreeSet};

/// The brokers a plan may use, and every known broker's rack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Brokers {
    /// Those that may receive replicas: live and not cordoned.
    pub candidates: Vec<i32>,
    /// Each broker's rack, candidates or not (a cordoned or fenced
    /// replica's rack counts too); a broker missing has none known.
    pub racks: BTreeMap<i32, Option<String>>,
}

impl Brokers {
    fn rack_of(&self, id: i32) -> Option<&str> {
        self.racks.get(&id).and_then(|r| r.as_deref())
    }

    /// Distinct racks among `replicas` (brokers without a rack count apart).
    fn racks(&self, replicas: &[i32]) -> usize {
        let known: BTreeSet<&str> = replicas.iter().filter_map(|r| self.rack_of(*r)).collect();
        let unknown = replicas
            .iter()
            .filter(|r| self.rack_of(**r).is_none())
            .count();
        known.len() + unknown
    }
}

/// A partition and its replicas (the first the preferred leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its replicas.
    pub replicas: Vec<i32>,
}

/// Replicas per broker over `placed`, every one of `candidates` counted.
fn load_of(candidates: &[i32], placed: &[Placed]) -> BTreeMap<i32, usize> {
    let mut load: BTreeMap<i32, usize> = candidates.iter().map(|c| (*c, 0)).collect();
    for p in placed {
        for r in &p.replicas {
            *load.entry(*r).or_default() += 1;
        }
    }
    load
}

/// `replicas` with `from` replaced by `to`, in its place.
fn swapped(replicas: &[i32], from: i32, to: i32) -> Vec<i32> {
    replicas
        .iter()
        .map(|r| if *r == from { to } else { *r })
        .collect()
}

/// Every partition with a replica on `leaving`, moved to another
/// candidate: the least loaded one on a rack the partition is not on
/// yet, else the least loaded that keeps its racks. Partitions with no
/// such candidate are returned apart, unmoved.
pub fn drain(brokers: &Brokers, placed: &[Placed], leaving: i32) -> (Vec<Placed>, Vec<Placed>) {
    let others: Vec<i32> = (brokers.candidates.iter())
        .filter(|c| **c != leaving)
        .copied()
        .collect();
    let mut load = load_of(&others, placed);
    let (mut moved, mut stuck) = (Vec::new(), Vec::new());
    for p in placed.iter().filter(|p| p.replicas.contains(&leaving)) {
        let before = brokers.racks(&p.replicas);
        let pick = (others.iter())
            .filter(|c| !p.replicas.contains(c))
            .map(|c| {
                let target = swapped(&p.replicas, leaving, *c);
                let spread = brokers.racks(&target);
                (*c, target, spread)
            })
            .filter(|(_, _, spread)| *spread >= before)
            .min_by_key(|(id, _, spread)| (std::cmp::Reverse(*spread), load[id], *id));
        match pick {
            Some((id, target, _)) => {
                *load.get_mut(&id).expect("a candidate") += 1;
                moved.push(Placed {
                    replicas: target,
                    ..p.clone()
                });
            }
            None => stuck.push(p.clone()),
        }
    }
    (moved, stuck)
}

/// `placed` (one topic's partitions) spread evenly over the candidates:
/// one replica at a time to the least loaded broker from the most loaded
/// one that can give it one without the partition losing a rack, until
/// they differ by one replica at most or no move keeps the racks.
/// Returns the partitions whose replicas changed, with their new lists.
pub fn balance(brokers: &Brokers, placed: &[Placed]) -> Vec<Placed> {
    let candidates = &brokers.candidates;
    if candidates.is_empty() {
        return Vec::new();
    }
    let mut now: Vec<Placed> = placed.to_vec();
    let mut load = load_of(candidates, &now);
    let limit = now.iter().map(|p| p.replicas.len()).sum::<usize>() + 1;
    for _ in 0..limit {
        let mut by_load: Vec<i32> = candidates.clone();
        by_load.sort_by_key(|id| (load[id], *id));
        let low = by_load[0];
        // The most loaded broker whose replica can go to the least loaded
        // one without the partition losing a rack.
        let found = (by_load.iter().rev())
            .take_while(|high| load[high] > load[&low] + 1)
            .find_map(|&high| {
                let index = now.iter().position(|p| {
                    p.replicas.contains(&high)
                        && !p.replicas.contains(&low)
                        && brokers.racks(&swapped(&p.replicas, high, low))
                            >= brokers.racks(&p.replicas)
                })?;
                Some((high, index))
            });
        let Some((high, index)) = found else { break };
        let p = &mut now[index];
        p.replicas = swapped(&p.replicas, high, low);
        *load.get_mut(&high).expect("a candidate") -= 1;
        *load.get_mut(&low).expect("a candidate") += 1;
    }
    now.into_iter()
        .zip(placed)
        .filter(|(after, before)| after.replicas != before.replicas)
        .map(|(after, _)| after)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(racks: &[(i32, &str)]) -> Brokers {
        Brokers {
            candidates: racks.iter().map(|(id, _)| *id).collect(),
            racks: (racks.iter())
                .map(|(id, rack)| (*id, Some(rack.to_string())))
                .collect(),
        }
    }

    fn placed(lists: &[&[i32]]) -> Vec<Placed> {
        lists
            .iter()
            .enumerate()
            .map(|(i, r)| Placed {
                topic: "t".into(),
                partition: i as i32,
                replicas: r.to_vec(),
            })
            .collect()
    }

    fn applied(before: &[Placed], moved: &[Placed]) -> Vec<Placed> {
        let mut after = before.to_vec();
        for m in moved {
            after[m.partition as usize] = m.clone();
        }
        after
    }

    #[test]
    fn a_drained_broker_is_replaced_on_a_new_rack_by_the_least_loaded() {
        let brokers = brokers(&[(1, "a"), (2, "b"), (3, "c"), (4, "c"), (5, "a")]);
        let before = placed(&[&[1, 2, 3], &[2, 3, 5], &[3, 1, 2], &[4, 2, 5]]);
        let (moved, stuck) = drain(&brokers, &before, 3);
        assert!(stuck.is_empty());
        assert_eq!(moved.len(), 3, "every partition on 3: {moved:?}");
        for p in &moved {
            assert!(!p.replicas.contains(&3));
            assert_eq!(brokers.racks(&p.replicas), 3, "three racks kept: {p:?}");
        }
        // Broker 4 is rack c's only other broker: it takes all three, in place.
        assert_eq!(moved[0].replicas, vec![1, 2, 4]);
        assert_eq!(
            moved[2].replicas,
            vec![4, 1, 2],
            "the preferred leader's place kept"
        );
    }

    #[test]
    fn a_cordoned_brokers_rack_still_counts() {
        // Two zones, a = {1, 2} and b = {3, 4}; broker 1 leaves, cordoned
        // (no candidate), its rack still known: two racks before and after.
        let mut two_zones = brokers(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]);
        two_zones.candidates.retain(|b| *b != 1);
        let (moved, stuck) = drain(&two_zones, &placed(&[&[1, 2, 3]]), 1);
        assert!(stuck.is_empty(), "{stuck:?}");
        assert_eq!(moved[0].replicas, vec![4, 2, 3]);
        // A candidate beside a cordoned replica's rack is no new rack.
        let (moved, _) = drain(&two_zones, &placed(&[&[1, 3]]), 3);
        assert_eq!(
            moved[0].replicas,
            vec![1, 4],
            "rack b kept, not a second replica on a"
        );
        assert!(
            balance(&Brokers::default(), &placed(&[&[1, 2]])).is_empty(),
            "no candidate"
        );
    }

    #[test]
    fn a_partition_with_nowhere_to_go_is_reported() {
        let brokers = brokers(&[(1, "a"), (2, "b"), (3, "c")]);
        let (moved, stuck) = drain(&brokers, &placed(&[&[1, 2, 3]]), 3);
        assert!(moved.is_empty());
        assert_eq!(stuck.len(), 1);
    }

    #[test]
    fn without_racks_a_topic_spreads_evenly() {
        let brokers = Brokers {
            candidates: (1..=4).collect(),
            racks: BTreeMap::new(),
        };
        let before = placed(&[
            &[1, 2, 3],
            &[2, 3, 1],
            &[3, 1, 2],
            &[1, 3, 2],
            &[2, 1, 3],
            &[3, 2, 1],
        ]);
        let after = applied(&before, &balance(&brokers, &before));
        let load = load_of(&brokers.candidates, &after);
        assert!(load.values().all(|l| (4..=5).contains(l)), "{load:?}");
        assert!(after.iter().all(|p| brokers.racks(&p.replicas) == 3));
    }

    #[test]
    fn a_topic_spreads_to_a_new_broker_without_losing_racks() {
        let brokers = brokers(&[(1, "a"), (2, "b"), (3, "c"), (4, "a")]);
        let before = placed(&[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2], &[1, 3, 2]]);
        let after = applied(&before, &balance(&brokers, &before));
        let load = load_of(&brokers.candidates, &after);
        // Every partition keeps one replica on each rack: racks b and c
        // have one broker each, so only rack a's two share theirs.
        assert_eq!((load[&1], load[&4]), (2, 2), "{load:?}");
        assert_eq!((load[&2], load[&3]), (4, 4), "{load:?}");
        for p in &after {
            assert_eq!(brokers.racks(&p.replicas), 3, "{p:?}");
        }
        assert!(balance(&brokers, &after).is_empty(), "balanced stays put");
    }
}
