//! Every shard's copy of the committed metadata, and the one-voter
//! metadata quorum on the first shard that produces it.
//!
//! The first shard runs the control crate's `MetadataService` (this
//! broker is the only voter, so its topics survive restarts through the
//! same Raft log a cluster uses), registers the broker and heartbeats it.
//! Every shard, the first included, follows the stream of committed
//! changes into its own `ShardMetadata`; no state is shared between shards.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use control::disk::FileRaftDisk;
use control::memory::MemoryNetwork;
use control::node::{MetadataNode, NodeConfig};
use control::service::{Change, ControllerRequest, MetadataService, RequestError, ServiceConfig};
use control::tcp::TcpTransport;
use control::{BrokerId, BrokerRegistration, Incarnation, Metadata, MetadataError, MetadataRecord};
use glommio::channels::local_channel::LocalReceiver;
use glommio::channels::shared_channel::ConnectedReceiver;

use super::replica::now_ms;
use crate::config::BrokerConfig;

/// One Raft tick of the metadata quorum.
const METADATA_TICK: Duration = Duration::from_millis(10);
/// How long a broker waits before asking the controller again.
const RETRY_EVERY: Duration = Duration::from_millis(250);
/// Changes a shard may fall behind before it must resubscribe.
pub const CHANGES_QUEUED_MAX: usize = 4096;

/// A shard's view of the cluster.
#[derive(Debug, Default)]
pub struct ShardMetadata {
    /// The committed metadata as of the last change applied.
    pub metadata: Metadata,
    /// The metadata log index it is as of (None until the first state).
    pub applied_index: Option<u64>,
    /// The active controller (this broker, for a one-voter quorum).
    pub controller_id: i32,
}

/// Shared by the tasks of one shard.
pub type View = Rc<RefCell<ShardMetadata>>;

/// Starts this broker's metadata node with its log under the data
/// directory: alone (a one-voter quorum) when no voters are configured,
/// else one voter of `controller_quorum_voters` over TCP.
pub fn start_quorum(config: &BrokerConfig) -> std::io::Result<MetadataService> {
    let node_id = config.node_id as u64;
    let voters = config.voters().map_err(std::io::Error::other)?;
    let disk = FileRaftDisk::open(config.data_dir.join("metadata"))?;
    let mut service_config = ServiceConfig::new(METADATA_TICK);
    service_config.session_timeout = Duration::from_millis(config.broker_session_timeout_ms);
    // Expired sessions are looked for at a tenth of their length (50 ms to
    // 500 ms): fencing, and so failover, follows the timeout closely.
    service_config.controller_interval = (service_config.session_timeout / 10)
        .clamp(Duration::from_millis(50), Duration::from_millis(500));
    let metadata_dir = config.data_dir.join("metadata");
    let damaged = |e: String| {
        std::io::Error::other(format!(
            "the metadata in {} cannot be started from: {e}",
            metadata_dir.display()
        ))
    };
    if voters.is_empty() {
        let mut node_config = NodeConfig::new(node_id, vec![node_id]);
        node_config.snapshot_every_entries = config.metadata_snapshot_every_entries;
        let node = MetadataNode::start(&node_config, disk.recovered()).map_err(damaged)?;
        let network = MemoryNetwork::new();
        return Ok(MetadataService::start(
            node,
            disk,
            network.join(node_id),
            service_config,
        ));
    }
    let peers: BTreeMap<u64, SocketAddr> = voters.iter().map(|(id, a)| (*id as u64, *a)).collect();
    let listen = match &config.controller_listen {
        Some(listen) => listen.parse().map_err(std::io::Error::other)?,
        None => peers[&node_id],
    };
    let mut node_config = NodeConfig::new(node_id, peers.keys().copied().collect());
    // Elections over real networks: 300-600 ms without a leader.
    node_config.election_timeout_ticks = (30, 60);
    node_config.election_ticks = 30;
    node_config.snapshot_every_entries = config.metadata_snapshot_every_entries;
    let node = MetadataNode::start(&node_config, disk.recovered()).map_err(damaged)?;
    let transport = TcpTransport::start(node_id, listen, peers.clone())?;
    service_config.peers = peers.into_iter().filter(|(id, _)| *id != node_id).collect();
    Ok(MetadataService::start(
        node,
        disk,
        transport,
        service_config,
    ))
}

/// This broker's current life, as registered (shard 0 keeps it): the
/// incarnation once registered, and whether it is shutting down (then it
/// stops heartbeating, which would unfence it again).
#[derive(Debug, Default)]
pub struct BrokerLife {
    /// The registered incarnation.
    pub incarnation: std::cell::Cell<Option<Incarnation>>,
    /// Set on SIGTERM, before the controlled shutdown.
    pub shutting_down: std::cell::Cell<bool>,
    /// Set once this life is registered and unfenced (ready to serve).
    pub live: std::cell::Cell<bool>,
    /// When ([`now_ms`]) the active controller last acknowledged a heartbeat.
    pub last_heartbeat_ms: std::cell::Cell<Option<u64>>,
    /// Why the last call to the controller (registration or heartbeat)
    /// failed, if it did.
    pub controller_error: RefCell<Option<String>>,
}

/// Registers this broker (a new incarnation each start) once the quorum
/// leads, calls `on_live` once the registration is committed and the
/// broker unfenced, then heartbeats it for as long as the service lives.
pub async fn register_and_heartbeat(
    service: Rc<MetadataService>,
    config: BrokerConfig,
    advertised: String,
    shards: usize,
    life: Rc<BrokerLife>,
    on_live: impl FnOnce(),
) {
    let id = BrokerId(config.node_id);
    // Each start registers a larger incarnation: the wall clock in ms.
    let incarnation = Incarnation(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_millis() as u64),
    );
    let mut registration = BrokerRegistration {
        id,
        incarnation,
        listener: advertised,
        rack: config.rack.clone(),
        shards: shards as u16,
    };
    let heartbeat_every = Duration::from_millis(config.broker_heartbeat_interval_ms);
    loop {
        // Some node must lead first (this one, or one it forwards to).
        while service.view().leader.is_none() {
            glommio::timer::sleep(METADATA_TICK).await;
        }
        match service
            .request(ControllerRequest::RegisterBroker(registration.clone()))
            .await
        {
            Ok(()) => break,
            // The clock went back since an earlier life: go one past it.
            Err(RequestError::Refused(MetadataError::StaleIncarnation { current, .. })) => {
                registration.incarnation = Incarnation(current.0 + 1);
            }
            Err(e) => {
                tracing::warn!(error = %e, "registering with the controller failed; retrying");
                *life.controller_error.borrow_mut() = Some(format!("registering: {e}"));
                glommio::timer::sleep(RETRY_EVERY).await;
            }
        }
    }
    let incarnation = registration.incarnation;
    life.incarnation.set(Some(incarnation));
    let session = Duration::from_millis(config.broker_session_timeout_ms);
    let mut on_live = Some(on_live);
    loop {
        if life.shutting_down.get() {
            return;
        }
        let started = std::time::Instant::now();
        let sent_ms = now_ms();
        match heartbeat(&service, id, incarnation, session / 2).await {
            Ok(()) => {
                // The controller fences a broker silent for a session from
                // when it last heard it, which is after this was sent.
                let lease = sent_ms + (session.as_millis() as u64) * 9 / 10;
                LEASE_UNTIL_MS.fetch_max(lease, Ordering::Relaxed);
                life.last_heartbeat_ms.set(Some(now_ms()));
                *life.controller_error.borrow_mut() = None;
            }
            Err(why) => *life.controller_error.borrow_mut() = Some(why),
        }
        // The first heartbeat unfences the new life.
        if on_live.is_some() && is_live(&service, id, incarnation) {
            if let Some(announce) = on_live.take() {
                life.live.set(true);
                announce();
            }
        }
        let pause = if on_live.is_some() {
            METADATA_TICK * 5
        } else {
            heartbeat_every
        };
        glommio::timer::sleep(pause.saturating_sub(started.elapsed())).await;
    }
}

/// Until when (on [`now_ms`]'s clock) this broker may act as a leader:
/// while its last acknowledged heartbeat keeps it from being fenced. A
/// broker that stalled (paused, partitioned) past its session may have
/// been fenced and replaced without knowing it; until a heartbeat is
/// answered again and its metadata caught up, it leads nothing (one broker
/// per process, so one lease).
static LEASE_UNTIL_MS: AtomicU64 = AtomicU64::new(0);

/// The metadata index at which this broker became ready to serve (0: not
/// yet): its registration committed and unfenced, the cluster named. A
/// shard accepts connections once its own copy of the metadata reached it,
/// so the first request on any shard sees at least what the broker went
/// live with.
static READY_AT_INDEX: AtomicU64 = AtomicU64::new(0);

/// Marks the broker ready as of metadata `index` (once).
pub fn mark_ready(index: u64) {
    let _ = READY_AT_INDEX.compare_exchange(0, index.max(1), Ordering::SeqCst, Ordering::SeqCst);
}

/// Whether a shard whose copy of the metadata is at `applied` may serve.
pub fn ready_to_serve(applied: Option<u64>) -> bool {
    let ready_at = READY_AT_INDEX.load(Ordering::SeqCst);
    ready_at > 0 && applied.is_some_and(|a| a >= ready_at)
}

/// Whether this broker's lease is current (see [`LEASE_UNTIL_MS`]).
pub fn lease_valid() -> bool {
    now_ms() < LEASE_UNTIL_MS.load(Ordering::Relaxed)
}

/// One heartbeat, answered within `timeout`, with this node's metadata
/// then caught up to where the controller's was when it answered; or why not.
async fn heartbeat(
    service: &MetadataService,
    id: BrokerId,
    incarnation: Incarnation,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = std::time::Instant::now() + timeout;
    let answer = service.heartbeat_acknowledged(id, incarnation);
    let timer = glommio::timer::sleep(timeout);
    let index = match futures::future::select(Box::pin(answer), Box::pin(timer)).await {
        futures::future::Either::Left((Ok(index), _)) => index,
        futures::future::Either::Left((Err(e), _)) => {
            tracing::debug!(error = %e, "heartbeat not acknowledged");
            return Err(format!("heartbeat refused: {e}"));
        }
        futures::future::Either::Right(_) => {
            return Err(format!("heartbeat unanswered within {timeout:?}"))
        }
    };
    while service.view().applied < index {
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "metadata not caught up to index {index} within {timeout:?} (at {})",
                service.view().applied
            ));
        }
        glommio::timer::sleep(METADATA_TICK).await;
    }
    Ok(())
}

/// Registered, unfenced, and the cluster named (its first controller's
/// first record).
fn is_live(service: &MetadataService, id: BrokerId, incarnation: Incarnation) -> bool {
    let view = service.view();
    view.metadata.cluster_id.is_some()
        && view
            .metadata
            .brokers
            .get(&id)
            .is_some_and(|b| !b.fenced && b.registration.incarnation == incarnation)
}

/// Follows the first shard's local change stream (it starts with the
/// whole state, as a shared one does).
pub async fn follow_local(
    changes: LocalReceiver<Change>,
    view: View,
    on_change: impl Fn(Option<&MetadataRecord>),
) {
    while let Some(change) = changes.recv().await {
        apply(&view, change, &on_change);
    }
    tracing::warn!("the metadata change stream ended on this shard");
}

/// Follows a change stream from another shard (it starts with the state).
pub async fn follow_shared(
    changes: ConnectedReceiver<Change>,
    view: View,
    on_change: impl Fn(Option<&MetadataRecord>),
) {
    while let Some(change) = changes.recv().await {
        apply(&view, change, &on_change);
    }
    tracing::warn!("the metadata change stream ended on this shard");
}

/// Applies a change to the shard's copy; `on_change` hears of it (with
/// the record, or None when the whole state was replaced) if it applied.
fn apply(view: &View, change: Change, on_change: &impl Fn(Option<&MetadataRecord>)) {
    let record = change.record.clone().filter(|_| change.metadata.is_none());
    let applied = {
        let mut shard = view.borrow_mut();
        let shard = &mut *shard;
        control::changes::apply_change(&mut shard.metadata, &mut shard.applied_index, change)
    };
    if applied {
        on_change(record.as_ref());
    }
}
