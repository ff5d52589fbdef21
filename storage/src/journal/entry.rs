//! One journal entry: a log's flushed bytes and where they belong.
//!
//! An entry names its log (topic id, partition, and the id of the log's
//! directory), the segment (its base offset) and the file position the
//! data starts at, so replay can write it back without knowing anything
//! else. It also
//! carries the journal's incarnation and a sequence number: replay accepts
//! only the entry it expects next, which tells a live entry from a stale
//! one left by an earlier lap or an earlier run of the broker.
//!
//! Layout, big-endian, [`HEADER_BYTES`] then the data:
//!
//! | at | field |
//! |---|---|
//! | 0 | magic `JRE1` |
//! | 4 | CRC-32C of bytes 8 to the entry's end |
//! | 8 | entry length, header included |
//! | 12 | incarnation |
//! | 20 | sequence |
//! | 28 | topic id (16 bytes) |
//! | 44 | partition |
//! | 48 | the log directory's journal id |
//! | 56 | segment base offset |
//! | 64 | file position of the data |
//! | 72 | reserved (zero) |

use crate::types::Offset;

const MAGIC: &[u8; 4] = b"JRE1";

/// Bytes before an entry's data.
pub const HEADER_BYTES: usize = 80;

/// The longest entry [`decode`] accepts. A journal entry is a small flush
/// (a few blocks); the bound keeps a damaged length from reaching far.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;

/// Which log an entry belongs to. A log whose files change other than by
/// appending (truncation, compaction's swap) first moves the journal's
/// checkpoint past its entries, so none of them is replayed over the
/// changed files (see `Log`); the directory's id keeps entries of a
/// removed directory out of a new one made under the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogIdentity {
    /// The topic's id.
    pub topic_id: [u8; 16],
    /// The partition's index.
    pub partition: u32,
    /// The random id of the log's directory (its `journal-id` file).
    pub directory: u64,
}

/// Where an entry's data goes: a segment of a log, from a file position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryTarget {
    /// The log.
    pub log: LogIdentity,
    /// The segment's base offset (its file name).
    pub segment: Offset,
    /// The segment file position of the data's first byte.
    pub position: u64,
}

/// An entry read back from the journal's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedEntry<'a> {
    /// The journal incarnation that wrote it.
    pub incarnation: u64,
    /// Its sequence number.
    pub sequence: u64,
    /// Where its data goes.
    pub target: EntryTarget,
    /// The data.
    pub data: &'a [u8],
}

impl DecodedEntry<'_> {
    /// Bytes the entry takes in the journal.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.data.len()
    }
}

/// Bytes an entry with `data_len` bytes of data takes.
pub fn encoded_len(data_len: usize) -> usize {
    HEADER_BYTES + data_len
}

/// Writes an entry at the start of `out`, which must hold
/// [`encoded_len`]`(data.len())` bytes.
pub fn encode(out: &mut [u8], incarnation: u64, sequence: u64, target: &EntryTarget, data: &[u8]) {
    let len = encoded_len(data.len());
    assert!(len <= MAX_ENTRY_BYTES, "a journal entry of {len} bytes");
    let out = &mut out[..len];
    out[0..4].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&(len as u32).to_be_bytes());
    out[12..20].copy_from_slice(&incarnation.to_be_bytes());
    out[20..28].copy_from_slice(&sequence.to_be_bytes());
    out[28..44].copy_from_slice(&target.log.topic_id);
    out[44..48].copy_from_slice(&target.log.partition.to_be_bytes());
    out[48..56].copy_from_slice(&target.log.directory.to_be_bytes());
    out[56..64].copy_from_slice(&target.segment.0.to_be_bytes());
    out[64..72].copy_from_slice(&target.position.to_be_bytes());
    out[72..80].fill(0);
    out[HEADER_BYTES..].copy_from_slice(data);
    let crc = crc32c::crc32c(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_be_bytes());
}

/// The entry starting at `at` in `journal`, if one is there whole with a
/// matching CRC. The length is checked against the bytes that remain
/// before anything is read past the header.
pub fn decode(journal: &[u8], at: usize) -> Option<DecodedEntry<'_>> {
    let rest = journal.get(at..)?;
    if rest.len() < HEADER_BYTES || &rest[0..4] != MAGIC {
        return None;
    }
    let len = u32::from_be_bytes(rest[8..12].try_into().ok()?) as usize;
    if !(HEADER_BYTES..=MAX_ENTRY_BYTES).contains(&len) || len > rest.len() {
        return None;
    }
    let entry = &rest[..len];
    let crc = u32::from_be_bytes(entry[4..8].try_into().ok()?);
    if crc32c::crc32c(&entry[8..]) != crc {
        return None;
    }
    let u64_at = |i: usize| u64::from_be_bytes(entry[i..i + 8].try_into().expect("8 bytes"));
    Some(DecodedEntry {
        incarnation: u64_at(12),
        sequence: u64_at(20),
        target: EntryTarget {
            log: LogIdentity {
                topic_id: entry[28..44].try_into().expect("16 bytes"),
                partition: u32::from_be_bytes(entry[44..48].try_into().expect("4 bytes")),
                directory: u64_at(48),
            },
            segment: Offset(u64_at(56) as i64),
            position: u64_at(64),
        },
        data: &entry[HEADER_BYTES..],
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn target(partition: u32, position: u64) -> EntryTarget {
        EntryTarget {
            log: LogIdentity {
                topic_id: [7; 16],
                partition,
                directory: 0xD1_7EC7,
            },
            segment: Offset(1234),
            position,
        }
    }

    fn encoded(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0xAA; encoded_len(data.len()) + 10];
        encode(&mut out, 3, 41, &target(5, 8191), data);
        out
    }

    #[test]
    fn an_entry_reads_back_as_written() {
        let journal = encoded(b"some records");
        let entry = decode(&journal, 0).expect("an entry");
        assert_eq!(entry.incarnation, 3);
        assert_eq!(entry.sequence, 41);
        assert_eq!(entry.target, target(5, 8191));
        assert_eq!(entry.data, b"some records");
        assert_eq!(entry.encoded_len(), HEADER_BYTES + 12);
        let empty = encoded(b"");
        assert_eq!(decode(&empty, 0).expect("an entry").data, b"");
    }

    #[test]
    fn any_damaged_byte_or_missing_tail_is_rejected() {
        let journal = encoded(b"0123456789");
        let len = encoded_len(10);
        for at in 0..len {
            let mut bad = journal.clone();
            bad[at] ^= 0x01;
            assert_eq!(decode(&bad, 0), None, "flip at {at}");
        }
        assert_eq!(decode(&journal[..len - 1], 0), None);
        assert_eq!(decode(&journal, len + 10), None, "past the end");
    }

    #[test]
    fn a_huge_length_is_refused_before_it_is_read() {
        let mut journal = encoded(b"x");
        journal[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&journal, 0), None);
        journal[8..12].copy_from_slice(&((MAX_ENTRY_BYTES + 1) as u32).to_be_bytes());
        journal.resize(MAX_ENTRY_BYTES + 2, 0);
        assert_eq!(decode(&journal, 0), None);
        journal[8..12].copy_from_slice(&(HEADER_BYTES as u32 - 1).to_be_bytes());
        assert_eq!(decode(&journal, 0), None);
    }
}
