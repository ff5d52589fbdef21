//! The server: one glommio executor per shard, every shard accepting on
//! the same port (SO_REUSEPORT), each connection served on the shard that
//! accepted it, its requests answered in order, the per-partition work run
//! on the shard owning the partition (jobs over a channel mesh).
//!
//! Shard 0 also runs the one-voter metadata quorum; every shard follows
//! its stream of committed changes into its own copy of the metadata.

mod connection;
mod coordinator;
mod handlers;
mod health;
mod http;
mod maintenance;
pub(crate) mod metadata_view;
mod metrics;
pub mod partitions;
mod ports;
mod producer_ids;
mod replica;
mod shard;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use futures::channel::oneshot;
use futures::FutureExt;
use glommio::net::TcpListener;
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};

use crate::config::BrokerConfig;
use control::service::{Change, MetadataService};
use control::MetadataRecord;
use glommio::channels::local_channel::LocalReceiver;
use glommio::channels::shared_channel::{ConnectedReceiver, SharedReceiver};
use metadata_view::View;
use shard::Shard;

/// The cluster id reported to clients: the quorum's, once its first
/// active controller chose it.
pub fn cluster_id(metadata: &control::Metadata) -> String {
    metadata
        .cluster_id
        .map_or_else(|| "unnamed".to_string(), |id| id.to_string())
}

/// io_uring buffer memory per shard (locked memory is scarce on many hosts).
const SHARD_IO_MEMORY_BYTES: usize = 2 << 20;

/// How often a shard looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);
/// How often a starting shard looks whether it may accept connections.
const READY_POLL: Duration = Duration::from_millis(5);
/// How long a stopping shard lets open connections finish.
const DRAIN_MAX: Duration = Duration::from_secs(5);

/// Runs the server until `stop` is set, then stops accepting, lets open
/// connections finish (at most `DRAIN_MAX`), and returns. `ready` receives
/// the Kafka address actually bound (its port is concrete even if 0 was asked).
pub fn run(
    config: BrokerConfig,
    ready: mpsc::Sender<Listening>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let shards = match config.shards {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let listen: SocketAddr = config
        .kafka_listen
        .parse()
        .map_err(|e| std::io::Error::other(format!("kafka_listen: {e}")))?;
    ports::check_free(&config)?;
    // The first shard binds (resolving port 0) and runs the metadata
    // quorum; it hands every other shard the port and a change stream.
    let (start_tx, start_rx) = mpsc::channel::<Option<ShardStart>>();
    let start_rx = Arc::new(std::sync::Mutex::new(start_rx));
    let (mesh, job_queues) = shard::mesh(shards);
    let job_queues: Vec<_> = job_queues
        .into_iter()
        .map(|q| std::sync::Mutex::new(Some(q)))
        .collect();
    let job_queues = Arc::new(job_queues);
    let next_index = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let drained = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Why the broker could not start, if it could not (the process exits
    // non-zero with it).
    let failed: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let failed_start = failed.clone();
    let metrics_registry = metrics::registry(shards);
    let placement = if config.pin_shards {
        PoolPlacement::MaxSpread(shards, None)
    } else {
        PoolPlacement::Unbound(shards)
    };
    let handles = LocalExecutorPoolBuilder::new(placement)
        .io_memory(SHARD_IO_MEMORY_BYTES)
        .on_all_shards(move || {
            let (start_tx, start_rx) = (start_tx.clone(), start_rx.clone());
            let (ready, stop, config) = (ready.clone(), stop.clone(), config.clone());
            let (mesh, drained) = (mesh.clone(), drained.clone());
            let failed = failed_start.clone();
            let metrics_registry = metrics_registry.clone();
            let index = next_index.fetch_add(1, Ordering::SeqCst);
            let jobs = job_queues[index]
                .lock()
                .expect("job queue")
                .take()
                .expect("one queue per shard");
            async move {
                // Each broker reports itself as the controller: any broker
                // takes controller requests and forwards them.
                let view = View::default();
                // The HTTP listener (shard 0) serves this shard once it exists.
                let this_shard = Rc::new(std::cell::OnceCell::new());
                view.borrow_mut().controller_id = config.node_id;
                let life = Rc::new(metadata_view::BrokerLife::default());
                let started = if index == 0 {
                    let signals = StartSignals {
                        shards,
                        to_others: &start_tx,
                        failed: &failed,
                    };
                    first_shard(
                        &config,
                        listen,
                        &signals,
                        &ready,
                        life.clone(),
                        this_shard.clone(),
                    )
                } else {
                    let start = start_rx
                        .lock()
                        .expect("start channel")
                        .recv()
                        .ok()
                        .flatten();
                    other_shard(start).await
                };
                let Some((listener, changes)) = started else {
                    return;
                };
                let controller = match &changes {
                    Changes::Local(service, _) => Some(service.clone()),
                    Changes::Shared(_) => None,
                };
                let shard = Rc::new(Shard::new(
                    index,
                    config,
                    view,
                    mesh,
                    controller,
                    metrics_registry,
                    life.clone(),
                ));
                let _ = this_shard.set(shard.clone());
                if index == 0 {
                    glommio::spawn_local(health::watchdog(shard.clone())).detach();
                }
                if index == shards - 1 {
                    glommio::spawn_local(test_faults(shard.clone(), stop.clone())).detach();
                }
                let shutdown = (index == 0).then_some(life);
                glommio::spawn_local(shard::serve_jobs(shard.clone(), jobs)).detach();
                glommio::spawn_local(follow_metadata(shard.clone(), changes)).detach();
                glommio::spawn_local(maintenance::run(shard.clone())).detach();
                glommio::spawn_local(coordinator::Coordinator::tick(shard.clone())).detach();
                glommio::spawn_local(replica::isr_loop(shard.clone())).detach();
                serve_until_stopped(listener, shard.clone(), stop, shutdown).await;
                // Every shard keeps running the jobs of the others until all
                // have drained their connections (a connection's request may
                // be waiting on a partition of this shard).
                drained.fetch_add(1, Ordering::SeqCst);
                let started = std::time::Instant::now();
                while drained.load(Ordering::SeqCst) < shards && started.elapsed() < DRAIN_MAX * 2 {
                    glommio::timer::sleep(STOP_POLL).await;
                }
                // Connections are closed: make every acknowledged byte durable.
                shard.partitions.close_all().await;
            }
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    handles.join_all();
    let why = failed.lock().expect("start failure").take();
    match why {
        Some(why) => Err(std::io::Error::other(why)),
        None => Ok(()),
    }
}

/// The testing-only faults of the configuration, on the last shard: a
/// panic some time after start, a shard that never yields once a stop
/// begins. Neither is set in production.
async fn test_faults(shard: Rc<Shard>, stop: Arc<AtomicBool>) {
    let config = &shard.config;
    if config.test_panic_after_ms > 0 {
        glommio::timer::sleep(Duration::from_millis(config.test_panic_after_ms)).await;
        panic!(
            "test_panic_after_ms: a deliberate panic on shard {}",
            shard.index
        );
    }
    if config.test_wedge_on_stop {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(STOP_POLL).await;
        }
        tracing::warn!(
            shard = shard.index,
            "test_wedge_on_stop: this shard stops yielding"
        );
        loop {
            std::hint::spin_loop();
        }
    }
}

/// Where a shard's metadata changes come from.
enum Changes {
    /// Shard 0: straight from the service it runs.
    Local(Rc<MetadataService>, LocalReceiver<Change>),
    /// Other shards: over a shared channel from shard 0.
    Shared(ConnectedReceiver<Change>),
}

/// Follows the metadata changes into the shard's view and drops the
/// partitions of deleted topics; shard 0 also removes a deleted topic's
/// files (only that topic's: while the log replays at start, the view does
/// not know the topics created later yet).
async fn follow_metadata(shard: Rc<Shard>, changes: Changes) {
    // Replica roles follow the metadata, one pass at a time: a change
    // arriving during a pass asks for one more.
    let (wanted, passes) = glommio::channels::local_channel::new_bounded::<()>(1);
    glommio::spawn_local({
        let shard = shard.clone();
        async move {
            while passes.recv().await.is_some() {
                replica::reconcile(&shard).await;
            }
        }
    })
    .detach();
    let on_change = {
        let shard = shard.clone();
        move |record: Option<&MetadataRecord>| {
            shard
                .partitions
                .forget_deleted(&shard.view.borrow().metadata);
            if shard.index == 0 {
                match record {
                    Some(MetadataRecord::DeleteTopic { id }) => {
                        partitions::remove_topic_dirs(&shard.partitions_root(), *id)
                    }
                    // The whole state (at start, or a snapshot from the
                    // leader): deletions it holds may not have been seen.
                    None => {
                        let metadata = &shard.view.borrow().metadata;
                        partitions::reconcile_topic_dirs(&shard.partitions_root(), metadata);
                    }
                    Some(_) => {}
                }
            }
            let _ = wanted.try_send(());
        }
    };
    match changes {
        Changes::Local(_, local) => {
            metadata_view::follow_local(local, shard.view.clone(), on_change).await
        }
        Changes::Shared(shared) => {
            metadata_view::follow_shared(shared, shard.view.clone(), on_change).await
        }
    }
}

/// Where a ready broker listens.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    /// The Kafka listener (port 0 resolved).
    pub kafka: SocketAddr,
    /// The HTTP listener.
    pub http: SocketAddr,
}

/// What the first shard hands each other shard.
struct ShardStart {
    address: SocketAddr,
    changes: SharedReceiver<Change>,
}

/// How the first shard tells the other shards, and the process, how its
/// start went.
struct StartSignals<'a> {
    /// Shards in all.
    shards: usize,
    /// Each other shard's start (None: give up).
    to_others: &'a mpsc::Sender<Option<ShardStart>>,
    /// Why the broker could not start.
    failed: &'a std::sync::Mutex<Option<String>>,
}

/// Binds, starts the metadata quorum, and hands the others their start.
fn first_shard(
    config: &BrokerConfig,
    listen: SocketAddr,
    signals: &StartSignals,
    ready: &mpsc::Sender<Listening>,
    life: Rc<metadata_view::BrokerLife>,
    shard: Rc<std::cell::OnceCell<Rc<Shard>>>,
) -> Option<(TcpListener, Changes)> {
    let (shards, start_tx) = (signals.shards, signals.to_others);
    let fail = |what: &str, e: std::io::Error| {
        tracing::error!(error = %e, "{what}");
        *signals.failed.lock().expect("start failure") = Some(format!("{what}: {e}"));
        for _ in 1..shards {
            let _ = start_tx.send(None);
        }
        None
    };
    let bound = TcpListener::bind(listen)
        .map_err(std::io::Error::from)
        .and_then(|l| l.local_addr().map(|a| (l, a)).map_err(std::io::Error::from));
    let (listener, address) = match bound {
        Ok(bound) => bound,
        Err(e) => return fail("cannot bind the Kafka listener", e),
    };
    let (http_listener, http) = match http::bind(&config.http_listen) {
        Ok(bound) => bound,
        Err(e) => return fail("cannot bind the HTTP listener", e),
    };
    let service = match metadata_view::start_quorum(config) {
        Ok(service) => Rc::new(service),
        Err(e) => return fail("cannot start the metadata quorum", e),
    };
    glommio::spawn_local(http::serve(http_listener, shard)).detach();
    for _ in 1..shards {
        match service.subscribe_shared(metadata_view::CHANGES_QUEUED_MAX) {
            Ok(changes) => {
                let _ = start_tx.send(Some(ShardStart { address, changes }));
            }
            Err(e) => {
                return fail(
                    "cannot subscribe a shard to metadata",
                    std::io::Error::other(e.to_string()),
                )
            }
        }
    }
    let local = service.subscribe(metadata_view::CHANGES_QUEUED_MAX);
    let advertised = config
        .advertised_listener
        .clone()
        .unwrap_or_else(|| address.to_string().replace("0.0.0.0", "127.0.0.1"));
    // "Ready" once this broker's registration is committed and live.
    let ready = ready.clone();
    let root = config.data_dir.join(partitions::PARTITIONS_DIR);
    let quorum = service.clone();
    let data_dir = config.data_dir.clone();
    let node_id = config.node_id;
    let on_live = move || {
        // The quorum named the cluster before this life went live: the
        // directory joins it, or refuses another cluster's.
        let cluster = quorum
            .view()
            .metadata
            .cluster_id
            .expect("live after the cluster id");
        if let Err(e) = crate::data_dir::join_cluster(&data_dir, node_id, &cluster.to_string()) {
            tracing::error!(error = %e, "refusing to serve");
            eprintln!("broker: {e}");
            std::process::exit(1);
        }
        // This life's registration is committed: the metadata is replayed
        // up to it, so deletions made while it was down are known. Files
        // of topics it does not know at all stay (and are reported).
        let unknown = partitions::reconcile_topic_dirs(&root, &quorum.view().metadata);
        if !unknown.is_empty() {
            tracing::warn!(dir = %root.display(), ?unknown, "partition data of topics the metadata does not know: kept, not served");
        }
        // Ready as of the last change the shards were sent: a trailing
        // entry with no record would never reach their copies.
        metadata_view::mark_ready(quorum.view().published);
        let _ = ready.send(Listening {
            kafka: address,
            http,
        });
    };
    let registration = metadata_view::register_and_heartbeat(
        service.clone(),
        config.clone(),
        advertised,
        shards,
        life,
        on_live,
    );
    glommio::spawn_local(registration).detach();
    Some((listener, Changes::Local(service, local)))
}

/// Binds the port the first shard bound and connects to its change stream.
async fn other_shard(start: Option<ShardStart>) -> Option<(TcpListener, Changes)> {
    let start = start?;
    let changes = start.changes.connect().await;
    match TcpListener::bind(start.address) {
        Ok(listener) => Some((listener, Changes::Shared(changes))),
        Err(e) => {
            tracing::error!(error = %e, "cannot bind the Kafka listener");
            None
        }
    }
}

/// How long a stopping broker waits for the controller to move its
/// leaderships away.
const CONTROLLED_SHUTDOWN_MAX: Duration = Duration::from_secs(5);

/// Controlled shutdown (shard 0, which runs the controller link): stop
/// heartbeating, then ask the controller to move this broker's leaderships
/// to other in-sync replicas and fence it, before connections drain.
async fn controlled_shutdown(shard: &Shard, life: &metadata_view::BrokerLife) {
    life.shutting_down.set(true);
    let (Some(service), Some(incarnation)) = (&shard.controller, life.incarnation.get()) else {
        return;
    };
    let request = control::service::ControllerRequest::ControlledShutdown {
        broker: control::BrokerId(shard.config.node_id),
        incarnation,
    };
    // Retried while refused: a change committed meanwhile (an ISR change,
    // a controller move) makes the computed records stale.
    let service = service.clone();
    let asked = async move {
        loop {
            match service.request(request.clone()).await {
                Ok(()) => return true,
                // Retried while a concurrent change made the leadership
                // moves stale (the fence is then refused with them).
                Err(control::service::RequestError::Refused(e))
                    if !matches!(
                        e,
                        control::MetadataError::StalePartitionEpoch { .. }
                            | control::MetadataError::StillLeads { .. }
                    ) =>
                {
                    tracing::warn!(error = %e, "controlled shutdown refused; stopping anyway");
                    return false;
                }
                Err(e) => {
                    tracing::info!(error = %e, "controlled shutdown not taken yet; asking again");
                    glommio::timer::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    };
    let timeout = glommio::timer::sleep(CONTROLLED_SHUTDOWN_MAX);
    match futures::future::select(Box::pin(asked), Box::pin(timeout)).await {
        futures::future::Either::Left((true, _)) => {
            tracing::info!("controlled shutdown: leaderships moved, broker fenced")
        }
        futures::future::Either::Left((false, _)) => {}
        futures::future::Either::Right(_) => {
            tracing::warn!("controlled shutdown not taken in time; stopping anyway")
        }
    }
}

async fn serve_until_stopped(
    listener: TcpListener,
    shard: Rc<Shard>,
    stop: Arc<AtomicBool>,
    shutdown: Option<Rc<metadata_view::BrokerLife>>,
) {
    let open = Rc::new(Cell::new(0usize));
    let (stopping_tx, stopping_rx) = oneshot::channel::<()>();
    let stopping = stopping_rx.shared();
    let acceptor =
        glommio::spawn_local(accept_loop(listener, shard.clone(), open.clone(), stopping));
    while !stop.load(Ordering::Relaxed) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    if let Some(life) = shutdown {
        controlled_shutdown(&shard, &life).await;
    }
    // Dropping the acceptor cancels it and closes the listener; connections
    // close once the request they are answering (if any) is answered.
    drop(acceptor);
    let _ = stopping_tx.send(());
    let started = std::time::Instant::now();
    tracing::debug!(open = open.get(), "stopping: draining connections");
    while open.get() > 0 && started.elapsed() < DRAIN_MAX {
        glommio::timer::sleep(STOP_POLL).await;
    }
    if open.get() > 0 {
        tracing::warn!(open = open.get(), "stopping with connections still busy");
    }
}

/// Accepts connections, once the broker can answer every request it
/// advertises (see [`metadata_view::ready_to_serve`]): until then the port
/// is bound and clients' connections wait in its backlog, their first
/// requests unread, rather than be answered before the broker knows the
/// cluster (a client connects the moment a restarted broker's port
/// accepts).
async fn accept_loop(
    listener: TcpListener,
    shard: Rc<Shard>,
    open: Rc<Cell<usize>>,
    stopping: connection::Stopping,
) {
    while !metadata_view::ready_to_serve(shard.view.borrow().applied_index) {
        glommio::timer::sleep(READY_POLL).await;
    }
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let open = open.clone();
                let stopping = stopping.clone();
                let shard = shard.clone();
                open.set(open.get() + 1);
                glommio::spawn_local(async move {
                    let peer = stream.peer_addr().ok();
                    connection::serve(stream, shard, stopping).await;
                    tracing::debug!(?peer, "connection closed");
                    open.set(open.get() - 1);
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
