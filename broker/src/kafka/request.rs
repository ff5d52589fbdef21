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
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::frame::OWN_MEMORY_MIN_BYTES;

/// Why a request frame's header could not be parsed: the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
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
    /// The whole frame's length, size prefix included: the memory the
    /// body keeps alive with it.
    pub frame_bytes: usize,
}

/// Parses a frame's header. The header's own version depends on the API
/// and its version (flexible versions carry tagged fields).
pub fn parse(mut frame: Bytes) -> Result<Request, HeaderError> {
    if frame.len() < 4 {
        return Err(HeaderError::TooShort(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|_| HeaderError::UnknownApiKey(key))?;
    // A version beyond what the codec knows still has a header we can
    // read: use the newest header version (answered with UNSUPPORTED_VERSION).
    let known = api_key.valid_versions();
    let header_version = api_key.request_header_version(version.clamp(known.min, known.max));
    let frame_bytes = 4 + frame.len();
    let mut header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| HeaderError::MalformedHeader(e.to_string()))?;
    if frame_bytes >= 4 + OWN_MEMORY_MIN_BYTES {
        header = owning(header);
    }
    Ok(Request {
        api_key,
        header,
        body: frame,
        frame_bytes,
    })
}

/// The header with copies of its few bytes instead of slices of the frame:
/// once a handler owns the body, nothing else holds the frame's memory (a
/// Produce request's records take it over, `kafka::record_sets`). Only
/// large frames have memory of their own to take over (`kafka::frame`).
fn owning(mut header: RequestHeader) -> RequestHeader {
    header.client_id = header
        .client_id
        .map(|id| StrBytes::from_string(id.to_string()));
    for field in header.unknown_tagged_fields.values_mut() {
        *field = Bytes::copy_from_slice(field);
    }
    header
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn the_header_of_a_large_frame_keeps_nothing_of_it() {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(9)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("producer-1")));
        let mut frame = BytesMut::new();
        header.encode(&mut frame, 2).unwrap();
        let header_len = frame.len();
        frame.extend_from_slice(&vec![1u8; OWN_MEMORY_MIN_BYTES]);
        let request = parse(frame.freeze()).unwrap();
        assert_eq!(request.header.client_id.as_deref(), Some("producer-1"));
        assert_eq!(request.body.len(), OWN_MEMORY_MIN_BYTES);
        assert_eq!(request.frame_bytes, 4 + header_len + OWN_MEMORY_MIN_BYTES);
        let Request { header, body, .. } = request;
        assert!(
            body.try_into_mut().is_ok(),
            "the body alone holds the frame's memory"
        );
        assert_eq!(header.correlation_id, 7);
    }
}
