//! Group configs through DescribeConfigs and IncrementalAlterConfigs on
//! resource type GROUP (32), as Kafka 4's: `consumer.session.timeout.ms`
//! and `consumer.heartbeat.interval.ms`, and share groups'
//! `share.session.timeout.ms`, `share.heartbeat.interval.ms`,
//! `share.record.lock.duration.ms`, `share.delivery.count.limit` and
//! `share.auto.offset.reset`, per group, checked against the broker's
//! bounds, stored in the metadata by the controller (any group name: a
//! group may be configured before it exists).

use std::collections::BTreeMap;
use std::rc::Rc;

use control::model::group_configs::{
    check_group_config, CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS,
    GROUP_CONFIG_KEYS,
};
use control::service::ControllerRequest;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_changes::{Change, Failure};
use crate::cluster::controller::controller_error;
use crate::config::group_timeouts::Timeouts;
use crate::config::share_settings::ShareSettings;
use crate::server::shard::Shard;

/// Kafka's config source of a group's own value (`GROUP_CONFIG`).
const GROUP_CONFIG: i8 = 8;
/// Of the broker's value (`DEFAULT_CONFIG`).
const DEFAULT_CONFIG: i8 = 5;

/// The group's configs: its own, else the broker's.
pub fn describe(shard: &Shard, resource: &DescribeConfigsResource) -> DescribeConfigsResult {
    let group = resource.resource_name.as_str();
    let own = own_configs(shard, group);
    let defaults = shard.cluster.config.consumer_group_timeouts();
    let effective = Timeouts::of(defaults, Some(&own));
    let share = ShareSettings::of(&shard.cluster.config, Some(&own));
    let wanted = |key: &str| {
        let keys = resource.configuration_keys.as_ref();
        keys.is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == key))
    };
    let configs = GROUP_CONFIG_KEYS
        .iter()
        .filter(|key| wanted(key))
        .map(|key| {
            let value = match *key {
                CONSUMER_SESSION_TIMEOUT_MS => effective.session_ms.to_string(),
                CONSUMER_HEARTBEAT_INTERVAL_MS => effective.heartbeat_interval_ms.to_string(),
                share_key => share.value_of(share_key).unwrap_or_default(),
            };
            let source = match own.contains_key(*key) {
                true => GROUP_CONFIG,
                false => DEFAULT_CONFIG,
            };
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_static_str(key))
                .with_value(Some(StrBytes::from_string(value)))
                .with_config_source(source)
        });
    DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone())
        .with_configs(configs.collect())
}

/// The group's own configs, as the metadata holds them.
fn own_configs(shard: &Shard, group: &str) -> BTreeMap<String, String> {
    let view = shard.cluster.view.borrow();
    let configs = view.metadata.group_configs.get(group);
    configs.cloned().unwrap_or_default()
}

/// Applies `changes` to group `group`'s configs through the controller,
/// once the result is within the broker's bounds (INVALID_CONFIG else).
pub async fn alter(
    shard: &Rc<Shard>,
    group: &str,
    changes: Vec<(String, Change)>,
    validate_only: bool,
) -> Result<(), Failure> {
    let invalid = |why: String| (ResponseError::InvalidConfig.code(), why);
    let mut configs = own_configs(shard, group);
    let mut asked = Vec::new();
    for (key, change) in changes {
        let value = match change {
            Change::Set(value) => Some(value),
            Change::Reset => None,
        };
        check_group_config(group, &key, value.as_deref()).map_err(|e| invalid(e.to_string()))?;
        match &value {
            Some(value) => configs.insert(key.clone(), value.clone()),
            None => configs.remove(&key),
        };
        asked.push((key, value));
    }
    let config = &shard.cluster.config;
    let timeouts = Timeouts::of(config.consumer_group_timeouts(), Some(&configs));
    timeouts
        .check(&config.consumer_group_bounds())
        .map_err(invalid)?;
    ShareSettings::of(config, Some(&configs))
        .check()
        .map_err(invalid)?;
    if validate_only || asked.is_empty() {
        return Ok(());
    }
    let request = ControllerRequest::AlterGroupConfigs {
        group: group.to_string(),
        changes: asked,
    };
    shard
        .cluster
        .call_controller(request)
        .await
        .map_err(|e| controller_error(&e))?;
    let wanted = (!configs.is_empty()).then_some(configs);
    shard
        .cluster
        .catch_up(|m| m.group_configs.get(group) == wanted.as_ref())
        .await;
    Ok(())
}
