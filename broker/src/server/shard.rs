//! The composition root of one shard: every service it runs, built in
//! layer order (cluster, partitions, replication, coordinators), each
//! given what it uses, and each reachable from the other shards through
//! its own job queue (see [`crate::runtime::sharded`]). Only this module
//! and the server's start name every service; the transports receive a
//! [`Shard`].

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use control::service::MetadataService;
use futures::channel::oneshot;
use futures::future::Shared;

use super::connection::admission::Admission;
use super::dead_letters::DeadLetterWriter;
use crate::cluster::quorum::BrokerLife;
use crate::cluster::view::View;
use crate::cluster::Cluster;
use crate::config::BrokerConfig;
use crate::coordinator::share_persister::CoordinatorPersister;
use crate::coordinator::txn_offsets::GroupMarkers;
use crate::coordinator::Coordinator;
use crate::counters::{Registry, ShardMetrics};
use crate::partition::Partitions;
use crate::replica::Replication;
use crate::runtime::sharded::{self, JobQueue, Mesh, ShardId, Sharded};
use crate::security::quotas::Meters;
use crate::txn_coordinator::verifier::CoordinatorVerifier;
use crate::txn_coordinator::TxnCoordinator;

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
    /// The transactional ids whose `__transaction_state` partitions this
    /// shard owns.
    pub txn_coordinator: Rc<TxnCoordinator>,
    /// This shard's counters.
    pub metrics: Arc<ShardMetrics>,
    /// Every shard's counters (a scrape sums them).
    pub metrics_registry: Registry,
    /// The client connection limits, shared by every shard.
    pub admission: Arc<Admission>,
    /// This shard's clients' produce and fetch byte rates (quotas).
    pub quota_meters: RefCell<Meters>,
    /// The client connections this shard serves.
    pub connections: Rc<ConnectionHost>,
    /// Every shard's connection host: a connection moves to the shard
    /// owning the partitions it reads and writes.
    pub connection_hosts: Sharded<ConnectionHost>,
}

/// Resolves when the shard is stopping.
pub type Stopping = Shared<oneshot::Receiver<()>>;

/// The client connections a shard serves: counted (a stop waits for them
/// to finish) and, while the shard accepts, taken over from other shards.
#[derive(Default)]
pub struct ConnectionHost {
    shard: RefCell<Weak<Shard>>,
    open: Cell<usize>,
    stopping: RefCell<Option<Stopping>>,
    /// Set when the shard's stop begins (its stop signal resolves only
    /// once something polls it, which a shard without connections never
    /// does).
    stopped: Cell<bool>,
}

impl ConnectionHost {
    /// The shard accepts connections until `stopping` resolves.
    pub fn accepting(&self, stopping: Stopping) {
        self.stopping.replace(Some(stopping));
    }

    /// The shard's stop began: it takes no more connections.
    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// The shard and its stop signal while it accepts connections (None
    /// before it accepts, and once it stops).
    pub fn serving(&self) -> Option<(Rc<Shard>, Stopping)> {
        if self.stopped.get() {
            return None;
        }
        let stopping = self.stopping.borrow().clone()?;
        Some((self.shard.borrow().upgrade()?, stopping))
    }

    /// Connections open on this shard, over all ports.
    pub fn open(&self) -> usize {
        self.open.get()
    }

    /// One more connection open.
    pub fn opened(&self) {
        self.open.set(self.open.get() + 1);
    }

    /// One connection closed (or moved to another shard).
    pub fn closed(&self) {
        self.open.set(self.open.get() - 1);
    }
}

/// The meshes of the services reachable from other shards, made before
/// the shards start.
#[derive(Clone)]
pub struct Meshes {
    cluster: Mesh<Cluster>,
    partitions: Mesh<Partitions>,
    coordinator: Mesh<Coordinator>,
    txn_coordinator: Mesh<TxnCoordinator>,
    connections: Mesh<ConnectionHost>,
}

/// One shard's ends of the meshes.
pub struct Queues {
    cluster: JobQueue<Cluster>,
    partitions: JobQueue<Partitions>,
    coordinator: JobQueue<Coordinator>,
    txn_coordinator: JobQueue<TxnCoordinator>,
    connections: JobQueue<ConnectionHost>,
}

/// The meshes for `shards` shards, and each shard's queues.
pub fn meshes(shards: usize) -> (Meshes, Vec<Queues>) {
    let (cluster, cluster_queues) = sharded::mesh(shards);
    let (partitions, partition_queues) = sharded::mesh(shards);
    let (coordinator, coordinator_queues) = sharded::mesh(shards);
    let (txn_coordinator, txn_coordinator_queues) = sharded::mesh(shards);
    let (connections, connection_queues) = sharded::mesh(shards);
    let queues = cluster_queues
        .into_iter()
        .zip(partition_queues)
        .zip(coordinator_queues)
        .zip(txn_coordinator_queues)
        .zip(connection_queues)
        .map(
            |((((cluster, partitions), coordinator), txn_coordinator), connections)| Queues {
                cluster,
                partitions,
                coordinator,
                txn_coordinator,
                connections,
            },
        )
        .collect();
    let meshes = Meshes {
        cluster,
        partitions,
        coordinator,
        txn_coordinator,
        connections,
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
    /// Tiered storage's object store (its thread's handle).
    pub remote_store: Option<crate::remote_store::RemoteStore>,
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
        let partitions = Partitions::new(
            cluster.clone(),
            metrics.clone(),
            meshes.partitions,
            parts.remote_store,
        );
        let replication = Replication::new(partitions.clone());
        let coordinator = Coordinator::new(partitions.clone(), meshes.coordinator);
        let txn_coordinator = TxnCoordinator::new(partitions.clone(), meshes.txn_coordinator);
        let verifier = CoordinatorVerifier(Rc::downgrade(&txn_coordinator));
        partitions.txn_verifier.replace(Some(Rc::new(verifier)));
        let persister = CoordinatorPersister(Rc::downgrade(&coordinator));
        (partitions.share_states.persister).replace(Some(Rc::new(persister)));
        let dead_letters = DeadLetterWriter::new(&partitions);
        (partitions.share_states.dead_letters).replace(Some(Rc::new(dead_letters)));
        let markers = GroupMarkers(Rc::downgrade(&coordinator));
        partitions.marker_listener.replace(Some(Rc::new(markers)));
        glommio::spawn_local(sharded::serve(cluster.clone(), queues.cluster)).detach();
        glommio::spawn_local(sharded::serve(partitions.clone(), queues.partitions)).detach();
        glommio::spawn_local(sharded::serve(coordinator.clone(), queues.coordinator)).detach();
        glommio::spawn_local(sharded::serve(
            txn_coordinator.clone(),
            queues.txn_coordinator,
        ))
        .detach();
        let connections = Rc::new(ConnectionHost::default());
        let connection_hosts = Sharded::new(
            ShardId(parts.index),
            Rc::downgrade(&connections),
            meshes.connections,
        );
        glommio::spawn_local(sharded::serve(connections.clone(), queues.connections)).detach();
        let shard = Rc::new(Shard {
            cluster,
            partitions,
            replication,
            coordinator,
            txn_coordinator,
            metrics,
            metrics_registry: parts.metrics_registry,
            admission: parts.admission,
            quota_meters: RefCell::new(Meters::default()),
            connections,
            connection_hosts,
        });
        shard.connections.shard.replace(Rc::downgrade(&shard));
        shard
    }
}
