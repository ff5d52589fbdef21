//! The link to the active controller: requests go to the metadata service
//! on shard 0 (which forwards them if another broker's node leads), and a
//! shard waits until its own copy of the metadata shows what was
//! committed.

use std::time::Duration;

use control::service::{ControllerError, ControllerRequest, QuorumStatus};
use control::MetadataError;
use kafka_protocol::ResponseError;

use super::Cluster;
use crate::kafka::Code;
use crate::runtime::sharded::ShardId;
use crate::runtime::wait;

/// How long a shard waits for its metadata to show a change the
/// controller committed.
const VIEW_CATCH_UP_MAX: Duration = Duration::from_secs(5);

impl Cluster {
    /// Sends a request to the controller (through the metadata service on
    /// shard 0).
    pub async fn call_controller(&self, request: ControllerRequest) -> Result<(), ControllerError> {
        let result = self
            .peers
            .invoke_on(ShardId::FIRST, move |first| {
                Box::pin(async move {
                    match &first.controller {
                        Some(service) => service.request(request).await,
                        None => Err(ControllerError::NotController { leader: None }),
                    }
                })
            })
            .await;
        result.unwrap_or(Err(ControllerError::Unavailable))
    }

    /// The metadata quorum as this broker's node sees it (None: the node
    /// is gone, the broker stopping).
    pub async fn quorum_status(&self) -> Option<QuorumStatus> {
        let status = self
            .peers
            .invoke_on(ShardId::FIRST, |first| {
                Box::pin(async move { first.controller.as_ref().map(|s| s.quorum_status()) })
            })
            .await;
        status.ok().flatten()
    }

    /// Waits (bounded) until this shard's metadata satisfies `done`: after
    /// the controller commits a change, the next request on this
    /// connection sees it.
    pub async fn catch_up(&self, done: impl Fn(&control::Metadata) -> bool) -> bool {
        let tick = Duration::from_millis(1);
        wait::until(tick, VIEW_CATCH_UP_MAX, || {
            done(&self.view.borrow().metadata)
        })
        .await
    }

    /// Waits (bounded) until every shard's metadata satisfies `done`: a
    /// topic created or deleted through this broker is then seen so by a
    /// request on any of its connections, whichever shard serves it or
    /// owns the partition (Kafka's clients would retry meanwhile; a client
    /// that acts on the answer at once need not).
    pub async fn catch_up_on_every_shard<F>(&self, done: F) -> bool
    where
        F: Fn(&control::Metadata) -> bool + Clone + Send + 'static,
    {
        let caught_up = self
            .peers
            .invoke_on_all(move |shard| {
                let done = done.clone();
                Box::pin(async move { shard.catch_up(done).await })
            })
            .await;
        caught_up.into_iter().all(|shard| shard == Ok(true))
    }
}

/// The Kafka error code (and message) for a refused controller request.
pub fn controller_error(error: &ControllerError) -> (Code, String) {
    let code = match error {
        ControllerError::NotController { .. } => ResponseError::NotController.code(),
        ControllerError::Superseded | ControllerError::Unavailable => {
            ResponseError::RequestTimedOut.code()
        }
        ControllerError::Refused(refused) => refused_code(refused),
    };
    (code, error.to_string())
}

fn refused_code(refused: &MetadataError) -> Code {
    match refused {
        MetadataError::UnknownTopic(_) | MetadataError::UnknownTopicId(_) => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        MetadataError::TopicExists(_) => ResponseError::TopicAlreadyExists.code(),
        MetadataError::InvalidTopicName(_) => ResponseError::InvalidTopicException.code(),
        MetadataError::UnknownPartition { .. } => ResponseError::InvalidPartitions.code(),
        MetadataError::NotEnoughBrokers { .. } => ResponseError::InvalidReplicationFactor.code(),
        MetadataError::UnknownConfig(_) | MetadataError::InvalidConfig { .. } => {
            ResponseError::InvalidConfig.code()
        }
        MetadataError::InvalidPartitionChange(_) => ResponseError::InvalidPartitions.code(),
        MetadataError::InvalidCredential(_) => ResponseError::UnacceptableCredential.code(),
        MetadataError::UnknownCredential { .. } => ResponseError::ResourceNotFound.code(),
        MetadataError::NotQuorumMember(_) => ResponseError::VoterNotFound.code(),
        MetadataError::ReassignmentInProgress { .. } => {
            ResponseError::ReassignmentInProgress.code()
        }
        MetadataError::NoReassignmentInProgress { .. } => {
            ResponseError::NoReassignmentInProgress.code()
        }
        MetadataError::ReassignmentRefused(_) => ResponseError::InvalidReplicaAssignment.code(),
        MetadataError::QuorumMemberBehind { .. } => ResponseError::RequestTimedOut.code(),
        _ => ResponseError::InvalidRequest.code(),
    }
}
