//! OffsetCommit v1, rewritten as v2 for the codec.
//!
//! Kafka 4.0 no longer serves v0-1 (KIP-896) and the codec does not know
//! them, but clients still send v1: Sarama 1.22 (Debian's) commits a
//! consumer group's offsets with it whatever protocol version it is
//! configured for, and would lose every commit. v1 and v2 differ in two
//! fields: v2 adds the group's retention time after the member id, v1 has
//! a commit timestamp in each partition (which Kafka's own broker stopped
//! honouring with v2's retention). The rewrite drops the timestamps and
//! adds a retention of -1 (the broker's default); both versions' answers
//! are laid out alike, so a v2 answer serves a v1 request.

use bytes::{BufMut, Bytes, BytesMut};

use super::bounds::BoundsError;
use super::legacy_cursor::Cursor;

/// The body of an OffsetCommit v1 request as the same request at v2.
pub fn as_v2(body: &[u8]) -> Result<Bytes, BoundsError> {
    let mut cursor = Cursor::new(body);
    let mut out = BytesMut::with_capacity(body.len() + 8);
    put_string(&mut out, cursor.string()?); // group_id
    out.put_i32(cursor.i32()?); // generation_id
    put_string(&mut out, cursor.string()?); // member_id
    out.put_i64(-1); // retention_time_ms (v2-4): the broker's default
    let topics = cursor.count()?;
    out.put_i32(topics as i32);
    for _ in 0..topics {
        put_string(&mut out, cursor.string()?); // name
        let partitions = cursor.count()?;
        out.put_i32(partitions as i32);
        for _ in 0..partitions {
            out.put_i32(cursor.i32()?); // partition_index
            out.put_i64(cursor.i64()?); // committed_offset
            cursor.i64()?; // commit_timestamp (v1 only): dropped
            match cursor.nullable_string()? {
                Some(metadata) => put_string(&mut out, metadata),
                None => out.put_i16(-1),
            }
        }
    }
    if cursor.remaining() > 0 {
        return Err(BoundsError::Trailing(cursor.remaining()));
    }
    Ok(out.freeze())
}

fn put_string(out: &mut BytesMut, text: &[u8]) {
    // Read with an i16 length, so it fits one.
    out.put_i16(text.len() as i16);
    out.put_slice(text);
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::OffsetCommitRequest;
    use kafka_protocol::protocol::Decodable;

    use super::*;

    fn string(body: &mut BytesMut, text: &str) {
        body.put_i16(text.len() as i16);
        body.put_slice(text.as_bytes());
    }

    /// Group "g", generation 3, member "m", topic "t" partitions 0 and 5
    /// at offsets 10 and 20 (the second without metadata).
    fn v1_request() -> BytesMut {
        let mut body = BytesMut::new();
        string(&mut body, "g");
        body.put_i32(3);
        string(&mut body, "m");
        body.put_i32(1);
        string(&mut body, "t");
        body.put_i32(2);
        body.put_i32(0);
        body.put_i64(10);
        body.put_i64(1_700_000_000_000);
        string(&mut body, "meta");
        body.put_i32(5);
        body.put_i64(20);
        body.put_i64(-1);
        body.put_i16(-1);
        body
    }

    #[test]
    fn a_v1_commit_reads_as_the_same_commit_at_v2() {
        let v2 = as_v2(&v1_request()).unwrap();
        let decoded = OffsetCommitRequest::decode(&mut v2.clone(), 2).unwrap();
        assert_eq!(decoded.group_id.as_str(), "g");
        assert_eq!(decoded.generation_id_or_member_epoch, 3);
        assert_eq!(decoded.member_id.as_str(), "m");
        assert_eq!(decoded.retention_time_ms, -1);
        let topic = &decoded.topics[0];
        assert_eq!(topic.name.as_str(), "t");
        let partitions: Vec<_> = (topic.partitions.iter())
            .map(|p| (p.partition_index, p.committed_offset))
            .collect();
        assert_eq!(partitions, [(0, 10), (5, 20)]);
        let metadata: Vec<_> = (topic.partitions.iter())
            .map(|p| p.committed_metadata.as_ref().map(|m| m.to_string()))
            .collect();
        assert_eq!(metadata, [Some("meta".to_string()), None]);
    }

    #[test]
    fn forged_counts_cut_and_padded_bodies_are_refused() {
        let body = v1_request();
        // The topic count (after "g", generation, "m") claims i32::MAX.
        let mut forged = body.clone();
        forged[10..14].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(as_v2(&forged).is_err());
        for cut in [1, 2, 9, body.len() - 1] {
            assert!(as_v2(&body[..body.len() - cut]).is_err(), "cut {cut}");
        }
        let mut padded = body.clone();
        padded.put_u8(0);
        assert!(as_v2(&padded).is_err());
    }
}
