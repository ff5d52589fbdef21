//! A segment's aborted-transaction index (`<base>.txnindex`, as Kafka's
//! `.txnindex`), sans I/O: the aborted transactions whose ABORT marker
//! lies in the segment, written when the segment is sealed. The partition
//! then keeps in memory only the aborts of segments not sealed yet, its
//! producer snapshots carry only those, and a read_committed Fetch of
//! older data reads the few index files it needs.
//!
//! Layout: magic `TXI1`, entry count (u32), 32 bytes per entry (producer
//! id, first offset, marker offset, stable-after offset; big-endian, by
//! marker offset), then the CRC-32C of everything before it.

use std::rc::Rc;

use crate::types::Offset;

/// Decoded index files kept for readers: (segment base, log generation,
/// entries).
pub type TxnIndexCache = Vec<(Offset, u64, Rc<[AbortedTxn]>)>;

/// An aborted transaction, as the index keeps it (Kafka's AbortedTxn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of its first record on this partition.
    pub first_offset: Offset,
    /// Offset of its ABORT marker.
    pub marker_offset: Offset,
    /// The first offset of the earliest other transaction open when it
    /// was aborted (else the marker's offset + 1): no transaction that
    /// starts below this is aborted later, which ends a lookup.
    pub stable_after: Offset,
}

const MAGIC: &[u8; 4] = b"TXI1";
const ENTRY_BYTES: usize = 32;

/// Encodes a segment's aborted transactions (in marker order).
pub fn encode(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + entries.len() * ENTRY_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for txn in entries {
        put_entry(&mut out, txn);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The length of an index file of `entries` entries.
pub fn encoded_len(entries: u64) -> u64 {
    12u64.saturating_add(entries.saturating_mul(ENTRY_BYTES as u64))
}

/// Appends one entry's 32 bytes (producer id, first offset, marker
/// offset, stable-after offset; big-endian): also the producer
/// snapshots' layout of the aborts they hold.
pub fn put_entry(out: &mut Vec<u8>, txn: &AbortedTxn) {
    let values = [
        txn.producer_id,
        txn.first_offset.0,
        txn.marker_offset.0,
        txn.stable_after.0,
    ];
    for value in values {
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Decodes an index file, or None if it is damaged (the count must match
/// the file's length exactly before anything is allocated).
pub fn decode(bytes: &[u8]) -> Option<Vec<AbortedTxn>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
        return None;
    }
    let (magic, rest) = body.split_at_checked(4)?;
    let (count, entries) = rest.split_at_checked(4)?;
    let count = u32::from_be_bytes(count.try_into().ok()?) as usize;
    if magic != MAGIC || entries.len() != count.checked_mul(ENTRY_BYTES)? {
        return None;
    }
    let field = |entry: &[u8], i: usize| {
        i64::from_be_bytes(entry[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    };
    let decoded: Vec<AbortedTxn> = entries
        .chunks_exact(ENTRY_BYTES)
        .map(|e| AbortedTxn {
            producer_id: field(e, 0),
            first_offset: Offset(field(e, 1)),
            marker_offset: Offset(field(e, 2)),
            stable_after: Offset(field(e, 3)),
        })
        .collect();
    let ordered = decoded
        .windows(2)
        .all(|w| w[0].marker_offset < w[1].marker_offset);
    ordered.then_some(decoded)
}

/// Adds to `found` the aborted transactions among `entries` (in marker
/// order, markers at or after `from`) whose first record lies below
/// `upper`; true once the lookup is complete: an entry stable after
/// `upper` means no transaction starting below `upper` is aborted later,
/// so later entries (and later segments) need not be read.
pub fn collect_overlapping<'a>(
    entries: impl IntoIterator<Item = &'a AbortedTxn>,
    from: Offset,
    upper: Offset,
    found: &mut Vec<AbortedTxn>,
) -> bool {
    for txn in entries.into_iter().filter(|t| t.marker_offset >= from) {
        if txn.first_offset < upper {
            found.push(*txn);
        }
        if txn.stable_after >= upper {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, marker: i64, stable_after: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: Offset(first),
            marker_offset: Offset(marker),
            stable_after: Offset(stable_after),
        }
    }

    #[test]
    fn an_index_round_trips_and_any_damage_is_detected() {
        let entries = vec![txn(1, 0, 10, 11), txn(2, 5, 20, 21), txn(-3, 12, 30, 31)];
        let bytes = encode(&entries);
        assert_eq!(bytes.len() as u64, encoded_len(3));
        assert_eq!(decode(&bytes), Some(entries.clone()));
        assert_eq!(decode(&encode(&[])), Some(vec![]));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode(&bad), None, "a flipped bit at byte {i}");
        }
        for len in 0..bytes.len() {
            assert_eq!(decode(&bytes[..len]), None, "cut to {len} bytes");
        }
        // A count that claims more than the file holds, with a valid CRC.
        let mut lying = bytes[..bytes.len() - 4].to_vec();
        lying[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&lying);
        lying.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&lying), None);
        // Entries out of marker order, with a valid CRC.
        let unordered = encode(&[txn(1, 0, 20, 21), txn(2, 5, 10, 11)]);
        assert_eq!(decode(&unordered), None);
    }

    #[test]
    fn a_lookup_stops_at_the_first_entry_stable_after_its_upper_bound() {
        // Producer 2's transaction [5, 20) was open when 1 aborted at 10.
        let entries = [txn(1, 0, 10, 5), txn(2, 5, 20, 21), txn(3, 40, 50, 51)];
        let mut found = Vec::new();
        assert!(collect_overlapping(
            &entries,
            Offset(0),
            Offset(8),
            &mut found
        ));
        assert_eq!(found, [entries[0], entries[1]], "2 started below 8");
        found.clear();
        assert!(collect_overlapping(
            &entries,
            Offset(11),
            Offset(8),
            &mut found
        ));
        assert_eq!(found, [entries[1]], "1's marker is below the read");
        found.clear();
        let complete = collect_overlapping(&entries, Offset(0), Offset(60), &mut found);
        assert!(!complete, "a transaction aborted later may start below 60");
        assert_eq!(found.len(), 3);
    }
}
