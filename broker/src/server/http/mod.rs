//! The HTTP listener (on shard 0): `GET /health`, `GET /metrics`
//! (Prometheus text, `server::metrics`) and the HTTP/JSON API (`api`,
//! docs/http-api.md).
//!
//! With `http_tls`, HTTPS (the Kafka port's certificate; the handshake
//! counts in the request's time limit).
//!
//! One request per connection (answered with `connection: close`). The
//! head is bounded (8 KiB), a body needs a Content-Length and is bounded
//! (`BODY_BYTES_MAX`) before anything is allocated for it; chunked bodies
//! are refused (411). A bad request gets a JSON error and the connection
//! closes; the listener carries on. At most [`CONNECTIONS_MAX`] connections
//! are open ([`CONNECTIONS_PER_IP_MAX`] from one address), and a request
//! must arrive whole within `connections_max_idle_ms` (at most
//! [`REQUEST_READ_MAX`]): idle or slow connections cannot hold the
//! process's file descriptors, and /health stays reachable.

mod access;
mod api;
mod forward;
mod group_calls;
mod groups;

use std::cell::{OnceCell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use std::time::Duration;

use futures::future::{select, Either};
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use super::admission::Admission;
use super::shard::Shard;
use super::tls::TlsServer;
use crate::authorizer::ANONYMOUS;
use crate::sasl::basic::BasicAuth;
use control::acls::{Operation, ResourceType};

pub use crate::http_request::HttpRequest;
use crate::http_request::{parse_head, request, Refusal};

/// Binds the HTTP listener; returns it with the address actually bound.
pub fn bind(listen: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let address: SocketAddr = listen
        .parse()
        .map_err(|e| std::io::Error::other(format!("http_listen {listen}: {e}")))?;
    let listener = TcpListener::bind(address).map_err(std::io::Error::from)?;
    let bound = listener.local_addr().map_err(std::io::Error::from)?;
    Ok((listener, bound))
}

/// HTTP connections open at most...
pub const CONNECTIONS_MAX: usize = 256;
/// ...and from one address.
pub const CONNECTIONS_PER_IP_MAX: usize = 64;
/// The longest a request may take to arrive whole.
pub const REQUEST_READ_MAX: Duration = Duration::from_secs(30);

/// Serves connections until the task is dropped, for `shard` (shard 0,
/// set once it exists), over TLS if `tls`. A request must arrive within
/// `read_max`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<TlsServer>>,
    shard: Rc<OnceCell<Rc<Shard>>>,
    read_max: Duration,
) {
    let admission = Admission::with_limits(CONNECTIONS_MAX, CONNECTIONS_PER_IP_MAX);
    let logins = Rc::new(RefCell::new(BasicAuth::default()));
    let read_max = read_max.min(REQUEST_READ_MAX);
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let Some(ip) = stream.peer_addr().ok().map(|a| a.ip()) else {
                    continue;
                };
                let Ok(admitted) = admission.admit(ip, false) else {
                    tracing::debug!(%ip, "refusing an HTTP connection: over its limit");
                    continue; // dropped: closed at once
                };
                let shard = shard.clone();
                let tls = tls.as_ref().map(|tls| tls.acceptor());
                let logins = logins.clone();
                glommio::spawn_local(async move {
                    let port = Port { shard, logins };
                    answer_within(stream, tls, port, read_max).await;
                    drop(admitted);
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "http accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// An answer.
#[derive(Debug)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Its content type.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// A plain-text answer.
    pub fn text(status: u16, body: impl Into<String>) -> HttpResponse {
        HttpResponse {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into().into_bytes(),
        }
    }

    /// A JSON answer.
    pub fn json(status: u16, value: &serde_json::Value) -> HttpResponse {
        HttpResponse {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(value).expect("JSON values serialize"),
        }
    }

    /// A JSON error: `{"error_code": code, "message": ...}` (the Kafka
    /// error code where one applies, else -1).
    pub fn error(status: u16, code: i16, message: impl Into<String>) -> HttpResponse {
        HttpResponse::json(
            status,
            &serde_json::json!({"error_code": code, "message": message.into()}),
        )
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if self.status == 401 {
            // Insert the challenge before the blank line ending the head.
            out.truncate(out.len() - 2);
            out.extend_from_slice(
                b"www-authenticate: Basic realm=\"broker\", charset=\"UTF-8\"\r\n\r\n",
            );
        }
        out.extend_from_slice(&self.body);
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        401 => "Unauthorized",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Payload Too Large",
        416 => "Range Not Satisfiable",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// Answers a connection, after its TLS handshake if `tls`; the handshake
/// and the request must be done within `read_max`.
async fn answer_within(
    stream: TcpStream,
    tls: Option<futures_rustls::TlsAcceptor>,
    port: Port,
    read_max: Duration,
) {
    let mut deadline = Box::pin(glommio::timer::sleep(read_max));
    let peer = stream.peer_addr().ok();
    let Some(tls) = tls else {
        return answer(stream, peer, port, deadline).await;
    };
    let shard = port.shard.clone();
    let failure = match select(tls.accept(stream), &mut deadline).await {
        Either::Left((Ok(stream), _)) => return answer(stream, peer, port, deadline).await,
        Either::Left((Err(e), _)) => e.to_string(),
        Either::Right(_) => "no handshake in time".to_string(),
    };
    if let Some(shard) = shard.get() {
        let failures = &shard.metrics.tls_handshake_failures;
        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    tracing::info!(?peer, error = %failure, "closing an HTTP connection: TLS handshake failed");
}

/// What every connection of the port shares: the shard (once it
/// exists) and the Basic logins already checked.
struct Port {
    shard: Rc<OnceCell<Rc<Shard>>>,
    logins: Rc<RefCell<BasicAuth>>,
}

async fn answer<S, D>(mut stream: S, peer: Option<SocketAddr>, port: Port, deadline: D)
where
    S: AsyncRead + AsyncWrite + Unpin,
    D: std::future::Future + Unpin,
{
    let read = {
        match select(Box::pin(read_request(&mut stream)), deadline).await {
            Either::Left((read, _)) => read,
            Either::Right(_) => Err(Some(HttpResponse::error(
                408,
                -1,
                "the request did not arrive in time",
            ))),
        }
    };
    let response = match read {
        Ok(request) => match port.shard.get().cloned() {
            Some(shard) => route(&shard, request, peer, &port.logins).await,
            None => HttpResponse::text(503, "starting\n"),
        },
        Err(Some(refusal)) => refusal,
        Err(None) => return, // the client went away
    };
    // A client that does not take its answer is dropped after the same
    // limit as one that does not send its request.
    let write = async {
        stream.write_all(&response.encode()).await?;
        stream.close().await
    };
    let taken_in_time = Box::pin(glommio::timer::sleep(REQUEST_READ_MAX));
    let _ = select(Box::pin(write), taken_in_time).await;
}

async fn route(
    shard: &Rc<Shard>,
    request: HttpRequest,
    peer: Option<SocketAddr>,
    logins: &RefCell<BasicAuth>,
) -> HttpResponse {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/health") => {
            let health = super::health::check(shard).await;
            if health.ok() {
                HttpResponse::text(200, "ok\n")
            } else {
                HttpResponse::text(503, format!("{}\n", health.problems.join("\n")))
            }
        }
        ("GET", "/metrics") => HttpResponse {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: super::metrics::render(shard).await.into_bytes(),
        },
        _ => {
            // The API answers once the broker can (as its Kafka port).
            let started = std::time::Instant::now();
            while !crate::cluster::lease::ready_to_serve(shard.cluster.view.borrow().applied_index)
            {
                if started.elapsed() > API_READY_WAIT_MAX {
                    return HttpResponse::error(503, -1, "the broker is starting");
                }
                glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
            }
            let user = match log_in_or_wait(shard, &request, peer, logins).await {
                Ok(user) => user,
                Err(refusal) => return refusal,
            };
            let authorizer = shard.cluster.authorizer();
            let principal = user.map_or_else(|| ANONYMOUS.to_string(), |u| format!("User:{u}"));
            let host = peer
                .map(|p| p.ip().to_canonical().to_string())
                .unwrap_or_default();
            if let Some(authorizer) = &authorizer {
                let segments: Vec<&str> =
                    request.path.split('/').filter(|s| !s.is_empty()).collect();
                if let Some(refusal) =
                    access::check(authorizer, &principal, &host, &request, &segments)
                {
                    return refusal;
                }
            }
            // Topics listed are those the caller may describe.
            let visible = |topic: &str| {
                authorizer.as_ref().is_none_or(|a| {
                    a.allows(
                        &principal,
                        &host,
                        Operation::Describe,
                        ResourceType::Topic,
                        topic,
                    )
                })
            };
            api::route(shard, request, &visible).await
        }
    }
}

/// Checks the request's Basic credentials when the API asks for a user
/// (the user, or None when it does not ask); a 401 (logged with the peer,
/// never the password, and counted) if they are missing or wrong.
fn log_in(
    shard: &Shard,
    request: &HttpRequest,
    peer: Option<SocketAddr>,
    logins: &RefCell<BasicAuth>,
) -> Result<Option<String>, HttpResponse> {
    if !shard.cluster.config.http_asks_for_user() {
        return Ok(None);
    }
    let outcome = match &request.authorization {
        Some(header) => {
            let view = shard.cluster.view.borrow();
            logins.borrow_mut().verify(header, &view.metadata)
        }
        None => Err(crate::sasl::Failure::Malformed(
            "no Authorization header".into(),
        )),
    };
    outcome.map(Some).map_err(|failure| {
        let failures = &shard.metrics.http_authentication_failures;
        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(?peer, %failure, "refusing an HTTP API request: not logged in");
        HttpResponse::error(
            401,
            -1,
            "log in with HTTP Basic authentication as a broker user",
        )
    })
}

/// How long a refused login's answer waits, as the Kafka port's: a
/// client guessing passwords gets one guess per connection and per this.
const LOGIN_FAILURE_DELAY: Duration = Duration::from_millis(100);

/// [`log_in`], a refusal answered after [`LOGIN_FAILURE_DELAY`].
async fn log_in_or_wait(
    shard: &Shard,
    request: &HttpRequest,
    peer: Option<SocketAddr>,
    logins: &RefCell<BasicAuth>,
) -> Result<Option<String>, HttpResponse> {
    let outcome = log_in(shard, request, peer, logins);
    if outcome.is_err() {
        glommio::timer::sleep(LOGIN_FAILURE_DELAY).await;
    }
    outcome
}

/// How long an API request made while the broker starts waits for it.
const API_READY_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads one request: its head (bounded), then a body of Content-Length
/// bytes (bounded), parsed by [`crate::http_request`]. `Err(Some(..))`
/// answers a bad request; `Err(None)`: the client hung up.
async fn read_request<S>(stream: &mut S) -> Result<HttpRequest, Option<HttpResponse>>
where
    S: AsyncRead + Unpin,
{
    let refused = |r: Refusal| Some(HttpResponse::error(r.status, -1, r.message));
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head = loop {
        if let Some(head) = parse_head(&buffer).map_err(refused)? {
            break head;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(None),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let mut body = buffer.split_off(head.head_bytes);
    let have = body.len();
    body.resize(head.content_length, 0);
    if stream.read_exact(&mut body[have..]).await.is_err() {
        return Err(None);
    }
    Ok(request(&head, body))
}
