//! One client connection: read frames, answer each request in order;
//! between two requests a connection (plain or TLS) may move to the shard
//! owning its partitions ([`self::move_to_shard`] says when).

pub mod accept;
pub mod admission;
pub mod authentication;
mod direct_read;
mod handover;
mod in_flight_wait;
pub mod move_to_shard;
mod pipeline;
pub mod refused_batches;
pub mod share_link;
mod vectored_send;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::{select, Either, LocalBoxFuture};
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use kafka_protocol::messages::ApiKey;

use self::admission::Admitted;
use self::direct_read::DirectRead;
use self::handover::{Detached, Movable};
use self::in_flight_wait::{answer_or_bytes, Woke};
use self::move_to_shard::{PartitionShards, ShardMoves};
use self::pipeline::{Pipeline, Placing};
use self::refused_batches::RefusedBatches;
use self::share_link::ShareLink;
use self::vectored_send::VectoredSend;
use super::handlers::access::Caller;
use super::handlers::{self, Outcome};
use super::shard::{ConnectionHost, Shard, Stopping};
use super::tls::looks_like_tls;
use crate::kafka::frame::{FrameError, FrameReader};
use crate::kafka::request::{self, Request};
use crate::kafka::response::Frame;
use crate::runtime::busy::timed;
use crate::runtime::sharded::{LocalFuture, ShardId};
use crate::security::authorizer::ANONYMOUS;
use crate::security::quotas::Metered;
use crate::security::sasl::session::{Admission, Session};

/// The largest frame a client on a SASL port may send before it logs in.
const PRE_LOGIN_FRAME_MAX: u32 = 512 * 1024;

/// Bytes read from the socket at a time (at least).
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What a wait on an empty socket reads through the stream when the rest
/// can be read straight into the frame buffer (`DirectRead`): a small
/// request whole. Kept small because every connection holds it: 64 KiB
/// for each of 10,000 idle connections was 0.6 GiB.
const WAIT_READ_BYTES: usize = 4 * 1024;

/// Who is at the other end of a connection.
#[derive(Debug)]
pub struct Client {
    /// Its address, if the socket could say.
    pub address: Option<std::net::SocketAddr>,
    /// The subject of its TLS client certificate, if it presented one.
    pub principal: Option<String>,
    /// The listener it connected to.
    pub listener: Rc<ListenerOf>,
    /// Its place under the connection limits (released when it closes).
    pub admitted: Admitted,
    /// Its idempotent batches refused before they were appended (moves
    /// with it): see [`refused_batches`].
    pub refused: RefCell<RefusedBatches>,
    /// Its share sessions (moves with it): closing it ends them.
    pub share_link: RefCell<ShareLink>,
}

/// What a connection needs of the listener it came in on.
#[derive(Debug)]
pub struct ListenerOf {
    /// Its name: Metadata answers with the brokers' addresses on it.
    pub name: Rc<str>,
    /// Its clients must log in with SASL.
    pub sasl: bool,
    /// It is the inter-broker listener of a broker with several: the
    /// limit on connections in all does not hold it back (KIP-402).
    pub for_brokers: bool,
}

/// Serves a connection (plain TCP or TLS) until the client closes it,
/// sends something that cannot be answered, or the shard stops (between
/// requests); the shard carries on either way. Between two requests it may
/// move to the shard owning the partitions it reads and writes; `tls` is
/// the acceptor a TLS connection's session was made by.
pub async fn serve<S: Movable>(
    stream: S,
    client: Client,
    tls: Option<TlsAcceptor>,
    shard: Rc<Shard>,
    stopping: Stopping,
) {
    let carried = Carried::new(client, tls, &shard);
    serve_counted(stream, carried, shard, stopping).await;
}

/// What a connection carries between requests, and to another shard.
struct Carried {
    client: Client,
    /// What was read of the next requests.
    reader: FrameReader,
    /// Its SASL login, on a SASL listener.
    session: Option<Session>,
    /// Where its partitions were, and its moves so far.
    shard_moves: ShardMoves,
    /// Over TLS, what made its session (to rebuild its stream after a move).
    tls: Option<TlsAcceptor>,
}

impl Carried {
    fn new(client: Client, tls: Option<TlsAcceptor>, shard: &Shard) -> Carried {
        let config = &shard.cluster.config;
        let session = client.listener.sasl.then(|| {
            let lifetime = (config.connections_max_reauth_ms > 0)
                .then(|| Duration::from_millis(config.connections_max_reauth_ms));
            Session::new(config.sasl_mechanisms(), lifetime)
        });
        Carried {
            client,
            reader: FrameReader::new(config.socket_request_max_bytes),
            session,
            shard_moves: ShardMoves::new(shard.cluster.shard(), 0),
            tls,
        }
    }
}

/// Why a connection's service here paused.
enum Ended {
    Closed,
    /// Its requests named another shard's partitions: it is to move there.
    Move(ShardId),
}

/// Serves the connection here until it closes or moves away.
async fn serve_counted<S: Movable>(
    mut stream: S,
    mut carried: Carried,
    shard: Rc<Shard>,
    stopping: Stopping,
) {
    let metrics = shard.metrics.clone();
    metrics.connections.fetch_add(1, Ordering::Relaxed);
    let closed_here = loop {
        let Ended::Move(to) = serve_open(&mut stream, &mut carried, &shard, &stopping).await else {
            break Some(carried);
        };
        let peer = carried.client.address;
        match hand_over(&shard, to, stream, carried).await {
            Ok(()) => {
                tracing::debug!(?peer, to = %to, "connection moved to the shard of its partitions");
                metrics.connections_moved.fetch_add(1, Ordering::Relaxed);
                break None;
            }
            Err(Some((back, mut carried_back))) => {
                carried_back.shard_moves.refused();
                (stream, carried) = (back, carried_back);
            }
            Err(None) => break None,
        }
    };
    if let Some(carried) = closed_here {
        handlers::connection_closed(&shard, carried.client.share_link.into_inner());
    }
    metrics.connections.fetch_sub(1, Ordering::Relaxed);
}

/// Serves the connection until it closes, or is to move to another
/// shard (with its TLS session and SASL login, if any) between requests.
async fn serve_open<S>(
    stream: &mut S,
    carried: &mut Carried,
    shard: &Rc<Shard>,
    stopping: &Stopping,
) -> Ended
where
    S: AsyncRead + AsyncWrite + DirectRead + Unpin,
{
    let Carried {
        client,
        reader,
        session,
        shard_moves,
        tls: _,
    } = carried;
    let client: &Client = client;
    let who = Who::of(client);
    let peer = who.peer.as_str();
    tracing::debug!(%peer, principal = ?client.principal, "serving a connection");
    let config = &shard.cluster.config;
    let frame_max = config.socket_request_max_bytes;
    let mut chunk = vec![0u8; wait_read_bytes::<S>()];
    let idle_max = Duration::from_millis(config.connections_max_idle_ms);
    let replying = Replying {
        shard,
        stopping,
        idle_max,
        peer,
        movable: config.connections_follow_partitions,
        muted_until: Cell::new(None),
    };
    // The deadline for the next request to arrive whole, made once per
    // request (not per read: a timer per read cost measurable CPU on
    // large requests, and four times more under TLS, whose reads end at
    // each 16 KiB record).
    let mut idle: Option<Timer> = None;
    if session.as_ref().is_some_and(|s| s.principal().is_none()) {
        // Before a client logs in, its frames are small (Kafka's
        // sasl.server.max.receive.size): an anonymous peer cannot make
        // the broker hold 100 MiB.
        reader.set_max(PRE_LOGIN_FRAME_MAX.min(frame_max));
    }
    let mut logged_in = false;
    let mut pipeline = Pipeline::new();
    // What to do after delivering an answer: go on, or end here.
    macro_rules! after {
        ($next:expr) => {
            match $next {
                Next::Serve => {}
                Next::Close => return Ended::Closed,
                Next::Move(to) => return Ended::Move(to),
            }
        };
    }
    // Delivers an answer (moving only if `may_move`), then as `after!`;
    // without `may_move`, it may move when nothing else is in flight.
    macro_rules! deliver {
        ($answered:expr, $may_move:expr) => {
            after!(
                replying
                    .deliver(stream, $answered, shard_moves, $may_move)
                    .await
            )
        };
        ($answered:expr) => {{
            let may_move = pipeline.is_empty();
            deliver!($answered, may_move)
        }};
    }
    // Closes the connection, once the answers owed for records already
    // appended have left (a producer would otherwise send them again).
    macro_rules! close {
        () => {{
            while let Some(answered) = pipeline.next_answer().await {
                if !matches!(
                    replying.deliver(stream, answered, shard_moves, false).await,
                    Next::Serve
                ) {
                    break;
                }
            }
            return Ended::Closed;
        }};
    }
    loop {
        loop {
            if !replying.sit_out_mute().await {
                close!();
            }
            if !logged_in && session.as_ref().is_some_and(|s| s.principal().is_some()) {
                logged_in = true;
                reader.set_max(frame_max);
            }
            let request_frame = match reader.next_frame() {
                Ok(Some(bytes)) => bytes,
                Ok(None) => break,
                Err(e) => {
                    log_bad_frame(peer, &e);
                    close!();
                }
            };
            idle = None;
            shard
                .metrics
                .bytes_in
                .fetch_add(4 + request_frame.len() as u64, Ordering::Relaxed);
            if let Some(session) = session.as_mut().filter(|s| s.wants_raw_token()) {
                let answer = authentication::raw_token(shard, session, &request_frame, peer).await;
                match answer {
                    Some(frame) if send(stream, &frame, shard, idle_max, peer).await => continue,
                    _ => return Ended::Closed,
                }
            }
            let frame_bytes = request_frame.len();
            let request = match request::parse(request_frame) {
                Ok(request) => request,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: malformed request");
                    close!();
                }
            };
            shard.metrics.request(request.header.request_api_key);
            if pipelines(&request, session.as_ref()) {
                while !pipeline.has_room_for(frame_bytes) {
                    deliver!(pipeline.next_answer().await.flatten(), false);
                }
                if !replying.sit_out_mute().await {
                    close!();
                }
                let user = session.as_ref().and_then(Session::principal);
                let handled = handle(request, shard, client, user, &who);
                pipeline.start(frame_bytes, |placing| handled(Some(placing)));
                // Its records placed, the next request may start; answers
                // that come meanwhile leave at once.
                while let Some(answered) = pipeline.until_placed().await {
                    deliver!(answered);
                }
                continue;
            }
            // Any other request waits for the Produce requests before it
            // (and the connection moves only after it: it is read already).
            while let Some(answered) = pipeline.next_answer().await {
                deliver!(answered, false);
            }
            if !replying.sit_out_mute().await {
                return Ended::Closed;
            }
            let answered = answer(request, shard, client, session, &who).await;
            deliver!(answered, true);
        }
        // Answers that came leave before more is read (reading the rest of
        // a large request would hold them back).
        while let Some(answered) = pipeline.ready_answer() {
            deliver!(answered);
        }
        // What the socket holds already goes straight into the frame
        // buffer; only an empty socket is waited on.
        // A large frame's reads stop at its end (kafka::frame).
        let limit = reader.read_limit(READ_CHUNK_BYTES);
        if S::READS_DIRECTLY {
            match stream.read_now(reader.read_buffer(limit), limit) {
                // The client closed its side (it may still read) or the
                // socket failed: what is owed is sent first.
                Some(Ok(0)) | Some(Err(_)) => close!(),
                Some(Ok(_)) => continue,
                None => {}
            }
        }
        if !pipeline.is_empty() {
            // Nothing more to read now, requests in flight: see in_flight_wait.
            let wait_read_len = limit.min(chunk.len());
            let wait_read = &mut chunk[..wait_read_len];
            let woke = answer_or_bytes(&mut pipeline, stream, wait_read, stopping).await;
            match woke {
                Woke::Answered(Some(answered)) => deliver!(answered),
                Woke::Answered(None) => {}
                Woke::Read(Ok(n)) if n > 0 => reader.read_buffer(n).extend_from_slice(&chunk[..n]),
                // The client closed its side, the socket failed, or the
                // broker stops: what is owed is sent first.
                Woke::Read(_) | Woke::Stopping => close!(),
            }
            continue;
        }
        // A connection waiting with nothing buffered holds no frame memory.
        reader.release_if_empty();
        let deadline = idle.get_or_insert_with(|| Timer::new(idle_max));
        let ended = select(stopping.clone(), deadline);
        let wait_read_len = limit.min(chunk.len());
        // A read of nothing would end it as if the client had closed.
        debug_assert!(wait_read_len > 0, "a wait reads at least a byte");
        let wait_read = &mut chunk[..wait_read_len];
        let read = match select(Box::pin(stream.read(wait_read)), ended).await {
            Either::Left((read, _)) => read,
            // Stopping (no request half-answered), or idle too long.
            Either::Right((Either::Right(_), _)) => {
                tracing::debug!(%peer, "closing an idle connection");
                return Ended::Closed;
            }
            Either::Right(_) => return Ended::Closed,
        };
        let n = match read {
            Ok(0) | Err(_) => return Ended::Closed,
            Ok(n) => n,
        };
        reader.read_buffer(n).extend_from_slice(&chunk[..n]);
    }
}

/// The bytes a connection's waits on an empty socket read through its
/// stream: a few when the rest can be read directly, whole chunks when
/// everything goes through the stream (TLS decrypts first).
fn wait_read_bytes<S: DirectRead>() -> usize {
    if S::READS_DIRECTLY {
        WAIT_READ_BYTES
    } else {
        READ_CHUNK_BYTES
    }
}

/// Whether a request joins the connection's [`Pipeline`]: a Produce its
/// client may send (anything else is answered alone, after those before
/// it; a refused one closes the connection there).
fn pipelines(request: &Request, session: Option<&Session>) -> bool {
    request.api_key == ApiKey::Produce
        && session
            .is_none_or(|s| matches!(s.admit(ApiKey::Produce, Instant::now()), Admission::Serve))
}

/// After an answer: serve on, close, or move to another shard.
enum Next {
    Serve,
    Close,
    Move(ShardId),
}

/// What delivering a connection's answers needs.
struct Replying<'c> {
    shard: &'c Rc<Shard>,
    stopping: &'c Stopping,
    idle_max: Duration,
    peer: &'c str,
    /// Connections follow their partitions' shards (configured).
    movable: bool,
    /// Over a quota: reads nothing more until then (KIP-219). One mute
    /// for the answers of several requests in flight, not one each.
    muted_until: Cell<Option<Instant>>,
}

impl Replying<'_> {
    /// Waits out a mute, if any; false if the shard stops meanwhile.
    async fn sit_out_mute(&self) -> bool {
        let Some(until) = self.muted_until.take() else {
            return true;
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        let mute = glommio::timer::sleep(left);
        matches!(
            select(Box::pin(mute), self.stopping.clone()).await,
            Either::Left(_)
        )
    }

    /// Sends an answer (None: the request closes the connection), mutes
    /// the connection for its throttle time, and says whether it is to
    /// move now (only if `may_move`: nothing else in flight).
    async fn deliver<S: AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        answered: Option<Answered>,
        shard_moves: &mut ShardMoves,
        may_move: bool,
    ) -> Next {
        let Some(answered) = answered else {
            return Next::Close;
        };
        let shard = self.shard;
        if let Some(response) = &answered.response {
            if !send(stream, response, shard, self.idle_max, self.peer).await || answered.close {
                return Next::Close;
            }
        }
        let throttled = answered.throttled_ms;
        if throttled > 0 {
            // Over its quota: answered at once with the throttle time,
            // then muted for it before it reads on.
            shard.metrics.throttled(throttled);
            let until = Instant::now() + Duration::from_millis(throttled);
            let later = self.muted_until.get().map_or(until, |u| u.max(until));
            self.muted_until.set(Some(later));
        }
        let Some(to) = shard_moves.after(answered.on).filter(|_| self.movable) else {
            return Next::Serve;
        };
        if !may_move || shard.connections.serving().is_none() || answered.metered {
            // In flight: it moves later, between requests. Stopping: it
            // closes here. Metered: a client's quota is a per-shard share,
            // and its connections gathered on one shard would get a
            // fraction of it.
            return Next::Serve;
        }
        Next::Move(to)
    }
}

/// How the logs and the group coordinator name a connection's client.
struct Who {
    /// Its address, for the logs.
    peer: String,
    /// How DescribeGroups shows a member's host, as Kafka does (`/ip`).
    host: String,
}

impl Who {
    fn of(client: &Client) -> Who {
        let address = client.address;
        Who {
            peer: address.map(|a| a.to_string()).unwrap_or_default(),
            host: address.map(|a| format!("/{}", a.ip())).unwrap_or_default(),
        }
    }
}

/// One request answered, and what its answer asks of the connection.
struct Answered {
    response: Option<Frame>,
    /// Close once the answer is sent (a login that failed).
    close: bool,
    /// Over a quota: muted this long once answered.
    throttled_ms: u64,
    /// Where the partitions it named live (whether to move).
    on: PartitionShards,
    /// Some client quota is set (connections then stay put).
    metered: bool,
}

impl Answered {
    fn login(frame: Frame, close: bool) -> Answered {
        Answered {
            response: Some(frame),
            close,
            throttled_ms: 0,
            on: PartitionShards::None,
            metered: false,
        }
    }
}

/// Answers one request, alone (appends from one producer connection
/// keep their order): None when the connection is to close (said in the
/// log).
async fn answer(
    request: Request,
    shard: &Rc<Shard>,
    client: &Client,
    session: &mut Option<Session>,
    who: &Who,
) -> Option<Answered> {
    let peer = &who.peer;
    let api_key = request.header.request_api_key;
    match session
        .as_ref()
        .map(|s| s.admit(request.api_key, Instant::now()))
    {
        Some(Admission::Refuse(why)) => {
            tracing::info!(%peer, api = ?request.api_key, why, "closing connection: not authenticated");
            None
        }
        Some(Admission::Authenticate) | None
            if matches!(
                request.api_key,
                ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
            ) =>
        {
            match authentication::answer(shard, session.as_mut(), &request, peer).await {
                Ok(answer) => Some(Answered::login(answer.frame, answer.close)),
                Err(e) => {
                    shard.metrics.request_error(api_key);
                    tracing::warn!(%peer, api = ?request.api_key, error = %e, "closing connection");
                    None
                }
            }
        }
        _ => {
            let user = session.as_ref().and_then(Session::principal);
            handle(request, shard, client, user, who)(None).await
        }
    }
}

/// Answers a request past the login, as its caller (ACLs, quotas), its
/// SASL `user` as it is now (a re-authentication may change it later:
/// the answer owns it, so it may run on while the connection reads
/// more). Given a [`Placing`], a Produce drops it once its records are
/// placed.
fn handle<'a>(
    request: Request,
    shard: &'a Rc<Shard>,
    client: &'a Client,
    user: Option<&str>,
    who: &'a Who,
) -> impl FnOnce(Option<Placing>) -> LocalBoxFuture<'a, Option<Answered>> {
    let user = user.map(str::to_owned);
    move |placing| Box::pin(handle_as(request, shard, client, user, who, placing))
}

async fn handle_as(
    request: Request,
    shard: &Rc<Shard>,
    client: &Client,
    user: Option<String>,
    who: &Who,
    placing: Option<Placing>,
) -> Option<Answered> {
    // The handler takes the request over: what the logs name, and the
    // client id the caller borrows, are kept apart from it.
    let (api, api_key, version) = (
        request.api_key,
        request.header.request_api_key,
        request.header.request_api_version,
    );
    let client_id = request.header.client_id.clone();
    let client_id = client_id.as_deref().unwrap_or("");
    let mut caller = caller(shard, client, user.as_deref(), client_id, &who.host);
    if let Some(placing) = placing {
        caller = caller.telling_when_placed(placing);
    }
    let outcome = if caller.metered() {
        // The request-time quota: the shard's time the handling took,
        // metered once it is answered (its pause mutes the connection;
        // throttle_time_ms in the answer carries the byte-rate quotas').
        let (outcome, busy) = timed(handlers::handle(shard, request, &caller)).await;
        // Never replication: not a follower's fetch, nor anything on a
        // listener kept for brokers.
        if !caller.is_replication() && !client.listener.for_brokers {
            caller.meter(shard, Metered::RequestTime, busy.as_micros() as usize);
        }
        outcome
    } else {
        handlers::handle(shard, request, &caller).await
    };
    let response = match outcome {
        Ok(Outcome::Respond(response)) => Some(response),
        Ok(Outcome::NoResponse) => None,
        Err(e) => {
            shard.metrics.request_error(api_key);
            tracing::warn!(peer = %who.peer, ?api, version, error = %e, "closing connection");
            return None;
        }
    };
    Some(Answered {
        response,
        close: false,
        throttled_ms: caller.throttled_ms(),
        on: caller.partition_shards(),
        metered: caller.metered(),
    })
}

/// A connection on its way to another shard: everything it carries, its
/// stream taken apart (the listener by its parts: `Rc`s stay home).
struct Handover {
    stream: Detached,
    address: Option<std::net::SocketAddr>,
    principal: Option<String>,
    listener: (String, bool, bool),
    admitted: Admitted,
    refused: RefusedBatches,
    share_link: ShareLink,
    reader: FrameReader,
    session: Option<Session>,
    shard_moves: ShardMoves,
    tls: Option<TlsAcceptor>,
}

impl Handover {
    fn new(stream: Detached, carried: Carried) -> Handover {
        let Carried {
            client,
            reader,
            session,
            shard_moves,
            tls,
        } = carried;
        let listener = &client.listener;
        Handover {
            stream,
            address: client.address,
            principal: client.principal,
            listener: (
                listener.name.to_string(),
                listener.sasl,
                listener.for_brokers,
            ),
            admitted: client.admitted,
            refused: client.refused.into_inner(),
            share_link: client.share_link.into_inner(),
            reader,
            session,
            shard_moves,
            tls,
        }
    }

    /// What the connection carries, on the shard that serves it now.
    fn into_carried(self) -> (Detached, Carried) {
        let (name, sasl, for_brokers) = self.listener;
        let client = Client {
            address: self.address,
            principal: self.principal,
            listener: Rc::new(ListenerOf {
                name: name.into(),
                sasl,
                for_brokers,
            }),
            admitted: self.admitted,
            refused: RefCell::new(self.refused),
            share_link: RefCell::new(self.share_link),
        };
        let carried = Carried {
            client,
            reader: self.reader,
            session: self.session,
            shard_moves: self.shard_moves,
            tls: self.tls,
        };
        (self.stream, carried)
    }
}

/// Moves a connection (between two requests, nothing in flight on its
/// socket) to shard `to`. Err(Some) gives it back when it cannot go (its
/// socket cannot be copied, or `to` is stopping); Err(None) when it was
/// lost on the way (`to` is gone: the broker stops) and is to close.
async fn hand_over<S: Movable>(
    shard: &Shard,
    to: ShardId,
    stream: S,
    carried: Carried,
) -> Result<(), Option<(S, Carried)>> {
    let detached = match stream.detach() {
        Ok(detached) => detached,
        Err((stream, e)) => {
            tracing::warn!(error = %e, "cannot copy a connection's socket; it stays on its shard");
            return Err(Some((stream, carried)));
        }
    };
    let handover = Box::new(Handover::new(detached, carried));
    let adopted = shard
        .connection_hosts
        .invoke_on(to, |host| -> LocalFuture<_> {
            Box::pin(async move { adopt(&host, handover) })
        })
        .await;
    let back = match adopted {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(back)) => back,
        Err(_) => return Err(None),
    };
    let (detached, carried) = back.into_carried();
    match reattach(detached, carried.tls.as_ref()).await {
        Ok(stream) => Err(Some((stream, carried))),
        Err(e) => {
            tracing::warn!(error = %e, "closing a connection that could not move back together");
            Err(None)
        }
    }
}

/// Takes over a connection from another shard and serves it here, unless
/// this shard does not accept connections (not yet, or stopping).
fn adopt(host: &Rc<ConnectionHost>, handover: Box<Handover>) -> Result<(), Box<Handover>> {
    let Some((shard, stopping)) = host.serving() else {
        return Err(handover);
    };
    let (detached, mut carried) = handover.into_carried();
    carried.shard_moves = ShardMoves::new(shard.cluster.shard(), carried.shard_moves.moves() + 1);
    host.opened();
    let host = host.clone();
    glommio::spawn_local(async move {
        if detached.is_tls() {
            resume::<TlsStream<VectoredSend>>(detached, carried, shard, stopping).await;
        } else {
            resume::<TcpStream>(detached, carried, shard, stopping).await;
        }
        host.closed();
    })
    .detach();
    Ok(())
}

/// Puts a moved connection's stream back together and serves it.
async fn resume<S: Movable>(
    detached: Detached,
    carried: Carried,
    shard: Rc<Shard>,
    stopping: Stopping,
) {
    match reattach::<S>(detached, carried.tls.as_ref()).await {
        Ok(stream) => serve_counted(stream, carried, shard, stopping).await,
        Err(e) => {
            tracing::warn!(error = %e, "closing a moved connection that could not be put back together")
        }
    }
}

/// How long putting a moved stream back together may take: a TLS session
/// may still hold output its client has to take first (what it queued
/// while reading a request answered with nothing, as an acks=0 Produce).
const REATTACH_MAX: Duration = Duration::from_secs(10);

/// [`Movable::attach`] within [`REATTACH_MAX`].
async fn reattach<S: Movable>(detached: Detached, tls: Option<&TlsAcceptor>) -> std::io::Result<S> {
    within(REATTACH_MAX, S::attach(detached, tls))
        .await
        .unwrap_or_else(|| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "its client took nothing within 10 s",
            ))
        })
}

/// Who sent the request now (its SASL user can change on
/// re-authentication), for the ACL checks and the quotas.
fn caller<'a>(
    shard: &Shard,
    client: &'a Client,
    user: Option<&str>,
    client_id: &'a str,
    group_host: &'a str,
) -> Caller<'a> {
    let principal = || match (user, &client.principal) {
        (Some(user), _) => format!("User:{user}"),
        (None, Some(subject)) => format!("User:{subject}"),
        (None, None) => ANONYMOUS.to_string(),
    };
    // IPv4 clients of a dual-stack port appear as ::ffff:a.b.c.d: ACLs
    // name them as a.b.c.d.
    let ip = client.address.map(|a| a.ip().to_canonical());
    let metered = !shard
        .cluster
        .view
        .borrow()
        .metadata
        .client_quotas
        .is_empty();
    let checks = (shard.cluster.authorizer(), metered);
    let on = (group_host, client.listener.name.clone());
    Caller::new(checks, principal, (ip, client_id), on)
        .remembering(&client.refused)
        .linking(&client.share_link)
}

/// Writes an answer; false if the connection is to close (the client
/// went, or did not take its answer within `limit`).
async fn send<S: AsyncWrite + Unpin>(
    stream: &mut S,
    response: &Frame,
    shard: &Shard,
    limit: Duration,
    peer: &str,
) -> bool {
    shard
        .metrics
        .bytes_out
        .fetch_add(response.len() as u64, Ordering::Relaxed);
    let write = async {
        for part in response.parts() {
            stream.write_all(part).await?;
        }
        // Sends what TLS buffered (nothing to do on plain TCP).
        stream.flush().await
    };
    // A client that stops reading its answers must not hold the
    // connection (and its answer's memory) forever.
    match within(limit, write).await {
        Some(Ok(())) => true,
        Some(Err(_)) => false,
        None => {
            tracing::info!(%peer, "closing a connection whose client has not taken its answer within connections_max_idle_ms");
            false
        }
    }
}

/// `work`'s outcome, or `None` if it takes longer than `limit`. The timer
/// is armed only when the work does not finish at its first poll: most
/// answers are written at once, and a timer per answer is avoidable work.
async fn within<F: std::future::Future>(limit: Duration, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    if let std::task::Poll::Ready(done) = futures::poll!(work.as_mut()) {
        return Some(done);
    }
    match select(work, Timer::new(limit)).await {
        Either::Left((done, _)) => Some(done),
        Either::Right(_) => None,
    }
}

/// Says why a connection's bytes cannot be framed: a TLS handshake on a
/// plaintext port reads as an absurd size, and is named as what it is.
fn log_bad_frame(peer: &str, error: &FrameError) {
    let FrameError::Size { size, .. } = error;
    if looks_like_tls(&(*size as u32).to_be_bytes()) {
        tracing::warn!(%peer, "closing connection: a TLS handshake on a plaintext port (the client's security.protocol is SSL, the listener's PLAINTEXT)");
    } else {
        tracing::warn!(%peer, error = %error, "closing connection: bad request frame");
    }
}
