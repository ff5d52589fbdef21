//! The HTTP listener (on shard 0): `GET /health`, `GET /metrics`
//! (Prometheus text, `server::metrics`) and the HTTP/JSON API (`api`,
//! docs/http-api.md).
//!
//! One request per connection (answered with `connection: close`). The
//! head is bounded (8 KiB), a body needs a Content-Length and is bounded
//! (`BODY_BYTES_MAX`) before anything is allocated for it; chunked bodies
//! are refused (411). A bad request gets a JSON error and the connection
//! closes; the listener carries on.

mod api;
mod forward;
mod group_calls;
mod groups;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;

use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use super::shard::Shard;

/// The largest request head read.
const HEAD_BYTES_MAX: usize = 8 * 1024;
/// The largest request body accepted (a batch of messages, base64 in JSON).
pub const BODY_BYTES_MAX: usize = 16 << 20;

/// Binds the HTTP listener; returns it with the address actually bound.
pub fn bind(listen: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let address: SocketAddr = listen
        .parse()
        .map_err(|e| std::io::Error::other(format!("http_listen {listen}: {e}")))?;
    let listener = TcpListener::bind(address).map_err(std::io::Error::from)?;
    let bound = listener.local_addr().map_err(std::io::Error::from)?;
    Ok((listener, bound))
}

/// Serves connections until the task is dropped, for `shard` (shard 0,
/// set once it exists).
pub async fn serve(listener: TcpListener, shard: Rc<OnceCell<Rc<Shard>>>) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                glommio::spawn_local(answer(stream, shard.clone())).detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "http accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// A parsed request.
#[derive(Debug)]
pub struct HttpRequest {
    /// GET, POST, DELETE...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Query parameters (the last of repeated ones).
    pub query: BTreeMap<String, String>,
    /// The body (empty without one).
    pub body: Vec<u8>,
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

async fn answer(mut stream: TcpStream, shard: Rc<OnceCell<Rc<Shard>>>) {
    let response = match read_request(&mut stream).await {
        Ok(request) => match shard.get().cloned() {
            Some(shard) => route(&shard, request).await,
            None => HttpResponse::text(503, "starting\n"),
        },
        Err(Some(refusal)) => refusal,
        Err(None) => return, // the client went away
    };
    let _ = stream.write_all(&response.encode()).await;
    let _ = stream.close().await;
}

async fn route(shard: &Rc<Shard>, request: HttpRequest) -> HttpResponse {
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
            while !super::metadata_view::ready_to_serve(shard.view.borrow().applied_index) {
                if started.elapsed() > API_READY_WAIT_MAX {
                    return HttpResponse::error(503, -1, "the broker is starting");
                }
                glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
            }
            api::route(shard, request).await
        }
    }
}

/// How long an API request made while the broker starts waits for it.
const API_READY_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads one request: its head (bounded), then a body of Content-Length
/// bytes (bounded). `Err(Some(..))` answers a bad request; `Err(None)`: the
/// client hung up.
async fn read_request(stream: &mut TcpStream) -> Result<HttpRequest, Option<HttpResponse>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > HEAD_BYTES_MAX {
            return Err(Some(HttpResponse::error(431, -1, "request head too large")));
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(None),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    if head_end > HEAD_BYTES_MAX {
        return Err(Some(HttpResponse::error(431, -1, "request head too large")));
    }
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let bad = |why: &str| Some(HttpResponse::error(400, -1, why.to_string()));
    let line = lines.next().unwrap_or_default();
    let mut words = line.split_whitespace();
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return Err(bad("malformed request line"));
    };
    let mut length = None;
    for header in lines {
        let Some((name, value)) = header.split_once(':') else {
            return Err(bad("malformed header"));
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = Some(
                    value
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| bad("bad content-length"))?,
                )
            }
            "transfer-encoding" if !value.trim().eq_ignore_ascii_case("identity") => {
                return Err(Some(HttpResponse::error(
                    411,
                    -1,
                    "chunked bodies are not accepted: send a content-length",
                )))
            }
            _ => {}
        }
    }
    let length = length.unwrap_or(0);
    if length > BODY_BYTES_MAX {
        return Err(Some(HttpResponse::error(
            413,
            -1,
            format!("body of {length} bytes exceeds {BODY_BYTES_MAX}"),
        )));
    }
    let mut body = buffer[head_end + 4..].to_vec();
    if body.len() > length {
        return Err(bad("more body than content-length"));
    }
    let have = body.len();
    body.resize(length, 0);
    if stream.read_exact(&mut body[have..]).await.is_err() {
        return Err(None);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(HttpRequest {
        method: method.to_string(),
        path: percent_decode(path),
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect(),
        body,
    })
}

/// Decodes %XX escapes (a `%` not followed by two hex digits stays).
fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(high * 16 + low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_and_bad_ones_stay() {
        assert_eq!(percent_decode("a%2Fb"), "a/b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("é%"), "é%");
    }
}
