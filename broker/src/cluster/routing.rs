//! Where work for a topic, partition or group runs: which broker holds
//! it, and which of this broker's shards owns its replica. A pure function
//! of the metadata (the shard the controller placed the replica on), so
//! every shard routes without asking.

use std::net::SocketAddr;
use std::rc::Rc;

use control::{BrokerId, Partition, Topic, TopicId};
use kafka_protocol::ResponseError;

use super::Cluster;
use crate::groups::{offsets_partition, OFFSETS_TOPIC};
use crate::kafka::Code;
use crate::runtime::sharded::ShardId;
use crate::transactions::TRANSACTION_STATE_TOPIC;

/// A partition: topic and index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    /// The topic's id.
    pub topic: TopicId,
    /// The partition index.
    pub index: u32,
}

/// Where a partition's work runs (its key and owning shard), or the error
/// code to answer with.
pub type Route = Result<(PartitionKey, ShardId), Code>;

/// The shard of `broker` that owns replica `partition`, if `broker` holds one.
pub fn owner_shard(partition: &Partition, broker: BrokerId, shards: usize) -> Option<ShardId> {
    let at = partition.replicas.iter().position(|r| *r == broker)?;
    let shard = partition.shards.get(at).map_or(0, |s| s.0 as usize);
    // The placement used the shard count the broker registered with; a
    // restart with fewer shards folds the rest onto the ones it has.
    Some(ShardId(shard % shards.max(1)))
}

/// A partition this shard holds a replica of, as the metadata has it.
pub struct Replica {
    /// Its key.
    pub key: PartitionKey,
    /// Its topic (configuration included), shared by the topic's
    /// replicas: one copy per topic, not per partition (a copy each made
    /// a 10,000-partition topic cost 10,000 x 10,000 partitions' memory).
    pub topic: Rc<Topic>,
    /// The partition (leader, replicas, ISR, epochs).
    pub partition: Partition,
}

impl Cluster {
    /// Routes partition `index` of the topic named `topic`.
    pub fn route_by_name(&self, topic: &str, index: i32) -> Route {
        let view = self.view.borrow();
        let topic = view
            .metadata
            .topic_by_name(topic)
            .map_err(|_| ResponseError::UnknownTopicOrPartition.code())?;
        self.route_in(topic, index)
    }

    /// The name of the topic `id`, if it exists.
    pub fn topic_name(&self, id: TopicId) -> Option<String> {
        let view = self.view.borrow();
        view.metadata.topic(id).ok().map(|t| t.name.clone())
    }

    /// [`Cluster::route_by_name`] for the versions that name topics by id.
    pub fn route_by_id(&self, topic: TopicId, index: i32) -> Route {
        let view = self.view.borrow();
        let topic = view
            .metadata
            .topic(topic)
            .map_err(|_| ResponseError::UnknownTopicId.code())?;
        self.route_in(topic, index)
    }

    fn route_in(&self, topic: &Topic, index: i32) -> Route {
        let partition = usize::try_from(index)
            .ok()
            .and_then(|i| topic.partitions.get(i))
            .ok_or(ResponseError::UnknownTopicOrPartition.code())?;
        let owner = owner_shard(partition, self.me, self.shards())
            .ok_or(ResponseError::NotLeaderOrFollower.code())?;
        let key = PartitionKey {
            topic: topic.id,
            index: index as u32,
        };
        Ok((key, owner))
    }

    /// The `__consumer_offsets` partition of a group, when this broker
    /// coordinates it (leads that partition); else NOT_COORDINATOR, or
    /// COORDINATOR_NOT_AVAILABLE while the topic does not exist.
    pub fn route_group(&self, group: &str) -> Route {
        self.route_keyed(OFFSETS_TOPIC, group)
    }

    /// The `__transaction_state` partition of a transactional id, when
    /// this broker coordinates it; errors as [`Cluster::route_group`].
    pub fn route_transactional(&self, transactional_id: &str) -> Route {
        self.route_keyed(TRANSACTION_STATE_TOPIC, transactional_id)
    }

    /// The broker coordinating `group` (leading its offsets partition),
    /// with its inter-broker Kafka listener; it must not be fenced.
    pub fn group_coordinator(&self, group: &str) -> Result<(BrokerId, String), Code> {
        self.keyed_coordinator(OFFSETS_TOPIC, group)
    }

    /// The broker coordinating a transactional id (leading its
    /// `__transaction_state` partition), as [`Cluster::group_coordinator`].
    pub fn transaction_coordinator(
        &self,
        transactional_id: &str,
    ) -> Result<(BrokerId, String), Code> {
        self.keyed_coordinator(TRANSACTION_STATE_TOPIC, transactional_id)
    }

    fn route_keyed(&self, topic: &str, key: &str) -> Route {
        let view = self.view.borrow();
        let (topic, index) = keyed_partition(&view.metadata, topic, key)?;
        let partition = &topic.partitions[index as usize];
        if partition.leader != Some(self.me) {
            return Err(ResponseError::NotCoordinator.code());
        }
        let owner = owner_shard(partition, self.me, self.shards())
            .ok_or(ResponseError::NotCoordinator.code())?;
        Ok((
            PartitionKey {
                topic: topic.id,
                index,
            },
            owner,
        ))
    }

    fn keyed_coordinator(&self, topic: &str, key: &str) -> Result<(BrokerId, String), Code> {
        let unavailable = ResponseError::CoordinatorNotAvailable.code();
        let view = self.view.borrow();
        let (topic, index) = keyed_partition(&view.metadata, topic, key)?;
        let leader = topic.partitions[index as usize].leader.ok_or(unavailable)?;
        let broker = view
            .metadata
            .brokers
            .get(&leader)
            .filter(|b| !b.fenced)
            .ok_or(unavailable)?;
        Ok((leader, broker.registration.listener.clone()))
    }

    /// Where clients of `listener` reach `broker`, if it has that listener.
    pub fn client_endpoint(&self, broker: BrokerId, listener: &str) -> Option<String> {
        let view = self.view.borrow();
        let broker = view.metadata.brokers.get(&broker)?;
        view.metadata.endpoint(broker, listener).map(str::to_string)
    }

    /// A broker's inter-broker Kafka listener, if the metadata knows it.
    pub fn address_of(&self, broker: BrokerId) -> Option<SocketAddr> {
        let view = self.view.borrow();
        let broker = view.metadata.brokers.get(&broker)?;
        broker.registration.listener.parse().ok()
    }

    /// The Kafka listener of the partition's leader, if another broker
    /// leads it.
    pub fn leader_elsewhere(&self, topic: &str, partition: i32) -> Option<SocketAddr> {
        let leader = {
            let view = self.view.borrow();
            let topic = view.metadata.topic_by_name(topic).ok()?;
            topic
                .partitions
                .get(usize::try_from(partition).ok()?)?
                .leader?
        };
        (leader != self.me).then(|| self.address_of(leader))?
    }

    /// Whether this shard holds a replica of the partition, as the
    /// metadata has it now.
    pub fn holds_here(&self, key: PartitionKey) -> bool {
        let view = self.view.borrow();
        let Some(topic) = view.metadata.topics.get(&key.topic) else {
            return false;
        };
        let partition = topic.partitions.get(key.index as usize);
        partition.and_then(|p| owner_shard(p, self.me, self.shards())) == Some(self.shard())
    }

    /// Every partition this shard holds a replica of.
    pub fn replicas_here(&self) -> Vec<Replica> {
        let view = self.view.borrow();
        let mut here = Vec::new();
        for topic in view.metadata.topics.values() {
            let mut shared: Option<Rc<Topic>> = None;
            for (index, partition) in topic.partitions.iter().enumerate() {
                if owner_shard(partition, self.me, self.shards()) == Some(self.shard()) {
                    here.push(Replica {
                        key: PartitionKey {
                            topic: topic.id,
                            index: index as u32,
                        },
                        topic: shared
                            .get_or_insert_with(|| {
                                view.shared_topic(topic.id).expect("a topic of the view")
                            })
                            .clone(),
                        partition: partition.clone(),
                    });
                }
            }
        }
        here
    }

    /// The partitions this shard holds whose leader is this broker.
    pub fn led_here(&self) -> Vec<Replica> {
        let mut led = self.replicas_here();
        led.retain(|r| r.partition.leader == Some(self.me));
        led
    }
}

/// The coordinator topic `topic` (`__consumer_offsets`,
/// `__transaction_state`) and the partition index of `key` in it: both
/// place their keys with the same hash, as Kafka's coordinators do.
fn keyed_partition<'m>(
    metadata: &'m control::Metadata,
    topic: &str,
    key: &str,
) -> Result<(&'m Topic, u32), Code> {
    let topic = metadata
        .topic_by_name(topic)
        .map_err(|_| ResponseError::CoordinatorNotAvailable.code())?;
    Ok((topic, offsets_partition(key, topic.partitions.len() as u32)))
}
