//! Controller calls between brokers. Only the metadata node that leads is
//! the active controller; a broker whose own node does not lead forwards
//! its controller requests and heartbeats to the one that does, over the
//! metadata listener (the same port Raft uses).
//!
//! A connection starts with a 4-byte preamble saying what it carries:
//! [`RAFT_PREAMBLE`] (a peer's Raft messages, one way) or
//! [`CALL_PREAMBLE`] (calls, each answered in order). A call or reply is
//! `[length u32][crc32c u32][rkyv payload]`, its length bounded by
//! [`CALL_BYTES_MAX`] before anything is allocated.

use std::net::SocketAddr;
use std::time::Duration;

use futures::future::{select, Either};
use futures::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::controller::request::{Call, ControllerError, MembersReply, Reply};
use crate::transport::link::{self, QuorumTls};
use crate::transport::PeerFrameError;

/// The first bytes of a connection carrying Raft messages.
pub const RAFT_PREAMBLE: [u8; 4] = *b"RAFT";
/// The first bytes of a connection carrying controller calls.
pub const CALL_PREAMBLE: [u8; 4] = *b"CALL";
/// The largest call or reply (a CreateTopic with its configuration fits
/// many times over).
pub const CALL_BYTES_MAX: usize = 1 << 20;

/// Encodes a call as a frame.
pub fn encode_call(call: &Call) -> Vec<u8> {
    frame(&rkyv::to_bytes::<rkyv::rancor::Error>(call).expect("calls always serialize"))
}

/// Encodes a reply as a frame.
pub fn encode_reply(reply: &Reply) -> Vec<u8> {
    frame(&rkyv::to_bytes::<rkyv::rancor::Error>(reply).expect("replies always serialize"))
}

/// Encodes the answer to [`Call::Members`] as a frame.
pub fn encode_members_reply(reply: &MembersReply) -> Vec<u8> {
    frame(&rkyv::to_bytes::<rkyv::rancor::Error>(reply).expect("replies always serialize"))
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Reads one frame's payload, its length bounded and checksum checked.
pub async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Vec<u8>, PeerFrameError> {
    let mut header = [0u8; 8];
    stream
        .read_exact(&mut header)
        .await
        .map_err(|e| PeerFrameError::Decode(e.to_string()))?;
    let length = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if length == 0 || length > CALL_BYTES_MAX {
        return Err(PeerFrameError::Length(length));
    }
    let crc = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
    let mut payload = vec![0u8; length];
    stream
        .read_exact(&mut payload)
        .await
        .map_err(|e| PeerFrameError::Decode(e.to_string()))?;
    if crc32c::crc32c(&payload) != crc {
        return Err(PeerFrameError::Checksum);
    }
    Ok(payload)
}

fn aligned(bytes: &[u8]) -> rkyv::util::AlignedVec<16> {
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
    aligned.extend_from_slice(bytes);
    aligned
}

/// Decodes (and validates) a call's payload.
pub fn decode_call(payload: &[u8]) -> Result<Call, PeerFrameError> {
    rkyv::from_bytes::<Call, rkyv::rancor::Error>(&aligned(payload))
        .map_err(|e| PeerFrameError::Decode(e.to_string()))
}

/// Decodes (and validates) a reply's payload.
pub fn decode_reply(payload: &[u8]) -> Result<Reply, PeerFrameError> {
    rkyv::from_bytes::<Reply, rkyv::rancor::Error>(&aligned(payload))
        .map_err(|e| PeerFrameError::Decode(e.to_string()))
}

/// Asks the member at `address` where the members are (at most
/// `timeout`); anything that goes wrong is [`ControllerError::Unavailable`].
pub async fn ask_members(
    address: SocketAddr,
    timeout: Duration,
    tls: Option<&QuorumTls>,
) -> MembersReply {
    let exchange = async {
        let mut stream = link::connect(address, tls).await.ok()?;
        let mut bytes = CALL_PREAMBLE.to_vec();
        bytes.extend_from_slice(&encode_call(&Call::Members));
        stream.write_all(&bytes).await.ok()?;
        stream.flush().await.ok()?;
        let payload = read_frame(&mut stream).await.ok()?;
        rkyv::from_bytes::<MembersReply, rkyv::rancor::Error>(&aligned(&payload)).ok()
    };
    let timer = glommio::timer::sleep(timeout);
    match select(Box::pin(exchange), Box::pin(timer)).await {
        Either::Left((Some(reply), _)) => reply,
        Either::Left((None, _)) | Either::Right(_) => Err(ControllerError::Unavailable),
    }
}

/// Sends one call to the metadata listener at `address` and waits (at
/// most `timeout`) for its reply. Anything that goes wrong on the way is
/// [`ControllerError::Unavailable`]: the caller retries, as with a
/// controller that moved.
pub async fn forward(
    address: SocketAddr,
    call: &Call,
    timeout: Duration,
    tls: Option<&QuorumTls>,
) -> Reply {
    let exchange = async {
        let mut stream = link::connect(address, tls).await.ok()?;
        let mut bytes = CALL_PREAMBLE.to_vec();
        bytes.extend_from_slice(&encode_call(call));
        stream.write_all(&bytes).await.ok()?;
        stream.flush().await.ok()?;
        let payload = read_frame(&mut stream).await.ok()?;
        decode_reply(&payload).ok()
    };
    let timer = glommio::timer::sleep(timeout);
    match select(Box::pin(exchange), Box::pin(timer)).await {
        Either::Left((Some(reply), _)) => reply,
        Either::Left((None, _)) | Either::Right(_) => Err(ControllerError::Unavailable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::request::ControllerRequest;
    use crate::model::error::MetadataError;
    use crate::model::record::BrokerRegistration;
    use crate::model::types::{BrokerId, Incarnation};

    #[test]
    fn calls_and_replies_round_trip_and_damage_is_refused() {
        let call = Call::Request(ControllerRequest::RegisterBroker(
            BrokerRegistration {
                id: BrokerId(2),
                incarnation: Incarnation(7),
                listener: "127.0.0.1:9092".into(),
                rack: Some("a".into()),
                shards: 2,
            },
            vec![],
        ));
        let frame = encode_call(&call);
        let decoded = decode_call(&frame[8..]).unwrap();
        assert_eq!(format!("{decoded:?}"), format!("{call:?}"));
        for reply in [
            Ok(17),
            Err(ControllerError::NotController { leader: Some(3) }),
            Err(ControllerError::Refused(MetadataError::TopicExists(
                "t".into(),
            ))),
            Err(ControllerError::Superseded),
        ] {
            let frame = encode_reply(&reply);
            assert_eq!(decode_reply(&frame[8..]).unwrap(), reply);
        }
        assert!(decode_call(&[0xff; 24]).is_err());
        assert!(decode_reply(&[]).is_err());
    }
}
