//! The server: one glommio executor per shard, every shard accepting on
//! the same port (SO_REUSEPORT), each connection served on the shard that
//! accepted it, its requests answered in order, the per-partition work run
//! on the shard owning the partition (jobs over a channel mesh).
//!
//! Shard 0 also runs this broker's metadata node (a voter of the quorum,
//! alone or one of several); every shard follows
//! its stream of committed changes into its own copy of the metadata.

mod connection;
mod controller_node;
mod dead_letters;
mod follow_metadata;
mod handlers;
mod health;
mod http;
mod lifecycle;
mod metrics;
mod ports;
mod shard;
mod start;
mod tls;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use glommio::{LocalExecutorPoolBuilder, PoolPlacement};

use crate::cluster::peer_tls::PeerTls;
use crate::cluster::quorum::BrokerLife;
use crate::cluster::view::View;
use crate::config::listeners::{Listeners, SecurityProtocol};
use crate::config::BrokerConfig;
use control::transport::link::QuorumTls;
use lifecycle::{DRAIN_MAX, STOP_POLL};
use shard::{Meshes, Parts, Queues, Shard};
use start::{Changes, ShardStart, StartSignals};

/// The cluster id reported to clients: the quorum's, once its first
/// active controller chose it.
pub fn cluster_id(metadata: &control::Metadata) -> String {
    metadata
        .cluster_id
        .map_or_else(|| "unnamed".to_string(), |id| id.to_string())
}

/// io_uring buffer memory per shard (locked memory is scarce on many hosts).
const SHARD_IO_MEMORY_BYTES: usize = 2 << 20;

/// Submission queue entries of each of a shard's io_uring rings. Beyond
/// the requests in flight, the kernel sizes the table it finds a request
/// in by this (its completion queue, twice as deep, / 32 buckets, 2 to
/// 256): every time the shard parks, glommio cancels its timer, and the
/// cancel walks one bucket of that table, where every connection waiting
/// for bytes sits. At glommio's 128 (8 buckets), 10,000 idle connections
/// cost the broker 3.5% of a core doing nothing; at 4,096 (256 buckets),
/// a 32nd of that. (glommio also times a busy task's yield by this depth;
/// latency under load measured no worse at 4,096: docs/benchmarks.md.)
const SHARD_RING_DEPTH: usize = 4096;

/// Where a ready broker listens.
#[derive(Debug, Clone)]
pub struct Listening {
    /// The Kafka listeners by name (ports 0 resolved), in the order
    /// configured.
    pub kafka: Vec<(String, SocketAddr)>,
    /// The HTTP listener.
    pub http: SocketAddr,
    /// A controller-only node's metadata listener (it has no Kafka
    /// listener).
    pub controller: Option<SocketAddr>,
}

/// What every shard's thread shares at start.
#[derive(Clone)]
struct Shared {
    config: BrokerConfig,
    shards: usize,
    listeners: Arc<Listeners>,
    ready: mpsc::Sender<Listening>,
    stop: Arc<AtomicBool>,
    meshes: Meshes,
    queues: Arc<Vec<Mutex<Option<Queues>>>>,
    next_index: Arc<AtomicUsize>,
    drained: Arc<AtomicUsize>,
    /// The first shard's start, for each other shard (None: give up).
    start_tx: mpsc::Sender<Option<ShardStart>>,
    start_rx: Arc<Mutex<mpsc::Receiver<Option<ShardStart>>>>,
    /// Why the broker could not start, if it could not (the process exits
    /// non-zero with it).
    failed: Arc<Mutex<Option<String>>>,
    metrics_registry: crate::counters::Registry,
    /// The client connection limits, counted over every shard.
    admission: Arc<connection::admission::Admission>,
    /// The TLS of the Kafka listeners that speak it.
    tls: Option<Arc<tls::TlsServer>>,
    /// The HTTP port's (the same certificate), if it has it.
    http_tls: Option<Arc<tls::TlsServer>>,
    /// How to reach other brokers' Kafka ports over TLS.
    peer_tls: Option<Arc<PeerTls>>,
    /// Tiered storage's object store, on a thread of its own.
    remote_store: Option<crate::remote_store::RemoteStore>,
    /// The metadata quorum's TLS, if it speaks TLS.
    quorum_tls: Option<QuorumTls>,
}

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
    ports::check_free(&config)?;
    if config.roles().controller_only() {
        return run_controller_only(config, ready, stop);
    }
    let listeners = config.kafka_listeners().map_err(std::io::Error::other)?;
    let (meshes, queues) = shard::meshes(shards);
    let (start_tx, start_rx) = mpsc::channel();
    let placement = if config.pin_shards {
        PoolPlacement::MaxSpread(shards, None)
    } else {
        PoolPlacement::Unbound(shards)
    };
    let admission = connection::admission::Admission::new(&config);
    warn_about_open_doors(&config);
    let peer_tls = PeerTls::of_config(&config).map_err(std::io::Error::other)?;
    let quorum_tls = crate::cluster::quorum::quorum_tls(&config)?;
    let tls = start_tls(&config, peer_tls.clone(), quorum_tls.clone())?;
    let (kafka_tls, http_tls) = (
        tls.clone().filter(|_| config.kafka_uses_tls()),
        tls.filter(|_| config.http_tls),
    );
    if kafka_tls.is_none() && listeners.any(SecurityProtocol::uses_tls) {
        // Never serve a TLS listener in the clear.
        return Err(std::io::Error::other(
            "a Kafka listener speaks TLS but no certificate was loaded (ssl_certificate_location, ssl_key_location)",
        ));
    }
    replay_journals(&config)?;
    let remote_store = start_remote_store(&config)?;
    let shared = Shared {
        remote_store,
        config,
        shards,
        listeners: Arc::new(listeners),
        ready,
        stop,
        meshes,
        queues: Arc::new(queues.into_iter().map(|q| Mutex::new(Some(q))).collect()),
        next_index: Arc::default(),
        drained: Arc::default(),
        start_tx,
        start_rx: Arc::new(Mutex::new(start_rx)),
        failed: Arc::default(),
        metrics_registry: crate::counters::registry(shards),
        admission,
        tls: kafka_tls,
        http_tls,
        peer_tls,
        quorum_tls,
    };
    let failed = shared.failed.clone();
    let handles = LocalExecutorPoolBuilder::new(placement)
        .io_memory(SHARD_IO_MEMORY_BYTES)
        .ring_depth(SHARD_RING_DEPTH)
        .on_all_shards(move || run_shard(shared.clone()))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    handles.join_all();
    let why = failed.lock().expect("start failure").take();
    match why {
        Some(why) => Err(std::io::Error::other(why)),
        None => Ok(()),
    }
}

/// Runs a controller-only node (`process_roles = "controller"`) until
/// `stop` is set: its metadata node and HTTP port, no Kafka listener.
fn run_controller_only(
    config: BrokerConfig,
    ready: mpsc::Sender<Listening>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    controller_node::check_holds_no_partitions(&config)?;
    warn_about_open_doors(&config);
    let quorum_tls = crate::cluster::quorum::quorum_tls(&config)?;
    let tls = start_tls(&config, None, quorum_tls.clone())?;
    let node = controller_node::ControllerNode {
        http_tls: tls.filter(|_| config.http_tls),
        config,
        quorum_tls,
        ready,
        stop,
    };
    controller_node::run(node)
}

/// Writes what the shards' journals hold back into the partitions'
/// segments, before any shard opens a partition.
fn replay_journals(config: &BrokerConfig) -> std::io::Result<()> {
    let partitions = config.data_dir.join(crate::cluster::PARTITIONS_DIR);
    let replayed = crate::partition::journals::replay_all(&config.data_dir, &partitions)
        .map_err(|e| std::io::Error::other(format!("replaying the journals: {e}")))?;
    if replayed.entries + replayed.skipped > 0 {
        let (entries, skipped, files) = (replayed.entries, replayed.skipped, replayed.files);
        tracing::info!(entries, skipped, files, "journals replayed");
    }
    Ok(())
}

/// Starts tiered storage's object store thread (docs/tiered-storage.md),
/// unless `remote_store = none`.
fn start_remote_store(
    config: &BrokerConfig,
) -> std::io::Result<Option<crate::remote_store::RemoteStore>> {
    let Some(backend) =
        crate::config::remote_settings::backend(config).map_err(std::io::Error::other)?
    else {
        return Ok(None);
    };
    let concurrency = config.remote_concurrency;
    let settings = crate::remote_store::StoreSettings {
        queued: concurrency * 16,
        concurrency,
        upload_bytes_per_second: config.remote_upload_bytes_per_second,
        download_bytes_per_second: config.remote_download_bytes_per_second,
        disk_cache: crate::config::remote_settings::disk_cache(config, &backend),
    };
    let store = crate::remote_store::RemoteStore::start_with(&backend, &settings)
        .map_err(|e| std::io::Error::other(format!("tiered storage's object store: {e}")))?;
    Ok(Some(store))
}

/// Says, at start, where a secured broker still talks in the clear.
fn warn_about_open_doors(config: &BrokerConfig) {
    let secured = config.kafka_uses_sasl() || config.acls_checked();
    if config.http_asks_for_user() && !config.http_tls {
        tracing::warn!("the HTTP API takes passwords (http_authentication = basic) over plain HTTP: set http_tls");
    }
    let cluster = config.voters().is_ok_and(|v| v.len() > 1);
    if config.acls_checked() && cluster && !config.inter_broker_uses_sasl() {
        tracing::warn!("ACLs are checked but brokers do not log in to each other (the inter-broker listener is not SASL): followers fetch as User:ANONYMOUS, or as their certificate's subject over SSL with client certificates; put that principal in super_users or replication is refused");
    }
    if secured && cluster && !config.controller_uses_tls() {
        tracing::warn!("the metadata quorum runs in the clear (controller_security_protocol = PLAINTEXT): anyone reaching controller_listen can send controller calls; set it to SSL or keep the port on a private network");
    }
}

/// The TLS settings of the ports that speak it, read now (a broken file stops the
/// start), and read again on every SIGHUP with the peer and quorum ones
/// (all read before any is put in use: a reload that fails keeps them all;
/// open connections keep theirs).
fn start_tls(
    config: &BrokerConfig,
    peer: Option<Arc<PeerTls>>,
    quorum: Option<QuorumTls>,
) -> std::io::Result<Option<Arc<tls::TlsServer>>> {
    let served = match tls::TlsFiles::of_config(config) {
        Some(files) => Some(Arc::new(
            tls::TlsServer::start(files).map_err(std::io::Error::other)?,
        )),
        None => None,
    };
    if served.is_none() && peer.is_none() && quorum.is_none() {
        return Ok(None);
    }
    let mut hangups = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])?;
    let reloaded = served.clone();
    let config = config.clone();
    std::thread::spawn(move || {
        for _ in hangups.forever() {
            let read = || -> Result<_, String> {
                let served = reloaded.as_ref().map(|s| s.read_again()).transpose();
                let peers = peer.as_ref().map(|p| p.read_again()).transpose();
                let quorum_sides = quorum
                    .as_ref()
                    .map(|_| crate::cluster::quorum::read_quorum_tls(&config))
                    .transpose();
                Ok((
                    served.map_err(|e| e.to_string())?,
                    peers.map_err(|e| e.to_string())?,
                    quorum_sides?,
                ))
            };
            match read() {
                Ok((served, peers, quorum_sides)) => {
                    if let (Some(server), Some(served)) = (&reloaded, served) {
                        server.install(served);
                    }
                    if let (Some(peer), Some(peers)) = (&peer, peers) {
                        peer.install(peers);
                    }
                    if let (Some(quorum), Some((connector, acceptor))) = (&quorum, quorum_sides) {
                        quorum.install(connector, acceptor);
                    }
                    tracing::info!("SIGHUP: TLS certificates reloaded")
                }
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: TLS certificates not reloaded; the previous ones stay in use")
                }
            }
        }
    });
    Ok(served)
}

/// One shard, from start to stop.
async fn run_shard(shared: Shared) {
    let index = shared.next_index.fetch_add(1, Ordering::SeqCst);
    let queues = shared.queues[index]
        .lock()
        .expect("job queues")
        .take()
        .expect("one set of queues per shard");
    let view = View::default();
    // Each broker reports itself as the controller: any broker takes
    // controller requests and forwards them.
    view.borrow_mut().controller_id = shared.config.node_id;
    // The HTTP listener (shard 0) serves this shard once it exists.
    let this_shard = Rc::new(std::cell::OnceCell::new());
    let life = Rc::new(BrokerLife::default());
    let Some((ports, changes)) = start_shard(&shared, index, &life, &this_shard).await else {
        return;
    };
    let controller = match &changes {
        Changes::Local(service, _) => Some(service.clone()),
        Changes::Shared(_) => None,
    };
    let parts = Parts {
        index,
        config: shared.config.clone(),
        view,
        life: life.clone(),
        controller,
        metrics_registry: shared.metrics_registry.clone(),
        admission: shared.admission.clone(),
        peer_tls: shared.peer_tls.clone(),
        remote_store: shared.remote_store.clone(),
    };
    let shard = Shard::start(parts, shared.meshes.clone(), queues);
    let _ = this_shard.set(shard.clone());
    spawn_services(&shard, &shared, index, changes);
    let shutdown = (index == 0).then_some(life);
    let ports = ports
        .into_iter()
        .zip(&shared.listeners.all)
        .map(|(socket, listener)| connection::accept::Port {
            socket,
            listener: Rc::new(connection::ListenerOf {
                name: listener.name.as_str().into(),
                sasl: listener.protocol.uses_sasl(),
                for_brokers: shared.listeners.all.len() > 1
                    && listener.name == shared.listeners.inter_broker().name,
            }),
            tls: shared.tls.clone().filter(|_| listener.protocol.uses_tls()),
        })
        .collect();
    lifecycle::serve_until_stopped(ports, shard.clone(), shared.stop.clone(), shutdown).await;
    // Every shard keeps running the jobs of the others until all have
    // drained their connections (a connection's request may be waiting on
    // a partition of this shard).
    shared.drained.fetch_add(1, Ordering::SeqCst);
    let started = std::time::Instant::now();
    while shared.drained.load(Ordering::SeqCst) < shared.shards && started.elapsed() < DRAIN_MAX * 2
    {
        glommio::timer::sleep(STOP_POLL).await;
    }
    // Connections are closed: make every acknowledged byte durable.
    shard.partitions.table.close_all().await;
}

/// The first shard's start (binding, the quorum), or another's (the port
/// and the change stream it is handed).
async fn start_shard(
    shared: &Shared,
    index: usize,
    life: &Rc<BrokerLife>,
    this_shard: &Rc<std::cell::OnceCell<Rc<Shard>>>,
) -> Option<(Vec<glommio::net::TcpListener>, Changes)> {
    if index == 0 {
        let signals = StartSignals {
            shards: shared.shards,
            to_others: &shared.start_tx,
            failed: &shared.failed,
        };
        let tls = start::FirstShardTls {
            http: shared.http_tls.clone(),
            quorum: shared.quorum_tls.clone(),
        };
        return start::first_shard(
            &shared.config,
            tls,
            &shared.listeners,
            &signals,
            &shared.ready,
            life.clone(),
            this_shard.clone(),
        );
    }
    let start = shared
        .start_rx
        .lock()
        .expect("start channel")
        .recv()
        .ok()
        .flatten();
    start::other_shard(start).await
}

/// The shard's background work: following the metadata, maintenance,
/// group timeouts, ISR changes; on shard 0 the health watchdog, on the
/// last the testing-only faults.
fn spawn_services(shard: &Rc<Shard>, shared: &Shared, index: usize, changes: Changes) {
    if index == 0 {
        glommio::spawn_local(health::watchdog(shard.clone())).detach();
    }
    if index == shared.shards - 1 {
        glommio::spawn_local(lifecycle::test_faults(shard.clone(), shared.stop.clone())).detach();
    }
    glommio::spawn_local(follow_metadata::follow_metadata(shard.clone(), changes)).detach();
    glommio::spawn_local(crate::partition::maintenance::run(shard.partitions.clone())).detach();
    glommio::spawn_local(crate::partition::cache_trim::run(shard.partitions.clone())).detach();
    glommio::spawn_local(crate::partition::share_states::tick(
        shard.partitions.clone(),
    ))
    .detach();
    glommio::spawn_local(shard.coordinator.clone().tick()).detach();
    glommio::spawn_local(shard.txn_coordinator.clone().tick()).detach();
    glommio::spawn_local(crate::replica::isr_loop(shard.partitions.clone())).detach();
}
