//! The partition layer: a shard's partitions ([`Partitions`], one per
//! shard) and the one way every caller works with them. The table of open
//! logs ([`table`]) and where they live on disk ([`dirs`]); this broker's
//! role for each ([`role`]) and a leader's bookkeeping ([`leader`]);
//! opening one it serves, with the epoch checks ([`led`]); and running
//! work on the shard that owns a partition ([`Partitions::on_partition`]),
//! the fan-out every API's per-partition work goes through.
//!
//! Built on the cluster layer (routing, the metadata, the lease).

pub mod append;
pub mod cache_trim;
pub mod dirs;
pub mod epoch;
pub mod in_use;
pub mod journals;
pub mod leader;
pub mod maintenance;
pub mod markers;
pub mod read;
pub mod role;
pub mod served;
pub mod share_states;
pub mod table;
pub mod tiered;
pub mod txn_verify;

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use storage::CacheShare;

use crate::cluster::routing::{PartitionKey, Route};
use crate::cluster::Cluster;
use crate::counters::ShardMetrics;
use crate::kafka::Code;
use crate::remote_store::RemoteStore;
use crate::runtime::sharded::{LocalFuture, Mesh, ShardGone, ShardId, Sharded};
use crate::share::sessions::{SessionKey, Sessions};
use journals::JournalSettings;
use markers::MarkerListener;
use served::ServedPartition;
use share_states::ShareStates;
use table::PartitionTable;
use tiered::chunks::ChunkCache;
use tiered::Tiering;
use txn_verify::TxnVerifier;

/// One shard's partitions, and its way to every other shard's.
pub struct Partitions {
    /// This shard's part in the cluster.
    pub cluster: Rc<Cluster>,
    /// The partitions this shard has open.
    pub table: PartitionTable,
    /// This shard's counters.
    pub metrics: Arc<ShardMetrics>,
    /// Reaches the transaction coordinators (installed by the shard once
    /// they exist; transactional batches are refused until then).
    pub txn_verifier: RefCell<Option<Rc<dyn TxnVerifier>>>,
    /// Hears of markers on `__consumer_offsets` (the group coordinator,
    /// installed by the shard).
    pub marker_listener: RefCell<Option<Rc<dyn MarkerListener>>>,
    /// The share groups' share-partitions of the partitions it leads.
    pub share_states: ShareStates,
    /// The share sessions whose keys hash to this shard
    /// ([`Partitions::share_session_shard`]).
    pub share_sessions: RefCell<Sessions>,
    /// The object store of tiered topics, None when `remote_store = none`.
    pub tiering: Option<Rc<Tiering>>,
    /// The partitions given a leadership with followers here: the ones
    /// `replica::isr_loop` looks at, so that its 10 passes a second
    /// cost nothing for the partitions without followers. Added to when a
    /// role is given, dropped by the loop once no longer such a
    /// leadership (a leadership gets its followers only when given).
    pub led_with_followers: RefCell<HashSet<PartitionKey>>,
    peers: Sharded<Partitions>,
}

impl Partitions {
    /// Shard `index`'s partitions (none open yet); `mesh` reaches every
    /// shard's.
    pub fn new(
        cluster: Rc<Cluster>,
        metrics: Arc<ShardMetrics>,
        mesh: Mesh<Partitions>,
        remote_store: Option<RemoteStore>,
    ) -> Rc<Partitions> {
        let cache_budget = cluster.config.remote_cache_bytes as usize;
        let tiering = remote_store.map(|store| {
            Rc::new(Tiering {
                store,
                cache: RefCell::new(ChunkCache::new(cache_budget)),
                metrics: metrics.clone(),
            })
        });
        let index = cluster.shard();
        let cache_bytes = cluster.config.log_cache_bytes_per_shard(cluster.shards());
        let sessions = cluster.config.group_share_max_share_sessions as usize;
        let sessions_per_shard = sessions.div_ceil(cluster.shards()).max(1);
        let holder = cluster.clone();
        Rc::new_cyclic(|this| Partitions {
            table: PartitionTable::new(
                cluster.partitions_root(),
                CacheShare::new(cache_bytes),
                JournalSettings::of_config(&cluster.config, index.0),
                Box::new(move |key| holder.holds_here(key)),
            ),
            cluster,
            metrics,
            txn_verifier: RefCell::new(None),
            marker_listener: RefCell::new(None),
            share_states: ShareStates::default(),
            share_sessions: RefCell::new(Sessions::new(sessions_per_shard)),
            tiering,
            led_with_followers: RefCell::new(HashSet::new()),
            peers: Sharded::new(index, this.clone(), mesh),
        })
    }

    /// Runs `work` on the shard owning the routed partition, with the
    /// partition open there and led by this broker; a failure on the way
    /// (routing, opening, a shard gone) is its error code. The work runs
    /// as a task of the owning shard, so the caller going away cannot
    /// cancel it half-way.
    pub async fn on_led_partition<T, W>(&self, route: Route, work: W) -> Result<T, Code>
    where
        T: Send + 'static,
        W: FnOnce(Rc<Partitions>, ServedPartition) -> LocalFuture<Result<T, Code>> + Send + 'static,
    {
        self.on_partition(route, true, work).await
    }

    /// [`Partitions::on_led_partition`] for a partition this broker leads
    /// or follows (`leader_only` false): the work sees the role and decides.
    pub async fn on_partition<T, W>(
        &self,
        route: Route,
        leader_only: bool,
        work: W,
    ) -> Result<T, Code>
    where
        T: Send + 'static,
        W: FnOnce(Rc<Partitions>, ServedPartition) -> LocalFuture<Result<T, Code>> + Send + 'static,
    {
        let (key, owner) = route?;
        self.peers
            .invoke_on(owner, move |owner| {
                Box::pin(async move {
                    let served = owner.open_replica(key, leader_only).await?;
                    work(owner.clone(), served).await
                })
            })
            .await
            .unwrap_or_else(|_| Err(ResponseError::KafkaStorageError.code()))
    }

    /// The fan-out of every API's per-partition work: `work` runs for each
    /// partition asked (with its argument) at once, each on its owning
    /// shard; the answers come back in the order asked.
    pub async fn fan_out<A, T, W>(
        &self,
        asked: impl IntoIterator<Item = (Route, A)>,
        leader_only: bool,
        work: W,
    ) -> Vec<Result<T, Code>>
    where
        A: Send + 'static,
        T: Send + 'static,
        W: Fn(Rc<Partitions>, ServedPartition, A) -> LocalFuture<Result<T, Code>>
            + Clone
            + Send
            + 'static,
    {
        let calls = asked.into_iter().map(|(route, argument)| {
            let work = work.clone();
            self.on_partition(route, leader_only, move |owner, led| {
                work(owner, led, argument)
            })
        });
        futures::future::join_all(calls).await
    }

    /// Runs `work` on shard `shard`'s partitions.
    pub async fn on_shard<T, W>(&self, shard: ShardId, work: W) -> Result<T, ShardGone>
    where
        T: Send + 'static,
        W: FnOnce(Rc<Partitions>) -> LocalFuture<T> + Send + 'static,
    {
        self.peers.invoke_on(shard, work).await
    }

    /// The shard keeping the share session of `key` (group, member): one
    /// per broker whichever shard its connection is on.
    pub fn share_session_shard(&self, key: &SessionKey) -> ShardId {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        ShardId((hasher.finish() % self.cluster.shards() as u64) as usize)
    }

    /// Runs `work` on every shard's partitions at once; the results in
    /// shard order.
    pub async fn on_every_shard<T, W>(&self, work: W) -> Vec<Result<T, ShardGone>>
    where
        T: Send + 'static,
        W: Fn(Rc<Partitions>) -> LocalFuture<T> + Clone + Send + 'static,
    {
        self.peers.invoke_on_all(work).await
    }
}
