//! The share groups' records in `__consumer_offsets` (KIP-932), in
//! Kafka 4.2's layout (its `group-coordinator` ShareGroup*.json schemas)
//! so Kafka's tools read them. Keys: int16 record type, then int16-length
//! strings; values: int16 version 0, then flexible fields; a tombstone
//! (no value) deletes what the key names.
//!
//! | type | key | value |
//! |---|---|---|
//! | 10 | group, member | rack, client id and host, subscribed topics |
//! | 11 | group | the group epoch, the subscribed topics' hash |
//! | 12 | group | the target assignment's epoch |
//! | 13 | group, member | the member's target partitions |
//! | 14 | group, member | the member's epochs, state and partitions |
//! | 15 | group | share-partition initialization (read, not written) |

use super::flex::{Reader, Writer};
use super::group_records::{put_topic_partitions, read_topic_partitions, TopicPartitions};
use crate::groups::record_error::RecordError;

/// A share group record's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShareKey {
    /// 10: a member's metadata.
    Member {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// 11: the group's epoch.
    Group {
        /// The group.
        group: String,
    },
    /// 12: the target assignment's epoch.
    TargetEpoch {
        /// The group.
        group: String,
    },
    /// 13: a member's target.
    Target {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// 14: a member's current assignment.
    Assignment {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// 15: Kafka's share-partition initialization state (read, not written).
    StatePartitions {
        /// The group.
        group: String,
    },
}

/// Type 10's value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareMemberMetadata {
    /// Its rack.
    pub rack_id: Option<String>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's address.
    pub client_host: String,
    /// The topics it subscribes to.
    pub subscribed_topic_names: Vec<String>,
}

/// A share group record's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareValue {
    /// 10.
    Member(ShareMemberMetadata),
    /// 11.
    Group {
        /// The group epoch.
        epoch: i32,
        /// The subscribed topics' hash.
        metadata_hash: i64,
    },
    /// 12.
    TargetEpoch(i32),
    /// 13.
    Target(Vec<TopicPartitions>),
    /// 14 (the state is always stable: nothing is revoked in a share
    /// group).
    Assignment {
        /// Its epoch.
        member_epoch: i32,
        /// Its epoch before the last step.
        previous_member_epoch: i32,
        /// Its partitions.
        assigned: Vec<TopicPartitions>,
    },
    /// 15: not read further.
    StatePartitions,
}

/// The record types this module reads.
pub const SHARE_RECORD_TYPES: [i16; 6] = [10, 11, 12, 13, 14, 15];

impl ShareKey {
    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            ShareKey::Member { group, .. }
            | ShareKey::Group { group }
            | ShareKey::TargetEpoch { group }
            | ShareKey::Target { group, .. }
            | ShareKey::Assignment { group, .. }
            | ShareKey::StatePartitions { group } => group,
        }
    }

    fn record_type(&self) -> i16 {
        match self {
            ShareKey::Member { .. } => 10,
            ShareKey::Group { .. } => 11,
            ShareKey::TargetEpoch { .. } => 12,
            ShareKey::Target { .. } => 13,
            ShareKey::Assignment { .. } => 14,
            ShareKey::StatePartitions { .. } => 15,
        }
    }

    /// The key's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(self.record_type());
        w.classic_string(self.group());
        match self {
            ShareKey::Member { member, .. }
            | ShareKey::Target { member, .. }
            | ShareKey::Assignment { member, .. } => w.classic_string(member),
            _ => {}
        }
        w.out
    }

    /// Reads a key of one of [`SHARE_RECORD_TYPES`].
    pub fn decode(bytes: &[u8]) -> Result<ShareKey, RecordError> {
        let mut r = Reader { buf: bytes };
        let record_type = r.i16()?;
        let group = r.classic_string()?;
        let key = match record_type {
            11 => ShareKey::Group { group },
            12 => ShareKey::TargetEpoch { group },
            15 => ShareKey::StatePartitions { group },
            10 | 13 | 14 => {
                let member = r.classic_string()?;
                match record_type {
                    10 => ShareKey::Member { group, member },
                    13 => ShareKey::Target { group, member },
                    _ => ShareKey::Assignment { group, member },
                }
            }
            other => return Err(RecordError::Version(other)),
        };
        r.finish()?;
        Ok(key)
    }
}

impl ShareValue {
    /// The value's bytes (version 0).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(0);
        match self {
            ShareValue::Member(m) => {
                w.nullable_string(m.rack_id.as_deref());
                w.string(&m.client_id);
                w.string(&m.client_host);
                w.array_len(m.subscribed_topic_names.len());
                for name in &m.subscribed_topic_names {
                    w.string(name);
                }
            }
            ShareValue::Group {
                epoch,
                metadata_hash,
            } => {
                w.i32(*epoch);
                w.i64(*metadata_hash);
            }
            ShareValue::TargetEpoch(epoch) => w.i32(*epoch),
            ShareValue::Target(partitions) => put_topic_partitions(&mut w, partitions),
            ShareValue::Assignment {
                member_epoch,
                previous_member_epoch,
                assigned,
            } => {
                w.i32(*member_epoch);
                w.i32(*previous_member_epoch);
                w.i8(0); // stable
                put_topic_partitions(&mut w, assigned);
            }
            ShareValue::StatePartitions => unreachable!("read, never written"),
        }
        w.tagged(&[]);
        w.out
    }

    /// Reads the value stored under `key`.
    pub fn decode(key: &ShareKey, bytes: &[u8]) -> Result<ShareValue, RecordError> {
        let mut r = Reader { buf: bytes };
        let version = r.i16()?;
        if version != 0 {
            return Err(RecordError::Version(version));
        }
        let value = match key {
            ShareKey::Member { .. } => {
                let rack_id = r.nullable_string()?;
                let client_id = r.string()?;
                let client_host = r.string()?;
                let count = r.array_len(1)?;
                let names = (0..count).map(|_| r.string()).collect::<Result<_, _>>()?;
                ShareValue::Member(ShareMemberMetadata {
                    rack_id,
                    client_id,
                    client_host,
                    subscribed_topic_names: names,
                })
            }
            ShareKey::Group { .. } => ShareValue::Group {
                epoch: r.i32()?,
                metadata_hash: r.i64()?,
            },
            ShareKey::TargetEpoch { .. } => ShareValue::TargetEpoch(r.i32()?),
            ShareKey::Target { .. } => ShareValue::Target(read_topic_partitions(&mut r)?),
            ShareKey::Assignment { .. } => {
                let member_epoch = r.i32()?;
                let previous_member_epoch = r.i32()?;
                r.i8()?; // the state: always stable here
                let assigned = read_topic_partitions(&mut r)?;
                ShareValue::Assignment {
                    member_epoch,
                    previous_member_epoch,
                    assigned,
                }
            }
            ShareKey::StatePartitions { .. } => return Ok(ShareValue::StatePartitions),
        };
        r.tagged(&[])?;
        r.finish()?;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: [u8; 16] = [1; 16];

    /// Golden bytes built by hand from Kafka 4.2's schemas.
    fn golden() -> Vec<(ShareKey, ShareValue, Vec<u8>)> {
        let (g, m) = (|| "g".to_string(), || "m".to_string());
        let mut cases = Vec::new();
        // 10: rack null, client "c", host "/h", topics ["t"], no tags.
        let member = ShareValue::Member(ShareMemberMetadata {
            rack_id: None,
            client_id: "c".into(),
            client_host: "/h".into(),
            subscribed_topic_names: vec!["t".into()],
        });
        let bytes = vec![0, 0, 0, 2, b'c', 3, b'/', b'h', 2, 2, b't', 0];
        cases.push((
            ShareKey::Member {
                group: g(),
                member: m(),
            },
            member,
            bytes,
        ));
        // 11: epoch 7, hash 0x0102030405060708.
        let group = ShareValue::Group {
            epoch: 7,
            metadata_hash: 0x0102_0304_0506_0708,
        };
        let bytes = vec![0, 0, 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8, 0];
        cases.push((ShareKey::Group { group: g() }, group, bytes));
        // 12: assignment epoch 9.
        cases.push((
            ShareKey::TargetEpoch { group: g() },
            ShareValue::TargetEpoch(9),
            vec![0, 0, 0, 0, 0, 9, 0],
        ));
        // 13: one topic, partitions [0, 1]; the topic's tags, the value's.
        let partitions = vec![TopicPartitions {
            topic_id: T1,
            partitions: vec![0, 1],
        }];
        let mut bytes = vec![0, 0, 2];
        bytes.extend(T1);
        bytes.extend([3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]);
        let target = ShareValue::Target(partitions.clone());
        cases.push((
            ShareKey::Target {
                group: g(),
                member: m(),
            },
            target,
            bytes.clone(),
        ));
        // 14: epoch 3, previous 2, state 0, the same partitions.
        let mut assignment_bytes = vec![0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0];
        assignment_bytes.extend(&bytes[2..]);
        let assignment = ShareValue::Assignment {
            member_epoch: 3,
            previous_member_epoch: 2,
            assigned: partitions,
        };
        cases.push((
            ShareKey::Assignment {
                group: g(),
                member: m(),
            },
            assignment,
            assignment_bytes,
        ));
        cases
    }

    #[test]
    fn keys_and_values_are_kafkas_bytes_and_read_back() {
        let key = ShareKey::Target {
            group: "g".into(),
            member: "m".into(),
        };
        assert_eq!(key.encode(), [0, 13, 0, 1, b'g', 0, 1, b'm']);
        for (key, value, bytes) in golden() {
            assert_eq!(value.encode(), bytes, "{key:?}");
            assert_eq!(ShareValue::decode(&key, &bytes), Ok(value), "{key:?}");
            assert_eq!(ShareKey::decode(&key.encode()), Ok(key.clone()));
        }
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_refused() {
        for (key, _, bytes) in golden() {
            for cut in 0..bytes.len() {
                assert!(
                    ShareValue::decode(&key, &bytes[..cut]).is_err(),
                    "{key:?} cut at {cut}"
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(
                ShareValue::decode(&key, &longer).is_err(),
                "{key:?} with a byte more"
            );
        }
        assert_eq!(
            ShareKey::decode(&[0, 9, 0, 1, b'g']),
            Err(RecordError::Version(9))
        );
    }
}
