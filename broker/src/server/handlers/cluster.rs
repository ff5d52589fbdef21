//! Metadata (with topic auto-creation) and DescribeCluster.

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::access::{Caller, CLUSTER_DENIED};
use super::{HandlerError, Outcome};
use crate::cluster::topics::NewTopic;
use crate::kafka::bounds::check_describe_cluster;
use crate::kafka::decode::checked;
use crate::kafka::metadata::{self, Cluster, MetadataError};
use crate::kafka::request::Request;
use crate::kafka::response::{self, Frame};
use crate::server::shard::Shard;
use control::acls::Operation;

/// DescribeCluster versions served.
pub const DESCRIBE_CLUSTER_VERSIONS: (i16, i16) = (0, 2);

/// "Authorized operations not requested".
const OPERATIONS_UNKNOWN: i32 = i32::MIN;

fn answer_metadata(
    shard: &Shard,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<metadata::Answer, HandlerError> {
    let view = shard.cluster.view.borrow();
    let cluster_id = super::super::cluster_id(&view.metadata);
    let may_describe = |topic: &str| caller.may_topic(Operation::Describe, topic);
    let cluster = Cluster {
        metadata: &view.metadata,
        cluster_id: &cluster_id,
        controller_id: view.controller_id,
        may_describe: &may_describe,
        listener: &caller.listener,
    };
    metadata::answer(request, &cluster).map_err(|e| match e {
        MetadataError::Bounds(b) => HandlerError::Bounds(b),
        MetadataError::Malformed(m) => HandlerError::Malformed(m),
    })
}

/// Answers Metadata, first creating unknown topics the client asked for
/// when both it and the broker allow auto-creation.
pub async fn metadata(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let answer = answer_metadata(shard, request, caller)?;
    if answer.missing_topics.is_empty()
        || !answer.allow_auto_create
        || !shard.cluster.config.auto_create_topics
    {
        return Ok(Outcome::Respond(Frame::of_body(&answer.response)));
    }
    let may_create = |name: &str| {
        caller.may_cluster(Operation::Create) || caller.may_topic(Operation::Create, name)
    };
    for name in answer.missing_topics.into_iter().filter(|n| may_create(n)) {
        let topic = NewTopic {
            name: name.clone(),
            partitions: -1,
            replication_factor: -1,
            configs: vec![],
        };
        if let Err((code, why)) = shard.cluster.create_topic(topic, false).await {
            // Another client may have created it meanwhile; anything else
            // shows in the answer as the topic's error.
            tracing::debug!(topic = %name, code, %why, "auto-creating a topic failed");
        }
    }
    let answer = answer_metadata(shard, request, caller)?;
    Ok(Outcome::Respond(Frame::of_body(&answer.response)))
}

/// Answers DescribeCluster.
pub async fn describe_cluster(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DescribeClusterRequest = checked(request, check_describe_cluster)?;
    if !caller.may_cluster(Operation::Describe) {
        let refused = DescribeClusterResponse::default().with_error_code(CLUSTER_DENIED);
        return super::respond(request, &refused);
    }
    let view = shard.cluster.view.borrow();
    let brokers = view
        .metadata
        .brokers
        .values()
        .filter(|b| !b.fenced || (version >= 2 && decoded.include_fenced_brokers))
        .filter_map(|b| {
            let address = view.metadata.endpoint(b, &caller.listener)?;
            let (host, port) = address.rsplit_once(':')?;
            let mut entry = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.registration.id.0))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port.parse().ok()?)
                .with_rack(b.registration.rack.clone().map(StrBytes::from_string));
            if version >= 2 {
                entry = entry.with_is_fenced(b.fenced);
            }
            Some(entry)
        })
        .collect();
    let mut answer = DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(super::super::cluster_id(
            &view.metadata,
        )))
        .with_controller_id(BrokerId(view.controller_id))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(OPERATIONS_UNKNOWN);
    if version >= 1 {
        answer = answer.with_endpoint_type(1);
    }
    drop(view);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}
