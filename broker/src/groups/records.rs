//! The records of `__consumer_offsets`, in Kafka's own layout so Kafka's
//! tools can read the topic: a committed offset is keyed by (group,
//! topic, partition), a group's membership by the group; a record without
//! a value (a tombstone) deletes what its key names, and compaction keeps
//! the newest record per key.
//!
//! Keys start with a version: 0 or 1 for an offset, 2 for a group. Values
//! start with theirs; this broker writes offset values v3 and group values
//! v3 and reads v0-3 of both (v4 is Kafka's flexible encoding, not
//! written by anyone this broker serves).
//!
//! Decoding is bounded: every length and count is checked against the
//! bytes that remain before anything is allocated.

use std::time::Duration;

use bytes::Bytes;

use super::membership::{GroupSnapshot, GroupState, MemberSnapshot};
use super::modern::group_records::{ConsumerKey, ConsumerValue, RECORD_TYPES};
use super::modern::share_records::{ShareKey, ShareValue, SHARE_RECORD_TYPES};
use super::share_state::{ShareStateKey, ShareStateValue, SHARE_STATE_TYPE};

/// A key of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A committed offset.
    Offset {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A group's membership.
    Group(String),
    /// A consumer group's (KIP-848) record, types 3-16.
    Consumer(ConsumerKey),
    /// A share group's (KIP-932) record, types 10-15.
    Share(ShareKey),
    /// A share-partition's durable state (type 1000, `share_state`).
    ShareState(ShareStateKey),
}

impl Key {
    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            Key::Offset { group, .. } | Key::Group(group) => group,
            Key::Consumer(key) => key.group(),
            Key::Share(key) => key.group(),
            Key::ShareState(key) => &key.group,
        }
    }
}

/// A committed offset, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record (-1: unknown).
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_timestamp: i64,
}

/// A record's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// For an offset key.
    Offset(CommittedOffset),
    /// For a group key (state Empty or Stable).
    Group(GroupSnapshot),
    /// For a consumer group's key.
    Consumer(ConsumerValue),
    /// For a share group's key.
    Share(ShareValue),
    /// For a share-partition state's key.
    ShareState(ShareStateValue),
}

pub use super::record_error::RecordError;

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

/// Encodes a key.
pub fn encode_key(key: &Key) -> Vec<u8> {
    let mut out = Vec::new();
    match key {
        Key::Offset {
            group,
            topic,
            partition,
        } => {
            out.extend_from_slice(&OFFSET_KEY_VERSION.to_be_bytes());
            put_string(&mut out, group);
            put_string(&mut out, topic);
            out.extend_from_slice(&partition.to_be_bytes());
        }
        Key::Group(group) => {
            out.extend_from_slice(&GROUP_KEY_VERSION.to_be_bytes());
            put_string(&mut out, group);
        }
        Key::Consumer(key) => out = key.encode(),
        Key::Share(key) => out = key.encode(),
        Key::ShareState(key) => out = key.encode(),
    }
    out
}

/// Encodes a value.
pub fn encode_value(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Value::Offset(o) => {
            out.extend_from_slice(&OFFSET_VALUE_VERSION.to_be_bytes());
            out.extend_from_slice(&o.offset.to_be_bytes());
            out.extend_from_slice(&o.leader_epoch.to_be_bytes());
            put_string(&mut out, &o.metadata);
            out.extend_from_slice(&o.commit_timestamp.to_be_bytes());
        }
        Value::Group(g) => {
            out.extend_from_slice(&GROUP_VALUE_VERSION.to_be_bytes());
            put_string(&mut out, &g.protocol_type);
            out.extend_from_slice(&g.generation.to_be_bytes());
            put_nullable_string(&mut out, g.protocol.as_deref());
            put_nullable_string(&mut out, g.leader.as_deref());
            out.extend_from_slice(&0i64.to_be_bytes()); // current_state_timestamp
            out.extend_from_slice(&(g.members.len() as i32).to_be_bytes());
            for m in &g.members {
                put_string(&mut out, &m.member_id);
                put_nullable_string(&mut out, m.instance_id.as_deref());
                put_string(&mut out, &m.client_id);
                put_string(&mut out, &m.client_host);
                out.extend_from_slice(&millis(m.rebalance_timeout).to_be_bytes());
                out.extend_from_slice(&millis(m.session_timeout).to_be_bytes());
                put_bytes(&mut out, &m.subscription);
                put_bytes(&mut out, &m.assignment);
            }
        }
        Value::Consumer(value) => out = value.encode(),
        Value::Share(value) => out = value.encode(),
        Value::ShareState(value) => out = value.encode(),
    }
    out
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = s.len().min(i16::MAX as usize);
    out.extend_from_slice(&(len as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}

/// Decodes a key.
pub fn decode_key(bytes: &[u8]) -> Result<Key, RecordError> {
    let mut r = Reader { buf: bytes };
    let key = match r.i16()? {
        0 | 1 => Key::Offset {
            group: r.string()?,
            topic: r.string()?,
            partition: r.i32()?,
        },
        2 => Key::Group(r.string()?),
        v if RECORD_TYPES.contains(&v) => return ConsumerKey::decode(bytes).map(Key::Consumer),
        v if SHARE_RECORD_TYPES.contains(&v) => return ShareKey::decode(bytes).map(Key::Share),
        SHARE_STATE_TYPE => return ShareStateKey::decode(bytes).map(Key::ShareState),
        v => return Err(RecordError::Version(v)),
    };
    r.end()?;
    Ok(key)
}

/// Decodes the value stored under `key`.
pub fn decode_value(key: &Key, bytes: &[u8]) -> Result<Value, RecordError> {
    if let Key::Consumer(key) = key {
        return ConsumerValue::decode(key, bytes).map(Value::Consumer);
    }
    if let Key::Share(key) = key {
        return ShareValue::decode(key, bytes).map(Value::Share);
    }
    if let Key::ShareState(_) = key {
        return ShareStateValue::decode(bytes).map(Value::ShareState);
    }
    let mut r = Reader { buf: bytes };
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(RecordError::Version(version));
    }
    let value = match key {
        Key::Offset { .. } => Value::Offset(decode_offset(&mut r, version)?),
        Key::Group(_) => Value::Group(decode_group(&mut r, version)?),
        Key::Consumer(_) | Key::Share(_) | Key::ShareState(_) => unreachable!("decoded above"),
    };
    r.end()?;
    Ok(value)
}

/// A committed offset's value, versions 0-3.
fn decode_offset(r: &mut Reader, version: i16) -> Result<CommittedOffset, RecordError> {
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?;
    let commit_timestamp = r.i64()?;
    if version == 1 {
        r.i64()?; // expire_timestamp, no longer used
    }
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

/// A group's membership value, versions 0-3.
fn decode_group(r: &mut Reader, version: i16) -> Result<GroupSnapshot, RecordError> {
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    if version >= 2 {
        r.i64()?; // current_state_timestamp
    }
    let count = r.i32()?;
    // Every member takes at least 20 bytes; a count the bytes cannot back
    // is refused before anything is reserved.
    if count < 0 || count as usize > r.buf.len() / 20 {
        return Err(RecordError::Malformed("member count"));
    }
    let mut members = Vec::with_capacity(count as usize);
    for _ in 0..count {
        members.push(decode_member(r, version)?);
    }
    let state = if members.is_empty() {
        GroupState::Empty
    } else {
        GroupState::Stable
    };
    Ok(GroupSnapshot {
        state,
        protocol_type,
        generation,
        protocol,
        leader,
        members,
    })
}

/// One member of a group's value.
fn decode_member(r: &mut Reader, version: i16) -> Result<MemberSnapshot, RecordError> {
    let member_id = r.string()?;
    let instance_id = if version >= 3 {
        r.nullable_string()?
    } else {
        None
    };
    let client_id = r.string()?;
    let client_host = r.string()?;
    // v0 has one timeout for both; v1+ the rebalance timeout first.
    let (session, rebalance) = if version >= 1 {
        let rebalance = r.i32()?;
        (r.i32()?, rebalance)
    } else {
        let session = r.i32()?;
        (session, session)
    };
    Ok(MemberSnapshot {
        member_id,
        instance_id,
        client_id,
        client_host,
        session_timeout: Duration::from_millis(session.max(0) as u64),
        rebalance_timeout: Duration::from_millis(rebalance.max(0) as u64),
        subscription: r.bytes()?,
        assignment: r.bytes()?,
    })
}

/// A bounded reader over one key or value.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if n > self.buf.len() {
            return Err(RecordError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(RecordError::Malformed("negative string length"));
        }
        let raw = self.take(len as usize)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| RecordError::Malformed("string not UTF-8"))
    }

    fn string(&mut self) -> Result<String, RecordError> {
        Ok(self.nullable_string()?.unwrap_or_default())
    }

    fn bytes(&mut self) -> Result<Bytes, RecordError> {
        let len = self.i32()?;
        if len == -1 {
            return Ok(Bytes::new());
        }
        if len < 0 {
            return Err(RecordError::Malformed("negative bytes length"));
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }

    fn end(&self) -> Result<(), RecordError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(RecordError::Malformed("bytes after the last field"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> GroupSnapshot {
        GroupSnapshot {
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            members: vec![
                MemberSnapshot {
                    member_id: "c-1".into(),
                    instance_id: Some("host-a".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    session_timeout: Duration::from_millis(10_000),
                    rebalance_timeout: Duration::from_millis(30_000),
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"assigned"),
                },
                MemberSnapshot {
                    member_id: "c-2".into(),
                    instance_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.2".into(),
                    session_timeout: Duration::from_millis(6_000),
                    rebalance_timeout: Duration::from_millis(6_000),
                    subscription: Bytes::new(),
                    assignment: Bytes::new(),
                },
            ],
        }
    }

    #[test]
    fn keys_and_values_round_trip() {
        let offset_key = Key::Offset {
            group: "g".into(),
            topic: "orders".into(),
            partition: 5,
        };
        let group_key = Key::Group("g".into());
        for key in [&offset_key, &group_key] {
            assert_eq!(decode_key(&encode_key(key)).unwrap(), *key);
        }
        let offset = Value::Offset(CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
        });
        assert_eq!(
            decode_value(&offset_key, &encode_value(&offset)).unwrap(),
            offset
        );
        let stored = Value::Group(group());
        assert_eq!(
            decode_value(&group_key, &encode_value(&stored)).unwrap(),
            stored
        );
        let mut empty = group();
        empty.members.clear();
        empty.state = GroupState::Empty;
        let empty = Value::Group(empty);
        assert_eq!(
            decode_value(&group_key, &encode_value(&empty)).unwrap(),
            empty
        );
    }

    #[test]
    fn the_layout_is_kafkas() {
        // Offset key v1: version, group, topic, partition.
        let key = encode_key(&Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 2,
        });
        assert_eq!(key, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2]);
        // Offset value v1 (with an expire timestamp) as Kafka wrote it.
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&9i64.to_be_bytes());
        v1.extend_from_slice(&[0, 0]); // metadata ""
        v1.extend_from_slice(&5i64.to_be_bytes());
        v1.extend_from_slice(&(-1i64).to_be_bytes());
        let key = decode_key(&key).unwrap();
        assert_eq!(
            decode_value(&key, &v1).unwrap(),
            Value::Offset(CommittedOffset {
                offset: 9,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 5,
            })
        );
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let key = Key::Group("g".into());
        let value = encode_value(&Value::Group(group()));
        for cut in 0..value.len() {
            assert!(decode_value(&key, &value[..cut]).is_err(), "cut at {cut}");
        }
        // A member count no bytes back.
        let mut forged = value[..2 + 10 + 4 + 7 + 5 + 8].to_vec();
        forged.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            decode_value(&key, &forged),
            Err(RecordError::Malformed("member count"))
        );
        assert_eq!(decode_key(&[0, 9, 0, 0]), Err(RecordError::Version(9)));
        assert!(decode_key(&[0, 2, 0x7f, 0xff]).is_err());
        let mut seed = 5u64;
        for _ in 0..2000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut bytes = value.clone();
            let at = (seed >> 33) as usize % bytes.len();
            bytes[at] = (seed >> 20) as u8;
            let _ = decode_value(&key, &bytes);
        }
    }
}
