//! Encoding a response frame body: the response header, then the body.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// A response that could not be encoded at the request's version (a field
/// set that the version lacks): a bug, answered by closing the connection.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the response: {0}")]
pub struct EncodeError(pub String);

/// The frame body (without the size prefix) answering `correlation_id`.
pub fn encode<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    response: &R,
) -> Result<Bytes, EncodeError> {
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, R::header_version(version))
        .map_err(|e| EncodeError(e.to_string()))?;
    response
        .encode(&mut out, version)
        .map_err(|e| EncodeError(e.to_string()))?;
    Ok(out.freeze())
}
