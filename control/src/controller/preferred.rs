//! Preferred leaders: a partition's first replica leads it when it can.
//!
//! Placement spreads first replicas evenly over the brokers, so leadership
//! is balanced as long as each partition is led by its first replica. A
//! broker's loss moves its leaderships to others, and nothing moved them
//! back: after a whole cluster restarted, whichever broker came back first
//! led every partition. Kafka's answer, kept here: elections that give a
//! partition back to its preferred replica, asked for by an operator
//! (ElectLeaders) or made by the active controller every
//! `leader_imbalance_check_interval` (`auto.leader.rebalance.enable`).
//! A preferred replica is elected only while it is live and in sync, the
//! clean election's rule.

use crate::model::record::{MetadataRecord, PartitionChange};
use crate::model::types::{PartitionId, TopicId};
use crate::model::{Metadata, Partition};

/// Why a partition's preferred replica is not elected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotElected {
    /// It leads already (Kafka's ELECTION_NOT_NEEDED).
    Leads,
    /// It is fenced, unknown or out of sync (PREFERRED_LEADER_NOT_AVAILABLE).
    Unavailable,
}

/// The change that makes `partition`'s preferred replica its leader.
pub fn preferred_election(
    metadata: &Metadata,
    topic: TopicId,
    index: PartitionId,
    partition: &Partition,
) -> Result<PartitionChange, NotElected> {
    let Some(&preferred) = partition.replicas.first() else {
        return Err(NotElected::Unavailable);
    };
    if partition.leader == Some(preferred) {
        return Err(NotElected::Leads);
    }
    let live = metadata.brokers.get(&preferred).is_some_and(|b| !b.fenced);
    if !live || !partition.isr.contains(&preferred) {
        return Err(NotElected::Unavailable);
    }
    Ok(PartitionChange {
        topic,
        partition: index,
        expected_epoch: partition.partition_epoch,
        leader: Some(preferred),
        isr: partition.isr.clone(),
        unclean: false,
    })
}

/// Every election that would give a led partition back to its live,
/// in-sync preferred replica, at most `max` of them (in topic id and
/// partition order: a cluster with more waiting gets the rest at the
/// next check). A leaderless partition is the controller's other
/// election's (its first live in-sync replica in replica order).
pub fn rebalance(metadata: &Metadata, max: usize) -> Vec<MetadataRecord> {
    let led = metadata.topics.values().flat_map(|topic| {
        topic
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.leader.is_some())
            .map(move |(index, p)| (topic.id, PartitionId(index as i32), p))
    });
    led.filter_map(|(topic, index, partition)| {
        preferred_election(metadata, topic, index, partition).ok()
    })
    .take(max)
    .map(MetadataRecord::ChangePartition)
    .collect()
}

/// The elections an operator asked for (ElectLeaders): for each partition
/// named that exists, the change to its preferred replica where one is
/// possible now; the others are left as they are (the broker that asked
/// tells which and why from its own view).
pub fn asked(metadata: &Metadata, partitions: &[(String, Vec<i32>)]) -> Vec<MetadataRecord> {
    super::named_partitions(metadata, partitions)
        .filter_map(|(topic, index, partition)| {
            preferred_election(metadata, topic, index, partition).ok()
        })
        .map(MetadataRecord::ChangePartition)
        .collect()
}
