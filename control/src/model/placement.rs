//! Replica placement: rack-aware and balanced, on live brokers an operator
//! has not cordoned. Each partition's leader goes to the live broker that
//! leads the fewest partitions; each follower to
//! the live broker with the fewest replicas among those on a rack the
//! partition does not use yet (any rack once all are used); each replica to
//! its broker's least loaded shard. Counts include what is already placed,
//! so new topics and new partitions even out the cluster.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::error::MetadataError;
use crate::model::record::PartitionAssignment;
use crate::model::types::{BrokerId, ShardId};
use crate::model::Metadata;

/// How much each broker and shard carries.
#[derive(Clone, Debug, Default)]
pub struct Load {
    replicas: BTreeMap<BrokerId, usize>,
    leaders: BTreeMap<BrokerId, usize>,
    shard_replicas: BTreeMap<(BrokerId, ShardId), usize>,
}

impl Load {
    /// The load of the metadata as it stands. Preferred leaders (first
    /// replicas) count as leaderships: that is where leadership returns.
    pub fn of(metadata: &Metadata) -> Load {
        let mut load = Load::default();
        for partition in metadata.topics.values().flat_map(|t| &t.partitions) {
            if let Some(first) = partition.replicas.first() {
                *load.leaders.entry(*first).or_default() += 1;
            }
            for (broker, shard) in partition.replicas.iter().zip(&partition.shards) {
                *load.replicas.entry(*broker).or_default() += 1;
                *load.shard_replicas.entry((*broker, *shard)).or_default() += 1;
            }
        }
        load
    }

    /// Replicas on a broker.
    pub fn replicas(&self, broker: BrokerId) -> usize {
        self.replicas.get(&broker).copied().unwrap_or(0)
    }

    /// Preferred leaderships of a broker.
    pub fn leaders(&self, broker: BrokerId) -> usize {
        self.leaders.get(&broker).copied().unwrap_or(0)
    }
}

/// A live broker as placement sees it.
struct Candidate {
    id: BrokerId,
    rack: Option<String>,
    shards: u16,
}

/// Places `partitions` new partitions of `replication_factor` replicas on
/// the live brokers that are not cordoned.
pub fn place(
    metadata: &Metadata,
    partitions: usize,
    replication_factor: usize,
) -> Result<Vec<PartitionAssignment>, MetadataError> {
    let candidates: Vec<Candidate> = metadata
        .live_brokers()
        .filter(|b| !metadata.cordoned_brokers.contains(&b.registration.id))
        .map(|b| Candidate {
            id: b.registration.id,
            rack: b.registration.rack.clone(),
            shards: b.registration.shards,
        })
        .collect();
    if replication_factor == 0 || replication_factor > candidates.len() {
        return Err(MetadataError::NotEnoughBrokers {
            wanted: replication_factor,
            available: candidates.len(),
        });
    }
    let mut load = Load::of(metadata);
    let mut assignments = Vec::with_capacity(partitions);
    for _ in 0..partitions {
        let replicas = choose_replicas(&candidates, replication_factor, &load);
        let shards = replicas
            .iter()
            .map(|id| {
                let candidate = candidates
                    .iter()
                    .find(|c| c.id == *id)
                    .expect("chosen from candidates");
                least_loaded_shard(*id, candidate.shards, &load)
            })
            .collect::<Vec<_>>();
        *load.leaders.entry(replicas[0]).or_default() += 1;
        for (broker, shard) in replicas.iter().zip(&shards) {
            *load.replicas.entry(*broker).or_default() += 1;
            *load.shard_replicas.entry((*broker, *shard)).or_default() += 1;
        }
        assignments.push(PartitionAssignment { replicas, shards });
    }
    Ok(assignments)
}

fn choose_replicas(
    candidates: &[Candidate],
    replication_factor: usize,
    load: &Load,
) -> Vec<BrokerId> {
    let leader = candidates
        .iter()
        .min_by_key(|c| (load.leaders(c.id), load.replicas(c.id), c.id))
        .expect("at least one candidate");
    let mut chosen = vec![leader.id];
    let mut racks: BTreeSet<Option<&str>> = BTreeSet::from([leader.rack.as_deref()]);
    while chosen.len() < replication_factor {
        let free = candidates.iter().filter(|c| !chosen.contains(&c.id));
        let on_new_rack = free.clone().filter(|c| !racks.contains(&c.rack.as_deref()));
        let pick = on_new_rack
            .min_by_key(|c| (load.replicas(c.id), c.id))
            .or_else(|| free.min_by_key(|c| (load.replicas(c.id), c.id)))
            .expect("replication factor checked against candidates");
        chosen.push(pick.id);
        racks.insert(pick.rack.as_deref());
    }
    chosen
}

/// The shard of `broker` (running `shards`) holding the fewest replicas.
pub fn least_loaded_shard(broker: BrokerId, shards: u16, load: &Load) -> ShardId {
    (0..shards)
        .map(ShardId)
        .min_by_key(|s| {
            (
                load.shard_replicas.get(&(broker, *s)).copied().unwrap_or(0),
                *s,
            )
        })
        .expect("a broker runs at least one shard")
}
