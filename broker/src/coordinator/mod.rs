//! The group coordinator, one [`Coordinator`] per shard: the groups of the
//! `__consumer_offsets` partitions this shard owns and this broker leads.
//! A partition's groups are loaded ([`load`]) the first time a request
//! needs them in a leadership; its groups' calls ([`members`],
//! [`offsets`]) run on its shard, and what must survive a restart is
//! appended to it ([`offsets_partition`]). The per-group work of every API
//! goes through [`Coordinator::on_group`], the way per-partition work goes
//! through the partition layer's fan-out.
//!
//! Built on the partition layer (appends and reads) and the groups' state
//! machines (`crate::groups`, sans I/O).

mod classic_members;
pub mod consumer_groups;
pub mod load;
pub mod members;
pub mod offsets;
pub mod offsets_partition;
pub mod share_groups;
pub mod share_offsets;
pub mod share_persister;
pub mod share_state;
pub mod txn_offsets;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;

use crate::cluster::peers::PeerConnections;
use crate::cluster::routing::PartitionKey;
use crate::cluster::topics::NewTopic;
use crate::cluster::Cluster;
use crate::groups::OFFSETS_TOPIC;
use crate::kafka::Code;
use crate::partition::Partitions;
use crate::runtime::sharded::{LocalFuture, Mesh, ShardGone, Sharded};
use offsets_partition::{coordinator_code, OffsetsPartition};

/// How often each shard checks its groups' timeouts.
const TICK: Duration = Duration::from_millis(100);

/// Segment size of `__consumer_offsets` (Kafka's offsets.topic.segment.bytes).
const OFFSETS_SEGMENT_BYTES: &str = "104857600";

/// The coordinator of one shard.
pub struct Coordinator {
    /// The shard's partitions.
    pub partitions: Rc<Partitions>,
    loaded: RefCell<HashMap<PartitionKey, Rc<OffsetsPartition>>>,
    /// Loading is one partition at a time, so none is loaded twice.
    loading: futures::lock::Mutex<()>,
    /// Connections to other brokers' coordinators (share-partition
    /// state: `share_persister`).
    share_peers: PeerConnections,
    peers: Sharded<Coordinator>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its id.
    pub group: String,
    /// "consumer", or empty for a group that only stores offsets.
    pub protocol_type: String,
    /// Its state, by Kafka's name for its type's states.
    pub state: &'static str,
    /// "classic" or "consumer" (KIP-848).
    pub group_type: &'static str,
}

impl Coordinator {
    /// Shard `partitions`' coordinator (nothing loaded); `mesh` reaches
    /// every shard's.
    pub fn new(partitions: Rc<Partitions>, mesh: Mesh<Coordinator>) -> Rc<Coordinator> {
        let index = partitions.cluster.shard();
        Rc::new_cyclic(|this| Coordinator {
            partitions,
            loaded: RefCell::default(),
            loading: futures::lock::Mutex::new(()),
            share_peers: PeerConnections::default(),
            peers: Sharded::new(index, this.clone(), mesh),
        })
    }

    fn cluster(&self) -> &Cluster {
        &self.partitions.cluster
    }

    /// Runs `work` on the coordinator of `group` (the shard owning its
    /// partition, with the partition's groups loaded); a failure on the way
    /// becomes `failed(code)`. Like produce, the work is a task of that
    /// shard: a client going away does not cancel a write half-way.
    pub async fn on_group<T, W>(&self, group: &str, failed: fn(Code) -> T, work: W) -> T
    where
        T: Send + 'static,
        W: FnOnce(Rc<OffsetsPartition>) -> LocalFuture<T> + Send + 'static,
    {
        let (key, owner) = match self.cluster().route_group(group) {
            Ok(route) => route,
            Err(code) => return failed(code),
        };
        self.peers
            .invoke_on(owner, move |owner| {
                Box::pin(async move {
                    match owner.partition(key).await {
                        Ok(partition) => work(partition).await,
                        Err(code) => failed(code),
                    }
                })
            })
            .await
            .unwrap_or_else(|_| failed(ResponseError::CoordinatorNotAvailable.code()))
    }

    /// Runs `work` on every shard's coordinator at once; the results in
    /// shard order.
    pub async fn on_every_shard<T, W>(&self, work: W) -> Vec<Result<T, ShardGone>>
    where
        T: Send + 'static,
        W: Fn(Rc<Coordinator>) -> LocalFuture<T> + Clone + Send + 'static,
    {
        self.peers.invoke_on_all(work).await
    }

    /// The loaded groups of a partition this shard owns, loading them
    /// from the log first if needed.
    pub async fn partition(&self, key: PartitionKey) -> Result<Rc<OffsetsPartition>, Code> {
        // Leadership is checked on every request (it can move).
        let led = self
            .partitions
            .open_led(key)
            .await
            .map_err(coordinator_code)?;
        let current = |loaded: &HashMap<PartitionKey, Rc<OffsetsPartition>>| {
            loaded
                .get(&key)
                .filter(|p| p.epoch() == led.epoch && !p.is_stale())
                .cloned()
        };
        if let Some(loaded) = current(&self.loaded.borrow()) {
            return Ok(loaded);
        }
        let _one_at_a_time = self.loading.lock().await;
        if let Some(loaded) = current(&self.loaded.borrow()) {
            return Ok(loaded);
        }
        // Loaded in an older leadership (or never, or an append failed):
        // its groups are stale.
        self.loaded.borrow_mut().remove(&key);
        let delay = Duration::from_millis(self.cluster().config.group_initial_rebalance_delay_ms);
        let started = Instant::now();
        let groups = load::load(&led, delay).await.map_err(|e| {
            tracing::error!(partition = key.index, error = %e, "cannot load groups");
            ResponseError::CoordinatorNotAvailable.code()
        })?;
        tracing::info!(
            partition = key.index,
            groups = groups.ids().len(),
            ms = started.elapsed().as_millis() as u64,
            "loaded the groups of a __consumer_offsets partition"
        );
        let partition = OffsetsPartition::new(self.partitions.clone(), key, led.epoch, groups);
        let partition = Rc::new(partition);
        self.loaded.borrow_mut().insert(key, partition.clone());
        Ok(partition)
    }

    /// Partition `key`'s groups, if loaded here (in whatever leadership).
    pub fn loaded_partition(&self, key: PartitionKey) -> Option<Rc<OffsetsPartition>> {
        self.loaded.borrow().get(&key).cloned()
    }

    /// The partitions whose groups are loaded here in the leadership
    /// current now (what /metrics reports: a scrape loads nothing).
    pub fn loaded_current(&self) -> Vec<Rc<OffsetsPartition>> {
        let view = self.cluster().view.borrow();
        let me = self.cluster().me;
        self.loaded
            .borrow()
            .iter()
            .filter(|(key, loaded)| {
                view.metadata
                    .topics
                    .get(&key.topic)
                    .and_then(|t| t.partitions.get(key.index as usize))
                    .is_some_and(|p| {
                        p.leader == Some(me)
                            && crate::partition::epoch::from_metadata(p.leader_epoch)
                                == loaded.epoch()
                    })
            })
            .map(|(_, loaded)| loaded.clone())
            .collect()
    }

    /// The `__consumer_offsets` partitions this shard owns and leads,
    /// loaded (ListGroups must see every group).
    pub async fn all_partitions(&self) -> Vec<Rc<OffsetsPartition>> {
        let keys: Vec<PartitionKey> = self
            .cluster()
            .led_here()
            .into_iter()
            .filter(|r| r.topic.name == OFFSETS_TOPIC)
            .map(|r| r.key)
            .collect();
        let mut out = Vec::new();
        for key in keys {
            if let Ok(partition) = self.partition(key).await {
                out.push(partition);
            }
        }
        out
    }

    /// Checks every loaded group's timeouts, for as long as the shard runs.
    pub async fn tick(self: Rc<Self>) {
        loop {
            glommio::timer::sleep(TICK).await;
            let loaded: Vec<Rc<OffsetsPartition>> =
                self.loaded.borrow().values().cloned().collect();
            for partition in loaded {
                partition.settle_all().await;
                partition.expire_consumer_members(Instant::now()).await;
                partition.expire_share_members(Instant::now()).await;
            }
        }
    }
}

/// Creates `__consumer_offsets` (compacted) if it does not exist yet.
pub async fn ensure_offsets_topic(cluster: &Cluster) -> Result<(), Code> {
    let live = {
        let view = cluster.view.borrow();
        if view.metadata.names.contains_key(OFFSETS_TOPIC) {
            return Ok(());
        }
        view.metadata.live_brokers().count()
    };
    let topic = NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: cluster.config.offsets_topic_partitions.max(1) as i32,
        // Kafka's offsets.topic.replication.factor is 3; fewer brokers, fewer copies.
        replication_factor: live.clamp(1, 3) as i16,
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("segment.bytes".into(), Some(OFFSETS_SEGMENT_BYTES.into())),
        ],
    };
    match cluster.create_topic(topic, false).await {
        Ok(_) => {
            tracing::info!("created {OFFSETS_TOPIC}");
            Ok(())
        }
        Err((code, _)) if code == ResponseError::TopicAlreadyExists.code() => Ok(()),
        Err((code, why)) => {
            tracing::warn!(code, %why, "cannot create {OFFSETS_TOPIC}");
            Err(ResponseError::CoordinatorNotAvailable.code())
        }
    }
}
