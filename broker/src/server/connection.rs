//! One client connection: read frames, answer each request in order.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{select, Either, Shared};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use super::handlers::{self, Outcome};
use super::shard::Shard;
use crate::kafka::frame::FrameReader;
use crate::kafka::request;

/// Bytes read from the socket at a time (at least).
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Resolves when the shard is stopping.
pub type Stopping = Shared<oneshot::Receiver<()>>;

/// Serves a connection until the client closes it, sends something that
/// cannot be answered, or the shard stops (between requests); the shard
/// carries on either way.
pub async fn serve(stream: TcpStream, shard: Rc<Shard>, stopping: Stopping) {
    let metrics = shard.metrics.clone();
    metrics.connections.fetch_add(1, Ordering::Relaxed);
    serve_open(stream, shard, stopping).await;
    metrics.connections.fetch_sub(1, Ordering::Relaxed);
}

async fn serve_open(mut stream: TcpStream, shard: Rc<Shard>, stopping: Stopping) {
    let address = stream.peer_addr().ok();
    let peer = address.map(|a| a.to_string()).unwrap_or_default();
    // How DescribeGroups shows a member's host, as Kafka does.
    let client_host = address.map(|a| format!("/{}", a.ip())).unwrap_or_default();
    let mut reader = FrameReader::new(shard.cluster.config.socket_request_max_bytes);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let idle_max = Duration::from_millis(shard.cluster.config.connections_max_idle_ms);
    loop {
        loop {
            let request_frame = match reader.next_frame() {
                Ok(Some(bytes)) => bytes,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: bad request frame");
                    return;
                }
            };
            shard
                .metrics
                .bytes_in
                .fetch_add(4 + request_frame.len() as u64, Ordering::Relaxed);
            let request = match request::parse(request_frame) {
                Ok(request) => request,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: malformed request");
                    return;
                }
            };
            // One request at a time per connection, as Kafka does: appends
            // from one producer connection keep their order.
            let api_key = request.header.request_api_key;
            shard.metrics.request(api_key);
            let response = match handlers::handle(&shard, &request, &client_host).await {
                Ok(Outcome::Respond(response)) => response,
                Ok(Outcome::NoResponse) => continue,
                Err(e) => {
                    shard.metrics.request_error(api_key);
                    tracing::warn!(%peer, api = ?request.api_key, version = request.header.request_api_version, error = %e, "closing connection");
                    return;
                }
            };
            shard
                .metrics
                .bytes_out
                .fetch_add(response.len() as u64, Ordering::Relaxed);
            for part in response.parts() {
                if stream.write_all(part).await.is_err() {
                    return;
                }
            }
        }
        let ended = select(stopping.clone(), Box::pin(glommio::timer::sleep(idle_max)));
        let read = match select(Box::pin(stream.read(&mut chunk)), ended).await {
            Either::Left((read, _)) => read,
            // Stopping (no request half-answered), or idle too long.
            Either::Right((Either::Right(_), _)) => {
                tracing::debug!(%peer, "closing an idle connection");
                return;
            }
            Either::Right(_) => return,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        reader.read_buffer(n).extend_from_slice(&chunk[..n]);
    }
}
