//! Partition reassignment (Kafka's KIP-455) in the metadata: a partition
//! moving to a new replica list. While it moves, its replicas are the
//! target followed by the replicas leaving, so the brokers joining open
//! it and catch up as followers, and may join its ISR; once every target
//! replica is in sync the controller finishes it (replicas become the
//! target, the ISR its part in it, the leader one of it). Cancelled, the
//! partition goes back to its original replicas instead.
//!
//! The state lives in its own map, beside the partitions: `Partition`'s
//! layout is frozen inside earlier snapshot formats.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::error::MetadataError;
use crate::model::record::{PartitionAssignment, PartitionChange};
use crate::model::types::{BrokerId, LeaderEpoch, PartitionEpoch, PartitionId, ShardId, TopicId};
use crate::model::Metadata;

/// A partition moving to new replicas.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct Reassignment {
    /// The replicas before (where a cancellation goes back to).
    pub original: Vec<BrokerId>,
    /// Their shards.
    pub original_shards: Vec<ShardId>,
    /// The replicas it moves to.
    pub target: Vec<BrokerId>,
    /// Their shards.
    pub target_shards: Vec<ShardId>,
}

impl Reassignment {
    /// Target replicas not among the original ones (catching up).
    pub fn adding(&self) -> Vec<BrokerId> {
        let new = self.target.iter().filter(|b| !self.original.contains(b));
        new.copied().collect()
    }

    /// Original replicas not among the target (leaving once it finishes).
    pub fn removing(&self) -> Vec<BrokerId> {
        let old = self.original.iter().filter(|b| !self.target.contains(b));
        old.copied().collect()
    }

    /// The replicas and shards a finished reassignment leaves.
    fn finished(&self, cancelled: bool) -> (&[BrokerId], &[ShardId]) {
        if cancelled {
            (&self.original, &self.original_shards)
        } else {
            (&self.target, &self.target_shards)
        }
    }
}

impl Metadata {
    /// A reassignment may begin: the partition at `expected_epoch`, none
    /// under way, the target a valid assignment of as many replicas, its
    /// staying replicas on their shards.
    pub(crate) fn check_begin_reassignment(
        &self,
        (topic, partition): (TopicId, PartitionId),
        expected_epoch: PartitionEpoch,
        target: &PartitionAssignment,
    ) -> Result<(), MetadataError> {
        let current = self.partition(topic, partition)?;
        if current.partition_epoch != expected_epoch {
            return Err(MetadataError::StalePartitionEpoch {
                topic,
                partition,
                given: expected_epoch,
                current: current.partition_epoch,
            });
        }
        if self.reassignments.contains_key(&(topic, partition)) {
            return Err(MetadataError::ReassignmentInProgress { topic, partition });
        }
        let refused = |why: String| Err(MetadataError::ReassignmentRefused(why));
        if current.replicas.len() == 1 {
            // A single replica's high watermark follows its flushes, set
            // when its log opens: the copy opened during the move (two
            // replicas) would keep a replicated one alone afterwards.
            return refused("a partition with a single replica does not move (yet)".into());
        }
        if target.replicas.len() != current.replicas.len() {
            return refused(format!(
                "the replication factor stays {}: {} replicas given",
                current.replicas.len(),
                target.replicas.len()
            ));
        }
        self.check_assignments(std::slice::from_ref(target), 0)?;
        let moved = (current.replicas.iter().zip(&current.shards))
            .find(|(b, s)| target.shard_of(**b).is_some_and(|t| t != **s));
        if let Some((broker, _)) = moved {
            return refused(format!("broker {broker} keeps the partition on its shard"));
        }
        Ok(())
    }

    pub(crate) fn apply_begin_reassignment(
        &mut self,
        (topic, partition): (TopicId, PartitionId),
        target: &PartitionAssignment,
    ) {
        let p =
            &mut self.topics.get_mut(&topic).expect("validated").partitions[partition.0 as usize];
        let state = Reassignment {
            original: p.replicas.clone(),
            original_shards: p.shards.clone(),
            target: target.replicas.clone(),
            target_shards: target.shards.clone(),
        };
        let (mut replicas, mut shards) = (target.replicas.clone(), target.shards.clone());
        for (broker, shard) in state.original.iter().zip(&state.original_shards) {
            if !target.replicas.contains(broker) {
                replicas.push(*broker);
                shards.push(*shard);
            }
        }
        p.replicas = replicas;
        p.shards = shards;
        // The same leader epoch: the leader takes its new followers in
        // the leadership it has (a new epoch would fail the acks=all
        // produces it holds, as if it had been deposed).
        p.partition_epoch = PartitionEpoch(p.partition_epoch.0 + 1);
        self.reassignments.insert((topic, partition), state);
    }

    /// A reassignment may finish (or be cancelled) with `change`'s leader
    /// and ISR: both within the replicas it leaves, the leader live and in
    /// sync (never an unclean election).
    pub(crate) fn check_finish_reassignment(
        &self,
        change: &PartitionChange,
        cancelled: bool,
    ) -> Result<(), MetadataError> {
        let key = (change.topic, change.partition);
        let state =
            self.reassignments
                .get(&key)
                .ok_or(MetadataError::NoReassignmentInProgress {
                    topic: change.topic,
                    partition: change.partition,
                })?;
        let current = self.partition(change.topic, change.partition)?;
        if current.partition_epoch != change.expected_epoch {
            return Err(MetadataError::StalePartitionEpoch {
                topic: change.topic,
                partition: change.partition,
                given: change.expected_epoch,
                current: current.partition_epoch,
            });
        }
        let (replicas, _) = state.finished(cancelled);
        let invalid = |why: String| Err(MetadataError::InvalidPartitionChange(why));
        let outside = |b: &BrokerId| !replicas.contains(b) || !current.isr.contains(b);
        if change.unclean || change.isr.is_empty() || change.isr.iter().any(outside) {
            return invalid(format!(
                "ISR {:?} is not an in-sync part of replicas {replicas:?}",
                change.isr
            ));
        }
        let live = |b: &BrokerId| self.brokers.get(b).is_some_and(|b| !b.fenced);
        match change.leader {
            Some(leader) if change.isr.contains(&leader) && live(&leader) => Ok(()),
            leader => invalid(format!("leader {leader:?} is not a live in-sync replica")),
        }
    }

    pub(crate) fn apply_finish_reassignment(&mut self, change: &PartitionChange, cancelled: bool) {
        let key = (change.topic, change.partition);
        let state = self.reassignments.remove(&key).expect("validated");
        let (replicas, shards) = state.finished(cancelled);
        let p = &mut self
            .topics
            .get_mut(&change.topic)
            .expect("validated")
            .partitions[change.partition.0 as usize];
        // A new leader epoch when replicas leave (as Kafka does): one that
        // left keeps fetching until it hears, and, were it added back in
        // the same epoch, its stale fetches would make it look caught up
        // before it opens its copy again, empty.
        let removed = p.replicas.iter().any(|b| !replicas.contains(b));
        p.replicas = replicas.to_vec();
        p.shards = shards.to_vec();
        p.isr = change.isr.clone();
        if p.leader != change.leader || removed {
            p.leader_epoch = LeaderEpoch(p.leader_epoch.0 + 1);
        }
        p.leader = change.leader;
        p.partition_epoch = PartitionEpoch(p.partition_epoch.0 + 1);
    }
}

impl Metadata {
    /// A partition's replicas in the order an unclean election tries
    /// them: those a move is adding come last (they may hold nothing yet,
    /// where a replica that fell out of sync holds most of the log).
    pub fn unclean_order(
        &self,
        topic: TopicId,
        index: PartitionId,
        partition: &crate::model::Partition,
    ) -> Vec<BrokerId> {
        let adding = self
            .reassignments
            .get(&(topic, index))
            .map(Reassignment::adding)
            .unwrap_or_default();
        let (new, old): (Vec<BrokerId>, Vec<BrokerId>) =
            partition.replicas.iter().partition(|b| adding.contains(b));
        old.into_iter().chain(new).collect()
    }
}

impl PartitionAssignment {
    /// The shard of `broker`'s replica, if it is one.
    pub fn shard_of(&self, broker: BrokerId) -> Option<ShardId> {
        let index = self.replicas.iter().position(|b| *b == broker)?;
        self.shards.get(index).copied()
    }
}
