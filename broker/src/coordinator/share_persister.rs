//! The partition layer's [`SharePersister`], answered by the group's
//! coordinator: this broker's (on the shard owning the group's
//! `__consumer_offsets` partition), or another's through
//! ReadShareGroupState / WriteShareGroupState (Kafka's inter-broker calls
//! from a partition leader to the share coordinator).

use std::rc::{Rc, Weak};

use kafka_protocol::messages::read_share_group_state_request::{
    PartitionData as ReadPartition, ReadStateData,
};
use kafka_protocol::messages::write_share_group_state_request::{
    PartitionData as WritePartition, StateBatch, WriteStateData,
};
use kafka_protocol::messages::{
    ReadShareGroupStateRequest, ReadShareGroupStateResponse, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Coordinator;
use crate::cluster::peers::Purpose;
use crate::groups::share_state::{ShareStateKey, ShareStateValue, StoredState};
use crate::kafka::Code;
use crate::partition::share_states::SharePersister;
use crate::runtime::sharded::LocalFuture;
use crate::share::partition::PersistedState;

/// The versions of the calls between brokers.
const VERSION: i16 = 0;

/// Persists with the group coordinators, from one shard.
pub struct CoordinatorPersister(pub Weak<Coordinator>);

impl SharePersister for CoordinatorPersister {
    fn read(
        &self,
        key: ShareStateKey,
        leader_epoch: i32,
    ) -> LocalFuture<Result<StoredState, Code>> {
        let coordinator = self.0.upgrade();
        Box::pin(async move {
            let unavailable = ResponseError::CoordinatorNotAvailable.code();
            coordinator
                .ok_or(unavailable)?
                .read_state(key, leader_epoch)
                .await
        })
    }

    fn write(&self, key: ShareStateKey, value: ShareStateValue) -> LocalFuture<Result<(), Code>> {
        let coordinator = self.0.upgrade();
        Box::pin(async move {
            let unavailable = ResponseError::CoordinatorNotAvailable.code();
            coordinator
                .ok_or(unavailable)?
                .write_state(key, value)
                .await
        })
    }
}

impl Coordinator {
    /// `key`'s state for a leader at `leader_epoch`, from its group's
    /// coordinator wherever it is.
    pub async fn read_state(
        self: Rc<Self>,
        key: ShareStateKey,
        leader_epoch: i32,
    ) -> Result<StoredState, Code> {
        // A group's first share-partition may come before anything made
        // the offsets topic (FindCoordinator does).
        super::ensure_offsets_topic(self.cluster()).await?;
        let (broker, _) = self.cluster().group_coordinator(&key.group)?;
        if broker == self.cluster().me {
            let group = key.group.clone();
            return self
                .on_group(&group, Err, move |partition| {
                    Box::pin(async move { partition.read_share_state(&key, leader_epoch).await })
                })
                .await;
        }
        let request = ReadShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(key.group.clone()))
            .with_topics(vec![ReadStateData::default()
                .with_topic_id(uuid::Uuid::from_bytes(key.topic))
                .with_partitions(vec![ReadPartition::default()
                    .with_partition(key.partition)
                    .with_leader_epoch(leader_epoch)])]);
        let answer = (self.share_peers)
            .call(
                self.cluster(),
                (broker, Purpose::ShareState),
                &request,
                VERSION,
            )
            .await?;
        read_answer(&answer)
    }

    /// Writes `key`'s state with its group's coordinator wherever it is.
    pub async fn write_state(
        self: Rc<Self>,
        key: ShareStateKey,
        value: ShareStateValue,
    ) -> Result<(), Code> {
        let (broker, _) = self.cluster().group_coordinator(&key.group)?;
        if broker == self.cluster().me {
            let group = key.group.clone();
            return self
                .on_group(&group, Err, move |partition| {
                    Box::pin(async move { partition.write_share_state(key, value).await })
                })
                .await;
        }
        // (Leaders write states, never deletions.)
        let state = value.state.ok_or(ResponseError::InvalidRequest.code())?;
        let batches = (state.batches.iter())
            .map(|&(first, last, state, count)| {
                StateBatch::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_delivery_state(state)
                    .with_delivery_count(count.min(i16::MAX as u16) as i16)
            })
            .collect();
        let partition = WritePartition::default()
            .with_partition(key.partition)
            .with_leader_epoch(value.leader_epoch)
            .with_state_epoch(value.state_epoch)
            .with_start_offset(state.start)
            .with_state_batches(batches);
        let request = WriteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(key.group.clone()))
            .with_topics(vec![WriteStateData::default()
                .with_topic_id(uuid::Uuid::from_bytes(key.topic))
                .with_partitions(vec![partition])]);
        let answer = (self.share_peers)
            .call(
                self.cluster(),
                (broker, Purpose::ShareState),
                &request,
                VERSION,
            )
            .await?;
        let code = (answer.results.first())
            .and_then(|t| t.partitions.first())
            .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
        match code {
            0 => Ok(()),
            code => Err(code),
        }
    }
}

/// The one partition's state in a ReadShareGroupState answer (a start
/// offset of -1: not initialized).
fn read_answer(answer: &ReadShareGroupStateResponse) -> Result<StoredState, Code> {
    let partition = (answer.results.first()).and_then(|t| t.partitions.first());
    let partition = partition.ok_or(ResponseError::UnknownServerError.code())?;
    if partition.error_code != 0 {
        return Err(partition.error_code);
    }
    let state_epoch = partition.state_epoch;
    if partition.start_offset < 0 {
        return Ok(StoredState {
            state_epoch,
            state: None,
        });
    }
    let batches = (partition.state_batches.iter())
        .map(|b| {
            let count = b.delivery_count.max(0) as u16;
            (b.first_offset, b.last_offset, b.delivery_state, count)
        })
        .collect();
    let state = PersistedState {
        start: partition.start_offset,
        batches,
    };
    Ok(StoredState {
        state_epoch,
        state: Some(state),
    })
}
