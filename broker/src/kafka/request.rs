//! A request frame's header, parsed with the `kafka-protocol` codec.
//!
//! Caution for every handler added: kafka-protocol 0.18 decodes arrays
//! with `Vec::with_capacity(count)` where the count comes from the wire,
//! before checking it against the bytes that remain. A few bytes claiming
//! 2^31 elements would abort the process. ApiVersions requests contain no
//! arrays; any request type with arrays needs its counts bounded before it
//! is decoded (see the broker issue's notes).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

/// Why a request frame could not be parsed: the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Shorter than an api key and version.
    #[error("request frame of {0} bytes is too short")]
    TooShort(usize),
    /// An API key this protocol does not define.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// The header does not decode.
    #[error("malformed request header: {0}")]
    MalformedHeader(String),
}

/// A parsed request: its header, and the body bytes after it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The API.
    pub api_key: ApiKey,
    /// The decoded header.
    pub header: RequestHeader,
    /// The body, not yet decoded.
    pub body: Bytes,
}

/// Parses a frame's header. The header's own version depends on the API
/// and its version (flexible versions carry tagged fields).
pub fn parse(mut frame: Bytes) -> Result<Request, RequestError> {
    if frame.len() < 4 {
        return Err(RequestError::TooShort(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|_| RequestError::UnknownApiKey(key))?;
    // A version beyond what the codec knows still has a header we can
    // read: use the newest header version (answered with UNSUPPORTED_VERSION).
    let known = api_key.valid_versions();
    let header_version = api_key.request_header_version(version.clamp(known.min, known.max));
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| RequestError::MalformedHeader(e.to_string()))?;
    Ok(Request {
        api_key,
        header,
        body: frame,
    })
}
