//! A service with one instance per shard, and running work on another
//! shard's instance (Seastar's `sharded<T>`, in the small).
//!
//! Shards share nothing. A shard that needs another's instance (the shard
//! owning a partition, the one running the controller) sends it a job over
//! a mesh of channels (one queue per shard and service, every shard
//! holding a sender to each); the job runs as a task of the target shard,
//! so a caller that goes away (a client disconnecting) cannot cancel it
//! half-way, and its result comes back through a oneshot channel. Both
//! channel kinds wake the waiting glommio task from the other thread.
//!
//! glommio's own `MeshBuilder` is not used: its join handshake was seen to
//! leave every executor asleep at start under CPU contention (a lost
//! wake-up; the broker then never started).

use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};

use futures::channel::{mpsc, oneshot};
use futures::StreamExt;

/// A future created on, and run by, the shard it was sent to.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// Work for one shard's instance of `S`.
pub type Job<S> = Box<dyn FnOnce(Rc<S>) + Send>;

/// One job queue of a service.
pub type JobQueue<S> = mpsc::UnboundedReceiver<Job<S>>;

/// The sending ends of every shard's queue for one service, by shard
/// index: made before the shards start, cloned into each.
pub struct Mesh<S> {
    senders: Vec<mpsc::UnboundedSender<Job<S>>>,
}

impl<S> Clone for Mesh<S> {
    fn clone(&self) -> Self {
        Mesh {
            senders: self.senders.clone(),
        }
    }
}

/// A service's mesh for `shards` shards, and each shard's queue.
pub fn mesh<S>(shards: usize) -> (Mesh<S>, Vec<JobQueue<S>>) {
    let (senders, queues) = (0..shards).map(|_| mpsc::unbounded()).unzip();
    (Mesh { senders }, queues)
}

/// A shard of this process: the index of its executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub usize);

impl ShardId {
    /// The first shard (the broker runs its metadata service there).
    pub const FIRST: ShardId = ShardId(0);
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a job could not run on its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} is not running")]
pub struct ShardGone(pub ShardId);

/// One shard's way to every instance of a service: its own, called
/// directly, and the others', through their queues.
pub struct Sharded<S> {
    index: ShardId,
    local: Weak<S>,
    mesh: Mesh<S>,
}

impl<S> Clone for Sharded<S> {
    fn clone(&self) -> Self {
        Sharded {
            index: self.index,
            local: self.local.clone(),
            mesh: self.mesh.clone(),
        }
    }
}

impl<S: 'static> Sharded<S> {
    /// Shard `index`'s handle, `local` its own instance (weak: the
    /// instance usually holds the handle; see `Rc::new_cyclic`).
    pub fn new(index: ShardId, local: Weak<S>, mesh: Mesh<S>) -> Sharded<S> {
        Sharded { index, local, mesh }
    }

    /// This shard.
    pub fn index(&self) -> ShardId {
        self.index
    }

    /// How many shards there are.
    pub fn count(&self) -> usize {
        self.mesh.senders.len()
    }

    /// Runs `work` on shard `target`'s instance (directly if that is this
    /// shard) as a task of its own, and returns its result.
    pub async fn invoke_on<T, W>(&self, target: ShardId, work: W) -> Result<T, ShardGone>
    where
        T: Send + 'static,
        W: FnOnce(Rc<S>) -> LocalFuture<T> + Send + 'static,
    {
        let (reply, result) = oneshot::channel();
        let job: Job<S> = Box::new(move |instance: Rc<S>| {
            glommio::spawn_local(async move {
                let _ = reply.send(work(instance).await);
            })
            .detach();
        });
        if target == self.index {
            job(self.local.upgrade().ok_or(ShardGone(target))?);
        } else {
            let queue = self.mesh.senders.get(target.0).ok_or(ShardGone(target))?;
            queue.unbounded_send(job).map_err(|_| ShardGone(target))?;
        }
        result.await.map_err(|_| ShardGone(target))
    }

    /// Runs `work` on every shard's instance at once; the results in shard
    /// order.
    pub async fn invoke_on_all<T, W>(&self, work: W) -> Vec<Result<T, ShardGone>>
    where
        T: Send + 'static,
        W: Fn(Rc<S>) -> LocalFuture<T> + Clone + Send + 'static,
    {
        let calls = (0..self.count()).map(|target| self.invoke_on(ShardId(target), work.clone()));
        futures::future::join_all(calls).await
    }
}

/// Runs the jobs other shards send to this shard's `instance`, for as long
/// as they can send.
pub async fn serve<S>(instance: Rc<S>, mut jobs: JobQueue<S>) {
    while let Some(job) = jobs.next().await {
        job(instance.clone());
    }
}
