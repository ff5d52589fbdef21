//! The controller's part in partition reassignment (KIP-455): a move
//! begins when an operator asks (its new replicas on the shards that hold
//! the fewest replicas, those staying where they are), and finishes at a
//! tick once every target replica is in the ISR: the leader stays if it is
//! among the target, else the first target replica in sync and live
//! takes over. A cancellation goes back to the original replicas, led by
//! an in-sync one of them.

use crate::model::error::MetadataError;
use crate::model::placement::{least_loaded_shard, Load};
use crate::model::reassignment::Reassignment;
use crate::model::record::{MetadataRecord, PartitionAssignment, PartitionChange};
use crate::model::types::{BrokerId, PartitionId, TopicId};
use crate::model::{Metadata, Partition};

/// The record that moves partition `index` of `topic` to `target`, or
/// cancels its move (None); nothing when it already has those replicas.
pub fn asked(
    metadata: &Metadata,
    topic: TopicId,
    index: PartitionId,
    target: Option<Vec<BrokerId>>,
) -> Result<Option<MetadataRecord>, MetadataError> {
    let partition = metadata.partition(topic, index)?;
    let Some(target) = target else {
        let state = metadata.reassignments.get(&(topic, index)).ok_or(
            MetadataError::NoReassignmentInProgress {
                topic,
                partition: index,
            },
        )?;
        return cancel(metadata, (topic, index), partition, state).map(Some);
    };
    if metadata.reassignments.contains_key(&(topic, index)) {
        return Err(MetadataError::ReassignmentInProgress {
            topic,
            partition: index,
        });
    }
    if target == partition.replicas {
        return Ok(None);
    }
    let load = Load::of(metadata);
    let mut shards = Vec::with_capacity(target.len());
    for broker in &target {
        let staying = partition.replicas.iter().position(|b| b == broker);
        let shard = match staying {
            Some(at) => partition.shards[at],
            None => {
                let known =
                    (metadata.brokers.get(broker)).ok_or(MetadataError::UnknownBroker(*broker))?;
                least_loaded_shard(*broker, known.registration.shards, &load)
            }
        };
        shards.push(shard);
    }
    let record = MetadataRecord::BeginReassignment {
        topic,
        partition: index,
        expected_epoch: partition.partition_epoch,
        target: PartitionAssignment {
            replicas: target,
            shards,
        },
    };
    metadata.validate(&record)?;
    Ok(Some(record))
}

/// Back to the original replicas, led by a live in-sync one of them (the
/// current leader if it is one).
fn cancel(
    metadata: &Metadata,
    (topic, index): (TopicId, PartitionId),
    partition: &Partition,
    state: &Reassignment,
) -> Result<MetadataRecord, MetadataError> {
    let change = finishing_change(metadata, (topic, index), partition, &state.original).ok_or(
        MetadataError::ReassignmentRefused(
            "cancelling would leave the partition no live in-sync replica of its original ones"
                .into(),
        ),
    )?;
    Ok(MetadataRecord::FinishReassignment {
        change,
        cancelled: true,
    })
}

/// The reassignments whose target replicas are all in sync, finished.
pub fn finished(metadata: &Metadata) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for (&(topic, index), state) in &metadata.reassignments {
        let Ok(partition) = metadata.partition(topic, index) else {
            continue;
        };
        if !state.target.iter().all(|b| partition.isr.contains(b)) {
            continue;
        }
        if let Some(change) = finishing_change(metadata, (topic, index), partition, &state.target) {
            records.push(MetadataRecord::FinishReassignment {
                change,
                cancelled: false,
            });
        }
    }
    records
}

/// The leader and ISR a partition keeps within `replicas`: its in-sync
/// ones, led by the current leader if it is among them and live, else the
/// first of them in sync and live; None if none is.
fn finishing_change(
    metadata: &Metadata,
    (topic, index): (TopicId, PartitionId),
    partition: &Partition,
    replicas: &[BrokerId],
) -> Option<PartitionChange> {
    let live = |b: &BrokerId| metadata.brokers.get(b).is_some_and(|x| !x.fenced);
    let isr: Vec<BrokerId> = (replicas.iter())
        .filter(|b| partition.isr.contains(b))
        .copied()
        .collect();
    let leader = partition
        .leader
        .filter(|l| isr.contains(l) && live(l))
        .or_else(|| isr.iter().copied().find(live))?;
    Some(PartitionChange {
        topic,
        partition: index,
        expected_epoch: partition.partition_epoch,
        leader: Some(leader),
        isr,
        unclean: false,
    })
}
