//! A share group's settings: the broker's `group_share_*` settings, or
//! the group's own configs (IncrementalAlterConfigs on resource type
//! GROUP, stored in the metadata: `share.session.timeout.ms`,
//! `share.heartbeat.interval.ms`, `share.record.lock.duration.ms`,
//! `share.delivery.count.limit`, `share.auto.offset.reset`,
//! `share.isolation.level`, `share.dlq.topic`).

use std::collections::BTreeMap;

use control::model::group_configs::{
    SHARE_AUTO_OFFSET_RESET, SHARE_DELIVERY_COUNT_LIMIT, SHARE_DLQ_TOPIC,
    SHARE_HEARTBEAT_INTERVAL_MS, SHARE_ISOLATION_LEVEL, SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_SESSION_TIMEOUT_MS,
};

use super::BrokerConfig;

/// The shortest and longest record lock (the broker setting's bounds).
pub const LOCK_MS_BOUNDS: (u64, u64) = (1_000, 3_600_000);

/// A share group's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSettings {
    /// A member not heard from for this long is removed.
    pub session_ms: u64,
    /// How often members are told to heartbeat.
    pub heartbeat_interval_ms: u64,
    /// How long a member holds a record it acquired.
    pub lock_ms: u64,
    /// Deliveries after which a record that comes back is archived.
    pub delivery_limit: u16,
    /// A new share-partition starts at the log start (else at its end).
    pub from_earliest: bool,
    /// Only records of committed transactions (and none) are handed out,
    /// up to the last stable offset.
    pub read_committed: bool,
    /// Where archived records are appended (`share.dlq.topic`), if set.
    pub dead_letter_topic: Option<String>,
}

impl ShareSettings {
    /// The broker's settings with the group's own configs over them (a
    /// value that does not parse, which the checks keep out, is ignored).
    pub fn of(config: &BrokerConfig, own: Option<&BTreeMap<String, String>>) -> ShareSettings {
        let value = |key: &str| own.and_then(|c| c.get(key));
        let number = |key: &str| value(key).and_then(|v| v.parse::<u64>().ok());
        ShareSettings {
            session_ms: number(SHARE_SESSION_TIMEOUT_MS)
                .unwrap_or(config.group_share_session_timeout_ms),
            heartbeat_interval_ms: number(SHARE_HEARTBEAT_INTERVAL_MS)
                .unwrap_or(config.group_share_heartbeat_interval_ms),
            lock_ms: number(SHARE_RECORD_LOCK_DURATION_MS)
                .unwrap_or(config.group_share_record_lock_duration_ms),
            delivery_limit: number(SHARE_DELIVERY_COUNT_LIMIT)
                .map_or(config.group_share_delivery_count_limit, |n| n as u16),
            from_earliest: value(SHARE_AUTO_OFFSET_RESET).is_some_and(|v| v == "earliest"),
            read_committed: value(SHARE_ISOLATION_LEVEL).is_some_and(|v| v == "read_committed"),
            dead_letter_topic: value(SHARE_DLQ_TOPIC).cloned(),
        }
    }

    /// Why these settings are refused, if they are: the heartbeat
    /// interval below the session timeout, the lock within its bounds.
    pub fn check(&self) -> Result<(), String> {
        if self.heartbeat_interval_ms >= self.session_ms {
            return Err(format!(
                "{SHARE_HEARTBEAT_INTERVAL_MS} {} must be below {SHARE_SESSION_TIMEOUT_MS} {}",
                self.heartbeat_interval_ms, self.session_ms
            ));
        }
        let (min, max) = LOCK_MS_BOUNDS;
        if !(min..=max).contains(&self.lock_ms) {
            return Err(format!(
                "{SHARE_RECORD_LOCK_DURATION_MS} {} must be from {min} to {max}",
                self.lock_ms
            ));
        }
        Ok(())
    }

    /// The value of `key` (one of the share group keys), as
    /// DescribeConfigs shows it.
    pub fn value_of(&self, key: &str) -> Option<String> {
        Some(match key {
            SHARE_SESSION_TIMEOUT_MS => self.session_ms.to_string(),
            SHARE_HEARTBEAT_INTERVAL_MS => self.heartbeat_interval_ms.to_string(),
            SHARE_RECORD_LOCK_DURATION_MS => self.lock_ms.to_string(),
            SHARE_DELIVERY_COUNT_LIMIT => self.delivery_limit.to_string(),
            SHARE_AUTO_OFFSET_RESET => match self.from_earliest {
                true => "earliest".into(),
                false => "latest".into(),
            },
            SHARE_ISOLATION_LEVEL => match self.read_committed {
                true => "read_committed".into(),
                false => "read_uncommitted".into(),
            },
            SHARE_DLQ_TOPIC => self.dead_letter_topic.clone().unwrap_or_default(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_own_configs_override_the_brokers_and_are_checked() {
        let config = BrokerConfig::default();
        let defaults = ShareSettings::of(&config, None);
        assert_eq!(
            defaults,
            ShareSettings {
                session_ms: 45_000,
                heartbeat_interval_ms: 5_000,
                lock_ms: 30_000,
                delivery_limit: 5,
                from_earliest: false,
                read_committed: false,
                dead_letter_topic: None,
            }
        );
        assert_eq!(defaults.check(), Ok(()));
        let own: BTreeMap<String, String> = [
            (SHARE_RECORD_LOCK_DURATION_MS, "2000"),
            (SHARE_DELIVERY_COUNT_LIMIT, "3"),
            (SHARE_AUTO_OFFSET_RESET, "earliest"),
            (SHARE_HEARTBEAT_INTERVAL_MS, "60000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let settings = ShareSettings::of(&config, Some(&own));
        assert_eq!((settings.lock_ms, settings.delivery_limit), (2_000, 3));
        assert!(settings.from_earliest);
        assert_eq!(
            settings.value_of(SHARE_AUTO_OFFSET_RESET).as_deref(),
            Some("earliest")
        );
        assert!(
            settings.check().is_err(),
            "a heartbeat interval past the session"
        );
        let short_lock = ShareSettings {
            lock_ms: 10,
            ..defaults.clone()
        };
        assert!(short_lock.check().is_err());
    }
}
