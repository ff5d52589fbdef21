//! The journal's header: where replay starts, kept in two copies.
//!
//! The header records the checkpoint (the first sequence number replay
//! still needs and the position of its entry) and the incarnation whose
//! entries count. Each write goes to the copy the previous write did not
//! touch, in a block of its own, so a write torn by a power loss leaves the
//! other copy whole; readers take the valid copy written last.
//!
//! Layout of a copy, big-endian: magic `JRNLHEAD`, CRC-32C of bytes 12 to
//! [`COPY_BYTES`], then counter, incarnation, checkpoint sequence,
//! checkpoint position and the journal's size.

use crate::io::BLOCK_BYTES;

const MAGIC: &[u8; 8] = b"JRNLHEAD";
const COPY_BYTES: usize = 52;

/// The blocks the two copies take at the start of the file.
pub const HEADER_REGION_BYTES: u64 = 2 * BLOCK_BYTES as u64;

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Grows with every header write; the larger valid copy is current.
    pub counter: u64,
    /// The incarnation whose entries replay reads.
    pub incarnation: u64,
    /// The first sequence number replay needs.
    pub sequence: u64,
    /// Where the entry with that sequence number starts (or, if none was
    /// written yet, where the next round goes).
    pub position: u64,
    /// The journal file's size.
    pub journal_bytes: u64,
}

impl Checkpoint {
    /// The file position of the block this header's copy goes to.
    pub fn copy_position(&self) -> u64 {
        (self.counter % 2) * BLOCK_BYTES as u64
    }

    /// The copy's block, ready to write at [`Checkpoint::copy_position`].
    pub fn encode(&self, block: &mut [u8]) {
        assert_eq!(block.len(), BLOCK_BYTES, "a header copy is one block");
        block.fill(0);
        block[0..8].copy_from_slice(MAGIC);
        block[12..20].copy_from_slice(&self.counter.to_be_bytes());
        block[20..28].copy_from_slice(&self.incarnation.to_be_bytes());
        block[28..36].copy_from_slice(&self.sequence.to_be_bytes());
        block[36..44].copy_from_slice(&self.position.to_be_bytes());
        block[44..52].copy_from_slice(&self.journal_bytes.to_be_bytes());
        let crc = crc32c::crc32c(&block[12..COPY_BYTES]);
        block[8..12].copy_from_slice(&crc.to_be_bytes());
    }

    /// The copy in `block`, if it is whole.
    pub fn decode(block: &[u8]) -> Option<Checkpoint> {
        let copy = block.get(..COPY_BYTES)?;
        if &copy[0..8] != MAGIC {
            return None;
        }
        let crc = u32::from_be_bytes(copy[8..12].try_into().ok()?);
        if crc32c::crc32c(&copy[12..]) != crc {
            return None;
        }
        let u64_at = |i: usize| u64::from_be_bytes(copy[i..i + 8].try_into().expect("8 bytes"));
        Some(Checkpoint {
            counter: u64_at(12),
            incarnation: u64_at(20),
            sequence: u64_at(28),
            position: u64_at(36),
            journal_bytes: u64_at(44),
        })
    }

    /// The current header of a journal whose first [`HEADER_REGION_BYTES`]
    /// are `start`: the valid copy with the larger counter. None if neither
    /// copy is valid (a journal never written, or both copies damaged).
    pub fn read(start: &[u8]) -> Option<Checkpoint> {
        let block = BLOCK_BYTES;
        let first = start.get(..block).and_then(Checkpoint::decode);
        let second = start.get(block..2 * block).and_then(Checkpoint::decode);
        match (first, second) {
            (Some(a), Some(b)) => Some(if a.counter >= b.counter { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// The next header: the same journal, a later checkpoint.
    pub fn advanced(&self, sequence: u64, position: u64) -> Checkpoint {
        Checkpoint {
            counter: self.counter + 1,
            sequence,
            position,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint(counter: u64) -> Checkpoint {
        Checkpoint {
            counter,
            incarnation: 99,
            sequence: 1000 + counter,
            position: 8192 + 4096 * counter,
            journal_bytes: 1 << 26,
        }
    }

    fn region_with(copies: &[Checkpoint]) -> Vec<u8> {
        let mut region = vec![0u8; HEADER_REGION_BYTES as usize];
        for c in copies {
            let at = c.copy_position() as usize;
            c.encode(&mut region[at..at + BLOCK_BYTES]);
        }
        region
    }

    #[test]
    fn the_later_of_two_valid_copies_is_current() {
        assert_eq!(Checkpoint::read(&region_with(&[])), None);
        let (a, b) = (checkpoint(6), checkpoint(7));
        assert_ne!(a.copy_position(), b.copy_position());
        assert_eq!(Checkpoint::read(&region_with(&[a])), Some(a));
        assert_eq!(Checkpoint::read(&region_with(&[a, b])), Some(b));
        assert_eq!(a.advanced(5, 12288).counter, 7);
        assert_eq!(a.advanced(5, 12288).incarnation, a.incarnation);
    }

    #[test]
    fn a_torn_copy_leaves_the_other_current() {
        let (a, b) = (checkpoint(6), checkpoint(7));
        let whole = region_with(&[a, b]);
        let at = b.copy_position() as usize;
        for byte in 0..COPY_BYTES {
            let mut torn = whole.clone();
            torn[at + byte] ^= 0x80;
            assert_eq!(Checkpoint::read(&torn), Some(a), "flip at {byte}");
        }
        // A copy whose write never reached the disk's first sector.
        let mut zeroed = whole.clone();
        zeroed[at..at + 512].fill(0);
        assert_eq!(Checkpoint::read(&zeroed), Some(a));
    }
}
