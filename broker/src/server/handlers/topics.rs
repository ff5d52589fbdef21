//! CreateTopics v2-7, DeleteTopics v1-6, CreatePartitions v0-3, and the
//! auto-creation Metadata asks for. The controller (shard 0) decides; the
//! answer is sent once this shard's metadata shows the change, so the
//! client's next request on the connection sees it.

use std::rc::Rc;

use control::service::ControllerRequest;
use control::TopicId;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, TOPIC_DENIED};
use super::{HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::cluster::topics::{Created, NewTopic, Refused};
use crate::kafka::bounds::{check_create_partitions, check_create_topics, check_delete_topics};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// CreateTopics versions served.
pub const CREATE_TOPICS_VERSIONS: (i16, i16) = (2, 7);
/// DeleteTopics versions served.
pub const DELETE_TOPICS_VERSIONS: (i16, i16) = (1, 6);
/// CreatePartitions versions served.
pub const CREATE_PARTITIONS_VERSIONS: (i16, i16) = (0, 3);

/// Answers CreateTopics.
pub async fn create_topics(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: CreateTopicsRequest = checked(request, check_create_topics)?;
    let mut results = Vec::new();
    for topic in &decoded.topics {
        let allowed = caller.may_cluster(Operation::Create)
            || caller.may_topic(Operation::Create, topic.name.as_str());
        let outcome = if !allowed {
            Err((
                TOPIC_DENIED,
                "not authorized to create this topic".to_string(),
            ))
        } else if !topic.assignments.is_empty() {
            Err((
                ResponseError::InvalidReplicaAssignment.code(),
                "manual replica assignment is not supported; the controller places replicas"
                    .to_string(),
            ))
        } else {
            let new = new_topic(topic);
            shard.cluster.create_topic(new, decoded.validate_only).await
        };
        results.push(creatable_result(version, topic.name.clone(), outcome));
    }
    let answer = CreateTopicsResponse::default().with_topics(results);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// The topic a CreateTopics entry asks for.
fn new_topic(topic: &CreatableTopic) -> NewTopic {
    NewTopic {
        name: topic.name.as_str().to_string(),
        partitions: topic.num_partitions,
        replication_factor: topic.replication_factor,
        configs: topic
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.as_str().to_string(),
                    c.value.as_ref().map(|v| v.as_str().to_string()),
                )
            })
            .collect(),
    }
}

/// One topic's CreateTopics answer: from v5 its partitions, replication
/// factor and every config (-1s when refused), from v7 its id.
fn creatable_result(
    version: i16,
    name: TopicName,
    outcome: Result<Created, Refused>,
) -> CreatableTopicResult {
    let entry = CreatableTopicResult::default().with_name(name);
    match outcome {
        Ok(created) => {
            let mut entry = entry;
            if version >= 7 {
                entry = entry.with_topic_id(uuid::Uuid::from_bytes(created.id.0));
            }
            if version >= 5 {
                let configs = control::model::config::TOPIC_CONFIG_KEYS
                    .iter()
                    .map(|key| {
                        CreatableTopicConfigs::default()
                            .with_name(StrBytes::from_static_str(key))
                            .with_value(created.config.get(key).map(StrBytes::from_string))
                            .with_config_source(5)
                    })
                    .collect();
                entry = entry
                    .with_num_partitions(created.partitions as i32)
                    .with_replication_factor(created.replication_factor as i16)
                    .with_configs(Some(configs));
            }
            entry
        }
        Err((code, message)) => {
            let entry = entry
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)));
            if version >= 5 {
                entry.with_num_partitions(-1).with_replication_factor(-1)
            } else {
                entry
            }
        }
    }
}

/// Answers DeleteTopics (by name; v6 also by id).
pub async fn delete_topics(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DeleteTopicsRequest = checked(request, check_delete_topics)?;
    // (name if known, id if given)
    let asked: Vec<(Option<String>, Option<uuid::Uuid>)> = if version >= 6 {
        decoded
            .topics
            .iter()
            .map(|t| {
                let id = (!t.topic_id.is_nil()).then_some(t.topic_id);
                let name = t.name.as_ref().map(|n| n.as_str().to_string()).or_else(|| {
                    id.and_then(|id| {
                        let view = shard.cluster.view.borrow();
                        view.metadata
                            .topic(TopicId(*id.as_bytes()))
                            .ok()
                            .map(|t| t.name.clone())
                    })
                });
                (name, id)
            })
            .collect()
    } else {
        decoded
            .topic_names
            .iter()
            .map(|n| (Some(n.as_str().to_string()), None))
            .collect()
    };
    let mut results = Vec::new();
    for (name, id) in asked {
        let outcome = match &name {
            None => Err((
                ResponseError::UnknownTopicId.code(),
                "unknown topic id".to_string(),
            )),
            Some(name) if !caller.may_topic(Operation::Delete, name) => Err((
                TOPIC_DENIED,
                "not authorized to delete this topic".to_string(),
            )),
            Some(name) => shard.cluster.delete_topic(name).await,
        };
        let mut entry = DeletableTopicResult::default()
            .with_name(name.map(|n| TopicName(StrBytes::from_string(n))));
        if version >= 6 {
            entry = entry.with_topic_id(id.unwrap_or_default());
        }
        if let Err((code, message)) = outcome {
            entry = entry.with_error_code(code);
            if version >= 5 {
                entry = entry.with_error_message(Some(StrBytes::from_string(message)));
            }
        }
        results.push(entry);
    }
    let answer = DeleteTopicsResponse::default().with_responses(results);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}

/// Answers CreatePartitions: grows topics to the counts asked.
pub async fn create_partitions(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: CreatePartitionsRequest = checked(request, check_create_partitions)?;
    let mut results = Vec::new();
    for topic in decoded.topics {
        let name = topic.name.as_str().to_string();
        let current = shard
            .cluster
            .view
            .borrow()
            .metadata
            .topic_by_name(&name)
            .map(|t| t.partitions.len());
        let outcome = match current {
            _ if !caller.may_topic(Operation::Alter, &name) => Err((
                TOPIC_DENIED,
                format!("not authorized to alter topic {name}"),
            )),
            Err(_) => Err((
                ResponseError::UnknownTopicOrPartition.code(),
                format!("no topic {name}"),
            )),
            Ok(_) if topic.assignments.as_ref().is_some_and(|a| !a.is_empty()) => Err((
                ResponseError::InvalidReplicaAssignment.code(),
                "manual replica assignment is not supported".to_string(),
            )),
            Ok(now) if topic.count as i64 <= now as i64 => Err((
                ResponseError::InvalidPartitions.code(),
                format!("topic {name} has {now} partitions; it can only grow"),
            )),
            Ok(_) if decoded.validate_only => Ok(()),
            Ok(_) => {
                let total = topic.count as usize;
                let request = ControllerRequest::CreatePartitions {
                    name: name.clone(),
                    total,
                };
                match shard.cluster.call_controller(request).await {
                    Ok(()) => {
                        let name = name.clone();
                        let grown = move |m: &control::Metadata| {
                            m.topic_by_name(&name)
                                .is_ok_and(|t| t.partitions.len() >= total)
                        };
                        shard.cluster.catch_up_on_every_shard(grown).await;
                        Ok(())
                    }
                    Err(e) => Err(controller_error(&e)),
                }
            }
        };
        let mut entry = CreatePartitionsTopicResult::default().with_name(topic.name);
        if let Err((code, message)) = outcome {
            entry = entry
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)));
        }
        results.push(entry);
    }
    let answer = CreatePartitionsResponse::default().with_results(results);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}
