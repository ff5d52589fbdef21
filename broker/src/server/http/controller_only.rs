//! The HTTP port of a controller-only node (`process_roles =
//! "controller"`): health and metrics of its metadata node. The HTTP/JSON
//! API is the brokers': a controller holds no partitions or groups.

use control::service::MetadataService;

use super::{HttpRequest, HttpResponse};

/// The answer to `request`.
pub fn route(service: &MetadataService, request: &HttpRequest) -> HttpResponse {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/health") => health(service),
        ("GET", "/metrics") => HttpResponse {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: crate::server::metrics::render_controller_only(service).into_bytes(),
        },
        _ => HttpResponse::error(
            404,
            -1,
            "this node is a controller only (process_roles = \"controller\"): it serves \
             /health and /metrics; the HTTP API is served by the brokers",
        ),
    }
}

/// Healthy while the node knows the quorum's leader: a controller cut off
/// from the quorum, or in a quorum without a majority, is not.
fn health(service: &MetadataService) -> HttpResponse {
    match service.view().leader {
        Some(_) => HttpResponse::text(200, "ok\n"),
        None => HttpResponse::text(503, "no metadata quorum leader known to this controller\n"),
    }
}
