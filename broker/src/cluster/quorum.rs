//! The metadata quorum as this broker runs it: its node started from the
//! data directory (alone, or one voter of a configured quorum), its
//! registration with the active controller (a new incarnation each start)
//! and the heartbeats that keep it unfenced and its lease current.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use control::raft::disk::FileRaftDisk;
use control::raft::node::{MetadataNode, NodeConfig};
use control::service::{ControllerError, ControllerRequest, MetadataService, ServiceConfig};
use control::transport::memory::MemoryNetwork;
use control::transport::tcp::TcpTransport;
use control::{BrokerEndpoint, BrokerId, BrokerRegistration, Incarnation, MetadataError};

use super::lease::extend_lease;
use crate::config::BrokerConfig;
use crate::runtime::clock::{monotonic_ms, wall_ms};
use crate::runtime::wait;
use control::transport::link::QuorumTls;

/// One Raft tick of the metadata quorum.
const METADATA_TICK: Duration = Duration::from_millis(10);
/// How long a broker waits before asking the controller again.
const RETRY_EVERY: Duration = Duration::from_millis(250);

/// Starts this broker's metadata node with its log under the data
/// directory: alone (a one-voter quorum) when no voters are configured,
/// else one member of the quorum of `controller_quorum_voters` over TCP
/// (a voter, or an observer when it is not named there).
pub fn start_quorum(
    config: &BrokerConfig,
    tls: Option<QuorumTls>,
) -> std::io::Result<Rc<MetadataService>> {
    let node_id = config.node_id as u64;
    let voters = config.voters().map_err(std::io::Error::other)?;
    let disk = FileRaftDisk::open(config.data_dir.join("metadata"))?;
    let mut service_config = ServiceConfig::new(METADATA_TICK);
    service_config.session_timeout = Duration::from_millis(config.broker_session_timeout_ms);
    // Expired sessions are looked for at a tenth of their length (50 ms to
    // 500 ms): fencing, and so failover, follows the timeout closely.
    service_config.controller_interval = (service_config.session_timeout / 10)
        .clamp(Duration::from_millis(50), Duration::from_millis(500));
    service_config.leader_rebalance_interval = config
        .auto_leader_rebalance_enable
        .then(|| Duration::from_millis(config.leader_imbalance_check_interval_ms));
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
        return Ok(Rc::new(MetadataService::start(
            node,
            disk,
            network.join(node_id),
            service_config,
        )));
    }
    let peers: BTreeMap<u64, SocketAddr> = voters.iter().map(|(id, a)| (*id as u64, *a)).collect();
    let listen = match &config.controller_listen {
        Some(listen) => listen.parse().map_err(std::io::Error::other)?,
        None => peers[&node_id],
    };
    // Where the other members reach this node: a voter's configured entry
    // (its controller_listen may be a bind-all address), else the
    // observer's controller_listen (checked routable at start).
    let advertised = peers.get(&node_id).copied().unwrap_or(listen);
    let mut node_config = NodeConfig::new(node_id, peers.keys().copied().collect());
    // Elections over real networks: 300-600 ms without a leader.
    node_config.election_timeout_ticks = (30, 60);
    node_config.election_ticks = 30;
    node_config.snapshot_every_entries = config.metadata_snapshot_every_entries;
    let node = MetadataNode::start(&node_config, disk.recovered()).map_err(damaged)?;
    let transport = TcpTransport::start_with(node_id, listen, peers.clone(), tls.clone())?;
    service_config.peers = peers.into_iter().filter(|(id, _)| *id != node_id).collect();
    service_config.tls = tls;
    let service = Rc::new(MetadataService::start(
        node,
        disk,
        transport,
        service_config,
    ));
    glommio::spawn_local(stay_in_quorum(Rc::downgrade(&service), node_id, advertised)).detach();
    Ok(service)
}

/// How often a member checks that the quorum still has it.
const MEMBERSHIP_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Keeps this node in the metadata quorum for as long as its service
/// runs: a node the quorum does not have (an observer's first start)
/// asks to join as an observer, reached at `listen`, and one whose
/// listener moved says so. Configured voters are members from the start
/// and ask nothing.
async fn stay_in_quorum(service: std::rc::Weak<MetadataService>, node: u64, listen: SocketAddr) {
    loop {
        let Some(service) = service.upgrade() else {
            return;
        };
        let joined = {
            let view = service.view();
            let member =
                view.members.voters.contains(&node) || view.members.learners.contains(&node);
            let recorded = view.metadata.quorum_addresses.get(&node);
            let configured_voter = recorded.is_none() && view.members.voters.contains(&node);
            member && (configured_voter || recorded == Some(&listen.to_string()))
        };
        let pause = if joined {
            MEMBERSHIP_CHECK_EVERY
        } else {
            match service.join_quorum(node, listen).await {
                Ok(index) => {
                    tracing::info!(node, %listen, index, "joined the metadata quorum as an observer");
                    MEMBERSHIP_CHECK_EVERY
                }
                Err(e) => {
                    tracing::info!(error = %e, "joining the metadata quorum; retrying");
                    RETRY_EVERY
                }
            }
        };
        drop(service);
        glommio::timer::sleep(pause).await;
    }
}

/// The quorum's TLS (`controller_security_protocol = "SSL"`): the broker's
/// certificate presented both ways, and every peer's required to chain to
/// `controller_ssl_ca_location` (else `ssl_ca_location`), so only the
/// cluster's brokers join the quorum or
/// forward controller calls. Read at start (a broken file stops it) and
/// again on SIGHUP ([`read_quorum_tls`]).
pub fn quorum_tls(config: &BrokerConfig) -> std::io::Result<Option<QuorumTls>> {
    if !config.controller_uses_tls() {
        return Ok(None);
    }
    let (connector, acceptor) = read_quorum_tls(config).map_err(std::io::Error::other)?;
    let tls = QuorumTls::new(connector, acceptor);
    // A CA of the nodes' own signs no client: its certificates are proof
    // enough, from any address (brokers and controllers joining from new
    // machines).
    match config.controller_ssl_ca_location {
        Some(_) => Ok(Some(tls.from_any_address())),
        None => Ok(Some(tls)),
    }
}

/// Reads the quorum's TLS files: both sides, or why not.
pub fn read_quorum_tls(
    config: &BrokerConfig,
) -> Result<(futures_rustls::TlsConnector, futures_rustls::TlsAcceptor), String> {
    let invalid = |e: String| format!("controller TLS: {e}");
    let files = crate::security::tls_files::TlsFiles::for_quorum(config)
        .ok_or_else(|| invalid("needs the ssl_* files".into()))?;
    let server = files.load().map_err(|e| invalid(e.to_string()))?;
    let (Some(ca), Some(certificate), Some(key)) = (
        config.quorum_ca_location(),
        &config.ssl_certificate_location,
        &config.ssl_key_location,
    ) else {
        return Err(invalid("needs the ssl_* files".into()));
    };
    let client = client::tls::ClientTls::from_files(ca, Some((certificate, key)))
        .map_err(|e| invalid(e.to_string()))?;
    Ok((
        client.connector(),
        futures_rustls::TlsAcceptor::from(server),
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
    /// When ([`monotonic_ms`]) the active controller last acknowledged a heartbeat.
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
    endpoints: Vec<BrokerEndpoint>,
    shards: usize,
    life: Rc<BrokerLife>,
    on_live: impl FnOnce(),
) {
    let id = BrokerId(config.node_id);
    // Other brokers reach this one at its inter-broker listener.
    let inter_broker = config
        .kafka_listeners()
        .map(|l| l.inter_broker().name.clone())
        .unwrap_or_default();
    let listener = endpoints
        .iter()
        .find(|e| e.listener == inter_broker)
        .map(|e| e.address.clone())
        .unwrap_or_default();
    // Each start registers a larger incarnation: the wall clock in ms.
    let registration = BrokerRegistration {
        id,
        incarnation: Incarnation(wall_ms().max(1) as u64),
        listener,
        rack: config.rack.clone(),
        shards: shards as u16,
    };
    let incarnation = register(&service, (registration, endpoints), &life).await;
    life.incarnation.set(Some(incarnation));
    // Before the first heartbeat makes the broker live (and its ports
    // accept): a client of a new cluster finds the user there.
    if let Some((user, password)) = config.broker_user().filter(|_| config.kafka_uses_sasl()) {
        bootstrap_user(&service, user, password).await;
    }
    heartbeat_while_alive(&service, &config, (id, incarnation), &life, on_live).await;
}

/// Registers once some node leads the quorum, retrying until the
/// controller accepts; the incarnation registered.
async fn register(
    service: &MetadataService,
    (mut registration, endpoints): (BrokerRegistration, Vec<BrokerEndpoint>),
    life: &BrokerLife,
) -> Incarnation {
    loop {
        // Some node must lead first (this one, or one it forwards to).
        while service.view().leader.is_none() {
            glommio::timer::sleep(METADATA_TICK).await;
        }
        match service
            .request(ControllerRequest::RegisterBroker(
                registration.clone(),
                endpoints.clone(),
            ))
            .await
        {
            Ok(()) => return registration.incarnation,
            // The clock went back since an earlier life: go one past it.
            Err(ControllerError::Refused(MetadataError::StaleIncarnation { current, .. })) => {
                registration.incarnation = Incarnation(current.0 + 1);
            }
            Err(e) => {
                tracing::warn!(error = %e, "registering with the controller failed; retrying");
                *life.controller_error.borrow_mut() = Some(format!("registering: {e}"));
                glommio::timer::sleep(RETRY_EVERY).await;
            }
        }
    }
}

/// Creates the broker's own SASL user (`sasl_broker_user`) unless a user
/// of that name exists: the controller decides against the committed
/// metadata, so a password changed since is kept. Retried while the
/// quorum cannot answer; a refusal is logged and the broker carries on.
async fn bootstrap_user(service: &MetadataService, user: &str, password: &str) {
    let credentials: Vec<_> = control::ScramMechanism::ALL
        .into_iter()
        .map(|m| crate::security::sasl::credential_for_password(user, m, password))
        .collect();
    loop {
        match service
            .request(ControllerRequest::BootstrapScramUser(credentials.clone()))
            .await
        {
            Ok(()) => return,
            Err(ControllerError::Refused(e)) => {
                tracing::error!(%user, error = %e, "the broker's SASL user was refused");
                return;
            }
            Err(e) => {
                tracing::info!(error = %e, "creating the broker's SASL user; retrying");
                glommio::timer::sleep(RETRY_EVERY).await;
            }
        }
    }
}

/// Heartbeats this life until the broker shuts down: each answered one
/// extends the lease; the first that finds the life unfenced calls
/// `on_live`.
async fn heartbeat_while_alive(
    service: &MetadataService,
    config: &BrokerConfig,
    (id, incarnation): (BrokerId, Incarnation),
    life: &BrokerLife,
    on_live: impl FnOnce(),
) {
    let heartbeat_every = Duration::from_millis(config.broker_heartbeat_interval_ms);
    let session = Duration::from_millis(config.broker_session_timeout_ms);
    let mut on_live = Some(on_live);
    while !life.shutting_down.get() {
        let started = std::time::Instant::now();
        let sent_ms = monotonic_ms();
        match heartbeat(service, id, incarnation, session / 2).await {
            Ok(()) => {
                // The controller fences a broker silent for a session from
                // when it last heard it, which is after this was sent.
                let lease = sent_ms + (session.as_millis() as u64) * 9 / 10;
                extend_lease(lease);
                life.last_heartbeat_ms.set(Some(monotonic_ms()));
                *life.controller_error.borrow_mut() = None;
            }
            Err(why) => *life.controller_error.borrow_mut() = Some(why),
        }
        // The first heartbeat unfences the new life.
        if on_live.is_some() && is_live(service, id, incarnation) {
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

/// One heartbeat, answered within `timeout`, with this node's metadata
/// then caught up to where the controller's was when it answered; or why not.
async fn heartbeat(
    service: &MetadataService,
    id: BrokerId,
    incarnation: Incarnation,
    timeout: Duration,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let answer = service.heartbeat_acknowledged(id, incarnation);
    let index = match wait::within(timeout, answer).await {
        Some(Ok(index)) => index,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "heartbeat not acknowledged");
            return Err(format!("heartbeat refused: {e}"));
        }
        None => return Err(format!("heartbeat unanswered within {timeout:?}")),
    };
    let left = timeout.saturating_sub(started.elapsed());
    if !wait::until(METADATA_TICK, left, || service.view().applied >= index).await {
        return Err(format!(
            "metadata not caught up to index {index} within {timeout:?} (at {})",
            service.view().applied
        ));
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
