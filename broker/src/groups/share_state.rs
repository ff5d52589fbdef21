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
//! Administrators reset a state (AlterShareGroupOffsets) or delete it
//! (DeleteShareGroupOffsets, DeleteGroups) while a leader may still hold
//! the old one in memory: each such change moves the state's *state
//! epoch*, and a leader writes only at the state epoch it read
//! (FENCED_STATE_EPOCH else, as Kafka's share coordinator answers), so
//! the old state is never written back over the new one. A deleted state
//! is kept as a marker (not initialized, with its state epoch), not a
//! tombstone: the state epoch must keep moving forward for the key.
//! A leader that reads a state not initialized initializes it at the
//! same state epoch (the first write); an administrator's change always
//! moves the epoch by one, so a leader's initialization and an
//! administrator's reset never pass for each other.
//!
//! The record (this broker's own type, 1000; Kafka's types in
//! `__consumer_offsets` stop well below): key int16 type, int16-length
//! group, 16-byte topic id, int32 partition; value int16 version (1;
//! version 0, without the state epoch, reads as state epoch 0), int32
//! leader epoch, int32 state epoch, int64 start offset (-1: not
//! initialized, and no batches), int32 count of state batches, each int64
//! first offset, int64 last offset, int8 state (0 available, 2
//! acknowledged, 4 archived), int16 delivery count.

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

/// A share-partition's state as its leader last wrote it (or an
/// administrator reset it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareStateValue {
    /// The writing leader's epoch (an administrator's change keeps the
    /// newest leader's).
    pub leader_epoch: i32,
    /// The state epoch: moved by each administrator's change.
    pub state_epoch: i32,
    /// The state (None: not initialized; deleted by an administrator).
    pub state: Option<PersistedState>,
}

/// A state as a leader reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredState {
    /// The state epoch the leader writes at.
    pub state_epoch: i32,
    /// The state (None: never initialized, or deleted: the leader
    /// initializes it).
    pub state: Option<PersistedState>,
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
    /// The value's bytes (version 1).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(1);
        w.i32(self.leader_epoch);
        w.i32(self.state_epoch);
        let (start, batches) = match &self.state {
            Some(state) => (state.start, &state.batches[..]),
            None => (-1, &[][..]),
        };
        w.i64(start);
        w.i32(batches.len() as i32);
        for &(first, last, state, count) in batches {
            w.i64(first);
            w.i64(last);
            w.i8(state);
            w.i16(count.min(i16::MAX as u16) as i16);
        }
        w.out
    }

    /// Reads a value (version 0 or 1).
    pub fn decode(bytes: &[u8]) -> Result<ShareStateValue, RecordError> {
        let mut r = Reader { buf: bytes };
        let version = r.i16()?;
        if !(0..=1).contains(&version) {
            return Err(RecordError::Version(version));
        }
        let leader_epoch = r.i32()?;
        let state_epoch = if version == 0 { 0 } else { r.i32()? };
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
        let state = match (start, batches.is_empty()) {
            (-1, true) => None,
            _ => Some(PersistedState { start, batches }),
        };
        if let Some(state) = &state {
            check_state(state).map_err(RecordError::Malformed)?;
        }
        Ok(ShareStateValue {
            leader_epoch,
            state_epoch,
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
        // (The last offset below i64::MAX: a leader counts one past it.)
        if first < next || last < first || last == i64::MAX {
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

    /// A leader at `leader_epoch` reads `key`'s state; from then on
    /// older leaders are fenced.
    pub fn read(&mut self, key: &ShareStateKey, leader_epoch: i32) -> Result<StoredState, Code> {
        if leader_epoch < self.newest_epoch(key) {
            return Err(ResponseError::FencedLeaderEpoch.code());
        }
        self.read_at.insert(key.clone(), leader_epoch);
        Ok(self.stored_state(key))
    }

    /// The record a read by a leader at `leader_epoch` appends: the
    /// stored state stamped with that newer epoch (None: nothing stored,
    /// or stamped at it already), so the fencing outlives a failover of
    /// the coordinator (as Kafka's share coordinator writes it).
    pub fn stamp(&self, key: &ShareStateKey, leader_epoch: i32) -> Option<ShareStateValue> {
        let stored = self.stored.get(key)?;
        (stored.leader_epoch < leader_epoch).then(|| ShareStateValue {
            leader_epoch,
            ..stored.clone()
        })
    }

    /// `key`'s state as a leader reads it (never written: not
    /// initialized, at state epoch 0).
    fn stored_state(&self, key: &ShareStateKey) -> StoredState {
        let stored = self.stored.get(key);
        StoredState {
            state_epoch: stored.map_or(0, |v| v.state_epoch),
            state: stored.and_then(|v| v.state.clone()),
        }
    }

    /// Whether a leader may write `value` as `key`'s state: not older
    /// than the newest leader (FENCED_LEADER_EPOCH), at the state epoch
    /// it read (FENCED_STATE_EPOCH: an administrator changed the state
    /// since), and a state (leaders never delete one).
    pub fn may_write(&self, key: &ShareStateKey, value: &ShareStateValue) -> Result<(), Code> {
        if value.leader_epoch < self.newest_epoch(key) {
            return Err(ResponseError::FencedLeaderEpoch.code());
        }
        if value.state_epoch != self.stored_state(key).state_epoch {
            return Err(ResponseError::FencedStateEpoch.code());
        }
        match &value.state {
            Some(state) => check_state(state).map_err(|_| ResponseError::InvalidRequest.code()),
            None => Err(ResponseError::InvalidRequest.code()),
        }
    }

    /// An administrator's change of `key`'s state: to start at `start`
    /// with nothing in flight, or (None) deleted. The record to append;
    /// the state epoch moves, so leaders holding the old state are
    /// fenced from writing it.
    pub fn reset(&self, key: &ShareStateKey, start: Option<i64>) -> ShareStateValue {
        let stored = self.stored_state(key);
        ShareStateValue {
            leader_epoch: self.newest_epoch(key),
            state_epoch: stored.state_epoch.saturating_add(1),
            state: start.map(|start| PersistedState {
                start,
                batches: Vec::new(),
            }),
        }
    }

    /// The state stored for `key`.
    pub fn get(&self, key: &ShareStateKey) -> Option<&ShareStateValue> {
        self.stored.get(key)
    }

    /// The keys of `group`'s initialized states.
    pub fn keys_of(&self, group: &str) -> Vec<ShareStateKey> {
        let stored = self
            .stored
            .iter()
            .filter(|(k, v)| k.group == group && v.state.is_some());
        stored.map(|(k, _)| k.clone()).collect()
    }

    /// The keys of `group`'s states a deletion marks: the initialized
    /// ones, and those a leader read but has not written yet (its first
    /// write, in flight, must not bring a deleted state back).
    pub fn keys_to_delete(&self, group: &str) -> Vec<ShareStateKey> {
        let read = self.read_at.keys().filter(|k| k.group == group);
        let unwritten = read.filter(|k| !self.stored.contains_key(*k)).cloned();
        let mut keys = self.keys_of(group);
        keys.extend(unwritten);
        keys
    }
}

#[cfg(test)]
mod model_tests;

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

    fn state() -> PersistedState {
        PersistedState {
            start: 10,
            batches: vec![(10, 12, 2, 1), (13, 13, 0, 3)],
        }
    }

    fn value(leader_epoch: i32) -> ShareStateValue {
        ShareStateValue {
            leader_epoch,
            state_epoch: 3,
            state: Some(state()),
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
        assert_eq!(v.len(), 2 + 4 + 4 + 8 + 4 + 2 * BATCH_BYTES);
        assert_eq!(&v[..10], &[0, 1, 0, 0, 0, 4, 0, 0, 0, 3]);
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
        let mut forged = v[..18].to_vec();
        forged.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(ShareStateValue::decode(&forged).is_err());
        // A deleted state: start -1, no batches.
        let deleted = ShareStateValue {
            state: None,
            ..value(4)
        };
        assert_eq!(
            &deleted.encode()[10..],
            &[255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0]
        );
        assert_eq!(ShareStateValue::decode(&deleted.encode()), Ok(deleted));
        // Version 0 (no state epoch) reads as state epoch 0.
        let mut v0 = vec![0, 0, 0, 0, 0, 4];
        v0.extend_from_slice(&v[10..]);
        let read = ShareStateValue::decode(&v0).unwrap();
        assert_eq!((read.state_epoch, read.state), (0, Some(state())));
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
            state(i64::MAX - 1, &[(i64::MAX - 1, i64::MAX, 0, 1)]),
        ] {
            assert!(check_state(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn older_leaders_are_fenced_by_reads_and_writes_of_newer_ones() {
        let mut states = ShareStates::default();
        let fenced = ResponseError::FencedLeaderEpoch.code();
        assert_eq!(states.read(&key(), 3), Ok(StoredState::default()));
        let at = |leader_epoch| ShareStateValue {
            state_epoch: 0,
            ..value(leader_epoch)
        };
        assert_eq!(states.may_write(&key(), &at(2)), Err(fenced));
        assert_eq!(states.may_write(&key(), &at(3)), Ok(()));
        states.replay(&key(), Some(&value(5)));
        assert_eq!(states.read(&key(), 4), Err(fenced), "written at 5");
        let stored = StoredState {
            state_epoch: 3,
            state: Some(state()),
        };
        assert_eq!(states.read(&key(), 5), Ok(stored.clone()));
        assert_eq!(states.read(&key(), 6), Ok(stored));
        assert_eq!(
            states.may_write(&key(), &value(5)),
            Err(fenced),
            "read at 6"
        );
        assert_eq!(states.keys_of("g"), [key()]);
        assert!(states.keys_of("other").is_empty());
        states.replay(&key(), None);
        assert_eq!(states.get(&key()), None);
    }

    #[test]
    fn an_administrators_reset_or_deletion_fences_leaders_holding_the_old_state() {
        let mut states = ShareStates::default();
        let stale = ResponseError::FencedStateEpoch.code();
        // Read, not written yet: a deletion marks it too.
        states.read(&key(), 2).unwrap();
        assert!(states.keys_of("g").is_empty());
        assert_eq!(states.keys_to_delete("g"), [key()]);
        // Never written: a leader initializes at state epoch 0; an
        // administrator's reset moves it to 1.
        let first = ShareStateValue {
            leader_epoch: 2,
            state_epoch: 0,
            state: Some(state()),
        };
        assert_eq!(states.may_write(&key(), &first), Ok(()));
        let reset = states.reset(&key(), Some(40));
        assert_eq!((reset.leader_epoch, reset.state_epoch), (2, 1), "read at 2");
        states.replay(&key(), Some(&first));
        let reset = states.reset(&key(), Some(40));
        assert_eq!((reset.leader_epoch, reset.state_epoch), (2, 1));
        states.replay(&key(), Some(&reset));
        // The leader holding the old state cannot write it back.
        assert_eq!(states.may_write(&key(), &first), Err(stale));
        let read = states.read(&key(), 2).unwrap();
        let expected = PersistedState {
            start: 40,
            batches: vec![],
        };
        assert_eq!(
            read,
            StoredState {
                state_epoch: 1,
                state: Some(expected)
            }
        );
        let next = ShareStateValue {
            state_epoch: 1,
            ..first.clone()
        };
        assert_eq!(states.may_write(&key(), &next), Ok(()));
        // Deleted: kept as a marker at state epoch 2, the group no longer
        // lists it; a leader reads it not initialized and initializes it
        // at 2, the holder of epoch 1 is fenced.
        let deleted = states.reset(&key(), None);
        assert_eq!((deleted.state_epoch, &deleted.state), (2, &None));
        states.replay(&key(), Some(&deleted));
        assert!(states.keys_of("g").is_empty());
        assert!(states.keys_to_delete("g").is_empty());
        assert_eq!(
            states.read(&key(), 2),
            Ok(StoredState {
                state_epoch: 2,
                state: None
            })
        );
        assert_eq!(states.may_write(&key(), &next), Err(stale));
        let again = ShareStateValue {
            state_epoch: 2,
            ..first.clone()
        };
        assert_eq!(states.may_write(&key(), &again), Ok(()));
        // Leaders never write a deletion.
        let none = ShareStateValue {
            state: None,
            ..again
        };
        assert_eq!(
            states.may_write(&key(), &none),
            Err(ResponseError::InvalidRequest.code())
        );
    }
}
