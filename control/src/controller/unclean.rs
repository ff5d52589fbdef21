//! Elections an operator asks for where no in-sync replica can lead
//! (ElectLeaders, type UNCLEAN).
//!
//! A partition whose in-sync replicas are all gone stays offline unless
//! its topic allows unclean elections: waiting for them keeps every
//! acknowledged record. An operator who knows they will not come back
//! chooses availability instead, for the partitions named: the first live
//! replica (replica order, those a move is adding last) leads, with
//! whatever its log holds, and the
//! other replicas truncate to it. If an in-sync replica is live after all,
//! it is elected instead (a clean election: nothing is lost).

use crate::model::record::{MetadataRecord, PartitionChange};
use crate::model::types::{BrokerId, PartitionId, TopicId};
use crate::model::{Metadata, Partition};

/// Why a partition gets no election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotElected {
    /// It has a leader (Kafka's ELECTION_NOT_NEEDED).
    Led,
    /// No replica is live (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    NoLiveReplica,
}

/// The record that gives a leaderless `partition` a leader: a live
/// in-sync replica if there is one, else the first live replica.
pub fn election(
    metadata: &Metadata,
    topic: TopicId,
    index: PartitionId,
    partition: &Partition,
) -> Result<MetadataRecord, NotElected> {
    if partition.leader.is_some() {
        return Err(NotElected::Led);
    }
    let live = |b: &&BrokerId| metadata.brokers.get(b).is_some_and(|x| !x.fenced);
    let change = |leader: BrokerId, isr: Vec<BrokerId>, unclean: bool| PartitionChange {
        topic,
        partition: index,
        expected_epoch: partition.partition_epoch,
        leader: Some(leader),
        isr,
        unclean,
    };
    let in_sync = partition
        .replicas
        .iter()
        .filter(|b| partition.isr.contains(b))
        .find(live);
    if let Some(&leader) = in_sync {
        let clean = change(leader, partition.isr.clone(), false);
        return Ok(MetadataRecord::ChangePartition(clean));
    }
    match metadata
        .unclean_order(topic, index, partition)
        .iter()
        .find(live)
    {
        Some(&leader) => Ok(MetadataRecord::ElectUnclean(change(
            leader,
            vec![leader],
            true,
        ))),
        None => Err(NotElected::NoLiveReplica),
    }
}

/// The elections for the partitions named (topic, indexes) that can have
/// one now; the others are left as they are (the broker that asked tells
/// which and why from its own view).
pub fn asked(metadata: &Metadata, partitions: &[(String, Vec<i32>)]) -> Vec<MetadataRecord> {
    super::named_partitions(metadata, partitions)
        .filter_map(|(topic, index, partition)| election(metadata, topic, index, partition).ok())
        .collect()
}
