//! A broker's configs over the Kafka API (resource type BROKER, named by
//! the broker's id). Its settings are static (the config file, the
//! environment, flags) except `cordoned.log.dirs` (KIP-1066): set (to
//! `*` or the broker's log directory) the broker is cordoned, and the
//! controller places no new replica on it; deleted (or set empty) the
//! cordon is lifted. A broker here has one log directory, so any
//! directory named cordons it whole. Kept in the metadata, so a cordon
//! outlives the broker's restarts.

use std::rc::Rc;

use control::service::ControllerRequest;
use control::BrokerId;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_changes::{Change, Failure};
use crate::cluster::controller::controller_error;
use crate::server::shard::Shard;

/// The one broker config that changes while the broker runs.
pub const CORDONED_LOG_DIRS: &str = "cordoned.log.dirs";
/// Kafka's config source of a value set for one broker.
const DYNAMIC_BROKER_CONFIG: i8 = 2;
/// Of a default.
const DEFAULT_CONFIG: i8 = 5;

/// The broker `resource` names, if the metadata knows it.
fn known_broker(shard: &Shard, name: &str) -> Result<BrokerId, Failure> {
    let unknown = || {
        (
            ResponseError::InvalidRequest.code(),
            format!("no broker {name:?} (brokers are named by their id)"),
        )
    };
    let id = BrokerId(name.parse().map_err(|_| unknown())?);
    let view = shard.cluster.view.borrow();
    match view.metadata.brokers.contains_key(&id) {
        true => Ok(id),
        false => Err(unknown()),
    }
}

/// DescribeConfigs of a broker: `cordoned.log.dirs` (`*` when cordoned).
pub fn describe(shard: &Shard, resource: &DescribeConfigsResource) -> DescribeConfigsResult {
    let entry = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    if resource.resource_name.is_empty() {
        // The cluster-wide defaults (`kafka-configs --entity-default`):
        // none are dynamic here.
        return entry.with_configs(vec![]);
    }
    let id = match known_broker(shard, resource.resource_name.as_str()) {
        Ok(id) => id,
        Err((code, why)) => {
            return entry
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(why)))
        }
    };
    let wanted = resource
        .configuration_keys
        .as_ref()
        .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == CORDONED_LOG_DIRS));
    if !wanted {
        return entry.with_configs(vec![]);
    }
    let cordoned = shard
        .cluster
        .view
        .borrow()
        .metadata
        .cordoned_brokers
        .contains(&id);
    let (value, source) = match cordoned {
        true => ("*", DYNAMIC_BROKER_CONFIG),
        false => ("", DEFAULT_CONFIG),
    };
    entry.with_configs(vec![DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_static_str(CORDONED_LOG_DIRS))
        .with_value(Some(StrBytes::from_static_str(value)))
        .with_config_source(source)])
}

/// IncrementalAlterConfigs of broker `name`: `cordoned.log.dirs` only.
pub async fn alter(
    shard: &Rc<Shard>,
    name: &str,
    changes: Vec<(String, Change)>,
    validate_only: bool,
) -> Result<(), Failure> {
    let id = known_broker(shard, name)?;
    let mut cordoned = None;
    for (key, change) in changes {
        if key != CORDONED_LOG_DIRS {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!(
                    "{key}: broker configs are static (the config file, environment or flags); \
                     only {CORDONED_LOG_DIRS} changes while the broker runs"
                ),
            ));
        }
        cordoned = Some(matches!(change, Change::Set(dirs) if !dirs.trim().is_empty()));
    }
    let Some(cordoned) = cordoned.filter(|_| !validate_only) else {
        return Ok(());
    };
    let request = ControllerRequest::SetBrokerCordoned {
        broker: id,
        cordoned,
    };
    shard
        .cluster
        .call_controller(request)
        .await
        .map_err(|e| controller_error(&e))?;
    shard
        .cluster
        .catch_up(|m| m.cordoned_brokers.contains(&id) == cordoned)
        .await;
    Ok(())
}
