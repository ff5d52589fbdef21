//! The durable state of share groups' share-partitions, kept by each
//! group's coordinator in `__consumer_offsets` (Kafka keeps it in
//! `__share_group_state`, owned by a share coordinator; here the group
//! coordinator is the share coordinator, so its partitions' load,
//! replication and compaction serve both). Sans-IO: the records and the
//! rules of reading and writing.
//!
//! A partition's leader reads its share-partition's state when it starts
//! leading it and writes it after every change that must survive it
//! (acknowledgements, archived records, the start offset). Leaders are
//! fenced by leader epoch, as Kafka's share coordinator fences them: a
//! read or write at an epoch older than one already read or written is
//! FENCED_LEADER_EPOCH, so a deposed leader cannot overwrite its
//! successor's state.
//!
//! The record (this broker's own type, 1000; Kafka's types in
//! `__consumer_offsets` stop well below): key int16 type, int16-length
//! group, 16-byte topic id, int32 partition; value int16 version 0,
//! int32 leader epoch, int64 start offset, int32 count of state batches,
//! each int64 first offset, int64 last offset, int8 state (0 available,
//! 2 acknowledged, 4 archived), int16 delivery count.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use super::modern::flex::{Reader, Writer};
use super::record_error::RecordError;
use crate::kafka::Code;
use crate::share::partition::PersistedState;

/// The record type of a share-partition's state.
pub const SHARE_STATE_TYPE: i16 = 1000;

/// Bytes of one state batch in a value.
const BATCH_BYTES: usize = 8 + 8 + 1 + 2;

/// Which share-partition: group, topic id, partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareStateKey {
    /// The share group.
    pub group: String,
    /// The topic's id.
    pub topic: [u8; 16],
    /// The partition.
    pub partition: i32,
}

/// A share-partition's state as its leader last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareStateValue {
    /// The writing leader's epoch.
    pub leader_epoch: i32,
    /// The state.
    pub state: PersistedState,
}

impl ShareStateKey {
    /// The key's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(SHARE_STATE_TYPE);
        w.classic_string(&self.group);
        w.uuid(&self.topic);
        w.i32(self.partition);
        w.out
    }

    /// Reads a key of type [`SHARE_STATE_TYPE`].
    pub fn decode(bytes: &[u8]) -> Result<ShareStateKey, RecordError> {
        let mut r = Reader { buf: bytes };
        let record_type = r.i16()?;
        if record_type != SHARE_STATE_TYPE {
            return Err(RecordError::Version(record_type));
        }
        let key = ShareStateKey {
            group: r.classic_string()?,
            topic: r.uuid()?,
            partition: r.i32()?,
        };
        r.finish()?;
        Ok(key)
    }
}

impl ShareStateValue {
    /// The value's bytes (version 0).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(0);
        w.i32(self.leader_epoch);
        w.i64(self.state.start);
        w.i32(self.state.batches.len() as i32);
        for &(first, last, state, count) in &self.state.batches {
            w.i64(first);
            w.i64(last);
            w.i8(state);
            w.i16(count.min(i16::MAX as u16) as i16);
        }
        w.out
    }

    /// Reads a value (version 0).
    pub fn decode(bytes: &[u8]) -> Result<ShareStateValue, RecordError> {
        let mut r = Reader { buf: bytes };
        let version = r.i16()?;
        if version != 0 {
            return Err(RecordError::Version(version));
        }
        let leader_epoch = r.i32()?;
        let start = r.i64()?;
        let count = r.i32()?;
        if count < 0 || count as usize > r.buf.len() / BATCH_BYTES {
            return Err(RecordError::Malformed("state batch count"));
        }
        let mut batches = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let (first, last, state) = (r.i64()?, r.i64()?, r.i8()?);
            let delivery_count = r.i16()?.max(0) as u16;
            batches.push((first, last, state, delivery_count));
        }
        r.finish()?;
        let state = PersistedState { start, batches };
        check_state(&state).map_err(RecordError::Malformed)?;
        Ok(ShareStateValue {
            leader_epoch,
            state,
        })
    }
}

/// The most offsets a stored state may span (a new leader walks each).
pub const STATE_SPAN_MAX: i64 = 1_000_000;

/// Refuses a state a leader could not have written: a negative start,
/// batches out of order, overlapping, below the start, of an unknown
/// state, or spanning more than [`STATE_SPAN_MAX`] offsets (the state a
/// new leader restores offset by offset: a forged one must not hang it).
pub fn check_state(state: &PersistedState) -> Result<(), &'static str> {
    if state.start < 0 {
        return Err("a negative start offset");
    }
    let mut next = state.start;
    for &(first, last, delivery_state, _) in &state.batches {
        if first < next || last < first {
            return Err("state batches out of order, overlapping or below the start");
        }
        if ![0, 2, 4].contains(&delivery_state) {
            return Err("an unknown delivery state");
        }
        next = last.saturating_add(1);
    }
    if next - state.start > STATE_SPAN_MAX {
        return Err("state batches spanning too many offsets");
    }
    Ok(())
}

/// The share-partition states of one `__consumer_offsets` partition.
#[derive(Debug, Default)]
pub struct ShareStates {
    stored: BTreeMap<ShareStateKey, ShareStateValue>,
    /// The newest leader epoch that read each state (not stored: a new
    /// coordinator knows the written ones).
    read_at: BTreeMap<ShareStateKey, i32>,
}

impl ShareStates {
    /// Applies a stored record (a tombstone: `None`).
    pub fn replay(&mut self, key: &ShareStateKey, value: Option<&ShareStateValue>) {
        match value {
            Some(value) => self.stored.insert(key.clone(), value.clone()),
            None => self.stored.remove(key),
        };
    }

    /// The newest epoch a leader read or wrote `key` at.
    fn newest_epoch(&self, key: &ShareStateKey) -> i32 {
        let written = self.stored.get(key).map_or(-1, |v| v.leader_epoch);
        written.max(self.read_at.get(key).copied().unwrap_or(-1))
    }

    /// A leader at `leader_epoch` reads `key`'s state (None: none was
    /// ever written); from then on older leaders are fenced.
    pub fn read(
        &mut self,
        key: &ShareStateKey,
        leader_epoch: i32,
    ) -> Result<Option<PersistedState>, Code> {
        if leader_epoch < self.newest_epoch(key) {
            return Err(ResponseError::FencedLeaderEpoch.code());
        }
        self.read_at.insert(key.clone(), leader_epoch);
        Ok(self.stored.get(key).map(|v| v.state.clone()))
    }

    /// Whether a leader at `leader_epoch` may write `key`'s state.
    pub fn may_write(&self, key: &ShareStateKey, leader_epoch: i32) -> Result<(), Code> {
        match leader_epoch < self.newest_epoch(key) {
            true => Err(ResponseError::FencedLeaderEpoch.code()),
            false => Ok(()),
        }
    }

    /// The state stored for `key`.
    pub fn get(&self, key: &ShareStateKey) -> Option<&ShareStateValue> {
        self.stored.get(key)
    }

    /// The keys stored for `group` (its tombstones when it is deleted).
    pub fn keys_of(&self, group: &str) -> Vec<ShareStateKey> {
        let keys = self.stored.keys().filter(|k| k.group == group);
        keys.cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ShareStateKey {
        ShareStateKey {
            group: "g".into(),
            topic: [7; 16],
            partition: 2,
        }
    }

    fn value(leader_epoch: i32) -> ShareStateValue {
        ShareStateValue {
            leader_epoch,
            state: PersistedState {
                start: 10,
                batches: vec![(10, 12, 2, 1), (13, 13, 0, 3)],
            },
        }
    }

    #[test]
    fn records_round_trip_in_their_layout_and_cut_ones_are_refused() {
        let encoded = key().encode();
        let mut expected = vec![0x03, 0xe8, 0, 1, b'g'];
        expected.extend_from_slice(&[7; 16]);
        expected.extend_from_slice(&[0, 0, 0, 2]);
        assert_eq!(encoded, expected);
        assert_eq!(ShareStateKey::decode(&encoded), Ok(key()));
        let v = value(4).encode();
        assert_eq!(v.len(), 2 + 4 + 8 + 4 + 2 * BATCH_BYTES);
        assert_eq!(&v[..6], &[0, 0, 0, 0, 0, 4]);
        assert_eq!(ShareStateValue::decode(&v), Ok(value(4)));
        for cut in 0..v.len() {
            assert!(ShareStateValue::decode(&v[..cut]).is_err(), "cut at {cut}");
        }
        for cut in 0..encoded.len() {
            assert!(
                ShareStateKey::decode(&encoded[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        // A batch count no bytes back.
        let mut forged = v[..14].to_vec();
        forged.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(ShareStateValue::decode(&forged).is_err());
    }

    #[test]
    fn states_no_leader_writes_are_refused() {
        let state = |start, batches: &[(i64, i64, i8, u16)]| PersistedState {
            start,
            batches: batches.to_vec(),
        };
        assert_eq!(
            check_state(&state(5, &[(5, 6, 2, 1), (8, 8, 0, 2)])),
            Ok(())
        );
        for bad in [
            state(-1, &[]),
            state(5, &[(4, 6, 2, 1)]),
            state(5, &[(6, 5, 2, 1)]),
            state(5, &[(5, 6, 2, 1), (6, 7, 0, 1)]),
            state(5, &[(5, 6, 3, 1)]),
            state(0, &[(0, i64::MAX, 0, 1)]),
        ] {
            assert!(check_state(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn older_leaders_are_fenced_by_reads_and_writes_of_newer_ones() {
        let mut states = ShareStates::default();
        let fenced = ResponseError::FencedLeaderEpoch.code();
        assert_eq!(states.read(&key(), 3), Ok(None));
        assert_eq!(states.may_write(&key(), 2), Err(fenced));
        assert_eq!(states.may_write(&key(), 3), Ok(()));
        states.replay(&key(), Some(&value(5)));
        assert_eq!(states.read(&key(), 4), Err(fenced), "written at 5");
        assert_eq!(states.read(&key(), 5), Ok(Some(value(5).state)));
        assert_eq!(states.read(&key(), 6), Ok(Some(value(5).state)));
        assert_eq!(states.may_write(&key(), 5), Err(fenced), "read at 6");
        assert_eq!(states.keys_of("g"), [key()]);
        assert!(states.keys_of("other").is_empty());
        states.replay(&key(), None);
        assert_eq!(states.get(&key()), None);
    }
}
