//! The records of `__transaction_state`, in Kafka's layout (so Kafka's
//! tools can read the topic): key `[version i16 = 0][transactional id:
//! i16-length string]`; value version 0 `[version i16 = 0][producer id
//! i64][producer epoch i16][timeout ms i32][state i8][partitions: i32
//! count, -1 for none; each topic as string, i32 count, i32 partition
//! ids][last update ms i64][start ms i64]`, and version 1 (written since
//! transaction.version 2) the same fields with compact lengths and
//! tagged fields (KIP-890: previous and next producer id, the client's
//! transaction version). A null value (tombstone) removes the id.
//! Decoding bounds every length by the bytes left.

use std::collections::BTreeSet;

use super::metadata::{TxnMetadata, TxnState};

/// `__transaction_state`.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The key of `id`'s records.
pub fn key(id: &str) -> Vec<u8> {
    let mut out = 0i16.to_be_bytes().to_vec();
    put_string(&mut out, id);
    out
}

/// The transactional id of a record key.
pub fn decode_key(bytes: &[u8]) -> Option<String> {
    let mut r = Reader(bytes);
    if r.i16()? != 0 {
        return None;
    }
    let id = r.string()?;
    r.0.is_empty().then_some(id)
}

/// The value of `metadata` as a broker at `transaction_version` writes
/// it: version 0 at 0 (what earlier builds read; the fields it lacks are
/// lost), else version 1, as Kafka.
pub fn value_for(metadata: &TxnMetadata, transaction_version: i16) -> Vec<u8> {
    match transaction_version {
        0 => value_v0(metadata),
        _ => value(metadata),
    }
}

/// The value of `metadata`: version 1, flexible, as Kafka writes it
/// once transaction.version is 1 or more (tagged: 0 previous producer id,
/// 1 next producer id, 2 client transaction version; each left out at its
/// default).
pub fn value(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = 1i16.to_be_bytes().to_vec();
    put_head(&mut out, metadata);
    put_partitions(&mut out, metadata, true);
    out.extend_from_slice(&metadata.update_ms.to_be_bytes());
    out.extend_from_slice(&metadata.start_ms.to_be_bytes());
    let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
    if metadata.previous_producer_id != -1 {
        tags.push((0, metadata.previous_producer_id.to_be_bytes().to_vec()));
    }
    if metadata.next_producer_id != -1 {
        tags.push((1, metadata.next_producer_id.to_be_bytes().to_vec()));
    }
    if metadata.client_version != 0 {
        tags.push((2, metadata.client_version.to_be_bytes().to_vec()));
    }
    put_uvarint(&mut out, tags.len() as u32);
    for (tag, bytes) in tags {
        put_uvarint(&mut out, tag);
        put_uvarint(&mut out, bytes.len() as u32);
        out.extend_from_slice(&bytes);
    }
    out
}

/// Producer id, epoch, timeout and state: the same in both versions.
fn put_head(out: &mut Vec<u8>, metadata: &TxnMetadata) {
    out.extend_from_slice(&metadata.producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.producer_epoch.to_be_bytes());
    out.extend_from_slice(&metadata.timeout_ms.to_be_bytes());
    out.push(metadata.state.id() as u8);
}

/// The partitions by topic (a null array when Empty, as Kafka's); compact
/// lengths and tagged fields in the flexible version.
fn put_partitions(out: &mut Vec<u8>, metadata: &TxnMetadata, flexible: bool) {
    let count = |out: &mut Vec<u8>, n: usize| match flexible {
        true => put_uvarint(out, n as u32 + 1),
        false => out.extend_from_slice(&(n as i32).to_be_bytes()),
    };
    if metadata.state == TxnState::Empty {
        match flexible {
            true => put_uvarint(out, 0),
            false => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        return;
    }
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &metadata.partitions {
        match topics.last_mut() {
            Some((t, ids)) if *t == topic.as_str() => ids.push(*partition),
            _ => topics.push((topic, vec![*partition])),
        }
    }
    count(out, topics.len());
    for (topic, ids) in topics {
        match flexible {
            true => {
                put_uvarint(out, topic.len() as u32 + 1);
                out.extend_from_slice(topic.as_bytes());
            }
            false => put_string(out, topic),
        }
        count(out, ids.len());
        for id in ids {
            out.extend_from_slice(&id.to_be_bytes());
        }
        if flexible {
            put_uvarint(out, 0); // no tagged fields
        }
    }
}

/// The metadata of a record value (version 0 or 1), or None if it is
/// damaged or of a version not read here.
pub fn decode_value(bytes: &[u8]) -> Option<TxnMetadata> {
    let mut r = Reader(bytes);
    let flexible = match r.i16()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state = TxnState::of_id(r.i8()?)?;
    let partitions = r.partitions(flexible)?;
    let update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut metadata = TxnMetadata {
        producer_epoch,
        timeout_ms,
        state,
        partitions: match state {
            TxnState::Empty => BTreeSet::new(),
            _ => partitions,
        },
        start_ms,
        update_ms,
        ..TxnMetadata::new(producer_id, timeout_ms, update_ms)
    };
    if flexible {
        r.tagged_fields(&mut metadata)?;
    }
    r.0.is_empty().then_some(metadata)
}

/// The value of `metadata` in version 0 (what earlier builds wrote and
/// read).
fn value_v0(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = 0i16.to_be_bytes().to_vec();
    put_head(&mut out, metadata);
    put_partitions(&mut out, metadata, false);
    out.extend_from_slice(&metadata.update_ms.to_be_bytes());
    out.extend_from_slice(&metadata.start_ms.to_be_bytes());
    out
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    let bytes = &text.as_bytes()[..text.len().min(i16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as i16).to_be_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }

    fn i8(&mut self) -> Option<i8> {
        self.take::<1>().map(i8::from_be_bytes)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take::<2>().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take::<4>().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Option<i64> {
        self.take::<8>().map(i64::from_be_bytes)
    }

    fn string(&mut self) -> Option<String> {
        let len = self.i16()?;
        self.utf8(usize::try_from(len).ok()?)
    }

    fn utf8(&mut self, len: usize) -> Option<String> {
        let (bytes, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        String::from_utf8(bytes.to_vec()).ok()
    }

    fn uvarint(&mut self) -> Option<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.take::<1>()?[0];
            value |= u32::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// A count: an i32 (-1: null) or, flexible, a compact length (0:
    /// null); None if it claims more items of `min_size` bytes than are
    /// left.
    fn count(&mut self, flexible: bool, min_size: usize) -> Option<usize> {
        let count = match flexible {
            true => i64::from(self.uvarint()?) - 1,
            false => i64::from(self.i32()?),
        };
        let count = usize::try_from(count.max(0)).ok()?;
        (count <= self.0.len() / min_size.max(1)).then_some(count)
    }

    /// The partitions by topic (each topic at least 6 bytes, each
    /// partition 4).
    fn partitions(&mut self, flexible: bool) -> Option<BTreeSet<(String, i32)>> {
        let mut partitions = BTreeSet::new();
        for _ in 0..self.count(flexible, 6)? {
            let topic = match flexible {
                true => {
                    let len = self.count(true, 1)?;
                    self.utf8(len)?
                }
                false => self.string()?,
            };
            for _ in 0..self.count(flexible, 4)? {
                partitions.insert((topic.clone(), self.i32()?));
            }
            if flexible && self.uvarint()? != 0 {
                return None; // no tagged fields are defined here
            }
        }
        Some(partitions)
    }

    /// Version 1's tagged fields into `metadata`; unknown tags skipped.
    fn tagged_fields(&mut self, metadata: &mut TxnMetadata) -> Option<()> {
        let fields = usize::try_from(self.uvarint()?).ok()?;
        if fields > self.0.len() / 2 {
            return None;
        }
        for _ in 0..fields {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            let (field, rest) = self.0.split_at_checked(size)?;
            self.0 = rest;
            let mut field = Reader(field);
            match tag {
                0 => metadata.previous_producer_id = field.i64()?,
                1 => metadata.next_producer_id = field.i64()?,
                2 => metadata.client_version = field.i16()?,
                _ => continue,
            }
            if !field.0.is_empty() {
                return None;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(state: TxnState) -> TxnMetadata {
        let mut metadata = TxnMetadata::new(4_000, 60_000, 1_000);
        metadata.producer_epoch = 3;
        metadata.state = state;
        metadata.start_ms = 900;
        metadata.partitions = [
            ("a".to_string(), 0),
            ("a".to_string(), 2),
            ("b".to_string(), 1),
        ]
        .into_iter()
        .collect();
        metadata
    }

    #[test]
    fn keys_and_values_round_trip_in_kafkas_layout() {
        assert_eq!(key("tx"), [0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(&key("tx-é")).as_deref(), Some("tx-é"));
        for state in [
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::CompleteAbort,
        ] {
            let metadata = sample(state);
            assert_eq!(decode_value(&value(&metadata)), Some(metadata));
        }
        // Empty stores no partitions (a null array), as Kafka's, and
        // tagged fields at their defaults are left out.
        let empty = value(&sample(TxnState::Empty));
        let decoded = decode_value(&empty).unwrap();
        assert!(decoded.partitions.is_empty());
        assert_eq!(empty.len(), 2 + 8 + 2 + 4 + 1 + 1 + 8 + 8 + 1);
    }

    #[test]
    fn version_1_keeps_the_tagged_fields_and_version_0_still_loads() {
        let mut moving = sample(TxnState::PrepareCommit);
        moving.previous_producer_id = 3_000;
        moving.next_producer_id = 5_000;
        moving.client_version = 2;
        assert_eq!(decode_value(&value(&moving)), Some(moving.clone()));
        // What earlier builds wrote: the same metadata without the
        // fields version 0 does not have.
        let plain = sample(TxnState::Ongoing);
        assert_eq!(decode_value(&value_v0(&plain)), Some(plain));
        // An unknown tag is skipped; a known one of the wrong size is not.
        let mut bytes = value(&sample(TxnState::Ongoing));
        *bytes.last_mut().unwrap() = 1; // one tagged field:
        bytes.extend_from_slice(&[9, 2, 0xab, 0xcd]); // tag 9, 2 bytes
        assert!(decode_value(&bytes).is_some());
        let len = bytes.len();
        bytes[len - 4] = 2; // tag 2 (an i16) of 2 bytes: read
        assert_eq!(decode_value(&bytes).unwrap().client_version, -21555);
        bytes[len - 3] = 1; // 1 byte for an i16: damaged
        assert!(decode_value(&bytes).is_none());
    }

    #[test]
    fn damaged_records_are_refused_without_allocating_their_claims() {
        let bytes = value(&sample(TxnState::Ongoing));
        for cut in 0..bytes.len() {
            assert!(decode_value(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut huge = value_v0(&sample(TxnState::Ongoing));
        huge[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_value(&huge).is_none());
        // The same claim as a compact count (an unsigned varint).
        let mut huge = bytes.clone();
        huge.splice(17..18, [0xff, 0xff, 0xff, 0xff, 0x07]);
        assert!(decode_value(&huge).is_none());
        let mut many_tags = value(&sample(TxnState::Empty));
        *many_tags.last_mut().unwrap() = 0x7f;
        assert!(decode_value(&many_tags).is_none());
        let mut unknown_state = bytes.clone();
        unknown_state[16] = 42;
        assert!(decode_value(&unknown_state).is_none());
        assert!(decode_key(&[0, 1, 0, 0]).is_none(), "another key version");
        assert!(decode_key(&[0, 0, 0, 9, b'x']).is_none(), "a short string");
    }
}
