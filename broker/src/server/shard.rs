//! The composition root of one shard: every service it runs, built in
//! layer order (cluster, partitions, replication, coordinator), each
//! given what it uses, and each reachable from the other shards through
//! its own job queue (see [`crate::runtime::sharded`]). Only this module
//! and the server's start name every service; the transports receive a
//! [`Shard`].

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use control::service::MetadataService;

use super::admission::Admission;
use crate::cluster::quorum::BrokerLife;
use crate::cluster::view::View;
use crate::cluster::Cluster;
use crate::config::BrokerConfig;
use crate::coordinator::Coordinator;
use crate::counters::{Registry, ShardMetrics};
use crate::partition::Partitions;
use crate::quotas::Meters;
use crate::replica::Replication;
use crate::runtime::sharded::{self, JobQueue, Mesh, ShardId};

/// Every shard's services.
pub struct Shard {
    /// This shard's part in the cluster.
    pub cluster: Rc<Cluster>,
    /// The partitions this shard owns.
    pub partitions: Rc<Partitions>,
    /// Their roles and follower fetchers.
    pub replication: Rc<Replication>,
    /// The groups whose `__consumer_offsets` partitions this shard owns.
    pub coordinator: Rc<Coordinator>,
    /// This shard's counters.
    pub metrics: Arc<ShardMetrics>,
    /// Every shard's counters (a scrape sums them).
    pub metrics_registry: Registry,
    /// The client connection limits, shared by every shard.
    pub admission: Arc<Admission>,
    /// This shard's clients' produce and fetch byte rates (quotas).
    pub quota_meters: RefCell<Meters>,
}

/// The meshes of the services reachable from other shards, made before
/// the shards start.
#[derive(Clone)]
pub struct Meshes {
    cluster: Mesh<Cluster>,
    partitions: Mesh<Partitions>,
    coordinator: Mesh<Coordinator>,
}

/// One shard's ends of the meshes.
pub struct Queues {
    cluster: JobQueue<Cluster>,
    partitions: JobQueue<Partitions>,
    coordinator: JobQueue<Coordinator>,
}

/// The meshes for `shards` shards, and each shard's queues.
pub fn meshes(shards: usize) -> (Meshes, Vec<Queues>) {
    let (cluster, cluster_queues) = sharded::mesh(shards);
    let (partitions, partition_queues) = sharded::mesh(shards);
    let (coordinator, coordinator_queues) = sharded::mesh(shards);
    let queues = cluster_queues
        .into_iter()
        .zip(partition_queues)
        .zip(coordinator_queues)
        .map(|((cluster, partitions), coordinator)| Queues {
            cluster,
            partitions,
            coordinator,
        })
        .collect();
    let meshes = Meshes {
        cluster,
        partitions,
        coordinator,
    };
    (meshes, queues)
}

/// What a shard is built from.
pub struct Parts {
    /// Its index.
    pub index: usize,
    /// The broker's configuration.
    pub config: BrokerConfig,
    /// Its copy of the metadata.
    pub view: View,
    /// The broker's life with the controller.
    pub life: Rc<BrokerLife>,
    /// The metadata service, on the shard that runs it.
    pub controller: Option<Rc<MetadataService>>,
    /// Every shard's counters.
    pub metrics_registry: Registry,
    /// The client connection limits.
    pub admission: Arc<Admission>,
    /// How to reach other brokers over TLS.
    pub peer_tls: Option<Arc<crate::cluster::peer_tls::PeerTls>>,
}

impl Shard {
    /// Builds shard `parts.index`'s services and serves the jobs other
    /// shards send them.
    pub fn start(parts: Parts, meshes: Meshes, queues: Queues) -> Rc<Shard> {
        let metrics = parts.metrics_registry[parts.index].clone();
        let cluster = Cluster::new(
            ShardId(parts.index),
            parts.config,
            parts.view,
            parts.life,
            parts.controller,
            parts.peer_tls,
            meshes.cluster,
        );
        let partitions = Partitions::new(cluster.clone(), metrics.clone(), meshes.partitions);
        let replication = Replication::new(partitions.clone());
        let coordinator = Coordinator::new(partitions.clone(), meshes.coordinator);
        glommio::spawn_local(sharded::serve(cluster.clone(), queues.cluster)).detach();
        glommio::spawn_local(sharded::serve(partitions.clone(), queues.partitions)).detach();
        glommio::spawn_local(sharded::serve(coordinator.clone(), queues.coordinator)).detach();
        Rc::new(Shard {
            cluster,
            partitions,
            replication,
            coordinator,
            metrics,
            metrics_registry: parts.metrics_registry,
            admission: parts.admission,
            quota_meters: RefCell::new(Meters::default()),
        })
    }
}
