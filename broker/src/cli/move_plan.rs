//! Plans of partition moves the command line computes from what the
//! cluster reports: every replica off one broker (`broker cluster
//! decommission`), or a topic's replicas spread evenly over the brokers
//! (`broker topic reassign --balance`). Rack-aware: a move never leaves a
//! partition on fewer racks than before, and prefers a rack the partition
//! is not on yet. Pure: the commands gather the input and submit the plan.

use std::collections::{BTreeMap, BTreeSet};

/// A broker that may receive replicas: live and not cordoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its id.
    pub id: i32,
    /// Its rack, if any.
    pub rack: Option<String>,
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

/// Replicas per broker, over `placed`.
fn load_of(candidates: &[Candidate], placed: &[Placed]) -> BTreeMap<i32, usize> {
    let mut load: BTreeMap<i32, usize> = candidates.iter().map(|c| (c.id, 0)).collect();
    for p in placed {
        for r in &p.replicas {
            *load.entry(*r).or_default() += 1;
        }
    }
    load
}

fn rack_of(candidates: &[Candidate], id: i32) -> Option<&str> {
    candidates
        .iter()
        .find(|c| c.id == id)
        .and_then(|c| c.rack.as_deref())
}

/// Distinct racks among `replicas` (brokers without a rack count apart).
fn racks(candidates: &[Candidate], replicas: &[i32]) -> usize {
    let known: BTreeSet<Option<&str>> = replicas
        .iter()
        .map(|r| rack_of(candidates, *r))
        .filter(Option::is_some)
        .collect();
    let unknown = replicas
        .iter()
        .filter(|r| rack_of(candidates, **r).is_none())
        .count();
    known.len() + unknown
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
pub fn drain(
    candidates: &[Candidate],
    placed: &[Placed],
    leaving: i32,
) -> (Vec<Placed>, Vec<Placed>) {
    let others: Vec<Candidate> = (candidates.iter())
        .filter(|c| c.id != leaving)
        .cloned()
        .collect();
    let mut load = load_of(&others, placed);
    let (mut moved, mut stuck) = (Vec::new(), Vec::new());
    for p in placed.iter().filter(|p| p.replicas.contains(&leaving)) {
        let before = racks(candidates, &p.replicas);
        let pick = (others.iter())
            .filter(|c| !p.replicas.contains(&c.id))
            .map(|c| {
                let target = swapped(&p.replicas, leaving, c.id);
                let spread = racks(candidates, &target);
                (c.id, target, spread)
            })
            .filter(|(_, _, spread)| *spread >= before.min(p.replicas.len()))
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

/// `placed` (one topic's partitions) spread evenly over `candidates`:
/// one replica at a time to the least loaded broker from the most loaded
/// one that can give it one without the partition losing a rack, until
/// they differ by one replica at most or no move keeps the racks.
/// Returns the partitions whose replicas changed, with their new lists.
pub fn balance(candidates: &[Candidate], placed: &[Placed]) -> Vec<Placed> {
    let mut now: Vec<Placed> = placed.to_vec();
    let mut load = load_of(candidates, &now);
    let limit = now.iter().map(|p| p.replicas.len()).sum::<usize>() + 1;
    for _ in 0..limit {
        let by_load = |ascending: bool| {
            let mut ids: Vec<i32> = candidates.iter().map(|c| c.id).collect();
            ids.sort_by_key(|id| (load[id], *id));
            if !ascending {
                ids.reverse();
            }
            ids
        };
        let low = by_load(true)[0];
        // The most loaded broker whose replica can go to the least loaded
        // one without the partition losing a rack.
        let found = by_load(false)
            .into_iter()
            .take_while(|high| load[high] > load[&low] + 1)
            .find_map(|high| {
                let index = now.iter().position(|p| {
                    p.replicas.contains(&high)
                        && !p.replicas.contains(&low)
                        && racks(candidates, &swapped(&p.replicas, high, low))
                            >= racks(candidates, &p.replicas)
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

    fn brokers(racks: &[(i32, &str)]) -> Vec<Candidate> {
        racks
            .iter()
            .map(|(id, rack)| Candidate {
                id: *id,
                rack: Some(rack.to_string()),
            })
            .collect()
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

    #[test]
    fn a_drained_broker_is_replaced_on_a_new_rack_by_the_least_loaded() {
        let candidates = brokers(&[(1, "a"), (2, "b"), (3, "c"), (4, "c"), (5, "a")]);
        let before = placed(&[&[1, 2, 3], &[2, 3, 5], &[3, 1, 2], &[4, 2, 5]]);
        let (moved, stuck) = drain(&candidates, &before, 3);
        assert!(stuck.is_empty());
        assert_eq!(moved.len(), 3, "every partition on 3: {moved:?}");
        for p in &moved {
            assert!(!p.replicas.contains(&3));
            assert_eq!(
                racks(&candidates, &p.replicas),
                3,
                "three racks kept: {p:?}"
            );
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
    fn a_partition_with_nowhere_to_go_is_reported() {
        let candidates = brokers(&[(1, "a"), (2, "b"), (3, "c")]);
        let (moved, stuck) = drain(&candidates, &placed(&[&[1, 2, 3]]), 3);
        assert!(moved.is_empty());
        assert_eq!(stuck.len(), 1);
    }

    #[test]
    fn without_racks_a_topic_spreads_evenly() {
        let candidates: Vec<Candidate> = (1..=4).map(|id| Candidate { id, rack: None }).collect();
        let before = placed(&[
            &[1, 2, 3],
            &[2, 3, 1],
            &[3, 1, 2],
            &[1, 3, 2],
            &[2, 1, 3],
            &[3, 2, 1],
        ]);
        let moved = balance(&candidates, &before);
        let mut after = before.clone();
        for m in &moved {
            after[m.partition as usize] = m.clone();
        }
        let load = load_of(&candidates, &after);
        assert!(load.values().all(|l| (4..=5).contains(l)), "{load:?}");
        assert!(after.iter().all(|p| racks(&candidates, &p.replicas) == 3));
    }

    #[test]
    fn a_topic_spreads_to_a_new_broker_without_losing_racks() {
        let candidates = brokers(&[(1, "a"), (2, "b"), (3, "c"), (4, "a")]);
        let before = placed(&[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2], &[1, 3, 2]]);
        let moved = balance(&candidates, &before);
        let mut after = before.clone();
        for m in &moved {
            after[m.partition as usize] = m.clone();
        }
        let load = load_of(&candidates, &after);
        // Every partition keeps one replica on each rack: racks b and c
        // have one broker each, so only rack a's two share theirs.
        assert_eq!((load[&1], load[&4]), (2, 2), "{load:?}");
        assert_eq!((load[&2], load[&3]), (4, 4), "{load:?}");
        for p in &after {
            assert_eq!(racks(&candidates, &p.replicas), 3, "{p:?}");
        }
        assert!(
            balance(&candidates, &after).is_empty(),
            "balanced stays put"
        );
    }
}
