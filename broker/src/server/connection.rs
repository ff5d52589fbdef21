//! One client connection: read frames, answer each request in order.

use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::{select, Either, Shared};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::ApiKey;

use crate::kafka::frame::{self, FrameReader};
use crate::kafka::{api_versions, metadata, request};

/// What every connection of a shard shares.
pub struct Context {
    /// socket.request.max.bytes.
    pub max_request_bytes: u32,
    /// This shard's copy of the cluster metadata.
    pub view: super::metadata_view::View,
    /// The cluster id reported to clients.
    pub cluster_id: String,
}

/// Whether this version of the request's API is served.
fn served(api: ApiKey, request: &request::Request) -> bool {
    api_versions::served(api)
        .is_some_and(|(min, max)| (min..=max).contains(&request.header.request_api_version))
}

/// Bytes read from the socket at a time (at least).
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Resolves when the shard is stopping.
pub type Stopping = Shared<oneshot::Receiver<()>>;

/// Serves a connection until the client closes it, sends something that
/// cannot be answered, or the shard stops (between requests); the shard
/// carries on either way.
pub async fn serve(mut stream: TcpStream, context: Rc<Context>, stopping: Stopping) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut reader = FrameReader::new(context.max_request_bytes);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
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
            let response = match request::parse(request_frame) {
                Ok(req) if req.api_key == ApiKey::ApiVersions => api_versions::answer(&req),
                Ok(req) if req.api_key == ApiKey::Metadata && served(ApiKey::Metadata, &req) => {
                    let shard = context.view.borrow();
                    let cluster = metadata::Cluster {
                        metadata: &shard.metadata,
                        cluster_id: &context.cluster_id,
                        controller_id: shard.controller_id,
                    };
                    match metadata::answer(&req, &cluster) {
                        Ok(answer) => answer.response,
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "closing connection: bad Metadata request");
                            return;
                        }
                    }
                }
                Ok(req) => {
                    tracing::warn!(%peer, api = ?req.api_key, "closing connection: API not served");
                    return;
                }
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: malformed request");
                    return;
                }
            };
            if stream.write_all(&frame::frame(&response)).await.is_err() {
                return;
            }
        }
        let read = match select(Box::pin(stream.read(&mut chunk)), stopping.clone()).await {
            Either::Left((read, _)) => read,
            Either::Right(_) => return, // stopping, and no request half-answered
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        reader.read_buffer(n).extend_from_slice(&chunk[..n]);
    }
}
