//! Topic configuration: the settings a topic carries in the metadata, with
//! Kafka's names and defaults, and parsing of AlterConfigs key/value pairs.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::error::MetadataError;

/// What happens to old data: `cleanup.policy`.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub enum CleanupPolicy {
    /// Delete whole old segments by time or size (`delete`).
    Delete,
    /// Keep the newest record per key (`compact`).
    Compact,
    /// Both (`compact,delete`).
    CompactDelete,
}

/// The configuration of one topic.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct TopicConfig {
    /// `retention.ms`; -1 keeps data forever.
    pub retention_ms: i64,
    /// `retention.bytes` per partition; -1 for no size limit.
    pub retention_bytes: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `min.insync.replicas`: acks=all needs at least this many in the ISR.
    pub min_insync_replicas: u16,
    /// `unclean.leader.election.enable`: may a replica outside the ISR lead.
    pub unclean_leader_election: bool,
    /// `segment.bytes`.
    pub segment_bytes: i64,
    /// `segment.ms`.
    pub segment_ms: i64,
    /// `delete.retention.ms`: how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: i64,
    /// `fsync.before.ack`: a replica (the leader included) counts as
    /// holding a batch for acks=all only once it fdatasync'd it. Off, the
    /// copies in the replicas' memory count (Kafka's way): faster, and a
    /// simultaneous power loss of every replica can lose acknowledged data.
    pub fsync_before_ack: bool,
    /// `remote.storage.enable`: sealed segments go to the object store
    /// (tiered storage, docs/tiered-storage.md); once on, it stays on.
    pub remote_storage_enable: bool,
    /// `local.retention.ms`: how long segments stay on local disk once
    /// uploaded (-2: `retention.ms`).
    pub local_retention_ms: i64,
    /// `local.retention.bytes`: the local bytes kept per partition once
    /// uploaded (-2: `retention.bytes`).
    pub local_retention_bytes: i64,
}

impl Default for TopicConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        TopicConfig {
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::Delete,
            min_insync_replicas: 1,
            unclean_leader_election: false,
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            delete_retention_ms: 24 * 3600 * 1000,
            max_message_bytes: 1_048_588,
            fsync_before_ack: true,
            remote_storage_enable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
        }
    }
}

/// The configuration keys a topic understands, as Kafka names them.
pub const TOPIC_CONFIG_KEYS: [&str; 13] = [
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "segment.bytes",
    "segment.ms",
    "delete.retention.ms",
    "max.message.bytes",
    "fsync.before.ack",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
];

impl TopicConfig {
    /// Sets one key from its string form, validating it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), MetadataError> {
        let invalid = |why: &str| MetadataError::InvalidConfig {
            key: key.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        };
        let number = |min: i64| -> Result<i64, MetadataError> {
            let n: i64 = value
                .trim()
                .parse()
                .map_err(|_| invalid("not an integer"))?;
            if n < min {
                return Err(invalid(&format!("must be at least {min}")));
            }
            Ok(n)
        };
        let boolean = || match value.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(invalid("expected true or false")),
        };
        match key {
            "retention.ms" => self.retention_ms = number(-1)?,
            "retention.bytes" => self.retention_bytes = number(-1)?,
            "cleanup.policy" => {
                let mut parts: Vec<&str> = value.split(',').map(str::trim).collect();
                parts.sort_unstable();
                self.cleanup_policy = match parts.as_slice() {
                    ["delete"] => CleanupPolicy::Delete,
                    ["compact"] => CleanupPolicy::Compact,
                    ["compact", "delete"] => CleanupPolicy::CompactDelete,
                    _ => return Err(invalid("expected delete, compact or compact,delete")),
                }
            }
            "min.insync.replicas" => {
                let n = number(1)?;
                self.min_insync_replicas = u16::try_from(n).map_err(|_| invalid("too large"))?;
            }
            "unclean.leader.election.enable" => self.unclean_leader_election = boolean()?,
            "fsync.before.ack" => self.fsync_before_ack = boolean()?,
            // The storage engine's indexes hold 32-bit positions.
            "segment.bytes" => {
                let n = number(14)?;
                if n > u32::MAX as i64 {
                    return Err(invalid("at most 4 GiB"));
                }
                self.segment_bytes = n;
            }
            "segment.ms" => self.segment_ms = number(1)?,
            "delete.retention.ms" => self.delete_retention_ms = number(0)?,
            "max.message.bytes" => self.max_message_bytes = number(0)?,
            "remote.storage.enable" => self.remote_storage_enable = boolean()?,
            "local.retention.ms" => self.local_retention_ms = number(-2)?,
            "local.retention.bytes" => self.local_retention_bytes = number(-2)?,
            _ => return Err(MetadataError::UnknownConfig(key.to_string())),
        }
        Ok(())
    }

    /// Checks the settings against each other, as Kafka does: tiered
    /// storage is refused on compacted topics, and the local hot window
    /// may not be longer or larger than the total retention.
    pub fn check(&self) -> Result<(), MetadataError> {
        let invalid = |key: &str, value: i64, why: &str| MetadataError::InvalidConfig {
            key: key.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        };
        if self.remote_storage_enable && self.cleanup_policy != CleanupPolicy::Delete {
            return Err(MetadataError::InvalidConfig {
                key: "remote.storage.enable".into(),
                value: "true".into(),
                why: "tiered storage is not supported on compacted topics (cleanup.policy must be delete)".into(),
            });
        }
        let within =
            |local: i64, total: i64| local == -2 || total == -1 || (local != -1 && local <= total);
        if !within(self.local_retention_ms, self.retention_ms) {
            let why = format!("must be -2 or at most retention.ms ({})", self.retention_ms);
            return Err(invalid("local.retention.ms", self.local_retention_ms, &why));
        }
        if !within(self.local_retention_bytes, self.retention_bytes) {
            let why = format!(
                "must be -2 or at most retention.bytes ({})",
                self.retention_bytes
            );
            return Err(invalid(
                "local.retention.bytes",
                self.local_retention_bytes,
                &why,
            ));
        }
        Ok(())
    }

    /// [`TopicConfig::check`], and that a change from `old` keeps tiered
    /// storage on once it was (turning it off would strand the remote
    /// log, as Kafka refuses too).
    pub fn check_change_from(&self, old: &TopicConfig) -> Result<(), MetadataError> {
        if old.remote_storage_enable && !self.remote_storage_enable {
            return Err(MetadataError::InvalidConfig {
                key: "remote.storage.enable".into(),
                value: "false".into(),
                why: "tiered storage cannot be turned off once on".into(),
            });
        }
        self.check()
    }

    /// The local hot window of a tiered topic: (bytes, ms) kept locally
    /// once uploaded, None for no such limit (-2 takes the total's).
    pub fn local_retention(&self) -> (Option<u64>, Option<i64>) {
        let pick = |local: i64, total: i64| if local == -2 { total } else { local };
        let bytes = pick(self.local_retention_bytes, self.retention_bytes);
        let ms = pick(self.local_retention_ms, self.retention_ms);
        (
            (bytes >= 0).then_some(bytes as u64),
            (ms >= 0).then_some(ms),
        )
    }

    /// One key's value in its string form (DescribeConfigs).
    pub fn get(&self, key: &str) -> Option<String> {
        Some(match key {
            "retention.ms" => self.retention_ms.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "cleanup.policy" => match self.cleanup_policy {
                CleanupPolicy::Delete => "delete",
                CleanupPolicy::Compact => "compact",
                CleanupPolicy::CompactDelete => "compact,delete",
            }
            .to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "unclean.leader.election.enable" => self.unclean_leader_election.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "fsync.before.ack" => self.fsync_before_ack.to_string(),
            "remote.storage.enable" => self.remote_storage_enable.to_string(),
            "local.retention.ms" => self.local_retention_ms.to_string(),
            "local.retention.bytes" => self.local_retention_bytes.to_string(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_round_trips_through_its_string_form() {
        let mut config = TopicConfig::default();
        let values = [
            "1000",
            "2048",
            "compact,delete",
            "2",
            "true",
            "1048576",
            "60000",
            "5",
            "4096",
            "false",
            "true",
            "3600000",
            "1048576",
        ];
        for (key, value) in TOPIC_CONFIG_KEYS.iter().zip(values) {
            config.set(key, value).unwrap();
            assert_eq!(config.get(key).as_deref(), Some(value), "{key}");
        }
        config.set("cleanup.policy", "delete, compact").unwrap();
        assert_eq!(config.cleanup_policy, CleanupPolicy::CompactDelete);
    }

    #[test]
    fn bad_values_and_keys_are_refused_without_change() {
        let mut config = TopicConfig::default();
        for (key, value) in [
            ("retention.ms", "soon"),
            ("retention.ms", "-2"),
            ("min.insync.replicas", "0"),
            ("cleanup.policy", "shred"),
            ("segment.bytes", "99999999999"),
            ("unclean.leader.election.enable", "yes"),
        ] {
            assert!(
                matches!(
                    config.set(key, value),
                    Err(MetadataError::InvalidConfig { .. })
                ),
                "{key}={value}"
            );
        }
        assert!(matches!(
            config.set("flush.messages", "1"),
            Err(MetadataError::UnknownConfig(_))
        ));
        assert_eq!(config, TopicConfig::default());
    }

    #[test]
    fn tiered_storage_is_refused_on_compacted_topics_and_the_hot_window_stays_within_the_total() {
        let tiered = |pairs: &[(&str, &str)]| {
            let mut config = TopicConfig::default();
            for (key, value) in pairs {
                config.set(key, value).unwrap();
            }
            config
        };
        let on = ("remote.storage.enable", "true");
        assert_eq!(tiered(&[on]).check(), Ok(()));
        for policy in ["compact", "compact,delete"] {
            let refused = tiered(&[on, ("cleanup.policy", policy)]).check();
            assert!(
                matches!(&refused, Err(MetadataError::InvalidConfig { key, .. }) if key == "remote.storage.enable"),
                "{policy}: {refused:?}"
            );
        }
        let too_long = tiered(&[("retention.ms", "1000"), ("local.retention.ms", "1001")]);
        assert!(too_long.check().is_err());
        let forever_locally =
            tiered(&[("retention.bytes", "1000"), ("local.retention.bytes", "-1")]);
        assert!(forever_locally.check().is_err());
        let fine = tiered(&[
            on,
            ("retention.bytes", "1000"),
            ("local.retention.bytes", "1000"),
        ]);
        assert_eq!(fine.check(), Ok(()));
        assert_eq!(fine.local_retention().0, Some(1000));
        assert_eq!(
            tiered(&[("retention.ms", "5000")]).local_retention(),
            (None, Some(5000)),
            "-2 takes the total's"
        );

        let turned_off = tiered(&[]);
        assert!(turned_off.check_change_from(&tiered(&[on])).is_err());
        assert_eq!(tiered(&[on]).check_change_from(&turned_off), Ok(()));
    }
}
