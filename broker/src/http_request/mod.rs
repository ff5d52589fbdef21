//! An HTTP request as the API reads it, from the head hyper parsed and a
//! body bounded before it is read: a declared length over
//! [`BODY_BYTES_MAX`] is refused before any byte of it is read, a chunked
//! body as soon as it grows past it. Runtime-free (only futures), so the
//! request path is fuzzed and tested without a broker. Every refusal
//! carries the status to answer with.

mod hyper_io;
mod replay;

use std::collections::BTreeMap;

use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Body;

pub use hyper_io::HyperIo;
pub use replay::serve_bytes;

/// The largest request head read (hyper answers 431 past it).
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// The largest request body accepted (a batch of messages, base64 in JSON).
pub const BODY_BYTES_MAX: usize = 16 << 20;

/// Why a request is refused, and the status to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// Why.
    pub message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

/// A whole request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// GET, POST, DELETE...
    pub method: String,
    /// The path, without the query, %-decoded.
    pub path: String,
    /// Query parameters, %-decoded (the last of repeated ones).
    pub query: BTreeMap<String, String>,
    /// The body (empty without one).
    pub body: Vec<u8>,
    /// The Authorization header's value, if any.
    pub authorization: Option<String>,
}

/// Reads `request`'s body within [`BODY_BYTES_MAX`] and decodes its
/// target.
pub async fn read<B>(request: hyper::Request<B>) -> Result<HttpRequest, Refusal>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (head, body) = request.into_parts();
    let declared = body.size_hint().lower();
    if declared > BODY_BYTES_MAX as u64 {
        return Err(too_large(declared));
    }
    let body = match Limited::new(body, BODY_BYTES_MAX).collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(e) if e.is::<LengthLimitError>() => return Err(too_large(declared)),
        Err(e) => return Err(refuse(400, format!("the body did not arrive whole: {e}"))),
    };
    Ok(from_head(&head, body))
}

fn too_large(declared: u64) -> Refusal {
    let size = match declared > BODY_BYTES_MAX as u64 {
        true => format!("of {declared} bytes"),
        false => "(chunked)".to_string(),
    };
    refuse(413, format!("a body {size} exceeds {BODY_BYTES_MAX} bytes"))
}

/// The request of a head and its whole body: the path and the query
/// %-decoded.
pub fn from_head(head: &hyper::http::request::Parts, body: Vec<u8>) -> HttpRequest {
    let target = head
        .uri
        .path_and_query()
        .map_or(head.uri.path(), |target| target.as_str());
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let authorization = head
        .headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_string());
    HttpRequest {
        method: head.method.as_str().to_string(),
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
        authorization,
    }
}

/// Decodes %XX escapes (a `%` not followed by two hex digits stays).
pub fn percent_decode(text: &str) -> String {
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

    use bytes::Bytes;
    use futures::executor::block_on;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    #[test]
    fn escapes_decode_and_bad_ones_stay() {
        assert_eq!(percent_decode("a%2Fb"), "a/b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("é%"), "é%");
    }

    #[test]
    fn a_request_decodes_its_target_query_and_login() {
        let request = hyper::Request::post("/topics/a%2Fb/messages?acks=all&encoding=text")
            .header("authorization", "Basic YTpi ")
            .body(Full::new(Bytes::from_static(b"hi")))
            .unwrap();
        let request = block_on(read(request)).unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/topics/a/b/messages");
        assert_eq!(request.query["acks"], "all");
        assert_eq!(request.body, b"hi");
        assert_eq!(request.authorization.as_deref(), Some("Basic YTpi"));
    }

    #[test]
    fn bodies_past_the_bound_are_refused_declared_or_streamed() {
        let whole = Full::new(Bytes::from(vec![b'x'; BODY_BYTES_MAX + 1]));
        let refusal = block_on(read(hyper::Request::new(whole))).unwrap_err();
        assert_eq!(refusal.status, 413);
        // A chunked body declares nothing: it is cut where it crosses.
        let chunks =
            (0..17).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![0; 1 << 20]))));
        let streamed = StreamBody::new(futures::stream::iter(chunks));
        let refusal = block_on(read(hyper::Request::new(streamed))).unwrap_err();
        assert_eq!(refusal.status, 413, "{refusal:?}");
        let chunks =
            (0..16).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![0; 1 << 20]))));
        let streamed = StreamBody::new(futures::stream::iter(chunks));
        let request = block_on(read(hyper::Request::new(streamed))).unwrap();
        assert_eq!(
            request.body.len(),
            BODY_BYTES_MAX,
            "exactly the bound is taken"
        );
    }
}
