//! The consumer groups' records in `__consumer_offsets` (KIP-848), in
//! Kafka's own layout so Kafka's tools read them and a group moves
//! between this broker and Kafka's coordinator unchanged. Keys: int16
//! record type, then int16-length strings. Values: int16 version 0, then
//! flexible fields ([`super::flex`]); a tombstone (no value) deletes what
//! the key names. Schemas: Kafka's
//! `group-coordinator/src/main/resources/common/message/ConsumerGroup*`.
//!
//! | type | key | value |
//! |---|---|---|
//! | 3 | group | the group epoch; tag 0: the subscribed topics' hash |
//! | 4 | group | partition metadata (before Kafka 4.1): read, not written |
//! | 5 | group, member | the member's ids, client, subscription, rebalance timeout, assignor |
//! | 6 | group | the target assignment's epoch |
//! | 7 | group, member | the member's target partitions |
//! | 8 | group, member | the member's epochs, state, assigned and pending partitions |
//! | 16 | group, regex | the topics a regular expression resolved to |
//!
//! Unknown tagged fields are skipped (newer Kafka versions add some:
//! 4.3's assignment epochs per partition in type 8, assignment timestamp
//! in type 6).

use super::flex::{Reader, Writer};
use crate::groups::record_error::RecordError;

/// A consumer group record's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConsumerKey {
    /// 3: the group's epoch.
    GroupEpoch {
        /// The group.
        group: String,
    },
    /// 4: Kafka's partition metadata before 4.1 (read, not written).
    PartitionMetadata {
        /// The group.
        group: String,
    },
    /// 5: a member's metadata.
    Member {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// 6: the target assignment's epoch.
    TargetEpoch {
        /// The group.
        group: String,
    },
    /// 7: a member's target.
    TargetMember {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// 8: a member's current assignment.
    CurrentAssignment {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// 16: a regular expression's resolution.
    Regex {
        /// The group.
        group: String,
        /// The regular expression.
        regex: String,
    },
}

/// One topic's partitions (by topic id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic id.
    pub topic_id: [u8; 16],
    /// Its partitions.
    pub partitions: Vec<i32>,
}

/// Type 5's value: what a member told the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadata {
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The rack.
    pub rack_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// The topics subscribed to by name.
    pub subscribed_topic_names: Vec<String>,
    /// The regular expression subscribed to.
    pub subscribed_topic_regex: Option<String>,
    /// The rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The assignor asked for.
    pub server_assignor: Option<String>,
    /// A member speaking the classic protocol (JoinGroup) inside the
    /// group (tag 0; None for the consumer protocol's members).
    pub classic: Option<ClassicMetadata>,
}

/// A classic protocol member's metadata (type 5's tag 0, Kafka's
/// ClassicMemberMetadata): what it asked for in its JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMetadata {
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// The protocols (assignors) it supports, by preference, with its
    /// subscription in each.
    pub protocols: Vec<(String, Vec<u8>)>,
}

/// Type 8's value: where a member's reconciliation stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    /// The epoch the member has reached.
    pub member_epoch: i32,
    /// Its epoch before the last step.
    pub previous_member_epoch: i32,
    /// Kafka's MemberState: 0 stable, 1 unrevoked, 2 unreleased partitions.
    pub state: i8,
    /// Its partitions.
    pub assigned: Vec<TopicPartitions>,
    /// What it must give up.
    pub pending_revocation: Vec<TopicPartitions>,
}

/// Type 16's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexResolution {
    /// The topics it matched.
    pub topics: Vec<String>,
    /// The metadata version it was resolved at.
    pub version: i64,
    /// When (ms since the epoch).
    pub timestamp: i64,
}

/// A consumer group record's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerValue {
    /// 3: the group epoch, and the subscribed topics' hash (0: none).
    GroupEpoch {
        /// The group epoch.
        epoch: i32,
        /// The subscribed topics' hash (0: none).
        metadata_hash: i64,
    },
    /// 4: not read further.
    PartitionMetadata,
    /// 5.
    Member(MemberMetadata),
    /// 6.
    TargetEpoch {
        /// The epoch the targets were computed for.
        assignment_epoch: i32,
    },
    /// 7.
    TargetMember(Vec<TopicPartitions>),
    /// 8.
    CurrentAssignment(CurrentAssignment),
    /// 16.
    Regex(RegexResolution),
}

/// The record types this module reads (the first int16 of a key).
pub const RECORD_TYPES: [i16; 7] = [3, 4, 5, 6, 7, 8, 16];

impl ConsumerKey {
    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            ConsumerKey::GroupEpoch { group }
            | ConsumerKey::PartitionMetadata { group }
            | ConsumerKey::Member { group, .. }
            | ConsumerKey::TargetEpoch { group }
            | ConsumerKey::TargetMember { group, .. }
            | ConsumerKey::CurrentAssignment { group, .. }
            | ConsumerKey::Regex { group, .. } => group,
        }
    }

    fn record_type(&self) -> i16 {
        match self {
            ConsumerKey::GroupEpoch { .. } => 3,
            ConsumerKey::PartitionMetadata { .. } => 4,
            ConsumerKey::Member { .. } => 5,
            ConsumerKey::TargetEpoch { .. } => 6,
            ConsumerKey::TargetMember { .. } => 7,
            ConsumerKey::CurrentAssignment { .. } => 8,
            ConsumerKey::Regex { .. } => 16,
        }
    }

    /// The key's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(self.record_type());
        w.classic_string(self.group());
        match self {
            ConsumerKey::Member { member, .. }
            | ConsumerKey::TargetMember { member, .. }
            | ConsumerKey::CurrentAssignment { member, .. } => w.classic_string(member),
            ConsumerKey::Regex { regex, .. } => w.classic_string(regex),
            _ => {}
        }
        w.out
    }

    /// Reads a key of one of [`RECORD_TYPES`].
    pub fn decode(bytes: &[u8]) -> Result<ConsumerKey, RecordError> {
        let mut r = Reader { buf: bytes };
        let record_type = r.i16()?;
        let group = r.classic_string()?;
        let key = match record_type {
            3 => ConsumerKey::GroupEpoch { group },
            4 => ConsumerKey::PartitionMetadata { group },
            6 => ConsumerKey::TargetEpoch { group },
            5 | 7 | 8 => {
                let member = r.classic_string()?;
                match record_type {
                    5 => ConsumerKey::Member { group, member },
                    7 => ConsumerKey::TargetMember { group, member },
                    _ => ConsumerKey::CurrentAssignment { group, member },
                }
            }
            16 => ConsumerKey::Regex {
                group,
                regex: r.classic_string()?,
            },
            other => return Err(RecordError::Version(other)),
        };
        r.finish()?;
        Ok(key)
    }
}

impl ConsumerValue {
    /// The value's bytes (version 0).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(0);
        match self {
            ConsumerValue::GroupEpoch {
                epoch,
                metadata_hash,
            } => {
                w.i32(*epoch);
                let hash = (*metadata_hash != 0).then(|| (0, metadata_hash.to_be_bytes().to_vec()));
                w.tagged(&hash.into_iter().collect::<Vec<_>>());
            }
            ConsumerValue::PartitionMetadata => {
                w.array_len(0);
                w.tagged(&[]);
            }
            ConsumerValue::Member(m) => put_member(&mut w, m),
            ConsumerValue::TargetEpoch { assignment_epoch } => {
                w.i32(*assignment_epoch);
                w.tagged(&[]);
            }
            ConsumerValue::TargetMember(partitions) => {
                put_topic_partitions(&mut w, partitions);
                w.tagged(&[]);
            }
            ConsumerValue::CurrentAssignment(a) => {
                w.i32(a.member_epoch);
                w.i32(a.previous_member_epoch);
                w.i8(a.state);
                put_topic_partitions(&mut w, &a.assigned);
                put_topic_partitions(&mut w, &a.pending_revocation);
                w.tagged(&[]);
            }
            ConsumerValue::Regex(resolution) => {
                w.array_len(resolution.topics.len());
                for topic in &resolution.topics {
                    w.string(topic);
                }
                w.i64(resolution.version);
                w.i64(resolution.timestamp);
                w.tagged(&[]);
            }
        }
        w.out
    }

    /// Reads the value of a record keyed `key`.
    pub fn decode(key: &ConsumerKey, bytes: &[u8]) -> Result<ConsumerValue, RecordError> {
        let mut r = Reader { buf: bytes };
        let version = r.i16()?;
        if version != 0 {
            return Err(RecordError::Version(version));
        }
        let value = match key {
            ConsumerKey::GroupEpoch { .. } => {
                let epoch = r.i32()?;
                let tags = r.tagged(&[0])?;
                let metadata_hash = match tags.first() {
                    Some((_, bytes)) => Reader { buf: bytes }.i64()?,
                    None => 0,
                };
                ConsumerValue::GroupEpoch {
                    epoch,
                    metadata_hash,
                }
            }
            // Read no further: never used, only tombstoned.
            ConsumerKey::PartitionMetadata { .. } => return Ok(ConsumerValue::PartitionMetadata),
            ConsumerKey::Member { .. } => ConsumerValue::Member(read_member(&mut r)?),
            ConsumerKey::TargetEpoch { .. } => {
                let assignment_epoch = r.i32()?;
                r.tagged(&[])?;
                ConsumerValue::TargetEpoch { assignment_epoch }
            }
            ConsumerKey::TargetMember { .. } => {
                let partitions = read_topic_partitions(&mut r)?;
                r.tagged(&[])?;
                ConsumerValue::TargetMember(partitions)
            }
            ConsumerKey::CurrentAssignment { .. } => {
                let member_epoch = r.i32()?;
                let previous_member_epoch = r.i32()?;
                let state = r.i8()?;
                let assigned = read_topic_partitions(&mut r)?;
                let pending_revocation = read_topic_partitions(&mut r)?;
                r.tagged(&[])?;
                ConsumerValue::CurrentAssignment(CurrentAssignment {
                    member_epoch,
                    previous_member_epoch,
                    state,
                    assigned,
                    pending_revocation,
                })
            }
            ConsumerKey::Regex { .. } => {
                let count = r.array_len(1)?;
                let topics = (0..count).map(|_| r.string()).collect::<Result<_, _>>()?;
                let version = r.i64()?;
                let timestamp = r.i64()?;
                r.tagged(&[])?;
                ConsumerValue::Regex(RegexResolution {
                    topics,
                    version,
                    timestamp,
                })
            }
        };
        r.finish()?;
        Ok(value)
    }
}

fn put_member(w: &mut Writer, m: &MemberMetadata) {
    w.nullable_string(m.instance_id.as_deref());
    w.nullable_string(m.rack_id.as_deref());
    w.string(&m.client_id);
    w.string(&m.client_host);
    w.array_len(m.subscribed_topic_names.len());
    for name in &m.subscribed_topic_names {
        w.string(name);
    }
    w.nullable_string(m.subscribed_topic_regex.as_deref());
    w.i32(m.rebalance_timeout_ms);
    w.nullable_string(m.server_assignor.as_deref());
    match &m.classic {
        Some(classic) => w.tagged(&[(0, classic_bytes(classic))]),
        None => w.tagged(&[]),
    }
}

/// Tag 0's bytes: a nullable struct's marker (1: present), then the
/// struct (Kafka's generated layout for a tagged nullable struct).
fn classic_bytes(classic: &ClassicMetadata) -> Vec<u8> {
    let mut w = Writer::default();
    w.i8(1);
    w.i32(classic.session_timeout_ms);
    w.array_len(classic.protocols.len());
    for (name, metadata) in &classic.protocols {
        w.string(name);
        w.bytes(metadata);
        w.tagged(&[]);
    }
    w.tagged(&[]);
    w.out
}

fn read_classic(bytes: &[u8]) -> Result<Option<ClassicMetadata>, RecordError> {
    let mut r = Reader { buf: bytes };
    if r.i8()? < 0 {
        return Ok(None);
    }
    let session_timeout_ms = r.i32()?;
    let count = r.array_len(2)?;
    let mut protocols = Vec::with_capacity(count);
    for _ in 0..count {
        let name = r.string()?;
        let metadata = r.bytes()?.to_vec();
        r.tagged(&[])?;
        protocols.push((name, metadata));
    }
    r.tagged(&[])?;
    Ok(Some(ClassicMetadata {
        session_timeout_ms,
        protocols,
    }))
}

fn read_member(r: &mut Reader) -> Result<MemberMetadata, RecordError> {
    let instance_id = r.nullable_string()?;
    let rack_id = r.nullable_string()?;
    let client_id = r.string()?;
    let client_host = r.string()?;
    let count = r.array_len(1)?;
    let subscribed_topic_names = (0..count).map(|_| r.string()).collect::<Result<_, _>>()?;
    let subscribed_topic_regex = r.nullable_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.nullable_string()?;
    let tags = r.tagged(&[0])?;
    let classic = match tags.first() {
        Some((_, bytes)) => read_classic(bytes)?,
        None => None,
    };
    Ok(MemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

pub(super) fn put_topic_partitions(w: &mut Writer, topics: &[TopicPartitions]) {
    w.array_len(topics.len());
    for topic in topics {
        w.uuid(&topic.topic_id);
        w.array_len(topic.partitions.len());
        for p in &topic.partitions {
            w.i32(*p);
        }
        w.tagged(&[]);
    }
}

pub(super) fn read_topic_partitions(r: &mut Reader) -> Result<Vec<TopicPartitions>, RecordError> {
    // A topic takes at least 16 + 1 + 1 bytes.
    let count = r.array_len(18)?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let topic_id = r.uuid()?;
        let n = r.array_len(4)?;
        let partitions = (0..n).map(|_| r.i32()).collect::<Result<_, _>>()?;
        r.tagged(&[])?;
        topics.push(TopicPartitions {
            topic_id,
            partitions,
        });
    }
    Ok(topics)
}

#[cfg(test)]
mod tests;
