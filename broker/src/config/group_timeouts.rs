//! A consumer group's session timeout and heartbeat interval: the
//! broker's settings, or the group's own configs (IncrementalAlterConfigs
//! on resource type GROUP, stored in the metadata), each within the
//! broker's bounds as Kafka's `GroupConfig` checks them.

use std::collections::BTreeMap;

use control::model::group_configs::{CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS};

/// A consumer group's timeouts, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// A member not heard from for this long is removed.
    pub session_ms: u64,
    /// How often members are told to heartbeat.
    pub heartbeat_interval_ms: u64,
}

/// What a group's timeouts may be: the broker's
/// `group_consumer_min/max_*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The shortest session timeout.
    pub min_session_ms: u64,
    /// The longest session timeout.
    pub max_session_ms: u64,
    /// The shortest heartbeat interval.
    pub min_heartbeat_interval_ms: u64,
    /// The longest heartbeat interval.
    pub max_heartbeat_interval_ms: u64,
}

impl Timeouts {
    /// `defaults` with the group's configs over them (a value that does
    /// not parse, which the checks keep out, is ignored).
    pub fn of(defaults: Timeouts, configs: Option<&BTreeMap<String, String>>) -> Timeouts {
        let value = |key: &str| {
            let value = configs.and_then(|c| c.get(key));
            value.and_then(|v| v.parse::<u64>().ok())
        };
        Timeouts {
            session_ms: value(CONSUMER_SESSION_TIMEOUT_MS).unwrap_or(defaults.session_ms),
            heartbeat_interval_ms: value(CONSUMER_HEARTBEAT_INTERVAL_MS)
                .unwrap_or(defaults.heartbeat_interval_ms),
        }
    }

    /// Why these timeouts are refused, if they are: each within its
    /// bounds, the interval below the session.
    pub fn check(&self, bounds: &Bounds) -> Result<(), String> {
        let (session, interval) = (self.session_ms, self.heartbeat_interval_ms);
        if !(bounds.min_session_ms..=bounds.max_session_ms).contains(&session) {
            return Err(format!(
                "{CONSUMER_SESSION_TIMEOUT_MS} {session} must be from {} to {}",
                bounds.min_session_ms, bounds.max_session_ms
            ));
        }
        let (min, max) = (
            bounds.min_heartbeat_interval_ms,
            bounds.max_heartbeat_interval_ms,
        );
        if !(min..=max).contains(&interval) {
            return Err(format!(
                "{CONSUMER_HEARTBEAT_INTERVAL_MS} {interval} must be from {min} to {max}"
            ));
        }
        if interval >= session {
            return Err(format!(
                "{CONSUMER_HEARTBEAT_INTERVAL_MS} {interval} must be below {CONSUMER_SESSION_TIMEOUT_MS} {session}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        min_session_ms: 45_000,
        max_session_ms: 60_000,
        min_heartbeat_interval_ms: 5_000,
        max_heartbeat_interval_ms: 15_000,
    };
    const DEFAULTS: Timeouts = Timeouts {
        session_ms: 45_000,
        heartbeat_interval_ms: 5_000,
    };

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let each = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        each.collect()
    }

    #[test]
    fn a_groups_configs_override_the_defaults_within_the_bounds() {
        assert_eq!(Timeouts::of(DEFAULTS, None), DEFAULTS);
        let own = configs(&[(CONSUMER_SESSION_TIMEOUT_MS, "50000")]);
        let timeouts = Timeouts::of(DEFAULTS, Some(&own));
        assert_eq!(timeouts.session_ms, 50_000);
        assert_eq!(timeouts.heartbeat_interval_ms, 5_000);
        assert_eq!(timeouts.check(&BOUNDS), Ok(()));
        let cases = [
            (44_999, 5_000, CONSUMER_SESSION_TIMEOUT_MS),
            (60_001, 5_000, CONSUMER_SESSION_TIMEOUT_MS),
            (45_000, 4_999, CONSUMER_HEARTBEAT_INTERVAL_MS),
            (45_000, 15_001, CONSUMER_HEARTBEAT_INTERVAL_MS),
        ];
        for (session_ms, heartbeat_interval_ms, named) in cases {
            let timeouts = Timeouts {
                session_ms,
                heartbeat_interval_ms,
            };
            let refused = timeouts.check(&BOUNDS).unwrap_err();
            assert!(refused.starts_with(named), "{refused}");
        }
        let wide = Bounds {
            max_heartbeat_interval_ms: 60_000,
            ..BOUNDS
        };
        let equal = Timeouts {
            session_ms: 45_000,
            heartbeat_interval_ms: 45_000,
        };
        assert!(equal.check(&wide).unwrap_err().contains("below"));
    }
}
