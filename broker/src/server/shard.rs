//! One shard's state, and running work on another shard.
//!
//! Shards share nothing. A connection's shard parses a request and sends
//! the per-partition parts to the shards that own those partitions as jobs
//! over glommio's channel mesh; each job runs as a task of the owning shard
//! (so a client that disconnects cannot cancel it half-way, e.g. during a
//! flush) and its result comes back through a oneshot channel (glommio
//! wakes the waiting task across threads).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use control::service::MetadataService;
use futures::channel::oneshot;
use glommio::channels::channel_mesh::{Receivers, Senders};

use super::metadata_view::View;
use super::partitions::Partitions;
use crate::config::BrokerConfig;

/// Work for another shard: called there with that shard's state.
pub type Job = Box<dyn FnOnce(Rc<Shard>) + Send>;

/// A future created on, and run by, the shard it was sent to.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// Jobs queued to one shard from another before senders wait.
pub const MESH_QUEUE: usize = 1024;

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
    senders: Senders<Job>,
}

impl Shard {
    /// A shard's state; `senders` reach every other shard.
    pub fn new(
        config: BrokerConfig,
        view: View,
        senders: Senders<Job>,
        controller: Option<Rc<MetadataService>>,
    ) -> Shard {
        let index = senders.peer_id();
        let count = senders.nr_consumers();
        let partitions = Partitions::new(config.data_dir.join(super::partitions::PARTITIONS_DIR));
        Shard {
            index,
            count,
            config,
            view,
            partitions,
            controller,
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
        } else if self.senders.send_to(target, job).await.is_err() {
            return Err(ShardGone(target));
        }
        result.await.map_err(|_| ShardGone(target))
    }
}

/// Runs the jobs other shards send to this one, for as long as they can send.
pub async fn serve_jobs(shard: Rc<Shard>, mut receivers: Receivers<Job>) {
    let streams = receivers.streams();
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|(_, stream)| {
            let shard = shard.clone();
            glommio::spawn_local(async move {
                while let Some(job) = stream.recv().await {
                    job(shard.clone());
                }
            })
        })
        .collect();
    futures::future::join_all(tasks).await;
}
