//! The HTTP listener (on shard 0): `GET /health`, `GET /metrics`
//! (Prometheus text, `server::metrics`) and the HTTP/JSON API (`api`,
//! docs/http-api.md).
//!
//! With `http_tls`, HTTPS (the Kafka port's certificate; the handshake
//! counts in the request's time limit).
//!
//! HTTP/1.1 by hyper: keep-alive, pipelined requests and chunked bodies,
//! with the broker's bounds kept. The head is bounded (8 KiB, else 431),
//! a body is bounded (`BODY_BYTES_MAX`, else 413) before anything is
//! allocated for it, declared or chunked (`crate::http_request`). A bad
//! request gets an error and the connection closes; the listener carries
//! on. At most [`CONNECTIONS_MAX`] connections are open
//! ([`CONNECTIONS_PER_IP_MAX`] from one address); between requests, the
//! next must arrive whole within `connections_max_idle_ms` (at most
//! [`REQUEST_READ_MAX`]), and an answer must be taken within
//! [`REQUEST_READ_MAX`] (`deadlines`): idle or slow connections cannot
//! hold the process's file descriptors, and /health stays reachable.

mod access;
mod api;
mod controller_only;
mod deadlines;
mod forward;
mod group_calls;
mod groups;
mod peer_call;
mod share_forward;
mod share_queue;

use std::cell::{OnceCell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use std::time::Duration;

use bytes::Bytes;
use futures::future::{select, Either};
use futures::{AsyncRead, AsyncWrite};
use glommio::net::{TcpListener, TcpStream};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::StatusCode;

use super::connection::admission::Admission;
use super::shard::Shard;
use super::tls::TlsServer;
use crate::security::authorizer::ANONYMOUS;
use crate::security::sasl::basic::BasicAuth;
use control::model::acls::{Operation, ResourceType};

use deadlines::{Answering, Deadlines};

pub use crate::http_request::HttpRequest;
use crate::http_request::{HyperIo, HEAD_BYTES_MAX};

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

/// What the port serves.
#[derive(Clone)]
pub enum Served {
    /// A broker's: shard 0, set once it exists.
    Broker(Rc<OnceCell<Rc<Shard>>>),
    /// A controller-only node's: its metadata node (health and metrics).
    Controller(Rc<control::service::MetadataService>),
}

/// Serves connections until the task is dropped, for `served`, over TLS
/// if `tls`. A request must arrive within `read_max`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<TlsServer>>,
    served: Served,
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
                let served = served.clone();
                let tls = tls.as_ref().map(|tls| tls.acceptor());
                let logins = logins.clone();
                glommio::spawn_local(async move {
                    let port = Rc::new(Port { served, logins });
                    serve_connection(stream, tls, port, read_max).await;
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

    /// As hyper sends it; `close` ends the connection after it (the
    /// request was not read whole, so nothing after it can be).
    fn into_hyper(self, close: bool) -> hyper::Response<Full<Bytes>> {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = hyper::Response::new(Full::new(Bytes::from(self.body)));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        if status == StatusCode::UNAUTHORIZED {
            let challenge = "Basic realm=\"broker\", charset=\"UTF-8\"";
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        if close {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// Serves a connection, after its TLS handshake if `tls` (done within
/// `read_max`).
async fn serve_connection(
    stream: TcpStream,
    tls: Option<futures_rustls::TlsAcceptor>,
    port: Rc<Port>,
    read_max: Duration,
) {
    let peer = stream.peer_addr().ok();
    let Some(tls) = tls else {
        return serve_http(stream, peer, port, read_max).await;
    };
    let deadline = Box::pin(glommio::timer::sleep(read_max));
    let failure = match select(tls.accept(stream), deadline).await {
        Either::Left((Ok(stream), _)) => return serve_http(stream, peer, port, read_max).await,
        Either::Left((Err(e), _)) => e.to_string(),
        Either::Right(_) => "no handshake in time".to_string(),
    };
    if let Served::Broker(shard) = &port.served {
        if let Some(shard) = shard.get() {
            let failures = &shard.metrics.tls_handshake_failures;
            failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    tracing::info!(?peer, error = %failure, "closing an HTTP connection: TLS handshake failed");
}

/// What every connection of the port shares: what it serves and the
/// Basic logins already checked.
struct Port {
    served: Served,
    logins: Rc<RefCell<BasicAuth>>,
}

/// hyper's read buffer per connection: a head (at most 8 KiB) and the
/// body's bytes as they arrive (what 256 connections may hold: 16 MiB).
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Answers the connection's requests, in order, until it closes, breaks
/// a bound or waits too long. A client that shuts its side down after
/// sending (`nc -N`, `curl` with a body from a pipe) still gets its
/// answers (half-close).
async fn serve_http<S>(stream: S, peer: Option<SocketAddr>, port: Rc<Port>, read_max: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let answering = Answering::new();
    let stream = Deadlines::new(stream, answering.clone(), read_max, REQUEST_READ_MAX);
    let service = hyper::service::service_fn(move |request| {
        let (port, answering) = (port.clone(), answering.clone());
        async move {
            answering.started();
            let (response, close) = answer(request, peer, &port, read_max).await;
            answering.finished();
            Ok::<_, std::convert::Infallible>(response.into_hyper(close))
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .max_buf_size(READ_BUFFER_BYTES)
        .max_header_size(HEAD_BYTES_MAX)
        .header_read_timeout(None)
        .half_close(true)
        .serve_connection(HyperIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(?peer, error = %e, "HTTP connection ended");
    }
}

/// The answer to one request, and whether the connection must close
/// after it (its body was refused, so it was not read whole).
async fn answer(
    request: hyper::Request<Incoming>,
    peer: Option<SocketAddr>,
    port: &Port,
    read_max: Duration,
) -> (HttpResponse, bool) {
    let read = Box::pin(crate::http_request::read(request));
    let request = match select(read, Box::pin(glommio::timer::sleep(read_max))).await {
        Either::Left((Ok(request), _)) => request,
        Either::Left((Err(refusal), _)) => {
            return (
                HttpResponse::error(refusal.status, -1, refusal.message),
                true,
            )
        }
        Either::Right(_) => {
            let late = HttpResponse::error(408, -1, "the request did not arrive in time");
            return (late, true);
        }
    };
    let response = match &port.served {
        Served::Controller(service) => controller_only::route(service, &request),
        Served::Broker(shard) => match shard.get().cloned() {
            Some(shard) => route(&shard, request, peer, &port.logins).await,
            None => HttpResponse::text(503, "starting\n"),
        },
    };
    (response, false)
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
        None => Err(crate::security::sasl::Failure::Malformed(
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
