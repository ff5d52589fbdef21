//! Kafka framing: each request is `[size i32][size bytes]`. The size is
//! checked against `socket.request.max.bytes` before anything is
//! allocated; a bad size means the connection is closed.
//!
//! A large frame is read into memory of its own, of exactly its size and
//! holding nothing else, so that its records can become the log's batches
//! without a copy (`kafka::record_sets`).

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

/// Frames of at least this many bytes get memory of their own: their reads
/// stop at their end, and the reader starts a new buffer after them.
/// Smaller ones share the reader's buffer (one allocation for many).
pub const OWN_MEMORY_MIN_BYTES: usize = 64 * 1024;

/// Splits a connection's incoming bytes into request frames.
#[derive(Debug)]
pub struct FrameReader {
    buffer: BytesMut,
    /// Whether the buffer is memory of the large frame at its front alone.
    own: bool,
    max_bytes: u32,
}

impl FrameReader {
    /// A reader refusing frames larger than `max_bytes`.
    pub fn new(max_bytes: u32) -> FrameReader {
        FrameReader {
            buffer: BytesMut::new(),
            own: false,
            max_bytes,
        }
    }

    /// Refuses frames larger than `max_bytes` from now on.
    pub fn set_max(&mut self, max_bytes: u32) {
        self.max_bytes = max_bytes;
    }

    /// Space to read into: at least `min` bytes, and enough for the frame
    /// in progress once its size is known (so a large frame is read into
    /// one buffer without regrowing). A large frame gets a buffer of
    /// exactly its size, the part read so far copied in: growing one as
    /// reserve does would leave up to twice the memory, and the bytes of
    /// earlier frames before it. (Complete frames are taken before the
    /// next read.)
    pub fn read_buffer(&mut self, min: usize) -> &mut BytesMut {
        if let Some((size, _)) = self.large_frame() {
            if !self.own {
                let mut own = BytesMut::with_capacity(4 + size);
                own.extend_from_slice(&self.buffer);
                self.buffer = own;
                self.own = true;
            }
            return &mut self.buffer;
        }
        let wanted = match self.pending_size() {
            Some(Ok(size)) => (4 + size).saturating_sub(self.buffer.len()).max(min),
            _ => min,
        };
        self.buffer.reserve(wanted);
        &mut self.buffer
    }

    /// How many bytes the next read may take, at most `max`: the rest of
    /// a large frame in progress, so that it ends its buffer.
    pub fn read_limit(&self, max: usize) -> usize {
        match self.large_frame() {
            Some((_, rest)) if rest > 0 => rest.min(max),
            _ => max,
        }
    }

    /// A large frame at the front: its size and the bytes it still lacks.
    fn large_frame(&self) -> Option<(usize, usize)> {
        match self.pending_size() {
            Some(Ok(size)) if size >= OWN_MEMORY_MIN_BYTES => {
                Some((size, (4 + size).saturating_sub(self.buffer.len())))
            }
            _ => None,
        }
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

    /// Lets go of the buffer's memory when it holds no bytes, so that a
    /// connection waiting between requests holds none (the next read
    /// reserves afresh).
    pub fn release_if_empty(&mut self) {
        if self.buffer.is_empty() {
            self.buffer = BytesMut::new();
            self.own = false;
        }
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
        let own = std::mem::replace(&mut self.own, false);
        if own && self.buffer.len() == 4 + size {
            // Its reads stopped at its end: the buffer is the frame's alone.
            let mut frame = std::mem::take(&mut self.buffer);
            frame.advance(4);
            return Ok(Some(frame.freeze()));
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
    fn a_large_frame_is_read_into_memory_of_exactly_its_size() {
        let size = OWN_MEMORY_MIN_BYTES + 10;
        let mut stream = crate::kafka::response::Frame::of_body(&b"small"[..])
            .to_bytes()
            .to_vec();
        stream.extend_from_slice(&(size as i32).to_be_bytes());
        stream.extend((0..size).map(|i| i as u8));
        stream.extend_from_slice(&crate::kafka::response::Frame::of_body(&b"next"[..]).to_bytes());
        // Reads as a socket might give them: the size prefix split across
        // two, or the frame's start in the read with the small one.
        for read_max in [7, 4000, 64 * 1024] {
            let mut reader = FrameReader::new(1 << 20);
            let mut at = 0;
            let mut frames = Vec::new();
            while at < stream.len() {
                let limit = reader.read_limit(read_max).min(stream.len() - at);
                reader
                    .read_buffer(limit)
                    .extend_from_slice(&stream[at..at + limit]);
                at += limit;
                while let Some(frame) = reader.next_frame().unwrap() {
                    frames.push(frame);
                }
            }
            assert_eq!(frames.len(), 3, "reads of {read_max}");
            assert_eq!(&frames[0][..], b"small");
            assert_eq!(&frames[2][..], b"next");
            let large = frames.swap_remove(1);
            assert_eq!(large.len(), size);
            assert!(large.iter().enumerate().all(|(i, b)| *b == i as u8));
            let owned = large
                .try_into_mut()
                .expect("nothing else shares the large frame's memory");
            assert_eq!(owned.capacity(), size, "reads of {read_max}");
        }
    }

    #[test]
    fn a_large_frame_gets_its_own_memory_even_where_the_room_left_would_fit_it() {
        let size = OWN_MEMORY_MIN_BYTES + 10;
        let small = crate::kafka::response::Frame::of_body(&b"small"[..]).to_bytes();
        let mut reader = FrameReader::new(1 << 20);
        // Room for the small frame and exactly the large one after it.
        let buffer = reader.read_buffer(small.len() + 4 + size);
        buffer.extend_from_slice(&small);
        buffer.extend_from_slice(&(size as i32).to_be_bytes());
        let first = reader.next_frame().unwrap().expect("the small frame");
        assert_eq!(reader.read_limit(usize::MAX), size);
        reader.read_buffer(size).extend_from_slice(&vec![7u8; size]);
        let large = reader.next_frame().unwrap().expect("the large frame");
        assert_eq!(&first[..], b"small", "still held");
        assert!(
            large.try_into_mut().is_ok(),
            "the large frame shares nothing with the small one"
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

    #[test]
    fn a_reader_with_nothing_buffered_lets_go_of_its_memory_and_keeps_a_partial_frame() {
        let mut reader = FrameReader::new(1 << 20);
        let frame = crate::kafka::response::Frame::of_body(&b"first"[..]).to_bytes();
        feed(&mut reader, &frame);
        reader.read_buffer(64 * 1024);
        assert_eq!(reader.next_frame().unwrap(), Some(Bytes::from("first")));
        assert!(reader.read_buffer(0).capacity() >= 60 * 1024);
        reader.release_if_empty();
        assert_eq!(reader.read_buffer(0).capacity(), 0, "nothing held");
        // Half a frame stays where it is.
        let next = crate::kafka::response::Frame::of_body(&b"second"[..]).to_bytes();
        feed(&mut reader, &next[..5]);
        reader.release_if_empty();
        assert_eq!(reader.next_frame().unwrap(), None);
        feed(&mut reader, &next[5..]);
        assert_eq!(reader.next_frame().unwrap(), Some(Bytes::from("second")));
    }
}
