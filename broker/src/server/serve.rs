//! A running shard's life: following the metadata (roles, deleted
//! topics), accepting connections once the broker is ready, and stopping
//! (controlled shutdown, draining connections), with the testing-only
//! faults of the configuration.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use control::MetadataRecord;
use futures::channel::oneshot;
use futures::FutureExt;
use glommio::net::TcpListener;

use super::admission::Admitted;
use super::connection;
use super::gathered::Gathered;
use super::shard::{Shard, Stopping};
use super::start::Changes;
use super::tls::{self, TlsServer};
use crate::cluster::lease::ready_to_serve;
use crate::cluster::quorum::BrokerLife;
use crate::cluster::view;
use crate::partition::dirs::{reconcile_topic_dirs, remove_topic_dirs};
use crate::runtime::sharded::ShardId;

/// How often a shard looks at the stop flag.
pub const STOP_POLL: Duration = Duration::from_millis(20);
/// How often a starting shard looks whether it may accept connections.
const READY_POLL: Duration = Duration::from_millis(5);
/// How long a stopping shard lets open connections finish.
pub const DRAIN_MAX: Duration = Duration::from_secs(5);

/// The testing-only faults of the configuration, on the last shard: a
/// panic some time after start, a shard that never yields once a stop
/// begins. Neither is set in production.
pub async fn test_faults(shard: Rc<Shard>, stop: Arc<AtomicBool>) {
    let config = &shard.cluster.config;
    if config.test_panic_after_ms > 0 {
        glommio::timer::sleep(Duration::from_millis(config.test_panic_after_ms)).await;
        panic!(
            "test_panic_after_ms: a deliberate panic on shard {}",
            shard.cluster.shard()
        );
    }
    if config.test_wedge_on_stop {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(STOP_POLL).await;
        }
        tracing::warn!(
            shard = %shard.cluster.shard(),
            "test_wedge_on_stop: this shard stops yielding"
        );
        loop {
            std::hint::spin_loop();
        }
    }
}

/// Follows the metadata changes into the shard's view and drops the
/// partitions of deleted topics; shard 0 also removes a deleted topic's
/// files (only that topic's: while the log replays at start, the view does
/// not know the topics created later yet).
pub async fn follow_metadata(shard: Rc<Shard>, changes: Changes) {
    // Replica roles follow the metadata, one pass at a time: a change
    // arriving during a pass asks for one more.
    let (wanted, passes) = glommio::channels::local_channel::new_bounded::<()>(1);
    glommio::spawn_local({
        let shard = shard.clone();
        async move {
            while passes.recv().await.is_some() {
                crate::replica::reconcile(&shard.replication).await;
            }
        }
    })
    .detach();
    let on_change = {
        let shard = shard.clone();
        move |record: Option<&MetadataRecord>| {
            let cluster = &shard.cluster;
            let root = cluster.partitions_root();
            shard
                .partitions
                .table
                .forget_deleted(&cluster.view.borrow().metadata);
            if cluster.shard() == ShardId::FIRST {
                match record {
                    Some(MetadataRecord::DeleteTopic { id }) => remove_topic_dirs(&root, *id),
                    // The whole state (at start, or a snapshot from the
                    // leader): deletions it holds may not have been seen.
                    None => {
                        reconcile_topic_dirs(&root, &cluster.view.borrow().metadata);
                    }
                    Some(_) => {}
                }
            }
            let _ = wanted.try_send(());
        }
    };
    match changes {
        Changes::Local(_, local) => {
            view::follow_local(local, shard.cluster.view.clone(), on_change).await
        }
        Changes::Shared(shared) => {
            view::follow_shared(shared, shard.cluster.view.clone(), on_change).await
        }
    }
}

/// How long a stopping broker waits for the controller to move its
/// leaderships away.
const CONTROLLED_SHUTDOWN_MAX: Duration = Duration::from_secs(5);

/// Controlled shutdown (shard 0, which runs the controller link): stop
/// heartbeating, then ask the controller to move this broker's leaderships
/// to other in-sync replicas and fence it, before connections drain.
async fn controlled_shutdown(shard: &Shard, life: &BrokerLife) {
    life.shutting_down.set(true);
    let controller = shard.cluster.controller_here();
    let (Some(service), Some(incarnation)) = (controller, life.incarnation.get()) else {
        return;
    };
    let request = control::service::ControllerRequest::ControlledShutdown {
        broker: shard.cluster.me,
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

/// Serves the shard's Kafka ports until `stop` is set; then (shard 0,
/// given `shutdown`) a controlled shutdown, and the connections drain.
pub async fn serve_until_stopped(
    ports: Vec<Port>,
    shard: Rc<Shard>,
    stop: Arc<AtomicBool>,
    shutdown: Option<Rc<BrokerLife>>,
) {
    let (stopping_tx, stopping_rx) = oneshot::channel::<()>();
    let stopping = stopping_rx.shared();
    shard.connections.accepting(stopping.clone());
    let acceptors: Vec<_> = ports
        .into_iter()
        .map(|port| {
            let accepting = Accepting {
                port,
                stopping: stopping.clone(),
            };
            glommio::spawn_local(accept_loop(accepting, shard.clone()))
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    if let Some(life) = shutdown {
        controlled_shutdown(&shard, &life).await;
    }
    // Dropping the acceptors cancels them and closes the ports; connections
    // close once the request they are answering (if any) is answered.
    drop(acceptors);
    shard.connections.stop();
    let _ = stopping_tx.send(());
    let started = std::time::Instant::now();
    let connections = &shard.connections;
    tracing::debug!(open = connections.open(), "stopping: draining connections");
    while connections.open() > 0 && started.elapsed() < DRAIN_MAX {
        glommio::timer::sleep(STOP_POLL).await;
    }
    if connections.open() > 0 {
        tracing::warn!(
            open = connections.open(),
            "stopping with connections still busy"
        );
    }
}

/// Accepts connections, once the broker can answer every request it
/// advertises (see [`ready_to_serve`]): until then the port
/// is bound and clients' connections wait in its backlog, their first
/// requests unread, rather than be answered before the broker knows the
/// cluster (a client connects the moment a restarted broker's port
/// accepts).
async fn accept_loop(accepting: Accepting, shard: Rc<Shard>) {
    while !ready_to_serve(shard.cluster.view.borrow().applied_index) {
        glommio::timer::sleep(READY_POLL).await;
    }
    let Accepting { port, stopping } = accepting;
    loop {
        match port.socket.accept().await {
            Ok(stream) => {
                let Some(admitted) = admit(&shard, &stream, &port.listener) else {
                    continue; // dropped: closed at once
                };
                // Answers go out when written, as Kafka's: a response that
                // waited on Nagle for the client's delayed ack would add
                // its delay to the request's latency.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
                let stopping = stopping.clone();
                let shard = shard.clone();
                let tls = port.tls.as_ref().map(|tls| tls.acceptor());
                let listener = port.listener.clone();
                shard.connections.opened();
                glommio::spawn_local(async move {
                    let peer = stream.peer_addr().ok();
                    let connections = shard.connections.clone();
                    serve_stream(stream, (listener, tls), shard, stopping, admitted).await;
                    tracing::debug!(?peer, "connection closed here");
                    connections.closed();
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

/// One Kafka listener's socket on this shard.
pub struct Port {
    /// The bound socket.
    pub socket: TcpListener,
    /// What its connections need to know of it.
    pub listener: Rc<connection::ListenerOf>,
    /// Its TLS, if it speaks TLS.
    pub tls: Option<Arc<TlsServer>>,
}

/// A port being served, and what a stop waits for.
struct Accepting {
    port: Port,
    stopping: Stopping,
}

/// How long a TLS client has to finish its handshake.
const TLS_HANDSHAKE_MAX: Duration = Duration::from_secs(10);

/// Encrypted bytes a TLS connection holds before writing them (rustls's
/// default is 64 KiB): a Fetch answer's parts larger than that (its
/// cached batches) go out 256 KiB per gathered send instead of 64 KiB.
const TLS_SEND_BUFFER: usize = 256 * 1024;

/// Serves an accepted connection, after its TLS handshake if the port
/// has TLS (a failed or slow handshake closes it, logged and counted).
async fn serve_stream(
    stream: glommio::net::TcpStream,
    (listener, tls): (
        Rc<connection::ListenerOf>,
        Option<futures_rustls::TlsAcceptor>,
    ),
    shard: Rc<Shard>,
    stopping: Stopping,
    admitted: Admitted,
) {
    let address = stream.peer_addr().ok();
    let Some(tls) = tls else {
        let client = connection::Client {
            address,
            principal: None,
            listener,
            admitted,
            refused: Default::default(),
        };
        return connection::serve(stream, client, None, shard, stopping).await;
    };
    let handshake = tls.accept(Gathered::new(stream));
    let deadline = glommio::timer::sleep(TLS_HANDSHAKE_MAX);
    let failure = match futures::future::select(handshake, Box::pin(deadline)).await {
        futures::future::Either::Left((Ok(mut stream), _)) => {
            stream.get_mut().1.set_buffer_limit(Some(TLS_SEND_BUFFER));
            let client = connection::Client {
                address,
                principal: tls::principal(stream.get_ref().1),
                listener,
                admitted,
                refused: Default::default(),
            };
            return connection::serve(stream, client, Some(tls), shard, stopping).await;
        }
        futures::future::Either::Left((Err(e), _)) => e.to_string(),
        futures::future::Either::Right(_) => "no handshake within 10 s".to_string(),
    };
    shard
        .metrics
        .tls_handshake_failures
        .fetch_add(1, Ordering::Relaxed);
    // Info, not warn: scanners and plaintext clients on a TLS port are
    // common, and each is one line.
    tracing::info!(peer = ?address, error = %failure, "closing connection: TLS handshake failed");
}

/// Counts an accepted connection against the limits; `None` when it
/// crosses one (the caller drops it, closing it at once). Refusals are
/// logged at debug level (a flood would flood the log) and counted in
/// /metrics.
fn admit(
    shard: &Shard,
    stream: &glommio::net::TcpStream,
    listener: &connection::ListenerOf,
) -> Option<Admitted> {
    let ip = stream.peer_addr().ok()?.ip();
    match shard.admission.admit(ip, listener.for_brokers) {
        Ok(admitted) => Some(admitted),
        Err(refusal) => {
            tracing::debug!(%ip, ?refusal, "refusing a connection: over its limit");
            None
        }
    }
}
