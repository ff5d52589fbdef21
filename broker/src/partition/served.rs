//! A partition this broker serves, opened on its owning shard: checked
//! against the metadata (this broker leads it, or holds a replica; its
//! lease is current) and against the epoch a client believes in.

use std::rc::Rc;

use control::Topic;
use kafka_protocol::ResponseError;
use storage::{LeaderEpoch, Offset};

use super::epoch;
use super::table::OpenPartition;
use super::tiered::Tiering;
use super::Partitions;
use crate::cluster::lease::lease_valid;
use crate::cluster::routing::PartitionKey;
use crate::kafka::Code;

/// A partition this broker serves, open on this (its owning) shard, with
/// its topic as the metadata has it now and the leader epoch to stamp.
pub struct ServedPartition {
    /// The open partition.
    pub partition: Rc<OpenPartition>,
    /// Its topic (configuration included).
    pub topic: Rc<Topic>,
    /// The current leader epoch.
    pub epoch: LeaderEpoch,
    /// The partition's index in its topic.
    pub index: u32,
    /// The object store, when the topic is tiered.
    pub tiering: Option<Rc<Tiering>>,
}

/// Checks the leader epoch a client believes in (`-1`: none given)
/// against the partition's (KIP-320): an older one is FENCED_LEADER_EPOCH
/// (the client has stale metadata), a newer one UNKNOWN_LEADER_EPOCH (this
/// broker has not caught up with the metadata yet).
pub fn check_leader_epoch(requested: i32, current: LeaderEpoch) -> Result<(), Code> {
    match requested {
        -1 => Ok(()),
        e if e < current.0 => Err(ResponseError::FencedLeaderEpoch.code()),
        e if e > current.0 => Err(ResponseError::UnknownLeaderEpoch.code()),
        _ => Ok(()),
    }
}

impl ServedPartition {
    /// Its key.
    pub fn key(&self) -> PartitionKey {
        PartitionKey {
            topic: self.topic.id,
            index: self.index,
        }
    }

    /// The last stable offset as readers see it: for a tiered topic, a
    /// transaction open from below the local log start holds it there (its
    /// records below are still read, from the remote log), down to the
    /// remote log's start.
    pub fn last_stable_offset(&self) -> Offset {
        let log = &self.partition.log;
        if self.tiering.is_none() {
            return log.last_stable_offset();
        }
        let remote = self.partition.remote.current(self.epoch);
        let remote_start = remote.and_then(|manifest| manifest.start_offset());
        log.last_stable_offset_from(remote_start.unwrap_or(Offset(0)))
    }
}

impl Partitions {
    /// Opens a partition this broker leads, on its owning shard.
    pub async fn open_led(&self, key: PartitionKey) -> Result<ServedPartition, Code> {
        self.open_replica(key, true).await
    }

    /// Opens a partition this broker holds a replica of (leads, if
    /// `leader_only`), on its owning shard.
    pub async fn open_replica(
        &self,
        key: PartitionKey,
        leader_only: bool,
    ) -> Result<ServedPartition, Code> {
        let (topic, epoch) = self.served(key, leader_only)?;
        let partition = self.table.get_or_open(key, &topic).await.map_err(|e| {
            if let Err(code) = self.served(key, leader_only) {
                return code; // moved or deleted while it opened
            }
            if !self.cluster.holds_here(key) {
                // Back on this broker, on another of its shards.
                return ResponseError::NotLeaderOrFollower.code();
            }
            tracing::error!(topic = %topic.name, partition = key.index, error = %e, "cannot open a partition");
            ResponseError::KafkaStorageError.code()
        })?;
        let tiering = self
            .tiering
            .clone()
            .filter(|_| topic.config.remote_storage_enable);
        Ok(ServedPartition {
            partition,
            topic,
            epoch,
            index: key.index,
            tiering,
        })
    }

    /// The partition's topic and leader epoch if this broker serves it.
    pub fn served(
        &self,
        key: PartitionKey,
        leader_only: bool,
    ) -> Result<(Rc<Topic>, LeaderEpoch), Code> {
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let view = self.cluster.view.borrow();
        let topic = view.shared_topic(key.topic).ok_or(unknown)?;
        let partition = topic.partitions.get(key.index as usize).ok_or(unknown)?;
        let me = self.cluster.me;
        if partition.leader == Some(me) && !lease_valid() {
            // Perhaps fenced and replaced while it stalled: lead nothing
            // until the controller has answered a heartbeat again.
            return Err(ResponseError::NotLeaderOrFollower.code());
        }
        let serves = if leader_only {
            partition.leader == Some(me)
        } else {
            partition.replicas.contains(&me)
        };
        if !serves {
            return Err(ResponseError::NotLeaderOrFollower.code());
        }
        let epoch = epoch::from_metadata(partition.leader_epoch);
        Ok((topic, epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_with_an_older_epoch_are_fenced_and_a_newer_one_is_unknown() {
        let current = LeaderEpoch(5);
        assert_eq!(
            check_leader_epoch(-1, current),
            Ok(()),
            "not given: not checked"
        );
        assert_eq!(check_leader_epoch(5, current), Ok(()));
        assert_eq!(
            check_leader_epoch(4, current),
            Err(ResponseError::FencedLeaderEpoch.code())
        );
        assert_eq!(
            check_leader_epoch(6, current),
            Err(ResponseError::UnknownLeaderEpoch.code())
        );
        assert_eq!(ResponseError::FencedLeaderEpoch.code(), 74);
        assert_eq!(ResponseError::UnknownLeaderEpoch.code(), 75);
    }
}
