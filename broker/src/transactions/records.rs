//! The records of `__transaction_state`, in Kafka's layout (so Kafka's
//! tools can read the topic): key `[version i16 = 0][transactional id:
//! i16-length string]`; value version 0 `[version i16 = 0][producer id
//! i64][producer epoch i16][timeout ms i32][state i8][partitions: i32
//! count, -1 for none; each topic as string, i32 count, i32 partition
//! ids][last update ms i64][start ms i64]`. A null value (tombstone)
//! removes the id. Decoding bounds every length by the bytes left.

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

/// The value of `metadata`.
pub fn value(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = 0i16.to_be_bytes().to_vec();
    out.extend_from_slice(&metadata.producer_id.to_be_bytes());
    out.extend_from_slice(&metadata.producer_epoch.to_be_bytes());
    out.extend_from_slice(&metadata.timeout_ms.to_be_bytes());
    out.push(metadata.state.id() as u8);
    if metadata.state == TxnState::Empty {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
        for (topic, partition) in &metadata.partitions {
            match topics.last_mut() {
                Some((t, ids)) if *t == topic.as_str() => ids.push(*partition),
                _ => topics.push((topic, vec![*partition])),
            }
        }
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, ids) in topics {
            put_string(&mut out, topic);
            out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
            for id in ids {
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
    }
    out.extend_from_slice(&metadata.update_ms.to_be_bytes());
    out.extend_from_slice(&metadata.start_ms.to_be_bytes());
    out
}

/// The metadata of a record value, or None if it is damaged or of a
/// version not read here.
pub fn decode_value(bytes: &[u8]) -> Option<TxnMetadata> {
    let mut r = Reader(bytes);
    if r.i16()? != 0 {
        return None;
    }
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state = TxnState::of_id(r.i8()?)?;
    let mut partitions = BTreeSet::new();
    let topics = r.i32()?;
    // Each topic takes at least 6 bytes, each partition 4.
    if topics > r.0.len() as i32 / 6 {
        return None;
    }
    for _ in 0..topics.max(0) {
        let topic = r.string()?;
        let count = r.i32()?;
        if count < 0 || count > r.0.len() as i32 / 4 {
            return None;
        }
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32()?));
        }
    }
    let update_ms = r.i64()?;
    let start_ms = r.i64()?;
    if !r.0.is_empty() {
        return None;
    }
    Some(TxnMetadata {
        producer_id,
        previous_producer_id: -1,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions: if state == TxnState::Empty {
            BTreeSet::new()
        } else {
            partitions
        },
        start_ms,
        update_ms,
    })
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
        let (bytes, rest) = self.0.split_at_checked(usize::try_from(len).ok()?)?;
        self.0 = rest;
        String::from_utf8(bytes.to_vec()).ok()
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
        // Empty stores no partitions (a null array), as Kafka's.
        let empty = value(&sample(TxnState::Empty));
        let decoded = decode_value(&empty).unwrap();
        assert!(decoded.partitions.is_empty());
        assert_eq!(empty.len(), 2 + 8 + 2 + 4 + 1 + 4 + 8 + 8);
    }

    #[test]
    fn damaged_records_are_refused_without_allocating_their_claims() {
        let bytes = value(&sample(TxnState::Ongoing));
        for cut in 0..bytes.len() {
            assert!(decode_value(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut huge = bytes.clone();
        huge[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_value(&huge).is_none());
        let mut unknown_state = bytes.clone();
        unknown_state[16] = 42;
        assert!(decode_value(&unknown_state).is_none());
        assert!(decode_key(&[0, 1, 0, 0]).is_none(), "another key version");
        assert!(decode_key(&[0, 0, 0, 9, b'x']).is_none(), "a short string");
    }
}
