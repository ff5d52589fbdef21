//! One HTTP call to another broker's HTTP API (its address from the
//! metadata, `control::model::HTTP_ENDPOINT`), for the calls only that
//! broker can answer and the Kafka protocol cannot carry: the queue API's
//! receive and acknowledgement by receipt on the partitions it leads.
//! Over TLS when the HTTP API speaks it (trusting `ssl_ca_location`), as
//! the broker's own user when it asks for one (a super user: the caller's
//! ACLs are checked by the broker it called). One request per connection
//! (`Connection: close`), its answer bounded.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use base64::Engine;
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::rustls::pki_types::ServerName;
use glommio::net::TcpStream;

use crate::config::BrokerConfig;

/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 256 << 20;

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
    config: &BrokerConfig,
    address: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String), PeerCallError> {
    let call = Box::pin(post_now(config, address, path, body));
    let timer = Box::pin(glommio::timer::sleep(timeout));
    match futures::future::select(call, timer).await {
        futures::future::Either::Left((answer, _)) => answer,
        futures::future::Either::Right(_) => Err(PeerCallError::TimedOut(timeout)),
    }
}

async fn post_now(
    config: &BrokerConfig,
    address: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), PeerCallError> {
    let socket = resolve(address)?;
    let request = request_bytes(config, address, path, body);
    let tcp = TcpStream::connect(socket)
        .await
        .map_err(std::io::Error::from)?;
    let answer = match config.http_tls {
        false => exchange(tcp, &request).await?,
        true => {
            let ca = config
                .ssl_ca_location
                .as_ref()
                .ok_or(PeerCallError::NoTrust)?;
            let tls = client::tls::ClientTls::from_files(ca, None)
                .map_err(|e| PeerCallError::Answer(e.to_string()))?;
            let name = server_name(address, socket);
            let stream = tls.connector().connect(name, tcp).await?;
            exchange(stream, &request).await?
        }
    };
    parse_answer(&answer)
}

fn resolve(address: &str) -> Result<SocketAddr, PeerCallError> {
    if let Ok(socket) = address.parse() {
        return Ok(socket);
    }
    let mut found = address.to_socket_addrs()?;
    found
        .next()
        .ok_or_else(|| PeerCallError::Io(std::io::Error::other(format!("{address}: no address"))))
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
    if let (true, Some((user, password))) = (config.http_asks_for_user(), config.broker_user()) {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        head.push_str(&format!("Authorization: Basic {token}\r\n"));
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
