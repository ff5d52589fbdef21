//! Kafka framing: each request is `[size i32][size bytes]`. The size is
//! checked against `socket.request.max.bytes` before anything is
//! allocated; a bad size means the connection is closed.

use bytes::{Buf, Bytes, BytesMut};

/// Why a connection's byte stream cannot be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A negative size, or one over the limit.
    #[error("request size {size} outside 0..={max}")]
    Size {
        /// The size prefix.
        size: i64,
        /// socket.request.max.bytes.
        max: u32,
    },
}

/// Splits a connection's incoming bytes into request frames.
#[derive(Debug)]
pub struct FrameReader {
    buffer: BytesMut,
    max_bytes: u32,
}

impl FrameReader {
    /// A reader refusing frames larger than `max_bytes`.
    pub fn new(max_bytes: u32) -> FrameReader {
        FrameReader {
            buffer: BytesMut::new(),
            max_bytes,
        }
    }

    /// Refuses frames larger than `max_bytes` from now on.
    pub fn set_max(&mut self, max_bytes: u32) {
        self.max_bytes = max_bytes;
    }

    /// Space to read into: at least `min` bytes, and enough for the frame
    /// in progress once its size is known (so a large frame is read into
    /// one buffer without regrowing).
    pub fn read_buffer(&mut self, min: usize) -> &mut BytesMut {
        let wanted = match self.pending_size() {
            Some(Ok(size)) => (4 + size).saturating_sub(self.buffer.len()).max(min),
            _ => min,
        };
        self.buffer.reserve(wanted);
        &mut self.buffer
    }

    fn pending_size(&self) -> Option<Result<usize, FrameError>> {
        if self.buffer.len() < 4 {
            return None;
        }
        let size = i32::from_be_bytes(self.buffer[..4].try_into().expect("4 bytes")) as i64;
        if size < 0 || size > self.max_bytes as i64 {
            return Some(Err(FrameError::Size {
                size,
                max: self.max_bytes,
            }));
        }
        Some(Ok(size as usize))
    }

    /// The next complete frame (without its size prefix), if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let size = match self.pending_size() {
            None => return Ok(None),
            Some(result) => result?,
        };
        if self.buffer.len() < 4 + size {
            return Ok(None);
        }
        self.buffer.advance(4);
        Ok(Some(self.buffer.split_to(size).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(reader: &mut FrameReader, bytes: &[u8]) {
        reader.read_buffer(bytes.len()).extend_from_slice(bytes);
    }

    #[test]
    fn frames_split_across_reads_come_out_whole() {
        let mut stream = Vec::new();
        for body in [&b"one"[..], b"", b"three!"] {
            stream.extend_from_slice(&crate::kafka::response::Frame::of_body(body).to_bytes());
        }
        let mut reader = FrameReader::new(1024);
        let mut got = Vec::new();
        for byte in stream {
            feed(&mut reader, &[byte]);
            while let Some(frame) = reader.next_frame().unwrap() {
                got.push(frame);
            }
        }
        assert_eq!(
            got,
            vec![Bytes::from("one"), Bytes::new(), Bytes::from("three!")]
        );
    }

    #[test]
    fn oversized_and_negative_sizes_are_refused_before_allocating() {
        let mut reader = FrameReader::new(1024);
        feed(&mut reader, &i32::MAX.to_be_bytes());
        assert!(matches!(reader.next_frame(), Err(FrameError::Size { .. })));
        assert!(
            reader.read_buffer(16).capacity() < 1 << 20,
            "no buffer for the claimed size"
        );
        let mut reader = FrameReader::new(1024);
        feed(&mut reader, &(-1i32).to_be_bytes());
        assert!(matches!(
            reader.next_frame(),
            Err(FrameError::Size { size: -1, .. })
        ));
        let mut reader = FrameReader::new(1024);
        feed(&mut reader, &1025i32.to_be_bytes());
        assert!(reader.next_frame().is_err());
    }
}
