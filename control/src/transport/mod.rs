//! How metadata nodes reach each other: the [`Transport`] trait, the frame
//! format, and the events a transport hands its node. Implementations:
//! [`tcp`] between processes, over a [`link`] (plain TCP or TLS);
//! [`memory`], an in-memory network for the service's tests (the
//! simulation has a network of its own). [`forward`] carries brokers'
//! calls to the active controller over the same listener.
//!
//! A frame is `[length u32][crc32c u32][protobuf raft Message]`, length
//! bounded by [`FRAME_BYTES_MAX`] before anything is allocated.

#[allow(missing_docs)]
pub mod forward;
pub mod link;
pub mod memory;
pub mod tcp;

use protobuf::Message as _;
use raft::eraftpb::Message;

use crate::raft::node::NodeId;

/// The largest frame accepted (a metadata snapshot travels in one).
pub const FRAME_BYTES_MAX: usize = 64 << 20;
/// Bytes of a frame header.
pub const FRAME_HEADER_BYTES: usize = 8;

/// What a transport delivers to its node.
#[derive(Debug)]
pub enum Inbound {
    /// A message from a peer.
    Message(Message),
    /// A message to `to` could not be delivered; `snapshot` says whether it
    /// carried a snapshot (the leader must be told, see
    /// [`crate::raft::node::MetadataNode::report_snapshot`]).
    Unreachable {
        /// The peer.
        to: NodeId,
        /// Whether a snapshot was lost.
        snapshot: bool,
    },
    /// A broker's call for the active controller (see [`forward`]);
    /// the answer goes back through `reply`.
    Call {
        /// What is asked.
        call: crate::controller::request::Call,
        /// Where the answer goes.
        reply: futures::channel::oneshot::Sender<crate::controller::request::Reply>,
    },
    /// A node asks where the members are ([`crate::controller::request::Call::Members`]).
    Members {
        /// Where the answer goes.
        reply: futures::channel::oneshot::Sender<crate::controller::request::MembersReply>,
    },
}

/// Why a frame was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerFrameError {
    /// The length prefix exceeds the bound (or is zero).
    #[error("frame length {0} out of bounds")]
    Length(usize),
    /// The checksum does not match.
    #[error("frame checksum mismatch")]
    Checksum,
    /// The payload is not a raft message.
    #[error("undecodable raft message: {0}")]
    Decode(String),
}

/// Encodes one message as a frame.
pub fn encode_frame(message: &Message) -> Vec<u8> {
    let payload = message
        .write_to_bytes()
        .expect("raft messages always encode");
    let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame
}

/// Reads a frame header: the payload length and checksum, length checked.
pub fn decode_header(header: [u8; FRAME_HEADER_BYTES]) -> Result<(usize, u32), PeerFrameError> {
    let length = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if length == 0 || length > FRAME_BYTES_MAX {
        return Err(PeerFrameError::Length(length));
    }
    Ok((
        length,
        u32::from_be_bytes(header[4..].try_into().expect("4 bytes")),
    ))
}

/// Checks and decodes a payload.
pub fn decode_payload(payload: &[u8], crc: u32) -> Result<Message, PeerFrameError> {
    if crc32c::crc32c(payload) != crc {
        return Err(PeerFrameError::Checksum);
    }
    Message::parse_from_bytes(payload).map_err(|e| PeerFrameError::Decode(e.to_string()))
}

/// Carries Raft messages between metadata nodes.
#[allow(async_fn_in_trait)]
pub trait Transport: 'static {
    /// Queues messages for their peers; never blocks. Messages that cannot
    /// be delivered come back as [`Inbound::Unreachable`].
    fn send(&self, messages: Vec<raft::eraftpb::Message>);
    /// The next inbound event; None once the transport is closed.
    async fn recv(&self) -> Option<Inbound>;
    /// Where `peer` is reached from now on: a node that joined the quorum
    /// while it ran, or moved. Transports whose peers need no address
    /// ignore it.
    fn set_peer(&self, _peer: NodeId, _address: std::net::SocketAddr) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::MessageType;

    fn sample() -> Message {
        Message {
            msg_type: MessageType::MsgAppend,
            to: 2,
            from: 1,
            term: 7,
            ..Message::default()
        }
    }

    #[test]
    fn a_frame_round_trips() {
        let frame = encode_frame(&sample());
        let (length, crc) = decode_header(frame[..8].try_into().unwrap()).unwrap();
        assert_eq!(length, frame.len() - 8);
        assert_eq!(decode_payload(&frame[8..], crc).unwrap(), sample());
    }

    #[test]
    fn huge_lengths_damage_and_garbage_are_refused() {
        assert_eq!(
            decode_header([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
            Err(PeerFrameError::Length(u32::MAX as usize))
        );
        assert_eq!(decode_header([0; 8]), Err(PeerFrameError::Length(0)));
        let frame = encode_frame(&sample());
        let (_, crc) = decode_header(frame[..8].try_into().unwrap()).unwrap();
        let mut damaged = frame[8..].to_vec();
        damaged[0] ^= 1;
        assert_eq!(decode_payload(&damaged, crc), Err(PeerFrameError::Checksum));
        let garbage = vec![0xffu8; 16];
        assert!(matches!(
            decode_payload(&garbage, crc32c::crc32c(&garbage)),
            Err(PeerFrameError::Decode(_))
        ));
    }
}
