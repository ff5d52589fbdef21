//! The HTTP listener (on shard 0). Serves `GET /health` so operators and
//! load balancers can check the broker is up, and `GET /metrics`
//! (Prometheus text, `server::metrics`); the HTTP/JSON API is to come.
//! Requests are bounded (head at most 8 KiB), one per connection.

use std::cell::OnceCell;
use std::net::SocketAddr;
use std::rc::Rc;

use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use super::shard::Shard;

/// The largest request head read.
const HEAD_BYTES_MAX: usize = 8 * 1024;

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

async fn answer(mut stream: TcpStream, shard: Rc<OnceCell<Rc<Shard>>>) {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
        if head.len() > HEAD_BYTES_MAX {
            let _ = stream
                .write_all(&response(431, "request head too large\n"))
                .await;
            return;
        }
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let reply = match (words.next(), words.next()) {
        (Some("GET"), Some("/health")) => response(200, "ok\n"),
        (Some("GET"), Some("/metrics")) => match shard.get().cloned() {
            Some(shard) => response(200, &super::metrics::render(&shard).await),
            None => response(503, "starting\n"),
        },
        (Some(_), Some(_)) => response(404, "not found\n"),
        _ => response(400, "bad request\n"),
    };
    let _ = stream.write_all(&reply).await;
    let _ = stream.close().await;
}

fn response(status: u16, body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Request Header Fields Too Large",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
