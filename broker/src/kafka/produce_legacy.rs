//! Produce v0-2: advertised, never served.
//!
//! Older librdkafka releases (the one kcat ships with, among others)
//! decide whether a broker can take compressed batches by asking whether it
//! serves Produce v0; without v0 in the advertised range they silently stop
//! compressing. So v0 is advertised, and a v0-2 request (magic 0/1
//! message sets, which this broker does not store) is answered with
//! UNSUPPORTED_VERSION for every partition. The codec has no v0-2 Produce,
//! so the request is walked and the answer written here, by the schema.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;

use super::bounds::BoundsError;
use super::legacy_cursor::Cursor;

/// Answers a Produce v0-2 request: UNSUPPORTED_VERSION for every
/// partition, or nothing for acks=0.
pub fn answer(
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Result<Option<Bytes>, BoundsError> {
    let mut cursor = Cursor::new(body);
    let acks = cursor.i16()?;
    cursor.i32()?; // timeout
    let mut topics = Vec::new();
    for _ in 0..cursor.count()? {
        let name = cursor.string()?;
        let mut partitions = Vec::new();
        for _ in 0..cursor.count()? {
            partitions.push(cursor.i32()?);
            cursor.bytes()?; // message set
        }
        topics.push((name, partitions));
    }
    if acks == 0 {
        return Ok(None);
    }
    let mut out = BytesMut::new();
    out.put_i32(correlation_id); // response header v0
    out.put_i32(topics.len() as i32);
    for (name, partitions) in topics {
        out.put_i16(name.len() as i16);
        out.put_slice(name);
        out.put_i32(partitions.len() as i32);
        for partition in partitions {
            out.put_i32(partition);
            out.put_i16(ResponseError::UnsupportedVersion.code());
            out.put_i64(-1); // base_offset
            if version >= 2 {
                out.put_i64(-1); // log_append_time
            }
        }
    }
    if version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    Ok(Some(out.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(acks: i16) -> Vec<u8> {
        let mut body = BytesMut::new();
        body.put_i16(acks);
        body.put_i32(1000);
        body.put_i32(1);
        body.put_i16(3);
        body.put_slice(b"abc");
        body.put_i32(2);
        for p in [4, 7] {
            body.put_i32(p);
            body.put_i32(5);
            body.put_slice(&[0; 5]);
        }
        body.to_vec()
    }

    #[test]
    fn every_partition_gets_unsupported_version_in_the_requests_layout() {
        for version in 0..=2i16 {
            let answer = answer(version, 9, &request(1)).unwrap().unwrap();
            let per_partition = 4 + 2 + 8 + if version >= 2 { 8 } else { 0 };
            let expected = 4 + 4 + 2 + 3 + 4 + 2 * per_partition + if version >= 1 { 4 } else { 0 };
            assert_eq!(answer.len(), expected, "v{version}");
            assert_eq!(&answer[..4], &9i32.to_be_bytes());
            // The first partition: index 4, error 35.
            assert_eq!(&answer[17..21], &4i32.to_be_bytes());
            assert_eq!(&answer[21..23], &35i16.to_be_bytes());
        }
        assert!(answer(0, 1, &request(0)).unwrap().is_none());
        // Forged counts and cut bodies are refused.
        let mut forged = request(1);
        forged[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(answer(0, 1, &forged).is_err());
        let cut = request(1);
        assert!(answer(0, 1, &cut[..cut.len() - 2]).is_err());
    }
}
