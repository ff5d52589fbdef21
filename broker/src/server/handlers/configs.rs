//! DescribeConfigs v1-4, AlterConfigs v0-2 and IncrementalAlterConfigs
//! v0-1 for topics (resource type 2), and for consumer groups (32,
//! DescribeConfigs and IncrementalAlterConfigs: [`super::group_configs`]).
//! Broker configs are static (set at start, docs/configuration.md):
//! described as an empty list, never altered.

use std::rc::Rc;

use control::model::config::TOPIC_CONFIG_KEYS;
use control::service::ControllerRequest;
use control::TopicConfig;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response as incremental;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED};
use super::config_changes::{Change, Failure};
use super::{broker_configs, group_configs};
use super::{HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::{
    check_alter_configs, check_describe_configs, check_incremental_alter_configs,
};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// DescribeConfigs versions served.
pub const DESCRIBE_VERSIONS: (i16, i16) = (1, 4);
/// AlterConfigs versions served.
pub const ALTER_VERSIONS: (i16, i16) = (0, 2);
/// IncrementalAlterConfigs versions served.
pub const INCREMENTAL_VERSIONS: (i16, i16) = (0, 1);

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;
/// config_source values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

/// Answers DescribeConfigs.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DescribeConfigsRequest = checked(request, check_describe_configs)?;
    let defaults = TopicConfig::default();
    let view = shard.cluster.view.borrow();
    let results = decoded
        .resources
        .iter()
        .map(|resource| {
            let entry = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let name = resource.resource_name.as_str();
            if let Some((code, why)) = denied(
                caller,
                Operation::DescribeConfigs,
                resource.resource_type,
                name,
            ) {
                return entry
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(why)));
            }
            match resource.resource_type {
                BROKER => broker_configs::describe(shard, resource),
                GROUP => group_configs::describe(shard, resource),
                TOPIC => match view.metadata.topic_by_name(resource.resource_name.as_str()) {
                    Ok(topic) => {
                        // No keys, or none named: every one (as Kafka's).
                        let wanted = |key: &str| {
                            resource.configuration_keys.as_ref().is_none_or(|keys| {
                                keys.is_empty() || keys.iter().any(|k| k.as_str() == key)
                            })
                        };
                        let configs = TOPIC_CONFIG_KEYS
                            .iter()
                            .filter(|key| wanted(key))
                            .map(|key| {
                                let value = topic.config.get(key);
                                let source = if value == defaults.get(key) {
                                    DEFAULT_CONFIG
                                } else {
                                    DYNAMIC_TOPIC_CONFIG
                                };
                                DescribeConfigsResourceResult::default()
                                    .with_name(StrBytes::from_static_str(key))
                                    .with_value(value.map(StrBytes::from_string))
                                    .with_config_source(source)
                            })
                            .collect();
                        entry.with_configs(configs)
                    }
                    Err(_) => entry
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "no topic {}",
                            resource.resource_name.as_str()
                        )))),
                },
                other => entry
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "resource type {other} is not served"
                    )))),
            }
        })
        .collect();
    drop(view);
    let answer = DescribeConfigsResponse::default().with_results(results);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// Applies key changes to a topic's configuration through the controller.
/// `replace`: unlisted keys go back to their defaults (AlterConfigs).
async fn alter_topic(
    shard: &Rc<Shard>,
    name: &str,
    changes: Vec<(String, Change)>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Failure> {
    let current = shard
        .cluster
        .view
        .borrow()
        .metadata
        .topic_by_name(name)
        .map(|t| t.config.clone())
        .map_err(|_| {
            (
                ResponseError::UnknownTopicOrPartition.code(),
                format!("no topic {name}"),
            )
        })?;
    let defaults = TopicConfig::default();
    let old = current.clone();
    let mut config = if replace { defaults.clone() } else { current };
    for (key, change) in changes {
        let value = match change {
            Change::Set(value) => value,
            Change::Reset => defaults.get(&key).ok_or_else(|| {
                (
                    ResponseError::InvalidConfig.code(),
                    format!("unknown config {key}"),
                )
            })?,
        };
        config
            .set(&key, &value)
            .map_err(|e| (ResponseError::InvalidConfig.code(), e.to_string()))?;
    }
    crate::cluster::topics::check_tiering(&shard.cluster.config, &config, Some(&old))?;
    if validate_only {
        return Ok(());
    }
    let request = ControllerRequest::AlterConfig {
        name: name.to_string(),
        config: config.clone(),
    };
    shard
        .cluster
        .call_controller(request)
        .await
        .map_err(|e| controller_error(&e))?;
    shard
        .cluster
        .catch_up(|m| m.topic_by_name(name).is_ok_and(|t| t.config == config))
        .await;
    Ok(())
}

/// The refusal of `operation` on a topic or the cluster (a broker's
/// configs), if the ACLs refuse it.
fn denied(
    caller: &Caller<'_>,
    operation: Operation,
    resource_type: i8,
    name: &str,
) -> Option<Failure> {
    match resource_type {
        TOPIC if !caller.may_topic(operation, name) => Some((
            TOPIC_DENIED,
            format!("not authorized: {operation:?} on topic {name}"),
        )),
        BROKER if !caller.may_cluster(operation) => Some((
            CLUSTER_DENIED,
            format!("not authorized: {operation:?} on the cluster"),
        )),
        GROUP if !caller.may_group(operation, name) => Some((
            GROUP_DENIED,
            format!("not authorized: {operation:?} on group {name}"),
        )),
        _ => None,
    }
}

/// Why a change of `resource_type`'s configs is refused, if it is: the
/// ACLs (ALTER_CONFIGS), or a resource whose configs do not change.
fn refuse_non_topic(caller: &Caller<'_>, resource_type: i8, name: &str) -> Option<Failure> {
    if let Some(failure) = denied(caller, Operation::AlterConfigs, resource_type, name) {
        return Some(failure);
    }
    match resource_type {
        TOPIC => None,
        BROKER => Some((
            ResponseError::InvalidRequest.code(),
            "broker configs are static: set them in the config file, environment or flags".into(),
        )),
        other => Some((
            ResponseError::InvalidRequest.code(),
            format!("resource type {other} is not served"),
        )),
    }
}

/// Answers AlterConfigs (the whole set of a topic's overrides is replaced).
pub async fn alter(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: AlterConfigsRequest = checked(request, check_alter_configs)?;
    let mut responses = Vec::new();
    for resource in &decoded.resources {
        let name = resource.resource_name.as_str();
        let outcome = match refuse_non_topic(caller, resource.resource_type, name) {
            Some(failure) => Err(failure),
            None => {
                let changes = resource
                    .configs
                    .iter()
                    .map(|c| {
                        let key = c.name.as_str().to_string();
                        match &c.value {
                            Some(v) => (key, Change::Set(v.as_str().to_string())),
                            None => (key, Change::Reset),
                        }
                    })
                    .collect();
                alter_topic(
                    shard,
                    resource.resource_name.as_str(),
                    changes,
                    true,
                    decoded.validate_only,
                )
                .await
            }
        };
        let (code, message) = outcome
            .err()
            .map_or((0, None), |(c, m)| (c, Some(StrBytes::from_string(m))));
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone()),
        );
    }
    let answer = AlterConfigsResponse::default().with_responses(responses);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// Answers IncrementalAlterConfigs: SET (0) and DELETE (1, back to the
/// default); APPEND and SUBTRACT apply to list configs, which topics here
/// do not have, and are refused.
pub async fn incremental_alter(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: IncrementalAlterConfigsRequest =
        checked(request, check_incremental_alter_configs)?;
    let mut responses = Vec::new();
    for resource in &decoded.resources {
        let changes: Result<Vec<(String, Change)>, Failure> = resource
            .configs
            .iter()
            .map(|c| {
                let key = c.name.as_str().to_string();
                match (c.config_operation, &c.value) {
                    (0, Some(v)) => Ok((key, Change::Set(v.as_str().to_string()))),
                    (0, None) | (1, _) => Ok((key, Change::Reset)),
                    (op, _) => Err((
                        ResponseError::InvalidConfig.code(),
                        format!(
                            "operation {op} on {key}: only SET and DELETE apply to topic configs"
                        ),
                    )),
                }
            })
            .collect();
        let name = resource.resource_name.as_str();
        let refused = match resource.resource_type {
            GROUP | BROKER => denied(
                caller,
                Operation::AlterConfigs,
                resource.resource_type,
                name,
            ),
            other => refuse_non_topic(caller, other, name),
        };
        let outcome = match (refused, changes) {
            (Some(failure), _) | (None, Err(failure)) => Err(failure),
            (None, Ok(changes)) if resource.resource_type == GROUP => {
                group_configs::alter(shard, name, changes, decoded.validate_only).await
            }
            (None, Ok(changes)) if resource.resource_type == BROKER => {
                broker_configs::alter(shard, name, changes, decoded.validate_only).await
            }
            (None, Ok(changes)) => {
                alter_topic(
                    shard,
                    resource.resource_name.as_str(),
                    changes,
                    false,
                    decoded.validate_only,
                )
                .await
            }
        };
        let (code, message) = outcome
            .err()
            .map_or((0, None), |(c, m)| (c, Some(StrBytes::from_string(m))));
        responses.push(
            incremental::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone()),
        );
    }
    let answer = IncrementalAlterConfigsResponse::default().with_responses(responses);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}
