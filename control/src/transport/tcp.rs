//! The TCP transport between metadata nodes, on glommio: one outgoing
//! connection per peer with a bounded queue, reconnecting with exponential
//! backoff; incoming connections read frames into one inbound queue.
//! Queues drop when full (Raft retransmits); every dropped or failed
//! message is reported so a leader can retry snapshots. Dropping the
//! transport stops its tasks and closes its listener.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpListener;
use glommio::{spawn_local, Task};
use raft::eraftpb::{Message, MessageType};

use crate::controller::request::Call;
use crate::controller::request::ControllerError;
use crate::raft::node::NodeId;
use crate::transport::forward::{
    decode_call, encode_members_reply, encode_reply, read_frame, CALL_PREAMBLE, RAFT_PREAMBLE,
};
use crate::transport::link::{self, Link, QuorumTls};
use crate::transport::{
    decode_header, decode_payload, encode_frame, Inbound, Transport, FRAME_HEADER_BYTES,
};

/// Messages queued per peer before new ones are dropped.
pub const PEER_QUEUE_MESSAGES_MAX: usize = 1024;
/// Inbound messages queued before new ones are dropped.
pub const INBOUND_QUEUE_MESSAGES_MAX: usize = 4096;
/// Incoming connections read at once (a few per peer).
const READERS_MAX: usize = 64;
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A node's connections to its peers.
pub struct TcpTransport {
    id: NodeId,
    local_addr: SocketAddr,
    /// Each peer's address, queue and sending task (dropping it cancels it).
    peers: RefCell<BTreeMap<NodeId, Peer>>,
    /// With TLS, the addresses that may connect: the peers'.
    allowed: Rc<RefCell<Vec<std::net::IpAddr>>>,
    inbound_tx: Rc<LocalSender<Inbound>>,
    inbound: LocalReceiver<Inbound>,
    tls: Option<QuorumTls>,
    // Held so dropping the transport cancels it.
    _accept: Task<()>,
    _readers: Rc<RefCell<Vec<Task<()>>>>,
}

/// One peer's outgoing connection.
struct Peer {
    address: SocketAddr,
    queue: LocalSender<Message>,
    _task: Task<()>,
}

impl TcpTransport {
    /// Listens on `listen` and connects to `peers` (id -> address). Must run
    /// on a glommio executor.
    pub fn start(
        id: NodeId,
        listen: SocketAddr,
        peers: BTreeMap<NodeId, SocketAddr>,
    ) -> std::io::Result<TcpTransport> {
        Self::start_with(id, listen, peers, None)
    }

    /// As [`TcpTransport::start`], over TLS if `tls` (both ends present
    /// certificates from the cluster's CA).
    pub fn start_with(
        id: NodeId,
        listen: SocketAddr,
        peers: BTreeMap<NodeId, SocketAddr>,
        tls: Option<QuorumTls>,
    ) -> std::io::Result<TcpTransport> {
        Self::with_listener(id, TcpListener::bind(listen)?, peers, tls)
    }

    /// As [`TcpTransport::start`], on a listener already bound (so its
    /// address can be handed to peers first).
    pub fn with_listener(
        id: NodeId,
        listener: TcpListener,
        peers: BTreeMap<NodeId, SocketAddr>,
        tls: Option<QuorumTls>,
    ) -> std::io::Result<TcpTransport> {
        let local_addr = listener.local_addr()?;
        let (inbound_tx, inbound) = local_channel::new_bounded(INBOUND_QUEUE_MESSAGES_MAX);
        let inbound_tx = Rc::new(inbound_tx);
        let readers = Rc::new(RefCell::new(Vec::new()));
        // With TLS, only the peers' addresses may connect (the CA may
        // also sign Kafka clients' certificates), unless the CA is the
        // cluster's own (`QuorumTls::from_any_address`).
        let allowed = Rc::new(RefCell::new(
            peers.values().map(|a| a.ip().to_canonical()).collect(),
        ));
        let accept = spawn_local(accept_loop(
            id,
            listener,
            inbound_tx.clone(),
            readers.clone(),
            tls.clone().map(|tls| (tls, allowed.clone())),
        ));
        let transport = TcpTransport {
            id,
            local_addr,
            peers: RefCell::default(),
            allowed,
            inbound_tx,
            inbound,
            tls,
            _accept: accept,
            _readers: readers,
        };
        for (peer, address) in peers {
            transport.set_peer(peer, address);
        }
        Ok(transport)
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Transport for TcpTransport {
    fn send(&self, messages: Vec<Message>) {
        for message in messages {
            let to = message.to;
            let snapshot = message.get_msg_type() == MessageType::MsgSnapshot;
            let queued = self
                .peers
                .borrow()
                .get(&to)
                .is_some_and(|peer| peer.queue.try_send(message).is_ok());
            if !queued {
                tracing::debug!(
                    from = self.id,
                    to,
                    "dropping a raft message: peer unknown or queue full"
                );
                let _ = self
                    .inbound_tx
                    .try_send(Inbound::Unreachable { to, snapshot });
            }
        }
    }

    async fn recv(&self) -> Option<Inbound> {
        self.inbound.recv().await
    }

    fn set_peer(&self, peer: NodeId, address: SocketAddr) {
        if peer == self.id {
            return;
        }
        let mut peers = self.peers.borrow_mut();
        if peers.get(&peer).is_some_and(|p| p.address == address) {
            return;
        }
        let (queue, rx) = local_channel::new_bounded(PEER_QUEUE_MESSAGES_MAX);
        let task = spawn_local(send_loop(
            (peer, address),
            rx,
            self.inbound_tx.clone(),
            self.tls.clone(),
        ));
        // Replacing an entry drops the old task, closing its connection.
        let replaced = peers.insert(
            peer,
            Peer {
                address,
                queue,
                _task: task,
            },
        );
        if replaced.is_some() {
            // A snapshot queued or in flight to the old address is lost:
            // its sender must hear so (raft-rs waits for the report).
            let _ = self.inbound_tx.try_send(Inbound::Unreachable {
                to: peer,
                snapshot: true,
            });
        }
        let ip = address.ip().to_canonical();
        let mut allowed = self.allowed.borrow_mut();
        if !allowed.contains(&ip) {
            allowed.push(ip);
        }
    }
}

async fn accept_loop(
    id: NodeId,
    listener: TcpListener,
    inbound: Rc<LocalSender<Inbound>>,
    readers: Rc<RefCell<Vec<Task<()>>>>,
    tls: Option<(QuorumTls, Rc<RefCell<Vec<std::net::IpAddr>>>)>,
) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let peer = stream.peer_addr().ok();
                let stranger = (tls.as_ref())
                    .is_some_and(|(tls, allowed)| tls.refuses(peer, &allowed.borrow()));
                if stranger {
                    tracing::warn!(
                        node = id,
                        ?peer,
                        "closing a metadata connection from an address that is no quorum member's"
                    );
                    continue;
                }
                let inbound = inbound.clone();
                let tls = tls.as_ref().map(|(tls, _)| tls.clone());
                let task = spawn_local(async move {
                    match link::accept(stream, tls.as_ref()).await {
                        Ok(link) => read_loop(id, link, inbound).await,
                        Err(e) => {
                            tracing::warn!(node = id, ?peer, error = %e, "closing a metadata connection: TLS handshake failed")
                        }
                    }
                });
                let mut readers = readers.borrow_mut();
                // Peers reconnect after failures: keep the newest readers,
                // cancelling the oldest (their connections are long gone).
                if readers.len() >= READERS_MAX {
                    drop(readers.remove(0)); // cancels it
                }
                readers.push(task);
            }
            Err(e) => {
                tracing::warn!(node = id, error = %e, "accepting a metadata connection failed");
                glommio::timer::sleep(BACKOFF_MIN).await;
            }
        }
    }
}

/// Reads a connection's preamble, then its Raft messages or its calls.
async fn read_loop(id: NodeId, mut stream: Link, inbound: Rc<LocalSender<Inbound>>) {
    let mut preamble = [0u8; 4];
    if stream.read_exact(&mut preamble).await.is_err() {
        return;
    }
    match preamble {
        RAFT_PREAMBLE => read_messages(id, stream, inbound).await,
        CALL_PREAMBLE => answer_calls(id, stream, inbound).await,
        _ => tracing::warn!(
            node = id,
            "closing a metadata connection with an unknown preamble"
        ),
    }
}

/// Answers calls in order until the caller hangs up or sends garbage.
async fn answer_calls(id: NodeId, mut stream: Link, inbound: Rc<LocalSender<Inbound>>) {
    loop {
        let call = match read_frame(&mut stream).await.and_then(|p| decode_call(&p)) {
            Ok(call) => call,
            Err(e) => {
                // A caller hanging up after its reply lands here too.
                tracing::debug!(node = id, error = %e, "closing a controller call connection");
                return;
            }
        };
        let frame = if let Call::Members = call {
            let (reply, answer) = futures::channel::oneshot::channel();
            let members = match inbound.try_send(Inbound::Members { reply }) {
                Ok(()) => answer.await.unwrap_or(Err(ControllerError::Unavailable)),
                Err(_) => Err(ControllerError::Unavailable),
            };
            encode_members_reply(&members)
        } else {
            let (reply, answer) = futures::channel::oneshot::channel();
            let reply = match inbound.try_send(Inbound::Call { call, reply }) {
                Ok(()) => answer.await.unwrap_or(Err(ControllerError::Unavailable)),
                Err(_) => Err(ControllerError::Unavailable),
            };
            encode_reply(&reply)
        };
        let written = async {
            stream.write_all(&frame).await?;
            stream.flush().await
        };
        if written.await.is_err() {
            return;
        }
    }
}

/// Reads frames until the peer hangs up or sends garbage; a bad connection
/// is logged and closed, the node carries on.
async fn read_messages(id: NodeId, mut stream: Link, inbound: Rc<LocalSender<Inbound>>) {
    loop {
        let mut header = [0u8; FRAME_HEADER_BYTES];
        if stream.read_exact(&mut header).await.is_err() {
            return;
        }
        let result = match decode_header(header) {
            Ok((length, crc)) => {
                let mut payload = vec![0u8; length];
                if stream.read_exact(&mut payload).await.is_err() {
                    return;
                }
                decode_payload(&payload, crc)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(message) if message.to == id => {
                let _ = inbound.try_send(Inbound::Message(message));
            }
            Ok(message) => {
                tracing::warn!(
                    node = id,
                    to = message.to,
                    "closing a connection that sent a message for another node"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(node = id, error = %e, "closing a metadata connection after a bad frame");
                return;
            }
        }
    }
}

async fn send_loop(
    (peer, address): (NodeId, SocketAddr),
    queue: LocalReceiver<Message>,
    inbound: Rc<LocalSender<Inbound>>,
    tls: Option<QuorumTls>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut failures = 0u64;
    loop {
        let mut stream = match link::connect(address, tls.as_ref()).await {
            Ok(stream) => {
                backoff = BACKOFF_MIN;
                failures = 0;
                stream
            }
            Err(e) => {
                // A refused TLS handshake is a misconfiguration: said
                // (first, then every 60th try); a peer down is not.
                if tls.is_some() && e.kind() != std::io::ErrorKind::ConnectionRefused {
                    if failures.is_multiple_of(60) {
                        tracing::warn!(peer, %address, error = %e, "cannot reach a metadata peer over TLS");
                    }
                    failures += 1;
                }
                // Messages wait in the bounded queue meanwhile; once it is
                // full, new ones are dropped and reported by `send`.
                glommio::timer::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let preamble = async {
            stream.write_all(&RAFT_PREAMBLE).await?;
            stream.flush().await
        };
        if preamble.await.is_err() {
            glommio::timer::sleep(backoff).await;
            continue;
        }
        while let Some(message) = queue.recv().await {
            let sent = async {
                stream.write_all(&encode_frame(&message)).await?;
                // TLS holds what it encrypted until flushed.
                stream.flush().await
            };
            if sent.await.is_err() {
                report(&inbound, peer, &message);
                break;
            }
        }
    }
}

fn report(inbound: &LocalSender<Inbound>, to: NodeId, message: &Message) {
    let snapshot = message.get_msg_type() == MessageType::MsgSnapshot;
    let _ = inbound.try_send(Inbound::Unreachable { to, snapshot });
}
