//! Encoding a response frame: the size prefix, the response header, then
//! the body, as the parts it is sent in.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// A response that could not be encoded at the request's version (a field
/// set that the version lacks): a bug, answered by closing the connection.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the response: {0}")]
pub struct EncodeError(pub String);

/// A whole response frame, size prefix included, in the parts it is sent
/// in: one buffer for most responses; a Fetch response's large record sets
/// stay the buffers the log handed out, sent without being copied.
#[derive(Debug, Clone)]
pub struct Frame {
    parts: Vec<Bytes>,
}

impl Frame {
    /// A frame of these parts, which must hold the size prefix.
    pub fn from_parts(parts: Vec<Bytes>) -> Frame {
        Frame { parts }
    }

    /// The frame around an encoded header and body (one copy; for the
    /// answers built as one buffer elsewhere).
    pub fn of_body(body: &[u8]) -> Frame {
        let mut out = BytesMut::with_capacity(4 + body.len());
        out.put_i32(body.len() as i32);
        out.extend_from_slice(body);
        Frame::from_parts(vec![out.freeze()])
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The frame's bytes, size prefix included.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// Whether the frame has no bytes (never, for an encoded response).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame as one buffer (tests).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len());
        self.parts.iter().for_each(|p| out.extend_from_slice(p));
        out.freeze()
    }
}

/// The frame answering `correlation_id`, in one buffer sized up front (no
/// regrowth, no copy to prefix the size).
pub fn encode<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    response: &R,
) -> Result<Frame, EncodeError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = R::header_version(version);
    let size = header.compute_size(header_version).map_err(failed)?
        + response.compute_size(version).map_err(failed)?;
    let mut out = BytesMut::with_capacity(4 + size);
    out.put_i32(size as i32);
    header.encode(&mut out, header_version).map_err(failed)?;
    response.encode(&mut out, version).map_err(failed)?;
    Ok(Frame::from_parts(vec![out.freeze()]))
}

/// The codec's error as ours.
pub fn failed(e: impl std::fmt::Display) -> EncodeError {
    EncodeError(e.to_string())
}
