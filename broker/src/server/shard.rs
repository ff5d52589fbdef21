//! One shard's state, and running work on another shard.
//!
//! Shards share nothing. A connection's shard parses a request and sends
//! the per-partition parts to the shards that own those partitions as jobs
//! over a mesh of channels (one queue per shard, every shard holding a
//! sender to each); each job runs as a task of the owning shard (so a
//! client that disconnects cannot cancel it half-way, e.g. during a flush)
//! and its result comes back through a oneshot channel. Both channel kinds
//! wake the waiting glommio task from the other thread (glommio queues
//! foreign wakes and rouses the sleeping executor).
//!
//! glommio's own `MeshBuilder` is not used: its join handshake was seen to
//! leave every executor asleep at start under CPU contention (a lost
//! wake-up; the broker then never started).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use control::service::MetadataService;
use futures::channel::{mpsc, oneshot};
use futures::StreamExt;

use super::coordinator::Coordinator;
use super::metadata_view::View;
use super::partitions::Partitions;
use crate::config::BrokerConfig;

/// Work for another shard: called there with that shard's state.
pub type Job = Box<dyn FnOnce(Rc<Shard>) + Send>;

/// A future created on, and run by, the shard it was sent to.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// The sending ends of every shard's job queue, by shard index.
pub type Mesh = Vec<mpsc::UnboundedSender<Job>>;

/// A job queue per shard: the senders (shared by all shards) and each
/// shard's receiver.
pub fn mesh(shards: usize) -> (Mesh, Vec<mpsc::UnboundedReceiver<Job>>) {
    (0..shards).map(|_| mpsc::unbounded()).unzip()
}

/// Why a job could not run on its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} is not running")]
pub struct ShardGone(pub usize);

/// Everything one shard owns.
pub struct Shard {
    /// This shard's index (0 runs the metadata quorum).
    pub index: usize,
    /// How many shards the broker runs.
    pub count: usize,
    /// The broker's configuration.
    pub config: BrokerConfig,
    /// This shard's copy of the cluster metadata.
    pub view: View,
    /// The partitions this shard owns.
    pub partitions: Partitions,
    /// The metadata service (on shard 0 only).
    pub controller: Option<Rc<MetadataService>>,
    /// The groups whose `__consumer_offsets` partitions this shard owns.
    pub coordinator: Coordinator,
    /// The follower fetchers of this shard, one per leader broker.
    pub fetchers: super::replica::fetcher::Fetchers,
    /// This shard's counters.
    pub metrics: std::sync::Arc<super::metrics::ShardMetrics>,
    /// Every shard's counters (a scrape sums them).
    pub metrics_registry: super::metrics::Registry,
    /// This broker's life with the controller (kept by shard 0).
    pub life: Rc<super::metadata_view::BrokerLife>,
    /// Producer ids to hand out (shard 0's).
    pub producer_ids: super::producer_ids::ProducerIds,
    senders: Mesh,
}

impl Shard {
    /// Shard `index`'s state; `senders` reach every shard.
    pub fn new(
        index: usize,
        config: BrokerConfig,
        view: View,
        senders: Mesh,
        controller: Option<Rc<MetadataService>>,
        metrics_registry: super::metrics::Registry,
        life: Rc<super::metadata_view::BrokerLife>,
    ) -> Shard {
        let count = senders.len();
        let partitions = Partitions::new(config.data_dir.join(super::partitions::PARTITIONS_DIR));
        Shard {
            index,
            count,
            config,
            view,
            partitions,
            controller,
            coordinator: Coordinator::default(),
            fetchers: Default::default(),
            metrics: metrics_registry[index].clone(),
            metrics_registry,
            life,
            producer_ids: Default::default(),
            senders,
        }
    }

    /// Where the partitions' directories are.
    pub fn partitions_root(&self) -> std::path::PathBuf {
        self.config.data_dir.join(super::partitions::PARTITIONS_DIR)
    }

    /// Runs `work` on shard `target` (directly if that is this shard) as
    /// a task of its own, and returns its result.
    pub async fn run_on<T, W>(self: &Rc<Self>, target: usize, work: W) -> Result<T, ShardGone>
    where
        T: Send + 'static,
        W: FnOnce(Rc<Shard>) -> LocalFuture<T> + Send + 'static,
    {
        let (reply, result) = oneshot::channel();
        let job: Job = Box::new(move |shard: Rc<Shard>| {
            glommio::spawn_local(async move {
                let _ = reply.send(work(shard).await);
            })
            .detach();
        });
        if target == self.index {
            job(self.clone());
        } else {
            let queue = self.senders.get(target).ok_or(ShardGone(target))?;
            queue.unbounded_send(job).map_err(|_| ShardGone(target))?;
        }
        result.await.map_err(|_| ShardGone(target))
    }
}

/// Runs the jobs other shards send to this one, for as long as they can send.
pub async fn serve_jobs(shard: Rc<Shard>, mut jobs: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = jobs.next().await {
        job(shard.clone());
    }
}
