//! The transaction coordinator, one [`TxnCoordinator`] per shard: the
//! transactional ids of the `__transaction_state` partitions this shard
//! owns and this broker leads ([`state_partition`]), loaded from the log
//! ([`load`]) as soon as this broker leads one (not on first use, as the
//! group coordinator: a transaction decided but not yet marked would hold
//! its partitions' last stable offset until someone asked). The markers
//! of decided transactions go to the partitions' leaders ([`markers`])
//! over kept connections ([`peers`]); leaders verify transactional batches
//! with the coordinator ([`verifier`]).
//!
//! Built on the partition layer and the coordinator's rules
//! (`crate::transactions`, sans I/O).

pub mod load;
pub mod markers;
pub mod state_partition;
pub mod verifier;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;

use crate::cluster::peers::PeerConnections;
use crate::cluster::routing::PartitionKey;
use crate::cluster::topics::NewTopic;
use crate::cluster::Cluster;
use crate::coordinator::offsets_partition::coordinator_code;
use crate::kafka::Code;
use crate::partition::Partitions;
use crate::runtime::clock::wall_ms;
use crate::runtime::sharded::{LocalFuture, Mesh, ShardGone, Sharded};
use crate::transactions::TRANSACTION_STATE_TOPIC;
use state_partition::StatePartition;

/// How often each shard loads newly led partitions, aborts transactions
/// past their timeout and removes ids past their expiration (Kafka checks
/// timeouts every 10 s, expirations every hour).
const TICK: Duration = Duration::from_secs(1);

/// Ids removed per partition and tick at most: a backlog of expired ids
/// (thousands after a long stop) must not hold up timeouts and loads.
const EXPIRED_PER_TICK: usize = 50;

/// Segment size of `__transaction_state` (Kafka's
/// transaction.state.log.segment.bytes).
const STATE_SEGMENT_BYTES: &str = "104857600";

/// The transaction coordinator of one shard.
pub struct TxnCoordinator {
    /// The shard's partitions.
    pub partitions: Rc<Partitions>,
    /// Connections to the other brokers.
    pub peers: Rc<PeerConnections>,
    loaded: RefCell<HashMap<PartitionKey, Rc<StatePartition>>>,
    /// Loading is one partition at a time, so none is loaded twice.
    loading: futures::lock::Mutex<()>,
    shards: Sharded<TxnCoordinator>,
}

impl TxnCoordinator {
    /// Shard `partitions`' coordinator (nothing loaded); `mesh` reaches
    /// every shard's.
    pub fn new(partitions: Rc<Partitions>, mesh: Mesh<TxnCoordinator>) -> Rc<TxnCoordinator> {
        let index = partitions.cluster.shard();
        Rc::new_cyclic(|this| TxnCoordinator {
            partitions,
            peers: Rc::new(PeerConnections::default()),
            loaded: RefCell::default(),
            loading: futures::lock::Mutex::new(()),
            shards: Sharded::new(index, this.clone(), mesh),
        })
    }

    fn cluster(&self) -> &Cluster {
        &self.partitions.cluster
    }

    /// Runs `work` on the coordinator of `transactional_id` (the shard
    /// owning its partition, loaded); a failure on the way becomes
    /// `failed(code)`. The work is a task of that shard: a client going
    /// away does not cancel a write half-way.
    pub async fn on_id<T, W>(&self, transactional_id: &str, failed: fn(Code) -> T, work: W) -> T
    where
        T: Send + 'static,
        W: FnOnce(Rc<StatePartition>) -> LocalFuture<T> + Send + 'static,
    {
        let (key, owner) = match self.cluster().route_transactional(transactional_id) {
            Ok(route) => route,
            Err(code) => return failed(code),
        };
        self.shards
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

    /// The loaded ids of a partition this shard owns, loading them first
    /// if needed (and resuming the transactions they had decided).
    pub async fn partition(&self, key: PartitionKey) -> Result<Rc<StatePartition>, Code> {
        let led = self
            .partitions
            .open_led(key)
            .await
            .map_err(coordinator_code)?;
        let current = |loaded: &HashMap<PartitionKey, Rc<StatePartition>>| {
            loaded.get(&key).filter(|p| p.epoch() == led.epoch).cloned()
        };
        if let Some(loaded) = current(&self.loaded.borrow()) {
            return Ok(loaded);
        }
        let _one_at_a_time = self.loading.lock().await;
        if let Some(loaded) = current(&self.loaded.borrow()) {
            return Ok(loaded);
        }
        if let Some(stale) = self.loaded.borrow_mut().remove(&key) {
            stale.retire();
        }
        let started = Instant::now();
        let max_timeout = self.cluster().config.transaction_max_timeout_ms;
        let store = load::load(&led, max_timeout).await.map_err(|e| {
            tracing::error!(partition = key.index, error = %e, "cannot load transactional ids");
            ResponseError::CoordinatorLoadInProgress.code()
        })?;
        let preparing = store.preparing();
        tracing::info!(
            partition = key.index,
            ids = store.all().count(),
            preparing = preparing.len(),
            ms = started.elapsed().as_millis() as u64,
            "loaded the transactional ids of a __transaction_state partition"
        );
        let partition = Rc::new(StatePartition::new(
            self.partitions.clone(),
            self.peers.clone(),
            key,
            led.epoch,
            store,
        ));
        self.loaded.borrow_mut().insert(key, partition.clone());
        for (id, metadata) in preparing {
            // Decided before the last coordinator stopped: mark and
            // complete them now, at this coordinator's epoch.
            let step = crate::transactions::store::Step {
                id,
                next: metadata,
                then: crate::transactions::store::Then::Markers,
            };
            partition.complete_in_background(step);
        }
        Ok(partition)
    }

    /// Loads newly led partitions and aborts timed-out transactions, for
    /// as long as the shard runs.
    pub async fn tick(self: Rc<Self>) {
        loop {
            glommio::timer::sleep(TICK).await;
            self.load_led().await;
            let loaded: Vec<Rc<StatePartition>> = self.loaded.borrow().values().cloned().collect();
            for partition in loaded {
                if !partition.still_current() {
                    continue;
                }
                let timed_out = partition.store.borrow_mut().timed_out(wall_ms());
                for step in timed_out {
                    tracing::info!(id = %step.id, "aborting a transaction past its timeout");
                    if let Err(code) = partition.run(step).await {
                        tracing::warn!(code, "cannot abort a timed-out transaction");
                    }
                }
                let expiration_ms = self.cluster().config.transactional_id_expiration_ms;
                let expired = partition.store.borrow_mut().expired(
                    wall_ms(),
                    expiration_ms,
                    EXPIRED_PER_TICK,
                );
                for step in expired {
                    tracing::info!(id = %step.id, "removing a transactional id idle past its expiration");
                    if let Err(code) = partition.run(step).await {
                        tracing::warn!(code, "cannot remove an expired transactional id");
                    }
                }
            }
        }
    }

    /// Loads every `__transaction_state` partition this shard owns and
    /// leads; forgets those it no longer leads.
    async fn load_led(&self) {
        let keys: Vec<PartitionKey> = self
            .cluster()
            .led_here()
            .into_iter()
            .filter(|r| r.topic.name == TRANSACTION_STATE_TOPIC)
            .map(|r| r.key)
            .collect();
        self.loaded.borrow_mut().retain(|key, partition| {
            let keep = keys.contains(key) && partition.still_current();
            if !keep {
                partition.retire();
            }
            keep
        });
        for key in keys {
            let _ = self.partition(key).await;
        }
    }

    /// Runs `work` on every shard's coordinator at once; the results in
    /// shard order.
    pub async fn on_every_shard<T, W>(&self, work: W) -> Vec<Result<T, ShardGone>>
    where
        T: Send + 'static,
        W: Fn(Rc<TxnCoordinator>) -> LocalFuture<T> + Clone + Send + 'static,
    {
        self.shards.invoke_on_all(work).await
    }

    /// Every id of this shard's current loads, with its metadata; None
    /// while a `__transaction_state` partition it leads is not loaded yet
    /// (a list without it would be silently incomplete).
    pub fn all_ids(&self) -> Option<Vec<(String, crate::transactions::metadata::TxnMetadata)>> {
        let loaded = self.loaded_current();
        let led = self
            .cluster()
            .led_here()
            .into_iter()
            .filter(|r| r.topic.name == TRANSACTION_STATE_TOPIC)
            .count();
        if loaded.len() < led {
            return None;
        }
        let mut ids = Vec::new();
        for partition in loaded {
            let store = partition.store.borrow();
            ids.extend(store.all().map(|(id, m)| (id.clone(), m.clone())));
        }
        Some(ids)
    }

    /// How many ids of this shard's current loads are in each state
    /// (/metrics).
    pub fn ids_by_state(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for partition in self.loaded_current() {
            for (_, metadata) in partition.store.borrow().all() {
                *counts.entry(metadata.state.name()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// The partitions loaded here in the leadership current now.
    pub fn loaded_current(&self) -> Vec<Rc<StatePartition>> {
        self.loaded
            .borrow()
            .values()
            .filter(|p| p.still_current())
            .cloned()
            .collect()
    }
}

/// Creates `__transaction_state` (compacted) if it does not exist yet.
pub async fn ensure_state_topic(cluster: &Cluster) -> Result<(), Code> {
    let live = {
        let view = cluster.view.borrow();
        if view.metadata.names.contains_key(TRANSACTION_STATE_TOPIC) {
            return Ok(());
        }
        view.metadata.live_brokers().count()
    };
    let replication_factor = live.clamp(1, 3);
    let topic = NewTopic {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        partitions: cluster.config.transaction_state_partitions.max(1) as i32,
        // Kafka's transaction.state.log.replication.factor is 3 and
        // min.isr 2; fewer brokers, fewer copies.
        replication_factor: replication_factor as i16,
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("segment.bytes".into(), Some(STATE_SEGMENT_BYTES.into())),
            (
                "min.insync.replicas".into(),
                Some(replication_factor.min(2).to_string()),
            ),
        ],
    };
    match cluster.create_topic(topic, false).await {
        Ok(_) => {
            tracing::info!("created {TRANSACTION_STATE_TOPIC}");
            Ok(())
        }
        Err((code, _)) if code == ResponseError::TopicAlreadyExists.code() => Ok(()),
        Err((code, why)) => {
            tracing::warn!(code, %why, "cannot create {TRANSACTION_STATE_TOPIC}");
            Err(ResponseError::CoordinatorNotAvailable.code())
        }
    }
}
