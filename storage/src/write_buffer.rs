//! Appended bytes waiting for their direct write, in block-aligned chunks.
//!
//! O_DIRECT writes whole 4 KiB blocks at aligned positions, but batches end
//! anywhere. The buffer starts at the aligned position below the end of the
//! durable data and carries the partial block already on disk, so each
//! flush rewrites that block with the new bytes after it. Rewriting is safe
//! even if the write tears: the old and new contents agree on the bytes
//! that were already durable, so any mix of old and new sectors keeps them.
//!
//! The carried block is a chunk of its own, so a flush writes it apart from
//! the new blocks after it. The file system sees two plain overwrites: one
//! of a block already written, one of reserved (unwritten) blocks. A single
//! write spanning both is not an overwrite to ext4, which then wants the
//! inode's exclusive lock; under io_uring's non-blocking attempt that is
//! refused, and the write goes to a kernel worker thread (the punted
//! writes are traced in docs/benchmarks.md, run 59; ext4's reason is
//! inferred from its checks).

use crate::io::{align_down, align_up, AlignedBuf, BLOCK_BYTES};
use crate::streaming_copy;

/// The smallest chunk allocated (but for the one block carrying a partial
/// block), so small appends do not each get a write.
const CHUNK_MIN_BYTES: usize = 16 * 1024;

/// One direct write a flush issues.
pub struct ChunkWrite<B> {
    /// Aligned file position.
    pub position: u64,
    /// Block-padded buffer.
    pub buf: B,
}

/// The writes of one flush and the file size they bring the segment to.
pub struct PendingWrite<B> {
    /// Writes to issue, in file order; they may run concurrently.
    pub chunks: Vec<ChunkWrite<B>>,
    /// Logical end of the data after these writes.
    pub end: u64,
    /// Bytes appended since the previous take (the rewritten tail excluded).
    pub new_bytes: usize,
}

impl<B: AlignedBuf> PendingWrite<B> {
    /// The bytes appended since the previous take, copied out of the
    /// chunks (the rewritten partial block before them left out).
    pub fn new_data(&self) -> Vec<u8> {
        let from = self.end - self.new_bytes as u64;
        let mut data = Vec::with_capacity(self.new_bytes);
        for chunk in &self.chunks {
            let start = chunk.position.max(from);
            let end = (chunk.position + chunk.buf.bytes().len() as u64).min(self.end);
            if start < end {
                let at = (start - chunk.position) as usize;
                data.extend_from_slice(&chunk.buf.bytes()[at..at + (end - start) as usize]);
            }
        }
        data
    }
}

/// Bytes appended to a segment and not yet handed to a flush.
pub struct WriteBuffer<B> {
    /// Aligned file position of the first chunk.
    start: u64,
    /// Chunks in file order; each but the last is full. Chunk capacities are
    /// whole blocks, so every chunk starts at an aligned position.
    chunks: Vec<(B, usize)>,
    /// Bytes appended since the last take (the carried partial block excluded).
    new_bytes: usize,
    chunk_max_bytes: usize,
}

impl<B: AlignedBuf> WriteBuffer<B> {
    /// A buffer continuing a file whose data ends at `end`; `tail` holds the
    /// bytes of the partial block at `align_down(end)..end`.
    pub fn new(end: u64, tail: &[u8], chunk_max_bytes: usize, alloc: impl Fn(usize) -> B) -> Self {
        assert_eq!(
            align_down(end) + tail.len() as u64,
            end,
            "tail is the partial block"
        );
        assert!(chunk_max_bytes >= CHUNK_MIN_BYTES && chunk_max_bytes.is_multiple_of(BLOCK_BYTES));
        let mut buffer = WriteBuffer {
            start: align_down(end),
            chunks: Vec::new(),
            new_bytes: 0,
            chunk_max_bytes,
        };
        if !tail.is_empty() {
            // One block: appends fill it up, then go to chunks of their own.
            buffer.chunks.push((alloc(BLOCK_BYTES), 0));
            buffer.copy_in(tail, &alloc);
        }
        buffer
    }

    /// Logical end of the data in the buffer (a file position).
    pub fn end(&self) -> u64 {
        self.start
            + self
                .chunks
                .iter()
                .map(|(_, used)| *used as u64)
                .sum::<u64>()
    }

    /// Bytes appended since the last take.
    pub fn new_bytes(&self) -> usize {
        self.new_bytes
    }

    /// Copies `data` in: the one copy of a batch on its way to disk.
    pub fn push(&mut self, data: &[u8], alloc: impl Fn(usize) -> B) {
        self.copy_in(data, &alloc);
        self.new_bytes += data.len();
    }

    fn copy_in(&mut self, mut data: &[u8], alloc: &impl Fn(usize) -> B) {
        while !data.is_empty() {
            let room = match self.chunks.last() {
                Some((buf, used)) => buf.bytes().len() - used,
                None => 0,
            };
            if room == 0 {
                // Chunks grow geometrically, so a busy log writes few large
                // chunks while an idle one holds little memory.
                let previous = self.chunks.last().map_or(0, |(buf, _)| buf.bytes().len());
                let want = (align_up(data.len() as u64) as usize).max(2 * previous);
                let capacity = want.clamp(CHUNK_MIN_BYTES, self.chunk_max_bytes);
                self.chunks.push((alloc(capacity), 0));
                continue;
            }
            let n = room.min(data.len());
            let (buf, used) = self.chunks.last_mut().expect("a chunk with room");
            streaming_copy::copy(&mut buf.bytes_mut()[*used..*used + n], &data[..n]);
            *used += n;
            data = &data[n..];
        }
    }

    /// Hands every chunk to a flush and starts over with a copy of the
    /// partial last block, which the next flush rewrites. None if nothing
    /// was appended since the last take.
    pub fn take(&mut self, alloc: impl Fn(usize) -> B) -> Option<PendingWrite<B>> {
        if self.new_bytes == 0 {
            return None;
        }
        let end = self.end();
        let new_bytes = self.new_bytes;
        let tail_start = align_down(end);
        let mut position = self.start;
        let mut writes = Vec::with_capacity(self.chunks.len());
        let mut tail = Vec::new();
        for (mut buf, used) in self.chunks.drain(..) {
            if position + used as u64 > tail_start && end > tail_start {
                let from = (tail_start - position) as usize;
                tail.extend_from_slice(&buf.bytes()[from..used]);
            }
            let padded = align_up(used as u64) as usize;
            // Buffers come unzeroed; the padding after the data must not
            // carry stale bytes that a scan could mistake for batches.
            buf.bytes_mut()[used..padded].fill(0);
            buf.truncate_to(padded);
            writes.push(ChunkWrite { position, buf });
            position += used as u64;
        }
        *self = WriteBuffer::new(end, &tail, self.chunk_max_bytes, alloc);
        Some(PendingWrite {
            chunks: writes,
            end,
            new_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers arrive unzeroed, as from a pool.
    fn alloc(n: usize) -> Vec<u8> {
        vec![0xAB; n]
    }

    /// Applies writes to a plain byte vector as a disk would.
    fn apply(disk: &mut Vec<u8>, pending: PendingWrite<Vec<u8>>) {
        for w in pending.chunks {
            assert_eq!(w.position % BLOCK_BYTES as u64, 0);
            assert_eq!(w.buf.len() % BLOCK_BYTES, 0);
            let end = w.position as usize + w.buf.len();
            let data_end = (pending.end as usize).min(end);
            assert!(
                w.buf[data_end.saturating_sub(w.position as usize)..]
                    .iter()
                    .all(|&b| b == 0),
                "padding after the data is zeroed"
            );
            if disk.len() < end {
                disk.resize(end, 0);
            }
            disk[w.position as usize..end].copy_from_slice(&w.buf);
        }
        disk.truncate(pending.end as usize);
    }

    #[test]
    fn flushes_reproduce_the_appended_stream() {
        let mut expected = Vec::new();
        let mut disk = Vec::new();
        let mut buffer = WriteBuffer::new(0, &[], 64 * 1024, alloc);
        let mut seed = 7u64;
        for round in 0..200 {
            for _ in 0..(round % 5) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (seed >> 40) as usize % 70_000;
                let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ seed) as u8).collect();
                buffer.push(&data, alloc);
                expected.extend_from_slice(&data);
            }
            if let Some(pending) = buffer.take(alloc) {
                apply(&mut disk, pending);
            }
            assert_eq!(disk, expected, "round {round}");
            assert_eq!(buffer.end(), expected.len() as u64);
        }
    }

    #[test]
    fn a_buffer_reopened_mid_block_carries_the_tail() {
        let existing: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let mut disk = existing.clone();
        let tail = &existing[4096..];
        let mut buffer = WriteBuffer::new(5000, tail, 64 * 1024, alloc);
        assert!(buffer.take(alloc).is_none(), "nothing new to write");
        buffer.push(b"more", alloc);
        apply(&mut disk, buffer.take(alloc).unwrap());
        assert_eq!(&disk[..5000], &existing[..]);
        assert_eq!(&disk[5000..], b"more");
    }

    /// Each write of a flush: its file position and length.
    fn spans(pending: &PendingWrite<Vec<u8>>) -> Vec<(u64, usize)> {
        pending
            .chunks
            .iter()
            .map(|w| (w.position, w.buf.len()))
            .collect()
    }

    #[test]
    fn the_rewritten_block_is_a_write_apart_from_the_new_blocks() {
        let existing = vec![1u8; 5000];
        let mut buffer = WriteBuffer::new(5000, &existing[4096..], 64 * 1024, alloc);
        buffer.push(&[2u8; 10_000], alloc);
        let pending = buffer.take(alloc).unwrap();
        assert_eq!(spans(&pending), [(4096, 4096), (8192, 8192)]);

        // The next flush starts mid-block again: the carried block alone first.
        buffer.push(&[3u8; 100], alloc);
        let pending = buffer.take(alloc).unwrap();
        assert_eq!(
            spans(&pending),
            [(12_288, 4096)],
            "100 bytes fit in the carried block"
        );
    }
}
