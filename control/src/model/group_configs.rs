//! Group configs (Kafka's `GroupConfig`: KIP-848's consumer group and
//! KIP-932's share group overrides): set per group through
//! IncrementalAlterConfigs on resource type GROUP and stored in the
//! metadata, so every coordinator and partition leader a group meets
//! applies the same ones. The model checks their shape; the bounds (the
//! broker's `group_consumer_min/max_*` settings) are the broker's to
//! check before it asks, as Kafka's brokers do.

use crate::model::error::MetadataError;

/// How long a member may stay silent, in milliseconds.
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// How often members are told to heartbeat, in milliseconds.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// How long a share group member may stay silent, in milliseconds.
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
/// How often share group members are told to heartbeat, in milliseconds.
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
/// How long a share group member holds a record it acquired, in
/// milliseconds.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
/// Deliveries after which a share group's record is archived (2-10).
pub const SHARE_DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
/// Where a share group starts reading a partition: latest or earliest.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// Whether a share group reads committed records only: read_uncommitted
/// (the default) or read_committed.
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
/// The topic a share group's archived records are appended to (beyond
/// Kafka: docs/queues.md, "Dead letters").
pub const SHARE_DLQ_TOPIC: &str = "share.dlq.topic";
/// Every key served.
pub const GROUP_CONFIG_KEYS: [&str; 9] = [
    CONSUMER_SESSION_TIMEOUT_MS,
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_DLQ_TOPIC,
];
/// The most groups with configs the metadata holds.
pub const GROUPS_WITH_CONFIGS_MAX: usize = 100_000;
/// The longest group id (Kafka keys hold it as an int16-length string).
const GROUP_ID_MAX: usize = i16::MAX as usize;

/// Refuses a group config change outside the accepted shapes: a known
/// key, and a value (None removes it) of its kind: milliseconds in
/// 1..=i32::MAX, a delivery limit in 2..=10, `latest` or `earliest`,
/// `read_uncommitted` or `read_committed`.
pub fn check_group_config(
    group: &str,
    key: &str,
    value: Option<&str>,
) -> Result<(), MetadataError> {
    let invalid = |why: String| Err(MetadataError::InvalidGroupConfig(why));
    if group.is_empty() || group.len() > GROUP_ID_MAX {
        return invalid(format!("group id of {} bytes", group.len()));
    }
    if !GROUP_CONFIG_KEYS.contains(&key) {
        return invalid(format!(
            "{key}: the group configs served are {}",
            GROUP_CONFIG_KEYS.join(", ")
        ));
    }
    let Some(value) = value else {
        return Ok(());
    };
    match key {
        SHARE_AUTO_OFFSET_RESET => match value {
            "latest" | "earliest" => Ok(()),
            _ => invalid(format!("{key}: latest or earliest")),
        },
        SHARE_ISOLATION_LEVEL => match value {
            "read_uncommitted" | "read_committed" => Ok(()),
            _ => invalid(format!("{key}: read_uncommitted or read_committed")),
        },
        SHARE_DLQ_TOPIC if value.starts_with("__") => {
            invalid(format!("{key}: {value} is an internal topic's name"))
        }
        SHARE_DLQ_TOPIC => match crate::model::check_topic_name(value) {
            Ok(()) => Ok(()),
            Err(why) => invalid(format!("{key}: {why}")),
        },
        SHARE_DELIVERY_COUNT_LIMIT => match value.parse::<i32>() {
            Ok(2..=10) => Ok(()),
            _ => invalid(format!("{key}: from 2 to 10")),
        },
        _ => match value.parse::<i32>() {
            Ok(1..) => Ok(()),
            _ => invalid(format!("{key}: milliseconds from 1 to {}", i32::MAX)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_keys_with_positive_milliseconds_are_accepted() {
        let check = |key, value| check_group_config("g", key, value);
        assert!(check(CONSUMER_SESSION_TIMEOUT_MS, Some("45000")).is_ok());
        assert!(check(CONSUMER_HEARTBEAT_INTERVAL_MS, None).is_ok());
        assert!(check("consumer.max.size", Some("3")).is_err());
        assert!(check(CONSUMER_SESSION_TIMEOUT_MS, Some("0")).is_err());
        assert!(check(CONSUMER_SESSION_TIMEOUT_MS, Some("-5")).is_err());
        assert!(check(CONSUMER_SESSION_TIMEOUT_MS, Some("soon")).is_err());
        assert!(check(CONSUMER_SESSION_TIMEOUT_MS, Some("3000000000")).is_err());
        assert!(check_group_config("", CONSUMER_SESSION_TIMEOUT_MS, None).is_err());
    }

    #[test]
    fn share_group_configs_take_their_own_kinds_of_value() {
        let check = |key, value| check_group_config("g", key, Some(value)).is_ok();
        assert!(check(SHARE_RECORD_LOCK_DURATION_MS, "15000"));
        assert!(!check(SHARE_RECORD_LOCK_DURATION_MS, "0"));
        assert!(check(SHARE_DELIVERY_COUNT_LIMIT, "2") && check(SHARE_DELIVERY_COUNT_LIMIT, "10"));
        assert!(
            !check(SHARE_DELIVERY_COUNT_LIMIT, "1") && !check(SHARE_DELIVERY_COUNT_LIMIT, "11")
        );
        assert!(
            check(SHARE_AUTO_OFFSET_RESET, "earliest") && check(SHARE_AUTO_OFFSET_RESET, "latest")
        );
        assert!(!check(SHARE_AUTO_OFFSET_RESET, "by_duration:PT1H"));
        assert!(
            check(SHARE_ISOLATION_LEVEL, "read_committed")
                && check(SHARE_ISOLATION_LEVEL, "read_uncommitted")
        );
        assert!(!check(SHARE_ISOLATION_LEVEL, "committed"));
        assert!(
            check(SHARE_SESSION_TIMEOUT_MS, "30000") && check(SHARE_HEARTBEAT_INTERVAL_MS, "1000")
        );
        assert!(check(SHARE_DLQ_TOPIC, "orders.dlq"));
        assert!(!check(SHARE_DLQ_TOPIC, "no/slashes") && !check(SHARE_DLQ_TOPIC, ""));
        assert!(!check(SHARE_DLQ_TOPIC, "__consumer_offsets"), "internal");
    }
}
