//! Accepting a Kafka port's connections: once the broker is ready to
//! serve, each accepted connection is counted against the connection
//! limits, gets TCP_NODELAY, finishes its TLS handshake if the port has
//! TLS (within a bound), and is then served on this shard.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use glommio::net::TcpListener;

use super::admission::Admitted;
use super::vectored_send::VectoredSend;
use crate::cluster::lease::ready_to_serve;
use crate::server::connection;
use crate::server::shard::{Shard, Stopping};
use crate::server::tls::{self, TlsServer};

/// How often a starting shard looks whether it may accept connections.
const READY_POLL: Duration = Duration::from_millis(5);

/// Accepts connections, once the broker can answer every request it
/// advertises (see [`ready_to_serve`]): until then the port
/// is bound and clients' connections wait in its backlog, their first
/// requests unread, rather than be answered before the broker knows the
/// cluster (a client connects the moment a restarted broker's port
/// accepts).
pub async fn accept_loop(accepting: Accepting, shard: Rc<Shard>) {
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
pub struct Accepting {
    /// The port.
    pub port: Port,
    /// Resolves when the shard stops.
    pub stopping: Stopping,
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
            share_link: Default::default(),
        };
        return connection::serve(stream, client, None, shard, stopping).await;
    };
    let handshake = tls.accept(VectoredSend::new(stream));
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
                share_link: Default::default(),
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
