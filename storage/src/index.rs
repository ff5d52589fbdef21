//! Sparse in-memory indexes of a segment and their on-disk encoding.
//!
//! `.index` maps an offset (relative to the segment base) to the byte position
//! of the batch that starts there; `.timeindex` maps the largest timestamp
//! seen so far to the offset of the batch that raised it. Both are sparse:
//! an entry every `index_interval_bytes` of log. Both are big-endian fixed
//! entries, like Kafka's.

/// Bytes of one `.index` entry: relative offset u32, position u32.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes of one `.timeindex` entry: timestamp i64, relative offset u32.
pub const TIME_ENTRY_BYTES: usize = 12;

/// One `.index` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    /// Offset minus the segment base.
    pub relative_offset: u32,
    /// Byte position of the batch in the `.log` file.
    pub position: u32,
}

/// One `.timeindex` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    /// The largest timestamp up to this batch.
    pub timestamp: i64,
    /// Offset (relative) of the batch that raised it.
    pub relative_offset: u32,
}

/// Appends the CRC-32C trailer.
fn seal(mut entries: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&entries);
    entries.extend_from_slice(&crc.to_be_bytes());
    entries
}

/// The entries of a sealed file, or None if the trailer does not match.
fn unseal(bytes: &[u8]) -> Option<&[u8]> {
    let split = bytes.len().checked_sub(4)?;
    let (entries, trailer) = bytes.split_at(split);
    let crc = u32::from_be_bytes(trailer.try_into().ok()?);
    (crc32c::crc32c(entries) == crc).then_some(entries)
}

/// The sparse offset index of a segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetEntry>,
}

impl OffsetIndex {
    /// Adds an entry; entries must grow in both offset and position.
    pub fn push(&mut self, entry: OffsetEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.relative_offset > last.relative_offset && entry.position > last.position,
                "index entries must grow: {last:?} then {entry:?}"
            );
        }
        self.entries.push(entry);
    }

    /// The last entry at or below `relative_offset`: where a scan for it may start.
    pub fn floor(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let idx = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        idx.checked_sub(1).map(|i| self.entries[i])
    }

    /// The last entry.
    pub fn last(&self) -> Option<OffsetEntry> {
        self.entries.last().copied()
    }

    /// Drops entries at or above `position` (truncation).
    pub fn truncate_from_position(&mut self, position: u32) {
        self.entries.retain(|e| e.position < position);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The on-disk encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * OFFSET_ENTRY_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
            out.extend_from_slice(&e.position.to_be_bytes());
        }
        seal(out)
    }

    /// Decodes an index file, or None if it is damaged: a partial entry,
    /// entries that do not grow, or a position at or past `log_bytes`.
    pub fn decode(bytes: &[u8], log_bytes: u64) -> Option<OffsetIndex> {
        let bytes = unseal(bytes)?;
        if bytes.len() % OFFSET_ENTRY_BYTES != 0 {
            return None;
        }
        let mut index = OffsetIndex::default();
        for chunk in bytes.chunks_exact(OFFSET_ENTRY_BYTES) {
            let entry = OffsetEntry {
                relative_offset: u32::from_be_bytes(chunk[0..4].try_into().ok()?),
                position: u32::from_be_bytes(chunk[4..8].try_into().ok()?),
            };
            if entry.position as u64 >= log_bytes {
                return None;
            }
            if let Some(last) = index.entries.last() {
                if entry.relative_offset <= last.relative_offset || entry.position <= last.position
                {
                    return None;
                }
            }
            index.entries.push(entry);
        }
        Some(index)
    }
}

/// The sparse time index of a segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeEntry>,
}

impl TimeIndex {
    /// Adds an entry if it raises the largest timestamp.
    pub fn push(&mut self, entry: TimeEntry) {
        match self.entries.last() {
            Some(last) if entry.timestamp <= last.timestamp => {}
            Some(last) if entry.relative_offset <= last.relative_offset => {}
            _ => self.entries.push(entry),
        }
    }

    /// The offset (relative) a scan for the first record at or after
    /// `timestamp` may start from: the last entry whose timestamp is below it.
    pub fn scan_start(&self, timestamp: i64) -> u32 {
        let idx = self.entries.partition_point(|e| e.timestamp < timestamp);
        idx.checked_sub(1)
            .map_or(0, |i| self.entries[i].relative_offset)
    }

    /// The largest timestamp recorded.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.entries.last().map(|e| e.timestamp)
    }

    /// The last entry.
    pub fn last(&self) -> Option<TimeEntry> {
        self.entries.last().copied()
    }

    /// Drops entries at or above `relative_offset` (truncation).
    pub fn truncate_from_offset(&mut self, relative_offset: u32) {
        self.entries.retain(|e| e.relative_offset < relative_offset);
    }

    /// The on-disk encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * TIME_ENTRY_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&e.timestamp.to_be_bytes());
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
        }
        seal(out)
    }

    /// Decodes a time index file, or None if it is damaged.
    pub fn decode(bytes: &[u8]) -> Option<TimeIndex> {
        let bytes = unseal(bytes)?;
        if bytes.len() % TIME_ENTRY_BYTES != 0 {
            return None;
        }
        let mut index = TimeIndex::default();
        for chunk in bytes.chunks_exact(TIME_ENTRY_BYTES) {
            let entry = TimeEntry {
                timestamp: i64::from_be_bytes(chunk[0..8].try_into().ok()?),
                relative_offset: u32::from_be_bytes(chunk[8..12].try_into().ok()?),
            };
            if let Some(last) = index.entries.last() {
                if entry.timestamp <= last.timestamp
                    || entry.relative_offset <= last.relative_offset
                {
                    return None;
                }
            }
            index.entries.push(entry);
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(relative_offset: u32, position: u32) -> OffsetEntry {
        OffsetEntry {
            relative_offset,
            position,
        }
    }

    #[test]
    fn floor_finds_the_last_entry_at_or_below() {
        let mut index = OffsetIndex::default();
        index.push(entry(0, 0));
        index.push(entry(10, 4096));
        index.push(entry(20, 8192));
        assert_eq!(index.floor(0), Some(entry(0, 0)));
        assert_eq!(index.floor(15), Some(entry(10, 4096)));
        assert_eq!(index.floor(99), Some(entry(20, 8192)));
        index.truncate_from_position(8192);
        assert_eq!(index.floor(99), Some(entry(10, 4096)));
    }

    #[test]
    fn encoding_round_trips_and_damage_is_detected() {
        let mut index = OffsetIndex::default();
        index.push(entry(0, 0));
        index.push(entry(7, 100));
        let bytes = index.encode();
        assert_eq!(OffsetIndex::decode(&bytes, 200), Some(index.clone()));
        assert_eq!(
            OffsetIndex::decode(&bytes, 100),
            None,
            "position past the log"
        );
        assert_eq!(OffsetIndex::decode(&bytes[..5], 200), None, "partial entry");
        let mut swapped = bytes.clone();
        swapped[8..16].copy_from_slice(&bytes[0..8]);
        assert_eq!(OffsetIndex::decode(&swapped, 200), None, "not growing");
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert_eq!(OffsetIndex::decode(&flipped, 1 << 20), None, "flip at {at}");
        }
    }

    #[test]
    fn time_index_scan_start_and_round_trip() {
        let mut index = TimeIndex::default();
        index.push(TimeEntry {
            timestamp: 100,
            relative_offset: 0,
        });
        index.push(TimeEntry {
            timestamp: 90,
            relative_offset: 5,
        }); // ignored: not larger
        index.push(TimeEntry {
            timestamp: 200,
            relative_offset: 10,
        });
        assert_eq!(index.scan_start(50), 0);
        assert_eq!(index.scan_start(150), 0);
        assert_eq!(index.scan_start(201), 10);
        assert_eq!(index.max_timestamp(), Some(200));
        assert_eq!(TimeIndex::decode(&index.encode()), Some(index));
    }
}
