//! A topic as metadata written before tiered storage's settings stored it:
//! the frozen layouts of [`TopicConfig`] and [`Topic`] that snapshots of
//! versions 1-9 and the first topic records hold. They never change; a
//! decoded one becomes the live type with the new settings at their
//! defaults.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::config::{CleanupPolicy, TopicConfig};
use crate::model::types::TopicId;
use crate::model::{Partition, Topic};

/// [`TopicConfig`] without the tiered storage settings.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct TopicConfigV1 {
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub cleanup_policy: CleanupPolicy,
    pub min_insync_replicas: u16,
    pub unclean_leader_election: bool,
    pub segment_bytes: i64,
    pub segment_ms: i64,
    pub delete_retention_ms: i64,
    pub max_message_bytes: i64,
    pub fsync_before_ack: bool,
}

impl From<TopicConfigV1> for TopicConfig {
    fn from(v1: TopicConfigV1) -> TopicConfig {
        TopicConfig {
            retention_ms: v1.retention_ms,
            retention_bytes: v1.retention_bytes,
            cleanup_policy: v1.cleanup_policy,
            min_insync_replicas: v1.min_insync_replicas,
            unclean_leader_election: v1.unclean_leader_election,
            segment_bytes: v1.segment_bytes,
            segment_ms: v1.segment_ms,
            delete_retention_ms: v1.delete_retention_ms,
            max_message_bytes: v1.max_message_bytes,
            fsync_before_ack: v1.fsync_before_ack,
            ..TopicConfig::default()
        }
    }
}

/// [`Topic`] holding a [`TopicConfigV1`].
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
#[allow(missing_docs)]
pub struct TopicV1 {
    pub id: TopicId,
    pub name: String,
    pub config: TopicConfigV1,
    pub partitions: Vec<Partition>,
}

impl From<TopicV1> for Topic {
    fn from(v1: TopicV1) -> Topic {
        Topic {
            id: v1.id,
            name: v1.name,
            config: v1.config.into(),
            partitions: v1.partitions,
        }
    }
}

/// The live topics of a frozen layout's.
pub fn thaw(
    topics: std::collections::BTreeMap<TopicId, TopicV1>,
) -> std::collections::BTreeMap<TopicId, Topic> {
    topics.into_iter().map(|(id, t)| (id, t.into())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frozen layout must stay the one version 9 wrote: a config that
    /// went through it keeps every value, the new settings at defaults.
    #[test]
    fn a_frozen_config_thaws_with_its_values_and_the_new_settings_at_defaults() {
        let v1 = TopicConfigV1 {
            retention_ms: 5,
            retention_bytes: 6,
            cleanup_policy: CleanupPolicy::Compact,
            min_insync_replicas: 2,
            unclean_leader_election: true,
            segment_bytes: 1 << 20,
            segment_ms: 7,
            delete_retention_ms: 8,
            max_message_bytes: 9,
            fsync_before_ack: false,
        };
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&v1).unwrap();
        let back = rkyv::from_bytes::<TopicConfigV1, rkyv::rancor::Error>(&bytes).unwrap();
        let config = TopicConfig::from(back);
        assert_eq!(config.retention_ms, 5);
        assert_eq!(config.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(config.segment_bytes, 1 << 20);
        assert!(!config.fsync_before_ack);
        assert!(!config.remote_storage_enable);
        assert_eq!(config.local_retention_ms, -2);
        assert_eq!(config.local_retention_bytes, -2);
    }
}
