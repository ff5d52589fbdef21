//! One HTTP call to another broker's HTTP API (its address from the
//! metadata, `control::model::HTTP_ENDPOINT`), for the calls only that
//! broker can answer and the Kafka protocol cannot carry: the queue API's
//! receive and acknowledgement by receipt on the partitions it leads.
//! Over TLS when the HTTP API speaks it (the broker's inter-broker TLS
//! settings, or `ssl_ca_location` with its own certificate if set), as
//! the broker's own user when it asks for one (a super user: the caller's
//! ACLs are checked by the broker it called). One request per connection
//! (`Connection: close`), its answer bounded. Host names are resolved on
//! a thread of their own (a shard never blocks on DNS), and remembered.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use base64::Engine;
use client::tls::ClientTls;
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::rustls::pki_types::ServerName;
use glommio::net::TcpStream;

use crate::cluster::Cluster;
use crate::config::BrokerConfig;

/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 64 << 20;
/// How long a host name's addresses are remembered.
const RESOLVED_FOR: Duration = Duration::from_secs(60);

thread_local! {
    /// Host names resolved on this shard, with when.
    static RESOLVED: RefCell<HashMap<String, (Instant, Vec<SocketAddr>)>> =
        RefCell::new(HashMap::new());
    /// The TLS settings read from the files, when the inter-broker
    /// listener has none (read once per shard).
    static FILE_TLS: RefCell<Option<ClientTls>> = const { RefCell::new(None) };
}

/// Why a call to another broker failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerCallError {
    /// Not reachable, or the connection failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The answer was not HTTP, or too large.
    #[error("{0}")]
    Answer(String),
    /// The HTTP API speaks TLS and no CA to trust is configured.
    #[error("the HTTP API speaks TLS and no ssl_ca_location is set")]
    NoTrust,
    /// No answer in time.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

/// POSTs `body` (JSON) to `path` (with its query) at `address`; the
/// status and body of the answer, within `timeout`.
pub async fn post(
    cluster: &Cluster,
    address: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String), PeerCallError> {
    let call = Box::pin(post_now(cluster, address, path, body));
    let timer = Box::pin(glommio::timer::sleep(timeout));
    match futures::future::select(call, timer).await {
        futures::future::Either::Left((answer, _)) => answer,
        futures::future::Either::Right(_) => Err(PeerCallError::TimedOut(timeout)),
    }
}

async fn post_now(
    cluster: &Cluster,
    address: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), PeerCallError> {
    let config = &cluster.config;
    let request = request_bytes(config, address, path, body);
    let (tcp, socket) = connect(address).await?;
    let answer = match config.http_tls {
        false => exchange(tcp, &request).await?,
        true => {
            let tls = client_tls(cluster)?;
            let name = server_name(address, socket);
            let stream = tls.connector().connect(name, tcp).await?;
            exchange(stream, &request).await?
        }
    };
    parse_answer(&answer)
}

/// The TLS settings to reach another broker's HTTPS port with.
fn client_tls(cluster: &Cluster) -> Result<ClientTls, PeerCallError> {
    if let Some(tls) = cluster.peer_client_tls() {
        return Ok(tls);
    }
    if let Some(tls) = FILE_TLS.with(|t| t.borrow().clone()) {
        return Ok(tls);
    }
    let config = &cluster.config;
    let ca = config
        .ssl_ca_location
        .as_ref()
        .ok_or(PeerCallError::NoTrust)?;
    let identity =
        (config.ssl_certificate_location.as_deref()).zip(config.ssl_key_location.as_deref());
    let tls =
        ClientTls::from_files(ca, identity).map_err(|e| PeerCallError::Answer(e.to_string()))?;
    FILE_TLS.with(|t| *t.borrow_mut() = Some(tls.clone()));
    Ok(tls)
}

/// A connection to the first of `address`'s addresses that accepts one.
async fn connect(address: &str) -> Result<(TcpStream, SocketAddr), PeerCallError> {
    let mut last = None;
    for socket in resolve(address).await? {
        match TcpStream::connect(socket).await {
            Ok(tcp) => return Ok((tcp, socket)),
            Err(e) => last = Some(std::io::Error::from(e)),
        }
    }
    let none = || std::io::Error::other(format!("{address}: no address"));
    Err(PeerCallError::Io(last.unwrap_or_else(none)))
}

/// `address`'s socket addresses: parsed, remembered, or looked up on a
/// thread of its own.
async fn resolve(address: &str) -> Result<Vec<SocketAddr>, PeerCallError> {
    if let Ok(socket) = address.parse() {
        return Ok(vec![socket]);
    }
    let remembered = RESOLVED.with(|r| {
        let r = r.borrow();
        let fresh = r.get(address).filter(|(at, _)| at.elapsed() < RESOLVED_FOR);
        fresh.map(|(_, sockets)| sockets.clone())
    });
    if let Some(sockets) = remembered {
        return Ok(sockets);
    }
    let (tx, rx) = futures::channel::oneshot::channel();
    let name = address.to_string();
    std::thread::spawn(move || {
        let found = name
            .to_socket_addrs()
            .map(|found| found.collect::<Vec<_>>());
        let _ = tx.send(found);
    });
    let sockets = rx
        .await
        .map_err(|_| std::io::Error::other("the lookup thread ended"))??;
    RESOLVED.with(|r| {
        let entry = (Instant::now(), sockets.clone());
        r.borrow_mut().insert(address.to_string(), entry)
    });
    Ok(sockets)
}

/// The name a TLS certificate is checked against: the host as given.
fn server_name(address: &str, socket: SocketAddr) -> ServerName<'static> {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    match ServerName::try_from(host.trim_matches(['[', ']']).to_string()) {
        Ok(name) => name,
        Err(_) => ServerName::IpAddress(socket.ip().into()),
    }
}

fn request_bytes(config: &BrokerConfig, address: &str, path: &str, body: &str) -> Vec<u8> {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    match (config.http_asks_for_user(), config.broker_user()) {
        (true, Some((user, password))) => {
            if !config.http_tls {
                static IN_CLEAR: std::sync::Once = std::sync::Once::new();
                IN_CLEAR.call_once(|| {
                    tracing::warn!(
                        "the HTTP API asks for a user without http_tls: the broker's own \
                         password goes to other brokers' HTTP APIs in clear"
                    )
                });
            }
            let login = format!("{user}:{password}");
            let token = base64::engine::general_purpose::STANDARD.encode(login);
            head.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        (true, None) => {
            static NO_USER: std::sync::Once = std::sync::Once::new();
            NO_USER.call_once(|| {
                tracing::warn!(
                    "the HTTP API asks for a user and sasl_broker_user is not set: other \
                     brokers' HTTP APIs will refuse this broker's calls"
                )
            });
        }
        (false, _) => {}
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// Writes the request, reads the answer to its end (bounded).
async fn exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &[u8],
) -> Result<Vec<u8>, PeerCallError> {
    stream.write_all(request).await?;
    stream.flush().await?;
    let mut answer = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(answer);
        }
        if answer.len() + read > ANSWER_BYTES_MAX {
            return Err(PeerCallError::Answer("an answer too large".into()));
        }
        answer.extend_from_slice(&chunk[..read]);
    }
}

/// The status and body of an HTTP/1.1 answer read to its end (a
/// Content-Length body or a chunked one).
fn parse_answer(answer: &[u8]) -> Result<(u16, String), PeerCallError> {
    let bad = |why: &str| PeerCallError::Answer(format!("not an HTTP answer: {why}"));
    let split = (answer.windows(4))
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&answer[..split]).map_err(|_| bad("headers not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = (lines.next().and_then(|l| l.split(' ').nth(1)))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad("no status"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = &answer[split + 4..];
    let body = match chunked {
        false => body.to_vec(),
        true => dechunk(body).ok_or_else(|| bad("a broken chunked body"))?,
    };
    let text = String::from_utf8(body).map_err(|_| bad("a body not UTF-8"))?;
    Ok((status, text))
}

/// A chunked body's bytes.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_a_length_or_chunked_are_read_and_others_refused() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_answer(plain).unwrap(), (200, "{}".to_string()));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_answer(chunked).unwrap(), (404, "abcde".to_string()));
        assert!(
            parse_answer(b"HTTP/1.1 200 OK\r\n").is_err(),
            "no end of headers"
        );
        assert!(parse_answer(b"garbage\r\n\r\n").is_err(), "no status");
        let broken = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab";
        assert!(parse_answer(broken).is_err());
    }
}
