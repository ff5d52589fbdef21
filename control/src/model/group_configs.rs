//! Consumer group configs (KIP-848's group-level overrides, Kafka's
//! `GroupConfig`): set per group through IncrementalAlterConfigs on
//! resource type GROUP and stored in the metadata, so every coordinator a
//! group moves to applies the same ones. The model checks their shape;
//! the bounds (the broker's `group_consumer_min/max_*` settings) are the
//! broker's to check before it asks, as Kafka's brokers do.

use crate::model::error::MetadataError;

/// How long a member may stay silent, in milliseconds.
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// How often members are told to heartbeat, in milliseconds.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// Every key served.
pub const GROUP_CONFIG_KEYS: [&str; 2] =
    [CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS];
/// The most groups with configs the metadata holds.
pub const GROUPS_WITH_CONFIGS_MAX: usize = 100_000;
/// The longest group id (Kafka keys hold it as an int16-length string).
const GROUP_ID_MAX: usize = i16::MAX as usize;

/// Refuses a group config change outside the accepted shapes: a known
/// key, and a value (None removes it) of milliseconds in 1..=i32::MAX.
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
    match value.map(str::parse::<i32>) {
        None | Some(Ok(1..)) => Ok(()),
        Some(_) => invalid(format!("{key}: milliseconds from 1 to {}", i32::MAX)),
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
}
