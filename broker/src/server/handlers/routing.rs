//! Finding the shard that owns a partition, opening it there, and calling
//! the controller (on shard 0) — what every handler needs.

use std::rc::Rc;
use std::time::{Duration, Instant};

use control::service::{ControllerRequest, RequestError};
use control::{BrokerId, LeaderEpoch, MetadataError, Topic, TopicId};
use kafka_protocol::ResponseError;

use crate::server::partitions::{owner_shard, OpenPartition, PartitionKey};
use crate::server::shard::{LocalFuture, Shard};

/// A Kafka error code.
pub type Code = i16;

/// How long a handler waits for its shard's metadata to show a change the
/// controller committed.
const VIEW_CATCH_UP_MAX: Duration = Duration::from_secs(5);

/// Where a partition's work runs: its key and owning shard, or the error
/// code to answer with.
pub fn route_by_name(
    shard: &Shard,
    topic: &str,
    index: i32,
) -> Result<(PartitionKey, usize), Code> {
    let view = shard.view.borrow();
    let topic = view
        .metadata
        .topic_by_name(topic)
        .map_err(|_| ResponseError::UnknownTopicOrPartition.code())?;
    route_in(shard, topic, index)
}

/// [`route_by_name`] for the versions that name topics by id.
pub fn route_by_id(
    shard: &Shard,
    topic: TopicId,
    index: i32,
) -> Result<(PartitionKey, usize), Code> {
    let view = shard.view.borrow();
    let topic = view
        .metadata
        .topic(topic)
        .map_err(|_| ResponseError::UnknownTopicId.code())?;
    route_in(shard, topic, index)
}

fn route_in(shard: &Shard, topic: &Topic, index: i32) -> Result<(PartitionKey, usize), Code> {
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or(ResponseError::UnknownTopicOrPartition.code())?;
    let me = BrokerId(shard.config.node_id);
    let owner =
        owner_shard(partition, me, shard.count).ok_or(ResponseError::NotLeaderOrFollower.code())?;
    Ok((
        PartitionKey {
            topic: topic.id,
            index: index as u32,
        },
        owner,
    ))
}

/// A partition led by this broker, open on this (its owning) shard, with
/// its topic as the metadata has it now and the leader epoch to stamp.
pub struct Led {
    /// The open partition.
    pub partition: Rc<OpenPartition>,
    /// Its topic (configuration included).
    pub topic: Topic,
    /// The current leader epoch.
    pub epoch: LeaderEpoch,
    /// The partition's index in its topic.
    pub index: u32,
}

/// Opens a partition this broker leads, on its owning shard.
pub async fn open_led(shard: &Shard, key: PartitionKey) -> Result<Led, Code> {
    open_replica(shard, key, true).await
}

/// Opens a partition this broker holds a replica of (leads, if
/// `leader_only`), on its owning shard.
pub async fn open_replica(
    shard: &Shard,
    key: PartitionKey,
    leader_only: bool,
) -> Result<Led, Code> {
    let (topic, epoch) = {
        let view = shard.view.borrow();
        let topic = view
            .metadata
            .topic(key.topic)
            .map_err(|_| ResponseError::UnknownTopicOrPartition.code())?;
        let partition = topic
            .partitions
            .get(key.index as usize)
            .ok_or(ResponseError::UnknownTopicOrPartition.code())?;
        let me = BrokerId(shard.config.node_id);
        if partition.leader == Some(me) && !crate::server::metadata_view::lease_valid() {
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
        (topic.clone(), partition.leader_epoch)
    };
    let partition = shard
        .partitions
        .get_or_open(key, &topic)
        .await
        .map_err(|e| {
            tracing::error!(topic = %topic.name, partition = key.index, error = %e, "cannot open a partition");
            ResponseError::KafkaStorageError.code()
        })?;
    Ok(Led {
        partition,
        topic,
        epoch,
        index: key.index,
    })
}

/// Where a partition's work runs, or the error to answer with.
pub type Route = Result<(PartitionKey, usize), Code>;

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

/// Runs `work` on the shard owning the routed partition, with the
/// partition open there; a failure on the way (routing, opening, a shard
/// gone) becomes `failed(code)`. The work runs as a task of the owning
/// shard, so the caller going away cannot cancel it half-way.
pub async fn on_led_partition<T, W>(
    shard: &Rc<Shard>,
    route: Route,
    failed: fn(Code) -> T,
    work: W,
) -> T
where
    T: Send + 'static,
    W: FnOnce(Rc<Shard>, Led) -> LocalFuture<T> + Send + 'static,
{
    on_partition(shard, route, true, failed, work).await
}

/// [`on_led_partition`] for a partition this broker leads or follows
/// (`leader_only` false): the work sees the role and decides.
pub async fn on_partition<T, W>(
    shard: &Rc<Shard>,
    route: Route,
    leader_only: bool,
    failed: fn(Code) -> T,
    work: W,
) -> T
where
    T: Send + 'static,
    W: FnOnce(Rc<Shard>, Led) -> LocalFuture<T> + Send + 'static,
{
    let (key, owner) = match route {
        Ok(route) => route,
        Err(code) => return failed(code),
    };
    shard
        .run_on(owner, move |owner| {
            Box::pin(async move {
                match open_replica(&owner, key, leader_only).await {
                    Ok(led) => work(owner.clone(), led).await,
                    Err(code) => failed(code),
                }
            })
        })
        .await
        .unwrap_or_else(|_| failed(ResponseError::KafkaStorageError.code()))
}

/// Sends a request to the controller (the metadata service on shard 0).
pub async fn call_controller(
    shard: &Rc<Shard>,
    request: ControllerRequest,
) -> Result<(), RequestError> {
    let result = shard
        .run_on(0, move |shard| {
            Box::pin(async move {
                match &shard.controller {
                    Some(service) => service.request(request).await,
                    None => Err(RequestError::NotController { leader: None }),
                }
            })
        })
        .await;
    result.unwrap_or(Err(RequestError::Unavailable))
}

/// Waits (bounded) until this shard's metadata satisfies `done`: after the
/// controller commits a change, the next request on this connection sees it.
pub async fn catch_up(shard: &Shard, done: impl Fn(&control::Metadata) -> bool) -> bool {
    let started = Instant::now();
    while !done(&shard.view.borrow().metadata) {
        if started.elapsed() > VIEW_CATCH_UP_MAX {
            return false;
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    true
}

/// The Kafka error code (and message) for a refused controller request.
pub fn controller_error(error: &RequestError) -> (Code, String) {
    let code = match error {
        RequestError::NotController { .. } => ResponseError::NotController.code(),
        RequestError::Superseded | RequestError::Unavailable => {
            ResponseError::RequestTimedOut.code()
        }
        RequestError::Refused(refused) => match refused {
            MetadataError::UnknownTopic(_) | MetadataError::UnknownTopicId(_) => {
                ResponseError::UnknownTopicOrPartition.code()
            }
            MetadataError::TopicExists(_) => ResponseError::TopicAlreadyExists.code(),
            MetadataError::InvalidTopicName(_) => ResponseError::InvalidTopicException.code(),
            MetadataError::UnknownPartition { .. } => ResponseError::InvalidPartitions.code(),
            MetadataError::NotEnoughBrokers { .. } => {
                ResponseError::InvalidReplicationFactor.code()
            }
            MetadataError::UnknownConfig(_) | MetadataError::InvalidConfig { .. } => {
                ResponseError::InvalidConfig.code()
            }
            MetadataError::InvalidPartitionChange(_) => ResponseError::InvalidPartitions.code(),
            _ => ResponseError::InvalidRequest.code(),
        },
    };
    (code, error.to_string())
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
